#include "control/app/live.h"

#include <net/if.h>
#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <systemd/sd-daemon.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "control/api/appliance_service.h"
#include "control/api/build_info.h"
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
#include "absl/cleanup/cleanup.h"
#include "dataplane/port/eal.h"

namespace dpu::ctl {
namespace {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_reload{false};
void onSignal(int) { g_stop.store(true); }
void onHangup(int) { g_reload.store(true); }

// Tells systemd (NOTIFY_SOCKET, set by a Type=notify unit) about the service state; a no-op
// when not started by systemd. A failure is told once and never stops the appliance.
void sdNotify(const char* state) {
  static std::atomic<bool> told{false};
  int r = sd_notify(0, state);
  if (r < 0 && !told.exchange(true)) {
    std::fprintf(stderr, "dpu-appliance: sd_notify failed: %s\n", std::strerror(-r));
  }
}

// SIGHUP (systemctl reload): the committed configuration is applied again as the next
// version, so the files it names (rule files, IP sets, DNS list files, YARA rule files, the
// GeoIP database) are read again, e.g. after a feed update. The committed document itself
// is the source of truth: changes made through the API are kept, and the --config file is
// not read (it only seeds an empty state directory; `dpuctl config reseed FILE` makes a file
// the running configuration again, explicitly). A file that no longer loads or compiles
// refuses the reload: nothing changes, the errors are logged and a config event says so.
void reloadNamedFiles(ConfigManager& manager) {
  v1::ApplianceConfig cfg = manager.current();
  const uint64_t based_on = cfg.version();
  ApplyError err;
  auto r = manager.apply(cfg, based_on, /*force=*/false, &err);
  if (!r.ok()) {
    std::fprintf(stderr,
                 "dpu-appliance: SIGHUP: the files named by config version %lu not applied, "
                 "nothing changed: %s\n",
                 static_cast<unsigned long>(based_on), std::string(r.status().message()).c_str());
    for (const auto& e : err.errors) {
      std::fprintf(stderr, "  error: %s\n", rules::formatError(e).c_str());
    }
    return;
  }
  std::fprintf(stderr,
               "dpu-appliance: SIGHUP: re-read the files named by config version %lu: applied "
               "as config version %lu (generation %u) in %.1f ms\n",
               static_cast<unsigned long>(based_on), static_cast<unsigned long>(r->version),
               r->generation,
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

// What a port is bound to, for the start-up line: the kernel interface it sends on (af_packet,
// tap, pcap iface=...) and the device's arguments (iface=, rx_pcap=, ...), e.g.
// "net_af_packet0 on interface veth-a (iface=veth-a)".
std::string portBinding(uint16_t port) {
  char name[RTE_ETH_NAME_MAX_LEN] = {0};
  rte_eth_dev_get_name_by_port(port, name);
  std::string out = name;
  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(port, &info) != 0) return out;
  char ifname[IF_NAMESIZE] = {0};
  if (info.if_index != 0 && if_indextoname(info.if_index, ifname) != nullptr) {
    absl::StrAppend(&out, " on interface ", ifname);
  }
  const rte_devargs* da = info.device ? rte_dev_devargs(info.device) : nullptr;
  if (da != nullptr && da->args != nullptr && da->args[0] != 0) {
    absl::StrAppend(&out, " (", da->args, ")");
  }
  return out;
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
  auto boot = std::make_unique<ConfigManager>(store.get(), nullptr);
  auto snap = boot->compileCurrent();
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
  dopts.idle_sleep_max_us = o.idle_sleep_max_us;
  auto dpr = dp::Dataplane::create(dopts, std::move(*snap));
  if (!dpr.ok()) return dpr.status();
  std::unique_ptr<dp::Dataplane> plane = std::move(*dpr);
  // runLive is the process's last work (main exits after it): however it returns, the
  // dataplane leaves its DPDK heap to the exit (eal.h; runs before plane's destructor).
  absl::Cleanup leave_heap = [] { dp::leaveDpdkHeapToExit(); };
  ConfigManager manager(store.get(), plane.get());
  manager.inheritCompiled(*boot);  // the first apply shares the running compiled firewall
  // ... and only that: the boot manager would otherwise keep the first compiled rules (a
  // whole DPI engine, ACLs, DNS lists) alive for the process's life after the first apply.
  boot.reset();
  manager.followDpiMerges();      // --- dpi --- merged rule databases republished
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
  // --- fleet --- The node agent: applies the fleet's versions through the manager (the
  // same validate -> compile -> publish path as the API) and reports this node's status.
  std::unique_ptr<fleet::FleetAgent> agent;
  if (!o.fleet.fleet.empty()) {
    fleet::AgentOptions fo = o.fleet;
    fo.state_dir = store->stateDir();
    fo.software = buildInfo().version();
    fo.api_address = api.listen.empty() ? absl::StrCat("unix:", store->stateDir(), "/api.sock") : api.listen;
    fleet::AgentHooks hooks;
    hooks.apply = [&manager](const v1::ApplianceConfig& doc, v1::FleetNodeError* err,
                             uint64_t* config_version) {
      return applyFleetDocument(manager, doc, err, config_version);
    };
    dp::DataplaneControl* pc = plane.get();
    hooks.fill = [&manager, pc](v1::FleetNodeStatus* s) {
      const auto c = pc->counters().total;
      s->set_config_version(manager.version());
      v1::FleetNodeCounters* k = s->mutable_counters();
      k->set_rx_packets(c.rx_packets[0] + c.rx_packets[1]);
      k->set_forwarded(c.verdicts[1]);
      k->set_dropped(c.verdicts[2] + c.verdicts[3]);
      k->set_flows_active(c.flows_active);
    };
    auto a = fleet::FleetAgent::create(fo, std::move(hooks));
    if (!a.ok()) return a.status();
    agent = std::move(*a);
    manager.setFollower(absl::StrCat(
        "this appliance follows fleet \"", fo.fleet, "\" as node ", fo.node, " (etcd ",
        fo.etcd.endpoints, "): its policy changes with `dpuctl fleet apply` (docs/fleet.md); "
        "local edits are refused"));
  }
  ServiceOptions sopts;
  sopts.state_dir = store->stateDir();
  if (agent) {
    fleet::FleetAgent* ag = agent.get();
    sopts.fleet_status = [ag](v1::FleetAgentStatus* out) {
      const fleet::AgentSnapshot s = ag->snapshot();
      out->set_fleet(s.fleet);
      out->set_node(s.node);
      out->set_group(s.group);
      out->set_state(s.state);
      out->set_etcd_connected(s.connected);
      out->set_etcd_endpoint(s.endpoint);
      out->set_etcd_error(s.last_etcd_error);
      out->set_last_contact_unix_ns(s.last_contact_unix_ns);
      out->set_desired_version(s.desired_version);
      out->set_applied_version(s.applied_version);
      if (s.last_error.version() != 0) {
        out->set_last_error_version(s.last_error.version());
        out->set_last_error(absl::StrCat(s.last_error.phase(), ": ", s.last_error.message()));
      }
      out->set_relists(s.relists);
      out->set_applies(s.applies);
      out->set_refusals(s.refusals);
    };
  }
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
  if (agent) {
    agent->setApiAddress(server->address());  // the bound address (--listen HOST:0)
    agent->start();
    std::fprintf(stderr, "dpu-appliance: following fleet %s as node %s (group %s) on etcd %s\n",
                 o.fleet.fleet.c_str(), agent->options().node.c_str(), o.fleet.group.c_str(),
                 o.fleet.etcd.endpoints.c_str());
  }
  std::fprintf(stderr, "dpu-appliance: forwarding between A (%s) and B (%s) with %u worker(s); "
                       "Ctrl-C to stop\n",
               portBinding(plane->portA()).c_str(), portBinding(plane->portB()).c_str(),
               plane->workerCount());
  if (plane->workerCount() > 1) {
    std::fprintf(stderr, "dpu-appliance: packets reach the workers by %s\n",
                 plane->distributionSummary().c_str());
  }
  // systemd (Type=notify): ready once the API answers and the workers forward, so
  // `systemctl start dpu-appliance && dpuctl status` does not race the start.
  sdNotify(absl::StrCat("READY=1\nSTATUS=forwarding, config version ", manager.version(),
                        ", API on ", server->address())
               .c_str());
  auto start = std::chrono::steady_clock::now();
  auto last_stats = start;
  auto last = plane->counters().total;  // the previous --stats-interval sample
  while (!g_stop.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto t = std::chrono::steady_clock::now();
    double elapsed = std::chrono::duration<double>(t - start).count();
    if (o.duration_s > 0 && elapsed >= o.duration_s) break;
    if (g_reload.exchange(false)) {
      // systemd (Type=notify): `systemctl reload` waits until READY=1 again.
      sdNotify("RELOADING=1\nSTATUS=re-reading the files the configuration names");
      hub.reopenFile();
      if (agent) {
        std::fprintf(stderr, "dpu-appliance: SIGHUP: events file reopened; the files of a fleet "
                             "version are not re-read (the fleet's versions carry them)\n");
      } else {
        reloadNamedFiles(manager);
      }
      sdNotify(absl::StrCat("READY=1\nSTATUS=forwarding, config version ", manager.version())
                   .c_str());
    }
    if (o.stats_interval_s > 0 &&
        std::chrono::duration<double>(t - last_stats).count() >= o.stats_interval_s) {
      // Per-second rates over the interval, then only the drop reasons that grew in it.
      auto c = plane->counters().total;
      const double dt = std::chrono::duration<double>(t - last_stats).count();
      auto per_s = [dt](uint64_t now, uint64_t before) { return double(now - before) / dt; };
      const uint64_t rx = c.rx_packets[0] + c.rx_packets[1];
      const uint64_t last_rx = last.rx_packets[0] + last.rx_packets[1];
      std::string line = absl::StrFormat(
          "[%8.1fs] rx %.0f pps  fwd %.0f/s  drop %.0f/s  reject %.0f/s  new flows %.0f/s  "
          "active flows %u",
          elapsed, per_s(rx, last_rx), per_s(c.verdicts[1], last.verdicts[1]),
          per_s(c.verdicts[2], last.verdicts[2]), per_s(c.verdicts[3], last.verdicts[3]),
          per_s(c.flows_created, last.flows_created), c.flows_active);
      std::string why;
      for (int r = 1; r < static_cast<int>(dp::DropReason::kCount); ++r) {
        if (c.drops[r] == last.drops[r]) continue;
        absl::StrAppendFormat(&why, "%s %s %.0f/s", why.empty() ? "  drops:" : ",",
                              dp::dropReasonName(static_cast<dp::DropReason>(r)),
                              per_s(c.drops[r], last.drops[r]));
      }
      std::fprintf(stderr, "%s%s\n", line.c_str(), why.c_str());
      last = c;
      last_stats = t;
    }
  }
  sdNotify("STOPPING=1\nSTATUS=stopping: final counters follow");
  // API first (no change can start while the workers stop), then the workers, then the
  // pump's last drain (flow ends at shutdown).
  metrics.reset();
  if (agent) agent->stop();  // --- fleet --- no apply starts while the workers stop
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
