// The one place where configuration changes happen: validate -> compile (off the packet
// path) -> prepare the dataplane objects (ACL contexts, GeoIP database; may fail, before
// anything is persisted) -> persist -> publish to the dataplane (RCU) -> acknowledge. Changes are serialized;
// a change applies entirely or not at all.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "control/config/config_store.h"
#include "dataplane/api/control.h"
#include "proto/appliance.pb.h"
#include "rules/compile/config_errors.h"
#include "rules/compile/firewall_parsers.h"
#include "rules/compiled/snapshot.h"

namespace dpu::ctl {

struct ApplyResult {
  uint64_t version = 0;
  uint32_t generation = 0;
  double validate_ms = 0, compile_ms = 0, prepare_ms = 0, persist_ms = 0, publish_ms = 0;
  std::vector<std::string> warnings;
  // --- dpi --- the DPI rules compiled for this apply (null: none, or unchanged).
  std::shared_ptr<const rules::CompiledDpi> dpi_compiled;
};

// Failure of an apply: the status (ABORTED on a version conflict, INVALID_ARGUMENT with
// every error in `errors`, or the I/O error from the store) and the errors one by one.
struct ApplyError {
  absl::Status status;
  rules::ConfigErrorList errors;
  std::string phase;  // --- fleet --- the phase that refused it (see RefusedApply::phase)
};

// Outcomes and durations of the applies since start (GetStats, metrics). Durations are the
// whole apply, validate -> publish, of committed applies.
struct ApplyStats {
  static constexpr double kBucketsS[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                         0.25,  0.5,    1,     2.5,  5,     10,   30};
  static constexpr size_t kBuckets = sizeof(kBucketsS) / sizeof(kBucketsS[0]);
  uint64_t applied = 0;    // committed and published
  uint64_t invalid = 0;    // INVALID_ARGUMENT
  uint64_t conflicts = 0;  // ABORTED (expected_version moved)
  uint64_t failed = 0;     // any other refusal (not found, I/O, dataplane prepare ...)
  uint64_t duration_count = 0;
  double duration_sum_s = 0;
  uint64_t duration_le[kBuckets] = {};  // cumulative: applies that took <= kBucketsS[i]
  ApplyResult last;                     // the last committed apply
  int64_t last_unix_ns = 0;             // 0 = none since start
  std::map<std::string, uint64_t> refused_by_phase;  // --- ops --- (see RefusedApply::phase)
};

// --- ops --- An apply that was refused: what it was based on, the phase that refused it
// ("follower": the node follows a fleet, see setFollower; "version": expected_version moved;
// "edit": the RPC's edit of the document failed; "validate", "compile", "prepare" (dataplane
// tables), "persist"; "load": the file did not load, see reportRefused), and why.
struct RefusedApply {
  uint64_t based_on_version = 0;  // expected_version (the committed version when forced)
  uint64_t committed_version = 0; // the committed version, which stays in force
  std::string phase;
  absl::Status status;
  rules::ConfigErrorList errors;  // all of them (empty when the status says it all)
};

class ProgressRegistry;

class ConfigManager {
 public:
  // `plane` may be null (no dataplane: validation and persistence only, e.g. tests).
  ConfigManager(ConfigStore* store, dp::DataplaneControl* plane);

  // Compiles the committed config into the first snapshot (start-up).
  absl::StatusOr<std::unique_ptr<rules::Snapshot>> compileCurrent() const;

  v1::ApplianceConfig current() const;
  // The committed version; never waits for an apply in progress.
  uint64_t version() const;

  // Whole-document apply. expected_version must equal version() unless force.
  absl::StatusOr<ApplyResult> apply(const v1::ApplianceConfig& next, uint64_t expected_version,
                                    bool force, ApplyError* error);
  // Incremental edit: `mutate` edits a copy of the committed document (it may itself fail,
  // e.g. "no rule with id x"); the result is applied like apply().
  absl::StatusOr<ApplyResult> update(
      const std::function<absl::Status(v1::ApplianceConfig&)>& mutate, uint64_t expected_version,
      bool force, ApplyError* error);
  // The same with an edit that names the errors of the input it refuses (e.g. every bad
  // entry of a DNS list edit): they go to `error` (the response's error list) and to the
  // refused apply's event, like the errors of a refused document.
  absl::StatusOr<ApplyResult> update(
      const std::function<absl::Status(v1::ApplianceConfig&, rules::ConfigErrorList&)>& mutate,
      uint64_t expected_version, bool force, ApplyError* error);
  // --- fleet --- While `why` is set (a node following a fleet, docs/fleet.md "Local edits"),
  // apply() and update() are refused with FAILED_PRECONDITION and that message (phase
  // "follower"); the fleet agent applies with applyAsFollower (forced, whole document).
  void setFollower(std::string why);
  absl::StatusOr<ApplyResult> applyAsFollower(const v1::ApplianceConfig& next, ApplyError* error);
  // Validation + compilation only.
  rules::ConfigErrorList validate(const v1::ApplianceConfig& cfg) const;

