// The DPI stage's part of explain (explain.h): the rules the payload makes true.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dataplane/packet/parser.h"
#include "dataplane/pipeline/explain.h"
#include "dataplane/normalize/http.h"
#include "dataplane/stages/dpi/dpi_stage.h"

namespace dpu::dp {
namespace {

std::string dpiRuleList(const rules::CompiledDpi& dpi, const uint32_t* idx, uint32_t n) {
  std::string s;
  for (uint32_t k = 0; k < n; ++k) {
    const rules::DpiRule& rule = dpi.rules[idx[k]];
    absl::StrAppend(&s, k ? ", " : "", "'", rule.id(), "' (", rules::dpiActionName(rule.action), ")");
  }
  return s;
}

// What libhtp and the file scans found while explain fed the packet (the
// Worker's HttpPathSink acts; this one records): the files the packet carried, with the
// file bytes it added, and every rule that fired in one.
struct ExplainFileSink final : HttpSink {
  struct File {
    HttpEventInfo info;
    uint64_t from = 0, to = 0;
  };
  const rules::CompiledDpi* dpi = nullptr;
  bool at_end = false;  // feeding the flow's end (HttpInspector::end)
  std::vector<File> files;
  std::vector<ExplainHttpMatch> matches;
  std::vector<uint32_t> fired;  // rules the packet made true in files (not at_end)
  std::vector<uint32_t> end_fired;

