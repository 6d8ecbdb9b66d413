// Explain follows the worker's policies step by step, on any snapshot, without DPDK state.
#include <gtest/gtest.h>

#include "dataplane/api/control.h"
#include "tests/util/packet_builder.h"

namespace dpu::dp {
namespace {

using test::Frame;
using test::PacketBuilder;

ExplainResult run(const Frame& f, const rules::DataplaneSettings& s = {}, uint8_t side = kSideA) {
  rules::Snapshot snap;
  snap.generation = 7;
  snap.dataplane = s;
  return explainPacket(snap, f.data(), static_cast<uint32_t>(f.size()), side);
}

TEST(Explain, NewTcpFlowIsForwardedWithSteps) {
  auto r = run(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(1000, 443, kTcpSyn).build());
  EXPECT_EQ(r.verdict.verdict, Verdict::kForward);
  EXPECT_EQ(r.verdict.generation, 7u);
  ASSERT_GE(r.steps.size(), 3u);
  EXPECT_EQ(r.steps[0].stage, Stage::kParse);
  EXPECT_EQ(r.steps[0].decision, "pass");
  EXPECT_EQ(r.steps[1].stage, Stage::kFlow);
  EXPECT_EQ(r.steps[1].decision, "new");
  EXPECT_NE(r.summary.find("10.0.0.1:1000 -> 10.0.0.2:443"), std::string::npos) << r.summary;
  EXPECT_NE(r.steps.back().detail.find("side B"), std::string::npos);
  auto back = run(PacketBuilder().ipv4("10.0.0.2", "10.0.0.1").tcp(443, 1000, kTcpSyn).build(), {},
                  kSideB);
  EXPECT_NE(back.steps.back().detail.find("side A"), std::string::npos);
}

TEST(Explain, MalformedAndNonIpFollowPolicies) {
  Frame bad = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").ipv4Ihl(3).udp(1, 2).build();
  auto r = run(bad);
  EXPECT_EQ(r.verdict.verdict, Verdict::kDrop);
  EXPECT_EQ(r.verdict.reason, dropReasonFromParse(ParseStatus::kBadIpv4Ihl));
  EXPECT_NE(r.steps[0].detail.find("dataplane.malformed"), std::string::npos);
  rules::DataplaneSettings fwd;
  fwd.malformed = rules::Policy::kForward;
  EXPECT_EQ(run(bad, fwd).verdict.verdict, Verdict::kForward);

  Frame arp = PacketBuilder().arp(1, "192.0.2.1", "192.0.2.2").build();
  EXPECT_EQ(run(arp).verdict.verdict, Verdict::kForward);
  rules::DataplaneSettings drop;
  drop.non_ip = rules::Policy::kDrop;
  auto d = run(arp, drop);
  EXPECT_EQ(d.verdict.verdict, Verdict::kDrop);
  EXPECT_EQ(d.verdict.reason, DropReason::kNonIp);
}

TEST(Explain, MidstreamAndStrayReset) {
  Frame mid = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 2, kTcpAck).build();
  EXPECT_EQ(run(mid).verdict.verdict, Verdict::kForward);
  rules::DataplaneSettings s;
  s.tcp_midstream = rules::Policy::kDrop;
  auto r = run(mid, s);
  EXPECT_EQ(r.verdict.verdict, Verdict::kDrop);
  EXPECT_EQ(r.verdict.reason, DropReason::kTcpMidstream);
  EXPECT_EQ(r.verdict.stage, Stage::kFlow);
  Frame rst = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 2, kTcpRst).build();
  EXPECT_EQ(run(rst, s).verdict.verdict, Verdict::kForward);
}

TEST(Explain, Fragments) {
  Frame dgram = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").ipv4Id(3).tcp(1, 2, kTcpSyn)
                    .payload(std::string(64, 'z')).build();
  auto tiny = test::fragmentIpv4(dgram, 8);
  auto r = run(tiny[0]);
  EXPECT_EQ(r.verdict.verdict, Verdict::kDrop);
  EXPECT_EQ(r.verdict.reason, DropReason::kFragTiny);
  auto later = run(tiny[1]);
  EXPECT_EQ(later.steps.back().stage, Stage::kFragment);
  EXPECT_EQ(later.steps.back().decision, "follow");
  auto normal = test::fragmentIpv4(dgram, 48);
  EXPECT_EQ(run(normal[0]).verdict.verdict, Verdict::kForward);
}

}  // namespace
}  // namespace dpu::dp

namespace dpu::dp {
namespace {

TEST(Explain, Ipv6EndpointsAreBracketed) {
  auto r = run(PacketBuilder().ipv6("2001:db8::1", "2001:db8::2").udp(5353, 53).build());
  EXPECT_NE(r.summary.find("[2001:db8::1]:5353 -> [2001:db8::2]:53"), std::string::npos)
      << r.summary;
}

}  // namespace
}  // namespace dpu::dp
