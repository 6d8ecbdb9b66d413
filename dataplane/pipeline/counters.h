// Counters. Each worker owns one WorkerCounters and is its only writer (plain increments
// published with relaxed atomic stores, so readers on other lcores see whole values
// without locks or locked instructions). Readers aggregate with load().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dataplane/api/http_event.h"  // HttpCounter
#include "dataplane/pipeline/verdict.h"

namespace dpu::dp {

// DNS filtering: stage counters (names in dnsCounterName) and per-list counter slots
// (rules::CompiledDnsList::slot, stable for a list name across reloads).
enum DnsCounter : uint8_t {
  kDnsMessages = 0,       // DNS messages inspected (UDP datagrams, TCP stream messages)
  kDnsQueries,
  kDnsResponses,
  kDnsBlocked,            // queries blocked (answered or dropped) and cloaked responses
  kDnsAllowed,            // messages an allow entry let through
  kDnsAnswersSent,        // answer frames sent
  kDnsAnswerNoMbuf,       // answers not sent: no mbuf / did not fit / not answerable
                          // (broadcast, multicast, unspecified or loopback IP or MAC)
  kDnsMalformed,          // messages that do not parse (either policy)
  kDnsMalformedForwarded, // of those, forwarded by policy
  kDnsNotInspected,       // passed unread (TCP: beyond 16 per segment, the cut head of a
                          // long response, a query on the server's side)
  kDnsCloaked,            // responses replaced for a blocked CNAME target
  kDnsTcpSegments,        // TCP segments with DNS stream bytes
  kDnsTcpUnsynced,        // TCP connections passed unread (picked up mid-stream, no head buffer)
  kDnsTcpClosed,          // TCP connections the appliance closed after answering
  kDnsResetsSent,         // TCP RSTs sent to servers of those connections
  kDnsTcpRespOverflow,    // TCP responses split across segments too long to reassemble
  kDnsTcpNoBuffer,        // TCP responses split across segments with no free buffer
  kDnsNonstandard,        // opcode != QUERY or QDCOUNT != 1 (either dns.nonstandard policy)
  kDnsNonstandardForwarded, // of those, forwarded by policy
  kDnsCounterCount
};
const char* dnsCounterName(int c);
// TCP normalization of inspected flows (dataplane/normalize/tcp_stream.h).
enum TcpStreamCounter : int {
  kTcpSegments = 0,         // segments of inspected flows read by the stream engine
  kTcpChecksumSoftware,     // of those, TCP checksums verified in software
  kTcpBadChecksums,         // dropped: bad TCP checksum
  kTcpOutOfOrderSegments,   // beyond a hole (kept; dropped when reorder_bytes is 0)
  kTcpOverlapDiffering,     // refused: repeating inspected bytes with different content
  kTcpUnverified,           // passed (fail_open) with overlapping bytes not compared
  kTcpNoWindow,             // flow directions that found no free comparison window
  kTcpFailClosed,           // dropped: stream state exhausted, fail_closed
  kTcpSynData,              // SYNs whose data entered the stream (TCP Fast Open)
  kTcpReorderKept,          // segments beyond a hole forwarded with their bytes kept
  kTcpReorderFilled,        // segments that filled a hole: kept bytes handed out with them
  kTcpReorderBytes,         // kept bytes handed out that way
  kTcpReorderFull,          // segments beyond a hole with no room to keep them (fail policy)
  kTcpReorderUnkept,        // of those, passed unkept (fail open)
  kTcpGaps,                 // streams resumed past bytes the receiver got uninspected
  // hold mode (dataplane.tcp.hold_out_of_order)
  kTcpHeld,                 // segments beyond a hole held (not forwarded) until it fills
  kTcpHeldReleased,         // of those, forwarded after the segment that filled the hole
  kTcpHeldDropped,          // dropped with the segment that filled the hole (its verdict)
  kTcpHeldExpired,          // dropped: held past hold_timeout_ms, or their flow ended
  kTcpHoldFull,             // segments beyond a hole with no free hold slot (fail policy)
  kTcpStreamCounterCount
};
const char* tcpStreamCounterName(int c);

inline constexpr int kDnsListSlots = 256;   // rules::kDnsCounterSlots
inline constexpr int kDnsActions = 8;       // by rules::DnsAction value

// Where a worker's cycles go (TSC cycles, read once per burst segment and stage,
// published once per loop): rx and tx are the PMD calls, parse .. finish the packet path,
// aging the flow and fragment sweeps, idle whole loops that received nothing; stream: TCP
// checksum verification + stream normalization of inspected flows (stages/stream);
// distribute: software distribution's parse, hash and hand-off of received packets
// (distribute.cc; the receiving worker's judging is in the other buckets).
enum CycleBucket : uint8_t {
  kCyRx = 0, kCyParse, kCyFlow, kCyFirewall, kCyStream, kCyDns, kCyDpi, kCyLb, kCyFinish, kCyTx,
  kCyAging, kCyDistribute, kCyIdle, kCyCount
};
const char* cycleBucketName(int b);
// Per-packet latency through the worker (rx burst returned -> tx burst returned), in ns,
// as a log-linear histogram: values below 8 have a bucket each, above that 8 buckets per
// power of two (12.5% wide).
inline constexpr int kLatencyBuckets = 304;
inline int latencyBucket(uint64_t ns) {
  if (ns < 8) return static_cast<int>(ns);
  int e = 63 - __builtin_clzll(ns);
  int idx = (e - 2) * 8 + static_cast<int>((ns >> (e - 3)) & 7);
  return idx < kLatencyBuckets ? idx : kLatencyBuckets - 1;
}
// Upper bound (ns, exclusive) of bucket `idx`.
uint64_t latencyBucketLimit(int idx);
// The q-quantile (0 < q <= 1) of a histogram: its bucket's upper bound, but never above
// max_ns, the largest value recorded (every value of the bucket is <= max_ns, so the bound
// clamped to it is still an upper bound, and a quantile never reads above the max); 0 when
// empty.
uint64_t latencyQuantile(const uint64_t* hist, double q, uint64_t max_ns);

class Counter {
 public:
  void add(uint64_t n = 1) { __atomic_store_n(&v_, v_ + n, __ATOMIC_RELAXED); }
  void sub(uint64_t n = 1) { __atomic_store_n(&v_, v_ - n, __ATOMIC_RELAXED); }
  void set(uint64_t n) { __atomic_store_n(&v_, n, __ATOMIC_RELAXED); }
  uint64_t load() const { return __atomic_load_n(&v_, __ATOMIC_RELAXED); }
  // The ordered pair, for counters another thread's counter must not run ahead of in a
  // snapshot (dist_handed_in after dist_handed_off: Dataplane::counters()). A plain store and
  // load on x86; they only stop the compiler (and weaker CPUs) from reordering.
  void addRelease(uint64_t n) { __atomic_store_n(&v_, v_ + n, __ATOMIC_RELEASE); }
  uint64_t loadAcquire() const { return __atomic_load_n(&v_, __ATOMIC_ACQUIRE); }

