#include "dataplane/pipeline/counters.h"

#include <algorithm>

#include "dataplane/packet/parser.h"

namespace dpu::dp {

const char* dropReasonName(DropReason r) {
  auto v = static_cast<uint8_t>(r);
  if (r == DropReason::kNone) return "none";
  if (v < static_cast<uint8_t>(ParseStatus::kCount)) {
    return parseStatusName(static_cast<ParseStatus>(v));
  }
  switch (r) {
    case DropReason::kFragOverlap: return "fragment_overlap";
    case DropReason::kFragTiny: return "fragment_tiny";
    case DropReason::kFragTooMany: return "fragment_too_many";
    case DropReason::kFragTableFull: return "fragment_table_full";
    case DropReason::kFragHoldFull: return "fragment_hold_full";
    case DropReason::kFragTimeout: return "fragment_first_missing";
    case DropReason::kFragDatagramDropped: return "fragment_datagram_dropped";
    case DropReason::kFragOverlapConflict: return "fragment_overlap_conflict";
    case DropReason::kFragNoBuffer: return "fragment_no_reassembly_buffer";
    case DropReason::kFragTooBig: return "fragment_datagram_too_big";
    case DropReason::kFragIncomplete: return "fragment_datagram_incomplete";
    case DropReason::kFlowTableFull: return "flow_table_full";
    case DropReason::kTcpMidstream: return "tcp_midstream";
    case DropReason::kMultiSegment: return "multi_segment";
    case DropReason::kTxFailed: return "tx_failed";
    case DropReason::kFirewallDeny: return "firewall_deny";
    case DropReason::kFirewallReject: return "firewall_reject";
    case DropReason::kLbKeyMissing: return "lb_key_missing";
    case DropReason::kLbNoBackend: return "lb_no_backend";
    case DropReason::kLbFlowReset: return "lb_flow_reset";
    case DropReason::kLbNoAddress: return "lb_no_address";
    case DropReason::kLbNoHeadroom: return "lb_no_headroom";
    case DropReason::kLbInTunnel: return "lb_in_tunnel";
    case DropReason::kDpiDrop: return "dpi_drop";
    case DropReason::kDpiReset: return "dpi_reset";
    case DropReason::kDpiGap: return "dpi_gap";
    case DropReason::kDnsAnswered: return "dns_answered";
    case DropReason::kDnsDropped: return "dns_dropped";
    case DropReason::kDnsCloaked: return "dns_cloaked";
    case DropReason::kDnsMalformed: return "dns_malformed";
    case DropReason::kDnsTcpClosed: return "dns_tcp_closed";
    case DropReason::kTcpBadChecksum: return "tcp_bad_checksum";
    case DropReason::kTcpOutOfOrder: return "tcp_out_of_order";
    case DropReason::kTcpOverlapDifferent: return "tcp_overlap_different";
    case DropReason::kTcpStreamExhausted: return "tcp_stream_exhausted";
    case DropReason::kTcpHoldExpired: return "tcp_hold_expired";
    case DropReason::kSigNoBodyBuffer: return "sig_no_body_buffer";
    case DropReason::kTcpStreamReset: return "tcp_stream_reset";
    case DropReason::kDnsNonstandard: return "dns_nonstandard";
    case DropReason::kHttpNoSlot: return "http_no_slot";
    case DropReason::kDnsTcpMidstream: return "dns_tcp_midstream";
    case DropReason::kHttpHoldExhausted: return "http_hold_exhausted";
    case DropReason::kHttpHoldDuplicate: return "http_hold_duplicate";
    case DropReason::kWorkerRingFull: return "worker_ring_full";
    default: return "unknown";
  }
}

const char* dnsCounterName(int c) {
  switch (c) {
    case kDnsMessages: return "messages";
    case kDnsQueries: return "queries";
    case kDnsResponses: return "responses";
    case kDnsBlocked: return "blocked";
    case kDnsAllowed: return "allowed";
    case kDnsAnswersSent: return "answers_sent";
    case kDnsAnswerNoMbuf: return "answers_not_sent";
    case kDnsMalformed: return "malformed";
    case kDnsMalformedForwarded: return "malformed_forwarded";
    case kDnsNotInspected: return "not_inspected";
    case kDnsCloaked: return "cloaked";
    case kDnsTcpSegments: return "tcp_segments";
    case kDnsTcpUnsynced: return "tcp_unsynced";
    case kDnsTcpClosed: return "tcp_closed";
    case kDnsResetsSent: return "resets_sent";
    case kDnsTcpRespOverflow: return "tcp_response_overflow";
    case kDnsTcpNoBuffer: return "tcp_no_buffer";
    case kDnsNonstandard: return "nonstandard";
    case kDnsNonstandardForwarded: return "nonstandard_forwarded";
    default: return "unknown";
  }
}

const char* tcpStreamCounterName(int c) {
  switch (c) {
    case kTcpSegments: return "segments";
    case kTcpChecksumSoftware: return "checksums_software";
    case kTcpBadChecksums: return "bad_checksum";
    case kTcpOutOfOrderSegments: return "out_of_order";
    case kTcpOverlapDiffering: return "overlap_different";
    case kTcpUnverified: return "overlap_unverified";
    case kTcpNoWindow: return "no_window";
    case kTcpFailClosed: return "fail_closed";
    case kTcpSynData: return "syn_data";
    case kTcpReorderKept: return "reorder_kept";
    case kTcpReorderFilled: return "reorder_filled";
    case kTcpReorderBytes: return "reorder_bytes";
    case kTcpReorderFull: return "reorder_full";
    case kTcpReorderUnkept: return "reorder_unkept";
    case kTcpGaps: return "gaps";
    case kTcpHeld: return "held";
    case kTcpHeldReleased: return "held_released";
    case kTcpHeldDropped: return "held_dropped";
    case kTcpHeldExpired: return "held_expired";
    case kTcpHoldFull: return "hold_full";
    default: return "unknown";
  }
}

const char* cycleBucketName(int b) {
  static constexpr const char* kNames[kCyCount] = {"rx",  "parse",  "flow", "firewall", "stream",
                                                   "dns", "dpi",    "lb",   "finish",
                                                   "tx",  "aging",  "distribute", "idle"};
  return b >= 0 && b < kCyCount ? kNames[b] : "unknown";
}

uint64_t latencyBucketLimit(int idx) {
  if (idx < 8) return static_cast<uint64_t>(idx) + 1;
  int e = idx / 8 + 2;
  uint64_t sub = static_cast<uint64_t>(idx % 8);
  // Values of bucket idx: [(8 + sub) << (e - 3), (9 + sub) << (e - 3)).
  return (9 + sub) << (e - 3);
}

uint64_t latencyQuantile(const uint64_t* hist, double q, uint64_t max_ns) {
  uint64_t total = 0;
  for (int i = 0; i < kLatencyBuckets; ++i) total += hist[i];
  if (total == 0) return 0;
  double want = q * static_cast<double>(total);
  uint64_t seen = 0;
  uint64_t bound = latencyBucketLimit(kLatencyBuckets - 1);
  for (int i = 0; i < kLatencyBuckets; ++i) {
    seen += hist[i];
    if (hist[i] && static_cast<double>(seen) >= want) {
      bound = latencyBucketLimit(i);
      break;
    }
  }
  return std::min(bound, max_ns);
}

const char* stageName(Stage s) {
  switch (s) {
    case Stage::kNone: return "none";
    case Stage::kParse: return "parse";
    case Stage::kFragment: return "fragment";
    case Stage::kFlow: return "flow";
    case Stage::kFirewall: return "firewall";
    case Stage::kGeoip: return "geoip";
    case Stage::kDns: return "dns";
    case Stage::kDpi: return "dpi";
    case Stage::kLb: return "lb";
    default: return "unknown";
  }
}

const char* verdictName(Verdict v) {
  switch (v) {
    case Verdict::kForward: return "forward";
    case Verdict::kDrop: return "drop";
    case Verdict::kReject: return "reject";
    default: return "none";
  }
}

uint64_t CountersSnapshot::Flat::totalDrops() const {
  uint64_t n = 0;
  for (uint64_t d : drops) n += d;
  return n;
}

CountersSnapshot::Flat readCounters(const WorkerCounters& c) {
  CountersSnapshot::Flat f;
  for (int s = 0; s < 2; ++s) {
    f.rx_packets[s] = c.rx_packets[s].load();
    f.rx_bytes[s] = c.rx_bytes[s].load();
    f.tx_packets[s] = c.tx_packets[s].load();
    f.tx_bytes[s] = c.tx_bytes[s].load();
  }
  for (int i = 0; i < 4; ++i) f.verdicts[i] = c.verdicts[i].load();
  for (int i = 0; i < static_cast<int>(DropReason::kCount); ++i) f.drops[i] = c.drops[i].load();
  for (int i = 0; i < static_cast<int>(Stage::kCount); ++i) {
    f.stage_packets[i] = c.stage_packets[i].load();
    f.stage_drops[i] = c.stage_drops[i].load();
  }
  f.malformed_forwarded = c.malformed_forwarded.load();
  f.non_ip_forwarded = c.non_ip_forwarded.load();
  f.untracked_forwarded = c.untracked_forwarded.load();
  f.vxlan_not_parsed = c.vxlan_not_parsed.load();
  f.geneve_not_parsed = c.geneve_not_parsed.load();
  f.gre_not_parsed = c.gre_not_parsed.load();
  f.flows_created = c.flows_created.load();
  f.flows_expired = c.flows_expired.load();
  f.flows_active = c.flows_active.load();
  f.flows_midstream = c.flows_midstream.load();
  f.flow_table_full = c.flow_table_full.load();
  f.flow_cache_hits = c.flow_cache_hits.load();
  f.frag_packets = c.frag_packets.load();
  f.frag_held = c.frag_held.load();
  f.frag_overlaps = c.frag_overlaps.load();
  f.frag_timeouts = c.frag_timeouts.load();
  f.frag_datagrams_active = c.frag_datagrams_active.load();
  f.frag_reassembled = c.frag_reassembled.load();
  f.frag_atomic = c.frag_atomic.load();
  f.frag_overlap_identical = c.frag_overlap_identical.load();
  f.frag_overlap_conflicts = c.frag_overlap_conflicts.load();
  f.frag_no_buffer = c.frag_no_buffer.load();
  f.frag_too_big = c.frag_too_big.load();
  f.frag_hold_full = c.frag_hold_full.load();
  f.frag_fail_open = c.frag_fail_open.load();
  f.frag_fail_closed = c.frag_fail_closed.load();
  f.frag_buffers_in_use = c.frag_buffers_in_use.load();
  f.fw_allowed = c.fw_allowed.load();
  f.fw_denied = c.fw_denied.load();
  f.fw_rejected = c.fw_rejected.load();
  f.fw_rst_sent = c.fw_rst_sent.load();
  f.fw_icmp_sent = c.fw_icmp_sent.load();
  f.fw_reject_nombuf = c.fw_reject_nombuf.load();
  f.fw_reject_suppressed = c.fw_reject_suppressed.load();
  f.dpi_bytes = c.dpi_bytes.load();
  f.dpi_alerts = c.dpi_alerts.load();
  f.dpi_drops = c.dpi_drops.load();
  f.dpi_resets = c.dpi_resets.load();
  f.dpi_gaps = c.dpi_gaps.load();
  f.dpi_depth = c.dpi_depth.load();
  f.dpi_no_stream = c.dpi_no_stream.load();
  f.dpi_overflow = c.dpi_overflow.load();
  f.dpi_rst_sent = c.dpi_rst_sent.load();
  f.dpi_pf_confirmed = c.dpi_pf_confirmed.load();
  f.dpi_pf_rejected = c.dpi_pf_rejected.load();
  f.dpi_pf_errors = c.dpi_pf_errors.load();
  f.dpi_no_window = c.dpi_no_window.load();
  f.sig_inspected = c.sig_inspected.load();
  f.sig_candidates = c.sig_candidates.load();
  f.sig_matches = c.sig_matches.load();
  f.sig_alerts = c.sig_alerts.load();
  f.sig_drops = c.sig_drops.load();
  f.sig_rejects = c.sig_rejects.load();
  f.sig_passes = c.sig_passes.load();
  f.sig_pcre_errors = c.sig_pcre_errors.load();
  f.sig_flowbits_full = c.sig_flowbits_full.load();
  f.sig_threshold_full = c.sig_threshold_full.load();
  f.sig_hits_dropped = c.sig_hits_dropped.load();
  f.geoip_lookups = c.geoip_lookups.load();
  f.lb_flows_balanced = c.lb_flows_balanced.load();
  f.lb_flows_rehashed = c.lb_flows_rehashed.load();
  f.lb_flows_reset = c.lb_flows_reset.load();
  f.lb_service_gone = c.lb_service_gone.load();
  f.lb_key_missing = c.lb_key_missing.load();
  f.lb_untracked = c.lb_untracked.load();
  f.lb_nat_reversed = c.lb_nat_reversed.load();
  f.lb_nat_no_reverse = c.lb_nat_no_reverse.load();
  f.lb_nat_reverse_created = c.lb_nat_reverse_created.load();
  f.lb_counters_full = c.lb_counters_full.load();
  f.lb_fragments_followed = c.lb_fragments_followed.load();
  for (int i = 0; i < kDnsCounterCount; ++i) f.dns[i] = c.dns[i].load();
  for (int i = 0; i < kTcpStreamCounterCount; ++i) f.tcp_stream[i] = c.tcp_stream[i].load();
  for (int i = 0; i < kHttpCounterCount; ++i) f.http[i] = c.http[i].load();
  for (int i = 0; i < kDnsActions; ++i) f.dns_action[i] = c.dns_action[i].load();
  for (int i = 0; i < kDnsListSlots; ++i) {
    f.dns_list_blocked[i] = c.dns_list_blocked[i].load();
    f.dns_list_allowed[i] = c.dns_list_allowed[i].load();
  }
  f.events_lost = c.events_lost.load();
  f.dist_handed_off = c.dist_handed_off.load();
  f.dist_handed_in = c.dist_handed_in.load();
  f.loops = c.loops.load();
  f.busy_loops = c.busy_loops.load();
  f.idle_sleeps = c.idle_sleeps.load();
  f.idle_sleep_us = c.idle_sleep_us.load();
  f.generation = c.generation.load();
  for (int i = 0; i < kCyCount; ++i) f.cycles[i] = c.cycles[i].load();
  for (int i = 0; i < kLatencyBuckets; ++i) f.latency[i] = c.latency[i].load();
  f.latency_max_ns = c.latency_max_ns.load();
  f.tsc_hz = c.tsc_hz.load();
  return f;
}

void accumulate(CountersSnapshot::Flat& a, const CountersSnapshot::Flat& w) {
  for (int s = 0; s < 2; ++s) {
    a.rx_packets[s] += w.rx_packets[s];
    a.rx_bytes[s] += w.rx_bytes[s];
    a.tx_packets[s] += w.tx_packets[s];
    a.tx_bytes[s] += w.tx_bytes[s];
  }
  for (int i = 0; i < 4; ++i) a.verdicts[i] += w.verdicts[i];
  for (int i = 0; i < static_cast<int>(DropReason::kCount); ++i) a.drops[i] += w.drops[i];
  for (int i = 0; i < static_cast<int>(Stage::kCount); ++i) {
    a.stage_packets[i] += w.stage_packets[i];
    a.stage_drops[i] += w.stage_drops[i];
  }
  a.malformed_forwarded += w.malformed_forwarded;
  a.non_ip_forwarded += w.non_ip_forwarded;
  a.untracked_forwarded += w.untracked_forwarded;
  a.vxlan_not_parsed += w.vxlan_not_parsed;
  a.geneve_not_parsed += w.geneve_not_parsed;
  a.gre_not_parsed += w.gre_not_parsed;
  a.flows_created += w.flows_created;
  a.flows_expired += w.flows_expired;
  a.flows_active += w.flows_active;
  a.flows_midstream += w.flows_midstream;
  a.flow_table_full += w.flow_table_full;
  a.flow_cache_hits += w.flow_cache_hits;
  a.frag_packets += w.frag_packets;
  a.frag_held += w.frag_held;
  a.frag_overlaps += w.frag_overlaps;
  a.frag_timeouts += w.frag_timeouts;
  a.frag_datagrams_active += w.frag_datagrams_active;
  a.frag_reassembled += w.frag_reassembled;
  a.frag_atomic += w.frag_atomic;
  a.frag_overlap_identical += w.frag_overlap_identical;
  a.frag_overlap_conflicts += w.frag_overlap_conflicts;
  a.frag_no_buffer += w.frag_no_buffer;
  a.frag_too_big += w.frag_too_big;
  a.frag_hold_full += w.frag_hold_full;
  a.frag_fail_open += w.frag_fail_open;
  a.frag_fail_closed += w.frag_fail_closed;
  a.frag_buffers_in_use += w.frag_buffers_in_use;
  a.fw_allowed += w.fw_allowed;
  a.fw_denied += w.fw_denied;
  a.fw_rejected += w.fw_rejected;
  a.fw_rst_sent += w.fw_rst_sent;
  a.fw_icmp_sent += w.fw_icmp_sent;
  a.fw_reject_nombuf += w.fw_reject_nombuf;
  a.fw_reject_suppressed += w.fw_reject_suppressed;
  a.dpi_bytes += w.dpi_bytes;
  a.dpi_alerts += w.dpi_alerts;
  a.dpi_drops += w.dpi_drops;
  a.dpi_resets += w.dpi_resets;
  a.dpi_gaps += w.dpi_gaps;
  a.dpi_depth += w.dpi_depth;
  a.dpi_no_stream += w.dpi_no_stream;
  a.dpi_overflow += w.dpi_overflow;
  a.dpi_rst_sent += w.dpi_rst_sent;
  a.dpi_pf_confirmed += w.dpi_pf_confirmed;
  a.dpi_pf_rejected += w.dpi_pf_rejected;
  a.dpi_pf_errors += w.dpi_pf_errors;
  a.dpi_no_window += w.dpi_no_window;
  a.sig_inspected += w.sig_inspected;
  a.sig_candidates += w.sig_candidates;
  a.sig_matches += w.sig_matches;
  a.sig_alerts += w.sig_alerts;
  a.sig_drops += w.sig_drops;
  a.sig_rejects += w.sig_rejects;
  a.sig_passes += w.sig_passes;
  a.sig_pcre_errors += w.sig_pcre_errors;
  a.sig_flowbits_full += w.sig_flowbits_full;
  a.sig_threshold_full += w.sig_threshold_full;
  a.sig_hits_dropped += w.sig_hits_dropped;
  a.geoip_lookups += w.geoip_lookups;
  a.lb_flows_balanced += w.lb_flows_balanced;
  a.lb_flows_rehashed += w.lb_flows_rehashed;
  a.lb_flows_reset += w.lb_flows_reset;
  a.lb_service_gone += w.lb_service_gone;
  a.lb_key_missing += w.lb_key_missing;
  a.lb_untracked += w.lb_untracked;
  a.lb_nat_reversed += w.lb_nat_reversed;
  a.lb_nat_no_reverse += w.lb_nat_no_reverse;
  a.lb_nat_reverse_created += w.lb_nat_reverse_created;
  a.lb_counters_full += w.lb_counters_full;
  a.lb_fragments_followed += w.lb_fragments_followed;
  for (int i = 0; i < kDnsCounterCount; ++i) a.dns[i] += w.dns[i];
  for (int i = 0; i < kTcpStreamCounterCount; ++i) a.tcp_stream[i] += w.tcp_stream[i];
  for (int i = 0; i < kHttpCounterCount; ++i) a.http[i] += w.http[i];
  for (int i = 0; i < kDnsActions; ++i) a.dns_action[i] += w.dns_action[i];
  for (int i = 0; i < kDnsListSlots; ++i) {
    a.dns_list_blocked[i] += w.dns_list_blocked[i];
    a.dns_list_allowed[i] += w.dns_list_allowed[i];
  }
  a.events_lost += w.events_lost;
  a.dist_handed_off += w.dist_handed_off;
  a.dist_handed_in += w.dist_handed_in;
  a.loops += w.loops;
  a.busy_loops += w.busy_loops;
  a.idle_sleeps += w.idle_sleeps;
  a.idle_sleep_us += w.idle_sleep_us;
  a.generation = a.generation == 0 ? w.generation : std::min(a.generation, w.generation);
  for (int i = 0; i < kCyCount; ++i) a.cycles[i] += w.cycles[i];
  for (int i = 0; i < kLatencyBuckets; ++i) a.latency[i] += w.latency[i];
  a.latency_max_ns = std::max(a.latency_max_ns, w.latency_max_ns);
  a.tsc_hz = std::max(a.tsc_hz, w.tsc_hz);
}

}  // namespace dpu::dp
