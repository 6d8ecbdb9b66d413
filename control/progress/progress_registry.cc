#include "control/progress/progress_registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dpu::ctl {

ProgressRegistry::ProgressRegistry() : ProgressRegistry(Options{}) {}

ProgressRegistry::ProgressRegistry(Options opts) : opts_(std::move(opts)) {
  if (!opts_.log) {
    opts_.log = [](const std::string& line) {
      std::fprintf(stderr, "dpu-appliance: %s\n", line.c_str());
    };
  }
}

ProgressRegistry::~ProgressRegistry() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
}

void ProgressRegistry::startTicker() {
  if (ticker_.joinable()) return;
  ticker_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, opts_.log_every / 4, [&] { return stop_; })) {
      lock.unlock();
      tick();
      lock.lock();
    }
  });
}

void ProgressRegistry::tick() {
  auto t = now();
  std::vector<std::string> lines;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Task* task : tasks_) {
      if (t - task->start_ < opts_.log_after || t - task->last_log_ < opts_.log_every) continue;
      TaskInfo i = task->info_;
      i.elapsed_s = std::chrono::duration<double>(t - task->start_).count();
      task->last_log_ = t;
      task->logged_ = true;
      lines.push_back(formatProgress(i));
    }
  }
  for (const auto& l : lines) log(l);
}

std::chrono::steady_clock::time_point ProgressRegistry::now() const {
  return opts_.now ? opts_.now() : std::chrono::steady_clock::now();
}

void ProgressRegistry::log(const std::string& line) const {
  if (opts_.log) opts_.log(line);
}

std::unique_ptr<ProgressRegistry::Task> ProgressRegistry::begin(const std::string& name) {
  std::unique_ptr<Task> t(new Task(this, name));
  std::lock_guard<std::mutex> lock(mu_);
  tasks_.push_back(t.get());
  return t;
}

std::vector<TaskInfo> ProgressRegistry::tasks() const {
  auto t = now();
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TaskInfo> out;
  for (const Task* task : tasks_) {
    TaskInfo i = task->info_;
    i.elapsed_s = std::chrono::duration<double>(t - task->start_).count();
    out.push_back(std::move(i));
  }
  return out;
}

ProgressRegistry::Task::Task(ProgressRegistry* reg, std::string name)
    : reg_(reg), start_(reg->now()), last_log_(start_) {
  info_.task = std::move(name);
}

ProgressRegistry::Task::~Task() {
  TaskInfo final_info;
  bool logged;
  {
    std::lock_guard<std::mutex> lock(reg_->mu_);
    auto& v = reg_->tasks_;
    v.erase(std::remove(v.begin(), v.end(), this), v.end());
    final_info = info_;
    logged = logged_;
  }
  double s = std::chrono::duration<double>(reg_->now() - start_).count();
  if (logged || s * 1000 >= static_cast<double>(reg_->opts_.log_after.count())) {
    reg_->log(absl::StrFormat("%s: done in %.1f s", final_info.task, s));
  }
}

void ProgressRegistry::Task::step(const std::string& what, uint64_t total,
                                  const std::string& unit) {
  {
    std::lock_guard<std::mutex> lock(reg_->mu_);
    info_.step = what;
    info_.total = total;
    info_.unit = unit;
    info_.done = 0;
  }
  maybeLog(true);
}

void ProgressRegistry::Task::done(uint64_t n) {
  {
    std::lock_guard<std::mutex> lock(reg_->mu_);
    info_.done = n;
  }
  maybeLog(false);
}

void ProgressRegistry::Task::maybeLog(bool step_began) {
  auto t = reg_->now();
  if (t - start_ < reg_->opts_.log_after) return;
  TaskInfo i;
  {
    std::lock_guard<std::mutex> lock(reg_->mu_);
    if (!step_began && logged_ && t - last_log_ < reg_->opts_.log_every) return;
    i = info_;
    last_log_ = t;
    logged_ = true;
  }
  i.elapsed_s = std::chrono::duration<double>(t - start_).count();
  reg_->log(formatProgress(i));
}

}  // namespace dpu::ctl
