// DPI (YARA rules matched in traffic with Hyperscan) as the control plane fills it from
// ApplianceConfig.dpi. Plain data; rules/compile/yara_* validates and translates it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rules/model/signature.h"

namespace dpu::rules {

enum class DpiAction : uint8_t { kAlert = 0, kDrop = 1, kReset = 2 };
// What happens to a TCP flow direction whose out-of-order bytes exceed the buffer bound.
enum class DpiGapPolicy : uint8_t { kStopInspecting = 0, kAlert = 1, kDrop = 2 };
// Where an idle flow direction keeps its Hyperscan stream: a full stream of its own (kFull),
// or the stream compressed (hs_compress_stream) into a fixed-size slot, expanded into the
// worker's one working stream when the direction's next packet arrives (kCompressed).
// kAuto: kCompressed when a full stream + match state is larger than the compressed slot
// (compressed_slot_bytes), else kFull (see docs/dpi.md for the measurements behind it).
enum class DpiStreamMode : uint8_t { kFull = 0, kCompressed = 1, kAuto = 2 };

// One YARA source: a file (path) or inline text. `name` identifies it in errors, in rule ids
// ("name:rule") and is its YARA namespace.
struct YaraSource {
  std::string name;
  std::string text;
  bool operator==(const YaraSource&) const = default;
};

struct DpiRuleAction {
  std::string rule;   // "rule" (any source) or "source:rule"
  DpiAction action = DpiAction::kAlert;
  bool operator==(const DpiRuleAction&) const = default;
};

// --- http --- HTTP parsed by libhtp on DPI flows, bodies scanned as files (docs/http.md).
struct DpiHttpModel {
  // HTTP parsed: dpi.http present (and not `enabled: false`), or absent while DPI has rules
  // (`implicit`: then sources without a scope inspect files and the stream, control/config
  // dpi_config.cc).
  bool enabled = false;
  bool implicit = false;
  std::vector<uint16_t> ports{80, 8000, 8080, 8888, 3128};
  bool detect_on_other_ports = true;
  int personality = 2;                   // libhtp htp_server_personality_t (2 = IDS)
  uint32_t flow_slots_per_worker = 4096;
  uint32_t decompress_layers = 3;        // gzip inside gzip inside deflate: what evasions use
  uint32_t bomb_limit_bytes = 1u << 20;
  uint32_t bomb_time_limit_us = 100000;
  bool http_events = false;
  bool fileinfo_events = true;
  // Hold-back of a file's last packet (docs/http.md "Verdicts"): on, slots per worker (start
  // only), the longest hold.
  bool hold_last_packet = true;
  uint32_t hold_slots_per_worker = 1024;
  uint32_t hold_timeout_ms = 100;
  bool operator==(const DpiHttpModel&) const = default;
};
// What a rule source (YARA namespace) inspects on HTTP flows: kDefault = files on HTTP flows,
// the stream on the others; kFiles / kStream / kBoth.
enum class DpiInspect : uint8_t { kDefault = 0, kFiles = 1, kStream = 2, kBoth = 3 };
struct DpiScope {
  std::string source;
  DpiInspect inspect = DpiInspect::kDefault;
  bool operator==(const DpiScope&) const = default;
};

struct DpiModel {
  bool enabled = false;
  std::vector<YaraSource> sources;
  std::vector<DpiRuleAction> actions;   // override `meta: action = "..."`
  DpiAction default_action = DpiAction::kAlert;
  uint32_t depth_bytes = 1u << 20;       // per flow direction; 0 = unlimited
  uint32_t ooo_buffer_bytes = 16384;     // out-of-order bytes held per flow direction
  DpiGapPolicy gap_policy = DpiGapPolicy::kStopInspecting;
  bool unsupported_fails = false;        // an unsupported rule fails the apply
  bool udp_stream = false;               // false: each UDP datagram scanned on its own
  std::string cache_dir;                 // compiled database cache ("" = none)
  // Hyperscan databases the rules are spread over by source (0 = the default, 2): an edit
  // compiles only what changed (docs/dpi.md "Shards and incremental compiles").
  uint32_t shards = 0;
  bool full_recompile = false;           // no delta / background merge (DpiCompileOptions)
  uint32_t streams_per_worker = 4096;    // Hyperscan streams per worker (flow directions)
  uint32_t ooo_slots_per_worker = 256;   // out-of-order buffers per worker
  DpiStreamMode stream_mode = DpiStreamMode::kAuto;
  // kCompressed: bytes per slot (streams_per_worker slots); 0 = 512 + 192 per Hyperscan
  // database beyond the first (a slot holds one compressed stream per shard).
  uint32_t compressed_slot_bytes = 0;
  uint32_t full_streams_per_worker = 256;  // kCompressed: full streams for directions whose
                                           // compressed stream does not fit a slot
  // Prefilter (HS_FLAG_PREFILTER + confirmation) of expressions Hyperscan cannot compile
  // exactly: the longest match such an expression may have (bytes of history kept per flow
  // direction to confirm a candidate; wider ones stay unsupported), and how many flow
  // directions per worker get such a history window.
  uint32_t prefilter_window_bytes = 8192;
  uint32_t prefilter_windows_per_worker = 4096;
  DpiHttpModel http;                     // --- http ---
  std::vector<DpiScope> scopes;
  SigModel signatures;                   // --- signatures --- Suricata-format rules
  bool operator==(const DpiModel&) const = default;
};

}  // namespace dpu::rules
