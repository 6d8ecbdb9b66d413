#include "control/config/config_manager.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "control/config/config_loader.h"
#include "rules/compile/yara_translate.h"

namespace dpu::ctl {
namespace {

namespace fs = std::filesystem;

// Records every publish; at publish time it also reads the committed file, to check that
// the manager persisted before it published.
class FakePlane : public dp::DataplaneControl {
 public:
  struct Published {
    uint32_t generation;
    uint64_t config_version;
    rules::DataplaneSettings dataplane;
    uint64_t version_on_disk;
  };

  explicit FakePlane(std::string config_path) : config_path_(std::move(config_path)) {}

  absl::StatusOr<std::unique_ptr<dp::PreparedSnapshot>> prepare(
      std::unique_ptr<rules::Snapshot> next) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++prepares_;
      if (!prepare_error_.ok()) return prepare_error_;
    }
    auto p = std::make_unique<dp::PreparedSnapshot>();
    p->snap = std::move(next);
    return p;
  }
  uint32_t publish(std::unique_ptr<dp::PreparedSnapshot> prepared) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::unique_ptr<rules::Snapshot> next = std::move(prepared->snap);
    auto disk = loadConfigFile(config_path_);
    uint32_t gen = ++generation_;
    next->generation = gen;
    published_.push_back({gen, next->config_version, next->dataplane,
                          disk.ok() ? disk->version() : 0});
    current_ = std::move(next);
    return gen;
  }
  std::vector<dp::RuleCounters> ruleCounters() const override { return {}; }
  uint32_t currentGeneration() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return generation_;
  }
  dp::CountersSnapshot counters() const override { return {}; }
  std::vector<dp::WorkerInfo> workers() const override { return {}; }
  std::vector<dp::PortInfo> ports() const override { return {}; }
  uint32_t drainEvents(const std::function<void(const dp::Event&)>&, uint32_t) override {
    return 0;
  }
  dp::ExplainResult explain(const uint8_t*, uint32_t, uint8_t) const override { return {}; }

  std::vector<Published> published() const {
    std::lock_guard<std::mutex> lock(mu_);
    return published_;
  }
  // The next prepare() calls fail with `st` (e.g. a GeoIP database that does not open).
  void failPrepare(absl::Status st) {
    std::lock_guard<std::mutex> lock(mu_);
    prepare_error_ = std::move(st);
  }
  int prepares() const {
    std::lock_guard<std::mutex> lock(mu_);
    return prepares_;
  }
  std::shared_ptr<const rules::CompiledDpi> currentDpi() const {
    std::lock_guard<std::mutex> lock(mu_);
    return current_ ? current_->dpi : nullptr;
  }

 private:
  absl::Status prepare_error_;
  int prepares_ = 0;
  std::string config_path_;
  mutable std::mutex mu_;
  uint32_t generation_ = 0;
  std::vector<Published> published_;
  std::unique_ptr<rules::Snapshot> current_;
};

v1::ApplianceConfig withUdpTimeout(uint32_t s) {
  v1::ApplianceConfig c;
  c.mutable_dataplane()->mutable_timeouts()->set_udp_s(s);
  return c;
}

class ConfigManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = fs::temp_directory_path().string() + "/config_manager_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr) << std::strerror(errno);
    root_ = tmpl;
    state_ = root_ + "/state";
  }
  void TearDown() override {
    mgr_.reset();
    plane_.reset();
    store_.reset();
    for (auto it = mounts_.rbegin(); it != mounts_.rend(); ++it) ::umount2(it->c_str(), MNT_DETACH);
    std::error_code ec;
    for (auto& e : fs::recursive_directory_iterator(root_, ec)) {
      if (e.is_directory()) fs::permissions(e.path(), fs::perms::owner_all, ec);
    }
    fs::remove_all(root_, ec);
  }

  void start(const v1::ApplianceConfig* seed = nullptr, bool with_plane = true) {
    auto store = ConfigStore::open(state_, seed);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    if (with_plane) plane_ = std::make_unique<FakePlane>(store_->path());
    mgr_ = std::make_unique<ConfigManager>(store_.get(), plane_.get());
  }

  v1::ApplianceConfig onDisk() {
    auto c = loadConfigFile(state_ + "/config.json");
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : v1::ApplianceConfig();
  }

  size_t publishes() const { return plane_ ? plane_->published().size() : 0; }

  std::string root_, state_;
  std::vector<std::string> mounts_;
  std::unique_ptr<ConfigStore> store_;
  std::unique_ptr<FakePlane> plane_;
  std::unique_ptr<ConfigManager> mgr_;
};

