// The small interface the control plane uses to talk to the dataplane (DESIGN.md:
// control -> dataplane/api only). Implemented by Dataplane; tests of the control plane may
// implement it with a fake. All calls come from control threads, never from workers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/api/events.h"
#include "dataplane/pipeline/counters.h"
#include "dataplane/pipeline/verdict.h"
#include "rules/compiled/snapshot.h"

namespace dpu::dp {

struct WorkerInfo {
  uint16_t id = 0;
  unsigned lcore = 0;
  uint32_t generation = 0;  // snapshot generation the worker runs
};

struct PortInfo {
  uint8_t side = kSideA;
  uint16_t port_id = 0;
  std::string name;
  std::string driver;
  uint64_t rx_packets = 0, rx_bytes = 0, tx_packets = 0, tx_bytes = 0;
  uint64_t rx_missed = 0, rx_nombuf = 0, rx_errors = 0, tx_errors = 0;
};

struct ExplainStep {
  Stage stage = Stage::kNone;
  std::string decision;  // "pass", "forward", "drop", "hold", ...
  std::string detail;
};

struct ExplainResult {
  PacketVerdict verdict;
  std::vector<ExplainStep> steps;
  std::string summary;  // parsed headers, one line
};

class DataplaneControl {
 public:
  virtual ~DataplaneControl() = default;
  // Publishes `next` (generation assigned here, previous + 1); returns when no worker can
  // still see the previous snapshot and it has been freed.
  virtual uint32_t publish(std::unique_ptr<rules::Snapshot> next) = 0;
  virtual uint32_t currentGeneration() const = 0;
  virtual CountersSnapshot counters() const = 0;
  virtual std::vector<WorkerInfo> workers() const = 0;
  virtual std::vector<PortInfo> ports() const = 0;
  virtual uint32_t drainEvents(const std::function<void(const Event&)>& fn, uint32_t max) = 0;
  // Judges `frame` arriving on `side` with the current snapshot, as a packet of a new flow,
  // without side effects.
  virtual ExplainResult explain(const uint8_t* frame, uint32_t len, uint8_t side) const = 0;
};

// The explain logic itself, usable on any snapshot (no DPDK state involved).
ExplainResult explainPacket(const rules::Snapshot& snap, const uint8_t* frame, uint32_t len,
                            uint8_t side);

}  // namespace dpu::dp
