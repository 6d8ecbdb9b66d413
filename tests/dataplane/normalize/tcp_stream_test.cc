// The TCP stream normalization engine on its own (no EAL): in-order delivery, out-of-order
// segments, overlaps with same / different bytes, acknowledged bytes, window exhaustion under
// both fail policies, data on SYN, sequence wrap, and the software checksum.
#include "dataplane/normalize/tcp_stream.h"

#include <gtest/gtest.h>

#include <string>

#include "dataplane/packet/parser.h"
#include "tests/util/packet_builder.h"

namespace dpu::dp {
namespace {

constexpr uint8_t kSyn = 0x02, kRst = 0x04, kAck = 0x10;

struct Flow {
  explicit Flow(uint32_t window_bytes = 64, uint32_t windows = 4) : pool(window_bytes, windows) {}
  TcpStreamPool pool;
  TcpStreamDir c, s;  // client -> server, server -> client
  std::string delivered;  // the client's stream as handed out

  TcpSegResult send(uint32_t seq, const std::string& data, uint8_t flags = kAck,
                    bool fail_closed = false, uint32_t ack = 0) {
    TcpSegment seg;
    seg.seq = seq;
    seg.ack = ack;
    seg.flags = flags;
    seg.payload = reinterpret_cast<const uint8_t*>(data.data());
    seg.len = static_cast<uint32_t>(data.size());
    TcpSegResult r = tcpStreamSegment(pool, c, s, seg, fail_closed);
    if (r.verdict == TcpSegVerdict::kAccept) delivered += data.substr(r.off, r.len);
    return r;
  }
  // The server acknowledges the client's bytes up to `ack` (and sends nothing).
  void serverAck(uint32_t ack, uint32_t server_seq = 7000) {
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

TEST(TcpStreamTest, SegmentAheadOfAGapIsDroppedAndAcceptedOnceTheGapIsFilled) {
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
