// Compiled load balancer: per service the match, the key recipe, the backends and the Maglev
// lookup table (built on the control side by rules/compile/lb_compiler). Immutable once
// built; the dataplane reads it through the Snapshot. Each service is its own shared object so
// a change to one service leaves the others' pointers (and tables) as they were.
//
// Key extraction and the table lookup are inline: they run once per new flow on the workers.
// Extraction reads only inside the bounds of the view it is given and never allocates.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "rules/compiled/lb_hash.h"
#include "rules/model/lb.h"

namespace dpu::rules {

// What key extraction needs to know about a frame: filled by the dataplane from its parsed
// PacketMeta (or by tests by hand). Offsets are from the start of the frame.
struct LbPacket {
  const uint8_t* data = nullptr;
  uint32_t len = 0;            // bytes readable at data
  uint8_t l3 = 0;              // 0 none, 4 IPv4, 6 IPv6
  bool has_l4 = false;         // transport header parsed
  uint8_t proto = 0;           // IPPROTO_*
  uint8_t vlan_count = 0;
  uint16_t vlan = 0;           // outer VID
  uint8_t tunnel_depth = 0;    // encapsulation layers around the packet (0: not tunneled)
  uint32_t tunnel_id = 0;      // VNI / GRE key of the innermost layer with one
  uint16_t l3_off = 0;
  uint16_t l3_len = 0;         // IP total length (v4) / 40 + payload length (v6)
  uint16_t l4_off = 0;
  uint16_t payload_off = 0;
  uint16_t payload_len = 0;
  uint8_t src[16] = {0};       // IPv4 in bytes 0..3, rest zero
  uint8_t dst[16] = {0};
  uint16_t sport = 0;          // host order
  uint16_t dport = 0;
};

// Largest key a recipe can produce: kLbMaxKeyFields fields of at most 16 bytes, one of which
// may be a DNS name (at most 255 bytes in wire format).
constexpr uint32_t kLbMaxKeyBytes = kLbMaxKeyFields * kLbMaxRawLength + 256;

struct CompiledLbField {
  LbFieldKind kind = LbFieldKind::kRaw;
  LbAnchor anchor = LbAnchor::kL2;
  uint16_t offset = 0;
  uint8_t length = 0;   // bytes this field contributes (0 for dns.qname: variable)
  bool masked = false;
  uint8_t mask[16] = {0};
};

namespace lb_detail {

inline bool hasPorts(const LbPacket& p) {
  return p.has_l4 && (p.proto == 6 || p.proto == 17 || p.proto == 132);
}

// Bytes [off, off+n) below `end` (and inside the view)?
inline bool inside(const LbPacket& p, uint32_t off, uint32_t n, uint32_t end) {
  if (end > p.len) end = p.len;
  return off <= end && n <= end - off;
}

inline uint32_t ipEnd(const LbPacket& p) { return uint32_t(p.l3_off) + p.l3_len; }

// The first question's name of a DNS message at [off, end): writes it lower-cased in wire
// format (labels, terminating zero) to out; returns its length, 0 when there is none
// (short header, no question, compression pointer, bad label, longer than 255).
inline uint32_t dnsQname(const LbPacket& p, uint32_t off, uint32_t end, uint8_t* out) {
  if (end > p.len) end = p.len;
  if (off > end || end - off < 12 + 1) return 0;
  const uint8_t* d = p.data + off;
  uint16_t qd = uint16_t(d[4] << 8 | d[5]);
  if (qd == 0) return 0;
  uint32_t i = off + 12, n = 0;
  while (true) {
    if (i >= end) return 0;
    uint8_t l = p.data[i];
    if (l == 0) {
      out[n++] = 0;
      return n;
    }
    if (l > 63) return 0;  // compression pointer or reserved label type
    if (n + 1 + l + 1 > 255 || l >= end - i) return 0;
    out[n++] = l;
    for (uint32_t k = 1; k <= l; ++k) {
      uint8_t c = p.data[i + k];
      out[n++] = (c >= 'A' && c <= 'Z') ? uint8_t(c + 32) : c;
    }
    i += 1 + l;
  }
}

inline void putBe16(uint8_t* o, uint16_t v) {
  o[0] = uint8_t(v >> 8);
  o[1] = uint8_t(v);
}

}  // namespace lb_detail

// Appends field f of packet p to out; returns the bytes written, or -1 when the field is
// missing from the packet. `out` has room for 255 bytes.
inline int lbExtractField(const CompiledLbField& f, const LbPacket& p, uint8_t* out) {
  using namespace lb_detail;
  uint32_t n = 0;
  switch (f.kind) {
    case LbFieldKind::kIpSrc:
      if (p.l3 == 0) return -1;
      std::memcpy(out, p.src, 16);
      n = 16;
      break;
    case LbFieldKind::kIpDst:
      if (p.l3 == 0) return -1;
      std::memcpy(out, p.dst, 16);
      n = 16;
      break;
    case LbFieldKind::kL4Sport:
      if (!hasPorts(p)) return -1;
      putBe16(out, p.sport);
      n = 2;
      break;
    case LbFieldKind::kL4Dport:
      if (!hasPorts(p)) return -1;
      putBe16(out, p.dport);
      n = 2;
      break;
    case LbFieldKind::kIpProto:
      if (p.l3 == 0) return -1;
      out[0] = p.proto;
      n = 1;
      break;
    case LbFieldKind::kVlan:
      if (p.vlan_count == 0) return -1;
      putBe16(out, p.vlan);
      n = 2;
      break;
    case LbFieldKind::kTunnelId:
      if (p.tunnel_depth == 0) return -1;
      putBe16(out, static_cast<uint16_t>(p.tunnel_id >> 16));
      putBe16(out + 2, static_cast<uint16_t>(p.tunnel_id));
      n = 4;
      break;
    case LbFieldKind::kIpv6FlowLabel: {
      if (p.l3 != 6 || !inside(p, p.l3_off, 4, p.len)) return -1;
      const uint8_t* h = p.data + p.l3_off;
      out[0] = 0;
      out[1] = h[1] & 0x0f;
      out[2] = h[2];
      out[3] = h[3];
      n = 4;
      break;
    }
    case LbFieldKind::kDnsQname: {
      if (!p.has_l4 || (p.proto != 17 && p.proto != 6)) return -1;
      uint32_t off = p.payload_off, end = uint32_t(p.payload_off) + p.payload_len;
      if (p.proto == 6) off += 2;  // DNS over TCP: two-byte length prefix
      n = dnsQname(p, off, end, out);
      if (n == 0) return -1;
      return int(n);  // never masked
    }
    case LbFieldKind::kRaw: {
      uint32_t base, end;
      switch (f.anchor) {
        case LbAnchor::kL2:
          base = 0;
          end = p.len;
          break;
        case LbAnchor::kL3:
          if (p.l3 == 0) return -1;
          base = p.l3_off;
          end = ipEnd(p);
          break;
        case LbAnchor::kL4:
          if (!p.has_l4) return -1;
          base = p.l4_off;
          end = ipEnd(p);
          break;
        case LbAnchor::kPayload:
        default:
          if (!p.has_l4) return -1;
          base = p.payload_off;
          end = uint32_t(p.payload_off) + p.payload_len;
          break;
      }
      uint32_t off = base + f.offset;
      if (!inside(p, off, f.length, end)) return -1;
      std::memcpy(out, p.data + off, f.length);
      n = f.length;
      break;
    }
  }
  if (f.masked) {
    for (uint32_t i = 0; i < n; ++i) out[i] &= f.mask[i];
  }
  return int(n);
}

// The 5-tuple key (the fallback, and the key of a service without fields).
inline uint64_t lbHash5Tuple(const LbPacket& p) {
  uint8_t k[37];
  std::memcpy(k, p.src, 16);
  std::memcpy(k + 16, p.dst, 16);
  lb_detail::putBe16(k + 32, p.sport);
  lb_detail::putBe16(k + 34, p.dport);
  k[36] = p.proto;
  return lbHash64(k, sizeof(k), kLbKeySeed);
}

struct CompiledLbBackend {
  std::string id;
  // Identity for pinned flows and counters: hash of the service id, the backend id and
  // everything that says where packets go (addresses, MAC, port). A flow whose backend no longer has this identity in the
  // service lost its backend (removed, or re-addressed).
  uint64_t identity = 0;
  bool has_v4 = false, has_v6 = false, has_mac = false;
  uint8_t v4[4] = {0};
  uint8_t v6[16] = {0};
  uint8_t mac[6] = {0};
  uint16_t port = 0;
  uint32_t weight = 0;
  LbBackendState state = LbBackendState::kActive;
  // Still a valid target for flows pinned to it (active or draining).
  bool keepsFlows() const { return state != LbBackendState::kDown; }
};

constexpr uint16_t kLbNoBackend = 0xffff;

struct CompiledLbService {
  LbService model;           // what it was built from (reuse, listing)
  uint64_t identity = 0;     // hash of the id
  std::vector<IpPrefix> dst;
  bool any_proto = true;
  uint8_t proto = 0;
  bool any_port = true;
  uint16_t port_lo = 0, port_hi = 65535;
  bool any_vlan = true;
  uint16_t vlan = 0;
  std::vector<CompiledLbField> fields;  // empty = 5-tuple
  LbFallback fallback = LbFallback::kHash5Tuple;
  LbMode mode = LbMode::kL2;
  LbOrphanPolicy orphans = LbOrphanPolicy::kRehash;
  bool has_tun_v4 = false, has_tun_v6 = false;
  uint8_t tun_v4[4] = {0};
  uint8_t tun_v6[16] = {0};
  std::vector<CompiledLbBackend> backends;
  uint32_t table_size = kLbDefaultTableSize;
  std::vector<uint16_t> table;  // backend index per slot; empty when no backend is in it

