// What the control side publishes to the workers: the rules::Snapshot (pure data) together
// with the dataplane objects built for it, behind one pointer.
//
// Ownership and publication: built by Dataplane::prepare (control thread), published by
// Dataplane::publish with a release store of the pointer, read by workers (acquire load once
// per poll loop), freed by the control thread after an rte_rcu_qsbr grace period. Workers
// never write to it except their own block of `hits` (one writer per block, relaxed atomic
// stores; control threads read). `base`, `fw_since` are written by publish() before the store
// (fw_since) or under the Dataplane's publish mutex after the grace period (base).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "dataplane/api/control.h"
#include "dataplane/pipeline/counters.h"
#include "dataplane/pipeline/distribute.h"
#include "dataplane/pipeline/verdict.h"
#include "dataplane/normalize/http.h"
#include "dataplane/stages/dpi/dpi_runtime.h"
#include "dataplane/stages/firewall/firewall_tables.h"

namespace dpu::dp {

// Per-rule match counters of one DPI runtime (one CompiledDpi): worker w's
// counter of rule r is of(w)[r]; each worker writes only its own block (relaxed stores),
// control threads read. Shared by the states that share the runtime.
struct DpiRuleHit {
  Counter matches;
  Counter last_hit_ns;
};
struct DpiRuleHits {
  DpiRuleHits(uint32_t rules, uint32_t workers)
      : nrules(rules), nworkers(workers), stride((rules + 3) & ~3u),
        h(new DpiRuleHit[size_t(stride) * workers]()) {}
  DpiRuleHit* of(uint32_t w) const { return &h[size_t(w) * stride]; }
  uint32_t nrules, nworkers, stride;  // stride: a multiple of 4 hits (64 bytes)
  std::unique_ptr<DpiRuleHit[]> h;
};

struct PublishedState : PreparedSnapshot {
  // Firewall: null tables when the snapshot has no firewall. The stage runs only when
  // fw_active (rules, or a default action other than allow).
  std::shared_ptr<const FirewallTables> fw;
  std::shared_ptr<const GeoIpDb> geoip;  // null: no database configured
  bool fw_active = false;
  // First generation that ran this firewall object (same shared_ptr): flow verdicts cached
  // from that generation on are still what the rules say.
  uint32_t fw_since = 0;

  // Per-rule counters: worker w's RuleHit for rule r is hits[w * hit_pairs].h[0] + r.
  uint32_t nrules = 0;
  uint32_t nworkers = 0;
  uint32_t hit_pairs = 0;  // RuleHitPair per worker
  std::unique_ptr<RuleHitPair[]> hits;
  // Rule identity across reloads: uid of each rule (index = rank), assigned by the Dataplane
  // per rule id (same id, same uid); uid_index sorted by uid for the reverse lookup.
  std::vector<uint32_t> rule_uid;
  std::vector<std::pair<uint32_t, uint32_t>> uid_index;  // (uid, rule index)
  // Totals carried over from earlier rule sets for rules that kept their id (control only).
  std::vector<RuleCounters> base;
  // Hyperscan database, per-worker scratch and stream pools (null: no DPI). Shared
  // with the previous state when the compiled rules and the settings did not change.
  std::shared_ptr<const DpiRuntime> dpi;
  std::shared_ptr<const DpiRuleHits> dpi_hits;  // with `dpi` (null: no DPI)
  // libhtp and file scanning on `dpi` (null: none); built and shared with it.
  std::shared_ptr<const HttpRuntime> http;

  // Software distribution: the NAT services' addresses as the hash reads them (empty
  // without NAT services; distribute.h).
  DistributionCanon dist_canon;

  RuleHit* hitsOf(uint32_t worker) const {
    return nrules == 0 ? nullptr : &hits[static_cast<size_t>(worker) * hit_pairs].h[0];
  }
  // Rule index of `uid` in this state, kNoRule when no rule has it. No allocation.
  uint32_t indexOfUid(uint32_t uid) const {
    auto it = std::lower_bound(uid_index.begin(), uid_index.end(),
                               std::pair<uint32_t, uint32_t>(uid, 0));
    return it != uid_index.end() && it->first == uid ? it->second : kNoRule;
  }
};

}  // namespace dpu::dp
