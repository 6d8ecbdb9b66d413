#include "dataplane/stages/dpi/file_extract.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace dpu::dp {

FileExtractor::FileExtractor(std::string dir, uint64_t max_bytes, uint32_t workers)
    : dir_(std::move(dir)), max_bytes_(max_bytes), workers_(workers) {}

FileExtractor::~FileExtractor() {
  for (PerWorker& pw : workers_) {
    for (auto& [key, o] : pw.open) {
      (void)key;
      if (o.f != nullptr) discard(pw, o, false);
    }
  }
}

void FileExtractor::discard(PerWorker& pw, Open& o, bool error) {
  used_.fetch_sub(o.bytes, std::memory_order_relaxed);
  o.bytes = 0;
  if (o.f != nullptr) {
    std::fclose(o.f);
    o.f = nullptr;
    ::unlink(o.tmp.c_str());
  }
  if (!o.skip) {
    if (error) pw.st.errors++;
    else pw.st.skipped++;
  }
  o.skip = true;
}

void FileExtractor::data(uint32_t w, int32_t pos, uint8_t dir, const uint8_t* p, size_t n) {
  PerWorker& pw = workers_[w];
  Open& o = pw.open[uint64_t(uint32_t(pos)) * 2 + (dir & 1)];
  if (o.skip) return;
  o.bytes += n;
  if (used_.fetch_add(n, std::memory_order_relaxed) + n > max_bytes_) {
    discard(pw, o, false);
    return;
  }
  if (o.f == nullptr) {
    o.tmp = absl::StrCat(dir_, "/.part-", w, "-", pos, "-", int(dir & 1));
    o.f = std::fopen(o.tmp.c_str(), "wb");
    if (o.f == nullptr) {
      std::fprintf(stderr, "dpu-appliance: extract-files: %s: %s\n", o.tmp.c_str(), std::strerror(errno));
      discard(pw, o, true);
      return;
    }
  }
  if (std::fwrite(p, 1, n, o.f) != n) {
    std::fprintf(stderr, "dpu-appliance: extract-files: %s: %s\n", o.tmp.c_str(), std::strerror(errno));
    discard(pw, o, true);
  }
}

void FileExtractor::close(uint32_t w, int32_t pos, const HttpEventInfo& f) {
  PerWorker& pw = workers_[w];
  auto it = pw.open.find(uint64_t(uint32_t(pos)) * 2 + (f.file_dir & 1));
  if (it == pw.open.end()) {
    // An empty file (no bytes): nothing was opened; it is written as such.
    if (f.size != 0 || !f.sha256_valid) return;
    it = pw.open.emplace(uint64_t(uint32_t(pos)) * 2 + (f.file_dir & 1), Open{}).first;
    it->second.tmp = absl::StrCat(dir_, "/.part-", w, "-", pos, "-", int(f.file_dir & 1));
    it->second.f = std::fopen(it->second.tmp.c_str(), "wb");
    if (it->second.f == nullptr) {
      std::fprintf(stderr, "dpu-appliance: extract-files: %s: %s\n", it->second.tmp.c_str(), std::strerror(errno));
      discard(pw, it->second, true);
      pw.open.erase(it);
      return;
    }
  }
  Open& o = it->second;
  if (!o.skip) {
    const bool ok = std::fclose(o.f) == 0 && f.sha256_valid;
    o.f = nullptr;
    std::string name = absl::StrCat(dir_, "/");
    for (uint8_t b : f.sha256) absl::StrAppend(&name, absl::Hex(b, absl::kZeroPad2));
    if (!ok || std::rename(o.tmp.c_str(), name.c_str()) != 0) {
      std::fprintf(stderr, "dpu-appliance: extract-files: %s: %s\n", name.c_str(), std::strerror(errno));
      ::unlink(o.tmp.c_str());
      used_.fetch_sub(o.bytes, std::memory_order_relaxed);
      pw.st.errors++;
    } else {
      pw.st.files++;
      pw.st.bytes += f.size;
    }
  }
  pw.open.erase(it);
}

FileExtractor::Stats FileExtractor::stats() const {
  Stats s;
  for (const PerWorker& pw : workers_) {
    s.files += pw.st.files;
    s.bytes += pw.st.bytes;
    s.skipped += pw.st.skipped;
    s.errors += pw.st.errors;
  }
  return s;
}

}  // namespace dpu::dp
