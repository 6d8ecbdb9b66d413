// The TCP stream normalization engine on its own (no EAL): in-order delivery, out-of-order
// segments, overlaps with same / different bytes, acknowledged bytes, window exhaustion under
// both fail policies, data on SYN, sequence wrap, and the software checksum.
#include "dataplane/normalize/tcp_stream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "dataplane/packet/parser.h"
#include "tests/util/packet_builder.h"

namespace dpu::dp {
namespace {

constexpr uint8_t kSyn = 0x02, kRst = 0x04, kAck = 0x10;

struct Flow {
  // reorder_bytes 0: segments beyond a hole are dropped (dataplane.tcp.reorder_bytes 0).
  explicit Flow(uint32_t window_bytes = 64, uint32_t windows = 4, uint32_t reorder_bytes = 0,
                uint32_t reorder_buffers = 0)
      : pool(window_bytes, windows, reorder_bytes, reorder_buffers) {}
  TcpStreamPool pool;
  TcpStreamDir c, s;  // client -> server, server -> client
  std::string delivered;  // the client's stream as handed out

  TcpSegResult send(uint32_t seq, const std::string& data, uint8_t flags = kAck,
                    bool fail_closed = false, uint32_t ack = 0, bool same_run = false) {
    if (!same_run) pool.beginRun();  // one segment per run of the stream stage
    TcpSegment seg;
    seg.seq = seq;
    seg.ack = ack;
    seg.flags = flags;
    seg.payload = reinterpret_cast<const uint8_t*>(data.data());
    seg.len = static_cast<uint32_t>(data.size());
    TcpSegResult r = tcpStreamSegment(pool, c, s, seg, fail_closed);
    if (r.verdict == TcpSegVerdict::kAccept) {
      if (r.kept == 0) {
        EXPECT_EQ(r.data, seg.payload + r.off);  // from the segment itself
      }
      delivered.append(reinterpret_cast<const char*>(r.data), r.len);
    }
    return r;
  }
  // The server acknowledges the client's bytes up to `ack` (and sends nothing).
  void serverAck(uint32_t ack, uint32_t server_seq = 7000) {
    pool.beginRun();
    TcpSegment seg;
    seg.seq = server_seq;
    seg.ack = ack;
    seg.flags = kAck;
    EXPECT_EQ(tcpStreamSegment(pool, s, c, seg, false).verdict, TcpSegVerdict::kAccept);
  }
};

TEST(TcpStreamTest, InOrderBytesAreDeliveredOnceWithTheirSequenceNumbers) {
  Flow f;
  EXPECT_EQ(f.send(1000, "", kSyn).verdict, TcpSegVerdict::kAccept);
  TcpSegResult r = f.send(1001, "hello");
  EXPECT_EQ(r.verdict, TcpSegVerdict::kAccept);
  EXPECT_EQ(r.off, 0u);
  EXPECT_EQ(r.len, 5u);
  EXPECT_EQ(r.seq, 1001u);
  r = f.send(1006, " world");
  EXPECT_EQ(r.seq, 1006u);
  EXPECT_EQ(f.delivered, "hello world");
  EXPECT_EQ(f.c.next_seq, 1012u);
}

TEST(TcpStreamTest, WithoutReorderBuffersASegmentAheadOfAGapIsDropped) {
  Flow f;
  f.send(1000, "", kSyn);
  EXPECT_EQ(f.send(1006, "world").verdict, TcpSegVerdict::kOutOfOrder);
  EXPECT_EQ(f.c.next_seq, 1001u);  // nothing of it entered the stream
  EXPECT_EQ(f.send(1001, "hello").verdict, TcpSegVerdict::kAccept);
  EXPECT_EQ(f.send(1006, "world").verdict, TcpSegVerdict::kAccept);  // the retransmission
  EXPECT_EQ(f.delivered, "helloworld");
}

TEST(TcpStreamTest, IdenticalRetransmissionPassesWithNothingNew) {
  Flow f;
  f.send(1000, "", kSyn);
  f.send(1001, "hello");
  TcpSegResult r = f.send(1001, "hello");
  EXPECT_EQ(r.verdict, TcpSegVerdict::kAccept);
  EXPECT_EQ(r.len, 0u);
  EXPECT_EQ(r.unverified, 0u);
  EXPECT_EQ(f.delivered, "hello");
}

TEST(TcpStreamTest, RetransmissionWithDifferentBytesIsRefusedAndChangesNothing) {
  Flow f;
  f.send(1000, "", kSyn);
  f.send(1001, "hello");
  EXPECT_EQ(f.send(1003, "LLo").verdict, TcpSegVerdict::kOverlapDifferent);
  EXPECT_EQ(f.c.next_seq, 1006u);
  EXPECT_EQ(f.send(1003, "llo").verdict, TcpSegVerdict::kAccept);
}

TEST(TcpStreamTest, RepacketizedRetransmissionDeliversOnlyTheNewTail) {
  Flow f;
  f.send(1000, "", kSyn);
  f.send(1001, "hello");
  TcpSegResult r = f.send(1004, "lo world");
  EXPECT_EQ(r.verdict, TcpSegVerdict::kAccept);
  EXPECT_EQ(r.off, 2u);
  EXPECT_EQ(r.len, 6u);
  EXPECT_EQ(r.seq, 1006u);
  EXPECT_EQ(f.delivered, "hello world");
  // Old bytes that differ, even with new bytes after them: refused, the new bytes too.
  EXPECT_EQ(f.send(1010, "LD!!").verdict, TcpSegVerdict::kOverlapDifferent);
  EXPECT_EQ(f.delivered, "hello world");
}

TEST(TcpStreamTest, AcknowledgedBytesAreNotComparedAndTheWindowGoesBack) {
  Flow f(64, 1);
  f.send(1000, "", kSyn);
  f.send(1001, "hello");
  EXPECT_EQ(f.pool.available(), 0u);
  f.serverAck(1006);
  EXPECT_EQ(f.pool.available(), 1u);  // every inspected byte acknowledged
  // The receiver discards them: different bytes there pass, with nothing new.
  TcpSegResult r = f.send(1001, "HELLO", kAck, /*fail_closed=*/true);
  EXPECT_EQ(r.verdict, TcpSegVerdict::kAccept);
  EXPECT_EQ(r.len, 0u);
  EXPECT_EQ(r.unverified, 0u);
  // An ACK beyond the inspected bytes acknowledges only those.
  f.serverAck(5000);
  EXPECT_EQ(f.c.acked, 1006u);
}

TEST(TcpStreamTest, PartlyAcknowledgedOverlapComparesTheUnacknowledgedPart) {
  Flow f;
  f.send(1000, "", kSyn);
  f.send(1001, "hello");
  f.send(1006, "world");
  f.serverAck(1006);
  EXPECT_EQ(f.send(1001, "HELLOworlD").verdict, TcpSegVerdict::kOverlapDifferent);
  EXPECT_EQ(f.send(1001, "HELLOworld!").verdict, TcpSegVerdict::kAccept);
  EXPECT_EQ(f.delivered, "helloworld!");
}

TEST(TcpStreamTest, OverlapOlderThanTheWindowFollowsTheFailPolicy) {
  Flow f(16, 2);
  f.send(1000, "", kSyn);
  const std::string data = "0123456789abcdefghijklmnopqrstuv";  // 32 bytes, window holds 16
  f.send(1001, data);
  // The last 16 bytes are compared.
  EXPECT_EQ(f.send(1001 + 16, data.substr(16)).unverified, 0u);
  EXPECT_EQ(f.send(1001 + 16, "X" + data.substr(17)).verdict, TcpSegVerdict::kOverlapDifferent);
  // The first 16 cannot be: fail_closed drops, fail_open passes them unverified.
  EXPECT_EQ(f.send(1001, data.substr(0, 20), kAck, true).verdict, TcpSegVerdict::kFailClosed);
  TcpSegResult r = f.send(1001, data.substr(0, 20), kAck, false);
  EXPECT_EQ(r.verdict, TcpSegVerdict::kAccept);
  EXPECT_EQ(r.unverified, 16u);
  // Still compared where it can be: a difference in the window's part is refused.
  EXPECT_EQ(f.send(1001, data.substr(0, 18) + "!", kAck, false).verdict,
            TcpSegVerdict::kOverlapDifferent);
}

TEST(TcpStreamTest, NoFreeWindowIsReportedOnceAndFollowsTheFailPolicy) {
  TcpStreamPool pool(64, 1);
  TcpStreamDir a, a_peer, b, b_peer;
  const std::string x = "abcd";
  TcpSegment s;
  s.flags = kAck;
  s.payload = reinterpret_cast<const uint8_t*>(x.data());
  s.len = 4;
  s.seq = 100;
  EXPECT_EQ(tcpStreamSegment(pool, a, a_peer, s, true).verdict, TcpSegVerdict::kAccept);
  s.seq = 500;
  TcpSegResult r = tcpStreamSegment(pool, b, b_peer, s, true);  // pool empty
  EXPECT_EQ(r.verdict, TcpSegVerdict::kFailClosed);
  EXPECT_TRUE(r.no_window);
  EXPECT_EQ(b.next_seq, 500u);  // not taken in
  r = tcpStreamSegment(pool, b, b_peer, s, false);
  EXPECT_EQ(r.verdict, TcpSegVerdict::kAccept);
  EXPECT_FALSE(r.no_window);  // reported once
  EXPECT_EQ(r.len, 4u);
  // Without a window its retransmission cannot be compared.
  r = tcpStreamSegment(pool, b, b_peer, s, false);
  EXPECT_EQ(r.unverified, 4u);
  EXPECT_EQ(tcpStreamSegment(pool, b, b_peer, s, true).verdict, TcpSegVerdict::kFailClosed);
  // Once the first direction is released, the second gets the window.
  tcpStreamRelease(pool, a);
  s.seq = 504;
  r = tcpStreamSegment(pool, b, b_peer, s, true);
  EXPECT_EQ(r.verdict, TcpSegVerdict::kAccept);
  EXPECT_EQ(b.win, 0u);
}

TEST(TcpStreamTest, DataOnSynIsStreamDataAfterTheIsn) {
  Flow f;
  TcpSegResult r = f.send(5000, "query", kSyn);
  EXPECT_EQ(r.verdict, TcpSegVerdict::kAccept);
  EXPECT_EQ(r.seq, 5001u);
  EXPECT_EQ(r.len, 5u);
  EXPECT_EQ(f.c.next_seq, 5006u);
  // A retransmitted SYN with other data is an overlap with different bytes.
  EXPECT_EQ(f.send(5000, "QUERY", kSyn).verdict, TcpSegVerdict::kOverlapDifferent);
  EXPECT_EQ(f.send(5000, "query", kSyn).verdict, TcpSegVerdict::kAccept);
  EXPECT_EQ(f.delivered, "query");
}

TEST(TcpStreamTest, SequenceNumbersWrap) {
  Flow f(16, 2);
  f.send(0xfffffffdu, "", kSyn);  // first data byte 0xfffffffe
  EXPECT_EQ(f.send(0x00000002u, "ef").verdict, TcpSegVerdict::kOutOfOrder);
  TcpSegResult r = f.send(0xfffffffeu, "abcd");  // across the wrap
  EXPECT_EQ(r.verdict, TcpSegVerdict::kAccept);
  EXPECT_EQ(r.seq, 0xfffffffeu);
  EXPECT_EQ(f.c.next_seq, 2u);
  EXPECT_EQ(f.send(0x00000002u, "ef").verdict, TcpSegVerdict::kAccept);
  // Overlaps across the wrap are compared from the ring.
  EXPECT_EQ(f.send(0xffffffffu, "bcdX").verdict, TcpSegVerdict::kOverlapDifferent);
  r = f.send(0xffffffffu, "bcdefgh");
  EXPECT_EQ(r.verdict, TcpSegVerdict::kAccept);
  EXPECT_EQ(r.len, 2u);
  EXPECT_EQ(f.delivered, "abcdefgh");
  // Acknowledgment across the wrap.
  f.serverAck(0x00000001u);
  EXPECT_EQ(f.c.acked, 1u);
  EXPECT_EQ(f.send(0xfffffffeu, "ABCd").verdict, TcpSegVerdict::kAccept);  // acked part differs
}

TEST(TcpStreamTest, WindowEdges) {
  Flow f(16, 2);
  f.send(1000, "", kSyn);
  // More than 2^31 ahead reads as far behind: all old bytes, none in the window.
  TcpSegResult r = f.send(1001 + 0x80000000u, "zz", kAck, true);
  EXPECT_EQ(r.verdict, TcpSegVerdict::kFailClosed);
  EXPECT_EQ(f.send(1001 + 0x7fffffffu, "zz").verdict, TcpSegVerdict::kOutOfOrder);
  // Exactly the ring size, then a segment ending at the ring's edge.
  const std::string w16 = "0123456789ABCDEF";
  EXPECT_EQ(f.send(1001, w16).len, 16u);
  EXPECT_EQ(f.send(1001, w16, kAck, true).verdict, TcpSegVerdict::kAccept);
  EXPECT_EQ(f.send(1001, "0123456789ABCDEx", kAck, true).verdict,
            TcpSegVerdict::kOverlapDifferent);
  // A segment longer than the ring: its last 16 bytes are kept.
  const std::string big = std::string(40, 'q') + "tail-of-the-seg!";
  EXPECT_EQ(f.send(1017, big).len, 56u);
  EXPECT_EQ(f.send(1017 + 40, "tail-of-the-seg!", kAck, true).verdict, TcpSegVerdict::kAccept);
  EXPECT_EQ(f.send(1017 + 39, "qtail", kAck, true).verdict, TcpSegVerdict::kFailClosed);
}

TEST(TcpStreamTest, OneByteSegmentsInAnyOrder) {
  Flow f;
  f.send(1000, "", kSyn);
  const std::string q = "blocked.example";
  // Reverse order: each is out of order until its predecessor arrived.
  for (size_t i = q.size(); i-- > 1;)
    EXPECT_EQ(f.send(1001 + uint32_t(i), q.substr(i, 1)).verdict, TcpSegVerdict::kOutOfOrder);
  for (size_t i = 0; i < q.size(); ++i)
    EXPECT_EQ(f.send(1001 + uint32_t(i), q.substr(i, 1)).verdict, TcpSegVerdict::kAccept);
  EXPECT_EQ(f.delivered, q);
}

TEST(TcpStreamTest, MidstreamStartsAtTheFirstSegmentAndRstPayloadIsNotData) {
  Flow f;
  EXPECT_EQ(f.send(42, "abc").seq, 42u);
  TcpSegResult r = f.send(45, "diagnostic", kRst | kAck);
  EXPECT_EQ(r.verdict, TcpSegVerdict::kAccept);
  EXPECT_EQ(r.len, 0u);
  EXPECT_EQ(f.c.next_seq, 45u);
}

// --- Reorder buffers: bytes beyond a hole kept, handed out with the hole's filler ---

TEST(TcpStreamTest, OutOfOrderBytesAreKeptAndHandedOutWithTheHoleFiller) {
  Flow f(64, 4, 256, 2);
  f.send(1000, "", kSyn);
  TcpSegResult r = f.send(1006, "world");
  EXPECT_EQ(r.verdict, TcpSegVerdict::kKept);  // forwarded: the receiver cannot use it yet
  EXPECT_EQ(r.len, 0u);
  EXPECT_EQ(f.c.next_seq, 1001u);
  EXPECT_EQ(f.pool.reorderAvailable(), 1u);
  r = f.send(1001, "hello");
  EXPECT_EQ(r.verdict, TcpSegVerdict::kAccept);
  EXPECT_EQ(r.seq, 1001u);
  EXPECT_EQ(r.len, 10u);
  EXPECT_EQ(r.kept, 5u);
  EXPECT_EQ(f.delivered, "helloworld");
  EXPECT_EQ(f.c.next_seq, 1011u);
  // Given back after the run that read it, not before (the stages read the bytes after the
  // engine has gone through the burst).
  EXPECT_EQ(f.pool.reorderAvailable(), 1u);
  f.pool.beginRun();
  EXPECT_EQ(f.pool.reorderAvailable(), 2u);
  // The retransmission of kept bytes is an identical overlap: nothing new; and inspected
  // bytes are in the comparison window.
  r = f.send(1006, "world");
  EXPECT_EQ(r.verdict, TcpSegVerdict::kAccept);
  EXPECT_EQ(r.len, 0u);
  EXPECT_EQ(f.send(1006, "WORLD").verdict, TcpSegVerdict::kOverlapDifferent);
  EXPECT_EQ(f.delivered, "helloworld");
}

TEST(TcpStreamTest, OneByteSegmentsInReverseOrderAreHandedOutOnceAllTogether) {
  Flow f(64, 4, 256, 1);
  f.send(1000, "", kSyn);
  const std::string q = "blocked.example";
  for (size_t i = q.size(); i-- > 1;)
    EXPECT_EQ(f.send(1001 + uint32_t(i), q.substr(i, 1)).verdict, TcpSegVerdict::kKept);
  EXPECT_EQ(f.delivered, "");
  TcpSegResult r = f.send(1001, q.substr(0, 1));
  EXPECT_EQ(r.len, q.size());
  EXPECT_EQ(f.delivered, q);
  for (size_t i = 0; i < q.size(); ++i) EXPECT_EQ(f.send(1001 + uint32_t(i), q.substr(i, 1)).len, 0u);
  EXPECT_EQ(f.delivered, q);
}

TEST(TcpStreamTest, KeptBytesRepeatedWithOtherBytesFollowTheOverlapPolicy) {
  Flow f(64, 4, 256, 1);
  f.send(1000, "", kSyn);
  EXPECT_EQ(f.send(1011, "KEPT").verdict, TcpSegVerdict::kKept);
  // Another copy of kept bytes with other content: refused (the first copy was forwarded).
  EXPECT_EQ(f.send(1012, "XPT").verdict, TcpSegVerdict::kOverlapDifferent);
  EXPECT_EQ(f.send(1009, "abKEPx").verdict, TcpSegVerdict::kOverlapDifferent);
  EXPECT_EQ(f.send(1009, "abKE").verdict, TcpSegVerdict::kKept);  // same bytes: joins the run
  // A filler that reaches the kept bytes with other bytes there: refused, nothing handed out.
  EXPECT_EQ(f.send(1001, "0123456789KEPX").verdict, TcpSegVerdict::kOverlapDifferent);
  EXPECT_EQ(f.c.next_seq, 1001u);
  TcpSegResult r = f.send(1001, "01234567");  // fills the hole up to the run (1009)
  EXPECT_EQ(r.len, 14u);
  EXPECT_EQ(f.delivered, "01234567abKEPT");
}

TEST(TcpStreamTest, AFillerThatCoversEveryKeptByteIsHandedOutFromItself) {
  Flow f(64, 4, 256, 1);
  f.send(1000, "", kSyn);
  f.send(1004, "de");
  f.send(1007, "g");
  TcpSegResult r = f.send(1001, "abcdefghij");
  EXPECT_EQ(r.verdict, TcpSegVerdict::kAccept);
  EXPECT_EQ(r.off, 0u);
  EXPECT_EQ(r.len, 10u);
  EXPECT_EQ(r.kept, 3u);
  EXPECT_EQ(f.delivered, "abcdefghij");
  f.pool.beginRun();
  EXPECT_EQ(f.pool.reorderAvailable(), 1u);
}

TEST(TcpStreamTest, AFillerReachingPartOfTheKeptRunsLeavesTheRestKept) {
  Flow f(64, 4, 256, 1);
  f.send(1000, "", kSyn);
  f.send(1004, "de");
  f.send(1010, "jk");
  TcpSegResult r = f.send(1001, "abc");
  EXPECT_EQ(r.len, 5u);
  EXPECT_EQ(f.delivered, "abcde");
  EXPECT_EQ(f.send(1006, "fg").len, 2u);  // in order, before the kept run: from itself
  EXPECT_EQ(f.delivered, "abcdefg");
  EXPECT_EQ(f.send(1008, "hi").len, 4u);
  EXPECT_EQ(f.delivered, "abcdefghijk");
}

TEST(TcpStreamTest, NoRoomToKeepFollowsTheFailPolicy) {
  Flow f(64, 4, 16, 1);
  f.send(1000, "", kSyn);
  // More than reorder_bytes past the hole.
  TcpSegResult r = f.send(1011, "0123456789", kAck, /*fail_closed=*/true);
  EXPECT_EQ(r.verdict, TcpSegVerdict::kFailClosed);
  EXPECT_TRUE(r.reorder_full);
  EXPECT_EQ(f.pool.reorderAvailable(), 1u);  // not held for nothing
  // No free buffer: another direction holds the only one.
  TcpStreamDir other, other_peer;
  const std::string x = "xy";
  TcpSegment s;
  s.flags = kSyn;
  s.seq = 50;
  tcpStreamSegment(f.pool, other, other_peer, s, true);
  s.flags = kAck;
  s.seq = 60;
  s.payload = reinterpret_cast<const uint8_t*>(x.data());
  s.len = 2;
  EXPECT_EQ(tcpStreamSegment(f.pool, other, other_peer, s, true).verdict, TcpSegVerdict::kKept);
  r = f.send(1003, "cd", kAck, true);
  EXPECT_EQ(r.verdict, TcpSegVerdict::kFailClosed);
  EXPECT_TRUE(r.reorder_full);
  tcpStreamRelease(f.pool, other);
  EXPECT_EQ(f.send(1003, "cd", kAck, true).verdict, TcpSegVerdict::kKept);
  EXPECT_EQ(f.send(1001, "ab", kAck, true).len, 4u);
  EXPECT_EQ(f.delivered, "abcd");
}

TEST(TcpStreamTest, MoreSeparateRunsThanTheBufferTracksFollowTheFailPolicy) {
  Flow f(64, 4, 1024, 1);
  f.send(1000, "", kSyn);
  std::string expect = "_";
  for (uint32_t k = 0; k < TcpStreamPool::kIslands; ++k)
    EXPECT_EQ(f.send(1002 + 2 * k, "x", kAck, true).verdict, TcpSegVerdict::kKept);
  EXPECT_EQ(f.send(1002 + 2 * TcpStreamPool::kIslands, "x", kAck, true).verdict,
            TcpSegVerdict::kFailClosed);
  // Filling one gap between runs joins two of them: room again.
  EXPECT_EQ(f.send(1003, "y", kAck, true).verdict, TcpSegVerdict::kKept);
  EXPECT_EQ(f.send(1002 + 2 * TcpStreamPool::kIslands, "x", kAck, true).verdict,
            TcpSegVerdict::kKept);
}

TEST(TcpStreamTest, UnkeptBytesUnderFailOpenThenTheReceiversAckIsAGap) {
  Flow f(64, 4, 16, 1);
  f.send(1000, "", kSyn);
  TcpSegResult r = f.send(1021, "far-ahead", kAck, /*fail_closed=*/false);
  EXPECT_EQ(r.verdict, TcpSegVerdict::kAccept);  // passed without being kept
  EXPECT_EQ(r.unkept, 9u);
  EXPECT_TRUE(r.reorder_full);
  EXPECT_EQ(r.len, 0u);
  EXPECT_EQ(f.send(1001, "abc").len, 3u);
  // The receiver holds bytes up to 1030 the engine never had: the stream resumes there.
  f.serverAck(1030);
  EXPECT_EQ(f.c.next_seq, 1030u);
  r = f.send(1030, "next");
  EXPECT_TRUE(r.gap);
  EXPECT_EQ(r.seq, 1030u);
  EXPECT_EQ(f.delivered, "abcnext");
  EXPECT_FALSE(f.send(1034, "more").gap);  // reported once
}

TEST(TcpStreamTest, AnAckBeyondTheInspectedBytesIsNoGapWhenNothingPassedUnkept) {
  Flow f(64, 4, 256, 1);
  f.send(1000, "", kSyn);
  f.send(1001, "abc");
  f.send(1010, "kept");
  f.serverAck(1100);  // (a forged or confused ACK) acknowledges only what was inspected
  EXPECT_EQ(f.c.next_seq, 1004u);
  EXPECT_EQ(f.c.acked, 1004u);
  TcpSegResult r = f.send(1004, "defghi");
  EXPECT_FALSE(r.gap);
  EXPECT_EQ(f.delivered, "abcdefghikept");
}

TEST(TcpStreamTest, AFinBeyondAHoleEndsTheStreamWhenTheHoleFills) {
  {
    Flow f(64, 4, 256, 1);
    f.send(1000, "", kSyn);
    EXPECT_EQ(f.send(1006, "world", kAck | 0x01).verdict, TcpSegVerdict::kKept);
    TcpSegResult r = f.send(1001, "hello");
    EXPECT_EQ(r.len, 10u);
    EXPECT_TRUE(r.fin);
  }
  {
    Flow f(64, 4, 256, 1);
    f.send(1000, "", kSyn);
    EXPECT_EQ(f.send(1006, "", kAck | 0x01).verdict, TcpSegVerdict::kAccept);  // bare FIN
    TcpSegResult r = f.send(1001, "hello");
    EXPECT_EQ(r.len, 5u);
    EXPECT_TRUE(r.fin);
    f.pool.beginRun();
    EXPECT_EQ(f.pool.reorderAvailable(), 1u);
  }
  {
    Flow f(64, 4, 256, 1);
    f.send(1000, "", kSyn);
    EXPECT_TRUE(f.send(1001, "hello", kAck | 0x01).fin);  // in order
    EXPECT_FALSE(f.send(1001, "hell", kAck | 0x01).fin);  // not at the end
  }
}

TEST(TcpStreamTest, KeptBytesMoveDownOnlyAfterTheRunThatReadThem) {
  // Stream "ABCDEFGHIJKLMNOPQR" from 1001; a 16-byte reorder buffer.
  Flow f(64, 4, 16, 1);
  f.send(1000, "", kSyn);
  f.send(1005, "EFGH");
  f.send(1013, "MN");
  f.send(1001, "ABCD");  // hands out ABCDEFGH from the buffer (base 1001); MN stays kept
  EXPECT_EQ(f.delivered, "ABCDEFGH");
  // 1019 - 1001 > 16: the kept bytes move down to next_seq (1009) first, in a later run.
  EXPECT_EQ(f.send(1017, "QR", kAck, true).verdict, TcpSegVerdict::kKept);
  EXPECT_EQ(f.send(1009, "IJKL", kAck, true).len, 6u);
  EXPECT_EQ(f.send(1015, "OP", kAck, true).len, 4u);
  EXPECT_EQ(f.delivered, "ABCDEFGHIJKLMNOPQR");
  // In the run of a hand-out the buffer is not moved (the stages still read those bytes).
  Flow g(64, 4, 16, 1);
  g.send(1000, "", kSyn);
  g.send(1005, "EFGH");
  g.send(1013, "MN");
  g.send(1001, "ABCD");
  TcpSegResult r = g.send(1017, "QR", kAck, true, 0, /*same_run=*/true);
  EXPECT_EQ(r.verdict, TcpSegVerdict::kFailClosed);
  EXPECT_TRUE(r.reorder_full);
  EXPECT_EQ(g.send(1017, "QR", kAck, true).verdict, TcpSegVerdict::kKept);  // next run
  EXPECT_EQ(g.delivered, "ABCDEFGH");
}

TEST(TcpStreamTest, KeptBytesAcrossTheSequenceWrap) {
  Flow f(16, 2, 64, 1);
  f.send(0xfffffffdu, "", kSyn);  // first data byte 0xfffffffe
  EXPECT_EQ(f.send(0x00000002u, "ef").verdict, TcpSegVerdict::kKept);
  TcpSegResult r = f.send(0xfffffffeu, "abcd");
  EXPECT_EQ(r.len, 6u);
  EXPECT_EQ(f.delivered, "abcdef");
  EXPECT_EQ(f.c.next_seq, 4u);
}

// Property: any segmentation of a stream, delivered in any order with duplicates, hands out
// the stream exactly once, in order, when the buffer is large enough.
TEST(TcpStreamTest, AnySegmentOrderHandsOutTheStreamOnce) {
  uint32_t rng = 12345;
  auto next = [&] { rng = rng * 1103515245u + 12345u; return rng >> 8; };
  int complete = 0;
  for (int round = 0; round < 200; ++round) {
    std::string stream;
    const uint32_t n = 1 + next() % 600;
    for (uint32_t k = 0; k < n; ++k) stream.push_back(char('a' + next() % 26));
    struct Seg { uint32_t off, len; };
    std::vector<Seg> segs;
    for (uint32_t off = 0; off < n;) {
      const uint32_t len = std::min<uint32_t>(n - off, 1 + next() % 40);
      segs.push_back({off, len});
      if (next() % 4 == 0) segs.push_back({off, len});  // duplicate
      off += len;
    }
    for (size_t k = segs.size(); k > 1; --k) std::swap(segs[k - 1], segs[next() % k]);
    const uint32_t isn = next();
    Flow f(1024, 4, 1024, 2);
    f.send(isn, "", kSyn);
    bool refused = false;
    for (const Seg& s : segs) {
      TcpSegResult r = f.send(isn + 1 + s.off, stream.substr(s.off, s.len), kAck, true, 0,
                              next() % 2 == 0);
      ASSERT_NE(r.verdict, TcpSegVerdict::kOverlapDifferent) << round;
      if (r.verdict == TcpSegVerdict::kFailClosed) {
        // Only when more runs than tracked or the same-run rule.
        ASSERT_TRUE(r.reorder_full) << round;
        refused = true;
      }
    }
    if (!refused) {
      ASSERT_EQ(f.delivered, stream) << round;
      ++complete;
    }
    // The sender retransmits what was refused (here: everything, once).
    f.send(isn + 1, stream, kAck, true);
    ASSERT_EQ(f.delivered, stream) << round;
  }
  EXPECT_GT(complete, 100);  // most rounds need no retransmission
}

TEST(TcpStreamTest, ChecksumVerification) {
  for (bool v6 : {false, true}) {
    for (size_t n : {0u, 1u, 7u, 64u, 1001u}) {
      test::PacketBuilder pb;
      if (v6) pb.ipv6("2001:db8::1", "2001:db8::2").ipv6DestOpts(8);
      else pb.ipv4("10.0.0.1", "10.0.0.2").ipv4Options({1, 1, 1, 1});
      pb.tcp(1234, 53, kAck, 0xdeadbeef, 42).payload(std::string(n, 'x') + "y");
      test::Frame good = pb.build();
      test::Frame bad = pb.corruptL4Checksum().build();
      for (const test::Frame* fr : {&good, &bad}) {
        PacketMeta m;
        ASSERT_EQ(parsePacket(fr->data(), uint32_t(fr->size()), m), ParseStatus::kOk);
        const uint8_t* ip = fr->data() + m.l3_offset;
        const uint32_t l4_len = m.l3_len - (m.l4_offset - m.l3_offset);
        EXPECT_EQ(tcpChecksumOk(ip, v6, fr->data() + m.l4_offset, l4_len), fr == &good)
            << "v6 " << v6 << " n " << n;
      }
    }
  }
}

}  // namespace
}  // namespace dpu::dp
