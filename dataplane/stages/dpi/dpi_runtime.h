// DPI stage: per flow direction one Hyperscan stream, TCP payload fed in sequence order,
// conditions of the YARA rules evaluated on the stream's match state. No DPDK here (tested
// without EAL); the DPI stage calls it (dataplane/stages/dpi/dpi_stage.cc).
//
// Memory, all allocated off the packet path:
//   - DpiRuntime (built by Dataplane::prepare for one CompiledDpi + settings, shared by the
//     snapshots that keep the same CompiledDpi, freed after the RCU grace period with the
//     last of them) holds per worker: a Hyperscan scratch (hs_clone_scratch), a pool of
//     `streams_per_worker` Hyperscan streams opened once at prepare time and recycled with
//     hs_reset_stream (no allocation when a flow starts or ends), the match states of those
//     streams (one slab), and a pool of out-of-order buffers (ring of `ooo_buffer_bytes` per
//     slot plus a presence bitmap).
//   - DpiDir (per flow position and direction, in the Worker, sized to the flow table at
//     worker create): which stream slot / ooo slot it uses, next expected TCP sequence
//     number, state flags, and the id of the runtime the slots belong to. A slot of another
//     runtime (the rules changed) is never touched again: that runtime frees its streams
//     itself, and the flow starts a new stream on the new rules at its current position
//     (patterns anchored at the stream start then do not match).
// Retransmitted bytes (sequence before the next expected one) are not scanned again; the
// first copy of overlapping bytes wins. Out-of-order bytes beyond the buffer (or with no free
// buffer) are a gap: the gap policy says stop inspecting, alert, or drop.
// The packet path hands tracked TCP flows' bytes in order from the stream engine
// (the stream stage), so the out-of-order buffer only ever waits for bytes a stage between the
// engine and DPI dropped, which never come again (docs/dpi.md, "the inspector's own
// out-of-order buffer").
#pragma once

#include <hs/hs.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "rules/compiled/dpi.h"

namespace dpu::dp {

struct DpiSettings {
  // kFull: streams_per_worker full Hyperscan streams. kCompressed: streams_per_worker slots
  // of compressed_slot_bytes for the compressed streams plus full_streams_per_worker full
  // streams for the directions whose compressed stream does not fit a slot.
  rules::DpiStreamMode stream_mode = rules::DpiStreamMode::kAuto;
  uint32_t compressed_slot_bytes = 0;  // 0: 512 + 192 per Hyperscan database beyond the first
  uint32_t full_streams_per_worker = 256;
  uint32_t streams_per_worker = 4096;
  uint32_t ooo_slots_per_worker = 256;
  uint32_t ooo_buffer_bytes = 16384;
  uint64_t depth_bytes = 1u << 20;  // 0 = unlimited
  rules::DpiGapPolicy gap_policy = rules::DpiGapPolicy::kStopInspecting;
  bool udp_stream = false;
  // Rule sets with prefiltered patterns (CompiledDpi::prefilter_window > 0): history windows
  // of prefilter_window bytes per worker (one per inspected flow direction).
  uint32_t prefilter_windows_per_worker = 4096;
};

class DpiRuntime {
 public:
  static absl::StatusOr<std::shared_ptr<DpiRuntime>> create(
      std::shared_ptr<const rules::CompiledDpi> dpi, const DpiSettings& s, uint32_t workers);
  ~DpiRuntime();
  DpiRuntime(const DpiRuntime&) = delete;
  DpiRuntime& operator=(const DpiRuntime&) = delete;

