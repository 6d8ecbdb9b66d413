// DPI through the real worker path (Harness): alerts raised when a flow ends carry the flow's
// identity and are counted; a packet that makes more rules true than the old 16-entry outcome
// held is dropped by the drop rule among them, on that packet.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "dataplane/api/dataplane.h"
#include "rules/compile/yara_translate.h"
#include "tests/dataplane/pipeline/harness.h"
#include "tests/util/packet_builder.h"

namespace dpu::dp {
namespace {

using test::Frame;
using test::PacketBuilder;

std::unique_ptr<rules::Snapshot> dpiSnapshot(const std::string& yara) {
  rules::DpiModel m;
  m.enabled = true;
  m.sources.push_back({"t", yara});
  m.streams_per_worker = 64;
  rules::ConfigErrorList errs;
  auto c = rules::compileDpi(m, errs);
  EXPECT_TRUE(c.ok()) << c.status();
  auto s = std::make_unique<rules::Snapshot>();
  s->dataplane.flow_capacity = 1024;
  s->dataplane.tcp_established_s = 30;
  if (c.ok()) s->dpi = *c;
  s->dpi_settings = m;
  s->dpi_settings.sources.clear();
  return s;
}

constexpr const char* kCli = "10.0.0.1";
constexpr const char* kSrv = "192.0.2.80";
constexpr uint16_t kSport = 40000;

// Client side A (ISN 999), server side B (ISN 4999); `t` in microseconds.
Frame fromClient(uint8_t flags, uint32_t seq, uint32_t ack, const std::string& data = "") {
  return PacketBuilder().ipv4(kCli, kSrv).tcp(kSport, 80, flags, seq, ack).payload(data).build();
}
Frame fromServer(uint8_t flags, uint32_t seq, uint32_t ack, const std::string& data = "") {
  return PacketBuilder().ipv4(kSrv, kCli).tcp(80, kSport, flags, seq, ack).payload(data).build();
}

// The harness polls side A's ring before side B's: a poll after each packet keeps the order.
void handshake(Harness& h, uint64_t& t) {
  h.send(0, fromClient(kTcpSyn, 999, 0), ++t);
  h.poll();
  h.send(1, fromServer(kTcpSyn | kTcpAck, 4999, 1000), ++t);
  h.poll();
  h.send(0, fromClient(kTcpAck, 1000, 5000), ++t);
  h.poll();
}

std::vector<Event> alerts(Harness& h) {
  std::vector<Event> out;
  h.dp().drainEvents([&](const Event& e) {
    if (e.type == EventType::kDpiAlert) out.push_back(e);
  }, 100000);
  return out;
}

uint64_t flowIdOf(Harness& h) {
  for (const PacketVerdict& v : h.verdicts())
    if (v.flow_id != 0) return v.flow_id;
  return 0;
}

// `$` at the end of a regex is the end of the data: the match exists only when the stream
// ends. The server's bytes end with the marker, so the alert is about the server's direction.
constexpr const char* kEndRules = R"(
rule ends_with_marker { strings: $a = /GOODBYE-MARKER$/ condition: $a }
rule plain { strings: $b = "never-sent" condition: $b }
)";

void expectServerDirection(const Event& e, uint64_t flow_id) {
  EXPECT_EQ(e.flow_id, flow_id);
  EXPECT_NE(e.flow_id, 0u);
  EXPECT_EQ(e.in_side, kSideB);  // the server's bytes came from side B
  EXPECT_EQ(e.proto, 6);
  EXPECT_EQ(e.ip_ver, static_cast<uint8_t>(L3Type::kIpv4));
  EXPECT_EQ(e.sport, 80);
  EXPECT_EQ(e.dport, kSport);
  EXPECT_EQ(e.src.b[0], 192);  // 192.0.2.80 -> 10.0.0.1
  EXPECT_EQ(e.src.b[3], 80);
  EXPECT_EQ(e.dst.b[0], 10);
  EXPECT_EQ(e.dst.b[3], 1);
  EXPECT_EQ(e.stage, Stage::kDpi);
  EXPECT_EQ(e.rule, 0u);
}

TEST(DpiPipeline, StreamEndAlertAtShutdownCarriesTheFlowAndIsCounted) {
  Harness h(dpiSnapshot(kEndRules));
  uint64_t t = 1000000;
  handshake(h, t);
  h.send(0, fromClient(kTcpPsh | kTcpAck, 1000, 5000, "GET / HTTP/1.1\r\n\r\n"), ++t);
  h.poll();
  h.send(1, fromServer(kTcpPsh | kTcpAck, 5000, 1018, "HTTP/1.1 200 OK\r\n\r\nGOODBYE-MARKER"), ++t);
  h.poll();
  const uint64_t flow_id = flowIdOf(h);
  EXPECT_TRUE(alerts(h).empty());  // not yet: the data may go on
  EXPECT_EQ(h.counters().dpi_alerts, 0u);
  while (!h.dp().worker(0).endFlows(4096)) {
  }
  const std::vector<Event> a = alerts(h);
  ASSERT_EQ(a.size(), 1u);
  expectServerDirection(a[0], flow_id);
  EXPECT_EQ(a[0].verdict, Verdict::kForward);
  EXPECT_EQ(a[0].end_reason, FlowEndReason::kShutdown);  // raised by the flow's end
  EXPECT_EQ(h.counters().dpi_alerts, 1u);
  const std::vector<DpiRuleCounters> rc = h.dp().dpiRuleCounters();
  ASSERT_EQ(rc.size(), 2u);
  EXPECT_EQ(rc[0].matches, 1u);
  EXPECT_EQ(rc[1].matches, 0u);
}

TEST(DpiPipeline, StreamEndAlertOfAnIdleFlowCarriesTheFlow) {
  Harness h(dpiSnapshot(kEndRules));
  uint64_t t = 1000000;
  handshake(h, t);
  h.send(1, fromServer(kTcpPsh | kTcpAck, 5000, 1000, "GOODBYE-MARKER"), ++t);
  h.poll();
  const uint64_t flow_id = flowIdOf(h);
  ASSERT_TRUE(alerts(h).empty());
  // A minute later (established idle timeout 30 s) the client's next segment finds the flow
  // stale: the flow ends (its streams too) before the packet starts a new one.
  t += 60ull * 1000000;
  h.send(0, fromClient(kTcpAck, 1000, 5014), t);
  h.poll();
  const std::vector<Event> a = alerts(h);
  ASSERT_EQ(a.size(), 1u);
  expectServerDirection(a[0], flow_id);
  EXPECT_EQ(a[0].ts_ns, t * 1000);
  EXPECT_EQ(a[0].end_reason, FlowEndReason::kTimeout);
  EXPECT_EQ(h.counters().dpi_alerts, 1u);
}

// 24 alert rules and one drop rule, all true on the same payload; the drop rule sorts last
// (a rule index beyond what one packet's outcome used to hold).
std::string manyRulesThenDrop() {
  std::string y;
  for (int i = 0; i < 24; ++i)
    y += "rule a" + std::to_string(10 + i) + " { strings: $a = \"SHARED-PAYLOAD\" condition: $a }\n";
  y += "rule zz_drop { meta: action = \"drop\" strings: $a = \"SHARED-PAYLOAD\" condition: $a }\n";
  return y;
}

TEST(DpiPipeline, DropRuleAmongManyMatchesActsOnThatPacket) {
  Harness h(dpiSnapshot(manyRulesThenDrop()));
  uint64_t t = 1000000;
  handshake(h, t);
  h.poll();
  h.out(0);
  h.out(1);
  h.verdicts().clear();
  h.send(0, fromClient(kTcpPsh | kTcpAck, 1000, 5000, "xx SHARED-PAYLOAD xx"), ++t);
  h.send(0, fromClient(kTcpPsh | kTcpAck, 1020, 5000, "more"), ++t);
  h.poll();
  ASSERT_EQ(h.verdicts().size(), 2u);
  const PacketVerdict& v = h.verdicts()[0];
  EXPECT_EQ(v.verdict, Verdict::kDrop);  // the packet that made the drop rule true
  EXPECT_EQ(v.stage, Stage::kDpi);
  EXPECT_EQ(v.reason, DropReason::kDpiDrop);
  EXPECT_EQ(v.rule, 24u);
  EXPECT_EQ(h.verdicts()[1].verdict, Verdict::kDrop);  // and the flow stays blocked
  EXPECT_TRUE(h.out(1).empty());
  const auto c = h.counters();
  EXPECT_EQ(c.dpi_alerts, 24u);
  EXPECT_EQ(c.dpi_drops, 1u);
  const std::vector<Event> a = alerts(h);
  ASSERT_EQ(a.size(), 25u);  // one alert event per rule, all with the packet
  std::vector<bool> seen(25, false);
  for (const Event& e : a) {
    ASSERT_LT(e.rule, 25u);
    seen[e.rule] = true;
    EXPECT_EQ(e.flow_id, v.flow_id);
    EXPECT_EQ(e.seq, v.seq);
    EXPECT_EQ(e.verdict, Verdict::kDrop);
    EXPECT_EQ(static_cast<int>(e.end_reason), 0);  // raised by a packet
  }
  for (int r = 0; r < 25; ++r) EXPECT_TRUE(seen[r]) << r;
}
// Issue #16 ("no bypass"): the stream engine takes a segment's bytes before DPI scans them, so
// bytes a drop rule matched count as inspected for the engine; their retransmission (as the
// sender's stack sends it, the receiver never got them) would be an identical overlap. A DPI
// drop blocks the whole flow (dpi_drop on every later packet), so the retransmission - in
// the same burst or later, alone or with new bytes after it - never reaches the server.
TEST(DpiPipeline, RetransmissionOfDroppedBytesNeverReachesTheServer) {
  const std::string rule =
      "rule bad { meta: action = \"drop\" strings: $a = \"EVIL-BYTES\" condition: $a }\n";
  for (bool same_burst : {false, true}) {
    SCOPED_TRACE(same_burst ? "same burst" : "later burst");
    Harness h(dpiSnapshot(rule));
    uint64_t t = 1000000;
    handshake(h, t);
    h.poll();
    h.out(0);
    h.out(1);
    h.verdicts().clear();
    const std::string bad = "xx EVIL-BYTES xx";
    h.send(0, fromClient(kTcpPsh | kTcpAck, 1000, 5000, bad), ++t);
    if (same_burst) h.send(0, fromClient(kTcpPsh | kTcpAck, 1000, 5000, bad), ++t);
    h.poll();
    EXPECT_TRUE(h.out(1).empty());
    h.send(0, fromClient(kTcpPsh | kTcpAck, 1000, 5000, bad), ++t);
    h.send(0, fromClient(kTcpPsh | kTcpAck, 1000, 5000, bad + "and more"), ++t);
    h.send(0, fromClient(kTcpPsh | kTcpAck, 1003, 5000, "EVIL-BYTES"), ++t);
    h.poll();
    EXPECT_TRUE(h.out(1).empty());
    const size_t n = same_burst ? 5u : 4u;
    ASSERT_EQ(h.verdicts().size(), n);
    for (const PacketVerdict& v : h.verdicts()) {
      EXPECT_EQ(v.verdict, Verdict::kDrop);
      EXPECT_EQ(v.reason, DropReason::kDpiDrop);
    }
    EXPECT_EQ(h.counters().dpi_drops, 1u);  // matched once; the rest is the blocked flow
  }
}

// A DPI reset ends the connection at both ends (RST each way): the flow's late packets stay
// blocked, but a new connection on the same 5-tuple (a new SYN: port reuse) is a new flow,
// inspected afresh and forwarded, not dropped as the reset flow's for as long as retried SYNs
// keep the old entry alive (seen behind ECMP, where a box sees one direction only and the
// reset flow stayed syn_sent / established with its reject verdict).
TEST(DpiPipeline, NewConnectionOnTheFiveTupleOfAResetOneIsANewFlow) {
  const std::string rule =
      "rule bad { meta: action = \"reset\" strings: $a = \"EVIL-BYTES\" condition: $a }\n";
  Harness h(dpiSnapshot(rule));
  uint64_t t = 1000000;
  handshake(h, t);
  h.out(0);
  h.out(1);
  h.verdicts().clear();
  h.send(0, fromClient(kTcpPsh | kTcpAck, 1000, 5000, "xx EVIL-BYTES xx"), ++t);
  h.poll();
  ASSERT_EQ(h.verdicts().size(), 1u);
  EXPECT_EQ(h.verdicts()[0].verdict, Verdict::kReject);
  EXPECT_EQ(h.verdicts()[0].reason, DropReason::kDpiReset);
  const uint64_t reset_flow = h.verdicts()[0].flow_id;
  // A late segment of the reset connection: still blocked.
  h.send(0, fromClient(kTcpPsh | kTcpAck, 1016, 5000, "late"), ++t);
  h.poll();
  ASSERT_EQ(h.verdicts().size(), 2u);
  EXPECT_EQ(h.verdicts()[1].verdict, Verdict::kDrop);
  EXPECT_EQ(h.verdicts()[1].flow_id, reset_flow);
  h.out(0);
  h.out(1);
  // The client connects again from the same port: a new flow, forwarded, with clean bytes.
  h.send(0, fromClient(kTcpSyn, 77777, 0), ++t);
  h.poll();
  ASSERT_EQ(h.verdicts().size(), 3u);
  EXPECT_EQ(h.verdicts()[2].verdict, Verdict::kForward);
  EXPECT_NE(h.verdicts()[2].flow_id, reset_flow);
  EXPECT_TRUE(h.verdicts()[2].flow_new);
  h.send(1, fromServer(kTcpSyn | kTcpAck, 88888, 77778), ++t);
  h.poll();
  h.send(0, fromClient(kTcpAck, 77778, 88889), ++t);
  h.poll();
  h.send(0, fromClient(kTcpPsh | kTcpAck, 77778, 88889, "hello again"), ++t);
  h.poll();
  ASSERT_EQ(h.verdicts().size(), 6u);
  for (size_t k = 3; k < 6; ++k) EXPECT_EQ(h.verdicts()[k].verdict, Verdict::kForward) << k;
  EXPECT_EQ(h.out(1).size(), 3u);  // SYN, ACK, data reached the server
  EXPECT_EQ(h.counters().dpi_resets, 1u);
}

}  // namespace
}  // namespace dpu::dp
