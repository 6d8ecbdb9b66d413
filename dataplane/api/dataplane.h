// The control side's handle on the dataplane: ports, workers, the published snapshot,
// counters and events. The control thread calls everything here; workers only read the
// snapshot pointer and write their own counters and event rings.
//
// Snapshot publication: publish() stores the new pointer with release semantics, waits for
// an rte_rcu_qsbr grace period (every worker has passed a quiescent state, i.e. finished
// the burst that might still use the old pointer), then frees the old snapshot. Workers
// never block and never see a half-built snapshot.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dataplane/api/control.h"
#include "dataplane/api/events.h"
#include "dataplane/pipeline/counters.h"
#include "dataplane/pipeline/worker.h"
#include "rules/compiled/snapshot.h"

struct rte_mempool;
struct rte_ring;
struct rte_rcu_qsbr;

namespace dpu::dp {

struct DataplaneOptions {
  uint16_t port_a = 0;
  uint16_t port_b = 1;
  uint16_t workers = 1;
  std::vector<unsigned> worker_lcores;  // live mode: one lcore per worker
  ClockMode clock = ClockMode::kTsc;
  bool merge_by_timestamp = false;      // replay with two inputs
  uint32_t mbufs = 0;                   // 0 = sized from workers and descriptors
  uint16_t mbuf_data_room = 0;          // 0 = RTE_MBUF_DEFAULT_BUF_SIZE
  uint16_t rx_desc = 1024;
  uint16_t tx_desc = 1024;
  uint32_t event_ring_size = 16384;     // per worker, power of two
};

class Dataplane : public DataplaneControl {
 public:
  // Sets up ports and workers (EAL must be initialized) and publishes `initial`.
  static absl::StatusOr<std::unique_ptr<Dataplane>> create(
      const DataplaneOptions& opts, std::unique_ptr<rules::Snapshot> initial);
  ~Dataplane() override;

  // Publishes a new snapshot (generation = previous + 1, assigned here) and frees the old
  // one after a grace period. Control thread only. Returns the new generation.
  uint32_t publish(std::unique_ptr<rules::Snapshot> next) override;
  uint32_t currentGeneration() const override;
  std::vector<WorkerInfo> workers() const override;
  std::vector<PortInfo> ports() const override;
  ExplainResult explain(const uint8_t* frame, uint32_t len, uint8_t side) const override;
  const rules::Snapshot& current() const { return *current_.load(std::memory_order_acquire); }

  // Live mode: runs each worker on its lcore until stop().
  absl::Status launch();
  void stop();

  CountersSnapshot counters() const override;
  // Pops up to `max` events from every worker ring, calling fn for each.
  uint32_t drainEvents(const std::function<void(const Event&)>& fn,
                       uint32_t max = 4096) override;

  uint16_t workerCount() const { return static_cast<uint16_t>(workers_.size()); }
  Worker& worker(uint16_t i) { return *workers_[i]; }
  // Registers the calling thread as worker `i` for RCU (offline mode: the main thread runs
  // the worker loop itself) / unregisters it.
  void attachCaller(uint16_t i);
  void detachCaller(uint16_t i);

  uint16_t portA() const { return opts_.port_a; }
  uint16_t portB() const { return opts_.port_b; }

 private:
  Dataplane() = default;
  DataplaneOptions opts_;
  std::atomic<const rules::Snapshot*> current_{nullptr};
  mutable std::mutex publish_mu_;  // control threads: publish vs explain (never workers)
  std::atomic<bool> stop_{false};
  rte_rcu_qsbr* qsbr_ = nullptr;
  rte_mempool* pool_ = nullptr;
  rte_mempool* event_pool_ = nullptr;
  std::vector<rte_ring*> rings_;
  std::unique_ptr<WorkerCounters[]> counters_;
  std::vector<std::unique_ptr<Worker>> workers_;
  bool launched_ = false;
  int attached_caller_ = -1;  // worker id the control thread runs itself (offline mode)
  bool ports_started_ = false;
};

}  // namespace dpu::dp
