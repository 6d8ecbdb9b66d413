// DNS filtering through the real worker path (Harness): UDP queries by action with the exact
// answer frames, allow-wins, extra ports, CNAME cloaking, malformed policy, TCP (one message
// per segment, several per segment, split across segments; responses over 300 bytes split
// across segments reassembled, too long ones and a full buffer pool by the malformed policy),
// a burst of UDP queries judged like single ones, block events, per-list counters carried
// across a reload.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <memory>
#include <string>
#include <tuple>
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

using rules::DnsAction;
using test::Frame;
using test::PacketBuilder;
using test::parseFrame;

rules::DnsListModel list(const char* name, DnsAction a, std::vector<std::string> names) {
  rules::DnsListModel l;
  l.name = name;
  l.action = a;
  l.names = std::move(names);
  l.ttl = 60;
  return l;
}

rules::DnsModel model() {
  rules::DnsModel m;
  m.lists.push_back(list("ads", DnsAction::kNxdomain, {"||ads.example^"}));
  auto sink = list("sink", DnsAction::kSinkhole, {"||sink.example^"});
  sink.sinkhole_v4 = {{10, 9, 9, 9}};
  m.lists.push_back(sink);
  m.lists.push_back(list("drop", DnsAction::kDrop, {"||drop.example^"}));
  m.lists.push_back(list("allow", DnsAction::kAllow, {"ok.ads.example"}));
  m.extra_ports = {5353};
  return m;
}

std::unique_ptr<rules::Snapshot> snapWith(const rules::DnsModel& m,
                                          const rules::CompiledDns* prev = nullptr) {
  rules::DataplaneSettings ds;
  ds.flow_capacity = 4096;
  ds.frag_max_datagrams = 64;
  return test::dnsSnapshot(ds, m, prev);
}

Frame udpQuery(const std::string& name, uint16_t qtype = kTypeA, uint16_t dport = 53,
               uint16_t sport = 40000, uint16_t id = 0x1111) {
  return PacketBuilder()
      .eth(test::mac("02:00:00:00:00:0a"), test::mac("02:00:00:00:00:0b"))
      .ipv4("10.0.0.1", "10.0.0.53")
      .udp(sport, dport)
      .payload(test::dnsQuery(name, qtype, id))
      .build();
}

// The DNS message carried by a UDP frame.
std::vector<uint8_t> dnsOf(const Frame& f) {
  PacketMeta m = parseFrame(f);
  return std::vector<uint8_t>(f.begin() + m.payload_offset, f.begin() + m.payload_offset + m.payload_len);
}

TEST(DnsPipeline, UdpActions) {
  Harness h(snapWith(model()));
  h.send(0, udpQuery("www.ads.example", kTypeA, 53, 40000, 0x0a0a));
  h.send(0, udpQuery("x.sink.example", kTypeA, 53, 40001));
  h.send(0, udpQuery("drop.example", kTypeA, 53, 40002));
  h.send(0, udpQuery("ok.ads.example", kTypeA, 53, 40003));
  h.send(0, udpQuery("clean.example", kTypeA, 53, 40004));
  h.send(0, udpQuery("ads.example", kTypeAaaa, 5353, 40005));  // extra port
  h.send(0, udpQuery("ads.example", kTypeA, 5354, 40006));     // not a DNS port
  h.poll();
  auto back = h.out(0);  // answers go back out of side A
  auto fwd = h.out(1);
  ASSERT_EQ(back.size(), 3u);
  ASSERT_EQ(fwd.size(), 3u);  // ok.ads.example, clean.example, port 5354

  Frame q0 = udpQuery("www.ads.example", kTypeA, 53, 40000, 0x0a0a);
  PacketMeta a = parseFrame(back[0]), q = parseFrame(q0);
  EXPECT_TRUE(test::checksumsOk(back[0]));
  EXPECT_EQ(a.src, q.dst);
  EXPECT_EQ(a.dst, q.src);
  EXPECT_EQ(a.sport, 53);
  EXPECT_EQ(a.dport, 40000);
  EXPECT_EQ(std::memcmp(back[0].data(), q0.data() + 6, 6), 0);
  auto msg = dnsOf(back[0]);
  EXPECT_EQ(dnsGet16(msg.data()), 0x0a0a);
  EXPECT_EQ(msg[3] & 0xf, 3);  // NXDOMAIN
  EXPECT_EQ(msg[2] & 0x81, 0x81);  // QR, RD

  msg = dnsOf(back[1]);  // sinkhole A 10.9.9.9 ttl 60
  EXPECT_EQ(dnsGet16(msg.data() + 6), 1);
  EXPECT_EQ(msg.back(), 9);

  msg = dnsOf(back[2]);  // port 5353 AAAA -> NXDOMAIN
  EXPECT_EQ(parseFrame(back[2]).sport, 5353);
  EXPECT_EQ(msg[3] & 0xf, 3);

  auto c = h.counters();
  EXPECT_EQ(c.drops[static_cast<int>(DropReason::kDnsAnswered)], 3u);
  EXPECT_EQ(c.drops[static_cast<int>(DropReason::kDnsDropped)], 1u);
  EXPECT_EQ(c.dns[kDnsBlocked], 4u);
  EXPECT_EQ(c.dns[kDnsAllowed], 1u);
  EXPECT_EQ(c.dns[kDnsAnswersSent], 3u);
  EXPECT_EQ(c.dns[kDnsMessages], 6u);

  // Per-list counters and block events (client, name, list, action).
  auto lists = h.dp().dnsLists();
  ASSERT_EQ(lists.size(), 4u);
  EXPECT_EQ(lists[0].name, "ads");
  EXPECT_EQ(lists[0].blocked, 2u);
  EXPECT_EQ(lists[1].blocked, 1u);
  EXPECT_EQ(lists[2].blocked, 1u);
  EXPECT_EQ(lists[3].allowed, 1u);
  std::vector<std::string> names;
  h.dp().drainEvents([&](const Event& e) {
    if (e.type != EventType::kDns) return;
    names.push_back(std::string(e.dns_name) + "/" + e.dns_list + "/" +
                    std::to_string(e.dns_action));
    EXPECT_EQ(e.src.b[3], 1);  // the client 10.0.0.1
  }, 1000);
  ASSERT_EQ(names.size(), 4u);
  EXPECT_EQ(names[0], "www.ads.example/ads/3");
  EXPECT_EQ(names[2], "drop.example/drop/2");
}

