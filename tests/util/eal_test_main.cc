// gtest main for tests that need DPDK: initializes EAL once for this process without
// hugepages or PCI, with a file prefix unique to the process so tests run in parallel, and
// without shared files or telemetry, so EAL's runtime directory (/var/run/dpdk/dputest<pid>) stays
// empty and is removed right away: a test run leaves nothing there.
#include <gtest/gtest.h>
#include <rte_eal.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  std::string prefix = "--file-prefix=dputest" + std::to_string(getpid());
  std::vector<std::string> args = {"dpu_test", "--no-huge", "--no-pci", "--no-shconf",
                                   "--no-telemetry", "-m", "512", "-l", "0",
                                   "--log-level=lib.eal:error", prefix};
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  if (rte_eal_init(static_cast<int>(cargs.size()), cargs.data()) < 0) {
    std::fprintf(stderr, "rte_eal_init failed\n");
    return 1;
  }
  // EAL creates the directory even in memory and never removes it; empty, it can go now.
  if (const char* dir = rte_eal_get_runtime_dir(); dir != nullptr && dir[0] != 0) rmdir(dir);
  int rc = RUN_ALL_TESTS();
  rte_eal_cleanup();
  return rc;
}
