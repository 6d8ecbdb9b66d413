// What the control side reads of the workers' flows and packets (dpuctl flows / capture):
// plain data, no DPDK types. How it is read without stalling a worker is in
// dataplane/pipeline/mailbox.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dataplane/flow/tcp_state.h"
#include "dataplane/packet/packet_meta.h"
#include "dataplane/pipeline/verdict.h"

namespace dpu::dp {

// One flow of one worker, oriented initiator (src) -> responder (dst).
struct FlowInfo {
  uint16_t worker = 0;
  uint64_t flow_id = 0;        // as Event::flow_id: (worker + 1) << 32 | per-worker number
  uint8_t ip_ver = 4;
  uint8_t proto = 0;
  IpAddr src{}, dst{};
  uint16_t sport = 0, dport = 0;
  uint16_t vlan = 0, vlan_inner = 0;
  uint32_t tunnel_id = 0;      // innermost VNI / GRE key (FlowKey::tunnel_id; 0 = none)
  uint8_t in_side = kSideA;    // side the first packet came from
  TcpState tcp_state = TcpState::kNone;
  bool midstream = false;      // TCP picked up without a SYN
  Verdict verdict = Verdict::kNone;  // cached verdict (kNone: not decided / untracked)
  Stage stage = Stage::kNone;  // stage that decided it
  std::string rule;            // firewall rule id of the cached verdict ("" = none)
  std::string lb_service, lb_backend;  // pinned backend ("" = none)
  uint64_t packets[2] = {0, 0};  // [0] initiator -> responder, [1] reply
  uint64_t bytes[2] = {0, 0};
  uint64_t first_seen_ns = 0, last_seen_ns = 0;  // worker clock (Event::ts_ns)
};

struct FlowListing {
  std::vector<FlowInfo> flows;
  // Per worker: its clock when it finished its walk (ages are now - first_seen).
  std::vector<uint64_t> now_ns;
  // Flows a worker had no room for (new flows arrived during the walk beyond the slack the
  // control side allocated): the listing is incomplete by that many.
  uint64_t missed = 0;
};

// dpuctl capture: what to copy. Exactly one of drops / rule.
struct CaptureSpec {
  bool drops = false;          // packets dropped or rejected
  bool any_reason = true;      // drops: every reason, else only `reason`
  DropReason reason = DropReason::kNone;
  std::string rule;            // firewall rule id: packets that rule judged (any verdict)
};

struct CapturedPacket {
  uint64_t ts_ns = 0;          // worker clock
  uint32_t orig_len = 0;       // frame length on the wire (data may be cut at kCaptureSnap)
  uint16_t worker = 0;
  uint8_t in_side = kSideA;
  Verdict verdict = Verdict::kNone;
  Stage stage = Stage::kNone;
  DropReason reason = DropReason::kNone;
  std::vector<uint8_t> data;
};

}  // namespace dpu::dp
