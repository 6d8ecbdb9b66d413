// Cost of tunnel parsing (issue 16): parsePacket + makeFlowKey per packet, on the same 64-byte
// inner traffic (8192 flows, TCP and UDP, one 60-byte frame each = 64 B on the wire) three
// ways, interleaved in one run:
//   plain      the inner frames, not encapsulated (tunnels INSPECT: nothing to open)
//   vxlan      each inner frame in VXLAN over IPv4 (110-byte frames), tunnels INSPECT
//   outer_only the same VXLAN frames, tunnels OUTER_ONLY (judged as the outer UDP datagram)
// Each round parses the whole set once per mode (order rotated per round); the figure is the
// median over rounds of ns per packet (steady_clock), and the ratios vxlan / plain and
// vxlan / outer_only. Single-threaded, no DPDK: the parser and the flow key only.
//
//   tunnel_parse_bench [--rounds N] [--flows N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dataplane/flow/flow_key.h"
#include "dataplane/packet/parser.h"

namespace {

using Frame = std::vector<uint8_t>;
using dpu::dp::FlowKey;
using dpu::dp::PacketMeta;
using dpu::dp::TunnelParseConfig;

void put16(uint8_t* p, uint16_t v) { p[0] = uint8_t(v >> 8); p[1] = uint8_t(v); }

uint16_t csum(const uint8_t* p, size_t n) {
  uint32_t s = 0;
  for (size_t i = 0; i + 1 < n; i += 2) s += uint32_t(p[i] << 8 | p[i + 1]);
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  return uint16_t(~s);
}

// A 60-byte Ethernet / IPv4 / TCP-or-UDP frame of flow i (xorshift-random addresses / ports).
Frame innerFrame(uint32_t i, uint64_t& rnd) {
  auto next = [&] { rnd ^= rnd << 13; rnd ^= rnd >> 7; rnd ^= rnd << 17; return rnd; };
  Frame f(60, 0);
  f[0] = 0x02; f[5] = 0x02; f[6] = 0x02; f[11] = 0x01;
  put16(&f[12], 0x0800);
  uint8_t* ip = &f[14];
  const bool tcp = (i & 1) == 0;
  const uint16_t l4 = tcp ? 20 : 8;
  ip[0] = 0x45;
  put16(ip + 2, uint16_t(20 + l4 + (tcp ? 6 : 18)));
  ip[8] = 64;
  ip[9] = tcp ? 6 : 17;
  const uint64_t r = next();
  ip[12] = 10; ip[13] = uint8_t(r); ip[14] = uint8_t(r >> 8); ip[15] = uint8_t(r >> 16);
  ip[16] = 10; ip[17] = uint8_t(r >> 24); ip[18] = uint8_t(r >> 32); ip[19] = uint8_t(r >> 40);
  put16(ip + 10, csum(ip, 20));
  uint8_t* t = ip + 20;
  put16(t, uint16_t(1024 + (r >> 48) % 60000));
  put16(t + 2, uint16_t(tcp ? 443 : 53));
  if (tcp) {
    t[12] = 5 << 4;
    t[13] = 0x10;
  } else {
    put16(t + 4, uint16_t(8 + 18));
  }
  return f;
}

// VXLAN over IPv4 around `in` (outer checksums are not looked at by the parser).
Frame vxlan(const Frame& in, uint32_t vni, uint16_t sport) {
  Frame f(14 + 20 + 8 + 8, 0);
  f[0] = 0x02; f[5] = 0xaa; f[6] = 0x02; f[11] = 0xbb;
  put16(&f[12], 0x0800);
  uint8_t* ip = &f[14];
  ip[0] = 0x45;
  put16(ip + 2, uint16_t(20 + 8 + 8 + in.size()));
  ip[8] = 64;
  ip[9] = 17;
  ip[12] = 192; ip[15] = 1;
  ip[16] = 192; ip[19] = 2;
  put16(ip + 10, csum(ip, 20));
  uint8_t* u = ip + 20;
  put16(u, sport);
  put16(u + 2, 4789);
  put16(u + 4, uint16_t(8 + 8 + in.size()));
  uint8_t* v = u + 8;
  v[0] = 0x08;
  v[4] = uint8_t(vni >> 16); v[5] = uint8_t(vni >> 8); v[6] = uint8_t(vni);
  f.insert(f.end(), in.begin(), in.end());
  return f;
}

volatile uint64_t g_sink;

double nsPerPacket(const std::vector<Frame>& frames, const TunnelParseConfig* tc) {
  PacketMeta m;
  FlowKey k;
  uint64_t acc = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const Frame& f : frames) {
    const auto st = dpu::dp::parsePacket(f.data(), uint32_t(f.size()), m, tc);
    if (st == dpu::dp::ParseStatus::kOk) acc += dpu::dp::makeFlowKey(m, k) + k.lo_port + k.tunnel_id;
  }
  const auto t1 = std::chrono::steady_clock::now();
  g_sink = g_sink + acc;
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / double(frames.size());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 201;
  uint32_t flows = 8192;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--flows")) flows = uint32_t(std::atoi(argv[i + 1]));
  }
  uint64_t rnd = 88172645463325252ull;
  std::vector<Frame> plain, vx;
  for (uint32_t i = 0; i < flows; ++i) {
    plain.push_back(innerFrame(i, rnd));
    vx.push_back(vxlan(plain.back(), 1000 + i % 16, uint16_t(49152 + i % 16384)));
  }
  TunnelParseConfig inspect;
  inspect.inspect = true;
  inspect.max_depth = 3;
  inspect.n_vxlan = 1;
  inspect.vxlan_ports[0] = 4789;
  inspect.n_geneve = 1;
  inspect.geneve_ports[0] = 6081;
  TunnelParseConfig outer = inspect;
  outer.inspect = false;
  // Check once that each mode parses what it should.
  PacketMeta m;
  if (dpu::dp::parsePacket(vx[0].data(), uint32_t(vx[0].size()), m, &inspect) != dpu::dp::ParseStatus::kOk ||
      m.tunnel_depth != 1 || dpu::dp::parsePacket(vx[0].data(), uint32_t(vx[0].size()), m, &outer) !=
      dpu::dp::ParseStatus::kOk || m.tunnel_depth != 0) {
    std::fprintf(stderr, "frames do not parse as expected\n");
    return 1;
  }
  std::vector<double> t_plain, t_vx, t_outer;
  for (int r = 0; r < rounds; ++r) {
    for (int k = 0; k < 3; ++k) {
      switch ((r + k) % 3) {
        case 0: t_plain.push_back(nsPerPacket(plain, &inspect)); break;
        case 1: t_vx.push_back(nsPerPacket(vx, &inspect)); break;
        default: t_outer.push_back(nsPerPacket(vx, &outer)); break;
      }
    }
  }
  const double p = median(t_plain), v = median(t_vx), o = median(t_outer);
  std::printf("tunnel_parse_bench: %u flows, %d rounds, parsePacket + makeFlowKey, median ns/packet\n",
              flows, rounds);
  std::printf("plain (64 B inner, INSPECT)      %.2f ns\n", p);
  std::printf("vxlan (110 B, INSPECT)           %.2f ns\n", v);
  std::printf("vxlan (110 B, OUTER_ONLY)        %.2f ns\n", o);
  std::printf("ratio vxlan/plain %.2f, vxlan inspect/outer_only %.2f, extra per VXLAN packet %.2f ns\n",
              v / p, v / o, v - o);
  return 0;
}