// Like a firewall reject, a DNS answer is never sent to or from a broadcast, multicast,
// unspecified or loopback address or MAC: such a blocked query is dropped unanswered
// (dns_dropped, counted in answers_not_sent); the same query between unicast hosts is answered.
TEST(DnsPipeline, NoAnswerToOrFromNonUnicastAddresses) {
  struct Case {
    const char* what;
    const char* src_mac;
    const char* dst_mac;
    const char* src;
    const char* dst;
    bool answered;
  };
  const Case cases[] = {
      {"v4 unicast", "02:00:00:00:00:0a", "02:00:00:00:00:0b", "10.0.0.1", "10.0.0.53", true},
      {"v4 broadcast source", "02:00:00:00:00:0a", "02:00:00:00:00:0b", "255.255.255.255", "10.0.0.53", false},
      {"v4 multicast source", "02:00:00:00:00:0a", "02:00:00:00:00:0b", "224.0.0.5", "10.0.0.53", false},
      {"v4 unspecified source", "02:00:00:00:00:0a", "02:00:00:00:00:0b", "0.0.0.0", "10.0.0.53", false},
      {"v4 multicast destination", "02:00:00:00:00:0a", "01:00:5e:00:00:fb", "10.0.0.1", "224.0.0.251", false},
      {"v4 broadcast destination", "02:00:00:00:00:0a", "ff:ff:ff:ff:ff:ff", "10.0.0.1", "255.255.255.255", false},
      {"v4 broadcast source MAC", "ff:ff:ff:ff:ff:ff", "02:00:00:00:00:0b", "10.0.0.1", "10.0.0.53", false},
      {"v4 multicast source MAC", "01:00:5e:00:00:01", "02:00:00:00:00:0b", "10.0.0.1", "10.0.0.53", false},
      {"v6 unicast", "02:00:00:00:00:0a", "02:00:00:00:00:0b", "2001:db8::1", "2001:db8::53", true},
      {"v6 multicast source", "02:00:00:00:00:0a", "02:00:00:00:00:0b", "ff02::1", "2001:db8::53", false},
      {"v6 unspecified source", "02:00:00:00:00:0a", "02:00:00:00:00:0b", "::", "2001:db8::53", false},
      {"v6 multicast destination", "02:00:00:00:00:0a", "33:33:00:00:00:fb", "2001:db8::1", "ff02::fb", false},
      {"v6 multicast source MAC", "33:33:00:00:00:01", "02:00:00:00:00:0b", "2001:db8::1", "2001:db8::53", false},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    Harness h(snapWith(model()));
    PacketBuilder pb;
    pb.eth(test::mac(k.src_mac), test::mac(k.dst_mac));
    if (std::string(k.src).find(':') != std::string::npos) {
      pb.ipv6(k.src, k.dst);
    } else {
      pb.ipv4(k.src, k.dst);
    }
    h.send(0, pb.udp(40000, 53).payload(test::dnsQuery("www.ads.example", kTypeA, 0x0b0b)).build());
    h.poll();
    EXPECT_EQ(h.out(0).size(), k.answered ? 1u : 0u);
    EXPECT_EQ(h.out(1).size(), 0u);  // blocked either way
    auto c = h.counters();
    EXPECT_EQ(c.dns[kDnsBlocked], 1u);
    EXPECT_EQ(c.dns[kDnsAnswersSent], k.answered ? 1u : 0u);
    EXPECT_EQ(c.dns[kDnsAnswerNoMbuf], k.answered ? 0u : 1u);
    EXPECT_EQ(c.drops[static_cast<int>(DropReason::kDnsAnswered)], k.answered ? 1u : 0u);
    EXPECT_EQ(c.drops[static_cast<int>(DropReason::kDnsDropped)], k.answered ? 0u : 1u);
  }
}