  static bool same(const HttpEventInfo& a, const HttpEventInfo& b) {
    return a.tx_id == b.tx_id && a.file_dir == b.file_dir && std::strcmp(a.filename, b.filename) == 0;
  }
  File& fileOf(const HttpEventInfo& f) {
    for (File& x : files)
      if (same(x.info, f)) return x;
    files.push_back({f, 0, 0});  // explain feeds one packet: every file starts in it
    return files.back();
  }
  static std::string hex(const uint8_t* p, int n) {
    std::string h;
    for (int k = 0; k < n; ++k) absl::StrAppend(&h, absl::Hex(p[k], absl::kZeroPad2));
    return h;
  }
  static const char* stateName(HttpFileState s) {
    return s == HttpFileState::kClosed ? "closed" : s == HttpFileState::kTruncated ? "truncated" : "open";
  }
  void fileScanned(const DpiOutcome& o, const HttpEventInfo& f) override {
    File& x = fileOf(f);
    const uint64_t from = x.to;  // the bytes this call added: [previous end, size)
    if (!at_end) {
      x.info = f;
      x.to = f.size;
    }
    for (uint32_t k = 0; k < o.nfired; ++k) {
      const rules::DpiRule& r = dpi->rules[o.fired[k]];
      (at_end ? end_fired : fired).push_back(o.fired[k]);
      ExplainHttpMatch m;
      m.rule = r.id();
      m.action = rules::dpiActionName(r.action);
      m.at_flow_end = at_end;
      m.method = f.method;
      m.host = f.host;
      m.url = f.url;
      m.status = f.status;
      m.tx_id = f.tx_id;
      m.filename = f.filename;
      m.direction = f.file_dir == 0 ? "request" : "response";
      m.offset_from = from == f.size && f.state != HttpFileState::kOpen ? 0 : from;
      m.offset_to = f.size;
      m.size = f.size;
      m.state = stateName(f.state);
      if (f.sha256_valid) m.sha256 = hex(f.sha256, 32);
      matches.push_back(std::move(m));
    }
  }
  void fileClosed(const HttpEventInfo& f) override {
    if (!at_end) fileOf(f).info = f;
    for (ExplainHttpMatch& m : matches) {  // the file's final size, state and digest
      if (m.tx_id != f.tx_id || m.filename != f.filename ||
          m.direction != (f.file_dir == 0 ? "request" : "response") || m.at_flow_end != at_end)
        continue;
      m.size = f.size;
      m.state = stateName(f.state);
      if (f.sha256_valid) m.sha256 = hex(f.sha256, 32);
    }
  }
  void transaction(const HttpEventInfo&) override {}
};

std::string httpFileText(const ExplainFileSink::File& x) {
  const HttpEventInfo& f = x.info;
  std::string s = absl::StrCat("file '", f.filename, "' (", f.file_dir == 0 ? "request" : "response",
                               " body of ", f.method[0] ? f.method : "?", " ", f.host, f.url);
  if (f.status != 0) absl::StrAppend(&s, ", status ", f.status);
  absl::StrAppend(&s, ", transaction ", f.tx_id, "): file bytes ", x.from, "..", x.to,
                  " in this packet, ", ExplainFileSink::stateName(f.state));
  if (f.state != HttpFileState::kOpen) {
    absl::StrAppend(&s, ", size ", f.size);
    if (f.sha256_valid) absl::StrAppend(&s, ", sha256 ", ExplainFileSink::hex(f.sha256, 32));
  } else {
    absl::StrAppend(&s, " (", f.size, " bytes so far)");
  }
  return s;
}

// DPI (dpi_stage.cc): the payload as the first bytes of a new stream (a
// block scan for untracked packets and UDP datagrams), by DpiInspector on a runtime of its
// own for the snapshot's compiled rules; then the end of that stream. --- http --- With
// dpi.http, a TCP flow on an HTTP port (or starting with a request line) is parsed by libhtp
// as in dpi_http.cc: its bodies scanned as files, its raw stream by the stream-scoped rules.
bool explainDpi(const rules::Snapshot& snap, const uint8_t* frame, uint32_t len,
                const PacketMeta& m, bool tracked, ExplainResult& r) {
  if (!snap.dpi) return false;
  if (!m.has_l4 || m.is_fragment || (m.l4_proto != 6 && m.l4_proto != 17)) {
    explainStep(r, Stage::kDpi, "skip", "not inspected: only TCP and UDP payload (not fragments)");
    return false;
  }
  const uint8_t* p = nullptr;
  uint32_t n = 0;
  if (!explainPayload(m, len, frame, &p, &n) || n == 0) {
    explainStep(r, Stage::kDpi, "skip", "no payload");
    return false;
  }
  const rules::DpiModel& ms = snap.dpi_settings;
  DpiSettings ds;
  ds.streams_per_worker = 1;
  ds.ooo_slots_per_worker = 1;
  ds.ooo_buffer_bytes = 64;
  ds.prefilter_windows_per_worker = 1;
  ds.depth_bytes = ms.depth_bytes;
  ds.gap_policy = ms.gap_policy;
  ds.udp_stream = ms.udp_stream;
  auto rt = DpiRuntime::create(snap.dpi, ds, 1);
  if (!rt.ok()) {
    explainStep(r, Stage::kDpi, "error", absl::StrCat("cannot scan here: ", rt.status().message()));
    return false;
  }
  const rules::CompiledDpi& dpi = *snap.dpi;
  DpiOutcome o;
  DpiDir dir;
  std::string how;
  // the packet as the first bytes of an HTTP connection's direction.
  std::shared_ptr<HttpRuntime> hrt;
  HttpFlow hf;
  ExplainFileSink fsink;
  fsink.dpi = &dpi;
  std::string http_text;
  if (tracked && m.l4_proto == 6 && ms.http.enabled) {
    HttpSettings hs = httpSettingsOf(ms.http, snap.dataplane.tcp_dpi_fail == rules::Policy::kDrop);
    hs.flow_slots_per_worker = 1;
    auto h = HttpRuntime::create(hs, *rt, 1, httpScopesOf(dpi, ms.scopes));
    if (!h.ok()) {
      explainStep(r, Stage::kDpi, "error", absl::StrCat("cannot parse HTTP here: ", h.status().message()));
      return false;
    }
    hrt = *h;
    bool to_server = true, http = true;
    std::string why;
    if (hrt->isHttpPort(m.dport)) {
      why = absl::StrCat("to HTTP port ", m.dport, ": the client's request bytes");
    } else if (hrt->isHttpPort(m.sport)) {
      to_server = false;
      why = absl::StrCat("from HTTP port ", m.sport, ": the server's response bytes");
    } else if (hs.detect_on_other_ports && HttpInspector::looksLikeRequest(p, n)) {
      why = "a request line on another port: the client's request bytes";
    } else {
      http = false;
    }
    if (http && HttpInspector::open(*hrt, 0, hf)) {
      const bool ok = HttpInspector::data(*hrt, 0, hf, to_server, p, n, 0, fsink);
      http_text = absl::StrCat("HTTP flow (", why, ")");
      if (!to_server)
        absl::StrAppend(&http_text, "; explain sees this packet alone: libhtp has no request to pair the response with");
      if (!ok) absl::StrAppend(&http_text, "; libhtp stopped parsing (the raw stream then reports every rule)");
      for (const ExplainFileSink::File& x : fsink.files) absl::StrAppend(&http_text, "; ", httpFileText(x));
      if (fsink.files.empty()) absl::StrAppend(&http_text, "; no body bytes in this packet");
      if (ok && hrt->holdsFiles() && HttpInspector::fileOpen(*hrt, 0, hf, to_server))
        absl::StrAppend(&http_text, "; the file stays open and a drop or reset rule is decided at its "
                                    "end: this packet is held back until the next one (hold-back)");
      // The raw stream of an HTTP flow reports only the rule sets scoped to the stream.
      dir.rt_id = (*rt)->id();
      if (ok) dir.flags |= DpiDir::kMaskHttpStream;
    } else {
      hrt.reset();
    }
  }
  if (!tracked) {
    DpiInspector::block(**rt, 0, p, n, o);
    how = "untracked packet, scanned on its own";
  } else if (m.l4_proto == 6) {
    DpiInspector::tcp(**rt, 0, dir, p, n, m.tcp_seq, m.tcp_flags, o);
    how = hrt ? absl::StrCat(http_text, "; raw stream (rule sets scoped to the stream only)")
              : "first payload of the flow direction's stream";
  } else {
    DpiInspector::udp(**rt, 0, dir, p, n, o);
    how = ms.udp_stream ? "first datagram of the flow direction's stream" : "UDP datagram, scanned on its own";
  }
  // The outcome's rule list lives in the runtime's per-worker array, which end() reuses.
  std::vector<uint32_t> fired(o.fired, o.fired + o.nfired);
  fired.insert(fired.end(), fsink.fired.begin(), fsink.fired.end());  // in files
  if (hrt) {  // the files' end if the flow ended here (bodies not complete: truncated)
    fsink.at_end = true;
    HttpInspector::end(*hrt, 0, hf, fsink);
  }
  DpiOutcome at_end;
  if (tracked) DpiInspector::end(**rt, 0, dir, at_end);
  std::vector<uint32_t> end_fired(at_end.fired, at_end.fired + at_end.nfired);
  end_fired.insert(end_fired.end(), fsink.end_fired.begin(), fsink.end_fired.end());
  r.http = std::move(fsink.matches);
  std::string detail = absl::StrCat(how, ": ", o.scanned, " of ", n, " bytes scanned",
                                    o.depth_reached ? " (depth limit dpi.depth_bytes reached)" : "",
                                    ", ", dpi.rules.size(), " rules");
  std::string end_note;
  if (!end_fired.empty()) {
    end_note = absl::StrCat("; if the stream ended here, also (alerts at the stream's end): ",
                            dpiRuleList(dpi, end_fired.data(), uint32_t(end_fired.size())));
  }
  if (fired.empty()) {
    explainStep(r, Stage::kDpi, "pass", absl::StrCat(detail, ": no rule matches", end_note));
    return false;
  }
  // Strongest action wins, as in Worker::dpiAct: reset > drop > alert.
  int best = -1;
  uint32_t best_rule = kNoRule;
  for (const uint32_t f : fired) {
    const int a = static_cast<int>(dpi.rules[f].action);
    if (a > best) {
      best = a;
      best_rule = f;
    }
  }
  absl::StrAppend(&detail, ": matching ", dpiRuleList(dpi, fired.data(), uint32_t(fired.size())));
  for (const ExplainHttpMatch& hm : r.http) {  // where each file match was
    if (hm.at_flow_end) continue;
    absl::StrAppend(&detail, "; '", hm.rule, "' in file '", hm.filename, "' (", hm.direction,
                    " of ", hm.method, " ", hm.host, hm.url, ", file bytes ", hm.offset_from, "..",
                    hm.offset_to, ")");
  }

  const bool tcp = m.l4_proto == 6;
  if (best == static_cast<int>(rules::DpiAction::kAlert)) {
    explainStep(r, Stage::kDpi, "alert", absl::StrCat(detail, "; alert event, forwarded", end_note));
    return false;
  }
  if (best == static_cast<int>(rules::DpiAction::kReset) && tcp) {
    explainDrop(r, Stage::kDpi, Verdict::kReject, DropReason::kDpiReset, best_rule, "reset",
             absl::StrCat(detail, "; dropped, TCP RST sent to both ends, the flow is blocked"));
    return true;
  }
  explainDrop(r, Stage::kDpi, Verdict::kDrop, DropReason::kDpiDrop, best_rule, "drop",
           absl::StrCat(detail, best == static_cast<int>(rules::DpiAction::kReset)
                                    ? "; dropped (reset on UDP: as drop), the flow is blocked"
                                    : "; dropped, the flow is blocked"));
  return true;
}

}  // namespace

bool DpiStage::explain(const ExplainInput& in, ExplainResult& r) {
  return explainDpi(in.snap, in.frame, in.len, in.meta, in.tracked, r);
}

}  // namespace dpu::dp
