#include "control/metrics/prom_export.h"

#include <google/protobuf/descriptor.h>
#include <prometheus/text_serializer.h>

#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "dataplane/pipeline/counters.h"
#include "dataplane/pipeline/verdict.h"

namespace dpu::ctl::metrics {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using prometheus::MetricType;

enum class As {
  kCounter,    // numeric field -> counter (name must end in _total)
  kGauge,      // numeric field -> gauge
  kSkip,       // not a metric (an identity, a copy of another metric, a sum of others)
  kPrefix,     // message / repeated message / map: children get `name` as their prefix
  kHistogram,  // a dpu.v1.Histogram field
};

std::vector<std::string> allDropReasons() {
  std::vector<std::string> out;
  for (int r = 1; r < static_cast<int>(dp::DropReason::kCount); ++r) {
    std::string n = dp::dropReasonName(static_cast<dp::DropReason>(r));
    if (n != "unknown") out.push_back(n);
  }
  return out;
}

std::vector<std::string> allStages() {
  std::vector<std::string> out;
  for (int s = 1; s < static_cast<int>(dp::Stage::kCount); ++s) {
    out.push_back(dp::stageName(static_cast<dp::Stage>(s)));
  }
  return out;
}

// --- ops --- keys always exported for the DNS maps and the refusal phases.
std::vector<std::string> allDnsCounters() {
  std::vector<std::string> out;
  for (int c = 0; c < dp::kDnsCounterCount; ++c) out.push_back(dp::dnsCounterName(c));
  return out;
}

std::vector<std::string> allHttpCounters() {  // --- http ---
  std::vector<std::string> out;
  for (int c = 0; c < dp::kHttpCounterCount; ++c) out.push_back(dp::httpCounterName(c));
  return out;
}

std::vector<std::string> allTcpStreamCounters() {  // --- tcp stream ---
  std::vector<std::string> out;
  for (int c = 0; c < dp::kTcpStreamCounterCount; ++c) out.push_back(dp::tcpStreamCounterName(c));
  return out;
}

std::vector<std::string> allDnsBlockActions() {
  return {"drop", "nxdomain", "nodata", "sinkhole", "refuse"};
}

std::vector<std::string> allRefusalPhases() {
  return {"load", "follower", "version", "edit", "validate", "compile", "prepare", "persist"};
}

struct Rule {
  const char* field;  // full field name, e.g. "dpu.v1.CounterSet.rx_packets_a"
  As as;
  // kCounter/kGauge/kHistogram: the family name after "dpu_" (nullptr = derived from the
  // path). kPrefix: the prefix of the children (nullptr = "<field>_", "" = none).
  const char* name;
  const char* help;
  // kCounter/kGauge: constant labels "k=v,k2=v2". kPrefix on a repeated message: the key
  // labels "label=field.path,..."; on a map: the key's label name.
  const char* labels = nullptr;
  std::vector<std::string> (*domain)() = nullptr;  // keys always exported (maps, repeated)
};

// clang-format off
const Rule kRules[] = {
  // --- dpu.v1.Stats (GetStats) ---
  {"dpu.v1.Stats.timestamp_unix_ns", As::kSkip, nullptr, nullptr},
  {"dpu.v1.Stats.config_version", As::kGauge, "config_version",
   "Version of the committed configuration."},
  {"dpu.v1.Stats.generation", As::kGauge, "snapshot_generation",
   "Generation of the snapshot published last (one more per publish)."},
  {"dpu.v1.Stats.ports", As::kPrefix, "port_", nullptr, "side=side,device=name"},
  {"dpu.v1.Stats.total", As::kSkip, nullptr, nullptr},  // = sum over the workers' series
  {"dpu.v1.Stats.workers", As::kPrefix, "", nullptr, "worker=id"},
  {"dpu.v1.Stats.uptime_seconds", As::kGauge, "uptime_seconds",
   "Seconds since the appliance started."},
  {"dpu.v1.Stats.config_applies", As::kPrefix, "config_", nullptr},
  {"dpu.v1.Stats.events", As::kPrefix, "events_", nullptr},
  {"dpu.v1.Stats.tasks", As::kPrefix, "task_", nullptr, "task=task,unit=unit"},

  {"dpu.v1.PortStats.rx_packets", As::kCounter, nullptr, "Frames received by the port (DPDK port statistics)."},
  {"dpu.v1.PortStats.rx_bytes", As::kCounter, nullptr, "Bytes received by the port."},
  {"dpu.v1.PortStats.tx_packets", As::kCounter, nullptr, "Frames sent by the port."},
  {"dpu.v1.PortStats.tx_bytes", As::kCounter, nullptr, "Bytes sent by the port."},
  {"dpu.v1.PortStats.rx_missed", As::kCounter, nullptr,
   "Frames the port dropped because the rx queues were full (the workers did not keep up)."},
  {"dpu.v1.PortStats.rx_nombuf", As::kCounter, nullptr, "Receive failures for lack of an mbuf."},
  {"dpu.v1.PortStats.tx_errors", As::kCounter, nullptr, "Frames the port failed to send."},
  {"dpu.v1.PortStats.rx_errors", As::kCounter, nullptr, "Erroneous frames received."},

  {"dpu.v1.WorkerStats.id", As::kSkip, nullptr, nullptr},
  {"dpu.v1.WorkerStats.generation", As::kGauge, "worker_snapshot_generation",
   "Snapshot generation the worker runs."},
  {"dpu.v1.WorkerStats.counters", As::kPrefix, "", nullptr},

  // --- dpu.v1.CounterSet (per worker) ---
  {"dpu.v1.CounterSet.rx_packets_a", As::kCounter, "rx_packets_total", "Frames the worker received, by ingress side.", "side=A"},
  {"dpu.v1.CounterSet.rx_packets_b", As::kCounter, "rx_packets_total", "Frames the worker received, by ingress side.", "side=B"},
  {"dpu.v1.CounterSet.tx_packets_a", As::kCounter, "tx_packets_total", "Frames the worker sent, by egress side.", "side=A"},
  {"dpu.v1.CounterSet.tx_packets_b", As::kCounter, "tx_packets_total", "Frames the worker sent, by egress side.", "side=B"},
  {"dpu.v1.CounterSet.rx_bytes_a", As::kCounter, "rx_bytes_total", "Bytes the worker received, by ingress side.", "side=A"},
  {"dpu.v1.CounterSet.rx_bytes_b", As::kCounter, "rx_bytes_total", "Bytes the worker received, by ingress side.", "side=B"},
  {"dpu.v1.CounterSet.tx_bytes_a", As::kCounter, "tx_bytes_total", "Bytes the worker sent, by egress side.", "side=A"},
  {"dpu.v1.CounterSet.tx_bytes_b", As::kCounter, "tx_bytes_total", "Bytes the worker sent, by egress side.", "side=B"},
  {"dpu.v1.CounterSet.forwarded", As::kCounter, "verdicts_total", "Packets judged, by verdict.", "verdict=forward"},
  {"dpu.v1.CounterSet.dropped", As::kCounter, "verdicts_total", "Packets judged, by verdict.", "verdict=drop"},
  {"dpu.v1.CounterSet.rejected", As::kCounter, "verdicts_total", "Packets judged, by verdict.", "verdict=reject"},
  {"dpu.v1.CounterSet.drops", As::kPrefix, "drops_total", "Packets dropped, by reason.", "reason", allDropReasons},
  {"dpu.v1.CounterSet.tcp_stream", As::kPrefix, "tcp_stream_total", "TCP stream normalization of inspected flows, by counter (docs/tcp-stream.md).", "counter", allTcpStreamCounters},
  {"dpu.v1.CounterSet.http", As::kPrefix, "http_total", "HTTP parsing (libhtp) and files scanned, by counter (docs/http.md).", "counter", allHttpCounters},
  {"dpu.v1.CounterSet.stages", As::kPrefix, "stage_", nullptr, "stage=stage", allStages},
  {"dpu.v1.StageCounters.packets", As::kCounter, nullptr, "Packets that entered the stage."},
  {"dpu.v1.StageCounters.dropped", As::kCounter, nullptr, "Packets the stage dropped."},
  {"dpu.v1.CounterSet.flows_created", As::kCounter, nullptr, "Flows created in the flow table."},
  {"dpu.v1.CounterSet.flows_expired", As::kCounter, nullptr, "Flows removed (idle timeout, closed, reused)."},
  {"dpu.v1.CounterSet.flows_active", As::kGauge, "flows_active", "Flows in the worker's flow table now."},
  {"dpu.v1.CounterSet.flows_midstream", As::kCounter, nullptr, "TCP flows picked up without a SYN (midstream policy FORWARD)."},
  {"dpu.v1.CounterSet.flow_table_full", As::kCounter, nullptr, "New flows that found the flow table full (either policy)."},
  {"dpu.v1.CounterSet.flow_cache_hits", As::kCounter, nullptr, "Packets judged by the verdict cached in their flow."},
  {"dpu.v1.CounterSet.fragments", As::kCounter, nullptr, "IP fragments seen."},
  {"dpu.v1.CounterSet.fragments_held", As::kCounter, nullptr, "Fragments held until their first fragment arrived."},
  {"dpu.v1.CounterSet.fragment_overlaps", As::kCounter, nullptr, "Fragments overlapping bytes already seen."},
  {"dpu.v1.CounterSet.fragments_first_missing", As::kCounter, nullptr, "Held fragments whose first fragment never came."},
  {"dpu.v1.CounterSet.fragment_datagrams_active", As::kGauge, "fragment_datagrams_active", "Fragmented datagrams tracked now."},
  // Datagram normalization (CounterSet.reassembly): fragments reassembled for DNS and DPI.
  {"dpu.v1.CounterSet.reassembly", As::kPrefix, "fragment_reassembly_", nullptr},
  {"dpu.v1.ReassemblyCounters.reassembled", As::kCounter, "fragment_reassembled_datagrams_total", "Fragmented datagrams reassembled for inspection and judged whole."},
  {"dpu.v1.ReassemblyCounters.atomic", As::kCounter, "fragment_atomic_total", "IPv6 atomic fragments (judged alone)."},
  {"dpu.v1.ReassemblyCounters.overlap_identical", As::kCounter, "fragment_reassembly_overlaps_total", "Fragments overlapping bytes already recorded for reassembly, by whether the data differs (different: dataplane.fragments.overlapping applies).", "data=identical"},
  {"dpu.v1.ReassemblyCounters.overlap_different", As::kCounter, "fragment_reassembly_overlaps_total", "Fragments overlapping bytes already recorded for reassembly, by whether the data differs (different: dataplane.fragments.overlapping applies).", "data=different"},
  {"dpu.v1.ReassemblyCounters.no_buffer", As::kCounter, "fragment_reassembly_exhausted_total", "Reassembly that ran out of state, by cause (the fail policy applies).", "cause=no_buffer"},
  {"dpu.v1.ReassemblyCounters.too_big", As::kCounter, "fragment_reassembly_exhausted_total", "Reassembly that ran out of state, by cause (the fail policy applies).", "cause=too_big"},
  {"dpu.v1.ReassemblyCounters.hold_full", As::kCounter, "fragment_reassembly_exhausted_total", "Reassembly that ran out of state, by cause (the fail policy applies).", "cause=hold_full"},
  {"dpu.v1.ReassemblyCounters.fail_open", As::kCounter, "fragment_reassembly_fail_policy_total", "Exhausted reassemblies by the fail policy applied (open: forwarded uninspected, closed: dropped).", "policy=open"},
  {"dpu.v1.ReassemblyCounters.fail_closed", As::kCounter, "fragment_reassembly_fail_policy_total", "Exhausted reassemblies by the fail policy applied (open: forwarded uninspected, closed: dropped).", "policy=closed"},
  {"dpu.v1.ReassemblyCounters.buffers_in_use", As::kGauge, "fragment_reassembly_buffers_in_use", "Reassembly buffers held now."},
  {"dpu.v1.CounterSet.non_ip_forwarded", As::kCounter, nullptr, "Non-IP frames forwarded by policy."},
  {"dpu.v1.CounterSet.malformed_forwarded", As::kCounter, nullptr, "Malformed frames forwarded by policy."},
  {"dpu.v1.CounterSet.untracked_forwarded", As::kCounter, nullptr, "Packets forwarded without a flow (table full, stray RST)."},
  {"dpu.v1.CounterSet.vxlan_not_parsed", As::kCounter, "tunnel_not_parsed_total", "Packets on a tunnel port or protocol that are not that tunnel, judged as the plain packet (dataplane.tunnels.strict off), by encapsulation.", "encapsulation=vxlan"},
  {"dpu.v1.CounterSet.geneve_not_parsed", As::kCounter, "tunnel_not_parsed_total", "Packets on a tunnel port or protocol that are not that tunnel, judged as the plain packet (dataplane.tunnels.strict off), by encapsulation.", "encapsulation=geneve"},
  {"dpu.v1.CounterSet.gre_not_parsed", As::kCounter, "tunnel_not_parsed_total", "Packets on a tunnel port or protocol that are not that tunnel, judged as the plain packet (dataplane.tunnels.strict off), by encapsulation.", "encapsulation=gre"},
  {"dpu.v1.CounterSet.events_lost", As::kCounter, nullptr, "Events lost because the worker's event ring or pool was full."},
  {"dpu.v1.CounterSet.handed_off", As::kCounter, "distribution_handed_off_total", "Software distribution: packets this worker received from a port and handed to the worker of their flow."},
  {"dpu.v1.CounterSet.handed_in", As::kCounter, "distribution_handed_in_total", "Software distribution: packets other workers handed to this worker (counted in its rx)."},
  {"dpu.v1.CounterSet.loops", As::kCounter, "worker_loops_total", "Polling loops of the worker."},
  {"dpu.v1.CounterSet.busy_loops", As::kCounter, "worker_busy_loops_total", "Polling loops that received at least one frame."},
  {"dpu.v1.CounterSet.idle_sleeps", As::kCounter, "worker_idle_sleeps_total", "Times a worker slept after polling loops that found nothing (run --poll idle)."},
  {"dpu.v1.CounterSet.idle_sleep_us", As::kCounter, "worker_idle_sleep_microseconds_total", "Microseconds workers slept while idle (run --poll idle)."},
  {"dpu.v1.CounterSet.firewall", As::kPrefix, "firewall_", nullptr},
  {"dpu.v1.FirewallCounters.allowed", As::kCounter, "firewall_verdicts_total", "Flows (or untracked packets) judged by the firewall, by action.", "action=allow"},
  {"dpu.v1.FirewallCounters.denied", As::kCounter, "firewall_verdicts_total", "Flows (or untracked packets) judged by the firewall, by action.", "action=deny"},
  {"dpu.v1.FirewallCounters.rejected", As::kCounter, "firewall_verdicts_total", "Flows (or untracked packets) judged by the firewall, by action.", "action=reject"},
  {"dpu.v1.FirewallCounters.rst_sent", As::kCounter, "firewall_reject_replies_total", "Replies sent for reject, by kind.", "kind=tcp_rst"},
  {"dpu.v1.FirewallCounters.icmp_sent", As::kCounter, "firewall_reject_replies_total", "Replies sent for reject, by kind.", "kind=icmp_unreachable"},
  {"dpu.v1.FirewallCounters.reject_nombuf", As::kCounter, "firewall_reject_unanswered_total", "Rejects that sent no reply, by why.", "why=no_mbuf"},
  {"dpu.v1.FirewallCounters.reject_suppressed", As::kCounter, "firewall_reject_unanswered_total", "Rejects that sent no reply, by why.", "why=not_allowed"},
  {"dpu.v1.FirewallCounters.geoip_lookups", As::kCounter, "geoip_lookups_total", "GeoIP database lookups (two per flow whose countries are needed)."},
  // --- lb (CounterSet) ---
  {"dpu.v1.CounterSet.lb_flows_balanced", As::kCounter, "lb_flows_total", "Load balancer: flows given a backend, re-hashed (their backend was removed or down) or reset.", "outcome=balanced"},
  {"dpu.v1.CounterSet.lb_flows_rehashed", As::kCounter, "lb_flows_total", "Load balancer: flows given a backend, re-hashed (their backend was removed or down) or reset.", "outcome=rehashed"},
  {"dpu.v1.CounterSet.lb_flows_reset", As::kCounter, "lb_flows_total", "Load balancer: flows given a backend, re-hashed (their backend was removed or down) or reset.", "outcome=reset"},
  {"dpu.v1.CounterSet.lb_service_gone", As::kCounter, "lb_service_gone_total", "Load balancer: flows whose service went away."},
  {"dpu.v1.CounterSet.lb_key_missing", As::kCounter, "lb_key_missing_total", "Load balancer: packets whose key field was missing (fallback applied)."},
  {"dpu.v1.CounterSet.lb_untracked", As::kCounter, "lb_untracked_total", "Load balancer: untracked packets balanced."},
  {"dpu.v1.CounterSet.lb_nat_reversed", As::kCounter, "lb_nat_reversed_total", "Load balancer: NAT answers translated back."},
  {"dpu.v1.CounterSet.lb_nat_no_reverse", As::kCounter, "lb_nat_no_reverse_total", "Load balancer: NAT flows without a reverse entry (table full or tuple taken)."},
  {"dpu.v1.CounterSet.lb_counters_full", As::kCounter, "lb_counters_full_total", "Load balancer: backends beyond a worker's counter table."},
  {"dpu.v1.CounterSet.lb_nat_reverse_created", As::kCounter, "lb_nat_reverse_created_total", "Load balancer: NAT reverse flow entries created by the LB (flows created without a packet of their own)."},
  {"dpu.v1.CounterSet.lb_fragments_followed", As::kCounter, "lb_fragments_followed_total", "Load balancer: later IP fragments sent to their first fragment's backend."},
  // --- dpi (CounterSet, Stats.dpi) ---
  {"dpu.v1.Stats.dpi", As::kPrefix, "dpi_", nullptr},
  {"dpu.v1.DpiStats.rules_accepted", As::kGauge, "dpi_rules_accepted", "DPI: YARA rules of the running set that are matched."},
  {"dpu.v1.DpiStats.rules_unsupported", As::kGauge, "dpi_rules_unsupported", "DPI: YARA rules of the running set that are unsupported (not matched)."},
  {"dpu.v1.DpiStats.cache_write_failures", As::kCounter, "dpi_cache_write_failures_total", "Compiled DPI databases that could not be written to dpi.cache_dir."},
  {"dpu.v1.DpiStats.rules", As::kPrefix, "dpi_rule_", nullptr, "rule=id,action=action"},
  {"dpu.v1.DpiRuleMatches.matches", As::kCounter, "dpi_rule_matches_total", "DPI: times the YARA rule fired (rules that fired at least once)."},
  {"dpu.v1.DpiRuleMatches.last_match_unix_ns", As::kGauge, "dpi_rule_last_match_timestamp_seconds", "DPI: when the YARA rule fired last (Unix time)."},

  // --- dns (CounterSet) --- the map's keys (dnsCounterName) each get their own family: a
  // rule "<map field>.<key>" names the family of that key (see exportMap).
  {"dpu.v1.CounterSet.dns", As::kPrefix, "dns_total", "DNS stage counters without a family of their own yet, by key.", nullptr, allDnsCounters},
  {"dpu.v1.CounterSet.dns.messages", As::kCounter, "dns_messages_total", "DNS messages inspected (UDP datagrams, TCP stream messages)."},
  {"dpu.v1.CounterSet.dns.queries", As::kCounter, "dns_queries_total", "DNS queries inspected."},
  {"dpu.v1.CounterSet.dns.responses", As::kCounter, "dns_responses_total", "DNS responses inspected."},
  {"dpu.v1.CounterSet.dns.blocked", As::kCounter, "dns_decisions_total", "DNS messages a list decided: blocked (queries answered or dropped, responses cloaked) or allowed (an allow entry let them through).", "decision=blocked"},
  {"dpu.v1.CounterSet.dns.allowed", As::kCounter, "dns_decisions_total", "DNS messages a list decided: blocked (queries answered or dropped, responses cloaked) or allowed (an allow entry let them through).", "decision=allowed"},
  {"dpu.v1.CounterSet.dns.answers_sent", As::kCounter, "dns_answers_total", "Answers built for blocked queries, by result (not_sent: no mbuf, the answer did not fit, or a non-unicast address or MAC).", "result=sent"},
  {"dpu.v1.CounterSet.dns.answers_not_sent", As::kCounter, "dns_answers_total", "Answers built for blocked queries, by result (not_sent: no mbuf, the answer did not fit, or a non-unicast address or MAC).", "result=not_sent"},
  {"dpu.v1.CounterSet.dns.malformed", As::kCounter, "dns_malformed_total", "DNS messages that do not parse (dropped or forwarded per dns.malformed)."},
  {"dpu.v1.CounterSet.dns.malformed_forwarded", As::kCounter, "dns_malformed_forwarded_total", "Malformed DNS messages forwarded by policy."},
  {"dpu.v1.CounterSet.dns.not_inspected", As::kCounter, "dns_not_inspected_total", "DNS messages passed unread over TCP (more than 16 in a segment, the cut head of a response over 4094 bytes, a query on the server's side)."},
  {"dpu.v1.CounterSet.dns.nonstandard", As::kCounter, "dns_nonstandard_total", "DNS messages that are not a standard query or response with one question (opcode other than QUERY, QDCOUNT not 1), dropped or forwarded per dns.nonstandard."},
  {"dpu.v1.CounterSet.dns.nonstandard_forwarded", As::kCounter, "dns_nonstandard_forwarded_total", "Non-standard DNS messages forwarded uninspected by policy."},
  {"dpu.v1.CounterSet.dns.cloaked", As::kCounter, "dns_cloaked_total", "Resolver responses replaced because a CNAME target is blocked (CNAME cloaking)."},
  {"dpu.v1.CounterSet.dns.tcp_segments", As::kCounter, "dns_tcp_segments_total", "TCP segments carrying DNS stream bytes."},
  {"dpu.v1.CounterSet.dns.tcp_unsynced", As::kCounter, "dns_tcp_unsynced_total", "DNS-over-TCP connections passed unread (picked up mid-stream, or no query-head buffer under tcp.dns_fail FORWARD)."},
  {"dpu.v1.CounterSet.dns.tcp_closed", As::kCounter, "dns_tcp_closed_total", "DNS-over-TCP connections closed by the appliance after it answered."},
  {"dpu.v1.CounterSet.dns.resets_sent", As::kCounter, "dns_tcp_resets_sent_total", "TCP RSTs sent to the servers of those connections."},
  {"dpu.v1.CounterSet.dns.tcp_response_overflow", As::kCounter, "dns_tcp_response_overflow_total", "DNS-over-TCP responses split across segments and longer than the 4094-byte reassembly buffer (handled by dns.malformed)."},
  {"dpu.v1.CounterSet.dns.tcp_no_buffer", As::kCounter, "dns_tcp_no_buffer_total", "DNS-over-TCP responses split across segments that found no free reassembly buffer (handled by dns.malformed)."},
  {"dpu.v1.CounterSet.dns_blocks_by_action", As::kPrefix, "dns_block_actions_total", "DNS blocks by the action taken (per list: dpu_dns_blocked_total).", "action", allDnsBlockActions},
  // --- dns (Stats.dns_lists: per list, all workers) ---
  {"dpu.v1.Stats.dns_lists", As::kPrefix, "dns_list_", nullptr, "list=name,action=action"},
  {"dpu.v1.DnsListStats.blocked", As::kCounter, "dns_blocked_total", "Queries blocked (and responses cloaked) by the list (kept across reloads by list name)."},
  {"dpu.v1.DnsListStats.allowed", As::kCounter, "dns_allowed_total", "Messages an allow entry of the list let through."},
  {"dpu.v1.DnsListStats.names", As::kGauge, "dns_list_names", "Distinct names in the compiled list."},
  {"dpu.v1.DnsListStats.skipped_lines", As::kGauge, "dns_list_skipped_lines", "Bad lines skipped when the list was loaded (skip_bad_lines)."},
  {"dpu.v1.DnsListStats.load_ms", As::kGauge, "dns_list_load_seconds", "Duration of the list's last build (or delta)."},
  {"dpu.v1.DnsListStats.incremental", As::kGauge, "dns_list_incremental", "1 when the list's last change was applied as a delta (no re-read of its file)."},
  // --- dpi (CounterSet.dpi) ---
  {"dpu.v1.CounterSet.dpi", As::kPrefix, "dpi_", nullptr},
  {"dpu.v1.DpiCounters.bytes_scanned", As::kCounter, "dpi_scanned_bytes_total", "Payload bytes DPI fed to Hyperscan."},
  {"dpu.v1.DpiCounters.alerts", As::kCounter, "dpi_matches_total", "DPI rule matches, by the action of the rule that matched.", "action=alert"},
  {"dpu.v1.DpiCounters.drops", As::kCounter, "dpi_matches_total", "DPI rule matches, by the action of the rule that matched.", "action=drop"},
  {"dpu.v1.DpiCounters.resets", As::kCounter, "dpi_matches_total", "DPI rule matches, by the action of the rule that matched.", "action=reset"},
  {"dpu.v1.DpiCounters.gaps", As::kCounter, "dpi_gaps_total", "TCP gaps DPI met (bytes missing beyond the out-of-order buffer; dpi.gap_policy applies)."},
  {"dpu.v1.DpiCounters.depth_reached", As::kCounter, "dpi_depth_reached_total", "Flow directions that reached the inspection depth (inspection stops there)."},
  {"dpu.v1.DpiCounters.no_stream", As::kCounter, "dpi_streams_not_inspected_total", "Flow directions not inspected because the worker's stream pool was empty."},
  {"dpu.v1.DpiCounters.overflow", As::kCounter, "dpi_stream_overflows_total", "Compressed DPI streams that outgrew their slot and moved to a full stream."},
  {"dpu.v1.DpiCounters.rst_sent", As::kCounter, "dpi_rst_sent_total", "TCP RSTs sent for DPI rules with action reset."},
  {"dpu.v1.DpiCounters.prefilter_confirmed", As::kCounter, "dpi_prefilter_candidates_total", "Candidate matches of prefiltered DPI patterns, by PCRE2's confirmation result.", "result=confirmed"},
  {"dpu.v1.DpiCounters.prefilter_rejected", As::kCounter, "dpi_prefilter_candidates_total", "Candidate matches of prefiltered DPI patterns, by PCRE2's confirmation result.", "result=rejected"},
  {"dpu.v1.DpiCounters.prefilter_errors", As::kCounter, "dpi_prefilter_candidates_total", "Candidate matches of prefiltered DPI patterns, by PCRE2's confirmation result.", "result=error"},
  {"dpu.v1.DpiCounters.no_window", As::kCounter, "dpi_no_window_total", "Flow directions that got no prefilter history window (candidates confirmed on the completing packet only)."},
  // --- signatures (CounterSet.signatures) ---
  {"dpu.v1.CounterSet.signatures", As::kPrefix, "signature_", nullptr},
  {"dpu.v1.SignatureCounters.inspected", As::kCounter, "signature_inspections_total", "Signature inspections: a packet's payload (TCP: its new in-order stream bytes) or an HTTP transaction's buffers."},
  {"dpu.v1.SignatureCounters.candidates", As::kCounter, "signature_candidates_total", "Signatures the fast-pattern prefilter proposed for confirmation."},
  {"dpu.v1.SignatureCounters.matches", As::kCounter, "signature_matches_total", "Signatures whose every condition held."},
  {"dpu.v1.SignatureCounters.alerts", As::kCounter, "signature_actions_total", "Signature matches acted on, by action.", "action=alert"},
  {"dpu.v1.SignatureCounters.drops", As::kCounter, "signature_actions_total", "Signature matches acted on, by action.", "action=drop"},
  {"dpu.v1.SignatureCounters.rejects", As::kCounter, "signature_actions_total", "Signature matches acted on, by action.", "action=reject"},
  {"dpu.v1.SignatureCounters.passes", As::kCounter, "signature_actions_total", "Signature matches acted on, by action.", "action=pass"},
  {"dpu.v1.SignatureCounters.pcre_errors", As::kCounter, "signature_pcre_errors_total", "PCRE2 evaluations of signatures that could not decide (match limit; not counted as a match)."},
  {"dpu.v1.SignatureCounters.flowbits_full", As::kCounter, "signature_flowbits_full_total", "Flowbits a flow had no room for (not set)."},
  {"dpu.v1.SignatureCounters.threshold_full", As::kCounter, "signature_threshold_full_total", "Threshold entries that found no room (the signature alerted unthresholded)."},
  {"dpu.v1.SignatureCounters.hits_dropped", As::kCounter, "signature_hits_dropped_total", "Signature hits beyond the per-packet bound (64) that were not acted on."},

  // --- perf (CounterSet) --- worker cycles by bucket, TSC frequency, forwarding latency
  {"dpu.v1.CounterSet.cycles", As::kPrefix, "", nullptr, "bucket=bucket"},
  {"dpu.v1.CycleCounter.cycles", As::kCounter, "worker_cycles_total", "TSC cycles the worker spent, by bucket (rx, parse, flow, firewall, dns, dpi, lb, finish, tx, aging while packets were processed; idle: loops that received nothing). Divide by dpu_worker_tsc_hertz for seconds."},
  {"dpu.v1.CounterSet.tsc_hz", As::kGauge, "worker_tsc_hertz", "TSC frequency of the worker's lcore (cycles per second)."},
  {"dpu.v1.CounterSet.latency", As::kPrefix, "", nullptr},
  {"dpu.v1.LatencySummary.samples", As::kCounter, "forward_latency_samples_total", "Forwarded packets whose latency through the worker was measured."},
  {"dpu.v1.LatencySummary.p50_ns", As::kGauge, "forward_latency_seconds", "Latency of forwarded packets through the worker (rx burst returned -> tx burst returned) since start, by quantile (upper bounds of log-linear buckets, within 12.5%, never above the max).", "quantile=0.5"},
  {"dpu.v1.LatencySummary.p90_ns", As::kGauge, "forward_latency_seconds", "Latency of forwarded packets through the worker (rx burst returned -> tx burst returned) since start, by quantile (upper bounds of log-linear buckets, within 12.5%, never above the max).", "quantile=0.9"},
  {"dpu.v1.LatencySummary.p99_ns", As::kGauge, "forward_latency_seconds", "Latency of forwarded packets through the worker (rx burst returned -> tx burst returned) since start, by quantile (upper bounds of log-linear buckets, within 12.5%, never above the max).", "quantile=0.99"},
  {"dpu.v1.LatencySummary.p999_ns", As::kGauge, "forward_latency_seconds", "Latency of forwarded packets through the worker (rx burst returned -> tx burst returned) since start, by quantile (upper bounds of log-linear buckets, within 12.5%, never above the max).", "quantile=0.999"},
  {"dpu.v1.LatencySummary.max_ns", As::kGauge, "forward_latency_max_seconds", "Highest latency of a forwarded packet through the worker since start (exact)."},

  // --- applies, events, progress (Stats) ---
  {"dpu.v1.ConfigApplyStats.refused_by_phase", As::kPrefix, "config_refused_total", "Refused configuration applies, by the phase that refused them (each is also a config event with result refused).", "phase", allRefusalPhases},
  {"dpu.v1.ConfigApplyStats.applied", As::kCounter, "config_applies_total", "Configuration applies, by result.", "result=applied"},
  {"dpu.v1.ConfigApplyStats.invalid", As::kCounter, "config_applies_total", "Configuration applies, by result.", "result=invalid"},
  {"dpu.v1.ConfigApplyStats.conflicts", As::kCounter, "config_applies_total", "Configuration applies, by result.", "result=conflict"},
  {"dpu.v1.ConfigApplyStats.failed", As::kCounter, "config_applies_total", "Configuration applies, by result.", "result=failed"},
  {"dpu.v1.ConfigApplyStats.duration_seconds", As::kHistogram, "config_apply_duration_seconds",
   "Duration of committed applies, validate to publish (RCU grace period included)."},
  {"dpu.v1.ConfigApplyStats.last", As::kPrefix, "config_last_apply_", nullptr},
  {"dpu.v1.ConfigApplyStats.last_unix_ns", As::kGauge, "config_last_apply_timestamp_seconds",
   "When the last apply was committed (Unix time; 0 = none since start)."},
  {"dpu.v1.ApplyConfigResponse.version", As::kSkip, nullptr, nullptr},
  {"dpu.v1.ApplyConfigResponse.generation", As::kSkip, nullptr, nullptr},
  {"dpu.v1.ApplyConfigResponse.validate_ms", As::kGauge, "config_last_apply_phase_seconds", "Duration of each phase of the last committed apply.", "phase=validate"},
  {"dpu.v1.ApplyConfigResponse.compile_ms", As::kGauge, "config_last_apply_phase_seconds", "Duration of each phase of the last committed apply.", "phase=compile"},
  {"dpu.v1.ApplyConfigResponse.prepare_ms", As::kGauge, "config_last_apply_phase_seconds", "Duration of each phase of the last committed apply.", "phase=prepare"},
  {"dpu.v1.ApplyConfigResponse.persist_ms", As::kGauge, "config_last_apply_phase_seconds", "Duration of each phase of the last committed apply.", "phase=persist"},
  {"dpu.v1.ApplyConfigResponse.publish_ms", As::kGauge, "config_last_apply_phase_seconds", "Duration of each phase of the last committed apply.", "phase=publish"},
  {"dpu.v1.EventPumpStats.dataplane_events", As::kCounter, "events_total", "Events handled by the event pump, by source.", "source=dataplane"},
  {"dpu.v1.EventPumpStats.control_events", As::kCounter, "events_total", "Events handled by the event pump, by source.", "source=control"},
  {"dpu.v1.EventPumpStats.file_events", As::kCounter, "events_file_lines_total", "Lines written to the events file."},
  {"dpu.v1.EventPumpStats.file_bytes", As::kCounter, "events_file_written_bytes_total", "Bytes written to the events file (all rotations)."},
  {"dpu.v1.EventPumpStats.file_rotations", As::kCounter, "events_file_rotations_total", "Size-based rotations of the events file."},
  {"dpu.v1.EventPumpStats.file_errors", As::kCounter, "events_file_errors_total", "Failed writes or rotations of the events file."},
  {"dpu.v1.EventPumpStats.subscribers", As::kGauge, "events_subscribers", "WatchEvents streams open now."},
  {"dpu.v1.EventPumpStats.subscriber_lost", As::kCounter, "events_subscriber_lost_total", "Events slow WatchEvents subscribers lost (their buffer was full)."},
  {"dpu.v1.TaskProgress.done", As::kGauge, "task_done", "Long control-side work in progress: units done."},
  {"dpu.v1.TaskProgress.total", As::kGauge, "task_expected", "Long control-side work in progress: units expected (0 = unknown)."},
  {"dpu.v1.TaskProgress.elapsed_seconds", As::kGauge, "task_elapsed_seconds", "Long control-side work in progress: seconds since it began."},

  // --- dpu.v1.ListFirewallRulesResponse (exported with prefix "firewall_") ---
  {"dpu.v1.ListFirewallRulesResponse.config_version", As::kSkip, nullptr, nullptr},
  {"dpu.v1.ListFirewallRulesResponse.rules", As::kPrefix, "firewall_rule_", nullptr, "rule=rule.id"},
  {"dpu.v1.ListFirewallRulesResponse.acl_entries_v4", As::kGauge, "firewall_acl_entries", "ACL entries of the running rule set, by address family.", "family=ipv4"},
  {"dpu.v1.ListFirewallRulesResponse.acl_entries_v6", As::kGauge, "firewall_acl_entries", "ACL entries of the running rule set, by address family.", "family=ipv6"},
  {"dpu.v1.ListFirewallRulesResponse.keep_established_on_change", As::kSkip, nullptr, nullptr},
  {"dpu.v1.FirewallRuleStatus.rank", As::kGauge, "firewall_rule_rank", "Evaluation order of the rule (0 = first)."},
  {"dpu.v1.FirewallRuleStatus.acl_entries", As::kGauge, "firewall_rule_acl_entries", "ACL entries (IPv4 + IPv6) the rule expanded to."},
  {"dpu.v1.FirewallRuleStatus.packets", As::kCounter, "firewall_rule_packets_total", "Packets judged by the rule (kept across reloads that keep the rule id)."},
  {"dpu.v1.FirewallRuleStatus.bytes", As::kCounter, "firewall_rule_bytes_total", "Bytes of the packets judged by the rule."},
  {"dpu.v1.FirewallRuleStatus.flows", As::kCounter, "firewall_rule_flows_total", "Flows judged by the rule."},
  {"dpu.v1.FirewallRuleStatus.last_hit_unix_ns", As::kGauge, "firewall_rule_last_hit_timestamp_seconds", "When the rule last judged a packet (Unix time; 0 = never)."},
  {"dpu.v1.FirewallRuleStatus.rule", As::kSkip, nullptr, nullptr},

  // --- lb: dpu.v1.ListLbServicesResponse (exported with prefix "lb_") ---
  {"dpu.v1.ListLbServicesResponse.config_version", As::kSkip, nullptr, nullptr},
  {"dpu.v1.ListLbServicesResponse.services", As::kPrefix, "lb_service_", nullptr, "service=service.id"},
  {"dpu.v1.LbServiceStatus.service", As::kSkip, nullptr, nullptr},
  {"dpu.v1.LbServiceStatus.table_size", As::kGauge, "lb_service_table_size", "Maglev table size of the service."},
  {"dpu.v1.LbServiceStatus.backends", As::kPrefix, "lb_backend_", nullptr, "backend=backend.id"},
  {"dpu.v1.LbBackendStatus.backend", As::kSkip, nullptr, nullptr},
  {"dpu.v1.LbBackendStatus.table_slots", As::kGauge, "lb_backend_table_slots", "Maglev table entries that point at the backend."},
  {"dpu.v1.LbBackendStatus.packets", As::kCounter, "lb_backend_packets_total", "Packets sent to the backend (kept across reloads by backend identity)."},
  {"dpu.v1.LbBackendStatus.bytes", As::kCounter, "lb_backend_bytes_total", "Bytes sent to the backend."},
  {"dpu.v1.LbBackendStatus.active_flows", As::kGauge, "lb_backend_active_flows", "Flows pinned to the backend now."},
  {"dpu.v1.LbBackendStatus.total_flows", As::kCounter, "lb_backend_flows_total", "Flows given to the backend."},
};
// clang-format on

const Rule* findRule(const std::string& field) {
  static const std::map<std::string, const Rule*> by_field = [] {
    std::map<std::string, const Rule*> m;
    for (const Rule& r : kRules) m.emplace(r.field, &r);
    return m;
  }();
  auto it = by_field.find(field);
  return it == by_field.end() ? nullptr : it->second;
}

const Rule* findRule(const FieldDescriptor* f) { return findRule(f->full_name()); }

Labels parseLabels(const char* spec) {
  Labels out;
  if (spec == nullptr || *spec == '\0') return out;
  for (absl::string_view kv : absl::StrSplit(spec, ',')) {
    std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    out.push_back(std::move(p));
  }
  return out;
}

Labels withLabels(Labels base, const Labels& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

// Scale and derived name of a numeric field from its unit suffix.
struct Unit {
  double scale = 1.0;
  std::string base;  // derived family name without the counter suffix
  bool time = false;  // a time or duration: a gauge unless a rule says otherwise
};

Unit unitOf(const std::string& prefix, const std::string& field) {
  Unit u;
  auto strip = [&](absl::string_view suffix, absl::string_view repl, double scale) {
    if (!absl::EndsWith(field, suffix)) return false;
    u.base = absl::StrCat(prefix, field.substr(0, field.size() - suffix.size()), repl);
    u.scale = scale;
    u.time = true;
    return true;
  };
  if (strip("_unix_ns", "_timestamp_seconds", 1e-9) || strip("_ns", "_seconds", 1e-9) ||
      strip("_ms", "_seconds", 1e-3) || strip("_seconds", "_seconds", 1.0) ||
      strip("_s", "_seconds", 1.0)) {
    return u;
  }
  u.base = prefix + field;
  return u;
}

double numericValue(const Message& m, const FieldDescriptor* f, bool* ok) {
  const Reflection* r = m.GetReflection();
  *ok = true;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: return r->GetInt32(m, f);
    case FieldDescriptor::CPPTYPE_INT64: return static_cast<double>(r->GetInt64(m, f));
    case FieldDescriptor::CPPTYPE_UINT32: return r->GetUInt32(m, f);
    case FieldDescriptor::CPPTYPE_UINT64: return static_cast<double>(r->GetUInt64(m, f));
    case FieldDescriptor::CPPTYPE_DOUBLE: return r->GetDouble(m, f);
    case FieldDescriptor::CPPTYPE_FLOAT: return r->GetFloat(m, f);
    case FieldDescriptor::CPPTYPE_BOOL: return r->GetBool(m, f) ? 1 : 0;
    default: *ok = false; return 0;
  }
}

// The value of a dotted path of singular fields ("rule.id") as a label value.
std::string pathString(const Message& m, const std::string& path) {
  const Message* cur = &m;
  std::vector<std::string> parts = absl::StrSplit(path, '.');
  for (size_t i = 0; i < parts.size(); ++i) {
    const FieldDescriptor* f = cur->GetDescriptor()->FindFieldByName(parts[i]);
    if (f == nullptr || f->is_repeated()) return "";
    const Reflection* r = cur->GetReflection();
    if (i + 1 < parts.size()) {
      if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) return "";
      cur = &r->GetMessage(*cur, f);
      continue;
    }
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_STRING: return r->GetString(*cur, f);
      case FieldDescriptor::CPPTYPE_ENUM: return r->GetEnum(*cur, f)->name();
      default: {
        bool ok = false;
        double v = numericValue(*cur, f, &ok);
        return ok ? absl::StrCat(static_cast<int64_t>(v)) : "";
      }
    }
  }
  return "";
}

