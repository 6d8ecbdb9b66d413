// Parser tests: every field of PacketMeta on well-formed frames, each malformation reason on a
// crafted frame, truncation and mutation robustness; plus the test packet builder itself.
#include "dataplane/packet/parser.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <new>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/util/packet_builder.h"

namespace dpu::dp {

// gtest printers (found by ADL, so they live in dpu::dp).
void PrintTo(ParseStatus s, std::ostream* os) { *os << parseStatusName(s); }
void PrintTo(const IpAddr& a, std::ostream* os) {
  *os << test::ipToString(a, false) << " / " << test::ipToString(a, true);
}

namespace {

using test::Frame;
using test::ip;
using test::PacketBuilder;

// Parses from a heap buffer of exactly f.size() bytes, so an overread trips ASan.
ParseStatus parse(const Frame& f, PacketMeta& m, size_t len) {
  std::unique_ptr<uint8_t[]> buf(new uint8_t[len]);
  if (len != 0) std::memcpy(buf.get(), f.data(), len);
  return parsePacket(buf.get(), static_cast<uint32_t>(len), m);
}

ParseStatus parse(const Frame& f, PacketMeta& m) { return parse(f, m, f.size()); }

PacketMeta parseOk(const Frame& f) {
  PacketMeta m;
  EXPECT_EQ(parse(f, m), ParseStatus::kOk);
  return m;
}

Frame bytes(size_t n, uint8_t first = 0) {
  Frame b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(first + i);
  return b;
}

Frame truncated(Frame f, size_t n) {
  f.resize(n);
  return f;
}

// Field-by-field (PacketMeta has padding bytes, so no memcmp).
bool sameMeta(const PacketMeta& a, const PacketMeta& b) {
  return a.frame_len == b.frame_len && a.l3_offset == b.l3_offset && a.l4_offset == b.l4_offset &&
         a.payload_offset == b.payload_offset && a.payload_len == b.payload_len &&
         a.ether_type == b.ether_type && a.vlan_outer == b.vlan_outer &&
         a.vlan_inner == b.vlan_inner && a.vlan_count == b.vlan_count &&
         a.pppoe_offset == b.pppoe_offset && a.pppoe_session == b.pppoe_session && a.l3 == b.l3 &&
         a.l4_proto == b.l4_proto && a.ttl == b.ttl && a.l3_len == b.l3_len && a.src == b.src &&
         a.dst == b.dst && a.sport == b.sport && a.dport == b.dport &&
         a.tcp_flags == b.tcp_flags && a.tcp_seq == b.tcp_seq && a.tcp_ack == b.tcp_ack &&
         a.icmp_type == b.icmp_type && a.icmp_code == b.icmp_code && a.has_l4 == b.has_l4 &&
         a.is_fragment == b.is_fragment && a.more_fragments == b.more_fragments &&
         a.frag_offset == b.frag_offset && a.frag_payload_len == b.frag_payload_len &&
         a.frag_id == b.frag_id;
}

uint16_t be16At(const Frame& f, size_t off) {
  return static_cast<uint16_t>((f[off] << 8) | f[off + 1]);
}

// ---------------------------------------------------------------------------------------------
// IPv4

TEST(ParserIpv4, TcpAllFields) {
  Frame f = PacketBuilder()
                .ipv4("10.0.0.1", "192.168.1.2", 63)
                .tcp(40000, 443, kTcpSyn, 0x11223344, 0)
                .payload("hello")
                .build();
  ASSERT_EQ(f.size(), 14u + 20 + 20 + 5);
  PacketMeta m = parseOk(f);
  EXPECT_EQ(m.frame_len, f.size());
  EXPECT_EQ(m.ether_type, 0x0800);
  EXPECT_EQ(m.vlan_count, 0);
  EXPECT_EQ(m.vlan_outer, 0);
  EXPECT_EQ(m.vlan_inner, 0);
  EXPECT_EQ(m.l3, L3Type::kIpv4);
  EXPECT_EQ(m.l3_offset, 14);
  EXPECT_EQ(m.l3_len, 45);
  EXPECT_EQ(m.l4_offset, 34);
  EXPECT_EQ(m.payload_offset, 54);
  EXPECT_EQ(m.payload_len, 5);
  EXPECT_EQ(std::memcmp(&f[m.payload_offset], "hello", 5), 0);
  EXPECT_EQ(m.l4_proto, 6);
  EXPECT_EQ(m.ttl, 63);
  EXPECT_EQ(m.src, ip("10.0.0.1"));
  EXPECT_EQ(m.dst, ip("192.168.1.2"));
  const uint8_t src_bytes[16] = {10, 0, 0, 1};
  EXPECT_EQ(std::memcmp(m.src.b, src_bytes, 16), 0);
  EXPECT_EQ(m.sport, 40000);
  EXPECT_EQ(m.dport, 443);
  EXPECT_EQ(m.tcp_flags, kTcpSyn);
  EXPECT_EQ(m.tcp_seq, 0x11223344u);
  EXPECT_EQ(m.tcp_ack, 0u);
  EXPECT_TRUE(m.has_l4);
  EXPECT_FALSE(m.is_fragment);
  EXPECT_FALSE(m.more_fragments);
  EXPECT_EQ(m.frag_offset, 0);
  EXPECT_EQ(m.frag_payload_len, 0);
  EXPECT_EQ(m.frag_id, 0u);
  EXPECT_EQ(m.icmp_type, 0);
}

TEST(ParserIpv4, TcpFlagsSeqAck) {
  const uint8_t flag_sets[] = {kTcpSyn,          kTcpSyn | kTcpAck, kTcpAck,
                               kTcpFin | kTcpAck, kTcpRst,          kTcpRst | kTcpAck,
                               kTcpPsh | kTcpAck, kTcpUrg | kTcpAck, 0x00,
                               0xC2 /* SYN+ECE+CWR */, 0xFF};
  for (uint8_t flags : flag_sets) {
    SCOPED_TRACE(static_cast<int>(flags));
    Frame f = PacketBuilder()
                  .ipv4("1.2.3.4", "5.6.7.8")
                  .tcp(1, 65535, flags, 0xFFFFFFF0u, 0x80000001u)
                  .build();
    PacketMeta m = parseOk(f);
    EXPECT_EQ(m.tcp_flags, flags);
    EXPECT_EQ(m.tcp_seq, 0xFFFFFFF0u);
    EXPECT_EQ(m.tcp_ack, 0x80000001u);
    EXPECT_EQ(m.sport, 1);
    EXPECT_EQ(m.dport, 65535);
  }
}

TEST(ParserIpv4, TcpOptionsMovePayload) {
  // MSS 1460, NOP, window scale 7, SACK permitted, NOP NOP.
  Frame f = PacketBuilder()
                .ipv4("10.0.0.1", "10.0.0.2")
                .tcp(1000, 80, kTcpSyn)
                .tcpOptions({2, 4, 0x05, 0xB4, 1, 3, 3, 7, 4, 2, 1, 1})
                .payload(bytes(7))
                .build();
  PacketMeta m = parseOk(f);
  EXPECT_EQ(m.l4_offset, 34);
  EXPECT_EQ(m.payload_offset, 34 + 32);
  EXPECT_EQ(m.payload_len, 7);
}

TEST(ParserIpv4, Udp) {
  Frame f = PacketBuilder().ipv4("10.0.0.1", "8.8.8.8").udp(5353, 53).payload(bytes(10)).build();
  PacketMeta m = parseOk(f);
  EXPECT_EQ(m.l4_proto, 17);
  EXPECT_TRUE(m.has_l4);
  EXPECT_EQ(m.sport, 5353);
  EXPECT_EQ(m.dport, 53);
  EXPECT_EQ(m.l4_offset, 34);
  EXPECT_EQ(m.payload_offset, 42);
  EXPECT_EQ(m.payload_len, 10);
  EXPECT_EQ(m.l3_len, 38);
  EXPECT_EQ(m.tcp_flags, 0);
}

TEST(ParserIpv4, UdpPayloadFollowsUdpLength) {
  // UDP says 12 bytes (4 of payload) inside an 18-byte IP payload: trailing bytes are not UDP.
  Frame f = PacketBuilder()
                .ipv4("10.0.0.1", "10.0.0.2")
                .udp(1, 2)
                .payload(bytes(10))
                .udpLength(12)
                .build();
  PacketMeta m = parseOk(f);
  EXPECT_EQ(m.payload_offset, 42);
  EXPECT_EQ(m.payload_len, 4);
  EXPECT_EQ(m.l3_len, 38);
}

TEST(ParserIpv4, IcmpEchoUsesIdentifierAsBothPorts) {
  for (uint8_t type : {uint8_t{8}, uint8_t{0}}) {
    SCOPED_TRACE(static_cast<int>(type));
    Frame f = PacketBuilder()
                  .ipv4("10.0.0.1", "10.0.0.2")
                  .icmp(type, 0, 0x4242, 7)
                  .payload(bytes(32))
                  .build();
    PacketMeta m = parseOk(f);
    EXPECT_EQ(m.l4_proto, 1);
    EXPECT_TRUE(m.has_l4);
    EXPECT_EQ(m.icmp_type, type);
    EXPECT_EQ(m.icmp_code, 0);
    EXPECT_EQ(m.sport, 0x4242);
    EXPECT_EQ(m.dport, 0x4242);
    EXPECT_EQ(m.payload_offset, 42);
    EXPECT_EQ(m.payload_len, 32);
  }
}

TEST(ParserIpv4, IcmpOtherTypesHaveZeroPorts) {
  const std::pair<uint8_t, uint8_t> types[] = {{3, 3}, {3, 4}, {11, 0}, {5, 1}, {13, 0}, {12, 0}};
  for (auto [type, code] : types) {
    SCOPED_TRACE(static_cast<int>(type));
    Frame f = PacketBuilder()
                  .ipv4("10.0.0.1", "10.0.0.2")
                  .icmp(type, code, 0x1234, 0x5678)
                  .payload(bytes(28))
                  .build();
    PacketMeta m = parseOk(f);
    EXPECT_TRUE(m.has_l4);
    EXPECT_EQ(m.icmp_type, type);
    EXPECT_EQ(m.icmp_code, code);
    EXPECT_EQ(m.sport, 0);
    EXPECT_EQ(m.dport, 0);
    EXPECT_EQ(m.payload_len, 28);
  }
}

TEST(ParserIpv4, NonEchoIcmpNeedsOnlyFourBytes) {
  Frame f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").l4Raw(1).payload({3, 1, 0, 0}).build();
  PacketMeta m = parseOk(f);
  EXPECT_TRUE(m.has_l4);
  EXPECT_EQ(m.icmp_type, 3);
  EXPECT_EQ(m.icmp_code, 1);
  EXPECT_EQ(m.payload_offset, 38);
  EXPECT_EQ(m.payload_len, 0);
}

TEST(ParserIpv4, OptionsShiftL4) {
  // Router alert (4 bytes) + NOP x3 + EOL.
  Frame f = PacketBuilder()
                .ipv4("10.0.0.1", "10.0.0.2")
                .ipv4Options({0x94, 0x04, 0x00, 0x00, 1, 1, 1, 0})
                .udp(1000, 2000)
                .payload(bytes(3))
                .build();
  EXPECT_EQ(f[14], 0x47);  // version 4, IHL 7
  PacketMeta m = parseOk(f);
  EXPECT_EQ(m.l4_offset, 14 + 28);
  EXPECT_EQ(m.payload_offset, 14 + 28 + 8);
  EXPECT_EQ(m.payload_len, 3);
  EXPECT_EQ(m.l3_len, 28 + 8 + 3);
  EXPECT_EQ(m.sport, 1000);
}

TEST(ParserIpv4, MaximumOptions) {
  Frame f = PacketBuilder()
                .ipv4("10.0.0.1", "10.0.0.2")
                .ipv4Options(Frame(40, 1))
                .tcp(1, 2, kTcpAck)
                .build();
  EXPECT_EQ(f[14], 0x4F);
  PacketMeta m = parseOk(f);
  EXPECT_EQ(m.l4_offset, 14 + 60);
  EXPECT_EQ(m.payload_offset, 14 + 60 + 20);
  EXPECT_EQ(m.payload_len, 0);
}

TEST(ParserIpv4, EthernetPaddingIsIgnored) {
  Frame f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).payload({0xAA, 0xBB}).padTo(60)
                .build();
  ASSERT_EQ(f.size(), 60u);
  PacketMeta m = parseOk(f);
  EXPECT_EQ(m.frame_len, 60u);
  EXPECT_EQ(m.l3_len, 30);
  EXPECT_EQ(m.payload_offset, 42);
  EXPECT_EQ(m.payload_len, 2);

