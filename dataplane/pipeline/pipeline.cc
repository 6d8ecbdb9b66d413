// The worker's packet path. See worker.h for ownership; DESIGN.md for the stage order.
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_mempool.h>
#include <rte_pause.h>
#include <rte_prefetch.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "dataplane/packet/parser.h"
#include "dataplane/pipeline/burst.h"
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

}  // namespace


absl::StatusOr<std::unique_ptr<Worker>> Worker::create(const WorkerOptions& opts,
                                                       const WorkerShared& shared,
                                                       const rules::DataplaneSettings& settings,
                                                       WorkerCounters* counters,
                                                       rte_ring* events) {
  std::unique_ptr<Worker> w(new Worker());
  w->burst_ = std::make_unique<Burst>();
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
  fr.max_held = settings.frag_max_held;
  fr.release_buffer = &DatagramReassembler::releaseBuffer;
  DatagramOptions dg;
  dg.name = absl::StrCat("reasm_w", opts.id);
  dg.buffers = settings.frag_reassembly_buffers;
  dg.max_bytes = settings.frag_max_datagram_bytes;
  dg.max_fragments = fr.max_fragments;
  dg.socket_id = fo.socket_id;
  auto rg = DatagramReassembler::create(dg);
  if (!rg.ok()) return rg.status();
  w->dgram_ = std::move(*rg);
  auto fg = FragTracker::create(fr);
  if (!fg.ok()) return fg.status();
  w->frags_ = std::move(*fg);
  w->flow_uid_.reset(new uint32_t[w->flows_->capacity()]());
  w->lbInit();  // --- lb ---
  w->dpi_dirs_.reset(new DpiDir[size_t(w->flows_->capacity()) * 2]);
  w->dpi_block_.reset(new uint32_t[w->flows_->capacity()]());
  w->http_flows_.reset(new HttpFlow[w->flows_->capacity()]);  // --- http ---
  {
    // --- http --- hold-back slots: the configuration's at start (a later change of the
    // size takes effect at the next start, like the other per-worker pools).
    const PublishedState* st = shared.state ? shared.state->load(std::memory_order_acquire) : nullptr;
    w->holdInit(st != nullptr && st->snap ? st->snap->dpi_settings.http.hold_slots_per_worker
                                          : rules::DpiHttpModel{}.hold_slots_per_worker);
  }
  w->dnsInit();  // DNS filtering
  w->streamInit(settings);  // --- tcp stream ---
  w->tsc_hz_ = rte_get_tsc_hz();
  counters->tsc_hz.set(w->tsc_hz_);
  if (opts.software_distribution) {
    w->dist_buf_.reset(new rte_mbuf*[size_t(opts.nworkers) * kDistStride]);
  }
  return w;
}

Worker::~Worker() {
  // Before the reassembly pool goes (members are destroyed after this body): forgetting
  // the datagrams gives their buffers back.
  if (frags_) frags_->age(UINT64_MAX, frags_->capacity(), [](void* p) {
    rte_pktmbuf_free(static_cast<rte_mbuf*>(p));
  });
  frags_.reset();
  // --- http --- packets still held back (a worker destroyed without endFlows): freed.
  while (hold_head_ != kNoHold) {
    rte_mbuf* m = holds_[hold_head_].m;
    holdUnlink(hold_head_);
    rte_pktmbuf_free(m);
  }
  for (int s = 0; s < 2; ++s) {
    for (uint16_t i = 0; i < ntx_[s]; ++i) rte_pktmbuf_free(tx_[s][i]);
    for (uint16_t i = 0; i < ahead_n_[s]; ++i) rte_pktmbuf_free(ahead_[s][ahead_head_[s] + i]);
  }
  for (uint16_t i = 0; i < group_n_; ++i) {
    if (!isClockTick(group_[i])) rte_pktmbuf_free(group_[i]);
  }
}

void Worker::refreshSnapshot() {
  // Every loop, without an early return on an unchanged pointer: a freed state's address
  // can come back for a later state.
  const PublishedState* st = shared_.state->load(std::memory_order_acquire);
  state_ = st;
  dist_canon_ = st->dist_canon.empty() ? nullptr : &st->dist_canon;
  const rules::Snapshot* s = st->snap.get();
  snap_ = s;
  fw_ = st->fw.get();
  fwc_ = fw_ ? &fw_->compiled() : nullptr;
  geo_ = st->geoip.get();
  fw_active_ = st->fw_active && fw_ != nullptr;
  fw_since_ = st->fw_since;
  fw_reevaluate_ = fwc_ ? fwc_->reevaluate_on_change : true;
  fw_countries_ = fwc_ ? fwc_->uses_countries : false;
  fw_nrules_ = st->nrules;
  hits_ = st->hitsOf(opts_.id);
  lbRefresh(s);  // --- lb ---
  dpi_rt_ = st->dpi.get();
  dpi_hits_ = st->dpi_hits ? st->dpi_hits->of(opts_.id) : nullptr;  // --- dpi ---
  http_rt_ = st->http.get();  // --- http ---
  // Fragmented datagrams are reassembled for inspection while a stage reads payloads.
  reasm_on_ = dpi_rt_ != nullptr || s->dns != nullptr;
  // Every loop (a few stores): a test may publish settings under an unchanged generation.
  tun_ = toTunnelParseConfig(s->dataplane);
  if (s->generation != generation_) {
    generation_ = s->generation;
    timeouts_ = toTimeouts(s->dataplane);
    min_timeout_ns_ = std::min({timeouts_.tcp_syn_ns, timeouts_.tcp_established_ns,
                                timeouts_.tcp_closing_ns, timeouts_.tcp_closed_ns,
                                timeouts_.udp_ns, timeouts_.icmp_ns, timeouts_.other_ns});
    aging_slice_ = s->dataplane.aging_slice;
    c_->generation.set(generation_);
  }
}

uint8_t Worker::sideOf(const rte_mbuf* m) const {
  return m->port == opts_.port[kSideB] && opts_.port[kSideA] != opts_.port[kSideB] ? kSideB
                                                                                   : kSideA;
}

