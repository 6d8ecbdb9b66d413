#include "rules/compile/lb_compiler.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"

namespace dpu::rules {

uint32_t lbFieldWidth(LbFieldKind k) {
  switch (k) {
    case LbFieldKind::kIpSrc:
    case LbFieldKind::kIpDst: return 16;
    case LbFieldKind::kL4Sport:
    case LbFieldKind::kL4Dport:
    case LbFieldKind::kVlan: return 2;
    case LbFieldKind::kIpProto: return 1;
    case LbFieldKind::kIpv6FlowLabel: return 4;
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

void checkBackends(const LbService& s, Ctx& c, bool fam4, bool fam6) {
  if (s.backends.size() > kLbMaxBackends) {
    c.add("backends", absl::StrCat(s.backends.size(), " backends; at most ", kLbMaxBackends));
    return;
  }
  std::set<std::string> ids;
  for (size_t j = 0; j < s.backends.size(); ++j) {
    const LbBackend& b = s.backends[j];
    std::string bp = absl::StrCat("backends[", j, "]");
    std::string rule = absl::StrCat(s.id, "/", b.id);
    if (b.id.empty()) {
      c.add(bp + ".id", "empty backend id", rule);
      continue;
    }
    if (!ids.insert(b.id).second) c.add(bp + ".id", "duplicate backend id in the service", rule);
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
