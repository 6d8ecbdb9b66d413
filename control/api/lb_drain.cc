// --- lb --- Automatic removal of draining backends (see lb_drain.h).
#include "control/api/lb_drain.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "control/app/summary.h"
#include "rules/compiled/lb.h"

namespace dpu::ctl {
namespace {

std::string jsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

}  // namespace

v1::Event lbEvent(const std::string& action, const std::string& svc, const std::string& backend,
                  uint64_t version, const std::string& extra) {
  int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  v1::Event ev;
  ev.set_timestamp_unix_ns(now);
  ev.set_type("lb");
  ev.set_config_version(version);
  ev.set_json(absl::StrCat("{\"timestamp\":\"", isoTime(uint64_t(now)),
                           "\",\"event_type\":\"lb\",\"lb\":{\"action\":\"", action,
                           "\",\"service\":\"", jsonEscape(svc), "\",\"backend\":\"",
                           jsonEscape(backend), "\",\"config_version\":", version, extra, "}}"));
  return ev;
}

absl::StatusOr<std::vector<LbDrainer::Removal>> LbDrainer::check(uint64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  auto view = config_->lbView();
  if (!view.ok()) return view.status();
  std::vector<Removal> due;
  std::set<std::pair<std::string, std::string>> seen;
  std::unordered_map<uint64_t, uint64_t> flows;
  bool have_stats = false;
  if (view->compiled) {
    for (const auto& svc : view->compiled->services) {
      const rules::LbService& m = svc->model;
      if (!m.drain_remove_idle && m.drain_timeout_s == 0) continue;
      for (const rules::CompiledLbBackend& b : svc->backends) {
        if (b.state != rules::LbBackendState::kDraining) continue;
        if (!have_stats) {
          for (const dp::LbBackendStats& s : plane_->lbBackendStats()) {
            flows[s.identity] += s.flows_active;
          }
          have_stats = true;
        }
        auto key = std::make_pair(m.id, b.id);
        seen.insert(key);
        Watch& w = watch_[key];
        if (w.identity != b.identity) w = Watch{b.identity, now_ns, 0};
        auto it = flows.find(b.identity);
        const uint64_t active = it == flows.end() ? 0 : it->second;
        w.idle_checks = active == 0 ? w.idle_checks + 1 : 0;
        if (m.drain_remove_idle && w.idle_checks >= 2) {
          due.push_back(Removal{m.id, b.id, "idle", 0, 0});
        } else if (m.drain_timeout_s != 0 &&
                   now_ns - w.since_ns >= uint64_t(m.drain_timeout_s) * 1000000000ull) {
          due.push_back(Removal{m.id, b.id, "timeout", active, 0});
        }
      }
    }
  }
  for (auto it = watch_.begin(); it != watch_.end();) {
    it = seen.count(it->first) ? std::next(it) : watch_.erase(it);
  }
  // Removing a service's last backend takes an explicit allow_empty (RemoveLbBackend); the
  // drainer has no such intent, so it never empties a service: when every backend of a
  // service is due, the last one due stays (draining: no slots, so no new flow; its pinned
  // flows keep going) and a "keep" event says so, once per drain.
  if (view->compiled) {
    for (const auto& svc : view->compiled->services) {
      size_t n_due = 0;
      for (const Removal& r : due) n_due += r.service == svc->model.id ? 1 : 0;
      if (n_due == 0 || n_due < svc->backends.size()) continue;
      auto last = std::find_if(due.rbegin(), due.rend(),
                               [&](const Removal& r) { return r.service == svc->model.id; });
      Watch& w = watch_[std::make_pair(last->service, last->backend)];
      if (!w.kept_reported) {
        w.kept_reported = true;
        std::fprintf(stderr,
                     "dpu-appliance: lb service '%s': draining backend '%s' is due for removal "
                     "(%s) but is the service's last backend: it stays, draining (remove it "
                     "with dpuctl lb remove --flush --allow-empty)\n",
                     last->service.c_str(), last->backend.c_str(), last->reason.c_str());
        if (events_) {
          events_->publish(lbEvent("keep", last->service, last->backend, view->version,
                                   absl::StrCat(",\"reason\":\"last_backend\",\"due\":\"",
                                                last->reason,
                                                "\",\"flows_active\":", last->flows_active)));
        }
      }
      due.erase(std::next(last).base());
    }
  }
  if (due.empty()) return due;
  // One update for all of them, against the version the decision was made on.
  auto mutate = [&](v1::ApplianceConfig& doc) -> absl::Status {
    for (const Removal& r : due) {
      for (auto& s : *doc.mutable_lb()->mutable_services()) {
        if (s.id() != r.service) continue;
        for (int i = 0; i < s.backends_size(); ++i) {
          if (s.backends(i).id() == r.backend) {
            s.mutable_backends()->DeleteSubrange(i, 1);
            break;
          }
        }
      }
    }
    return absl::OkStatus();
  };
  ApplyError err;
  auto applied = config_->update(mutate, view->version, false, &err);
  if (!applied.ok()) {
    // Another change got in first: decide again on the next check.
    if (applied.status().code() == absl::StatusCode::kAborted ||
        err.status.code() == absl::StatusCode::kAborted) {
      return std::vector<Removal>{};
    }
    return err.status.ok() ? applied.status() : err.status;
  }
  for (Removal& r : due) {
    r.version = applied->version;
    watch_.erase(std::make_pair(r.service, r.backend));
    if (events_) {
      events_->publish(lbEvent("remove", r.service, r.backend, r.version,
                               absl::StrCat(",\"reason\":\"", r.reason,
                                            "\",\"flows_active\":", r.flows_active)));
    }
  }
  return due;
}

void LbDrainer::start(std::chrono::milliseconds period) {
  stop();
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this, period] {
    std::unique_lock<std::mutex> lock(stop_mu_);
    while (!stop_cv_.wait_for(lock, period, [this] { return stopping_; })) {
      lock.unlock();
      uint64_t now = uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::steady_clock::now().time_since_epoch())
                                  .count());
      auto r = check(now);
      if (!r.ok()) {
        std::fprintf(stderr, "dpu-appliance: lb drain check: %s\n",
                     std::string(r.status().message()).c_str());
      }
      lock.lock();
    }
  });
}

void LbDrainer::stop() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace dpu::ctl
