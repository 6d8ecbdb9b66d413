// The load balancer stage (lb_stage.h), for packets still forwarded.
//
// A flow's first packet (initiator side) that matches a service gets a backend: key fields
// extracted, hashed, looked up in the service's Maglev table. The choice is pinned in the
// flow's LB state (by service and backend identity, not table slot), so later table changes
// never move the flow: a draining backend keeps its flows; a backend that is gone (removed
// with flush, re-addressed) or down hands its flows to the service's orphan policy: pick
// again from the current table (rehash) or drop the flow's packets (reset). A re-hash that
// finds no backend (none in the table, or the key missing with fallback drop) drops the
// packet and never lets the flow go on untranslated: under rehash the flow stays an orphan
// and its next packet picks again; under rehash-or-reset it is reset.
//
// NAT: the forward packets get the backend's address/port; a second flow entry keyed by the
// translated tuple (client <-> backend) carries the VIP so the backend's answers get the
// VIP's address/port back as their source (reverse translation via the flow table).
//
// No allocation, no locks: per-flow state and the per-backend counter table are allocated
// once at create.
#include <rte_mbuf.h>

#include "dataplane/flow/flow_key.h"
#include "dataplane/packet/frame_write.h"
#include "dataplane/stages/lb/lb_stage.h"
#include "dataplane/stages/lb/lb_rewrite.h"
#include "dataplane/stages/lb/lb_view.h"

