// The control side's handle on the dataplane: ports, workers, the published snapshot,
// counters and events. The control thread calls everything here; workers only read the
// snapshot pointer and write their own counters and event rings.
//
// Snapshot publication: prepare() builds the dataplane objects of a snapshot off the packet
// path (PublishedState: firewall ACL contexts, GeoIP database, per-rule counters);
// publish() stores the new state pointer with release semantics, waits for an
// rte_rcu_qsbr grace period (every worker has passed a quiescent state, i.e. finished the
// burst that might still use the old pointer), carries the per-rule counters over, then
// frees the old state. Workers never block and never see a half-built state.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
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
class FileExtractor;  // (dataplane/stages/dpi/file_extract.h)

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
  // Software distribution (dataplane.distribution): replay waits for room in a full ring
  // instead of dropping (worker_ring_full), so no packet is lost to scheduling.
  bool lossless_distribution = false;
  // Idle polling (live `run --poll idle`): see WorkerOptions::idle_sleep_max_us; 0 = busy.
  uint32_t idle_sleep_max_us = 0;
  FileExtractor* extract = nullptr;     // replay --extract-files: decoded HTTP files
  // Stages each worker runs after the built-in ones, in this order (tests, extensions;
  // docs/architecture.md "Adding a stage").
  std::vector<StageSpec> extra_stages;
};

class Dataplane : public DataplaneControl {
 public:
  // Sets up ports and workers (EAL must be initialized) and publishes `initial`.
  static absl::StatusOr<std::unique_ptr<Dataplane>> create(
      const DataplaneOptions& opts, std::unique_ptr<rules::Snapshot> initial);
  ~Dataplane() override;

  // See DataplaneControl. prepare() may run while workers forward (it only reads the
  // running state, to reuse its firewall tables and GeoIP database); prepare and publish
  // are serialized with each other. publish() takes only states this Dataplane prepared;
  // it assigns generation = previous + 1 and returns it.
  absl::StatusOr<std::unique_ptr<PreparedSnapshot>> prepare(
      std::unique_ptr<rules::Snapshot> next) override;
  uint32_t publish(std::unique_ptr<PreparedSnapshot> next) override;
  // prepare() then publish(); returns the new generation.
  absl::StatusOr<uint32_t> prepareAndPublish(std::unique_ptr<rules::Snapshot> next);
  std::vector<RuleCounters> ruleCounters() const override;
  std::vector<DnsListCounters> dnsLists() const override;  // DNS filtering
  uint32_t currentGeneration() const override;
  std::vector<WorkerInfo> workers() const override;
  std::vector<PortInfo> ports() const override;
  ExplainResult explain(const uint8_t* frame, uint32_t len, uint8_t side) const override;
  std::string ruleName(uint32_t generation, Stage stage, uint32_t rule) const override;
  std::string backendName(uint32_t generation, uint16_t service,
                          uint16_t backend) const override;
  // The running snapshot / state: only for the thread that publishes (or while nothing can
  // publish, e.g. after the API stopped), valid until the next publish. Other threads (API
  // handlers) use currentGeneration() or the accessors that take publish_mu_: the RCU grace
  // period of a publish waits for the workers only, then frees the old state.
  const rules::Snapshot& current() const {
    return *current_.load(std::memory_order_acquire)->snap;
  }
  const PublishedState& state() const { return *current_.load(std::memory_order_acquire); }

  // Live mode: runs each worker on its lcore until stop().
  absl::Status launch();
  void stop();

  CountersSnapshot counters() const override;
  std::vector<LbBackendStats> lbBackendStats() const override;
  std::vector<DpiRuleCounters> dpiRuleCounters() const override;
  std::shared_ptr<const rules::CompiledDpi> dpiRules(uint32_t generation) const override;
  // (see DataplaneControl)
  absl::StatusOr<FlowListing> listFlows(uint32_t timeout_ms) override;
  absl::Status armCapture(const CaptureSpec& spec) override;
  uint32_t readCapture(std::vector<CapturedPacket>* out, uint32_t max, uint64_t* lost) override;
  void disarmCapture() override;
  // Pops up to `max` events from every worker ring, calling fn for each.
  uint32_t drainEvents(const std::function<void(const Event&)>& fn,
                       uint32_t max = 4096) override;

  uint16_t workerCount() const { return static_cast<uint16_t>(workers_.size()); }
  Worker& worker(uint16_t i) { return *workers_[i]; }
  // Registers the calling thread as worker `i` for RCU (offline mode: the main thread runs
  // the worker loop itself) / unregisters it.
  void attachCaller(uint16_t i);
  void detachCaller(uint16_t i);

