// The small interface the control plane uses to talk to the dataplane (DESIGN.md:
// control -> dataplane/api only). Implemented by Dataplane; tests of the control plane may
// implement it with a fake. All calls come from control threads, never from workers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dataplane/api/events.h"
#include "dataplane/api/flow_view.h"
#include "dataplane/packet/packet_meta.h"
#include "dataplane/pipeline/counters.h"
#include "dataplane/pipeline/verdict.h"
#include "rules/compiled/snapshot.h"

namespace dpu::dp {

struct WorkerInfo {
  uint16_t id = 0;
  unsigned lcore = 0;
  uint32_t generation = 0;  // snapshot generation the worker runs
};

struct PortInfo {
  uint8_t side = kSideA;
  uint16_t port_id = 0;
  std::string name;
  std::string driver;
  uint64_t rx_packets = 0, rx_bytes = 0, tx_packets = 0, tx_bytes = 0;
  uint64_t rx_missed = 0, rx_nombuf = 0, rx_errors = 0, tx_errors = 0;
};

struct ExplainStep {
  Stage stage = Stage::kNone;
  std::string decision;  // "pass", "forward", "drop", "hold", ...
  std::string detail;
};

// A rule that matched in an HTTP file (docs/http.md "Explain"): the rule, the
// transaction and the file it matched in.
struct ExplainHttpMatch {
  std::string rule;            // rule id (source:name)
  std::string action;          // alert / drop / reset
  bool at_flow_end = false;    // found only when the flow ends after this packet
  std::string method, host, url;
  uint32_t status = 0;         // response status; 0: none (yet)
  uint32_t tx_id = 0;          // transaction index in the connection
  std::string filename;
  std::string direction;       // "request" (upload) or "response" (download)
  uint64_t offset_from = 0, offset_to = 0;  // file bytes this packet carried: [from, to)
  uint64_t size = 0;           // the file's bytes so far; its final size once it ended
  std::string state;           // "open", "closed" or "truncated"
  std::string sha256;          // hex, once the file ended
};

struct ExplainResult {
  PacketVerdict verdict;
  std::vector<ExplainStep> steps;
  std::string summary;  // parsed headers, one line
  std::string backend;  // the chosen backend's id ("" = none)
  std::vector<ExplainHttpMatch> http;  // rules that matched in HTTP files
};

// Totals of one firewall rule over all workers, by rule id. Counters of a rule that keeps
// its id across reloads carry over. `last_hit_ns` is on the clock of Event::ts_ns (0 = never).
struct RuleCounters {
  std::string id;
  uint64_t packets = 0, bytes = 0, flows = 0, last_hit_ns = 0;
};

// DNS filtering: one list of the running configuration with its counters (over all
// workers; a list keeps its counters across reloads while its name stays).
struct DnsListCounters {
  std::string name;
  std::string action;          // "nxdomain", ...
  uint64_t names = 0;          // distinct names (entries) in the compiled list
  uint64_t skipped_lines = 0;  // bad lines skipped (skip_bad_lines)
  double load_ms = 0;          // last (re)build or delta
  bool incremental = false;    // last change applied as a delta
  uint64_t blocked = 0, allowed = 0;
};
// The lists of `snap` with the counters of `c` (counters by list slot).
std::vector<DnsListCounters> dnsListCounters(const rules::Snapshot& snap,
                                             const CountersSnapshot::Flat& c);

// A snapshot with everything the dataplane needs next to it already built (firewall ACL
// contexts, the GeoIP database opened, per-rule counters): what can fail has failed in
// prepare(), so publishing it cannot. Only the DataplaneControl that prepared it may publish
// it. Implementations extend it with their own objects.
struct LbBackendStats {
  uint64_t identity = 0;
  uint64_t packets = 0, bytes = 0;
  uint64_t flows_active = 0;  // flows pinned to the backend now
  uint64_t flows_total = 0;   // flows ever pinned to it
};

// Matches of one YARA rule of the running set over all workers, by rule id
// ("<source>:<rule>"): a rule that keeps its id across reloads keeps counting.
// `last_hit_ns` is on the clock of Event::ts_ns (0 = never).
struct DpiRuleCounters {
  std::string id;
  uint64_t matches = 0, last_hit_ns = 0;
};

struct PreparedSnapshot {
  virtual ~PreparedSnapshot() = default;
  std::unique_ptr<rules::Snapshot> snap;
};

// Country of an address for Explain (the dataplane's GeoIP database).
class CountryLookup {
 public:
  virtual ~CountryLookup() = default;
  // ISO 3166 alpha-2 code of `a` into cc; false (cc = "\0\0") when the database has none.
  virtual bool country(const IpAddr& a, bool v6, char cc[2]) const = 0;
};

class DataplaneControl {
 public:
  virtual ~DataplaneControl() = default;
  // Builds the dataplane-side objects for `next` off the packet path (rte_acl contexts for
  // next->firewall, reused when it is the same object as the running one; the GeoIP
  // database). Fails with a clear error, e.g. an mmdb that does not open or not enough
  // memory for the ACL; nothing changes in the running dataplane either way.
  virtual absl::StatusOr<std::unique_ptr<PreparedSnapshot>> prepare(
      std::unique_ptr<rules::Snapshot> next) = 0;
  // Publishes a prepared snapshot (generation assigned here, previous + 1); returns when no
  // worker can still see the previous one and it has been freed. Cannot fail.
  virtual uint32_t publish(std::unique_ptr<PreparedSnapshot> next) = 0;
  // Per-rule firewall counters of the running rule set, in rule (rank) order.
  virtual std::vector<RuleCounters> ruleCounters() const = 0;
  // DNS filtering: the running lists with their counters (empty when DNS is off).
  virtual std::vector<DnsListCounters> dnsLists() const { return {}; }
  virtual uint32_t currentGeneration() const = 0;
  virtual CountersSnapshot counters() const = 0;
  virtual std::vector<WorkerInfo> workers() const = 0;
  virtual std::vector<PortInfo> ports() const = 0;
  virtual uint32_t drainEvents(const std::function<void(const Event&)>& fn, uint32_t max) = 0;
  // Judges `frame` arriving on `side` with the current snapshot, as a packet of a new flow,
  // without side effects.
  virtual ExplainResult explain(const uint8_t* frame, uint32_t len, uint8_t side) const = 0;
  // The id of rule `rule` of `stage` in the snapshot of `generation` (verdict records and
  // events carry indexes): the firewall rule's id. "" when unknown (no such rule, or a
  // generation older than the recent ones remembered).
  virtual std::string ruleName(uint32_t generation, Stage stage, uint32_t rule) const {
    (void)generation, (void)stage, (void)rule;
    return "";
  }
  // The id of backend `backend` of service `service` (PacketVerdict::backend,
  // lb_service) in the snapshot of `generation`; "" when unknown.
  virtual std::string backendName(uint32_t generation, uint16_t service, uint16_t backend) const {
    (void)generation, (void)service, (void)backend;
    return "";
  }
  // Per-backend counters summed over the workers, keyed by backend identity
  // (rules::CompiledLbBackend::identity). Kept across reloads: a backend that keeps its
  // identity keeps counting.
  virtual std::vector<LbBackendStats> lbBackendStats() const { return {}; }
  // Per-rule match counters of the running YARA rules (rule order; empty when
  // DPI is off).
  virtual std::vector<DpiRuleCounters> dpiRuleCounters() const { return {}; }
  // The compiled YARA rules of the snapshot of `generation` (tags, meta and actions of the
  // rules events name by index); null when DPI was off then or the generation is older than
  // the recent ones remembered.
  virtual std::shared_ptr<const rules::CompiledDpi> dpiRules(uint32_t generation) const {
    (void)generation;
    return nullptr;
  }
  // --- flows view --- Every flow of every worker (dpuctl flows). Each worker copies its
  // table a bounded slice per loop between bursts (dataplane/pipeline/mailbox.h), so the
  // listing is not one instant: a flow created or ended during the walk may be missing.
  // One listing at a time (callers queue). DEADLINE_EXCEEDED when a worker does not finish
  // within `timeout_ms` (it is not running).
  virtual absl::StatusOr<FlowListing> listFlows(uint32_t timeout_ms) {
    (void)timeout_ms;
    return absl::UnimplementedError("this dataplane lists no flows");
  }
  // --- capture --- Arms the capture of the packets `spec` selects on every worker (one
  // capture at a time: FAILED_PRECONDITION while another is armed; NOT_FOUND: no firewall
  // rule has the id). readCapture moves up to `max` copied packets out (worker order, each
  // worker's in time order) and adds the packets lost to full rings since the previous
  // call to *lost. disarmCapture stops copying and returns when no worker writes any more.
  virtual absl::Status armCapture(const CaptureSpec& spec) {
    (void)spec;
    return absl::UnimplementedError("this dataplane captures no packets");
  }
  virtual uint32_t readCapture(std::vector<CapturedPacket>* out, uint32_t max, uint64_t* lost) {
    (void)out, (void)max, (void)lost;
    return 0;
  }
  virtual void disarmCapture() {}
};

// The explain logic itself, usable on any snapshot (no DPDK state involved). Firewall rules
// are matched with rules::referenceMatch; `countries` (optional) resolves the countries of
// rules that name some (without it every address is of an unknown country).
// `extra`: stages after the built-in ones (DataplaneOptions::extra_stages) with their parts.
struct StageSpec;
ExplainResult explainPacket(const rules::Snapshot& snap, const uint8_t* frame, uint32_t len,
                            uint8_t side, const CountryLookup* countries = nullptr,
                            const std::vector<StageSpec>* extra = nullptr);

}  // namespace dpu::dp
