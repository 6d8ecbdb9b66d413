// Reading whole input files (rule files, IP set files, DNS lists) with clear errors.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace dpu::rules {

// Reads a whole regular file of at most `limit` bytes. NotFound when it does not exist,
// InvalidArgument naming the path otherwise (not a regular file, larger than the limit, read
// error). The buffer is sized from the file's size, not from the limit.
absl::StatusOr<std::string> readRegularFile(const std::string& path, size_t limit);

}  // namespace dpu::rules