  Frame t = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 2, kTcpAck).padTo(60).build();
  PacketMeta mt = parseOk(t);
  EXPECT_EQ(mt.l3_len, 40);
  EXPECT_EQ(mt.payload_offset, 54);
  EXPECT_EQ(mt.payload_len, 0);
}

TEST(ParserIpv4, OtherProtocolsHaveNoL4) {
  for (uint8_t proto : {test::kIpProtoGre, test::kIpProtoEsp, test::kIpProtoAh,
                        test::kIpProtoSctp, test::kIpProtoIcmpv6, uint8_t{255}}) {
    SCOPED_TRACE(static_cast<int>(proto));
    Frame f =
        PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").l4Raw(proto).payload(bytes(24, 1)).build();
    PacketMeta m = parseOk(f);
    EXPECT_EQ(m.l4_proto, proto);
    EXPECT_FALSE(m.has_l4);
    EXPECT_EQ(m.sport, 0);
    EXPECT_EQ(m.dport, 0);
    EXPECT_EQ(m.l4_offset, 34);
    EXPECT_EQ(m.payload_offset, 34);
    EXPECT_EQ(m.payload_len, 24);
    EXPECT_EQ(m.src, ip("10.0.0.1"));
  }
}

TEST(ParserIpv4, DontFragmentIsNotAFragment) {
  Frame f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").ipv4Id(99).ipv4DontFragment().udp(1, 2)
                .build();
  PacketMeta m = parseOk(f);
  EXPECT_FALSE(m.is_fragment);
  EXPECT_EQ(m.frag_id, 0u);
  EXPECT_TRUE(m.has_l4);
}

// ---------------------------------------------------------------------------------------------
// IPv6

TEST(ParserIpv6, TcpAllFields) {
  Frame f = PacketBuilder()
                .ipv6("2001:db8::1", "2001:db8:ffff::2", 32)
                .tcp(50000, 22, kTcpSyn | kTcpAck, 7, 9)
                .payload(bytes(11))
                .build();
  PacketMeta m = parseOk(f);
  EXPECT_EQ(m.ether_type, 0x86DD);
  EXPECT_EQ(m.l3, L3Type::kIpv6);
  EXPECT_EQ(m.l3_offset, 14);
  EXPECT_EQ(m.l3_len, 40 + 20 + 11);
  EXPECT_EQ(m.l4_offset, 54);
  EXPECT_EQ(m.payload_offset, 74);
  EXPECT_EQ(m.payload_len, 11);
  EXPECT_EQ(m.ttl, 32);
  EXPECT_EQ(m.src, ip("2001:db8::1"));
  EXPECT_EQ(m.dst, ip("2001:db8:ffff::2"));
  EXPECT_EQ(m.l4_proto, 6);
  EXPECT_EQ(m.sport, 50000);
  EXPECT_EQ(m.dport, 22);
  EXPECT_EQ(m.tcp_flags, kTcpSyn | kTcpAck);
  EXPECT_EQ(m.tcp_seq, 7u);
  EXPECT_EQ(m.tcp_ack, 9u);
  EXPECT_TRUE(m.has_l4);
  EXPECT_FALSE(m.is_fragment);
}

TEST(ParserIpv6, Udp) {
  Frame f = PacketBuilder().ipv6("fe80::1", "ff02::fb").udp(5353, 5353).payload(bytes(20)).build();
  PacketMeta m = parseOk(f);
  EXPECT_EQ(m.l4_proto, 17);
  EXPECT_EQ(m.sport, 5353);
  EXPECT_EQ(m.dport, 5353);
  EXPECT_EQ(m.payload_offset, 62);
  EXPECT_EQ(m.payload_len, 20);
}

TEST(ParserIpv6, Icmpv6Echo) {
  for (uint8_t type : {uint8_t{128}, uint8_t{129}}) {
    SCOPED_TRACE(static_cast<int>(type));
    Frame f =
        PacketBuilder().ipv6("::1", "::2").icmpv6(type, 0, 0xBEEF, 1).payload(bytes(16)).build();
    PacketMeta m = parseOk(f);
    EXPECT_EQ(m.l4_proto, 58);
    EXPECT_TRUE(m.has_l4);
    EXPECT_EQ(m.icmp_type, type);
    EXPECT_EQ(m.sport, 0xBEEF);
    EXPECT_EQ(m.dport, 0xBEEF);
    EXPECT_EQ(m.payload_offset, 62);
    EXPECT_EQ(m.payload_len, 16);
  }
}

TEST(ParserIpv6, Icmpv6OtherTypesHaveZeroPorts) {
  for (uint8_t type : {uint8_t{1}, uint8_t{2}, uint8_t{3}, uint8_t{135}, uint8_t{136}}) {
    SCOPED_TRACE(static_cast<int>(type));
    Frame f = PacketBuilder().ipv6("::1", "::2").icmpv6(type, 4, 0x1111, 2).payload(bytes(16))
                  .build();
    PacketMeta m = parseOk(f);
    EXPECT_TRUE(m.has_l4);
    EXPECT_EQ(m.icmp_type, type);
    EXPECT_EQ(m.icmp_code, 4);
    EXPECT_EQ(m.sport, 0);
    EXPECT_EQ(m.dport, 0);
  }
}

TEST(ParserIpv6, IcmpOverTheWrongIpVersionHasNoL4) {
  PacketMeta m = parseOk(PacketBuilder().ipv6("::1", "::2").l4Raw(1).payload(bytes(8, 8)).build());
  EXPECT_EQ(m.l4_proto, 1);
  EXPECT_FALSE(m.has_l4);
  EXPECT_EQ(m.sport, 0);
}

TEST(ParserIpv6, HopByHopRoutingDestOpts) {
  Frame f = PacketBuilder()
                .ipv6("2001:db8::1", "2001:db8::2")
                .ipv6HopByHop(8)
                .ipv6Routing(24)
                .ipv6DestOpts(16)
                .tcp(1234, 80, kTcpAck)
                .payload(bytes(5))
                .build();
  PacketMeta m = parseOk(f);
  EXPECT_EQ(m.l4_proto, 6);
  EXPECT_EQ(m.l4_offset, 54 + 8 + 24 + 16);
  EXPECT_EQ(m.payload_offset, m.l4_offset + 20);
  EXPECT_EQ(m.payload_len, 5);
  EXPECT_EQ(m.l3_len, 40 + 48 + 25);
  EXPECT_EQ(m.sport, 1234);
  EXPECT_TRUE(m.has_l4);
  EXPECT_FALSE(m.is_fragment);
}

TEST(ParserIpv6, LargeHopByHop) {
  Frame f = PacketBuilder().ipv6("::1", "::2").ipv6HopByHop(2048).udp(7, 9).build();
  PacketMeta m = parseOk(f);
  EXPECT_EQ(m.l4_offset, 54 + 2048);
  EXPECT_EQ(m.dport, 9);
}

TEST(ParserIpv6, AuthenticationHeaderUsesFourByteUnits) {
  // AH: next header, payload length 1 -> (1 + 2) * 4 = 12 bytes, reserved, SPI, sequence.
  Frame f = PacketBuilder()
                .ipv6("::1", "::2")
                .ipv6Ext(test::kIpProtoAh, {0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 5})
                .udp(1, 2)
                .build();
  PacketMeta m = parseOk(f);
  EXPECT_EQ(m.l4_offset, 54 + 12);
  EXPECT_EQ(m.l4_proto, 17);
  EXPECT_TRUE(m.has_l4);
  EXPECT_EQ(m.sport, 1);
}