void exportField(const Message& m, const FieldDescriptor* f, const std::string& prefix,
                 const Labels& labels, Families& out);

void exportFields(const Message& m, const std::string& prefix, const Labels& labels,
                  const std::set<std::string>& skip, Families& out) {
  const auto* d = m.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (skip.count(f->name())) continue;
    exportField(m, f, prefix, labels, out);
  }
}

void exportRepeatedMessage(const Message& m, const FieldDescriptor* f, const Rule* rule,
                           const std::string& prefix, const Labels& labels, Families& out) {
  const Reflection* r = m.GetReflection();
  const std::string child = rule && rule->name ? std::string(rule->name) : prefix + f->name() + "_";
  // Key labels: "label=field.path,...", default the element's id/name, else its index.
  Labels keys = rule ? parseLabels(rule->labels) : Labels{};
  const auto* ed = f->message_type();
  if (keys.empty()) {
    for (const char* k : {"id", "name"}) {
      if (ed->FindFieldByName(k)) {
        keys.push_back({k, k});
        break;
      }
    }
  }
  std::set<std::string> skip;  // key fields are labels, not metrics
  for (const auto& [label, path] : keys) skip.insert(path.substr(0, path.find('.')));
  std::set<std::string> seen;
  const int n = r->FieldSize(m, f);
  for (int i = 0; i < n; ++i) {
    const Message& e = r->GetRepeatedMessage(m, f, i);
    Labels l = labels;
    if (keys.empty()) {
      l.push_back({"index", absl::StrCat(i)});
    } else {
      for (const auto& [label, path] : keys) l.push_back({label, pathString(e, path)});
      seen.insert(l[labels.size()].second);
    }
    exportFields(e, child, l, skip, out);
  }
  if (rule && rule->domain && keys.size() == 1) {
    // Keys not present: the element's defaults (zeros), so the series exist from the start.
    const Message* proto = m.GetReflection()->GetMessageFactory()->GetPrototype(ed);
    for (const std::string& key : rule->domain()) {
      if (seen.count(key)) continue;
      exportFields(*proto, child, withLabels(labels, {{keys[0].first, key}}), skip, out);
    }
  }
}

