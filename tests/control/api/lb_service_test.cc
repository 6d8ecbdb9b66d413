// The LB RPCs (control/api/lb_service.cc) called in-process on the real ConfigStore /
// ConfigManager with a minimal fake dataplane that keeps the published snapshot and reports
// per-backend counters: add / remove (drain, flush with rehash or reset) / set, the errors,
// the listing (table slots, counters by backend identity), and that only the service that
// changed gets a new compiled object.
#include <gtest/gtest.h>

#include <filesystem>

#include "control/api/appliance_service.h"
#include "control/config/config_manager.h"
#include "control/config/config_store.h"
#include "tests/util/snapshot_plane.h"

namespace dpu::ctl {
namespace {

class LbPlane : public test::SnapshotPlane {
 public:
  std::vector<dp::LbBackendStats> lbBackendStats() const override { return stats; }
  std::shared_ptr<const rules::CompiledLb> lb() const {
    return withCurrent([](const rules::Snapshot* cur) {
      return cur ? cur->lb : std::shared_ptr<const rules::CompiledLb>();
    });
  }
  std::vector<dp::LbBackendStats> stats;
};

v1::LbBackendConfig backend(int n) {
  v1::LbBackendConfig b;
  b.set_id("be" + std::to_string(n));
  b.set_ipv4("10.9.0." + std::to_string(n));
  b.set_mac("02:be:00:00:00:0" + std::to_string(n));
  return b;
}

class LbServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("dpu_lb_api_test." + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    auto store = ConfigStore::open(dir_.string(), nullptr);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    manager_ = std::make_unique<ConfigManager>(store_.get(), &plane_);
    service_ = std::make_unique<ApplianceService>(manager_.get(), &plane_, nullptr,
                                                  ServiceOptions{dir_.string()});
    v1::ApplianceConfig cfg;
    for (const char* id : {"web", "dns"}) {
      auto* s = cfg.mutable_lb()->add_services();
      s->set_id(id);
      s->add_dst(std::string(id) == "web" ? "192.0.2.10" : "192.0.2.53");
      for (int n = 1; n <= 3; ++n) *s->add_backends() = backend(n);
    }
    auto r = manager_->apply(cfg, store_->version(), false, nullptr);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  void TearDown() override {
    service_.reset();
    manager_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  v1::ListLbServicesResponse list() {
    v1::ListLbServicesResponse r;
    EXPECT_TRUE(service_->ListLbServices(nullptr, nullptr, &r).ok());
    return r;
  }
  const v1::LbServiceConfig& web() { return store_->current().lb().services(0); }

  std::filesystem::path dir_;
  LbPlane plane_;
  std::unique_ptr<ConfigStore> store_;
  std::unique_ptr<ConfigManager> manager_;
  std::unique_ptr<ApplianceService> service_;
};

TEST_F(LbServiceTest, AddListAndErrors) {
  v1::AddLbBackendRequest add;
  add.set_service_id("web");
  *add.mutable_backend() = backend(4);
  add.set_force(true);
  v1::ApplyConfigResponse resp;
  ASSERT_TRUE(service_->AddLbBackend(nullptr, &add, &resp).ok());
  EXPECT_EQ(web().backends_size(), 4);
  auto l = list();
  ASSERT_EQ(l.services_size(), 2);
  const auto& s = l.services(0);
  EXPECT_EQ(s.table_size(), 65537u);
  ASSERT_EQ(s.backends_size(), 4);
  uint32_t slots = 0;
  for (const auto& b : s.backends()) {
    EXPECT_GT(b.table_slots(), 15000u);
    slots += b.table_slots();
  }
  EXPECT_EQ(slots, 65537u);
  EXPECT_EQ(s.backends(3).backend().ipv4(), "10.9.0.4");
  // Duplicate id, unknown service, invalid backend (no MAC in mode L2: the field is named).
  EXPECT_EQ(service_->AddLbBackend(nullptr, &add, &resp).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);
  add.set_service_id("nope");
  EXPECT_EQ(service_->AddLbBackend(nullptr, &add, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  add.set_service_id("web");
  add.mutable_backend()->set_id("be5");
  add.mutable_backend()->clear_mac();
  grpc::Status st = service_->AddLbBackend(nullptr, &add, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("lb.services[0].backends[4].mac"), std::string::npos)
      << st.error_message();
  EXPECT_EQ(web().backends_size(), 4) << "nothing applied";
}

TEST_F(LbServiceTest, DrainThenFlushWithReset) {
  v1::RemoveLbBackendRequest rm;
  rm.set_service_id("web");
  rm.set_backend_id("be2");
  rm.set_force(true);
  v1::ApplyConfigResponse resp;
  ASSERT_TRUE(service_->RemoveLbBackend(nullptr, &rm, &resp).ok());  // default: drain
  ASSERT_EQ(web().backends_size(), 3);
  EXPECT_EQ(web().backends(1).state(), v1::LB_BACKEND_DRAINING);
  auto l = list();
  EXPECT_EQ(l.services(0).backends(1).table_slots(), 0u);
  EXPECT_EQ(l.services(0).backends(1).backend().state(), v1::LB_BACKEND_DRAINING);
  rm.set_mode(v1::LB_REMOVE_FLUSH);
  rm.set_flows(v1::LB_ORPHANS_RESET);
  ASSERT_TRUE(service_->RemoveLbBackend(nullptr, &rm, &resp).ok());
  ASSERT_EQ(web().backends_size(), 2);
  EXPECT_EQ(web().orphans(), v1::LB_ORPHANS_RESET);
  EXPECT_EQ(plane_.lb()->services[0]->orphans, rules::LbOrphanPolicy::kReset);
  EXPECT_EQ(service_->RemoveLbBackend(nullptr, &rm, &resp).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

// Issue 18.3: flushing a service's last backend needs allow_empty; a flush without RESET
// makes the service re-hash its orphans (even one that reset them before).
TEST_F(LbServiceTest, FlushOfTheLastBackendNeedsAllowEmpty) {
  v1::RemoveLbBackendRequest rm;
  rm.set_service_id("web");
  rm.set_mode(v1::LB_REMOVE_FLUSH);
  rm.set_flows(v1::LB_ORPHANS_RESET);
  rm.set_force(true);
  v1::ApplyConfigResponse resp;
  for (const char* id : {"be1", "be2"}) {
    rm.set_backend_id(id);
    ASSERT_TRUE(service_->RemoveLbBackend(nullptr, &rm, &resp).ok()) << id;
  }
  EXPECT_EQ(web().orphans(), v1::LB_ORPHANS_RESET);
  rm.set_backend_id("be3");
  rm.set_flows(v1::LB_ORPHANS_REHASH);
  grpc::Status st = service_->RemoveLbBackend(nullptr, &rm, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("last backend"), std::string::npos) << st.error_message();
  EXPECT_NE(st.error_message().find("allow_empty"), std::string::npos) << st.error_message();
  ASSERT_EQ(web().backends_size(), 1) << "nothing applied";
  EXPECT_EQ(web().orphans(), v1::LB_ORPHANS_RESET);
  rm.set_allow_empty(true);
  ASSERT_TRUE(service_->RemoveLbBackend(nullptr, &rm, &resp).ok());
  EXPECT_EQ(web().backends_size(), 0);
  EXPECT_EQ(web().orphans(), v1::LB_ORPHANS_REHASH) << "--flush without --reset: re-hash";
  ASSERT_TRUE(plane_.lb());
  EXPECT_TRUE(plane_.lb()->services[0]->backends.empty());
  // Draining the last backend (it stays) needs no flag.
  rm.set_service_id("dns");
  rm.set_mode(v1::LB_REMOVE_DRAIN);
  rm.set_allow_empty(false);
  for (const char* id : {"be1", "be2", "be3"}) {
    rm.set_backend_id(id);
    EXPECT_TRUE(service_->RemoveLbBackend(nullptr, &rm, &resp).ok()) << id;
  }
}

TEST_F(LbServiceTest, SetWeightAndStateRebuildsOnlyThatService) {
  auto before = plane_.lb();
  ASSERT_TRUE(before);
  v1::SetLbBackendRequest set;
  set.set_service_id("dns");
  set.set_backend_id("be1");
  set.set_weight(2);
  set.set_force(true);
  v1::ApplyConfigResponse resp;
  ASSERT_TRUE(service_->SetLbBackend(nullptr, &set, &resp).ok());
  auto after = plane_.lb();
  EXPECT_EQ(after->services[0].get(), before->services[0].get()) << "web unchanged: same object";
  EXPECT_NE(after->services[1].get(), before->services[1].get());
  auto l = list();
  EXPECT_NEAR(l.services(1).backends(0).table_slots(), 65537 / 2, 100);
  set.set_weight(70000);
  grpc::Status st = service_->SetLbBackend(nullptr, &set, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("lb.services[1].backends[0].weight"), std::string::npos);
  set.clear_weight();
  set.set_state(v1::LB_BACKEND_DOWN);
  ASSERT_TRUE(service_->SetLbBackend(nullptr, &set, &resp).ok());
  EXPECT_EQ(list().services(1).backends(0).table_slots(), 0u);
  set.clear_state();
  EXPECT_EQ(service_->SetLbBackend(nullptr, &set, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(LbServiceTest, ListShowsCountersByBackendIdentity) {
  auto lb = plane_.lb();
  dp::LbBackendStats s;
  s.identity = lb->services[0]->backends[2].identity;
  s.packets = 10;
  s.bytes = 1000;
  s.flows_active = 3;
  s.flows_total = 4;
  plane_.stats = {s};
  auto l = list();
  EXPECT_EQ(l.services(0).backends(2).packets(), 10u);
  EXPECT_EQ(l.services(0).backends(2).bytes(), 1000u);
  EXPECT_EQ(l.services(0).backends(2).active_flows(), 3u);
  EXPECT_EQ(l.services(0).backends(2).total_flows(), 4u);
  EXPECT_EQ(l.services(0).backends(1).packets(), 0u);
  EXPECT_EQ(l.services(1).backends(2).packets(), 0u) << "same id, other service: other identity";
}

// Services are created and deleted through the API (issue 19.3): position (index, before,
// after), duplicates, validation of the whole document, versions, and the other service's
// compiled object shared.
TEST_F(LbServiceTest, CreateAndDeleteServices) {
  auto web_before = plane_.lb()->services[0];
  v1::CreateLbServiceRequest cr;
  cr.mutable_service()->set_id("api");
  cr.mutable_service()->add_dst("192.0.2.80");
  cr.mutable_service()->set_protocol("tcp");
  cr.mutable_service()->set_dst_ports("8080");
  cr.set_before_id("dns");
  cr.set_expected_version(store_->version());
  v1::ApplyConfigResponse resp;
  grpc::Status st = service_->CreateLbService(nullptr, &cr, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.version(), store_->version());
  ASSERT_EQ(store_->current().lb().services_size(), 3);
  EXPECT_EQ(store_->current().lb().services(1).id(), "api");
  EXPECT_EQ(plane_.lb()->services[0], web_before) << "the unchanged service is not rebuilt";
  auto l = list();
  ASSERT_EQ(l.services_size(), 3);
  EXPECT_EQ(l.services(1).service().id(), "api");
  EXPECT_EQ(l.services(1).backends_size(), 0);
  // A backend added to the new service.
  v1::AddLbBackendRequest add;
  add.set_service_id("api");
  *add.mutable_backend() = backend(7);
  add.set_force(true);
  ASSERT_TRUE(service_->AddLbBackend(nullptr, &add, &resp).ok());
  EXPECT_EQ(list().services(1).backends_size(), 1);

  // The same id again: ALREADY_EXISTS; index past the end and an invalid service:
  // INVALID_ARGUMENT (the latter naming the field); stale version: ABORTED.
  cr.set_force(true);
  EXPECT_EQ(service_->CreateLbService(nullptr, &cr, &resp).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);
  cr.mutable_service()->set_id("new");
  cr.set_index(9);
  EXPECT_EQ(service_->CreateLbService(nullptr, &cr, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  cr.set_after_id("nope");
  EXPECT_EQ(service_->CreateLbService(nullptr, &cr, &resp).error_code(),
            grpc::StatusCode::NOT_FOUND);
  cr.clear_position();
  cr.mutable_service()->clear_dst();
  cr.mutable_service()->add_dst("not-an-address");
  st = service_->CreateLbService(nullptr, &cr, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("lb.services[3]"), std::string::npos) << st.error_message();
  EXPECT_FALSE(st.error_details().empty()) << "ConfigErrors in the details";
  cr.set_force(false);
  cr.set_expected_version(1);
  EXPECT_EQ(service_->CreateLbService(nullptr, &cr, &resp).error_code(), grpc::StatusCode::ABORTED);
  cr.set_expected_version(store_->version());
  cr.mutable_service()->clear_id();
  EXPECT_EQ(service_->CreateLbService(nullptr, &cr, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_EQ(store_->current().lb().services_size(), 3);

  v1::DeleteLbServiceRequest del;
  del.set_id("api");
  del.set_expected_version(store_->version());
  ASSERT_TRUE(service_->DeleteLbService(nullptr, &del, &resp).ok());
  ASSERT_EQ(store_->current().lb().services_size(), 2);
  EXPECT_EQ(store_->current().lb().services(1).id(), "dns");
  EXPECT_EQ(list().services_size(), 2);
  del.set_force(true);
  EXPECT_EQ(service_->DeleteLbService(nullptr, &del, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  // Created first.
  cr.mutable_service()->set_id("first");
  cr.mutable_service()->clear_dst();
  cr.mutable_service()->add_dst("192.0.2.99");
  cr.set_index(0);
  cr.set_force(true);
  ASSERT_TRUE(service_->CreateLbService(nullptr, &cr, &resp).ok());
  EXPECT_EQ(store_->current().lb().services(0).id(), "first");
}

}  // namespace
}  // namespace dpu::ctl
