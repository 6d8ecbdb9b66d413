// The DPI RPCs (control/api/dpi_service.cc) in-process on the real ConfigStore /
// ConfigManager and a fake dataplane that keeps the published snapshot: AddYaraRule /
// RemoveYaraRule (rule sets in the document, versions, libyara errors with the line in the
// text, the rule and the field, duplicates, rule files, references between rules,
// persistence), ListDpiRules (actions, tags, meta, unsupported rules, counters), the DPI part
// of GetStats, tags and metadata in events, and the rule-span scanner the edits use.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "control/api/appliance_service.h"
#include "control/api/event_hub.h"
#include "control/config/config_manager.h"
#include "control/config/config_store.h"
#include "control/config/yara_spans.h"
#include "tests/util/snapshot_plane.h"

namespace dpu::ctl {
namespace {

class DpiPlane : public test::SnapshotPlane {
 public:
  std::vector<dp::DpiRuleCounters> dpiRuleCounters() const override { return counters; }
  std::shared_ptr<const rules::CompiledDpi> dpiRules(uint32_t generation) const override {
    return withCurrent([&](const rules::Snapshot* cur) {
      return cur && cur->generation == generation ? cur->dpi : nullptr;
    });
  }
  std::vector<dp::DpiRuleCounters> counters;
};

constexpr const char* kRuleA =
    "rule evil_ua : web c2 {\n"
    "  meta:\n"
    "    author = \"soc\"\n"
    "    action = \"drop\"\n"
    "  strings:\n"
    "    $a = \"EvilAgent/1.0\"\n"
    "  condition:\n"
    "    $a\n"
    "}\n";

std::vector<v1::ConfigError> detailErrors(const grpc::Status& st) {
  std::vector<v1::ConfigError> out;
  v1::RpcStatus rs;
  if (!rs.ParseFromString(st.error_details())) return out;
  for (const auto& any : rs.details()) {
    v1::ConfigErrors list;
    if (any.UnpackTo(&list)) out.assign(list.errors().begin(), list.errors().end());
  }
  return out;
}

class DpiServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("dpu_dpi_api_test." + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ / "rules");
    file_ = (dir_ / "rules" / "site.yar").string();
    std::ofstream(file_) << "rule site_rule { strings: $a = \"SITE-MARKER\" condition: $a }\n"
                            "rule pe_rule { condition: uint32(uint32(0x3C)) == 0x4550 }\n";
    open();
    v1::ApplianceConfig cfg;
    cfg.mutable_dpi()->add_rule_files(file_);
    auto r = manager_->apply(cfg, store_->version(), false, nullptr);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  void open() {
    auto store = ConfigStore::open((dir_ / "state").string(), nullptr);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    manager_ = std::make_unique<ConfigManager>(store_.get(), &plane_);
    service_ = std::make_unique<ApplianceService>(manager_.get(), &plane_, nullptr,
                                                  ServiceOptions{dir_.string()});
  }
  void TearDown() override {
    service_.reset();
    manager_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  grpc::Status add(const std::string& text, const std::string& set = "",
                   v1::ApplyConfigResponse* resp = nullptr) {
    v1::AddYaraRuleRequest req;
    req.set_rule_set(set);
    req.set_text(text);
    req.set_expected_version(store_->version());
    v1::ApplyConfigResponse r;
    return service_->AddYaraRule(nullptr, &req, resp ? resp : &r);
  }
  grpc::Status remove(const std::string& rule) {
    v1::RemoveYaraRuleRequest req;
    req.set_rule(rule);
    req.set_force(true);
    v1::ApplyConfigResponse r;
    return service_->RemoveYaraRule(nullptr, &req, &r);
  }
  v1::ListDpiRulesResponse list() {
    v1::ListDpiRulesResponse r;
    EXPECT_TRUE(service_->ListDpiRules(nullptr, nullptr, &r).ok());
    return r;
  }
  const v1::DpiRuleStatus* find(const v1::ListDpiRulesResponse& l, const std::string& id) {
    for (const auto& r : l.rules()) {
      if (r.id() == id) return &r;
    }
    return nullptr;
  }

  std::filesystem::path dir_;
  std::string file_;
  DpiPlane plane_;
  std::unique_ptr<ConfigStore> store_;
  std::unique_ptr<ConfigManager> manager_;
  std::unique_ptr<ApplianceService> service_;
};

TEST_F(DpiServiceTest, AddCreatesTheRuleSetAndListsIt) {
  const uint64_t v0 = store_->version();
  v1::ApplyConfigResponse resp;
  ASSERT_TRUE(add(kRuleA, "", &resp).ok());
  EXPECT_EQ(resp.version(), v0 + 1);
  ASSERT_EQ(store_->current().dpi().rule_sets_size(), 1);
  EXPECT_EQ(store_->current().dpi().rule_sets(0).name(), "local");
  EXPECT_EQ(store_->current().dpi().rule_sets(0).text(), kRuleA);
  ASSERT_TRUE(plane_.dpiRules(plane_.currentGeneration()));
  auto l = list();
  EXPECT_TRUE(l.enabled());
  EXPECT_EQ(l.config_version(), v0 + 1);
  EXPECT_EQ(l.accepted(), 2u);
  EXPECT_EQ(l.unsupported(), 1u);
  ASSERT_EQ(l.rules_size(), 3);
  // Files first, in declaration order, then the rule sets.
  EXPECT_EQ(l.rules(0).id(), "site.yar:site_rule");
  EXPECT_EQ(l.rules(0).origin(), "file");
  EXPECT_EQ(l.rules(1).id(), "site.yar:pe_rule");
  EXPECT_FALSE(l.rules(1).supported());
  EXPECT_EQ(l.rules(1).line(), 2);
  EXPECT_FALSE(l.rules(1).unsupported_reason().empty());
  const v1::DpiRuleStatus& r = l.rules(2);
  EXPECT_EQ(r.id(), "local:evil_ua");
  EXPECT_EQ(r.origin(), "rule_set");
  EXPECT_TRUE(r.supported());
  EXPECT_EQ(r.action(), "drop");
  EXPECT_EQ(r.line(), 1);
  ASSERT_EQ(r.tags_size(), 2);
  EXPECT_EQ(r.tags(1), "c2");
  ASSERT_EQ(r.meta_size(), 2);
  EXPECT_EQ(r.meta(0).key(), "author");
  EXPECT_EQ(r.meta(0).value(), "soc");
  ASSERT_EQ(l.sources_size(), 2);
  EXPECT_EQ(l.sources(1), "local");
}

TEST_F(DpiServiceTest, SecondRuleMayReferToTheSetAndAUnsupportedOneIsAWarning) {
  ASSERT_TRUE(add(kRuleA).ok());
  ASSERT_TRUE(add("rule also { condition: evil_ua }").ok()) << "refers to a rule of its set";
  v1::ApplyConfigResponse resp;
  ASSERT_TRUE(add("rule loopy { strings: $a = \"x\" condition: for any i in (1..#a): (@a[i] > 5) }",
                  "", &resp).ok());
  bool warned = false;
  for (const auto& w : resp.warnings()) warned |= w.find("local:loopy") != std::string::npos;
  EXPECT_TRUE(warned) << resp.DebugString();
  auto l = list();
  const auto* loopy = find(l, "local:loopy");
  ASSERT_NE(loopy, nullptr);
  EXPECT_FALSE(loopy->supported());
  EXPECT_EQ(loopy->line(), 11) << "line in the set's text";
  // The set's text holds all three, one after the other.
  EXPECT_EQ(yaraRuleSpans(store_->current().dpi().rule_sets(0).text()).size(), 3u);
}

TEST_F(DpiServiceTest, ErrorsNameTheLineRuleAndField) {
  ASSERT_TRUE(add(kRuleA).ok());
  const uint64_t v = store_->version();
  // An error on line 3 of the text (the set already has 9 lines before it).
  grpc::Status st = add("rule fine { condition: true }\nrule broken {\n  condition: $b }\n");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  auto errs = detailErrors(st);
  ASSERT_FALSE(errs.empty()) << st.error_message();
  EXPECT_EQ(errs[0].line(), 3) << errs[0].DebugString();
  EXPECT_EQ(errs[0].rule(), "broken");
  EXPECT_EQ(errs[0].field(), "text");
  EXPECT_EQ(errs[0].file(), "local");
  EXPECT_EQ(errs[0].reason().rfind("yara: ", 0), 0u) << errs[0].reason();
  // Duplicate in the set: ALREADY_EXISTS, naming the rule.
  st = add("rule evil_ua { condition: true }");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_NE(st.error_message().find("evil_ua"), std::string::npos);
  // The same name in another set is another namespace: fine.
  EXPECT_TRUE(add("rule evil_ua { condition: false }", "other").ok());
  // A rule file's name is not a rule set.
  EXPECT_EQ(add("rule x { condition: true }", "site.yar").error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(add("rule x { condition: true }", "bad name").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(add("").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(add("// nothing but a comment\n").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // A stale expected_version: ABORTED, nothing changes.
  v1::AddYaraRuleRequest req;
  req.set_text("rule late { condition: true }");
  req.set_expected_version(v);
  v1::ApplyConfigResponse resp;
  EXPECT_EQ(service_->AddYaraRule(nullptr, &req, &resp).error_code(), grpc::StatusCode::ABORTED);
  EXPECT_EQ(find(list(), "local:late"), nullptr);
  EXPECT_EQ(store_->current().dpi().rule_sets_size(), 2);
}

TEST_F(DpiServiceTest, FailOnUnsupportedRefusesTheAdd) {
  v1::ApplianceConfig cfg = store_->current();
  cfg.mutable_dpi()->clear_rule_files();
  cfg.mutable_dpi()->set_fail_on_unsupported(true);
  ASSERT_TRUE(manager_->apply(cfg, store_->version(), false, nullptr).ok());
  grpc::Status st = add("rule loop_only { strings: $a = \"x\" condition: for any i in (1..#a): (@a[i] > 5) }");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("loop_only"), std::string::npos) << st.error_message();
  EXPECT_EQ(store_->current().dpi().rule_sets_size(), 0);
}

TEST_F(DpiServiceTest, RemoveCutsOneRuleAndTheSetWhenEmpty) {
  ASSERT_TRUE(add(kRuleA).ok());
  ASSERT_TRUE(add("rule second { strings: $b = \"}{ // not a comment\" $r = /a{2}\\}/ condition: $b or $r }").ok());
  ASSERT_TRUE(add("private rule helper { condition: true }\nrule uses_helper { condition: helper }").ok());
  // Referenced by another rule: libyara refuses, nothing changes.
  grpc::Status st = remove("helper");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_NE(find(list(), "local:uses_helper"), nullptr);
  ASSERT_TRUE(remove("uses_helper").ok());
  ASSERT_TRUE(remove("local:helper").ok());
  ASSERT_TRUE(remove("evil_ua").ok());
  std::string text = store_->current().dpi().rule_sets(0).text();
  auto spans = yaraRuleSpans(text);
  ASSERT_EQ(spans.size(), 1u) << text;
  EXPECT_EQ(spans[0].name, "second");
  EXPECT_EQ(text.find("private"), std::string::npos) << "the modifier went with its rule";
  EXPECT_EQ(remove("evil_ua").error_code(), grpc::StatusCode::NOT_FOUND);
  // A rule of the rule file: edit the file.
  st = remove("site_rule");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find(file_ + ":1"), std::string::npos) << st.error_message();
  ASSERT_TRUE(remove("second").ok());
  EXPECT_EQ(store_->current().dpi().rule_sets_size(), 0) << "the empty set is gone";
  EXPECT_EQ(list().accepted(), 1u);
}

TEST_F(DpiServiceTest, AmbiguousNameNeedsTheSet) {
  ASSERT_TRUE(add("rule dup { condition: true }", "a").ok());
  ASSERT_TRUE(add("rule dup { condition: true }", "b").ok());
  EXPECT_EQ(remove("dup").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_TRUE(remove("b:dup").ok());
  ASSERT_EQ(store_->current().dpi().rule_sets_size(), 1);
  EXPECT_EQ(store_->current().dpi().rule_sets(0).name(), "a");
}

TEST_F(DpiServiceTest, RuleSetsSurviveARestart) {
  ASSERT_TRUE(add(kRuleA, "incident-42").ok());
  const uint64_t v = store_->version();
  service_.reset();
  manager_.reset();
  store_.reset();
  open();
  EXPECT_EQ(store_->version(), v);
  ASSERT_EQ(store_->current().dpi().rule_sets_size(), 1);
  EXPECT_EQ(store_->current().dpi().rule_sets(0).name(), "incident-42");
  auto snap = manager_->compileCurrent();
  ASSERT_TRUE(snap.ok()) << snap.status();
  bool found = false;
  for (const auto& r : (*snap)->dpi->rules) found |= r.id() == "incident-42:evil_ua";
  EXPECT_TRUE(found);
}

TEST_F(DpiServiceTest, CountersInListAndStats) {
  ASSERT_TRUE(add(kRuleA).ok());
  plane_.counters = {{"site.yar:site_rule", 0, 0}, {"local:evil_ua", 7, 1000}};
  auto l = list();
  EXPECT_EQ(find(l, "local:evil_ua")->matches(), 7u);
  EXPECT_EQ(find(l, "local:evil_ua")->last_match_unix_ns(), 1000);
  EXPECT_EQ(find(l, "site.yar:site_rule")->matches(), 0u);
  v1::Stats stats;
  ASSERT_TRUE(service_->GetStats(nullptr, nullptr, &stats).ok());
  ASSERT_TRUE(stats.has_dpi());
  EXPECT_EQ(stats.dpi().rules_accepted(), 2u);
  EXPECT_EQ(stats.dpi().rules_unsupported(), 1u);
  ASSERT_EQ(stats.dpi().rules_size(), 1) << "only rules that matched";
  EXPECT_EQ(stats.dpi().rules(0).id(), "local:evil_ua");
  EXPECT_EQ(stats.dpi().rules(0).action(), "drop");
  EXPECT_EQ(stats.dpi().rules(0).matches(), 7u);
}

TEST_F(DpiServiceTest, AlertEventsCarryTagsAndMeta) {
  ASSERT_TRUE(add(kRuleA).ok());
  auto d = plane_.dpiRules(plane_.currentGeneration());
  ASSERT_TRUE(d);
  uint32_t idx = 0;
  while (idx < d->rules.size() && d->rules[idx].name != "evil_ua") ++idx;
  ASSERT_LT(idx, d->rules.size());
  dp::Event e{};
  e.type = dp::EventType::kDpiAlert;
  e.stage = dp::Stage::kDpi;
  e.rule = idx;
  e.generation = plane_.currentGeneration();
  e.verdict = dp::Verdict::kDrop;
  v1::Event ev = toApiEvent(e, 0, &plane_);
  ASSERT_EQ(ev.tags_size(), 2);
  EXPECT_EQ(ev.tags(0), "web");
  ASSERT_EQ(ev.meta_size(), 2);
  EXPECT_EQ(ev.meta(1).key(), "action");
  EXPECT_EQ(ev.dpi_action(), "drop");
  EXPECT_NE(ev.json().find("\"tags\":[\"web\",\"c2\"]"), std::string::npos) << ev.json();
  EXPECT_NE(ev.json().find("\"metadata\":{\"author\":[\"soc\"],\"action\":[\"drop\"]}"),
            std::string::npos)
      << ev.json();
  // An older generation the plane does not know: no tags, still an event.
  e.generation = 9999;
  EXPECT_EQ(toApiEvent(e, 0, &plane_).tags_size(), 0);
}

TEST(YaraRuleSpans, SkipsCommentsStringsRegexesAndHex) {
  const std::string text =
      "/* rule not_a_rule { } */\n"
      "import \"pe\"\n"
      "// rule commented { condition: true }\n"
      "global private rule first : t1 t2 {\n"
      "  meta: note = \"a } in a string and rule x {\"\n"
      "  strings: $h = { 4D 5A [2-4] ( 90 | ?? ) }\n"
      "    $r = /ab\\/c{1,2}\\}/ nocase\n"
      "  condition: $h and $r and filesize / 2 > 1\n"
      "}\n"
      "rule second { condition: true }";
  auto s = yaraRuleSpans(text);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].name, "first");
  EXPECT_EQ(s[0].line, 4);
  EXPECT_EQ(s[0].end_line, 9);
  EXPECT_EQ(text.substr(s[0].begin, 6), "global");
  EXPECT_EQ(text[s[0].end - 1], '}');
  EXPECT_EQ(s[1].name, "second");
  EXPECT_EQ(s[1].line, 10);
  EXPECT_EQ(yaraRuleAtLine(s, 6), "first");
  EXPECT_EQ(yaraRuleAtLine(s, 12), "second");
  EXPECT_EQ(yaraRuleAtLine(s, 2), "");
  std::string rest = yaraRemoveSpan(text, s[0]);
  auto r = yaraRuleSpans(rest);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].name, "second");
  EXPECT_NE(rest.find("import \"pe\""), std::string::npos);
}

// Rule sets created / deleted whole, and per-rule actions (issue 19.3).
TEST_F(DpiServiceTest, CreateDeleteRuleSetsAndSetActions) {
  v1::CreateDpiRuleSetRequest cr;
  cr.mutable_rule_set()->set_name("incident-42");
  cr.mutable_rule_set()->set_text(kRuleA);
  cr.set_expected_version(store_->version());
  v1::ApplyConfigResponse resp;
  grpc::Status st = service_->CreateDpiRuleSet(nullptr, &cr, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(store_->current().dpi().rule_sets_size(), 1);
  EXPECT_EQ(store_->current().dpi().rule_sets(0).name(), "incident-42");
  ASSERT_NE(find(list(), "incident-42:evil_ua"), nullptr);
  EXPECT_EQ(find(list(), "incident-42:evil_ua")->action(), "drop");  // its meta action
  // Exists already / the name of a rule file / libyara errors (line in the text) / no rule.
  cr.set_force(true);
  EXPECT_EQ(service_->CreateDpiRuleSet(nullptr, &cr, &resp).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);
  cr.mutable_rule_set()->set_name("site.yar");
  EXPECT_EQ(service_->CreateDpiRuleSet(nullptr, &cr, &resp).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  cr.mutable_rule_set()->set_name("broken");
  cr.mutable_rule_set()->set_text("rule ok_one { condition: true }\n\nrule bad { condition: $nope }\n");
  st = service_->CreateDpiRuleSet(nullptr, &cr, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  auto errs = detailErrors(st);
  ASSERT_FALSE(errs.empty()) << st.error_message();
  EXPECT_EQ(errs[0].line(), 3);
  EXPECT_EQ(errs[0].rule(), "bad");
  cr.mutable_rule_set()->set_text("// nothing\n");
  EXPECT_EQ(service_->CreateDpiRuleSet(nullptr, &cr, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(store_->current().dpi().rule_sets_size(), 1);

  // Actions: by id and by bare name; default removes the override; unknown rule: NOT_FOUND.
  v1::SetDpiRuleActionRequest act;
  act.set_rule("incident-42:evil_ua");
  act.set_action(v1::DPI_RESET);
  act.set_expected_version(store_->version());
  st = service_->SetDpiRuleAction(nullptr, &act, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(find(list(), "incident-42:evil_ua")->action(), "reset");
  act.set_force(true);
  act.set_action(v1::DPI_ALERT);
  ASSERT_TRUE(service_->SetDpiRuleAction(nullptr, &act, &resp).ok());
  ASSERT_EQ(store_->current().dpi().actions_size(), 1) << "one entry per rule";
  EXPECT_EQ(find(list(), "incident-42:evil_ua")->action(), "alert");
  act.set_rule("site_rule");
  act.set_action(v1::DPI_DROP);
  ASSERT_TRUE(service_->SetDpiRuleAction(nullptr, &act, &resp).ok());
  EXPECT_EQ(find(list(), "site.yar:site_rule")->action(), "drop");
  act.set_rule("incident-42:evil_ua");
  act.set_action(v1::DPI_ACTION_DEFAULT);
  ASSERT_TRUE(service_->SetDpiRuleAction(nullptr, &act, &resp).ok());
  EXPECT_EQ(find(list(), "incident-42:evil_ua")->action(), "drop");  // meta again
  ASSERT_EQ(store_->current().dpi().actions_size(), 1);
  act.set_rule("no_such_rule");
  act.set_action(v1::DPI_DROP);
  EXPECT_EQ(service_->SetDpiRuleAction(nullptr, &act, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  act.set_rule("site.yar:evil_ua");  // a name of another source
  EXPECT_EQ(service_->SetDpiRuleAction(nullptr, &act, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  act.set_rule("evil_ua");
  act.set_action(static_cast<v1::DpiAction>(9));
  EXPECT_EQ(service_->SetDpiRuleAction(nullptr, &act, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  act.set_action(v1::DPI_ALERT);
  ASSERT_TRUE(service_->SetDpiRuleAction(nullptr, &act, &resp).ok());  // bare name

  // Delete: the set goes with the overrides that named only its rules; a rule file's name:
  // FAILED_PRECONDITION; unknown: NOT_FOUND.
  v1::DeleteDpiRuleSetRequest del;
  del.set_name("site.yar");
  del.set_force(true);
  EXPECT_EQ(service_->DeleteDpiRuleSet(nullptr, &del, &resp).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  del.set_name("incident-42");
  st = service_->DeleteDpiRuleSet(nullptr, &del, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(store_->current().dpi().rule_sets_size(), 0);
  ASSERT_EQ(store_->current().dpi().actions_size(), 1);
  EXPECT_EQ(store_->current().dpi().actions(0).rule(), "site_rule");
  EXPECT_EQ(find(list(), "incident-42:evil_ua"), nullptr);
  EXPECT_EQ(service_->DeleteDpiRuleSet(nullptr, &del, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
}

}  // namespace
}  // namespace dpu::ctl