TEST_F(ConfigManagerTest, ApplyCommitsTheNextVersionAndPublishesOnce) {
  start();
  ASSERT_EQ(mgr_->version(), 1u);
  ApplyError err;
  auto r = mgr_->apply(withUdpTimeout(30), 1, false, &err);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(err.status.ok());
  EXPECT_EQ(r->version, 2u);
  EXPECT_EQ(r->generation, 1u);
  EXPECT_GE(r->validate_ms, 0.0);
  EXPECT_GE(r->compile_ms, 0.0);
  EXPECT_GT(r->persist_ms, 0.0);
  EXPECT_GE(r->publish_ms, 0.0);
  EXPECT_TRUE(r->warnings.empty());
  EXPECT_EQ(mgr_->version(), 2u);
  EXPECT_EQ(mgr_->current().version(), 2u);
  EXPECT_EQ(mgr_->current().dataplane().timeouts().udp_s(), 30u);
  EXPECT_EQ(onDisk().version(), 2u);
  EXPECT_EQ(onDisk().dataplane().timeouts().udp_s(), 30u);

  auto pubs = plane_->published();
  ASSERT_EQ(pubs.size(), 1u);
  EXPECT_EQ(pubs[0].generation, 1u);
  EXPECT_EQ(pubs[0].config_version, 2u);
  EXPECT_EQ(pubs[0].dataplane.udp_s, 30u);
  EXPECT_EQ(pubs[0].dataplane.tcp_syn_s, 60u);  // defaults filled in
  EXPECT_EQ(pubs[0].version_on_disk, 2u) << "published before it was persisted";

  auto r2 = mgr_->apply(withUdpTimeout(31), 2, false, nullptr);
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ(r2->version, 3u);
  EXPECT_EQ(r2->generation, 2u);
  EXPECT_EQ(publishes(), 2u);
}

TEST_F(ConfigManagerTest, CompileCurrentCarriesTheCommittedVersion) {
  v1::ApplianceConfig seed = withUdpTimeout(40);
  seed.mutable_dataplane()->set_non_ip(v1::DROP);
  start(&seed);
  ASSERT_TRUE(mgr_->apply(withUdpTimeout(41), 1, false, nullptr).ok());
  auto snap = mgr_->compileCurrent();
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ((*snap)->config_version, 2u);
  EXPECT_EQ((*snap)->dataplane.udp_s, 41u);
  EXPECT_EQ((*snap)->dataplane.non_ip, rules::Policy::kForward);  // whole-document apply
}

