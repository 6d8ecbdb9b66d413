// TCP stream normalization as a stage (docs/tcp-stream.md; the engine is
// dataplane/normalize/tcp_stream.h), first in the list: for each TCP segment of a flow a
// later stage inspects (every TCP flow when DPI has rules, flows to or from a DNS port when
// DNS filtering is configured), the checksum is verified and the engine run; a segment the
// engine refuses is dropped (stage flow, reason tcp_*), one it accepts carries its new
// in-order bytes in Burst::st_* - the only bytes the later stages read of it. Flows a stage
// stopped reading (PathContext::closed) are skipped. Per flow position and direction
// (pos * 2 + dir) a TcpStreamDir; per worker the pool of comparison windows.
//
// Hold mode (dataplane.tcp.hold_out_of_order): the stage is also the loop's TCP holder
// (PathContext::tcp_holder). A segment the engine kept beyond a hole is held with its
// verdict (a per-worker pool of held packets, in arrival order per flow direction) instead of
// leaving; the segment that fills the hole leaves first, judged with the kept bytes, and the
// held packets its direction now has in order follow it - or are dropped with it when it is
// dropped. Held past hold_timeout_ms, or when the flow ends: dropped (tcp_hold_expired).
#pragma once

#include <cstdint>
#include <memory>

#include "dataplane/normalize/tcp_stream.h"
#include "dataplane/pipeline/stage.h"

namespace dpu::dp {

class StreamStage final : public PathStage {
 public:
  StreamStage(PathContext& cx, const rules::DataplaneSettings& s);
  static absl::StatusOr<std::unique_ptr<PathStage>> make(PathContext& cx,
                                                         const rules::DataplaneSettings& s);

  bool refresh() override;  // true while DNS or DPI reads TCP
  void run(uint16_t from, uint16_t to) override;
  void flowEnded(int32_t pos) override;
  ~StreamStage() override;
  // The TCP holder (hold mode): at finish, packet i kept beyond a hole is held (true: taken);
  // one that filled a hole leaves, then what it made in order (true: sent here).
  bool finishPacket(rte_mbuf* m, uint16_t i) override;
  void expireHeld(uint64_t now) override;

 private:
  static constexpr uint32_t kNoHeld = 0xffffffffu;
  struct Held {
    rte_mbuf* m = nullptr;
    PacketVerdict v;
    uint64_t deadline = 0;
    uint32_t seq_end = 0;          // sequence number after its payload
    uint32_t key = 0;              // pos * 2 + dir
    uint32_t prev = kNoHeld, next = kNoHeld;  // all held packets, oldest first
    uint32_t dnext = kNoHeld;      // the direction's, in arrival order
  };
  void holdUnlink(uint32_t h, uint32_t dprev);
  // Held packet h leaves with its verdict (forward), or dropped with `drop` (its event at `at`).
  void heldRelease(uint32_t h, uint32_t dprev);
  void heldDrop(uint32_t h, uint32_t dprev, const PacketVerdict& drop, uint64_t at);
  // The direction's held packets now in order (before its next sequence number) leave.
  void releaseInOrder(uint32_t key);
  // Every held packet of flow `pos`, both directions, dropped like `drop`.
  void dropFlowHeld(int32_t pos, const PacketVerdict& drop, uint64_t at);
  void holdPublish() {
    cx_.tcp_held = held_n_;
    cx_.tcp_hold_deadline = held_head_ != kNoHeld ? held_[held_head_].deadline : UINT64_MAX;
  }

  void segment(rte_mbuf* m, Burst& b, uint16_t i);
  // A fail_open pass of a stream that could not be checked: an event (verdict forward).
  void event(const Burst& b, uint16_t i, DropReason why);
  WorkerCounters* const c_;
  const rules::CompiledDns* dns_ = nullptr;  // DNS filtering: its ports are read
  bool dpi_ = false;                         // DPI: every TCP flow is read
  std::unique_ptr<TcpStreamDir[]> dirs_;
  std::unique_ptr<TcpStreamPool> pool_;
  // --- hold mode --- (allocated only when on)
  bool hold_ = false;
  uint64_t hold_ns_ = 0;
  std::unique_ptr<Held[]> held_;
  std::unique_ptr<uint32_t[]> held_free_;
  std::unique_ptr<uint32_t[]> dir_head_, dir_tail_;  // per pos * 2 + dir
  uint32_t held_nfree_ = 0, held_n_ = 0;
  uint32_t held_head_ = kNoHeld, held_tail_ = kNoHeld;
};

}  // namespace dpu::dp