namespace dpu::dp {

LbStage::LbStage(PathContext& cx, uint32_t flow_capacity, uint32_t frag_slots)
    : PathStage(cx, "lb", kCyLb), c_(cx.c), flows_(cx.flows) {
  lb_flow_.reset(new LbFlow[flow_capacity]());
  lb_ctr_.reset(new LbBackendCounters[kLbCounterSlots]());
  lb_frag_.reset(new LbFragRewrite[frag_slots]());
}

absl::StatusOr<std::unique_ptr<PathStage>> LbStage::make(PathContext& cx,
                                                         const rules::DataplaneSettings&) {
  return std::make_unique<LbStage>(cx, cx.flows->capacity(), cx.frag_slots);
}

bool LbStage::refresh() {
  const rules::Snapshot* s = cx_.snap;
  lbc_ = s && s->lb ? s->lb.get() : nullptr;
  lb_active_ = lbc_ != nullptr && !lbc_->services.empty();
  if (lb_active_) lb_seen_ = true;
  if (lb_active_) {  // its record, read for every packet of a balanced flow
    cx_.prefetch_base = reinterpret_cast<const uint8_t*>(lb_flow_.get());
    cx_.prefetch_stride = sizeof(LbFlow);
  } else {
    cx_.new_flow_flags |= kFlowNoLb;  // a flow created now is decided: not balanced
  }
  cx_.follow_fragments |= lb_seen_;  // later fragments take the first one's backend
  return lb_seen_;
}

void LbStage::run(uint16_t from, uint16_t to) {
  Burst& b = *cx_.burst;
  for (uint16_t i = from; i < to; ++i) {
    if (b.v[i].verdict == Verdict::kForward) packet(b.work[i], b, i);
  }
}

void LbStage::describeFlow(int32_t p, FlowDumpRecord& o) const {
  const LbFlow& lf = lb_flow_[p];
  if (lf.kind == LbFlow::kBalanced || lf.kind == LbFlow::kReverse) {
    o.lb_service = lf.svc;
    o.lb_backend = lf.backend;
  }
}

uint16_t LbStage::lbCounterSlot(uint64_t identity) {
  constexpr uint32_t mask = kLbCounterSlots - 1;
  uint32_t h = uint32_t(identity ^ (identity >> 29)) & mask;
  for (uint32_t n = 0; n < kLbCounterSlots; ++n, h = (h + 1) & mask) {
    uint64_t id = lb_ctr_[h].identity.load();
    if (id == identity) return uint16_t(h);
    if (id == 0) {
      lb_ctr_[h].identity.set(identity);
      return uint16_t(h);
    }
  }
  c_->lb_counters_full.add();
  return kLbNoCounter;
}

void LbStage::lbUnpin(LbFlow& f) {
  if (f.ctr != kLbNoCounter && f.kind == LbFlow::kBalanced) {
    LbBackendCounters& c = lb_ctr_[f.ctr];
    c.flows_active.set(c.flows_active.load() - 1);
  }
  f.ctr = kLbNoCounter;
}

void LbStage::lbPin(LbFlow& f, const rules::CompiledLbService& svc, uint32_t svc_idx,
                   uint32_t be) {
  f.kind = LbFlow::kBalanced;
  f.svc = svc.identity;
  f.backend = svc.backends[be].identity;
  f.svc_idx = uint16_t(svc_idx);
  f.be_idx = uint16_t(be);
  f.ctr = lbCounterSlot(f.backend);
  if (f.ctr != kLbNoCounter) {
    LbBackendCounters& c = lb_ctr_[f.ctr];
    c.flows_active.add();
    c.flows_total.add();
  }
}

void LbStage::flowEnded(int32_t pos) {
  LbFlow& f = lb_flow_[pos];
  if (f.kind == LbFlow::kNone) return;
  lbUnpin(f);
  // The other entry of a NAT pair keeps working on its own (it carries what it needs); only
  // the link is cut.
  if (f.peer >= 0 && lb_flow_[f.peer].peer == pos) lb_flow_[f.peer].peer = -1;
  f = LbFlow{};
}

void LbStage::lbDrop(Burst& b, uint16_t i, DropReason r) {
  PacketVerdict& v = b.v[i];
  v.verdict = Verdict::kDrop;
  v.stage = Stage::kLb;
  v.reason = r;
}

int LbStage::lbChoose(const rules::CompiledLbService& svc, const rules::LbPacket& p, Burst& b,
                     uint16_t i) {
  bool missing = false;
  uint64_t h = svc.keyHash(p, &missing);
  if (missing) {
    c_->lb_key_missing.add();
    if (svc.fallback == rules::LbFallback::kDrop) {
      lbDrop(b, i, DropReason::kLbKeyMissing);
      return -1;
    }
  }
  uint16_t be = svc.pick(h);
  if (be == rules::kLbNoBackend) {
    lbDrop(b, i, DropReason::kLbNoBackend);
    return -1;
  }
  return be;
}

// Inlined into every caller here (all in this file): per packet of a balanced flow.
__attribute__((always_inline)) inline void LbStage::lbCount(uint16_t ctr, uint32_t bytes) {
  if (ctr == kLbNoCounter || lb_quiet_) return;
  lb_ctr_[ctr].packets.add();
  lb_ctr_[ctr].bytes.add(bytes);
}

// The rewrite that sends a packet of family v4/v6 to backend `be` of `svc`.
DropReason LbStage::lbMakeRewrite(const rules::CompiledLbService& svc,
                                 const rules::CompiledLbBackend& be, bool v4, LbFragRewrite& r) {
  r.kind = LbFragRewrite::kForward;
  r.mode = static_cast<uint8_t>(svc.mode);
  r.has_mac = svc.mode == rules::LbMode::kL2 || be.has_mac;
  std::memcpy(r.mac, be.mac, 6);
  r.port = be.port;
  switch (svc.mode) {
    case rules::LbMode::kL2:
      break;
    case rules::LbMode::kNat:
      if (v4 ? !be.has_v4 : !be.has_v6) return DropReason::kLbNoAddress;
      std::memcpy(r.addr, v4 ? be.v4 : be.v6, v4 ? 4 : 16);
      break;
    case rules::LbMode::kIpip:
      if (v4 ? !(be.has_v4 && svc.has_tun_v4) : !(be.has_v6 && svc.has_tun_v6)) {
        return DropReason::kLbNoAddress;
      }
      std::memcpy(r.addr, v4 ? be.v4 : be.v6, v4 ? 4 : 16);
      std::memcpy(r.tun, v4 ? svc.tun_v4 : svc.tun_v6, v4 ? 4 : 16);
      break;
  }
  return DropReason::kNone;
}

// Rewrites the packet as `r` says. A later fragment has no transport header: NAT changes its
// address only (and the IPv4 header checksum), IPIP wraps it like any packet.
DropReason LbStage::lbApply(rte_mbuf* m, const PacketMeta& pm, const LbFragRewrite& r) {
  uint8_t* d = rte_pktmbuf_mtod(m, uint8_t*);
  if (r.kind == LbFragRewrite::kReverse) {
    lbNatRewrite(d, m->data_len, pm, true, r.addr, r.port);
    sealTunnel(d, uint32_t(pm.l3_offset) + pm.l3_len, pm);
    return DropReason::kNone;
  }
  const bool v4 = pm.l3 == L3Type::kIpv4;
  if (pm.inTunnel()) {
    // Inside a tunnel only NAT applies (docs/tunnels.md): the inner addresses change, the
    // outer headers get their checksums back, the outer frame keeps its MACs (its next hop
    // is the tunnel endpoint). L2 (a MAC for the outer frame) and IPIP (a new outer header
    // around the whole encapsulation) would not reach the backend.
    if (static_cast<rules::LbMode>(r.mode) != rules::LbMode::kNat) return DropReason::kLbInTunnel;
    lbNatRewrite(d, m->data_len, pm, false, r.addr, r.port);
    sealTunnel(d, uint32_t(pm.l3_offset) + pm.l3_len, pm);
    return DropReason::kNone;
  }
  switch (static_cast<rules::LbMode>(r.mode)) {
    case rules::LbMode::kL2:
      break;
    case rules::LbMode::kNat:
      lbNatRewrite(d, m->data_len, pm, false, r.addr, r.port);
      break;
    case rules::LbMode::kIpip: {
      uint32_t ov = v4 ? kLbIpip4Overhead : kLbIpip6Overhead;
      if (m->nb_segs != 1 || rte_pktmbuf_headroom(m) < ov ||
          uint32_t(m->data_len) + ov > 0xFFFF || uint32_t(pm.l3_len) + ov > 0xFFFF) {
        return DropReason::kLbNoHeadroom;
      }
      uint32_t old = m->data_len;
      d = reinterpret_cast<uint8_t*>(rte_pktmbuf_prepend(m, uint16_t(ov)));
      lbIpipEncap(d, old, pm, r.tun, r.addr);
      break;
    }
  }
  if (r.has_mac) lbRewriteDstMac(d, r.mac);
  return DropReason::kNone;
}

// Sends the packet to backend `be` of `svc` (forward direction). False: dropped (reason set).
// Inlined into packet() (every packet of a balanced flow): in L2 mode, outside tunnels, with no
// datagram to follow the packet, the rewrite comes down to the backend's MAC as destination
// and no drop reason applies; everything else builds a rewrite record (lbForwardRewrite).
__attribute__((always_inline)) inline bool LbStage::lbForward(rte_mbuf* m, Burst& b, uint16_t i,
                                                             const rules::CompiledLbService& svc,
                                                             const rules::CompiledLbBackend& be) {
  if (svc.mode == rules::LbMode::kL2 && b.frag_slot[i] < 0 && !b.meta[i].inTunnel()) {
    lbRewriteDstMac(rte_pktmbuf_mtod(m, uint8_t*), be.mac);
    return true;
  }
  return lbForwardRewrite(m, b, i, svc, be);
}

// lbForward through a rewrite record (lbMakeRewrite + lbApply). A first fragment leaves its
// rewrite for the rest of its datagram.
bool LbStage::lbForwardRewrite(rte_mbuf* m, Burst& b, uint16_t i,
                              const rules::CompiledLbService& svc,
                              const rules::CompiledLbBackend& be) {
  const PacketMeta& pm = b.meta[i];
  LbFragRewrite tmp;
  LbFragRewrite& r = b.frag_slot[i] >= 0 ? lb_frag_[b.frag_slot[i]] : tmp;
  DropReason why = lbMakeRewrite(svc, be, pm.l3 == L3Type::kIpv4, r);
  if (why == DropReason::kNone) why = lbApply(m, pm, r);
  if (why != DropReason::kNone) {
    r.kind = LbFragRewrite::kNone;
    lbDrop(b, i, why);
    return false;
  }
  if (&r != &tmp) {
    r.be_idx = b.v[i].backend;
    r.svc_idx = b.v[i].lb_service;
    const int32_t pos = b.pos[i];
    r.ctr = pos >= 0 && lb_flow_[pos].kind == LbFlow::kBalanced ? lb_flow_[pos].ctr
                                                                 : lbCounterSlot(be.identity);
  }
  return true;
}

bool LbStage::followFragment(rte_mbuf* m, const PacketMeta& pm, int32_t slot,
                             PacketVerdict& v) {
  lb_quiet_ = false;  // a fragment counts itself
  const LbFragRewrite& r = lb_frag_[slot];
  if (r.kind == LbFragRewrite::kNone) return true;
  c_->stage_packets[static_cast<int>(Stage::kLb)].add();
  const uint32_t bytes = m->pkt_len;
  DropReason why = lbApply(m, pm, r);
  if (why != DropReason::kNone) {
    v.verdict = Verdict::kDrop;
    v.stage = Stage::kLb;
    v.reason = why;
    return false;
  }
  if (r.kind == LbFragRewrite::kForward) {
    v.backend = r.be_idx;
    v.lb_service = r.svc_idx;
  }
  if (r.kind == LbFragRewrite::kReverse) c_->lb_nat_reversed.add();
  c_->lb_fragments_followed.add();
  lbCount(r.ctr, bytes);
  return true;
}

// NAT: the entry that catches the backend's answers (client <-> backend tuple).
void LbStage::lbReverseEntry(int32_t pos, Burst& b, uint16_t i, const rules::CompiledLbBackend& be) {
  PacketMeta t = b.meta[i];  // before the rewrite: the client -> VIP packet
  LbFlow& f = lb_flow_[pos];
  std::memcpy(f.vip, t.dst.b, 16);
  f.vport = t.dport;
  if (t.l3 == L3Type::kIpv4) {
    std::memset(t.dst.b, 0, 16);
    std::memcpy(t.dst.b, be.v4, 4);
  } else {
    std::memcpy(t.dst.b, be.v6, 16);
  }
  if (be.port != 0 && t.has_l4) t.dport = be.port;
  FlowKey k;
  const bool client_is_hi = makeFlowKey(t, k);
  const uint32_t before = flows_->size();
  const int32_t r = flows_->insert(k, b.ts[i]);
  if (r < 0 || r == pos) {
    c_->lb_nat_no_reverse.add();
    return;
  }
  const FlowEntry& o = flows_->entry(pos);
  FlowEntry& e = flows_->entry(r);
  const bool created = flows_->size() != before;
  if (!created) {
    // The translated tuple is a flow already. When it has no LB state and started no earlier
    // than this flow, it is the backend's answer that the flow stage saw first (the SYN and
    // its answer judged in one burst, e.g. a replayed capture): it becomes the reverse entry.
    // Anything else (a client talking to the backend directly, another VIP flow translated to
    // the same tuple) is left alone.
    if (lb_flow_[r].kind != LbFlow::kNone ||
        flows_->cold(r).first_seen_ns < flows_->cold(pos).first_seen_ns) {
      c_->lb_nat_no_reverse.add();
      return;
    }
  } else {
    if (client_is_hi) e.flags |= kFlowInitiatorIsHi;  // the client is the initiator
    e.flags |= o.flags & (kFlowInitiatorSideB | kFlowMidstream);
    e.tcp_state = o.tcp_state;
    e.flow_seq = ++cx_.flow_seq;
    e.rule = o.rule;
    e.verdict = o.verdict;
    e.stage = o.stage;
    e.generation = o.generation;
    for (const auto& st : *cx_.stages) st->flowCopied(pos, r);  // e.g. the firewall's rule uid
    c_->flows_created.add();
    c_->lb_nat_reverse_created.add();
    c_->flows_active.set(flows_->size());
  }
  LbFlow& rf = lb_flow_[r];
  // Direction (relative to the entry's initiator) of the backend's answers.
  const bool client_initiates = client_is_hi == ((e.flags & kFlowInitiatorIsHi) != 0);
  rf.answer_dir = client_initiates ? 1 : 0;
  rf.kind = LbFlow::kReverse;
  rf.svc = f.svc;
  rf.backend = f.backend;
  rf.ctr = f.ctr;
  rf.peer = pos;
  std::memcpy(rf.vip, f.vip, 16);
  rf.vport = f.vport;
  f.peer = r;
}

void LbStage::packet(rte_mbuf* m, Burst& b, uint16_t i) {
  PacketMeta& pm = b.meta[i];
  // A reassembled datagram: its rewrite is left for its fragments (frag_slot), which are
  // counted one by one when they follow it (followFragment).
  lb_quiet_ = b.judge[i] == Burst::kJudgeDatagram;
  // A first fragment to judge: its datagram has no rewrite until this packet gets one.
  if (b.frag_slot[i] >= 0) lb_frag_[b.frag_slot[i]].kind = LbFragRewrite::kNone;
  // Fragments given their datagram's verdict (no flow position; held ones are released by
  // finish() through followFragment too) take the first fragment's rewrite, never a hash of
  // their own.
  if (b.frag_follow[i] >= 0) {
    followFragment(m, pm, b.frag_follow[i], b.v[i]);
    return;
  }
  if (pm.l3 == L3Type::kNone || pm.isLaterFragment()) return;
  const int32_t pos = b.pos[i];
  LbFlow* f = pos >= 0 ? &lb_flow_[pos] : nullptr;
  const rules::CompiledLb* lb = lbc_;
  const uint32_t bytes = m->pkt_len;

  if (f && f->kind != LbFlow::kNone) {
    switch (f->kind) {
      case LbFlow::kNotBalanced:
        return;
      case LbFlow::kReset:
        c_->stage_packets[static_cast<int>(Stage::kLb)].add();
        lbDrop(b, i, DropReason::kLbFlowReset);
        return;
      case LbFlow::kReverse:
        c_->stage_packets[static_cast<int>(Stage::kLb)].add();
        if (b.dir[i] == f->answer_dir) {  // backend -> client: the VIP's address/port back
          const uint8_t* vip = f->vip;
          lbNatRewrite(rte_pktmbuf_mtod(m, uint8_t*), m->data_len, pm, true, vip,
                       f->vport);
          sealTunnel(rte_pktmbuf_mtod(m, uint8_t*), uint32_t(pm.l3_offset) + pm.l3_len, pm);
          if (!lb_quiet_) c_->lb_nat_reversed.add();  // a datagram: its fragments count
          if (b.frag_slot[i] >= 0) {  // the rest of the datagram: the VIP's address too
            LbFragRewrite& r = lb_frag_[b.frag_slot[i]];
            r.kind = LbFragRewrite::kReverse;
            std::memcpy(r.addr, vip, 16);
            r.port = f->vport;
            r.ctr = f->ctr;
          }
        }
        lbCount(f->ctr, bytes);
        return;
      default:
        break;
    }
    // A balanced flow.
    c_->stage_packets[static_cast<int>(Stage::kLb)].add();
    int si = lb ? lb->findService(f->svc, f->svc_idx) : -1;
    if (si < 0) {  // the service is gone: the flow is no longer balanced
      lbUnpin(*f);
      f->kind = LbFlow::kNotBalanced;
      c_->lb_service_gone.add();
      return;
    }
    const rules::CompiledLbService& svc = *lb->services[si];
    f->svc_idx = uint16_t(si);
    if (b.dir[i] != 0) {  // answers on the original tuple (L2 / IPIP return path): as they are
      lbCount(f->ctr, bytes);
      b.v[i].backend = f->be_idx;  // kNoBackend while an orphan waits for a backend
      b.v[i].lb_service = f->svc_idx;
      return;
    }
    int be = svc.findBackend(f->backend, f->be_idx);
    if (be < 0 || !svc.backends[be].keepsFlows()) {
      lbUnpin(*f);
      if (svc.orphans == rules::LbOrphanPolicy::kReset) {
        f->kind = LbFlow::kReset;
        c_->lb_flows_reset.add();
        lbDrop(b, i, DropReason::kLbFlowReset);
        return;
      }
      rules::LbPacket p;
      lbView(pm, rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, p);
      be = lbChoose(svc, p, b, i);
      if (be < 0) {  // dropped (lb_no_backend / lb_key_missing): never sent on untranslated
        if (svc.orphans == rules::LbOrphanPolicy::kRehashOrReset) {
          f->kind = LbFlow::kReset;
          c_->lb_flows_reset.add();
        } else {  // rehash: still orphaned, the next packet picks again (like a new flow's)
          f->backend = 0;  // no backend has identity 0
          f->be_idx = kNoBackend;
        }
        return;
      }
      lbPin(*f, svc, uint32_t(si), uint32_t(be));
      c_->lb_flows_rehashed.add();
      // A NAT flow that moves keeps its old reverse entry (it still translates answers of
      // the old backend until it ages out); answers of the new backend need a new one.
      if (svc.mode == rules::LbMode::kNat) {
        if (f->peer >= 0 && lb_flow_[f->peer].peer == pos) lb_flow_[f->peer].peer = -1;
        f->peer = -1;
        lbReverseEntry(pos, b, i, svc.backends[be]);
      }
    }
    f->be_idx = uint16_t(be);
    b.v[i].backend = uint16_t(be);
    b.v[i].lb_service = uint16_t(si);
    if (lbForward(m, b, i, svc, svc.backends[be])) lbCount(f->ctr, m->pkt_len);
    return;
  }

  // A flow that left unbalanced while no service existed (created then, or seen now with
  // none) keeps that decision: balancing it later would move an established connection to
  // a backend that never saw its start.
  if (lb == nullptr || lb->services.empty()) {
    if (f) f->kind = LbFlow::kNotBalanced;
    return;
  }
  if (f && (flows_->entry(pos).flags & kFlowNoLb) != 0) {
    f->kind = LbFlow::kNotBalanced;
    return;
  }
  if (f && b.dir[i] != 0) return;  // the answer side of a flow nobody balanced
  rules::LbPacket p;
  lbView(pm, rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, p);
  uint32_t si = 0;
  const rules::CompiledLbService* svc = lb->match(p, &si);
  if (svc == nullptr) {
    if (f) f->kind = LbFlow::kNotBalanced;
    return;
  }
  c_->stage_packets[static_cast<int>(Stage::kLb)].add();
  int be = lbChoose(*svc, p, b, i);
  // Not pinned: the flow's next packet tries again (it may carry the key field, or a
  // backend may have come back).
  if (be < 0) return;
  b.v[i].backend = uint16_t(be);
  b.v[i].lb_service = uint16_t(si);
  if (f) {
    lbPin(*f, *svc, si, uint32_t(be));
    c_->lb_flows_balanced.add();
    if (svc->mode == rules::LbMode::kNat) lbReverseEntry(pos, b, i, svc->backends[be]);
    if (lbForward(m, b, i, *svc, svc->backends[be])) lbCount(f->ctr, m->pkt_len);
  } else {
    c_->lb_untracked.add();
    uint16_t ctr = lbCounterSlot(svc->backends[be].identity);
    if (lbForward(m, b, i, *svc, svc->backends[be])) lbCount(ctr, m->pkt_len);
  }
}

}  // namespace dpu::dp
