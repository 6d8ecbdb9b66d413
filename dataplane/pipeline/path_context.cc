// The PathContext's services (path_context.h): events, verdicts, generated packets, tx.
#include "dataplane/pipeline/path_context.h"

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_mempool.h>
#include <rte_pause.h>
#include <rte_ring.h>

#include <algorithm>
#include <cstring>

#include "dataplane/packet/frame_write.h"

namespace dpu::dp {

namespace {
constexpr uint8_t kProtoTcp = 6;
}  // namespace

// Answers a rejected packet out of its ingress port: a TCP RST to the sender (and, for a
// segment of a connection, one to the receiver out of the other port), else an ICMP /
// ICMPv6 administratively-prohibited unreachable. The mbufs come from the packet pool; the
// frames are stamped with the rejected packet's receive time (pcap outputs).
void PathContext::sendReject(rte_mbuf* m, const PacketMeta& pm, uint8_t in_side, bool dpi) {
  const uint8_t* f = rte_pktmbuf_mtod(m, const uint8_t*);
  bool tcp = pm.l4_proto == kProtoTcp && pm.has_l4;
  auto send = [&](uint8_t out_side, bool to_sender) {
    if (shared.pkt_pool == nullptr) {
      c->fw_reject_nombuf.add();
      return;
    }
    rte_mbuf* r = rte_pktmbuf_alloc(shared.pkt_pool);
    if (r == nullptr) {
      c->fw_reject_nombuf.add();
      return;
    }
    uint8_t* out = rte_pktmbuf_mtod(r, uint8_t*);
    uint32_t cap = rte_pktmbuf_tailroom(r);
    uint16_t len = tcp ? buildTcpReset(f, m->data_len, pm, to_sender, out, cap)
                       : buildIcmpUnreachable(f, m->data_len, pm, out, cap);
    if (len == 0) {
      rte_pktmbuf_free(r);
      c->fw_reject_suppressed.add();
      return;
    }
    r->data_len = len;
    r->pkt_len = len;
    queueGenerated(r, out_side, m);
    if (tcp) {
      (dpi ? c->dpi_rst_sent : c->fw_rst_sent).add();  // its own counter
    } else {
      c->fw_icmp_sent.add();
    }
  };
  send(in_side, true);
  if (tcp && (pm.tcp_flags & kTcpAck) && !(pm.tcp_flags & kTcpRst)) send(in_side ^ 1, false);
}

void PathContext::queueGenerated(rte_mbuf* r, uint8_t out_side, const rte_mbuf* like) {
  r->port = opts.port[out_side];
  if (shared.ts_dynfield >= 0 && (like->ol_flags & shared.ts_dynflag)) {
    *RTE_MBUF_DYNFIELD(r, shared.ts_dynfield, uint64_t*) =
        *RTE_MBUF_DYNFIELD(like, shared.ts_dynfield, const uint64_t*);
    r->ol_flags |= shared.ts_dynflag;
  }
  if (ntx[out_side] == kTxCap) flushTx();
  tx[out_side][ntx[out_side]++] = r;
}

void PathContext::applyVerdict(rte_mbuf* m, const PacketVerdict& v, uint8_t in_side) {
  if (cap_on) capturePacket(m, v, in_side);
  c->verdicts[static_cast<int>(v.verdict)].add();
  if (v.verdict == Verdict::kForward) {
    ++tx_queued;
    uint8_t out = in_side ^ 1;
    if (ntx[out] == kTxCap) flushTx();
    tx[out][ntx[out]++] = m;
  } else {
    c->drops[static_cast<int>(v.reason)].add();
    c->stage_drops[static_cast<int>(v.stage)].add();
    rte_pktmbuf_free(m);
  }
  if (sink) sink->onVerdict(v);
}

void PathContext::flushTx() {
  for (int s = 0; s < 2; ++s) {
    uint16_t n = ntx[s];
    if (!n) continue;
    if (!opts.tx_direct[s]) {
      // No tx queue of our own: through the side's ring to worker 0, which sends and counts
      // them (drainTxRings). Order within the ring is this worker's order.
      ntx[s] = 0;
      unsigned put = rte_ring_mp_enqueue_burst(shared.tx_ring[s],
                                               reinterpret_cast<void**>(tx[s]), n, nullptr);
      while (put < n && opts.lossless && !shared.stop->load(std::memory_order_relaxed)) {
        rte_pause();
        put += rte_ring_mp_enqueue_burst(shared.tx_ring[s],
                                         reinterpret_cast<void**>(tx[s] + put), n - put, nullptr);
      }
      for (uint16_t i = put; i < n; ++i) {
        c->drops[static_cast<int>(DropReason::kTxFailed)].add();
        rte_pktmbuf_free(tx[s][i]);
      }
      continue;
    }
    uint64_t bytes = 0;
    for (uint16_t i = 0; i < n; ++i) bytes += tx[s][i]->pkt_len;
    uint16_t sent = 0;
    for (int tries = 0; tries < 8 && sent < n; ++tries) {
      sent += rte_eth_tx_burst(opts.port[s], opts.queue, tx[s] + sent, n - sent);
    }
    for (uint16_t i = sent; i < n; ++i) {
      bytes -= tx[s][i]->pkt_len;
      c->drops[static_cast<int>(DropReason::kTxFailed)].add();
      rte_pktmbuf_free(tx[s][i]);
    }
    c->tx_packets[s].add(sent);
    c->tx_bytes[s].add(bytes);
    ntx[s] = 0;
  }
}

Event* PathContext::newEvent() {
  if (!events || !shared.event_pool) return nullptr;
  void* obj = nullptr;
  if (rte_mempool_get(shared.event_pool, &obj) != 0) {
    c->events_lost.add();
    return nullptr;
  }
  Event* ev = static_cast<Event*>(obj);
  std::memset(ev, 0, sizeof(*ev));
  return ev;
}

void PathContext::postEvent(Event* ev) {
  if (rte_ring_sp_enqueue(events, ev) != 0) {
    rte_mempool_put(shared.event_pool, ev);
    c->events_lost.add();
  }
}

void PathContext::emitDrop(const PacketMeta* meta, const PacketVerdict& v, uint64_t now) {
  Event* ev = newEvent();
  if (!ev) return;
  ev->type = EventType::kDrop;
  ev->worker = static_cast<uint8_t>(opts.id);
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

Event* PathContext::uninspectedEvent(uint16_t i, Stage stage, DropReason why) {
  const Burst& b = *burst;
  Event* ev = newEvent();
  if (ev == nullptr) return nullptr;
  ev->type = EventType::kUninspected;
  ev->worker = static_cast<uint8_t>(opts.id);
  ev->stage = stage;
  ev->reason = why;
  ev->verdict = Verdict::kForward;
  ev->rule = kNoRule;
  ev->generation = generation;
  ev->ts_ns = b.ts[i];
  ev->in_side = b.v[i].in_side;
  ev->seq = b.v[i].seq;
  return ev;
}

void PathContext::eventPacket(Event& ev, const PacketMeta& pm) {
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

void PathContext::capturePacket(const rte_mbuf* m, const PacketVerdict& v, uint8_t in_side) {
  CaptureRing& c = mbox->capture;
  if (c.rule_uid != 0) {
    if (v.stage != Stage::kFirewall || v.generation != generation ||
        v.rule >= state->rule_uid.size() || state->rule_uid[v.rule] != c.rule_uid) {
      return;
    }
  } else if (c.drops) {
    if (v.verdict != Verdict::kDrop && v.verdict != Verdict::kReject) return;
    if (!c.any_reason && static_cast<uint8_t>(v.reason) != c.reason) return;
  } else {
    return;
  }
  const uint32_t head = c.head.load(std::memory_order_relaxed);
  if (head - c.tail.load(std::memory_order_acquire) >= kCaptureSlots) {
    c.lost.store(c.lost.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return;
  }
  CaptureSlot& s = c.slots[head & (kCaptureSlots - 1)];
  s.ts_ns = packetTime(const_cast<rte_mbuf*>(m));
  s.orig_len = m->pkt_len;
  const uint32_t len = std::min<uint32_t>(m->pkt_len, kCaptureSnap);
  const void* d = rte_pktmbuf_read(m, 0, len, s.data);
  if (d != s.data) std::memcpy(s.data, d, len);
  s.cap_len = static_cast<uint16_t>(len);
  s.in_side = in_side;
  s.verdict = static_cast<uint8_t>(v.verdict);
  s.stage = static_cast<uint8_t>(v.stage);
  s.reason = static_cast<uint8_t>(v.reason);
  c.head.store(head + 1, std::memory_order_release);
}

}  // namespace dpu::dp