void exportMap(const Message& m, const FieldDescriptor* f, const Rule* rule,
               const std::string& prefix, const Labels& labels, Families& out) {
  // A map<string, number>: one sample per key in one family.
  const Reflection* r = m.GetReflection();
  const auto* ed = f->message_type();
  const FieldDescriptor* kf = ed->map_key();
  const FieldDescriptor* vf = ed->map_value();
  if (kf->cpp_type() != FieldDescriptor::CPPTYPE_STRING) return;
  std::string name;
  if (rule && rule->name) {
    name = rule->name;
  } else {
    name = prefix + f->name() + "_total";
  }
  const std::string label = rule && rule->labels ? rule->labels : "key";
  const std::string help =
      rule && rule->help ? rule->help : absl::StrCat(f->full_name(), " (proto/appliance_api.proto)");
  std::map<std::string, double> values;
  for (int i = 0; i < r->FieldSize(m, f); ++i) {
    const Message& e = r->GetRepeatedMessage(m, f, i);
    bool ok = false;
    double v = numericValue(e, vf, &ok);
    if (ok) values[e.GetReflection()->GetString(e, kf)] = v;
  }
  if (rule && rule->domain) {
    for (const std::string& k : rule->domain()) values.emplace(k, 0);
  }
  const bool counter = absl::EndsWith(name, "_total");
  for (const auto& [k, v] : values) {
    // A rule "<map field>.<key>" gives the key a family of its own (name, help, labels).
    if (const Rule* kr = findRule(absl::StrCat(f->full_name(), ".", k)); kr && kr->name) {
      if (kr->as == As::kSkip) continue;
      out.add(absl::StrCat("dpu_", kr->name),
              kr->as == As::kGauge ? MetricType::Gauge : MetricType::Counter,
              kr->help ? kr->help : help, withLabels(labels, parseLabels(kr->labels)), v);
      continue;
    }
    out.add("dpu_" + name, counter ? MetricType::Counter : MetricType::Gauge, help,
            withLabels(labels, {{label, k}}), v);
  }
}