  bool matches(const LbPacket& p) const {
    if (p.l3 == 0) return false;
    if (!any_proto && p.proto != proto) return false;
    if (!any_vlan && (p.vlan_count == 0 ? 0 : p.vlan) != vlan) return false;
    if (!any_port) {
      if (!lb_detail::hasPorts(p) || p.dport < port_lo || p.dport > port_hi) return false;
    }
    for (const IpPrefix& pre : dst) {
      if (pre.v6 != (p.l3 == 6)) continue;
      uint32_t full = pre.len / 8, rest = pre.len % 8;
      if (std::memcmp(pre.addr.data(), p.dst, full) != 0) continue;
      if (rest) {
        uint8_t m = uint8_t(0xff << (8 - rest));
        if ((pre.addr[full] & m) != (p.dst[full] & m)) continue;
      }
      return true;
    }
    return false;
  }

  // Hash of the packet's key. *missing = a field was missing (the 5-tuple was hashed, or,
  // with fallback drop, the result is meaningless).
  uint64_t keyHash(const LbPacket& p, bool* missing) const {
    *missing = false;
    if (fields.empty()) return lbHash5Tuple(p);
    uint8_t buf[kLbMaxKeyBytes];
    uint32_t n = 0;
    for (const CompiledLbField& f : fields) {
      int w = lbExtractField(f, p, buf + n);
      if (w < 0) {
        *missing = true;
        return lbHash5Tuple(p);
      }
      n += uint32_t(w);
    }
    return lbHash64(buf, n, kLbKeySeed);
  }

