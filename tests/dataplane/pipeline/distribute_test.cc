// Software distribution's worker choice (dataplane/pipeline/distribute.h): both directions of
// a flow, every fragment of a datagram, a flow's fragmented and unfragmented packets, and
// the inner flow of tunnels whatever the outer headers, each land on one worker; flows spread.
#include "dataplane/pipeline/distribute.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dataplane/packet/parser.h"
#include "dataplane/packet/tunnel_config.h"
#include "tests/util/packet_builder.h"
#include "tests/util/tunnel_frames.h"

namespace dpu::dp {
namespace {

using test::Frame;
using test::PacketBuilder;

uint16_t workerOf(const Frame& f, uint16_t n) {
  static const TunnelParseConfig tc = toTunnelParseConfig(rules::DataplaneSettings{});
  PacketMeta m;
  parsePacket(f.data(), static_cast<uint32_t>(f.size()), m, &tc);
  return distributionWorker(m, n);
}

std::string v4(int i) { return absl::StrCat("10.", (i >> 8) & 255, ".", i & 255, ".", 1 + i % 200); }

TEST(Distribute, BothDirectionsOfAFlowSameWorker) {
  for (uint16_t n : {2, 3, 4, 8}) {
    for (int i = 0; i < 200; ++i) {
      const std::string a = v4(i), b = v4(i * 7 + 1000);
      Frame ab = PacketBuilder().eth().ipv4(a, b).tcp(1024 + i, 80, kTcpSyn).build();
      Frame ba = PacketBuilder().eth().ipv4(b, a).tcp(80, 1024 + i, kTcpSyn | kTcpAck).build();
      EXPECT_EQ(workerOf(ab, n), workerOf(ba, n)) << a << " <-> " << b << " n=" << n;
      const std::string a6 = absl::StrCat("2001:db8::", i + 1), b6 = absl::StrCat("2001:db8:1::", i + 2);
      Frame ab6 = PacketBuilder().eth().ipv6(a6, b6).udp(5000 + i, 53).payload("q").build();
      Frame ba6 = PacketBuilder().eth().ipv6(b6, a6).udp(53, 5000 + i).payload("a").build();
      EXPECT_EQ(workerOf(ab6, n), workerOf(ba6, n)) << a6 << " <-> " << b6 << " n=" << n;
    }
  }
}

TEST(Distribute, EveryFragmentAndTheFlowOnOneWorker) {
  for (int i = 0; i < 200; ++i) {
    const std::string a = v4(i), b = v4(i + 3000);
    const std::vector<uint8_t> body(64, 0x5a);
    Frame whole = PacketBuilder().eth().ipv4(a, b).udp(4000 + i, 53).payload("x").build();
    Frame first = PacketBuilder().eth().ipv4(a, b).ipv4Fragment(7, 0, true).udp(4000 + i, 53)
                      .payload(body).build();
    Frame later = PacketBuilder().eth().ipv4(a, b).ipv4Fragment(7, 72, false).l4Raw(17)
                      .payload(body).build();
    Frame reply = PacketBuilder().eth().ipv4(b, a).ipv4Fragment(9, 72, false).l4Raw(17)
                      .payload(body).build();
    const uint16_t w = workerOf(whole, 4);
    EXPECT_EQ(workerOf(first, 4), w) << a << " -> " << b;
    EXPECT_EQ(workerOf(later, 4), w) << a << " -> " << b;
    EXPECT_EQ(workerOf(reply, 4), w) << a << " -> " << b;
    const std::string a6 = absl::StrCat("2001:db8::", i + 1), b6 = "2001:db8:2::1";
    Frame whole6 = PacketBuilder().eth().ipv6(a6, b6).udp(4000 + i, 53).payload("x").build();
    Frame later6 = PacketBuilder().eth().ipv6(a6, b6).ipv6Fragment(11, 64, false).l4Raw(17)
                       .payload(body).build();
    EXPECT_EQ(workerOf(later6, 4), workerOf(whole6, 4)) << a6;
  }
}

TEST(Distribute, InnerFlowOfATunnelWhateverTheOuterHeaders) {
  for (int i = 0; i < 100; ++i) {
    const std::string a = v4(i), b = v4(i + 5000);
    Frame ab = PacketBuilder().eth().ipv4(a, b).tcp(3000 + i, 443, kTcpSyn).build();
    Frame ba = PacketBuilder().eth().ipv4(b, a).tcp(443, 3000 + i, kTcpSyn | kTcpAck).build();
    test::Outer o1, o2;
    o2.src = "198.51.100.7";  // the answer comes back through another VTEP pair
    o2.dst = "198.51.100.9";
    Frame vab = test::vxlanFrame(ab, 42, o1, 4789, 49152 + i);
    Frame vba = test::vxlanFrame(ba, 42, o2, 4789, 60000 - i);
    EXPECT_EQ(workerOf(vab, 4), workerOf(vba, 4)) << a << " <-> " << b;
  }
}

TEST(Distribute, NonIpToWorkerZeroAndOneWorkerIsZero) {
  Frame arp = PacketBuilder().eth().arp(1, "10.0.0.1", "10.0.0.2").build();
  EXPECT_EQ(workerOf(arp, 4), 0);
  Frame tcp = PacketBuilder().eth().ipv4("10.0.0.1", "10.9.9.9").tcp(1, 2).build();
  EXPECT_EQ(workerOf(tcp, 1), 0);
}

TEST(Distribute, HostPairsSpreadOverWorkers) {
  for (uint16_t n : {2, 4}) {
    std::vector<int> per(n, 0);
    const int pairs = 4000;
    for (int i = 0; i < pairs; ++i) {
      per[workerOf(PacketBuilder().eth().ipv4(v4(i), "192.0.2.10").udp(1, 2).build(), n)]++;
    }
    for (uint16_t w = 0; w < n; ++w) {
      EXPECT_GT(per[w], pairs / n * 8 / 10) << "worker " << w << " of " << n;
      EXPECT_LT(per[w], pairs / n * 12 / 10) << "worker " << w << " of " << n;
    }
  }
}

}  // namespace
}  // namespace dpu::dp