void exportField(const Message& m, const FieldDescriptor* f, const std::string& prefix,
                 const Labels& labels, Families& out) {
  const Rule* rule = findRule(f);
  if (rule && rule->as == As::kSkip) return;
  const Reflection* r = m.GetReflection();
  if (f->is_map()) {
    exportMap(m, f, rule, prefix, labels, out);
    return;
  }
  if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
    if (f->message_type() == v1::Histogram::descriptor() && !f->is_repeated()) {
      Unit u = unitOf(prefix, f->name());
      std::string name = rule && rule->name ? rule->name : u.base;
      const auto& h = static_cast<const v1::Histogram&>(r->GetMessage(m, f));
      out.addHistogram("dpu_" + name,
                       rule && rule->help ? rule->help : std::string(f->full_name()),
                       labels, h, u.scale);
      return;
    }
    if (f->is_repeated()) {
      exportRepeatedMessage(m, f, rule, prefix, labels, out);
      return;
    }
    std::string child = rule && rule->name ? std::string(rule->name) : prefix + f->name() + "_";
    exportFields(r->GetMessage(m, f), child, labels, {}, out);
    return;
  }
  if (f->is_repeated()) return;  // repeated scalars (warnings, countries): not metrics
  bool ok = false;
  double v = numericValue(m, f, &ok);
  if (!ok) return;  // strings, enums
  Unit u = unitOf(prefix, f->name());
  bool gauge;
  std::string name;
  if (rule && (rule->as == As::kCounter || rule->as == As::kGauge)) {
    gauge = rule->as == As::kGauge;
    name = rule->name ? std::string(rule->name) : (gauge ? u.base : u.base + "_total");
  } else {
    // No rule: integers count (counters), times and doubles are gauges.
    gauge = u.time || f->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE ||
            f->cpp_type() == FieldDescriptor::CPPTYPE_FLOAT ||
            f->cpp_type() == FieldDescriptor::CPPTYPE_BOOL;
    name = gauge ? u.base : u.base + "_total";
  }
  std::string help = rule && rule->help
                         ? std::string(rule->help)
                         : absl::StrCat(f->full_name(), " (proto/appliance_api.proto)");
  out.add("dpu_" + name, gauge ? MetricType::Gauge : MetricType::Counter, help,
          withLabels(labels, parseLabels(rule ? rule->labels : nullptr)), v * u.scale);
}

}  // namespace

