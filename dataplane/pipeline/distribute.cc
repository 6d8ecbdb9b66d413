// Software distribution: the canonical NAT addresses (distribute.h) and the worker side
// (distributor.h).
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_pause.h>
#include <rte_ring.h>

#include <algorithm>
#include <cstring>

#include "dataplane/packet/parser.h"
#include "dataplane/pipeline/distribute.h"
#include "dataplane/pipeline/distributor.h"
#include "rules/compiled/lb.h"

namespace dpu::dp {

namespace {

struct Net {  // one address or prefix of a NAT service
  IpAddr addr{};
  uint8_t len = 0;
  bool v6 = false;
  bool host() const { return len == (v6 ? 128 : 32); }
};

bool overlaps(const Net& a, const Net& b) {
  if (a.v6 != b.v6) return false;
  DistributionCanon::Prefix p;
  p.addr = a.len <= b.len ? a.addr : b.addr;
  p.len = std::min(a.len, b.len);
  return DistributionCanon::inPrefix(p, a.len <= b.len ? b.addr : a.addr);
}

}  // namespace

DistributionCanon buildDistributionCanon(const rules::CompiledLb& lb) {
  // Per NAT service its VIPs and backend addresses; services sharing an address (a backend
  // of two services, overlapping VIPs, a VIP that is another's backend) form one group, so
  // that every address has a single canonical address.
  std::vector<std::vector<Net>> vips, backs;
  for (const auto& sp : lb.services) {
    const rules::CompiledLbService& s = *sp;
    if (s.mode != rules::LbMode::kNat) continue;
    std::vector<Net> v, b;
    for (const rules::IpPrefix& p : s.dst) {
      Net n;
      std::memcpy(n.addr.b, p.addr.data(), 16);
      n.len = p.len;
      n.v6 = p.v6;
      v.push_back(n);
    }
    for (const rules::CompiledLbBackend& be : s.backends) {
      if (be.has_v4) {
        Net n;
        std::memcpy(n.addr.b, be.v4, 4);
        n.len = 32;
        b.push_back(n);
      }
      if (be.has_v6) {
        Net n;
        std::memcpy(n.addr.b, be.v6, 16);
        n.len = 128;
        n.v6 = true;
        b.push_back(n);
      }
    }
    vips.push_back(std::move(v));
    backs.push_back(std::move(b));
  }
  const size_t ns = vips.size();
  std::vector<size_t> parent(ns);
  for (size_t i = 0; i < ns; ++i) parent[i] = i;
  auto find = [&](size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  };
  auto shares = [&](size_t i, size_t j) {
    for (const auto* a : {&vips[i], &backs[i]})
      for (const auto* b : {&vips[j], &backs[j]})
        for (const Net& x : *a)
          for (const Net& y : *b)
            if (overlaps(x, y)) return true;
    return false;
  };
  for (size_t i = 0; i < ns; ++i)
    for (size_t j = i + 1; j < ns; ++j)
      if (find(i) != find(j) && shares(i, j)) parent[find(i)] = find(j);
  DistributionCanon c;
  for (size_t g = 0; g < ns; ++g) {
    if (find(g) != g) continue;
    for (const bool v6 : {false, true}) {
      std::vector<Net> gv, gb;
      for (size_t i = 0; i < ns; ++i) {
        if (find(i) != g) continue;
        for (const Net& n : vips[i])
          if (n.v6 == v6) gv.push_back(n);
        for (const Net& n : backs[i])
          if (n.v6 == v6) gb.push_back(n);
      }
      if (gb.empty()) continue;  // no backend answers in this family
      bool one_vip = !gv.empty() && gv[0].host();
      for (const Net& n : gv) one_vip = one_vip && n.host() && n.addr == gv[0].addr;
      IpAddr canon{};
      if (one_vip) {
        canon = gv[0].addr;
      } else {
        // A token no packet carries as an address of this family: 0xff 'L' 'B' + group.
        canon.b[0] = 0xff;
        canon.b[1] = 'L';
        canon.b[2] = 'B';
        canon.b[3] = v6 ? 6 : 4;
        std::memcpy(canon.b + 4, &g, sizeof(uint32_t));
        for (const Net& n : gv) {
          if (n.host()) c.hosts.push_back({n.addr, v6, canon});
          else c.prefixes.push_back({n.addr, n.len, v6, canon});
        }
      }
      for (const Net& n : gb) c.hosts.push_back({n.addr, v6, canon});
    }
  }
  std::sort(c.hosts.begin(), c.hosts.end(), [](const DistributionCanon::Host& a, const DistributionCanon::Host& b) {
    return DistributionCanon::less(a, b.v6, b.addr);
  });
  c.hosts.erase(std::unique(c.hosts.begin(), c.hosts.end(),
                            [](const DistributionCanon::Host& a, const DistributionCanon::Host& b) {
                              return a.v6 == b.v6 && a.addr == b.addr;
                            }),
                c.hosts.end());
  c.seal();
  return c;
}

Distributor::Distributor(PathContext& cx) : cx_(cx) {
  dist_buf_.reset(new rte_mbuf*[size_t(cx.opts.nworkers) * kDistStride]);
}

Distributor::~Distributor() {
  for (uint16_t i = 0; i < group_n_; ++i) {
    if (!isClockTick(group_[i])) rte_pktmbuf_free(group_[i]);
  }
}

uint32_t Distributor::dequeue(void** slot, unsigned n) {
  return rte_ring_sc_dequeue_burst(cx_.shared.inbound[cx_.opts.id], slot, n, nullptr);
}

uint16_t Distributor::handOff(rte_mbuf** pkts, uint16_t n, uint64_t* next_seq) {
  const uint16_t nw = cx_.opts.nworkers;
  uint16_t count[kMaxDistributionWorkers] = {};
  uint16_t keep = 0;
  uint64_t latest = 0;  // packet-timestamp clock: the latest capture time of the burst
  // One for the burst: parsePacket clears it (clearPacketMeta) for every packet; a
  // `PacketMeta pm;` per packet was a second, `rep stos` clearing each time.
  PacketMeta pm;
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = pkts[i];
    if (cx_.opts.clock == ClockMode::kPacketTimestamp) latest = std::max(latest, cx_.packetTime(m));
    // The input index is stamped here, in receive order, whichever worker judges the packet
    // (replay: the merged input index).
    if (cx_.shared.seq_dynfield >= 0) {
      *RTE_MBUF_DYNFIELD(m, cx_.shared.seq_dynfield, uint64_t*) = (*next_seq)++;
    }
    parsePacket(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, pm, &cx_.tun);
    const uint16_t t = distributionWorker(pm, nw, dist_canon_);
    if (t == cx_.opts.id) {
      pkts[keep++] = m;
    } else {
      dist_buf_[size_t(t) * kDistStride + count[t]++] = m;
    }
  }
  // This worker's clock follows the input too, not only the packets it keeps.
  input_clock_ = std::max(input_clock_, latest);
  for (uint16_t t = 0; t < nw; ++t) {
    uint16_t k = count[t];
    // Counted before the enqueue, so the target can never count a packet in (dist_handed_in)
    // before it is counted off here: a snapshot then always has off >= in. What the ring
    // does not take comes off again below.
    if (t != cx_.opts.id) cx_.c->dist_handed_off.add(k);
    if (t != cx_.opts.id && cx_.opts.clock == ClockMode::kPacketTimestamp) {
      // Replay's clock is the capture's: a worker's own packets alone would stop its clock
      // (and its flows' aging) while the others' traffic goes on. A tick after the burst's
      // packets tells every worker the input's time, in order with the packets.
      dist_buf_[size_t(t) * kDistStride + k++] = clockTick(latest);
    }
    if (k == 0) continue;
    void** objs = reinterpret_cast<void**>(&dist_buf_[size_t(t) * kDistStride]);
    unsigned put = rte_ring_mp_enqueue_burst(cx_.shared.inbound[t], objs, k, nullptr);
    // Replay: wait for room (the target keeps dequeuing); worker 0 keeps sending the tx
    // rings meanwhile, which the target may be waiting on itself.
    while (put < k && cx_.opts.lossless && !cx_.shared.stop->load(std::memory_order_relaxed)) {
      if (cx_.opts.id == 0) drainTxRings();
      rte_pause();
      put += rte_ring_mp_enqueue_burst(cx_.shared.inbound[t], objs + put, k - put, nullptr);
    }
    for (unsigned j = put; j < k; ++j) {
      if (isClockTick(objs[j])) continue;
      cx_.c->dist_handed_off.sub();
      dropUndelivered(static_cast<rte_mbuf*>(objs[j]));
    }
  }
  return keep;
}

