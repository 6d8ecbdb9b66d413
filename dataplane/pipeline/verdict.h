// Per-packet outcome types shared by the pipeline, counters, events and the replay output.
#pragma once

#include <cstdint>

#include "dataplane/packet/packet_meta.h"

namespace dpu::dp {

enum class Verdict : uint8_t { kNone = 0, kForward = 1, kDrop = 2, kReject = 3 };

// Pipeline stages in packet order. Rule stages (firewall ... lb) are added by their features.
enum class Stage : uint8_t {
  kNone = 0,
  kParse,
  kFragment,
  kFlow,
  kFirewall,
  kGeoip,
  kDns,
  kDpi,
  kLb,
  kCount
};

// Every drop has a reason. The first values mirror ParseStatus one to one (malformed
// frames); kNone doubles as ParseStatus::kOk.
enum class DropReason : uint8_t {
  kNone = 0,
  kNonIp = static_cast<uint8_t>(ParseStatus::kNonIp),  // non-IP frame, policy drop
  kLastParse = static_cast<uint8_t>(ParseStatus::kCount) - 1,
  kFragOverlap,        // fragment overlapping bytes already seen (policy)
  kFragTiny,           // first fragment too short for its transport header (policy)
  kFragTooMany,        // more fragments than fragments.max_fragments
  kFragTableFull,      // no room to track a new fragmented datagram
  kFragHoldFull,       // too many later fragments waiting for their first fragment
  kFragTimeout,        // later fragments whose first fragment never arrived
  kFragDatagramDropped,  // fragment of a datagram whose first fragment was dropped
  // Reassembly for inspection (dataplane/normalize/datagram.h):
  kFragOverlapConflict,  // overlapping fragments with different data (policy drop)
  kFragNoBuffer,         // no reassembly buffer free (fail_closed)
  kFragTooBig,           // datagram longer than max_datagram_bytes (fail_closed)
  kFragIncomplete,       // held fragments of a datagram never completed (timeout)
  kFlowTableFull,      // new flow, table full, policy drop
  kTcpMidstream,       // TCP without SYN for an unknown flow, policy drop
  kMultiSegment,       // frame spans several mbufs (jumbo without linear buffer)
  kTxFailed,           // egress queue full
  kFirewallDeny,       // firewall: a deny rule or a deny default action
  kFirewallReject,     // firewall: reject (the original is dropped; a TCP RST / ICMP
                       // unreachable goes back out of the ingress port)
  kLbKeyMissing,       // a hash-key field is missing and the service's fallback is drop
  kLbNoBackend,        // the service has no backend in its table (all down / draining / 0)
  kLbFlowReset,        // the flow's backend is gone and the service's orphan policy is reset
  kLbNoAddress,        // NAT / IPIP: the backend has no address of the packet's family
  kLbNoHeadroom,       // IPIP: no room in the mbuf for the outer header
  kLbInTunnel,         // the packet is inside a tunnel and the service's mode is L2 or IPIP
                       // (only NAT rewrites tunneled packets, docs/tunnels.md)
  kDpiDrop,            // a YARA rule with action drop matched in the flow
  kDpiReset,           // a YARA rule with action reset matched (TCP RST both ways)
  kDpiGap,             // out-of-order bytes beyond the DPI buffer, gap policy drop
  // DNS filtering: the query (or cloaked response) is dropped; an answer from the
  // appliance replaces it (answered, cloaked) or nothing does (dropped, malformed policy).
  kDnsAnswered,        // blocked query answered (NXDOMAIN / NODATA / sinkhole / REFUSED)
  kDnsDropped,         // blocked query dropped (list action drop)
  kDnsCloaked,         // resolver answer whose CNAME chain reached a blocked name
  kDnsMalformed,       // DNS message that does not parse, policy drop
  kDnsTcpClosed,       // TCP DNS connection closed by the appliance after an answer
  // (stage flow) TCP normalization of inspected flows: a bad TCP
  // checksum; a segment beyond a gap; bytes repeating inspected bytes with different
  // content (overlap policy); stream state exhausted under a fail_closed stage (no window,
  // retransmission older than the window); later packets of a connection reset for an overlap.
  kTcpBadChecksum,
  kTcpOutOfOrder,
  kTcpOverlapDifferent,
  kTcpStreamExhausted,
  kTcpStreamReset,
  kDnsNonstandard,     // DNS message with opcode != QUERY or QDCOUNT != 1, policy drop
  kHttpNoSlot,         // no free HTTP flow slot, dpi fail policy DROP
  kDnsTcpMidstream,    // DNS over TCP picked up mid-stream (cannot be framed), dns.tcp_midstream DROP
  // hold-back (docs/http.md "Verdicts"): no free hold slot under dpi_fail DROP
  // (the packet, and the flow from then on); a retransmission of bytes being held back.
  kHttpHoldExhausted,
  kHttpHoldDuplicate,
  kWorkerRingFull,     // software distribution: the ring to the packet's worker was full
  // TCP hold mode: a segment held beyond a hole that did not fill within hold_timeout_ms,
  // or whose flow ended first.
  kTcpHoldExpired,
  // --- signatures --- an HTTP body found no free signature body buffer (dpi_fail DROP).
  kSigNoBodyBuffer,
  kCount
};

inline DropReason dropReasonFromParse(ParseStatus s) {
  return static_cast<DropReason>(static_cast<uint8_t>(s));
}
const char* dropReasonName(DropReason r);
const char* stageName(Stage s);
const char* verdictName(Verdict v);

enum Side : uint8_t { kSideA = 0, kSideB = 1 };
inline const char* sideName(uint8_t s) { return s == kSideA ? "A" : "B"; }

constexpr uint32_t kNoRule = 0xffffffffu;
constexpr uint16_t kNoBackend = 0xffff;
constexpr uint16_t kNoLbService = 0xffff;

// What happened to one packet (replay --verdicts, Explain, tests).
struct PacketVerdict {
  uint64_t seq = 0;          // input order (replay: index in the merged input)
  uint64_t flow_id = 0;      // 0 = untracked
  uint32_t generation = 0;   // snapshot generation that judged the packet
  Verdict verdict = Verdict::kNone;
  Stage stage = Stage::kNone;        // stage that decided (kNone: passed every stage)
  DropReason reason = DropReason::kNone;
  // Two one-bit fields in one byte: the verdict stays 32 bytes with lb_service below.
  uint8_t in_side : 1 = kSideA;
  bool flow_new : 1 = false;
  uint32_t rule = kNoRule;     // rule index in the judging snapshot's stage
  uint16_t backend = kNoBackend;       // backend index in its service
  uint16_t lb_service = kNoLbService;  // that service's index (names the backend)
};
static_assert(sizeof(PacketVerdict) == 32, "PacketVerdict: one per packet in every burst");

}  // namespace dpu::dp
