// DNS message parser (including hostile messages), answer writer and answer frames.
#include "dataplane/stages/dns/dns_message.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "dataplane/packet/parser.h"
#include "rules/compiled/dns_name_set.h"
#include "tests/util/dns_builder.h"
#include "tests/util/packet_builder.h"

namespace dpu::dp {
namespace {

using test::dnsQuery;

DnsMsgStatus parseQ(const std::vector<uint8_t>& m, DnsQuestion& q) {
  return dnsParseQuestion(m.data(), static_cast<uint32_t>(m.size()), q);
}

TEST(DnsMessage, PlainQuery) {
  auto m = dnsQuery("WWW.Example.COM", kTypeAaaa, 0xbeef);
  DnsQuestion q;
  ASSERT_EQ(parseQ(m, q), DnsMsgStatus::kOk);
  EXPECT_EQ(q.id, 0xbeef);
  EXPECT_EQ(q.qtype, kTypeAaaa);
  EXPECT_EQ(q.qclass, 1);
  EXPECT_EQ(std::string(q.name.text), "www.example.com");
  EXPECT_EQ(q.name.nlabels, 3);
  EXPECT_EQ(q.name.wire_len, 17);
  EXPECT_FALSE(q.name.compressed);
  EXPECT_EQ(q.question_end, m.size());
  uint64_t hs[kDnsMaxNameLabels], ref[kDnsMaxNameLabels];
  q.name.suffixHashes(hs);
  ASSERT_EQ(rules::dnsSuffixHashes("www.example.com", ref, 128), 3);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(hs[k], ref[k]);
}

TEST(DnsMessage, RootAndNotInspected) {
  DnsQuestion q;
  auto root = dnsQuery("");
  ASSERT_EQ(parseQ(root, q), DnsMsgStatus::kOk);
  EXPECT_EQ(q.name.nlabels, 0);
  auto notify = dnsQuery("example.com", 6, 1, 0x2000);  // opcode 4 (NOTIFY)
  EXPECT_EQ(parseQ(notify, q), DnsMsgStatus::kNotInspected);
  auto two = dnsQuery("example.com");
  two[5] = 2;
  EXPECT_EQ(parseQ(two, q), DnsMsgStatus::kNotInspected);
  two[5] = 0;
  EXPECT_EQ(parseQ(two, q), DnsMsgStatus::kNotInspected);
}

TEST(DnsMessage, Hostile) {
  DnsQuestion q;
  std::vector<uint8_t> hdr = {0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
  // Truncated header / name / type.
  EXPECT_EQ(dnsParseQuestion(hdr.data(), 11, q), DnsMsgStatus::kTruncated);
  auto m = hdr;
  m.insert(m.end(), {3, 'w', 'w'});
  EXPECT_EQ(parseQ(m, q), DnsMsgStatus::kTruncated);
  auto full = dnsQuery("a.example");
  full.pop_back();
  EXPECT_EQ(parseQ(full, q), DnsMsgStatus::kTruncated);
  // Self pointer at the question.
  m = hdr;
  m.insert(m.end(), {0xc0, 12, 0, 1, 0, 1});
  EXPECT_EQ(parseQ(m, q), DnsMsgStatus::kPointerLoop);
  // Forward pointer.
  m = hdr;
  m.insert(m.end(), {0xc0, 14, 1, 'a', 0, 0, 1, 0, 1});
  EXPECT_EQ(parseQ(m, q), DnsMsgStatus::kPointerLoop);
  // A label then a pointer back to it: a loop through labels.
  m = hdr;
  m.insert(m.end(), {1, 'a', 0xc0, 12, 0, 1, 0, 1});
  EXPECT_EQ(parseQ(m, q), DnsMsgStatus::kPointerLoop);
  // Pointer past the end.
  m = hdr;
  m.insert(m.end(), {0xc3, 0xff, 0, 1, 0, 1});
  EXPECT_EQ(parseQ(m, q), DnsMsgStatus::kPointerOutOfBounds);
  // Pointer cut in half.
  m = hdr;
  m.push_back(0xc0);
  EXPECT_EQ(parseQ(m, q), DnsMsgStatus::kTruncated);
  // Label types 01 and 10.
  for (uint8_t t : {0x40, 0x80}) {
    m = hdr;
    m.insert(m.end(), {t, 0, 0, 1, 0, 1});
    EXPECT_EQ(parseQ(m, q), DnsMsgStatus::kBadLabelType);
  }
  // Over-long: 5 labels of 63 = 320 bytes.
  m = hdr;
  for (int i = 0; i < 5; ++i) {
    m.push_back(63);
    m.insert(m.end(), 63, 'a');
  }
  m.insert(m.end(), {0, 0, 1, 0, 1});
  EXPECT_EQ(parseQ(m, q), DnsMsgStatus::kNameTooLong);
  // Exactly 255: 3 x 63 + 61 labels + root = 64*3 + 62 + 1 = 255.
  m = hdr;
  for (int i = 0; i < 3; ++i) {
    m.push_back(63);
    m.insert(m.end(), 63, 'b');
  }
  m.push_back(61);
  m.insert(m.end(), 61, 'c');
  m.insert(m.end(), {0, 0, 1, 0, 1});
  ASSERT_EQ(parseQ(m, q), DnsMsgStatus::kOk);
  EXPECT_EQ(q.name.wire_len, 255);
  m[12 + 64 * 3] = 62;
  m.insert(m.begin() + 12 + 64 * 3 + 1, 'c');
  EXPECT_EQ(parseQ(m, q), DnsMsgStatus::kNameTooLong);
  // 128 one-letter labels (257 bytes).
  m = hdr;
  for (int i = 0; i < 128; ++i) m.insert(m.end(), {1, 'x'});
  m.insert(m.end(), {0, 0, 1, 0, 1});
  EXPECT_EQ(parseQ(m, q), DnsMsgStatus::kNameTooLong);
}

TEST(DnsMessage, CompressedQuestionAndPointerChains) {
  // A name in the additional-looking area before? Queries rarely compress; build a message
  // whose question points back into a name written in the header's tail is impossible, so
  // test decoding at a later offset: "x" + pointer to "example.com" at 12.
  auto m = dnsQuery("example.com");
  uint32_t second = static_cast<uint32_t>(m.size());
  m.insert(m.end(), {1, 'X', 0xc0, 12});
  uint32_t pos = second;
  DnsName n;
  ASSERT_EQ(dnsDecodeName(m.data(), static_cast<uint32_t>(m.size()), pos, &n), DnsMsgStatus::kOk);
  EXPECT_EQ(std::string(n.text), "x.example.com");
  EXPECT_TRUE(n.compressed);
  EXPECT_EQ(pos, m.size());
  // Chain of pointers, each strictly backwards: fine.
  uint32_t third = static_cast<uint32_t>(m.size());
  m.insert(m.end(), {0xc0, static_cast<uint8_t>(second)});
  pos = third;
  ASSERT_EQ(dnsDecodeName(m.data(), static_cast<uint32_t>(m.size()), pos, &n), DnsMsgStatus::kOk);
  EXPECT_EQ(std::string(n.text), "x.example.com");
}

TEST(DnsMessage, RandomBytesNeverCrash) {
  std::mt19937 rng(7);
  DnsQuestion q;
  DnsName scratch;
  for (int i = 0; i < 200000; ++i) {
    std::vector<uint8_t> m(rng() % 80);
    for (auto& b : m) b = static_cast<uint8_t>(rng() % 4 == 0 ? 0xc0 | (rng() & 1) : rng());
    if (m.size() > 5) { m[4] = 0; m[5] = 1; m[2] &= 0x87; }
    if (dnsParseQuestion(m.data(), static_cast<uint32_t>(m.size()), q) == DnsMsgStatus::kOk) {
      bool stopped;
      dnsScanCnames(m.data(), static_cast<uint32_t>(m.size()), q, scratch, stopped,
                    [](const DnsName&) { return false; });
    }
  }
}

TEST(DnsMessage, CnameScan) {
  auto r = test::dnsCnameResponse("www.shop.example", {"shop.example.cdn.net", "track.ads.example"});
  DnsQuestion q;
  ASSERT_EQ(parseQ(r, q), DnsMsgStatus::kOk);
  EXPECT_TRUE(q.isResponse());
  DnsName scratch;
  std::vector<std::string> seen;
  bool stopped;
  ASSERT_EQ(dnsScanCnames(r.data(), static_cast<uint32_t>(r.size()), q, scratch, stopped,
                          [&](const DnsName& n) { seen.emplace_back(n.text); return false; }),
            DnsMsgStatus::kOk);
  EXPECT_FALSE(stopped);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], "shop.example.cdn.net");
  EXPECT_EQ(seen[1], "track.ads.example");
  seen.clear();
  dnsScanCnames(r.data(), static_cast<uint32_t>(r.size()), q, scratch, stopped,
                [&](const DnsName& n) { seen.emplace_back(n.text); return true; });
  EXPECT_TRUE(stopped);
  EXPECT_EQ(seen.size(), 1u);
  // A truncated answer section is reported.
  r.resize(r.size() - 3);
  EXPECT_EQ(dnsScanCnames(r.data(), static_cast<uint32_t>(r.size()), q, scratch, stopped,
                          [](const DnsName&) { return false; }),
            DnsMsgStatus::kTruncated);
}

TEST(DnsMessage, Answers) {
  auto m = dnsQuery("Ads.Example.com", kTypeA, 0x4242, 0x0110);  // RD + CD
  DnsQuestion q;
  ASSERT_EQ(parseQ(m, q), DnsMsgStatus::kOk);
  uint8_t out[512];
  DnsAnswerSpec nx;
  nx.rcode = 3;
  uint16_t n = dnsWriteAnswer(m.data(), q, nx, out, sizeof(out));
  ASSERT_EQ(n, m.size());
  EXPECT_EQ(dnsGet16(out), 0x4242);
  EXPECT_EQ(dnsGet16(out + 2), kDnsQr | kDnsRd | kDnsRa | kDnsCd | 3);
  EXPECT_EQ(dnsGet16(out + 4), 1);
  EXPECT_EQ(dnsGet16(out + 6), 0);
  EXPECT_EQ(std::memcmp(out + 12, m.data() + 12, m.size() - 12), 0);  // question as asked
  // Sinkhole with two addresses.
  uint8_t addrs[8] = {10, 0, 0, 1, 10, 0, 0, 2};
  DnsAnswerSpec sink;
  sink.rr_type = kTypeA;
  sink.addrs = addrs;
  sink.naddrs = 2;
  sink.ttl = 60;
  n = dnsWriteAnswer(m.data(), q, sink, out, sizeof(out));
  ASSERT_EQ(n, m.size() + 2 * 16);
  EXPECT_EQ(dnsGet16(out + 6), 2);
  const uint8_t* rr = out + m.size();
  EXPECT_EQ(dnsGet16(rr), 0xc00c);
  EXPECT_EQ(dnsGet16(rr + 2), kTypeA);
  EXPECT_EQ(dnsGet16(rr + 8), 60);
  EXPECT_EQ(dnsGet16(rr + 10), 4);
  EXPECT_EQ(rr[12 + 16 + 3], 2);
  // The answer parses back with the same question.
  DnsQuestion back;
  ASSERT_EQ(dnsParseQuestion(out, n, back), DnsMsgStatus::kOk);
  EXPECT_TRUE(back.isResponse());
  EXPECT_EQ(std::string(back.name.text), "ads.example.com");
  // No room.
  EXPECT_EQ(dnsWriteAnswer(m.data(), q, sink, out, 20), 0);
}

TEST(DnsMessage, UdpAndTcpFrames) {
  auto msg = dnsQuery("blocked.example");
  for (bool v6 : {false, true}) {
    test::PacketBuilder pb;
    pb.eth(test::mac("02:00:00:00:00:0a"), test::mac("02:00:00:00:00:0b"));
    if (v6) pb.ipv6("2001:db8::1", "2001:db8::53"); else pb.ipv4("10.0.0.1", "10.0.0.53");
    test::Frame f = pb.udp(40000, 53).payload(msg).build();
    PacketMeta pm;
    ASSERT_EQ(parsePacket(f.data(), static_cast<uint32_t>(f.size()), pm), ParseStatus::kOk);
    DnsQuestion q;
    const uint8_t* dns = f.data() + pm.payload_offset;
    ASSERT_EQ(dnsParseQuestion(dns, pm.payload_len, q), DnsMsgStatus::kOk);
    uint8_t ans[512];
    DnsAnswerSpec nx;
    nx.rcode = 3;
    uint16_t alen = dnsWriteAnswer(dns, q, nx, ans, sizeof(ans));
    uint8_t out[1024];
    uint32_t len = dnsBuildFrame(f.data(), pm, true, ans, alen, false, out, sizeof(out));
    ASSERT_GT(len, 0u);
    test::Frame of(out, out + len);
    EXPECT_TRUE(test::checksumsOk(of));
    PacketMeta om;
    ASSERT_EQ(parsePacket(out, len, om), ParseStatus::kOk);
    EXPECT_EQ(om.src, pm.dst);
    EXPECT_EQ(om.dst, pm.src);
    EXPECT_EQ(om.sport, 53);
    EXPECT_EQ(om.dport, 40000);
    EXPECT_EQ(std::memcmp(out, f.data() + 6, 6), 0);  // MACs swapped
    EXPECT_EQ(std::memcmp(out + 6, f.data(), 6), 0);
    EXPECT_EQ(om.payload_len, alen);

    // TCP: length prefix, seq/ack from the query segment.
    std::vector<uint8_t> tp = {static_cast<uint8_t>(msg.size() >> 8), static_cast<uint8_t>(msg.size())};
    tp.insert(tp.end(), msg.begin(), msg.end());
    test::PacketBuilder tb;
    if (v6) tb.ipv6("2001:db8::1", "2001:db8::53"); else tb.ipv4("10.0.0.1", "10.0.0.53");
    test::Frame t = tb.tcp(40001, 53, kTcpAck | kTcpPsh, 1000, 5000).payload(tp).build();
    PacketMeta tm;
    ASSERT_EQ(parsePacket(t.data(), static_cast<uint32_t>(t.size()), tm), ParseStatus::kOk);
    uint8_t stream[600];
    uint32_t slen = 0;
    ASSERT_TRUE(dnsTcpAppend(ans, alen, stream, sizeof(stream), &slen));
    EXPECT_FALSE(dnsTcpAppend(ans, alen, stream, 10, &slen));
    len = dnsBuildFrame(t.data(), tm, true, stream, static_cast<uint16_t>(slen), true, out, sizeof(out));
    ASSERT_GT(len, 0u);
    test::Frame ot(out, out + len);
    EXPECT_TRUE(test::checksumsOk(ot));
    PacketMeta am;
    ASSERT_EQ(parsePacket(out, len, am), ParseStatus::kOk);
    EXPECT_EQ(am.tcp_seq, 5000u);
    EXPECT_EQ(am.tcp_ack, 1000u + tp.size());
    EXPECT_EQ(am.tcp_flags, kTcpAck | kTcpPsh | kTcpFin);
    EXPECT_EQ(am.payload_len, alen + 2);
    EXPECT_EQ(dnsGet16(out + am.payload_offset), alen);
  }
}

// An answer to a query inside a PPPoE session goes back inside the same session, its PPPoE
// length set for the answer (not copied from the query).
TEST(DnsMessage, FramesInsidePppoe) {
  auto msg = dnsQuery("blocked.example");
  for (bool v6 : {false, true}) {
    for (bool tcp : {false, true}) {
      SCOPED_TRACE(std::string(v6 ? "v6" : "v4") + (tcp ? " tcp" : " udp"));
      test::PacketBuilder pb;
      pb.vlan(5).pppoe(0x4242);
      if (v6) pb.ipv6("2001:db8::1", "2001:db8::53"); else pb.ipv4("10.0.0.1", "10.0.0.53");
      std::vector<uint8_t> body = msg;
      if (tcp) {
        body.insert(body.begin(), {static_cast<uint8_t>(msg.size() >> 8), static_cast<uint8_t>(msg.size())});
        pb.tcp(40001, 53, kTcpAck | kTcpPsh, 1000, 5000);
      } else {
        pb.udp(40000, 53);
      }
      test::Frame f = pb.payload(body).padTo(128).build();
      PacketMeta pm;
      ASSERT_EQ(parsePacket(f.data(), static_cast<uint32_t>(f.size()), pm), ParseStatus::kOk);
      ASSERT_EQ(pm.pppoe_offset, 18);
      DnsQuestion q;
      const uint8_t* dns = f.data() + pm.payload_offset + (tcp ? 2 : 0);
      ASSERT_EQ(dnsParseQuestion(dns, static_cast<uint16_t>(msg.size()), q), DnsMsgStatus::kOk);
      uint8_t ans[512];
      DnsAnswerSpec nx;
      nx.rcode = 3;
      uint16_t alen = dnsWriteAnswer(dns, q, nx, ans, sizeof(ans));
      uint8_t payload[600];
      uint32_t plen = alen;
      if (tcp) {
        plen = 0;
        ASSERT_TRUE(dnsTcpAppend(ans, alen, payload, sizeof(payload), &plen));
      } else {
        std::memcpy(payload, ans, alen);
      }
      uint8_t out[1024];
      uint32_t len = dnsBuildFrame(f.data(), pm, true, payload, static_cast<uint16_t>(plen), tcp,
                                   out, sizeof(out));
      ASSERT_GT(len, 0u);
      PacketMeta om;
      ASSERT_EQ(parsePacket(out, len, om), ParseStatus::kOk);
      EXPECT_TRUE(test::checksumsOk(test::Frame(out, out + len)));
      EXPECT_EQ(om.pppoe_offset, 18);
      EXPECT_EQ(om.pppoe_session, 0x4242);
      EXPECT_EQ(om.vlan_outer, 5);
      EXPECT_EQ(om.l3_offset, pm.l3_offset);
      // PPPoE length = the 2-byte PPP protocol + the answer's IP packet; no trailing bytes.
      EXPECT_EQ(dnsGet16(out + 18 + 4), 2u + om.l3_len);
      EXPECT_EQ(len, om.l3_offset + om.l3_len);
      EXPECT_EQ(om.src, pm.dst);
      EXPECT_EQ(om.dport, tcp ? 40001 : 40000);
      EXPECT_EQ(om.payload_len, plen);
    }
  }
}

}  // namespace
}  // namespace dpu::dp
