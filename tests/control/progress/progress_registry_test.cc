// Progress of long control-side work: tasks and steps as the API shows them, log lines
// only for long tasks (with a fake clock), the thread-local sink that rules/ code reports
// to, and a real apply through ConfigManager reporting its steps.
#include "control/progress/progress_registry.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <mutex>
#include <thread>

#include "control/config/config_manager.h"
#include "control/config/config_store.h"
#include "rules/compile/progress.h"

namespace dpu::ctl {
namespace {

using namespace std::chrono_literals;

struct FakeClock {
  std::chrono::steady_clock::time_point t{};
  std::chrono::steady_clock::time_point operator()() const { return t; }
};

TEST(ProgressRegistry, TasksShowStepsAndCounts) {
  auto clock = std::make_shared<FakeClock>();
  std::vector<std::string> logged;
  ProgressRegistry::Options o;
  o.now = [clock] { return (*clock)(); };
  o.log = [&](const std::string& l) { logged.push_back(l); };
  ProgressRegistry reg(o);
  EXPECT_TRUE(reg.tasks().empty());
  {
    auto task = reg.begin("dns list load");
    task->step("reading blocklist.txt", 1000000, "domains");
    clock->t += 500ms;
    task->done(250000);
    auto t = reg.tasks();
    ASSERT_EQ(t.size(), 1u);
    EXPECT_EQ(t[0].task, "dns list load");
    EXPECT_EQ(t[0].step, "reading blocklist.txt");
    EXPECT_EQ(t[0].done, 250000u);
    EXPECT_EQ(t[0].total, 1000000u);
    EXPECT_EQ(t[0].unit, "domains");
    EXPECT_DOUBLE_EQ(t[0].elapsed_s, 0.5);
    EXPECT_EQ(formatProgress(t[0]),
              "dns list load: reading blocklist.txt 250000/1000000 domains (25%), 0.5 s");
    EXPECT_TRUE(logged.empty());  // short so far: nothing in the log
    clock->t += 700ms;            // 1.2 s: the next report is logged
    task->done(600000);
    ASSERT_EQ(logged.size(), 1u);
    EXPECT_EQ(logged[0], "dns list load: reading blocklist.txt 600000/1000000 domains (60%), 1.2 s");
    clock->t += 1s;  // within log_every: not again
    task->done(700000);
    EXPECT_EQ(logged.size(), 1u);
    clock->t += 1500ms;
    task->done(900000);
    EXPECT_EQ(logged.size(), 2u);
    task->step("building the index", 0, "");  // a new step is logged at once
    EXPECT_EQ(logged.size(), 3u);
    EXPECT_EQ(logged[2], "dns list load: building the index, 3.7 s");
  }
  EXPECT_TRUE(reg.tasks().empty());
  ASSERT_EQ(logged.size(), 4u);
  EXPECT_EQ(logged[3], "dns list load: done in 3.7 s");
}

TEST(ProgressRegistry, ShortTasksAreNotLogged) {
  std::vector<std::string> logged;
  ProgressRegistry::Options o;
  o.log = [&](const std::string& l) { logged.push_back(l); };
  ProgressRegistry reg(o);
  {
    auto task = reg.begin("config apply");
    task->step("compiling", 0, "");
  }
  EXPECT_TRUE(logged.empty());
}

TEST(ProgressRegistry, TickerLogsAStepThatReportsNothing) {
  std::mutex mu;
  std::vector<std::string> logged;
  ProgressRegistry::Options o;
  o.log_after = 0ms;
  o.log_every = 20ms;
  o.log = [&](const std::string& l) {
    std::lock_guard<std::mutex> lock(mu);
    logged.push_back(l);
  };
  ProgressRegistry reg(o);
  reg.startTicker();
  auto task = reg.begin("config apply");
  task->step("preparing dataplane tables", 0, "");
  auto count = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return logged.size();
  };
  size_t after_step = count();  // the step's own line
  for (int i = 0; i < 500 && count() < after_step + 2; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_GE(count(), after_step + 2) << "the ticker logged nothing while the step ran";
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(logged.back().rfind("config apply: preparing dataplane tables, ", 0), 0u) << logged.back();
}

TEST(ProgressScope, RulesCodeReportsToTheSinkOfItsThread) {
  ProgressRegistry::Options o;
  o.log = nullptr;
  ProgressRegistry reg(o);
  {
    // No sink installed: reports go nowhere (and do not crash).
    rules::ProgressStep step("nothing listens", 10, "items");
    step.advance(10);
  }
  auto task = reg.begin("yara compile");
  {
    rules::ProgressScope scope(task.get());
    rules::ProgressStep step("compiling YARA rules", 5000, "rules", 100);
    for (int i = 0; i < 250; ++i) step.advance();
    auto t = reg.tasks();
    ASSERT_EQ(t.size(), 1u);
    EXPECT_EQ(t[0].step, "compiling YARA rules");
    EXPECT_EQ(t[0].done, 200u);  // reported every 100
    // Another thread has no sink: its reports do not reach this task.
    std::thread([] {
      rules::ProgressStep other("other thread", 1, "x");
      other.advance();
    }).join();
    EXPECT_EQ(reg.tasks()[0].step, "compiling YARA rules");
  }
  EXPECT_EQ(reg.tasks()[0].done, 250u);  // the final count when the step ended
  EXPECT_NE(rules::currentProgress(), task.get());  // the scope ended: back to no sink
}

TEST(ProgressRegistry, ConfigApplyReportsItsSteps) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "dpu_prog.XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  auto store = ConfigStore::open(tmpl + "/state", nullptr);
  ASSERT_TRUE(store.ok());
  std::vector<std::string> logged;
  ProgressRegistry::Options o;
  o.log_after = 0ms;  // log everything
  o.log = [&](const std::string& l) { logged.push_back(l); };
  ProgressRegistry reg(o);
  ConfigManager m(store->get(), nullptr);
  m.setProgress(&reg);
  v1::ApplianceConfig cfg;
  auto* r = cfg.mutable_firewall()->add_rules();
  r->set_id("a");
  r->set_action(v1::DENY);
  ApplyError err;
  auto res = m.apply(cfg, 1, false, &err);
  ASSERT_TRUE(res.ok()) << res.status();
  std::string all;
  for (const auto& l : logged) all += l + "\n";
  for (const char* step : {"config apply: validating", "config apply: compiling",
                           "config apply: expanding firewall rules to ACL entries",
                           "config apply: persisting", "config apply: publishing",
                           "config apply: done in"}) {
    EXPECT_NE(all.find(step), std::string::npos) << step << " not in:\n" << all;
  }
  EXPECT_TRUE(reg.tasks().empty());
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace dpu::ctl
