// TCP stream normalization as a stage (docs/tcp-stream.md; the engine is
// dataplane/normalize/tcp_stream.h), first in the list: for each TCP segment of a flow a
// later stage inspects (every TCP flow when DPI has rules, flows to or from a DNS port when
// DNS filtering is configured), the checksum is verified and the engine run; a segment the
// engine refuses is dropped (stage flow, reason tcp_*), one it accepts carries its new
// in-order bytes in Burst::st_* - the only bytes the later stages read of it. Flows a stage
// stopped reading (PathContext::closed) are skipped. Per flow position and direction
// (pos * 2 + dir) a TcpStreamDir; per worker the pool of comparison windows.
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

 private:
  void segment(rte_mbuf* m, Burst& b, uint16_t i);
  // A fail_open pass of a stream that could not be checked: an event (verdict forward).
  void event(const Burst& b, uint16_t i, DropReason why);
  WorkerCounters* const c_;
  const rules::CompiledDns* dns_ = nullptr;  // DNS filtering: its ports are read
  bool dpi_ = false;                         // DPI: every TCP flow is read
  std::unique_ptr<TcpStreamDir[]> dirs_;
  std::unique_ptr<TcpStreamPool> pool_;
};

}  // namespace dpu::dp
