// Load balancer benchmark (rules/ only, no DPDK):
//  1. Maglev table build time, M = 65537, for 10 / 100 / 1000 equal-weight backends: the
//     build the control side uses (maglevBuild) beside the NSDI'16 pseudocode as written
//     (maglevBuildReference: whole permutation table first) in the same run; both produce the
//     same table (checked). Median of --reps builds each. Target: <= 5 ms at 1000 backends.
//  2. Per-packet cost of what a flow's first packet pays in the LB stage: key extraction +
//     hash + table lookup, over a trace of pre-parsed frames (LbPacket views), for the
//     5-tuple key, a named-field key (ip.src masked /24 + l4.dport), a payload session id
//     and dns.qname; beside the bare 5-tuple hash + lookup as the peer. ns/packet, ratio.
//
//   lb_bench [--reps N] [--packets N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "dataplane/packet/parser.h"
#include "dataplane/stages/lb/lb_view.h"
#include "rules/compile/lb_compiler.h"
#include "rules/compiled/lb.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace dpu;

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<std::string> names(size_t n) {
  std::vector<std::string> v;
  for (size_t i = 0; i < n; ++i) v.push_back("backend-" + std::to_string(i));
  return v;
}

// Frames of a UDP-to-port-53 style trace: Ethernet + IPv4 + UDP + a DNS query whose first
// 6 bytes also serve as the "session id" payload field.
std::vector<std::vector<uint8_t>> makeTrace(size_t n) {
  std::mt19937 rng(1);
  std::vector<std::vector<uint8_t>> out;
  const char* names[] = {"www.example.com", "api.service.internal", "a.b.c.d.example.org",
                         "cdn.example.net"};
  for (size_t i = 0; i < n; ++i) {
    std::vector<uint8_t> q = {uint8_t(rng()), uint8_t(rng()), 1, 0, 0, 1, 0, 0, 0, 0, 0, 0};
    std::string name = names[i % 4];
    size_t s = 0;
    while (s <= name.size()) {
      size_t d = name.find('.', s);
      if (d == std::string::npos) d = name.size();
      q.push_back(uint8_t(d - s));
      for (size_t k = s; k < d; ++k) q.push_back(uint8_t(name[k]));
      s = d + 1;
    }
    q.push_back(0);
    q.insert(q.end(), {0, 1, 0, 1});
    std::vector<uint8_t> f(14 + 20 + 8);
    f[12] = 0x08;
    uint8_t* ip = f.data() + 14;
    ip[0] = 0x45;
    uint16_t tl = uint16_t(20 + 8 + q.size());
    ip[2] = uint8_t(tl >> 8);
    ip[3] = uint8_t(tl);
    ip[8] = 64;
    ip[9] = 17;
    uint32_t src = 0x0a000000 | (rng() & 0xffffff), dst = 0xc0000200 | (rng() & 0xff);
    for (int k = 0; k < 4; ++k) {
      ip[12 + k] = uint8_t(src >> (24 - 8 * k));
      ip[16 + k] = uint8_t(dst >> (24 - 8 * k));
    }
    uint8_t* u = ip + 20;
    uint16_t sp = uint16_t(1024 + rng() % 60000), ul = uint16_t(8 + q.size());
    u[0] = uint8_t(sp >> 8);
    u[1] = uint8_t(sp);
    u[3] = 53;
    u[4] = uint8_t(ul >> 8);
    u[5] = uint8_t(ul);
    f.insert(f.end(), q.begin(), q.end());
    out.push_back(std::move(f));
  }
  return out;
}

