// Load-balancer rewrites of packets inside a PPPoE session: the IP-in-IP outer header goes
// after the PPPoE header and PPP protocol field, and the PPPoE length grows by it.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "dataplane/packet/parser.h"
#include "dataplane/stages/lb/lb_rewrite.h"
#include "tests/util/packet_builder.h"

namespace dpu::dp {
namespace {

using test::Frame;
using test::PacketBuilder;

uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

TEST(LbRewrite, IpipInsidePppoeKeepsTheSessionAndFixesItsLength) {
  for (bool v6 : {false, true}) {
    SCOPED_TRACE(v6 ? "v6" : "v4");
    PacketBuilder b;
    b.vlan(9).pppoe(0x31);
    if (v6) b.ipv6("2001:db8::1", "2001:db8::80"); else b.ipv4("10.0.0.1", "10.0.0.80");
    Frame f = b.tcp(1234, 80, kTcpSyn, 7).payload(std::string(10, 'p')).build();
    PacketMeta m;
    ASSERT_EQ(parsePacket(f.data(), static_cast<uint32_t>(f.size()), m), ParseStatus::kOk);
    const uint32_t ov = v6 ? kLbIpip6Overhead : kLbIpip4Overhead;
    std::vector<uint8_t> buf(ov + f.size());
    std::memcpy(buf.data() + ov, f.data(), f.size());
    uint8_t src[16], dst[16];
    std::memset(src, 0x11, sizeof(src));
    std::memset(dst, 0x22, sizeof(dst));
    uint32_t len = lbIpipEncap(buf.data(), static_cast<uint32_t>(f.size()), m, src, dst);
    ASSERT_EQ(len, f.size() + ov);
    PacketMeta o;
    ASSERT_EQ(parsePacket(buf.data(), len, o), ParseStatus::kOk);
    EXPECT_EQ(o.vlan_outer, 9);
    EXPECT_EQ(o.pppoe_offset, m.pppoe_offset);
    EXPECT_EQ(o.pppoe_session, 0x31);
    EXPECT_EQ(o.l3_offset, m.l3_offset);
    EXPECT_EQ(o.l4_proto, v6 ? 41 : 4);
    EXPECT_EQ(o.l3_len, m.l3_len + ov);
    EXPECT_EQ(be16(buf.data() + o.pppoe_offset + 4), 2u + o.l3_len);
    // The inner packet follows the outer header unchanged.
    EXPECT_EQ(0, std::memcmp(buf.data() + o.l3_offset + ov, f.data() + m.l3_offset, m.l3_len));
  }
}

}  // namespace
}  // namespace dpu::dp