  // Called after each successful apply (under the manager's lock), e.g. to emit a
  // "config" event.
  void setOnApplied(std::function<void(const ApplyResult&)> fn);
  // --- ops --- Called after each refused apply (under the manager's lock), e.g. to emit a
  // "config" event with result "refused".
  void setOnRefused(std::function<void(const RefusedApply&)> fn);
  // A change refused before it reached the manager (e.g. SIGHUP with a file that does not
  // load: phase "load"): reported and counted like the refusals of apply().
  void reportRefused(const std::string& phase, const absl::Status& status);

  // The firewall of the committed configuration: its rules as written (inline, then rule
  // files) and the compiled form (ranks, entries). The one compiled for the last publish
  // (or compileCurrent) when the version matches; compiled again otherwise.
  struct FirewallView {
    uint64_t version = 0;
    std::vector<rules::FirewallRuleSpec> rules;  // model order
    std::shared_ptr<const rules::CompiledFirewall> compiled;
  };
  absl::StatusOr<FirewallView> firewallView() const;

  // Takes over what `other` compiled last (compileCurrent at start-up by a manager without
  // a dataplane), so the first apply shares the running compiled firewall when the firewall
  // section does not change.
  void inheritCompiled(const ConfigManager& other);

  // --- lb --- The load balancer of the committed configuration (the published services
  // where unchanged).
  struct LbView {
    uint64_t version = 0;
    std::shared_ptr<const rules::CompiledLb> compiled;
  };
  absl::StatusOr<LbView> lbView() const;
  // --- dpi --- The DPI section of the committed configuration: its model (sources in
  // compile order) and its compiled rules (the published object when the section did not
  // change; compiled again otherwise). compiled is null when there is no dpi section.
  struct DpiView {
    uint64_t version = 0;
    rules::DpiModel model;
    std::shared_ptr<const rules::CompiledDpi> compiled;
  };
  absl::StatusOr<DpiView> dpiView() const;
  // --- dpi --- Background merges of the DPI compile (docs/dpi.md "Shards and incremental
  // compiles"): after an edit the published rules may scan a delta database and masked
  // shards; when the merges are done the rules are compiled again from the compile cache
  // and published with the same config version (nothing committed). followDpiMerges()
  // makes this manager the process's merge listener (the live appliance's); republishDpi()
  // is what the listener runs (a no-op when the published rules have no delta or mask).
  void followDpiMerges();
  absl::Status republishDpi();
  uint64_t dpiRepublishes() const { return dpi_republishes_.load(std::memory_order_relaxed); }
  ~ConfigManager();
  // Applies since this manager was created (its own lock: never waits for an apply).
  ApplyStats applyStats() const;
  // Every apply becomes a "config apply" task there, with its steps (validating, compiling
  // ... and what the compilers report through rules::currentProgress()). Null = none.
  void setProgress(ProgressRegistry* progress) { progress_ = progress; }

 private:
  absl::StatusOr<ApplyResult> applyLocked(v1::ApplianceConfig next, ApplyError* error);
  absl::StatusOr<ApplyResult> updateImpl(
      const std::function<absl::Status(v1::ApplianceConfig&, rules::ConfigErrorList&)>& mutate,
      uint64_t expected_version, bool force, ApplyError* error, bool from_owner);
  std::string follower_;  // --- fleet --- (under mu_) see setFollower
  // Counts the outcome of one apply/update in stats_.
  void record(const absl::StatusOr<ApplyResult>& r, const char* phase);
  ProgressRegistry* progress_ = nullptr;
  std::atomic<uint64_t> committed_version_;  // store_->version(), readable without mu_
  mutable std::mutex stats_mu_;
  ApplyStats stats_;
  mutable std::mutex mu_;
  ConfigStore* store_;
  dp::DataplaneControl* plane_;
  std::function<void(const ApplyResult&)> on_applied_;
  std::function<void(const RefusedApply&)> on_refused_;  // --- ops ---
  const char* phase_ = "";  // --- ops --- the phase applyLocked is in (under mu_)
  // The compiled firewall of the snapshot handed to the dataplane last, with its model
  // (compileSnapshot shares it when the firewall section did not change), and its view.
  mutable rules::FirewallReuse published_fw_;
  // --- lb --- The published load balancer: unchanged services are not rebuilt.
  mutable rules::LbReuse published_lb_;
  mutable rules::DpiReuse published_dpi_;  // --- dpi ---
  // DNS filtering: the DNS section of the snapshot handed to the dataplane last.
  mutable rules::DnsReuse published_dns_;
  mutable FirewallView view_;
  // --- dpi --- The snapshot handed to the dataplane last (shared parts), for republishDpi.
  mutable std::unique_ptr<rules::Snapshot> published_snap_;
  struct MergeGuard {
    std::mutex mu;
    ConfigManager* self = nullptr;
  };
  std::shared_ptr<MergeGuard> merge_guard_;
  std::atomic<uint64_t> dpi_republishes_{0};
};

}  // namespace dpu::ctl