// A packet whose worker's ring was full: received (counted on this worker's rx) and dropped
// with its own reason, so the counters still add up (rx = verdicts) and nothing is silent.
void Distributor::dropUndelivered(rte_mbuf* m) {
  const uint8_t side = cx_.sideOf(m);
  cx_.c->rx_packets[side].add();
  cx_.c->rx_bytes[side].add(m->pkt_len);
  PacketVerdict v;
  v.seq = cx_.seqOf(m);
  v.generation = cx_.generation;
  v.in_side = side;
  v.verdict = Verdict::kDrop;
  v.stage = Stage::kParse;
  v.reason = DropReason::kWorkerRingFull;
  cx_.c->stage_packets[static_cast<int>(Stage::kParse)].add();
  PacketMeta pm;
  parsePacket(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, pm, &cx_.tun);
  cx_.emitDrop(&pm, v, cx_.packetTime(m));
  cx_.applyVerdict(m, v, side);
}

uint32_t Distributor::drainTxRings() {
  uint32_t total = 0;
  for (int s = 0; s < 2; ++s) {
    rte_ring* r = cx_.shared.tx_ring[s];
    if (r == nullptr) continue;
    rte_mbuf* out[PathContext::kTxCap];
    unsigned n;
    while ((n = rte_ring_sc_dequeue_burst(r, reinterpret_cast<void**>(out), PathContext::kTxCap, nullptr)) != 0) {
      total += n;
      uint64_t bytes = 0;
      for (unsigned i = 0; i < n; ++i) bytes += out[i]->pkt_len;
      uint16_t sent = 0;
      for (int tries = 0; tries < 8 && sent < n; ++tries) {
        sent += rte_eth_tx_burst(cx_.opts.port[s], 0, out + sent, static_cast<uint16_t>(n - sent));
      }
      for (unsigned i = sent; i < n; ++i) {
        bytes -= out[i]->pkt_len;
        cx_.c->drops[static_cast<int>(DropReason::kTxFailed)].add();
        rte_pktmbuf_free(out[i]);
      }
      cx_.c->tx_packets[s].add(sent);
      cx_.c->tx_bytes[s].add(bytes);
    }
  }
  return total;
}

}  // namespace dpu::dp
