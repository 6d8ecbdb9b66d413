// The opt-in Prometheus endpoint (`dpu-appliance run --metrics-listen ADDR`): GET /metrics
// answers the text exposition format, built at scrape time from the API messages the
// sources return (metrics_sources.cc) by the one converter in prom_export.h, serialized by
// prometheus-cpp's TextSerializer; GET / answers a small page linking /metrics. HTTP is
// civetweb's CivetServer (Debian's libcivetweb-dev, the server prometheus-cpp uses).
//
// ADDR is PORT (= 127.0.0.1:PORT), HOST:PORT or [V6]:PORT; port 0 picks a free port
// (address() tells which). Like the API, only loopback unless listen_any: counters and
// rule ids tell a lot about the network.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "control/metrics/prom_export.h"

class CivetServer;

namespace dpu::ctl {

class ApplianceService;

struct MetricsOptions {
  std::string listen;       // empty = no endpoint
  bool listen_any = false;  // allow a non-loopback address
};

// The HOST:PORT to bind, or why it is refused (nothing is bound).
absl::StatusOr<std::string> resolveMetricsAddress(const MetricsOptions& opts);

// One source of metrics: adds its families for a scrape. Called on the HTTP server's
// threads, possibly concurrently with itself; must be thread-safe.
using MetricsSource = std::function<void(metrics::Families&)>;

// The appliance's sources: GetStats (ports, workers, drops, stages, flows, fragments,
// firewall outcomes, applies, events, tasks), ListFirewallRules (per-rule counters),
// GetStatus (build info). A feature with its own List RPC adds one line there.
std::vector<MetricsSource> applianceSources(ApplianceService* service);

// Runs every source and converts: the body of GET /metrics.
std::vector<prometheus::MetricFamily> collectMetrics(const std::vector<MetricsSource>& sources,
                                                     std::vector<std::string>* problems = nullptr);

class MetricsServer {
 public:
  static absl::StatusOr<std::unique_ptr<MetricsServer>> start(const MetricsOptions& opts,
                                                              std::vector<MetricsSource> sources);
  ~MetricsServer();
  // "HOST:PORT" with the bound port; the endpoint is http://address()/metrics.
  const std::string& address() const { return address_; }

 private:
  MetricsServer() = default;
  class Handler;
  std::unique_ptr<Handler> handler_;
  std::unique_ptr<CivetServer> server_;  // declared after handler_: destroyed first
  std::string address_;
};

}  // namespace dpu::ctl
