// HTTP in the DPI stage (dpi_stage.h; docs/http.md), for the new in-order bytes of a TCP
// segment (the stream stage's) before the raw-stream scan:
// flows on a configured port (or, with detect_on_other_ports, whose client's first bytes are
// an HTTP request line) get a libhtp connection parser (dataplane/normalize/http.h); their
// request and response bodies are scanned as files, and a rule firing on a file acts on the
// packet that carried its bytes (alert / drop / reset, as for the stream) and on the flow.
//
// Hold-back (docs/http.md "Verdicts"): while a file is open and a drop / reset rule can only
// be decided at the file's end (HttpRuntime::holdsFiles), the last packet that carried new
// stream bytes of the file's direction is held in a slot of the worker's pool: the next
// packet with new bytes of that direction releases it (forwarded first: the order of the
// direction is kept), the file's end decides it (dropped with the flow when a drop / reset
// rule fires, else released), and the timeout, the flow's end and shutdown release it.
// Packets of the direction without new bytes pass (a retransmission of held bytes is
// dropped, counted: it would hand the client what is held).
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>

#include <cstring>

#include "dataplane/packet/parser.h"

#include "dataplane/stages/dpi/dpi_stage.h"
#include "dataplane/stages/dpi/file_extract.h"

namespace dpu::dp {

// What libhtp found while one packet (or the flow's end) was parsed: acted upon by the worker.
struct HttpPathSink final : HttpSink {
  HttpPathSink(DpiStage* w_, rte_mbuf* m_, Burst* b_, uint16_t i_, int32_t pos_,
               const HttpFlowIdent* id_)
      : w(w_), m(m_), b(b_), i(i_), pos(pos_), id(id_) {}
  DpiStage* w;
  rte_mbuf* m;
  Burst* b;  // null at flow end
  uint16_t i;
  int32_t pos;
  const HttpFlowIdent* id;
  void fileScanned(const DpiOutcome& o, const HttpEventInfo& f) override {
    if (b != nullptr) {
      w->dpiAct(o, *b, i, pos, &f);
    } else {
      const bool held = w->held_n_ != 0 && (w->hold_of_[size_t(pos) * 2] != DpiStage::kNoHold ||
                                            w->hold_of_[size_t(pos) * 2 + 1] != DpiStage::kNoHold);
      const uint32_t blk = w->dpiFileEndAlerts(o, f, held);
      if (blk != 0 && w->hold_end_block_ == 0) w->hold_end_block_ = blk;
    }
  }
  void fileBytes(const HttpEventInfo& f, const uint8_t* p, size_t n) override {
    if (w->cx_.shared.extract != nullptr) w->cx_.shared.extract->data(w->cx_.opts.id, pos, f.file_dir, p, n);
  }
  void fileClosed(const HttpEventInfo& f) override {
    if (w->cx_.shared.extract != nullptr) w->cx_.shared.extract->close(w->cx_.opts.id, pos, f);
    if (w->http_rt_->settings().fileinfo_events)
      w->httpEvent(EventType::kFileInfo, f, *id, b != nullptr ? b->ts[i] : w->cx_.now_ns);
  }
  void transaction(const HttpEventInfo& t) override {
    w->httpEvent(EventType::kHttp, t, *id, b != nullptr ? b->ts[i] : w->cx_.now_ns);
  }
  // --- signatures --- header-level buffers of a transaction, on the packet that completed
  // them (at the flow's end there is no packet: not inspected).
  bool wantsHeaders() const override { return b != nullptr && w->sigWantsHeaders(); }
  void headers(rules::SigInput& in) override {
    if (b != nullptr) w->sigRun(*b, i, pos, in);
  }
  // No body buffer left: dpi_fail DROP drops the packet and blocks the flow; FORWARD passes
  // it with an `uninspected` event (counted http sig_no_body_buffer either way).
  void noBodyBuffer() override {
    if (b == nullptr) return;
    if (w->http_rt_->settings().fail_closed) {
      PacketVerdict& v = b->v[i];
      v.verdict = Verdict::kDrop;
      v.stage = Stage::kDpi;
      v.reason = DropReason::kSigNoBodyBuffer;
      v.rule = kNoRule;
      if (pos >= 0) w->block(pos, DpiStage::kSigBodyBlock);
    } else {
      w->httpUninspected(*b, i, DropReason::kSigNoBodyBuffer);
    }
  }
};

void DpiStage::httpCounters() {
  uint64_t* hc = http_rt_->worker(cx_.opts.id).counters;
  for (int k = 0; k < kHttpCounterCount; ++k) {
    if (hc[k] != 0) {
      c_->http[k].add(hc[k]);
      hc[k] = 0;
    }
  }
}

namespace {
void flowIdentity(Event& ev, const HttpFlowIdent& id) {
  ev.in_side = id.in_side;
  ev.flow_id = id.flow_id;
  ev.ip_ver = id.ip_ver;
  ev.proto = 6;
  ev.src = id.src;
  ev.dst = id.dst;
  ev.sport = id.sport;
  ev.dport = id.dport;
  ev.vlan = id.vlan;
}
}  // namespace

void DpiStage::httpAlertInfo(Event& ev, const HttpEventInfo& file) const {
  ev.http = file;
  if (ev.ip_ver == 0 && http_ident_ != nullptr) flowIdentity(ev, *http_ident_);
}

void DpiStage::httpUninspected(const Burst& b, uint16_t i, DropReason why) {
  Event* ev = cx_.uninspectedEvent(i, Stage::kDpi, why);
  if (ev == nullptr) return;
  ev->flow_id = b.v[i].flow_id;
  cx_.eventPacket(*ev, b.meta[i]);  // an HTTP flow: its packets have their IP layer
  cx_.postEvent(ev);
}

void DpiStage::httpEvent(EventType type, const HttpEventInfo& info, const HttpFlowIdent& id,
                       uint64_t ts) {
  Event* ev = cx_.newEvent();
  if (ev == nullptr) return;
  ev->type = type;
  ev->worker = static_cast<uint8_t>(cx_.opts.id);
  ev->stage = Stage::kDpi;
  ev->verdict = Verdict::kForward;
  ev->rule = kNoRule;
  ev->generation = cx_.generation;
  ev->ts_ns = ts;
  flowIdentity(*ev, id);
  ev->http = info;
  cx_.postEvent(ev);
}

bool DpiStage::httpStage(rte_mbuf* m, Burst& b, uint16_t i, int32_t pos, const uint8_t* p,
                       uint32_t n) {
  HttpFlow& f = http_flows_[pos];
  if (f.rt_id != http_rt_->id()) {  // a flow from before this runtime (its slot is gone)
    HttpInspector::forget(f);
    f.rt_id = http_rt_->id();
  }
  const PacketMeta& pm = b.meta[i];
  PacketVerdict& v = b.v[i];
  const uint8_t dir = b.dir[i] & 1;
  if (f.state == HttpFlow::kBlocked) {  // no slot under fail-closed: the flow is not passed
    v.verdict = Verdict::kDrop;
    v.stage = Stage::kDpi;
    v.reason = DropReason::kHttpNoSlot;
    v.rule = kNoRule;
    return false;
  }
  if (f.state == HttpFlow::kUnknown) {
    // The client: the side talking to an HTTP port, or whose first bytes are a request line.
    bool http = true;
    if (http_rt_->isHttpPort(pm.dport)) f.client_dir = dir;
    else if (http_rt_->isHttpPort(pm.sport)) f.client_dir = uint8_t(dir ^ 1);
    else if (http_rt_->settings().detect_on_other_ports && HttpInspector::looksLikeRequest(p, n))
      f.client_dir = dir;
    else http = false;
    if (!http) {
      f.state = HttpFlow::kNotHttp;
      http_rt_->worker(cx_.opts.id).counters[kHttpNotHttp]++;
      httpCounters();
      return true;
    }
    if (!HttpInspector::open(*http_rt_, cx_.opts.id, f)) {
      httpCounters();
      // Exhaustion follows the DPI stage's fail policy (dataplane.tcp.dpi_fail): fail open
      // inspects the flow's raw stream with every rule (as a flow that is not HTTP), with an
      // event; fail closed drops the flow (its drops are drop events like any other).
      if (!http_rt_->settings().fail_closed) httpUninspected(b, i, DropReason::kHttpNoSlot);
      if (http_rt_->settings().fail_closed) {
        f.state = HttpFlow::kBlocked;
        return httpStage(m, b, i, pos, p, n);
      }
      f.state = HttpFlow::kNotHttp;
      return true;
    }
    HttpFlowIdent& id = http_rt_->worker(cx_.opts.id).slots[f.slot].ident;
    const bool from_client = dir == f.client_dir;
    id = HttpFlowIdent{};
    id.src = from_client ? pm.src : pm.dst;
    id.dst = from_client ? pm.dst : pm.src;
    id.sport = from_client ? pm.sport : pm.dport;
    id.dport = from_client ? pm.dport : pm.sport;
    id.vlan = pm.vlan_outer;
    id.ip_ver = static_cast<uint8_t>(pm.l3);
    id.in_side = from_client ? v.in_side : uint8_t(v.in_side ^ 1);
    id.flow_id = v.flow_id;
    // The raw streams of an HTTP flow report only the rule sets scoped to the stream.
    for (int d = 0; d < 2; ++d) {
      DpiDir& sd = dpi_dirs_[size_t(pos) * 2 + d];
      if (sd.rt_id != dpi_rt_->id()) {
        DpiInspector::forget(sd);
        sd.rt_id = dpi_rt_->id();
      }
      sd.flags |= DpiDir::kMaskHttpStream;
    }
  }
  if (f.state != HttpFlow::kHttp) return true;
  HttpPathSink sink(this, m, &b, i, pos, &http_rt_->worker(cx_.opts.id).slots[f.slot].ident);
  const bool ok = HttpInspector::data(*http_rt_, cx_.opts.id, f, dir == f.client_dir, p, n, b.ts[i], sink);
  if (!ok) {
    // libhtp stopped (error, tunnel): the raw streams report every rule from now on.
    for (int d = 0; d < 2; ++d) dpi_dirs_[size_t(pos) * 2 + d].flags &= uint8_t(~DpiDir::kMaskHttpStream);
  } else if (http_rt_->holdsFiles() && v.verdict == Verdict::kForward &&
             HttpInspector::fileOpen(*http_rt_, cx_.opts.id, f, dir == f.client_dir)) {
    b.hold[i] |= Burst::kHoldWanted;  // the file's end may still decide: held (holdFinish)
  }
  httpCounters();
  return v.verdict == Verdict::kForward;
}

void DpiStage::httpFin(rte_mbuf* m, Burst& b, uint16_t i, int32_t pos) {
  HttpFlow& f = http_flows_[pos];
  // The client's FIN: the response may still come (half close).
  if (f.rt_id != http_rt_->id() || f.state != HttpFlow::kHttp || (b.dir[i] & 1) == f.client_dir)
    return;
  const HttpFlowIdent id = http_rt_->worker(cx_.opts.id).slots[f.slot].ident;
  HttpPathSink sink(this, m, &b, i, pos, &id);
  HttpInspector::fin(*http_rt_, cx_.opts.id, f, sink);
  httpCounters();
}

void DpiStage::httpFlowEnded(int32_t pos) {
  if (!http_flows_) return;
  HttpFlow& f = http_flows_[pos];
  hold_end_block_ = 0;
  if (http_rt_ != nullptr && f.rt_id == http_rt_->id() && f.slot != HttpFlow::kNone) {
    const HttpFlowIdent id = http_rt_->worker(cx_.opts.id).slots[f.slot].ident;
    // No packet: the files' end only alerts, or decides the flow's held packets.
    HttpPathSink sink(this, nullptr, nullptr, 0, pos, &id);
    http_ident_ = &id;
    HttpInspector::end(*http_rt_, cx_.opts.id, f, sink);
    http_ident_ = nullptr;
    httpCounters();
  }
  HttpInspector::forget(f);
  // Packets still held: dropped when the files' end made a drop / reset rule true, else
  // released (the flow has ended: nothing else will decide them).
  if (held_n_ != 0) holdFlowEnded(pos, hold_end_block_, cx_.now_ns);
  hold_end_block_ = 0;
}

// --- hold-back ------------------------------------------------------------------------------

void DpiStage::holdInit(uint32_t slots) {
  if (slots > kNoHold) slots = kNoHold;
  holds_.reset(new HoldSlot[slots]);
  hold_free_.reset(new uint16_t[slots]);
  hold_nfree_ = 0;
  for (uint32_t k = slots; k > 0; --k) hold_free_[hold_nfree_++] = uint16_t(k - 1);
  const size_t dirs = size_t(flows_->capacity()) * 2;
  hold_of_.reset(new uint16_t[dirs]);
  for (size_t k = 0; k < dirs; ++k) hold_of_[k] = kNoHold;
}

void DpiStage::holdUnlink(uint16_t h) {
  HoldSlot& s = holds_[h];
  if (s.prev != kNoHold) holds_[s.prev].next = s.next; else hold_head_ = s.next;
  if (s.next != kNoHold) holds_[s.next].prev = s.prev; else hold_tail_ = s.prev;
  hold_of_[s.key] = kNoHold;
  hold_free_[hold_nfree_++] = h;
  --held_n_;
  s.m = nullptr;
  holdPublish();
}

void DpiStage::holdRelease(uint16_t h, int counter) {
  rte_mbuf* m = holds_[h].m;
  const PacketVerdict v = holds_[h].v;
  holdUnlink(h);
  c_->http[counter].add();
  cx_.applyVerdict(m, v, v.in_side);  // its verdict, forward, reported now
}

void DpiStage::holdDrop(uint16_t h, uint32_t block, uint64_t at) {
  rte_mbuf* m = holds_[h].m;
  PacketVerdict v = holds_[h].v;
  holdUnlink(h);
  c_->http[kHttpHoldDropped].add();
  // The flow's block decides it, as it decides the flow's later packets (packet()).
  v.verdict = Verdict::kDrop;
  v.stage = Stage::kDpi;
  v.reason = block == kNoRule     ? DropReason::kDpiGap
             : block == kHoldBlock ? DropReason::kHttpHoldExhausted
                                   : DropReason::kDpiDrop;
  v.rule = block == kNoRule || block == kHoldBlock ? kNoRule : block - 1;
  PacketMeta pm;
  parsePacket(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, pm, &cx_.tun);
  cx_.emitDrop(&pm, v, at);
  cx_.applyVerdict(m, v, v.in_side);
}

void DpiStage::expireHeld(uint64_t now) {
  while (hold_head_ != kNoHold && holds_[hold_head_].deadline <= now) {
    const uint32_t blk = dpi_block_[holds_[hold_head_].key / 2];
    if (blk != 0) holdDrop(hold_head_, blk, now);  // its flow was blocked meanwhile
    else holdRelease(hold_head_, kHttpHoldTimeouts);
  }
}

void DpiStage::holdFlowEnded(int32_t pos, uint32_t block, uint64_t at) {
  for (int d = 0; d < 2; ++d) {
    const uint16_t h = hold_of_[size_t(pos) * 2 + d];
    if (h == kNoHold) continue;
    if (block != 0) holdDrop(h, block, at); else holdRelease(h, kHttpHoldReleased);
  }
}

namespace {
inline bool seqBefore(uint32_t a, uint32_t b) { return int32_t(a - b) < 0; }
}  // namespace

bool DpiStage::finishPacket(rte_mbuf* m, uint16_t i) {
  Burst& b = *cx_.burst;
  const int32_t pos = b.pos[i];
  const PacketMeta& pm = b.meta[i];
  if (pos < 0 || pm.l4_proto != 6 || !pm.has_l4) return false;
  PacketVerdict& v = b.v[i];
  const uint32_t key = uint32_t(pos) * 2 + (b.dir[i] & 1);
  const uint8_t hf = b.hold[i];
  if (v.verdict != Verdict::kForward) {
    // The flow blocked (by this packet: a rule on the file's end, its bytes, the stream; or
    // before): held packets of both directions go with it. Other drops (a segment the
    // stream engine refused) leave them held.
    if (held_n_ != 0 && v.stage == Stage::kDpi && dpi_block_[pos] != 0)
      holdFlowEnded(pos, dpi_block_[pos], b.ts[i]);
    return false;
  }
  const uint16_t h = hold_of_[key];
  if (h != kNoHold) {
    const HoldSlot& s = holds_[h];
    // New stream bytes (read by the engine, or any payload when nothing reads the stream any
    // more) or the direction's end: the held packet goes first.
    const bool fresh = (hf & Burst::kHoldRead) ? (hf & (Burst::kHoldNewBytes | Burst::kHoldFin)) != 0
                                              : pm.payload_len != 0 || (pm.tcp_flags & kTcpFin);
    if (fresh) {
      holdRelease(h, kHttpHoldReleased);
    } else if (pm.payload_len != 0 && seqBefore(pm.tcp_seq, s.seq_hi) &&
               seqBefore(s.seq_lo, pm.tcp_seq + pm.payload_len)) {
      // A retransmission of held bytes would hand the client what is held: dropped.
      c_->http[kHttpHoldDuplicates].add();
      v.verdict = Verdict::kDrop;
      v.stage = Stage::kDpi;
      v.reason = DropReason::kHttpHoldDuplicate;
      v.rule = kNoRule;
      return false;
    }
    // (no new bytes, not the held ones: an ACK, a window update, a keepalive passes)
  }
  if (!(hf & Burst::kHoldWanted) || v.verdict != Verdict::kForward || http_rt_ == nullptr) return false;
  if (hold_nfree_ == 0) {
    // No free slot: the DPI stage's fail policy (dataplane.tcp.dpi_fail).
    c_->http[kHttpHoldExhausted].add();
    const bool closed = http_rt_->settings().fail_closed;
    if (closed) {
      v.verdict = Verdict::kDrop;
      v.stage = Stage::kDpi;
      v.reason = DropReason::kHttpHoldExhausted;
      v.rule = kNoRule;
      block(pos, kHoldBlock);  // the flow is not passed from here (its bytes were read)
      if (held_n_ != 0) holdFlowEnded(pos, kHoldBlock, b.ts[i]);  // nor what it has held
      return false;
    }
    httpUninspected(b, i, DropReason::kHttpHoldExhausted);
    return false;
  }
  const uint16_t k = hold_free_[--hold_nfree_];
  HoldSlot& s = holds_[k];
  s.m = m;
  s.v = v;
  s.deadline = b.ts[i] + uint64_t(http_rt_->settings().hold_timeout_ms) * 1000000ull;
  s.seq_lo = pm.tcp_seq;
  s.seq_hi = pm.tcp_seq + pm.payload_len;
  s.key = key;
  s.next = kNoHold;
  s.prev = hold_tail_;
  if (hold_tail_ != kNoHold) holds_[hold_tail_].next = k; else hold_head_ = k;
  hold_tail_ = k;
  hold_of_[key] = k;
  ++held_n_;
  holdPublish();
  c_->http[kHttpHeld].add();
  return true;
}

}  // namespace dpu::dp
