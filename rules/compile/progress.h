// Progress of long compile/load work (loading a million domains, compiling thousands of
// YARA rules, building large ACLs), reported from rules/ code without knowing who shows it.
//
// The control side installs a sink for the current thread (ProgressScope, e.g. around one
// configuration apply); code anywhere below reports through currentProgress(), which is a
// no-op sink when none is installed (replay, validate, tests). A sink shows it where the
// operator looks: a progress line in the log, GetStatus/GetStats `tasks` (and so dpuctl's
// progress line and the dpu_task_* metrics).
//
// Usage in a compiler:
//   rules::ProgressStep step("compiling YARA rules", sources.size(), "rules");
//   for (...) { ...; step.advance(); }
// Each call costs a counter increment; the sink is told every `every` units and at the end.
#pragma once

#include <cstdint>
#include <string>

namespace dpu::rules {

// Where a piece of long work is (what GetStatus shows as a TaskProgress).
struct ProgressInfo {
  std::string task, step, unit;
  uint64_t done = 0, total = 0;  // total 0 = unknown
  double elapsed_s = 0;
};
// "config apply: expanding firewall rules to ACL entries 1200/5000 rules (24%), 3.1 s"
std::string formatProgress(const ProgressInfo& p);

class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  // A new step: what is being done, units expected (0 = unknown) and their name.
  virtual void step(const std::string& what, uint64_t total, const std::string& unit) = 0;
  // Units of the current step done so far.
  virtual void done(uint64_t n) = 0;
};

// The sink of this thread; never null (a sink that ignores everything when none is set).
ProgressSink* currentProgress();

// Installs `sink` for this thread until the scope ends (then the previous one is back).
class ProgressScope {
 public:
  explicit ProgressScope(ProgressSink* sink);
  ~ProgressScope();
  ProgressScope(const ProgressScope&) = delete;
  ProgressScope& operator=(const ProgressScope&) = delete;

 private:
  ProgressSink* previous_;
};

// One step of work reported to the current sink.
class ProgressStep {
 public:
  ProgressStep(const std::string& what, uint64_t total, const std::string& unit,
               uint64_t every = 1024);
  ~ProgressStep();  // reports the final count
  void advance(uint64_t n = 1) {
    done_ += n;
    if (done_ - reported_ >= every_) report();
  }
  uint64_t done() const { return done_; }

 private:
  void report();
  ProgressSink* sink_;
  uint64_t done_ = 0, reported_ = 0, every_;
};

}  // namespace dpu::rules
