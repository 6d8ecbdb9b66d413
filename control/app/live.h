// `dpu-appliance run`: live mode on the ports EAL gives (port 0 = side A, port 1 = side B).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "control/api/server.h"
#include "control/fleet/fleet_agent.h"

namespace dpu::ctl {

struct LiveOptions {
  std::string config;               // optional: seeds an empty state directory (see ConfigStore)
  std::string state_dir = "/var/lib/dpu-appliance";  // committed config + api.sock
  ApiServerOptions api;             // listen address, TLS, request size (state_dir set by runLive)
  std::string events;               // optional JSON-lines event log
  uint64_t events_max_bytes = 64ull << 20;  // rotate the event log at this size (0 = never)
  uint32_t events_keep = 4;         // rotated event logs kept (FILE.1 .. FILE.<keep>)
  std::string metrics_listen;       // Prometheus endpoint (empty = none); see MetricsOptions
  bool metrics_listen_any = false;
  double stats_interval_s = 0;      // 0 = no periodic stats line
  double duration_s = 0;            // 0 = until SIGINT/SIGTERM
  std::vector<std::string> eal_args;
  // Packet mbufs in the pool shared by all ports and workers; 0 = sized from the workers
  // and descriptors. Raise it for PMDs that hold many mbufs (net_pcap infinite_rx keeps
  // one per packet of its file).
  uint32_t mbufs = 0;
  // Idle polling (run --poll idle): a worker that finds nothing sleeps, up to this many
  // microseconds at a time (0 = --poll busy, the default). For boxes whose cores are shared.
  uint32_t idle_sleep_max_us = 0;
  // --- fleet --- Follow this fleet's policy in etcd (fleet.fleet empty: no fleet). The state
  // directory keeps the last applied version; local edits through the API are refused.
  fleet::AgentOptions fleet;
};

// SIGHUP: re-applies the --config file (the whole document, as the next version, whatever
// was committed through the API since) and reopens the events file; an invalid file is
// logged with every error and changes nothing.
absl::Status runLive(const LiveOptions& opts);

}  // namespace dpu::ctl
