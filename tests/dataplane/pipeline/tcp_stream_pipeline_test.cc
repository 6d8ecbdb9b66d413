// TCP stream normalization through the real worker path (Harness), read by DNS over TCP:
// out-of-order segments, bad-checksum decoys, overlaps with different data (both policies),
// the answer's sequence numbers for pipelined queries and for a query on a SYN, and window
// exhaustion under both fail policies.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "dataplane/api/dataplane.h"
#include "dataplane/packet/parser.h"
#include "dataplane/stages/dns/dns_message.h"
#include "tests/dataplane/pipeline/harness.h"
#include "tests/util/dns_builder.h"
#include "tests/util/dns_snapshot.h"
#include "tests/util/packet_builder.h"

namespace dpu::dp {
namespace {

using test::Frame;
using test::PacketBuilder;
using test::parseFrame;
using Bytes = std::vector<uint8_t>;

std::unique_ptr<rules::Snapshot> snap(const rules::DataplaneSettings* dps = nullptr) {
  rules::DataplaneSettings ds = dps ? *dps : rules::DataplaneSettings{};
  ds.flow_capacity = 4096;
  ds.frag_max_datagrams = 64;
  return test::dnsSnapshot(ds);
}

Frame seg(uint16_t sport, uint8_t flags, uint32_t seq, uint32_t ack, const Bytes& payload,
          bool from_client = true, bool bad_checksum = false) {
  PacketBuilder b;
  if (from_client) {
    b.ipv4("10.0.0.1", "10.0.0.53").tcp(sport, 53, flags, seq, ack);
  } else {
    b.ipv4("10.0.0.53", "10.0.0.1").tcp(53, sport, flags, seq, ack);
  }
  b.payload(payload);
  if (bad_checksum) b.corruptL4Checksum();
  return b.build();
}

Bytes framed(const char* name, uint16_t id) {
  Bytes msg = test::dnsQuery(name, kTypeA, id);
  Bytes v = {uint8_t(msg.size() >> 8), uint8_t(msg.size())};
  v.insert(v.end(), msg.begin(), msg.end());
  return v;
}

Bytes part(const Bytes& v, size_t from, size_t to) { return Bytes(v.begin() + from, v.begin() + to); }

// Client ISN 999 (first byte 1000), server ISN 4999 (first byte 5000).
void handshake(Harness& h, uint16_t sport) {
  h.send(0, seg(sport, kTcpSyn, 999, 0, {}));
  h.send(1, seg(sport, kTcpSyn | kTcpAck, 4999, 1000, {}, false));
  h.send(0, seg(sport, kTcpAck, 1000, 5000, {}));
  h.poll();
  h.out(0);
  h.out(1);
}

uint64_t drops(Harness& h, DropReason r) { return h.counters().drops[static_cast<int>(r)]; }

TEST(TcpStreamPipeline, OutOfOrderQueryIsKeptAndAnsweredWhenTheHoleFills) {
  Harness h(snap());
  handshake(h, 44000);
  const Bytes q = framed("www.ads.example", 0x101);
  h.send(0, seg(44000, kTcpAck | kTcpPsh, 1009, 5000, part(q, 9, q.size())));
  h.poll();
  // Forwarded: the server cannot read past the hole; its bytes are kept.
  EXPECT_EQ(h.out(1).size(), 1u);
  EXPECT_EQ(drops(h, DropReason::kTcpOutOfOrder), 0u);
  EXPECT_EQ(h.counters().tcp_stream[kTcpReorderKept], 1u);
  EXPECT_EQ(h.counters().dns[kDnsBlocked], 0u);
  // The first part fills the hole: the query, whole with the kept part, is blocked there.
  h.send(0, seg(44000, kTcpAck | kTcpPsh, 1000, 5000, part(q, 0, 9)));
  h.poll();
  EXPECT_EQ(h.counters().dns[kDnsBlocked], 1u);
  EXPECT_EQ(drops(h, DropReason::kDnsAnswered), 1u);
  EXPECT_EQ(h.out(1).size(), 1u);  // only the RST to the server: it never gets the hole
  ASSERT_EQ(h.out(0).size(), 1u);  // the answer
  EXPECT_EQ(h.counters().tcp_stream[kTcpReorderFilled], 1u);
  EXPECT_EQ(h.counters().tcp_stream[kTcpReorderBytes], q.size() - 9);
  EXPECT_EQ(h.counters().tcp_stream[kTcpOutOfOrderSegments], 1u);
  // Its retransmission: the connection is closed.
  h.send(0, seg(44000, kTcpAck | kTcpPsh, 1009, 5000, part(q, 9, q.size())));
  h.poll();
  EXPECT_EQ(h.out(1).size(), 0u);
  EXPECT_EQ(drops(h, DropReason::kDnsTcpClosed), 1u);
}

TEST(TcpStreamPipeline, FillerAndKeptSegmentsInOneBurstAreReadInOrder) {
  Harness h(snap());
  handshake(h, 44020);
  const Bytes q = framed("www.ads.example", 0x121);
  // Three segments in one burst, last first.
  h.send(0, seg(44020, kTcpAck | kTcpPsh, 1000 + 20, 5000, part(q, 20, q.size())));
  h.send(0, seg(44020, kTcpAck | kTcpPsh, 1000 + 7, 5000, part(q, 7, 20)));
  h.send(0, seg(44020, kTcpAck | kTcpPsh, 1000, 5000, part(q, 0, 7)));
  h.poll();
  EXPECT_EQ(h.counters().dns[kDnsBlocked], 1u);
  EXPECT_EQ(h.counters().tcp_stream[kTcpReorderKept], 2u);
  EXPECT_EQ(h.out(1).size(), 3u);  // the two kept segments, the RST
  EXPECT_EQ(h.out(0).size(), 1u);  // the answer
}

TEST(TcpStreamPipeline, WithoutReorderBuffersAnOutOfOrderQueryIsDroppedThenInspectedInOrder) {
  rules::DataplaneSettings ds;
  ds.tcp_reorder_bytes = 0;
  Harness h(snap(&ds));
  handshake(h, 44000);
  const Bytes q = framed("www.ads.example", 0x101);
  h.send(0, seg(44000, kTcpAck | kTcpPsh, 1009, 5000, part(q, 9, q.size())));
  h.poll();
  EXPECT_EQ(h.out(1).size(), 0u);
  EXPECT_EQ(drops(h, DropReason::kTcpOutOfOrder), 1u);
  EXPECT_EQ(h.counters().dns[kDnsBlocked], 0u);
  h.send(0, seg(44000, kTcpAck | kTcpPsh, 1000, 5000, part(q, 0, 9)));
  h.send(0, seg(44000, kTcpAck | kTcpPsh, 1009, 5000, part(q, 9, q.size())));
  h.poll();
  EXPECT_EQ(h.out(1).size(), 2u);  // the first part, the RST
  ASSERT_EQ(h.out(0).size(), 1u);  // the answer
  EXPECT_EQ(h.counters().dns[kDnsBlocked], 1u);
  EXPECT_EQ(h.counters().tcp_stream[kTcpOutOfOrderSegments], 1u);
}

TEST(TcpStreamPipeline, NoRoomToKeepFollowsTheDnsFailPolicy) {
  for (rules::Policy fail : {rules::Policy::kDrop, rules::Policy::kForward}) {
    rules::DataplaneSettings ds;
    ds.tcp_reorder_bytes = 1024;
    ds.tcp_dns_fail = fail;
    Harness h(snap(&ds));
    handshake(h, 44030);
    // Beyond reorder_bytes past the hole: it cannot be kept.
    h.send(0, seg(44030, kTcpAck | kTcpPsh, 1000 + 2000, 5000, framed("www.abc.example", 0x131)));
    h.poll();
    EXPECT_EQ(h.counters().tcp_stream[kTcpReorderFull], 1u);
    if (fail == rules::Policy::kDrop) {
      EXPECT_EQ(drops(h, DropReason::kTcpStreamExhausted), 1u);
      EXPECT_EQ(h.out(1).size(), 0u);
    } else {
      EXPECT_EQ(h.counters().tcp_stream[kTcpReorderUnkept], 1u);
      EXPECT_EQ(h.out(1).size(), 1u);  // passed unread: an event, not a drop
      EXPECT_EQ(drops(h, DropReason::kTcpStreamExhausted), 0u);
    }
  }
}

// --- hold mode (dataplane.tcp.hold_out_of_order) ---
// A segment beyond a hole is held, not forwarded; the segment that fills the hole leaves
// first, then the held ones in order (a clean query), or they are dropped with it (a blocked
// one: the server never receives a byte of it).
rules::DataplaneSettings holdSettings() {
  rules::DataplaneSettings ds;
  ds.tcp_hold_out_of_order = true;
  return ds;
}

TEST(TcpStreamPipeline, HoldModeHoldsTheSegmentBeyondAHoleUntilItFills) {
  const rules::DataplaneSettings ds = holdSettings();
  Harness h(snap(&ds));
  handshake(h, 44100);
  const Bytes q = framed("www.clean.example", 0x141);
  const Frame late = seg(44100, kTcpAck | kTcpPsh, 1000 + 9, 5000, part(q, 9, q.size()));
  const Frame filler = seg(44100, kTcpAck | kTcpPsh, 1000, 5000, part(q, 0, 9));
  h.send(0, late);
  h.poll();
  EXPECT_TRUE(h.out(1).empty());  // held
  EXPECT_EQ(h.counters().tcp_stream[kTcpHeld], 1u);
  EXPECT_EQ(h.counters().tcp_stream[kTcpReorderKept], 1u);
  EXPECT_TRUE(h.verdicts().size() == 3u);  // the handshake's; the held one has none yet
  h.send(0, filler);
  h.poll();
  EXPECT_EQ(h.out(1), (std::vector<Frame>{filler, late}));  // the filler first
  EXPECT_EQ(h.counters().tcp_stream[kTcpHeldReleased], 1u);
  EXPECT_EQ(h.counters().dns[kDnsBlocked], 0u);
  ASSERT_EQ(h.verdicts().size(), 5u);
  for (const auto& v : h.verdicts()) EXPECT_EQ(v.verdict, Verdict::kForward);
  EXPECT_EQ(h.counters().tcp_stream[kTcpReorderFilled], 1u);
}

TEST(TcpStreamPipeline, HoldModeDropsTheHeldSegmentsWithABlockedFiller) {
  const rules::DataplaneSettings ds = holdSettings();
  Harness h(snap(&ds));
  handshake(h, 44110);
  const Bytes q = framed("www.ads.example", 0x151);
  // Two segments beyond the hole, then the filler.
  h.send(0, seg(44110, kTcpAck | kTcpPsh, 1000 + 20, 5000, part(q, 20, q.size())));
  h.send(0, seg(44110, kTcpAck | kTcpPsh, 1000 + 7, 5000, part(q, 7, 20)));
  h.poll();
  EXPECT_TRUE(h.out(1).empty());
  EXPECT_EQ(h.counters().tcp_stream[kTcpHeld], 2u);
  h.send(0, seg(44110, kTcpAck | kTcpPsh, 1000, 5000, part(q, 0, 7)));
  h.poll();
  EXPECT_EQ(h.counters().dns[kDnsBlocked], 1u);
  const std::vector<Frame> to_server = h.out(1);
  ASSERT_EQ(to_server.size(), 1u);  // the RST only: not one byte of the query
  EXPECT_TRUE(parseFrame(to_server[0]).tcp_flags & kTcpRst);
  EXPECT_EQ(h.out(0).size(), 1u);  // the answer
  EXPECT_EQ(h.counters().tcp_stream[kTcpHeldDropped], 2u);
  EXPECT_EQ(h.counters().tcp_stream[kTcpHeldReleased], 0u);
  EXPECT_EQ(drops(h, DropReason::kDnsAnswered), 3u);  // the filler and the two held with it
  EXPECT_EQ(h.verdicts().size(), 6u);  // one per packet
}

// The kept segments and their filler in one burst (a replay, a busy port): the kept ones are
// held at finish, before the filler's turn, and still leave after it (or go with it).
TEST(TcpStreamPipeline, HoldModeFillerAndKeptSegmentsInOneBurst) {
  for (const char* name : {"www.clean.example", "www.ads.example"}) {
    const rules::DataplaneSettings ds = holdSettings();
    Harness h(snap(&ds));
    handshake(h, 44140);
    const Bytes q = framed(name, 0x181);
    const Frame s2 = seg(44140, kTcpAck | kTcpPsh, 1000 + 20, 5000, part(q, 20, q.size()));
    const Frame s1 = seg(44140, kTcpAck | kTcpPsh, 1000 + 7, 5000, part(q, 7, 20));
    const Frame s0 = seg(44140, kTcpAck | kTcpPsh, 1000, 5000, part(q, 0, 7));
    h.send(0, s2);
    h.send(0, s1);
    h.send(0, s0);
    h.poll();
    EXPECT_EQ(h.counters().tcp_stream[kTcpHeld], 2u) << name;
    EXPECT_EQ(h.verdicts().size(), 6u) << name;  // none left held
    if (std::string(name) == "www.clean.example") {
      EXPECT_EQ(h.out(1), (std::vector<Frame>{s0, s2, s1})) << name;  // the filler first
      EXPECT_EQ(h.counters().tcp_stream[kTcpHeldReleased], 2u);
    } else {
      const std::vector<Frame> to_server = h.out(1);
      ASSERT_EQ(to_server.size(), 1u);  // the RST only
      EXPECT_TRUE(parseFrame(to_server[0]).tcp_flags & kTcpRst);
      EXPECT_EQ(h.counters().tcp_stream[kTcpHeldDropped], 2u);
    }
  }
}

TEST(TcpStreamPipeline, HoldModeDropsWhatIsHeldPastTheTimeout) {
  rules::DataplaneSettings ds = holdSettings();
  ds.tcp_hold_timeout_ms = 200;
  Harness h(snap(&ds));
  handshake(h, 44120);
  const Bytes q = framed("www.clean.example", 0x161);
  h.send(0, seg(44120, kTcpAck | kTcpPsh, 1000 + 9, 5000, part(q, 9, q.size())), 1000000);
  h.poll();
  EXPECT_TRUE(h.out(1).empty());
  // 100 ms on: still held.
  h.send(1, seg(44120, kTcpAck, 5000, 1000, {}, false), 1100000);
  h.poll();
  EXPECT_EQ(h.counters().tcp_stream[kTcpHeldExpired], 0u);
  EXPECT_EQ(h.out(0).size(), 1u);
  // 250 ms on: dropped (the sender retransmits it; its bytes stay kept).
  h.send(1, seg(44120, kTcpAck, 5000, 1000, {}, false), 1250000);
  h.poll();
  EXPECT_EQ(h.counters().tcp_stream[kTcpHeldExpired], 1u);
  EXPECT_EQ(drops(h, DropReason::kTcpHoldExpired), 1u);
  EXPECT_TRUE(h.out(1).empty());
  // The hole fills, then the retransmission of the dropped segment: the query passes whole.
  h.send(0, seg(44120, kTcpAck | kTcpPsh, 1000, 5000, part(q, 0, 9)), 1300000);
  h.send(0, seg(44120, kTcpAck | kTcpPsh, 1000 + 9, 5000, part(q, 9, q.size())), 1300001);
  h.poll();
  EXPECT_EQ(h.out(1).size(), 2u);
  EXPECT_EQ(h.counters().dns[kDnsBlocked], 0u);
}

TEST(TcpStreamPipeline, HoldModeWithoutAFreeSlotFollowsTheDnsFailPolicy) {
  for (rules::Policy fail : {rules::Policy::kDrop, rules::Policy::kForward}) {
    rules::DataplaneSettings ds = holdSettings();
    ds.tcp_hold_packets_per_worker = 1;
    ds.tcp_dns_fail = fail;
    Harness h(snap(&ds));
    handshake(h, 44130);
    const Bytes q = framed("www.clean.example", 0x171);
    h.send(0, seg(44130, kTcpAck | kTcpPsh, 1000 + 20, 5000, part(q, 20, q.size())));
    h.send(0, seg(44130, kTcpAck | kTcpPsh, 1000 + 7, 5000, part(q, 7, 20)));
    h.poll();
    EXPECT_EQ(h.counters().tcp_stream[kTcpHeld], 1u);
    EXPECT_EQ(h.counters().tcp_stream[kTcpHoldFull], 1u);
    if (fail == rules::Policy::kDrop) {
      EXPECT_TRUE(h.out(1).empty());
      EXPECT_EQ(drops(h, DropReason::kTcpStreamExhausted), 1u);
    } else {
      EXPECT_EQ(h.out(1).size(), 1u);  // forwarded before the hole fills (fail open)
      EXPECT_EQ(drops(h, DropReason::kTcpStreamExhausted), 0u);
    }
    // The filler: the held segment follows it; the query is read whole either way (its
    // bytes were kept).
    h.send(0, seg(44130, kTcpAck | kTcpPsh, 1000, 5000, part(q, 0, 7)));
    h.poll();
    EXPECT_EQ(h.out(1).size(), 2u);
    EXPECT_EQ(h.counters().tcp_stream[kTcpHeldReleased], 1u);
  }
}

TEST(TcpStreamPipeline, BadChecksumDecoyNeverEntersTheStream) {
  Harness h(snap());
  handshake(h, 44001);
  const Bytes clean = framed("www.abc.example", 0x102), blocked = framed("www.ads.example", 0x103);
  h.send(0, seg(44001, kTcpAck | kTcpPsh, 1000, 5000, clean, true, /*bad_checksum=*/true));
  h.send(0, seg(44001, kTcpAck | kTcpPsh, 1000, 5000, blocked));
  h.poll();
  EXPECT_EQ(drops(h, DropReason::kTcpBadChecksum), 1u);
  EXPECT_EQ(h.counters().dns[kDnsBlocked], 1u);
  EXPECT_EQ(h.out(0).size(), 1u);  // answered
  EXPECT_EQ(h.counters().tcp_stream[kTcpChecksumSoftware], 5u);  // handshake 3 + 2
}

TEST(TcpStreamPipeline, OverlapWithDifferentDataDropPolicy) {
  Harness h(snap());
  handshake(h, 44002);
  const Bytes clean = framed("www.abc.example", 0x104), blocked = framed("www.ads.example", 0x104);
  h.send(0, seg(44002, kTcpAck | kTcpPsh, 1000, 5000, clean));
  h.send(0, seg(44002, kTcpAck | kTcpPsh, 1000, 5000, blocked));
  h.send(0, seg(44002, kTcpAck | kTcpPsh, 1000, 5000, clean));
  h.poll();
  EXPECT_EQ(h.out(1).size(), 2u);  // the clean copy twice
  EXPECT_EQ(drops(h, DropReason::kTcpOverlapDifferent), 1u);
  EXPECT_EQ(h.counters().dns[kDnsQueries], 1u);  // the retransmission is not read again
}

TEST(TcpStreamPipeline, OverlapWithDifferentDataResetPolicy) {
  rules::DataplaneSettings d;
  d.tcp_overlap_reset = true;
  Harness h(snap(&d));
  handshake(h, 44003);
  const Bytes clean = framed("www.abc.example", 0x105), blocked = framed("www.ads.example", 0x105);
  h.send(0, seg(44003, kTcpAck | kTcpPsh, 1000, 5000, clean));
  h.send(0, seg(44003, kTcpAck | kTcpPsh, 1000, 5000, blocked));
  h.poll();
  auto to_a = h.out(0), to_b = h.out(1);
  ASSERT_EQ(to_a.size(), 1u);  // RST to the client
  ASSERT_EQ(to_b.size(), 2u);  // the clean segment, RST to the server
  EXPECT_TRUE(parseFrame(to_a[0]).tcp_flags & kTcpRst);
  EXPECT_TRUE(parseFrame(to_b[1]).tcp_flags & kTcpRst);
  h.send(1, seg(44003, kTcpAck, 5000, 1000 + uint32_t(clean.size()), {}, false));
  h.poll();
  EXPECT_EQ(h.out(0).size(), 0u);
  EXPECT_EQ(drops(h, DropReason::kTcpStreamReset), 1u);
}

TEST(TcpStreamPipeline, PipelinedAnswerContinuesTheServersBytes) {
  Harness h(snap());
  handshake(h, 44004);
  const Bytes q1 = framed("news.example", 0x106);
  h.send(0, seg(44004, kTcpAck | kTcpPsh, 1000, 5000, q1));
  h.poll();  // (a poll reads side A before side B: one side per poll keeps the order)
  Bytes resp = test::dnsCnameResponse("news.example", {}, 0x106);  // a clean answer
  resp.insert(resp.begin(), {uint8_t(resp.size() >> 8), uint8_t(resp.size())});
  h.send(1, seg(44004, kTcpAck | kTcpPsh, 5000, 1000 + uint32_t(q1.size()), resp, false));
  h.poll();
  // The second query still acknowledges only the server's SYN.
  const Bytes q2 = framed("www.ads.example", 0x107);
  const uint32_t at = 1000 + uint32_t(q1.size());
  h.send(0, seg(44004, kTcpAck | kTcpPsh, at, 5000, q2));
  h.poll();
  auto to_a = h.out(0);
  ASSERT_EQ(to_a.size(), 2u);  // the server's response, our answer
  PacketMeta a = parseFrame(to_a[1]);
  EXPECT_EQ(a.tcp_seq, 5000u + resp.size());  // not the query's ACK (5000)
  EXPECT_EQ(a.tcp_ack, at + q2.size());
  EXPECT_TRUE(test::checksumsOk(to_a[1]));
}

// The stages run after the engine read the whole burst: a server segment later in the same
// burst must not move the answer's sequence number (real_dns_tcp has this order on one side).
TEST(TcpStreamPipeline, AnswerTakesTheServersSequenceAsOfTheQuery) {
  Harness h(snap());
  handshake(h, 44008);
  const Bytes q = framed("www.ads.example", 0x109);
  Bytes resp = test::dnsCnameResponse("www.ads.example", {}, 0x109);
  resp.insert(resp.begin(), {uint8_t(resp.size() >> 8), uint8_t(resp.size())});
  h.send(0, seg(44008, kTcpAck | kTcpPsh, 1000, 5000, q));
  h.send(0, seg(44008, kTcpAck | kTcpPsh, 5000, 1000 + uint32_t(q.size()), resp, false));
  h.poll();
  auto to_a = h.out(0);
  ASSERT_EQ(to_a.size(), 1u);  // the answer (the server's segment: connection closed)
  EXPECT_EQ(parseFrame(to_a[0]).tcp_seq, 5000u);
}

TEST(TcpStreamPipeline, QueryOnSynGetsSynAckThenAnswer) {
  Harness h(snap());
  const Bytes q = framed("www.ads.example", 0x108);
  h.send(0, seg(44005, kTcpSyn, 999, 0, q));
  h.poll();
  EXPECT_EQ(h.out(1).size(), 0u);  // the server never sees it
  auto to_a = h.out(0);
  ASSERT_EQ(to_a.size(), 2u);
  PacketMeta sa = parseFrame(to_a[0]), an = parseFrame(to_a[1]);
  EXPECT_EQ(sa.tcp_flags, kTcpSyn | kTcpAck);
  EXPECT_EQ(sa.tcp_ack, 1000u + q.size());  // the SYN and its data
  EXPECT_EQ(sa.payload_len, 0u);
  EXPECT_TRUE(test::checksumsOk(to_a[0]));
  EXPECT_EQ(an.tcp_seq, sa.tcp_seq + 1);
  EXPECT_EQ(an.tcp_ack, sa.tcp_ack);
  EXPECT_EQ(an.tcp_flags, kTcpAck | kTcpPsh | kTcpFin);
  EXPECT_EQ(dnsGet16(to_a[1].data() + an.payload_offset + 2), 0x108);
  EXPECT_TRUE(test::checksumsOk(to_a[1]));
}

// One window for the worker: the second connection with data in flight finds none.
TEST(TcpStreamPipeline, WindowExhaustionFollowsTheStagePolicy) {
  for (rules::Policy p : {rules::Policy::kDrop, rules::Policy::kForward}) {
    rules::DataplaneSettings d;
    d.tcp_windows_per_worker = 1;
    d.tcp_dns_fail = p;
    Harness h(snap(&d));
    handshake(h, 44006);
    handshake(h, 44007);
    const bool closed = p == rules::Policy::kDrop;
    const Bytes q1 = framed("one.example", 1);
    const Bytes q2 = framed(closed ? "www.ads.example" : "two.example", 2);
    h.send(0, seg(44006, kTcpAck | kTcpPsh, 1000, 5000, q1));
    h.send(0, seg(44007, kTcpAck | kTcpPsh, 1000, 5000, q2));
    h.poll();
    auto c = h.counters();
    EXPECT_EQ(c.tcp_stream[kTcpNoWindow], 1u);
    if (closed) {
      EXPECT_EQ(drops(h, DropReason::kTcpStreamExhausted), 1u);
      EXPECT_EQ(c.dns[kDnsQueries], 1u);  // q2 was not read
      EXPECT_EQ(h.out(1).size(), 1u);  // q1 only
      // The server acknowledges q1: the window is free again, q2's retransmission gets it.
      h.send(1, seg(44006, kTcpAck, 5000, 1000 + uint32_t(q1.size()), {}, false));
      h.poll();
      h.send(0, seg(44007, kTcpAck | kTcpPsh, 1000, 5000, q2));
      h.poll();
      EXPECT_EQ(h.counters().dns[kDnsBlocked], 1u);
    } else {
      EXPECT_EQ(drops(h, DropReason::kTcpStreamExhausted), 0u);
      EXPECT_EQ(c.dns[kDnsQueries], 2u);  // inspected all the same
      EXPECT_EQ(h.out(1).size(), 2u);
      // Its retransmission cannot be compared (no window): passed, counted.
      h.send(0, seg(44007, kTcpAck | kTcpPsh, 1000, 5000, q2));
      h.poll();
      EXPECT_EQ(h.out(1).size(), 1u);
      EXPECT_EQ(h.counters().tcp_stream[kTcpUnverified], 1u);
    }
  }
}

// DNS's own per-worker buffers (255 query heads split across segments) follow the same
// policy: the 256th connection with a split query head fails closed (dropped, the
// connection closed) or open (passed unread).
TEST(TcpStreamPipeline, DnsHeadBuffersExhaustedFollowTheStagePolicy) {
  for (rules::Policy p : {rules::Policy::kDrop, rules::Policy::kForward}) {
    rules::DataplaneSettings d;
    d.tcp_dns_fail = p;
    Harness h(snap(&d));
    const Bytes q = framed("www.example", 1);
    for (uint16_t k = 0; k < 256; ++k) {
      handshake(h, uint16_t(45000 + k));
      h.send(0, seg(uint16_t(45000 + k), kTcpAck | kTcpPsh, 1000, 5000, part(q, 0, 5)));
      h.poll();
    }
    auto c = h.counters();
    auto last = h.out(1);  // what the 256th segment sent on (handshake() drains the rest)
    ASSERT_EQ(last.size(), 1u);
    EXPECT_EQ(c.dns[kDnsTcpNoBuffer], 1u);
    if (p == rules::Policy::kDrop) {
      EXPECT_EQ(c.drops[static_cast<int>(DropReason::kTcpStreamExhausted)], 1u);
      EXPECT_EQ(c.dns[kDnsTcpClosed], 1u);
      EXPECT_TRUE(parseFrame(last[0]).tcp_flags & kTcpRst);  // the server is reset
    } else {
      EXPECT_EQ(c.dns[kDnsTcpUnsynced], 1u);
      EXPECT_EQ(parseFrame(last[0]).payload_len, 5u);  // the segment itself
    }
    EXPECT_EQ(c.verdicts[static_cast<int>(Verdict::kForward)],
              256u * 3 + (p == rules::Policy::kDrop ? 255u : 256u));
  }
}


// Issue #16 ("no bypass"): the engine takes a segment's bytes before DNS judges them, so a
// query the DNS stage drops is "inspected" for the engine; its retransmission (identical
// bytes, as the client's stack sends when the segment is lost) must not then pass as an
// already-inspected overlap. Every DNS drop of a TCP segment closes the connection
// (dns_tcp_closed): the retransmission is dropped whether it comes in the same burst or a
// later one, and never reaches the server.
Bytes withOpcodeStatus(Bytes v) {  // opcode 2 (STATUS): dns.nonstandard
  v[2 + 2] = uint8_t((v[2 + 2] & 0x87) | (2 << 3));
  return v;
}

size_t payloadFrames(const std::vector<Frame>& fs) {
  size_t n = 0;
  for (const Frame& f : fs) n += parseFrame(f).payload_len != 0;
  return n;
}

TEST(TcpStreamPipeline, RetransmissionOfADroppedQueryNeverReachesTheServer) {
  struct Case {
    const char* what;
    Bytes q;
    bool nonstandard_drop, malformed_drop;
  };
  const Bytes garbage = {0, 4, 0xde, 0xad, 0xbe, 0xef};  // a 4-byte "message": malformed
  const Case cases[] = {
      {"blocked", framed("www.ads.example", 0x201), false, false},
      {"nonstandard", withOpcodeStatus(framed("www.abc.example", 0x202)), true, false},
      {"malformed", garbage, false, true},
  };
  uint16_t sport = 44100;
  for (const Case& c : cases) {
    for (bool same_burst : {false, true}) {
      SCOPED_TRACE(std::string(c.what) + (same_burst ? " same burst" : " later burst"));
      rules::DataplaneSettings ds;
      ds.flow_capacity = 4096;
      rules::DnsModel m = test::adsDnsModel();
      if (c.nonstandard_drop) m.nonstandard = rules::Policy::kDrop;
      if (c.malformed_drop) m.malformed = rules::Policy::kDrop;
      Harness h(test::dnsSnapshot(ds, m));
      ++sport;
      handshake(h, sport);
      h.send(0, seg(sport, kTcpAck | kTcpPsh, 1000, 5000, c.q));
      if (same_burst) h.send(0, seg(sport, kTcpAck | kTcpPsh, 1000, 5000, c.q));
      h.poll();
      EXPECT_EQ(payloadFrames(h.out(1)), 0u);  // at most the RST to the server
      h.out(0);
      const uint64_t judged = h.counters().dns[kDnsMessages];
      EXPECT_EQ(judged, 1u);
      // The retransmission (and one carrying more bytes after it) in a later burst.
      h.send(0, seg(sport, kTcpAck | kTcpPsh, 1000, 5000, c.q));
      Bytes more = c.q;
      more.insert(more.end(), {0, 1, 0});
      h.send(0, seg(sport, kTcpAck | kTcpPsh, 1000, 5000, more));
      h.poll();
      EXPECT_EQ(payloadFrames(h.out(1)), 0u);
      EXPECT_EQ(drops(h, DropReason::kDnsTcpClosed), same_burst ? 3u : 2u);
      EXPECT_EQ(h.counters().dns[kDnsMessages], judged);  // nothing read past the close
    }
  }
}


// A DNS-over-TCP connection picked up mid-stream cannot be framed (the first bytes seen may be
// inside a message). dns.tcp_midstream FORWARD (the default, from dns.malformed) passes it
// unread, counted; DROP drops its data, resets both ends and closes it: a blocked query sent
// on a connection the appliance did not see open never reaches the server.
TEST(TcpStreamPipeline, DnsMidstreamConnectionFollowsItsPolicy) {
  for (rules::Policy p : {rules::Policy::kForward, rules::Policy::kDrop}) {
    SCOPED_TRACE(p == rules::Policy::kDrop ? "DROP" : "FORWARD");
    rules::DataplaneSettings ds;
    ds.flow_capacity = 4096;
    ds.frag_max_datagrams = 64;
    rules::DnsModel model = test::adsDnsModel();
    model.tcp_midstream = p;
    Harness h(test::dnsSnapshot(ds, model));
    const Bytes q = framed("www.ads.example", 0x301);
    // No handshake: the first packet of the connection carries data (ACK set).
    h.send(0, seg(46000, kTcpAck | kTcpPsh, 1000, 5000, q));
    h.poll();
    auto c = h.counters();
    EXPECT_EQ(c.dns[kDnsTcpUnsynced], 1u);
    EXPECT_EQ(c.dns[kDnsBlocked], 0u);  // never read
    auto to_server = h.out(1);
    auto to_client = h.out(0);
    if (p == rules::Policy::kForward) {
      ASSERT_EQ(to_server.size(), 1u);
      EXPECT_EQ(parseFrame(to_server[0]).payload_len, q.size());
      EXPECT_EQ(to_client.size(), 0u);
    } else {
      EXPECT_EQ(drops(h, DropReason::kDnsTcpMidstream), 1u);
      EXPECT_STREQ(dropReasonName(DropReason::kDnsTcpMidstream), "dns_tcp_midstream");
      ASSERT_EQ(to_server.size(), 1u);  // a RST, not the query
      EXPECT_TRUE(parseFrame(to_server[0]).tcp_flags & kTcpRst);
      EXPECT_EQ(parseFrame(to_server[0]).payload_len, 0u);
      ASSERT_EQ(to_client.size(), 1u);
      EXPECT_TRUE(parseFrame(to_client[0]).tcp_flags & kTcpRst);
      EXPECT_EQ(c.dns[kDnsTcpClosed], 1u);
      // Its retransmission, and anything later on the connection, is dropped too.
      h.send(0, seg(46000, kTcpAck | kTcpPsh, 1000, 5000, q));
      h.poll();
      EXPECT_EQ(h.out(1).size(), 0u);
      EXPECT_EQ(drops(h, DropReason::kDnsTcpClosed), 1u);
    }
  }
}

}  // namespace
}  // namespace dpu::dp
