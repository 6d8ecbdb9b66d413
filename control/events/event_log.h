// The events file (`run --events FILE`): eve.json-style JSON lines, appended, rotated by
// size. When the next line would take the file past max_bytes, FILE is renamed FILE.1
// (FILE.1 -> FILE.2 ... up to FILE.<keep>, the oldest is removed) and a new FILE is started,
// so a line is never split across files and at most (keep + 1) * max_bytes are on disk.
// reopen() closes and reopens FILE (after an external logrotate moved it).
//
// Threads: one writer (the event pump); stats() may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace dpu::ctl {

struct EventLogOptions {
  std::string path;
  uint64_t max_bytes = 64ull << 20;  // 0 = never rotate
  uint32_t keep = 4;                 // rotated files kept (FILE.1 .. FILE.<keep>)
};

struct EventLogStats {
  uint64_t lines = 0, bytes = 0, rotations = 0, errors = 0;
};

class EventLog {
 public:
  // Opens (creates, mode 0640) FILE for appending; fails with the path and errno text.
  static absl::StatusOr<std::unique_ptr<EventLog>> open(EventLogOptions opts);
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // Queues one line (no newline); written by flush() or when the buffer is large. Rotates
  // first when the line would take the file past max_bytes.
  void append(const std::string& line);
  // Writes what is queued. A failed write is counted in errors (and told once on stderr);
  // those lines are lost, the next flush tries again.
  void flush();
  // Flushes, closes and opens FILE again (a new file if it was moved away).
  void reopen();
  EventLogStats stats() const;
  const EventLogOptions& options() const { return opts_; }

 private:
  explicit EventLog(EventLogOptions opts) : opts_(std::move(opts)) {}
  absl::Status openFile();
  void rotate();
  void noteError(const std::string& what);

  EventLogOptions opts_;
  int fd_ = -1;
  uint64_t size_ = 0;        // bytes in the current file (written + queued)
  std::string buf_;
  bool told_error_ = false;
  std::atomic<uint64_t> lines_{0}, bytes_{0}, rotations_{0}, errors_{0};
};

}  // namespace dpu::ctl
