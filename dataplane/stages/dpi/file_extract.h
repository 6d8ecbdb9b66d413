// Opt-in extraction of the decoded HTTP files (docs/http.md, "Extracting the
// files"): `dpu-appliance replay --extract-files DIR` writes every file the DPI scanned (a
// request or response body after de-chunking and decompression, a multipart part) to
// DIR/<sha256>, the bytes exactly as the YARA rules saw them; the name is the sha256 of the
// fileinfo event, so events, alerts and files can be joined (tests/http/
// http_file_differential.py compares the appliance's matches with libyara's on them).
//
// A forensic / test facility, not a packet-path feature: the worker writes with stdio (one
// FILE per open file, created when the file's first bytes arrive), so it is only wired into
// replay. Bounded: at most `max_bytes` kept in all; a file that would pass the bound is not
// written at all (never a partial file; its bytes go back to the budget), counted `skipped`. Per worker state (the worker
// that owns the flow), no locks; the byte budget is one atomic shared by the workers.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <vector>

#include "dataplane/api/http_event.h"

namespace dpu::dp {

class FileExtractor {
 public:
  struct Stats {
    uint64_t files = 0;     // files written (or already there: same sha256)
    uint64_t bytes = 0;     // their bytes
    uint64_t skipped = 0;   // files not written: the byte bound was reached
    uint64_t errors = 0;    // files not written: the file system refused (message on stderr)
  };

  // `dir` must exist. `workers`: the dataplane's worker count.
  FileExtractor(std::string dir, uint64_t max_bytes, uint32_t workers);
  // Files never closed (none after a replay ended its flows) are removed, counted skipped.
  ~FileExtractor();
  FileExtractor(const FileExtractor&) = delete;
  FileExtractor& operator=(const FileExtractor&) = delete;

  // Worker `w`: decoded bytes of the file open in direction `dir` (0 request, 1 response) of
  // the flow at position `pos`.
  void data(uint32_t w, int32_t pos, uint8_t dir, const uint8_t* p, size_t n);
  // Worker `w`: that file ended (its fileinfo): renamed to DIR/<sha256>.
  void close(uint32_t w, int32_t pos, const HttpEventInfo& f);
  Stats stats() const;  // after the workers stopped
  const std::string& dir() const { return dir_; }

 private:
  struct Open {
    FILE* f = nullptr;
    std::string tmp;
    uint64_t bytes = 0;  // taken from the budget (given back when the file is not kept)
    bool skip = false;  // over the bound or a write error: not kept
  };
  struct PerWorker {
    std::unordered_map<uint64_t, Open> open;  // key: pos * 2 + dir
    Stats st;
  };
  void discard(PerWorker& pw, Open& o, bool error);

  std::string dir_;
  uint64_t max_bytes_;
  std::atomic<uint64_t> used_{0};
  std::vector<PerWorker> workers_;
};

}  // namespace dpu::dp
