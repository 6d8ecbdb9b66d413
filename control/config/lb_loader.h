// --- lb --- ApplianceConfig.lb (proto) -> rules::LbModel, and back (for the gRPC edits of
// single backends, which change the document). Errors name the field path
// ("lb.services[1].backends[0].mac") and the service / backend id.
#pragma once

#include "proto/appliance.pb.h"
#include "rules/compile/config_errors.h"
#include "rules/model/lb.h"

namespace dpu::ctl {

// Converts; appends one error per bad field (syntax: addresses, MACs, names, hex masks...).
// The model's own checks (rules::validateLb) run when it is compiled.
void lbToModel(const v1::LbConfig& cfg, rules::LbModel* out, rules::ConfigErrorList& errors);

}  // namespace dpu::ctl
