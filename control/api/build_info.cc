#include "control/api/build_info.h"

#include <rte_version.h>

// Defined by control/CMakeLists.txt for this file only (so a new commit recompiles one file).
#ifndef DPU_VERSION
#error "DPU_VERSION must be defined by the build (CMake project version)"
#endif
#ifndef DPU_GIT_COMMIT
#define DPU_GIT_COMMIT "unknown"
#endif
#ifndef DPU_BUILD_TYPE
#define DPU_BUILD_TYPE "unknown"
#endif

namespace dpu::ctl {

v1::BuildInfo buildInfo() {
  v1::BuildInfo b;
  b.set_version(DPU_VERSION);
  b.set_git_commit(DPU_GIT_COMMIT);
#if defined(__clang__)
  b.set_compiler("clang " __VERSION__);
#elif defined(__GNUC__)
  b.set_compiler("gcc " __VERSION__);
#else
  b.set_compiler(__VERSION__);
#endif
  b.set_dpdk_version(rte_version());
  b.set_build_type(DPU_BUILD_TYPE);
  return b;
}

}  // namespace dpu::ctl
