// The stateful firewall as a stage (docs/firewall.md): the flow step (Worker::flowStep)
// queues the flows that need a verdict (a new flow, a rule-set change) and the packets it
// cannot track; run() classifies the queue in one rte_acl call per segment and writes the
// verdicts into the packets and the flows' cached verdict. The tables are
// firewall_tables.h (FirewallTables, built by the control side).
#pragma once

#include <cstdint>
#include <memory>

#include "dataplane/pipeline/stage.h"
#include "dataplane/stages/firewall/firewall_tables.h"

namespace dpu::dp {

class FirewallStage final : public PathStage {
 public:
  FirewallStage(PathContext& cx, uint32_t flow_capacity);
  static absl::StatusOr<std::unique_ptr<PathStage>> make(PathContext& cx,
                                                         const rules::DataplaneSettings& s);

  static bool explain(const ExplainInput& in, ExplainResult& r);  // explain.h

  bool refresh() override;  // true when a rule set is active
  void run(uint16_t from, uint16_t to) override;  // classifies the queue (the flow step's)
  void flowCopied(int32_t from, int32_t to) override { flow_uid_[to] = flow_uid_[from]; }

  // The flow step's side. Whether rules are active; the generation the firewall last
  // changed at; whether a rule-set change re-evaluates established flows.
  bool active() const { return active_; }
  uint32_t since() const { return since_; }
  bool reevaluate() const { return reevaluate_; }
  // Starts the segment's queue.
  void begin() { q_.n = q_.npkt = 0; }
  bool queued() const { return q_.n != 0; }
  // Queue flow `pos` (packet i of the burst, its entry e) / an untracked packet i.
  void queueFlow(uint8_t i, int32_t pos, const FlowEntry& e);
  void queueUntracked(uint8_t i);
  // Flow `pos` ended in the middle of the segment: its queued verdict is not written back.
  void forget(int32_t pos) {
    for (uint32_t k = 0; k < q_.n; ++k) {
      if (q_.pos[k] == pos) q_.pos[k] = -1;
    }
  }
  // A cached verdict kept across a generation change: restamped (the rule found again by its
  // identity when the rules changed).
  void restamp(int32_t pos, FlowEntry& e);
  void countRuleHit(uint32_t rule, uint8_t stage, uint32_t bytes, uint64_t t) {
    if (stage != static_cast<uint8_t>(Stage::kFirewall) || rule >= nrules_) return;
    RuleHit& h = hits_[rule];
    h.packets.add();
    h.bytes.add(bytes);
    if (t > h.last_hit_ns.load()) h.last_hit_ns.set(t);
  }

 private:
  void lookupCountries(const rules::FwQuery& q, char src[2], char dst[2]);
  WorkerCounters* const c_;
  FlowTable* const flows_;
  const FirewallTables* fw_ = nullptr;
  const rules::CompiledFirewall* fwc_ = nullptr;
  const GeoIpDb* geo_ = nullptr;
  RuleHit* hits_ = nullptr;
  uint32_t nrules_ = 0;
  uint32_t since_ = 0;
  bool active_ = false;
  bool reevaluate_ = true;
  bool countries_ = false;
  // Uid (PublishedState::rule_uid) of the rule behind each flow's cached verdict, by flow
  // position: finds the rule again in a new rule set for flows that keep their verdict
  // (keep established). Touched only when a flow is (re)classified.
  std::unique_ptr<uint32_t[]> flow_uid_;
  // Scratch for one burst segment (a member, so bursts without firewall work do not pay for
  // initializing it).
  struct Queue {
    rules::FwQuery q[kBurst];
    const rules::FwQuery* qp[kBurst];
    int64_t rule[kBurst];
    int32_t pos[kBurst];      // flow position; -1: untracked packet or flow gone meanwhile
    bool is_flow[kBurst];
    uint8_t pkt[kBurst];      // packets judged by the queue, and their query
    uint8_t pkt_q[kBurst];
    uint32_t n = 0, npkt = 0;
  } q_;
};

}  // namespace dpu::dp
