#include "control/app/live.h"

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "control/api/appliance_service.h"
#include "control/api/lb_drain.h"
#include "control/api/event_hub.h"
#include "control/api/server.h"
#include "control/app/summary.h"
#include "control/config/config_loader.h"
#include "control/config/config_manager.h"
#include "control/config/config_store.h"
#include "control/metrics/metrics_server.h"
#include "control/progress/progress_registry.h"
#include "dataplane/api/dataplane.h"
#include "dataplane/port/eal.h"

namespace dpu::ctl {
namespace {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_reload{false};
void onSignal(int) { g_stop.store(true); }
void onHangup(int) { g_reload.store(true); }

// SIGHUP: the --config file becomes the committed configuration (next version).
void reloadConfigFile(const std::string& path, ConfigManager& manager) {
  if (path.empty()) {
    std::fprintf(stderr, "dpu-appliance: SIGHUP: no --config file to re-apply (events file "
                         "reopened); change the configuration with dpuctl\n");
    return;
  }
  auto cfg = loadConfigFile(path);
  if (!cfg.ok()) {
    std::fprintf(stderr, "dpu-appliance: SIGHUP: %s not applied, nothing changed: %s\n",
                 path.c_str(), std::string(cfg.status().message()).c_str());
    manager.reportRefused("load", cfg.status());  // --- ops --- a config event, counted
    return;
  }
  ApplyError err;
  auto r = manager.apply(*cfg, 0, /*force=*/true, &err);
  if (!r.ok()) {
    std::fprintf(stderr, "dpu-appliance: SIGHUP: %s not applied, nothing changed: %s\n",
                 path.c_str(), std::string(r.status().message()).c_str());
    for (const auto& e : err.errors) {
      std::fprintf(stderr, "  error: %s\n", rules::formatError(e).c_str());
    }
    return;
  }
  std::fprintf(stderr,
               "dpu-appliance: SIGHUP: applied %s as config version %lu (generation %u) in "
               "%.1f ms\n",
               path.c_str(), static_cast<unsigned long>(r->version), r->generation,
               r->validate_ms + r->compile_ms + r->prepare_ms + r->persist_ms + r->publish_ms);
  for (const auto& w : r->warnings) std::fprintf(stderr, "  warning: %s\n", w.c_str());
}

PortReport livePort(uint16_t port, const char* side) {
  PortReport r;
  char name[RTE_ETH_NAME_MAX_LEN] = {0};
  rte_eth_dev_get_name_by_port(port, name);
  r.name = absl::StrCat(side, " (", name, ")");
  rte_eth_stats st{};
  if (rte_eth_stats_get(port, &st) == 0) {
    r.rx_packets = st.ipackets;
    r.rx_bytes = st.ibytes;
    r.tx_packets = st.opackets;
    r.tx_bytes = st.obytes;
    r.rx_missed = st.imissed;
    r.rx_nombuf = st.rx_nombuf;
    r.tx_errors = st.oerrors;
  }
  return r;
}

}  // namespace

absl::Status runLive(const LiveOptions& o) {
  // Refuse a bad --listen before anything is set up.
  ApiServerOptions api = o.api;
  api.state_dir = o.state_dir;
  if (auto addr = resolveListenAddress(api); !addr.ok()) return addr.status();

  // The committed config (state directory) wins; --config only seeds an empty one.
  v1::ApplianceConfig seed;
  if (!o.config.empty()) {
    auto c = loadConfigFile(o.config);
    if (!c.ok()) return c.status();
    auto model = toModel(*c);
    if (!model.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(o.config, ": ", model.status().message()));
    }
    seed = *c;
  }
  auto store_or = ConfigStore::open(o.state_dir, o.config.empty() ? nullptr : &seed);
  if (!store_or.ok()) return store_or.status();
  std::unique_ptr<ConfigStore> store = std::move(*store_or);
  if (!o.config.empty()) {
    v1::ApplianceConfig a = store->current(), b = seed;
    a.clear_version();
    b.clear_version();
    if (a.SerializeAsString() != b.SerializeAsString()) {
      std::fprintf(stderr,
                   "dpu-appliance: %s holds committed config version %lu, which is used; "
                   "--config %s only seeds an empty state directory\n",
                   store->path().c_str(), static_cast<unsigned long>(store->version()),
                   o.config.c_str());
    }
  }
  // The dataplane needs its first snapshot before the manager can be bound to it; this
  // manager only compiles (it never applies).
  ConfigManager boot(store.get(), nullptr);
  auto snap = boot.compileCurrent();
  if (!snap.ok()) return snap.status();

  std::vector<std::string> eal = {"dpu-appliance"};
  eal.insert(eal.end(), o.eal_args.begin(), o.eal_args.end());
  absl::Status st = dp::initEal(eal);
  if (!st.ok()) return st;

  dp::DataplaneOptions dopts;
  unsigned lc;
  RTE_LCORE_FOREACH_WORKER(lc) { dopts.worker_lcores.push_back(lc); }
  if (dopts.worker_lcores.empty()) {
    return absl::InvalidArgumentError(
        "no worker lcore: the main lcore runs control, so give at least two lcores (e.g. -l 0,1)");
  }
  dopts.workers = static_cast<uint16_t>(dopts.worker_lcores.size());
  dopts.clock = dp::ClockMode::kTsc;
  dopts.mbufs = o.mbufs;
  auto dpr = dp::Dataplane::create(dopts, std::move(*snap));
  if (!dpr.ok()) return dpr.status();
  std::unique_ptr<dp::Dataplane> plane = std::move(*dpr);
  ConfigManager manager(store.get(), plane.get());
  manager.inheritCompiled(boot);  // the first apply shares the running compiled firewall
  ProgressRegistry progress;      // long applies: a progress line here and in GetStatus
  progress.startTicker();
  manager.setProgress(&progress);

