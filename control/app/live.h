// `dpu-appliance run`: live mode on the ports EAL gives (port 0 = side A, port 1 = side B).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace dpu::ctl {

struct LiveOptions {
  std::string config;               // optional; empty = defaults (forward all, track flows)
  std::string events;               // optional JSON-lines event log
  double stats_interval_s = 0;      // 0 = no periodic stats line
  double duration_s = 0;            // 0 = until SIGINT/SIGTERM
  std::vector<std::string> eal_args;
};

absl::Status runLive(const LiveOptions& opts);

}  // namespace dpu::ctl
