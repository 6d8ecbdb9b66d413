// Firewall classification benchmark: our FirewallTables::classifyBurst against DPDK's own
// dpdk-test-acl on the same ClassBench-like rule sets and the same packet trace, in one run.
//
//   acl_bench [--sizes 1000,10000,100000] [--trace 200000] [--iters 20] [--burst 32]
//             [--reps 3] [--lcore 1] [--test-acl /usr/bin/dpdk-test-acl] [--out DIR]
//             [--seed 1] [--eal ARG]...
//
// For every size it generates the rules (IPv4 5-tuple, ClassBench "acl1"-like: nested
// prefixes around a few hundred sites, /32 and /24 heavy, well-known destination ports,
// port ranges, TCP/UDP/ICMP/any) and a trace (80% drawn from the rules, 20% random), writes
// them in dpdk-test-acl's formats (ClassBench rules "@src/len dst/len lo : hi lo : hi
// proto/mask", trace "src dst sport dport proto" with addresses as 32-bit numbers), then:
//   - builds our tables (rte_acl) and reports build time, DPDK heap held, peak RSS growth;
//   - times classifyBurst over the trace in bursts of --burst (rdtsc, cycles per packet,
//     best of --reps runs of --iters passes);
//   - runs dpdk-test-acl on the same files (--tracestep = --burst, 1 category, same lcore),
//     best of --reps runs, and parses its cycles/pkt;
//   - checks both agree: ours against rules::referenceMatch on a sample, and against
//     dpdk-test-acl's own per-packet results (--verbose=2) on the first 20000 packets;
//   - changes the rule set a little (5 rules removed, 5 added at random ranks) and builds
//     it incrementally on the tables above (FirewallTables::build with `previous`): time
//     until the change is in force ("change ms", the delta), time until the background full
//     build has replaced the delta ("merged ms"), classification on base + delta (before
//     the merge; interleaved with the full tables) and its answers against the reference.
// --eal ARG adds an EAL argument for our side (repeatable), e.g. --force-max-simd-bitwidth=512:
// rte_acl picks its classify method when a context is built, AVX2 under EAL's default
// bit-width limit of 256 and AVX-512 (x16 / x32) above it; the same argument is given to
// dpdk-test-acl.
// Prints one table; writes results.tsv and the rule / trace files under --out.
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_lcore.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/port/eal.h"
#include "dataplane/stages/firewall/firewall_tables.h"
#include "rules/compiled/firewall.h"

namespace {

using dpu::dp::FirewallTables;
using dpu::rules::AclEntry;
using dpu::rules::CompiledFirewall;
using dpu::rules::FwQuery;

struct Options {
  std::vector<uint32_t> sizes = {1000, 10000, 100000};
  uint32_t trace = 200000;
  uint32_t iters = 20;
  uint32_t burst = 32;
  uint32_t reps = 3;
  unsigned lcore = 1;
  uint64_t seed = 1;
  std::string test_acl = "/usr/bin/dpdk-test-acl";
  std::vector<std::string> eal_extra;  // --eal: more EAL arguments (both sides)
  std::string out = "acl_bench_out";
};

// --- ClassBench-like generation -------------------------------------------------------------

class Gen {
 public:
  Gen(uint64_t seed, uint32_t nrules) : rng_(seed) {
    uint32_t nsites = std::max<uint32_t>(64, nrules / 16);
    std::vector<uint32_t> slash8;
    for (int i = 0; i < 24; ++i) slash8.push_back(pick(1, 223) << 24);
    for (uint32_t i = 0; i < nsites; ++i) {
      sites_.push_back(slash8[pick(0, slash8.size() - 1)] | (pick(0, 255) << 16) |
                       (pick(0, 3) == 0 ? 0 : pick(0, 255) << 8));
    }
  }

  struct Rule {
    uint32_t src, dst;
    uint8_t src_len, dst_len;
    uint16_t sp_lo, sp_hi, dp_lo, dp_hi;
    uint8_t proto, proto_mask;
  };

