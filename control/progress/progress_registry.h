// Long control-side work in progress (applies that compile large rule sets, list loads):
// what each task is doing, how far it is, and a progress line in the log.
//
// A task is begun by the code that owns the work (ConfigManager for every apply) and is a
// rules::ProgressSink: install it with rules::ProgressScope and everything below reports
// into it (rules/compile/progress.h). tasks() is what GetStatus / GetStats show (dpuctl
// prints it as a progress line while it waits for an apply; the metrics export it as
// dpu_task_*). The log gets a line when a step of a task that has run for more than
// `log_after` begins, every `log_every` while it reports progress, and when such a task
// ends; with startTicker() also every `log_every` during a long step that reports nothing
// (building ACL tables).
//
// Threads: a task is updated by the thread doing the work; tasks() from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rules/compile/progress.h"

namespace dpu::ctl {

using TaskInfo = rules::ProgressInfo;
using rules::formatProgress;

class ProgressRegistry {
 public:
  struct Options {
    std::chrono::milliseconds log_after{1000};
    std::chrono::milliseconds log_every{2000};
    // Where log lines go (default: stderr with a "dpu-appliance: " prefix); null = nowhere.
    std::function<void(const std::string&)> log;
    std::function<std::chrono::steady_clock::time_point()> now;  // tests
  };
  ProgressRegistry();
  explicit ProgressRegistry(Options opts);

  class Task final : public rules::ProgressSink {
   public:
    ~Task() override;  // the task ends (logged when it was long)
    void step(const std::string& what, uint64_t total, const std::string& unit) override;
    void done(uint64_t n) override;

   private:
    friend class ProgressRegistry;
    Task(ProgressRegistry* reg, std::string name);
    void maybeLog(bool step_began);
    ProgressRegistry* reg_;
    const std::chrono::steady_clock::time_point start_;
    // Under reg_->mu_:
    std::chrono::steady_clock::time_point last_log_;
    bool logged_ = false;
    TaskInfo info_;
  };

  ~ProgressRegistry();
  std::unique_ptr<Task> begin(const std::string& name);
  std::vector<TaskInfo> tasks() const;
  // A thread that logs long tasks every log_every even when they report nothing.
  void startTicker();

 private:
  void tick();
  std::chrono::steady_clock::time_point now() const;
  void log(const std::string& line) const;
  Options opts_;
  mutable std::mutex mu_;
  std::vector<Task*> tasks_;
  std::thread ticker_;
  std::condition_variable cv_;
  bool stop_ = false;  // under mu_
};

}  // namespace dpu::ctl
