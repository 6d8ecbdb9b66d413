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
#include "tests/util/snapshot_plane.h"

namespace dpu::ctl {

using namespace std::chrono_literals;

// Just enough dataplane: keeps the published snapshot, reports rule counters.
class Plane : public test::SnapshotPlane {
 public:
  Plane() : SnapshotPlane(1) {}
  std::vector<dp::RuleCounters> ruleCounters() const override {
    return withCurrent([](const rules::Snapshot* cur) {
      std::vector<dp::RuleCounters> out;
      if (!cur || !cur->firewall) return out;
      uint64_t n = 0;
      for (const auto& r : cur->firewall->rules) {
        dp::RuleCounters c;
        c.id = r.id;
        c.packets = ++n * 1000;
        c.bytes = n * 64000;
        c.flows = n;
        out.push_back(c);
      }
      return out;
    });
  }
  // DNS filtering: the published snapshot's lists (zero counters).
  std::vector<dp::DnsListCounters> dnsLists() const override {
    return withCurrent([](const rules::Snapshot* cur) {
      return cur ? dp::dnsListCounters(*cur, dp::CountersSnapshot::Flat{})
                 : std::vector<dp::DnsListCounters>{};
    });
  }
  // Explain on the published snapshot with the dataplane's own logic (no DPDK needed).
  dp::ExplainResult explain(const uint8_t* frame, uint32_t len, uint8_t side) const override {
    return withCurrent([&](const rules::Snapshot* cur) {
      return cur ? dp::explainPacket(*cur, frame, len, side) : dp::ExplainResult{};
    });
  }
  const rules::CompiledDnsList* dnsList(size_t i) const {
    return withCurrent([i](const rules::Snapshot* cur) -> const rules::CompiledDnsList* {
      return cur && cur->dns && i < cur->dns->lists.size() ? cur->dns->lists[i].get()
                                                           : nullptr;
    });
  }
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
    // --timeout 0: no deadline (a busy machine is slow, not wrong; ctest's TIMEOUT bounds a hang).
    std::string cmd = shellQuote(DPUCTL_BIN) + " --timeout 0 --server " + shellQuote(server_->address());
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