  struct PerWorker {
    hs_scratch_t* scratch = nullptr;
    // Full streams (kFull: one per flow direction; kCompressed: the overflow pool), one
    // Hyperscan stream per shard each: slot i's are streams[i * shards .. + shards).
    std::vector<hs_stream_t*> streams;
    std::vector<uint32_t> free_streams;     // stack of free slot indices
    std::unique_ptr<uint8_t[]> ms;          // streams.size() * ms_stride
    // kCompressed: compact slots of compressed_slot_bytes each, holding a direction's
    // compressed Hyperscan stream and its match state (nonzero runs only; see
    // dpi_stage.cc), and the working stream + match state a slot is expanded into to scan.
    uint32_t compact_slots = 0;
    std::unique_ptr<uint8_t[]> cdata;       // compact_slots * compressed_slot_bytes
    std::vector<uint32_t> free_compact;
    std::vector<hs_stream_t*> work;         // one per shard (empty: no patterns)
    std::unique_ptr<uint8_t[]> work_ms;     // ms_stride
    uint32_t work_slot = 0xffffffffu;       // compact slot `work` / `work_ms` hold now
    std::vector<uint32_t> free_ooo;
    std::unique_ptr<uint8_t[]> ooo_data;    // ooo_slots * ooo_buffer_bytes
    std::unique_ptr<uint8_t[]> ooo_bits;    // ooo_slots * ooo_buffer_bytes / 8
    std::vector<hs_stream_t*> block_streams;  // UDP datagrams scanned on their own (per shard)
    std::unique_ptr<uint8_t[]> block_ms;
    // Prefilter (rule sets with prefiltered patterns only): history rings of the last
    // CompiledDpi::prefilter_window bytes of a direction (window_slots of them), and the
    // confirmation scratch (PCRE2 match data, JIT stack, a window-sized buffer).
    uint32_t window_slots = 0;
    std::unique_ptr<uint8_t[]> windows;     // window_slots * prefilter_window
    std::vector<uint32_t> free_windows;
    std::unique_ptr<rules::DpiConfirmScratch> confirm;
    // The rules one inspector call found newly matching (DpiOutcome::fired points here):
    // one entry per rule of the set, so every rule that becomes true is reported by the
    // packet that makes it true, however many do at once (a rule fires once per direction,
    // and each call's outcome holds one direction's, or one datagram's, rules).
    std::unique_ptr<uint32_t[]> fired;
    // The rules whose strings changed a match state since the last evaluation (one bit per
    // rule; set by the match callback, cleared by every evaluation: see
    // CompiledDpi::evaluateChanged).
    std::unique_ptr<uint64_t[]> dirty;
    std::unique_ptr<uint8_t[]> mask_tmp;    // fired | report mask (rule bits)
    // --- signatures --- the scratch of CompiledDpi::sigs (null: no signatures).
    rules::SigScratchPtr sig;
  };

  // Report masks (docs/http.md): one bit per rule that a direction does not
  // report, chosen by its DpiDir mask flags: kMaskHttpStream (the raw stream of an HTTP flow:
  // rules scoped to files), kMaskFile (an HTTP file: rules scoped to the stream), plus
  // kMaskSizePending (a file whose final size is not known yet: rules reading filesize).
  // Set before the runtime is published; read-only afterwards.
  void setReportMasks(std::vector<uint8_t> http_stream, std::vector<uint8_t> file,
                      std::vector<uint8_t> file_pending) const {
    masks_[0] = std::move(http_stream);
    masks_[1] = std::move(file);
    masks_[2] = std::move(file_pending);
  }
  // The mask for a direction's flags, null when it reports every rule.
  const uint8_t* reportMask(uint8_t flags) const;

  const rules::CompiledDpi& dpi() const { return *dpi_; }
  const std::shared_ptr<const rules::CompiledDpi>& dpiPtr() const { return dpi_; }
  const DpiSettings& settings() const { return s_; }
  uint32_t id() const { return id_; }
  size_t msStride() const { return ms_stride_; }
  // Hyperscan databases (streams per flow direction).
  uint32_t shards() const { return uint32_t(dpi_->shards.size()); }
  // The mode in use (kAuto resolved at create()).
  bool compressed() const { return compressed_; }
  // Bytes per flow direction: the compact slot (kCompressed), or Hyperscan stream state +
  // match state (kFull).
  size_t bytesPerStream() const {
    return compressed() ? s_.compressed_slot_bytes : dpi_->streamStateBytes() + ms_stride_;
  }
  // History window bytes per flow direction (rule sets with prefiltered patterns), else 0.
  uint32_t windowBytes() const { return dpi_->prefilter_window; }
  PerWorker& worker(uint32_t w) const { return workers_[w]; }
  uint32_t workers() const { return uint32_t(workers_.size()); }

