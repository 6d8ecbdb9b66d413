// --- dpi --- The DPI RPCs of dpu.v1.Appliance: YARA rules added to / removed from the rule
// sets of the committed document (dpi.rule_sets, applied like UpdateConfig, so they persist
// and publish hitlessly), the listing of every rule (accepted with its action or unsupported
// with the reason) with its match counters, and the DPI part of GetStats.
#include <algorithm>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "control/api/appliance_service.h"
#include "control/app/summary.h"
#include "control/config/dpi_config.h"
#include "control/config/yara_spans.h"
#include "rules/compile/yara_translate.h"
#include "rules/compile/yara_validate.h"

namespace dpu::ctl {
namespace {

constexpr size_t kMaxTextBytes = 1 << 20;
constexpr const char* kDefaultRuleSet = "local";

v1::DpiRuleSet* findSet(v1::ApplianceConfig& doc, const std::string& name) {
  for (v1::DpiRuleSet& s : *doc.mutable_dpi()->mutable_rule_sets()) {
    if (s.name() == name) return &s;
  }
  return nullptr;
}

int lineCount(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }

// The rule file of the document whose rules are in namespace `name` (file name, or the
// whole path when two files share a name, as dpiToModel names them); -1 when none.
int ruleFileNamed(const v1::DpiConfig& c, const std::string& name) {
  for (int k = 0; k < c.rule_files_size(); ++k) {
    if (c.rule_files(k) == name || std::filesystem::path(c.rule_files(k)).filename() == name) return k;
  }
  return -1;
}

// Only blanks and comments left (no rule, import or include).
bool noContent(const std::string& text) {
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      ++i;
    } else if (text.compare(i, 2, "//") == 0) {
      i = text.find('\n', i);
      if (i == std::string::npos) return true;
    } else if (text.compare(i, 2, "/*") == 0) {
      size_t e = text.find("*/", i + 2);
      if (e == std::string::npos) return true;
      i = e + 2;
    } else {
      return false;
    }
  }
  return true;
}

// libyara's judgement of `text` appended to `prefix` (the rest of its rule set, so the text
// may refer to the set's rules): every error, lines and rules named in `text`.
rules::ConfigErrorList yaraTextErrors(const std::string& set, const std::string& prefix,
                                      const std::string& text,
                                      const std::vector<YaraRuleSpan>& spans) {
  const int base = lineCount(prefix);
  rules::ConfigErrorList errs;
  rules::YaraRulesPtr ok = rules::yaraCompile({{set, prefix + text}}, errs);
  if (ok && errs.empty()) return {};
  for (rules::ConfigError& e : errs) {
    if (e.line > base) {
      e.line -= base;
      e.rule = yaraRuleAtLine(spans, e.line);
    }
    e.file = set;
    e.field = "text";
  }
  if (errs.empty()) errs.push_back({"dpi", "", -1, 0, set, "text", "yara: compilation failed"});
  return errs;
}

// A rule named `name` in the source `source` ("" = any) of the dpi section: a rule set's or
// a rule file's (read now).
bool ruleExists(const v1::DpiConfig& c, const std::string& source, const std::string& name) {
  for (const v1::DpiRuleSet& rs : c.rule_sets()) {
    if (!source.empty() && rs.name() != source) continue;
    for (const YaraRuleSpan& s : yaraRuleSpans(rs.text())) {
      if (s.name == name) return true;
    }
  }
  for (int k = 0; k < c.rule_files_size(); ++k) {
    if (!source.empty() && ruleFileNamed(c, source) != k) continue;
    for (const YaraRuleSpan& s : yaraRuleSpans(rules::readFileBytes(c.rule_files(k)))) {
      if (s.name == name) return true;
    }
  }
  return false;
}

// "<source>:<rule>" or "<rule>" -> {source ("" when none), rule}.
std::pair<std::string, std::string> splitRuleId(const std::string& id) {
  size_t c = id.rfind(':');
  if (c == std::string::npos) return {"", id};
  return {id.substr(0, c), id.substr(c + 1)};
}

void fillMeta(const std::vector<std::pair<std::string, std::string>>& meta,
              google::protobuf::RepeatedPtrField<v1::DpiMeta>* out) {
  for (const auto& [k, v] : meta) {
    v1::DpiMeta* m = out->Add();
    m->set_key(utf8Safe(k));
    m->set_value(utf8Safe(v));
  }
}

}  // namespace