  Rule rule() {
    Rule r;
    static const std::array<std::pair<int, int>, 7> kSrcLen = {
        {{0, 8}, {8, 2}, {16, 5}, {22, 10}, {24, 25}, {28, 10}, {32, 40}}};
    static const std::array<std::pair<int, int>, 6> kDstLen = {
        {{0, 2}, {16, 5}, {24, 28}, {27, 10}, {30, 5}, {32, 50}}};
    r.src_len = static_cast<uint8_t>(weighted(kSrcLen));
    if (r.src_len == 22 || r.src_len == 28) r.src_len = static_cast<uint8_t>(r.src_len + pick(0, 3) - 1);
    r.dst_len = static_cast<uint8_t>(weighted(kDstLen));
    // No rule without any address (ClassBench sets end with one default rule at most, and
    // an early catch-all would shadow everything after it).
    if (r.src_len < 8 && r.dst_len < 8) r.dst_len = static_cast<uint8_t>(16 + 8 * pick(0, 2));
    r.src = prefix(r.src_len);
    r.dst = prefix(r.dst_len);
    uint32_t p = pick(0, 99);
    if (p < 60) {
      r.proto = 6;
    } else if (p < 85) {
      r.proto = 17;
    } else if (p < 90) {
      r.proto = 1;
    } else {
      r.proto = 0;
    }
    r.proto_mask = r.proto ? 0xff : 0;
    r.sp_lo = 0;
    r.sp_hi = 65535;
    r.dp_lo = 0;
    r.dp_hi = 65535;
    if (r.proto == 6 || r.proto == 17) {
      if (pick(0, 99) < 8) r.sp_lo = r.sp_hi = static_cast<uint16_t>(pick(1024, 65535));
      static const uint16_t kWellKnown[] = {80, 443, 22, 25, 53, 110, 143, 123, 161, 389,
                                            445, 993, 995, 1433, 3306, 3389, 5060, 8080, 8443};
      uint32_t d = pick(0, 99);
      if (d < 25) {
      } else if (d < 70) {
        r.dp_lo = r.dp_hi = kWellKnown[pick(0, std::size(kWellKnown) - 1)];
      } else if (d < 80) {
        r.dp_lo = 1024;
      } else if (d < 90) {
        r.dp_hi = 1023;
      } else {
        r.dp_lo = static_cast<uint16_t>(pick(1, 60000));
        r.dp_hi = static_cast<uint16_t>(r.dp_lo + pick(0, 5000));
      }
    }
    return r;
  }

  FwQuery packet(const std::vector<Rule>& rules) {
    FwQuery q;
    q.v6 = false;
    q.dir = 1;
    uint32_t src, dst;
    if (pick(0, 99) < 80) {
      const Rule& r = rules[pick(0, rules.size() - 1)];
      src = inside(r.src, r.src_len);
      dst = inside(r.dst, r.dst_len);
      q.proto = r.proto_mask ? r.proto : (pick(0, 1) ? 6 : 17);
      q.sport = static_cast<uint16_t>(pick(r.sp_lo, r.sp_hi));
      q.dport = static_cast<uint16_t>(pick(0, 3) == 0 ? (pick(0, 1) ? r.dp_lo : r.dp_hi)
                                                      : pick(r.dp_lo, r.dp_hi));
    } else {
      src = inside(prefix(16), 16);
      dst = inside(prefix(16), 16);
      q.proto = static_cast<uint8_t>(std::array<int, 4>{6, 17, 1, 47}[pick(0, 3)]);
      q.sport = static_cast<uint16_t>(pick(1024, 65535));
      q.dport = static_cast<uint16_t>(pick(0, 65535));
    }
    if (q.proto != 6 && q.proto != 17) q.sport = q.dport = 0;
    for (int b = 0; b < 4; ++b) {
      q.src[b] = static_cast<uint8_t>(src >> (24 - 8 * b));
      q.dst[b] = static_cast<uint8_t>(dst >> (24 - 8 * b));
    }
    return q;
  }