TEST(ParserIpv6, MobilityThenNoNextHeader) {
  Frame f = PacketBuilder()
                .ipv6("::1", "::2")
                .ipv6Ext(test::kIpv6Mobility, {0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
                .l4Raw(test::kIpProtoNoNext)
                .build();
  PacketMeta m = parseOk(f);
  EXPECT_EQ(m.l4_proto, 59);
  EXPECT_EQ(m.l4_offset, 54 + 16);
  EXPECT_FALSE(m.has_l4);
}

TEST(ParserIpv6, NoNextHeaderAndUnknownProtocols) {
  PacketMeta m = parseOk(PacketBuilder().ipv6("::1", "::2").l4Raw(59).build());
  EXPECT_EQ(m.l4_proto, 59);
  EXPECT_EQ(m.l3_len, 40);
  EXPECT_EQ(m.l4_offset, 54);
  EXPECT_FALSE(m.has_l4);

  for (uint8_t proto : {test::kIpProtoEsp, test::kIpProtoGre, test::kIpProtoSctp}) {
    SCOPED_TRACE(static_cast<int>(proto));
    PacketMeta u = parseOk(
        PacketBuilder().ipv6("::1", "::2").ipv6DestOpts().l4Raw(proto).payload(bytes(16)).build());
    EXPECT_EQ(u.l4_proto, proto);
    EXPECT_FALSE(u.has_l4);
    EXPECT_EQ(u.sport, 0);
    EXPECT_EQ(u.payload_offset, 62);
    EXPECT_EQ(u.payload_len, 16);
  }
}

TEST(ParserIpv6, EightExtensionHeadersAreAllowed) {
  PacketBuilder b;
  b.ipv6("::1", "::2").ipv6HopByHop();
  for (int i = 0; i < 7; ++i) b.ipv6DestOpts();
  PacketMeta m = parseOk(b.udp(1, 2).build());
  EXPECT_EQ(m.l4_offset, 54 + 64);
  EXPECT_TRUE(m.has_l4);
}

// ---------------------------------------------------------------------------------------------
// VLAN

TEST(ParserVlan, SingleTag) {
  Frame f = PacketBuilder().vlan(100).ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  EXPECT_EQ(be16At(f, 12), 0x8100);
  PacketMeta m = parseOk(f);
  EXPECT_EQ(m.vlan_count, 1);
  EXPECT_EQ(m.vlan_outer, 100);
  EXPECT_EQ(m.vlan_inner, 0);
  EXPECT_EQ(m.ether_type, 0x0800);
  EXPECT_EQ(m.l3_offset, 18);
  EXPECT_EQ(m.l4_offset, 38);
  EXPECT_EQ(m.sport, 1);
}

TEST(ParserVlan, PriorityBitsAreNotPartOfTheVid) {
  PacketMeta m = parseOk(
      PacketBuilder().vlan(4095, 7).ipv6("::1", "::2").tcp(1, 2, kTcpSyn).build());
  EXPECT_EQ(m.vlan_outer, 4095);
  PacketMeta z = parseOk(PacketBuilder().vlan(0, 5).ipv4("1.1.1.1", "2.2.2.2").udp(1, 2).build());
  EXPECT_EQ(z.vlan_count, 1);
  EXPECT_EQ(z.vlan_outer, 0);
}

TEST(ParserVlan, QinQ) {
  Frame f = PacketBuilder().vlan(100).vlan(200).ipv6("::1", "::2").udp(1, 2).build();
  EXPECT_EQ(be16At(f, 12), 0x88A8);
  EXPECT_EQ(be16At(f, 16), 0x8100);
  PacketMeta m = parseOk(f);
  EXPECT_EQ(m.vlan_count, 2);
  EXPECT_EQ(m.vlan_outer, 100);
  EXPECT_EQ(m.vlan_inner, 200);
  EXPECT_EQ(m.ether_type, 0x86DD);
  EXPECT_EQ(m.l3_offset, 22);
  EXPECT_EQ(m.l4_offset, 62);
}

TEST(ParserVlan, AllTpidCombinations) {
  const uint16_t tpids[] = {test::kTpid8021Q, test::kTpid8021Ad, test::kTpidQinQ9100};
  for (uint16_t outer : tpids) {
    PacketMeta one =
        parseOk(PacketBuilder().vlanTag(outer, 7).ipv4("1.1.1.1", "2.2.2.2").udp(1, 2).build());
    EXPECT_EQ(one.vlan_count, 1);
    EXPECT_EQ(one.vlan_outer, 7);
    for (uint16_t inner : tpids) {
      SCOPED_TRACE(std::to_string(outer) + "/" + std::to_string(inner));
      Frame f = PacketBuilder()
                    .vlanTag(outer, 10)
                    .vlanTag(inner, 20)
                    .ipv4("1.1.1.1", "2.2.2.2")
                    .tcp(1, 2, kTcpAck)
                    .build();
      PacketMeta m = parseOk(f);
      EXPECT_EQ(m.vlan_count, 2);
      EXPECT_EQ(m.vlan_outer, 10);
      EXPECT_EQ(m.vlan_inner, 20);
      EXPECT_EQ(m.l3_offset, 22);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// PPPoE sessions: the IP packet inside is parsed like one behind a tag.

TEST(ParserPppoe, Ipv4Session) {
  Frame f = PacketBuilder().pppoe(0x1234).ipv4("10.0.0.1", "10.0.0.2").tcp(1000, 80, kTcpSyn, 7)
                .payload(bytes(5)).padTo(80).build();
  EXPECT_EQ(be16At(f, 12), 0x8864);
  EXPECT_EQ(f[14], 0x11);
  EXPECT_EQ(be16At(f, 18), 2 + 20 + 20 + 5);  // PPPoE length: protocol + IP, no padding
  EXPECT_EQ(be16At(f, 20), 0x0021);
  PacketMeta m = parseOk(f);
  EXPECT_EQ(m.ether_type, 0x8864);
  EXPECT_EQ(m.pppoe_offset, 14);
  EXPECT_EQ(m.pppoe_session, 0x1234);
  EXPECT_EQ(m.l3, L3Type::kIpv4);
  EXPECT_EQ(m.l3_offset, 22);
  EXPECT_EQ(m.l4_offset, 42);
  EXPECT_EQ(m.l3_len, 45);
  EXPECT_TRUE(m.has_l4);
  EXPECT_EQ(m.sport, 1000);
  EXPECT_EQ(m.dport, 80);
  EXPECT_EQ(m.tcp_seq, 7u);
  EXPECT_EQ(m.payload_offset, 62);
  EXPECT_EQ(m.payload_len, 5);
  EXPECT_EQ(m.src, ip("10.0.0.1"));
  EXPECT_TRUE(test::checksumsOk(f));
}

TEST(ParserPppoe, Ipv6SessionBehindTagsAndCompressedProtocol) {
  Frame f = PacketBuilder().vlan(10).vlan(20).pppoe(7).ipv6("2001:db8::1", "2001:db8::2")
                .ipv6HopByHop().udp(5353, 53).payload(bytes(12)).build();
  PacketMeta m = parseOk(f);
  EXPECT_EQ(m.vlan_count, 2);
  EXPECT_EQ(m.vlan_inner, 20);
  EXPECT_EQ(m.pppoe_offset, 22);
  EXPECT_EQ(m.pppoe_session, 7);
  EXPECT_EQ(m.l3, L3Type::kIpv6);
  EXPECT_EQ(m.l3_offset, 30);
  EXPECT_EQ(m.l4_offset, 30 + 40 + 8);
  EXPECT_EQ(m.dport, 53);
  EXPECT_EQ(m.payload_len, 12);
  // PPP protocol field compression (one byte, 0x21 / 0x57): the IP header starts one byte
  // earlier, at an odd offset.
  Frame c = PacketBuilder().pppoe(9, true).ipv4("1.1.1.1", "2.2.2.2").udp(1, 2).build();
  EXPECT_EQ(c[20], 0x21);
  PacketMeta mc = parseOk(c);
  EXPECT_EQ(mc.l3_offset, 21);
  EXPECT_EQ(mc.l3, L3Type::kIpv4);
  EXPECT_EQ(mc.sport, 1);
  Frame c6 = PacketBuilder().pppoe(9, true).ipv6("::1", "::2").udp(1, 2).build();
  EXPECT_EQ(c6[20], 0x57);
  EXPECT_EQ(parseOk(c6).l3, L3Type::kIpv6);
}

TEST(ParserPppoe, LengthBoundsTheIpPacket) {
  // Bytes after the PPPoE payload are padding, as after an IP datagram.
  Frame f = PacketBuilder().pppoe(1).ipv4("1.1.1.1", "2.2.2.2").udp(1, 2).payload(bytes(4))
                .padTo(100).build();
  EXPECT_EQ(parseOk(f).payload_len, 4);
  // An IP packet longer than the PPPoE payload that carries it is malformed, even when the
  // frame holds its bytes.
  PacketMeta m;
  EXPECT_EQ(parse(PacketBuilder().pppoe(1).ipv4("1.1.1.1", "2.2.2.2").udp(1, 2).payload(bytes(4))
                      .pppoeLength(2 + 31).build(), m),
            ParseStatus::kBadIpv4TotalLength);
  EXPECT_EQ(parse(PacketBuilder().pppoe(1).ipv6("::1", "::2").udp(1, 2).pppoeLength(2 + 47)
                      .build(), m),
            ParseStatus::kBadIpv6PayloadLength);
  EXPECT_EQ(parse(PacketBuilder().pppoe(1).ipv4("1.1.1.1", "2.2.2.2").udp(1, 2)
                      .pppoeLength(2 + 19).build(), m),
            ParseStatus::kTruncatedIpv4);
}

TEST(ParserPppoe, DiscoveryAndControlFramesAreNonIp) {
  // Discovery (PADI), LCP, IPCP, IP6CP, PAP in a session, a session with another version or
  // code: no IP to judge.
  Frame padi = PacketBuilder().etherType(0x8863).payload({0x11, 0x09, 0, 0, 0, 4, 1, 1, 0, 0})
                   .padTo(60).build();
  PacketMeta m;
  EXPECT_EQ(parse(padi, m), ParseStatus::kNonIp);
  EXPECT_EQ(m.ether_type, 0x8863);
  for (uint16_t proto : {0xC021, 0x8021, 0x8057, 0xC023, 0x0031, 0x0023}) {
    SCOPED_TRACE(proto);
    Frame f = PacketBuilder().etherType(0x8864)
                  .payload({0x11, 0, 0, 0x11, 0, 6, uint8_t(proto >> 8), uint8_t(proto), 1, 1, 0, 4})
                  .padTo(60).build();
    EXPECT_EQ(parse(f, m), ParseStatus::kNonIp);
    EXPECT_EQ(m.l3, L3Type::kNone);
    EXPECT_EQ(m.pppoe_offset, 0);
  }
  Frame ip4 = PacketBuilder().pppoe(3).ipv4("1.1.1.1", "2.2.2.2").udp(1, 2).build();
  Frame other_ver = ip4;
  other_ver[14] = 0x21;
  EXPECT_EQ(parse(other_ver, m), ParseStatus::kNonIp);
  Frame padt = ip4;
  padt[15] = 0xA7;  // a discovery code in a session frame
  EXPECT_EQ(parse(padt, m), ParseStatus::kNonIp);
}

TEST(ParserPppoe, SessionHeaderCutOrLying) {
  Frame f = PacketBuilder().pppoe(3).ipv4("1.1.1.1", "2.2.2.2").udp(1, 2).build();
  PacketMeta m;
  for (size_t n = 14; n < 22; ++n) {
    SCOPED_TRACE(n);
    EXPECT_EQ(parse(truncated(f, n), m), ParseStatus::kTruncatedPppoe);
  }
  Frame c = PacketBuilder().pppoe(3, true).ipv4("1.1.1.1", "2.2.2.2").udp(1, 2).build();
  EXPECT_EQ(parse(truncated(c, 20), m), ParseStatus::kTruncatedPppoe);
  EXPECT_EQ(parse(truncated(c, 21), m), ParseStatus::kBadPppoeLength);  // length past the frame
  EXPECT_EQ(parse(PacketBuilder().pppoe(3).ipv4("1.1.1.1", "2.2.2.2").udp(1, 2).pppoeLength(1)
                      .build(), m),
            ParseStatus::kBadPppoeLength);
  EXPECT_EQ(parse(PacketBuilder().pppoe(3).ipv4("1.1.1.1", "2.2.2.2").udp(1, 2).pppoeLength(31)
                      .build(), m),
            ParseStatus::kBadPppoeLength);
}

// ---------------------------------------------------------------------------------------------
// Non-IP

TEST(ParserNonIp, Arp) {
  Frame f = PacketBuilder().arp(1, "10.0.0.1", "10.0.0.2").build();
  EXPECT_EQ(f.size(), 14u + 28);
  PacketMeta m;
  EXPECT_EQ(parse(f, m), ParseStatus::kNonIp);
  EXPECT_EQ(m.ether_type, 0x0806);
  EXPECT_EQ(m.l3, L3Type::kNone);
  EXPECT_EQ(m.l3_offset, 14);
  EXPECT_FALSE(m.has_l4);
  EXPECT_EQ(m.frame_len, f.size());
}

TEST(ParserNonIp, ArpInQinQ) {
  Frame f = PacketBuilder().vlan(5).vlan(6).arp(2, "10.0.0.1", "10.0.0.2").padTo(64).build();
  PacketMeta m;
  EXPECT_EQ(parse(f, m), ParseStatus::kNonIp);
  EXPECT_EQ(m.ether_type, 0x0806);
  EXPECT_EQ(m.vlan_count, 2);
  EXPECT_EQ(m.vlan_outer, 5);
  EXPECT_EQ(m.vlan_inner, 6);
  EXPECT_EQ(m.l3_offset, 22);
}

TEST(ParserNonIp, OtherEtherTypes) {
  for (uint16_t type : {test::kEtherTypeLldp, uint16_t{0x88B5}, uint16_t{0x002E},
                        uint16_t{0x8847} /* MPLS */}) {
    SCOPED_TRACE(type);
    PacketMeta m;
    EXPECT_EQ(parse(PacketBuilder().etherType(type).payload(bytes(46)).build(), m),
              ParseStatus::kNonIp);
    EXPECT_EQ(m.ether_type, type);
  }
  PacketMeta bare;
  EXPECT_EQ(parse(PacketBuilder().etherType(0x0806).build(), bare), ParseStatus::kNonIp);
}

// ---------------------------------------------------------------------------------------------
// Fragments

TEST(ParserFragments, Ipv4FirstMiddleLast) {
  Frame whole = PacketBuilder()
                    .ipv4("10.0.0.1", "10.0.0.2")
                    .ipv4Id(0xBEEF)
                    .udp(4000, 5000)
                    .payload(bytes(3000))
                    .build();
  std::vector<Frame> frags = test::fragmentIpv4(whole, 1480);
  ASSERT_EQ(frags.size(), 3u);

  PacketMeta first = parseOk(frags[0]);
  EXPECT_TRUE(first.is_fragment);
  EXPECT_TRUE(first.more_fragments);
  EXPECT_TRUE(first.isFirstFragment());
  EXPECT_FALSE(first.isLaterFragment());
  EXPECT_EQ(first.frag_offset, 0);
  EXPECT_EQ(first.frag_id, 0xBEEFu);
  EXPECT_EQ(first.frag_payload_len, 1480);
  EXPECT_TRUE(first.has_l4);
  EXPECT_EQ(first.l4_proto, 17);
  EXPECT_EQ(first.sport, 4000);
  EXPECT_EQ(first.dport, 5000);
  EXPECT_EQ(first.payload_offset, 42);
  EXPECT_EQ(first.payload_len, 1480 - 8);

  PacketMeta middle = parseOk(frags[1]);
  EXPECT_TRUE(middle.is_fragment);
  EXPECT_TRUE(middle.more_fragments);
  EXPECT_TRUE(middle.isLaterFragment());
  EXPECT_EQ(middle.frag_offset, 1480);
  EXPECT_EQ(middle.frag_id, 0xBEEFu);
  EXPECT_EQ(middle.frag_payload_len, 1480);
  EXPECT_FALSE(middle.has_l4);
  EXPECT_EQ(middle.l4_proto, 17);
  EXPECT_EQ(middle.sport, 0);
  EXPECT_EQ(middle.dport, 0);
  EXPECT_EQ(middle.l4_offset, 34);
  EXPECT_EQ(middle.payload_offset, 34);
  EXPECT_EQ(middle.payload_len, 1480);
  EXPECT_EQ(middle.src, ip("10.0.0.1"));

  PacketMeta last = parseOk(frags[2]);
  EXPECT_TRUE(last.is_fragment);
  EXPECT_FALSE(last.more_fragments);
  EXPECT_EQ(last.frag_offset, 2960);
  EXPECT_EQ(last.frag_payload_len, 3008 - 2960);
  EXPECT_FALSE(last.has_l4);
}

TEST(ParserFragments, Ipv4TcpFirstFragmentHasL4) {
  Frame whole = PacketBuilder()
                    .ipv4("10.0.0.1", "10.0.0.2")
                    .ipv4Id(3)
                    .tcp(1111, 80, kTcpPsh | kTcpAck, 100, 200)
                    .payload(bytes(100))
                    .build();
  std::vector<Frame> frags = test::fragmentIpv4(whole, 64);
  ASSERT_EQ(frags.size(), 2u);
  PacketMeta m = parseOk(frags[0]);
  EXPECT_TRUE(m.has_l4);
  EXPECT_EQ(m.tcp_seq, 100u);
  EXPECT_EQ(m.payload_len, 44);
  EXPECT_EQ(m.frag_payload_len, 64);
  PacketMeta l = parseOk(frags[1]);
  EXPECT_EQ(l.frag_offset, 64);
  EXPECT_EQ(l.frag_payload_len, 56);
  EXPECT_EQ(l.l4_proto, 6);
  EXPECT_EQ(l.tcp_seq, 0u);
}

TEST(ParserFragments, Ipv4FragmentWithOptions) {
  // Router alert has the copied flag; record route (7 bytes) does not.
  Frame whole = PacketBuilder()
                    .ipv4("10.0.0.1", "10.0.0.2")
                    .ipv4Options({0x94, 4, 0, 0, 0x07, 7, 4, 0, 0, 0, 0, 0})
                    .udp(1, 2)
                    .payload(bytes(40))
                    .build();
  std::vector<Frame> frags = test::fragmentIpv4(whole, 16);
  ASSERT_EQ(frags.size(), 3u);
  PacketMeta first = parseOk(frags[0]);
  EXPECT_EQ(first.l4_offset, 14 + 32);
  EXPECT_TRUE(first.has_l4);
  PacketMeta second = parseOk(frags[1]);
  EXPECT_EQ(second.l4_offset, 14 + 24);
  EXPECT_EQ(second.frag_offset, 16);
  EXPECT_EQ(second.frag_payload_len, 16);
}

TEST(ParserFragments, Ipv4LaterFragmentBuiltDirectly) {
  Frame f = PacketBuilder()
                .vlan(30)
                .ipv4("10.0.0.1", "10.0.0.2")
                .ipv4Fragment(0x7777, 1480, false)
                .l4Raw(6)
                .payload(bytes(100))
                .build();
  PacketMeta m = parseOk(f);
  EXPECT_TRUE(m.isLaterFragment());
  EXPECT_FALSE(m.more_fragments);
  EXPECT_EQ(m.frag_offset, 1480);
  EXPECT_EQ(m.frag_id, 0x7777u);
  EXPECT_EQ(m.frag_payload_len, 100);
  EXPECT_EQ(m.l4_proto, 6);
  EXPECT_FALSE(m.has_l4);
  EXPECT_EQ(m.tcp_flags, 0);
  EXPECT_EQ(m.vlan_outer, 30);
}

TEST(ParserFragments, Ipv4LargestValidOffset) {
  // 65528 + 7 = 65535: the last byte a datagram can have.
  Frame f = PacketBuilder()
                .ipv4("10.0.0.1", "10.0.0.2")
                .ipv4Fragment(1, 65528, false)
                .l4Raw(17)
                .payload(bytes(7))
                .build();
  PacketMeta m = parseOk(f);
  EXPECT_EQ(m.frag_offset, 65528);
  EXPECT_EQ(m.frag_payload_len, 7);
}

TEST(ParserFragments, Ipv6FirstMiddleLast) {
  Frame whole = PacketBuilder()
                    .ipv6("2001:db8::1", "2001:db8::2")
                    .ipv6HopByHop()
                    .udp(4000, 53)
                    .payload(bytes(3000))
                    .build();
  std::vector<Frame> frags = test::fragmentIpv6(whole, 1232, 0xDEADBEEF);
  ASSERT_EQ(frags.size(), 3u);

  PacketMeta first = parseOk(frags[0]);
  EXPECT_TRUE(first.is_fragment);
  EXPECT_TRUE(first.more_fragments);
  EXPECT_EQ(first.frag_offset, 0);
  EXPECT_EQ(first.frag_id, 0xDEADBEEFu);
  EXPECT_EQ(first.frag_payload_len, 1232);
  EXPECT_TRUE(first.has_l4);
  EXPECT_EQ(first.l4_proto, 17);
  EXPECT_EQ(first.l4_offset, 54 + 8 + 8);
  EXPECT_EQ(first.sport, 4000);
  EXPECT_EQ(first.dport, 53);
  EXPECT_EQ(first.payload_len, 1232 - 8);

  PacketMeta middle = parseOk(frags[1]);
  EXPECT_TRUE(middle.isLaterFragment());
  EXPECT_TRUE(middle.more_fragments);
  EXPECT_EQ(middle.frag_offset, 1232);
  EXPECT_EQ(middle.frag_id, 0xDEADBEEFu);
  EXPECT_FALSE(middle.has_l4);
  EXPECT_EQ(middle.l4_proto, 17);
  EXPECT_EQ(middle.l4_offset, 70);
  EXPECT_EQ(middle.payload_offset, 70);
  EXPECT_EQ(middle.payload_len, 1232);
  EXPECT_EQ(middle.sport, 0);

  PacketMeta last = parseOk(frags[2]);
  EXPECT_FALSE(last.more_fragments);
  EXPECT_EQ(last.frag_offset, 2464);
  EXPECT_EQ(last.frag_payload_len, 3008 - 2464);
  EXPECT_EQ(last.l3_len, 40 + 8 + 8 + 3008 - 2464);
}

TEST(ParserFragments, Ipv6FirstFragmentWalksHeadersAfterTheFragmentHeader) {
  Frame whole = PacketBuilder()
                    .ipv6("2001:db8::1", "2001:db8::2")
                    .ipv6DestOpts()
                    .tcp(1, 2, kTcpSyn)
                    .payload(bytes(200))
                    .build();
  std::vector<Frame> frags = test::fragmentIpv6(whole, 64, 5);
  ASSERT_EQ(frags.size(), 4u);
  PacketMeta first = parseOk(frags[0]);
  EXPECT_EQ(first.l4_proto, 6);
  EXPECT_EQ(first.l4_offset, 54 + 8 + 8);
  EXPECT_TRUE(first.has_l4);
  EXPECT_EQ(first.tcp_flags, kTcpSyn);
  // A later fragment only knows the fragment header's next header.
  PacketMeta later = parseOk(frags[1]);
  EXPECT_EQ(later.l4_proto, 60);
  EXPECT_FALSE(later.has_l4);
}

TEST(ParserFragments, Ipv6AtomicFragment) {
  Frame f =
      PacketBuilder().ipv6("::1", "::2").ipv6Fragment(77, 0, false).udp(10, 20).payload(bytes(4))
          .build();
  PacketMeta m = parseOk(f);
  EXPECT_TRUE(m.is_fragment);
  EXPECT_FALSE(m.more_fragments);
  EXPECT_EQ(m.frag_id, 77u);
  EXPECT_EQ(m.frag_payload_len, 12);
  EXPECT_TRUE(m.has_l4);
  EXPECT_EQ(m.dport, 20);
}

TEST(ParserFragments, TinyFirstFragmentsAreOkWithoutL4) {
  struct Case {
    const char* name;
    Frame frame;
  };
  Frame tcp = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 2, kTcpSyn).payload(bytes(40))
                  .build();
  Frame tcp_doff_past = bytes(24);
  tcp_doff_past[12] = 0xA0;  // 40-byte header, 24 bytes present
  const Case cases[] = {
      {"tcp 8 bytes (fragmentIpv4)", test::fragmentIpv4(tcp, 8)[0]},
      {"tcp 19 bytes",
       PacketBuilder().ipv4("1.1.1.1", "2.2.2.2").ipv4Fragment(1, 0, true).l4Raw(6)
           .payload(bytes(19)).build()},
      {"tcp options past fragment",
       PacketBuilder().ipv4("1.1.1.1", "2.2.2.2").ipv4Fragment(1, 0, true).l4Raw(6)
           .payload(tcp_doff_past).build()},
      {"udp 4 bytes",
       PacketBuilder().ipv4("1.1.1.1", "2.2.2.2").ipv4Fragment(1, 0, true).l4Raw(17)
           .payload(bytes(4)).build()},
      {"icmp echo 4 bytes",
       PacketBuilder().ipv4("1.1.1.1", "2.2.2.2").ipv4Fragment(1, 0, true).l4Raw(1)
           .payload({8, 0, 0, 0}).build()},
      {"icmp 2 bytes",
       PacketBuilder().ipv4("1.1.1.1", "2.2.2.2").ipv4Fragment(1, 0, true).l4Raw(1)
           .payload({3, 0}).build()},
      {"ipv6 tcp 8 bytes",
       PacketBuilder().ipv6("::1", "::2").ipv6Fragment(9, 0, true).l4Raw(6).payload(bytes(8))
           .build()},
      {"ipv6 icmpv6 echo 6 bytes",
       PacketBuilder().ipv6("::1", "::2").ipv6Fragment(9, 0, true).l4Raw(58)
           .payload({128, 0, 0, 0, 0, 0}).build()},
      {"ipv6 dest-opts after fragment header cut",
       PacketBuilder().ipv6("::1", "::2").ipv6Fragment(9, 0, true)
           .ipv6Ext(60, {0, 1, 1, 4, 0, 0, 0, 0}).l4Raw(6).build()},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    PacketMeta m = parseOk(c.frame);
    EXPECT_TRUE(m.is_fragment);
    EXPECT_TRUE(m.more_fragments);
    EXPECT_EQ(m.frag_offset, 0);
    EXPECT_FALSE(m.has_l4);
    EXPECT_EQ(m.sport, 0);
    EXPECT_EQ(m.dport, 0);
    EXPECT_EQ(m.tcp_flags, 0);
    EXPECT_EQ(m.payload_offset, m.l4_offset);
  }
  // A non-echo ICMP message needs only 4 bytes, so it is not tiny.
  PacketMeta icmp = parseOk(PacketBuilder().ipv4("1.1.1.1", "2.2.2.2").ipv4Fragment(1, 0, true)
                                .l4Raw(1).payload({3, 1, 0, 0}).build());
  EXPECT_TRUE(icmp.has_l4);
  EXPECT_EQ(icmp.icmp_type, 3);
}

TEST(ParserFragments, TinyExceptionNeedsMoreFragments) {
  // Same short L4 in a packet that is not a fragment, or is the last fragment: malformed.
  PacketMeta m;
  EXPECT_EQ(parse(PacketBuilder().ipv4("1.1.1.1", "2.2.2.2").l4Raw(6).payload(bytes(8)).build(), m),
            ParseStatus::kTruncatedTcp);
  EXPECT_EQ(parse(PacketBuilder().ipv6("::1", "::2").ipv6Fragment(9, 0, false).l4Raw(17)
                      .payload(bytes(4)).build(), m),
            ParseStatus::kTruncatedUdp);
  EXPECT_EQ(parse(PacketBuilder().ipv6("::1", "::2").ipv6Fragment(9, 0, false)
                      .ipv6Ext(60, {0, 1, 1, 4, 0, 0, 0, 0}).l4Raw(6).build(), m),
            ParseStatus::kBadIpv6ExtHeader);
  // A data offset below 5 is malformed even in a first fragment.
  Frame bad_doff = bytes(20);
  bad_doff[12] = 0x40;
  EXPECT_EQ(parse(PacketBuilder().ipv4("1.1.1.1", "2.2.2.2").ipv4Fragment(1, 0, true).l4Raw(6)
                      .payload(bad_doff).build(), m),
            ParseStatus::kBadTcpDataOffset);
  Frame bad_ulen = bytes(8);
  bad_ulen[4] = 0;
  bad_ulen[5] = 7;
  EXPECT_EQ(parse(PacketBuilder().ipv4("1.1.1.1", "2.2.2.2").ipv4Fragment(1, 0, true).l4Raw(17)
                      .payload(bad_ulen).build(), m),
            ParseStatus::kBadUdpLength);
}

TEST(ParserFragments, FirstFragmentUdpLengthMayExceedTheFragment) {
  Frame whole = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).payload(bytes(100)).build();
  PacketMeta m = parseOk(test::fragmentIpv4(whole, 32)[0]);
  EXPECT_TRUE(m.has_l4);
  EXPECT_EQ(m.payload_len, 24);
}

// ---------------------------------------------------------------------------------------------
// Malformed frames: one crafted frame (or more) per reason.

struct MalformedCase {
  std::string name;
  Frame frame;
  ParseStatus want;
};

std::vector<MalformedCase> malformedCases() {
  std::vector<MalformedCase> c;
  auto add = [&c](std::string name, Frame f, ParseStatus want) {
    c.push_back({std::move(name), std::move(f), want});
  };
  const Frame v4 = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).payload(bytes(8)).build();
  const Frame v6 = PacketBuilder().ipv6("::1", "::2").udp(1, 2).payload(bytes(8)).build();
  const Frame tagged = PacketBuilder().vlan(100).ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  const Frame qinq = PacketBuilder().vlan(1).vlan(2).ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  auto b4 = [] { return PacketBuilder().ipv4("10.0.0.1", "10.0.0.2"); };
  auto b6 = [] { return PacketBuilder().ipv6("2001:db8::1", "2001:db8::2"); };

  add("empty", Frame{}, ParseStatus::kTruncatedL2);
  add("1 byte", truncated(v4, 1), ParseStatus::kTruncatedL2);
  add("13 bytes", truncated(v4, 13), ParseStatus::kTruncatedL2);

  add("tpid, nothing after", truncated(tagged, 14), ParseStatus::kTruncatedVlan);
  add("tag without ethertype", truncated(tagged, 17), ParseStatus::kTruncatedVlan);
  add("qinq inner tag cut", truncated(qinq, 21), ParseStatus::kTruncatedVlan);

  add("three tags", PacketBuilder().vlan(1).vlan(2).vlan(3).ipv4("1.1.1.1", "2.2.2.2").udp(1, 2)
                        .build(), ParseStatus::kTooManyVlans);
  add("three tags, 9100", PacketBuilder().vlanTag(0x9100, 1).vlanTag(0x9100, 2)
                              .vlanTag(0x8100, 3).arp(1, "1.1.1.1", "2.2.2.2").build(),
      ParseStatus::kTooManyVlans);
  add("third tpid at the end", truncated(PacketBuilder().vlan(1).vlan(2).vlan(3).etherType(0x0806)
                                             .build(), 24), ParseStatus::kTooManyVlans);

  add("ipv4 ethertype, no header", truncated(v4, 14), ParseStatus::kTruncatedIpv4);
  add("ipv4 19 bytes", truncated(v4, 33), ParseStatus::kTruncatedIpv4);
  add("tagged ipv4 19 bytes", truncated(tagged, 37), ParseStatus::kTruncatedIpv4);

  add("ipv4 version 6", b4().udp(1, 2).ipVersion(6).build(), ParseStatus::kBadIpv4Version);
  add("ipv4 version 0", b4().udp(1, 2).ipVersion(0).build(), ParseStatus::kBadIpv4Version);

  add("ihl 4", b4().udp(1, 2).ipv4Ihl(4).build(), ParseStatus::kBadIpv4Ihl);
  add("ihl 0", b4().udp(1, 2).ipv4Ihl(0).build(), ParseStatus::kBadIpv4Ihl);
  add("ihl 15 past frame", b4().udp(1, 2).ipv4Ihl(15).build(), ParseStatus::kBadIpv4Ihl);
  add("ihl 6, 20 bytes", b4().l4Raw(59).ipv4Ihl(6).build(), ParseStatus::kBadIpv4Ihl);

  add("total < 20", b4().udp(1, 2).ipv4TotalLength(19).build(), ParseStatus::kBadIpv4TotalLength);
  add("total < ihl", b4().ipv4Options({1, 1, 1, 1}).udp(1, 2).ipv4TotalLength(23).build(),
      ParseStatus::kBadIpv4TotalLength);
  add("total > frame", b4().udp(1, 2).ipv4TotalLength(29).build(),
      ParseStatus::kBadIpv4TotalLength);
  add("frame cut inside payload", truncated(v4, v4.size() - 1), ParseStatus::kBadIpv4TotalLength);

  add("ipv6 ethertype, no header", truncated(v6, 14), ParseStatus::kTruncatedIpv6);
  add("ipv6 39 bytes", truncated(v6, 53), ParseStatus::kTruncatedIpv6);

  add("ipv6 version 4", b6().udp(1, 2).ipVersion(4).build(), ParseStatus::kBadIpv6Version);
  add("ipv6 version 0", b6().udp(1, 2).ipVersion(0).build(), ParseStatus::kBadIpv6Version);

  add("payload length + 1", b6().udp(1, 2).ipv6PayloadLength(9).build(),
      ParseStatus::kBadIpv6PayloadLength);
  add("payload length 0xffff", b6().udp(1, 2).ipv6PayloadLength(0xFFFF).build(),
      ParseStatus::kBadIpv6PayloadLength);
  add("frame cut inside payload", truncated(v6, v6.size() - 1),
      ParseStatus::kBadIpv6PayloadLength);

  add("hop-by-hop not first", b6().ipv6DestOpts().ipv6HopByHop().udp(1, 2).build(),
      ParseStatus::kBadIpv6ExtHeader);
  add("ext header longer than payload",
      b6().ipv6Ext(60, {0, 5, 1, 4, 0, 0, 0, 0}).udp(1, 2).build(),
      ParseStatus::kBadIpv6ExtHeader);
  add("AH longer than payload", b6().ipv6Ext(51, {0, 4, 0, 0, 0, 0, 0, 0}).l4Raw(59).build(),
      ParseStatus::kBadIpv6ExtHeader);
  add("ext header of 1 byte", b6().ipv6DestOpts().l4Raw(59).ipv6PayloadLength(1).build(),
      ParseStatus::kBadIpv6ExtHeader);
  add("hop-by-hop with payload length 0", b6().ipv6HopByHop().udp(1, 2).ipv6PayloadLength(0)
                                              .build(), ParseStatus::kBadIpv6ExtHeader);
  {
    PacketBuilder nine = b6();
    nine.ipv6HopByHop();
    for (int i = 0; i < 8; ++i) nine.ipv6DestOpts();
    add("nine ext headers", nine.udp(1, 2).build(), ParseStatus::kBadIpv6ExtHeader);
  }
  add("two fragment headers", b6().ipv6Fragment(1, 0, false).ipv6Fragment(1, 0, false).udp(1, 2)
                                  .build(), ParseStatus::kBadIpv6ExtHeader);
  add("fragment header cut", b6().ipv6Ext(44, {0, 0, 0, 0}).l4Raw(59).build(),
      ParseStatus::kBadIpv6ExtHeader);

  add("tcp 19 bytes", b4().l4Raw(6).payload(bytes(19)).build(), ParseStatus::kTruncatedTcp);
  add("tcp 0 bytes", b4().l4Raw(6).build(), ParseStatus::kTruncatedTcp);
  add("ipv6 tcp 10 bytes", b6().l4Raw(6).payload(bytes(10)).build(), ParseStatus::kTruncatedTcp);

  add("data offset 4", b4().tcp(1, 2).tcpDataOffset(4).build(), ParseStatus::kBadTcpDataOffset);
  add("data offset 0", b6().tcp(1, 2).tcpDataOffset(0).build(), ParseStatus::kBadTcpDataOffset);
  add("data offset past datagram", b4().tcp(1, 2).payload(bytes(10)).tcpDataOffset(15).build(),
      ParseStatus::kBadTcpDataOffset);
  add("data offset past datagram, padded frame",
      b4().tcp(1, 2).tcpDataOffset(6).padTo(60).build(), ParseStatus::kBadTcpDataOffset);

  add("udp 7 bytes", b4().l4Raw(17).payload(bytes(7)).build(), ParseStatus::kTruncatedUdp);
  add("ipv6 udp 0 bytes", b6().l4Raw(17).build(), ParseStatus::kTruncatedUdp);

  add("udp length 7", b4().udp(1, 2).udpLength(7).build(), ParseStatus::kBadUdpLength);
  add("udp length 0", b6().udp(1, 2).udpLength(0).build(), ParseStatus::kBadUdpLength);
  add("udp length > datagram", b4().udp(1, 2).payload(bytes(4)).udpLength(13).build(),
      ParseStatus::kBadUdpLength);
  add("udp length > datagram, padded frame", b6().udp(1, 2).udpLength(9).padTo(80).build(),
      ParseStatus::kBadUdpLength);

  add("icmp 3 bytes", b4().l4Raw(1).payload({3, 0, 0}).build(), ParseStatus::kTruncatedIcmp);
  add("icmp echo 7 bytes", b4().l4Raw(1).payload({8, 0, 0, 0, 0, 0, 0}).build(),
      ParseStatus::kTruncatedIcmp);
  add("icmp echo reply 4 bytes", b4().l4Raw(1).payload({0, 0, 0, 0}).build(),
      ParseStatus::kTruncatedIcmp);
  add("icmpv6 echo 6 bytes", b6().l4Raw(58).payload({128, 0, 0, 0, 0, 0}).build(),
      ParseStatus::kTruncatedIcmp);
  add("icmpv6 0 bytes", b6().l4Raw(58).build(), ParseStatus::kTruncatedIcmp);

  add("ipv4 fragment past 65535", b4().ipv4Fragment(1, 65528, false).l4Raw(17).payload(bytes(8))
                                      .build(), ParseStatus::kBadFragment);
  add("ipv4 empty fragment", b4().ipv4Fragment(1, 8, true).l4Raw(6).build(),
      ParseStatus::kBadFragment);
  add("ipv4 empty first fragment", b4().ipv4Fragment(1, 0, true).l4Raw(6).build(),
      ParseStatus::kBadFragment);
  add("ipv6 fragment past 65535", b6().ipv6Fragment(1, 65528, false).l4Raw(17).payload(bytes(8))
                                      .build(), ParseStatus::kBadFragment);
  add("ipv6 empty fragment", b6().ipv6Fragment(1, 0, true).l4Raw(59).build(),
      ParseStatus::kBadFragment);

  const Frame pppoe = PacketBuilder().pppoe(5).ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  add("pppoe header cut", truncated(pppoe, 19), ParseStatus::kTruncatedPppoe);
  add("pppoe protocol cut", truncated(pppoe, 21), ParseStatus::kTruncatedPppoe);
  add("pppoe length past the frame", truncated(pppoe, pppoe.size() - 1),
      ParseStatus::kBadPppoeLength);
  add("pppoe length 0", PacketBuilder().pppoe(5).ipv6("::1", "::2").udp(1, 2).pppoeLength(0)
                            .build(), ParseStatus::kBadPppoeLength);
  add("pppoe ipv4 total > pppoe length",
      PacketBuilder().pppoe(5).ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).pppoeLength(2 + 27)
          .padTo(64).build(),
      ParseStatus::kBadIpv4TotalLength);
  // Issue 18.9: an IPv4/UDP total length of 9000 in a short frame, and IPv4 protocol TCP with
  // total length 20 in a padded 60-byte frame, plain, tagged and inside PPPoE.
  add("udp total 9000", b4().udp(1, 2).payload(bytes(20)).ipv4TotalLength(9000).build(),
      ParseStatus::kBadIpv4TotalLength);
  add("tagged udp total 9000", PacketBuilder().vlan(7).ipv4("10.0.0.1", "10.0.0.2").udp(1, 2)
                                   .ipv4TotalLength(9000).padTo(60).build(),
      ParseStatus::kBadIpv4TotalLength);
  add("pppoe udp total 9000", PacketBuilder().pppoe(5).ipv4("10.0.0.1", "10.0.0.2").udp(1, 2)
                                  .ipv4TotalLength(9000).build(),
      ParseStatus::kBadIpv4TotalLength);
  add("tcp total 20, padded", b4().l4Raw(6).padTo(60).build(), ParseStatus::kTruncatedTcp);
  add("tcp total 20, header bytes present", b4().tcp(1, 2, kTcpSyn).ipv4TotalLength(20).build(),
      ParseStatus::kTruncatedTcp);
  add("pppoe tcp 0 bytes", PacketBuilder().pppoe(5).ipv4("10.0.0.1", "10.0.0.2").l4Raw(6)
                               .padTo(60).build(), ParseStatus::kTruncatedTcp);
  return c;
}

TEST(ParserMalformed, EachFrameGivesItsReason) {
  for (const MalformedCase& c : malformedCases()) {
    SCOPED_TRACE(c.name);
    PacketMeta m;
    EXPECT_EQ(parse(c.frame, m), c.want) << parseStatusName(c.want);
    EXPECT_EQ(m.frame_len, c.frame.size());
  }
}

TEST(ParserMalformed, EveryReasonIsCovered) {
  std::set<ParseStatus> seen;
  for (const MalformedCase& c : malformedCases()) seen.insert(c.want);
  // The tunnel reasons (kTruncatedVxlan on) need a tunnel config: tunnel_parser_test.
  for (int s = static_cast<int>(ParseStatus::kTruncatedL2);
       s < static_cast<int>(ParseStatus::kTruncatedVxlan); ++s) {
    EXPECT_TRUE(seen.count(static_cast<ParseStatus>(s)))
        << "no crafted frame for " << parseStatusName(static_cast<ParseStatus>(s));
  }
}

// ---------------------------------------------------------------------------------------------
// Misc behaviour

TEST(Parser, MetaIsFullyOverwritten) {
  PacketMeta m;
  Frame tcp = PacketBuilder().vlan(1).vlan(2).ipv4("10.0.0.1", "10.0.0.2").ipv4Fragment(5, 0, true)
                  .tcp(1, 2, kTcpSyn, 3, 4).payload(bytes(8)).build();
  ASSERT_EQ(parse(tcp, m), ParseStatus::kOk);
  ASSERT_TRUE(m.has_l4);
  ASSERT_TRUE(m.is_fragment);
  EXPECT_EQ(parse(PacketBuilder().arp(1, "1.1.1.1", "2.2.2.2").build(), m), ParseStatus::kNonIp);
  const PacketMeta fresh{};
  EXPECT_EQ(m.vlan_count, 0);
  EXPECT_EQ(m.vlan_outer, 0);
  EXPECT_EQ(m.vlan_inner, 0);
  EXPECT_FALSE(m.has_l4);
  EXPECT_FALSE(m.is_fragment);
  EXPECT_FALSE(m.more_fragments);
  EXPECT_EQ(m.frag_id, 0u);
  EXPECT_EQ(m.sport, 0);
  EXPECT_EQ(m.tcp_seq, 0u);
  EXPECT_EQ(m.l3, L3Type::kNone);
  EXPECT_EQ(m.src, fresh.src);
  EXPECT_EQ(m.l4_proto, 0);
}

TEST(Parser, UnalignedBuffer) {
  Frame f = PacketBuilder().vlan(9).ipv6("2001:db8::1", "2001:db8::2").ipv6Fragment(0x01020304, 0,
                                                                                    true)
                .tcp(1, 2, kTcpAck, 0xA0B0C0D0, 5).payload(bytes(16)).build();
  PacketMeta aligned = parseOk(f);
  for (size_t shift = 1; shift < 8; ++shift) {
    std::vector<uint8_t> buf(f.size() + shift);
    std::memcpy(buf.data() + shift, f.data(), f.size());
    PacketMeta m;
    ASSERT_EQ(parsePacket(buf.data() + shift, static_cast<uint32_t>(f.size()), m),
              ParseStatus::kOk);
    EXPECT_TRUE(sameMeta(m, aligned));
    EXPECT_EQ(m.frag_id, 0x01020304u);
    EXPECT_EQ(m.tcp_seq, 0xA0B0C0D0u);
  }
}

TEST(Parser, HugeFrameOnlyFirst64KiBAreParsed) {
  Frame f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).payload(bytes(100)).padTo(70000)
                .build();
  PacketMeta m = parseOk(f);
  EXPECT_EQ(m.frame_len, 70000u);
  EXPECT_EQ(m.l3_len, 128);
  EXPECT_EQ(m.payload_len, 100);
  // An IPv6 datagram of 65535 payload bytes does not fit in the parsed window.
  Frame big = PacketBuilder().ipv6("::1", "::2").udp(1, 2).payload(bytes(65527)).build();
  ASSERT_EQ(big.size(), 14u + 40 + 65535);
  PacketMeta b;
  EXPECT_EQ(parse(big, b), ParseStatus::kBadIpv6PayloadLength);
}

