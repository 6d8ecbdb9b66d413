// --- http --- HTTP in the packet path (Worker members; docs/http.md). Called by the DPI stage
// for the new in-order bytes of a TCP segment (stream_path.cc) before the raw-stream scan:
// flows on a configured port (or, with detect_on_other_ports, whose client's first bytes are
// an HTTP request line) get a libhtp connection parser (dataplane/normalize/http.h); their
// request and response bodies are scanned as files, and a rule firing on a file acts on the
// packet that carried its bytes (alert / drop / reset, as for the stream) and on the flow.
#include <rte_mbuf.h>

#include "dataplane/pipeline/burst.h"
#include "dataplane/pipeline/worker.h"

namespace dpu::dp {

// What libhtp found while one packet (or the flow's end) was parsed: acted upon by the worker.
struct HttpPathSink final : HttpSink {
  Worker* w;
  rte_mbuf* m;
  Worker::Burst* b;  // null at flow end
  uint16_t i;
  int32_t pos;
  const HttpFlowIdent* id;
  void fileScanned(const DpiOutcome& o, const HttpEventInfo& f) override {
    if (b != nullptr)
      w->dpiAct(o, *b, i, pos, &f);
    else
      w->dpiFileEndAlerts(o, f);
  }
  void fileClosed(const HttpEventInfo& f) override {
    if (w->http_rt_->settings().fileinfo_events)
      w->httpEvent(EventType::kFileInfo, f, *id, b != nullptr ? b->ts[i] : w->now_ns_);
  }
  void transaction(const HttpEventInfo& t) override {
    w->httpEvent(EventType::kHttp, t, *id, b != nullptr ? b->ts[i] : w->now_ns_);
  }
};

void Worker::httpCounters() {
  uint64_t* hc = http_rt_->worker(opts_.id).counters;
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

void Worker::httpAlertInfo(Event& ev, const HttpEventInfo& file) const {
  ev.http = file;
  if (ev.ip_ver == 0 && http_ident_ != nullptr) flowIdentity(ev, *http_ident_);
}

void Worker::httpEvent(EventType type, const HttpEventInfo& info, const HttpFlowIdent& id,
                       uint64_t ts) {
  Event* ev = newEvent();
  if (ev == nullptr) return;
  ev->type = type;
  ev->worker = static_cast<uint8_t>(opts_.id);
  ev->stage = Stage::kDpi;
  ev->verdict = Verdict::kForward;
  ev->rule = kNoRule;
  ev->generation = generation_;
  ev->ts_ns = ts;
  flowIdentity(*ev, id);
  ev->http = info;
  postEvent(ev);
}

bool Worker::httpStage(rte_mbuf* m, Burst& b, uint16_t i, int32_t pos, const uint8_t* p,
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
      http_rt_->worker(opts_.id).counters[kHttpNotHttp]++;
      httpCounters();
      return true;
    }
    if (!HttpInspector::open(*http_rt_, opts_.id, f)) {
      httpCounters();
      // Exhaustion follows the DPI stage's fail policy (dataplane.tcp.dpi_fail): fail open
      // inspects the flow's raw stream with every rule (as a flow that is not HTTP), with an
      // event; fail closed drops the flow (its drops are drop events like any other).
      Event* ev = http_rt_->settings().fail_closed ? nullptr : newEvent();
      if (ev != nullptr) {
        ev->type = EventType::kUninspected;
        ev->worker = static_cast<uint8_t>(opts_.id);
        ev->stage = Stage::kDpi;
        ev->reason = DropReason::kHttpNoSlot;
        ev->verdict = Verdict::kForward;
        ev->rule = kNoRule;
        ev->generation = generation_;
        ev->ts_ns = b.ts[i];
        ev->in_side = v.in_side;
        ev->seq = v.seq;
        ev->flow_id = v.flow_id;
        eventPacket(*ev, pm);  // an HTTP flow: pm has its IP layer
        postEvent(ev);
      }
      if (http_rt_->settings().fail_closed) {
        f.state = HttpFlow::kBlocked;
        return httpStage(m, b, i, pos, p, n);
      }
      f.state = HttpFlow::kNotHttp;
      return true;
    }
    HttpFlowIdent& id = http_rt_->worker(opts_.id).slots[f.slot].ident;
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
  HttpPathSink sink;
  sink.w = this;
  sink.m = m;
  sink.b = &b;
  sink.i = i;
  sink.pos = pos;
  sink.id = &http_rt_->worker(opts_.id).slots[f.slot].ident;
  const bool ok = HttpInspector::data(*http_rt_, opts_.id, f, dir == f.client_dir, p, n, b.ts[i], sink);
  if (!ok) {
    // libhtp stopped (error, tunnel): the raw streams report every rule from now on.
    for (int d = 0; d < 2; ++d) dpi_dirs_[size_t(pos) * 2 + d].flags &= uint8_t(~DpiDir::kMaskHttpStream);
  }
  httpCounters();
  return v.verdict == Verdict::kForward;
}

void Worker::httpFlowEnded(int32_t pos) {
  if (!http_flows_) return;
  HttpFlow& f = http_flows_[pos];
  if (http_rt_ != nullptr && f.rt_id == http_rt_->id() && f.slot != HttpFlow::kNone) {
    HttpPathSink sink;
    sink.w = this;
    sink.m = nullptr;
    sink.b = nullptr;
    sink.i = 0;
    sink.pos = pos;  // no packet: dpiAct only alerts (the flow's own end handles its block)
    const HttpFlowIdent id = http_rt_->worker(opts_.id).slots[f.slot].ident;
    sink.id = &id;
    http_ident_ = &id;
    HttpInspector::end(*http_rt_, opts_.id, f, sink);
    http_ident_ = nullptr;
    httpCounters();
  }
  HttpInspector::forget(f);
}

}  // namespace dpu::dp
