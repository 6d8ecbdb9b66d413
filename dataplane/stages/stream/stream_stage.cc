// TCP stream normalization in the packet path (stream_stage.h; the engine is
// dataplane/normalize/tcp_stream.h, docs/tcp-stream.md).
//
// Which segments: TCP segments of tracked flows that a stage inspects - every TCP flow when
// DPI has rules, flows to or from a DNS port when DNS filtering is configured. Other TCP
// flows pay nothing (no checksum, no state). Connections DNS already closed or DPI already
// blocked keep their stage's reason.
//
// Per segment, before DNS and DPI: the TCP checksum is verified (the port's RX L4 checksum
// flag when it offloads it, else in software over pseudo-header + segment): a bad one is
// dropped (tcp_bad_checksum) - the receiver would discard it, so its bytes must not enter
// the stream either. Then the engine: a segment beyond a hole is forwarded with its bytes
// kept (tcp.drop_out_of_order: dropped, tcp_out_of_order); overlapping bytes that differ
// (tcp_overlap_different; policy tcp.overlap RESET also resets the connection both ways and
// drops its later packets, tcp_stream_reset), stream state that cannot be had under a
// fail_closed stage (tcp_stream_exhausted) drop the segment; accepted, its new in-order
// bytes - with the kept bytes behind them when it filled a hole - are handed to the stages
// through Burst::st_*, so a verdict on any of them acts on this segment.
//
// Accepted bytes are not given back when a later stage drops the segment: a retransmission
// of them is then an identical overlap, passed unread. That forwards nothing uninspected
// because every DNS or DPI drop ends the connection for the stages (dns_tcp_closed,
// PathContext::closed: the flow's later packets are dropped, and skipped here), and the stages after
// them (load balancer) only drop bytes they already judged forward (docs/tcp-stream.md,
// "Bytes taken, then dropped by a stage").
#include <rte_mbuf.h>

#include <algorithm>

#include "dataplane/stages/stream/stream_stage.h"

