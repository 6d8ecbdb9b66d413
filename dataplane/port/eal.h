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
//
// Before EAL starts, a runtime directory of the same file prefix that no live process uses
// (left by a process killed with -9 or crashed: its telemetry / multi-process sockets answer
// no connection, no process holds the fcntl lock DPDK's primary takes on `config` or a flock
// on the fbarray files) is removed, with a line on stderr; one in use is left alone (EAL then
// refuses a second primary with a shared config itself).
//
// EAL's log goes where DPDK 22.11 sends it (stderr and syslog) through a filter that drops
// PMD lines which report nothing wrong: net_tap's "failed to create multiq qdisc" (a kernel
// without sch_multiq; only the tap's rte_flow support, unused here, is off) becomes one line
// saying so, and net_tap's "Failed to send start req to secondary 95" under --no-shconf (no
// multi-process channel, so no secondary to tell) is dropped.
absl::Status initEal(const std::vector<std::string>& args);

// The runtime directory EAL uses for the --file-prefix in `args` (argv[0] included; "rte"
// when none): /var/run/dpdk/<prefix> for root, else $XDG_RUNTIME_DIR/dpdk/<prefix> or
// /tmp/dpdk/<prefix> (as DPDK 22.11's eal_create_runtime_dir).
std::string ealRuntimeDir(const std::vector<std::string>& args);

// Removes `dir` when no live process uses anything in it (see initEal): returns the number
// of entries removed (the files and the directory), 0 when there is no such directory, -1
// when it is kept (`why_kept`: the entry in use, or one DPDK does not make).
int removeStaleEalRuntimeDir(const std::string& dir, std::string* why_kept);

// Removes EAL's runtime directory now if it is empty, and again at exit (registered by
// initEal). For processes that call rte_eal_init themselves (test mains).
void removeEmptyEalRuntimeDir();

// EAL arguments for an offline run: no hugepages, no PCI, no shared files (--no-shconf), a
// process-unique file prefix,
// `mem_mb` of memory, lcores 0 .. lcores-1 (the first is the main lcore; more than one:
// threads free to run on any CPU of the process, --lcores '(0-N)@(CPUS)', so there may be
// more lcores than CPUs), quiet logs, plus the given --vdev specs.
std::vector<std::string> offlineEalArgs(const std::vector<std::string>& vdevs, int mem_mb,
                                        unsigned lcores = 1);

// DPDK heap memory at process exit. rte_free() (and rte_hash_free, rte_mempool_free,
// rte_ring_free through it) zeroes every byte it frees that was clean, so that a later
// rte_zmalloc can skip its memset: freeing a flow table that reserved 1M flows and used a
// few thousand faults in and zeroes all of it. On 4 KB pages (--no-huge: replay, tests) that
// was most of a short replay's time (fw_ipv6 case: 1.05 s of which 0.6 s in the frees, 2.0 s
// of 2.6 with two workers). A process that is about to exit calls leaveDpdkHeapToExit()
// before destroying its Dataplane: the dataplane's objects then skip their DPDK frees (the
// heap goes with the process; nothing of it is on disk: --no-shconf, hugepage files unlinked
// or reused by the next start). Their C++ parts, ports (close flushes pcap outputs) and
// everything outside the DPDK heap are released as usual. Irreversible; never in a process
// that creates another Dataplane afterwards (tests do not call it).
void leaveDpdkHeapToExit();
bool dpdkHeapLeftToExit();

}  // namespace dpu::dp
