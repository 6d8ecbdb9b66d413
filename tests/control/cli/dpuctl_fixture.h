// The dpuctl end-to-end fixture (tests/control/cli/dpuctl_*_test.cc): the real gRPC service
// in this process on a unix socket in a temporary state directory, over a fake dataplane that
// keeps the published snapshot; runs the real dpuctl binary (DPUCTL_BIN) and captures its exit
// code and output.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "control/api/appliance_service.h"
#include "control/api/server.h"
#include "control/config/config_manager.h"
#include "control/config/config_store.h"

namespace dpu::ctl {

using namespace std::chrono_literals;

// Just enough dataplane: keeps the published snapshot, reports rule counters.
class Plane : public dp::DataplaneControl {
 public:
  absl::StatusOr<std::unique_ptr<dp::PreparedSnapshot>> prepare(
      std::unique_ptr<rules::Snapshot> next) override {
    auto p = std::make_unique<dp::PreparedSnapshot>();
    p->snap = std::move(next);
    return p;
  }
  uint32_t publish(std::unique_ptr<dp::PreparedSnapshot> p) override {
    std::lock_guard<std::mutex> lock(mu_);
    current_ = std::move(p->snap);
    current_->generation = ++generation_;
    return generation_;
  }
  std::vector<dp::RuleCounters> ruleCounters() const override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<dp::RuleCounters> out;
    if (!current_ || !current_->firewall) return out;
    uint64_t n = 0;
    for (const auto& r : current_->firewall->rules) {
      dp::RuleCounters c;
      c.id = r.id;
      c.packets = ++n * 1000;
      c.bytes = n * 64000;
      c.flows = n;
      out.push_back(c);
    }
    return out;
  }
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
  // DNS filtering: the published snapshot's lists (zero counters).
  std::vector<dp::DnsListCounters> dnsLists() const override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!current_) return {};
    return dp::dnsListCounters(*current_, dp::CountersSnapshot::Flat{});
  }
  const rules::CompiledDnsList* dnsList(size_t i) const {
    std::lock_guard<std::mutex> lock(mu_);
    return current_ && current_->dns && i < current_->dns->lists.size()
               ? current_->dns->lists[i].get() : nullptr;
  }

 private:
  mutable std::mutex mu_;
  std::unique_ptr<rules::Snapshot> current_;
  uint32_t generation_ = 1;
};

struct CliRun {
  int rc = -1;
  std::string out, err;
};

class DpuctlFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dpuctl.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto store = ConfigStore::open(dir_ + "/state", nullptr);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    manager_ = std::make_unique<ConfigManager>(store_.get(), &plane_);
    service_ = std::make_unique<ApplianceService>(manager_.get(), &plane_, nullptr,
                                                  ServiceOptions{dir_ + "/state"});
    ApiServerOptions so;
    so.state_dir = dir_ + "/state";
    auto server = ApiServer::start(so, service_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }
  void TearDown() override {
    if (server_) server_->shutdown(500ms);
    server_.reset();
    service_.reset();
    manager_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  static std::string shellQuote(const std::string& s) {
    std::string q = "'";
    for (char c : s) {
      if (c == '\'') q += "'\\''";
      else q.push_back(c);
    }
    return q + "'";
  }
  static std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  CliRun dpuctl(const std::vector<std::string>& args) {
    std::string cmd = shellQuote(DPUCTL_BIN) + " --server " + shellQuote(server_->address());
    for (const auto& a : args) cmd += " " + shellQuote(a);
    cmd += " >" + dir_ + "/out 2>" + dir_ + "/err";
    CliRun r;
    int st = std::system(cmd.c_str());
    r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.out = slurp(dir_ + "/out");
    r.err = slurp(dir_ + "/err");
    return r;
  }
  std::string write(const std::string& name, const std::string& text) {
    std::string p = dir_ + "/" + name;
    std::ofstream(p) << text;
    return p;
  }
  std::string dir_;
  Plane plane_;
  std::unique_ptr<ConfigStore> store_;
  std::unique_ptr<ConfigManager> manager_;
  std::unique_ptr<ApplianceService> service_;
  std::unique_ptr<ApiServer> server_;
};


}  // namespace dpu::ctl