 private:
  uint32_t pick(uint64_t lo, uint64_t hi) {
    return static_cast<uint32_t>(std::uniform_int_distribution<uint64_t>(lo, hi)(rng_));
  }
  template <size_t N>
  int weighted(const std::array<std::pair<int, int>, N>& t) {
    int total = 0;
    for (auto& [v, w] : t) total += w;
    int x = static_cast<int>(pick(0, total - 1));
    for (auto& [v, w] : t) {
      if (x < w) return v;
      x -= w;
    }
    return t.back().first;
  }
  static uint32_t mask(uint8_t len) { return len == 0 ? 0 : ~0u << (32 - len); }
  uint32_t prefix(uint8_t len) {
    uint32_t a = sites_[pick(0, sites_.size() - 1)] | (pick(0, 0xffffffffu) & 0xffff);
    if (len >= 24 && pick(0, 1)) a = (a & 0xffffff00u) | pick(0, 15);  // dense small subnets
    return a & mask(len);
  }
  uint32_t inside(uint32_t net, uint8_t len) {
    return (net & mask(len)) | (pick(0, 0xffffffffu) & ~mask(len));
  }

  std::mt19937_64 rng_;
  std::vector<uint32_t> sites_;
};

std::string ip4(uint32_t a) {
  char b[32];
  std::snprintf(b, sizeof(b), "%u.%u.%u.%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
  return b;
}

// --- helpers --------------------------------------------------------------------------------

// Resident set of this process (kB): "VmRSS" now or "VmHWM" (peak since resetPeakRss()).
long statusKb(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  size_t n = std::strlen(field);
  while (std::getline(f, line)) {
    if (line.compare(0, n, field) == 0 && line.size() > n && line[n] == ':') {
      return std::stol(line.substr(n + 1));
    }
  }
  return 0;
}

void resetPeakRss() { std::ofstream("/proc/self/clear_refs") << "5"; }

// Runs `argv`, returns its stdout (stderr to /dev/null); *rc gets the exit status.
std::string run(const std::vector<std::string>& argv, int* rc) {
  int fds[2];
  if (pipe(fds) != 0) return "";
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    int devnull = ::open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, 2);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> a;
    for (const std::string& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    execv(a[0], a.data());
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[65536];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  // dpdk-test-acl leaves its EAL runtime directory (telemetry socket; all of it when it
  // crashes): the process is gone, so the directory of its file prefix goes too.
  dpu::dp::removeStaleEalRuntimeDir(dpu::dp::ealRuntimeDir(argv), nullptr);
  return out;
}

std::vector<std::string> testAclArgs(const Options& o, const std::string& rules,
                                     const std::string& trace, uint32_t nrules, uint32_t ntrace,
                                     uint32_t iters, int verbose, int run_no) {
  std::vector<std::string> a = {o.test_acl,
          "--no-huge",
          "--no-pci",
          "--no-shconf",
          "-m",
          "4096",
          "-l",
          std::to_string(o.lcore),
          "--log-level=lib.eal:error",
          "--file-prefix=aclbench" + std::to_string(getpid()) + "_" + std::to_string(run_no),
          };
  a.insert(a.end(), o.eal_extra.begin(), o.eal_extra.end());
  std::vector<std::string> rest = {"--",
          "--rulesf=" + rules,
          "--tracef=" + trace,
          "--rulenum=" + std::to_string(nrules),
          "--tracenum=" + std::to_string(ntrace),
          "--tracestep=" + std::to_string(o.burst),
          "--bldcat=1",
          "--runcat=1",
          "--iter=" + std::to_string(iters),
          "--verbose=" + std::to_string(verbose)};
  a.insert(a.end(), rest.begin(), rest.end());
  return a;
}

std::vector<uint32_t> parseSizes(const std::string& s) {
  std::vector<uint32_t> v;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ',')) v.push_back(static_cast<uint32_t>(std::stoul(x)));
  return v;
}

