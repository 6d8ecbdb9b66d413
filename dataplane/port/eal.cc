#include "dataplane/port/eal.h"

#include <rte_eal.h>
#include <rte_errno.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace dpu::dp {

namespace {

char g_runtime_dir[4096];

void removeRuntimeDir() {
  if (g_runtime_dir[0] != 0) rmdir(g_runtime_dir);
}

}  // namespace

void removeEmptyEalRuntimeDir() {
  const char* dir = rte_eal_get_runtime_dir();
  if (dir == nullptr || dir[0] == 0) return;
  std::snprintf(g_runtime_dir, sizeof(g_runtime_dir), "%s", dir);
  removeRuntimeDir();
}

absl::Status initEal(const std::vector<std::string>& args) {
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Registered before rte_eal_init, so it runs after the exit handlers EAL registers (the
  // telemetry socket's unlink): the directory is empty by then.
  static const bool registered = std::atexit(removeRuntimeDir) == 0;
  (void)registered;
  int rc = rte_eal_init(static_cast<int>(copy.size()), argv.data());
  if (rc < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("DPDK EAL initialization failed: ", rte_strerror(rte_errno),
                     " (check the EAL arguments; without hugepages use --no-huge -m <MB>)"));
  }
  removeEmptyEalRuntimeDir();
  return absl::OkStatus();
}

std::vector<std::string> offlineEalArgs(const std::vector<std::string>& vdevs, int mem_mb) {
  std::vector<std::string> a = {"dpu-appliance", "--no-huge", "--no-pci", "--no-shconf",
                                absl::StrCat("--file-prefix=dpu", getpid()),
                                "-m", std::to_string(mem_mb), "-l", "0",
                                "--no-telemetry", "--log-level=*:warning", "--log-level=pmd.net.pcap:error"};
  for (const auto& v : vdevs) {
    a.push_back("--vdev");
    a.push_back(v);
  }
  return a;
}

}  // namespace dpu::dp
