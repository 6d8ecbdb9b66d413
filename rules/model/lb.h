// Load balancer (Maglev over user-defined key fields) as the control plane fills it (from
// ApplianceConfig.lb). Plain data; validation and the Maglev tables are built by
// rules/compile/lb_compiler.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rules/model/firewall.h"  // IpPrefix, PortRange

namespace dpu::rules {

// One field of a hash key. Named fields have a fixed width (bytes hashed):
//   ip.src, ip.dst      16 (an IPv4 address in bytes 0..3, the rest zero)
//   l4.sport, l4.dport   2 (TCP / UDP / SCTP only)
//   ip.proto             1
//   vlan                 2 (outer VID; missing on untagged frames)
//   ipv6.flowlabel       4 (IPv6 only; 20 bits, big-endian)
//   dns.qname          var (the first question's name, lower-cased, wire format; UDP or TCP
//                           with a DNS header and one question)
//   tunnel_id            4 (VNI / GRE key of the innermost layer with one, big-endian, 0 in a
//                           tunnel without an id; missing outside tunnels; docs/tunnels.md)
// Raw fields: `length` (1..16) bytes at `offset` from the anchor:
//   l2       start of the frame
//   l3       start of the IP header (bytes up to the end of the IP datagram)
//   l4       start of the transport header (needs a parsed TCP/UDP/ICMP/SCTP header)
//   payload  start of the transport payload (bytes up to the end of the payload)
// A field that is not in the packet (too short, wrong protocol) is "missing": the service's
// fallback decides. A mask (same length as the field; not for dns.qname) is ANDed before
// hashing, e.g. ip.src with ff.ff.ff.00 keeps a /24 on one backend.
enum class LbFieldKind : uint8_t {
  kIpSrc,
  kIpDst,
  kL4Sport,
  kL4Dport,
  kIpProto,
  kVlan,
  kIpv6FlowLabel,
  kDnsQname,
  kRaw,
  kTunnelId,
};
enum class LbAnchor : uint8_t { kL2, kL3, kL4, kPayload };

struct LbKeyField {
  LbFieldKind kind = LbFieldKind::kIpSrc;
  LbAnchor anchor = LbAnchor::kL2;  // raw only
  uint32_t offset = 0;              // raw only
  uint32_t length = 0;              // raw only (1..16)
  std::vector<uint8_t> mask;        // empty = none; else exactly the field's width
  bool operator==(const LbKeyField&) const = default;
};

// When a key field is missing: hash the flow's 5-tuple instead, or drop the packet.
enum class LbFallback : uint8_t { kHash5Tuple = 0, kDrop = 1 };
enum class LbMode : uint8_t { kL2 = 0, kNat = 1, kIpip = 2 };
// active: in the table. draining: out of the table, flows pinned to it stay. down: out of
// the table, flows pinned to it follow the service's orphan policy (like a removed backend).
enum class LbBackendState : uint8_t { kActive = 0, kDraining = 1, kDown = 2 };
// What happens to a tracked flow whose backend is gone (removed with flush, or down):
// kRehash: pick a backend again from the current table; when that finds none (no backend
//   in the table, or a key field missing with fallback drop) the packet is dropped and the
//   flow's next packet picks again, like a new flow's first packet.
// kReset: drop the flow's packets (TCP gets no RST).
// kRehashOrReset: pick again once; when that finds none, reset the flow.
enum class LbOrphanPolicy : uint8_t { kRehash = 0, kReset = 1, kRehashOrReset = 2 };

struct LbBackend {
  std::string id;   // unique within its service
  std::optional<std::array<uint8_t, 4>> ipv4;
  std::optional<std::array<uint8_t, 16>> ipv6;
  std::optional<std::array<uint8_t, 6>> mac;
  uint16_t port = 0;    // NAT: destination port to rewrite to; 0 = keep the packet's port
  uint32_t weight = 1;  // 0..65535; 0 = not in the table (like draining)
  LbBackendState state = LbBackendState::kActive;
  bool operator==(const LbBackend&) const = default;
};

struct LbService {
  std::string id;  // unique
  // Match (all given conditions must hold): destination prefixes (at least one), protocol
  // (unset = any), destination port range (TCP/UDP/SCTP; unset = any), outer VLAN.
  std::vector<IpPrefix> dst;
  std::optional<uint8_t> protocol;
  std::optional<PortRange> dst_ports;
  std::optional<uint16_t> vlan;
  std::vector<LbKeyField> key;  // empty = the 5-tuple
  LbFallback fallback = LbFallback::kHash5Tuple;
  LbMode mode = LbMode::kL2;
  LbOrphanPolicy orphans = LbOrphanPolicy::kRehash;
  // IP-in-IP: outer source addresses (required for the families the service carries).
  std::optional<std::array<uint8_t, 4>> tunnel_src_v4;
  std::optional<std::array<uint8_t, 16>> tunnel_src_v6;
  uint32_t table_size = 65537;  // Maglev table size: a prime >= 251 and <= 1048573
  std::vector<LbBackend> backends;
  // Draining backends removed from the config automatically (control/api/lb_drain.h): when
  // no flow is pinned to them, and/or after draining drain_timeout_s seconds (0 = never).
  bool drain_remove_idle = false;
  uint32_t drain_timeout_s = 0;
  bool operator==(const LbService&) const = default;
};

struct LbModel {
  std::vector<LbService> services;  // first matching service (config order) wins
  bool operator==(const LbModel&) const = default;
};

// Limits the compiler enforces.
constexpr uint32_t kLbMaxKeyFields = 8;
constexpr uint32_t kLbMaxRawLength = 16;
constexpr uint32_t kLbMaxPacket = 65535;   // no offset + length may exceed this
constexpr uint32_t kLbMaxBackends = 4096;  // per service
constexpr uint32_t kLbMinTableSize = 251;
constexpr uint32_t kLbMaxTableSize = 1048573;
constexpr uint32_t kLbDefaultTableSize = 65537;

const char* lbFieldName(LbFieldKind k);   // "ip.src", ..., "raw"
const char* lbAnchorName(LbAnchor a);     // "l2", "l3", "l4", "payload"
const char* lbModeName(LbMode m);         // "l2", "nat", "ipip"
const char* lbStateName(LbBackendState s);  // "active", "draining", "down"

}  // namespace dpu::rules
