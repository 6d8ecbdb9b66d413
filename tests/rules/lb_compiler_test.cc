// LB validation (every error names the field) and compilation (tables, reuse of unchanged
// services, the snapshot hook).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "rules/compile/lb_compiler.h"
#include "rules/compiled/snapshot.h"

namespace dpu::rules {
namespace {

LbBackend be(const std::string& id, uint8_t last, uint32_t weight = 1) {
  LbBackend b;
  b.id = id;
  b.ipv4 = std::array<uint8_t, 4>{10, 1, 0, last};
  b.mac = std::array<uint8_t, 6>{2, 0, 0, 0, 1, last};
  b.weight = weight;
  return b;
}

LbService service(const std::string& id = "web") {
  LbService s;
  s.id = id;
  IpPrefix p;
  p.addr = {192, 0, 2, 10};
  p.len = 32;
  s.dst = {p};
  s.protocol = 6;
  s.dst_ports = PortRange{80, 80};
  s.backends = {be("a", 1), be("b", 2), be("c", 3)};
  return s;
}

// The fields of every error validateLb reports.
std::vector<std::string> fields(const LbModel& m) {
  ConfigErrorList errs;
  validateLb(m, errs);
  std::vector<std::string> out;
  for (const auto& e : errs) {
    EXPECT_EQ(e.section, "lb");
    out.push_back(e.field);
  }
  return out;
}

using ::testing::ElementsAre;

TEST(LbCompiler, ValidServiceCompiles) {
  LbModel m{{service()}};
  EXPECT_TRUE(fields(m).empty());
  auto c = compileLb(m);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ((*c)->services.size(), 1u);
  EXPECT_EQ((*c)->services[0]->table.size(), 65537u);
}

TEST(LbCompiler, KeyFieldErrorsNameTheField) {
  LbModel m{{service()}};
  auto& k = m.services[0].key;
  LbKeyField zero{LbFieldKind::kRaw, LbAnchor::kPayload, 0, 0, {}};
  LbKeyField big{LbFieldKind::kRaw, LbAnchor::kL3, 0, 17, {}};
  LbKeyField far{LbFieldKind::kRaw, LbAnchor::kL2, 65530, 8, {}};
  LbKeyField badmask{LbFieldKind::kIpSrc, LbAnchor::kL2, 0, 0, {0xff, 0xff}};
  LbKeyField named_off{LbFieldKind::kL4Sport, LbAnchor::kL2, 4, 0, {}};
  LbKeyField q{LbFieldKind::kDnsQname, LbAnchor::kL2, 0, 0, {}};
  LbKeyField qmask{LbFieldKind::kDnsQname, LbAnchor::kL2, 0, 0, {1}};
  LbKeyField ok{LbFieldKind::kRaw, LbAnchor::kL2, 65519, 16, {}};
  k = {zero, big, far, badmask, named_off, q, qmask, ok};
  auto f = fields(m);
  EXPECT_THAT(f, ElementsAre("lb.services[0].key[0].length", "lb.services[0].key[1].length",
                             "lb.services[0].key[2].offset", "lb.services[0].key[3].mask",
                             "lb.services[0].key[4]", "lb.services[0].key[6]"));
  k.assign(9, ok);
  EXPECT_THAT(fields(m), ElementsAre("lb.services[0].key"));
}

TEST(LbCompiler, ServiceAndBackendErrors) {
  LbModel m{{service(), service()}};
  m.services[1].table_size = 65536;
  m.services[1].dst[0].len = 24;  // host bits set
  m.services[1].backends[1].id = "a";
  m.services[1].backends[2].weight = 70000;
  m.services[1].backends[0].mac.reset();
  ConfigErrorList errs;
  validateLb(m, errs);
  std::vector<std::string> got;
  for (auto& e : errs) got.push_back(e.field + " [" + e.rule + "]");
  EXPECT_THAT(got, ElementsAre("lb.services[1].id [web]", "lb.services[1].dst[0] [web]",
                               "lb.services[1].table_size [web]",
                               "lb.services[1].backends[0].mac [web/a]",
                               "lb.services[1].backends[1].id [web/a]",
                               "lb.services[1].backends[2].weight [web/c]"));
  LbModel nat{{service()}};
  nat.services[0].mode = LbMode::kNat;
  nat.services[0].backends[0].ipv4.reset();
  nat.services[0].dst.push_back(IpPrefix{{0x20, 1, 0xd, 0xb8}, 32, true});
  nat.services[0].backends[1].ipv6 = std::array<uint8_t, 16>{0x20, 1, 0xd, 0xb8, 0, 0, 0, 0,
                                                             0, 0, 0, 0, 0, 0, 0, 2};
  auto f = fields(nat);
  EXPECT_THAT(f, ElementsAre("lb.services[0].backends[0].ipv4", "lb.services[0].backends[0].ipv6",
                             "lb.services[0].backends[2].ipv6"));
  LbModel ipip{{service()}};
  ipip.services[0].mode = LbMode::kIpip;
  EXPECT_THAT(fields(ipip), ElementsAre("lb.services[0].tunnel_src_v4"));
  LbModel few{{service()}};
  few.services[0].table_size = 251;
  few.services[0].backends.clear();
  for (int i = 0; i < 26; ++i) {
    few.services[0].backends.push_back(be("b" + std::to_string(i), uint8_t(i + 1)));
  }
  EXPECT_THAT(fields(few), ElementsAre("lb.services[0].table_size"));
}

// Issue 18.3: backend MACs and addresses that are no single host, a NAT backend that is the
// service's own VIP (a backend elsewhere inside a VIP prefix stays allowed), duplicate MACs (mode l2) and ids with '/' or spaces are refused, each
// with its field and the reason.
TEST(LbCompiler, BackendsThatCannotReceiveTheTrafficAreRefused) {
  auto errors = [](const LbModel& m) {
    ConfigErrorList errs;
    validateLb(m, errs);
    std::vector<std::string> out;
    for (const auto& e : errs) out.push_back(e.field + ": " + e.reason);
    return out;
  };
  using ::testing::HasSubstr;
  LbModel m{{service()}};
  auto& b = m.services[0].backends;
  b.push_back(be("zero-mac", 4));
  b.back().mac = std::array<uint8_t, 6>{0, 0, 0, 0, 0, 0};
  b.push_back(be("bcast-mac", 5));
  b.back().mac = std::array<uint8_t, 6>{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  b.push_back(be("mcast-mac", 6));
  b.back().mac = std::array<uint8_t, 6>{0x01, 0x00, 0x5e, 0, 0, 1};
  b.push_back(be("dup-mac", 7));
  b.back().mac = b[0].mac;
  b.push_back(be("has/slash", 8));
  b.push_back(be("has space", 9));
  auto e = errors(m);
  ASSERT_EQ(e.size(), 6u) << ::testing::PrintToString(e);
  EXPECT_THAT(e[0], HasSubstr("lb.services[0].backends[3].mac: 00:00:00:00:00:00 is the all-zero"));
  EXPECT_THAT(e[1], HasSubstr("lb.services[0].backends[4].mac: ff:ff:ff:ff:ff:ff is the broadcast"));
  EXPECT_THAT(e[2], HasSubstr("lb.services[0].backends[5].mac: 01:00:5e:00:00:01 is a multicast"));
  EXPECT_THAT(e[3], HasSubstr("lb.services[0].backends[6].mac: 02:00:00:00:01:01 is the MAC of "
                              "backends[0] ('a')"));
  EXPECT_THAT(e[4], HasSubstr("lb.services[0].backends[7].id: 'has/slash'"));
  EXPECT_THAT(e[5], HasSubstr("lb.services[0].backends[8].id: 'has space'"));

  // Addresses: unspecified, broadcast, multicast (v4 and v6); in mode nat, the VIP itself.
  m = LbModel{{service()}};
  m.services[0].mode = LbMode::kNat;
  IpPrefix v6;
  v6.v6 = true;
  v6.addr = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7};
  v6.len = 128;
  m.services[0].dst.push_back(v6);
  auto& n = m.services[0].backends;
  for (auto& x : n) x.ipv6 = std::array<uint8_t, 16>{0x20, 0x01, 0x0d, 0xb8, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, x.ipv4->at(3)};
  n[0].ipv4 = std::array<uint8_t, 4>{0, 0, 0, 0};
  n[1].ipv4 = std::array<uint8_t, 4>{255, 255, 255, 255};
  n[2].ipv4 = std::array<uint8_t, 4>{224, 0, 0, 251};
  n.push_back(be("vip", 4));
  n.back().ipv4 = std::array<uint8_t, 4>{192, 0, 2, 10};
  n.back().ipv6 = std::array<uint8_t, 16>{};  // ::
  n.push_back(be("mc6", 5));
  n.back().ipv6 = std::array<uint8_t, 16>{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  n.push_back(be("vip6", 6));
  n.back().ipv6 = std::array<uint8_t, 16>{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7};
  e = errors(m);
  ASSERT_EQ(e.size(), 7u) << ::testing::PrintToString(e);
  EXPECT_THAT(e[0], HasSubstr("backends[0].ipv4: 0.0.0.0 is the unspecified address"));
  EXPECT_THAT(e[1], HasSubstr("backends[1].ipv4: 255.255.255.255 is the broadcast address"));
  EXPECT_THAT(e[2], HasSubstr("backends[2].ipv4: 224.0.0.251 is a multicast address"));
  EXPECT_THAT(e[3], HasSubstr("backends[3].ipv4: 192.0.2.10 is the service's own "
                              "destination dst[0] (the VIP)"));
  EXPECT_THAT(e[4], HasSubstr("backends[3].ipv6: :: is the unspecified address"));
  EXPECT_THAT(e[5], HasSubstr("backends[4].ipv6: ff02::1 is a multicast address"));
  EXPECT_THAT(e[6], HasSubstr("backends[5].ipv6: 2001:db8::7 is the service's own "
                              "destination dst[1] (the VIP)"));
  // The same addresses are fine as next hops of another mode (ipip: no VIP check), and two
  // nat / ipip backends may share a next-hop MAC.
  m = LbModel{{service()}};
  m.services[0].mode = LbMode::kIpip;
  m.services[0].tunnel_src_v4 = std::array<uint8_t, 4>{198, 51, 100, 1};
  m.services[0].backends[0].ipv4 = std::array<uint8_t, 4>{192, 0, 2, 10};
  for (auto& x : m.services[0].backends) x.mac = m.services[0].backends[0].mac;
  EXPECT_TRUE(errors(m).empty()) << ::testing::PrintToString(errors(m));
}

// Issue 18.4: a service carrying TCP keyed on the payload (raw payload field, dns.qname) with
// fallback drop would drop every SYN: refused with the key field and the way out.
TEST(LbCompiler, TcpServiceKeyedOnThePayloadWithFallbackDropIsRefused) {
  LbKeyField raw{LbFieldKind::kRaw, LbAnchor::kPayload, 0, 4, {}};
  LbKeyField qname{LbFieldKind::kDnsQname, LbAnchor::kL2, 0, 0, {}};
  LbKeyField src{LbFieldKind::kIpSrc, LbAnchor::kL2, 0, 0, {}};
  for (const LbKeyField& k : {raw, qname}) {
    LbModel m{{service()}};
    m.services[0].key = {src, k};
    m.services[0].fallback = LbFallback::kDrop;
    ConfigErrorList errs;
    validateLb(m, errs);
    ASSERT_EQ(errs.size(), 1u);
    EXPECT_EQ(errs[0].field, "lb.services[0].key[1]");
    EXPECT_THAT(errs[0].reason, ::testing::HasSubstr("dropped on its SYN"));
    m.services[0].protocol.reset();  // any protocol includes TCP
    EXPECT_THAT(fields(m), ElementsAre("lb.services[0].key[1]"));
    m.services[0].protocol = 17;  // UDP: fine
    m.services[0].dst_ports.reset();
    EXPECT_TRUE(fields(m).empty());
    m.services[0].protocol = 6;  // TCP with the 5-tuple fallback: fine
    m.services[0].fallback = LbFallback::kHash5Tuple;
    EXPECT_TRUE(fields(m).empty());
  }
}

TEST(LbCompiler, OnlyTheChangedServiceIsRebuilt) {
  LbModel m{{service("a"), service("b")}};
  auto c1 = compileLb(m);
  ASSERT_TRUE(c1.ok());
  LbModel m2 = m;
  m2.services[1].backends[0].state = LbBackendState::kDraining;
  auto c2 = compileLb(m2, nullptr, c1->get());
  ASSERT_TRUE(c2.ok());
  EXPECT_EQ((*c2)->services[0].get(), (*c1)->services[0].get()) << "unchanged: same pointer";
  EXPECT_NE((*c2)->services[1].get(), (*c1)->services[1].get());
  for (uint16_t b : (*c2)->services[1]->table) EXPECT_NE(b, 0) << "draining is out of the table";
  // Through the snapshot.
  ConfigModel cm;
  cm.lb = m2;
  LbReuse reuse{*c2};
  auto snap = compileSnapshot(cm, 1, nullptr, nullptr, &reuse);
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ((*snap)->lb->services[1].get(), (*c2)->services[1].get());
  cm.lb.services[0].key.push_back({LbFieldKind::kRaw, LbAnchor::kL2, 0, 0, {}});
  ConfigErrorList errs;
  auto bad = compileSnapshot(cm, 2, &errs, nullptr, &reuse);
  EXPECT_FALSE(bad.ok());
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].field, "lb.services[0].key[0].length");
}

TEST(LbCompiler, BackendIdentityFollowsAddresses) {
  LbModel m{{service()}};
  auto c1 = *compileLb(m);
  m.services[0].backends[1].ipv4 = std::array<uint8_t, 4>{10, 1, 0, 99};
  m.services[0].backends[0].weight = 3;
  auto c2 = *compileLb(m);
  EXPECT_EQ(c1->services[0]->backends[0].identity, c2->services[0]->backends[0].identity)
      << "a weight change keeps the backend";
  EXPECT_NE(c1->services[0]->backends[1].identity, c2->services[0]->backends[1].identity)
      << "a new address is a different backend";
  EXPECT_EQ(c2->services[0]->findBackend(c1->services[0]->backends[2].identity, 0), 2);
  EXPECT_EQ(c2->services[0]->findBackend(c1->services[0]->backends[1].identity, 1), -1);
}

}  // namespace
}  // namespace dpu::rules