void fillDpiStats(const dp::DataplaneControl& plane, int64_t wall_offset_ns, v1::Stats* out) {
  std::shared_ptr<const rules::CompiledDpi> d = plane.dpiRules(plane.currentGeneration());
  if (!d) return;
  v1::DpiStats* s = out->mutable_dpi();
  s->set_rules_accepted(uint32_t(d->rules.size()));
  s->set_rules_unsupported(uint32_t(d->unsupported.size()));
  s->set_cache_write_failures(rules::dpiCacheWriteFailures());
  std::map<std::string, const rules::DpiRule*> by_id;
  for (const rules::DpiRule& r : d->rules) by_id.emplace(r.id(), &r);
  for (const dp::DpiRuleCounters& c : plane.dpiRuleCounters()) {
    auto it = by_id.find(c.id);
    if (c.matches == 0 || it == by_id.end()) continue;
    v1::DpiRuleMatches* m = s->add_rules();
    m->set_id(c.id);
    m->set_action(rules::dpiActionName(it->second->action));
    m->set_matches(c.matches);
    if (c.last_hit_ns) m->set_last_match_unix_ns(int64_t(c.last_hit_ns) + wall_offset_ns);
  }
}

grpc::Status ApplianceService::AddYaraRule(grpc::ServerContext*, const v1::AddYaraRuleRequest* req,
                                           v1::ApplyConfigResponse* resp) {
  const std::string set = req->rule_set().empty() ? kDefaultRuleSet : req->rule_set();
  if (absl::Status st = checkRuleSetName(set); !st.ok()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, absl::StrCat("rule_set: ", st.message()));
  }
  const std::string& text = req->text();
  if (text.empty() || text.size() > kMaxTextBytes) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("text: YARA source of 1 to ", kMaxTextBytes, " bytes"));
  }
  const std::vector<YaraRuleSpan> spans = yaraRuleSpans(text);
  rules::ConfigErrorList text_errors;  // libyara's errors, lines in `text`
  auto mutate = [&](v1::ApplianceConfig& doc) -> absl::Status {
    if (int k = ruleFileNamed(doc.dpi(), set); k >= 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rule set '", set, "' is the rule file dpi.rule_files[", k, "] (", doc.dpi().rule_files(k),
          "); edit the file, or add the rule to another rule set"));
    }
    v1::DpiRuleSet* rs = findSet(doc, set);
    const std::string existing = rs ? rs->text() : "";
    for (const YaraRuleSpan& old : yaraRuleSpans(existing)) {
      for (const YaraRuleSpan& s : spans) {
        if (s.name == old.name) {
          return absl::AlreadyExistsError(absl::StrCat("rule set '", set, "' already has rule '",
                                                       s.name, "' (its line ", old.line, ")"));
        }
      }
    }
    std::string prefix = existing;
    if (!prefix.empty() && prefix.back() != '\n') prefix.push_back('\n');
    text_errors = yaraTextErrors(set, prefix, text, spans);
    if (!text_errors.empty()) return rules::errorsToStatus(text_errors);
    if (spans.empty()) return absl::InvalidArgumentError("text: no rule in it");
    if (rs == nullptr) {
      rs = doc.mutable_dpi()->add_rule_sets();
      rs->set_name(set);
    }
    rs->set_text(prefix + text);
    return absl::OkStatus();
  };
  grpc::Status st = updateWith(mutate, req->expected_version(), req->force(), resp);
  if (!st.ok() && !text_errors.empty()) {
    // The manager saw only the summary: answer with every error, lines in `text`.
    return applyErrorToGrpc(ApplyError{rules::errorsToStatus(text_errors), text_errors, "validate"});
  }
  return st;
}

grpc::Status ApplianceService::RemoveYaraRule(grpc::ServerContext*,
                                              const v1::RemoveYaraRuleRequest* req,
                                              v1::ApplyConfigResponse* resp) {
  if (req->rule().empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "rule: required");
  const std::pair<std::string, std::string> id = splitRuleId(req->rule());
  const std::string &set = id.first, &name = id.second;
  auto mutate = [&](v1::ApplianceConfig& doc) -> absl::Status {
    struct Hit {
      v1::DpiRuleSet* rs;
      YaraRuleSpan span;
    };
    std::vector<Hit> hits;
    for (v1::DpiRuleSet& rs : *doc.mutable_dpi()->mutable_rule_sets()) {
      if (!set.empty() && rs.name() != set) continue;
      for (const YaraRuleSpan& s : yaraRuleSpans(rs.text())) {
        if (s.name == name) hits.push_back({&rs, s});
      }
    }
    if (hits.size() > 1) {
      std::string where;
      for (const Hit& h : hits) absl::StrAppend(&where, where.empty() ? "" : ", ", h.rs->name());
      return absl::InvalidArgumentError(absl::StrCat("rule '", name, "' is in the rule sets ", where,
                                                     ": name it as <set>:", name));
    }
    if (hits.empty()) {
      // A rule of a rule file is edited in its file: say where it is.
      const v1::DpiConfig& c = doc.dpi();
      for (int k = 0; k < c.rule_files_size(); ++k) {
        const std::string& path = c.rule_files(k);
        if (!set.empty() && ruleFileNamed(c, set) != k) continue;
        for (const YaraRuleSpan& s : yaraRuleSpans(rules::readFileBytes(path))) {
          if (s.name == name) {
            return absl::FailedPreconditionError(absl::StrCat(
                "rule '", name, "' comes from the rule file ", path, ":", s.line,
                " (dpi.rule_files[", k, "]); edit the file (or remove it from dpi.rule_files) "
                "and apply again"));
          }
        }
      }
      return absl::NotFoundError(absl::StrCat("no YARA rule '", req->rule(), "' in dpi.rule_sets"));
    }
    v1::DpiRuleSet* rs = hits[0].rs;
    std::string rest = yaraRemoveSpan(rs->text(), hits[0].span);
    if (yaraRuleSpans(rest).empty() && noContent(rest)) {
      auto* sets = doc.mutable_dpi()->mutable_rule_sets();
      for (int k = 0; k < sets->size(); ++k) {
        if (&sets->at(k) == rs) {
          sets->DeleteSubrange(k, 1);
          break;
        }
      }
    } else {
      rs->set_text(rest);
    }
    return absl::OkStatus();
  };
  return updateWith(mutate, req->expected_version(), req->force(), resp);
}

