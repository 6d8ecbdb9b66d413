// fleet_bench: time from `dpuctl fleet apply` to every node reporting the version, for N nodes
// in this process, beside the peer: the same config applied node by node through each node's
// own gRPC API with `dpuctl config apply` (what an operator scripts without the fleet).
//
// A node here is everything of an appliance's control side but the dataplane: its own state
// directory, ConfigStore, ConfigManager (validate -> compile -> persist -> "publish" into a
// fake dataplane that keeps the snapshot, tests/util/snapshot_plane.h; the rte_acl / table
// builds of the real dataplane's prepare are not done) and, on the fleet side, a real FleetAgent
// with its own etcd connection, watch, lease and status key; on the peer side an ApplianceService
// on its own unix socket. etcd is a real etcd process started here.
//
//   fleet_bench --dpuctl BIN --nodes N --config A.json [--config B.json] [--reps R]
//               [--label L] [--tsv FILE] [--peer-only | --fleet-only] [--apply-arg ARG]...
//
// Each rep applies the next config of the list (A, B, A, ...: a real change every time, so
// nothing is skipped as unchanged). Printed per rep: the fleet path (dpuctl exit; the last node
// reporting synced on the version, from a watch on the nodes' status keys), etcd's requests
// during the window by method (from its /metrics), watch events sent (fan-out); the peer
// sequential (one dpuctl after the other) and parallel (all at once, then wait). Medians at the
// end and a line per path to --tsv.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "control/api/appliance_service.h"
#include "control/api/server.h"
#include "control/config/config_manager.h"
#include "control/config/config_store.h"
#include "control/fleet/fleet_agent.h"
#include "control/fleet/fleet_store.h"
#include "tests/util/etcd_process.h"
#include "tests/util/snapshot_plane.h"

namespace {

using namespace dpu;
using namespace dpu::ctl;
using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string shellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') q += "'\\''";
    else q.push_back(c);
  }
  return q + "'";
}

