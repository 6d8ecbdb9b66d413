// --- dpi --- ApplianceConfig.dpi -> rules::DpiModel (rule files read here; errors name the
// field, e.g. "dpi.rule_files[2]").
#pragma once

#include <string>

#include "absl/status/status.h"
#include "proto/appliance.pb.h"
#include "rules/compile/config_errors.h"
#include "rules/model/dpi.h"

namespace dpu::ctl {

// --- dpi rule sets (control) --- a valid dpi.rule_sets[].name (1..64 of [A-Za-z0-9_.-]).
absl::Status checkRuleSetName(const std::string& name);

void dpiToModel(const dpu::v1::ApplianceConfig& cfg, rules::DpiModel* m, rules::ConfigErrorList& errors);

}  // namespace dpu::ctl