uint64_t Worker::packetTime(rte_mbuf* m) const {
  if (opts_.clock == ClockMode::kPacketTimestamp && shared_.ts_dynfield >= 0 &&
      (m->ol_flags & shared_.ts_dynflag)) {
    uint64_t us = *RTE_MBUF_DYNFIELD(m, shared_.ts_dynfield, uint64_t*);
    // Captures can carry absurd times (a negative tv_sec read as unsigned): clamp to 2^63 ns
    // (year 2262) so times never wrap and "now = UINT64_MAX" drains still end everything.
    constexpr uint64_t kMaxUs = (1ull << 63) / 1000;
    return (us > kMaxUs ? kMaxUs : us) * 1000ull;
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
  while (k < kBurst && next_seq_ + k < input_limit_) {
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
  const uint64_t loop_start = rte_rdtsc();
  refreshSnapshot();
  cap_on_ = mbox_ != nullptr && mbox_->capture.armed.load(std::memory_order_acquire);
  if (opts_.clock == ClockMode::kTsc) {
    now_ns_ = static_cast<uint64_t>(static_cast<unsigned __int128>(loop_start) * 1000000000ull /
                                    tsc_hz_);
  }
  uint32_t total = 0;
  rte_mbuf* pkts[kBurst];
  // Latency samples: each rx burst's forwarded packets, from the moment rx returned them to
  // the moment the tx burst that sent them returned ([2]: packets handed in by other workers,
  // from the moment this worker took them from its ring).
  uint64_t rx_done[3] = {0, 0, 0};
  uint64_t fwd[3] = {0, 0, 0};
  const bool dist = opts_.software_distribution;
  seq_given_ = dist && shared_.seq_dynfield >= 0;
  if (opts_.merge_by_timestamp) {
    uint32_t n = pollMerged(pkts);
    rx_done[0] = rte_rdtsc();
    cy_[kCyRx] += rx_done[0] - loop_start;
    total = n;
    if (n && dist) {
      n = handOff(pkts, static_cast<uint16_t>(n));
      cy_[kCyDistribute] += rte_rdtsc() - rx_done[0];
    }
    uint64_t q0 = tx_queued_;
    if (n) processBurst(pkts, static_cast<uint16_t>(n));
    fwd[0] = tx_queued_ - q0;
  } else {
    uint64_t t = loop_start;
    for (int s = 0; s < 2; ++s) {
      if (!opts_.poll_rx[s]) continue;
      uint16_t n = rte_eth_rx_burst(opts_.port[s], opts_.queue, pkts, kBurst);
      rx_done[s] = rte_rdtsc();
      cy_[kCyRx] += rx_done[s] - t;
      // Not every PMD fills mbuf->port; the side is where we polled.
      for (uint16_t i = 0; i < n; ++i) pkts[i]->port = opts_.port[s];
      total += n;
      if (n && dist) {
        n = handOff(pkts, n);
        cy_[kCyDistribute] += rte_rdtsc() - rx_done[s];
      }
      uint64_t q0 = tx_queued_;
      if (n) processBurst(pkts, n);
      fwd[s] = tx_queued_ - q0;
      t = rte_rdtsc();
    }
  }
  if (shared_.inbound != nullptr && opts_.clock == ClockMode::kPacketTimestamp) {
    total += pollInboundGroups();  // replay: in the distributor's bursts (distribute.cc)
  } else if (shared_.inbound != nullptr) {
    // Packets other workers received and handed over (software distribution).
    uint64_t t = rte_rdtsc();
    unsigned n = rte_ring_sc_dequeue_burst(shared_.inbound[opts_.id],
                                           reinterpret_cast<void**>(pkts), kBurst, nullptr);
    rx_done[2] = rte_rdtsc();
    cy_[kCyRx] += rx_done[2] - t;
    if (n) {
      c_->dist_handed_in.add(n);
      uint64_t q0 = tx_queued_;
      processBurst(pkts, static_cast<uint16_t>(n));
      fwd[2] = tx_queued_ - q0;
      total += n;
    }
  }
  seq_given_ = false;
  if (input_clock_ > now_ns_) now_ns_ = input_clock_;  // replay: the input's time (ticks)
  uint64_t t_tx = rte_rdtsc();
  flushTx();
  if (opts_.id == 0 && (shared_.tx_ring[0] != nullptr || shared_.tx_ring[1] != nullptr)) {
    drainTxRings();
  }
  uint64_t t_age = rte_rdtsc();
  cy_[kCyTx] += t_age - t_tx;
  for (int s = 0; s < 3; ++s) {
    if (fwd[s]) recordLatency(t_age - rx_done[s], fwd[s]);
  }
  age();
  if (mbox_ != nullptr && mbox_->dump.state.load(std::memory_order_relaxed) == kDumpPending) {
    serviceFlowDump();
  }
  c_->loops.add();
  if (total) c_->busy_loops.add();
  uint64_t loop_end = rte_rdtsc();
  cy_[kCyAging] += loop_end - t_age;
  publishLoopCycles(loop_start, loop_end, total != 0);
  rte_rcu_qsbr_quiescent(shared_.qsbr, opts_.id);
  return total;
}

void Worker::publishLoopCycles(uint64_t loop_start, uint64_t loop_end, bool busy) {
  if (busy) {
    for (int k = 0; k < kCyCount; ++k) {
      if (cy_[k]) c_->cycles[k].add(cy_[k]);
    }
  } else {
    c_->cycles[kCyIdle].add(loop_end - loop_start);
  }
  for (uint64_t& v : cy_) v = 0;
}

void Worker::recordLatency(uint64_t cycles, uint64_t packets) {
  uint64_t ns = static_cast<uint64_t>(static_cast<unsigned __int128>(cycles) * 1000000000ull /
                                      tsc_hz_);
  c_->latency[latencyBucket(ns)].add(packets);
  if (ns > c_->latency_max_ns.load()) c_->latency_max_ns.set(ns);
}


void Worker::processBurst(rte_mbuf** pkts, uint16_t n) {
  Burst& b = *burst_;
  if (n > kBurst) n = kBurst;
  // The burst is judged in segments that end right after a fragment, so every fragment is
  // judged (and a completed datagram forgotten) before the next fragment is looked at:
  // verdicts never depend on where burst boundaries fall.
  uint16_t i = 0;
  uint64_t t = rte_rdtsc();
  while (i < n) {
    uint16_t seg = i;
    b.nflow = 0;
    bool frag = false;
    while (i < n && !frag) frag = classify(pkts, i++, b);
    uint64_t t1 = rte_rdtsc();
    cy_[kCyParse] += t1 - t;
    // The stages read b.work: the packet itself, or the datagram it completed.
    flowStage(b.work, b);  // adds its firewall part to cy_[kCyFirewall] itself
    uint64_t t2 = rte_rdtsc();
    cy_[kCyFlow] += t2 - t1;
    ruleStages(b.work, b, seg, i);
    uint64_t t3 = rte_rdtsc();
    for (uint16_t k = seg; k < i; ++k) finish(pkts[k], k, b);
    if (frag) frags_->flushCompleted();
    t = rte_rdtsc();
    cy_[kCyFinish] += t - t3;
  }
  c_->frag_datagrams_active.set(frags_->size());
  if (dgram_) c_->frag_buffers_in_use.set(dgram_->buffersInUse());
}

// Stage 1 for packet i: parse, non-IP / malformed policies, fragment tracking. Queues the
// packet for the flow stage when it needs one. Returns true when the packet is a fragment.
bool Worker::classify(rte_mbuf** pkts, uint16_t i, Burst& b) {
  rte_mbuf* m = pkts[i];
  PacketVerdict& v = b.v[i];
  PacketMeta& pm = b.meta[i];
  uint8_t side = sideOf(m);
  uint64_t seq;
  if (seq_given_) {  // software distribution: stamped when received (handOff)
    seq = *RTE_MBUF_DYNFIELD(m, shared_.seq_dynfield, uint64_t*);
  } else {
    seq = next_seq_++;
    if (shared_.seq_dynfield >= 0) *RTE_MBUF_DYNFIELD(m, shared_.seq_dynfield, uint64_t*) = seq;
  }
  uint64_t t = packetTime(m);
  if (t > now_ns_) now_ns_ = t;
  b.ts[i] = t;
  b.frag_slot[i] = -1;
  b.frag_follow[i] = -1;
  b.work[i] = m;
  b.reasm_slot[i] = -1;
  b.judge[i] = Burst::kJudgeSelf;
  b.pos[i] = -1;
  b.dir[i] = 0;
  b.hold[i] = 0;
  // --- http --- held-back packets past their timeout leave before this packet.
  if (hold_head_ != kNoHold && holds_[hold_head_].deadline <= t) holdExpire(t);
  c_->rx_packets[side].add();
  c_->rx_bytes[side].add(m->pkt_len);
  v = PacketVerdict{};
  v.seq = seq;
  v.generation = generation_;
  v.in_side = side;
  c_->stage_packets[static_cast<int>(Stage::kParse)].add();
  const auto& d = snap_->dataplane;
  auto drop = [&](Stage st, DropReason r) {
    v.verdict = Verdict::kDrop;
    v.stage = st;
    v.reason = r;
  };

  if (m->nb_segs > 1) {
    pm = PacketMeta{};
    drop(Stage::kParse, DropReason::kMultiSegment);
    return false;
  }
  ParseStatus st = parsePacket(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, pm, &tun_);
  if (st == ParseStatus::kNonIp) {
    if (d.non_ip == rules::Policy::kDrop) {
      drop(Stage::kParse, DropReason::kNonIp);
    } else {
      v.verdict = Verdict::kForward;
      c_->non_ip_forwarded.add();
    }
    return false;
  }
  if (st != ParseStatus::kOk) {
    if (d.malformed == rules::Policy::kDrop) {
      drop(Stage::kParse, dropReasonFromParse(st));
    } else {
      v.verdict = Verdict::kForward;
      c_->malformed_forwarded.add();
    }
    return false;
  }
  if (pm.is_fragment && pm.frag_offset == 0 && !pm.more_fragments) {
    // An IPv6 atomic fragment is a whole datagram, processed on its own (RFC 6946): no
    // tracking, every stage reads it like any packet.
    c_->frag_packets.add();
    c_->frag_atomic.add();
    pm.is_fragment = false;
  }
  if (pm.is_fragment) {
    c_->frag_packets.add();
    c_->stage_packets[static_cast<int>(Stage::kFragment)].add();
    frags_->expireStale(pm, t, [&](void* p, bool r) { dropHeldFragment(p, t, r); });
    int32_t slot = -1;
    FragAction a = frags_->observe(pm, t, &slot, reasm_on_);
    if (a == FragAction::kReassemble) {
      // dataplane/normalize/datagram.h: held until complete, then judged whole.
      if (reasmFragment(pkts, i, b, slot)) return true;
    } else if (firstFragmentMode(a, slot, m, i, b)) {
      return true;
    }
  }
  // The key and its hash, once: the bulk lookup, a re-lookup and an insert all take it.
  uint32_t sig;
  b.src_is_hi[i] = FlowTable::keyAndHash(pm, b.keys[i], &sig);
  b.sig[i] = b.ksig[b.nflow] = sig;
  b.kp[b.nflow] = &b.keys[i];
  b.flow_idx[b.nflow++] = static_cast<uint8_t>(i);
  // A fragment, or the datagram one completed, ends the segment (see processBurst).
  return pm.is_fragment || b.judge[i] != Burst::kJudgeSelf;
}

// A fragment of a datagram judged by its first fragment (no inspecting stage configured,
// or a reassembly that failed open). True when the fragment is done with (verdict set or
// held); false for a first fragment to judge (b.frag_slot[i] set): it goes on to the flow
// stage.
bool Worker::firstFragmentMode(FragAction a, int32_t slot, rte_mbuf* m, uint16_t i, Burst& b) {
  PacketVerdict& v = b.v[i];
  const PacketMeta& pm = b.meta[i];
  const auto& d = snap_->dataplane;
  auto drop = [&](Stage st, DropReason r) {
    v.verdict = Verdict::kDrop;
    v.stage = st;
    v.reason = r;
  };
  // Overlaps under a FORWARD policy still follow their datagram's verdict.
  if ((a == FragAction::kOverlap || a == FragAction::kDuplicateFirst)) {
    c_->frag_overlaps.add();
    if (d.frag_overlapping == rules::Policy::kDrop) {
      drop(Stage::kFragment, DropReason::kFragOverlap);
      return true;
    }
    if (slot < 0) {
      v.verdict = Verdict::kForward;
      return true;
    }
    a = frags_->verdictOf(slot).verdict != 0 ? FragAction::kApply : FragAction::kHold;
  }
  switch (a) {
    case FragAction::kJudge: {
      b.frag_slot[i] = slot;
      if (fragmentIsTiny(pm) && d.frag_tiny == rules::Policy::kDrop) {
        drop(Stage::kFragment, DropReason::kFragTiny);
        return true;
      }
      return false;  // judged by the flow stage
    }
    case FragAction::kApply: {
      const FragVerdict& fv = frags_->verdictOf(slot);
      v.verdict = static_cast<Verdict>(fv.verdict);
      v.stage = static_cast<Stage>(fv.stage);
      v.rule = fv.rule;
      v.flow_id = fv.flow_id;
      b.frag_follow[i] = slot;  // rule stages may act like on the first fragment (lb)
      // Dropped or rejected datagram: its later fragments are dropped (a reject answers
      // the first fragment only).
      if (v.verdict == Verdict::kDrop || v.verdict == Verdict::kReject) {
        drop(Stage::kFragment, DropReason::kFragDatagramDropped);
      }
      return true;
    }
    case FragAction::kHold:
      if (frags_->hold(slot, m)) {
        c_->frag_held.add();
        v.verdict = Verdict::kNone;  // judged when the first fragment arrives
      } else {
        drop(Stage::kFragment, DropReason::kFragHoldFull);
      }
      return true;
    case FragAction::kTooMany:
      drop(Stage::kFragment, DropReason::kFragTooMany);
      return true;
    case FragAction::kTableFull:
      drop(Stage::kFragment, DropReason::kFragTableFull);
      return true;
    default:
      return true;
  }
}

// Stage 2: the flow table for the packets classify() queued, one bulk lookup; then the
// firewall for the flows that need a verdict, one classification for the segment.
void Worker::flowStage(rte_mbuf** pkts, Burst& b) {
  if (b.nflow == 0) return;
  int32_t looked[kBurst];
  flows_->lookupBurstWithHash(b.kp, b.ksig, b.nflow, looked);
  // The flows' hot state, and with an LB service its per-flow record (a separate array,
  // read by lbStage for every packet of a balanced flow), while the loop below starts.
  for (uint32_t j = 0; j < b.nflow; ++j) {
    if (looked[j] >= 0) rte_prefetch0(&flows_->entry(looked[j]));
  }
  if (lb_active_) {
    for (uint32_t j = 0; j < b.nflow; ++j) {
      if (looked[j] < 0) continue;
      rte_prefetch0(&lb_flow_[looked[j]]);  // one line (alignas(64))
    }
  }
  // Positions from the bulk lookup are only valid until this segment inserts or removes a
  // flow; after that, each later packet looks its key up again.
  bool changed = false;
  const auto& dps = snap_->dataplane;
  fwb_.n = 0;
  fwb_.npkt = 0;
  for (uint32_t j = 0; j < b.nflow; ++j) {
    uint8_t i = b.flow_idx[j];
    const PacketMeta& pm = b.meta[i];
    PacketVerdict& v = b.v[i];
    rte_mbuf* m = pkts[i];
    uint64_t t = b.ts[i];
    c_->stage_packets[static_cast<int>(Stage::kFlow)].add();
    int32_t p = looked[j];
    if (changed) p = flows_->lookupWithHash(b.keys[i], b.sig[i]);
    bool is_tcp = pm.l4_proto == kProtoTcp && pm.has_l4;
    bool syn_only = is_tcp && (pm.tcp_flags & (kTcpSyn | kTcpAck)) == kTcpSyn;
    if (p >= 0) {
      FlowEntry& old = flows_->entry(p);
      // A flow idle past its timeout that aging has not reached yet ends here; so does a
      // closed connection whose 5-tuple a new SYN reuses. The packet starts a new flow.
      // (The shortest timeout first: a flow seen within it needs no per-state lookup.)
      bool stale = t > old.last_seen_ns && t - old.last_seen_ns > min_timeout_ns_ &&
                   t - old.last_seen_ns > flowTimeout(old, timeouts_);
      bool reused = syn_only && old.tcp_state == TcpState::kClosed;
      if (stale || reused) {
        emitFlowEnd(p, old, b.keys[i], t,
                    stale ? FlowEndReason::kTimeout : FlowEndReason::kReused);
        if (fwb_.n) fwForget(p);
        // Earlier packets of this segment that belonged to the ended flow are no longer
        // tied to its position (a new flow may take it).
        for (uint32_t q = 0; q < j; ++q) {
          if (b.pos[b.flow_idx[q]] == p) b.pos[b.flow_idx[q]] = -1;
        }
        flowEnded(p);
        flows_->remove(p);
        changed = true;
        if (stale) c_->flows_expired.add();
        p = -1;
      }
    }
    if (p < 0) {
      bool midstream = false;
      if (is_tcp && !syn_only) {
        if (pm.tcp_flags & kTcpRst) {  // stray reset: pass it on, track nothing
          if (fw_active_) {
            fwQueueUntracked(i, b);  // still judged by the rules, on its own
          } else {
            v.verdict = Verdict::kForward;
            c_->untracked_forwarded.add();
          }
          continue;
        }
        // Anything but a bare SYN (data, ACK, FIN, SYN+ACK) means the connection started
        // before the appliance saw it.
        if (dps.tcp_midstream == rules::Policy::kDrop) {
          v.verdict = Verdict::kDrop;
          v.stage = Stage::kFlow;
          v.reason = DropReason::kTcpMidstream;
          continue;
        }
        midstream = true;
      }
      p = flows_->insertWithHash(b.keys[i], b.sig[i], t);
      if (p < 0) {
        c_->flow_table_full.add();
        if (dps.flow_when_full == rules::Policy::kDrop) {
          v.verdict = Verdict::kDrop;
          v.stage = Stage::kFlow;
          v.reason = DropReason::kFlowTableFull;
        } else if (fw_active_) {
          fwQueueUntracked(i, b);
        } else {
          v.verdict = Verdict::kForward;
          c_->untracked_forwarded.add();
        }
        continue;
      }
      changed = true;
      FlowEntry& ne = flows_->entry(p);
      if (b.src_is_hi[i]) ne.flags |= kFlowInitiatorIsHi;
      if (v.in_side == kSideB) ne.flags |= kFlowInitiatorSideB;
      ne.flow_seq = ++flow_seq_;
      ne.rule = kNoRule;
      if (!lb_active_) ne.flags |= kFlowNoLb;  // --- lb --- decided: not balanced
      if (midstream) {
        ne.tcp_state = TcpState::kEstablished;
        ne.flags |= kFlowMidstream;
        c_->flows_midstream.add();
      }
      c_->flows_created.add();
      c_->flows_active.set(flows_->size());
      v.flow_new = true;
    }
    FlowEntry& e = flows_->entry(p);
    int dir = (b.src_is_hi[i] == ((e.flags & kFlowInitiatorIsHi) != 0)) ? 0 : 1;
    b.pos[i] = p;
    b.dir[i] = static_cast<uint8_t>(dir);
    if (t > e.last_seen_ns) e.last_seen_ns = t;
    e.packets[dir]++;
    e.bytes[dir] += m->pkt_len;
    if (is_tcp) tcpAdvance(e, pm.tcp_flags, dir);
    v.flow_id = flowId(e);
    if (e.verdict != 0 && e.generation != generation_ && fw_active_) {
      // A verdict from an earlier generation stays when the firewall did not change since,
      // and, with keep-established (reevaluate_on_change off), for an allowed flow.
      if (e.generation >= fw_since_ ||
          (!fw_reevaluate_ && e.verdict == static_cast<uint8_t>(Verdict::kForward))) {
        fwRestamp(p, e);
      }
    }
    if (e.verdict != 0 && e.generation == generation_) {
      v.verdict = static_cast<Verdict>(e.verdict);
      v.stage = static_cast<Stage>(e.stage);
      v.rule = e.rule;
      if (v.stage == Stage::kFirewall && v.verdict != Verdict::kForward) {
        v.reason = v.verdict == Verdict::kDrop ? DropReason::kFirewallDeny
                                               : DropReason::kFirewallReject;
      }
      countRuleHit(e.rule, e.stage, m->pkt_len, t);
      c_->flow_cache_hits.add();
      continue;
    }
    if (fw_active_) {
      fwQueueFlow(i, p, e, b);
      continue;
    }
    // Rule stages (geoip, dns, dpi, lb) join here on a flow's first packet and after a
    // snapshot change; with none configured every flow is forwarded.
    v.verdict = Verdict::kForward;
    e.verdict = static_cast<uint8_t>(Verdict::kForward);
    e.stage = static_cast<uint8_t>(Stage::kNone);
    e.rule = kNoRule;
    e.generation = generation_;
  }
  if (fwb_.n) {
    uint64_t t = rte_rdtsc();
    fwClassify(pkts, b);
    uint64_t d = rte_rdtsc() - t;
    cy_[kCyFirewall] += d;
    cy_[kCyFlow] -= d;  // processBurst adds the whole flowStage to kCyFlow
  }
}

void Worker::fwLookupCountries(const rules::FwQuery& q, char src[2], char dst[2]) {
  src[0] = src[1] = dst[0] = dst[1] = 0;
  if (geo_ == nullptr) return;
  IpAddr a;
  std::memcpy(a.b, q.src.data(), 16);
  geo_->country(a, q.v6, src);
  std::memcpy(a.b, q.dst.data(), 16);
  geo_->country(a, q.v6, dst);
  c_->geoip_lookups.add(2);
}

void Worker::fwQueueFlow(uint8_t i, int32_t pos, const FlowEntry& e, const Burst& b) {
  uint32_t k = 0;
  while (k < fwb_.n && fwb_.pos[k] != pos) ++k;  // a second packet of a queued flow
  if (k == fwb_.n) {
    rules::FwQuery& q = fwb_.q[k];
    fwQueryForFlow(b.keys[i], e.flags, q);
    if (fw_countries_) {
      FlowCold& c = flows_->cold(pos);
      if (!c.countries_known) {
        fwLookupCountries(q, c.src_country, c.dst_country);
        // Without a database nothing is known yet: look again once there is one.
        c.countries_known = geo_ != nullptr;
      }
      q.src_cc = fwc_->countryIndex(c.src_country);
      q.dst_cc = fwc_->countryIndex(c.dst_country);
    }
    fwb_.qp[k] = &q;
    fwb_.pos[k] = pos;
    fwb_.is_flow[k] = true;
    ++fwb_.n;
  }
  fwb_.pkt[fwb_.npkt] = i;
  fwb_.pkt_q[fwb_.npkt++] = static_cast<uint8_t>(k);
}

void Worker::fwQueueUntracked(uint8_t i, const Burst& b) {
  uint32_t k = fwb_.n++;
  rules::FwQuery& q = fwb_.q[k];
  fwQueryForPacket(b.meta[i], b.v[i].in_side, q);
  if (fw_countries_) {
    char src[2], dst[2];
    fwLookupCountries(q, src, dst);
    q.src_cc = fwc_->countryIndex(src);
    q.dst_cc = fwc_->countryIndex(dst);
  }
  fwb_.qp[k] = &q;
  fwb_.pos[k] = -1;
  fwb_.is_flow[k] = false;
  fwb_.pkt[fwb_.npkt] = i;
  fwb_.pkt_q[fwb_.npkt++] = static_cast<uint8_t>(k);
}

void Worker::fwForget(int32_t pos) {
  for (uint32_t k = 0; k < fwb_.n; ++k) {
    if (fwb_.pos[k] == pos) fwb_.pos[k] = -1;
  }
}

void Worker::fwRestamp(int32_t pos, FlowEntry& e) {
  if (e.generation < fw_since_ && e.stage == static_cast<uint8_t>(Stage::kFirewall) &&
      e.rule != kNoRule) {
    // Kept across a change of the rules: the rule is found again by its identity.
    e.rule = state_->indexOfUid(flow_uid_[pos]);
  }
  e.generation = generation_;
}

void Worker::fwClassify(rte_mbuf** pkts, Burst& b) {
  fw_->classifyBurst(fwb_.qp, fwb_.n, fwb_.rule);
  for (uint32_t k = 0; k < fwb_.n; ++k) {
    int64_t r = fwb_.rule[k];
    rules::FwAction a = r >= 0 ? fwc_->rules[r].action
                               : fwc_->default_action[fwb_.q[k].dir == 2 ? 1 : 0];
    Verdict vd = a == rules::FwAction::kAllow  ? Verdict::kForward
                 : a == rules::FwAction::kDeny ? Verdict::kDrop
                                               : Verdict::kReject;
    switch (vd) {
      case Verdict::kForward: c_->fw_allowed.add(); break;
      case Verdict::kDrop: c_->fw_denied.add(); break;
      default: c_->fw_rejected.add(); break;
    }
    if (r >= 0 && fwb_.is_flow[k] && static_cast<uint32_t>(r) < fw_nrules_) {
      hits_[r].flows.add();
    }
    int32_t pos = fwb_.pos[k];
    if (pos >= 0) {
      FlowEntry& e = flows_->entry(pos);
      e.verdict = static_cast<uint8_t>(vd);
      e.stage = static_cast<uint8_t>(r >= 0 || vd != Verdict::kForward ? Stage::kFirewall
                                                                        : Stage::kNone);
      e.rule = r >= 0 ? static_cast<uint32_t>(r) : kNoRule;
      e.generation = generation_;
      flow_uid_[pos] = r >= 0 ? state_->rule_uid[r] : 0;
    }
  }
  for (uint32_t n = 0; n < fwb_.npkt; ++n) {
    uint8_t i = fwb_.pkt[n];
    uint32_t k = fwb_.pkt_q[n];
    int64_t r = fwb_.rule[k];
    rules::FwAction a = r >= 0 ? fwc_->rules[r].action
                               : fwc_->default_action[fwb_.q[k].dir == 2 ? 1 : 0];
    PacketVerdict& v = b.v[i];
    c_->stage_packets[static_cast<int>(Stage::kFirewall)].add();
    v.rule = r >= 0 ? static_cast<uint32_t>(r) : kNoRule;
    if (a == rules::FwAction::kAllow) {
      v.verdict = Verdict::kForward;
      v.stage = r >= 0 ? Stage::kFirewall : Stage::kNone;
      if (!fwb_.is_flow[k]) c_->untracked_forwarded.add();
    } else {
      v.verdict = a == rules::FwAction::kDeny ? Verdict::kDrop : Verdict::kReject;
      v.stage = Stage::kFirewall;
      v.reason = a == rules::FwAction::kDeny ? DropReason::kFirewallDeny
                                             : DropReason::kFirewallReject;
    }
    if (r >= 0) countRuleHit(static_cast<uint32_t>(r), static_cast<uint8_t>(Stage::kFirewall),
                             pkts[i]->pkt_len, b.ts[i]);
  }
}

// Stage 3 for packet i: record a first fragment's verdict for its datagram, act on the
// verdict, then release the fragments that were waiting for it.
void Worker::finish(rte_mbuf* m, uint16_t i, Burst& b) {
  PacketVerdict& v = b.v[i];
  if (v.verdict == Verdict::kNone) return;  // held fragment
  if (b.judge[i] == Burst::kJudgeDatagram) {
    finishDatagram(m, i, b);
    return;
  }
  // A fragment that failed open hands its datagram's held first fragment to be judged in
  // its place (it is held itself and released below).
  m = b.work[i];
  int32_t slot = b.frag_slot[i];
  if (slot >= 0) {
    FragVerdict fv{static_cast<uint8_t>(v.verdict), static_cast<uint8_t>(v.stage), v.rule,
                   static_cast<uint8_t>(v.reason), v.flow_id};
    frags_->setVerdict(slot, fv);
  }
  // --- http --- hold-back (http_path.cc): the direction's held packet released or dropped
  // first; this one held when the HTTP stage asks for it.
  if ((held_n_ != 0 || (b.hold[i] & Burst::kHoldWanted)) && slot < 0 &&
      b.judge[i] == Burst::kJudgeSelf && holdFinish(m, i, b)) {
    return;
  }
  if (v.verdict == Verdict::kDrop || v.verdict == Verdict::kReject) {
    emitDrop(&b.meta[i], v, b.ts[i]);
  }
  if (v.verdict == Verdict::kReject) sendReject(m, b.meta[i], v.in_side, v.stage == Stage::kDpi);
  applyVerdict(m, v, v.in_side);
  if (slot >= 0) releaseFragments(slot, v, b.ts[i]);
}

// Answers a rejected packet out of its ingress port: a TCP RST to the sender (and, for a
// segment of a connection, one to the receiver out of the other port), else an ICMP /
// ICMPv6 administratively-prohibited unreachable. The mbufs come from the packet pool; the
// frames are stamped with the rejected packet's receive time (pcap outputs).
void Worker::sendReject(rte_mbuf* m, const PacketMeta& pm, uint8_t in_side, bool dpi) {
  const uint8_t* f = rte_pktmbuf_mtod(m, const uint8_t*);
  bool tcp = pm.l4_proto == kProtoTcp && pm.has_l4;
  auto send = [&](uint8_t out_side, bool to_sender) {
    if (shared_.pkt_pool == nullptr) {
      c_->fw_reject_nombuf.add();
      return;
    }
    rte_mbuf* r = rte_pktmbuf_alloc(shared_.pkt_pool);
    if (r == nullptr) {
      c_->fw_reject_nombuf.add();
      return;
    }
    uint8_t* out = rte_pktmbuf_mtod(r, uint8_t*);
    uint32_t cap = rte_pktmbuf_tailroom(r);
    uint16_t len = tcp ? buildTcpReset(f, m->data_len, pm, to_sender, out, cap)
                       : buildIcmpUnreachable(f, m->data_len, pm, out, cap);
    if (len == 0) {
      rte_pktmbuf_free(r);
      c_->fw_reject_suppressed.add();
      return;
    }
    r->data_len = len;
    r->pkt_len = len;
    queueGenerated(r, out_side, m);
    if (tcp) {
      (dpi ? c_->dpi_rst_sent : c_->fw_rst_sent).add();  // --- dpi --- its own counter
    } else {
      c_->fw_icmp_sent.add();
    }
  };
  send(in_side, true);
  if (tcp && (pm.tcp_flags & kTcpAck) && !(pm.tcp_flags & kTcpRst)) send(in_side ^ 1, false);
}

void Worker::queueGenerated(rte_mbuf* r, uint8_t out_side, const rte_mbuf* like) {
  r->port = opts_.port[out_side];
  if (shared_.ts_dynfield >= 0 && (like->ol_flags & shared_.ts_dynflag)) {
    *RTE_MBUF_DYNFIELD(r, shared_.ts_dynfield, uint64_t*) =
        *RTE_MBUF_DYNFIELD(like, shared_.ts_dynfield, const uint64_t*);
    r->ol_flags |= shared_.ts_dynflag;
  }
  if (ntx_[out_side] == kTxCap) flushTx();
  tx_[out_side][ntx_[out_side]++] = r;
}

void Worker::releaseFragments(int32_t slot, const PacketVerdict& first, uint64_t now) {
  frags_->releaseHeldTo(slot, [&](void* p) {
    followFragment(static_cast<rte_mbuf*>(p), slot, first, now);
  });
}

// A fragment given its datagram's verdict `first` (judged on another packet).
void Worker::followFragment(rte_mbuf* hm, int32_t slot, const PacketVerdict& first,
                            uint64_t now) {
  PacketVerdict hv = first;
  hv.seq = shared_.seq_dynfield >= 0 ? *RTE_MBUF_DYNFIELD(hm, shared_.seq_dynfield, uint64_t*)
                                     : 0;
  hv.in_side = sideOf(hm);
  hv.flow_new = false;
  if (hv.verdict == Verdict::kForward) {
    if (lb_seen_) {  // --- lb --- the first fragment's backend
      PacketMeta hmeta;
      parsePacket(rte_pktmbuf_mtod(hm, const uint8_t*), hm->data_len, hmeta, &tun_);
      if (!lbFollowFragment(hm, hmeta, slot, hv)) emitDrop(&hmeta, hv, now);
    }
  } else if (hv.verdict == Verdict::kDrop || hv.verdict == Verdict::kReject) {
    hv.verdict = Verdict::kDrop;
    hv.reason = DropReason::kFragDatagramDropped;
    hv.stage = Stage::kFragment;
    PacketMeta hmeta;
    parsePacket(rte_pktmbuf_mtod(hm, const uint8_t*), hm->data_len, hmeta, &tun_);
    emitDrop(&hmeta, hv, now);
  }
  applyVerdict(hm, hv, hv.in_side);
}

void Worker::applyVerdict(rte_mbuf* m, const PacketVerdict& v, uint8_t in_side) {
  if (cap_on_) capturePacket(m, v, in_side);
  c_->verdicts[static_cast<int>(v.verdict)].add();
  if (v.verdict == Verdict::kForward) {
    ++tx_queued_;
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
    if (!opts_.tx_direct[s]) {
      // No tx queue of our own: through the side's ring to worker 0, which sends and counts
      // them (drainTxRings). Order within the ring is this worker's order.
      ntx_[s] = 0;
      unsigned put = rte_ring_mp_enqueue_burst(shared_.tx_ring[s],
                                               reinterpret_cast<void**>(tx_[s]), n, nullptr);
      while (put < n && opts_.lossless && !shared_.stop->load(std::memory_order_relaxed)) {
        rte_pause();
        put += rte_ring_mp_enqueue_burst(shared_.tx_ring[s],
                                         reinterpret_cast<void**>(tx_[s] + put), n - put, nullptr);
      }
      for (uint16_t i = put; i < n; ++i) {
        c_->drops[static_cast<int>(DropReason::kTxFailed)].add();
        rte_pktmbuf_free(tx_[s][i]);
      }
      continue;
    }
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

Event* Worker::newEvent() {
  if (!events_ || !shared_.event_pool) return nullptr;
  void* obj = nullptr;
  if (rte_mempool_get(shared_.event_pool, &obj) != 0) {
    c_->events_lost.add();
    return nullptr;
  }
  Event* ev = static_cast<Event*>(obj);
  std::memset(ev, 0, sizeof(*ev));
  return ev;
}

void Worker::postEvent(Event* ev) {
  if (rte_ring_sp_enqueue(events_, ev) != 0) {
    rte_mempool_put(shared_.event_pool, ev);
    c_->events_lost.add();
  }
}

void Worker::emitDrop(const PacketMeta* meta, const PacketVerdict& v, uint64_t now) {
  Event* ev = newEvent();
  if (!ev) return;
  ev->type = EventType::kDrop;
  ev->worker = static_cast<uint8_t>(opts_.id);
  ev->in_side = v.in_side;
  ev->stage = v.stage;
  ev->reason = v.reason;
  ev->verdict = v.verdict;
  ev->rule = v.rule;
  ev->generation = v.generation;
  ev->ts_ns = now;
  ev->seq = v.seq;
  ev->flow_id = v.flow_id;
  if (meta) eventPacket(*ev, *meta);
  postEvent(ev);
}

Event* Worker::uninspectedEvent(const Burst& b, uint16_t i, Stage stage, DropReason why) {
  Event* ev = newEvent();
  if (ev == nullptr) return nullptr;
  ev->type = EventType::kUninspected;
  ev->worker = static_cast<uint8_t>(opts_.id);
  ev->stage = stage;
  ev->reason = why;
  ev->verdict = Verdict::kForward;
  ev->rule = kNoRule;
  ev->generation = generation_;
  ev->ts_ns = b.ts[i];
  ev->in_side = b.v[i].in_side;
  ev->seq = b.v[i].seq;
  return ev;
}

void Worker::eventPacket(Event& ev, const PacketMeta& pm) {
  if (pm.l3 != L3Type::kNone) {
    ev.ip_ver = static_cast<uint8_t>(pm.l3);
    ev.proto = pm.l4_proto;
    ev.sport = pm.sport;
    ev.dport = pm.dport;
    ev.src = pm.src;
    ev.dst = pm.dst;
  }
  ev.vlan = pm.vlan_outer;
}

void Worker::emitFlowEnd(int32_t pos, const FlowEntry& e, const FlowKey& k, uint64_t now,
                         FlowEndReason why) {
  flow_end_why_ = why;  // for the stages' flow-end work that follows (flowEnded)
  Event* ev = newEvent();
  if (!ev) return;
  ev->type = EventType::kFlowEnd;
  ev->worker = static_cast<uint8_t>(opts_.id);
  ev->end_reason = why;
  ev->in_side = (e.flags & kFlowInitiatorSideB) ? kSideB : kSideA;
  ev->verdict = static_cast<Verdict>(e.verdict);
  ev->stage = static_cast<Stage>(e.stage);
  ev->rule = e.rule;
  ev->ts_ns = now;
  ev->flow_id = flowId(e);
  ev->first_seen_ns = flows_->cold(pos).first_seen_ns;
  ev->generation = e.generation;
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
  dpiFlowEndVerdict(pos, *ev);  // --- dpi --- a flow DPI blocked ends dropped / reset
  postEvent(ev);
}

// Slots to examine now: the whole table is swept once per kAgingSweepNs of (packet or TSC)
// time, at most aging_slice_ slots per call, so an idle worker or a small table costs nearly
// nothing per loop. Flows past their timeout are also ended when their next packet comes.
uint32_t Worker::agingBudget(AgingClock& c, uint32_t capacity) {
  constexpr uint64_t kAgingSweepNs = 1000000000ull;
  if (c.last_ns == 0 || now_ns_ < c.last_ns) {
    c.last_ns = now_ns_;
    return 0;
  }
  uint64_t dt = now_ns_ - c.last_ns;
  c.last_ns = now_ns_;
  unsigned __int128 add = static_cast<unsigned __int128>(dt) * capacity / kAgingSweepNs;
  c.credit = static_cast<uint64_t>(std::min<unsigned __int128>(c.credit + add, capacity));
  uint32_t budget = static_cast<uint32_t>(std::min<uint64_t>(c.credit, aging_slice_));
  c.credit -= budget;
  return budget;
}

void Worker::age() {
  uint32_t budget = agingBudget(flow_aging_, flows_->capacity());
  uint32_t expired = 0;
  if (budget) {
    expired = flows_->age(now_ns_, budget, timeouts_,
                          [&](int32_t pos, const FlowEntry& e, const FlowKey& k) {
                            emitFlowEnd(pos, e, k, now_ns_, FlowEndReason::kTimeout);
                            flowEnded(pos);
                          });
  }
  if (expired) {
    c_->flows_expired.add(expired);
    c_->flows_active.set(flows_->size());
  }
  uint32_t frag_budget = agingBudget(frag_aging_, frags_->capacity());
  if (frag_budget) ageFragments(now_ns_, frag_budget);
  if (hold_head_ != kNoHold && holds_[hold_head_].deadline <= now_ns_) {
    holdExpire(now_ns_);  // --- http --- held-back packets past their timeout
    flushTx();
  }
}

void Worker::dropHeldFragment(void* p, uint64_t now, bool reassembled) {
  rte_mbuf* hm = static_cast<rte_mbuf*>(p);
  PacketVerdict hv;
  hv.seq = shared_.seq_dynfield >= 0 ? *RTE_MBUF_DYNFIELD(hm, shared_.seq_dynfield, uint64_t*) : 0;
  hv.generation = generation_;
  hv.in_side = sideOf(hm);
  hv.verdict = Verdict::kDrop;
  hv.stage = Stage::kFragment;
  // Reassembled datagrams hold every fragment: what is missing may be any of them.
  hv.reason = reassembled ? DropReason::kFragIncomplete : DropReason::kFragTimeout;
  c_->frag_timeouts.add();
  PacketMeta hmeta;
  parsePacket(rte_pktmbuf_mtod(hm, const uint8_t*), hm->data_len, hmeta, &tun_);
  emitDrop(&hmeta, hv, now);
  applyVerdict(hm, hv, hv.in_side);
}

// `expire_at` decides what is stale; events carry the worker's current time.
void Worker::ageFragments(uint64_t expire_at, uint32_t budget) {
  frags_->age(expire_at, budget, [&](void* p, bool r) { dropHeldFragment(p, now_ns_, r); });
  c_->frag_datagrams_active.set(frags_->size());
  if (dgram_) c_->frag_buffers_in_use.set(dgram_->buffersInUse());
}

bool Worker::drainFragments(uint32_t budget) {
  ageFragments(UINT64_MAX, budget);
  flushTx();
  return frags_->size() == 0;
}

bool Worker::endFlows(uint32_t budget) {
  flows_->age(UINT64_MAX, budget, timeouts_, [&](int32_t pos, const FlowEntry& e, const FlowKey& k) {
    emitFlowEnd(pos, e, k, now_ns_, FlowEndReason::kShutdown);
    flowEnded(pos);
  });
  flushTx();  // --- http --- packets released from the hold-back by the flows' end
  return flows_->size() == 0;
}

}  // namespace dpu::dp