TEST(Parser, StatusNames) {
  EXPECT_STREQ(parseStatusName(ParseStatus::kOk), "ok");
  EXPECT_STREQ(parseStatusName(ParseStatus::kNonIp), "non_ip");
  EXPECT_STREQ(parseStatusName(ParseStatus::kTruncatedL2), "truncated_l2");
  EXPECT_STREQ(parseStatusName(ParseStatus::kBadIpv4Ihl), "bad_ipv4_ihl");
  EXPECT_STREQ(parseStatusName(ParseStatus::kBadIpv6ExtHeader), "bad_ipv6_ext_header");
  EXPECT_STREQ(parseStatusName(ParseStatus::kBadFragment), "bad_fragment");
  EXPECT_STREQ(parseStatusName(ParseStatus::kCount), "unknown");
  std::set<std::string> names;
  for (int s = 0; s < static_cast<int>(ParseStatus::kCount); ++s) {
    std::string n = parseStatusName(static_cast<ParseStatus>(s));
    EXPECT_FALSE(n.empty());
    EXPECT_NE(n, "unknown");
    for (char ch : n) {
      EXPECT_TRUE((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_') << n;
    }
    EXPECT_TRUE(names.insert(n).second) << "duplicate " << n;
  }
}

// ---------------------------------------------------------------------------------------------
// Robustness: truncations and random mutations never read out of bounds, always return a
// status, and a kOk result is self-consistent.

std::vector<Frame> corpus() {
  std::vector<Frame> c;
  c.push_back(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 2, kTcpSyn).tcpOptions(
      {2, 4, 5, 0xB4}).payload(bytes(12)).build());
  c.push_back(PacketBuilder().vlan(10).ipv4("10.0.0.1", "10.0.0.2").ipv4Options({0x94, 4, 0, 0})
                  .udp(53, 1000).payload(bytes(20)).build());
  c.push_back(PacketBuilder().vlan(1).vlan(2).ipv4("1.1.1.1", "2.2.2.2").icmp(8, 0, 9, 1)
                  .payload(bytes(8)).padTo(80).build());
  c.push_back(PacketBuilder().ipv6("2001:db8::1", "2001:db8::2").ipv6HopByHop().ipv6Routing(16)
                  .ipv6DestOpts().tcp(5, 6, kTcpAck).payload(bytes(9)).build());
  c.push_back(PacketBuilder().ipv6("::1", "::2").ipv6Ext(51, {0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1})
                  .icmpv6(128, 0, 3, 4).build());
  c.push_back(PacketBuilder().vlanTag(0x9100, 4).ipv6("::1", "::2").ipv6Fragment(7, 0, true)
                  .udp(1, 2).payload(bytes(16)).build());
  c.push_back(PacketBuilder().ipv6("::1", "::2").ipv6Fragment(7, 16, false).l4Raw(17)
                  .payload(bytes(16)).build());
  c.push_back(PacketBuilder().ipv4("1.1.1.1", "2.2.2.2").ipv4Fragment(3, 1480, true).l4Raw(6)
                  .payload(bytes(24)).build());
  c.push_back(PacketBuilder().ipv4("1.1.1.1", "2.2.2.2").l4Raw(47).payload(bytes(12)).build());
  c.push_back(PacketBuilder().arp(1, "1.1.1.1", "2.2.2.2").build());
  c.push_back(PacketBuilder().vlan(3).pppoe(0x22).ipv4("1.1.1.1", "2.2.2.2").tcp(1, 2, kTcpAck)
                  .payload(bytes(10)).build());
  c.push_back(PacketBuilder().pppoe(0x23, true).ipv6("::1", "::2").ipv6DestOpts().udp(1, 2)
                  .payload(bytes(6)).build());
  return c;
}

void checkConsistent(const uint8_t* data, uint32_t len, ParseStatus s, const PacketMeta& m) {
  ASSERT_LT(static_cast<int>(s), static_cast<int>(ParseStatus::kCount));
  ASSERT_EQ(m.frame_len, len);
  ASSERT_LE(m.vlan_count, 2);
  if (s == ParseStatus::kNonIp) {
    ASSERT_EQ(m.l3, L3Type::kNone);
    ASSERT_FALSE(m.has_l4);
    ASSERT_LE(m.l3_offset, len);
    return;
  }
  if (s != ParseStatus::kOk) return;
  ASSERT_NE(m.l3, L3Type::kNone);
  const uint32_t l3_end = static_cast<uint32_t>(m.l3_offset) + m.l3_len;
  ASSERT_LE(l3_end, len);
  ASSERT_LE(m.l3_offset, m.l4_offset);
  ASSERT_LE(m.l4_offset, m.payload_offset);
  ASSERT_LE(static_cast<uint32_t>(m.payload_offset) + m.payload_len, l3_end);
  if (m.pppoe_offset != 0) {
    // The IP packet lies inside the PPPoE payload.
    ASSERT_GE(m.pppoe_offset, 14);
    ASSERT_LE(m.pppoe_offset + 7u, m.l3_offset);
    const uint32_t ppp_len = (data[m.pppoe_offset + 4] << 8) | data[m.pppoe_offset + 5];
    ASSERT_LE(l3_end, m.pppoe_offset + 6u + ppp_len);
  }
  if (m.has_l4) {
    ASSERT_TRUE(m.l4_proto == 1 || m.l4_proto == 6 || m.l4_proto == 17 || m.l4_proto == 58);
    ASSERT_FALSE(m.isLaterFragment());
  } else {
    ASSERT_EQ(m.sport, 0);
    ASSERT_EQ(m.dport, 0);
    ASSERT_EQ(m.payload_offset, m.l4_offset);
  }
  if (m.is_fragment) {
    ASSERT_GT(m.frag_payload_len, 0);
    ASSERT_LE(static_cast<uint32_t>(m.frag_offset) + m.frag_payload_len, 65535u);
  }
  // Deterministic: a second parse of the same bytes gives the same answer.
  PacketMeta again;
  ASSERT_EQ(parsePacket(data, len, again), s);
  ASSERT_TRUE(sameMeta(again, m));
}

TEST(ParserRobustness, EveryTruncation) {
  for (const Frame& f : corpus()) {
    for (size_t n = 0; n <= f.size(); ++n) {
      std::unique_ptr<uint8_t[]> buf(new uint8_t[n]);
      if (n != 0) std::memcpy(buf.get(), f.data(), n);
      PacketMeta m;
      ParseStatus s = parsePacket(buf.get(), static_cast<uint32_t>(n), m);
      SCOPED_TRACE(std::to_string(n) + " of " + std::to_string(f.size()));
      checkConsistent(buf.get(), static_cast<uint32_t>(n), s, m);
      if (n < 14) {
        EXPECT_EQ(s, ParseStatus::kTruncatedL2);
      }
    }
    PacketMeta m;
    ParseStatus whole = parse(f, m);
    EXPECT_TRUE(whole == ParseStatus::kOk || whole == ParseStatus::kNonIp)
        << parseStatusName(whole);
  }
}

TEST(ParserRobustness, RandomMutations) {
  const std::vector<Frame> frames = corpus();
  std::mt19937 rng(20240607);
  int counts[static_cast<int>(ParseStatus::kCount)] = {};
  for (int iter = 0; iter < 5000; ++iter) {
    Frame f = frames[rng() % frames.size()];
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < flips; ++i) {
      // Mostly headers (first 96 bytes), sometimes anywhere.
      const size_t span = (rng() % 4 == 0) ? f.size() : std::min<size_t>(f.size(), 96);
      const size_t pos = rng() % span;
      if (rng() % 2 == 0) {
        f[pos] = static_cast<uint8_t>(rng());
      } else {
        f[pos] ^= static_cast<uint8_t>(1u << (rng() % 8));
      }
    }
    if (rng() % 3 == 0) f.resize(rng() % (f.size() + 1));
    std::unique_ptr<uint8_t[]> buf(new uint8_t[f.size()]);
    if (!f.empty()) std::memcpy(buf.get(), f.data(), f.size());
    PacketMeta m;
    ParseStatus s = parsePacket(buf.get(), static_cast<uint32_t>(f.size()), m);
    SCOPED_TRACE(iter);
    checkConsistent(buf.get(), static_cast<uint32_t>(f.size()), s, m);
    ++counts[static_cast<int>(s)];
  }
  // The mutations reach both the accepting and the rejecting paths.
  EXPECT_GT(counts[static_cast<int>(ParseStatus::kOk)], 500);
  int rejected = 0;
  for (int s = static_cast<int>(ParseStatus::kTruncatedL2);
       s < static_cast<int>(ParseStatus::kCount); ++s) {
    rejected += counts[s];
  }
  EXPECT_GT(rejected, 500);
}