grpc::Status ApplianceService::CreateDpiRuleSet(grpc::ServerContext*,
                                                const v1::CreateDpiRuleSetRequest* req,
                                                v1::ApplyConfigResponse* resp) {
  const std::string& set = req->rule_set().name();
  if (absl::Status st = checkRuleSetName(set); !st.ok()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("rule_set.name: ", st.message()));
  }
  const std::string& text = req->rule_set().text();
  if (text.size() > kMaxTextBytes) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("rule_set.text: at most ", kMaxTextBytes, " bytes"));
  }
  const std::vector<YaraRuleSpan> spans = yaraRuleSpans(text);
  if (spans.empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "rule_set.text: no rule in it (a rule set holds at least one rule)");
  }
  rules::ConfigErrorList text_errors;
  auto mutate = [&](v1::ApplianceConfig& doc) -> absl::Status {
    if (int k = ruleFileNamed(doc.dpi(), set); k >= 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "'", set, "' is the rule file dpi.rule_files[", k, "] (", doc.dpi().rule_files(k),
          "); choose another rule set name"));
    }
    if (findSet(doc, set) != nullptr) {
      return absl::AlreadyExistsError(absl::StrCat("a rule set named '", set,
                                                   "' exists already (dpuctl dpi add --set ",
                                                   set, " adds rules to it)"));
    }
    text_errors = yaraTextErrors(set, "", text, spans);
    if (!text_errors.empty()) return rules::errorsToStatus(text_errors);
    *doc.mutable_dpi()->add_rule_sets() = req->rule_set();
    return absl::OkStatus();
  };
  grpc::Status st = updateWith(mutate, req->expected_version(), req->force(), resp);
  if (!st.ok() && !text_errors.empty()) {
    return applyErrorToGrpc(ApplyError{rules::errorsToStatus(text_errors), text_errors, "validate"});
  }
  return st;
}

grpc::Status ApplianceService::DeleteDpiRuleSet(grpc::ServerContext*,
                                                const v1::DeleteDpiRuleSetRequest* req,
                                                v1::ApplyConfigResponse* resp) {
  if (req->name().empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "name: required");
  auto mutate = [&](v1::ApplianceConfig& doc) -> absl::Status {
    if (int k = ruleFileNamed(doc.dpi(), req->name()); k >= 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "'", req->name(), "' is the rule file dpi.rule_files[", k, "] (",
          doc.dpi().rule_files(k), "); remove it from dpi.rule_files instead"));
    }
    auto* sets = doc.mutable_dpi()->mutable_rule_sets();
    int at = -1;
    for (int k = 0; k < sets->size(); ++k) {
      if (sets->Get(k).name() == req->name()) at = k;
    }
    if (at < 0) {
      return absl::NotFoundError(absl::StrCat("no rule set named '", req->name(), "' in dpi.rule_sets"));
    }
    sets->DeleteSubrange(at, 1);
    // Action overrides of its rules go with it: "<set>:<rule>", and bare rule names no other
    // source declares any more.
    auto* actions = doc.mutable_dpi()->mutable_actions();
    for (int k = actions->size() - 1; k >= 0; --k) {
      auto [source, rule] = splitRuleId(actions->Get(k).rule());
      const bool gone = source.empty() ? !ruleExists(doc.dpi(), "", rule) : source == req->name();
      if (gone) actions->DeleteSubrange(k, 1);
    }
    return absl::OkStatus();
  };
  return updateWith(mutate, req->expected_version(), req->force(), resp);
}