TEST(DnsPipeline, CnameCloakingOnResponses) {
  Harness h(snapWith(model()));
  // The client's query (clean) goes out; the resolver's answer comes back on side B.
  h.send(0, udpQuery("www.shop.example", kTypeA, 53, 41000, 0x2222));
  Frame resp = PacketBuilder()
                   .eth(test::mac("02:00:00:00:00:0b"), test::mac("02:00:00:00:00:0a"))
                   .ipv4("10.0.0.53", "10.0.0.1")
                   .udp(53, 41000)
                   .payload(test::dnsCnameResponse("www.shop.example", {"cdn.net", "t.ads.example"}, 0x2222))
                   .build();
  h.send(1, resp);
  h.poll();
  auto to_b = h.out(1);
  auto to_a = h.out(0);
  ASSERT_EQ(to_b.size(), 1u);  // the query
  ASSERT_EQ(to_a.size(), 1u);  // NXDOMAIN instead of the response
  PacketMeta m = parseFrame(to_a[0]);
  EXPECT_TRUE(test::checksumsOk(to_a[0]));
  EXPECT_EQ(m.sport, 53);
  EXPECT_EQ(m.dport, 41000);
  EXPECT_EQ(std::memcmp(to_a[0].data(), resp.data(), 12), 0);  // the response's own MACs
  auto msg = dnsOf(to_a[0]);
  EXPECT_EQ(dnsGet16(msg.data()), 0x2222);
  EXPECT_EQ(msg[3] & 0xf, 3);
  EXPECT_EQ(dnsGet16(msg.data() + 6), 0);
  EXPECT_EQ(h.counters().dns[kDnsCloaked], 1u);
  EXPECT_EQ(h.counters().drops[static_cast<int>(DropReason::kDnsCloaked)], 1u);
}

TEST(DnsPipeline, MalformedPolicy) {
  for (rules::Policy p : {rules::Policy::kForward, rules::Policy::kDrop}) {
    rules::DnsModel m = model();
    m.malformed = p;
    Harness h(snapWith(m));
    std::vector<uint8_t> loop = {0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1};
    h.send(0, PacketBuilder().ipv4("10.0.0.1", "10.0.0.53").udp(40000, 53).payload(loop).build());
    h.poll();
    EXPECT_EQ(h.out(1).size(), p == rules::Policy::kForward ? 1u : 0u);
    auto c = h.counters();
    EXPECT_EQ(c.dns[kDnsMalformed], 1u);
    EXPECT_EQ(c.drops[static_cast<int>(DropReason::kDnsMalformed)], p == rules::Policy::kDrop ? 1u : 0u);
  }
}

// Messages that are not a standard query with one question (NOTIFY, UPDATE, QDCOUNT 0 or 2:
// a blocked name as the second question) by the dns.nonstandard policy: forwarded unread and
// counted, or dropped (dns_nonstandard) and counted. Before the policy they were always
// forwarded.
TEST(DnsPipeline, NonstandardPolicy) {
  auto notify = test::dnsQuery("a.ads.example", kTypeA, 1, 0x2000);  // opcode 4 (NOTIFY)
  auto update = test::dnsQuery("a.ads.example", 6, 2, 0x2800);       // opcode 5 (UPDATE)
  auto none = test::dnsQuery("fine.example", kTypeA, 3);
  none[5] = 0;  // QDCOUNT 0
  // QDCOUNT 2: a clean first question, a blocked second one.
  auto two = test::dnsQuery("fine.example", kTypeA, 4);
  two[5] = 2;
  auto second = test::dnsQuery("b.ads.example", kTypeA, 4);
  two.insert(two.end(), second.begin() + 12, second.end());
  const std::vector<std::vector<uint8_t>> msgs = {notify, update, none, two};
  for (rules::Policy p : {rules::Policy::kForward, rules::Policy::kDrop}) {
    rules::DnsModel m = model();
    m.nonstandard = p;
    Harness h(snapWith(m));
    uint16_t sport = 40100;
    for (const auto& msg : msgs) {
      h.send(0, PacketBuilder().ipv4("10.0.0.1", "10.0.0.53").udp(sport++, 53).payload(msg).build());
    }
    h.poll();
    const bool fwd = p == rules::Policy::kForward;
    EXPECT_EQ(h.out(1).size(), fwd ? msgs.size() : 0u);
    EXPECT_EQ(h.out(0).size(), 0u);  // never answered
    auto c = h.counters();
    EXPECT_EQ(c.dns[kDnsNonstandard], msgs.size());
    EXPECT_EQ(c.dns[kDnsNonstandardForwarded], fwd ? msgs.size() : 0u);
    EXPECT_EQ(c.dns[kDnsMalformed], 0u);
    EXPECT_EQ(c.dns[kDnsBlocked], 0u);
    EXPECT_EQ(c.drops[static_cast<int>(DropReason::kDnsNonstandard)], fwd ? 0u : msgs.size());
    EXPECT_STREQ(dropReasonName(DropReason::kDnsNonstandard), "dns_nonstandard");
  }
}

