// EAL start-up helpers.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace dpu::dp {

// Initializes EAL with `args` (argv[0] included). Once per process. EAL creates its runtime
// directory (/var/run/dpdk/<file-prefix> for root) even with --no-shconf / --in-memory and
// never removes it: it is removed here when empty (no shared config, no multi-process or
// telemetry socket: --no-shconf --no-telemetry; --in-memory is refused with --no-huge), else
// at exit once the telemetry socket is gone. A directory holding a shared config (no
// --no-shconf) stays, as DPDK intends.
absl::Status initEal(const std::vector<std::string>& args);

// Removes EAL's runtime directory now if it is empty, and again at exit (registered by
// initEal). For processes that call rte_eal_init themselves (test mains).
void removeEmptyEalRuntimeDir();

// EAL arguments for an offline run: no hugepages, no PCI, no shared files (--no-shconf), a
// process-unique file prefix,
// `mem_mb` of memory, only the main lcore, quiet logs, plus the given --vdev specs.
std::vector<std::string> offlineEalArgs(const std::vector<std::string>& vdevs, int mem_mb);

}  // namespace dpu::dp
