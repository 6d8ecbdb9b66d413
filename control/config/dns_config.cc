#include "control/config/dns_config.h"

#include <arpa/inet.h>

#include "absl/strings/str_cat.h"
#include "rules/compile/geoip_db.h"

namespace dpu::ctl {
namespace {

constexpr int kMaxSinkholeAddrs = 8;

rules::ConfigError dnsError(const std::string& list, std::string field, std::string reason) {
  rules::ConfigError e;
  e.section = "dns";
  e.rule = list;
  e.field = std::move(field);
  e.reason = std::move(reason);
  return e;
}

}  // namespace

void dnsToModel(const v1::ApplianceConfig& cfg, rules::DnsModel* m, rules::ConfigErrorList& errors) {
  if (!cfg.has_dns()) return;
  const v1::DnsConfig& dc = cfg.dns();
  for (int i = 0; i < dc.extra_ports_size(); ++i) {
    uint32_t p = dc.extra_ports(i);
    if (p > 65535) {
      errors.push_back(dnsError("", absl::StrCat("dns.extra_ports[", i, "]"),
                                absl::StrCat(p, " is not a port (1..65535)")));
      continue;
    }
    m->extra_ports.push_back(static_cast<uint16_t>(p));
  }
  switch (dc.malformed()) {
    case v1::POLICY_DEFAULT:
    case v1::FORWARD: m->malformed = rules::Policy::kForward; break;
    case v1::DROP: m->malformed = rules::Policy::kDrop; break;
    default:
      errors.push_back(dnsError("", "dns.malformed", absl::StrCat("unknown policy ", dc.malformed())));
  }
  switch (dc.nonstandard()) {
    case v1::POLICY_DEFAULT: m->nonstandard = m->malformed; break;
    case v1::FORWARD: m->nonstandard = rules::Policy::kForward; break;
    case v1::DROP: m->nonstandard = rules::Policy::kDrop; break;
    default:
      errors.push_back(dnsError("", "dns.nonstandard", absl::StrCat("unknown policy ", dc.nonstandard())));
  }
  switch (dc.tcp_midstream()) {
    case v1::POLICY_DEFAULT: m->tcp_midstream = m->malformed; break;
    case v1::FORWARD: m->tcp_midstream = rules::Policy::kForward; break;
    case v1::DROP: m->tcp_midstream = rules::Policy::kDrop; break;
    default:
      errors.push_back(dnsError("", "dns.tcp_midstream", absl::StrCat("unknown policy ", dc.tcp_midstream())));
  }
  m->cname_cloaking = !dc.disable_cname_cloaking();
  if (dc.has_soa()) {
    const v1::DnsSoa& s = dc.soa();
    if (!s.mname().empty()) m->soa.mname = s.mname();
    if (!s.rname().empty()) m->soa.rname = s.rname();
    if (s.serial()) m->soa.serial = s.serial();
    if (s.refresh()) m->soa.refresh = s.refresh();
    if (s.retry()) m->soa.retry = s.retry();
    if (s.expire()) m->soa.expire = s.expire();
    m->soa.minimum = s.minimum();
  }
  for (int i = 0; i < dc.lists_size(); ++i) {
    const v1::DnsList& l = dc.lists(i);
    const std::string base = absl::StrCat("dns.lists[", i, "]");
    rules::DnsListModel lm;
    lm.name = l.name();
    switch (l.action()) {
      case v1::DNS_ACTION_DEFAULT:
      case v1::DNS_NXDOMAIN: lm.action = rules::DnsAction::kNxdomain; break;
      case v1::DNS_ALLOW: lm.action = rules::DnsAction::kAllow; break;
      case v1::DNS_DROP: lm.action = rules::DnsAction::kDrop; break;
      case v1::DNS_NODATA: lm.action = rules::DnsAction::kNodata; break;
      case v1::DNS_SINKHOLE: lm.action = rules::DnsAction::kSinkhole; break;
      case v1::DNS_REFUSE: lm.action = rules::DnsAction::kRefuse; break;
      default:
        errors.push_back(dnsError(l.name(), base + ".action", absl::StrCat("unknown action ", l.action())));
    }
    if (l.format() < 0 || l.format() > v1::DNS_FORMAT_DNSMASQ) {
      errors.push_back(dnsError(l.name(), base + ".format", absl::StrCat("unknown format ", l.format())));
    } else {
      lm.format = static_cast<rules::DnsListFormat>(l.format());
    }
    lm.bad_lines = l.skip_bad_lines() ? rules::DnsBadLines::kSkip : rules::DnsBadLines::kReject;
    lm.plain_match = l.match_subdomains() ? rules::DnsMatch::kSubtree : rules::DnsMatch::kExact;
    lm.names.assign(l.names().begin(), l.names().end());
    lm.removed.assign(l.removed().begin(), l.removed().end());
    for (const std::string& f : l.files()) {
      lm.files.push_back(f);
      lm.file_stamps.push_back(rules::geoipDatabaseStamp(f));  // stat-based stamp of any file
    }
    if (l.ttl() != 0) lm.ttl = l.ttl();
    if (l.sinkhole_v4_size() > kMaxSinkholeAddrs || l.sinkhole_v6_size() > kMaxSinkholeAddrs) {
      errors.push_back(dnsError(l.name(), base + ".sinkhole",
                                absl::StrCat("at most ", kMaxSinkholeAddrs, " addresses per family")));
    }
    for (int k = 0; k < l.sinkhole_v4_size(); ++k) {
      std::array<uint8_t, 4> a{};
      if (inet_pton(AF_INET, l.sinkhole_v4(k).c_str(), a.data()) != 1) {
        errors.push_back(dnsError(l.name(), absl::StrCat(base, ".sinkhole_v4[", k, "]"),
                                  absl::StrCat("'", l.sinkhole_v4(k), "' is not an IPv4 address")));
      }
      lm.sinkhole_v4.push_back(a);
    }
    for (int k = 0; k < l.sinkhole_v6_size(); ++k) {
      std::array<uint8_t, 16> a{};
      if (inet_pton(AF_INET6, l.sinkhole_v6(k).c_str(), a.data()) != 1) {
        errors.push_back(dnsError(l.name(), absl::StrCat(base, ".sinkhole_v6[", k, "]"),
                                  absl::StrCat("'", l.sinkhole_v6(k), "' is not an IPv6 address")));
      }
      lm.sinkhole_v6.push_back(a);
    }
    m->lists.push_back(std::move(lm));
  }
}

}  // namespace dpu::ctl
