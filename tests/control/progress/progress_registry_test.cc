// Progress of long control-side work: tasks and steps as the API shows them, log lines
// only for long tasks (with a fake clock), the thread-local sink that rules/ code reports
// to, and a real apply through ConfigManager reporting its steps.
#include "control/progress/progress_registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "control/config/config_manager.h"
#include "control/config/config_store.h"
#include "rules/compile/progress.h"
#include "rules/compile/yara_translate.h"  // --- ops ---
#include "rules/compiled/dns.h"

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
  // Up to 120 s: the ticker is slow on a busy machine, not wrong.
  for (int i = 0; i < 12000 && count() < after_step + 2; ++i) std::this_thread::sleep_for(10ms);
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

// --- ops --- the long control-side work of the features reports through the same sink:
// DNS lists (bytes of each list file, inline names) and YARA rule sets (files validated by
// libyara, parsed, translated, the Hyperscan compile).
class RecordingSink final : public rules::ProgressSink {
 public:
  struct Step {
    std::string what, unit;
    uint64_t total = 0;
    std::vector<uint64_t> done;  // every report
  };
  void step(const std::string& what, uint64_t total, const std::string& unit) override {
    steps.push_back({what, unit, total, {}});
  }
  void done(uint64_t n) override {
    if (!steps.empty()) steps.back().done.push_back(n);
  }
  const Step* find(const std::string& prefix) const {
    for (const Step& s : steps) {
      if (s.what.rfind(prefix, 0) == 0) return &s;
    }
    return nullptr;
  }
  std::vector<Step> steps;
};

TEST(ProgressSteps, DnsListLoadReportsBytesOfEachFileAndInlineNames) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "dpu_prog_dns.XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const std::string file = tmpl + "/ads.txt";
  {
    std::ofstream o(file);
    for (int i = 0; i < 80000; ++i) o << "||host" << i << ".ads.example^\n";  // ~2 MiB
  }
  const uint64_t size = std::filesystem::file_size(file);
  rules::DnsModel m;
  rules::DnsListModel l;
  l.name = "ads";
  l.format = rules::DnsListFormat::kAdblock;
  l.files = {file};
  for (int i = 0; i < 5000; ++i) l.names.push_back("||inline" + std::to_string(i) + ".example^");
  m.lists.push_back(l);
  RecordingSink sink;
  {
    rules::ProgressScope scope(&sink);
    rules::ConfigErrorList errs;
    auto c = rules::compileDns(m, nullptr, &errs);
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_EQ((*c)->lists.size(), 1u);
  }
  const auto* f = sink.find("loading DNS list ads from " + file);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->unit, "bytes");
  EXPECT_EQ(f->total, size);
  ASSERT_GE(f->done.size(), 2u);  // at least one report on the way (every MiB) and the end
  EXPECT_GE(f->done.front(), 1u << 20);
  EXPECT_LT(f->done.front(), size);
  EXPECT_EQ(f->done.back(), size);
  EXPECT_TRUE(std::is_sorted(f->done.begin(), f->done.end()));
  const auto* n = sink.find("DNS list ads: names");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->unit, "names");
  EXPECT_EQ(n->total, 5000u);
  ASSERT_FALSE(n->done.empty());
  EXPECT_EQ(n->done.back(), 5000u);
  std::filesystem::remove_all(tmpl);
}

TEST(ProgressSteps, YaraCompileReportsFilesAndTheHyperscanPhase) {
  rules::DpiModel m;
  m.enabled = true;
  m.sources.push_back({"a.yar", R"(rule a1 { strings: $x = "alpha" condition: $x }
rule a2 { strings: $x = /be+ta/ condition: $x })"});
  m.sources.push_back({"b.yar", R"(rule b1 { strings: $x = { 47 41 4d 4d 41 } condition: $x })"});
  RecordingSink sink;
  rules::clearDpiCompileCache();  // a first compile: every source validated and translated
  {
    rules::ProgressScope scope(&sink);
    rules::ConfigErrorList errs;
    auto c = rules::compileDpi(m, errs);
    ASSERT_TRUE(c.ok()) << c.status();
  }
  std::string all;
  for (const auto& s : sink.steps) all += s.what + "\n";
  const auto* v = sink.find("validating YARA files with libyara");
  ASSERT_NE(v, nullptr) << all;
  EXPECT_EQ(v->total, 2u);
  EXPECT_EQ(v->unit, "files");
  ASSERT_FALSE(v->done.empty());
  EXPECT_EQ(v->done.back(), 2u);
  EXPECT_GE(v->done.size(), 2u);  // per file (every = 1)
  // Parsed and translated source by source (incremental compiles: docs/dpi.md).
  const auto* p = sink.find("translating YARA rules to Hyperscan (pass 1)");
  ASSERT_NE(p, nullptr) << all;
  EXPECT_EQ(p->total, 2u);
  EXPECT_EQ(p->unit, "files");
  EXPECT_EQ(p->done.back(), 2u);
  const auto* hs = sink.find("Hyperscan compile of ");
  ASSERT_NE(hs, nullptr) << all;
  EXPECT_NE(hs->what.find(" patterns (3 rules, "), std::string::npos) << hs->what;
}

}  // namespace
}  // namespace dpu::ctl