 private:
  uint64_t v_ = 0;
};

struct alignas(64) WorkerCounters {
  Counter rx_packets[2], rx_bytes[2];   // by ingress side
  Counter tx_packets[2], tx_bytes[2];   // by egress side
  Counter verdicts[4];                  // by Verdict
  Counter drops[static_cast<int>(DropReason::kCount)];
  Counter stage_packets[static_cast<int>(Stage::kCount)];  // packets that entered a stage
  Counter stage_drops[static_cast<int>(Stage::kCount)];    // packets a stage dropped
  Counter malformed_forwarded;      // malformed frames passed on by policy
  Counter non_ip_forwarded;
  Counter untracked_forwarded;      // forwarded without a flow (table full, stray RST)
  // UDP datagrams to a VXLAN / Geneve port that are not that tunnel, judged as plain UDP
  // (PacketMeta::tunnel_not_parsed; dataplane.tunnels.strict false).
  Counter vxlan_not_parsed, geneve_not_parsed, gre_not_parsed;
  Counter flows_created, flows_expired, flows_active, flows_midstream;
  Counter flow_table_full;          // new flows that found the table full (either policy)
  Counter flow_cache_hits;          // packets judged by the verdict cached in their flow
  Counter frag_packets, frag_held, frag_overlaps, frag_timeouts, frag_datagrams_active;
  // Reassembly for inspection: datagrams reassembled and judged whole, IPv6 atomic
  // fragments (judged alone), overlaps with identical / different data, exhaustion by
  // cause (no buffer, datagram too big, held-fragment pool full) and by policy applied,
  // reassembly buffers in use (gauge).
  Counter frag_reassembled, frag_atomic, frag_overlap_identical, frag_overlap_conflicts;
  Counter frag_no_buffer, frag_too_big, frag_hold_full, frag_fail_open, frag_fail_closed;
  Counter frag_buffers_in_use;
  // Firewall: flows (or untracked packets) judged by the rules, by outcome; reject
  // responses sent, and rejects that sent nothing (no mbuf, or not allowed to answer:
  // RST to a RST, ICMP error about an ICMP error, multicast/broadcast).
  Counter fw_allowed, fw_denied, fw_rejected;
  Counter fw_rst_sent, fw_icmp_sent, fw_reject_nombuf, fw_reject_suppressed;
  Counter geoip_lookups;            // GeoIP lookups (two per flow whose countries are needed)
  // flows given a backend, re-hashed / reset after their backend went away,
  // flows whose service went away, key fields missing (fallback applied), untracked
  // packets balanced, NAT answers translated back, NAT pairs without a reverse entry,
  // backends beyond the per-worker counter table.
  Counter lb_flows_balanced, lb_flows_rehashed, lb_flows_reset, lb_service_gone;
  Counter lb_key_missing, lb_untracked, lb_nat_reversed, lb_nat_no_reverse, lb_counters_full;
  Counter lb_nat_reverse_created;  // NAT reverse entries the LB created (in flows_created too)
  Counter lb_fragments_followed;  // later IP fragments given their first fragment's backend
  // bytes scanned, rules that fired by action, gaps (out-of-order bytes beyond the
  // buffer), directions that reached the depth limit, streams not inspected (pool empty).
  Counter dpi_bytes, dpi_alerts, dpi_drops, dpi_resets, dpi_gaps, dpi_depth, dpi_no_stream;
  Counter dpi_overflow;  // compressed streams that did not fit their slot (moved to full streams)
  Counter dpi_rst_sent;  // TCP RSTs sent for rules with action reset (not in fw_rst_sent)
  // Prefilter (HS_FLAG_PREFILTER) candidates confirmed / rejected by PCRE2 / not decided
  // (match limit), and flow directions that got no history window.
  Counter dpi_pf_confirmed, dpi_pf_rejected, dpi_pf_errors, dpi_no_window;
  // --- signatures --- inspections, candidates from the prefilter, rules confirmed; alerts,
  // drops, rejects and passes acted on; PCRE2 errors (match limit); flowbits that found no
  // room in their flow; threshold entries with no room (alerted unthresholded); hits beyond
  // the per-packet bound (64).
  Counter sig_inspected, sig_candidates, sig_matches, sig_alerts, sig_drops, sig_rejects;
  Counter sig_passes, sig_pcre_errors, sig_flowbits_full, sig_threshold_full, sig_hits_dropped;
  Counter tcp_stream[kTcpStreamCounterCount];
  Counter http[kHttpCounterCount];  // (dataplane/normalize/http.h)
  // DNS filtering.
  Counter dns[kDnsCounterCount];
  Counter dns_action[kDnsActions];        // blocks by action
  Counter dns_list_blocked[kDnsListSlots]; // by list counter slot
  Counter dns_list_allowed[kDnsListSlots];
  Counter events_lost;
  // Software distribution: packets handed to another worker / handed in by another worker.
  Counter dist_handed_off, dist_handed_in;
  Counter loops, busy_loops;
  Counter idle_sleeps, idle_sleep_us;  // idle polling (WorkerOptions::idle_sleep_max_us)
  Counter generation;               // snapshot generation the worker runs
  Counter cycles[kCyCount];         // by CycleBucket
  Counter latency[kLatencyBuckets]; // forwarded packets by latency bucket
  Counter latency_max_ns;
  Counter tsc_hz;                   // the worker's TSC frequency (cycles per second)
};

// A UDP datagram on a tunnel port judged as plain UDP (PacketMeta::tunnel_not_parsed): counted
// where the packet (or the datagram a reassembly completed) is classified, once.
inline void countTunnelNotParsed(WorkerCounters& c, const PacketMeta& m) {
  if (m.tunnel_not_parsed == TunnelType::kVxlan) {
    c.vxlan_not_parsed.add();
  } else if (m.tunnel_not_parsed == TunnelType::kGeneve) {
    c.geneve_not_parsed.add();
  } else if (m.tunnel_not_parsed == TunnelType::kGre) {
    c.gre_not_parsed.add();
  }
}

// Aggregated view over all workers (plus per-worker copies), for summaries and stats.
struct CountersSnapshot {
  struct Flat {
    uint64_t rx_packets[2]{}, rx_bytes[2]{}, tx_packets[2]{}, tx_bytes[2]{};
    uint64_t verdicts[4]{};
    uint64_t drops[static_cast<int>(DropReason::kCount)]{};
    uint64_t stage_packets[static_cast<int>(Stage::kCount)]{};
    uint64_t stage_drops[static_cast<int>(Stage::kCount)]{};
    uint64_t malformed_forwarded = 0, non_ip_forwarded = 0, untracked_forwarded = 0;
    uint64_t vxlan_not_parsed = 0, geneve_not_parsed = 0, gre_not_parsed = 0;
    uint64_t flows_created = 0, flows_expired = 0, flows_active = 0, flows_midstream = 0;
    uint64_t flow_table_full = 0, flow_cache_hits = 0;
    uint64_t frag_packets = 0, frag_held = 0, frag_overlaps = 0, frag_timeouts = 0;
    uint64_t frag_datagrams_active = 0;
    uint64_t frag_reassembled = 0, frag_atomic = 0, frag_overlap_identical = 0;
    uint64_t frag_overlap_conflicts = 0, frag_no_buffer = 0, frag_too_big = 0;
    uint64_t frag_hold_full = 0, frag_fail_open = 0, frag_fail_closed = 0;
    uint64_t frag_buffers_in_use = 0;
    uint64_t fw_allowed = 0, fw_denied = 0, fw_rejected = 0;
    uint64_t fw_rst_sent = 0, fw_icmp_sent = 0, fw_reject_nombuf = 0, fw_reject_suppressed = 0;
    uint64_t geoip_lookups = 0;
    uint64_t lb_flows_balanced = 0, lb_flows_rehashed = 0, lb_flows_reset = 0;
    uint64_t lb_service_gone = 0, lb_key_missing = 0, lb_untracked = 0, lb_nat_reversed = 0;
    uint64_t lb_nat_no_reverse = 0, lb_counters_full = 0, lb_fragments_followed = 0;
    uint64_t lb_nat_reverse_created = 0;
    uint64_t dpi_bytes = 0, dpi_alerts = 0, dpi_drops = 0, dpi_resets = 0, dpi_gaps = 0;
    uint64_t dpi_depth = 0, dpi_no_stream = 0, dpi_overflow = 0;
    uint64_t dpi_rst_sent = 0;
    uint64_t dpi_pf_confirmed = 0, dpi_pf_rejected = 0, dpi_pf_errors = 0, dpi_no_window = 0;
    uint64_t sig_inspected = 0, sig_candidates = 0, sig_matches = 0, sig_alerts = 0, sig_drops = 0;
    uint64_t sig_rejects = 0, sig_passes = 0, sig_pcre_errors = 0, sig_flowbits_full = 0;
    uint64_t sig_threshold_full = 0, sig_hits_dropped = 0;
    uint64_t tcp_stream[kTcpStreamCounterCount]{};
    uint64_t http[kHttpCounterCount]{};
    // DNS filtering.
    uint64_t dns[kDnsCounterCount]{};
    uint64_t dns_action[kDnsActions]{};
    uint64_t dns_list_blocked[kDnsListSlots]{};
    uint64_t dns_list_allowed[kDnsListSlots]{};
    uint64_t events_lost = 0, loops = 0, busy_loops = 0, generation = 0;
    uint64_t idle_sleeps = 0, idle_sleep_us = 0;
    uint64_t dist_handed_off = 0, dist_handed_in = 0;
    uint64_t cycles[kCyCount]{};
    uint64_t latency[kLatencyBuckets]{};
    uint64_t latency_max_ns = 0;
    uint64_t tsc_hz = 0;
    uint64_t totalDrops() const;
  };
  Flat total;
  std::vector<Flat> per_worker;
};

CountersSnapshot::Flat readCounters(const WorkerCounters& c);
void accumulate(CountersSnapshot::Flat& into, const CountersSnapshot::Flat& w);

}  // namespace dpu::dp
