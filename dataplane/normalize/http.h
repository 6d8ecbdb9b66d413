// HTTP/1.x of inspected TCP flows parsed by libhtp (the HTTP normalizer Suricata
// uses), from the in-order stream bytes of the TCP normalizer (docs/tcp-stream.md), and each
// request / response body scanned as a file of its own by the DPI engine (docs/http.md).
// No DPDK here (unit-tested without EAL); the DPI stage calls it from
// dataplane/stages/dpi/dpi_http.cc.
//
// Memory:
//   - HttpRuntime (built with the DpiRuntime it scans files with, shared and freed like it):
//     one libhtp configuration, and per worker `flow_slots_per_worker` slots, each with its
//     two file contexts (a DpiDir on the DPI runtime's stream pool, a SHA-256 context
//     allocated once) and, while a flow uses it, a libhtp connection parser.
//   - libhtp allocates internally (bstr strings, transactions, header tables, its
//     decompressor buffers): htp_connp_create when a flow becomes HTTP, per transaction
//     while its request / response line and headers are parsed, and its decompressor per
//     compressed body. Completed transactions are freed by libhtp (tx_auto_destroy), the
//     connection parser when the flow ends. This is the accepted cost of using the library:
//     allocation at flow / transaction / header level, not per packet for body data (libhtp
//     hands body bytes to the callbacks from the packet or its decompressor's fixed buffer).
//   - HttpFlow (per flow position, in the Worker): which slot, which runtime, flow state.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "dataplane/api/http_event.h"
#include "dataplane/packet/packet_meta.h"
#include "dataplane/stages/dpi/dpi_runtime.h"
#include "rules/compiled/signatures.h"

struct htp_cfg_t;
struct htp_connp_t;
struct htp_tx_t;
struct evp_md_ctx_st;

namespace dpu::dp {

// Which inspection a YARA rule set gets (per source / rule set; docs/http.md).
enum class HttpScope : uint8_t { kDefault = 0, kFiles = 1, kStream = 2, kBoth = 3 };

struct HttpSettings {
  std::vector<uint16_t> ports{80, 8000, 8080, 8888, 3128};
  bool detect_on_other_ports = true;  // flows whose first client bytes are an HTTP request line
  int personality = 2;                // enum htp_server_personality_t (2 = HTP_SERVER_IDS)
  uint32_t flow_slots_per_worker = 4096;
  uint32_t decompress_layers = 3;     // content-encoding layers decoded (libhtp layer limit)
  uint64_t bomb_limit_bytes = 1u << 20;  // libhtp compression bomb limit (compressed bytes)
  uint32_t bomb_time_limit_us = 100000;  // libhtp decompression time limit per body
  bool http_events = false;           // an `http` event per transaction
  bool fileinfo_events = true;        // a `fileinfo` event per file
  bool fail_closed = false;           // no free slot: the flow is dropped (else inspected raw)
  // Hold-back (docs/http.md "Verdicts"): while a file is open and a drop / reset rule in file
  // scope can only be decided at the file's end, the last packet carrying its direction's
  // stream bytes is held (by the Worker) until the next one, the file's end, or the timeout.
  bool hold = true;
  uint32_t hold_timeout_ms = 100;
  bool operator==(const HttpSettings&) const = default;
};

// The settings and the scope of each rule's source (by namespace) a runtime is built with,
// from the configuration model (Dataplane::prepare; explain). `fail_closed`: dpi_fail DROP.
HttpSettings httpSettingsOf(const rules::DpiHttpModel& m, bool fail_closed);
std::vector<HttpScope> httpScopesOf(const rules::CompiledDpi& dpi,
                                    const std::vector<rules::DpiScope>& scopes);

// Per flow position.
struct HttpFlow {
  uint32_t rt_id = 0;
  uint32_t slot = kNone;
  uint8_t state = kUnknown;
  uint8_t client_dir = 0;  // Burst::dir of the client's packets
  static constexpr uint32_t kNone = 0xffffffffu;
  // kUnknown: no payload seen yet; kHttp: parsed; kNotHttp / kStopped: not (any more);
  // kBlocked: no slot under fail-closed, every packet dropped; kClosed: the server closed
  // the connection (its FIN ended the parsing; the flow stays an HTTP flow).
  static constexpr uint8_t kUnknown = 0, kHttp = 1, kNotHttp = 2, kStopped = 3, kBlocked = 4,
                           kClosed = 5;
};

// A flow's identity as events carry it (from the packet that made it HTTP).
struct HttpFlowIdent {
  IpAddr src{}, dst{};         // client, server
  uint16_t sport = 0, dport = 0, vlan = 0;
  uint8_t ip_ver = 0, in_side = 0;
  uint64_t flow_id = 0;
};

// One file: a request or response body being scanned.
struct HttpFile {
  DpiDir dir;                  // its DPI stream (offset 0 = the file's first byte)
  evp_md_ctx_st* md = nullptr; // SHA-256 of the decoded bytes
  bool open = false;
  bool until_close = false;    // a response body delimited by the connection's end
  const void* part = nullptr;  // multipart: the libhtp part (htp_file_t) being scanned
  bool cut = false;            // libhtp stopped decoding it (bomb limit): ends truncated
  HttpEventInfo info{};        // transaction and file (what events carry)
};

// Receives what parsing one packet's bytes found (the Worker acts on it).
class HttpSink {
 public:
  virtual ~HttpSink() = default;
  // Rules that fired on file bytes (o.nfired > 0) or DPI outcome counters of a file scan.
  virtual void fileScanned(const DpiOutcome& o, const HttpEventInfo& file) = 0;
  virtual void fileClosed(const HttpEventInfo& file) = 0;
  virtual void transaction(const HttpEventInfo& tx) = 0;
  // The decoded bytes of an open file, as they are scanned (opt-in file extraction:
  // dataplane/stages/dpi/file_extract.h); then fileClosed when it ends.
  virtual void fileBytes(const HttpEventInfo& file, const uint8_t* p, size_t n) {
    (void)file;
    (void)p;
    (void)n;
  }
  // --- signatures --- the header-level buffers of a transaction (request line and headers
  // when `in.stage` is kRequest; then the response's, with the request's still there, when
  // kResponse), for sinks that want them (wantsHeaders).
  virtual bool wantsHeaders() const { return false; }
  virtual void headers(rules::SigInput& in) { (void)in; }
  // A body that body signatures read found no free body buffer (counted by the runtime):
  // the sink applies the fail policy to the packet at hand.
  virtual void noBodyBuffer() {}
};

class HttpRuntime {
 public:
  // Reporting masks for `dpi` (DpiRuntime::setReportMasks) from the scope of each rule's
  // source (`scope_of_ns[rule.ns]`, kDefault when missing).
  static absl::StatusOr<std::shared_ptr<HttpRuntime>> create(
      const HttpSettings& s, std::shared_ptr<const DpiRuntime> dpi, uint32_t workers,
      const std::vector<HttpScope>& scope_of_ns);
  ~HttpRuntime();
  HttpRuntime(const HttpRuntime&) = delete;
  HttpRuntime& operator=(const HttpRuntime&) = delete;

