// IP fragments in the packet path (frag_stage.h).
#include "dataplane/stages/frag/frag_stage.h"

#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>

#include "absl/strings/str_cat.h"
#include "dataplane/packet/frame_write.h"
#include "dataplane/packet/parser.h"

namespace dpu::dp {

absl::StatusOr<std::unique_ptr<FragStage>> FragStage::create(
    PathContext& cx, const rules::DataplaneSettings& settings) {
  std::unique_ptr<FragStage> f(new FragStage(cx));
  FragOptions fr;
  fr.name = absl::StrCat("frags_w", cx.opts.id);
  fr.max_datagrams = settings.frag_max_datagrams;
  fr.max_fragments = static_cast<uint16_t>(settings.frag_max_fragments);
  fr.timeout_ns = static_cast<uint64_t>(settings.frag_timeout_ms) * 1000000ull;
  fr.socket_id = static_cast<int>(rte_socket_id());
  fr.max_held = settings.frag_max_held;
  fr.release_buffer = &DatagramReassembler::releaseBuffer;
  DatagramOptions dg;
  dg.name = absl::StrCat("reasm_w", cx.opts.id);
  dg.buffers = settings.frag_reassembly_buffers;
  dg.max_bytes = settings.frag_max_datagram_bytes;
  dg.max_fragments = fr.max_fragments;
  dg.socket_id = fr.socket_id;
  auto rg = DatagramReassembler::create(dg);
  if (!rg.ok()) return rg.status();
  f->dgram_ = std::move(*rg);
  auto fg = FragTracker::create(fr);
  if (!fg.ok()) return fg.status();
  f->frags_ = std::move(*fg);
  return f;
}

FragStage::~FragStage() {
  // Before the reassembly pool goes: forgetting the datagrams gives their buffers back.
  if (frags_) frags_->age(UINT64_MAX, frags_->capacity(), [](void* p) {
    rte_pktmbuf_free(static_cast<rte_mbuf*>(p));
  });
  frags_.reset();
}

bool FragStage::observe(rte_mbuf** pkts, uint16_t i) {
  Burst& b = *cx_.burst;
  PacketMeta& pm = b.meta[i];
  const uint64_t t = b.ts[i];
  cx_.c->frag_packets.add();
  cx_.c->stage_packets[static_cast<int>(Stage::kFragment)].add();
  frags_->expireStale(pm, t, [&](void* p, bool r) { dropHeld(p, t, r); });
  int32_t slot = -1;
  FragAction a = frags_->observe(pm, t, &slot, cx_.reassemble);
  if (a == FragAction::kReassemble) {
    // dataplane/normalize/datagram.h: held until complete, then judged whole.
    return reasmFragment(pkts, i, slot);
  }
  return firstFragmentMode(a, slot, pkts[i], i);
}

bool FragStage::followStages(rte_mbuf* m, int32_t slot, PacketVerdict& v, uint64_t now) {
  if (!cx_.follow_fragments) return true;
  PacketMeta pm;
  parsePacket(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, pm, &cx_.tun);
  for (const auto& s : *cx_.stages) {
    if (!s->followFragment(m, pm, slot, v)) {
      cx_.emitDrop(&pm, v, now);
      return false;
    }
  }
  return true;
}

// `expire_at` decides what is stale; events carry the worker's current time.
void FragStage::age(uint64_t expire_at, uint32_t budget) {
  frags_->age(expire_at, budget, [&](void* p, bool r) { dropHeld(p, cx_.now_ns, r); });
  publishGauges();
}

// A fragment of a datagram judged by its first fragment (no inspecting stage configured,
// or a reassembly that failed open). True when the fragment is done with (verdict set or
// held); false for a first fragment to judge (b.frag_slot[i] set): it goes on to the flow
// stage.
bool FragStage::firstFragmentMode(FragAction a, int32_t slot, rte_mbuf* m, uint16_t i) {
  Burst& b = *cx_.burst;
  PacketVerdict& v = b.v[i];
  const PacketMeta& pm = b.meta[i];
  const auto& d = cx_.snap->dataplane;
  auto drop = [&](Stage st, DropReason r) {
    v.verdict = Verdict::kDrop;
    v.stage = st;
    v.reason = r;
  };
  // Overlaps under a FORWARD policy still follow their datagram's verdict.
  if ((a == FragAction::kOverlap || a == FragAction::kDuplicateFirst)) {
    cx_.c->frag_overlaps.add();
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
        cx_.c->frag_held.add();
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

bool FragStage::reasmFragment(rte_mbuf** pkts, uint16_t i, int32_t slot) {
  Burst& b = *cx_.burst;
  rte_mbuf* m = pkts[i];
  PacketMeta& pm = b.meta[i];
  PacketVerdict& v = b.v[i];
  const auto& d = cx_.snap->dataplane;
  DatagramAddInfo ai;
  DatagramStep st = dgram_->add(*frags_, slot, pm, rte_pktmbuf_mtod(m, const uint8_t*), m,
                                b.ts[i], d.frag_overlapping == rules::Policy::kForward, &ai);
  if (ai.overlap) {
    cx_.c->frag_overlaps.add();
    (ai.conflict ? cx_.c->frag_overlap_conflicts : cx_.c->frag_overlap_identical).add();
  }
  switch (st) {
    case DatagramStep::kHeld:
      cx_.c->frag_held.add();
      v.verdict = Verdict::kNone;  // judged with its datagram
      return true;
    case DatagramStep::kComplete:
      return reasmJudge(m, i, slot);
    case DatagramStep::kConflict:
      if (!ai.conflict) {  // contradicts the datagram's length
        cx_.c->frag_overlaps.add();
        cx_.c->frag_overlap_conflicts.add();
      }
      if (d.frag_overlapping == rules::Policy::kDrop) {
        reasmDrop(i, slot, DropReason::kFragOverlapConflict);
        return true;
      }
      // FORWARD: a fragment that contradicts the datagram's length is not reassembled; it
      // goes with the datagram's verdict.
      if (frags_->hold(slot, m)) {
        cx_.c->frag_held.add();
        v.verdict = Verdict::kNone;
      } else {
        reasmDrop(i, slot, DropReason::kFragHoldFull);
      }
      return true;
    case DatagramStep::kTooMany:
      reasmDrop(i, slot, DropReason::kFragTooMany);
      return true;
    case DatagramStep::kNoBuffer:
      cx_.c->frag_no_buffer.add();
      return reasmExhausted(m, i, slot, DropReason::kFragNoBuffer);
    case DatagramStep::kTooBig:
      cx_.c->frag_too_big.add();
      return reasmExhausted(m, i, slot, DropReason::kFragTooBig);
    case DatagramStep::kHoldFull:
      cx_.c->frag_hold_full.add();
      return reasmExhausted(m, i, slot, DropReason::kFragHoldFull);
  }
  return true;
}

// Packet i completed datagram `slot`: the reassembled datagram takes its place in the
// stages. False: it goes on to the flow stage.
bool FragStage::reasmJudge(rte_mbuf* m, uint16_t i, int32_t slot) {
  Burst& b = *cx_.burst;
  const auto& d = cx_.snap->dataplane;
  if (dgram_->firstWasTiny(*frags_, slot) && d.frag_tiny == rules::Policy::kDrop) {
    reasmDrop(i, slot, DropReason::kFragTiny);
    return true;
  }
  rte_mbuf* r = dgram_->build(*frags_, slot);
  if (r == nullptr) {  // longer than an IP datagram can be
    cx_.c->frag_too_big.add();
    reasmDrop(i, slot, DropReason::kFragTooBig);
    return true;
  }
  // The datagram arrived with packet i: its side, capture time and input index.
  r->port = m->port;
  if (cx_.shared.ts_dynfield >= 0 && (m->ol_flags & cx_.shared.ts_dynflag)) {
    *RTE_MBUF_DYNFIELD(r, cx_.shared.ts_dynfield, uint64_t*) =
        *RTE_MBUF_DYNFIELD(m, cx_.shared.ts_dynfield, const uint64_t*);
    r->ol_flags |= cx_.shared.ts_dynflag;
  }
  if (cx_.shared.seq_dynfield >= 0) {
    *RTE_MBUF_DYNFIELD(r, cx_.shared.seq_dynfield, uint64_t*) =
        *RTE_MBUF_DYNFIELD(m, cx_.shared.seq_dynfield, const uint64_t*);
  }
  PacketMeta& pm = b.meta[i];
  if (pm.inTunnel()) {
    // A datagram fragmented inside a tunnel: the reassembled frame carries the first
    // fragment's outer headers, whose lengths describe one fragment. The fragments of a
    // datagram come through the same encapsulation (pm, the completing fragment, has the
    // same layer offsets): the outer lengths and checksums are set for the whole datagram,
    // so that the tunnel parses around it.
    uint8_t* d = rte_pktmbuf_mtod(r, uint8_t*);
    const uint32_t l3 = pm.l3_offset;
    if (l3 + 6u <= r->data_len) {
      const uint32_t ip_len = pm.l3 == L3Type::kIpv6 ? 40u + (uint32_t(d[l3 + 4]) << 8 | d[l3 + 5])
                                                     : (uint32_t(d[l3 + 2]) << 8 | d[l3 + 3]);
      if (l3 + ip_len <= r->data_len) sealTunnel(d, l3 + ip_len, pm);
    }
  }
  ParseStatus ps = parsePacket(rte_pktmbuf_mtod(r, const uint8_t*), r->data_len, pm, &cx_.tun);
  b.work[i] = r;
  b.reasm_slot[i] = slot;
  b.judge[i] = Burst::kJudgeDatagram;
  b.frag_slot[i] = slot;  // the LB leaves its rewrite for the fragments
  cx_.c->frag_reassembled.add();
  if (ps != ParseStatus::kOk) {
    // The whole datagram is malformed (e.g. a UDP length that disagrees with it).
    PacketVerdict& v = b.v[i];
    if (d.malformed == rules::Policy::kDrop) {
      v.verdict = Verdict::kDrop;
      v.stage = Stage::kParse;
      v.reason = dropReasonFromParse(ps);
    } else {
      v.verdict = Verdict::kForward;
      cx_.c->malformed_forwarded.add();
    }
    return true;
  }
  countTunnelNotParsed(*cx_.c, pm);
  pm.is_fragment = false;  // an IPv6 datagram keeps its (now atomic) fragment header
  return false;
}

// Drops datagram `slot` with packet i (reason `why`): its held fragments and every later
// one are dropped too (fragment_datagram_dropped); the buffer goes back at once.
void FragStage::reasmDrop(uint16_t i, int32_t slot, DropReason why) {
  Burst& b = *cx_.burst;
  PacketVerdict& v = b.v[i];
  v.verdict = Verdict::kDrop;
  v.stage = Stage::kFragment;
  v.reason = why;
  frags_->setFirstFragmentMode(slot);  // later fragments: kApply with the drop
  b.frag_slot[i] = slot;               // finish(): verdict recorded, held ones dropped
}

// No buffer, no held handle, or too big: the on_exhaustion policy.
bool FragStage::reasmExhausted(rte_mbuf* m, uint16_t i, int32_t slot, DropReason why) {
  Burst& b = *cx_.burst;
  const auto& d = cx_.snap->dataplane;
  if (d.frag_on_exhaustion == rules::Policy::kDrop) {
    cx_.c->frag_fail_closed.add();
    reasmDrop(i, slot, why);
    return true;
  }
  // fail_open: the datagram is judged by its first fragment alone, uninspected by DNS / DPI.
  cx_.c->frag_fail_open.add();
  if (Event* ev = cx_.uninspectedEvent(i, Stage::kFragment, why)) {
    const PacketMeta& pm = b.meta[i];
    ev->ip_ver = static_cast<uint8_t>(pm.l3);
    ev->proto = pm.l4_proto;
    ev->src = pm.src;
    ev->dst = pm.dst;
    ev->vlan = pm.vlan_outer;
    cx_.postEvent(ev);
  }
  rte_mbuf* first = static_cast<rte_mbuf*>(dgram_->firstFragment(*frags_, slot));
  frags_->setFirstFragmentMode(slot);
  if (first == nullptr) {
    // The first fragment is still to come: this one waits for it like any.
    int32_t s2 = -1;
    FragAction a = frags_->observe(b.meta[i], b.ts[i], &s2);
    return firstFragmentMode(a, s2, m, i);
  }
  // The first fragment is held: it is judged now, in packet i's place; packet i waits
  // with the other held fragments and follows its verdict.
  frags_->record(slot, b.meta[i], b.ts[i]);
  frags_->unhold(slot, first);
  if (!frags_->hold(slot, m)) {  // cannot fail: unhold freed a handle
    reasmDrop(i, slot, DropReason::kFragHoldFull);
    return true;
  }
  cx_.c->frag_held.add();
  PacketMeta& pm = b.meta[i];
  parsePacket(rte_pktmbuf_mtod(first, const uint8_t*), first->data_len, pm, &cx_.tun);
  PacketVerdict& v = b.v[i];
  if (cx_.shared.seq_dynfield >= 0) v.seq = cx_.seqOf(first);
  v.in_side = cx_.sideOf(first);
  b.work[i] = first;
  b.judge[i] = Burst::kJudgeFirstFragment;
  b.frag_slot[i] = slot;
  if (fragmentIsTiny(pm) && d.frag_tiny == rules::Policy::kDrop) {
    v.verdict = Verdict::kDrop;
    v.stage = Stage::kFragment;
    v.reason = DropReason::kFragTiny;
    return true;
  }
  return false;
}

// Packet i completed datagram b.reasm_slot[i], judged as b.work[i]: every fragment gets
// the verdict (held ones in arrival order, then packet i), then the datagram's buffer goes
// back to the pool.
void FragStage::finishDatagram(rte_mbuf* m, uint16_t i) {
  Burst& b = *cx_.burst;
  PacketVerdict& v = b.v[i];
  const int32_t slot = b.reasm_slot[i];
  rte_mbuf* r = b.work[i];
  setVerdict(slot, v);
  if (v.verdict == Verdict::kDrop || v.verdict == Verdict::kReject) {
    cx_.emitDrop(&b.meta[i], v, b.ts[i]);
  }
  // Answers are built from the reassembled datagram (whole headers).
  if (v.verdict == Verdict::kReject) cx_.sendReject(r, b.meta[i], v.in_side, v.stage == Stage::kDpi);
  releaseFragments(slot, v, b.ts[i]);
  PacketVerdict own = v;
  if (own.verdict == Verdict::kForward) followStages(m, slot, own, b.ts[i]);
  cx_.applyVerdict(m, own, own.in_side);
  rte_pktmbuf_free(r);
}

void FragStage::releaseFragments(int32_t slot, const PacketVerdict& first, uint64_t now) {
  frags_->releaseHeldTo(slot, [&](void* p) {
    followFragment(static_cast<rte_mbuf*>(p), slot, first, now);
  });
}

// A fragment given its datagram's verdict `first` (judged on another packet).
void FragStage::followFragment(rte_mbuf* hm, int32_t slot, const PacketVerdict& first,
                            uint64_t now) {
  PacketVerdict hv = first;
  hv.seq = cx_.seqOf(hm);
  hv.in_side = cx_.sideOf(hm);
  hv.flow_new = false;
  if (hv.verdict == Verdict::kForward) {
    followStages(hm, slot, hv, now);  // e.g. the first fragment's backend (LB)
  } else if (hv.verdict == Verdict::kDrop || hv.verdict == Verdict::kReject) {
    hv.verdict = Verdict::kDrop;
    hv.reason = DropReason::kFragDatagramDropped;
    hv.stage = Stage::kFragment;
    PacketMeta hmeta;
    parsePacket(rte_pktmbuf_mtod(hm, const uint8_t*), hm->data_len, hmeta, &cx_.tun);
    cx_.emitDrop(&hmeta, hv, now);
  }
  cx_.applyVerdict(hm, hv, hv.in_side);
}

void FragStage::dropHeld(void* p, uint64_t now, bool reassembled) {
  rte_mbuf* hm = static_cast<rte_mbuf*>(p);
  PacketVerdict hv;
  hv.seq = cx_.seqOf(hm);
  hv.generation = cx_.generation;
  hv.in_side = cx_.sideOf(hm);
  hv.verdict = Verdict::kDrop;
  hv.stage = Stage::kFragment;
  // Reassembled datagrams hold every fragment: what is missing may be any of them.
  hv.reason = reassembled ? DropReason::kFragIncomplete : DropReason::kFragTimeout;
  cx_.c->frag_timeouts.add();
  PacketMeta hmeta;
  parsePacket(rte_pktmbuf_mtod(hm, const uint8_t*), hm->data_len, hmeta, &cx_.tun);
  cx_.emitDrop(&hmeta, hv, now);
  cx_.applyVerdict(hm, hv, hv.in_side);
}

}  // namespace dpu::dp
