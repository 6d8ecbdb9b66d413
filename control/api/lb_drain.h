// --- lb --- Automatic removal of draining load-balancer backends.
//
// A service may ask for its draining backends (state LB_BACKEND_DRAINING) to be removed from
// the configuration on their own (LbServiceConfig.drain_remove_idle /
// drain_timeout_seconds):
//   idle     no flow is pinned to the backend on two checks in a row (the flow counters the
//            workers keep per backend identity; two checks so that a worker still on the
//            snapshot from before the drain cannot pin a flow between a check and the removal)
//   timeout  the backend has been draining for drain_timeout_seconds, whatever its flows
//            (they then follow the service's orphan policy, as after a flush)
// A removal is an ordinary config update through the ConfigManager (a new version, persisted,
// published; it loses against a concurrent change and is retried at the next check) and an
// "lb" event with action "remove" and the reason. A service's last backend is never removed
// (that takes an explicit allow_empty, which a drain does not carry): it stays draining (no
// new flows) and an "lb" event with action "keep" and reason "last_backend" says so once. The
// drain timer starts when the drainer
// first sees the backend draining (a restart of the appliance starts it again).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "control/api/event_hub.h"
#include "control/config/config_manager.h"
#include "dataplane/api/control.h"

namespace dpu::ctl {

// An "lb" event: what changed, on which backend, in which config version; `extra` is
// appended to the lb object (",\"key\":value..." or empty).
v1::Event lbEvent(const std::string& action, const std::string& svc, const std::string& backend,
                  uint64_t version, const std::string& extra);

class LbDrainer {
 public:
  // `events` may be null (no events).
  LbDrainer(ConfigManager* config, dp::DataplaneControl* plane, EventHub* events)
      : config_(config), plane_(plane), events_(events) {}
  ~LbDrainer() { stop(); }
  LbDrainer(const LbDrainer&) = delete;
  LbDrainer& operator=(const LbDrainer&) = delete;

  struct Removal {
    std::string service, backend;
    std::string reason;         // "idle" or "timeout"
    uint64_t flows_active = 0;  // flows still pinned (timeout)
    uint64_t version = 0;       // the config version that removed it
  };
  // One check at `now_ns` (a monotonic clock). Returns the backends it removed; empty when
  // none is due or the update lost a race with another change (retried at the next check).
  absl::StatusOr<std::vector<Removal>> check(uint64_t now_ns);

  // A thread that calls check() every `period` until stop().
  void start(std::chrono::milliseconds period);
  void stop();

 private:
  struct Watch {
    uint64_t identity = 0;
    uint64_t since_ns = 0;     // first seen draining
    uint32_t idle_checks = 0;  // consecutive checks with no flow pinned
    bool kept_reported = false;  // the "keep" (last backend) event went out for this drain
  };
  ConfigManager* config_;
  dp::DataplaneControl* plane_;
  EventHub* events_;
  std::map<std::pair<std::string, std::string>, Watch> watch_;  // (service, backend)
  std::mutex mu_;  // check() callers
  std::thread thread_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
};

}  // namespace dpu::ctl