Frame tcpSeg(uint16_t sport, uint8_t flags, uint32_t seq, uint32_t ack, std::vector<uint8_t> payload,
             bool from_client = true) {
  PacketBuilder b;
  if (from_client) {
    b.ipv4("10.0.0.1", "10.0.0.53").tcp(sport, 53, flags, seq, ack);
  } else {
    b.ipv4("10.0.0.53", "10.0.0.1").tcp(53, sport, flags, seq, ack);
  }
  return b.payload(std::move(payload)).build();
}

std::vector<uint8_t> framed(const std::vector<uint8_t>& msg) {
  // Sized once and copied into (GCC 12 reports a false -Warray-bounds for an insert that
  // grows a 2-byte vector).
  std::vector<uint8_t> v(msg.size() + 2);
  v[0] = static_cast<uint8_t>(msg.size() >> 8);
  v[1] = static_cast<uint8_t>(msg.size());
  std::copy(msg.begin(), msg.end(), v.begin() + 2);
  return v;
}

// Opens a TCP connection client:sport -> server:53 (client ISN 1000, server ISN 5000).
void handshake(Harness& h, uint16_t sport) {
  h.send(0, tcpSeg(sport, kTcpSyn, 999, 0, {}));
  h.send(1, tcpSeg(sport, kTcpSyn | kTcpAck, 4999, 1000, {}, false));
  h.send(0, tcpSeg(sport, kTcpAck, 1000, 5000, {}));
  h.poll();
  h.out(0);
  h.out(1);
}

TEST(DnsPipeline, TcpOneQueryBlocked) {
  Harness h(snapWith(model()));
  handshake(h, 42000);
  auto q = framed(test::dnsQuery("a.ads.example", kTypeA, 0x3333));
  h.send(0, tcpSeg(42000, kTcpAck | kTcpPsh, 1000, 5000, q));
  h.poll();
  auto to_a = h.out(0), to_b = h.out(1);
  ASSERT_EQ(to_a.size(), 1u);
  ASSERT_EQ(to_b.size(), 1u);  // RST to the server
  PacketMeta a = parseFrame(to_a[0]);
  EXPECT_TRUE(test::checksumsOk(to_a[0]));
  EXPECT_EQ(a.tcp_seq, 5000u);
  EXPECT_EQ(a.tcp_ack, 1000u + q.size());
  EXPECT_EQ(a.tcp_flags, kTcpAck | kTcpPsh | kTcpFin);
  const uint8_t* p = to_a[0].data() + a.payload_offset;
  EXPECT_EQ(dnsGet16(p), a.payload_len - 2);
  EXPECT_EQ(dnsGet16(p + 2), 0x3333);
  EXPECT_EQ(p[2 + 3] & 0xf, 3);
  PacketMeta r = parseFrame(to_b[0]);
  EXPECT_EQ(r.tcp_flags & kTcpRst, kTcpRst);
  EXPECT_EQ(r.tcp_seq, 1000u);
  // Later packets of the connection are dropped.
  h.send(0, tcpSeg(42000, kTcpAck, 1000 + static_cast<uint32_t>(q.size()), 5000 + a.payload_len + 1, {}));
  h.poll();
  EXPECT_EQ(h.out(1).size(), 0u);
  EXPECT_EQ(h.counters().drops[static_cast<int>(DropReason::kDnsTcpClosed)], 1u);
}

