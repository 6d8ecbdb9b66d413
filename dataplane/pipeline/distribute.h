// Software distribution (dataplane.distribution SOFTWARE; docs/operations.md "Many workers"):
// which worker a packet belongs to when the ports do not hash packets to queues themselves.
//
// The worker is a symmetric hash of the addresses the flow key is made of (the innermost IP
// header the parser opened, as makeFlowKey uses them; the fragmented header itself for an
// outer fragment, which the parser does not open) and the tunnel id, without the ports:
//  - both directions of a flow give the same worker (the two addresses are ordered first);
//  - every fragment of a datagram gives the same worker (later fragments carry no ports;
//    addresses, tunnel id and the fragment's own header are the same in all of them);
//  - so a flow's unfragmented packets and its fragmented datagrams meet in one flow table.
// The price: all flows between the same two hosts share one worker. Frames without an IP
// header (non-IP, malformed before L3) go to worker 0.
//
// The load balancer's NAT services: a client's packets go to the VIP, the backend's answers
// come from the backend's address, i.e. from another host pair. So that both reach the worker
// holding the flow and its reverse entry, the hash reads every address of a NAT service as
// the service's canonical address (DistributionCanon): a backend address as the VIP when the
// service (with the NAT services it shares an address with) has one VIP host address of that
// family, else the VIPs and backends of that group as one token. Client -> VIP and backend ->
// client then hash alike; so do both directions of any flow (the mapping is a function of
// one address). Built from the published LB services (Dataplane::prepare); an apply that
// adds or removes a NAT backend moves the flows of that address (talking to it directly,
// not through the VIP) to another worker from then on (docs/operations.md "Many workers").
#pragma once

#include <rte_hash_crc.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "dataplane/flow/flow_key.h"
#include "dataplane/packet/packet_meta.h"

namespace dpu::rules {
struct CompiledLb;
}

namespace dpu::dp {

struct DistributionCanon {
  struct Host {
    IpAddr addr;
    bool v6 = false;
    IpAddr canon;
  };
  struct Prefix {
    IpAddr addr;
    uint8_t len = 0;
    bool v6 = false;
    IpAddr canon;
  };
  std::vector<Host> hosts;        // sorted by (v6, addr), one per address
  std::vector<Prefix> prefixes;   // VIP prefixes wider than a host (rare), scanned in order
  // One bit per filterBit() of each host address: an address whose bit is clear is not in
  // `hosts` (most packets' addresses: no search).
  uint64_t filter[64] = {};
  bool empty() const { return hosts.empty() && prefixes.empty(); }
  static uint32_t filterBit(const IpAddr& a) {
    uint64_t lo, hi;
    std::memcpy(&lo, a.b, 8);
    std::memcpy(&hi, a.b + 8, 8);
    return uint32_t(((lo * 0x9e3779b97f4a7c15ull) ^ (hi * 0xc2b2ae3d27d4eb4full)) >> 52);
  }
  // Sets `filter` from `hosts` (after filling them).
  void seal() {
    std::memset(filter, 0, sizeof(filter));
    for (const Host& h : hosts) {
      const uint32_t k = filterBit(h.addr);
      filter[k >> 6] |= uint64_t(1) << (k & 63);
    }
  }

  static bool less(const Host& h, bool v6, const IpAddr& a) {
    return h.v6 != v6 ? h.v6 < v6 : compareAddr(h.addr, a) < 0;
  }
  static bool inPrefix(const Prefix& p, const IpAddr& a) {
    const uint32_t full = p.len / 8, rest = p.len % 8;
    if (std::memcmp(p.addr.b, a.b, full) != 0) return false;
    return rest == 0 || ((p.addr.b[full] ^ a.b[full]) & uint8_t(0xff << (8 - rest))) == 0;
  }
  // The address the hash reads for `a` (family v6): its canonical address, or `a`.
  const IpAddr& map(const IpAddr& a, bool v6) const {
    const uint32_t k = filterBit(a);
    if ((filter[k >> 6] >> (k & 63)) & 1)
      if (const IpAddr* c = findHost(a, v6)) return *c;
    for (const Prefix& p : prefixes)
      if (p.v6 == v6 && inPrefix(p, a)) return p.canon;
    return a;
  }
  // The canonical address of host `a` in `hosts` (binary search), null when it has none.
  const IpAddr* findHost(const IpAddr& a, bool v6) const {
    size_t lo = 0, hi = hosts.size();
    while (lo < hi) {
      const size_t mid = (lo + hi) / 2;
      if (less(hosts[mid], v6, a)) lo = mid + 1; else hi = mid;
    }
    return lo < hosts.size() && hosts[lo].v6 == v6 && hosts[lo].addr == a ? &hosts[lo].canon : nullptr;
  }
};

// The table for the NAT services of `lb` (control side; allocates).
DistributionCanon buildDistributionCanon(const rules::CompiledLb& lb);

inline uint32_t distributionHash(const IpAddr& a, const IpAddr& b, uint32_t tunnel_id) {
  const bool swap = compareAddr(a, b) > 0;
  const IpAddr& lo = swap ? b : a;
  const IpAddr& hi = swap ? a : b;
  uint32_t h = rte_hash_crc(lo.b, sizeof(lo.b), tunnel_id);
  return rte_hash_crc(hi.b, sizeof(hi.b), h);
}

inline uint32_t distributionHash(const PacketMeta& m, const DistributionCanon* canon = nullptr) {
  if (canon == nullptr || canon->empty()) return distributionHash(m.src, m.dst, m.tunnel_id);
  const bool v6 = m.l3 == L3Type::kIpv6;
  return distributionHash(canon->map(m.src, v6), canon->map(m.dst, v6), m.tunnel_id);
}

// The worker in [0, nworkers) of a packet parsed into `m` (any parse status).
inline uint16_t distributionWorker(const PacketMeta& m, uint16_t nworkers,
                                   const DistributionCanon* canon = nullptr) {
  if (nworkers <= 1 || m.l3 == L3Type::kNone) return 0;
  return static_cast<uint16_t>((static_cast<uint64_t>(distributionHash(m, canon)) * nworkers) >> 32);
}

}  // namespace dpu::dp
