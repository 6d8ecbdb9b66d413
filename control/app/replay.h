// `dpu-appliance replay`: offline run over DPDK net_pcap vdevs, same worker code path as
// `run`, deterministic (time comes from the capture).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace dpu::ctl {

struct ReplayOptions {
  std::string config;        // required unless `rules` names signature files
  // --rules FILE (repeatable): Suricata-format rule files added to dpi.signatures.files (as
  // `suricata -r X.pcap -S FILE`); without --config the rest of the config is the default.
  std::vector<std::string> rules;
  std::string in_a;          // required: traffic arriving on side A
  std::string in_b;          // optional: traffic arriving on side B (merged by timestamp)
  std::string out_b;         // --out: what the appliance sends out of side B
  std::string out_a;         // --out-a: what it sends out of side A
  std::string verdicts;      // JSON lines, one per input packet, in input order
  std::string events;        // JSON lines (eve-like)
  std::string summary_json;  // the summary as one JSON object
  bool quiet = false;        // no summary on stdout
  // --- http --- --extract-files DIR: the decoded HTTP files written to DIR/<sha256>
  // (dataplane/stages/dpi/file_extract.h), at most extract_max_bytes in all.
  std::string extract_files;
  uint64_t extract_max_bytes = uint64_t(256) << 20;
  // -m / --memory: DPDK (EAL) memory in MB; 0 = sized from the config (replayMemoryMb).
  uint32_t memory_mb = 0;
  // --workers N: workers (lcores 0 .. N-1; this thread runs worker 0, which reads both
  // inputs and hands each packet to its flow's worker: software distribution, lossless).
  uint16_t workers = 1;
  // Config changes: (input index, config file), non-decreasing indexes. Each file is
  // committed (a new snapshot generation) right before the packet of that index.
  std::vector<std::pair<uint64_t, std::string>> changes;
};

absl::Status runReplay(const ReplayOptions& opts);

// Accepted range of --memory (MB).
inline constexpr uint32_t kMinReplayMemoryMb = 64;
inline constexpr uint32_t kMaxReplayMemoryMb = 1024 * 1024;
inline constexpr uint16_t kMaxReplayWorkers = 16;

}  // namespace dpu::ctl
