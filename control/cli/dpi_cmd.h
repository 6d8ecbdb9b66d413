// --- dpi --- `dpuctl dpi ...`: the YARA rules of the running configuration (list, with
// unsupported rules and match counters; show: one source), rules added to / removed from the
// rule sets of the config (AddYaraRule / RemoveYaraRule), rule sets created / deleted whole
// (CreateDpiRuleSet / DeleteDpiRuleSet) and per-rule actions (SetDpiRuleAction). The dispatch and the connection stay in
// dpuctl.cc; what the commands need from it comes in a DnsCmdEnv (control/cli/dns_cmd.h).
#pragma once

#include <string>
#include <vector>

#include "control/cli/dns_cmd.h"
#include "proto/appliance_api.grpc.pb.h"

namespace dpu::cli {

extern const char* const kDpiHelp;

// Returns dpuctl's exit code (0 ok, 1 failed, 2 usage, 3 conflict, 4 invalid).
int cmdDpi(const DnsCmdEnv& env, const std::vector<std::string>& args);

// The rule table of `dpuctl dpi list`.
std::string formatDpiRules(const dpu::v1::ListDpiRulesResponse& r);

}  // namespace dpu::cli