TEST(DnsPipeline, TcpSplitAndPipelined) {
  Harness h(snapWith(model()));
  handshake(h, 42001);
  // Two clean queries in one segment, then a clean one split over three segments: passed.
  auto q1 = framed(test::dnsQuery("one.example", kTypeA, 1));
  auto q2 = framed(test::dnsQuery("two.example", kTypeA, 2));
  std::vector<uint8_t> seg = q1;
  seg.insert(seg.end(), q2.begin(), q2.end());
  uint32_t seq = 1000;
  h.send(0, tcpSeg(42001, kTcpAck | kTcpPsh, seq, 5000, seg));
  seq += static_cast<uint32_t>(seg.size());
  auto q3 = framed(test::dnsQuery("three.example", kTypeA, 3));
  std::vector<uint8_t> p1(q3.begin(), q3.begin() + 1), p2(q3.begin() + 1, q3.begin() + 9),
      p3(q3.begin() + 9, q3.end());
  for (auto* part : {&p1, &p2, &p3}) {
    h.send(0, tcpSeg(42001, kTcpAck | kTcpPsh, seq, 5000, *part));
    seq += static_cast<uint32_t>(part->size());
  }
  h.poll();
  EXPECT_EQ(h.out(1).size(), 4u);
  EXPECT_EQ(h.out(0).size(), 0u);
  EXPECT_EQ(h.counters().dns[kDnsQueries], 3u);
  // A blocked query split in two: the first part passes, the second is dropped and answered.
  auto q4 = framed(test::dnsQuery("b.ads.example", kTypeA, 4));
  std::vector<uint8_t> h1(q4.begin(), q4.begin() + 7), h2(q4.begin() + 7, q4.end());
  h.send(0, tcpSeg(42001, kTcpAck | kTcpPsh, seq, 5000, h1));
  h.send(0, tcpSeg(42001, kTcpAck | kTcpPsh, seq + 7, 5000, h2));
  h.poll();
  EXPECT_EQ(h.out(1).size(), 2u);  // the first part, then the RST
  auto to_a = h.out(0);
  ASSERT_EQ(to_a.size(), 1u);
  PacketMeta a = parseFrame(to_a[0]);
  EXPECT_EQ(a.tcp_ack, seq + static_cast<uint32_t>(q4.size()));
  EXPECT_EQ(dnsGet16(to_a[0].data() + a.payload_offset + 2), 4);
  EXPECT_EQ(h.counters().dns[kDnsBlocked], 1u);
}

TEST(DnsPipeline, TcpBlockedAmongOthersGetsServfailForTheRest) {
  Harness h(snapWith(model()));
  handshake(h, 42002);
  auto q1 = framed(test::dnsQuery("fine.example", kTypeA, 7));
  auto q2 = framed(test::dnsQuery("x.ads.example", kTypeA, 8));
  std::vector<uint8_t> seg = q1;
  seg.insert(seg.end(), q2.begin(), q2.end());
  h.send(0, tcpSeg(42002, kTcpAck | kTcpPsh, 1000, 5000, seg));
  h.poll();
  auto to_a = h.out(0);
  ASSERT_EQ(to_a.size(), 1u);
  PacketMeta a = parseFrame(to_a[0]);
  const uint8_t* p = to_a[0].data() + a.payload_offset;
  uint16_t l1 = dnsGet16(p);
  EXPECT_EQ(dnsGet16(p + 2), 7);
  EXPECT_EQ(p[2 + 3] & 0xf, 2);  // SERVFAIL
  const uint8_t* p2 = p + 2 + l1;
  EXPECT_EQ(dnsGet16(p2 + 2), 8);
  EXPECT_EQ(p2[2 + 3] & 0xf, 3);  // NXDOMAIN
  EXPECT_EQ(a.payload_len, 2u + l1 + 2u + dnsGet16(p2));
}

// Over TCP a non-standard message with policy drop is handled like a malformed one: the
// segment is dropped, the server gets a RST and the connection is closed; with forward it
// passes and the stream is still followed (the blocked query after it is answered).
TEST(DnsPipeline, TcpNonstandardByPolicy) {
  for (rules::Policy p : {rules::Policy::kForward, rules::Policy::kDrop}) {
    rules::DnsModel m = model();
    m.nonstandard = p;
    Harness h(snapWith(m));
    handshake(h, 42010);
    auto n = framed(test::dnsQuery("zone.example", 6, 5, 0x2000));  // NOTIFY
    h.send(0, tcpSeg(42010, kTcpAck | kTcpPsh, 1000, 5000, n));
    h.poll();
    auto c = h.counters();
    EXPECT_EQ(c.dns[kDnsNonstandard], 1u);
    if (p == rules::Policy::kForward) {
      EXPECT_EQ(h.out(1).size(), 1u);
      EXPECT_EQ(h.out(0).size(), 0u);
      EXPECT_EQ(c.dns[kDnsNonstandardForwarded], 1u);
      auto q = framed(test::dnsQuery("c.ads.example", kTypeA, 6));
      h.send(0, tcpSeg(42010, kTcpAck | kTcpPsh, 1000 + static_cast<uint32_t>(n.size()), 5000, q));
      h.poll();
      EXPECT_EQ(h.out(0).size(), 1u);  // the NXDOMAIN
      EXPECT_EQ(h.counters().dns[kDnsBlocked], 1u);
    } else {
      auto to_b = h.out(1);
      ASSERT_EQ(to_b.size(), 1u);  // the RST to the server, not the segment
      EXPECT_EQ(parseFrame(to_b[0]).tcp_flags & kTcpRst, kTcpRst);
      EXPECT_EQ(c.drops[static_cast<int>(DropReason::kDnsNonstandard)], 1u);
      EXPECT_EQ(c.dns[kDnsTcpClosed], 1u);
    }
  }
}

