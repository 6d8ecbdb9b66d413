// --- http --- HTTP files through the real worker path (Harness), issue 17: the hold-back of a
// file's last packet (docs/http.md "Verdicts"). A rule that can only be decided at the file's
// end (it reads filesize, or its string matches at the end of the data) drops the file's last
// data packet: it was held until the end (the last chunk, the server's FIN) came. A clean
// twin passes whole, byte-identical and in order; the hold's timeout, retransmissions of held
// bytes, the pool's exhaustion and the flow's end are each accounted for.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "dataplane/api/dataplane.h"
#include "rules/compile/yara_translate.h"
#include "tests/dataplane/pipeline/harness.h"
#include "tests/util/packet_builder.h"

namespace dpu::dp {
namespace {

using test::Frame;
using test::PacketBuilder;

// small_exe reads filesize: decided at the file's end only. evil_end: a regex anchored at
// the end of the data (YARA's `$`): true at the file's end only.
constexpr const char* kRules = R"(
rule small_exe { meta: action = "drop" condition: uint16(0) == 0x5A4D and filesize < 3000 }
rule evil_end { meta: action = "drop" strings: $e = /EVIL-TRAILER$/ condition: $e }
)";

std::unique_ptr<rules::Snapshot> httpSnapshot(uint32_t hold_slots = 64,
                                              rules::Policy dpi_fail = rules::Policy::kForward,
                                              bool hold = true) {
  rules::DpiModel m;
  m.enabled = true;
  m.sources.push_back({"t", kRules});
  m.streams_per_worker = 64;
  m.http.enabled = true;
  m.http.ports = {80};
  m.http.flow_slots_per_worker = 16;
  m.http.hold_slots_per_worker = hold_slots;
  m.http.hold_last_packet = hold;
  rules::ConfigErrorList errs;
  auto c = rules::compileDpi(m, errs);
  EXPECT_TRUE(c.ok()) << c.status();
  auto s = std::make_unique<rules::Snapshot>();
  s->dataplane.flow_capacity = 1024;
  s->dataplane.tcp_dpi_fail = dpi_fail;
  if (c.ok()) s->dpi = *c;
  s->dpi_settings = m;
  s->dpi_settings.sources.clear();
  return s;
}

constexpr const char* kSrv = "192.0.2.80";

// One connection: client side A, server side B; sequence numbers kept.
struct Conn {
  Harness& h;
  std::string cli;
  uint16_t port;
  uint32_t cseq = 1000, sseq = 5000;
  uint64_t* t;
  Frame c(uint8_t flags, const std::string& data = "") {
    Frame f = PacketBuilder().ipv4(cli.c_str(), kSrv).tcp(port, 80, flags, cseq, sseq).payload(data).build();
    cseq += uint32_t(data.size()) + ((flags & (kTcpSyn | kTcpFin)) ? 1 : 0);
    return f;
  }
  Frame s(uint8_t flags, const std::string& data = "") {
    Frame f = PacketBuilder().ipv4(kSrv, cli.c_str()).tcp(80, port, flags, sseq, cseq).payload(data).build();
    sseq += uint32_t(data.size()) + ((flags & (kTcpSyn | kTcpFin)) ? 1 : 0);
    return f;
  }
  void sendC(const Frame& f, uint64_t gap_us = 1) { h.send(0, f, *t += gap_us); h.poll(); }
  void sendS(const Frame& f, uint64_t gap_us = 1) { h.send(1, f, *t += gap_us); h.poll(); }
  void open(const std::string& path) {
    sendC(c(kTcpSyn));
    sseq = 4999;
    sendS(s(kTcpSyn | kTcpAck));
    sendC(c(kTcpAck));
    sendC(c(kTcpPsh | kTcpAck, "GET " + path + " HTTP/1.1\r\nHost: files.test\r\n\r\n"));
    h.out(0);  // what left so far is not looked at
    h.out(1);
  }
};

std::string peBody(size_t n, char fill = 'A') {
  std::string b = "MZ";
  b.resize(n, fill);
  return b;
}

std::string chunk(const std::string& d) {
  char len[16];
  snprintf(len, sizeof(len), "%zx\r\n", d.size());
  return len + d + "\r\n";
}

// A 1600-byte PE sent chunked by `k`'s server: the headers with the first 1000 bytes, the
// last 600 bytes, the 0-chunk, each a segment of its own.
std::tuple<Frame, Frame, Frame> chunkedSmallPe(Conn& k) {
  const std::string body = peBody(1600);
  Frame hdr = k.s(kTcpPsh | kTcpAck, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
                                        chunk(body.substr(0, 1000)));
  Frame last = k.s(kTcpPsh | kTcpAck, chunk(body.substr(1000)));
  Frame end = k.s(kTcpPsh | kTcpAck, "0\r\n\r\n");
  return {hdr, last, end};
}

bool contains(const std::vector<Frame>& fs, const Frame& f) {
  for (const Frame& x : fs)
    if (x == f) return true;
  return false;
}

uint64_t httpCounter(Harness& h, int k) { return h.counters().http[k]; }

// The chunked download of a small PE: the body's last data chunk and its terminating
// 0-chunk come in separate segments. small_exe (filesize) is decided by the 0-chunk: the
// last data segment, held until then, is dropped with it; the client never gets the file's
// last 600 bytes. Without the hold-back the last data segment was forwarded when it came.
TEST(HttpHold, FilesizeRuleDropsTheHeldLastDataPacketOfAChunkedFile) {
  Harness h(httpSnapshot());
  uint64_t t = 1000000;
  Conn k{h, "10.0.0.1", 40001, 1000, 5000, &t};
  k.open("/small.exe");
  const auto [hdr, last, end] = chunkedSmallPe(k);
  k.sendS(hdr);
  EXPECT_TRUE(h.out(0).empty());  // held: the file's end may still decide
  EXPECT_EQ(httpCounter(h, kHttpHeld), 1u);
  k.sendS(last);
  std::vector<Frame> out = h.out(0);
  ASSERT_EQ(out.size(), 1u);  // the first data segment released by the next one
  EXPECT_EQ(out[0], hdr);
  const size_t before = h.verdicts().size();
  k.sendS(end);
  out = h.out(0);
  EXPECT_FALSE(contains(out, last));  // the file's last bytes never leave
  EXPECT_FALSE(contains(out, end));
  ASSERT_EQ(h.verdicts().size(), before + 2);  // the held packet and the 0-chunk, each once
  for (size_t k2 = before; k2 < h.verdicts().size(); ++k2) {
    const PacketVerdict& v = h.verdicts()[k2];
    EXPECT_EQ(v.verdict, Verdict::kDrop);
    EXPECT_EQ(v.stage, Stage::kDpi);
    EXPECT_EQ(v.reason, DropReason::kDpiDrop);
    EXPECT_EQ(v.rule, 0u);  // small_exe
  }
  EXPECT_LT(h.verdicts()[before].seq, h.verdicts()[before + 1].seq);  // the held one first
  EXPECT_EQ(httpCounter(h, kHttpHeld), 2u);
  EXPECT_EQ(httpCounter(h, kHttpHoldReleased), 1u);
  EXPECT_EQ(httpCounter(h, kHttpHoldDropped), 1u);
  EXPECT_EQ(h.counters().dpi_drops, 1u);
  // The flow stays blocked.
  k.sendC(k.c(kTcpAck));
  EXPECT_TRUE(h.out(1).empty());
}

// The clean twin: the same download, not a PE: every frame leaves side A byte-identical and
// in order (each held segment released before the next one), each judged once.
TEST(HttpHold, CleanTwinPassesWholeInOrder) {
  Harness h(httpSnapshot());
  uint64_t t = 1000000;
  Conn k{h, "10.0.0.1", 40001, 1000, 5000, &t};
  k.open("/small.txt");
  h.verdicts().clear();
  const std::string body = peBody(1600, 'B').replace(0, 2, "ZM");
  std::vector<Frame> sent = {
      k.s(kTcpPsh | kTcpAck, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(body.substr(0, 1000))),
      k.s(kTcpPsh | kTcpAck, chunk(body.substr(1000))), k.s(kTcpPsh | kTcpAck, "0\r\n\r\n"),
      k.s(kTcpFin | kTcpAck)};
  for (const Frame& f : sent) k.sendS(f);
  EXPECT_EQ(h.out(0), sent);
  ASSERT_EQ(h.verdicts().size(), sent.size());
  for (const PacketVerdict& v : h.verdicts()) EXPECT_EQ(v.verdict, Verdict::kForward);
  EXPECT_EQ(httpCounter(h, kHttpHeld), 2u);
  EXPECT_EQ(httpCounter(h, kHttpHoldReleased), 2u);
  EXPECT_EQ(httpCounter(h, kHttpHoldDropped), 0u);
}

// A body delimited by the connection's close (no length, not chunked): its end is the
// server's FIN. evil_end (a regex anchored at the end of the data) is decided there: the
// FIN and the held last data segment are dropped. Before, the FIN did not end the file:
// the rule fired only when the flow ended, an alert after every byte had passed.
TEST(HttpHold, EndAnchoredRuleDropsTheLastPacketOfACloseDelimitedBody) {
  Harness h(httpSnapshot());
  uint64_t t = 1000000;
  Conn k{h, "10.0.0.2", 40002, 1000, 5000, &t};
  k.open("/page.html");
  const Frame a = k.s(kTcpPsh | kTcpAck, "HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n<html>first part ");
  const Frame b = k.s(kTcpPsh | kTcpAck, "second part EVIL-TRAILER");
  const Frame fin = k.s(kTcpFin | kTcpAck);
  k.sendS(a);
  k.sendS(b);
  EXPECT_EQ(h.out(0), std::vector<Frame>{a});
  k.sendS(fin);
  EXPECT_TRUE(h.out(0).empty());
  const PacketVerdict& last = h.verdicts().back();
  EXPECT_EQ(last.verdict, Verdict::kDrop);
  EXPECT_EQ(last.reason, DropReason::kDpiDrop);
  EXPECT_EQ(last.rule, 1u);  // evil_end
  EXPECT_EQ(httpCounter(h, kHttpHoldDropped), 1u);
  EXPECT_EQ(h.counters().dpi_drops, 1u);
}

// The hold's bound: a file whose end does not come within hold_timeout_ms (100 ms) has its
// held packet released (counted); the guarantee does not cover it.
TEST(HttpHold, HeldPacketIsReleasedAfterTheTimeout) {
  Harness h(httpSnapshot());
  uint64_t t = 1000000;
  Conn k{h, "10.0.0.3", 40003, 1000, 5000, &t};
  k.open("/slow.exe");
  const Frame a = k.s(kTcpPsh | kTcpAck, "HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + peBody(1000));
  k.sendS(a);
  EXPECT_TRUE(h.out(0).empty());
  k.sendC(k.c(kTcpAck), 150000);  // 150 ms later, another packet (the client's ACK)
  EXPECT_EQ(h.out(0), std::vector<Frame>{a});
  EXPECT_EQ(httpCounter(h, kHttpHoldTimeouts), 1u);
  EXPECT_EQ(h.verdicts().back().verdict, Verdict::kForward);
}

// A retransmission of held bytes is dropped (it would hand the client what is held); an
// ACK without data passes; the held packet is still decided by the file's end.
TEST(HttpHold, RetransmissionOfHeldBytesIsDropped) {
  Harness h(httpSnapshot());
  uint64_t t = 1000000;
  Conn k{h, "10.0.0.4", 40004, 1000, 5000, &t};
  k.open("/dup.exe");
  const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 1200\r\n\r\n";
  const Frame a = k.s(kTcpPsh | kTcpAck, head + peBody(1200).substr(0, 1000));
  k.sendS(a);
  k.sendS(a);  // the server's stack retransmits it
  EXPECT_EQ(h.verdicts().back().reason, DropReason::kHttpHoldDuplicate);
  EXPECT_EQ(httpCounter(h, kHttpHoldDuplicates), 1u);
  k.sendS(PacketBuilder().ipv4(kSrv, "10.0.0.4").tcp(80, 40004, kTcpAck, k.sseq, k.cseq).build());
  EXPECT_EQ(h.out(0).size(), 1u);  // the bare ACK passed, the held packet not
  k.sendS(k.s(kTcpPsh | kTcpAck, peBody(1200).substr(1000)));  // the end: small_exe drops
  EXPECT_TRUE(h.out(0).empty());
  EXPECT_EQ(httpCounter(h, kHttpHoldDropped), 1u);
}

// No free hold slot under dpi_fail FORWARD: the packet passes, counted, with an
// `uninspected` event; under DROP it is dropped and its flow blocked.
TEST(HttpHold, ExhaustedPoolFollowsTheFailPolicy) {
  for (rules::Policy pol : {rules::Policy::kForward, rules::Policy::kDrop}) {
    SCOPED_TRACE(pol == rules::Policy::kForward ? "FORWARD" : "DROP");
    Harness h(httpSnapshot(1, pol));
    uint64_t t = 1000000;
    Conn k1{h, "10.0.0.5", 40005, 1000, 5000, &t};
    Conn k2{h, "10.0.0.6", 40006, 1000, 5000, &t};
    k1.open("/one.exe");
    k2.open("/two.exe");
    h.dp().drainEvents([](const Event&) {}, 100000);
    const std::string r = "HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + peBody(500);
    k1.sendS(k1.s(kTcpPsh | kTcpAck, r));  // takes the only slot
    const Frame f2 = k2.s(kTcpPsh | kTcpAck, r);
    k2.sendS(f2);
    EXPECT_EQ(httpCounter(h, kHttpHoldExhausted), 1u);
    int uninspected = 0;
    h.dp().drainEvents([&](const Event& e) {
      if (e.type == EventType::kUninspected && e.reason == DropReason::kHttpHoldExhausted) ++uninspected;
    }, 100000);
    if (pol == rules::Policy::kForward) {
      EXPECT_EQ(h.out(0), std::vector<Frame>{f2});
      EXPECT_EQ(uninspected, 1);
    } else {
      EXPECT_TRUE(h.out(0).empty());
      EXPECT_EQ(h.verdicts().back().reason, DropReason::kHttpHoldExhausted);
      k2.sendS(k2.s(kTcpPsh | kTcpAck, "more"));
      EXPECT_EQ(h.verdicts().back().reason, DropReason::kHttpHoldExhausted);  // blocked
    }
  }
}

// At the flow's end (here: shutdown) a held packet is decided by the files' end: a body
// delimited by the close whose filesize rule fires drops it; otherwise it is released.
// Every packet gets exactly one verdict.
TEST(HttpHold, FlowEndDecidesTheHeldPacket) {
  for (bool evil : {true, false}) {
    SCOPED_TRACE(evil ? "small PE" : "text");
    Harness h(httpSnapshot());
    uint64_t t = 1000000;
    Conn k{h, "10.0.0.7", 40007, 1000, 5000, &t};
    k.open("/f.bin");
    const std::string body = evil ? peBody(800) : std::string(800, 't');
    const Frame a = k.s(kTcpPsh | kTcpAck, "HTTP/1.0 200 OK\r\n\r\n" + body);
    k.sendS(a);
    EXPECT_TRUE(h.out(0).empty());
    const size_t n = h.verdicts().size();
    while (!h.dp().worker(0).endFlows(4096)) {
    }
    ASSERT_EQ(h.verdicts().size(), n + 1);
    EXPECT_EQ(h.verdicts().back().verdict, evil ? Verdict::kDrop : Verdict::kForward);
    EXPECT_EQ(h.out(0).size(), evil ? 0u : 1u);
    EXPECT_EQ(httpCounter(h, evil ? kHttpHoldDropped : kHttpHoldReleased), 1u);
  }
}

// hold_last_packet off: nothing is held, which is the behaviour before the hold-back: the
// same download as FilesizeRuleDropsTheHeldLastDataPacketOfAChunkedFile hands the client the
// file's last 600 bytes; the verdict drops only the 0-chunk.
TEST(HttpHold, OffTheLastDataSegmentLeavesBeforeTheVerdict) {
  Harness h(httpSnapshot(64, rules::Policy::kForward, false));
  uint64_t t = 1000000;
  Conn k{h, "10.0.0.8", 40008, 1000, 5000, &t};
  k.open("/small.exe");
  const auto [hdr, last, end] = chunkedSmallPe(k);
  k.sendS(hdr);
  k.sendS(last);
  k.sendS(end);
  EXPECT_EQ(h.out(0), (std::vector<Frame>{hdr, last}));
  EXPECT_EQ(h.verdicts().back().reason, DropReason::kDpiDrop);
  EXPECT_EQ(httpCounter(h, kHttpHeld), 0u);
}

}  // namespace
}  // namespace dpu::dp
