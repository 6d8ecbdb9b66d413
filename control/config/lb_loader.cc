#include "control/config/lb_loader.h"

#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "rules/compile/firewall_parsers.h"

namespace dpu::ctl {
namespace {

struct Where {
  rules::ConfigErrorList& errors;
  std::string rule;
  int index;
  void add(const std::string& field, const std::string& reason) {
    rules::ConfigError e;
    e.section = "lb";
    e.rule = rule;
    e.index = index;
    e.field = field;
    e.reason = reason;
    errors.push_back(std::move(e));
  }
};

bool parseMac(const std::string& s, std::array<uint8_t, 6>& out) {
  if (s.size() != 17) return false;
  for (int i = 0; i < 6; ++i) {
    if (i > 0 && s[i * 3 - 1] != ':' && s[i * 3 - 1] != '-') return false;
    std::string byte = s.substr(i * 3, 2);
    if (!absl::ascii_isxdigit(byte[0]) || !absl::ascii_isxdigit(byte[1])) return false;
    out[i] = uint8_t(std::stoul(byte, nullptr, 16));
  }
  return true;
}

bool parseHex(const std::string& s, std::vector<uint8_t>& out) {
  std::string h;
  for (char c : s) {
    if (c == ':' || c == ' ') continue;
    if (!absl::ascii_isxdigit(c)) return false;
    h.push_back(c);
  }
  if (h.empty() || h.size() % 2) return false;
  for (size_t i = 0; i < h.size(); i += 2) out.push_back(uint8_t(std::stoul(h.substr(i, 2), nullptr, 16)));
  return true;
}

// An optional address of one family (N = 4: IPv4, 16: IPv6) from `text` into `out`; an
// error on `field` when it is not one.
template <size_t N>
void addrField(const std::string& text, const std::string& field, Where& w,
               std::optional<std::array<uint8_t, N>>& out) {
  if (text.empty()) return;
  auto a = rules::parseAddress(text);
  if (!a.ok() || a->v6 != (N == 16)) {
    w.add(field, absl::StrCat("'", text, "' is not an ", N == 16 ? "IPv6" : "IPv4", " address"));
    return;
  }
  std::array<uint8_t, N> v;
  std::copy(a->addr.begin(), a->addr.begin() + N, v.begin());
  out = v;
}

bool fieldKind(const std::string& name, rules::LbFieldKind& k) {
  using K = rules::LbFieldKind;
  for (K c : {K::kIpSrc, K::kIpDst, K::kL4Sport, K::kL4Dport, K::kIpProto, K::kVlan,
              K::kIpv6FlowLabel, K::kDnsQname, K::kRaw, K::kTunnelId}) {
    if (name == rules::lbFieldName(c)) {
      k = c;
      return true;
    }
  }
  return false;
}

bool anchorOf(const std::string& name, rules::LbAnchor& a) {
  using A = rules::LbAnchor;
  for (A c : {A::kL2, A::kL3, A::kL4, A::kPayload}) {
    if (name == rules::lbAnchorName(c)) {
      a = c;
      return true;
    }
  }
  return false;
}

void backendToModel(const v1::LbBackendConfig& b, const std::string& path, Where& w,
                    rules::LbBackend& out) {
  out.id = b.id();
  addrField(b.ipv4(), path + ".ipv4", w, out.ipv4);
  addrField(b.ipv6(), path + ".ipv6", w, out.ipv6);
  if (!b.mac().empty()) {
    std::array<uint8_t, 6> m;
    if (parseMac(b.mac(), m)) out.mac = m;
    else w.add(path + ".mac", absl::StrCat("'", b.mac(), "' is not a MAC address (aa:bb:cc:dd:ee:ff)"));
  }
  if (b.port() > 65535) w.add(path + ".port", absl::StrCat(b.port(), " is not a port"));
  out.port = uint16_t(b.port());
  out.weight = b.has_weight() ? b.weight() : 1;
  switch (b.state()) {
    case v1::LB_BACKEND_ACTIVE: out.state = rules::LbBackendState::kActive; break;
    case v1::LB_BACKEND_DRAINING: out.state = rules::LbBackendState::kDraining; break;
    case v1::LB_BACKEND_DOWN: out.state = rules::LbBackendState::kDown; break;
    default: w.add(path + ".state", absl::StrCat(int(b.state()), " is not a backend state"));
  }
}

}  // namespace

void lbToModel(const v1::LbConfig& cfg, rules::LbModel* out, rules::ConfigErrorList& errors) {
  for (int i = 0; i < cfg.services_size(); ++i) {
    const v1::LbServiceConfig& s = cfg.services(i);
    const std::string base = absl::StrCat("lb.services[", i, "]");
    Where w{errors, s.id(), i};
    rules::LbService m;
    m.id = s.id();
    for (int k = 0; k < s.dst_size(); ++k) {
      auto p = rules::parsePrefix(s.dst(k));
      if (p.ok()) m.dst.push_back(*p);
      else w.add(absl::StrCat(base, ".dst[", k, "]"), std::string(p.status().message()));
    }
    if (!s.protocol().empty()) {
      auto p = rules::parseProtocol(s.protocol());
      if (p.ok()) m.protocol = *p;
      else w.add(base + ".protocol", std::string(p.status().message()));
    }
    if (!s.dst_ports().empty()) {
      auto r = rules::parsePortRange(s.dst_ports());
      if (r.ok()) m.dst_ports = *r;
      else w.add(base + ".dst_ports", std::string(r.status().message()));
    }
    if (s.has_vlan()) {
      if (s.vlan() > 4095) w.add(base + ".vlan", absl::StrCat(s.vlan(), " is out of range [0, 4095]"));
      m.vlan = uint16_t(s.vlan());
    }
    for (int k = 0; k < s.key_size(); ++k) {
      const v1::LbKeyField& f = s.key(k);
      const std::string fp = absl::StrCat(base, ".key[", k, "]");
      rules::LbKeyField kf;
      if (!fieldKind(f.field(), kf.kind)) {
        w.add(fp + ".field", absl::StrCat("unknown field '", f.field(),
                                          "' (ip.src, ip.dst, l4.sport, l4.dport, ip.proto, vlan, "
                                          "ipv6.flowlabel, dns.qname, tunnel_id, raw)"));
        continue;
      }
      if (kf.kind == rules::LbFieldKind::kRaw) {
        if (!anchorOf(f.anchor(), kf.anchor)) {
          w.add(fp + ".anchor", absl::StrCat("unknown anchor '", f.anchor(),
                                             "' (l2, l3, l4, payload)"));
        }
      } else if (!f.anchor().empty()) {
        w.add(fp + ".anchor", "an anchor only applies to raw fields");
      }
      kf.offset = f.offset();
      kf.length = f.length();
      if (!f.mask().empty() && !parseHex(f.mask(), kf.mask)) {
        w.add(fp + ".mask", absl::StrCat("'", f.mask(), "' is not hex bytes"));
      }
      m.key.push_back(std::move(kf));
    }
    m.fallback = s.fallback() == v1::LB_FALLBACK_DROP ? rules::LbFallback::kDrop
                                                      : rules::LbFallback::kHash5Tuple;
    if (!v1::LbFallback_IsValid(s.fallback())) w.add(base + ".fallback", "unknown fallback");
    switch (s.mode()) {
      case v1::LB_MODE_L2: m.mode = rules::LbMode::kL2; break;
      case v1::LB_MODE_NAT: m.mode = rules::LbMode::kNat; break;
      case v1::LB_MODE_IPIP: m.mode = rules::LbMode::kIpip; break;
      default: w.add(base + ".mode", absl::StrCat(int(s.mode()), " is not a mode"));
    }
    switch (s.orphans()) {
      case v1::LB_ORPHANS_REHASH: m.orphans = rules::LbOrphanPolicy::kRehash; break;
      case v1::LB_ORPHANS_RESET: m.orphans = rules::LbOrphanPolicy::kReset; break;
      case v1::LB_ORPHANS_REHASH_OR_RESET: m.orphans = rules::LbOrphanPolicy::kRehashOrReset; break;
      default: w.add(base + ".orphans", absl::StrCat(int(s.orphans()), " is not a policy"));
    }
    addrField(s.tunnel_src_v4(), base + ".tunnel_src_v4", w, m.tunnel_src_v4);
    addrField(s.tunnel_src_v6(), base + ".tunnel_src_v6", w, m.tunnel_src_v6);
    m.table_size = s.table_size() ? s.table_size() : rules::kLbDefaultTableSize;
    m.drain_remove_idle = s.drain_remove_idle();
    m.drain_timeout_s = s.drain_timeout_seconds();
    for (int k = 0; k < s.backends_size(); ++k) {
      Where bw{errors, absl::StrCat(s.id(), "/", s.backends(k).id()), i};
      rules::LbBackend b;
      backendToModel(s.backends(k), absl::StrCat(base, ".backends[", k, "]"), bw, b);
      m.backends.push_back(std::move(b));
    }
    out->services.push_back(std::move(m));
  }
}

}  // namespace dpu::ctl
