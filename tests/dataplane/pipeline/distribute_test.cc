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
#include "rules/compile/lb_compiler.h"
#include "tests/util/packet_builder.h"
#include "tests/util/tunnel_frames.h"

namespace dpu::dp {
namespace {

using test::Frame;
using test::PacketBuilder;

uint16_t workerOf(const Frame& f, uint16_t n, const DistributionCanon* canon = nullptr) {
  static const TunnelParseConfig tc = toTunnelParseConfig(rules::DataplaneSettings{});
  PacketMeta m;
  parsePacket(f.data(), static_cast<uint32_t>(f.size()), m, &tc);
  return distributionWorker(m, n, canon);
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

// NAT services (distribute.h, DistributionCanon): a client's packets to the VIP and the
// backend's answers to the client land on one worker (the flow and its reverse entry);
// without the table they do not (the test can fail); so do both directions of a client
// talking to a backend directly, and of flows of a service whose VIPs are a prefix, or
// whose backend another service shares.
rules::IpPrefix prefix(std::array<uint8_t, 16> a, uint8_t len, bool v6) {
  rules::IpPrefix p;
  p.addr = a;
  p.len = len;
  p.v6 = v6;
  return p;
}

rules::LbBackend natBackend(const std::string& id, uint8_t last) {
  rules::LbBackend b;
  b.id = id;
  b.ipv4 = std::array<uint8_t, 4>{10, 1, 0, last};
  b.ipv6 = std::array<uint8_t, 16>{0x20, 0x01, 0x0d, 0xb8, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, last};
  b.port = 8080;
  return b;
}

std::shared_ptr<const rules::CompiledLb> natServices() {
  rules::LbModel m;
  rules::LbService web;  // one VIP per family
  web.id = "web";
  web.mode = rules::LbMode::kNat;
  web.dst = {prefix({192, 0, 2, 10}, 32, false),
             prefix({0x20, 0x01, 0x0d, 0xb8, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10}, 128, true)};
  web.backends = {natBackend("w1", 1), natBackend("w2", 2), natBackend("w3", 3)};
  rules::LbService pool;  // VIPs: a /28
  pool.id = "pool";
  pool.mode = rules::LbMode::kNat;
  pool.dst = {prefix({198, 51, 100, 32}, 28, false)};
  pool.backends = {natBackend("p1", 11), natBackend("p2", 12)};
  rules::LbService api;  // another VIP sharing web's backend w1
  api.id = "api";
  api.mode = rules::LbMode::kNat;
  api.dst = {prefix({192, 0, 2, 20}, 32, false)};
  api.backends = {natBackend("w1", 1), natBackend("a2", 21)};
  m.services = {web, pool, api};
  auto c = rules::compileLb(m);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : nullptr;
}

TEST(Distribute, NatAnswersReachTheWorkerOfTheirFlow) {
  auto lb = natServices();
  ASSERT_NE(lb, nullptr);
  const DistributionCanon canon = buildDistributionCanon(*lb);
  struct Vip {
    std::string vip;
    std::vector<std::string> backends;
  };
  const std::vector<Vip> vips = {{"192.0.2.10", {"10.1.0.1", "10.1.0.2", "10.1.0.3"}},
                                 {"198.51.100.33", {"10.1.0.11", "10.1.0.12"}},
                                 {"198.51.100.46", {"10.1.0.11", "10.1.0.12"}},
                                 {"192.0.2.20", {"10.1.0.1", "10.1.0.21"}}};
  for (uint16_t n : {2, 3, 4}) {
    int apart_without = 0, cases = 0;
    for (int i = 0; i < 200; ++i) {
      const std::string client = v4(i);
      for (const Vip& v : vips) {
        Frame fwd = PacketBuilder().eth().ipv4(client, v.vip).tcp(1024 + i, 80, kTcpSyn).build();
        for (const std::string& be : v.backends) {
          Frame ans = PacketBuilder().eth().ipv4(be, client).tcp(8080, 1024 + i, kTcpSyn | kTcpAck).build();
          EXPECT_EQ(workerOf(fwd, n, &canon), workerOf(ans, n, &canon))
              << client << " -> " << v.vip << ", answer from " << be << " n=" << n;
          apart_without += workerOf(fwd, n) != workerOf(ans, n);
          ++cases;
          // The client talking to the backend directly: both directions on one worker.
          Frame direct = PacketBuilder().eth().ipv4(client, be).udp(5000, 53).payload("q").build();
          Frame back = PacketBuilder().eth().ipv4(be, client).udp(53, 5000).payload("a").build();
          EXPECT_EQ(workerOf(direct, n, &canon), workerOf(back, n, &canon)) << client << " <-> " << be;
        }
      }
      const std::string c6 = absl::StrCat("2001:db8:99::", i + 1);
      Frame fwd6 = PacketBuilder().eth().ipv6(c6, "2001:db8:20::10").tcp(2000 + i, 443, kTcpSyn).build();
      for (const char* be6 : {"2001:db8:10::1", "2001:db8:10::2", "2001:db8:10::3"}) {
        Frame ans6 = PacketBuilder().eth().ipv6(be6, c6).tcp(8080, 2000 + i, kTcpSyn | kTcpAck).build();
        EXPECT_EQ(workerOf(fwd6, n, &canon), workerOf(ans6, n, &canon)) << c6 << " answer from " << be6;
      }
    }
    EXPECT_GT(apart_without, cases / 4) << "without the table the answers go elsewhere, n=" << n;
  }
  // Flows of other addresses hash as without the table, and still spread.
  std::vector<int> per(2, 0);
  for (int i = 0; i < 400; ++i) {
    Frame f = PacketBuilder().eth().ipv4(v4(i), "203.0.113.9").udp(1, 2).build();
    EXPECT_EQ(workerOf(f, 2, &canon), workerOf(f, 2));
    per[workerOf(f, 2, &canon)]++;
  }
  EXPECT_GT(per[0], 100);
  EXPECT_GT(per[1], 100);
  // No NAT service (L2 only): an empty table.
  rules::LbModel l2;
  l2.services = {};
  auto c = rules::compileLb(l2);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(buildDistributionCanon(**c).empty());
}

}  // namespace
}  // namespace dpu::dp
