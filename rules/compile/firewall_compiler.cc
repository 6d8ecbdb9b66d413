#include "rules/compile/firewall_compiler.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rules/compile/progress.h"

namespace dpu::rules {
namespace {

constexpr uint8_t kV4 = 1, kV6 = 2;

bool portProtocol(uint8_t p) { return p == 6 || p == 17 || p == 132; }

uint8_t protoFamilies(uint8_t p) {
  if (p == 1) return kV4;   // ICMP exists in IPv4 only
  if (p == 58) return kV6;  // ICMPv6 in IPv6 only
  return kV4 | kV6;
}

uint8_t addrFamilies(const std::vector<IpPrefix>& list) {
  if (list.empty()) return kV4 | kV6;
  uint8_t f = 0;
  for (const IpPrefix& p : list) f |= p.v6 ? kV6 : kV4;
  return f;
}

// The protocols a rule matches, as (proto, mask) with the families each applies to.
struct Proto {
  uint8_t proto = 0, mask = 0, families = kV4 | kV6;
};
std::vector<Proto> ruleProtocols(const FirewallRule& r) {
  std::vector<Proto> out;
  if (r.protocols.empty()) {
    if (!r.src_ports.empty() || !r.dst_ports.empty()) {
      out.push_back({6, 0xff, kV4 | kV6});
      out.push_back({17, 0xff, kV4 | kV6});
    } else {
      out.push_back({0, 0, kV4 | kV6});
    }
    return out;
  }
  for (uint8_t p : r.protocols) {
    if (std::none_of(out.begin(), out.end(), [p](const Proto& x) { return x.proto == p; })) {
      out.push_back({p, 0xff, protoFamilies(p)});
    }
  }
  return out;
}

std::string familyWords(uint8_t f) {
  return f == kV4 ? "IPv4 only" : f == kV6 ? "IPv6 only" : "IPv4 and IPv6";
}

std::string displayCountry(const CountryCode& cc) {
  std::string s;
  for (char c : cc) {
    if (c >= 0x20 && c < 0x7f) s.push_back(c);
    else absl::StrAppend(&s, "\\x", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
  }
  return s;
}

bool validCountry(const CountryCode& cc) {
  return cc[0] >= 'A' && cc[0] <= 'Z' && cc[1] >= 'A' && cc[1] <= 'Z';
}

// The 249 officially assigned ISO 3166-1 alpha-2 codes, and XK (Kosovo: user-assigned, but
// MaxMind's databases use it). A country database holds no other code in country.iso_code.
constexpr std::string_view kIsoCountries =
    "AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO "
    "BQ BR BS BT BV BW BY BZ CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ "
    "DK DM DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO FR GA GB GD GE GF GG GH GI GL GM GN GP "
    "GQ GR GS GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT JE JM JO JP KE KG "
    "KH KI KM KN KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML "
    "MM MN MO MP MQ MR MS MT MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE "
    "PF PG PH PK PL PM PN PR PS PT PW PY QA RE RO RS RU RW SA SB SC SD SE SG SH SI SJ SK SL "
    "SM SN SO SR SS ST SV SX SY SZ TC TD TF TG TH TJ TK TL TM TN TO TR TT TV TW TZ UA UG UM "
    "US UY UZ VA VC VE VG VI VN VU WF WS XK YE YT ZA ZM ZW";

bool assignedCountry(const CountryCode& cc) {
  for (size_t i = 0; i + 1 < kIsoCountries.size(); i += 3) {
    if (kIsoCountries[i] == cc[0] && kIsoCountries[i + 1] == cc[1]) return true;
  }
  return false;
}

// Codes people write for a country whose ISO code is another one.
std::string countryHint(const CountryCode& cc) {
  struct H { const char* wrong; const char* right; const char* name; };
  static constexpr H kHints[] = {{"UK", "GB", "the United Kingdom"}, {"EL", "GR", "Greece"},
                                 {"EN", "GB", "England"}, {"KO", "KR", "Korea"}};
  for (const H& h : kHints) {
    if (cc[0] == h.wrong[0] && cc[1] == h.wrong[1]) {
      return absl::StrCat(" (", h.name, " is ", h.right, ")");
    }
  }
  return "";
}

// Does `outer` contain `inner` (same family, outer.len <= inner.len, same leading bits)?
bool covers(const IpPrefix& outer, const IpPrefix& inner) {
  if (outer.v6 != inner.v6 || outer.len > inner.len) return false;
  IpPrefix t = inner;
  t.len = outer.len;
  return maskPrefix(t).addr == outer.addr;
}

// Sorted, without duplicates or prefixes covered by another (host bits already zero).
std::vector<IpPrefix> normalizePrefixes(std::vector<IpPrefix> list) {
  std::sort(list.begin(), list.end(), [](const IpPrefix& a, const IpPrefix& b) {
    if (a.addr != b.addr) return a.addr < b.addr;
    return a.len < b.len;
  });
  std::vector<IpPrefix> out;
  for (const IpPrefix& p : list) {
    if (!out.empty() && covers(out.back(), p)) continue;
    out.push_back(p);
  }
  return out;
}

std::vector<PortRange> normalizePorts(std::vector<PortRange> list) {
  if (list.empty()) return {PortRange{0, 65535}};
  std::sort(list.begin(), list.end(),
            [](const PortRange& a, const PortRange& b) { return a.lo < b.lo; });
  std::vector<PortRange> out;
  for (const PortRange& r : list) {
    if (!out.empty() && static_cast<uint32_t>(r.lo) <= static_cast<uint32_t>(out.back().hi) + 1) {
      out.back().hi = std::max(out.back().hi, r.hi);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

size_t satMul(size_t a, size_t b) {
  if (a == 0 || b == 0) return 0;
  if (a > std::numeric_limits<size_t>::max() / b) return std::numeric_limits<size_t>::max();
  return a * b;
}
size_t satAdd(size_t a, size_t b) {
  return a > std::numeric_limits<size_t>::max() - b ? std::numeric_limits<size_t>::max() : a + b;
}

using CcRange = std::pair<uint16_t, uint16_t>;

// Everything about one rule except the entries themselves.
struct RulePlan {
  int index = 0;            // in model.rules
  const FirewallRule* rule = nullptr;
  struct Family {
    std::vector<Proto> protos;
    std::vector<IpPrefix> src, dst;
  } fam[2];                 // [0] IPv4, [1] IPv6 (empty protos = family absent)
  std::vector<PortRange> sports, dports;
  std::vector<CcRange> scc, dcc;
  size_t count = 0;
  size_t famCount(int f) const {
    size_t n = fam[f].protos.size();
    n = satMul(n, fam[f].src.size());
    n = satMul(n, fam[f].dst.size());
    n = satMul(n, sports.size());
    n = satMul(n, dports.size());
    n = satMul(n, scc.size());
    return satMul(n, dcc.size());
  }
};

std::vector<IpPrefix> familyList(const std::vector<IpPrefix>& list, bool v6) {
  if (list.empty()) {
    IpPrefix any;
    any.v6 = v6;
    return {any};
  }
  std::vector<IpPrefix> out;
  for (const IpPrefix& p : list) {
    if (p.v6 == v6) out.push_back(p);
  }
  return normalizePrefixes(std::move(out));
}

// Stable order by priority: order[rank] = index in model.rules.
std::vector<int> rankOrder(const FirewallModel& m) {
  std::vector<int> order(m.rules.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return m.rules[a].priority < m.rules[b].priority;
  });
  return order;
}

struct Plan {
  std::vector<int> order;                // rank -> model index
  std::vector<RulePlan> rules;           // by rank
  std::vector<CountryCode> countries;    // index i + 1
  std::array<uint16_t, 26 * 26> country_index{};
  size_t v4 = 0, v6 = 0;
};

std::vector<CcRange> countryRanges(const std::vector<CountryCode>& ccs,
                                   const std::array<uint16_t, 26 * 26>& index) {
  if (ccs.empty()) return {CcRange{0, 0xffff}};
  std::vector<uint16_t> idx;
  for (const CountryCode& cc : ccs) idx.push_back(index[(cc[0] - 'A') * 26 + (cc[1] - 'A')]);
  std::sort(idx.begin(), idx.end());
  idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
  std::vector<CcRange> out;
  for (uint16_t i : idx) {
    if (!out.empty() && out.back().second + 1 == i) out.back().second = i;
    else out.push_back({i, i});
  }
  return out;
}

// Plans every rule (the model must have passed the per-rule checks). Appends the cap error
// when the entries would exceed opts.max_entries.
Plan makePlan(const FirewallModel& m, const FirewallCompileOptions& opts, ConfigErrorList& errors) {
  Plan plan;
  const size_t limit = m.max_acl_entries ? m.max_acl_entries : opts.max_entries;
  plan.order = rankOrder(m);
  // Country indices in order of first use (rank order).
  for (int idx : plan.order) {
    const FirewallRule& r = m.rules[idx];
    for (const auto* list : {&r.src_countries, &r.dst_countries}) {
      for (const CountryCode& cc : *list) {
        uint16_t& slot = plan.country_index[(cc[0] - 'A') * 26 + (cc[1] - 'A')];
        if (slot == 0) {
          plan.countries.push_back(cc);
          slot = static_cast<uint16_t>(plan.countries.size());
        }
      }
    }
  }
  size_t total = 0;
  plan.rules.reserve(plan.order.size());
  for (int idx : plan.order) {
    const FirewallRule& r = m.rules[idx];
    RulePlan rp;
    rp.index = idx;
    rp.rule = &r;
    std::vector<Proto> protos = ruleProtocols(r);
    for (int f = 0; f < 2; ++f) {
      const uint8_t bit = f == 0 ? kV4 : kV6;
      if (!(addrFamilies(r.src) & bit) || !(addrFamilies(r.dst) & bit)) continue;
      for (const Proto& p : protos) {
        if (p.families & bit) rp.fam[f].protos.push_back(p);
      }
      if (rp.fam[f].protos.empty()) continue;
      rp.fam[f].src = familyList(r.src, f == 1);
      rp.fam[f].dst = familyList(r.dst, f == 1);
    }
    rp.sports = normalizePorts(r.src_ports);
    rp.dports = normalizePorts(r.dst_ports);
    rp.scc = countryRanges(r.src_countries, plan.country_index);
    rp.dcc = countryRanges(r.dst_countries, plan.country_index);
    const size_t c4 = rp.famCount(0), c6 = rp.famCount(1);
    rp.count = satAdd(c4, c6);
    if (total <= limit && satAdd(total, rp.count) > limit) {
      RuleErrorContext ctx = modelRuleContext(r, idx);
      ConfigError e = ctx.base;
      e.field = ctx.field(RuleField::kRule);
      if (e.field.empty()) e.field = "rule";
      auto dims = [&](int f) {
        const RulePlan::Family& fa = rp.fam[f];
        return absl::StrCat(fa.protos.size(), " protocol(s) x ", fa.src.size(), " source(s) x ",
                            fa.dst.size(), " destination(s) x ", rp.sports.size(),
                            " source port range(s) x ", rp.dports.size(),
                            " destination port range(s) x ", rp.scc.size(), " x ",
                            rp.dcc.size(), " country range(s)");
      };
      std::string how;
      if (c4) absl::StrAppend(&how, "IPv4: ", dims(0));
      if (c6) absl::StrAppend(&how, c4 ? "; " : "", "IPv6: ", dims(1));
      e.reason = absl::StrCat("expands to ", rp.count, " ACL entries (", how,
                              "); with the ", total, " entries of the rules before it that "
                              "exceeds the limit of ", limit,
                              " entries (firewall.max_acl_entries", m.max_acl_entries ? "" : ", default",
                              "): use fewer or larger prefixes, port ranges or an IP set "
                              "with aggregated prefixes, or raise the limit if the machine has "
                              "the memory");
      errors.push_back(std::move(e));
    }
    total = satAdd(total, rp.count);
    plan.v4 = satAdd(plan.v4, c4);
    plan.v6 = satAdd(plan.v6, c6);
    plan.rules.push_back(std::move(rp));
  }
  return plan;
}

void checkDefaults(const FirewallModel& m, ConfigErrorList& errors) {
  struct D { const char* field; FwAction a; };
  for (const D& d : {D{"firewall.default_a_to_b", m.default_a_to_b},
                     D{"firewall.default_b_to_a", m.default_b_to_a}}) {
    uint8_t v = static_cast<uint8_t>(d.a);
    if (v >= 1 && v <= 3) continue;
    ConfigError e;
    e.section = "firewall";
    e.field = d.field;
    e.reason = absl::StrCat("action ", v, " is not allow, deny or reject");
    errors.push_back(std::move(e));
  }
}

}  // namespace

RuleErrorContext modelRuleContext(const FirewallRule& rule, int index) {
  RuleErrorContext ctx;
  ctx.base.section = "firewall";
  ctx.base.rule = rule.id;
  ctx.base.index = index;
  ctx.base.file = rule.file;
  ctx.base.line = rule.line;
  const bool inline_rule = rule.file.empty();
  ctx.field = [inline_rule, index](RuleField f) {
    if (inline_rule) return ruleFieldName(RuleSyntax::kConfig, index, f);
    // Rules from files: the proto field name (the rule's file:line says where).
    std::string n = ruleFieldName(RuleSyntax::kConfig, -1, f);
    const std::string prefix = "firewall.rule.";
    if (n.rfind(prefix, 0) == 0) return n.substr(prefix.size());
    return std::string("rule");
  };
  return ctx;
}

void checkFirewallRule(const FirewallRule& r, bool geoip_configured, const RuleErrorContext& ctx,
                       ConfigErrorList& errors) {
  auto add = [&](RuleField f, std::string reason) {
    ConfigError e = ctx.base;
    e.field = ctx.field ? ctx.field(f) : std::string();
    if (ctx.line) {
      if (int l = ctx.line(f); l > 0) e.line = l;
    }
    e.reason = std::move(reason);
    errors.push_back(std::move(e));
  };
  if (absl::Status st = checkRuleId(r.id); !st.ok()) add(RuleField::kId, std::string(st.message()));
  if (uint8_t a = static_cast<uint8_t>(r.action); a < 1 || a > 3) {
    add(RuleField::kAction, "not set: allow, deny or reject");
  }
  if (static_cast<uint8_t>(r.direction) > 2) {
    add(RuleField::kDirection, "not a direction (both, a->b or b->a)");
  }
  bool prefixes_ok = true;
  for (auto [field, list] : {std::pair{RuleField::kSrc, &r.src}, std::pair{RuleField::kDst, &r.dst}}) {
    for (const IpPrefix& p : *list) {
      const int max = p.v6 ? 128 : 32;
      if (p.len > max) {
        add(field, absl::StrCat("prefix length ", p.len, " is above ", max));
        prefixes_ok = false;
        continue;
      }
      if (!p.v6 && std::any_of(p.addr.begin() + 4, p.addr.end(), [](uint8_t b) { return b; })) {
        add(field, "IPv4 prefix with bytes set beyond its 4 address bytes");
        prefixes_ok = false;
        continue;
      }
      if (prefixHasHostBits(p)) {
        add(field, absl::StrCat(formatPrefix(p), " has host bits set (did you mean ",
                                formatPrefix(maskPrefix(p)), "?)"));
        prefixes_ok = false;
      }
    }
  }
  // Ports: only for protocols that have them; ranges in order.
  for (auto [field, list] :
       {std::pair{RuleField::kSrcPorts, &r.src_ports}, std::pair{RuleField::kDstPorts, &r.dst_ports}}) {
    for (const PortRange& pr : *list) {
      if (pr.lo > pr.hi) {
        add(field, absl::StrCat("port range ", pr.lo, "-", pr.hi, ": low end is above high end"));
      }
    }
  }
  if (!r.src_ports.empty() || !r.dst_ports.empty()) {
    std::vector<std::string> bad;
    for (uint8_t p : r.protocols) {
      if (!portProtocol(p)) bad.push_back(protocolName(p));
    }
    if (!bad.empty()) {
      add(r.dst_ports.empty() ? RuleField::kSrcPorts : RuleField::kDstPorts,
          absl::StrCat("ports only apply to tcp, udp and sctp, and the rule's protocols include ",
                       absl::StrJoin(bad, ", "),
                       " (put those in a rule of their own, without ports)"));
    }
  }
  // Families: a rule whose source, destination and protocols never meet cannot match.
  if (prefixes_ok) {
    const uint8_t fs = addrFamilies(r.src), fd = addrFamilies(r.dst);
    uint8_t fp = 0;
    for (const Proto& p : ruleProtocols(r)) fp |= p.families;
    if ((fs & fd) == 0) {
      add(RuleField::kDst, absl::StrCat("the source is ", familyWords(fs),
                                        " and the destination ", familyWords(fd),
                                        ": the rule can never match"));
    } else if ((fs & fd & fp) == 0) {
      std::vector<std::string> names;
      for (uint8_t p : r.protocols) names.push_back(protocolName(p));
      add(RuleField::kProtocols,
          absl::StrCat("protocol(s) ", absl::StrJoin(names, ","), " exist in ",
                       familyWords(fp), " but the addresses are ", familyWords(fs & fd),
                       ": the rule can never match"));
    }
  }
  if (r.vlan && *r.vlan > 4095) {
    add(RuleField::kVlan, absl::StrCat(*r.vlan, " is out of range [0, 4095]"));
  }
  bool has_countries = false;
  for (auto [field, list] : {std::pair{RuleField::kSrcCountries, &r.src_countries},
                             std::pair{RuleField::kDstCountries, &r.dst_countries}}) {
    for (const CountryCode& cc : *list) {
      if (!validCountry(cc)) {
        add(field, absl::StrCat("'", displayCountry(cc),
                                "' is not an ISO 3166-1 alpha-2 country code (two upper-case "
                                "letters, e.g. US)"));
      } else if (!assignedCountry(cc)) {
        // No country database holds it: the rule would silently never match.
        add(field, absl::StrCat("'", displayCountry(cc),
                                "' is not an assigned ISO 3166-1 alpha-2 country code",
                                countryHint(cc), ": no GeoIP database has it"));
      }
    }
    if (!list->empty() && !has_countries && !geoip_configured) {
      has_countries = true;
      add(field, absl::StrCat("rule '", r.id,
                              "' matches countries but no GeoIP database is configured "
                              "(set geoip.database to a MaxMind country mmdb)"));
    }
  }
}

static void duplicateIds(const FirewallModel& m, ConfigErrorList& errors) {
  std::map<std::string_view, int> ids;
  for (size_t i = 0; i < m.rules.size(); ++i) {
    const FirewallRule& r = m.rules[i];
    if (r.id.empty()) continue;  // reported by the per-rule check
    auto [it, fresh] = ids.emplace(r.id, static_cast<int>(i));
    if (fresh) continue;
    const FirewallRule& first = m.rules[it->second];
    RuleErrorContext ctx = modelRuleContext(r, static_cast<int>(i));
    ConfigError e = ctx.base;
    e.field = ctx.field(RuleField::kId);
    std::string where = first.file.empty()
                            ? absl::StrCat("firewall.rules[", it->second, "]")
                            : absl::StrCat(first.file, ":", first.line);
    e.reason = absl::StrCat("duplicate id '", r.id, "': also used by ", where);
    errors.push_back(std::move(e));
  }
}

void validateFirewallSet(const FirewallModel& m, ConfigErrorList& errors,
                         const FirewallCompileOptions& opts) {
  checkDefaults(m, errors);
  duplicateIds(m, errors);
  // The cap needs valid country codes (indices); rules with bad ones are reported by the
  // per-rule checks.
  for (const FirewallRule& r : m.rules) {
    for (const auto* list : {&r.src_countries, &r.dst_countries}) {
      for (const CountryCode& cc : *list) {
        if (!validCountry(cc)) return;
      }
    }
  }
  makePlan(m, opts, errors);
}

void validateFirewall(const FirewallModel& m, ConfigErrorList& errors,
                      const FirewallCompileOptions& opts) {
  const bool geoip = !m.geoip_database.empty();
  for (size_t i = 0; i < m.rules.size(); ++i) {
    checkFirewallRule(m.rules[i], geoip, modelRuleContext(m.rules[i], static_cast<int>(i)),
                      errors);
  }
  validateFirewallSet(m, errors, opts);
}

absl::StatusOr<std::shared_ptr<const CompiledFirewall>> compileFirewall(
    const FirewallModel& model, ConfigErrorList* errors) {
  return compileFirewall(model, FirewallCompileOptions{}, errors);
}

absl::StatusOr<std::shared_ptr<const CompiledFirewall>> compileFirewall(
    const FirewallModel& m, const FirewallCompileOptions& opts, ConfigErrorList* errors) {
  ConfigErrorList local;
  const bool geoip = !m.geoip_database.empty();
  for (size_t i = 0; i < m.rules.size(); ++i) {
    checkFirewallRule(m.rules[i], geoip, modelRuleContext(m.rules[i], static_cast<int>(i)),
                      local);
  }
  checkDefaults(m, local);
  duplicateIds(m, local);
  if (!local.empty()) {
    if (errors) errors->insert(errors->end(), local.begin(), local.end());
    return errorsToStatus(local);
  }
  Plan plan = makePlan(m, opts, local);
  if (!local.empty()) {
    if (errors) errors->insert(errors->end(), local.begin(), local.end());
    return errorsToStatus(local);
  }

  auto fw = std::make_shared<CompiledFirewall>();
  fw->default_action[0] = m.default_a_to_b;
  fw->default_action[1] = m.default_b_to_a;
  fw->reevaluate_on_change = m.reevaluate_on_change;
  fw->geoip_database = m.geoip_database;
  fw->countries = plan.countries;
  fw->country_index = plan.country_index;
  fw->uses_countries = !plan.countries.empty();
  fw->rules.reserve(plan.rules.size());
  fw->v4.reserve(plan.v4);
  fw->v6.reserve(plan.v6);
  ProgressStep progress("expanding firewall rules to ACL entries", plan.rules.size(), "rules");
  for (size_t rank = 0; rank < plan.rules.size(); ++rank) {
    const RulePlan& rp = plan.rules[rank];
    const FirewallRule& r = *rp.rule;
    fw->rules.push_back(FwRuleInfo{r.id, r.action, r.priority, r.description});
    progress.advance();
    AclEntry base;
    base.rule = static_cast<uint32_t>(rank);
    base.rank = static_cast<uint32_t>(rank);
    switch (r.direction) {
      case FwDirection::kAtoB: base.dir_lo = base.dir_hi = 1; break;
      case FwDirection::kBtoA: base.dir_lo = base.dir_hi = 2; break;
      default: base.dir_lo = 1; base.dir_hi = 2; break;
    }
    if (r.vlan) base.vlan_lo = base.vlan_hi = *r.vlan;
    if (r.tunnel_id) base.tunnel_lo = base.tunnel_hi = *r.tunnel_id;
    for (int f = 0; f < 2; ++f) {
      const RulePlan::Family& fa = rp.fam[f];
      std::vector<AclEntry>& out = f == 0 ? fw->v4 : fw->v6;
      for (const Proto& p : fa.protos) {
        for (const IpPrefix& s : fa.src) {
          for (const IpPrefix& d : fa.dst) {
            for (const PortRange& sp : rp.sports) {
              for (const PortRange& dp : rp.dports) {
                for (const CcRange& sc : rp.scc) {
                  for (const CcRange& dc : rp.dcc) {
                    AclEntry e = base;
                    e.proto = p.proto;
                    e.proto_mask = p.mask;
                    e.src = s.addr;
                    e.src_len = s.len;
                    e.dst = d.addr;
                    e.dst_len = d.len;
                    e.sport_lo = sp.lo;
                    e.sport_hi = sp.hi;
                    e.dport_lo = dp.lo;
                    e.dport_hi = dp.hi;
                    e.src_cc_lo = sc.first;
                    e.src_cc_hi = sc.second;
                    e.dst_cc_lo = dc.first;
                    e.dst_cc_hi = dc.second;
                    out.push_back(e);
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return std::shared_ptr<const CompiledFirewall>(std::move(fw));
}

}  // namespace dpu::rules