TEST_F(ConfigManagerTest, CompileCurrentRejectsAnInvalidCommittedDocument) {
  // A hand-edited state file: parses, but is out of range.
  ASSERT_EQ(::mkdir(state_.c_str(), 0700), 0);
  {
    std::FILE* f = std::fopen((state_ + "/config.json").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(R"({"version": "7", "dataplane": {"flow_table": {"capacity_per_worker": 5}}})", f);
    std::fclose(f);
  }
  start();
  auto snap = mgr_->compileCurrent();
  ASSERT_FALSE(snap.ok());
  EXPECT_EQ(snap.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(snap.status().message().find(state_ + "/config.json (version 7)"), std::string::npos)
      << snap.status();
  EXPECT_NE(snap.status().message().find("dataplane.flow_table.capacity_per_worker"),
            std::string::npos)
      << snap.status();
}

TEST_F(ConfigManagerTest, VersionMismatchIsAbortedAndChangesNothing) {
  start();
  ASSERT_TRUE(mgr_->apply(withUdpTimeout(30), 1, false, nullptr).ok());
  ASSERT_TRUE(mgr_->apply(withUdpTimeout(31), 2, false, nullptr).ok());
  ApplyError err;
  auto r = mgr_->apply(withUdpTimeout(99), 1, false, &err);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(r.status().message(), "config version moved: expected 1, committed 3");
  EXPECT_EQ(err.status, r.status());
  EXPECT_TRUE(err.errors.empty());

  bool mutated = false;
  auto u = mgr_->update(
      [&](v1::ApplianceConfig& c) {
        mutated = true;
        return absl::OkStatus();
      },
      0, false, &err);
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(u.status().message(), "config version moved: expected 0, committed 3");
  EXPECT_FALSE(mutated);

  EXPECT_EQ(publishes(), 2u);
  EXPECT_EQ(mgr_->version(), 3u);
  EXPECT_EQ(onDisk().version(), 3u);
  EXPECT_EQ(onDisk().dataplane().timeouts().udp_s(), 31u);
}

TEST_F(ConfigManagerTest, InvalidConfigListsEveryErrorAndChangesNothing) {
  start();
  v1::ApplianceConfig bad = withUdpTimeout(30);
  bad.mutable_dataplane()->mutable_flow_table()->set_capacity_per_worker(5);
  bad.mutable_dataplane()->mutable_flow_table()->set_aging_slice(5000);
  bad.mutable_dataplane()->mutable_fragments()->set_max_fragments(1000);
  ApplyError err;
  auto r = mgr_->apply(bad, 1, false, &err);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(r.status().message());
  EXPECT_NE(msg.find("3 errors"), std::string::npos) << msg;
  for (const char* f : {"dataplane.flow_table.capacity_per_worker: 5 is out of range",
                        "dataplane.flow_table.aging_slice: 5000 is out of range",
                        "dataplane.fragments.max_fragments: 1000 is out of range"}) {
    EXPECT_NE(msg.find(f), std::string::npos) << f << " missing from: " << msg;
  }
  EXPECT_EQ(err.status, r.status());
  ASSERT_EQ(err.errors.size(), 3u);
  std::set<std::string> fields;
  for (const auto& e : err.errors) fields.insert(e.field);
  EXPECT_EQ(fields, (std::set<std::string>{"dataplane.flow_table.capacity_per_worker",
                                           "dataplane.flow_table.aging_slice",
                                           "dataplane.fragments.max_fragments"}));

  EXPECT_EQ(publishes(), 0u);
  EXPECT_EQ(mgr_->version(), 1u);
  EXPECT_EQ(onDisk().version(), 1u);
  EXPECT_FALSE(onDisk().has_dataplane());

  // validate() gives the same errors without committing anything.
  auto errors = mgr_->validate(bad);
  EXPECT_EQ(errors.size(), 3u);
  EXPECT_TRUE(mgr_->validate(withUdpTimeout(30)).empty());
  EXPECT_EQ(mgr_->version(), 1u);
  EXPECT_EQ(publishes(), 0u);
}

TEST_F(ConfigManagerTest, UpdateAppliesTheMutationAndKeepsEverythingElse) {
  start();
  v1::ApplianceConfig base = withUdpTimeout(30);
  base.mutable_dataplane()->set_non_ip(v1::DROP);
  base.mutable_dataplane()->mutable_fragments()->set_timeout_ms(500);
  ASSERT_TRUE(mgr_->apply(base, 1, false, nullptr).ok());
  ApplyError err;
  auto r = mgr_->update(
      [](v1::ApplianceConfig& c) {
        c.mutable_dataplane()->mutable_timeouts()->set_tcp_established_s(600);
        return absl::OkStatus();
      },
      2, false, &err);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->version, 3u);
  v1::ApplianceConfig cur = mgr_->current();
  EXPECT_EQ(cur.version(), 3u);
  EXPECT_EQ(cur.dataplane().timeouts().tcp_established_s(), 600u);
  EXPECT_EQ(cur.dataplane().timeouts().udp_s(), 30u);
  EXPECT_EQ(cur.dataplane().non_ip(), v1::DROP);
  EXPECT_EQ(cur.dataplane().fragments().timeout_ms(), 500u);
  EXPECT_EQ(onDisk().SerializeAsString(), cur.SerializeAsString());
  auto pubs = plane_->published();
  ASSERT_EQ(pubs.size(), 2u);
  EXPECT_EQ(pubs[1].config_version, 3u);
  EXPECT_EQ(pubs[1].dataplane.tcp_established_s, 600u);
  EXPECT_EQ(pubs[1].dataplane.udp_s, 30u);
  EXPECT_EQ(pubs[1].dataplane.non_ip, rules::Policy::kDrop);
  EXPECT_EQ(pubs[1].dataplane.frag_timeout_ms, 500u);

  // A mutation that makes the document invalid is rejected like a bad apply.
  auto bad = mgr_->update(
      [](v1::ApplianceConfig& c) {
        c.mutable_dataplane()->mutable_timeouts()->set_icmp_s(1000000);
        return absl::OkStatus();
      },
      3, false, &err);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_EQ(err.errors.size(), 1u);
  EXPECT_EQ(err.errors[0].field, "dataplane.timeouts.icmp_s");
  EXPECT_EQ(mgr_->version(), 3u);
  EXPECT_EQ(publishes(), 2u);
}

TEST_F(ConfigManagerTest, MutateErrorIsReturnedAsIs) {
  start();
  ApplyError err;
  const absl::Status errors[] = {absl::NotFoundError("no rule with id x"),
                                 absl::InvalidArgumentError("backend b1: port 0 is not valid")};
  for (const absl::Status& want : errors) {
    bool ran = false;
    auto r = mgr_->update(
        [&](v1::ApplianceConfig& c) {
          ran = true;
          c.mutable_dataplane()->mutable_timeouts()->set_udp_s(5);  // discarded
          return want;
        },
        1, false, &err);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(ran);
    EXPECT_EQ(r.status(), want);
    EXPECT_EQ(err.status, want);
    EXPECT_TRUE(err.errors.empty());
  }
  EXPECT_EQ(publishes(), 0u);
  EXPECT_EQ(mgr_->version(), 1u);
  EXPECT_FALSE(mgr_->current().has_dataplane());
  EXPECT_EQ(onDisk().version(), 1u);
}

TEST_F(ConfigManagerTest, ForceSkipsTheVersionCheck) {
  start();
  ASSERT_TRUE(mgr_->apply(withUdpTimeout(30), 1, false, nullptr).ok());
  auto r = mgr_->apply(withUdpTimeout(31), 0, true, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->version, 3u);
  auto u = mgr_->update(
      [](v1::ApplianceConfig& c) {
        c.mutable_dataplane()->mutable_timeouts()->set_icmp_s(9);
        return absl::OkStatus();
      },
      1, true, nullptr);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->version, 4u);
  EXPECT_EQ(mgr_->current().dataplane().timeouts().udp_s(), 31u);
  EXPECT_EQ(mgr_->current().dataplane().timeouts().icmp_s(), 9u);
  EXPECT_EQ(publishes(), 3u);
  // Force does not skip validation.
  v1::ApplianceConfig bad;
  bad.mutable_dataplane()->mutable_flow_table()->set_capacity_per_worker(1);
  auto b = mgr_->apply(bad, 0, true, nullptr);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(mgr_->version(), 4u);
}