  // Events carry TSC-based nanoseconds; this offset turns them into wall-clock time.
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  uint64_t tsc_ns = static_cast<uint64_t>(static_cast<unsigned __int128>(rte_rdtsc()) *
                                          1000000000ull / rte_get_tsc_hz());
  int64_t wall_offset = static_cast<int64_t>(now.tv_sec) * 1000000000ll + now.tv_nsec -
                        static_cast<int64_t>(tsc_ns);
  // The event pump drains the worker rings (and writes --events) from now on.
  EventHubOptions hopts;
  hopts.wall_offset_ns = wall_offset;
  hopts.events_file = o.events;
  hopts.events_max_bytes = o.events_max_bytes;
  hopts.events_keep = o.events_keep;
  EventHub hub(plane.get(), hopts);
  st = hub.start();
  if (!st.ok()) return st;
  ServiceOptions sopts;
  sopts.state_dir = store->stateDir();
  sopts.wall_offset_ns = wall_offset;
  sopts.progress = &progress;
  ApplianceService service(&manager, plane.get(), &hub, sopts);
  LbDrainer lb_drainer(&manager, plane.get(), &hub);  // --- lb --- draining backends removed
  lb_drainer.start(std::chrono::seconds(1));

  std::signal(SIGINT, onSignal);
  std::signal(SIGTERM, onSignal);
  std::signal(SIGHUP, onHangup);
  api.state_dir = store->stateDir();
  auto server_or = ApiServer::start(api, &service);
  if (!server_or.ok()) return server_or.status();
  std::unique_ptr<ApiServer> server = std::move(*server_or);
  std::unique_ptr<MetricsServer> metrics;
  if (!o.metrics_listen.empty()) {
    auto m = MetricsServer::start(MetricsOptions{o.metrics_listen, o.metrics_listen_any},
                                  applianceSources(&service));
    if (!m.ok()) {
      server->shutdown();
      return m.status();
    }
    metrics = std::move(*m);
    std::fprintf(stderr, "dpu-appliance: metrics on http://%s/metrics\n",
                 metrics->address().c_str());
  }
  std::fprintf(stderr, "dpu-appliance: API listening on %s (config version %lu from %s)\n",
               server->address().c_str(), static_cast<unsigned long>(manager.version()),
               store->path().c_str());
  st = plane->launch();
  if (!st.ok()) return st;
  std::fprintf(stderr, "dpu-appliance: forwarding between %s (A) and %s (B) with %u worker(s); "
                       "Ctrl-C to stop\n",
               livePort(plane->portA(), "A").name.c_str(),
               livePort(plane->portB(), "B").name.c_str(), plane->workerCount());
  auto start = std::chrono::steady_clock::now();
  auto last_stats = start;
  uint64_t last_rx = 0;
  while (!g_stop.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto t = std::chrono::steady_clock::now();
    double elapsed = std::chrono::duration<double>(t - start).count();
    if (o.duration_s > 0 && elapsed >= o.duration_s) break;
    if (g_reload.exchange(false)) {
      hub.reopenFile();
      reloadConfigFile(o.config, manager);
    }
    if (o.stats_interval_s > 0 &&
        std::chrono::duration<double>(t - last_stats).count() >= o.stats_interval_s) {
      auto c = plane->counters().total;
      uint64_t rx = c.rx_packets[0] + c.rx_packets[1];
      double dt = std::chrono::duration<double>(t - last_stats).count();
      std::fprintf(stderr, "[%8.1fs] rx %lu (%.3f Mpps)  fwd %lu  drop %lu  flows %lu\n",
                   elapsed, static_cast<unsigned long>(rx), (rx - last_rx) / dt / 1e6,
                   static_cast<unsigned long>(c.verdicts[1]),
                   static_cast<unsigned long>(c.totalDrops()),
                   static_cast<unsigned long>(c.flows_active));
      last_rx = rx;
      last_stats = t;
    }
  }
  // API first (no change can start while the workers stop), then the workers, then the
  // pump's last drain (flow ends at shutdown).
  metrics.reset();
  lb_drainer.stop();  // --- lb ---
  server->shutdown();
  plane->stop();
  hub.stop();
  SummaryInput sum;
  sum.counters = plane->counters();
  fillStageReports(*plane, plane->current(), sum);  // rules, lists, services with counters
  for (uint16_t i = 0; i < plane->workerCount(); ++i) {
    sum.flows_active_at_end += plane->worker(i).flows().size();
  }
  sum.title = "dpu-appliance run: final counters";
  sum.ports[0] = livePort(plane->portA(), "A");
  sum.ports[1] = livePort(plane->portB(), "B");
  sum.generation = plane->current().generation;
  sum.config_version = plane->current().config_version;
  std::fputs(formatSummary(sum).c_str(), stdout);
  std::fflush(stdout);
  return absl::OkStatus();
}

}  // namespace dpu::ctl
