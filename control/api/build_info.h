// What this binary is: version (CMake project version), git commit (taken by CMake at
// configure time, "unknown" outside a git checkout), compiler, DPDK version, build type.
#pragma once

#include "proto/appliance_api.pb.h"

namespace dpu::ctl {

v1::BuildInfo buildInfo();

}  // namespace dpu::ctl
