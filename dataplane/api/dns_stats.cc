// DNS filtering: per-list counters of the running snapshot (control side, cold).
#include "dataplane/api/control.h"
#include "dataplane/api/dataplane.h"
#include "rules/compile/dns_parsers.h"

namespace dpu::dp {

std::vector<DnsListCounters> dnsListCounters(const rules::Snapshot& snap,
                                             const CountersSnapshot::Flat& c) {
  std::vector<DnsListCounters> out;
  if (!snap.dns) return out;
  for (const auto& l : snap.dns->lists) {
    DnsListCounters d;
    d.name = l->name;
    d.action = rules::dnsActionName(l->action);
    d.names = l->set.size();
    d.skipped_lines = l->skipped_lines;
    d.load_ms = l->load_ms;
    d.incremental = l->incremental;
    d.blocked = c.dns_list_blocked[l->slot % kDnsListSlots];
    d.allowed = c.dns_list_allowed[l->slot % kDnsListSlots];
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<DnsListCounters> Dataplane::dnsLists() const {
  std::lock_guard<std::mutex> lock(publish_mu_);  // the state stays while we read it
  return dnsListCounters(current(), counters().total);
}

}  // namespace dpu::dp