int runShell(const std::string& cmd) {
  int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// etcd's Prometheus counters of interest: unary requests by method, watch messages and events.
struct EtcdMetrics {
  std::map<std::string, double> handled;  // grpc_server_handled_total by grpc_method
  double watch_msgs = 0;                  // grpc_server_msg_sent_total, Watch
  double events = 0;                      // etcd_debugging_mvcc_events_total
  double watchers = 0;                    // etcd_debugging_mvcc_watcher_total (gauge)
};

EtcdMetrics scrape(const std::string& url) {
  EtcdMetrics m;
  FILE* p = ::popen(("curl -s " + shellQuote(url + "/metrics")).c_str(), "r");
  if (!p) return m;
  char line[4096];
  auto method = [](const std::string& l) {
    auto i = l.find("grpc_method=\"");
    if (i == std::string::npos) return std::string();
    i += 13;
    return l.substr(i, l.find('"', i) - i);
  };
  auto value = [](const std::string& l) { return std::atof(l.substr(l.rfind(' ') + 1).c_str()); };
  while (std::fgets(line, sizeof line, p)) {
    std::string l(line);
    if (l.rfind("grpc_server_handled_total{", 0) == 0) {
      m.handled[method(l)] += value(l);
    } else if (l.rfind("grpc_server_msg_sent_total{", 0) == 0 && method(l) == "Watch") {
      m.watch_msgs += value(l);
    } else if (l.rfind("etcd_debugging_mvcc_events_total", 0) == 0) {
      m.events += value(l);
    } else if (l.rfind("etcd_debugging_mvcc_watcher_total", 0) == 0) {
      m.watchers += value(l);
    }
  }
  ::pclose(p);
  return m;
}

struct Node {
  std::string dir;
  std::unique_ptr<ConfigStore> store;
  test::SnapshotPlane plane;
  std::unique_ptr<ConfigManager> manager;
  std::unique_ptr<fleet::FleetAgent> agent;
  std::unique_ptr<ApplianceService> service;
  std::unique_ptr<ApiServer> server;
};

std::unique_ptr<Node> makeNode(const std::string& dir) {
  auto n = std::make_unique<Node>();
  n->dir = dir;
  std::filesystem::create_directories(dir);
  auto store = ConfigStore::open(dir + "/state", nullptr);
  if (!store.ok()) {
    std::fprintf(stderr, "fleet_bench: %s\n", std::string(store.status().message()).c_str());
    std::exit(2);
  }
  n->store = std::move(*store);
  n->manager = std::make_unique<ConfigManager>(n->store.get(), &n->plane);
  return n;
}

void startAgent(Node& n, const std::string& fleet_name, const std::string& endpoint, int i) {
  fleet::AgentOptions o;
  o.fleet = fleet_name;
  o.node = absl::StrCat("n", i);
  o.group = "default";
  o.etcd.endpoints = endpoint;
  o.state_dir = n.store->stateDir();
  o.software = "fleet_bench";
  n.manager->setFollower("this node follows fleet " + fleet_name);
  fleet::AgentHooks hooks;
  ConfigManager* m = n.manager.get();
  hooks.apply = [m](const v1::ApplianceConfig& doc, v1::FleetNodeError* err,
                    uint64_t* config_version) {
    return applyFleetDocument(*m, doc, err, config_version);
  };
  hooks.fill = [m](v1::FleetNodeStatus* s) { s->set_config_version(m->version()); };
  hooks.log = [](const std::string&) {};
  auto a = fleet::FleetAgent::create(o, std::move(hooks));
  if (!a.ok()) {
    std::fprintf(stderr, "fleet_bench: agent: %s\n", std::string(a.status().message()).c_str());
    std::exit(2);
  }
  n.agent = std::move(*a);
  n.agent->start();
}

void startServer(Node& n) {
  n.service = std::make_unique<ApplianceService>(n.manager.get(), &n.plane, nullptr,
                                                 ServiceOptions{n.store->stateDir()});
  ApiServerOptions so;
  so.state_dir = n.store->stateDir();
  auto s = ApiServer::start(so, n.service.get());
  if (!s.ok()) {
    std::fprintf(stderr, "fleet_bench: server: %s\n", std::string(s.status().message()).c_str());
    std::exit(2);
  }
  n.server = std::move(*s);
}

struct Args {
  std::string dpuctl;
  int nodes = 100;
  std::vector<std::string> configs;
  int reps = 5;
  std::string label = "small";
  std::string tsv;
  bool fleet = true, peer = true;
  std::string apply_extra;  // more arguments of dpuctl fleet apply (e.g. --no-validate)
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "fleet_bench: %s needs a value\n", s.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (s == "--dpuctl") a.dpuctl = next();
    else if (s == "--nodes") a.nodes = std::atoi(next().c_str());
    else if (s == "--config") a.configs.push_back(std::filesystem::absolute(next()).string());
    else if (s == "--reps") a.reps = std::atoi(next().c_str());
    else if (s == "--label") a.label = next();
    else if (s == "--tsv") a.tsv = next();
    else if (s == "--peer-only") a.fleet = false;
    else if (s == "--fleet-only") a.peer = false;
    else if (s == "--apply-arg") a.apply_extra += " " + shellQuote(next());
    else {
      std::fprintf(stderr,
                   "usage: fleet_bench --dpuctl BIN --nodes N --config A.json [--config B.json] "
                   "[--reps R] [--label L] [--tsv FILE] [--peer-only | --fleet-only] "
                   "[--apply-arg ARG]...\n");
      std::exit(2);
    }
  }
  if (a.dpuctl.empty() || a.configs.empty() || a.nodes < 1 || a.reps < 1) {
    std::fprintf(stderr, "fleet_bench: --dpuctl, --config and --nodes >= 1 are needed\n");
    std::exit(2);
  }
  return a;
}

struct FleetRep {
  double cli_s = 0, converge_s = 0, first_s = 0;
  std::map<std::string, double> requests;
  double watch_msgs = 0, events = 0, watchers = 0, window_s = 0;
};

