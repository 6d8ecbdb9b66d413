// --- flows view / capture --- through the real worker (Harness): the flow dump a worker
// serves between bursts (every flow, oriented, with counters, state, verdict and rule) and
// the capture of dropped / rule-judged packets while armed, and only then.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/api/dataplane.h"
#include "tests/dataplane/pipeline/harness.h"
#include "tests/dataplane/stages/fw_test_util.h"
#include "tests/util/packet_builder.h"

namespace dpu::dp {
namespace {

using test::Frame;
using test::PacketBuilder;
using test::TestRule;

std::unique_ptr<rules::Snapshot> snapWith(uint32_t capacity,
                                          std::shared_ptr<const rules::CompiledFirewall> fw) {
  auto s = std::make_unique<rules::Snapshot>();
  s->dataplane.flow_capacity = capacity;
  s->dataplane.frag_max_datagrams = 64;
  s->firewall = std::move(fw);
  return s;
}

Frame tcp(const char* src, const char* dst, uint16_t sport, uint16_t dport, uint8_t flags,
          const char* payload = "") {
  return PacketBuilder().eth().ipv4(src, dst).tcp(sport, dport, flags).payload(payload).build();
}

Frame udp(const char* src, const char* dst, uint16_t sport, uint16_t dport, size_t len) {
  return PacketBuilder().eth().ipv4(src, dst).udp(sport, dport).payload(std::string(len, 'x')).build();
}

// listFlows from another thread while this one runs the worker loop (as a launched worker
// would): the dump is served a slice per loop.
FlowListing listWhilePolling(Harness& h, uint64_t* loops = nullptr) {
  auto fut = std::async(std::launch::async, [&] { return h.dp().listFlows(600000); });
  uint64_t n = 0;
  while (fut.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    h.dp().worker(0).pollOnce();
    ++n;
  }
  if (loops) *loops = n;
  auto r = fut.get();
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : FlowListing{};
}

std::string str(const IpAddr& a) {
  char b[16];
  snprintf(b, sizeof(b), "%u.%u.%u.%u", a.b[0], a.b[1], a.b[2], a.b[3]);
  return b;
}

const FlowInfo* find(const FlowListing& l, uint16_t dport) {
  for (const auto& f : l.flows) {
    if (f.dport == dport) return &f;
  }
  return nullptr;
}

TEST(FlowViewTest, DumpListsEveryFlowOrientedWithCountersStateAndRule) {
  auto fw = test::makeFirewall({TestRule{.id = "ssh-block", .proto = 6, .dport_lo = 22, .dport_hi = 22}});
  Harness h(snapWith(4096, fw));
  // A TCP handshake + data initiated from side A by the *higher* address (the key's hi end),
  // a denied SSH SYN, a UDP exchange answered from side B.
  // (A poll reads side A before side B: one poll per step keeps the handshake in order.)
  h.send(0, tcp("10.0.0.9", "10.0.0.1", 40000, 80, kTcpSyn));
  h.poll();
  h.send(1, tcp("10.0.0.1", "10.0.0.9", 80, 40000, kTcpSyn | kTcpAck));
  h.poll();
  h.send(0, tcp("10.0.0.9", "10.0.0.1", 40000, 80, kTcpAck, "GET / HTTP/1.0\r\n\r\n"));
  h.send(0, tcp("10.0.0.2", "192.0.2.22", 40001, 22, kTcpSyn));
  h.send(0, udp("10.0.0.3", "10.0.0.53", 5000, 53, 30));
  h.send(1, udp("10.0.0.53", "10.0.0.3", 53, 5000, 100));
  h.poll();

  FlowListing l = listWhilePolling(h);
  ASSERT_EQ(l.flows.size(), 3u);
  EXPECT_EQ(l.missed, 0u);
  ASSERT_EQ(l.now_ns.size(), 1u);

  const FlowInfo* web = find(l, 80);
  ASSERT_NE(web, nullptr);
  EXPECT_EQ(str(web->src), "10.0.0.9");  // the initiator, although it is the key's hi end
  EXPECT_EQ(str(web->dst), "10.0.0.1");
  EXPECT_EQ(web->sport, 40000);
  EXPECT_EQ(web->proto, 6);
  EXPECT_EQ(web->tcp_state, TcpState::kEstablished);
  EXPECT_EQ(web->packets[0], 2u);
  EXPECT_EQ(web->packets[1], 1u);
  EXPECT_EQ(web->in_side, kSideA);
  EXPECT_EQ(web->verdict, Verdict::kForward);
  EXPECT_EQ(web->worker, 0);
  EXPECT_EQ(web->flow_id >> 32, 1u);

  const FlowInfo* ssh = find(l, 22);
  ASSERT_NE(ssh, nullptr);
  EXPECT_EQ(ssh->verdict, Verdict::kDrop);
  EXPECT_EQ(ssh->stage, Stage::kFirewall);
  EXPECT_EQ(ssh->rule, "ssh-block");
  EXPECT_EQ(ssh->tcp_state, TcpState::kSynSent);

  const FlowInfo* dns = find(l, 53);
  ASSERT_NE(dns, nullptr);
  EXPECT_EQ(str(dns->src), "10.0.0.3");
  EXPECT_EQ(dns->packets[0], 1u);
  EXPECT_EQ(dns->packets[1], 1u);
  EXPECT_GT(dns->bytes[1], dns->bytes[0]);
  EXPECT_GE(dns->last_seen_ns, dns->first_seen_ns);
}

TEST(FlowViewTest, WalkIsSpreadOverLoopsAndSeesEveryFlow) {
  // 20000 flows in a table of 32768 slots: at kDumpFlowsPerLoop flows per loop the walk
  // takes at least 20000 / kDumpFlowsPerLoop loops, and finds every flow.
  Harness h(snapWith(32768, nullptr));
  constexpr int kFlows = 20000;
  for (int i = 0; i < kFlows; ++i) {
    char src[32];
    snprintf(src, sizeof(src), "10.%d.%d.1", i / 256, i % 256);
    h.send(0, udp(src, "192.0.2.1", static_cast<uint16_t>(1024 + i % 60000), 9, 10));
    if (i % 2000 == 1999) {
      h.poll();
      h.out(1);  // the forwarded frames, back to the pool
    }
  }
  h.poll();
  h.out(1);
  ASSERT_EQ(h.counters().flows_active, static_cast<uint64_t>(kFlows));
  uint64_t loops = 0;
  FlowListing l = listWhilePolling(h, &loops);
  EXPECT_EQ(l.flows.size(), static_cast<size_t>(kFlows));
  EXPECT_EQ(l.missed, 0u);
  EXPECT_GE(loops, std::max(32768u / kDumpSlotsPerLoop, kFlows / kDumpFlowsPerLoop));
}

TEST(FlowViewTest, TimesOutWhenNoWorkerRunsAndCanBeAskedAgain) {
  Harness h(snapWith(4096, nullptr));
  h.send(0, udp("10.0.0.3", "10.0.0.53", 5000, 53, 30));
  h.poll();
  auto r = h.dp().listFlows(50);  // nobody polls
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(r.status().message().find("worker 0"), std::string_view::npos);
  h.dp().worker(0).pollOnce();  // the withdrawn request is not served
  FlowListing l = listWhilePolling(h);
  EXPECT_EQ(l.flows.size(), 1u);
}

TEST(FlowViewTest, CaptureCopiesOnlyWhileArmedAndOnlyWhatMatches) {
  auto fw = test::makeFirewall({TestRule{.id = "ssh-block", .proto = 6, .dport_lo = 22, .dport_hi = 22},
                                TestRule{.id = "web", .action = rules::FwAction::kAllow, .proto = 6,
                                         .dport_lo = 80, .dport_hi = 80}});
  Harness h(snapWith(4096, fw));
  std::vector<CapturedPacket> got;
  uint64_t lost = 0;
  // Not armed: nothing is copied.
  h.send(0, tcp("10.0.0.2", "192.0.2.22", 40001, 22, kTcpSyn));
  h.poll();
  EXPECT_EQ(h.dp().readCapture(&got, 100, &lost), 0u);

  CaptureSpec drops;
  drops.drops = true;
  ASSERT_TRUE(h.dp().armCapture(drops).ok());
  CaptureSpec other;
  other.rule = "web";
  EXPECT_EQ(h.dp().armCapture(other).code(), absl::StatusCode::kFailedPrecondition);
  const Frame denied = tcp("10.0.0.4", "192.0.2.22", 40002, 22, kTcpSyn);
  h.send(0, denied);
  h.send(0, tcp("10.0.0.5", "192.0.2.80", 40003, 80, kTcpSyn));  // allowed: not a drop
  h.poll();
  ASSERT_EQ(h.dp().readCapture(&got, 100, &lost), 1u);
  EXPECT_EQ(got[0].data, std::vector<uint8_t>(denied.begin(), denied.end()));
  EXPECT_EQ(got[0].orig_len, denied.size());
  EXPECT_EQ(got[0].verdict, Verdict::kDrop);
  EXPECT_EQ(got[0].stage, Stage::kFirewall);
  EXPECT_EQ(got[0].reason, DropReason::kFirewallDeny);
  EXPECT_EQ(lost, 0u);
  h.dp().disarmCapture();

  // By rule: the allowed web packets, not the drops.
  got.clear();
  ASSERT_EQ(h.dp().armCapture(CaptureSpec{.rule = "nope"}).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(h.dp().armCapture(other).ok());
  h.send(0, tcp("10.0.0.6", "192.0.2.22", 40004, 22, kTcpSyn));
  h.send(0, tcp("10.0.0.7", "192.0.2.80", 40005, 80, kTcpSyn));
  h.poll();
  ASSERT_EQ(h.dp().readCapture(&got, 100, &lost), 1u);
  EXPECT_EQ(got[0].verdict, Verdict::kForward);
  h.dp().disarmCapture();

  // Drops of one reason only; a full ring counts what it loses.
  got.clear();
  CaptureSpec reason;
  reason.drops = true;
  reason.any_reason = false;
  reason.reason = DropReason::kFirewallReject;  // no reject rule: nothing matches
  ASSERT_TRUE(h.dp().armCapture(reason).ok());
  h.send(0, tcp("10.0.0.8", "192.0.2.22", 40006, 22, kTcpSyn));
  h.poll();
  EXPECT_EQ(h.dp().readCapture(&got, 100, &lost), 0u);
  h.dp().disarmCapture();
  ASSERT_TRUE(h.dp().armCapture(drops).ok());
  for (uint32_t i = 0; i < kCaptureSlots + 10; ++i) {
    h.send(0, tcp("10.0.1.1", "192.0.2.22", static_cast<uint16_t>(20000 + i), 22, kTcpSyn));
    if (i % 100 == 99) h.poll();
  }
  h.poll();
  EXPECT_EQ(h.dp().readCapture(&got, 100000, &lost), kCaptureSlots);
  EXPECT_EQ(lost, 10u);
  h.dp().disarmCapture();
  // Disarmed: no more copies.
  h.send(0, tcp("10.0.1.2", "192.0.2.22", 30000, 22, kTcpSyn));
  h.poll();
  got.clear();
  EXPECT_EQ(h.dp().readCapture(&got, 100, &lost), 0u);
}

}  // namespace
}  // namespace dpu::dp