// A response longer than 300 bytes whose CNAME chain reaches a blocked name past byte 300,
// split over three segments: reassembled, read whole, the last segment dropped (the client
// got the first two: a RST each way, no answer).
TEST(DnsPipeline, TcpSplitLongResponseReassembled) {
  Harness h(snapWith(model()));
  handshake(h, 42003);
  auto q = framed(test::dnsQuery("news.example", kTypeA, 9));
  h.send(0, tcpSeg(42003, kTcpAck | kTcpPsh, 1000, 5000, q));
  std::vector<std::string> chain;
  for (int k = 0; k < 6; ++k) chain.push_back("edge" + std::to_string(k) + "-" + std::string(40, 'x') + ".cdn.net");
  chain.push_back("pixel.ads.example");
  auto r = framed(test::dnsCnameResponse("news.example", chain, 9));
  ASSERT_GT(r.size(), 400u);
  const uint32_t ack = 1000 + static_cast<uint32_t>(q.size());
  std::vector<uint8_t> r1(r.begin(), r.begin() + 150), r2(r.begin() + 150, r.begin() + 320),
      r3(r.begin() + 320, r.end());
  h.send(1, tcpSeg(42003, kTcpAck | kTcpPsh, 5000, ack, r1, false));
  h.send(1, tcpSeg(42003, kTcpAck | kTcpPsh, 5150, ack, r2, false));
  h.poll();
  EXPECT_EQ(h.out(1).size(), 1u);  // the query
  EXPECT_EQ(h.out(0).size(), 2u);  // the first two parts of the response
  h.send(1, tcpSeg(42003, kTcpAck | kTcpPsh, 5320, ack, r3, false));
  h.poll();
  auto to_a = h.out(0), to_b = h.out(1);
  ASSERT_EQ(to_a.size(), 1u);
  ASSERT_EQ(to_b.size(), 1u);
  EXPECT_EQ(parseFrame(to_a[0]).tcp_flags & kTcpRst, kTcpRst);
  EXPECT_EQ(parseFrame(to_a[0]).payload_len, 0u);
  EXPECT_EQ(parseFrame(to_b[0]).tcp_flags & kTcpRst, kTcpRst);
  auto c = h.counters();
  EXPECT_EQ(c.dns[kDnsCloaked], 1u);
  EXPECT_EQ(c.dns[kDnsResponses], 1u);
  EXPECT_EQ(c.drops[static_cast<int>(DropReason::kDnsCloaked)], 1u);

  // The same answer clean (the chain ends in an unlisted name), split in two: forwarded whole.
  handshake(h, 42004);
  h.send(0, tcpSeg(42004, kTcpAck | kTcpPsh, 1000, 5000, q));
  chain.back() = "pixel.example";
  auto clean = framed(test::dnsCnameResponse("news.example", chain, 9));
  std::vector<uint8_t> c1(clean.begin(), clean.begin() + 200), c2(clean.begin() + 200, clean.end());
  h.send(1, tcpSeg(42004, kTcpAck | kTcpPsh, 5000, ack, c1, false));
  h.send(1, tcpSeg(42004, kTcpAck | kTcpPsh, 5200, ack, c2, false));
  h.poll();
  EXPECT_EQ(h.out(0).size(), 2u);
  EXPECT_EQ(h.counters().dns[kDnsResponses], 2u);
  EXPECT_EQ(h.counters().dns[kDnsCloaked], 1u);
}

