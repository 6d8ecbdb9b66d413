#include "rules/compile/lb_compiler.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "rules/compile/firewall_parsers.h"

namespace dpu::rules {

uint32_t lbFieldWidth(LbFieldKind k) {
  switch (k) {
    case LbFieldKind::kIpSrc:
    case LbFieldKind::kIpDst: return 16;
    case LbFieldKind::kL4Sport:
    case LbFieldKind::kL4Dport:
    case LbFieldKind::kVlan: return 2;
    case LbFieldKind::kIpProto: return 1;
    case LbFieldKind::kIpv6FlowLabel:
    case LbFieldKind::kTunnelId: return 4;
    case LbFieldKind::kDnsQname:
    case LbFieldKind::kRaw: return 0;
  }
  return 0;
}

namespace {

struct Ctx {
  ConfigErrorList& errors;
  std::string svc;
  int index;
  std::string path;  // "lb.services[i]"
  void add(const std::string& field, const std::string& reason, const std::string& rule = "") {
    ConfigError e;
    e.section = "lb";
    e.rule = rule.empty() ? svc : rule;
    e.index = index;
    e.field = absl::StrCat(path, field.empty() ? "" : ".", field);
    e.reason = reason;
    errors.push_back(std::move(e));
  }
};

bool hostBitsClear(const IpPrefix& p) {
  uint32_t bits = p.v6 ? 128 : 32;
  for (uint32_t b = p.len; b < bits; ++b) {
    if (p.addr[b / 8] & (0x80 >> (b % 8))) return false;
  }
  return true;
}

void checkKey(const LbService& s, Ctx& c) {
  if (s.key.size() > kLbMaxKeyFields) {
    c.add("key", absl::StrCat(s.key.size(), " fields; at most ", kLbMaxKeyFields));
    return;
  }
  int qnames = 0;
  for (size_t i = 0; i < s.key.size(); ++i) {
    const LbKeyField& f = s.key[i];
    std::string fp = absl::StrCat("key[", i, "]");
    uint32_t width = lbFieldWidth(f.kind);
    if (f.kind == LbFieldKind::kRaw) {
      if (f.length == 0) {
        c.add(fp + ".length", "0: a raw field needs 1 to 16 bytes");
        continue;
      }
      if (f.length > kLbMaxRawLength) {
        c.add(fp + ".length", absl::StrCat(f.length, " bytes; at most ", kLbMaxRawLength));
        continue;
      }
      if (uint64_t(f.offset) + f.length > kLbMaxPacket) {
        c.add(fp + ".offset", absl::StrCat("offset ", f.offset, " + length ", f.length,
                                           " is past the largest packet (", kLbMaxPacket,
                                           " bytes) from anchor ", lbAnchorName(f.anchor)));
        continue;
      }
      width = f.length;
    } else {
      if (f.offset != 0 || f.length != 0) {
        c.add(fp, absl::StrCat("offset and length only apply to raw fields, not ",
                               lbFieldName(f.kind)));
        continue;
      }
      if (f.kind == LbFieldKind::kDnsQname && ++qnames > 1) {
        c.add(fp, "dns.qname may appear once in a key");
        continue;
      }
    }
    if (!f.mask.empty()) {
      if (f.kind == LbFieldKind::kDnsQname) {
        c.add(fp + ".mask", "dns.qname cannot be masked");
      } else if (f.mask.size() != width) {
        c.add(fp + ".mask", absl::StrCat(f.mask.size(), " bytes; the field ",
                                         lbFieldName(f.kind), " is ", width, " bytes"));
      }
    }
  }
}

std::string macText(const std::array<uint8_t, 6>& m) {
  std::string t;
  for (int i = 0; i < 6; ++i) absl::StrAppend(&t, i ? ":" : "", absl::Hex(m[i], absl::kZeroPad2));
  return t;
}

// Why a backend MAC cannot be a destination ("" = it can): frames to it would reach every
// station of the segment, or none.
const char* badMac(const std::array<uint8_t, 6>& m) {
  bool zero = true, ones = true;
  for (uint8_t b : m) {
    zero = zero && b == 0;
    ones = ones && b == 0xff;
  }
  if (zero) return "the all-zero address";
  if (ones) return "the broadcast address";
  if (m[0] & 1) return "a multicast address (group bit set)";
  return "";
}

// Why a backend address cannot be one host ("" = it can).
template <size_t N>
const char* badAddress(const std::array<uint8_t, N>& a) {
  bool zero = true, ones = true;
  for (uint8_t b : a) {
    zero = zero && b == 0;
    ones = ones && b == 0xff;
  }
  if (zero) return "the unspecified address";
  if (N == 4 && ones) return "the broadcast address";
  if (N == 4 ? (a[0] & 0xf0) == 0xe0 : a[0] == 0xff) return "a multicast address";
  return "";
}

template <size_t N>
std::string addrText(const std::array<uint8_t, N>& a) {
  IpPrefix p;
  std::copy(a.begin(), a.end(), p.addr.begin());
  p.v6 = N == 16;
  p.len = N * 8;
  return formatPrefix(p, true);
}

// The destination of the service (one host address) equal to `a` (-1 = none).
template <size_t N>
int vipEqual(const LbService& s, const std::array<uint8_t, N>& a) {
  for (size_t i = 0; i < s.dst.size(); ++i) {
    const IpPrefix& p = s.dst[i];
    if (p.v6 == (N == 16) && p.len == N * 8 && std::equal(a.begin(), a.end(), p.addr.begin())) {
      return int(i);
    }
  }
  return -1;
}

// A backend address (ipv4 / ipv6) that can receive the service's traffic: one host, and in
// mode nat not the VIP itself (a dst host address of the service).
template <size_t N>
void checkBackendAddress(const LbService& s, const std::array<uint8_t, N>& a,
                         const std::string& field, const std::string& rule, Ctx& c) {
  if (const char* why = badAddress(a); *why) {
    c.add(field, absl::StrCat(addrText(a), " is ", why, ", not a backend"), rule);
  } else if (int d = vipEqual(s, a); s.mode == LbMode::kNat && d >= 0) {
    c.add(field, absl::StrCat(addrText(a), " is the service's own destination dst[", d,
                              "] (the VIP): mode nat would send the flow to the VIP untranslated"),
          rule);
  }
}

void checkBackends(const LbService& s, Ctx& c, bool fam4, bool fam6) {
  if (s.backends.size() > kLbMaxBackends) {
    c.add("backends", absl::StrCat(s.backends.size(), " backends; at most ", kLbMaxBackends));
    return;
  }
  std::set<std::string> ids;
  std::map<std::array<uint8_t, 6>, size_t> macs;  // MAC -> first backend with it
  for (size_t j = 0; j < s.backends.size(); ++j) {
    const LbBackend& b = s.backends[j];
    std::string bp = absl::StrCat("backends[", j, "]");
    std::string rule = absl::StrCat(s.id, "/", b.id);
    if (b.id.empty()) {
      c.add(bp + ".id", "empty backend id", rule);
      continue;
    }
    if (!ids.insert(b.id).second) c.add(bp + ".id", "duplicate backend id in the service", rule);
    // '/' separates service and backend in "service/backend" names (errors, events).
    for (char ch : b.id) {
      if (ch == '/' || ch == ' ' || (static_cast<unsigned char>(ch) < 0x20) || ch == 0x7f) {
        c.add(bp + ".id",
              absl::StrCat("'", absl::CHexEscape(b.id), "': a backend id has no '/', space or "
                           "control character"),
              rule);
        break;
      }
    }
    if (b.mac) {
      if (const char* why = badMac(*b.mac); *why) {
        c.add(bp + ".mac", absl::StrCat(macText(*b.mac), " is ", why, ", not a backend"), rule);
      } else if (auto [it, fresh] = macs.emplace(*b.mac, j); !fresh && s.mode == LbMode::kL2) {
        // (nat / ipip: the MAC is the next hop, which several backends may share)
        c.add(bp + ".mac", absl::StrCat(macText(*b.mac), " is the MAC of backends[", it->second,
                                        "] ('", s.backends[it->second].id, "') too"),
              rule);
      }
    }
    if (b.ipv4) checkBackendAddress(s, *b.ipv4, bp + ".ipv4", rule, c);
    if (b.ipv6) checkBackendAddress(s, *b.ipv6, bp + ".ipv6", rule, c);
    if (b.weight > 65535) {
      c.add(bp + ".weight", absl::StrCat(b.weight, " is out of range [0, 65535]"), rule);
    }
    switch (s.mode) {
      case LbMode::kL2:
        if (!b.mac) c.add(bp + ".mac", "mode l2 needs the backend's MAC address", rule);
        break;
      case LbMode::kNat:
      case LbMode::kIpip:
        if (fam4 && !b.ipv4) {
          c.add(bp + ".ipv4", absl::StrCat("mode ", lbModeName(s.mode),
                                           " with IPv4 destinations needs an IPv4 address"),
                rule);
        }
        if (fam6 && !b.ipv6) {
          c.add(bp + ".ipv6", absl::StrCat("mode ", lbModeName(s.mode),
                                           " with IPv6 destinations needs an IPv6 address"),
                rule);
        }
        break;
    }
    if (b.port != 0 && s.mode != LbMode::kNat) {
      c.add(bp + ".port", "a backend port only applies to mode nat", rule);
    }
  }
}

// A TCP connection's first packet (the SYN) has no payload: a key field read from the
// payload (raw at anchor payload, dns.qname) is missing from it, and with fallback drop every
// connection to the service would die on its SYN. Refused for services that carry TCP
// (protocol tcp, or no protocol given).
void checkSynKey(const LbService& s, Ctx& c) {
  if (s.fallback != LbFallback::kDrop || (s.protocol && *s.protocol != 6)) return;
  for (size_t i = 0; i < s.key.size(); ++i) {
    const LbKeyField& f = s.key[i];
    const bool payload = f.kind == LbFieldKind::kDnsQname ||
                         (f.kind == LbFieldKind::kRaw && f.anchor == LbAnchor::kPayload);
    if (!payload) continue;
    c.add(absl::StrCat("key[", i, "]"),
          absl::StrCat(f.kind == LbFieldKind::kDnsQname ? "dns.qname" : "a raw payload field",
                       " is never in a TCP SYN (no payload), and with fallback "
                       "LB_FALLBACK_DROP every TCP connection ",
                       s.protocol ? "to the service" : "(the service has no protocol: any)",
                       " would be dropped on its SYN: set protocol udp, or fallback "
                       "LB_FALLBACK_HASH_5TUPLE"));
    return;
  }
}

void checkService(const LbService& s, int index, std::set<std::string>& ids,
                  ConfigErrorList& errors) {
  Ctx c{errors, s.id, index, absl::StrCat("lb.services[", index, "]")};
  if (s.id.empty()) c.add("id", "empty service id");
  else if (!ids.insert(s.id).second) c.add("id", "duplicate service id");
  bool fam4 = false, fam6 = false;
  if (s.dst.empty()) c.add("dst", "a service needs at least one destination prefix");
  for (size_t i = 0; i < s.dst.size(); ++i) {
    const IpPrefix& p = s.dst[i];
    (p.v6 ? fam6 : fam4) = true;
    if (p.len > (p.v6 ? 128 : 32)) {
      c.add(absl::StrCat("dst[", i, "]"), absl::StrCat("prefix length ", p.len, " is too long"));
    } else if (!hostBitsClear(p)) {
      c.add(absl::StrCat("dst[", i, "]"), "host bits set after the prefix length");
    }
  }
  if (s.dst_ports) {
    if (s.dst_ports->lo > s.dst_ports->hi) {
      c.add("dst_ports", absl::StrCat("range ", s.dst_ports->lo, "-", s.dst_ports->hi,
                                      " is empty"));
    }
    if (s.protocol && *s.protocol != 6 && *s.protocol != 17 && *s.protocol != 132) {
      c.add("dst_ports", absl::StrCat("ports only apply to tcp, udp and sctp, not protocol ",
                                      *s.protocol));
    }
  }
  if (s.vlan && *s.vlan > 4095) c.add("vlan", absl::StrCat(*s.vlan, " is out of range [0, 4095]"));
  if (!isPrime(s.table_size) || s.table_size < kLbMinTableSize ||
      s.table_size > kLbMaxTableSize) {
    c.add("table_size", absl::StrCat(s.table_size, " is not a prime in [", kLbMinTableSize, ", ",
                                     kLbMaxTableSize, "]"));
  } else if (uint64_t(s.table_size) < 10ull * s.backends.size()) {
    c.add("table_size", absl::StrCat(s.table_size, " slots for ", s.backends.size(),
                                     " backends; Maglev needs at least 10 slots per backend"));
  }
  if (s.mode == LbMode::kIpip) {
    if (fam4 && !s.tunnel_src_v4) {
      c.add("tunnel_src_v4", "mode ipip with IPv4 destinations needs an IPv4 tunnel source");
    }
    if (fam6 && !s.tunnel_src_v6) {
      c.add("tunnel_src_v6", "mode ipip with IPv6 destinations needs an IPv6 tunnel source");
    }
  }
  checkKey(s, c);
  checkSynKey(s, c);
  checkBackends(s, c, fam4, fam6);
}

uint64_t backendIdentity(const std::string& service, const LbBackend& b) {
  std::string k = service;
  k.push_back('\0');
  k += b.id;
  k.push_back('\0');
  if (b.ipv4) k.append(reinterpret_cast<const char*>(b.ipv4->data()), 4);
  k.push_back('\0');
  if (b.ipv6) k.append(reinterpret_cast<const char*>(b.ipv6->data()), 16);
  k.push_back('\0');
  if (b.mac) k.append(reinterpret_cast<const char*>(b.mac->data()), 6);
  k.push_back(char(b.port >> 8));
  k.push_back(char(b.port));
  uint64_t h = lbHash64(k.data(), k.size(), kLbKeySeed);
  return h == 0 ? 1 : h;  // 0 means "no backend" in the dataplane
}

}  // namespace

void validateLb(const LbModel& model, ConfigErrorList& errors) {
  std::set<std::string> ids;
  for (size_t i = 0; i < model.services.size(); ++i) {
    checkService(model.services[i], int(i), ids, errors);
  }
}

std::shared_ptr<const CompiledLbService> buildLbService(const LbService& s) {
  auto out = std::make_shared<CompiledLbService>();
  out->model = s;
  out->identity = lbHash64(s.id.data(), s.id.size(), kLbKeySeed);
  if (out->identity == 0) out->identity = 1;
  out->dst = s.dst;
  if (s.protocol) {
    out->any_proto = false;
    out->proto = *s.protocol;
  }
  if (s.dst_ports) {
    out->any_port = false;
    out->port_lo = s.dst_ports->lo;
    out->port_hi = s.dst_ports->hi;
  }
  if (s.vlan) {
    out->any_vlan = false;
    out->vlan = *s.vlan;
  }
  for (const LbKeyField& f : s.key) {
    CompiledLbField cf;
    cf.kind = f.kind;
    cf.anchor = f.anchor;
    cf.offset = uint16_t(f.offset);
    cf.length = uint8_t(f.kind == LbFieldKind::kRaw ? f.length : lbFieldWidth(f.kind));
    if (!f.mask.empty()) {
      cf.masked = true;
      std::memcpy(cf.mask, f.mask.data(), f.mask.size());
    }
    out->fields.push_back(cf);
  }
  out->fallback = s.fallback;
  out->mode = s.mode;
  out->orphans = s.orphans;
  if (s.tunnel_src_v4) {
    out->has_tun_v4 = true;
    std::memcpy(out->tun_v4, s.tunnel_src_v4->data(), 4);
  }
  if (s.tunnel_src_v6) {
    out->has_tun_v6 = true;
    std::memcpy(out->tun_v6, s.tunnel_src_v6->data(), 16);
  }
  std::vector<std::string> ids;
  std::vector<uint32_t> weights;
  for (const LbBackend& b : s.backends) {
    CompiledLbBackend cb;
    cb.id = b.id;
    cb.identity = backendIdentity(s.id, b);
    if (b.ipv4) {
      cb.has_v4 = true;
      std::memcpy(cb.v4, b.ipv4->data(), 4);
    }
    if (b.ipv6) {
      cb.has_v6 = true;
      std::memcpy(cb.v6, b.ipv6->data(), 16);
    }
    if (b.mac) {
      cb.has_mac = true;
      std::memcpy(cb.mac, b.mac->data(), 6);
    }
    cb.port = b.port;
    cb.weight = b.weight;
    cb.state = b.state;
    out->backends.push_back(std::move(cb));
    ids.push_back(b.id);
    weights.push_back(b.state == LbBackendState::kActive ? b.weight : 0);
  }
  out->table_size = s.table_size;
  out->table = maglevBuild(ids, weights, s.table_size);
  return out;
}

absl::StatusOr<std::shared_ptr<const CompiledLb>> compileLb(const LbModel& model,
                                                            ConfigErrorList* errors,
                                                            const CompiledLb* previous) {
  ConfigErrorList local;
  ConfigErrorList& errs = errors ? *errors : local;
  size_t before = errs.size();
  validateLb(model, errs);
  if (errs.size() != before) {
    return errorsToStatus(ConfigErrorList(errs.begin() + before, errs.end()));
  }
  auto out = std::make_shared<CompiledLb>();
  for (const LbService& s : model.services) {
    std::shared_ptr<const CompiledLbService> reused;
    if (previous) {
      for (const auto& p : previous->services) {
        if (p->model == s) {
          reused = p;
          break;
        }
      }
    }
    out->services.push_back(reused ? reused : buildLbService(s));
  }
  return std::shared_ptr<const CompiledLb>(std::move(out));
}

}  // namespace dpu::rules