TEST_F(ConfigManagerTest, OnAppliedIsCalledOncePerSuccessfulApply) {
  start();
  std::vector<ApplyResult> seen;
  mgr_->setOnApplied([&](const ApplyResult& r) { seen.push_back(r); });
  ASSERT_TRUE(mgr_->apply(withUdpTimeout(30), 1, false, nullptr).ok());
  EXPECT_FALSE(mgr_->apply(withUdpTimeout(31), 1, false, nullptr).ok());  // stale
  v1::ApplianceConfig bad;
  bad.mutable_dataplane()->mutable_timeouts()->set_udp_s(100000000);
  EXPECT_FALSE(mgr_->apply(bad, 2, false, nullptr).ok());                 // invalid
  EXPECT_FALSE(mgr_->update([](v1::ApplianceConfig&) { return absl::NotFoundError("x"); }, 2,
                            false, nullptr)
                   .ok());                                                 // mutate failed
  ASSERT_TRUE(mgr_->update(
                      [](v1::ApplianceConfig& c) {
                        c.mutable_dataplane()->set_malformed(v1::FORWARD);
                        return absl::OkStatus();
                      },
                      2, false, nullptr)
                  .ok());
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].version, 2u);
  EXPECT_EQ(seen[0].generation, 1u);
  EXPECT_EQ(seen[1].version, 3u);
  EXPECT_EQ(seen[1].generation, 2u);
}