// A cloaked response whose segments arrive out of order: the later part is forwarded and
// kept (the client cannot read past the hole); the hole's filler completes the response.
// A replacement cannot take the place of bytes the client already holds, so the client gets
// a RST instead of an answer at those sequence numbers, and the server one too.
TEST(DnsPipeline, TcpCloakedResponseThatFillsAHoleIsResetNotReplaced) {
  Harness h(snapWith(model()));
  handshake(h, 42005);
  auto q = framed(test::dnsQuery("news.example", kTypeA, 9));
  h.send(0, tcpSeg(42005, kTcpAck | kTcpPsh, 1000, 5000, q));
  h.poll();
  EXPECT_EQ(h.out(1).size(), 1u);
  auto r = framed(test::dnsCnameResponse("news.example", {"cdn.net", "pixel.ads.example"}, 9));
  const uint32_t ack = 1000 + static_cast<uint32_t>(q.size());
  std::vector<uint8_t> r1(r.begin(), r.begin() + 20), r2(r.begin() + 20, r.end());
  h.send(1, tcpSeg(42005, kTcpAck | kTcpPsh, 5020, ack, r2, false));
  h.poll();
  EXPECT_EQ(h.out(0).size(), 1u);  // beyond the hole: forwarded, kept
  h.send(1, tcpSeg(42005, kTcpAck | kTcpPsh, 5000, ack, r1, false));
  h.poll();
  auto to_a = h.out(0), to_b = h.out(1);
  ASSERT_EQ(to_a.size(), 1u);
  EXPECT_EQ(parseFrame(to_a[0]).tcp_flags & kTcpRst, kTcpRst);
  EXPECT_EQ(parseFrame(to_a[0]).payload_len, 0u);  // no replacement answer
  ASSERT_EQ(to_b.size(), 1u);
  EXPECT_EQ(parseFrame(to_b[0]).tcp_flags & kTcpRst, kTcpRst);
  EXPECT_EQ(h.counters().dns[kDnsCloaked], 1u);
  EXPECT_EQ(h.counters().tcp_stream[kTcpReorderFilled], 1u);
}

// A split response longer than the reassembly buffer (4094 bytes): counted, and the malformed
// policy decides: forward passes it unread (the stream is still followed), drop drops the
// segment and closes the connection.
TEST(DnsPipeline, TcpSplitResponseOverflowByPolicy) {
  for (rules::Policy p : {rules::Policy::kForward, rules::Policy::kDrop}) {
    rules::DnsModel m = model();
    m.malformed = p;
    Harness h(snapWith(m));
    handshake(h, 42005);
    auto q = framed(test::dnsQuery("big.example", kTypeA, 10));
    h.send(0, tcpSeg(42005, kTcpAck | kTcpPsh, 1000, 5000, q));
    const uint32_t ack = 1000 + static_cast<uint32_t>(q.size());
    std::vector<uint8_t> part(1400, 0);
    part[0] = 5000 >> 8;  // length prefix 5000 (> 4094), then message bytes
    part[1] = 5000 & 0xff;
    h.send(1, tcpSeg(42005, kTcpAck | kTcpPsh, 5000, ack, part, false));
    h.poll();
    h.out(1);
    auto c = h.counters();
    EXPECT_EQ(c.dns[kDnsTcpRespOverflow], 1u);
    EXPECT_EQ(c.dns[kDnsMalformed], 1u);
    if (p == rules::Policy::kForward) {
      EXPECT_EQ(h.out(0).size(), 1u);
      EXPECT_EQ(c.dns[kDnsMalformedForwarded], 1u);
      // The rest of the message is skipped; the next response (blocked CNAME) is read again.
      std::vector<uint8_t> rest(5000 + 2 - 1400, 0);
      auto r = framed(test::dnsCnameResponse("big.example", {"t.ads.example"}, 10));
      rest.insert(rest.end(), r.begin(), r.end());
      uint32_t seq = 5000 + 1400;
      for (size_t off = 0; off < rest.size(); off += 1400) {
        std::vector<uint8_t> seg(rest.begin() + off, rest.begin() + std::min(rest.size(), off + 1400));
        h.send(1, tcpSeg(42005, kTcpAck | kTcpPsh, seq, ack, seg, false));
        seq += static_cast<uint32_t>(seg.size());
      }
      h.poll();
      EXPECT_EQ(h.counters().dns[kDnsCloaked], 1u);
    } else {
      auto to_a = h.out(0);  // a RST to the client, the segment dropped
      ASSERT_EQ(to_a.size(), 1u);
      EXPECT_EQ(parseFrame(to_a[0]).tcp_flags & kTcpRst, kTcpRst);
      EXPECT_EQ(c.drops[static_cast<int>(DropReason::kDnsMalformed)], 1u);
      EXPECT_EQ(c.dns[kDnsTcpClosed], 1u);
    }
  }
}

