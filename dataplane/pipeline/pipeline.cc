// The worker's loop (worker.h; docs/architecture.md): parse, flow, the stages, verdicts.
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_pause.h>
#include <rte_prefetch.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include <time.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "dataplane/packet/parser.h"
#include "dataplane/pipeline/distributor.h"
#include "dataplane/pipeline/stage_list.h"
#include "dataplane/pipeline/worker.h"
#include "dataplane/stages/firewall/firewall_stage.h"
#include "dataplane/stages/frag/frag_stage.h"

namespace dpu::dp {
namespace {

constexpr uint8_t kProtoTcp = 6;

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

Worker::Worker() = default;

absl::StatusOr<std::unique_ptr<Worker>> Worker::create(const WorkerOptions& opts,
                                                       const WorkerShared& shared,
                                                       const rules::DataplaneSettings& settings,
                                                       WorkerCounters* counters,
                                                       rte_ring* events,
                                                       const std::vector<StageSpec>* extra) {
  std::unique_ptr<Worker> w(new Worker());
  PathContext& cx = w->cx_;
  cx.opts = opts;
  cx.shared = shared;
  cx.c = counters;
  cx.events = events;
  w->burst_ = std::make_unique<Burst>();
  cx.burst = w->burst_.get();
  FlowTableOptions fo;
  fo.name = absl::StrCat("flows_w", opts.id);
  fo.capacity = settings.flow_capacity;
  fo.socket_id = static_cast<int>(rte_socket_id());
  auto ft = FlowTable::create(fo);
  if (!ft.ok()) return ft.status();
  w->flows_ = std::move(*ft);
  cx.flows = w->flows_.get();
  w->closed_.reset(new uint8_t[w->flows_->capacity()]());
  cx.closed = w->closed_.get();
  cx.stages = &w->stages_;
  auto fr = FragStage::create(cx, settings);
  if (!fr.ok()) return fr.status();
  w->frag_ = std::move(*fr);
  cx.frag_slots = w->frag_->capacity();
  cx.tsc_hz = rte_get_tsc_hz();
  counters->tsc_hz.set(cx.tsc_hz);
  // The stages, in order: the built-in list (stage_list.cc), then the extra ones.
  auto add = [&](const StageSpec& spec) -> absl::Status {
    if (w->stages_.size() == kMaxStages) {
      return absl::ResourceExhaustedError(absl::StrCat("worker ", opts.id, ": more than ",
                                                       kMaxStages, " stages"));
    }
    auto st = spec.make(cx, settings);
    if (!st.ok()) return st.status();
    w->stages_.push_back(std::move(*st));
    return absl::OkStatus();
  };
  for (const StageSpec& spec : builtinStages()) {
    if (absl::Status s = add(spec); !s.ok()) return s;
  }
  if (extra != nullptr) {
    for (const StageSpec& spec : *extra) {
      if (absl::Status s = add(spec); !s.ok()) return s;
    }
  }
  for (const auto& s : w->stages_) {
    if (auto* f = dynamic_cast<FirewallStage*>(s.get())) w->fw_ = f;
  }
  if (w->fw_ == nullptr) return absl::InternalError("the stage list has no firewall stage");
  if (opts.software_distribution || shared.inbound != nullptr || shared.tx_ring[0] != nullptr ||
      shared.tx_ring[1] != nullptr) {
    w->dist_ = std::make_unique<Distributor>(cx);
  }
  return w;
}

Worker::~Worker() {
  frag_.reset();    // its held fragments freed, its buffers given back
  stages_.clear();  // the holder frees what it holds
  for (int s = 0; s < 2; ++s) {
    for (uint16_t i = 0; i < cx_.ntx[s]; ++i) rte_pktmbuf_free(cx_.tx[s][i]);
    for (uint16_t i = 0; i < ahead_n_[s]; ++i) rte_pktmbuf_free(ahead_[s][ahead_head_[s] + i]);
  }
}

const PathStage* Worker::stage(std::string_view name) const {
  for (const auto& s : stages_) {
    if (name == s->name()) return s.get();
  }
  return nullptr;
}

void Worker::refreshSnapshot() {
  // Every loop, without an early return on an unchanged pointer: a freed state's address
  // can come back for a later state.
  const PublishedState* st = cx_.shared.state->load(std::memory_order_acquire);
  cx_.state = st;
  const rules::Snapshot* s = st->snap.get();
  cx_.snap = s;
  cx_.cap_on = cx_.mbox != nullptr && cx_.mbox->capture.armed.load(std::memory_order_acquire);
  // Every loop (a few stores): a test may publish settings under an unchanged generation.
  cx_.tun = toTunnelParseConfig(s->dataplane);
  if (s->generation != cx_.generation) {
    cx_.generation = s->generation;
    timeouts_ = toTimeouts(s->dataplane);
    min_timeout_ns_ = std::min({timeouts_.tcp_syn_ns, timeouts_.tcp_established_ns,
                                timeouts_.tcp_closing_ns, timeouts_.tcp_closed_ns,
                                timeouts_.udp_ns, timeouts_.icmp_ns, timeouts_.other_ns});
    aging_slice_ = s->dataplane.aging_slice;
    cx_.c->generation.set(cx_.generation);
  }
  if (dist_) dist_->refresh();
  // What the stages ask of the loop, asked again every loop.
  cx_.reassemble = false;
  cx_.follow_fragments = false;
  cx_.new_flow_flags = 0;
  cx_.prefetch_base = nullptr;
  cx_.prefetch_stride = 0;
  nactive_ = 0;
  for (const auto& stage : stages_) {
    if (stage->refresh() && stage->perSegment()) active_[nactive_++] = stage.get();
  }
}

uint32_t Worker::drainTxRings() { return dist_ ? dist_->drainTxRings() : 0; }

uint32_t Worker::inboundCount() const {
  return cx_.shared.inbound != nullptr ? rte_ring_count(cx_.shared.inbound[cx_.opts.id]) : 0;
}

int Worker::run() {
  rte_rcu_qsbr_thread_register(cx_.shared.qsbr, cx_.opts.id);
  rte_rcu_qsbr_thread_online(cx_.shared.qsbr, cx_.opts.id);
  const uint32_t max_sleep_us = cx_.opts.idle_sleep_max_us;
  uint32_t empty_loops = 0, sleep_us = 0;
  while (!cx_.shared.stop->load(std::memory_order_relaxed)) {
    if (pollOnce() != 0 || max_sleep_us == 0) {
      empty_loops = 0;
      sleep_us = 0;
      continue;
    }
    if (++empty_loops < kIdleLoopsBeforeSleep) continue;
    // Idle polling: nothing came for a while. Offline, a sleeping worker holds up no RCU
    // grace period (a config publish does not wait for its sleep); its flows age and its
    // mailbox is served between sleeps, which stay short (at most max_sleep_us).
    sleep_us = std::min(sleep_us == 0 ? kIdleFirstSleepUs : sleep_us * 2, max_sleep_us);
    rte_rcu_qsbr_thread_offline(cx_.shared.qsbr, cx_.opts.id);
    const uint64_t t0 = rte_rdtsc();
    struct timespec ts = {0, static_cast<long>(sleep_us) * 1000};
    nanosleep(&ts, nullptr);
    cx_.c->idle_sleeps.add();
    cx_.c->idle_sleep_us.add((rte_rdtsc() - t0) * 1000000 / cx_.tsc_hz);
    rte_rcu_qsbr_thread_online(cx_.shared.qsbr, cx_.opts.id);
  }
  flushTx();
  rte_rcu_qsbr_thread_offline(cx_.shared.qsbr, cx_.opts.id);
  rte_rcu_qsbr_thread_unregister(cx_.shared.qsbr, cx_.opts.id);
  return 0;
}

uint32_t Worker::pollMerged(rte_mbuf** out) {
  uint32_t k = 0;
  while (k < kBurst && next_seq_ + k < input_limit_) {
    for (int s = 0; s < 2; ++s) {
      if (ahead_n_[s] == 0 && !exhausted_[s]) {
        ahead_head_[s] = 0;
        ahead_n_[s] = rte_eth_rx_burst(cx_.opts.port[s], cx_.opts.queue, ahead_[s], kBurst);
        if (ahead_n_[s] == 0) exhausted_[s] = true;
        for (uint16_t i = 0; i < ahead_n_[s]; ++i) ahead_[s][i]->port = cx_.opts.port[s];
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
      uint64_t ta = cx_.packetTime(ahead_[0][ahead_head_[0]]);
      uint64_t tb = cx_.packetTime(ahead_[1][ahead_head_[1]]);
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
  if (cx_.opts.clock == ClockMode::kTsc) {
    cx_.now_ns = static_cast<uint64_t>(static_cast<unsigned __int128>(loop_start) * 1000000000ull /
                                       cx_.tsc_hz);
  }
  uint32_t total = 0;
  rte_mbuf* pkts[kBurst];
  // Latency samples: each rx burst's forwarded packets, from the moment rx returned them to
  // the moment the tx burst that sent them returned ([2]: packets handed in by other workers,
  // from the moment this worker took them from its ring).
  uint64_t rx_done[3] = {0, 0, 0};
  uint64_t fwd[3] = {0, 0, 0};
  const bool dist = cx_.opts.software_distribution;
  seq_given_ = dist && cx_.shared.seq_dynfield >= 0;
  if (cx_.opts.merge_by_timestamp) {
    uint32_t n = pollMerged(pkts);
    rx_done[0] = rte_rdtsc();
    cx_.cy[kCyRx] += rx_done[0] - loop_start;
    total = n;
    if (n && dist) {
      n = dist_->handOff(pkts, static_cast<uint16_t>(n), &next_seq_);
      cx_.cy[kCyDistribute] += rte_rdtsc() - rx_done[0];
    }
    uint64_t q0 = cx_.tx_queued;
    if (n) processBurst(pkts, static_cast<uint16_t>(n));
    fwd[0] = cx_.tx_queued - q0;
  } else {
    uint64_t t = loop_start;
    for (int s = 0; s < 2; ++s) {
      if (!cx_.opts.poll_rx[s]) continue;
      uint16_t n = rte_eth_rx_burst(cx_.opts.port[s], cx_.opts.queue, pkts, kBurst);
      rx_done[s] = rte_rdtsc();
      cx_.cy[kCyRx] += rx_done[s] - t;
      // Not every PMD fills mbuf->port; the side is where we polled.
      for (uint16_t i = 0; i < n; ++i) pkts[i]->port = cx_.opts.port[s];
      total += n;
      if (n && dist) {
        n = dist_->handOff(pkts, n, &next_seq_);
        cx_.cy[kCyDistribute] += rte_rdtsc() - rx_done[s];
      }
      uint64_t q0 = cx_.tx_queued;
      if (n) processBurst(pkts, n);
      fwd[s] = cx_.tx_queued - q0;
      t = rte_rdtsc();
    }
  }
  if (cx_.shared.inbound != nullptr && cx_.opts.clock == ClockMode::kPacketTimestamp) {
    // Replay: in the distributor's bursts (distributor.h).
    total += dist_->pollInboundGroups([this](rte_mbuf** p, uint16_t n) { processBurst(p, n); });
  } else if (cx_.shared.inbound != nullptr) {
    // Packets other workers received and handed over (software distribution).
    uint64_t t = rte_rdtsc();
    unsigned n = rte_ring_sc_dequeue_burst(cx_.shared.inbound[cx_.opts.id],
                                           reinterpret_cast<void**>(pkts), kBurst, nullptr);
    rx_done[2] = rte_rdtsc();
    cx_.cy[kCyRx] += rx_done[2] - t;
    if (n) {
      cx_.c->dist_handed_in.addRelease(n);
      uint64_t q0 = cx_.tx_queued;
      processBurst(pkts, static_cast<uint16_t>(n));
      fwd[2] = cx_.tx_queued - q0;
      total += n;
    }
  }
  seq_given_ = false;
  // Replay: the input's time (the distributor's clock ticks).
  if (dist_ && dist_->inputClock() > cx_.now_ns) cx_.now_ns = dist_->inputClock();
  uint64_t t_tx = rte_rdtsc();
  flushTx();
  if (cx_.opts.id == 0 && (cx_.shared.tx_ring[0] != nullptr || cx_.shared.tx_ring[1] != nullptr)) {
    drainTxRings();
  }
  uint64_t t_age = rte_rdtsc();
  cx_.cy[kCyTx] += t_age - t_tx;
  for (int s = 0; s < 3; ++s) {
    if (fwd[s]) recordLatency(t_age - rx_done[s], fwd[s]);
  }
  age();
  if (cx_.mbox != nullptr && cx_.mbox->dump.state.load(std::memory_order_relaxed) == kDumpPending) {
    serviceFlowDump();
  }
  cx_.c->loops.add();
  if (total) cx_.c->busy_loops.add();
  uint64_t loop_end = rte_rdtsc();
  cx_.cy[kCyAging] += loop_end - t_age;
  publishLoopCycles(loop_start, loop_end, total != 0);
  rte_rcu_qsbr_quiescent(cx_.shared.qsbr, cx_.opts.id);
  return total;
}

void Worker::publishLoopCycles(uint64_t loop_start, uint64_t loop_end, bool busy) {
  if (busy) {
    for (int k = 0; k < kCyCount; ++k) {
      if (cx_.cy[k]) cx_.c->cycles[k].add(cx_.cy[k]);
    }
  } else {
    cx_.c->cycles[kCyIdle].add(loop_end - loop_start);
  }
  for (uint64_t& v : cx_.cy) v = 0;
}

void Worker::recordLatency(uint64_t cycles, uint64_t packets) {
  uint64_t ns = static_cast<uint64_t>(static_cast<unsigned __int128>(cycles) * 1000000000ull /
                                      cx_.tsc_hz);
  cx_.c->latency[latencyBucket(ns)].add(packets);
  if (ns > cx_.c->latency_max_ns.load()) cx_.c->latency_max_ns.set(ns);
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
    while (i < n && !frag) frag = classify(pkts, i++);
    uint64_t t1 = rte_rdtsc();
    cx_.cy[kCyParse] += t1 - t;
    // The stages read b.work: the packet itself, or the datagram it completed.
    flowStep(b.work);  // adds its firewall part to cy[kCyFirewall] itself
    uint64_t t2 = rte_rdtsc();
    cx_.cy[kCyFlow] += t2 - t1;
    // Stage by stage over the segment (each stage's code and tables stay hot for the whole
    // segment), in order: a packet reaches a stage only while it is still forwarded, so a
    // stage that drops or rejects hides it from the later ones, exactly as a per-packet
    // chain would. Packets of one flow keep their order within every stage.
    for (uint16_t s = 0; s < nactive_; ++s) {
      PathStage* st = active_[s];
      st->run(seg, i);
      const uint64_t t4 = rte_rdtsc();
      cx_.cy[st->cycles()] += t4 - t2;
      t2 = t4;
    }
    const uint64_t t3 = t2;
    for (uint16_t k = seg; k < i; ++k) finish(pkts[k], k);
    if (frag) frag_->flushCompleted();
    t = rte_rdtsc();
    cx_.cy[kCyFinish] += t - t3;
  }
  frag_->publishGauges();
}

bool Worker::classify(rte_mbuf** pkts, uint16_t i) {
  Burst& b = *burst_;
  rte_mbuf* m = pkts[i];
  PacketVerdict& v = b.v[i];
  PacketMeta& pm = b.meta[i];
  uint8_t side = cx_.sideOf(m);
  uint64_t seq;
  if (seq_given_) {  // software distribution: stamped when received (handOff)
    seq = *RTE_MBUF_DYNFIELD(m, cx_.shared.seq_dynfield, uint64_t*);
  } else {
    seq = next_seq_++;
    if (cx_.shared.seq_dynfield >= 0) *RTE_MBUF_DYNFIELD(m, cx_.shared.seq_dynfield, uint64_t*) = seq;
  }
  uint64_t t = cx_.packetTime(m);
  if (t > cx_.now_ns) cx_.now_ns = t;
  b.ts[i] = t;
  b.frag_slot[i] = -1;
  b.frag_follow[i] = -1;
  b.work[i] = m;
  b.reasm_slot[i] = -1;
  b.judge[i] = Burst::kJudgeSelf;
  b.pos[i] = -1;
  b.dir[i] = 0;
  b.hold[i] = 0;
  // Packets a stage held back past their deadline leave before this packet.
  if (cx_.hold_deadline <= t) cx_.holder->expireHeld(t);
  if (cx_.tcp_hold_deadline <= t) cx_.tcp_holder->expireHeld(t);
  cx_.c->rx_packets[side].add();
  cx_.c->rx_bytes[side].add(m->pkt_len);
  v = PacketVerdict{};
  v.seq = seq;
  v.generation = cx_.generation;
  v.in_side = side;
  cx_.c->stage_packets[static_cast<int>(Stage::kParse)].add();
  const auto& d = cx_.snap->dataplane;
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
  ParseStatus st = parsePacket(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, pm, &cx_.tun);
  if (st == ParseStatus::kNonIp) {
    if (d.non_ip == rules::Policy::kDrop) {
      drop(Stage::kParse, DropReason::kNonIp);
    } else {
      v.verdict = Verdict::kForward;
      cx_.c->non_ip_forwarded.add();
    }
    return false;
  }
  if (st != ParseStatus::kOk) {
    if (d.malformed == rules::Policy::kDrop) {
      drop(Stage::kParse, dropReasonFromParse(st));
    } else {
      v.verdict = Verdict::kForward;
      cx_.c->malformed_forwarded.add();
    }
    return false;
  }
  if (pm.tunnel_not_parsed != TunnelType::kNone) [[unlikely]] countTunnelNotParsed(*cx_.c, pm);
  if (pm.is_fragment && pm.frag_offset == 0 && !pm.more_fragments) {
    // An IPv6 atomic fragment is a whole datagram, processed on its own (RFC 6946): no
    // tracking, every stage reads it like any packet.
    cx_.c->frag_packets.add();
    cx_.c->frag_atomic.add();
    pm.is_fragment = false;
  }
  if (pm.is_fragment) {
    if (frag_->observe(pkts, i)) return true;  // held, or judged (FragStage)
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

void Worker::flowStep(rte_mbuf** pkts) {
  Burst& b = *burst_;
  if (b.nflow == 0) return;
  int32_t looked[kBurst];
  flows_->lookupBurstWithHash(b.kp, b.ksig, b.nflow, looked);
  // The flows' hot state, and the per-flow record a stage reads for every packet (the
  // LB's, with a service: PathContext::prefetch_base), while the loop below starts.
  for (uint32_t j = 0; j < b.nflow; ++j) {
    if (looked[j] >= 0) rte_prefetch0(&flows_->entry(looked[j]));
  }
  if (cx_.prefetch_base != nullptr) {
    for (uint32_t j = 0; j < b.nflow; ++j) {
      if (looked[j] < 0) continue;
      rte_prefetch0(cx_.prefetch_base + size_t(looked[j]) * cx_.prefetch_stride);
    }
  }
  // Positions from the bulk lookup are only valid until this segment inserts or removes a
  // flow; after that, each later packet looks its key up again.
  bool changed = false;
  const auto& dps = cx_.snap->dataplane;
  FirewallStage& fw = *fw_;
  fw.begin();
  for (uint32_t j = 0; j < b.nflow; ++j) {
    uint8_t i = b.flow_idx[j];
    const PacketMeta& pm = b.meta[i];
    PacketVerdict& v = b.v[i];
    rte_mbuf* m = pkts[i];
    uint64_t t = b.ts[i];
    cx_.c->stage_packets[static_cast<int>(Stage::kFlow)].add();
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
        if (fw.queued()) fw.forget(p);
        // Earlier packets of this segment that belonged to the ended flow are no longer
        // tied to its position (a new flow may take it).
        for (uint32_t q = 0; q < j; ++q) {
          if (b.pos[b.flow_idx[q]] == p) b.pos[b.flow_idx[q]] = -1;
        }
        endFlow(p, old, b.keys[i], t, stale ? FlowEndReason::kTimeout : FlowEndReason::kReused);
        flows_->remove(p);
        changed = true;
        if (stale) cx_.c->flows_expired.add();
        p = -1;
      }
    }
    if (p < 0) {
      bool midstream = false;
      if (is_tcp && !syn_only) {
        if (pm.tcp_flags & kTcpRst) {  // stray reset: pass it on, track nothing
          if (fw.active()) {
            fw.queueUntracked(i);  // still judged by the rules, on its own
          } else {
            v.verdict = Verdict::kForward;
            cx_.c->untracked_forwarded.add();
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
        cx_.c->flow_table_full.add();
        if (dps.flow_when_full == rules::Policy::kDrop) {
          v.verdict = Verdict::kDrop;
          v.stage = Stage::kFlow;
          v.reason = DropReason::kFlowTableFull;
        } else if (fw.active()) {
          fw.queueUntracked(i);
        } else {
          v.verdict = Verdict::kForward;
          cx_.c->untracked_forwarded.add();
        }
        continue;
      }
      changed = true;
      FlowEntry& ne = flows_->entry(p);
      if (b.src_is_hi[i]) ne.flags |= kFlowInitiatorIsHi;
      if (v.in_side == kSideB) ne.flags |= kFlowInitiatorSideB;
      ne.flow_seq = ++cx_.flow_seq;
      ne.rule = kNoRule;
      ne.flags |= cx_.new_flow_flags;  // e.g. the LB's kFlowNoLb (no service yet)
      if (midstream) {
        ne.tcp_state = TcpState::kEstablished;
        ne.flags |= kFlowMidstream;
        cx_.c->flows_midstream.add();
      }
      cx_.c->flows_created.add();
      cx_.c->flows_active.set(flows_->size());
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
    v.flow_id = cx_.flowId(e);
    if (e.verdict != 0 && e.generation != cx_.generation && fw.active()) {
      // A verdict from an earlier generation stays when the firewall did not change since,
      // and, with keep-established (reevaluate_on_change off), for an allowed flow.
      if (e.generation >= fw.since() ||
          (!fw.reevaluate() && e.verdict == static_cast<uint8_t>(Verdict::kForward))) {
        fw.restamp(p, e);
      }
    }
    if (e.verdict != 0 && e.generation == cx_.generation) {
      v.verdict = static_cast<Verdict>(e.verdict);
      v.stage = static_cast<Stage>(e.stage);
      v.rule = e.rule;
      if (v.stage == Stage::kFirewall && v.verdict != Verdict::kForward) {
        v.reason = v.verdict == Verdict::kDrop ? DropReason::kFirewallDeny
                                               : DropReason::kFirewallReject;
      }
      fw.countRuleHit(e.rule, e.stage, m->pkt_len, t);
      cx_.c->flow_cache_hits.add();
      continue;
    }
    if (fw.active()) {
      fw.queueFlow(i, p, e);
      continue;
    }
    // Rule stages (geoip, dns, dpi, lb) join here on a flow's first packet and after a
    // snapshot change; with none configured every flow is forwarded.
    v.verdict = Verdict::kForward;
    e.verdict = static_cast<uint8_t>(Verdict::kForward);
    e.stage = static_cast<uint8_t>(Stage::kNone);
    e.rule = kNoRule;
    e.generation = cx_.generation;
  }
  if (fw.queued()) {
    uint64_t t = rte_rdtsc();
    fw.run(0, 0);
    uint64_t d = rte_rdtsc() - t;
    cx_.cy[kCyFirewall] += d;
    cx_.cy[kCyFlow] -= d;  // processBurst adds the whole flowStage to kCyFlow
  }
}

void Worker::finish(rte_mbuf* m, uint16_t i) {
  Burst& b = *burst_;
  PacketVerdict& v = b.v[i];
  if (v.verdict == Verdict::kNone) return;  // held fragment
  if (b.judge[i] == Burst::kJudgeDatagram) {
    frag_->finishDatagram(m, i);
    return;
  }
  // A fragment that failed open hands its datagram's held first fragment to be judged in
  // its place (it is held itself and released below).
  m = b.work[i];
  int32_t slot = b.frag_slot[i];
  if (slot >= 0) frag_->setVerdict(slot, v);
  // TCP hold mode (PathContext::tcp_holder): a segment beyond a hole held; one that filled
  // it sent, then the held packets it made in order.
  if ((b.hold[i] & (Burst::kHoldTcpKeep | Burst::kHoldTcpAccepted)) && slot < 0 &&
      b.judge[i] == Burst::kJudgeSelf && cx_.tcp_holder != nullptr &&
      cx_.tcp_holder->finishPacket(m, i)) {
    return;
  }
  // A stage holding packets back (PathContext::holder): the direction's held packet
  // released or dropped first; this one held when the stage asked for it.
  if ((cx_.held != 0 || (b.hold[i] & Burst::kHoldWanted)) && slot < 0 &&
      b.judge[i] == Burst::kJudgeSelf && cx_.holder->finishPacket(m, i)) {
    return;
  }
  if (v.verdict == Verdict::kDrop || v.verdict == Verdict::kReject) {
    cx_.emitDrop(&b.meta[i], v, b.ts[i]);
  }
  if (v.verdict == Verdict::kReject) cx_.sendReject(m, b.meta[i], v.in_side, v.stage == Stage::kDpi);
  cx_.applyVerdict(m, v, v.in_side);
  if (slot >= 0) frag_->releaseFragments(slot, v, b.ts[i]);
}

void Worker::endFlow(int32_t pos, const FlowEntry& e, const FlowKey& k, uint64_t now,
                     FlowEndReason why) {
  cx_.flow_end_why = why;  // for the stages' flow-end work that follows (flowEnded)
  if (Event* ev = cx_.newEvent()) {
  ev->type = EventType::kFlowEnd;
  ev->worker = static_cast<uint8_t>(cx_.opts.id);
  ev->end_reason = why;
  ev->in_side = (e.flags & kFlowInitiatorSideB) ? kSideB : kSideA;
  ev->verdict = static_cast<Verdict>(e.verdict);
  ev->stage = static_cast<Stage>(e.stage);
  ev->rule = e.rule;
  ev->ts_ns = now;
  ev->flow_id = cx_.flowId(e);
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
  // A flow a stage blocked ends with that stage's verdict (DPI: dropped / reset).
  for (const auto& s : stages_) s->flowVerdict(pos, *ev);
  cx_.postEvent(ev);
  }
  for (size_t s = stages_.size(); s-- > 0;) stages_[s]->flowEnded(pos);
}

uint32_t Worker::agingBudget(AgingClock& c, uint32_t capacity) {
  constexpr uint64_t kAgingSweepNs = 1000000000ull;
  if (c.last_ns == 0 || cx_.now_ns < c.last_ns) {
    c.last_ns = cx_.now_ns;
    return 0;
  }
  uint64_t dt = cx_.now_ns - c.last_ns;
  c.last_ns = cx_.now_ns;
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
    expired = flows_->age(cx_.now_ns, budget, timeouts_,
                          [&](int32_t pos, const FlowEntry& e, const FlowKey& k) {
                            endFlow(pos, e, k, cx_.now_ns, FlowEndReason::kTimeout);
                          });
  }
  if (expired) {
    cx_.c->flows_expired.add(expired);
    cx_.c->flows_active.set(flows_->size());
  }
  uint32_t frag_budget = agingBudget(frag_aging_, frag_->capacity());
  if (frag_budget) frag_->age(cx_.now_ns, frag_budget);
  if (cx_.hold_deadline <= cx_.now_ns) {
    cx_.holder->expireHeld(cx_.now_ns);  // held-back packets past their deadline
    cx_.flushTx();
  }
  if (cx_.tcp_hold_deadline <= cx_.now_ns) {
    cx_.tcp_holder->expireHeld(cx_.now_ns);  // TCP segments held past hold_timeout_ms
    cx_.flushTx();
  }
}

bool Worker::drainFragments(uint32_t budget) {
  frag_->age(UINT64_MAX, budget);
  cx_.flushTx();
  return frag_->size() == 0;
}

bool Worker::endFlows(uint32_t budget) {
  flows_->age(UINT64_MAX, budget, timeouts_, [&](int32_t pos, const FlowEntry& e, const FlowKey& k) {
    endFlow(pos, e, k, cx_.now_ns, FlowEndReason::kShutdown);
  });
  cx_.flushTx();  // packets a stage released from its hold-back at the flows' end
  return flows_->size() == 0;
}

}  // namespace dpu::dp