rules::LbService service(std::vector<rules::LbKeyField> key) {
  rules::LbService s;
  s.id = "bench";
  rules::IpPrefix p;
  p.addr = {192, 0, 2, 0};
  p.len = 24;
  s.dst = {p};
  s.key = std::move(key);
  for (int i = 0; i < 100; ++i) {
    rules::LbBackend b;
    b.id = "be" + std::to_string(i);
    b.mac = std::array<uint8_t, 6>{2, 0, 0, 0, 0, uint8_t(i)};
    s.backends.push_back(b);
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 11;
  size_t packets = 1 << 16;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--packets" && i + 1 < argc) packets = size_t(std::atoll(argv[++i]));
    else {
      std::fprintf(stderr, "usage: lb_bench [--reps N] [--packets N]\n");
      return 2;
    }
  }
  constexpr uint32_t kM = 65537;
  std::printf("# Maglev table build, M = %u, equal weights, median of %d builds\n", kM, reps);
  std::printf("%-9s %14s %16s %8s %s\n", "backends", "maglevBuild ms", "reference ms", "ratio",
              "same table");
  for (size_t n : {10u, 100u, 1000u}) {
    auto ids = names(n);
    std::vector<uint32_t> w(n, 1);
    std::vector<double> fast, ref;
    bool same = true;
    for (int r = 0; r < reps; ++r) {
      auto t = Clock::now();
      auto a = rules::maglevBuild(ids, w, kM);
      fast.push_back(msSince(t));
      t = Clock::now();
      auto b = rules::maglevBuildReference(ids, w, kM);
      ref.push_back(msSince(t));
      same = same && a == b;
    }
    double f = median(fast), rf = median(ref);
    std::printf("%-9zu %14.3f %16.3f %8.1f %s\n", n, f, rf, rf / f, same ? "yes" : "NO");
  }

  // Per-packet key extraction + hash + lookup.
  auto trace = makeTrace(packets);
  std::vector<rules::LbPacket> views(trace.size());
  for (size_t i = 0; i < trace.size(); ++i) {
    dp::PacketMeta m;
    dp::parsePacket(trace[i].data(), uint32_t(trace[i].size()), m);
    dp::lbView(m, trace[i].data(), uint32_t(trace[i].size()), views[i]);
  }
  rules::LbKeyField src24;
  src24.kind = rules::LbFieldKind::kIpSrc;
  src24.mask.assign(16, 0);
  src24.mask[0] = src24.mask[1] = src24.mask[2] = 0xff;
  rules::LbKeyField dport;
  dport.kind = rules::LbFieldKind::kL4Dport;
  rules::LbKeyField sid;
  sid.kind = rules::LbFieldKind::kRaw;
  sid.anchor = rules::LbAnchor::kPayload;
  sid.offset = 0;
  sid.length = 6;
  rules::LbKeyField qname;
  qname.kind = rules::LbFieldKind::kDnsQname;
  struct Key {
    const char* name;
    std::vector<rules::LbKeyField> fields;
  };
  std::vector<Key> keys = {{"5-tuple (no fields)", {}},
                           {"ip.src/24 + l4.dport", {src24, dport}},
                           {"payload[0..6) session id", {sid}},
                           {"dns.qname", {qname}}};
  std::printf("\n# Key extraction + hash + Maglev lookup, %zu pre-parsed frames, 100 backends, "
              "median of %d passes\n",
              views.size(), reps);
  std::printf("%-26s %10s %10s\n", "key", "ns/packet", "vs peer");
  // Peer: the bare 5-tuple hash and lookup (what a plain 5-tuple Maglev LB pays).
  auto base = rules::buildLbService(service({}));
  std::vector<double> peer_ns;
  uint64_t sink = 0;
  for (int r = 0; r < reps; ++r) {
    auto t = Clock::now();
    for (const auto& p : views) sink += base->pick(rules::lbHash5Tuple(p));
    peer_ns.push_back(msSince(t) * 1e6 / double(views.size()));
  }
  double peer = median(peer_ns);
  std::printf("%-26s %10.1f %10s\n", "peer: lbHash5Tuple + pick", peer, "1.00");
  for (const Key& k : keys) {
    auto svc = rules::buildLbService(service(k.fields));
    std::vector<double> ns;
    for (int r = 0; r < reps; ++r) {
      auto t = Clock::now();
      for (const auto& p : views) {
        bool missing;
        sink += svc->pick(svc->keyHash(p, &missing)) + missing;
      }
      ns.push_back(msSince(t) * 1e6 / double(views.size()));
    }
    double x = median(ns);
    std::printf("%-26s %10.1f %10.2f\n", k.name, x, x / peer);
  }
  std::printf("\n(checksum %llu)\n", static_cast<unsigned long long>(sink));
  return 0;
}
