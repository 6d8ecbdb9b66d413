// DPI in the packet path (dpi_stage.h): TCP/UDP payload of each forwarded packet to the
// flow direction's Hyperscan stream (dataplane/stages/dpi/dpi_runtime.h), and the rules that fire
// acted upon: alert (event), drop (packet dropped, flow blocked), reset (TCP RST both ways
// through sendReject, flow blocked). A blocked flow's later packets are dropped here too.
// TCP bytes of tracked flows come from the stream stage (stages/stream): in order, once,
// checksum-verified, overlaps compared; the inspector's own ordering is then never used.
#include <rte_mbuf.h>

#include <cstring>

#include "dataplane/stages/dpi/dpi_stage.h"
#include "dataplane/stages/dns/dns_message.h"

namespace dpu::dp {

namespace {
constexpr uint8_t kProtoTcpNum = 6, kProtoUdpNum = 17;
}

DpiStage::DpiStage(PathContext& cx, uint32_t hold_slots)
    : PathStage(cx, "dpi", kCyDpi), c_(cx.c), flows_(cx.flows) {
  dpi_dirs_.reset(new DpiDir[size_t(flows_->capacity()) * 2]);
  dpi_block_.reset(new uint32_t[flows_->capacity()]());
  http_flows_.reset(new HttpFlow[flows_->capacity()]);
  sig_flows_.reset(new rules::SigFlowState[flows_->capacity()]);
  sig_pass_.reset(new uint8_t[flows_->capacity()]());
  holdInit(hold_slots);
  cx.holder = this;
}

DpiStage::~DpiStage() {
  // Packets still held back (a worker destroyed without endFlows): freed.
  while (hold_head_ != kNoHold) {
    rte_mbuf* m = holds_[hold_head_].m;
    holdUnlink(hold_head_);
    rte_pktmbuf_free(m);
  }
  if (cx_.holder == this) cx_.holder = nullptr;
}

absl::StatusOr<std::unique_ptr<PathStage>> DpiStage::make(PathContext& cx,
                                                          const rules::DataplaneSettings&) {
  // The hold-back slots: the configuration's at start.
  const PublishedState* st =
      cx.shared.state ? cx.shared.state->load(std::memory_order_acquire) : nullptr;
  return std::make_unique<DpiStage>(
      cx, st != nullptr && st->snap ? st->snap->dpi_settings.http.hold_slots_per_worker
                                    : rules::DpiHttpModel{}.hold_slots_per_worker);
}

bool DpiStage::refresh() {
  const PublishedState* st = cx_.state;
  dpi_rt_ = st->dpi.get();
  dpi_hits_ = st->dpi_hits ? st->dpi_hits->of(cx_.opts.id) : nullptr;
  http_rt_ = st->http.get();
  if (dpi_rt_ != nullptr) cx_.reassemble = true;  // fragmented datagrams inspected whole
  return dpi_rt_ != nullptr;
}

void DpiStage::run(uint16_t from, uint16_t to) {
  Burst& b = *cx_.burst;
  for (uint16_t i = from; i < to; ++i) {
    if (b.v[i].verdict == Verdict::kForward) packet(b.work[i], b, i);
  }
}

void DpiStage::packet(rte_mbuf* m, Burst& b, uint16_t i) {
  const PacketMeta& pm = b.meta[i];
  PacketVerdict& v = b.v[i];
  const int32_t pos = b.pos[i];
  if (pos >= 0 && dpi_block_[pos] != 0) {
    v.verdict = Verdict::kDrop;
    v.stage = Stage::kDpi;
    // Blocked by a gap (policy drop): the gap's reason; no hold slot under fail closed: its
    // reason; else the drop rule's.
    const uint32_t blk = dpi_block_[pos];
    v.reason = blk == kNoRule         ? DropReason::kDpiGap
               : blk == kHoldBlock    ? DropReason::kHttpHoldExhausted
               : blk == kSigBodyBlock ? DropReason::kSigNoBodyBuffer
                                      : DropReason::kDpiDrop;
    v.rule = blk == kNoRule || blk == kHoldBlock || blk == kSigBodyBlock ? kNoRule : blk - 1;
    return;  // (applyVerdict counts the stage's drops)
  }
  if (!pm.has_l4 || pm.is_fragment) return;
  if (pm.l4_proto != kProtoTcpNum && pm.l4_proto != kProtoUdpNum) return;
  // A SYN without payload still tells where the direction's byte stream starts.
  const bool syn = pm.l4_proto == kProtoTcpNum && (pm.tcp_flags & kTcpSyn);
  // what the hold-back needs to know of a tracked TCP segment the stream engine
  // read (dpi_http.cc): new stream bytes; a FIN at the direction's next sequence number
  // (the direction's real end: the server's ends a body delimited by the close).
  const bool read = pos >= 0 && pm.l4_proto == kProtoTcpNum && b.st_read[i];
  const bool fin = read && b.st_fin[i];
  if (read) {
    b.hold[i] |= uint8_t(Burst::kHoldRead | (b.st_len[i] ? Burst::kHoldNewBytes : 0) |
                         (fin ? Burst::kHoldFin : 0));
  }
  if (pm.payload_len == 0 && !(syn && pos >= 0)) {
    if (fin && http_rt_ != nullptr) httpFin(m, b, i, pos);
    return;
  }
  if (uint32_t(pm.payload_offset) + pm.payload_len > m->data_len) return;
  const uint8_t* p = rte_pktmbuf_mtod(m, const uint8_t*) + pm.payload_offset;
  if (pm.payload_len != 0) c_->stage_packets[static_cast<int>(Stage::kDpi)].add();
  DpiOutcome o;
  if (pos < 0) {
    DpiInspector::block(*dpi_rt_, cx_.opts.id, p, pm.payload_len, o);
    dpiAct(o, b, i, pos);
    sigInspect(b, i, pos, p, pm.payload_len);
    return;
  } else {
    DpiDir& d = dpi_dirs_[size_t(pos) * 2 + (b.dir[i] & 1)];
    if (pm.l4_proto == kProtoTcpNum) {
      // The stream engine's new in-order bytes (the stream stage): never a retransmission,
      // never out of order; a SYN's data is already placed after its ISN. (Every TCP packet
      // of a tracked flow that reaches DPI was read by the engine.)
      if (!b.st_read[i]) return;
      if (b.st_gap[i]) {  // bytes before these reached the receiver uninspected
        DpiInspector::gap(*dpi_rt_, cx_.opts.id, d, o);
        dpiAct(o, b, i, pos);
        return;
      }
      if (b.st_len[i] == 0) {
        if (fin && http_rt_ != nullptr) httpFin(m, b, i, pos);
        return;
      }
      // HTTP flows: parsed, bodies scanned as files (dpi_http.cc).
      if (http_rt_ != nullptr && !httpStage(m, b, i, pos, b.st_data[i], b.st_len[i])) return;
      DpiInspector::tcp(*dpi_rt_, cx_.opts.id, d, b.st_data[i], b.st_len[i], b.st_seq[i],
                        uint8_t(pm.tcp_flags & ~kTcpSyn), o);
      dpiAct(o, b, i, pos);
      sigInspect(b, i, pos, b.st_data[i], b.st_len[i]);
      if (fin && http_rt_ != nullptr && v.verdict == Verdict::kForward) httpFin(m, b, i, pos);
      return;
    }
    DpiInspector::udp(*dpi_rt_, cx_.opts.id, d, p, pm.payload_len, o);
  }
  dpiAct(o, b, i, pos);
  sigInspect(b, i, pos, p, pm.payload_len);
}

void DpiStage::sigInspect(Burst& b, uint16_t i, int32_t pos, const uint8_t* p, uint32_t n) {
  const rules::CompiledSignatures* sg = dpi_rt_->dpi().sigs.get();
  if (sg == nullptr || !(sg->stages() & (1u << int(rules::SigStage::kPacket)))) return;
  rules::SigInput in;
  in.stage = rules::SigStage::kPacket;
  in.set(rules::SigBuffer::kPayload, p, n);
  sigRun(b, i, pos, in);
  // dns.query: the question name of a DNS query over UDP port 53 (the DNS filter's parser:
  // labels joined by '.', lower case).
  const PacketMeta& pm = b.meta[i];
  if ((sg->stages() & (1u << int(rules::SigStage::kDns))) && pm.l4_proto == kProtoUdpNum &&
      (pm.dport == 53 || pm.sport == 53) && b.v[i].verdict == Verdict::kForward) {
    DnsQuestion q;
    if (dnsParseQuestion(p, n, q) == DnsMsgStatus::kOk && !q.isResponse()) {
      rules::SigInput dq;
      dq.stage = rules::SigStage::kDns;
      dq.app = rules::SigInput::kAppDns;
      dq.set(rules::SigBuffer::kDnsQuery, reinterpret_cast<const uint8_t*>(q.name.text), q.name.text_len);
      sigRun(b, i, pos, dq);
    }
  }
}

bool DpiStage::sigWantsHeaders() const {
  const rules::CompiledSignatures* sg = dpi_rt_ != nullptr ? dpi_rt_->dpi().sigs.get() : nullptr;
  return sg != nullptr && (sg->stages() & ((1u << int(rules::SigStage::kRequest)) |
                                           (1u << int(rules::SigStage::kResponse))));
}

void DpiStage::sigRun(Burst& b, uint16_t i, int32_t pos, rules::SigInput& in) {
  const rules::CompiledSignatures* sg = dpi_rt_->dpi().sigs.get();
  if (sg == nullptr) return;
  PacketVerdict& v = b.v[i];
  if (v.verdict != Verdict::kForward || (pos >= 0 && sig_pass_[pos])) return;
  rules::SigScratch& scr = *dpi_rt_->worker(cx_.opts.id).sig;
  const PacketMeta& pm = b.meta[i];
  auto addr = [&](const IpAddr& a, std::array<uint8_t, 16>& out) {
    if (pm.l3 == L3Type::kIpv4) {
      out = {};
      out[10] = out[11] = 0xff;
      std::memcpy(&out[12], a.b, 4);
    } else {
      std::memcpy(out.data(), a.b, 16);
    }
  };
  addr(pm.src, in.src);
  addr(pm.dst, in.dst);
  in.sport = pm.sport;
  in.dport = pm.dport;
  in.ip_proto = pm.l4_proto;
  in.dsize = pm.payload_len;
  in.now_ns = b.ts[i];
  in.has_flow = pos >= 0;
  in.to_server = pos < 0 || b.dir[i] == 0;
  if (pos >= 0) {
    const FlowEntry& e = flows_->entry(pos);
    if (pm.l4_proto == kProtoTcpNum) {
      in.established = e.tcp_state == TcpState::kEstablished || e.tcp_state == TcpState::kFinWait ||
                       e.tcp_state == TcpState::kClosing;
    } else {
      in.established = e.packets[0] != 0 && e.packets[1] != 0;  // both ways seen (Suricata's UDP)
    }
    if (http_flows_[pos].state == HttpFlow::kHttp || http_flows_[pos].state == HttpFlow::kClosed)
      in.app = rules::SigInput::kAppHttp;
  }
  if (in.app == rules::SigInput::kAppNone && (pm.sport == 53 || pm.dport == 53))
    in.app = rules::SigInput::kAppDns;
  c_->sig_inspected.add();
  const uint64_t cand0 = scr.candidates, pcre0 = scr.pcre_errors, fb0 = scr.flowbits_full,
                 th0 = scr.threshold_full, hd0 = scr.hits_dropped;
  const uint32_t nh = sg->evaluate(in, pos >= 0 ? &sig_flows_[pos] : nullptr, scr, sig_hits_, 64);
  c_->sig_candidates.add(scr.candidates - cand0);
  if (scr.pcre_errors != pcre0) c_->sig_pcre_errors.add(scr.pcre_errors - pcre0);
  if (scr.flowbits_full != fb0) c_->sig_flowbits_full.add(scr.flowbits_full - fb0);
  if (scr.threshold_full != th0) c_->sig_threshold_full.add(scr.threshold_full - th0);
  if (scr.hits_dropped != hd0) c_->sig_hits_dropped.add(scr.hits_dropped - hd0);
  if (nh == 0) return;
  c_->sig_matches.add(nh);
  // The strongest action among the rules that matched: reject > drop > alert; a pass stops
  // the flow's signature inspection (its own alerts are not raised).
  int best = -1;
  uint32_t best_rule = kNoRule;
  bool pass = false;
  for (uint32_t k = 0; k < nh; ++k) {
    const rules::Signature& g = sg->rules[sig_hits_[k].rule].sig;
    if (g.action == rules::SigAction::kPass) {
      pass = true;
      continue;
    }
    const int a = g.action == rules::SigAction::kReject ? 2 : g.action == rules::SigAction::kDrop ? 1 : 0;
    if (a > best) {
      best = a;
      best_rule = rules::kSigRuleBit | sig_hits_[k].rule;
    }
  }
  if (pass) {
    c_->sig_passes.add();
    if (pos >= 0) sig_pass_[pos] = 1;
  }
  Verdict verdict = Verdict::kForward;
  DropReason reason = DropReason::kNone;
  if (best == 1 || (best == 2 && pm.l4_proto != kProtoTcpNum)) {
    verdict = Verdict::kDrop;
    reason = DropReason::kDpiDrop;
  } else if (best == 2) {
    verdict = Verdict::kReject;
    reason = DropReason::kDpiReset;
  }
  Event who = packetWho(b, i);
  for (uint32_t k = 0; k < nh; ++k) {
    const rules::Signature& g = sg->rules[sig_hits_[k].rule].sig;
    if (g.action == rules::SigAction::kPass || !sig_hits_[k].alert) continue;
    switch (g.action) {
      case rules::SigAction::kDrop: c_->sig_drops.add(); break;
      case rules::SigAction::kReject: c_->sig_rejects.add(); break;
      default: c_->sig_alerts.add(); break;
    }
    if (!postAlert(who, rules::kSigRuleBit | sig_hits_[k].rule, DropReason::kNone, verdict)) break;
  }
  if (verdict == Verdict::kForward) return;
  v.verdict = verdict;
  v.stage = Stage::kDpi;
  v.reason = reason;
  v.rule = best_rule;
  if (pos >= 0) resetBlock(pos, best_rule + 1, verdict);
}

Event DpiStage::packetWho(const Burst& b, uint16_t i) const {
  Event who;
  std::memset(&who, 0, sizeof(who));
  who.ts_ns = b.ts[i];
  who.in_side = b.v[i].in_side;
  who.seq = b.v[i].seq;
  who.flow_id = b.v[i].flow_id;
  cx_.eventPacket(who, b.meta[i]);
  return who;
}

void DpiStage::dpiCount(const DpiOutcome& o) {
  c_->dpi_bytes.add(o.scanned);
  if (o.depth_reached) c_->dpi_depth.add();
  if (o.no_stream) c_->dpi_no_stream.add();
  if (o.overflow) c_->dpi_overflow.add();
  if (o.no_window) c_->dpi_no_window.add();
  if (o.pf_confirmed) c_->dpi_pf_confirmed.add(o.pf_confirmed);
  if (o.pf_rejected) c_->dpi_pf_rejected.add(o.pf_rejected);
  if (o.pf_errors) c_->dpi_pf_errors.add(o.pf_errors);
}

void DpiStage::dpiCountRules(const DpiOutcome& o, uint64_t hit_ns) {
  const rules::CompiledDpi& dpi = dpi_rt_->dpi();
  for (uint32_t k = 0; k < o.nfired; ++k) {
    if (dpi_hits_ != nullptr) {  // per-rule match counters
      DpiRuleHit& h = dpi_hits_[o.fired[k]];
      h.matches.add();
      if (hit_ns > h.last_hit_ns.load()) h.last_hit_ns.set(hit_ns);
    }
    switch (dpi.rules[o.fired[k]].action) {
      case rules::DpiAction::kAlert: c_->dpi_alerts.add(); break;
      case rules::DpiAction::kDrop: c_->dpi_drops.add(); break;
      case rules::DpiAction::kReset: c_->dpi_resets.add(); break;
    }
  }
}

void DpiStage::dpiAct(const DpiOutcome& o, Burst& b, uint16_t i, int32_t pos,
                    const HttpEventInfo* file) {
  dpiCount(o);
  if (o.nfired == 0 && !o.gap) return;
  const rules::CompiledDpi& dpi = dpi_rt_->dpi();
  PacketVerdict& v = b.v[i];
  const PacketMeta& pm = b.meta[i];
  // Strongest action wins: reset > drop > alert. Every rule the packet made true is in the
  // outcome, so a drop or reset acts on this packet whatever else matched with it.
  int best = -1;
  uint32_t best_rule = kNoRule;
  for (uint32_t k = 0; k < o.nfired; ++k) {
    const uint32_t r = o.fired[k];
    const int a = static_cast<int>(dpi.rules[r].action);
    if (a > best) {
      best = a;
      best_rule = r;
    }
  }
  DropReason reason = DropReason::kNone;
  Verdict verdict = Verdict::kForward;
  if (best == static_cast<int>(rules::DpiAction::kDrop)) {
    reason = DropReason::kDpiDrop;
    verdict = Verdict::kDrop;
  } else if (best == static_cast<int>(rules::DpiAction::kReset)) {
    const bool tcp = pm.l4_proto == kProtoTcpNum;
    reason = tcp ? DropReason::kDpiReset : DropReason::kDpiDrop;
    verdict = tcp ? Verdict::kReject : Verdict::kDrop;
  }
  if (o.gap) {
    c_->dpi_gaps.add();
    const rules::DpiGapPolicy g = dpi_rt_->settings().gap_policy;
    if (g == rules::DpiGapPolicy::kDrop && verdict == Verdict::kForward) {
      reason = DropReason::kDpiGap;
      verdict = Verdict::kDrop;
    }
  }
  dpiCountRules(o, b.ts[i]);
  // One alert event per fired rule (and one for a gap under policy alert), about the packet.
  Event who = packetWho(b, i);
  const bool gap_alert = o.gap && dpi_rt_->settings().gap_policy == rules::DpiGapPolicy::kAlert;
  dpiAlertEvents(o, gap_alert, verdict, who, file);
  if (verdict == Verdict::kForward) return;
  v.verdict = verdict;
  v.stage = Stage::kDpi;
  v.reason = reason;
  v.rule = reason == DropReason::kDpiGap ? kNoRule : best_rule;
  if (pos >= 0) resetBlock(pos, reason == DropReason::kDpiGap ? kNoRule : best_rule + 1, verdict);
}

void DpiStage::dpiAlertEvents(const DpiOutcome& o, bool gap_alert, Verdict verdict,
                            const Event& who, const HttpEventInfo* file) {
  const uint32_t nev = o.nfired + (gap_alert ? 1 : 0);
  for (uint32_t k = 0; k < nev; ++k) {
    if (!postAlert(who, k < o.nfired ? o.fired[k] : kNoRule,
                   k < o.nfired ? DropReason::kNone : DropReason::kDpiGap, verdict, file))
      break;
  }
}

bool DpiStage::postAlert(const Event& who, uint32_t rule, DropReason reason, Verdict verdict,
                         const HttpEventInfo* file) {
  Event* ev = cx_.newEvent();
  if (ev == nullptr) return false;
  std::memcpy(ev, &who, sizeof(Event));
  ev->type = EventType::kDpiAlert;
  ev->worker = static_cast<uint8_t>(cx_.opts.id);
  ev->stage = Stage::kDpi;
  ev->rule = rule;
  ev->reason = reason;
  ev->verdict = verdict;
  ev->generation = cx_.generation;
  if (file != nullptr) httpAlertInfo(*ev, *file);  // the file it matched in
  cx_.postEvent(ev);
  return true;
}

uint32_t DpiStage::dpiFileEndAlerts(const DpiOutcome& o, const HttpEventInfo& file, bool held) {
  dpiCount(o);
  if (o.nfired == 0) return 0;
  dpiCountRules(o, cx_.now_ns);
  // With a packet of the flow held back, the strongest action acts on it (drop; a reset
  // sends nothing: the flow has ended).
  uint32_t block = 0;
  if (held) {
    const rules::CompiledDpi& dpi = dpi_rt_->dpi();
    for (uint32_t k = 0; k < o.nfired && block == 0; ++k)
      if (dpi.rules[o.fired[k]].action != rules::DpiAction::kAlert) block = o.fired[k] + 1;
  }
  Event who;
  std::memset(&who, 0, sizeof(who));
  who.ts_ns = cx_.now_ns;
  who.end_reason = cx_.flow_end_why;  // raised at the flow's end; httpAlertInfo adds the flow
  dpiAlertEvents(o, false, block ? Verdict::kDrop : Verdict::kForward, who, &file);
  return block;
}

void DpiStage::flowVerdict(int32_t pos, Event& ev) const {
  if (pos < 0 || dpi_block_[pos] == 0) return;
  ev.stage = Stage::kDpi;
  ev.verdict = Verdict::kDrop;
  ev.generation = cx_.generation;  // the DPI rule indices are those of the running rules
  if (dpi_block_[pos] == kNoRule) {  // a gap under gap_policy DROP
    ev.rule = kNoRule;
    ev.reason = DropReason::kDpiGap;
    return;
  }
  if (dpi_block_[pos] == kHoldBlock) {  // no hold slot under dpi_fail DROP
    ev.rule = kNoRule;
    ev.reason = DropReason::kHttpHoldExhausted;
    return;
  }
  if (dpi_block_[pos] == kSigBodyBlock) {  // no signature body buffer under dpi_fail DROP
    ev.rule = kNoRule;
    ev.reason = DropReason::kSigNoBodyBuffer;
    return;
  }
  const uint32_t r = dpi_block_[pos] - 1;
  ev.rule = r;
  ev.reason = DropReason::kDpiDrop;
  const rules::CompiledSignatures* sg = dpi_rt_ != nullptr ? dpi_rt_->dpi().sigs.get() : nullptr;
  const bool sig_reject = (r & rules::kSigRuleBit) && sg != nullptr &&
                          (r & ~rules::kSigRuleBit) < sg->rules.size() &&
                          sg->rules[r & ~rules::kSigRuleBit].sig.action == rules::SigAction::kReject;
  if (ev.proto == kProtoTcpNum && dpi_rt_ != nullptr &&
      (sig_reject || (r < dpi_rt_->dpi().rules.size() &&
                      dpi_rt_->dpi().rules[r].action == rules::DpiAction::kReset))) {
    ev.verdict = Verdict::kReject;
    ev.reason = DropReason::kDpiReset;
  }
}

void DpiStage::flowEnded(int32_t pos) {
  httpFlowEnded(pos);  // the files end before the flow's streams
  dpi_block_[pos] = 0;
  sig_flows_[pos].n = 0;  // --- signatures ---
  sig_flows_[pos].full = false;
  sig_pass_[pos] = 0;
  cx_.closed[pos] &= uint8_t(~kClosedByDpi);
  // The flow is still in the table (called before its removal): its identity for the alerts
  // its streams' ends raise.
  const FlowKey* k = flows_->keyAt(pos);
  for (int dir = 0; dir < 2; ++dir) {
    DpiDir& d = dpi_dirs_[size_t(pos) * 2 + dir];
    if (dpi_rt_ == nullptr || d.rt_id != dpi_rt_->id()) {
      DpiInspector::forget(d);
      continue;
    }
    DpiOutcome o;
    DpiInspector::end(*dpi_rt_, cx_.opts.id, d, o);
    dpiCount(o);
    if (o.nfired == 0) continue;
    // Matches at the stream's end (`$` regexes, fullword at the last byte, ...): counted by
    // action and rule like any match, and an alert event each about the flow direction whose
    // bytes made them true (the flow has ended: nothing left to drop).
    dpiCountRules(o, cx_.now_ns);
    Event who;
    std::memset(&who, 0, sizeof(who));
    who.ts_ns = cx_.now_ns;
    who.end_reason = cx_.flow_end_why;  // marks the alert as raised at the flow's end
    if (k != nullptr) dpiFlowDirection(flows_->entry(pos), *k, dir, who);
    dpiAlertEvents(o, false, Verdict::kForward, who);
  }
}

void DpiStage::dpiFlowDirection(const FlowEntry& e, const FlowKey& k, int dir, Event& who) const {
  const bool init_b = (e.flags & kFlowInitiatorSideB) != 0;
  const bool init_hi = (e.flags & kFlowInitiatorIsHi) != 0;
  // Direction 0: initiator -> responder; the sender of direction `dir` is the source.
  const bool src_hi = dir == 0 ? init_hi : !init_hi;
  who.in_side = (dir == 0) == init_b ? kSideB : kSideA;
  who.flow_id = cx_.flowId(e);
  who.ip_ver = k.ip_ver;
  who.proto = k.proto;
  who.vlan = k.vlan;
  who.src = src_hi ? k.hi_addr : k.lo_addr;
  who.dst = src_hi ? k.lo_addr : k.hi_addr;
  who.sport = src_hi ? k.hi_port : k.lo_port;
  who.dport = src_hi ? k.lo_port : k.hi_port;
}

}  // namespace dpu::dp