// More split responses in progress than reassembly buffers (64 per worker): the one without
// a buffer is counted (tcp_no_buffer) and handled by the malformed policy (forward here); a
// buffer comes back when its response is complete.
TEST(DnsPipeline, TcpSplitResponsesBeyondThePool) {
  rules::DnsModel m = model();
  m.malformed = rules::Policy::kForward;
  Harness h(snapWith(m));
  auto r = framed(test::dnsCnameResponse("pool.example", {"a.ads.example"}, 11));
  constexpr int kConns = 65;
  for (int k = 0; k < kConns; ++k) handshake(h, static_cast<uint16_t>(43000 + k));
  for (int k = 0; k < kConns; ++k) {
    std::vector<uint8_t> first(r.begin(), r.begin() + 10);
    h.send(1, tcpSeg(static_cast<uint16_t>(43000 + k), kTcpAck | kTcpPsh, 5000, 1000, first, false));
    h.poll();
  }
  h.out(0);
  auto c = h.counters();
  EXPECT_EQ(c.dns[kDnsTcpNoBuffer], 1u);
  EXPECT_EQ(c.dns[kDnsMalformedForwarded], 1u);
  // The rest of each: 64 reassembled and cloaked, the 65th passed unread.
  for (int k = 0; k < kConns; ++k) {
    std::vector<uint8_t> rest(r.begin() + 10, r.end());
    h.send(1, tcpSeg(static_cast<uint16_t>(43000 + k), kTcpAck | kTcpPsh, 5010, 1000, rest, false));
    h.poll();
  }
  c = h.counters();
  EXPECT_EQ(c.dns[kDnsCloaked], 64u);
  // The buffers are back: a new connection's split response is reassembled again.
  handshake(h, 44000);
  h.send(1, tcpSeg(44000, kTcpAck | kTcpPsh, 5000, 1000, std::vector<uint8_t>(r.begin(), r.begin() + 10), false));
  h.send(1, tcpSeg(44000, kTcpAck | kTcpPsh, 5010, 1000, std::vector<uint8_t>(r.begin() + 10, r.end()), false));
  h.poll();
  EXPECT_EQ(h.counters().dns[kDnsCloaked], 65u);
  EXPECT_EQ(h.counters().dns[kDnsTcpNoBuffer], 1u);
}

// Many UDP queries in one burst (judged after one burst-wide lookup) get exactly the verdicts
// and answers they get one at a time.
TEST(DnsPipeline, BurstOfQueriesSameAsOneByOne) {
  const char* names[] = {"a.ads.example", "fine.example", "x.sink.example", "ok.ads.example",
                         "q.drop.example", "ADS.Example", "deep.a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.ads.example",
                         "clean.net"};
  auto run = [&](bool burst) {
    Harness h(snapWith(model()));
    std::vector<std::vector<uint8_t>> out_a, out_b;
    for (int round = 0; round < 4; ++round) {
      for (size_t k = 0; k < std::size(names); ++k) {
        h.send(0, udpQuery(names[k], kTypeA, 53, static_cast<uint16_t>(40000 + k), static_cast<uint16_t>(k)));
        if (!burst) h.poll();
      }
      h.poll();
    }
    for (auto& f : h.out(0)) out_a.push_back(f);
    for (auto& f : h.out(1)) out_b.push_back(f);
    auto c = h.counters();
    return std::make_tuple(out_a, out_b, c.dns[kDnsBlocked], c.dns[kDnsAllowed], c.dns[kDnsQueries]);
  };
  auto one = run(false), all = run(true);
  EXPECT_EQ(std::get<0>(one), std::get<0>(all));
  EXPECT_EQ(std::get<1>(one), std::get<1>(all));
  EXPECT_EQ(std::get<2>(one), std::get<2>(all));
  EXPECT_EQ(std::get<3>(one), std::get<3>(all));
  EXPECT_EQ(std::get<4>(one), std::get<4>(all));
  EXPECT_EQ(std::get<2>(all), 4u * 5);  // a, x.sink, q.drop, ADS, deep (ok.ads is allowed)
  EXPECT_EQ(std::get<3>(all), 4u);
}

TEST(DnsPipeline, CountersCarryOverAReload) {
  rules::DnsModel m = model();
  Harness h(snapWith(m));
  h.send(0, udpQuery("ads.example"));
  h.poll();
  EXPECT_EQ(h.dp().dnsLists()[0].blocked, 1u);
  // A new list in front; "ads" keeps its counters (slot by name) and its compiled set.
  const rules::CompiledDns* prev = h.dp().current().dns.get();
  auto first = h.dp().current().dns->lists[0];
  rules::DnsModel m2 = m;
  m2.lists.insert(m2.lists.begin(), list("new", DnsAction::kRefuse, {"new.example"}));
  auto s2 = snapWith(m2, prev);
  EXPECT_EQ(s2->dns->lists[1].get(), first.get());
  ASSERT_TRUE(h.dp().prepareAndPublish(std::move(s2)).ok());
  h.send(0, udpQuery("ads.example"));
  h.send(0, udpQuery("new.example"));
  h.poll();
  auto lists = h.dp().dnsLists();
  ASSERT_EQ(lists.size(), 5u);
  EXPECT_EQ(lists[0].name, "new");
  EXPECT_EQ(lists[0].blocked, 1u);
  EXPECT_EQ(lists[1].name, "ads");
  EXPECT_EQ(lists[1].blocked, 2u);
  auto to_a = h.out(0);
  ASSERT_EQ(to_a.size(), 3u);
  EXPECT_EQ(dnsOf(to_a[2])[3] & 0xf, 5);  // REFUSED
}

}  // namespace
}  // namespace dpu::dp
