// Automatic removal of draining LB backends (control/api/lb_drain.h) on the real ConfigStore /
// ConfigManager and EventHub, with a fake dataplane reporting per-backend flow counts: idle
// removal needs two checks without flows, a flow in between restarts the count, the drain
// timeout removes a backend that still has flows, services without the option keep their
// draining backends, a backend back to active is forgotten (its timer restarts), and each
// removal is a new persisted config version and an "lb" event; a service's last backend is
// kept (draining) with a "keep" event.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "control/api/lb_drain.h"
#include "control/config/config_manager.h"
#include "control/config/config_store.h"
#include "rules/compiled/lb.h"
#include "tests/util/snapshot_plane.h"

namespace dpu::ctl {
namespace {

class FlowsPlane : public test::SnapshotPlane {
 public:
  std::vector<dp::LbBackendStats> lbBackendStats() const override {
    std::lock_guard<std::mutex> lock(mu);
    return stats;
  }
  void setFlows(uint64_t identity, uint64_t n) {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& s : stats) {
      if (s.identity == identity) {
        s.flows_active = n;
        return;
      }
    }
    dp::LbBackendStats s;
    s.identity = identity;
    s.flows_active = n;
    stats.push_back(s);
  }
  mutable std::mutex mu;
  std::vector<dp::LbBackendStats> stats;
};

constexpr uint64_t kSec = 1000000000ull;

class LbDrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("dpu_lb_drain_test." + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto store = ConfigStore::open((dir_ / "state").string(), nullptr);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    manager_ = std::make_unique<ConfigManager>(store_.get(), &plane_);
    EventHubOptions ho;
    ho.events_file = (dir_ / "events.jsonl").string();
    hub_ = std::make_unique<EventHub>(&plane_, ho);
    ASSERT_TRUE(hub_->start().ok());
    drainer_ = std::make_unique<LbDrainer>(manager_.get(), &plane_, hub_.get());
    v1::ApplianceConfig cfg;
    for (const char* id : {"web", "plain"}) {
      auto* s = cfg.mutable_lb()->add_services();
      s->set_id(id);
      s->add_dst(std::string(id) == "web" ? "192.0.2.10" : "192.0.2.20");
      s->set_table_size(251);
      if (std::string(id) == "web") {
        s->set_drain_remove_idle(true);
        s->set_drain_timeout_seconds(30);
      }
      for (int n = 1; n <= 3; ++n) {
        auto* b = s->add_backends();
        b->set_id("be" + std::to_string(n));
        b->set_mac("02:be:00:00:00:0" + std::to_string(n));
      }
    }
    auto r = manager_->apply(cfg, store_->version(), false, nullptr);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  void TearDown() override {
    drainer_.reset();
    hub_.reset();
    manager_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void setState(const std::string& svc, const std::string& be, v1::LbBackendState st) {
    auto r = manager_->update(
        [&](v1::ApplianceConfig& doc) {
          for (auto& s : *doc.mutable_lb()->mutable_services()) {
            if (s.id() != svc) continue;
            for (auto& b : *s.mutable_backends()) {
              if (b.id() == be) b.set_state(st);
            }
          }
          return absl::OkStatus();
        },
        manager_->version(), false, nullptr);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  uint64_t identity(const std::string& svc, const std::string& be) {
    auto v = manager_->lbView();
    EXPECT_TRUE(v.ok());
    for (const auto& s : v->compiled->services) {
      if (s->model.id != svc) continue;
      for (const auto& b : s->backends) {
        if (b.id == be) return b.identity;
      }
    }
    ADD_FAILURE() << svc << "/" << be;
    return 0;
  }
  std::vector<std::string> backends(const std::string& svc) {
    std::vector<std::string> out;
    for (const auto& s : store_->current().lb().services()) {
      if (s.id() != svc) continue;
      for (const auto& b : s.backends()) out.push_back(b.id());
    }
    return out;
  }
  std::vector<LbDrainer::Removal> check(uint64_t t) {
    auto r = drainer_->check(t);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : std::vector<LbDrainer::Removal>{};
  }
  std::string events() {
    hub_->stop();
    std::ifstream in(dir_ / "events.jsonl");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  std::filesystem::path dir_;
  FlowsPlane plane_;
  std::unique_ptr<ConfigStore> store_;
  std::unique_ptr<ConfigManager> manager_;
  std::unique_ptr<EventHub> hub_;
  std::unique_ptr<LbDrainer> drainer_;
};

TEST_F(LbDrainTest, IdleDrainingBackendIsRemovedAfterTwoChecksWithoutFlows) {
  setState("web", "be2", v1::LB_BACKEND_DRAINING);
  setState("plain", "be2", v1::LB_BACKEND_DRAINING);
  const uint64_t id = identity("web", "be2");
  plane_.setFlows(id, 3);
  EXPECT_TRUE(check(1 * kSec).empty()) << "flows still pinned";
  plane_.setFlows(id, 0);
  EXPECT_TRUE(check(2 * kSec).empty()) << "one check without flows is not enough";
  plane_.setFlows(id, 1);  // a flow pinned by a worker still on the old snapshot
  EXPECT_TRUE(check(3 * kSec).empty());
  plane_.setFlows(id, 0);
  EXPECT_TRUE(check(4 * kSec).empty());
  const uint64_t before = manager_->version();
  auto r = check(5 * kSec);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].service, "web");
  EXPECT_EQ(r[0].backend, "be2");
  EXPECT_EQ(r[0].reason, "idle");
  EXPECT_EQ(r[0].version, before + 1);
  EXPECT_EQ(manager_->version(), before + 1);
  EXPECT_EQ(backends("web"), (std::vector<std::string>{"be1", "be3"}));
  // The service without the option keeps its draining backend, however long.
  EXPECT_EQ(backends("plain"), (std::vector<std::string>{"be1", "be2", "be3"}));
  EXPECT_TRUE(check(1000 * kSec).empty());
  EXPECT_EQ(backends("plain").size(), 3u);
  // The compiled (published) service has the change too.
  auto v = manager_->lbView();
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->compiled->services[0]->backends.size(), 2u);
  std::string ev = events();
  EXPECT_NE(ev.find("\"action\":\"remove\",\"service\":\"web\",\"backend\":\"be2\""),
            std::string::npos)
      << ev;
  EXPECT_NE(ev.find("\"reason\":\"idle\""), std::string::npos) << ev;
}

TEST_F(LbDrainTest, DrainTimeoutRemovesABackendThatStillHasFlows) {
  setState("web", "be1", v1::LB_BACKEND_DRAINING);
  plane_.setFlows(identity("web", "be1"), 7);
  EXPECT_TRUE(check(100 * kSec).empty());  // the timer starts here
  EXPECT_TRUE(check(129 * kSec).empty());
  auto r = check(130 * kSec);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].reason, "timeout");
  EXPECT_EQ(r[0].flows_active, 7u);
  EXPECT_EQ(backends("web"), (std::vector<std::string>{"be2", "be3"}));
  std::string ev = events();
  EXPECT_NE(ev.find("\"reason\":\"timeout\",\"flows_active\":7"), std::string::npos) << ev;
}

