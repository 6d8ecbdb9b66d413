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
    case TcpSegVerdict::kKept:  // forwarded; read by the engine, nothing new yet
      c_->tcp_stream[kTcpOutOfOrderSegments].add();
      c_->tcp_stream[kTcpReorderKept].add();
      [[fallthrough]];
    case TcpSegVerdict::kAccept:
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

}  // namespace dpu::dp
