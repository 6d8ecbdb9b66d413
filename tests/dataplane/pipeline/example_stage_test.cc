// The recipe of docs/architecture.md "Adding a stage", proved: a test-only stage that counts
// the packets of each flow, registered through DataplaneOptions::extra_stages without
// touching any other stage, the worker or the stage list. It owns its per-flow state (by flow
// position, sized at create), sees only packets still forwarded after the built-in stages,
// releases a flow's state when the flow ends, and adds its step to explain.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <vector>

#include "dataplane/pipeline/stage.h"
#include "tests/dataplane/pipeline/harness.h"
#include "tests/util/packet_builder.h"

namespace dpu::dp {
namespace {

using test::Frame;
using test::PacketBuilder;

// What the stage reports, owned by the test.
struct CountLog {
  std::map<uint64_t, uint32_t> ended;  // flow id -> packets the stage saw, at the flow's end
  uint32_t runs = 0;                   // run() calls (segments)
  uint32_t refreshes = 0;
};

class FlowPacketCounter final : public PathStage {
 public:
  FlowPacketCounter(PathContext& cx, CountLog* log)
      : PathStage(cx, "flow-packet-counter", kCyLb), log_(log),
        counts_(new uint32_t[cx.flows->capacity()]()) {}
  bool refresh() override {
    ++log_->refreshes;
    return true;
  }
  void run(uint16_t from, uint16_t to) override {
    ++log_->runs;
    const Burst& b = *cx_.burst;
    for (uint16_t i = from; i < to; ++i) {
      if (b.v[i].verdict == Verdict::kForward && b.pos[i] >= 0) ++counts_[b.pos[i]];
    }
  }
  void flowEnded(int32_t pos) override {
    log_->ended[cx_.flowId(cx_.flows->entry(pos))] = counts_[pos];
    counts_[pos] = 0;
  }
  static bool explain(const ExplainInput& in, ExplainResult& r) {
    explainStep(r, Stage::kNone, "count",
                in.tracked ? "counted as a packet of its flow" : "untracked: not counted");
    return false;
  }

 private:
  CountLog* log_;
  std::unique_ptr<uint32_t[]> counts_;
};

StageSpec counterSpec(CountLog* log) {
  return StageSpec{[log](PathContext& cx, const rules::DataplaneSettings&)
                       -> absl::StatusOr<std::unique_ptr<PathStage>> {
                     return std::make_unique<FlowPacketCounter>(cx, log);
                   },
                   &FlowPacketCounter::explain};
}

rules::DataplaneSettings settings() {
  rules::DataplaneSettings s;
  s.flow_capacity = 1024;
  s.frag_max_datagrams = 64;
  s.tcp_midstream = rules::Policy::kDrop;
  return s;
}

TEST(ExampleStage, CountsEachFlowsForwardedPacketsAndForgetsThemAtTheEnd) {
  CountLog log;
  Harness h(settings(), {counterSpec(&log)});
  ASSERT_NE(h.dp().worker(0).stage("flow-packet-counter"), nullptr);
  // Flow 1: a TCP connection, 4 packets; flow 2: UDP, 3 packets; then a TCP segment of an
  // unknown connection, dropped by the flow step (tcp.midstream DROP) before any stage.
  h.send(0, PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 80, kTcpSyn, 1).build());
  h.send(1, PacketBuilder().ipv4("10.0.0.2", "10.0.0.1").tcp(80, 40000, kTcpSyn | kTcpAck, 9, 2)
                .build());
  h.send(0, PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 80, kTcpAck, 2, 10).build());
  h.send(0, PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 80, kTcpAck | kTcpPsh, 2, 10)
                .payload("hello").build());
  for (int k = 0; k < 3; ++k) {
    h.send(k == 1 ? 1 : 0, PacketBuilder()
                               .ipv4(k == 1 ? "10.0.0.4" : "10.0.0.3", k == 1 ? "10.0.0.3" : "10.0.0.4")
                               .udp(k == 1 ? 53 : 5353, k == 1 ? 5353 : 53)
                               .payload("x")
                               .build());
  }
  h.send(0, PacketBuilder().ipv4("10.0.0.5", "10.0.0.6").tcp(1234, 80, kTcpAck, 7, 7).build());
  h.poll();
  EXPECT_GT(log.refreshes, 0u);
  EXPECT_GT(log.runs, 0u);
  EXPECT_TRUE(log.ended.empty());  // nothing ended yet
  // The stage changes no verdict: 7 forwarded, the midstream segment dropped by the loop.
  ASSERT_EQ(h.verdicts().size(), 8u);
  std::map<uint64_t, uint32_t> want;
  int dropped = 0;
  for (const PacketVerdict& v : h.verdicts()) {
    if (v.verdict == Verdict::kForward) ++want[v.flow_id];
    if (v.verdict == Verdict::kDrop && v.reason == DropReason::kTcpMidstream) ++dropped;
  }
  EXPECT_EQ(dropped, 1);
  ASSERT_EQ(want.size(), 2u);
  EXPECT_EQ(h.out(1).size() + h.out(0).size(), 7u);
  // Shutdown ends both flows: the stage reports what it counted and forgets it.
  while (!h.dp().worker(0).endFlows(1024)) {
  }
  EXPECT_EQ(log.ended, want);
  std::vector<uint32_t> counts;
  for (const auto& [id, n] : log.ended) counts.push_back(n);
  EXPECT_EQ(counts, (std::vector<uint32_t>{4, 3}));
}

TEST(ExampleStage, AddsItsStepToExplainAfterTheBuiltInStages) {
  CountLog log;
  Harness h(settings(), {counterSpec(&log)});
  Frame syn = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 80, kTcpSyn, 1).build();
  ExplainResult r = h.dp().explain(syn.data(), static_cast<uint32_t>(syn.size()), kSideA);
  ASSERT_GE(r.steps.size(), 2u);
  EXPECT_EQ(r.steps[r.steps.size() - 2].decision, "count");
  EXPECT_EQ(r.steps.back().decision, "forward");
  EXPECT_EQ(r.verdict.verdict, Verdict::kForward);
}

}  // namespace
}  // namespace dpu::dp
