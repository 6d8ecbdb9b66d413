// Control -> worker requests that read worker-owned state without locks and without
// stalling the packet path (dpuctl flows, dpuctl capture). One WorkerMailbox per worker,
// owned by the Dataplane (allocated at create, freed after the workers stopped).
//
// Flow dump: the control thread fills `out` / `cap`, then stores kPending (release). The
// worker checks `state` once per loop (one relaxed load of a line nobody writes while no
// dump runs); when it finds kPending it claims the request (CAS kPending -> kActive), walks
// at most kDumpSlotsPerLoop slots of its flow table (occupancy bitmap, like aging) copying
// at most kDumpFlowsPerLoop of the flows it finds, and stores kPending again (release), or
// kDone after the last slot. A walk therefore spreads over at least
// max(capacity / kDumpSlotsPerLoop, flows / kDumpFlowsPerLoop) loops, each adding a bounded
// amount of work to one loop. The control side cancels (timeout) with CAS kPending ->
// kIdle; it never frees `out` while the worker holds kActive.
//
// Capture: the control thread sets the filter, then `armed` (release). The worker reads
// `armed` once per loop; while it is set, every judged packet that matches is copied (cut
// at kCaptureSnap bytes) into the worker's single-producer / single-consumer slot ring
// (head written by the worker, tail by the control thread); a full ring counts `lost`.
// Unarmed, a packet costs one test of a bool the worker refreshed at the loop's start.
#pragma once

#include <atomic>
#include <cstdint>

#include "dataplane/api/flow_view.h"
#include "dataplane/flow/flow_key.h"

namespace dpu::dp {

// What the worker copies per flow; the Dataplane turns it into a FlowInfo (names).
struct FlowDumpRecord {
  FlowKey key;
  uint64_t first_seen_ns, last_seen_ns;
  uint64_t packets[2], bytes[2];
  uint64_t lb_service, lb_backend;  // identities (0 = none)
  uint32_t generation, rule, flow_seq;
  uint8_t verdict, stage, tcp_state, flags;
};

enum FlowDumpState : uint32_t { kDumpIdle = 0, kDumpPending = 1, kDumpActive = 2, kDumpDone = 3 };

struct FlowDumpRequest {
  alignas(64) std::atomic<uint32_t> state{kDumpIdle};
  // Written by the control thread before kPending; read by the worker.
  FlowDumpRecord* out = nullptr;
  uint32_t cap = 0;
  // Written by the worker between claims; read by the control thread after kDone.
  uint32_t cursor = 0;
  uint32_t n = 0;
  uint32_t missed = 0;
  uint64_t now_ns = 0;
};

// Per worker loop, a dump examines at most kDumpSlotsPerLoop slots (bitmap words: cheap) and
// copies at most kDumpFlowsPerLoop flows (a few cache misses each: entry, cold state, key,
// LB state), so one loop gains at most a few tens of microseconds.
constexpr uint32_t kDumpSlotsPerLoop = 4096;
constexpr uint32_t kDumpFlowsPerLoop = 128;
constexpr uint32_t kCaptureSnap = 2048;       // bytes kept of a captured frame
constexpr uint32_t kCaptureSlots = 256;       // per worker, power of two

struct CaptureSlot {
  uint64_t ts_ns;
  uint32_t orig_len;
  uint16_t cap_len;
  uint8_t in_side, verdict, stage, reason;
  uint8_t data[kCaptureSnap];
};

struct CaptureRing {
  alignas(64) std::atomic<bool> armed{false};
  // Filter (written by the control thread while unarmed).
  bool drops = false;
  bool any_reason = true;
  uint8_t reason = 0;
  uint32_t rule_uid = 0;    // PublishedState::rule_uid of the rule (0 = not by rule)
  alignas(64) std::atomic<uint32_t> head{0};  // worker: next slot to write
  std::atomic<uint64_t> lost{0};              // worker: matched but the ring was full
  alignas(64) std::atomic<uint32_t> tail{0};  // control: next slot to read
  CaptureSlot* slots = nullptr;               // kCaptureSlots
};

struct WorkerMailbox {
  FlowDumpRequest dump;
  CaptureRing capture;
};

}  // namespace dpu::dp
