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

examples:
  dpuctl dpi list
  dpuctl --json dpi list
  dpuctl dpi add exfil.yar --set incident-42
  echo 'rule evil_ua { strings: $a = "EvilAgent/1.0" condition: $a }' | dpuctl dpi add -
  dpuctl dpi remove incident-42:exfil_dns
)";

namespace {

constexpr int kOk = 0, kFailed = 1, kUsage = 2;

int usage(const std::string& msg) {
  std::fprintf(stderr, "dpuctl: %s\n\n%s", msg.c_str(), kDpiHelp);
  return kUsage;
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
  if (a.empty()) return usage("dpi: which one? list, add or remove");
  const std::string sub = a[0];
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
  if (sub != "add" && sub != "remove") return usage("dpi: unknown subcommand '" + sub + "'");
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
  if (pos.size() > 1) return usage("dpi " + sub + ": unexpected argument '" + pos[1] + "'");
  dpu::v1::AddYaraRuleRequest add;
  dpu::v1::RemoveYaraRuleRequest rm;
  if (sub == "add") {
    std::string text;
    if (pos.empty() || pos[0] == "-") {
      text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    } else {
      std::ifstream in(pos[0], std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "dpuctl: %s: cannot open\n", pos[0].c_str());
        return kFailed;
      }
      std::stringstream ss;
      ss << in.rdbuf();
      text = ss.str();
    }
    if (text.empty()) return usage("dpi add: no YARA source (empty file or input)");
    add.set_rule_set(set);
    add.set_text(text);
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
  } else {
    rm.set_expected_version(expected);
    rm.set_force(force);
    st = env.stub->RemoveYaraRule(&ctx, rm, &resp);
  }
  if (!st.ok()) return env.rpc_fail("dpi " + sub, st);
  return env.print_apply(resp);
}

}  // namespace dpu::cli
