// Compiled DNS filtering: the named lists, each an immutable DnsNameSet with its action, and
// the lookup the dataplane runs per query name. Built by compileDns on the control side,
// shared through the Snapshot (an unchanged list keeps its pointer across snapshots, so it
// is neither re-read nor re-hashed), never written after publication.
//
// Matching: for a query name of L labels with suffix fingerprints s[0..L-1] (s[0] = the
// whole name), a list matches at depth k when its set holds s[k] with the "self" part (k = 0)
// or the "sub" part (k > 0). Precedence:
//   1. any allow match (an allow list, "@@||x^", "rpz-passthru.") in any list wins;
//   2. otherwise the most specific block match (smallest k) wins;
//   3. ties: the list listed first.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rules/compile/config_errors.h"
#include "rules/compiled/dns_name_set.h"
#include "rules/model/dns.h"

namespace dpu::rules {

struct CompiledDnsList {
  std::string name;
  DnsAction action = DnsAction::kNxdomain;
  uint32_t ttl = 300;
  std::vector<std::array<uint8_t, 4>> sinkhole_v4;   // never empty (0.0.0.0 by default)
  std::vector<std::array<uint8_t, 16>> sinkhole_v6;  // never empty (:: by default)
  DnsNameSet set;
  uint64_t skipped_lines = 0;   // bad lines skipped (DnsBadLines::kSkip)
  std::vector<std::string> skipped_samples;  // the first few skipped lines' errors
  double load_ms = 0;           // time to read + parse + insert (or to apply a delta)
  bool incremental = false;     // built from the previous version by a delta
  DnsListModel model;           // what it was compiled from (reuse and deltas)
  // Counter slot (0 .. kDnsCounterSlots-1): stable for a list name across snapshots, so
  // the dataplane's per-list counters carry over reloads.
  uint16_t slot = 0;
};

inline constexpr uint16_t kDnsCounterSlots = 256;

struct DnsLookup {
  int16_t list = -1;            // index in CompiledDns::lists, -1 = no match
  DnsAction action = DnsAction::kAllow;
  int8_t depth = -1;            // suffix index that matched
  bool blocked() const { return list >= 0 && action != DnsAction::kAllow; }
};

class CompiledDns {
 public:
  std::vector<std::shared_ptr<const CompiledDnsList>> lists;
  std::vector<uint16_t> extra_ports;
  Policy malformed = Policy::kForward;
  Policy nonstandard = Policy::kForward;  // opcode != QUERY or QDCOUNT != 1
  Policy tcp_midstream = Policy::kForward;  // DNS over TCP picked up mid-stream
  bool cname_cloaking = true;
  // SOA of negative answers (DnsSoaModel): MNAME then RNAME in wire format (no compression),
  // then the five 32-bit fields; soa_minimum 0 = the answering list's ttl.
  std::vector<uint8_t> soa_names;
  uint32_t soa_serial = 1, soa_refresh = 1800, soa_retry = 900, soa_expire = 604800;
  uint32_t soa_minimum = 0;
  // Negative-caching TTL of a list's answers: the SOA's MINIMUM, also the SOA record's TTL.
  uint32_t negativeTtl(const CompiledDnsList& l) const {
    return soa_minimum ? soa_minimum : l.ttl;
  }
  uint16_t next_slot = 0;   // counter slots handed out so far (see CompiledDnsList::slot)

  bool isDnsPort(uint16_t port) const {
    if (port == 53) return true;
    for (uint16_t p : extra_ports) {
      if (p == port) return true;
    }
    return false;
  }

  // `suffix` holds the fingerprints of the name's n suffixes (dnsSuffixHashes): their filter
  // words and the home slots the filters let through are prefetched, then probed.
  DnsLookup lookup(const uint64_t* suffix, int n) const {
    prefetch(suffix, n);
    return probe(suffix, n);
  }

  // A burst of names (the dataplane's DNS stage: every query of a burst segment): the home
  // slots of every suffix of every name are prefetched first, then each name is probed, so
  // the cache misses of all the names overlap instead of 3-4 at a time. out[i] is exactly
  // lookup(suffix[i], n[i]).
  void lookupBurst(const uint64_t* const* suffix, const int* n, int count, DnsLookup* out) const {
    for (int i = 0; i < count; ++i) prefetchFilters(suffix[i], n[i]);
    for (int i = 0; i < count; ++i) prefetchSlots(suffix[i], n[i]);
    for (int i = 0; i < count; ++i) out[i] = probe(suffix[i], n[i]);
  }

  // Prefetch, step 1: the filter words of every suffix in every list (DnsNameSet).
  void prefetchFilters(const uint64_t* suffix, int n) const {
    for (const auto& lp : lists) {
      for (int k = 0; k < n; ++k) lp->set.prefetchFilter(suffix[k]);
    }
  }
  // Step 2: the table slots of the suffixes the filters let through.
  void prefetchSlots(const uint64_t* suffix, int n) const {
    for (const auto& lp : lists) {
      for (int k = 0; k < n; ++k) lp->set.prefetchSlot(suffix[k]);
    }
  }
  void prefetch(const uint64_t* suffix, int n) const {
    prefetchFilters(suffix, n);
    prefetchSlots(suffix, n);
  }

  // The match of a name whose slots were prefetched (or not: then each probe waits).
  DnsLookup probe(const uint64_t* suffix, int n) const {
    DnsLookup best;
    for (size_t li = 0; li < lists.size(); ++li) {
      const CompiledDnsList& l = *lists[li];
      for (int k = 0; k < n; ++k) {
        uint8_t v = l.set.find(suffix[k]);
        if (v == 0) continue;
        uint8_t a;
        if (k == 0) {
          if (!(v & DnsEntryBits::kSelf)) continue;
          a = DnsEntryBits::selfAction(v);
        } else {
          if (!(v & DnsEntryBits::kSub)) continue;
          a = DnsEntryBits::subAction(v);
        }
        DnsAction act = a ? static_cast<DnsAction>(a) : l.action;
        if (act == DnsAction::kAllow) {
          best.list = static_cast<int16_t>(li);
          best.action = act;
          best.depth = static_cast<int8_t>(k);
          return best;  // allow wins
        }
        if (best.list < 0 || k < best.depth) {
          best.list = static_cast<int16_t>(li);
          best.action = act;
          best.depth = static_cast<int8_t>(k);
        }
      }
    }
    return best;
  }

  // Convenience for the control side and tests: a dotted name (normalized or not).
  DnsLookup lookupName(std::string_view name) const;
};

// Validates and compiles the DNS section. `previous` (optional, normally the published
// snapshot's) lends lists by name: an unchanged list is shared, a list whose only change is
// appended names / removals is copied and patched; others are read and built anew. Errors
// (section "dns", the list's name, file and line, field) go to `errors`; on any error nothing
// is returned.
absl::StatusOr<std::shared_ptr<const CompiledDns>> compileDns(const DnsModel& model,
                                                              const CompiledDns* previous,
                                                              ConfigErrorList* errors = nullptr);

}  // namespace dpu::rules