TEST(ParserRobustness, RandomBytesAfterEthernetHeader) {
  std::mt19937 rng(7);
  const uint16_t types[] = {0x0800, 0x86DD, 0x8100, 0x88A8, 0x9100, 0x8864};
  for (int iter = 0; iter < 3000; ++iter) {
    Frame f(14 + rng() % 200);
    for (uint8_t& b : f) b = static_cast<uint8_t>(rng());
    const uint16_t t = types[rng() % 6];
    f[12] = static_cast<uint8_t>(t >> 8);
    f[13] = static_cast<uint8_t>(t);
    if (f.size() > 14 && t == 0x0800) f[14] = static_cast<uint8_t>(0x40 | (f[14] & 0x0F));
    if (f.size() > 14 && t == 0x86DD) f[14] = static_cast<uint8_t>(0x60 | (f[14] & 0x0F));
    if (f.size() > 21 && t == 0x8864) {  // a session header carrying IPv4 / IPv6
      f[14] = 0x11;
      f[15] = 0;
      f[20] = 0;
      f[21] = (rng() & 1) ? 0x21 : 0x57;
    }
    std::unique_ptr<uint8_t[]> buf(new uint8_t[f.size()]);
    std::memcpy(buf.get(), f.data(), f.size());
    PacketMeta m;
    ParseStatus s = parsePacket(buf.get(), static_cast<uint32_t>(f.size()), m);
    SCOPED_TRACE(iter);
    checkConsistent(buf.get(), static_cast<uint32_t>(f.size()), s, m);
  }
}

