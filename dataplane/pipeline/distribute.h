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
#pragma once

#include <rte_hash_crc.h>

#include <cstdint>

#include "dataplane/flow/flow_key.h"
#include "dataplane/packet/packet_meta.h"

namespace dpu::dp {

inline uint32_t distributionHash(const PacketMeta& m) {
  const bool swap = compareAddr(m.src, m.dst) > 0;
  const IpAddr& lo = swap ? m.dst : m.src;
  const IpAddr& hi = swap ? m.src : m.dst;
  uint32_t h = rte_hash_crc(lo.b, sizeof(lo.b), m.tunnel_id);
  return rte_hash_crc(hi.b, sizeof(hi.b), h);
}

// The worker in [0, nworkers) of a packet parsed into `m` (any parse status).
inline uint16_t distributionWorker(const PacketMeta& m, uint16_t nworkers) {
  if (nworkers <= 1 || m.l3 == L3Type::kNone) return 0;
  return static_cast<uint16_t>((static_cast<uint64_t>(distributionHash(m)) * nworkers) >> 32);
}

}  // namespace dpu::dp
