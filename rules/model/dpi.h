// DPI (YARA rules matched in traffic with Hyperscan) as the control plane fills it from
// ApplianceConfig.dpi. Plain data; rules/compile/yara_* validates and translates it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dpu::rules {

enum class DpiAction : uint8_t { kAlert = 0, kDrop = 1, kReset = 2 };
// What happens to a TCP flow direction whose out-of-order bytes exceed the buffer bound.
enum class DpiGapPolicy : uint8_t { kStopInspecting = 0, kAlert = 1, kDrop = 2 };

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
  uint32_t streams_per_worker = 4096;    // Hyperscan streams per worker (flow directions)
  uint32_t ooo_slots_per_worker = 256;   // out-of-order buffers per worker
  bool operator==(const DpiModel&) const = default;
};

}  // namespace dpu::rules