// ---------------------------------------------------------------------------------------------
// The test packet builder.

// Independent reference checksum (byte-pair sum, folded), over concatenated pieces.
uint16_t refChecksum(const std::vector<std::vector<uint8_t>>& pieces) {
  std::vector<uint8_t> all;
  for (const auto& p : pieces) all.insert(all.end(), p.begin(), p.end());
  if (all.size() % 2) all.push_back(0);
  uint32_t sum = 0;
  for (size_t i = 0; i < all.size(); i += 2) sum += (all[i] << 8) | all[i + 1];
  while (sum > 0xFFFF) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

TEST(PacketBuilder, IpAndMacParsing) {
  const uint8_t v4[16] = {10, 1, 2, 3};
  EXPECT_EQ(std::memcmp(ip("10.1.2.3").b, v4, 16), 0);
  const uint8_t v6[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  EXPECT_EQ(std::memcmp(ip("2001:db8::1").b, v6, 16), 0);
  EXPECT_FALSE(test::parseIp("300.1.1.1").has_value());
  EXPECT_FALSE(test::parseIp("1.2.3").has_value());
  EXPECT_FALSE(test::parseIp("2001:db8:::1").has_value());
  EXPECT_FALSE(test::parseIp("").has_value());
  EXPECT_THROW(ip("not an address"), std::invalid_argument);
  EXPECT_EQ(test::ipToString(ip("192.168.0.254"), false), "192.168.0.254");
  EXPECT_EQ(test::ipToString(ip("2001:DB8:0:0::a"), true), "2001:db8::a");
  test::MacAddr m = test::mac("02:0a:FF:00:10:9c");
  EXPECT_EQ(m, (test::MacAddr{0x02, 0x0A, 0xFF, 0x00, 0x10, 0x9C}));
  EXPECT_THROW(test::mac("02:0a:ff:00:10"), std::invalid_argument);
  EXPECT_THROW(test::mac("02-0a-ff-00-10-9c"), std::invalid_argument);
  EXPECT_THROW(PacketBuilder().ipv4("::1", "10.0.0.1"), std::invalid_argument);
  EXPECT_THROW(PacketBuilder().ipv6("10.0.0.1", "::1"), std::invalid_argument);
}

TEST(PacketBuilder, Ipv4HeaderChecksumKnownAnswer) {
  // The classic example: 192.168.0.1 -> 192.168.0.199, UDP, total 0x73, DF, TTL 64.
  const uint8_t hdr[20] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                           0x00, 0x00, 0xC0, 0xA8, 0x00, 0x01, 0xC0, 0xA8, 0x00, 0xC7};
  EXPECT_EQ(test::inetChecksum(hdr, sizeof(hdr)), 0xB861);
  Frame f = PacketBuilder()
                .ipv4("192.168.0.1", "192.168.0.199")
                .ipv4DontFragment()
                .udp(1, 2)
                .payload(bytes(0x73 - 28))
                .build();
  EXPECT_EQ(be16At(f, 24), 0xB861);
}

std::vector<uint8_t> addrBytes(const char* text, size_t n) {
  const IpAddr a = ip(text);
  return std::vector<uint8_t>(a.b, a.b + n);
}

TEST(PacketBuilder, L4ChecksumsMatchReference) {
  const std::vector<uint8_t> s4 = {10, 0, 0, 1}, d4 = {10, 0, 0, 2};
  Frame u = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1000, 53).payload("abc").build();
  std::vector<uint8_t> udp(u.begin() + 34, u.end());
  udp[6] = udp[7] = 0;
  EXPECT_EQ(be16At(u, 40), refChecksum({s4, d4, {0, 17, 0, 11}, udp}));

  Frame t = PacketBuilder().ipv6("2001:db8::1", "2001:db8::2").tcp(1, 2, kTcpSyn, 5, 0)
                .payload("hello").build();
  std::vector<uint8_t> tcp(t.begin() + 54, t.end());
  tcp[16] = tcp[17] = 0;
  std::vector<uint8_t> s6 = addrBytes("2001:db8::1", 16);
  std::vector<uint8_t> d6 = addrBytes("2001:db8::2", 16);
  EXPECT_EQ(be16At(t, 54 + 16), refChecksum({s6, d6, {0, 0, 0, 25, 0, 0, 0, 6}, tcp}));

  Frame i = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").icmp(8, 0, 1, 2).payload("xyz").build();
  std::vector<uint8_t> icmp(i.begin() + 34, i.end());
  icmp[2] = icmp[3] = 0;
  EXPECT_EQ(be16At(i, 36), refChecksum({icmp}));

  Frame i6 = PacketBuilder().ipv6("::1", "::2").ipv6HopByHop().icmpv6(128, 0, 1, 2).build();
  std::vector<uint8_t> icmp6(i6.begin() + 62, i6.end());
  icmp6[2] = icmp6[3] = 0;
  std::vector<uint8_t> a1 = addrBytes("::1", 16), a2 = addrBytes("::2", 16);
  EXPECT_EQ(be16At(i6, 64), refChecksum({a1, a2, {0, 0, 0, 8, 0, 0, 0, 58}, icmp6}));
}

