// ApplianceConfig.lb (JSON) -> rules::LbModel: every field converted, and syntax errors named
// by their field path and the service / backend id.
#include <gtest/gtest.h>

#include <google/protobuf/util/json_util.h>

#include "control/config/lb_loader.h"

namespace dpu::ctl {
namespace {

v1::LbConfig parse(const std::string& json) {
  v1::LbConfig c;
  auto st = google::protobuf::util::JsonStringToMessage(json, &c);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return c;
}

TEST(LbLoader, ConvertsEveryField) {
  auto cfg = parse(R"({"services": [{
    "id": "dns", "dst": ["192.0.2.53", "2001:db8::/64"], "protocol": "udp",
    "dst_ports": "53", "vlan": 7, "fallback": "LB_FALLBACK_DROP", "mode": "LB_MODE_IPIP",
    "orphans": "LB_ORPHANS_RESET", "tunnel_src_v4": "198.51.100.1",
    "tunnel_src_v6": "2001:db8:ff::1", "table_size": 251,
    "key": [{"field": "dns.qname"},
            {"field": "raw", "anchor": "payload", "offset": 2, "length": 4, "mask": "ff:00:ff:00"},
            {"field": "ip.src", "mask": "ffffff00000000000000000000000000"}],
    "backends": [{"id": "a", "ipv4": "10.0.0.1", "ipv6": "2001:db8:9::1",
                  "mac": "02:00:00:00:00:01", "weight": 0, "state": "LB_BACKEND_DRAINING"},
                 {"id": "b", "ipv4": "10.0.0.2", "ipv6": "2001:db8:9::2"}]}]})");
  rules::LbModel m;
  rules::ConfigErrorList errors;
  lbToModel(cfg, &m, errors);
  ASSERT_TRUE(errors.empty()) << errors[0].field << ": " << errors[0].reason;
  ASSERT_EQ(m.services.size(), 1u);
  const auto& s = m.services[0];
  EXPECT_EQ(s.dst.size(), 2u);
  EXPECT_TRUE(s.dst[1].v6);
  EXPECT_EQ(s.dst[1].len, 64);
  EXPECT_EQ(*s.protocol, 17);
  EXPECT_EQ(s.dst_ports->lo, 53);
  EXPECT_EQ(*s.vlan, 7);
  EXPECT_EQ(s.fallback, rules::LbFallback::kDrop);
  EXPECT_EQ(s.mode, rules::LbMode::kIpip);
  EXPECT_EQ(s.orphans, rules::LbOrphanPolicy::kReset);
  EXPECT_EQ((*s.tunnel_src_v4)[0], 198);
  EXPECT_EQ((*s.tunnel_src_v6)[5], 0xff);
  EXPECT_EQ(s.table_size, 251u);
  ASSERT_EQ(s.key.size(), 3u);
  EXPECT_EQ(s.key[0].kind, rules::LbFieldKind::kDnsQname);
  EXPECT_EQ(s.key[1].anchor, rules::LbAnchor::kPayload);
  EXPECT_EQ(s.key[1].offset, 2u);
  EXPECT_EQ(s.key[1].mask, (std::vector<uint8_t>{0xff, 0, 0xff, 0}));
  EXPECT_EQ(s.key[2].mask.size(), 16u);
  EXPECT_EQ(s.backends[0].weight, 0u);
  EXPECT_EQ(s.backends[0].state, rules::LbBackendState::kDraining);
  EXPECT_EQ((*s.backends[0].mac)[5], 1);
  EXPECT_EQ(s.backends[1].weight, 1u) << "default weight";
  EXPECT_EQ((*s.backends[1].ipv6)[15], 2);
}

TEST(LbLoader, OrphanPolicies) {
  auto cfg = parse(R"({"services": [
    {"id": "a", "dst": ["192.0.2.1"]},
    {"id": "b", "dst": ["192.0.2.2"], "orphans": "LB_ORPHANS_RESET"},
    {"id": "c", "dst": ["192.0.2.3"], "orphans": "LB_ORPHANS_REHASH_OR_RESET"}]})");
  rules::LbModel m;
  rules::ConfigErrorList errors;
  lbToModel(cfg, &m, errors);
  EXPECT_TRUE(errors.empty());
  ASSERT_EQ(m.services.size(), 3u);
  EXPECT_EQ(m.services[0].orphans, rules::LbOrphanPolicy::kRehash);
  EXPECT_EQ(m.services[1].orphans, rules::LbOrphanPolicy::kReset);
  EXPECT_EQ(m.services[2].orphans, rules::LbOrphanPolicy::kRehashOrReset);
  cfg.mutable_services(0)->set_orphans(static_cast<v1::LbOrphanPolicy>(7));
  m = rules::LbModel{};
  lbToModel(cfg, &m, errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "lb.services[0].orphans");
}

TEST(LbLoader, ErrorsNameTheField) {
  auto cfg = parse(R"({"services": [{
    "id": "web", "dst": ["192.0.2.300"], "protocol": "tcpx", "dst_ports": "80-",
    "tunnel_src_v4": "2001:db8::1",
    "key": [{"field": "ip.source"}, {"field": "raw", "anchor": "l5"},
            {"field": "ip.dst", "anchor": "l3"}, {"field": "raw", "anchor": "l2", "mask": "xyz"}],
    "backends": [{"id": "a", "ipv4": "2001:db8::1", "ipv6": "10.0.0.1", "mac": "02:00:00:00:00"}]}]})");
  rules::LbModel m;
  rules::ConfigErrorList errors;
  lbToModel(cfg, &m, errors);
  std::vector<std::string> got;
  for (const auto& e : errors) {
    EXPECT_EQ(e.section, "lb");
    got.push_back(e.field + " [" + e.rule + "]");
  }
  EXPECT_EQ(got, (std::vector<std::string>{
                     "lb.services[0].dst[0] [web]", "lb.services[0].protocol [web]",
                     "lb.services[0].dst_ports [web]", "lb.services[0].key[0].field [web]",
                     "lb.services[0].key[1].anchor [web]", "lb.services[0].key[2].anchor [web]",
                     "lb.services[0].key[3].mask [web]", "lb.services[0].tunnel_src_v4 [web]",
                     "lb.services[0].backends[0].ipv4 [web/a]",
                     "lb.services[0].backends[0].ipv6 [web/a]",
                     "lb.services[0].backends[0].mac [web/a]"}));
}

}  // namespace
}  // namespace dpu::ctl