namespace dpu::dp {

StreamStage::StreamStage(PathContext& cx, const rules::DataplaneSettings& s)
    : PathStage(cx, "stream", kCyStream), c_(cx.c) {
  dirs_.reset(new TcpStreamDir[size_t(cx.flows->capacity()) * 2]);
  pool_ = std::make_unique<TcpStreamPool>(s.tcp_window_bytes, s.tcp_windows_per_worker,
                                          s.tcp_reorder_bytes, s.tcp_reorder_buffers_per_worker);
  hold_ = s.tcp_hold_out_of_order && s.tcp_reorder_bytes != 0 && s.tcp_hold_packets_per_worker != 0;
  if (hold_) {
    const uint32_t n = s.tcp_hold_packets_per_worker;
    hold_ns_ = uint64_t(s.tcp_hold_timeout_ms) * 1000000ull;
    held_.reset(new Held[n]);
    held_free_.reset(new uint32_t[n]);
    for (uint32_t k = n; k > 0; --k) held_free_[held_nfree_++] = k - 1;
    const size_t dirs = size_t(cx.flows->capacity()) * 2;
    dir_head_.reset(new uint32_t[dirs]);
    dir_tail_.reset(new uint32_t[dirs]);
    for (size_t k = 0; k < dirs; ++k) dir_head_[k] = dir_tail_[k] = kNoHeld;
    cx.tcp_holder = this;
  }
}

StreamStage::~StreamStage() {
  // Packets still held (a worker destroyed without endFlows): freed.
  while (held_head_ != kNoHeld) {
    rte_mbuf* m = held_[held_head_].m;
    // (the oldest of all is the oldest of its direction: the direction's head)
    holdUnlink(held_head_, kNoHeld);
    rte_pktmbuf_free(m);
  }
  if (cx_.tcp_holder == this) cx_.tcp_holder = nullptr;
}

absl::StatusOr<std::unique_ptr<PathStage>> StreamStage::make(PathContext& cx,
                                                             const rules::DataplaneSettings& s) {
  return std::make_unique<StreamStage>(cx, s);
}

bool StreamStage::refresh() {
  dns_ = cx_.snap ? cx_.snap->dns.get() : nullptr;
  dpi_ = cx_.state->dpi != nullptr;
  return dns_ != nullptr || dpi_;
}

void StreamStage::run(uint16_t from, uint16_t to) {
  Burst& b = *cx_.burst;
  pool_->beginRun();  // the stages have read what the last run handed out
  for (uint16_t i = from; i < to; ++i) {
    b.st_read[i] = false;
    if (b.v[i].verdict == Verdict::kForward) segment(b.work[i], b, i);
  }
}

void StreamStage::flowEnded(int32_t pos) {
  if (held_n_ != 0) {  // held beyond a hole that never filled: the flow is gone
    PacketVerdict x;
    x.verdict = Verdict::kDrop;
    x.stage = Stage::kFlow;
    x.reason = DropReason::kTcpHoldExpired;
    x.rule = kNoRule;
    dropFlowHeld(pos, x, cx_.now_ns);
  }
  tcpStreamRelease(*pool_, dirs_[size_t(pos) * 2]);
  tcpStreamRelease(*pool_, dirs_[size_t(pos) * 2 + 1]);
}

void StreamStage::event(const Burst& b, uint16_t i, DropReason why) {
  PacketVerdict v = b.v[i];
  v.stage = Stage::kFlow;
  v.reason = why;
  cx_.emitDrop(&b.meta[i], v, b.ts[i]);  // verdict forward: an event, not a drop
}

void StreamStage::segment(rte_mbuf* m, Burst& b, uint16_t i) {
  const rules::CompiledDns* dns = dns_;
  const PacketMeta& pm = b.meta[i];
  const int32_t pos = b.pos[i];
  if (pos < 0 || pm.l4_proto != 6 || !pm.has_l4 || pm.is_fragment) return;
  const bool dns_flow = dns != nullptr && (dns->isDnsPort(pm.dport) || dns->isDnsPort(pm.sport));
  if (!dns_flow && !dpi_) return;
  // Connections DNS closed or DPI blocked keep their stage's reason.
  if (cx_.closed[pos] & (kClosedByDpi | (dns_flow ? kClosedByDns : 0))) return;
  PacketVerdict& v = b.v[i];
  TcpStreamDir* pair = &dirs_[size_t(pos) * 2];
  auto drop = [&](DropReason r) {
    v.verdict = Verdict::kDrop;
    v.stage = Stage::kFlow;
    v.reason = r;
    v.rule = kNoRule;
  };
  if (pair[0].flags & TcpStreamDir::kReset) {
    drop(DropReason::kTcpStreamReset);
    return;
  }
  c_->tcp_stream[kTcpSegments].add();
  const rules::DataplaneSettings& dps = cx_.snap->dataplane;
  const uint8_t* frame = rte_pktmbuf_mtod(m, const uint8_t*);
  if (dps.tcp_verify_checksum) {
    const uint64_t ck = m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK;
    bool ok = ck == RTE_MBUF_F_RX_L4_CKSUM_GOOD;
    if (ck != RTE_MBUF_F_RX_L4_CKSUM_GOOD && ck != RTE_MBUF_F_RX_L4_CKSUM_BAD) {
      // Not offloaded (or not known): in software. The parser checked the lengths against
      // the frame (l3_len bytes of IP are present).
      c_->tcp_stream[kTcpChecksumSoftware].add();
      const uint32_t l4_len = uint32_t(pm.l3_len) - (pm.l4_offset - pm.l3_offset);
      ok = pm.l4_offset + l4_len <= m->data_len &&
           tcpChecksumOk(frame + pm.l3_offset, pm.l3 == L3Type::kIpv6, frame + pm.l4_offset, l4_len);
    }
    if (!ok) {
      c_->tcp_stream[kTcpBadChecksums].add();
      drop(DropReason::kTcpBadChecksum);
      return;
    }
  }
  const bool fail_closed = (dns_flow && dps.tcp_dns_fail == rules::Policy::kDrop) ||
                           (dpi_ && dps.tcp_dpi_fail == rules::Policy::kDrop);
  TcpSegment s;
  s.seq = pm.tcp_seq;
  s.ack = pm.tcp_ack;
  s.flags = pm.tcp_flags;
  s.payload = frame + pm.payload_offset;
  s.len = std::min<uint32_t>(pm.payload_len, m->data_len - pm.payload_offset);
  const uint8_t d = b.dir[i] & 1;
  const TcpSegResult r = tcpStreamSegment(*pool_, pair[d], pair[d ^ 1], s, fail_closed);
  if (r.no_window) {
    c_->tcp_stream[kTcpNoWindow].add();
    if (r.verdict == TcpSegVerdict::kAccept) event(b, i, DropReason::kTcpStreamExhausted);
  }
  if (r.reorder_full) {
    c_->tcp_stream[kTcpOutOfOrderSegments].add();
    c_->tcp_stream[kTcpReorderFull].add();
  }
  switch (r.verdict) {
    case TcpSegVerdict::kKept:  // forwarded (held in hold mode); read, nothing new yet
      c_->tcp_stream[kTcpOutOfOrderSegments].add();
      c_->tcp_stream[kTcpReorderKept].add();
      if (hold_) b.hold[i] |= Burst::kHoldTcpKeep;
      [[fallthrough]];
    case TcpSegVerdict::kAccept:
      // Hold mode: a segment that took kept bytes may make held packets in order - also
      // those of this burst, held at finish before it (the stages judged them together).
      if (hold_ && (r.kept != 0 || dir_head_[size_t(pos) * 2 + d] != kNoHeld))
        b.hold[i] |= Burst::kHoldTcpAccepted;
      if (r.unverified) {
        c_->tcp_stream[kTcpUnverified].add();
        event(b, i, DropReason::kTcpStreamExhausted);
      }
      if (r.unkept) {  // beyond a hole, no room to keep it, fail open: passed unread
        c_->tcp_stream[kTcpReorderUnkept].add();
        event(b, i, DropReason::kTcpStreamExhausted);
      }
      if (r.kept) {
        c_->tcp_stream[kTcpReorderFilled].add();
        c_->tcp_stream[kTcpReorderBytes].add(r.kept);
      }
      if (r.gap) c_->tcp_stream[kTcpGaps].add();
      if ((pm.tcp_flags & kTcpSyn) && r.len != 0) c_->tcp_stream[kTcpSynData].add();
      b.st_read[i] = true;
      b.st_data[i] = r.data;
      b.st_len[i] = r.len;
      b.st_seq[i] = r.seq;
      b.st_kept[i] = r.kept != 0;
      b.st_fin[i] = r.fin;
      b.st_gap[i] = r.gap;
      b.st_peer_known[i] = (pair[d ^ 1].flags & TcpStreamDir::kSeqKnown) != 0;
      b.st_peer_next[i] = pair[d ^ 1].next_seq;
      return;
    case TcpSegVerdict::kOutOfOrder:
      c_->tcp_stream[kTcpOutOfOrderSegments].add();
      drop(DropReason::kTcpOutOfOrder);
      return;
    case TcpSegVerdict::kOverlapDifferent:
      c_->tcp_stream[kTcpOverlapDiffering].add();
      drop(DropReason::kTcpOverlapDifferent);
      if (dps.tcp_overlap_reset) {
        v.verdict = Verdict::kReject;  // RSTs both ways (sendReject), later packets dropped
        pair[0].flags |= TcpStreamDir::kReset;
      }
      return;
    case TcpSegVerdict::kFailClosed:  // (reorder_full too when it had no room to keep it)
      c_->tcp_stream[kTcpFailClosed].add();
      drop(DropReason::kTcpStreamExhausted);
      return;
  }
}

// --- hold mode ------------------------------------------------------------------------------

namespace {
inline bool seqBeforeEq(uint32_t a, uint32_t b) { return int32_t(a - b) <= 0; }
}  // namespace

// Unlinks held packet h (dprev: its predecessor in its direction's list, kNoHeld when it is
// the head) and frees its slot.
void StreamStage::holdUnlink(uint32_t h, uint32_t dprev) {
  Held& s = held_[h];
  if (s.prev != kNoHeld) held_[s.prev].next = s.next; else held_head_ = s.next;
  if (s.next != kNoHeld) held_[s.next].prev = s.prev; else held_tail_ = s.prev;
  if (dprev != kNoHeld) held_[dprev].dnext = s.dnext; else dir_head_[s.key] = s.dnext;
  if (dir_tail_[s.key] == h) dir_tail_[s.key] = dprev;
  s.m = nullptr;
  held_free_[held_nfree_++] = h;
  --held_n_;
  holdPublish();
}

void StreamStage::heldRelease(uint32_t h, uint32_t dprev) {
  rte_mbuf* m = held_[h].m;
  const PacketVerdict v = held_[h].v;
  holdUnlink(h, dprev);
  c_->tcp_stream[kTcpHeldReleased].add();
  cx_.applyVerdict(m, v, v.in_side);  // its own verdict (forward), reported now
}

void StreamStage::heldDrop(uint32_t h, uint32_t dprev, const PacketVerdict& drop, uint64_t at) {
  rte_mbuf* m = held_[h].m;
  PacketVerdict v = held_[h].v;
  holdUnlink(h, dprev);
  c_->tcp_stream[drop.reason == DropReason::kTcpHoldExpired ? kTcpHeldExpired : kTcpHeldDropped].add();
  v.verdict = drop.verdict == Verdict::kReject ? Verdict::kDrop : drop.verdict;  // one RST pair
  v.stage = drop.stage;
  v.reason = drop.reason;
  v.rule = drop.rule;
  PacketMeta pm;
  parsePacket(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, pm, &cx_.tun);
  cx_.emitDrop(&pm, v, at);
  cx_.applyVerdict(m, v, v.in_side);
}

void StreamStage::releaseInOrder(uint32_t key) {
  const uint32_t next = dirs_[key].next_seq;
  uint32_t prev = kNoHeld;
  for (uint32_t h = dir_head_[key]; h != kNoHeld;) {
    const uint32_t after = held_[h].dnext;
    if (seqBeforeEq(held_[h].seq_end, next)) {
      heldRelease(h, prev);
    } else {
      prev = h;
    }
    h = after;
  }
}

void StreamStage::dropFlowHeld(int32_t pos, const PacketVerdict& drop, uint64_t at) {
  for (int d = 0; d < 2; ++d) {
    const uint32_t key = uint32_t(pos) * 2 + d;
    while (dir_head_[key] != kNoHeld) heldDrop(dir_head_[key], kNoHeld, drop, at);
  }
}

void StreamStage::expireHeld(uint64_t now) {
  PacketVerdict x;
  x.verdict = Verdict::kDrop;
  x.stage = Stage::kFlow;
  x.reason = DropReason::kTcpHoldExpired;
  x.rule = kNoRule;
  while (held_head_ != kNoHeld && held_[held_head_].deadline <= now) {
    // The oldest of all is also the oldest (the head) of its direction.
    heldDrop(held_head_, kNoHeld, x, now);
  }
}

bool StreamStage::finishPacket(rte_mbuf* m, uint16_t i) {
  Burst& b = *cx_.burst;
  const uint8_t hf = b.hold[i];
  const int32_t pos = b.pos[i];
  if (pos < 0) return false;
  PacketVerdict& v = b.v[i];
  const uint32_t key = uint32_t(pos) * 2 + (b.dir[i] & 1);
  if (v.verdict != Verdict::kForward) {
    // A segment dropped by a stage after the engine accepted it (DPI or DNS judged the
    // bytes it carried, filling the hole or not): the flow's held packets go with it (a
    // drop there blocks the connection). Refused by the engine itself (no kHoldTcp* flag
    // then): nothing changes for them.
    if (v.stage != Stage::kFlow && dir_head_[key] != kNoHeld) dropFlowHeld(pos, v, b.ts[i]);
    return false;
  }
  if (hf & Burst::kHoldTcpKeep) {
    if (held_nfree_ == 0) {
      c_->tcp_stream[kTcpHoldFull].add();
      const PacketMeta& pm = b.meta[i];
      const rules::CompiledDns* dns = dns_;
      const bool dns_flow = dns != nullptr && (dns->isDnsPort(pm.dport) || dns->isDnsPort(pm.sport));
      const rules::DataplaneSettings& dps = cx_.snap->dataplane;
      const bool fail_closed = (dns_flow && dps.tcp_dns_fail == rules::Policy::kDrop) ||
                               (dpi_ && dps.tcp_dpi_fail == rules::Policy::kDrop);
      if (fail_closed) {  // dropped: the sender retransmits it (its bytes stay kept)
        v.verdict = Verdict::kDrop;
        v.stage = Stage::kFlow;
        v.reason = DropReason::kTcpStreamExhausted;
        v.rule = kNoRule;
      } else {
        event(b, i, DropReason::kTcpStreamExhausted);  // forwarded before the hole fills
      }
      return false;
    }
    const uint32_t h = held_free_[--held_nfree_];
    Held& s = held_[h];
    s.m = m;
    s.v = v;
    s.deadline = b.ts[i] + hold_ns_;
    s.seq_end = b.meta[i].tcp_seq + b.meta[i].payload_len;
    s.key = key;
    s.next = kNoHeld;
    s.prev = held_tail_;
    if (held_tail_ != kNoHeld) held_[held_tail_].next = h; else held_head_ = h;
    held_tail_ = h;
    s.dnext = kNoHeld;
    if (dir_tail_[key] != kNoHeld) held_[dir_tail_[key]].dnext = h; else dir_head_[key] = h;
    dir_tail_[key] = h;
    ++held_n_;
    c_->tcp_stream[kTcpHeld].add();
    holdPublish();
    return true;
  }
  if ((hf & Burst::kHoldTcpAccepted) && dir_head_[key] != kNoHeld) {
    if (!(hf & Burst::kHoldWanted) && cx_.held == 0) {
      // Nothing else holds it: this segment leaves first, then what it made in order.
      cx_.applyVerdict(m, v, v.in_side);
      releaseInOrder(key);
      return true;
    }
    // The DPI hold-back may keep this one (a file's end to decide): the held packets beyond
    // it leave now; the receiver cannot hand them on before it arrives.
    releaseInOrder(key);
  }
  return false;
}

}  // namespace dpu::dp
