// Human and machine output of the appliance: the end-of-run summary, verdict records
// (JSON lines) and events (JSON lines shaped like Suricata's eve.json).
#pragma once

#include "rules/model/signature.h"

#include <cstdint>
#include <string>
#include <vector>

#include "dataplane/api/control.h"
#include "dataplane/api/events.h"
#include "dataplane/pipeline/counters.h"
#include "dataplane/pipeline/verdict.h"
#include "rules/compiled/snapshot.h"

namespace dpu::ctl {

struct PortReport {
  std::string name;       // "A (net_pcap0)"
  uint64_t rx_packets = 0, rx_bytes = 0, tx_packets = 0, tx_bytes = 0;
  uint64_t rx_missed = 0, rx_nombuf = 0, rx_errors = 0, tx_errors = 0;  // PMD (rte_eth_stats)
};

struct SummaryInput {
  std::string title;
  PortReport ports[2];
  dp::CountersSnapshot counters;
  uint64_t flows_active_at_end = 0;
  uint32_t generation = 0;
  uint64_t config_version = 0;
  std::vector<std::string> notes;     // printed after the header line (e.g. config changes)
  std::vector<std::string> warnings;  // printed last
  // Per-rule firewall counters of the rule set in force at the end (rank order).
  std::vector<dp::RuleCounters> fw_rules;
  std::vector<dp::DnsListCounters> dns_lists;  // DNS filtering: the running lists
  // --- dpi --- the running YARA rule set: rule counts and per-rule matches (rule order)
  bool dpi_enabled = false;
  uint64_t dpi_accepted = 0, dpi_unsupported = 0;
  std::vector<dp::DpiRuleCounters> dpi_rules;
  // --- signatures --- the running Suricata-format rule set: accepted, refused (sid, line,
  // reason), and the signatures that alerted (from the events: noteSigAlert).
  bool sig_enabled = false;
  uint64_t sig_accepted = 0;
  std::vector<rules::SigRefusal> sig_refused;
  struct SigFired {
    uint32_t gid = 1, sid = 0, rev = 0;
    std::string msg, action;
    uint64_t alerts = 0;
  };
  std::vector<SigFired> sig_fired;  // first fired first
  // --- headline --- what the summary opens with: per stage, what was blocked, by which
  // rule and why (fillStageReports fills all but dns_blocked).
  struct FwRuleNote {
    std::string action;       // "allow", "deny", "reject"
    std::string description;  // the rule's description ("" = none)
  };
  std::vector<FwRuleNote> fw_rule_notes;     // fw_rules[i]'s action and description
  std::vector<std::string> dpi_rule_actions;  // dpi_rules[i]'s action: "alert", "drop", "reset"
  struct DnsBlock {
    std::string name, list, action;
    uint64_t queries = 0;
  };
  // The names DNS filtering blocked, first blocked first, at most kDnsBlockedNames of them
  // (queries for further names count in dns_blocked_other). Replay collects them from the
  // events; empty in a live summary, which shows the per-list counts.
  static constexpr size_t kDnsBlockedNames = 10;
  std::vector<DnsBlock> dns_blocked;
  uint64_t dns_blocked_other = 0;
  struct LbBackendFlows {
    std::string service, backend;
    uint64_t flows = 0, packets = 0;  // flows ever pinned to the backend, packets sent to it
  };
  std::vector<LbBackendFlows> lb_backends;  // service order, then backend order
};

// Fills the per-rule parts of `in` from the running dataplane and the snapshot it runs:
// firewall rule counters with each rule's action and description, DNS lists, YARA rule
// matches with their actions, flows per load balancer backend. Used by replay and run alike.
void fillStageReports(const dp::DataplaneControl& plane, const rules::Snapshot& snap,
                      SummaryInput& in);
// --- signatures --- Adds a signature's alert event to in.sig_fired; other events are ignored.
void noteSigAlert(const dp::Event& e, const dp::DataplaneControl& plane, SummaryInput& in);
// Adds a DNS event (a blocked name) to in.dns_blocked; other events are ignored.
void noteDnsBlock(const dp::Event& e, SummaryInput& in);

// Fills in.ports from the dataplane's port view (name and PMD counters of both sides).
void fillPorts(const dp::DataplaneControl& plane, SummaryInput& in);

// A readable multi-line summary. First the headline, one line per stage that did something
// ("firewall: 2 flows denied by rule ssh-block: ..."; DNS names blocked and by which list;
// DPI matches by rule with their action; flows per load balancer backend; other drops by
// reason), then the details: packets in/out per port, verdicts, drops by reason, flows,
// fragments, per-stage counters.
std::string formatSummary(const SummaryInput& in);
// The same content as one JSON object.
std::string summaryJson(const SummaryInput& in);

// `names` (optional) turns rule indexes into rule ids (DataplaneControl::ruleName); without
// it, or for a generation it no longer knows, the index is written.
std::string verdictJson(const dp::PacketVerdict& v, const dp::DataplaneControl* names = nullptr);
// wall_offset_ns is added to event times (0 when they already are epoch nanoseconds).
// `pcap_cnt` (the packet's index in the replayed input, as Suricata's eve.json) is written
// only with replay_index: live packets have no capture to count in.
std::string eventJson(const dp::Event& e, int64_t wall_offset_ns,
                      const dp::DataplaneControl* names = nullptr, bool replay_index = false);
// The id of the rule behind a verdict or an event: its name, else its index.
std::string ruleLabel(const dp::DataplaneControl* names, uint32_t generation, dp::Stage stage,
                      uint32_t rule);

std::string ipToString(const dp::IpAddr& a, uint8_t ip_ver);
// RFC 3339 UTC with microseconds: 2024-01-02T03:04:05.123456Z.
std::string isoTime(uint64_t unix_ns);
std::string protoName(uint8_t proto);
// --- dpi --- `t` as valid UTF-8 (YARA meta may hold any bytes; protobuf strings and JSON
// need UTF-8): valid sequences pass, any other byte >= 0x80 becomes the text \xHH.
std::string utf8Safe(const std::string& t);

}  // namespace dpu::ctl
