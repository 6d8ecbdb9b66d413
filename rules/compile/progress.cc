#include "rules/compile/progress.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dpu::rules {
namespace {

class NullSink final : public ProgressSink {
 public:
  void step(const std::string&, uint64_t, const std::string&) override {}
  void done(uint64_t) override {}
};

NullSink g_null;
thread_local ProgressSink* t_sink = nullptr;

}  // namespace

std::string formatProgress(const ProgressInfo& t) {
  std::string s = t.task;
  if (!t.step.empty()) absl::StrAppend(&s, ": ", t.step);
  if (t.total) {
    absl::StrAppend(&s, " ", t.done, "/", t.total);
    if (!t.unit.empty()) absl::StrAppend(&s, " ", t.unit);
    double pct = 100.0 * static_cast<double>(t.done) / static_cast<double>(t.total);
    absl::StrAppend(&s, absl::StrFormat(" (%d%%)", static_cast<int>(pct)));
  } else if (t.done) {
    absl::StrAppend(&s, " ", t.done);
    if (!t.unit.empty()) absl::StrAppend(&s, " ", t.unit);
  }
  absl::StrAppend(&s, absl::StrFormat(", %.1f s", t.elapsed_s));
  return s;
}

ProgressSink* currentProgress() { return t_sink ? t_sink : &g_null; }

ProgressScope::ProgressScope(ProgressSink* sink) : previous_(t_sink) { t_sink = sink; }
ProgressScope::~ProgressScope() { t_sink = previous_; }

ProgressStep::ProgressStep(const std::string& what, uint64_t total, const std::string& unit,
                           uint64_t every)
    : sink_(currentProgress()), every_(every ? every : 1) {
  sink_->step(what, total, unit);
}

ProgressStep::~ProgressStep() { report(); }

void ProgressStep::report() {
  reported_ = done_;
  sink_->done(done_);
}

}  // namespace dpu::rules