  // Software distribution, offline (the caller runs worker `caller` itself, the others run
  // on their lcores): returns once every packet handed to another worker was judged and
  // every packet in a tx ring was sent, running the caller's worker meanwhile. A no-op
  // without software distribution.
  // `between` runs after every loop of the caller's worker (replay: drains the events).
  void settleOthers(uint16_t caller, const std::function<void()>& between = {});
  bool softwareDistribution() const { return software_; }
  // How packets reach the workers, for the start-up line.
  std::string distributionSummary() const;

  uint16_t portA() const { return opts_.port_a; }
  uint16_t portB() const { return opts_.port_b; }

 private:
  Dataplane() = default;
  absl::StatusOr<std::unique_ptr<PublishedState>> prepareLocked(
      std::unique_ptr<rules::Snapshot> next, const PublishedState* cur);
  uint32_t publishLocked(std::unique_ptr<PublishedState> next);
  void adoptUids(const PublishedState& st);
  // The named objects of the last kNamesKept generations (under publish_mu_), so verdicts
  // and events judged just before a change still name their rule.
  struct NamesAt {
    uint32_t generation = 0;
    std::shared_ptr<const rules::CompiledFirewall> fw;
    // --- dpi --- the rule set's names only (rules, unsupported: a CompiledDpi without
    // databases or tables), so 64 generations do not keep 64 engines alive; shared by the
    // consecutive generations of one rule set (dpi_src).
    std::shared_ptr<const rules::CompiledDpi> dpi;
    std::weak_ptr<const rules::CompiledDpi> dpi_src;
    std::shared_ptr<const rules::CompiledDns> dns;  // DNS filtering: list names
    std::shared_ptr<const rules::CompiledLb> lb;    // backend ids
  };
  static constexpr size_t kNamesKept = 64;
  void rememberNames(const rules::Snapshot& s);
  std::string ruleNameLocked(uint32_t generation, Stage stage, uint32_t rule) const;
  std::deque<NamesAt> names_;
  // totals of `st`'s DPI rules (base + workers; under publish_mu_), and the
  // counts carried over from replaced rule sets by rule id (under publish_mu_).
  std::vector<DpiRuleCounters> dpiTotals(const PublishedState& st) const;
  std::unordered_map<std::string, DpiRuleCounters> dpi_base_;
  DataplaneOptions opts_;
  std::atomic<const PublishedState*> current_{nullptr};
  // The generation of current_, readable by any thread without touching the state (which a
  // concurrent publish may free): set with each store of current_.
  std::atomic<uint32_t> generation_{0};
  std::mutex change_mu_;           // control threads: prepare vs publish (never workers)
  mutable std::mutex publish_mu_;  // control threads: publish vs explain / ruleCounters
  // Rule identity (under change_mu_): uid per rule id of the published rule set (plus the
  // ids prepared since); uids are never reused.
  std::unordered_map<std::string, uint32_t> uid_by_id_;
  uint32_t next_uid_ = 1;
  std::atomic<bool> stop_{false};
  rte_rcu_qsbr* qsbr_ = nullptr;
  rte_mempool* pool_ = nullptr;
  rte_mempool* event_pool_ = nullptr;
  std::vector<rte_ring*> rings_;
  std::unique_ptr<WorkerCounters[]> counters_;
  std::vector<std::unique_ptr<Worker>> workers_;
  bool launched_ = false;
  std::vector<unsigned> launched_lcores_;
  bool othersSettled(uint16_t caller, const std::function<void()>& between);
  // Software distribution: inbound ring per worker, tx ring per side (nullptr: every worker
  // has a tx queue on that side), queues set up per side.
  bool software_ = false;
  std::vector<rte_ring*> inbound_;
  rte_ring* tx_rings_[2] = {nullptr, nullptr};
  uint16_t rx_queues_[2] = {1, 1};
  uint16_t tx_queues_[2] = {1, 1};
  // one mailbox per worker (mailbox.h); listings serialized by
  // flows_mu_, captures by capture_mu_ (control threads only).
  std::unique_ptr<WorkerMailbox[]> mail_;
  std::vector<std::unique_ptr<CaptureSlot[]>> capture_slots_;
  std::mutex flows_mu_;
  std::vector<std::unique_ptr<FlowDumpRecord[]>> dump_bufs_;  // per worker, under flows_mu_
  std::vector<uint32_t> dump_caps_;
  std::mutex capture_mu_;
  bool capture_armed_ = false;  // under capture_mu_
  std::vector<uint64_t> capture_lost_seen_;  // per worker, under capture_mu_
  int attached_caller_ = -1;  // worker id the control thread runs itself (offline mode)
  bool ports_started_ = false;
};

}  // namespace dpu::dp
