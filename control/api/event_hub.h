// The event pump: one thread drains the dataplane event rings (DataplaneControl::
// drainEvents) every ~20 ms and fans each event out to the subscribers of WatchEvents, plus
// an optional JSON-lines file (`run --events`). It keeps draining when nobody listens, so
// worker rings never fill because of the control plane.
//
// Each subscriber owns a bounded queue (its buffer_size). The pump never waits for a
// subscriber: when a queue is full the event is dropped for that subscriber only and
// counted; the next event that subscriber receives carries the count in `lost`.
//
// Control-plane events ("config" after each successful apply) are handed to the pump with
// publish(); the pump delivers them in the same way (publish() never blocks either).
//
// Ownership: the hub owns the pump thread, the file and the subscriber list; a subscription
// is shared by the hub and the RPC handler that reads it (shared_ptr).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "control/config/config_manager.h"
#include "control/events/event_log.h"
#include "dataplane/api/control.h"
#include "proto/appliance_api.pb.h"

namespace dpu::ctl {

// The dataplane event as the API shows it; wall_offset_ns turns event times (TSC based in
// live mode) into Unix time.
// `names` (optional) names the rule behind the event (see ruleLabel).
v1::Event toApiEvent(const dp::Event& e, int64_t wall_offset_ns,
                     const dp::DataplaneControl* names = nullptr);
// A "config" event: a new configuration was committed and published.
v1::Event configEvent(uint64_t version, uint32_t generation, int64_t now_unix_ns);
// The same with the apply's phase durations (ms) and warning count in the JSON.
v1::Event configEvent(const ApplyResult& r, int64_t now_unix_ns);
// --- ops --- A "config" event with result "refused": the version it was based on, the phase
// that refused it, the status code and message, the error count and the first
// kRefusedErrorsShown errors (in `config` and in the JSON line).
inline constexpr size_t kRefusedErrorsShown = 5;
inline constexpr size_t kRefusedMessageMax = 1024;
v1::Event refusedConfigEvent(const RefusedApply& r, int64_t now_unix_ns);

class EventSubscription {
 public:
  EventSubscription(size_t capacity, std::vector<std::string> types);

  // Waits up to `timeout` for the next event. False on timeout or when closed (and empty).
  bool next(v1::Event* out, std::chrono::milliseconds timeout);
  bool closed() const;
  // Events dropped for this subscriber because its queue was full (all time).
  uint64_t lostTotal() const;
  // Events delivered into the queue (all time).
  uint64_t queuedTotal() const;
  size_t capacity() const { return capacity_; }

 private:
  friend class EventHub;
  struct Item {
    std::shared_ptr<const v1::Event> ev;
    uint64_t lost_before;  // events dropped for this subscriber just before this one
  };
  bool wants(const std::string& type) const;
  void offer(const std::shared_ptr<const v1::Event>& ev);  // never blocks on the reader
  void close();

  const size_t capacity_;
  const std::vector<std::string> types_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  uint64_t lost_pending_ = 0;
  uint64_t lost_total_ = 0;
  uint64_t queued_total_ = 0;
  bool closed_ = false;
};

struct EventHubOptions {
  int64_t wall_offset_ns = 0;          // added to dataplane event times
  std::chrono::milliseconds period{20};
  std::string events_file;             // optional JSON lines (appended, rotated by size)
  uint64_t events_max_bytes = 64ull << 20;  // rotate the file at this size (0 = never)
  uint32_t events_keep = 4;            // rotated files kept (FILE.1 .. FILE.<keep>)
  uint32_t max_per_tick = 65536;       // events drained per pump tick at most
};

class EventHub {
 public:
  static constexpr size_t kDefaultBuffer = 4096;
  static constexpr size_t kMaxBuffer = 1u << 20;

  EventHub(dp::DataplaneControl* plane, EventHubOptions opts);
  ~EventHub();
  EventHub(const EventHub&) = delete;
  EventHub& operator=(const EventHub&) = delete;

  // Opens the events file (if any) and starts the pump thread.
  absl::Status start();
  // Stops the pump, drains the rings one last time (call after the workers stopped to get
  // their final events) and closes every subscription. Idempotent.
  void stop();

  // buffer 0 = kDefaultBuffer; types empty = all.
  std::shared_ptr<EventSubscription> subscribe(size_t buffer, std::vector<std::string> types);
  void unsubscribe(const std::shared_ptr<EventSubscription>& sub);
  size_t subscriberCount() const;

  // Queues a control-plane event for the pump (non-blocking).
  void publish(v1::Event ev);

  // Dataplane events drained so far (all, subscribed or not).
  uint64_t drained() const { return drained_.load(std::memory_order_relaxed); }
  // Pump ticks so far (tests: wait until the pump has run after an action).
  uint64_t ticks() const { return ticks_.load(std::memory_order_acquire); }

  struct Stats {
    uint64_t dataplane_events = 0, control_events = 0;
    EventLogStats file;
    uint64_t subscribers = 0, subscriber_lost = 0;
  };
  Stats stats() const;
  // Asks the pump to reopen the events file (after logrotate moved it; SIGHUP).
  void reopenFile() { reopen_.store(true); }

 private:
  void run();
  void tick();  // one drain + fan-out; pump thread (or stop() after it joined)
  void deliver(const std::shared_ptr<const v1::Event>& ev,
               const std::vector<std::shared_ptr<EventSubscription>>& subs);

  dp::DataplaneControl* plane_;
  EventHubOptions opts_;
  std::unique_ptr<EventLog> file_;
  std::atomic<bool> reopen_{false};
  std::atomic<uint64_t> control_events_{0};
  uint64_t lost_by_gone_ = 0;  // lost by subscriptions already removed (under mu_)
  std::thread thread_;
  std::atomic<bool> running_{false};
  std::atomic<uint64_t> drained_{0};
  std::atomic<uint64_t> ticks_{0};

  mutable std::mutex mu_;  // subs_, injected_, wake_
  std::condition_variable cv_;
  bool wake_ = false;
  std::vector<std::shared_ptr<EventSubscription>> subs_;
  std::vector<v1::Event> injected_;
};

}  // namespace dpu::ctl