// --- ops --- every refused apply is reported with the phase that refused it, the version
// it was based on and its errors, and counted by phase.
TEST_F(ConfigManagerTest, OnRefusedNamesThePhaseTheBaseVersionAndTheErrors) {
  start();
  std::vector<RefusedApply> refused;
  std::vector<ApplyResult> applied;
  mgr_->setOnRefused([&](const RefusedApply& r) { refused.push_back(r); });
  mgr_->setOnApplied([&](const ApplyResult& r) { applied.push_back(r); });
  ASSERT_TRUE(mgr_->apply(withUdpTimeout(30), 1, false, nullptr).ok());  // version 2
  // version: based on 1, committed 2
  EXPECT_FALSE(mgr_->apply(withUdpTimeout(31), 1, false, nullptr).ok());
  // validate: a field out of range (toModel)
  v1::ApplianceConfig bad = withUdpTimeout(100000000);
  bad.mutable_dataplane()->mutable_flow_table()->set_capacity_per_worker(1);
  EXPECT_FALSE(mgr_->apply(bad, 2, false, nullptr).ok());
  // edit: the RPC's change of the document failed
  EXPECT_FALSE(mgr_->update([](v1::ApplianceConfig&) { return absl::NotFoundError("no rule x"); },
                            2, false, nullptr)
                   .ok());
  // compile: a DNS list with a bad line (lists are parsed by the compiler)
  v1::ApplianceConfig dns = withUdpTimeout(30);
  v1::DnsList* l = dns.mutable_dns()->add_lists();
  l->set_name("ads");
  l->set_format(v1::DNS_FORMAT_ADBLOCK);
  l->add_names("||ads.example^$third-party");
  ApplyError err;
  EXPECT_FALSE(mgr_->apply(dns, 0, true, &err).ok());  // forced: based on the committed 2
  // prepare: the dataplane refuses the snapshot
  plane_->failPrepare(absl::InvalidArgumentError("geoip: cannot open /x.mmdb"));
  EXPECT_FALSE(mgr_->apply(withUdpTimeout(32), 2, false, nullptr).ok());

  ASSERT_EQ(refused.size(), 5u);
  EXPECT_EQ(applied.size(), 1u);
  const struct {
    const char* phase;
    uint64_t based_on;
    absl::StatusCode code;
    size_t min_errors;
  } want[] = {
      {"version", 1, absl::StatusCode::kAborted, 0},
      {"validate", 2, absl::StatusCode::kInvalidArgument, 2},
      {"edit", 2, absl::StatusCode::kNotFound, 0},
      {"compile", 2, absl::StatusCode::kInvalidArgument, 1},
      {"prepare", 2, absl::StatusCode::kInvalidArgument, 1},
  };
  for (size_t i = 0; i < refused.size(); ++i) {
    SCOPED_TRACE(want[i].phase);
    EXPECT_EQ(refused[i].phase, want[i].phase);
    EXPECT_EQ(refused[i].based_on_version, want[i].based_on);
    EXPECT_EQ(refused[i].committed_version, 2u);
    EXPECT_EQ(refused[i].status.code(), want[i].code);
    EXPECT_GE(refused[i].errors.size(), want[i].min_errors);
  }
  EXPECT_EQ(refused[3].errors[0].rule, "ads");
  EXPECT_NE(refused[3].errors[0].reason.find("Adblock modifiers"), std::string::npos)
      << refused[3].errors[0].reason;
  EXPECT_EQ(err.errors.size(), refused[3].errors.size());  // the caller's errors too

  ApplyStats st = mgr_->applyStats();
  EXPECT_EQ(st.applied, 1u);
  EXPECT_EQ(st.conflicts, 1u);
  EXPECT_EQ(st.refused_by_phase["version"], 1u);
  EXPECT_EQ(st.refused_by_phase["validate"], 1u);
  EXPECT_EQ(st.refused_by_phase["edit"], 1u);
  EXPECT_EQ(st.refused_by_phase["compile"], 1u);
  EXPECT_EQ(st.refused_by_phase["prepare"], 1u);
  EXPECT_EQ(st.refused_by_phase.size(), 5u);
  EXPECT_EQ(mgr_->version(), 2u);
}

