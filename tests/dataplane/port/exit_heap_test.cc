// leaveDpdkHeapToExit (dataplane/port/eal.h): a process about to exit destroys its flow table
// without touching the memory the table reserved and never used. DPDK's rte_free zeroes what
// it frees when the memory was clean, so freeing a 1M-flow table that held a few flows
// faulted in and zeroed all of it (most of a short replay's time). Its own process (the
// flag cannot be unset): ctest runs this binary alone, and the tests run in order.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdio>
#include <memory>

#include "dataplane/flow/flow_table.h"
#include "dataplane/port/eal.h"

namespace dpu::dp {
namespace {

long minorFaults() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

// Faults taken by destroying a fresh table of `capacity` flows.
long faultsToDestroy(const char* name, uint32_t capacity) {
  FlowTableOptions o;
  o.name = name;
  o.capacity = capacity;
  auto t = FlowTable::create(o);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return -1;
  long before = minorFaults();
  t->reset();
  return minorFaults() - before;
}

constexpr uint32_t kFlows = 1u << 20;
// The table's DPDK memory in 4 KB pages: ~40 MB of buckets and keys for 1M flows at the
// least (rte_hash: 8 entries of 8 bytes a bucket, a 40-byte key and its data a flow).
constexpr long kTablePages = (40l << 20) / 4096;

TEST(ExitHeap, FreeingAnUnusedTableTouchesItAll) {
  // The cost being avoided, measured: DPDK's free zeroes the never-used pages (if a DPDK
  // version stops doing so, this says the workaround can go).
  long faults = faultsToDestroy("exit_heap_free", kFlows);
  std::printf("freed: %ld page faults (%ld pages of table at the least)\n", faults, kTablePages);
  EXPECT_GT(faults, kTablePages / 2) << "rte_free no longer clears freed memory";
}

TEST(ExitHeap, LeftToTheExitTheTableIsNotTouched) {
  leaveDpdkHeapToExit();
  ASSERT_TRUE(dpdkHeapLeftToExit());
  long faults = faultsToDestroy("exit_heap_left", kFlows);
  std::printf("left to the exit: %ld page faults\n", faults);
  EXPECT_LT(faults, 256) << "destroying the table at exit faulted in its memory";
}

}  // namespace
}  // namespace dpu::dp
