// Fragmented datagrams reassembled for inspection (Worker members; the reassembly itself
// is dataplane/normalize/datagram.h). While the DNS filter or DPI is configured
// (reasm_on_), every fragment of a new datagram is held until the datagram is covered;
// the fragment that completes it carries the reassembled datagram through the flow,
// firewall, DNS, DPI and LB stages (b.work[i], b.judge[i] = kJudgeDatagram), and
// finishDatagram() gives the verdict to every fragment: all forwarded unchanged (an LB
// rewrite applied to each), or all dropped. A blocked DNS query is answered once, from the
// reassembled query. Overlaps with different data, and running out of buffers or held
// handles, are policies (dataplane.fragments.overlapping / on_exhaustion), counted and
// evented.
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>

#include "dataplane/packet/frame_write.h"
#include "dataplane/packet/parser.h"
#include "dataplane/pipeline/burst.h"
#include "dataplane/pipeline/worker.h"

namespace dpu::dp {

bool Worker::reasmFragment(rte_mbuf** pkts, uint16_t i, Burst& b, int32_t slot) {
  rte_mbuf* m = pkts[i];
  PacketMeta& pm = b.meta[i];
  PacketVerdict& v = b.v[i];
  const auto& d = snap_->dataplane;
  DatagramAddInfo ai;
  DatagramStep st = dgram_->add(*frags_, slot, pm, rte_pktmbuf_mtod(m, const uint8_t*), m,
                                b.ts[i], d.frag_overlapping == rules::Policy::kForward, &ai);
  if (ai.overlap) {
    c_->frag_overlaps.add();
    (ai.conflict ? c_->frag_overlap_conflicts : c_->frag_overlap_identical).add();
  }
  switch (st) {
    case DatagramStep::kHeld:
      c_->frag_held.add();
      v.verdict = Verdict::kNone;  // judged with its datagram
      return true;
    case DatagramStep::kComplete:
      return reasmJudge(m, i, b, slot);
    case DatagramStep::kConflict:
      if (!ai.conflict) {  // contradicts the datagram's length
        c_->frag_overlaps.add();
        c_->frag_overlap_conflicts.add();
      }
      if (d.frag_overlapping == rules::Policy::kDrop) {
        reasmDrop(i, b, slot, DropReason::kFragOverlapConflict);
        return true;
      }
      // FORWARD: a fragment that contradicts the datagram's length is not reassembled; it
      // goes with the datagram's verdict.
      if (frags_->hold(slot, m)) {
        c_->frag_held.add();
        v.verdict = Verdict::kNone;
      } else {
        reasmDrop(i, b, slot, DropReason::kFragHoldFull);
      }
      return true;
    case DatagramStep::kTooMany:
      reasmDrop(i, b, slot, DropReason::kFragTooMany);
      return true;
    case DatagramStep::kNoBuffer:
      c_->frag_no_buffer.add();
      return reasmExhausted(m, i, b, slot, DropReason::kFragNoBuffer);
    case DatagramStep::kTooBig:
      c_->frag_too_big.add();
      return reasmExhausted(m, i, b, slot, DropReason::kFragTooBig);
    case DatagramStep::kHoldFull:
      c_->frag_hold_full.add();
      return reasmExhausted(m, i, b, slot, DropReason::kFragHoldFull);
  }
  return true;
}

// Packet i completed datagram `slot`: the reassembled datagram takes its place in the
// stages. False: it goes on to the flow stage.
bool Worker::reasmJudge(rte_mbuf* m, uint16_t i, Burst& b, int32_t slot) {
  const auto& d = snap_->dataplane;
  if (dgram_->firstWasTiny(*frags_, slot) && d.frag_tiny == rules::Policy::kDrop) {
    reasmDrop(i, b, slot, DropReason::kFragTiny);
    return true;
  }
  rte_mbuf* r = dgram_->build(*frags_, slot);
  if (r == nullptr) {  // longer than an IP datagram can be
    c_->frag_too_big.add();
    reasmDrop(i, b, slot, DropReason::kFragTooBig);
    return true;
  }
  // The datagram arrived with packet i: its side, capture time and input index.
  r->port = m->port;
  if (shared_.ts_dynfield >= 0 && (m->ol_flags & shared_.ts_dynflag)) {
    *RTE_MBUF_DYNFIELD(r, shared_.ts_dynfield, uint64_t*) =
        *RTE_MBUF_DYNFIELD(m, shared_.ts_dynfield, const uint64_t*);
    r->ol_flags |= shared_.ts_dynflag;
  }
  if (shared_.seq_dynfield >= 0) {
    *RTE_MBUF_DYNFIELD(r, shared_.seq_dynfield, uint64_t*) =
        *RTE_MBUF_DYNFIELD(m, shared_.seq_dynfield, const uint64_t*);
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
  ParseStatus ps = parsePacket(rte_pktmbuf_mtod(r, const uint8_t*), r->data_len, pm, &tun_);
  b.work[i] = r;
  b.reasm_slot[i] = slot;
  b.judge[i] = Burst::kJudgeDatagram;
  b.frag_slot[i] = slot;  // the LB leaves its rewrite for the fragments
  c_->frag_reassembled.add();
  if (ps != ParseStatus::kOk) {
    // The whole datagram is malformed (e.g. a UDP length that disagrees with it).
    PacketVerdict& v = b.v[i];
    if (d.malformed == rules::Policy::kDrop) {
      v.verdict = Verdict::kDrop;
      v.stage = Stage::kParse;
      v.reason = dropReasonFromParse(ps);
    } else {
      v.verdict = Verdict::kForward;
      c_->malformed_forwarded.add();
    }
    return true;
  }
  pm.is_fragment = false;  // an IPv6 datagram keeps its (now atomic) fragment header
  return false;
}

// Drops datagram `slot` with packet i (reason `why`): its held fragments and every later
// one are dropped too (fragment_datagram_dropped); the buffer goes back at once.
void Worker::reasmDrop(uint16_t i, Burst& b, int32_t slot, DropReason why) {
  PacketVerdict& v = b.v[i];
  v.verdict = Verdict::kDrop;
  v.stage = Stage::kFragment;
  v.reason = why;
  frags_->setFirstFragmentMode(slot);  // later fragments: kApply with the drop
  b.frag_slot[i] = slot;               // finish(): verdict recorded, held ones dropped
}

// No buffer, no held handle, or too big: the on_exhaustion policy.
bool Worker::reasmExhausted(rte_mbuf* m, uint16_t i, Burst& b, int32_t slot, DropReason why) {
  const auto& d = snap_->dataplane;
  if (d.frag_on_exhaustion == rules::Policy::kDrop) {
    c_->frag_fail_closed.add();
    reasmDrop(i, b, slot, why);
    return true;
  }
  // fail_open: the datagram is judged by its first fragment alone, uninspected by DNS / DPI.
  c_->frag_fail_open.add();
  if (Event* ev = uninspectedEvent(b, i, Stage::kFragment, why)) {
    const PacketMeta& pm = b.meta[i];
    ev->ip_ver = static_cast<uint8_t>(pm.l3);
    ev->proto = pm.l4_proto;
    ev->src = pm.src;
    ev->dst = pm.dst;
    ev->vlan = pm.vlan_outer;
    postEvent(ev);
  }
  rte_mbuf* first = static_cast<rte_mbuf*>(dgram_->firstFragment(*frags_, slot));
  frags_->setFirstFragmentMode(slot);
  if (first == nullptr) {
    // The first fragment is still to come: this one waits for it like any.
    int32_t s2 = -1;
    FragAction a = frags_->observe(b.meta[i], b.ts[i], &s2);
    return firstFragmentMode(a, s2, m, i, b);
  }
  // The first fragment is held: it is judged now, in packet i's place; packet i waits
  // with the other held fragments and follows its verdict.
  frags_->record(slot, b.meta[i], b.ts[i]);
  frags_->unhold(slot, first);
  if (!frags_->hold(slot, m)) {  // cannot fail: unhold freed a handle
    reasmDrop(i, b, slot, DropReason::kFragHoldFull);
    return true;
  }
  c_->frag_held.add();
  PacketMeta& pm = b.meta[i];
  parsePacket(rte_pktmbuf_mtod(first, const uint8_t*), first->data_len, pm, &tun_);
  PacketVerdict& v = b.v[i];
  if (shared_.seq_dynfield >= 0) v.seq = *RTE_MBUF_DYNFIELD(first, shared_.seq_dynfield, uint64_t*);
  v.in_side = sideOf(first);
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
void Worker::finishDatagram(rte_mbuf* m, uint16_t i, Burst& b) {
  PacketVerdict& v = b.v[i];
  const int32_t slot = b.reasm_slot[i];
  rte_mbuf* r = b.work[i];
  lb_quiet_ = false;
  FragVerdict fv{static_cast<uint8_t>(v.verdict), static_cast<uint8_t>(v.stage), v.rule,
                 static_cast<uint8_t>(v.reason), v.flow_id};
  frags_->setVerdict(slot, fv);
  if (v.verdict == Verdict::kDrop || v.verdict == Verdict::kReject) {
    emitDrop(&b.meta[i], v, b.ts[i]);
  }
  // Answers are built from the reassembled datagram (whole headers).
  if (v.verdict == Verdict::kReject) sendReject(r, b.meta[i], v.in_side, v.stage == Stage::kDpi);
  releaseFragments(slot, v, b.ts[i]);
  PacketVerdict own = v;
  if (own.verdict == Verdict::kForward && lb_seen_) {
    PacketMeta fm;
    parsePacket(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, fm, &tun_);
    if (!lbFollowFragment(m, fm, slot, own)) emitDrop(&fm, own, b.ts[i]);
  }
  applyVerdict(m, own, own.in_side);
  rte_pktmbuf_free(r);
}

}  // namespace dpu::dp
