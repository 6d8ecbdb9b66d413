// The packet path's built-in stages, in order (stage_list.cc; docs/architecture.md).
#pragma once

#include <vector>

#include "dataplane/pipeline/stage.h"

namespace dpu::dp {

const std::vector<StageSpec>& builtinStages();

}  // namespace dpu::dp
