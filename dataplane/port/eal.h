// EAL start-up helpers.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace dpu::dp {

// Initializes EAL with `args` (argv[0] included). Once per process.
absl::Status initEal(const std::vector<std::string>& args);

// EAL arguments for an offline run: no hugepages, no PCI, a process-unique file prefix,
// `mem_mb` of memory, only the main lcore, quiet logs, plus the given --vdev specs.
std::vector<std::string> offlineEalArgs(const std::vector<std::string>& vdevs, int mem_mb);

}  // namespace dpu::dp
