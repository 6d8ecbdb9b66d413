#include "rules/compile/file_read.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace dpu::rules {

absl::StatusOr<std::string> readRegularFile(const std::string& path, size_t limit) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    int e = errno;
    std::string why = std::strerror(e);
    if (e == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", why));
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot open: ", why));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  auto too_large = [&] {
    return absl::InvalidArgumentError(absl::StrCat(path, ": larger than ", limit >> 20, " MiB"));
  };
  if (static_cast<uint64_t>(st.st_size) > limit) return too_large();
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  // One byte more than the size seen: a file that grew meanwhile is noticed.
  std::string data;
  data.resize(static_cast<size_t>(st.st_size) + 1);
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  data.resize(static_cast<size_t>(in.gcount()));
  if (in.bad()) return absl::InvalidArgumentError(absl::StrCat(path, ": read error"));
  if (data.size() > static_cast<size_t>(st.st_size)) {
    // Grew while being read: read the rest, within the limit.
    std::string rest((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    data += rest;
    if (data.size() > limit) return too_large();
  }
  return data;
}

}  // namespace dpu::rules