AclEntry toEntry(const Gen::Rule& r) {
  AclEntry e;
  e.proto = r.proto;
  e.proto_mask = r.proto_mask;
  for (int b = 0; b < 4; ++b) {
    e.src[b] = static_cast<uint8_t>(r.src >> (24 - 8 * b));
    e.dst[b] = static_cast<uint8_t>(r.dst >> (24 - 8 * b));
  }
  e.src_len = r.src_len;
  e.dst_len = r.dst_len;
  e.sport_lo = r.sp_lo;
  e.sport_hi = r.sp_hi;
  e.dport_lo = r.dp_lo;
  e.dport_hi = r.dp_hi;
  return e;
}

// `fw` with `nremove` random rules removed and `nadd` new ones inserted at random ranks (ids
// "c<tag>_<i>"): a small config change on a large rule set.
std::shared_ptr<CompiledFirewall> changeRules(const CompiledFirewall& fw, Gen& g, std::mt19937_64& rng,
                                              uint32_t nremove, uint32_t nadd, int tag) {
  std::vector<std::pair<dpu::rules::FwRuleInfo, AclEntry>> rs;
  for (const AclEntry& e : fw.v4) rs.emplace_back(fw.rules[e.rule], e);
  std::vector<Gen::Rule> pool;
  for (uint32_t i = 0; i < 64; ++i) pool.push_back(g.rule());
  auto any = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  for (uint32_t i = 0; i < nremove; ++i) rs.erase(rs.begin() + static_cast<long>(any(rs.size())));
  for (uint32_t i = 0; i < nadd; ++i) {
    const Gen::Rule& r = pool[any(pool.size())];
    dpu::rules::FwRuleInfo info;
    info.id = "c" + std::to_string(tag) + "_" + std::to_string(i);
    info.action = dpu::rules::FwAction::kDeny;
    AclEntry e = toEntry(r);
    rs.insert(rs.begin() + static_cast<long>(any(rs.size() + 1)), {info, e});
  }
  auto out = std::make_shared<CompiledFirewall>();
  for (uint32_t rank = 0; rank < rs.size(); ++rank) {
    rs[rank].first.priority = static_cast<int32_t>(rank);
    out->rules.push_back(rs[rank].first);
    AclEntry e = rs[rank].second;
    e.rule = e.rank = rank;
    out->v4.push_back(e);
  }
  return out;
}

