// The one place where configuration changes happen: validate -> compile (off the packet
// path) -> prepare the dataplane objects (ACL contexts, GeoIP database; may fail, before
// anything is persisted) -> persist -> publish to the dataplane (RCU) -> acknowledge. Changes are serialized;
// a change applies entirely or not at all.
#pragma once

#include <cstdint>
#include <functional>
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
};

// Failure of an apply: the status (ABORTED on a version conflict, INVALID_ARGUMENT with
// every error in `errors`, or the I/O error from the store) and the errors one by one.
struct ApplyError {
  absl::Status status;
  rules::ConfigErrorList errors;
};

class ConfigManager {
 public:
  // `plane` may be null (no dataplane: validation and persistence only, e.g. tests).
  ConfigManager(ConfigStore* store, dp::DataplaneControl* plane);

  // Compiles the committed config into the first snapshot (start-up).
  absl::StatusOr<std::unique_ptr<rules::Snapshot>> compileCurrent() const;

  v1::ApplianceConfig current() const;
  uint64_t version() const;

  // Whole-document apply. expected_version must equal version() unless force.
  absl::StatusOr<ApplyResult> apply(const v1::ApplianceConfig& next, uint64_t expected_version,
                                    bool force, ApplyError* error);
  // Incremental edit: `mutate` edits a copy of the committed document (it may itself fail,
  // e.g. "no rule with id x"); the result is applied like apply().
  absl::StatusOr<ApplyResult> update(
      const std::function<absl::Status(v1::ApplianceConfig&)>& mutate, uint64_t expected_version,
      bool force, ApplyError* error);
  // Validation + compilation only.
  rules::ConfigErrorList validate(const v1::ApplianceConfig& cfg) const;

  // Called after each successful apply (under the manager's lock), e.g. to emit a
  // "config" event.
  void setOnApplied(std::function<void(const ApplyResult&)> fn);

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

 private:
  absl::StatusOr<ApplyResult> applyLocked(v1::ApplianceConfig next, ApplyError* error);
  mutable std::mutex mu_;
  ConfigStore* store_;
  dp::DataplaneControl* plane_;
  std::function<void(const ApplyResult&)> on_applied_;
  // The compiled firewall of the snapshot handed to the dataplane last, with its model
  // (compileSnapshot shares it when the firewall section did not change), and its view.
  mutable rules::FirewallReuse published_fw_;
  // --- lb --- The published load balancer: unchanged services are not rebuilt.
  mutable rules::LbReuse published_lb_;
  // DNS filtering: the DNS section of the snapshot handed to the dataplane last.
  mutable rules::DnsReuse published_dns_;
  mutable FirewallView view_;
};

}  // namespace dpu::ctl