  struct Slot {
    htp_connp_t* connp = nullptr;
    HttpFile file[2];          // 0: request body, 1: response body
    uint32_t txs = 0;          // transactions started
    bool closing = false;      // the flow ends: bodies libhtp completes now were cut short
                               // unless delimited by the connection's end
    // While one packet is parsed: where results go.
    HttpSink* sink = nullptr;
    const HttpRuntime* rt = nullptr;
    uint32_t worker = 0;
    uint64_t* counters = nullptr;
    HttpFlowIdent ident;       // the flow (events at flow end, no packet at hand)
    // --- signatures --- per direction: the body buffer (kNoBody: none) kept for body
    // signatures, its length, and whether this body was already evaluated (limit reached)
    // or could not be kept.
    static constexpr uint32_t kNoBody = 0xffffffffu;
    uint32_t sig_body[2] = {kNoBody, kNoBody};
    uint32_t sig_body_len[2] = {0, 0};
    bool sig_body_done[2] = {false, false};
  };
  struct PerWorker {
    std::vector<Slot> slots;
    std::vector<uint32_t> free;
    // --- signatures --- buffers assembled for the signature engine (normalized URI,
    // headers, header names, start), kHeaderBufferBytes each, allocated once.
    static constexpr size_t kHeaderBufferBytes = 32768;
    std::vector<uint8_t> sig_buf[4];
    // body buffers (CompiledSignatures::body_buffers of body_limit bytes; none when no
    // signature reads a body)
    std::unique_ptr<uint8_t[]> sig_bodies;
    std::vector<uint32_t> sig_body_free;
    uint64_t counters[kHttpCounterCount] = {};  // added to the Worker's by the caller
  };

  const HttpSettings& settings() const { return s_; }
  const std::vector<HttpScope>& scopes() const { return scopes_; }
  const DpiRuntime& dpi() const { return *dpi_; }
  uint32_t id() const { return id_; }
  PerWorker& worker(uint32_t w) const { return workers_[w]; }
  bool isHttpPort(uint16_t port) const;
  htp_cfg_t* cfg() const { return cfg_; }
  // Hold-back wanted: settings().hold and some rule with action drop or reset, in file
  // scope, can only be decided at a file's end (it reads filesize, or one of its strings,
  // or of the rules it references, can match at the end of the data).
  bool holdsFiles() const { return holds_files_; }

 private:
  HttpRuntime() = default;
  HttpSettings s_;
  std::vector<HttpScope> scopes_;
  std::shared_ptr<const DpiRuntime> dpi_;
  uint32_t id_ = 0;
  htp_cfg_t* cfg_ = nullptr;
  std::vector<uint8_t> port_bits_;  // 65536 bits
  bool holds_files_ = false;
  mutable std::vector<PerWorker> workers_;
};

class HttpInspector {
 public:
  // True when `p` starts like an HTTP/1.x request line (a method token and a space).
  static bool looksLikeRequest(const uint8_t* p, uint32_t n);
  // Takes a slot for the flow (false: none free, counted kHttpNoSlot).
  static bool open(const HttpRuntime& rt, uint32_t worker, HttpFlow& f);
  // In-order stream bytes of one direction. Returns false when libhtp stopped parsing the
  // connection (error, tunnel): the caller stops feeding it (state kStopped); its open files
  // are closed as truncated.
  static bool data(const HttpRuntime& rt, uint32_t worker, HttpFlow& f, bool to_server,
                   const uint8_t* p, uint32_t n, uint64_t ts_ns, HttpSink& sink);
  // Flow end (or stop): open files closed (truncated unless complete), slot freed.
  static void end(const HttpRuntime& rt, uint32_t worker, HttpFlow& f, HttpSink& sink);
  // The server's in-order FIN: libhtp told the connection closed (a response delimited by
  // the close completes, its file closes CLOSED; files still open close TRUNCATED), the slot
  // freed; the flow stays HTTP (state kClosed: its raw streams keep their masks).
  static void fin(const HttpRuntime& rt, uint32_t worker, HttpFlow& f, HttpSink& sink);
  // A file is open in that direction (a body being received).
  static bool fileOpen(const HttpRuntime& rt, uint32_t worker, const HttpFlow& f, bool to_server);
  static void forget(HttpFlow& f) { f = HttpFlow{}; }
};

}  // namespace dpu::dp
