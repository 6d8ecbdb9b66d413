#include "control/events/event_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace dpu::ctl {
namespace {
constexpr size_t kFlushAt = 256 * 1024;  // buffered bytes that trigger a write
}

absl::StatusOr<std::unique_ptr<EventLog>> EventLog::open(EventLogOptions opts) {
  if (opts.path.empty()) return absl::InvalidArgumentError("events file: empty path");
  std::unique_ptr<EventLog> log(new EventLog(std::move(opts)));
  if (absl::Status st = log->openFile(); !st.ok()) return st;
  return log;
}

EventLog::~EventLog() {
  flush();
  if (fd_ >= 0) ::close(fd_);
}

absl::Status EventLog::openFile() {
  fd_ = ::open(opts_.path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd_ < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        opts_.path, ": cannot open the events file for writing: ", std::strerror(errno)));
  }
  struct stat st {};
  size_ = ::fstat(fd_, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  return absl::OkStatus();
}

void EventLog::noteError(const std::string& what) {
  errors_.fetch_add(1, std::memory_order_relaxed);
  if (!told_error_) {
    std::fprintf(stderr, "dpu-appliance: events file %s: %s (further errors only counted)\n",
                 opts_.path.c_str(), what.c_str());
    told_error_ = true;
  }
}

void EventLog::append(const std::string& line) {
  const uint64_t n = line.size() + 1;
  if (opts_.max_bytes && size_ > 0 && size_ + n > opts_.max_bytes) rotate();
  buf_.append(line);
  buf_.push_back('\n');
  size_ += n;
  lines_.fetch_add(1, std::memory_order_relaxed);
  if (buf_.size() >= kFlushAt) flush();
}

void EventLog::flush() {
  if (buf_.empty()) return;
  if (fd_ < 0) {
    noteError("not open");
    size_ -= std::min<uint64_t>(size_, buf_.size());
    buf_.clear();
    return;
  }
  const char* p = buf_.data();
  size_t left = buf_.size();
  while (left > 0) {
    ssize_t w = ::write(fd_, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      noteError(absl::StrCat("write failed: ", std::strerror(errno)));
      size_ -= std::min<uint64_t>(size_, left);
      break;
    }
    bytes_.fetch_add(static_cast<uint64_t>(w), std::memory_order_relaxed);
    p += w;
    left -= static_cast<size_t>(w);
  }
  buf_.clear();
}

void EventLog::rotate() {
  flush();
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (opts_.keep == 0) {
    if (::unlink(opts_.path.c_str()) != 0 && errno != ENOENT) {
      noteError(absl::StrCat("cannot remove for rotation: ", std::strerror(errno)));
    }
  } else {
    // FILE.<keep-1> -> FILE.<keep> ... FILE -> FILE.1 (rename replaces the oldest).
    for (uint32_t k = opts_.keep; k >= 1; --k) {
      std::string from = k == 1 ? opts_.path : absl::StrCat(opts_.path, ".", k - 1);
      std::string to = absl::StrCat(opts_.path, ".", k);
      if (::rename(from.c_str(), to.c_str()) != 0 && errno != ENOENT) {
        noteError(absl::StrCat("cannot rename ", from, " to ", to, ": ", std::strerror(errno)));
      }
    }
  }
  rotations_.fetch_add(1, std::memory_order_relaxed);
  if (absl::Status st = openFile(); !st.ok()) {
    noteError(std::string(st.message()));
    size_ = 0;
  }
}

void EventLog::reopen() {
  flush();
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (absl::Status st = openFile(); !st.ok()) {
    noteError(std::string(st.message()));
    size_ = 0;
  }
}

EventLogStats EventLog::stats() const {
  EventLogStats s;
  s.lines = lines_.load(std::memory_order_relaxed);
  s.bytes = bytes_.load(std::memory_order_relaxed);
  s.rotations = rotations_.load(std::memory_order_relaxed);
  s.errors = errors_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace dpu::ctl
