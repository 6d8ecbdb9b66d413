// Dataplane events (drops, flow ends ...). Workers fill fixed-size Event objects from a
// shared rte_mempool (per-lcore cache, lock-free) and enqueue them on their own
// single-producer/single-consumer rte_ring; the control thread drains the rings. A full
// ring or empty pool never blocks a worker: the event is lost and counted (events_lost).
#pragma once

#include <cstdint>

#include "dataplane/api/http_event.h"
#include "dataplane/packet/packet_meta.h"
#include "dataplane/pipeline/verdict.h"

namespace dpu::dp {

enum class EventType : uint8_t {
  kDrop = 1,
  kFlowEnd = 2,
  // a YARA rule matched (any action; `rule` = index in the snapshot's
  // CompiledDpi::rules, kNoRule with reason kDpiGap for a gap under policy alert)
  kDpiAlert = 3,
  kDns = 4,  // DNS filtering: a block
  // A packet forwarded without the inspection it should have had (a fail_open policy):
  // `reason` says why (e.g. kFragNoBuffer), `stage` which layer gave up.
  kUninspected = 5,
  // (docs/http.md) a file (request / response body) ended: `http` describes it;
  // an HTTP transaction completed (opt-in: dpi.http.http_events).
  kFileInfo = 6,
  kHttp = 7,
};

// kReused: a new SYN on a closed connection's 5-tuple ends it and starts a new flow.
enum class FlowEndReason : uint8_t { kTimeout = 1, kShutdown = 2, kReused = 3 };

struct Event {
  EventType type;
  uint8_t worker;
  uint8_t in_side;            // side the packet (or the flow's first packet) came from
  Stage stage;
  DropReason reason;
  Verdict verdict;
  uint8_t proto;
  uint8_t ip_ver;             // 0 when not IP
  uint8_t tcp_state;          // TcpState (flow end)
  FlowEndReason end_reason;   // flow end; kDpiAlert: raised at the flow's end (0: by a packet)
  uint16_t sport, dport;      // orig direction for flow end, packet direction for drops
  uint16_t vlan;
  uint32_t rule;              // rule index in the snapshot of `generation`
  uint32_t generation;
  uint64_t ts_ns;
  uint64_t seq;               // packet index (drops)
  uint64_t flow_id;
  uint64_t first_seen_ns;     // flow end
  uint64_t packets[2];        // flow end: orig, reply
  uint64_t bytes[2];
  IpAddr src, dst;
  // DNS filtering (kDns): the blocked name (lower case, cut at 127 bytes, NUL-terminated),
  // the list that blocked it and its action (rules::DnsAction), whether it was a CNAME
  // target in a resolver response (cloaking).
  char dns_name[128];
  char dns_list[65];
  uint8_t dns_action;
  bool dns_cloaked;
  // kFileInfo / kHttp, and kDpiAlert on a file: the transaction and file.
  HttpEventInfo http;
};

const char* eventTypeName(EventType t);
const char* flowEndReasonName(FlowEndReason r);

}  // namespace dpu::dp