 private:
  DpiRuntime() = default;
  std::shared_ptr<const rules::CompiledDpi> dpi_;
  DpiSettings s_;
  uint32_t id_ = 0;
  size_t ms_stride_ = 0;
  bool compressed_ = false;
  mutable std::vector<PerWorker> workers_;
  mutable std::vector<uint8_t> masks_[3];
};

// Per flow direction (indexed pos * 2 + dir by the Worker).
struct DpiDir {
  uint32_t rt_id = 0;        // runtime the slots belong to; 0 = none
  uint32_t slot = kNoSlot;   // stream slot
  uint32_t ooo = kNoSlot;    // out-of-order slot
  uint32_t win = kNoSlot;    // prefilter history window
  uint32_t next_seq = 0;     // next expected TCP sequence number (when seq_known)
  uint8_t flags = 0;
  static constexpr uint32_t kNoSlot = 0xffffffffu;
  // kFull: `slot` is a full stream (in kCompressed mode: moved there because its compressed
  // stream did not fit a compact slot); else a compact slot.
  static constexpr uint8_t kSeqKnown = 1, kDone = 2, kGap = 4, kFull = 8;
  // report masks (DpiRuntime::reportMask), set by the HTTP layer.
  static constexpr uint8_t kMaskHttpStream = 32, kMaskFile = 64, kMaskSizePending = 128;
};

// What one packet (one inspector call) did.
struct DpiOutcome {
  // Every rule (index in CompiledDpi::rules) that newly matched: fired[0 .. nfired). Points
  // into the worker's DpiRuntime::PerWorker::fired, valid until the next inspector call on
  // that worker (copy it to keep it longer). No bound below the rule count: a packet that
  // makes 20 rules true reports all 20, so a drop or reset among them acts on that packet.
  const uint32_t* fired = nullptr;
  uint32_t nfired = 0;
  bool gap = false;              // this packet found a gap (policy in settings)
  bool depth_reached = false;
  bool no_stream = false;        // stream pool empty: not inspected
  bool overflow = false;         // kCompressed: the compressed stream did not fit its slot,
                                 // the direction moved to a full stream
  uint32_t scanned = 0;          // bytes scanned
  // Prefilter: candidates confirmed / rejected / not decided (PCRE2 match limit), and a
  // direction that got no history window (its candidates are confirmed on the bytes of
  // the packet that completes them only).
  uint32_t pf_confirmed = 0, pf_rejected = 0, pf_errors = 0;
  bool no_window = false;
};

class DpiInspector {
 public:
  // TCP segment of flow direction `d` (payload may be empty: SYN / FIN / ACK).
  static void tcp(const DpiRuntime& rt, uint32_t worker, DpiDir& d, const uint8_t* payload,
                  uint32_t len, uint32_t seq, uint8_t tcp_flags, DpiOutcome& out);
  // Bytes of direction `d` reached the receiver uninspected (the stream engine's gap: fail
  // open with no room to keep bytes beyond a hole): a gap (DpiOutcome::gap, the gap
  // policy), nothing more scanned in the direction.
  static void gap(const DpiRuntime& rt, uint32_t worker, DpiDir& d, DpiOutcome& out);
  // One packet scanned on its own (untracked packets, UDP datagrams by default).
  static void block(const DpiRuntime& rt, uint32_t worker, const uint8_t* payload, uint32_t len,
                    DpiOutcome& out);
  // UDP datagram: a block scan of its own (or a flow stream when settings.udp_stream).
  static void udp(const DpiRuntime& rt, uint32_t worker, DpiDir& d, const uint8_t* payload,
                  uint32_t len, DpiOutcome& out);
  // Flow end: end-of-stream matches (`\z`, fullword at the end) are evaluated, the stream
  // and buffers go back to their pools. `final_ms` (tests): receives the direction's final
  // match state (CompiledDpi::matchStateBytes()) when it was still inspected.
  static void end(const DpiRuntime& rt, uint32_t worker, DpiDir& d, DpiOutcome& out,
                  uint8_t* final_ms = nullptr);
  // Forgets state of a runtime that is gone (no pool access).
  static void forget(DpiDir& d) { d = DpiDir{}; }

 private:
  static DpiRuntime::PerWorker& enter(const DpiRuntime& rt, uint32_t worker, DpiDir& d,
                                      DpiOutcome& out);
};

}  // namespace dpu::dp