// Applies `config` with dpuctl fleet apply and waits (watch on nodes/) until all `n` nodes
// report it synced. The version written is head + 1.
FleetRep fleetRep(const Args& a, fleet::EtcdClient& etcd, const fleet::FleetKeys& keys,
                  const std::string& endpoint, const std::string& url, const std::string& config,
                  const std::string& work) {
  FleetRep r;
  auto head = fleet::readHead(etcd, keys);
  if (!head.ok()) {
    std::fprintf(stderr, "fleet_bench: head: %s\n", std::string(head.status().message()).c_str());
    std::exit(1);
  }
  const uint64_t want = head->version + 1;
  auto rr = etcd.range(keys.nodesPrefix(), fleet::prefixEnd(keys.nodesPrefix()), 0, 1, true);
  fleet::EtcdClient::WatchSpec ws;
  ws.key = keys.nodesPrefix();
  ws.range_end = fleet::prefixEnd(keys.nodesPrefix());
  ws.start_revision = rr.ok() ? rr->revision + 1 : 0;
  ws.progress_notify = false;
  auto w = etcd.watch(ws);
  if (!w.ok()) {
    std::fprintf(stderr, "fleet_bench: watch: %s\n", std::string(w.status().message()).c_str());
    std::exit(1);
  }
  const EtcdMetrics before = scrape(url);
  const auto t0 = Clock::now();
  std::atomic<double> cli_s{0};
  std::atomic<int> cli_rc{-1};
  std::thread cli([&] {
    const std::string cmd = shellQuote(a.dpuctl) + " fleet --etcd " + endpoint + " --fleet " +
                            keys.fleet() + " apply " + shellQuote(config) + " --comment bench" + a.apply_extra + " >" +
                            work + "/apply.out 2>&1";
    cli_rc = runShell(cmd);
    cli_s = secondsSince(t0);
  });
  std::map<std::string, bool> synced;
  size_t done = 0;
  while (done < static_cast<size_t>(a.nodes)) {
    fleet::WatchBatch b = (*w)->next();
    if (b.ended) {
      std::fprintf(stderr, "fleet_bench: the nodes' watch ended: %s\n",
                   std::string(b.status.message()).c_str());
      std::exit(1);
    }
    for (const auto& e : b.events) {
      if (e.type != fleet::WatchEvent::Type::kPut) continue;
      v1::FleetNodeStatus s;
      if (!fleet::fromJson(e.kv.value, &s, e.kv.key).ok()) continue;
      if (s.state() == "refused") {
        std::fprintf(stderr, "fleet_bench: node %s refused version %lu: %s\n", s.node().c_str(),
                     static_cast<unsigned long>(want), s.last_error().message().c_str());
        std::exit(1);
      }
      if (s.applied_version() == want && s.state() == "synced" && !synced[s.node()]) {
        synced[s.node()] = true;
        if (++done == 1) r.first_s = secondsSince(t0);
      }
    }
  }
  r.converge_s = secondsSince(t0);
  cli.join();
  if (cli_rc != 0) {
    std::fprintf(stderr, "fleet_bench: dpuctl fleet apply exited %d:\n", cli_rc.load());
    runShell("cat " + work + "/apply.out >&2");
    std::exit(1);
  }
  r.cli_s = cli_s;
  const EtcdMetrics after = scrape(url);
  r.window_s = secondsSince(t0);
  for (const auto& [m, v] : after.handled) {
    const double d = v - (before.handled.count(m) ? before.handled.at(m) : 0);
    if (d > 0) r.requests[m] = d;
  }
  r.watch_msgs = after.watch_msgs - before.watch_msgs;
  r.events = after.events - before.events;
  r.watchers = after.watchers;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  char tmpl[] = "/tmp/dpu-fleet-bench.XXXXXX";
  const std::string work = ::mkdtemp(tmpl);
  std::printf("fleet_bench: %d nodes in this process (control side only: validate, compile, "
              "persist; no dataplane tables), config %s, %d reps\n",
              a.nodes, a.label.c_str(), a.reps);
  std::vector<double> cli, conv, first, seq, par;
  std::map<std::string, std::vector<double>> req_rate;
  double fanout = 0, watchers = 0;

  if (a.fleet) {
    test::EtcdProcess etcd_proc;
    etcd_proc.start();
    fleet::EtcdOptions eo;
    eo.endpoints = etcd_proc.endpoint();
    auto etcd = fleet::EtcdClient::create(eo);
    if (!etcd.ok()) return 1;
    while (!(*etcd)->status().ok()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const fleet::FleetKeys keys("bench");
    std::vector<std::unique_ptr<Node>> nodes;
    const auto ts = Clock::now();
    for (int i = 0; i < a.nodes; ++i) {
      nodes.push_back(makeNode(absl::StrCat(work, "/f", i)));
      startAgent(*nodes.back(), "bench", etcd_proc.endpoint(), i);
    }
    // Every node's status key present (the agents are connected and idle).
    for (;;) {
      auto r = (*etcd)->range(keys.nodesPrefix(), fleet::prefixEnd(keys.nodesPrefix()), 0, 0, true);
      if (r.ok() && r->count >= a.nodes) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::printf("  %d agents up and reporting in %.2f s\n", a.nodes, secondsSince(ts));
    for (int rep = 0; rep < a.reps; ++rep) {
      const std::string& cfg = a.configs[rep % a.configs.size()];
      FleetRep r = fleetRep(a, **etcd, keys, etcd_proc.endpoint(), etcd_proc.url(), cfg, work);
      std::string reqs;
      double total = 0;
      for (const auto& [m, v] : r.requests) {
        reqs += absl::StrCat(" ", m, "=", static_cast<int64_t>(v));
        total += v;
        req_rate[m].push_back(v / r.window_s);
      }
      req_rate["(all)"].push_back(total / r.window_s);
      std::printf("  fleet rep %d (%s): dpuctl fleet apply %.3f s, first node %.3f s, all %d "
                  "nodes %.3f s; etcd requests%s (%.0f/s over %.2f s), watch messages sent %.0f, "
                  "watchers %.0f\n",
                  rep + 1, std::filesystem::path(cfg).filename().c_str(), r.cli_s, r.first_s,
                  a.nodes, r.converge_s, reqs.c_str(), total / r.window_s, r.window_s,
                  r.watch_msgs, r.watchers);
      std::fflush(stdout);
      cli.push_back(r.cli_s);
      conv.push_back(r.converge_s);
      first.push_back(r.first_s);
      fanout = r.watch_msgs;
      watchers = r.watchers;
    }
    for (auto& n : nodes) n->agent->stop();
    nodes.clear();
  }

  if (a.peer) {
    std::vector<std::unique_ptr<Node>> nodes;
    for (int i = 0; i < a.nodes; ++i) {
      nodes.push_back(makeNode(absl::StrCat(work, "/p", i)));
      startServer(*nodes.back());
    }
    auto script = [&](const std::string& cfg, bool parallel) {
      std::string s;
      for (auto& n : nodes) {
        s += shellQuote(a.dpuctl) + " --timeout 0 --server " + shellQuote(n->server->address()) +
             " config apply --force " + shellQuote(cfg) + " >/dev/null" +
             (parallel ? " &\n" : " || exit 1\n");
      }
      if (parallel) s += "wait\n";
      std::ofstream(work + "/peer.sh") << s;
      return work + "/peer.sh";
    };
    for (int rep = 0; rep < a.reps; ++rep) {
      for (bool parallel : {false, true}) {
        // Sequential and parallel each apply the next config of the list (a real change).
        const std::string& cfg = a.configs[(2 * rep + (parallel ? 1 : 0)) % a.configs.size()];
        const std::string sh = script(cfg, parallel);
        const auto t0 = Clock::now();
        const int rc = runShell("/bin/sh " + shellQuote(sh));
        const double s = secondsSince(t0);
        if (rc != 0) {
          std::fprintf(stderr, "fleet_bench: the peer script failed (%d)\n", rc);
          return 1;
        }
        // Every node runs it (the script waited for every answer; check the versions moved).
        (parallel ? par : seq).push_back(s);
        std::printf("  peer rep %d (%s): %s, %d x dpuctl config apply: %.3f s\n", rep + 1,
                    std::filesystem::path(cfg).filename().c_str(),
                    parallel ? "parallel" : "sequential", a.nodes, s);
        std::fflush(stdout);
      }
    }
    for (auto& n : nodes) n->server->shutdown(std::chrono::milliseconds(200));
    nodes.clear();
  }

  std::printf("\nfleet_bench %s, %d nodes, median of %d:\n", a.label.c_str(), a.nodes, a.reps);
  if (a.fleet) {
    std::printf("  fleet: dpuctl fleet apply %.3f s; first node %.3f s; every node %.3f s\n",
                median(cli), median(first), median(conv));
    for (const auto& [m, v] : req_rate)
      std::printf("  etcd requests/s %s: %.0f\n", m.c_str(), median(v));
    std::printf("  watchers %.0f; watch messages sent in the last rep %.0f\n", watchers, fanout);
  }
  if (a.peer) {
    std::printf("  peer: %d x dpuctl config apply: sequential %.3f s, parallel %.3f s\n", a.nodes,
                median(seq), median(par));
  }
  if (a.fleet && a.peer) {
    std::printf("  ratio every-node fleet / peer: %.2fx sequential, %.2fx parallel\n",
                median(conv) / median(seq), median(conv) / median(par));
  }
  if (!a.tsv.empty()) {
    std::ofstream t(a.tsv, std::ios::app);
    if (a.fleet)
      t << a.label << "\t" << a.nodes << "\tfleet\t" << median(conv) << "\t" << median(cli) << "\n";
    if (a.peer) {
      t << a.label << "\t" << a.nodes << "\tpeer_sequential\t" << median(seq) << "\n";
      t << a.label << "\t" << a.nodes << "\tpeer_parallel\t" << median(par) << "\n";
    }
  }
  std::filesystem::remove_all(work);
  return 0;
}