grpc::Status ApplianceService::SetDpiRuleAction(grpc::ServerContext*,
                                                const v1::SetDpiRuleActionRequest* req,
                                                v1::ApplyConfigResponse* resp) {
  if (req->rule().empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "rule: required");
  if (!v1::DpiAction_IsValid(req->action())) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("action: ", int(req->action()),
                                     " is not one of DPI_ACTION_DEFAULT, DPI_ALERT, DPI_DROP, DPI_RESET"));
  }
  auto mutate = [&](v1::ApplianceConfig& doc) -> absl::Status {
    if (!doc.has_dpi()) return absl::FailedPreconditionError("DPI is off (no dpi section)");
    auto [source, rule] = splitRuleId(req->rule());
    if (!ruleExists(doc.dpi(), source, rule)) {
      return absl::NotFoundError(absl::StrCat("no YARA rule '", req->rule(),
                                              "' in dpi.rule_files or dpi.rule_sets"));
    }
    // One entry per rule (as written): the later entry wins in the compiler, so the old one
    // goes and the new one is appended.
    auto* actions = doc.mutable_dpi()->mutable_actions();
    for (int k = actions->size() - 1; k >= 0; --k) {
      if (actions->Get(k).rule() == req->rule()) actions->DeleteSubrange(k, 1);
    }
    if (req->action() != v1::DPI_ACTION_DEFAULT) {
      v1::DpiRuleAction* a = actions->Add();
      a->set_rule(req->rule());
      a->set_action(req->action());
    }
    return absl::OkStatus();
  };
  return updateWith(mutate, req->expected_version(), req->force(), resp);
}

grpc::Status ApplianceService::ListDpiRules(grpc::ServerContext*, const v1::ListDpiRulesRequest*,
                                            v1::ListDpiRulesResponse* resp) {
  auto view = config_->dpiView();
  if (!view.ok()) return toGrpc(view.status());
  resp->set_config_version(view->version);
  resp->set_enabled(view->model.enabled);
  if (!view->compiled) return grpc::Status::OK;
  const rules::CompiledDpi& d = *view->compiled;
  // The rule sets are the sources after the files, in order (dpiToModel).
  const v1::ApplianceConfig doc = config_->current();
  std::map<std::string, int> order;
  for (const rules::YaraSource& s : view->model.sources) {
    order.emplace(s.name, int(order.size()));
    resp->add_sources(s.name);
  }
  auto origin = [&](const std::string& source) {
    for (const v1::DpiRuleSet& rs : doc.dpi().rule_sets()) {
      if (rs.name() == source) return "rule_set";
    }
    return "file";
  };
  std::map<std::string, dp::DpiRuleCounters> counters;
  // Counters are the dataplane's (its running rule set): matched by rule id.
  for (dp::DpiRuleCounters& c : plane_->dpiRuleCounters()) counters.emplace(c.id, std::move(c));
  std::vector<v1::DpiRuleStatus> all;
  for (const rules::DpiRule& r : d.rules) {
    v1::DpiRuleStatus st;
    st.set_id(r.id());
    st.set_source(r.source);
    st.set_name(r.name);
    st.set_line(r.line);
    st.set_supported(true);
    st.set_action(rules::dpiActionName(r.action));
    for (const std::string& t : r.tags) st.add_tags(utf8Safe(t));
    fillMeta(r.meta, st.mutable_meta());
    st.set_is_private(r.is_private);
    st.set_is_global(r.is_global);
    if (auto it = counters.find(st.id()); it != counters.end()) {
      st.set_matches(it->second.matches);
      if (it->second.last_hit_ns) {
        st.set_last_match_unix_ns(int64_t(it->second.last_hit_ns) + opts_.wall_offset_ns);
      }
    }
    all.push_back(std::move(st));
  }
  for (const rules::DpiUnsupported& u : d.unsupported) {
    v1::DpiRuleStatus st;
    st.set_id(absl::StrCat(u.source, ":", u.rule));
    st.set_source(u.source);
    st.set_name(u.rule);
    st.set_line(u.line);
    st.set_supported(false);
    st.set_unsupported_reason(u.reason);
    all.push_back(std::move(st));
  }
  std::stable_sort(all.begin(), all.end(), [&](const v1::DpiRuleStatus& a, const v1::DpiRuleStatus& b) {
    int oa = order.count(a.source()) ? order[a.source()] : INT32_MAX;
    int ob = order.count(b.source()) ? order[b.source()] : INT32_MAX;
    return oa != ob ? oa < ob : a.line() < b.line();
  });
  for (v1::DpiRuleStatus& st : all) {
    st.set_origin(origin(st.source()));
    *resp->add_rules() = std::move(st);
  }
  resp->set_accepted(uint32_t(d.rules.size()));
  resp->set_unsupported(uint32_t(d.unsupported.size()));
  return grpc::Status::OK;
}

}  // namespace dpu::ctl
