// Validates an LbModel and builds the compiled load balancer (rules/compiled/lb.h): per
// service the match, the key recipe, the backends and the weighted Maglev table.
//
// Errors: section "lb", rule = the service id (or "<service>/<backend>" for a backend),
// index = the service's position, field = the path ("lb.services[2].key[1].length",
// "lb.services[0].backends[3].mac"), reason.
//
// Reuse: a service whose model equals a service of `previous` (same id) shares that compiled
// object (same pointer, no table build): only services that changed are rebuilt.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "rules/compile/config_errors.h"
#include "rules/compiled/lb.h"
#include "rules/model/lb.h"

namespace dpu::rules {

void validateLb(const LbModel& model, ConfigErrorList& errors);

absl::StatusOr<std::shared_ptr<const CompiledLb>> compileLb(
    const LbModel& model, ConfigErrorList* errors = nullptr,
    const CompiledLb* previous = nullptr);

// One service on its own (validated already): match, fields, backends, Maglev table.
std::shared_ptr<const CompiledLbService> buildLbService(const LbService& s);

// Width in bytes of a fixed-width named field (0 for dns.qname and raw).
uint32_t lbFieldWidth(LbFieldKind k);

}  // namespace dpu::rules