  // Backend for a key hash; kLbNoBackend when no backend is in the table.
  uint16_t pick(uint64_t hash) const {
    if (table.empty()) return kLbNoBackend;
    return table[lbReduce(hash, table_size)];
  }

  // Index of the backend with `identity` (hint first), or -1.
  int findBackend(uint64_t identity, uint32_t hint) const {
    if (hint < backends.size() && backends[hint].identity == identity) return int(hint);
    for (size_t i = 0; i < backends.size(); ++i) {
      if (backends[i].identity == identity) return int(i);
    }
    return -1;
  }
};

struct CompiledLb {
  std::vector<std::shared_ptr<const CompiledLbService>> services;

  // First service matching p, and its index; nullptr when none.
  const CompiledLbService* match(const LbPacket& p, uint32_t* index) const {
    for (size_t i = 0; i < services.size(); ++i) {
      if (services[i]->matches(p)) {
        *index = uint32_t(i);
        return services[i].get();
      }
    }
    return nullptr;
  }
  int findService(uint64_t identity, uint32_t hint) const {
    if (hint < services.size() && services[hint]->identity == identity) return int(hint);
    for (size_t i = 0; i < services.size(); ++i) {
      if (services[i]->identity == identity) return int(i);
    }
    return -1;
  }
};

// Maglev (Eisenbud et al., NSDI'16) with weights. Backend i's preference list is
// offset_i + j * skip_i (mod m) with offset = h(id) mod m, skip = h'(id) mod (m - 1) + 1
// (m prime, so every list is a permutation). Backends take turns filling their next free
// preferred slot; with weights, backend i gets weight_i / max_weight turns per round
// (accumulated), so equal weights reproduce the paper's round robin exactly. Weight 0 = not
// in the table. Backends take their turns in the order of their ids, so the table does not
// depend on the order they are listed in. Returns m backend indexes, or an empty table when every weight is 0.
std::vector<uint16_t> maglevBuild(const std::vector<std::string>& ids,
                                  const std::vector<uint32_t>& weights, uint32_t m);
// The paper's pseudocode as written (whole permutation table first, then the population
// loop), with the same weighted turns: the reference the tests and the benchmark compare
// maglevBuild with. Memory ids.size() * m * 4 bytes.
std::vector<uint16_t> maglevBuildReference(const std::vector<std::string>& ids,
                                           const std::vector<uint32_t>& weights, uint32_t m);

bool isPrime(uint32_t n);

}  // namespace dpu::rules
