// The immutable bundle the dataplane reads: everything compiled from one committed
// configuration. Built by the control side (rules/compile), published by pointer through
// dataplane/api (release store), read by workers, freed after an rte_rcu_qsbr grace
// period. Workers never write to it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "rules/compile/config_errors.h"
#include "rules/compiled/dpi.h"
#include "rules/compiled/firewall.h"
#include "rules/compiled/lb.h"
#include "rules/model/dataplane_settings.h"
#include "rules/model/dpi.h"
#include "rules/compiled/dns.h"
#include "rules/model/dns.h"
#include "rules/model/firewall.h"
#include "rules/model/lb.h"

namespace dpu::rules {

// Everything a configuration says, in model form (filled by control/config).
struct ConfigModel {
  uint64_t version = 0;
  DataplaneSettings dataplane;
  FirewallModel firewall;
  // --- lb ---
  LbModel lb;
  DpiModel dpi;  // --- dpi ---
  // DNS filtering.
  DnsModel dns;
};

struct Snapshot {
  uint32_t generation = 0;   // increases by one per publish; recorded per packet
  uint64_t config_version = 0;
  DataplaneSettings dataplane;
  // Shared between consecutive snapshots when the firewall section did not change.
  std::shared_ptr<const CompiledFirewall> firewall;
  // --- lb --- Services are shared one by one with the previous snapshot when unchanged.
  std::shared_ptr<const CompiledLb> lb;
  // --- dpi --- null when DPI is off; shared when the dpi section did not change.
  // dpi_settings: the section without its sources (depth, buffers, policies).
  std::shared_ptr<const CompiledDpi> dpi;
  DpiModel dpi_settings;
  // DNS filtering: null when the section has no lists. Unchanged lists are shared with the
  // previous snapshot (same CompiledDnsList pointers).
  std::shared_ptr<const CompiledDns> dns;
};

// Validates `model` (every field, errors name the field) and compiles it into a snapshot.
// On failure the status lists every error; `errors` (optional) receives them one by one.
absl::StatusOr<std::unique_ptr<Snapshot>> compileSnapshot(const ConfigModel& model,
                                                          uint32_t generation,
                                                          ConfigErrorList* errors = nullptr);

// A firewall compiled before (normally the one of the snapshot published last) and the model
// it was compiled from. When the new model's firewall section equals `model`, compileSnapshot
// shares `compiled` (the same pointer) instead of compiling it again: the dataplane sees that
// the rule set did not change.
struct FirewallReuse {
  FirewallModel model;
  std::shared_ptr<const CompiledFirewall> compiled;
};
absl::StatusOr<std::unique_ptr<Snapshot>> compileSnapshot(const ConfigModel& model,
                                                          uint32_t generation,
                                                          ConfigErrorList* errors,
                                                          const FirewallReuse* reuse);
// --- dpi --- the DPI section compiled before, shared when the new one is equal.
struct DpiReuse {
  DpiModel model;
  std::shared_ptr<const CompiledDpi> compiled;
};

// --- lb --- The load balancer compiled before (normally the published one): every service
// whose model did not change is shared (same pointer, no Maglev build).
struct LbReuse {
  std::shared_ptr<const CompiledLb> compiled;
};
// DNS filtering: the DNS section compiled last (normally the published snapshot's); its
// lists are shared or patched by compileDns instead of read again.
struct DnsReuse {
  std::shared_ptr<const CompiledDns> compiled;
};
absl::StatusOr<std::unique_ptr<Snapshot>> compileSnapshot(const ConfigModel& model,
                                                          uint32_t generation,
                                                          ConfigErrorList* errors,
                                                          const FirewallReuse* reuse,
                                                          const LbReuse* lb_reuse,
                                                          const DpiReuse* dpi_reuse = nullptr,
                                                          const DnsReuse* dns_reuse = nullptr);

// Validation of the dataplane section alone: appends one error per bad field.
void validateDataplane(const DataplaneSettings& s, ConfigErrorList& errors);

}  // namespace dpu::rules