TEST(PacketBuilder, ChecksumsOkAndCorruption) {
  auto b4 = [] { return PacketBuilder().vlan(3).ipv4("10.0.0.1", "10.0.0.2"); };
  auto b6 = [] { return PacketBuilder().ipv6("2001:db8::1", "2001:db8::2").ipv6DestOpts(); };
  std::vector<PacketBuilder> good = {
      b4().tcp(1, 2, kTcpSyn).payload(bytes(33)),
      b4().ipv4Options({0x94, 4, 0, 0}).udp(1, 2).payload(bytes(1)),
      b4().icmp(8, 0, 7, 7).payload(bytes(5)),
      b6().tcp(1, 2, kTcpAck).payload(bytes(2)),
      b6().udp(1, 2).payload(bytes(17)),
      b6().icmpv6(129, 0, 7, 7).payload(bytes(5)),
  };
  for (size_t i = 0; i < good.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_TRUE(test::checksumsOk(good[i].build()));
    EXPECT_TRUE(test::checksumsOk(PacketBuilder(good[i]).padTo(200).build()));
    EXPECT_FALSE(test::checksumsOk(PacketBuilder(good[i]).corruptL4Checksum().build()));
  }
  EXPECT_FALSE(test::checksumsOk(b4().udp(1, 2).corruptIpv4Checksum().build()));
  EXPECT_TRUE(test::checksumsOk(PacketBuilder().arp(1, "1.1.1.1", "2.2.2.2").build()));
}

