#include "control/cli/dpi_cmd.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "control/cli/cli_format.h"

namespace dpu::cli {

const char* const kDpiHelp = R"(usage:
  dpuctl dpi list
      Every YARA rule of the running configuration, rule files first, then the rule sets
      of the config (dpi.rule_sets), in declaration order: id (SOURCE:RULE), line, action,
      tags, times it matched; rules outside the supported subset are listed as unsupported
      with the reason (they are not matched).
  dpuctl dpi add [FILE.yar | -] [--set NAME] [--expected-version N | --force]
      Adds the rules of FILE.yar (or of standard input: '-' or no FILE) to the rule set NAME
      (default "local") of the config: checked by libyara (errors give the line in FILE),
      then applied like `config set`: validated, compiled, persisted, published hitlessly.
      Rule ids become NAME:RULE. A rule of that name already in the set: exit 1.
  dpuctl dpi remove RULE [--expected-version N | --force]
      Removes the rule RULE (or SET:RULE) from the rule set holding it. Rules of rule files
      (dpi.rule_files) are edited in their file.
  dpuctl dpi create SET [FILE.yar | -] [--expected-version N | --force]
      Creates the rule set SET (dpi.rule_sets[]) with the rules of FILE.yar (or standard
      input), checked by libyara like `dpi add`. A rule set (or rule file) of that name
      already: exit 1. The dpi section is created when there is none (DPI turns on).
  dpuctl dpi delete SET [--expected-version N | --force]
      Deletes the rule set SET with all its rules (and the action overrides naming them).
  dpuctl dpi show SET
      The rules of the rule set (or rule file) SET: line, action, matches, tags.
  dpuctl dpi action RULE alert|drop|reset|default [--expected-version N | --force]
      Sets what happens when RULE (or SOURCE:RULE) matches (dpi.actions): alert (event
      only), drop (the packet and the rest of the flow), reset (TCP RST both ways, then
      drop). default removes the override: the rule's `meta: action`, else
      dpi.default_action, applies again. A rule the configuration does not have: exit 1.

examples:
  dpuctl dpi list
  dpuctl --json dpi list
  dpuctl dpi add exfil.yar --set incident-42
  echo 'rule evil_ua { strings: $a = "EvilAgent/1.0" condition: $a }' | dpuctl dpi add -
  dpuctl dpi remove incident-42:exfil_dns
  dpuctl dpi create incident-42 exfil.yar
  dpuctl dpi action incident-42:exfil_dns drop
  dpuctl dpi action evil_ua default
  dpuctl dpi show incident-42
  dpuctl dpi delete incident-42
)";

namespace {

constexpr int kOk = 0, kFailed = 1, kUsage = 2;

int usage(const std::string& msg) {
  std::fprintf(stderr, "dpuctl: %s\n\n%s", msg.c_str(), kDpiHelp);
  return kUsage;
}

// YARA source of FILE, or of standard input for "-" / no FILE; false when unreadable.
bool readSource(const std::vector<std::string>& pos, size_t at, std::string* text) {
  if (pos.size() <= at || pos[at] == "-") {
    text->assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    return true;
  }
  std::ifstream in(pos[at], std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "dpuctl: %s: cannot open\n", pos[at].c_str());
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  *text = ss.str();
  return true;
}

bool parseAction(const std::string& w, dpu::v1::DpiAction* out) {
  if (w == "alert") *out = dpu::v1::DPI_ALERT;
  else if (w == "drop") *out = dpu::v1::DPI_DROP;
  else if (w == "reset") *out = dpu::v1::DPI_RESET;
  else if (w == "default") *out = dpu::v1::DPI_ACTION_DEFAULT;
  else return false;
  return true;
}

int cmdDpiShow(const DnsCmdEnv& env, const std::vector<std::string>& a) {
  if (a.size() != 2 || a[1].rfind("--", 0) == 0) return usage("dpi show: give exactly one SET");
  grpc::ClientContext ctx;
  env.unary(&ctx);
  dpu::v1::ListDpiRulesResponse all;
  grpc::Status st = env.stub->ListDpiRules(&ctx, dpu::v1::ListDpiRulesRequest(), &all);
  if (!st.ok()) return env.rpc_fail("dpi show", st);
  bool known = false;
  for (const auto& src : all.sources()) known |= src == a[1];
  if (!known) {
    std::fprintf(stderr, "dpuctl: dpi show: no rule set or rule file named '%s'\n", a[1].c_str());
    return kFailed;
  }
  dpu::v1::ListDpiRulesResponse one;
  one.set_config_version(all.config_version());
  one.set_enabled(all.enabled());
  one.add_sources(a[1]);
  for (const auto& r : all.rules()) {
    if (r.source() != a[1]) continue;
    *one.add_rules() = r;
    if (r.supported()) one.set_accepted(one.accepted() + 1);
    else one.set_unsupported(one.unsupported() + 1);
  }
  if (env.json) {
    std::fputs(toJson(one, true).c_str(), stdout);
  } else {
    std::string origin = one.rules_size() ? one.rules(0).origin() : "";
    std::printf("%s %s\n", origin == "file" ? "rule file" : "rule set", a[1].c_str());
    std::fputs(formatDpiRules(one).c_str(), stdout);
  }
  return kOk;
}

}  // namespace