prometheus::MetricFamily* Families::family(const std::string& name, MetricType type,
                                           const std::string& help) {
  auto [it, fresh] = by_name_.try_emplace(name);
  prometheus::MetricFamily& fam = it->second;
  if (fresh) {
    fam.name = name;
    fam.type = type;
    fam.help = help;
    return &fam;
  }
  if (fam.type != type || fam.help != help) {
    problems_.push_back(absl::StrCat(name, ": exported with two types or help texts"));
    return nullptr;
  }
  return &fam;
}

void Families::add(const std::string& name, MetricType type, const std::string& help,
                   const Labels& labels, double value) {
  prometheus::MetricFamily* fam = family(name, type, help);
  if (fam == nullptr) return;
  prometheus::ClientMetric cm;
  for (const auto& [k, v] : labels) cm.label.push_back({k, v});
  if (type == MetricType::Counter) {
    cm.counter.value = value;
  } else {
    cm.gauge.value = value;
  }
  fam->metric.push_back(std::move(cm));
}

void Families::addHistogram(const std::string& name, const std::string& help,
                            const Labels& labels, const v1::Histogram& h, double scale) {
  prometheus::MetricFamily* fam = family(name, MetricType::Histogram, help);
  if (fam == nullptr) return;
  prometheus::ClientMetric cm;
  for (const auto& [k, v] : labels) cm.label.push_back({k, v});
  cm.histogram.sample_count = h.count();
  cm.histogram.sample_sum = h.sum() * scale;
  for (const auto& b : h.buckets()) cm.histogram.bucket.push_back({b.count(), b.le() * scale});
  cm.histogram.bucket.push_back({h.count(), std::numeric_limits<double>::infinity()});
  fam->metric.push_back(std::move(cm));
}

std::vector<prometheus::MetricFamily> Families::take() {
  std::vector<prometheus::MetricFamily> out;
  out.reserve(by_name_.size());
  for (auto& [name, fam] : by_name_) out.push_back(std::move(fam));
  by_name_.clear();
  return out;
}

void exportMessage(const Message& m, const std::string& prefix, const Labels& labels,
                   Families& out) {
  exportFields(m, prefix, labels, {}, out);
}

std::string toText(const std::vector<prometheus::MetricFamily>& families) {
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace dpu::ctl::metrics
