// The load balancer as a stage (docs/load-balancer.md): a flow's first packet that matches a
// service gets a backend (key fields hashed into the service's Maglev table), pinned in the
// flow's LB record by service and backend identity, so table changes never move it; the
// packets are rewritten per the service's mode (lb_rewrite.h: L2 / NAT / IPIP). Per-backend
// counters in a fixed open-addressing table keyed by backend identity (one writer: this
// worker; other lcores read). No allocation, no locks: everything is allocated at create.
#pragma once

#include <cstdint>
#include <memory>

#include "dataplane/pipeline/stage.h"
#include "rules/compiled/lb.h"

namespace dpu::dp {

class LbStage final : public PathStage {
 public:
  static constexpr uint32_t kLbCounterSlots = 8192;  // power of two
  static constexpr uint16_t kLbNoCounter = 0xffff;
  struct LbBackendCounters {
    Counter identity;  // 0 = free slot
    Counter packets, bytes, flows_active, flows_total;
  };

  LbStage(PathContext& cx, uint32_t flow_capacity, uint32_t frag_slots);
  static absl::StatusOr<std::unique_ptr<PathStage>> make(PathContext& cx,
                                                         const rules::DataplaneSettings& s);

  static bool explain(const ExplainInput& in, ExplainResult& r);  // explain.h

  bool refresh() override;
  void run(uint16_t from, uint16_t to) override;
  void flowEnded(int32_t pos) override;
  void describeFlow(int32_t pos, FlowDumpRecord& r) const override;
  bool followFragment(rte_mbuf* m, const PacketMeta& pm, int32_t slot,
                      PacketVerdict& v) override;
  // Counters of this worker (kLbCounterSlots entries); read by other lcores.
  const LbBackendCounters* counters() const { return lb_ctr_.get(); }

 private:
  // One cache line per flow (48 bytes of fields, aligned to 64): a 48-byte stride put half
  // the records across two lines, and the flow step prefetches the record for every packet.
  struct alignas(64) LbFlow {
    enum Kind : uint8_t { kNone = 0, kBalanced, kReverse, kNotBalanced, kReset };
    uint64_t svc = 0;       // service identity
    uint64_t backend = 0;   // backend identity
    uint16_t svc_idx = 0;   // hints: positions in the current snapshot
    uint16_t be_idx = 0;
    uint16_t ctr = kLbNoCounter;
    uint8_t kind = kNone;
    uint16_t vport = 0;     // NAT: the VIP's port (host order)
    uint8_t answer_dir = 1; // NAT reverse entry: direction of the backend's answers
    int32_t peer = -1;      // NAT: the other entry of the pair
    uint8_t vip[16] = {0};  // NAT: the VIP's address
  };
  static_assert(sizeof(LbFlow) == 64, "LbFlow is one cache line");
  // IP fragments: what a datagram's first fragment got, by fragment-tracker slot, so that
  // its later fragments (judged in the burst or released from the hold) go to the same
  // backend with the same rewrite. A copy of the rewrite, not a reference into the
  // snapshot: a config change in mid-datagram does not split the datagram.
  struct LbFragRewrite {
    enum Kind : uint8_t { kNone = 0, kForward, kReverse };
    uint8_t kind = kNone;
    uint8_t mode = 0;        // rules::LbMode (kForward)
    bool has_mac = false;
    uint8_t mac[6] = {0};
    uint16_t port = 0;       // NAT: backend port (kForward) / VIP port (kReverse); 0 = keep
    uint16_t ctr = kLbNoCounter;
    uint16_t be_idx = kNoBackend;
    uint16_t svc_idx = kNoLbService;  // the verdict's lb_service
    uint8_t addr[16] = {0};  // NAT: backend address / VIP (kReverse); IPIP: outer dst
    uint8_t tun[16] = {0};   // IPIP: outer src
  };
  void packet(rte_mbuf* m, Burst& b, uint16_t i);
  uint16_t lbCounterSlot(uint64_t identity);
  void lbPin(LbFlow& f, const rules::CompiledLbService& svc, uint32_t svc_idx, uint32_t be);
  void lbUnpin(LbFlow& f);
  void lbDrop(Burst& b, uint16_t i, DropReason r);
  int lbChoose(const rules::CompiledLbService& svc, const rules::LbPacket& p, Burst& b,
               uint16_t i);
  void lbCount(uint16_t ctr, uint32_t bytes);
  bool lbForward(rte_mbuf* m, Burst& b, uint16_t i, const rules::CompiledLbService& svc,
                 const rules::CompiledLbBackend& be);
  bool lbForwardRewrite(rte_mbuf* m, Burst& b, uint16_t i, const rules::CompiledLbService& svc,
                        const rules::CompiledLbBackend& be);
  void lbReverseEntry(int32_t pos, Burst& b, uint16_t i, const rules::CompiledLbBackend& be);
  DropReason lbMakeRewrite(const rules::CompiledLbService& svc,
                           const rules::CompiledLbBackend& be, bool v4, LbFragRewrite& r);
  DropReason lbApply(rte_mbuf* m, const PacketMeta& pm, const LbFragRewrite& r);

  WorkerCounters* const c_;
  FlowTable* const flows_;
  const rules::CompiledLb* lbc_ = nullptr;
  // Set once a snapshot with a service was seen: until then no flow has LB state and the
  // stage is skipped (its per-flow array is not touched).
  bool lb_seen_ = false;
  // The current snapshot has a service. A flow created while it has none is flagged
  // kFlowNoLb by the flow step (PathContext::new_flow_flags): its packets went out
  // unbalanced, so a service added later must not take it over mid-connection.
  bool lb_active_ = false;
  // The packet being judged is a reassembled datagram: its fragments are counted when they
  // follow it.
  bool lb_quiet_ = false;
  std::unique_ptr<LbFlow[]> lb_flow_;
  std::unique_ptr<LbBackendCounters[]> lb_ctr_;
  std::unique_ptr<LbFragRewrite[]> lb_frag_;  // one per fragment-tracker slot
};

}  // namespace dpu::dp