TEST_F(ConfigManagerTest, StartOnlyChangesAreCommittedWithAWarning) {
  start();
  v1::ApplianceConfig next = withUdpTimeout(30);
  next.mutable_dataplane()->mutable_flow_table()->set_capacity_per_worker(4096);
  auto r = mgr_->apply(next, 1, false, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_NE(r->warnings[0].find("dataplane.flow_table.capacity_per_worker: 1048576 -> 4096"),
            std::string::npos)
      << r->warnings[0];
  EXPECT_NE(r->warnings[0].find("next start"), std::string::npos) << r->warnings[0];
  auto same = mgr_->apply(next, 2, false, nullptr);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_TRUE(same->warnings.empty());
}

// A firewall whose default is DENY lets non-IP frames (ARP, PPPoE discovery, PPP control)
// through under the default dataplane.non_ip FORWARD: apply says so, and not once non_ip is
// DROP or the defaults are ALLOW.
TEST_F(ConfigManagerTest, DefaultDenyWithNonIpForwardIsCommittedWithAWarning) {
  start();
  v1::ApplianceConfig next = withUdpTimeout(30);
  next.mutable_firewall()->set_default_a_to_b(v1::DENY);
  auto r = mgr_->apply(next, 1, false, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_NE(r->warnings[0].find("dataplane.non_ip: FORWARD while a firewall default is DENY"),
            std::string::npos)
      << r->warnings[0];
  EXPECT_NE(r->warnings[0].find("PPPoE"), std::string::npos) << r->warnings[0];
  next.mutable_dataplane()->set_non_ip(v1::DROP);
  auto dropped = mgr_->apply(next, 2, false, nullptr);
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  EXPECT_TRUE(dropped->warnings.empty());
}

TEST_F(ConfigManagerTest, WithoutADataplaneApplyPersistsOnly) {
  start(nullptr, /*with_plane=*/false);
  auto r = mgr_->apply(withUdpTimeout(30), 1, false, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->version, 2u);
  EXPECT_EQ(r->generation, 0u);
  EXPECT_EQ(onDisk().version(), 2u);
}

// The dataplane must never run a config that a restart would lose.
TEST_F(ConfigManagerTest, PrepareFailureIsAnApplyFailureBeforeAnythingIsPersisted) {
  start();
  ASSERT_TRUE(mgr_->apply(withUdpTimeout(30), 1, false, nullptr).ok());
  ASSERT_EQ(publishes(), 1u);
  const std::string before = onDisk().SerializeAsString();
  plane_->failPrepare(absl::InvalidArgumentError(
      "firewall.geoip_database: cannot open /x/GeoIP2-Country.mmdb: No such file or directory"));
  ApplyError err;
  auto r = mgr_->apply(withUdpTimeout(31), 2, false, &err);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("/x/GeoIP2-Country.mmdb"), std::string::npos);
  ASSERT_EQ(err.errors.size(), 1u);
  EXPECT_NE(err.errors[0].reason.find("cannot open"), std::string::npos);
  EXPECT_EQ(plane_->prepares(), 2);
  EXPECT_EQ(publishes(), 1u);
  EXPECT_EQ(mgr_->version(), 2u);
  EXPECT_EQ(onDisk().SerializeAsString(), before);
}

TEST_F(ConfigManagerTest, PersistFailurePublishesNothing) {
  std::string how;
  const bool mounted =
      ::mkdir(state_.c_str(), 0700) == 0 &&
      ::mount("tmpfs", state_.c_str(), "tmpfs", 0, "size=1m,mode=0700") == 0;
  if (mounted) mounts_.push_back(state_);
  const std::string mount_error = mounted ? "" : std::strerror(errno);
  start();
  std::vector<ApplyResult> seen;
  mgr_->setOnApplied([&](const ApplyResult& r) { seen.push_back(r); });
  ASSERT_TRUE(mgr_->apply(withUdpTimeout(30), 1, false, nullptr).ok());
  ASSERT_EQ(publishes(), 1u);

  if (mounted &&
      ::mount(nullptr, state_.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr) == 0) {
    how = "read-only mount";
  } else {
    ASSERT_EQ(::chmod(state_.c_str(), 0500), 0);
    int fd = ::open((state_ + "/probe").c_str(), O_WRONLY | O_CREAT, 0600);
    if (fd >= 0) {
      ::close(fd);
      ::unlink((state_ + "/probe").c_str());
      GTEST_SKIP() << "cannot make the state directory read-only: mount failed ("
                   << (mounted ? "remount,ro refused" : mount_error)
                   << ") and permission bits are not enforced for uid " << ::geteuid();
    }
    how = "chmod 0500";
  }
  SCOPED_TRACE(how);
  ApplyError err;
  auto r = mgr_->apply(withUdpTimeout(31), 2, false, &err);
  ASSERT_FALSE(r.ok());
  const std::string msg(r.status().message());
  EXPECT_NE(msg.find("cannot persist config to " + state_ + "/config.json.tmp"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("the committed config (version 2) is unchanged"), std::string::npos) << msg;
  EXPECT_EQ(err.status, r.status());
  EXPECT_EQ(publishes(), 1u) << "a config that was not persisted was published";
  EXPECT_EQ(seen.size(), 1u);
  EXPECT_EQ(mgr_->version(), 2u);
  EXPECT_EQ(mgr_->current().dataplane().timeouts().udp_s(), 30u);
  EXPECT_EQ(onDisk().version(), 2u);
  EXPECT_EQ(onDisk().dataplane().timeouts().udp_s(), 30u);

  // Writable again: the next apply continues from the committed version.
  if (how == "read-only mount") {
    ASSERT_EQ(::mount(nullptr, state_.c_str(), nullptr, MS_REMOUNT, nullptr), 0)
        << std::strerror(errno);
  } else {
    ASSERT_EQ(::chmod(state_.c_str(), 0700), 0);
  }
  auto again = mgr_->apply(withUdpTimeout(32), 2, false, nullptr);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->version, 3u);
  EXPECT_EQ(again->generation, 2u);
  EXPECT_EQ(publishes(), 2u);
}

TEST_F(ConfigManagerTest, ConcurrentAppliesGetDistinctVersions) {
  start();
  constexpr int kThreads = 4, kPerThread = 25;
  std::mutex mu;
  std::vector<uint64_t> versions;
  std::vector<std::pair<uint64_t, uint32_t>> version_udp;  // committed version -> udp_s sent
  std::vector<std::string> unexpected;
  std::atomic<int> aborted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const uint32_t udp = static_cast<uint32_t>(t * 1000 + i + 1);
        const bool force = i % 5 == 0;
        absl::StatusOr<ApplyResult> r;
        if (i % 2 == 0) {
          r = mgr_->apply(withUdpTimeout(udp), mgr_->version(), force, nullptr);
        } else {
          r = mgr_->update(
              [udp](v1::ApplianceConfig& c) {
                c.mutable_dataplane()->mutable_timeouts()->set_udp_s(udp);
                return absl::OkStatus();
              },
              mgr_->version(), force, nullptr);
        }
        std::lock_guard<std::mutex> lock(mu);
        if (r.ok()) {
          versions.push_back(r->version);
          version_udp.emplace_back(r->version, udp);
        } else if (r.status().code() == absl::StatusCode::kAborted) {
          ++aborted;
        } else {
          unexpected.push_back(r.status().ToString());
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_TRUE(unexpected.empty()) << absl::StrJoin(unexpected, "; ");
  const size_t ok = versions.size();
  EXPECT_EQ(ok + static_cast<size_t>(aborted.load()), size_t{kThreads * kPerThread});
  ASSERT_GE(ok, size_t{kThreads * kPerThread / 5});  // the forced ones always succeed
  std::sort(versions.begin(), versions.end());
  EXPECT_TRUE(std::adjacent_find(versions.begin(), versions.end()) == versions.end())
      << "two applies got the same version";
  EXPECT_EQ(versions.front(), 2u);
  EXPECT_EQ(versions.back(), ok + 1);
  EXPECT_EQ(mgr_->version(), ok + 1);
  EXPECT_EQ(onDisk().version(), ok + 1);

  auto pubs = plane_->published();
  ASSERT_EQ(pubs.size(), ok);
  for (size_t i = 0; i < pubs.size(); ++i) {
    EXPECT_EQ(pubs[i].generation, i + 1);
    EXPECT_EQ(pubs[i].config_version, i + 2) << "published out of commit order";
    EXPECT_EQ(pubs[i].version_on_disk, pubs[i].config_version);
  }
  // The last commit is what is on disk and what the dataplane runs.
  auto last = std::max_element(version_udp.begin(), version_udp.end());
  EXPECT_EQ(onDisk().dataplane().timeouts().udp_s(), last->second);
  EXPECT_EQ(pubs.back().dataplane.udp_s, last->second);
}

// --- dpi --- An edit of a rule set is published with a delta database and masks; when the
// background merge is done the manager republishes the same config version with the merged
// databases (nothing committed, the published model, not the files again).
TEST_F(ConfigManagerTest, DpiMergesAreRepublishedWithTheSameConfigVersion) {
  rules::clearDpiCompileCache();
  start();
  mgr_->followDpiMerges();
  v1::ApplianceConfig c;
  v1::DpiConfig* d = c.mutable_dpi();
  d->set_shards(2);
  for (int i = 0; i < 4; ++i) {
    v1::DpiRuleSet* rs = d->add_rule_sets();
    rs->set_name("s" + std::to_string(i));
    rs->set_text("rule r" + std::to_string(i) + " { strings: $a = \"S-" + std::to_string(i) +
                 "\" condition: $a }\n");
  }
  auto r = mgr_->apply(c, 1, false, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_NE(r->dpi_compiled, nullptr);
  EXPECT_EQ(r->dpi_compiled->merges_pending, 0u);  // cold: every shard compiled
  c.mutable_dpi()->mutable_rule_sets(0)->set_text(
      c.dpi().rule_sets(0).text() + "rule more { strings: $a = \"MORE\" condition: $a }\n");
  r = mgr_->apply(c, 2, false, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_NE(r->dpi_compiled, nullptr);
  EXPECT_GE(r->dpi_compiled->merges_pending, 1u);
  EXPECT_GT(r->dpi_compiled->delta_patterns, 0u);
  EXPECT_EQ(publishes(), 2u);
  // The listener runs on the merge thread once the merges are done.
  rules::waitDpiMerges();
  while (mgr_->dpiRepublishes() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto pubs = plane_->published();
  ASSERT_EQ(pubs.size(), 3u);
  EXPECT_EQ(pubs[2].config_version, 3u);
  EXPECT_EQ(mgr_->version(), 3u);
  EXPECT_EQ(onDisk().version(), 3u);
  auto dpi = plane_->currentDpi();
  ASSERT_NE(dpi, nullptr);
  EXPECT_EQ(dpi->rules.size(), 5u);
  EXPECT_EQ(dpi->delta_patterns, 0u);
  for (const rules::DpiShard& sh : dpi->shards) {
    EXPECT_FALSE(sh.delta);
    EXPECT_EQ(sh.live, sh.ids.size());
  }
  // Nothing more to merge: a second call publishes nothing.
  ASSERT_TRUE(mgr_->republishDpi().ok());
  EXPECT_EQ(publishes(), 3u);
}

}  // namespace
}  // namespace dpu::ctl