struct Row {
  uint32_t rules = 0;
  double build_ms = 0, rebuild_ms = 0;
  // A 10-rule change (5 removed, 5 added) built incrementally on the tables above.
  double change_ms = 0, change_cpp = 0, merged_ms = 0;
  uint32_t change_delta = 0;
  bool change_incremental = false;
  double heap_mib = 0, rss_mib = 0;
  uint32_t contexts = 0;
  double ours_cpp = 0, dpdk_cpp = 0;
  uint64_t checked_ref = 0, checked_dpdk = 0, checked_change = 0, mismatches = 0;
  double hit_ratio = 0;
  std::string dpdk_note;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "acl_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--sizes") o.sizes = parseSizes(next());
    else if (a == "--trace") o.trace = static_cast<uint32_t>(std::stoul(next()));
    else if (a == "--iters") o.iters = static_cast<uint32_t>(std::stoul(next()));
    else if (a == "--burst") o.burst = static_cast<uint32_t>(std::stoul(next()));
    else if (a == "--reps") o.reps = static_cast<uint32_t>(std::stoul(next()));
    else if (a == "--lcore") o.lcore = static_cast<unsigned>(std::stoul(next()));
    else if (a == "--seed") o.seed = std::stoull(next());
    else if (a == "--test-acl") o.test_acl = next();
    else if (a == "--out") o.out = next();
    else if (a == "--eal") o.eal_extra.push_back(next());
    else {
      std::fprintf(stderr,
                   "usage: acl_bench [--sizes 1000,10000,100000] [--trace N] [--iters N] "
                   "[--burst N] [--reps N] [--lcore N] [--seed N] [--test-acl PATH] [--out DIR] "
                   "[--eal ARG]...\n");
      return 2;
    }
  }
  if (o.burst == 0 || o.burst > 4096) {
    std::fprintf(stderr, "acl_bench: --burst must be 1..4096\n");
    return 2;
  }
  ::mkdir(o.out.c_str(), 0755);
  std::string prefix = "--file-prefix=aclbenchself" + std::to_string(getpid());
  std::string lc = std::to_string(o.lcore);
  // No shared files, no telemetry: EAL's runtime directory stays empty and initEal removes it.
  std::vector<std::string> eal = {"acl_bench", "--no-huge",      "--no-pci", "--no-shconf",
                                  "--no-telemetry", "-m",        "6144",     "-l",
                                  lc,          "--log-level=lib.eal:error", prefix};
  eal.insert(eal.end(), o.eal_extra.begin(), o.eal_extra.end());
  if (absl::Status st = dpu::dp::initEal(eal); !st.ok()) {
    std::fprintf(stderr, "acl_bench: %s\n", std::string(st.message()).c_str());
    return 1;
  }
  bool have_test_acl = ::access(o.test_acl.c_str(), X_OK) == 0;
  if (!have_test_acl) {
    std::fprintf(stderr, "acl_bench: %s not found (package dpdk-dev): only our numbers\n",
                 o.test_acl.c_str());
  }
  const double tsc_ghz = static_cast<double>(rte_get_tsc_hz()) / 1e9;
  std::vector<Row> rows;
  int run_no = 0;
  for (uint32_t n : o.sizes) {
    Row row;
    row.rules = n;
    Gen g(o.seed * 1000003 + n, n);
    std::vector<Gen::Rule> rs;
    rs.reserve(n);
    for (uint32_t i = 0; i < n; ++i) rs.push_back(g.rule());
    auto fw = std::make_shared<CompiledFirewall>();
    std::string rules_path = o.out + "/rules_" + std::to_string(n) + ".txt";
    std::string trace_path = o.out + "/trace_" + std::to_string(n) + ".txt";
    {
      std::ofstream rf(rules_path);
      for (uint32_t i = 0; i < n; ++i) {
        const Gen::Rule& r = rs[i];
        dpu::rules::FwRuleInfo info;
        info.id = "r" + std::to_string(i);
        info.action = dpu::rules::FwAction::kDeny;
        info.priority = static_cast<int32_t>(i);
        fw->rules.push_back(std::move(info));
        AclEntry e = toEntry(r);
        e.rule = e.rank = i;
        fw->v4.push_back(e);
        rf << '@' << ip4(r.src) << '/' << int(r.src_len) << '\t' << ip4(r.dst) << '/'
           << int(r.dst_len) << '\t' << r.sp_lo << " : " << r.sp_hi << '\t' << r.dp_lo
           << " : " << r.dp_hi << '\t' << "0x" << std::hex << int(r.proto) << "/0x"
           << int(r.proto_mask) << std::dec << '\n';
      }
    }
    std::vector<FwQuery> trace;
    trace.reserve(o.trace);
    {
      std::ofstream tf(trace_path);
      for (uint32_t i = 0; i < o.trace; ++i) {
        FwQuery q = g.packet(rs);
        trace.push_back(q);
        auto u32 = [](const std::array<uint8_t, 16>& a) {
          return (uint32_t(a[0]) << 24) | (uint32_t(a[1]) << 16) | (uint32_t(a[2]) << 8) | a[3];
        };
        tf << u32(q.src) << '\t' << u32(q.dst) << '\t' << q.sport << '\t' << q.dport << '\t'
           << int(q.proto) << '\n';
      }
    }

    // Build (twice: the second is what a reload of the same size costs on a warm process).
    resetPeakRss();
    long rss0 = statusKb("VmRSS");
    auto t0 = std::chrono::steady_clock::now();
    auto tables = FirewallTables::build(fw);
    row.build_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!tables.ok()) {
      std::fprintf(stderr, "acl_bench: %u rules: %s\n", n, tables.status().ToString().c_str());
      return 1;
    }
    row.rss_mib = (statusKb("VmHWM") - rss0) / 1024.0;
    row.heap_mib = (*tables)->stats().bytes / 1048576.0;
    row.contexts = (*tables)->stats().v4_contexts;
    {
      auto fw2 = std::make_shared<CompiledFirewall>(*fw);
      auto t1 = std::chrono::steady_clock::now();
      auto again = FirewallTables::build(fw2);
      row.rebuild_ms = std::chrono::duration<double, std::milli>(
                           std::chrono::steady_clock::now() - t1).count();
      if (!again.ok()) return 1;
    }
    const FirewallTables& t = **tables;

    // Our classification.
    std::vector<const FwQuery*> qp;
    for (const FwQuery& q : trace) qp.push_back(&q);
    std::vector<int64_t> res(trace.size());
    auto pass = [&]() {
      for (size_t i = 0; i < trace.size(); i += o.burst) {
        uint32_t k = static_cast<uint32_t>(std::min<size_t>(o.burst, trace.size() - i));
        t.classifyBurst(qp.data() + i, k, res.data() + i);
      }
    };
    pass();  // warm-up
    // Ours and dpdk-test-acl take turns (the machine is shared: the best of each counts).
    static const std::regex kCpp(R"(([0-9.]+) cycles/pkt)");
    double best = 1e300, dbest = 1e300;
    for (uint32_t r = 0; r < o.reps; ++r) {
      uint64_t c0 = rte_rdtsc_precise();
      for (uint32_t it = 0; it < o.iters; ++it) pass();
      uint64_t c1 = rte_rdtsc_precise();
      best = std::min(best, static_cast<double>(c1 - c0) / (double(o.iters) * trace.size()));
      if (!have_test_acl || !row.dpdk_note.empty()) continue;
      int rc = 0;
      std::string out = run(testAclArgs(o, rules_path, trace_path, n, o.trace, o.iters, 0,
                                        ++run_no), &rc);
      std::smatch m;
      if (rc != 0 || !std::regex_search(out, m, kCpp)) {
        row.dpdk_note = "dpdk-test-acl failed (exit " + std::to_string(rc) + ")";
        std::ofstream(o.out + "/test_acl_" + std::to_string(n) + ".log") << out;
        continue;
      }
      dbest = std::min(dbest, std::stod(m[1]));
    }
    row.ours_cpp = best;
    if (have_test_acl && row.dpdk_note.empty()) row.dpdk_cpp = dbest;

    // A small change (5 rules removed, 5 added) on top of these tables: what an API
    // add/remove costs; classification and answers after it.
    {
      std::mt19937_64 crng(o.seed * 7 + n);
      auto fwc = changeRules(*fw, g, crng, 5, 5, 1);
      // With the background merge: the time until the delta is in force (change ms) and
      // until the full build of the new rules has replaced it (merged ms).
      {
        auto t1 = std::chrono::steady_clock::now();
        auto inc = FirewallTables::build(fwc, SOCKET_ID_ANY, 0, *tables);
        row.change_ms = std::chrono::duration<double, std::milli>(
                            std::chrono::steady_clock::now() - t1).count();
        if (!inc.ok()) {
          std::fprintf(stderr, "acl_bench: change: %s\n", inc.status().ToString().c_str());
          return 1;
        }
        while ((*inc)->stats().incremental && (*inc)->merged() == nullptr) {
          std::this_thread::sleep_for(std::chrono::microseconds(500));
        }
        row.merged_ms = std::chrono::duration<double, std::milli>(
                            std::chrono::steady_clock::now() - t1).count();
      }
      // Without it, to measure classification on base + delta.
      auto inc = FirewallTables::build(fwc, SOCKET_ID_ANY, 0, *tables, /*merge=*/false);
      if (!inc.ok()) return 1;
      row.change_incremental = (*inc)->stats().incremental;
      row.change_delta = (*inc)->stats().delta_entries;
      std::vector<int64_t> cres(trace.size());
      auto cpass = [&]() {
        for (size_t i = 0; i < trace.size(); i += o.burst) {
          uint32_t k = static_cast<uint32_t>(std::min<size_t>(o.burst, trace.size() - i));
          (*inc)->classifyBurst(qp.data() + i, k, cres.data() + i);
        }
      };
      cpass();
      double cbest = 1e300;
      for (uint32_t r = 0; r < o.reps; ++r) {
        uint64_t c0 = rte_rdtsc_precise();
        for (uint32_t it = 0; it < o.iters; ++it) cpass();
        cbest = std::min(cbest, static_cast<double>(rte_rdtsc_precise() - c0) /
                                    (double(o.iters) * trace.size()));
        // Interleaved with the full tables again (same machine state).
        uint64_t c2 = rte_rdtsc_precise();
        for (uint32_t it = 0; it < o.iters; ++it) pass();
        best = std::min(best, static_cast<double>(rte_rdtsc_precise() - c2) /
                                  (double(o.iters) * trace.size()));
      }
      row.ours_cpp = best;
      row.change_cpp = cbest;
      uint32_t csample = std::min<uint32_t>(static_cast<uint32_t>(trace.size()),
                                            n >= 100000 ? 2000 : n >= 10000 ? 10000 : 50000);
      for (uint32_t i = 0; i < csample; ++i) {
        if (dpu::rules::referenceMatch(*fwc, trace[i]) != cres[i]) ++row.mismatches;
      }
      row.checked_change = csample;
    }
    uint64_t hits = 0;
    for (int64_t x : res) hits += x >= 0;
    row.hit_ratio = double(hits) / trace.size();
    // Correctness against the reference matcher (a sample: it scans every rule).
    uint32_t sample = std::min<uint32_t>(static_cast<uint32_t>(trace.size()),
                                         n >= 100000 ? 2000 : n >= 10000 ? 10000 : 50000);
    for (uint32_t i = 0; i < sample; ++i) {
      if (dpu::rules::referenceMatch(*fw, trace[i]) != res[i]) ++row.mismatches;
    }
    row.checked_ref = sample;

    // dpdk-test-acl on the same files.
    if (have_test_acl) {
      // Its per-packet results on the first packets: "ipv4_5tuple: N, category: 0, result: R"
      // with R = rule line - 1 (our rule index), 4294967295 for no match.
      // (dpdk-test-acl 22.11 crashes right after printing them when --verbose >= 1: stdout is
      // made line-buffered so no line is lost, and its exit status is not looked at.)
      uint32_t ncheck = std::min<uint32_t>(o.trace, 20000);
      int rc = 0;
      std::vector<std::string> args = testAclArgs(o, rules_path, trace_path, n, ncheck, 1, 2, ++run_no);
      if (::access("/usr/bin/stdbuf", X_OK) == 0) args.insert(args.begin(), {"/usr/bin/stdbuf", "-oL"});
      std::string out = run(args, &rc);
      std::istringstream is(out);
      std::string line;
      while (std::getline(is, line)) {
        unsigned long idx, r;
        if (std::sscanf(line.c_str(), "ipv4_5tuple: %lu, category: 0, result: %lu", &idx, &r) != 2) {
          continue;
        }
        if (idx == 0 || idx > ncheck) continue;
        int64_t theirs = r == 4294967295ul ? -1 : static_cast<int64_t>(r);
        if (theirs != res[idx - 1]) ++row.mismatches;
        ++row.checked_dpdk;
      }
    }
    rows.push_back(row);
    std::fprintf(stderr, "acl_bench: %u rules done\n", n);
  }

  std::printf("\nacl_bench: IPv4 5-tuple ClassBench-like rules, %u-packet trace, bursts of %u, "
              "best of %u x %u passes, lcore %u, TSC %.2f GHz\n",
              o.trace, o.burst, o.reps, o.iters, o.lcore, tsc_ghz);
  std::printf("| rules | build ms | rebuild ms | 10-rule change ms (delta entries) | merged ms | ACL heap MiB | "
              "peak RSS +MiB | contexts | hit %% | ours cyc/pkt | after change cyc/pkt | "
              "dpdk-test-acl cyc/pkt | ratio ours/dpdk | ratio after change/dpdk | "
              "checked (ref / dpdk / changed) | mismatches |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::ofstream tsv(o.out + "/results.tsv");
  tsv << "rules\tbuild_ms\trebuild_ms\tchange_ms\tmerged_ms\tchange_delta\tchange_incremental\theap_mib"
         "\trss_mib\tcontexts\thit_ratio\tours_cpp\tchange_cpp\tdpdk_cpp\tratio\tchange_ratio"
         "\tchecked_ref\tchecked_dpdk\tchecked_change\tmismatches\n";
  int bad = 0;
  auto num = [](double x) { return std::to_string(x).substr(0, 5); };
  for (const Row& r : rows) {
    double ratio = r.dpdk_cpp > 0 ? r.ours_cpp / r.dpdk_cpp : 0;
    double cratio = r.dpdk_cpp > 0 ? r.change_cpp / r.dpdk_cpp : 0;
    std::printf("| %u | %.0f | %.0f | %.1f (%u%s) | %.0f | %.1f | %.1f | %u | %.0f | %.1f | %.1f | %s | "
                "%s | %s | %lu / %lu / %lu | %lu |\n",
                r.rules, r.build_ms, r.rebuild_ms, r.change_ms, r.change_delta,
                r.change_incremental ? "" : ", full build", r.merged_ms, r.heap_mib, r.rss_mib, r.contexts,
                r.hit_ratio * 100, r.ours_cpp, r.change_cpp,
                r.dpdk_cpp > 0 ? std::to_string(r.dpdk_cpp).substr(0, 6).c_str()
                               : r.dpdk_note.empty() ? "n/a" : r.dpdk_note.c_str(),
                r.dpdk_cpp > 0 ? num(ratio).c_str() : "n/a",
                r.dpdk_cpp > 0 ? num(cratio).c_str() : "n/a",
                static_cast<unsigned long>(r.checked_ref), static_cast<unsigned long>(r.checked_dpdk),
                static_cast<unsigned long>(r.checked_change),
                static_cast<unsigned long>(r.mismatches));
    tsv << r.rules << '\t' << r.build_ms << '\t' << r.rebuild_ms << '\t' << r.change_ms << '\t'
        << r.merged_ms << '\t' << r.change_delta << '\t' << r.change_incremental << '\t' << r.heap_mib << '\t'
        << r.rss_mib << '\t' << r.contexts << '\t' << r.hit_ratio << '\t' << r.ours_cpp << '\t'
        << r.change_cpp << '\t' << r.dpdk_cpp << '\t' << ratio << '\t' << cratio << '\t'
        << r.checked_ref << '\t' << r.checked_dpdk << '\t' << r.checked_change << '\t'
        << r.mismatches << '\n';
    if (r.mismatches) ++bad;
  }
  // EAL never removes its runtime directories (<base>/<file prefix>): ours and those of
  // every dpdk-test-acl run (prefixes aclbench<pid>_<n>) go now.
  const std::string rt = rte_eal_get_runtime_dir();
  rte_eal_cleanup();
  if (const size_t slash = rt.rfind('/'); slash != std::string::npos && slash > 0) {
    const std::string base = rt.substr(0, slash);
    const std::string self = "aclbenchself" + std::to_string(getpid());
    const std::string child = "aclbench" + std::to_string(getpid()) + "_";
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(base, ec)) {
      const std::string name = e.path().filename().string();
      if (name == self || name.rfind(child, 0) == 0) std::filesystem::remove_all(e.path(), ec);
    }
  }
  return bad ? 1 : 0;
}
