// The node agent (docs/fleet.md "The node agent"): follows one fleet's policy in etcd and
// reports this node's status there.
//
// One thread follows ctl/: an initial Range, then a Watch from the next revision (progress
// notify, require-leader). A broken stream (etcd restarted or unreachable) resumes the watch
// from the last revision seen; a watch that ends compacted is followed by a full relist (the
// view is rebuilt from the Range: keys gone since are dropped). Both after a jittered backoff
// (full jitter, 0.5 s doubling to 30 s), so a fleet does not stampede etcd when it comes back. Each change of the version this node's group should run is fetched
// (manifest, document and files by hash, checked against their sha256), and applied through
// the hook: the appliance's own validate -> compile -> prepare -> persist -> publish. A version
// that fails is reported with its errors and not retried until the desired version changes (or
// the agent restarts); the node keeps what it ran.
//
// A second thread keeps the status key (nodes/<node>) alive with a lease and rewrites it on
// every change and every heartbeat. etcd unreachable: the node keeps forwarding on what it
// applied (the state directory's committed config; <state_dir>/fleet/state.json says which
// fleet version that is), reports it in GetStatus and metrics, and resyncs when etcd is back.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "control/fleet/etcd_client.h"
#include "control/fleet/fleet_store.h"
#include "proto/appliance.pb.h"
#include "proto/fleet.pb.h"

namespace dpu::fleet {

struct AgentOptions {
  std::string fleet;
  std::string node;               // default: the host name
  std::string group = "default";
  EtcdOptions etcd;
  std::string state_dir;          // the appliance's; the agent uses <state_dir>/fleet/
  int64_t lease_ttl_s = 10;       // a dead node's status disappears after this
  double heartbeat_s = 3;         // status rewritten at least this often (counters, last seen)
  double backoff_min_s = 0.5;
  double backoff_max_s = 30;
  std::string api_address;        // shown in the status
  std::string software;           // dpu-appliance version
};

struct AgentHooks {
  // Applies a fleet version's document (file paths already local). On failure fills `err`
  // (phase, message, errors) and returns the status. `config_version`: the node's committed
  // version after it.
  std::function<absl::Status(const v1::ApplianceConfig& doc, v1::FleetNodeError* err,
                             uint64_t* config_version)>
      apply;
  // Fills what the agent does not know (counters, config_version, health of the dataplane) into
  // a status about to be written. Optional.
  std::function<void(v1::FleetNodeStatus* s)> fill;
  // One line per notable change (applied, refused, lost etcd, relisted ...). Optional; default
  // stderr.
  std::function<void(const std::string& line)> log;
};

// What GetStatus and the metrics show about the agent.
struct AgentSnapshot {
  std::string fleet, node, group, state, endpoint;
  bool connected = false;               // the last etcd exchange succeeded
  int64_t last_contact_unix_ns = 0;     // the last successful etcd exchange
  std::string last_etcd_error;          // why it is not connected
  uint64_t desired_version = 0, applied_version = 0;
  int64_t applied_revision = 0;
  v1::FleetNodeError last_error;        // version 0 = none
  uint64_t relists = 0, applies = 0, refusals = 0, status_writes = 0, watch_events = 0;
};

class FleetAgent {
 public:
  // Checks the names, opens <state_dir>/fleet/ (reads state.json when it is this fleet's).
  static absl::StatusOr<std::unique_ptr<FleetAgent>> create(AgentOptions opts, AgentHooks hooks);
  ~FleetAgent();  // stop()
  // The node's gRPC address as bound (a --listen port 0 is known only then); before start().
  void setApiAddress(std::string address) { opts_.api_address = std::move(address); }
  void start();
  // Stops both threads and revokes the lease (the node's status goes at once).
  void stop();
  AgentSnapshot snapshot() const;
  // Blocks until the agent has applied `version` (or refused it, or stop): tests.
  bool waitApplied(uint64_t version, double timeout_s);
  const AgentOptions& options() const { return opts_; }

 private:
  FleetAgent(AgentOptions opts, AgentHooks hooks);
  void followLoop();
  void statusLoop();
  // Follows the fleet once: relist, reconcile, watch until the watch ends. Returns why.
  absl::Status followOnce();
  // Applies the desired version when it changed. Etcd errors are returned (retried after a
  // reconnect); refusals are recorded and return ok.
  absl::Status reconcile();
  absl::Status fetchAndApply(uint64_t version, int64_t set_at);
  absl::StatusOr<std::string> localFile(const v1::FleetFile& f);
  void persistState();
  void setConnected(bool ok, const absl::Status& why = absl::OkStatus());
  void markDirty();
  void log(const std::string& line);
  bool sleepFor(double s);  // false: stopping
  double nextBackoff();
  v1::FleetNodeStatus buildStatus();
  void gcBlobs(const v1::FleetVersion& keep_a, const v1::FleetVersion* keep_b);

  AgentOptions opts_;
  AgentHooks hooks_;
  FleetKeys keys_;
  std::string dir_;  // <state_dir>/fleet
  std::unique_ptr<EtcdClient> etcd_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool dirty_ = true;
  std::unique_ptr<EtcdWatch>* current_watch_ = nullptr;  // under mu_ (cancelled by stop)
  CtlView view_;               // follow thread only
  bool need_relist_ = true;    // follow thread only
  AgentSnapshot snap_;         // under mu_
  uint64_t refused_version_ = 0;
  v1::FleetVersion applied_manifest_, previous_manifest_;
  int64_t started_unix_ns_ = 0;
  int64_t lease_id_ = 0;       // status thread only
  double backoff_s_ = 0;
  std::mt19937_64 rng_;
  std::thread follow_, status_;
  bool started_ = false;
};

}  // namespace dpu::fleet
