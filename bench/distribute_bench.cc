// Cost of software distribution per packet (docs/operations.md "Many workers"), on one core:
//   decide   parsePacket + distributionWorker (the distributor's parse and symmetric hash)
//   decide with NAT   the same with a table of 100 NAT backends of one VIP (DistributionCanon:
//            a 4096-bit filter per address, a binary search when its bit is set; none of
//            the frames' addresses is in it, the common case)
//   ring     the hand-off through an rte_ring: a multi-producer bulk enqueue of bursts of 32
//            mbuf pointers and the single-consumer dequeue of them (both ends on this core)
// over FLOWS 60-byte IPv4 TCP/UDP frames with random addresses (the bench traffic's shape).
// Each round runs both over the whole set; the figures are medians over rounds of ns per
// packet (steady_clock). Not in it: the cross-core cost (the packet's cache lines and the
// ring's move to the worker's core), which the receiving worker pays; the live run
// (bench/workers_bench.sh) has it.
//
//   distribute_bench [--rounds N] [--flows N] [--workers N]
#include <rte_ring.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "dataplane/packet/parser.h"
#include "dataplane/pipeline/distribute.h"

namespace {

// Ethernet + IPv4 + TCP (even i) or UDP, addresses from a splitmix64 stream.
std::vector<uint8_t> frame(uint32_t i, uint64_t& state) {
  state += 0x9e3779b97f4a7c15ull;
  uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  std::vector<uint8_t> f(60, 0);
  const uint8_t head[14] = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00};
  std::memcpy(f.data(), head, sizeof(head));
  uint8_t* ip = f.data() + 14;
  const bool tcp = i % 2 == 0;
  ip[0] = 0x45;
  ip[3] = tcp ? 46 : 46;  // total length 46: the 60-byte frame's IP packet
  ip[8] = 64;
  ip[9] = tcp ? 6 : 17;
  std::memcpy(ip + 12, &z, 8);  // source and destination address
  ip[12] = 10;
  ip[16] = 172;
  uint8_t* l4 = ip + 20;
  l4[0] = uint8_t(z >> 40) | 4;
  l4[1] = uint8_t(z >> 48);
  l4[3] = tcp ? 80 : 53;
  if (tcp) {
    l4[12] = 0x50;
    l4[13] = 0x10;
  } else {
    l4[5] = 26;  // UDP length
  }
  return f;
}

volatile uint64_t g_sink;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 101;
  uint32_t flows = 100000;
  uint16_t workers = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--flows")) flows = uint32_t(std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--workers")) workers = uint16_t(std::atoi(argv[i + 1]));
  }
  uint64_t state = 1;
  std::vector<std::vector<uint8_t>> frames;
  for (uint32_t i = 0; i < flows; ++i) frames.push_back(frame(i, state));
  dpu::dp::PacketMeta m;
  if (dpu::dp::parsePacket(frames[0].data(), 60, m) != dpu::dp::ParseStatus::kOk) {
    std::fprintf(stderr, "the bench frames do not parse\n");
    return 1;
  }
  // A ring on plain memory (rte_ring_init needs no EAL), as the appliance's inbound rings.
  const unsigned ring_size = 4096;
  const ssize_t bytes = rte_ring_get_memsize(ring_size);
  std::unique_ptr<void, decltype(&std::free)> mem(std::aligned_alloc(64, size_t((bytes + 63) / 64 * 64)), &std::free);
  rte_ring* r = static_cast<rte_ring*>(mem.get());
  if (rte_ring_init(r, "bench", ring_size, RING_F_SC_DEQ) != 0) {
    std::fprintf(stderr, "rte_ring_init failed\n");
    return 1;
  }
  std::vector<void*> objs(flows);
  for (uint32_t i = 0; i < flows; ++i) objs[i] = frames[i].data();
  // 100 NAT backends (10.200.0.0/24) of one VIP, as buildDistributionCanon makes them.
  dpu::dp::DistributionCanon canon;
  for (uint32_t b = 0; b < 100; ++b) {
    dpu::dp::DistributionCanon::Host h{};
    h.addr.b[0] = 10, h.addr.b[1] = 200, h.addr.b[3] = uint8_t(b + 1);
    h.canon.b[0] = 192, h.canon.b[2] = 2, h.canon.b[3] = 10;
    canon.hosts.push_back(h);
  }
  std::sort(canon.hosts.begin(), canon.hosts.end(), [](const auto& a, const auto& b) {
    return dpu::dp::DistributionCanon::less(a, b.v6, b.addr);
  });
  canon.seal();
  std::vector<double> decide, decide_nat, ring;
  std::vector<uint32_t> per(workers, 0);
  for (int round = 0; round < rounds; ++round) {
    auto t0 = std::chrono::steady_clock::now();
    uint64_t acc = 0;
    for (const auto& f : frames) {
      dpu::dp::parsePacket(f.data(), uint32_t(f.size()), m);
      acc += dpu::dp::distributionWorker(m, workers);
    }
    auto tn = std::chrono::steady_clock::now();
    for (const auto& f : frames) {
      dpu::dp::parsePacket(f.data(), uint32_t(f.size()), m);
      acc += dpu::dp::distributionWorker(m, workers, &canon);
    }
    auto t1 = std::chrono::steady_clock::now();
    void* out[32];
    for (uint32_t i = 0; i + 32 <= flows; i += 32) {
      rte_ring_mp_enqueue_burst(r, &objs[i], 32, nullptr);
      acc += rte_ring_sc_dequeue_burst(r, out, 32, nullptr);
    }
    auto t2 = std::chrono::steady_clock::now();
    g_sink = g_sink + acc;
    decide.push_back(std::chrono::duration<double, std::nano>(tn - t0).count() / flows);
    decide_nat.push_back(std::chrono::duration<double, std::nano>(t1 - tn).count() / flows);
    ring.push_back(std::chrono::duration<double, std::nano>(t2 - t1).count() / (flows / 32 * 32));
  }
  for (const auto& f : frames) {
    dpu::dp::parsePacket(f.data(), uint32_t(f.size()), m);
    per[dpu::dp::distributionWorker(m, workers)]++;
  }
  std::printf("distribute_bench: %u flows, %d rounds, %u workers; median ns/packet\n", flows,
              rounds, workers);
  std::printf("  decide (parse + symmetric hash)  %.1f\n", median(decide));
  std::printf("  decide with 100 NAT backends     %.1f (%.2fx)\n", median(decide_nat),
              median(decide_nat) / median(decide));
  std::printf("  ring (MP enqueue + SC dequeue)   %.1f\n", median(ring));
  std::printf("  total on the distributor core    %.1f\n", median(decide) + median(ring));
  std::printf("  packets per worker:");
  for (uint32_t n : per) std::printf(" %u", n);
  std::printf("\n");
  return 0;
}