TEST(PacketBuilder, LengthsAndTags) {
  Frame f = PacketBuilder().vlan(100).vlan(200).ipv4("1.1.1.1", "2.2.2.2", 9).udp(7, 8)
                .payload(bytes(5)).build();
  ASSERT_EQ(f.size(), 22u + 20 + 8 + 5);
  EXPECT_EQ(be16At(f, 12), 0x88A8);
  EXPECT_EQ(be16At(f, 14), 100);
  EXPECT_EQ(be16At(f, 16), 0x8100);
  EXPECT_EQ(be16At(f, 18), 200);
  EXPECT_EQ(be16At(f, 20), 0x0800);
  EXPECT_EQ(be16At(f, 24), 33);       // IPv4 total length
  EXPECT_EQ(f[30], 9);                // TTL
  EXPECT_EQ(f[31], 17);               // protocol
  EXPECT_EQ(be16At(f, 42 + 4), 13);  // UDP length
  Frame one = PacketBuilder().vlan(5, 3).ipv6("::1", "::2").l4Raw(59).build();
  EXPECT_EQ(be16At(one, 12), 0x8100);
  EXPECT_EQ(be16At(one, 14), (3 << 13) | 5);
  EXPECT_EQ(be16At(one, 18 + 4), 0);  // IPv6 payload length
  EXPECT_EQ(one[18 + 6], 59);
  Frame custom = PacketBuilder().vlanTag(0x9100, 1).vlan(2).etherType(0x88CC).build();
  EXPECT_EQ(be16At(custom, 12), 0x9100);
  EXPECT_EQ(be16At(custom, 16), 0x8100);
  EXPECT_EQ(be16At(custom, 20), 0x88CC);
  Frame arp = PacketBuilder().eth(test::mac("02:00:00:00:00:aa"), test::mac("ff:ff:ff:ff:ff:ff"))
                  .arp(1, "10.0.0.1", "10.0.0.9").build();
  EXPECT_EQ(arp[0], 0xFF);
  EXPECT_EQ(arp[11], 0xAA);
  EXPECT_EQ(be16At(arp, 12), 0x0806);
  EXPECT_EQ(be16At(arp, 20), 1);     // op
  EXPECT_EQ(arp[27], 0xAA);          // sender MAC
  EXPECT_EQ(arp[31], 1);             // sender IP
  EXPECT_EQ(arp[41], 9);             // target IP
}

TEST(PacketBuilder, Misuse) {
  EXPECT_THROW(PacketBuilder().build(), std::logic_error);
  EXPECT_THROW(PacketBuilder().ipv4("1.1.1.1", "2.2.2.2").build(), std::logic_error);
  EXPECT_THROW(PacketBuilder().ipv4("1.1.1.1", "2.2.2.2").icmpv6(128, 0).build(), std::logic_error);
  EXPECT_THROW(PacketBuilder().ipv6("::1", "::2").icmp(8, 0).build(), std::logic_error);
  EXPECT_THROW(PacketBuilder().ipv6("::1", "::2").ipv6HopByHop(12), std::invalid_argument);
  EXPECT_THROW(PacketBuilder().ipv4Options(Frame(41, 1)), std::invalid_argument);
  EXPECT_THROW(PacketBuilder().ipv4Fragment(1, 3, true), std::invalid_argument);
  EXPECT_THROW(PacketBuilder().vlan(4096), std::invalid_argument);
  Frame f = PacketBuilder().ipv4("1.1.1.1", "2.2.2.2").udp(1, 2).payload(bytes(64)).build();
  EXPECT_THROW(test::fragmentIpv4(f, 12), std::invalid_argument);
  EXPECT_THROW(test::fragmentIpv6(f, 16, 1), std::invalid_argument);
}

// Reassembles fragments' fragmentable bytes by offset (as parsed) and checks that the pieces
// tile [0, total) exactly.
Frame reassemble(const std::vector<Frame>& frags) {
  Frame out;
  size_t expected_off = 0;
  for (size_t i = 0; i < frags.size(); ++i) {
    PacketMeta m;
    EXPECT_EQ(parse(frags[i], m), ParseStatus::kOk);
    EXPECT_TRUE(m.is_fragment);
    EXPECT_EQ(m.frag_offset, expected_off);
    EXPECT_EQ(m.more_fragments, i + 1 < frags.size());
    EXPECT_TRUE(test::checksumsOk(frags[i]));
    const size_t start = static_cast<size_t>(m.l3_offset) + m.l3_len - m.frag_payload_len;
    out.insert(out.end(), frags[i].begin() + start, frags[i].begin() + start + m.frag_payload_len);
    expected_off += m.frag_payload_len;
  }
  return out;
}

TEST(PacketBuilder, FragmentIpv4Reassembles) {
  Frame whole = PacketBuilder()
                    .vlan(7)
                    .ipv4("10.0.0.1", "10.0.0.2")
                    .ipv4Id(0x1234)
                    .ipv4DontFragment()
                    .ipv4Options({0x94, 4, 0, 0, 0x07, 7, 4, 0, 0, 0, 0, 0})
                    .tcp(1, 2, kTcpAck)
                    .payload(bytes(1000))
                    .build();
  std::vector<Frame> frags = test::fragmentIpv4(whole, 256);
  ASSERT_EQ(frags.size(), 4u);
  const size_t l3 = 18, ihl = 32;
  Frame payload(whole.begin() + l3 + ihl, whole.end());
  EXPECT_EQ(reassemble(frags), payload);
  for (const Frame& fr : frags) {
    EXPECT_EQ(std::memcmp(fr.data(), whole.data(), l3), 0);  // same L2 header
    EXPECT_EQ(be16At(fr, l3 + 4), 0x1234);
    EXPECT_EQ(be16At(fr, l3 + 6) & 0x4000, 0);  // DF cleared
  }
  // The datagram fits: returned unchanged.
  std::vector<Frame> one = test::fragmentIpv4(whole, 1024);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0], whole);
  // Fragmenting a fragment keeps its offset and MF.
  std::vector<Frame> sub = test::fragmentIpv4(frags[1], 128);
  ASSERT_EQ(sub.size(), 2u);
  PacketMeta a = parseOk(sub[0]);
  PacketMeta b = parseOk(sub[1]);
  EXPECT_EQ(a.frag_offset, 256);
  EXPECT_EQ(b.frag_offset, 384);
  EXPECT_TRUE(b.more_fragments);
}

TEST(PacketBuilder, FragmentIpv6Reassembles) {
  Frame whole = PacketBuilder()
                    .ipv6("2001:db8::1", "2001:db8::2")
                    .ipv6HopByHop()
                    .ipv6DestOpts(16)
                    .ipv6Routing()
                    .ipv6DestOpts()
                    .udp(1, 2)
                    .payload(bytes(700))
                    .build();
  // Per-fragment part: IPv6 + HBH + DO + routing (14 + 40 + 8 + 16 + 8 = 86 bytes).
  const size_t unfrag = 86;
  std::vector<Frame> frags = test::fragmentIpv6(whole, 200, 0xCAFEF00D);
  ASSERT_EQ(frags.size(), 4u);
  Frame rest(whole.begin() + unfrag, whole.end());
  EXPECT_EQ(reassemble(frags), rest);
  for (const Frame& fr : frags) {
    EXPECT_EQ(fr[unfrag - 8], 44);  // routing header's next header is now Fragment
    EXPECT_EQ(fr[unfrag], 60);      // fragment header's next header: the second dest-opts
    PacketMeta m = parseOk(fr);
    EXPECT_EQ(m.frag_id, 0xCAFEF00Du);
  }
  PacketMeta first = parseOk(frags[0]);
  EXPECT_EQ(first.l4_proto, 17);
  EXPECT_TRUE(first.has_l4);
  EXPECT_EQ(first.l4_offset, unfrag + 8 + 8);

  Frame plain = PacketBuilder().ipv6("::1", "::2").udp(1, 2).payload(bytes(30)).build();
  std::vector<Frame> p = test::fragmentIpv6(plain, 16, 1);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0][14 + 6], 44);
  EXPECT_EQ(reassemble(p), Frame(plain.begin() + 54, plain.end()));
  EXPECT_THROW(test::fragmentIpv6(p[0], 8, 1), std::invalid_argument);
}

}  // namespace
}  // namespace dpu::dp


namespace dpu::dp {
namespace {
// clearPacketMeta (the parser's reset of its output) must give exactly PacketMeta{}: it
// stores zero bytes, so every default member initialiser must be zero. A field added with a
// non-zero default fails here.
TEST(PacketMetaClear, EqualsValueInitialised) {
  alignas(PacketMeta) unsigned char ref_bytes[sizeof(PacketMeta)];
  std::memset(ref_bytes, 0, sizeof ref_bytes);
  new (ref_bytes) PacketMeta();  // value-initialised: padding stays zero
  PacketMeta m;
  std::memset(static_cast<void*>(&m), 0xab, sizeof m);
  clearPacketMeta(m);
  EXPECT_EQ(std::memcmp(&m, ref_bytes, sizeof m), 0);
  // And the parser leaves no byte of a previous packet behind in fields it does not set.
  std::memset(static_cast<void*>(&m), 0xab, sizeof m);
  const uint8_t runt[4] = {1, 2, 3, 4};
  EXPECT_EQ(parsePacket(runt, sizeof runt, m), ParseStatus::kTruncatedL2);
  PacketMeta expect{};
  expect.frame_len = sizeof runt;
  EXPECT_EQ(m.src.b[0], expect.src.b[0]);
  EXPECT_EQ(m.sport, 0);
  EXPECT_EQ(m.frag_id, 0u);
  EXPECT_EQ(m.l3, L3Type::kNone);
}

}  // namespace
}  // namespace dpu::dp
