// The worker's packet path. See worker.h for ownership; DESIGN.md for the stage order.
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_mempool.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "dataplane/packet/parser.h"
#include "dataplane/pipeline/worker.h"

namespace dpu::dp {
namespace {

constexpr uint8_t kProtoTcp = 6;
constexpr uint8_t kProtoUdp = 17;
constexpr uint8_t kProtoIcmp = 1;
constexpr uint8_t kProtoIcmp6 = 58;

inline FlowTimeouts toTimeouts(const rules::DataplaneSettings& s) {
  constexpr uint64_t kNs = 1000000000ull;
  FlowTimeouts t;
  t.tcp_syn_ns = s.tcp_syn_s * kNs;
  t.tcp_established_ns = s.tcp_established_s * kNs;
  t.tcp_closing_ns = s.tcp_closing_s * kNs;
  t.tcp_closed_ns = s.tcp_closed_s * kNs;
  t.udp_ns = s.udp_s * kNs;
  t.icmp_ns = s.icmp_s * kNs;
  t.other_ns = s.other_s * kNs;
  return t;
}

inline bool l4NeedsHeader(uint8_t proto) {
  return proto == kProtoTcp || proto == kProtoUdp || proto == kProtoIcmp || proto == kProtoIcmp6;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Worker>> Worker::create(const WorkerOptions& opts,
                                                       const WorkerShared& shared,
                                                       const rules::DataplaneSettings& settings,
                                                       WorkerCounters* counters,
                                                       rte_ring* events) {
  std::unique_ptr<Worker> w(new Worker());
  w->opts_ = opts;
  w->shared_ = shared;
  w->c_ = counters;
  w->events_ = events;
  FlowTableOptions fo;
  fo.name = absl::StrCat("flows_w", opts.id);
  fo.capacity = settings.flow_capacity;
  fo.socket_id = static_cast<int>(rte_socket_id());
  auto ft = FlowTable::create(fo);
  if (!ft.ok()) return ft.status();
  w->flows_ = std::move(*ft);
  FragOptions fr;
  fr.name = absl::StrCat("frags_w", opts.id);
  fr.max_datagrams = settings.frag_max_datagrams;
  fr.max_fragments = static_cast<uint16_t>(settings.frag_max_fragments);
  fr.timeout_ns = static_cast<uint64_t>(settings.frag_timeout_ms) * 1000000ull;
  fr.socket_id = fo.socket_id;
  auto fg = FragTracker::create(fr);
  if (!fg.ok()) return fg.status();
  w->frags_ = std::move(*fg);
  w->tsc_hz_ = rte_get_tsc_hz();
  return w;
}

Worker::~Worker() {
  if (frags_) frags_->age(UINT64_MAX, frags_->capacity(), [](void* p) {
    rte_pktmbuf_free(static_cast<rte_mbuf*>(p));
  });
  for (int s = 0; s < 2; ++s) {
    for (uint16_t i = 0; i < ntx_[s]; ++i) rte_pktmbuf_free(tx_[s][i]);
    for (uint16_t i = 0; i < ahead_n_[s]; ++i) rte_pktmbuf_free(ahead_[s][ahead_head_[s] + i]);
  }
}

void Worker::refreshSnapshot() {
  const rules::Snapshot* s = shared_.snapshot->load(std::memory_order_acquire);
  snap_ = s;
  if (s->generation != generation_) {
    generation_ = s->generation;
    timeouts_ = toTimeouts(s->dataplane);
    aging_slice_ = s->dataplane.aging_slice;
    c_->generation.set(generation_);
  }
}

uint64_t Worker::packetTime(rte_mbuf* m) const {
  if (opts_.clock == ClockMode::kPacketTimestamp && shared_.ts_dynfield >= 0 &&
      (m->ol_flags & shared_.ts_dynflag)) {
    uint64_t us = *RTE_MBUF_DYNFIELD(m, shared_.ts_dynfield, uint64_t*);
    return us * 1000ull;
  }
  return now_ns_;
}

int Worker::run() {
  rte_rcu_qsbr_thread_register(shared_.qsbr, opts_.id);
  rte_rcu_qsbr_thread_online(shared_.qsbr, opts_.id);
  while (!shared_.stop->load(std::memory_order_relaxed)) pollOnce();
  flushTx();
  rte_rcu_qsbr_thread_offline(shared_.qsbr, opts_.id);
  rte_rcu_qsbr_thread_unregister(shared_.qsbr, opts_.id);
  return 0;
}

uint32_t Worker::pollMerged(rte_mbuf** out) {
  uint32_t k = 0;
  while (k < kBurst) {
    for (int s = 0; s < 2; ++s) {
      if (ahead_n_[s] == 0 && !exhausted_[s]) {
        ahead_head_[s] = 0;
        ahead_n_[s] = rte_eth_rx_burst(opts_.port[s], opts_.queue, ahead_[s], kBurst);
        if (ahead_n_[s] == 0) exhausted_[s] = true;
        for (uint16_t i = 0; i < ahead_n_[s]; ++i) ahead_[s][i]->port = opts_.port[s];
      }
    }
    if (ahead_n_[0] == 0 && ahead_n_[1] == 0) break;
    int s;
    if (ahead_n_[0] == 0) {
      s = 1;
    } else if (ahead_n_[1] == 0) {
      s = 0;
    } else {
      // Earlier timestamp first; side A wins ties.
      uint64_t ta = packetTime(ahead_[0][ahead_head_[0]]);
      uint64_t tb = packetTime(ahead_[1][ahead_head_[1]]);
      s = tb < ta ? 1 : 0;
    }
    out[k++] = ahead_[s][ahead_head_[s]++];
    --ahead_n_[s];
  }
  return k;
}

uint32_t Worker::pollOnce() {
  refreshSnapshot();
  if (opts_.clock == ClockMode::kTsc) {
    now_ns_ = static_cast<uint64_t>(static_cast<unsigned __int128>(rte_rdtsc()) * 1000000000ull /
                                    tsc_hz_);
  }
  uint32_t total = 0;
  rte_mbuf* pkts[kBurst];
  if (opts_.merge_by_timestamp) {
    uint32_t n = pollMerged(pkts);
    if (n) processBurst(pkts, static_cast<uint16_t>(n));
    total = n;
  } else {
    for (int s = 0; s < 2; ++s) {
      uint16_t n = rte_eth_rx_burst(opts_.port[s], opts_.queue, pkts, kBurst);
      // Not every PMD fills mbuf->port; the side is where we polled.
      for (uint16_t i = 0; i < n; ++i) pkts[i]->port = opts_.port[s];
      if (n) processBurst(pkts, n);
      total += n;
    }
  }
  flushTx();
  age();
  c_->loops.add();
  if (total) c_->busy_loops.add();
  rte_rcu_qsbr_quiescent(shared_.qsbr, opts_.id);
  return total;
}

void Worker::processBurst(rte_mbuf** pkts, uint16_t n) {
  PacketMeta meta[kBurst];
  PacketVerdict v[kBurst];
  FlowKey keys[kBurst];
  const FlowKey* kp[kBurst];
  int32_t pos[kBurst];
  uint8_t flow_idx[kBurst];     // packets going to the flow stage, in order
  bool src_is_hi[kBurst];
  bool done[kBurst];
  int32_t frag_slot[kBurst];
  uint64_t ts[kBurst];
  uint32_t nflow = 0;
  if (n > kBurst) n = kBurst;

  // Stage 1: parse, policies for non-IP / malformed, fragments.
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = pkts[i];
    uint8_t side = m->port == opts_.port[kSideB] ? kSideB : kSideA;
    if (opts_.port[kSideA] == opts_.port[kSideB]) side = kSideA;
    uint64_t seq = next_seq_++;
    if (shared_.seq_dynfield >= 0) *RTE_MBUF_DYNFIELD(m, shared_.seq_dynfield, uint64_t*) = seq;
    uint64_t t = packetTime(m);
    if (t > now_ns_) now_ns_ = t;
    ts[i] = t;
    c_->rx_packets[side].add();
    c_->rx_bytes[side].add(m->pkt_len);
    v[i] = PacketVerdict{};
    v[i].seq = seq;
    v[i].generation = generation_;
    v[i].in_side = side;
    done[i] = true;
    frag_slot[i] = -1;
    c_->stage_packets[static_cast<int>(Stage::kParse)].add();

    if (m->nb_segs > 1) {
      meta[i] = PacketMeta{};
      v[i].verdict = Verdict::kDrop;
      v[i].stage = Stage::kParse;
      v[i].reason = DropReason::kMultiSegment;
      continue;
    }
    ParseStatus st = parsePacket(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, meta[i]);
    if (st == ParseStatus::kNonIp) {
      if (snap_->dataplane.non_ip == rules::Policy::kDrop) {
        v[i].verdict = Verdict::kDrop;
        v[i].stage = Stage::kParse;
        v[i].reason = DropReason::kNonIp;
      } else {
        v[i].verdict = Verdict::kForward;
        c_->non_ip_forwarded.add();
      }
      continue;
    }
    if (st != ParseStatus::kOk) {
      if (snap_->dataplane.malformed == rules::Policy::kDrop) {
        v[i].verdict = Verdict::kDrop;
        v[i].stage = Stage::kParse;
        v[i].reason = dropReasonFromParse(st);
      } else {
        v[i].verdict = Verdict::kForward;
        c_->malformed_forwarded.add();
      }
      continue;
    }
    const PacketMeta& pm = meta[i];
    if (pm.is_fragment) {
      c_->frag_packets.add();
      c_->stage_packets[static_cast<int>(Stage::kFragment)].add();
      int32_t slot = -1;
      FragAction a = frags_->observe(pm, t, &slot);
      bool overlap_forward = snap_->dataplane.frag_overlapping == rules::Policy::kForward;
      switch (a) {
        case FragAction::kJudge:
          frag_slot[i] = slot;
          if (!pm.has_l4 && l4NeedsHeader(pm.l4_proto) &&
              snap_->dataplane.frag_tiny == rules::Policy::kDrop) {
            v[i].verdict = Verdict::kDrop;
            v[i].stage = Stage::kFragment;
            v[i].reason = DropReason::kFragTiny;
            FragVerdict fv{static_cast<uint8_t>(Verdict::kDrop),
                           static_cast<uint8_t>(Stage::kFragment), kNoRule,
                           static_cast<uint8_t>(DropReason::kFragTiny)};
            frags_->setVerdict(slot, fv);
            break;
          }
          done[i] = false;  // judged by the flow stage below
          break;
        case FragAction::kApply: {
          const FragVerdict& fv = frags_->verdictOf(slot);
          v[i].verdict = static_cast<Verdict>(fv.verdict);
          v[i].stage = static_cast<Stage>(fv.stage);
          v[i].rule = fv.rule;
          if (v[i].verdict == Verdict::kDrop) {
            v[i].reason = DropReason::kFragDatagramDropped;
            v[i].stage = Stage::kFragment;
          }
          break;
        }
        case FragAction::kHold:
          if (frags_->hold(slot, m)) {
            c_->frag_held.add();
            v[i].verdict = Verdict::kNone;  // judged when the first fragment arrives
          } else {
            v[i].verdict = Verdict::kDrop;
            v[i].stage = Stage::kFragment;
            v[i].reason = DropReason::kFragHoldFull;
          }
          break;
        case FragAction::kOverlap:
        case FragAction::kDuplicateFirst:
          c_->frag_overlaps.add();
          if (overlap_forward) {
            v[i].verdict = Verdict::kForward;
          } else {
            v[i].verdict = Verdict::kDrop;
            v[i].stage = Stage::kFragment;
            v[i].reason = DropReason::kFragOverlap;
          }
          break;
        case FragAction::kTooMany:
          v[i].verdict = Verdict::kDrop;
          v[i].stage = Stage::kFragment;
          v[i].reason = DropReason::kFragTooMany;
          break;
        case FragAction::kTableFull:
          v[i].verdict = Verdict::kDrop;
          v[i].stage = Stage::kFragment;
          v[i].reason = DropReason::kFragTableFull;
          break;
      }
      if (done[i]) continue;
    }
    done[i] = false;
    src_is_hi[i] = makeFlowKey(pm, keys[i]);
    kp[nflow] = &keys[i];
    flow_idx[nflow++] = static_cast<uint8_t>(i);
  }

  // Stage 2: flow table, one bulk lookup for the burst.
  if (nflow) {
    int32_t looked[kBurst];
    flows_->lookupBurst(kp, nflow, looked);
    for (uint32_t j = 0; j < nflow; ++j) pos[flow_idx[j]] = looked[j];
  }
  uint32_t inserted = 0;
  const auto& dps = snap_->dataplane;
  for (uint32_t j = 0; j < nflow; ++j) {
    uint8_t i = flow_idx[j];
    const PacketMeta& pm = meta[i];
    rte_mbuf* m = pkts[i];
    uint64_t t = ts[i];
    c_->stage_packets[static_cast<int>(Stage::kFlow)].add();
    int32_t p = pos[i];
    if (p < 0 && inserted) p = flows_->lookup(keys[i]);  // created earlier in this burst
    if (p >= 0) {
      // A flow idle past its timeout that aging has not reached yet ends here; the packet
      // starts a new one.
      FlowEntry& old = flows_->entry(p);
      if (t > old.last_seen_ns && t - old.last_seen_ns > flowTimeout(old, timeouts_)) {
        emitFlowEnd(old, keys[i], t, FlowEndReason::kTimeout);
        flows_->remove(p);
        c_->flows_expired.add();
        p = -1;
      }
    }
    bool is_tcp = pm.l4_proto == kProtoTcp && pm.has_l4;
    if (p < 0) {
      bool midstream = false;
      if (is_tcp && !(pm.tcp_flags & kTcpSyn)) {
        if (pm.tcp_flags & kTcpRst) {  // stray reset: pass it on, track nothing
          v[i].verdict = Verdict::kForward;
          c_->untracked_forwarded.add();
          continue;
        }
        if (dps.tcp_midstream == rules::Policy::kDrop) {
          v[i].verdict = Verdict::kDrop;
          v[i].stage = Stage::kFlow;
          v[i].reason = DropReason::kTcpMidstream;
          continue;
        }
        midstream = true;
      }
      p = flows_->insert(keys[i], t);
      if (p < 0) {
        c_->flow_table_full.add();
        if (dps.flow_when_full == rules::Policy::kDrop) {
          v[i].verdict = Verdict::kDrop;
          v[i].stage = Stage::kFlow;
          v[i].reason = DropReason::kFlowTableFull;
        } else {
          v[i].verdict = Verdict::kForward;
          c_->untracked_forwarded.add();
        }
        continue;
      }
      ++inserted;
      FlowEntry& ne = flows_->entry(p);
      if (src_is_hi[i]) ne.flags |= kFlowInitiatorIsHi;
      ne.flow_seq = ++flow_seq_;
      ne.rule = kNoRule;
      if (midstream) {
        ne.tcp_state = TcpState::kEstablished;
        ne.flags |= kFlowMidstream;
        c_->flows_midstream.add();
      }
      c_->flows_created.add();
      c_->flows_active.set(flows_->size());
      v[i].flow_new = true;
    }
    FlowEntry& e = flows_->entry(p);
    int dir = (src_is_hi[i] == ((e.flags & kFlowInitiatorIsHi) != 0)) ? 0 : 1;
    if (t > e.last_seen_ns) e.last_seen_ns = t;
    e.packets[dir]++;
    e.bytes[dir] += m->pkt_len;
    if (is_tcp) tcpAdvance(e, pm.tcp_flags, dir);
    v[i].flow_id = (static_cast<uint64_t>(opts_.id + 1) << 32) | e.flow_seq;
    if (e.verdict != 0 && e.generation == generation_) {
      v[i].verdict = static_cast<Verdict>(e.verdict);
      v[i].stage = static_cast<Stage>(e.stage);
      v[i].rule = e.rule;
      c_->flow_cache_hits.add();
      continue;
    }
    // Rule stages (firewall, geoip, dns, dpi, lb) run here on a flow's first packet and
    // after a snapshot change; with none configured every flow is forwarded.
    v[i].verdict = Verdict::kForward;
    e.verdict = static_cast<uint8_t>(Verdict::kForward);
    e.stage = static_cast<uint8_t>(Stage::kNone);
    e.rule = kNoRule;
    e.generation = generation_;
  }

  // Stage 3: verdicts in input order.
  for (uint16_t i = 0; i < n; ++i) {
    if (v[i].verdict == Verdict::kNone) continue;  // held fragment
    if (frag_slot[i] >= 0) {
      FragVerdict fv{static_cast<uint8_t>(v[i].verdict), static_cast<uint8_t>(v[i].stage),
                     v[i].rule, static_cast<uint8_t>(v[i].reason)};
      frags_->setVerdict(frag_slot[i], fv);
    }
    if (v[i].verdict == Verdict::kDrop) emitDrop(&meta[i], v[i], ts[i]);
    applyVerdict(pkts[i], v[i], v[i].in_side);
    if (frag_slot[i] >= 0) releaseFragments(frag_slot[i], v[i], ts[i]);
  }
  c_->frag_datagrams_active.set(frags_->size());
}

void Worker::releaseFragments(int32_t slot, const PacketVerdict& first, uint64_t now) {
  void* held[kMaxHeldPerDatagram];
  uint32_t nh = frags_->releaseHeld(slot, held);
  for (uint32_t h = 0; h < nh; ++h) {
    rte_mbuf* hm = static_cast<rte_mbuf*>(held[h]);
    PacketVerdict hv = first;
    hv.seq = shared_.seq_dynfield >= 0 ? *RTE_MBUF_DYNFIELD(hm, shared_.seq_dynfield, uint64_t*)
                                       : 0;
    hv.in_side = hm->port == opts_.port[kSideB] && opts_.port[kSideA] != opts_.port[kSideB]
                     ? kSideB : kSideA;
    hv.flow_new = false;
    if (hv.verdict == Verdict::kDrop) {
      hv.reason = DropReason::kFragDatagramDropped;
      hv.stage = Stage::kFragment;
      PacketMeta hmeta;
      parsePacket(rte_pktmbuf_mtod(hm, const uint8_t*), hm->data_len, hmeta);
      emitDrop(&hmeta, hv, now);
    }
    applyVerdict(hm, hv, hv.in_side);
  }
}

void Worker::applyVerdict(rte_mbuf* m, const PacketVerdict& v, uint8_t in_side) {
  c_->verdicts[static_cast<int>(v.verdict)].add();
  if (v.verdict == Verdict::kForward) {
    uint8_t out = in_side ^ 1;
    if (ntx_[out] == kTxCap) flushTx();
    tx_[out][ntx_[out]++] = m;
  } else {
    c_->drops[static_cast<int>(v.reason)].add();
    c_->stage_drops[static_cast<int>(v.stage)].add();
    rte_pktmbuf_free(m);
  }
  if (sink_) sink_->onVerdict(v);
}

void Worker::flushTx() {
  for (int s = 0; s < 2; ++s) {
    uint16_t n = ntx_[s];
    if (!n) continue;
    uint64_t bytes = 0;
    for (uint16_t i = 0; i < n; ++i) bytes += tx_[s][i]->pkt_len;
    uint16_t sent = 0;
    for (int tries = 0; tries < 8 && sent < n; ++tries) {
      sent += rte_eth_tx_burst(opts_.port[s], opts_.queue, tx_[s] + sent, n - sent);
    }
    for (uint16_t i = sent; i < n; ++i) {
      bytes -= tx_[s][i]->pkt_len;
      c_->drops[static_cast<int>(DropReason::kTxFailed)].add();
      rte_pktmbuf_free(tx_[s][i]);
    }
    c_->tx_packets[s].add(sent);
    c_->tx_bytes[s].add(bytes);
    ntx_[s] = 0;
  }
}

void Worker::emitDrop(const PacketMeta* meta, const PacketVerdict& v, uint64_t now) {
  if (!events_ || !shared_.event_pool) return;
  void* obj = nullptr;
  if (rte_mempool_get(shared_.event_pool, &obj) != 0) {
    c_->events_lost.add();
    return;
  }
  Event* ev = static_cast<Event*>(obj);
  std::memset(ev, 0, sizeof(*ev));
  ev->type = EventType::kDrop;
  ev->worker = static_cast<uint8_t>(opts_.id);
  ev->in_side = v.in_side;
  ev->stage = v.stage;
  ev->reason = v.reason;
  ev->verdict = v.verdict;
  ev->rule = v.rule;
  ev->ts_ns = now;
  ev->seq = v.seq;
  ev->flow_id = v.flow_id;
  if (meta && meta->l3 != L3Type::kNone) {
    ev->ip_ver = static_cast<uint8_t>(meta->l3);
    ev->proto = meta->l4_proto;
    ev->sport = meta->sport;
    ev->dport = meta->dport;
    ev->src = meta->src;
    ev->dst = meta->dst;
  }
  if (meta) ev->vlan = meta->vlan_outer;
  if (rte_ring_sp_enqueue(events_, ev) != 0) {
    rte_mempool_put(shared_.event_pool, ev);
    c_->events_lost.add();
  }
}

void Worker::emitFlowEnd(const FlowEntry& e, const FlowKey& k, uint64_t now, FlowEndReason why) {
  if (!events_ || !shared_.event_pool) return;
  void* obj = nullptr;
  if (rte_mempool_get(shared_.event_pool, &obj) != 0) {
    c_->events_lost.add();
    return;
  }
  Event* ev = static_cast<Event*>(obj);
  std::memset(ev, 0, sizeof(*ev));
  ev->type = EventType::kFlowEnd;
  ev->worker = static_cast<uint8_t>(opts_.id);
  ev->end_reason = why;
  ev->verdict = static_cast<Verdict>(e.verdict);
  ev->stage = static_cast<Stage>(e.stage);
  ev->rule = e.rule;
  ev->ts_ns = now;
  ev->flow_id = (static_cast<uint64_t>(opts_.id + 1) << 32) | e.flow_seq;
  ev->first_seen_ns = e.first_seen_ns;
  ev->proto = k.proto;
  ev->ip_ver = k.ip_ver;
  ev->vlan = k.vlan;
  ev->tcp_state = static_cast<uint8_t>(e.tcp_state);
  bool init_hi = e.flags & kFlowInitiatorIsHi;
  ev->src = init_hi ? k.hi_addr : k.lo_addr;
  ev->dst = init_hi ? k.lo_addr : k.hi_addr;
  ev->sport = init_hi ? k.hi_port : k.lo_port;
  ev->dport = init_hi ? k.lo_port : k.hi_port;
  for (int d = 0; d < 2; ++d) {
    ev->packets[d] = e.packets[d];
    ev->bytes[d] = e.bytes[d];
  }
  if (rte_ring_sp_enqueue(events_, ev) != 0) {
    rte_mempool_put(shared_.event_pool, ev);
    c_->events_lost.add();
  }
}

void Worker::age() {
  uint32_t expired = flows_->age(now_ns_, aging_slice_, timeouts_,
                                 [&](int32_t, const FlowEntry& e, const FlowKey& k) {
                                   emitFlowEnd(e, k, now_ns_, FlowEndReason::kTimeout);
                                 });
  if (expired) {
    c_->flows_expired.add(expired);
    c_->flows_active.set(flows_->size());
  }
  ageFragments(now_ns_, aging_slice_);
}

void Worker::ageFragments(uint64_t now, uint32_t budget) {
  frags_->age(now, budget, [&](void* p) {
    rte_mbuf* hm = static_cast<rte_mbuf*>(p);
    PacketVerdict hv;
    hv.seq = shared_.seq_dynfield >= 0 ? *RTE_MBUF_DYNFIELD(hm, shared_.seq_dynfield, uint64_t*)
                                       : 0;
    hv.generation = generation_;
    hv.in_side = hm->port == opts_.port[kSideB] && opts_.port[kSideA] != opts_.port[kSideB]
                     ? kSideB : kSideA;
    hv.verdict = Verdict::kDrop;
    hv.stage = Stage::kFragment;
    hv.reason = DropReason::kFragTimeout;
    c_->frag_timeouts.add();
    PacketMeta hmeta;
    parsePacket(rte_pktmbuf_mtod(hm, const uint8_t*), hm->data_len, hmeta);
    emitDrop(&hmeta, hv, now);
    applyVerdict(hm, hv, hv.in_side);
  });
  c_->frag_datagrams_active.set(frags_->size());
}

bool Worker::drainFragments(uint32_t budget) {
  ageFragments(UINT64_MAX, budget);
  flushTx();
  return frags_->size() == 0;
}

bool Worker::endFlows(uint32_t budget) {
  flows_->age(UINT64_MAX, budget, timeouts_, [&](int32_t, const FlowEntry& e, const FlowKey& k) {
    emitFlowEnd(e, k, now_ns_, FlowEndReason::kShutdown);
  });
  return flows_->size() == 0;
}

}  // namespace dpu::dp