TEST_F(LbDrainTest, ABackendBackToActiveIsForgottenAndItsTimerRestarts) {
  setState("web", "be3", v1::LB_BACKEND_DRAINING);
  plane_.setFlows(identity("web", "be3"), 2);
  EXPECT_TRUE(check(0).empty());
  setState("web", "be3", v1::LB_BACKEND_ACTIVE);
  EXPECT_TRUE(check(20 * kSec).empty());
  setState("web", "be3", v1::LB_BACKEND_DRAINING);
  EXPECT_TRUE(check(31 * kSec).empty()) << "drains again since 31 s, not since 0";
  EXPECT_TRUE(check(60 * kSec).empty());
  EXPECT_EQ(check(61 * kSec).size(), 1u);
}

TEST_F(LbDrainTest, TheLastBackendOfAServiceIsKeptDrainingNotRemoved) {
  // Removing a service's last backend takes an explicit allow_empty; the drainer has none.
  for (const char* be : {"be1", "be2", "be3"}) {
    setState("web", be, v1::LB_BACKEND_DRAINING);
    plane_.setFlows(identity("web", be), 0);
  }
  EXPECT_TRUE(check(1 * kSec).empty());
  auto r = check(2 * kSec);
  ASSERT_EQ(r.size(), 2u) << "two of the three go, the last one due stays";
  EXPECT_EQ(backends("web"), (std::vector<std::string>{"be3"}));
  for (uint64_t t = 3; t < 100; t += 10) EXPECT_TRUE(check(t * kSec).empty());
  EXPECT_EQ(backends("web"), (std::vector<std::string>{"be3"}));
  // Still draining: no slots, so no new flow goes to it.
  auto v = manager_->lbView();
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->compiled->services[0]->backends.size(), 1u);
  EXPECT_EQ(v->compiled->services[0]->backends[0].state, rules::LbBackendState::kDraining);
  std::string ev = events();
  const std::string keep =
      "\"action\":\"keep\",\"service\":\"web\",\"backend\":\"be3\"";
  ASSERT_NE(ev.find(keep), std::string::npos) << ev;
  EXPECT_EQ(ev.find(keep, ev.find(keep) + 1), std::string::npos) << "said once: " << ev;
  EXPECT_NE(ev.find("\"reason\":\"last_backend\",\"due\":\"idle\""), std::string::npos) << ev;
}

TEST_F(LbDrainTest, TheDrainTimeoutDoesNotRemoveTheLastBackendEither) {
  setState("web", "be1", v1::LB_BACKEND_DRAINING);
  plane_.setFlows(identity("web", "be1"), 4);
  EXPECT_TRUE(check(0).empty());
  ASSERT_EQ(check(31 * kSec).size(), 1u);  // be1 goes: be2, be3 remain
  setState("web", "be2", v1::LB_BACKEND_DRAINING);
  ASSERT_EQ(check(40 * kSec).size(), 0u);
  plane_.setFlows(identity("web", "be2"), 4);
  ASSERT_EQ(check(71 * kSec).size(), 1u);  // be2 goes: be3 remains
  setState("web", "be3", v1::LB_BACKEND_DRAINING);
  plane_.setFlows(identity("web", "be3"), 4);
  EXPECT_TRUE(check(80 * kSec).empty());
  EXPECT_TRUE(check(200 * kSec).empty()) << "timed out, but the last backend";
  EXPECT_EQ(backends("web"), (std::vector<std::string>{"be3"}));
  EXPECT_NE(events().find("\"due\":\"timeout\",\"flows_active\":4"), std::string::npos);
}

}  // namespace
}  // namespace dpu::ctl
