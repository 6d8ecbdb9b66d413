// Helpers shared by the firewall tests: the GeoIP test database, address conversions, and
// compiled firewalls built by hand (the tests do not depend on the rules compiler).
#pragma once

#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/packet/packet_meta.h"
#include "rules/compiled/firewall.h"
#include "tests/util/packet_builder.h"

namespace dpu::test {

// MaxMind test data (DPU_MMDB_DIR overrides the shared data directory).
inline constexpr const char* kMmdbDir = "/work/shared/data/mmdb";

inline std::string mmdbDir() {
  const char* d = std::getenv("DPU_MMDB_DIR");
  return d && *d ? d : kMmdbDir;
}

inline std::string firstExisting(const std::vector<std::string>& paths) {
  for (const std::string& p : paths) {
    if (::access(p.c_str(), R_OK) == 0) return p;
  }
  return "";
}

// A country database with documented lookups: GeoIP2-Country-Test.mmdb when present, else
// MaxMind's GeoLite2-Country-Test.mmdb (test-data of github.com/maxmind/MaxMind-DB).
inline std::string countryTestDb() {
  std::string d = mmdbDir();
  return firstExisting({d + "/GeoIP2-Country-Test.mmdb",
                        d + "/maxmind+MaxMind-DB/test-data/GeoIP2-Country-Test.mmdb",
                        d + "/maxmind+MaxMind-DB/test-data/GeoLite2-Country-Test.mmdb"});
}

// The lookups file that goes with countryTestDb() (ip, network, key, "CC", found, ...).
inline std::string countryTestLookups() {
  std::string db = countryTestDb();
  if (db.empty()) return "";
  std::string base = db.substr(db.rfind('/') + 1);
  base = base.substr(0, base.size() - 5);  // ".mmdb"
  return firstExisting({mmdbDir() + "/expected/" + base + ".lookups.tsv"});
}

inline dp::IpAddr toIp(const std::array<uint8_t, 16>& a) {
  dp::IpAddr r;
  std::memcpy(r.b, a.data(), 16);
  return r;
}

// Prefix "10.0.0.0/8" / "2001:db8::/32" into an ACL entry's address and length.
inline void setPrefix(const std::string& text, std::array<uint8_t, 16>& addr, uint8_t& len) {
  size_t slash = text.find('/');
  dp::IpAddr a = ip(text.substr(0, slash));
  std::memcpy(addr.data(), a.b, 16);
  bool v6 = text.find(':') != std::string::npos;
  len = static_cast<uint8_t>(slash == std::string::npos ? (v6 ? 128 : 32)
                                                        : std::stoi(text.substr(slash + 1)));
}

// One hand-written rule: the fields a test needs, the rest "any".
struct TestRule {
  std::string id;
  rules::FwAction action = rules::FwAction::kDeny;
  uint8_t proto = 0;  // 0 = any
  std::string src = "", dst = "";  // prefixes; "" = any (both families)
  uint16_t dport_lo = 0, dport_hi = 65535;
  uint8_t dir = 0;  // 0 = both, 1 = initiated on side A, 2 = on side B
  int vlan = -1;
  std::string src_cc = "", dst_cc = "";  // "" = any
};

// A compiled firewall as the compiler would make it: rules in the given (rank) order,
// countries indexed in order of first use.
inline std::shared_ptr<rules::CompiledFirewall> makeFirewall(
    const std::vector<TestRule>& rs, rules::FwAction def_a = rules::FwAction::kAllow,
    rules::FwAction def_b = rules::FwAction::kAllow) {
  auto fw = std::make_shared<rules::CompiledFirewall>();
  fw->default_action[0] = def_a;
  fw->default_action[1] = def_b;
  auto ccIndex = [&](const std::string& cc) -> uint16_t {
    int slot = (cc[0] - 'A') * 26 + (cc[1] - 'A');
    if (fw->country_index[slot] == 0) {
      fw->countries.push_back({cc[0], cc[1]});
      fw->country_index[slot] = static_cast<uint16_t>(fw->countries.size());
    }
    fw->uses_countries = true;
    return fw->country_index[slot];
  };
  for (uint32_t r = 0; r < rs.size(); ++r) {
    const TestRule& t = rs[r];
    rules::FwRuleInfo info;
    info.id = t.id;
    info.action = t.action;
    info.priority = static_cast<int32_t>(r);
    fw->rules.push_back(info);
    for (bool v6 : {false, true}) {
      bool src_v6 = t.src.find(':') != std::string::npos;
      bool dst_v6 = t.dst.find(':') != std::string::npos;
      if ((!t.src.empty() && src_v6 != v6) || (!t.dst.empty() && dst_v6 != v6)) continue;
      rules::AclEntry e;
      e.rule = e.rank = r;
      if (t.proto) {
        e.proto = t.proto;
        e.proto_mask = 0xff;
      }
      if (!t.src.empty()) setPrefix(t.src, e.src, e.src_len);
      if (!t.dst.empty()) setPrefix(t.dst, e.dst, e.dst_len);
      e.dport_lo = t.dport_lo;
      e.dport_hi = t.dport_hi;
      if (t.dir) e.dir_lo = e.dir_hi = t.dir;
      if (t.vlan >= 0) e.vlan_lo = e.vlan_hi = static_cast<uint16_t>(t.vlan);
      if (!t.src_cc.empty()) e.src_cc_lo = e.src_cc_hi = ccIndex(t.src_cc);
      if (!t.dst_cc.empty()) e.dst_cc_lo = e.dst_cc_hi = ccIndex(t.dst_cc);
      (v6 ? fw->v6 : fw->v4).push_back(e);
    }
  }
  return fw;
}

}  // namespace dpu::test