std::string formatDpiRules(const dpu::v1::ListDpiRulesResponse& r) {
  std::string s = absl::StrFormat("config version %u", r.config_version());
  if (!r.enabled()) return absl::StrCat(s, ": DPI is off (no dpi section)\n");
  absl::StrAppend(&s, absl::StrFormat(", %u rule(s) matched, %u unsupported (not matched)\n",
                                      r.accepted(), r.unsupported()));
  if (r.rules_size() == 0) return s;
  absl::StrAppend(&s, absl::StrFormat("%-40s %6s %-7s %10s  %s\n", "RULE", "LINE", "ACTION",
                                      "MATCHES", "TAGS / REASON"));
  for (const auto& x : r.rules()) {
    std::string tags = absl::StrJoin(x.tags(), ",");
    if (x.supported()) {
      absl::StrAppend(&s, absl::StrFormat("%-40s %6d %-7s %10u  %s%s\n", x.id(), x.line(),
                                          x.action(), x.matches(), tags,
                                          x.is_private() ? (tags.empty() ? "(private)" : " (private)")
                                                         : ""));
    } else {
      absl::StrAppend(&s, absl::StrFormat("%-40s %6d %-7s %10s  unsupported: %s\n", x.id(),
                                          x.line(), "-", "-", x.unsupported_reason()));
    }
  }
  return s;
}

int cmdDpi(const DnsCmdEnv& env, const std::vector<std::string>& a) {
  for (const auto& s : a) {
    if (s == "--help" || s == "-h") return std::fputs(kDpiHelp, stdout), kOk;
  }
  if (a.empty()) return usage("dpi: which one? list, show, create, delete, add, remove or action");
  const std::string sub = a[0];
  if (sub == "show") return cmdDpiShow(env, a);
  if (sub == "list") {
    if (a.size() != 1) return usage("dpi list: unexpected argument '" + a[1] + "'");
    grpc::ClientContext ctx;
    env.unary(&ctx);
    dpu::v1::ListDpiRulesResponse resp;
    grpc::Status st = env.stub->ListDpiRules(&ctx, dpu::v1::ListDpiRulesRequest(), &resp);
    if (!st.ok()) return env.rpc_fail("dpi list", st);
    std::fputs(env.json ? toJson(resp, true).c_str() : formatDpiRules(resp).c_str(), stdout);
    return kOk;
  }
  if (sub != "add" && sub != "remove" && sub != "create" && sub != "delete" && sub != "action") {
    return usage("dpi: unknown subcommand '" + sub + "'");
  }
  std::vector<std::string> pos;
  std::string set;
  for (size_t i = 1; i < a.size(); ++i) {
    std::string err;
    if (env.version_opt(a, i, &err)) {
      if (!err.empty()) return usage("dpi " + sub + ": " + err);
      continue;
    }
    if (sub == "add" && a[i] == "--set") {
      if (i + 1 >= a.size()) return usage("dpi add: --set needs a rule set name");
      set = a[++i];
      continue;
    }
    if (a[i].rfind("--", 0) == 0) return usage("dpi " + sub + ": unknown option '" + a[i] + "'");
    pos.push_back(a[i]);
  }
  const size_t max_pos = (sub == "create" || sub == "action") ? 2 : 1;
  if (pos.size() > max_pos) return usage("dpi " + sub + ": unexpected argument '" + pos[max_pos] + "'");
  dpu::v1::AddYaraRuleRequest add;
  dpu::v1::RemoveYaraRuleRequest rm;
  dpu::v1::CreateDpiRuleSetRequest create;
  dpu::v1::DeleteDpiRuleSetRequest del;
  dpu::v1::SetDpiRuleActionRequest action;
  if (sub == "add") {
    std::string text;
    if (!readSource(pos, 0, &text)) return kFailed;
    if (text.empty()) return usage("dpi add: no YARA source (empty file or input)");
    add.set_rule_set(set);
    add.set_text(text);
  } else if (sub == "create") {
    if (pos.empty() || pos[0] == "-") return usage("dpi create: give the SET name");
    std::string text;
    if (!readSource(pos, 1, &text)) return kFailed;
    if (text.empty()) return usage("dpi create: no YARA source (empty file or input)");
    create.mutable_rule_set()->set_name(pos[0]);
    create.mutable_rule_set()->set_text(text);
  } else if (sub == "delete") {
    if (pos.empty()) return usage("dpi delete: give the SET name");
    del.set_name(pos[0]);
  } else if (sub == "action") {
    dpu::v1::DpiAction act;
    if (pos.size() != 2) return usage("dpi action: give RULE and alert, drop, reset or default");
    if (!parseAction(pos[1], &act)) {
      return usage("dpi action: '" + pos[1] + "' is not alert, drop, reset or default");
    }
    action.set_rule(pos[0]);
    action.set_action(act);
  } else {
    if (pos.empty()) return usage("dpi remove: give the RULE (or SET:RULE)");
    rm.set_rule(pos[0]);
  }
  uint64_t expected = 0;
  bool force = false;
  if (int rc = env.resolve_expected(&expected, &force); rc != kOk) return rc;
  grpc::ClientContext ctx;
  env.unary(&ctx);
  dpu::v1::ApplyConfigResponse resp;
  grpc::Status st;
  if (sub == "add") {
    add.set_expected_version(expected);
    add.set_force(force);
    st = env.stub->AddYaraRule(&ctx, add, &resp);
  } else if (sub == "create") {
    create.set_expected_version(expected);
    create.set_force(force);
    st = env.stub->CreateDpiRuleSet(&ctx, create, &resp);
  } else if (sub == "delete") {
    del.set_expected_version(expected);
    del.set_force(force);
    st = env.stub->DeleteDpiRuleSet(&ctx, del, &resp);
  } else if (sub == "action") {
    action.set_expected_version(expected);
    action.set_force(force);
    st = env.stub->SetDpiRuleAction(&ctx, action, &resp);
  } else {
    rm.set_expected_version(expected);
    rm.set_force(force);
    st = env.stub->RemoveYaraRule(&ctx, rm, &resp);
  }
  if (!st.ok()) return env.rpc_fail("dpi " + sub, st);
  return env.print_apply(resp);
}

}  // namespace dpu::cli
