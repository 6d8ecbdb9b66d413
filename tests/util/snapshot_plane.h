// A fake dataplane for control-side tests: prepare() wraps the snapshot, publish() keeps it
// and numbers it (generation + 1 per publish); everything else reports nothing. Tests derive
// from it to report the counters they need, reading the published snapshot with withCurrent.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "dataplane/api/control.h"
#include "rules/compiled/snapshot.h"

namespace dpu::test {

class SnapshotPlane : public dp::DataplaneControl {
 public:
  explicit SnapshotPlane(uint32_t first_generation = 0) : generation_(first_generation) {}

  absl::StatusOr<std::unique_ptr<dp::PreparedSnapshot>> prepare(
      std::unique_ptr<rules::Snapshot> next) override {
    auto p = std::make_unique<dp::PreparedSnapshot>();
    p->snap = std::move(next);
    return p;
  }
  uint32_t publish(std::unique_ptr<dp::PreparedSnapshot> p) override {
    std::lock_guard<std::mutex> lock(mu_);
    current_ = std::move(p->snap);
    current_->generation = ++generation_;
    return generation_;
  }
  std::vector<dp::RuleCounters> ruleCounters() const override { return {}; }
  uint32_t currentGeneration() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return generation_;
  }
  dp::CountersSnapshot counters() const override { return {}; }
  std::vector<dp::WorkerInfo> workers() const override { return {}; }
  std::vector<dp::PortInfo> ports() const override { return {}; }
  uint32_t drainEvents(const std::function<void(const dp::Event&)>&, uint32_t) override {
    return 0;
  }
  dp::ExplainResult explain(const uint8_t*, uint32_t, uint8_t) const override { return {}; }

 protected:
  // fn(the published snapshot, or nullptr before the first publish), under the lock.
  template <class F>
  auto withCurrent(F fn) const {
    std::lock_guard<std::mutex> lock(mu_);
    return fn(current_.get());
  }

 private:
  mutable std::mutex mu_;
  std::unique_ptr<rules::Snapshot> current_;
  uint32_t generation_;
};

}  // namespace dpu::test
