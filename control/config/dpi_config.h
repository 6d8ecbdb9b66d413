// --- dpi --- ApplianceConfig.dpi -> rules::DpiModel (rule files read here; errors name the
// field, e.g. "dpi.rule_files[2]").
#pragma once

#include "proto/appliance.pb.h"
#include "rules/compile/config_errors.h"
#include "rules/model/dpi.h"

namespace dpu::ctl {

void dpiToModel(const dpu::v1::ApplianceConfig& cfg, rules::DpiModel* m, rules::ConfigErrorList& errors);

}  // namespace dpu::ctl
