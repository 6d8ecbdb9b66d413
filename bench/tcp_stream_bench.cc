// TCP stream normalization cost per segment, without DPDK: the software TCP checksum
// (tcpChecksumOk) over IMIX frame sizes, and the engine (tcpStreamSegment) for an in-order
// segment (window copy) and an identical retransmission (window compare), with the ACK of
// the other side releasing the window as a receiver would. Prints thread-CPU ns per segment,
// the best of --reps runs of --iters segments each. usage: tcp_stream_bench [--iters N] [--reps R]
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dataplane/normalize/tcp_stream.h"

using namespace dpu::dp;

namespace {

// Thread CPU time (not wall time): on a shared machine the time the thread was not running
// does not count.
double cpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e9 + double(ts.tv_nsec);
}

template <typename F>
double bestNs(int reps, uint64_t iters, F&& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const double t0 = cpuNs();
    for (uint64_t i = 0; i < iters; ++i) f(i);
    const double ns = (cpuNs() - t0) / double(iters);
    if (ns < best) best = ns;
  }
  return best;
}

volatile uint64_t g_sink;

}  // namespace

int main(int argc, char** argv) {
  uint64_t iters = 2000000;
  int reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--iters")) iters = std::strtoull(argv[i + 1], nullptr, 10);
    if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
  }
  std::printf("%-44s %10s\n", "case", "ns/segment");
  // IPv4 header (addresses only matter) + TCP segment of frame size - 14 - 20 bytes.
  for (uint32_t frame : {64u, 570u, 1518u}) {
    const uint32_t l4 = frame - 14 - 20;
    std::vector<uint8_t> ip(20, 0), seg(l4, 0x5a);
    ip[12] = 10, ip[15] = 1, ip[16] = 10, ip[19] = 2;
    double ns = bestNs(reps, iters, [&](uint64_t i) {
      seg[4] = uint8_t(i);  // defeat hoisting
      g_sink = g_sink + (tcpChecksumOk(ip.data(), false, seg.data(), l4));
    });
    std::printf("checksum (software), %4u B frame            %10.1f\n", frame, ns);
  }
  for (uint32_t payload : {6u, 512u, 1460u}) {
    TcpStreamPool pool(4096, 16);
    TcpStreamDir c, s;
    std::vector<uint8_t> data(payload, 'x');
    TcpSegment seg;
    seg.flags = 0x10;
    seg.payload = data.data();
    seg.len = payload;
    TcpSegment ack;
    ack.flags = 0x10;
    uint32_t seq = 1000;
    double ns = bestNs(reps, iters, [&](uint64_t) {
      seg.seq = seq;
      TcpSegResult r = tcpStreamSegment(pool, c, s, seg, false);
      seq += r.len;
      ack.ack = seq;  // the receiver acknowledges: the window goes back
      tcpStreamSegment(pool, s, c, ack, false);
      g_sink = g_sink + (r.len);
    });
    std::printf("engine in order + ACK, %4u B payload         %10.1f\n", payload, ns);
    // Identical retransmission of the last segment (unacknowledged: compared).
    TcpStreamDir c2, s2;
    seg.seq = 1000;
    tcpStreamSegment(pool, c2, s2, seg, false);
    ns = bestNs(reps, iters, [&](uint64_t) {
      TcpSegResult r = tcpStreamSegment(pool, c2, s2, seg, false);
      g_sink = g_sink + (r.len + uint32_t(r.verdict));
    });
    std::printf("engine retransmission compare, %4u B payload %10.1f\n", payload, ns);
  }
  return 0;
}
