// DNS list benchmark: the compiled name set (rules::CompiledDns over a DnsNameSet of 64-bit
// fingerprints) beside std::unordered_set<std::string> holding the same names, in one run.
//
//   dns_bench [--sizes 1000000,2000000] [--lookups 1000000] [--add 10000] [--seed 1]
//             [--dir /tmp]
//
// For each size N it generates N distinct names (2..4 labels, realistic lengths), writes
// them to a plain list file, then measures for both structures:
//   - load: read the file + parse every line (the same parser) + insert (ms);
//   - memory: heap bytes held after loading (mallinfo2 before/after), per name;
//   - lookup: median ns per lookup over batches of 1000 names, for hits (names from the
//     list, with a random extra label half the time: subtree matches) and misses (other
//     names). Both do the same work: every suffix of the query is looked up (subtree
//     matching), ours by fingerprint, the unordered_set by string_view (transparent hash).
//     Ours one name at a time (lookup) and in bursts of 32 (lookupBurst: every name's
//     fingerprints computed and its slots prefetched, then probed; ns per name);
//   - the dataplane's path: DNS query messages (wire format) parsed (dnsParseQuestion: name
//     decoded, lower-cased), fingerprinted and looked up in bursts of 32 as the DNS stage
//     does (Worker::dnsPrepare), and one at a time; the unordered_set peer parses the same
//     messages and looks up the decoded name's suffixes;
//   - incremental add of --add names: ours is compileDns with the previous version (copy of
//     the table + inserts, the hitless path), the unordered_set inserts in place;
//   - false positives: misses our structure reported as hits that the unordered_set did not
//     (expected 0);
//   - instructions per lookup (hits, misses) from the CPU's counter (perf_event_open), which
//     the machine's load does not change (time does).
// Prints a table with ratios (unordered_set / ours).
#include <linux/perf_event.h>
#include <malloc.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "dataplane/stages/dns/dns_filter.h"
#include "rules/compile/dns_parsers.h"
#include "rules/compiled/dns.h"

namespace {

using Clock = std::chrono::steady_clock;
using dpu::rules::CompiledDns;
using dpu::rules::DnsModel;

struct Options {
  std::vector<size_t> sizes = {1000000, 2000000};
  size_t lookups = 1000000;
  size_t add = 10000;
  uint64_t seed = 1;
  std::string dir = "/tmp";
};

struct SvHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringSet = std::unordered_set<std::string, SvHash, std::equal_to<>>;

size_t heapUsed() {
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;  // small chunks + mmapped (large vectors)
}

double ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

class NameGen {
 public:
  explicit NameGen(uint64_t seed) : rng_(seed) {}
  std::string label(int lo, int hi) {
    static const char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789-";
    int n = lo + static_cast<int>(rng_() % static_cast<uint64_t>(hi - lo + 1));
    std::string s;
    for (int i = 0; i < n; ++i) {
      char c = kChars[rng_() % (i == 0 || i == n - 1 ? 36 : 37)];
      s.push_back(c);
    }
    return s;
  }
  std::string name() {
    static const char* kTlds[] = {"com", "net", "org", "io", "de", "ru", "info", "xyz", "co.uk", "app"};
    int labels = 1 + static_cast<int>(rng_() % 3);
    std::string s;
    for (int i = 0; i < labels; ++i) s += label(i == 0 ? 3 : 4, i == 0 ? 16 : 12) + ".";
    s += kTlds[rng_() % 10];
    return s;
  }
  uint64_t next() { return rng_(); }

 private:
  std::mt19937_64 rng_;
};

// Instructions retired by this thread (user space) while enabled: a cost the machine's load
// does not change, unlike time. -1 when perf events are not available.
class InsnCounter {
 public:
  InsnCounter() {
    perf_event_attr a{};
    a.type = PERF_TYPE_HARDWARE;
    a.size = sizeof(a);
    a.config = PERF_COUNT_HW_INSTRUCTIONS;
    a.disabled = 1;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    fd_ = static_cast<int>(syscall(SYS_perf_event_open, &a, 0, -1, -1, 0));
  }
  ~InsnCounter() {
    if (fd_ >= 0) close(fd_);
  }
  void start() {
    if (fd_ < 0) return;
    ioctl(fd_, PERF_EVENT_IOC_RESET, 0);
    ioctl(fd_, PERF_EVENT_IOC_ENABLE, 0);
  }
  long long stop() {
    if (fd_ < 0) return -1;
    ioctl(fd_, PERF_EVENT_IOC_DISABLE, 0);
    long long v = 0;
    return read(fd_, &v, sizeof(v)) == sizeof(v) ? v : -1;
  }

 private:
  int fd_ = -1;
};

// Median over batches of 1000 of ns per call; *insn = instructions per call over all batches
// (-1 without perf events). f(from, to) handles qs[from, to) and returns its hits.
template <class Q, class F>
double medianNsBatch(const std::vector<Q>& qs, F&& f, size_t& hits, double* insn) {
  std::vector<double> per;
  constexpr size_t kBatch = 1000;
  hits = 0;
  static InsnCounter counter;
  long long total_insn = 0;
  size_t calls = 0;
  for (size_t i = 0; i + kBatch <= qs.size(); i += kBatch) {
    counter.start();
    auto t0 = Clock::now();
    size_t h = f(i, i + kBatch);
    auto t1 = Clock::now();
    long long in = counter.stop();
    total_insn = in < 0 || total_insn < 0 ? -1 : total_insn + in;
    calls += kBatch;
    hits += h;
    per.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / kBatch);
  }
  *insn = total_insn < 0 || calls == 0 ? -1 : double(total_insn) / double(calls);
  std::sort(per.begin(), per.end());
  return per.empty() ? 0 : per[per.size() / 2];
}

template <class Q, class F>
double medianNs(const std::vector<Q>& qs, F&& f, size_t& hits, double* insn) {
  return medianNsBatch(
      qs,
      [&](size_t from, size_t to) {
        size_t h = 0;
        for (size_t j = from; j < to; ++j) h += f(qs[j]);
        return h;
      },
      hits, insn);
}

constexpr int kBurst = 32;  // the dataplane's burst (dp::kBurst)
using Burst = dpu::dp::DnsBurstScratch<kBurst>;

// Ours over names [from, to) in bursts of 32 (the last one shorter): fingerprints of every
// name, then CompiledDns::lookupBurst.
size_t oursBurst(const CompiledDns& d, const std::vector<std::string>& qs, size_t from, size_t to,
                 Burst& b) {
  size_t hits = 0;
  for (size_t i = from; i < to; i += kBurst) {
    int n = static_cast<int>(std::min<size_t>(kBurst, to - i));
    for (int j = 0; j < n; ++j) {
      int l = dpu::rules::dnsSuffixHashes(qs[i + j], b.hashes[j], Burst::kMaxLabels);
      b.suffix[j] = b.hashes[j];
      b.nlabels[j] = l < 0 ? 0 : l;
    }
    d.lookupBurst(b.suffix, b.nlabels, n, b.match);
    for (int j = 0; j < n; ++j) hits += b.match[j].blocked();
  }
  return hits;
}

// A DNS query message (wire format) for a name: id, RD, one question (type A, class IN).
std::vector<uint8_t> queryMessage(std::string_view name, uint16_t id) {
  std::vector<uint8_t> m = {static_cast<uint8_t>(id >> 8), static_cast<uint8_t>(id), 1, 0, 0, 1,
                            0, 0, 0, 0, 0, 0};
  size_t p = 0;
  while (p <= name.size()) {
    size_t dot = name.find('.', p);
    if (dot == std::string_view::npos) dot = name.size();
    m.push_back(static_cast<uint8_t>(dot - p));
    for (size_t k = p; k < dot; ++k) {
      char c = name[k];
      m.push_back(static_cast<uint8_t>(id & 1 && c >= 'a' && c <= 'z' ? c - 32 : c));  // mixed case
    }
    p = dot + 1;
  }
  m.insert(m.end(), {0, 0, 1, 0, 1});
  return m;
}

// The DNS stage's path over messages [from, to): parse every question of a burst, fingerprint
// its name, lookupBurst (Worker::dnsPrepare).
size_t oursWireBurst(const CompiledDns& d, const std::vector<std::vector<uint8_t>>& ms, size_t from,
                     size_t to, Burst& b) {
  size_t hits = 0;
  for (size_t i = from; i < to; i += kBurst) {
    int n = static_cast<int>(std::min<size_t>(kBurst, to - i));
    for (int j = 0; j < n; ++j) {
      const auto& m = ms[i + j];
      dpu::dp::DnsQuestion& q = b.q[j];
      b.status[j] = dpu::dp::dnsParseQuestion(m.data(), static_cast<uint32_t>(m.size()), q);
      b.suffix[j] = b.hashes[j];
      b.nlabels[j] = 0;
      if (b.status[j] == dpu::dp::DnsMsgStatus::kOk && q.name.nlabels <= Burst::kMaxLabels) {
        q.name.suffixHashes(b.hashes[j]);
        b.nlabels[j] = q.name.nlabels;
      }
    }
    d.lookupBurst(b.suffix, b.nlabels, n, b.match);
    for (int j = 0; j < n; ++j) hits += b.match[j].blocked();
  }
  return hits;
}

// The same one message at a time (parse, fingerprint, lookup).
bool oursWireSingle(const CompiledDns& d, const std::vector<uint8_t>& m, dpu::dp::DnsQuestion& q,
                    uint64_t* hs) {
  if (dpu::dp::dnsParseQuestion(m.data(), static_cast<uint32_t>(m.size()), q) !=
          dpu::dp::DnsMsgStatus::kOk ||
      q.name.nlabels == 0) {
    return false;
  }
  q.name.suffixHashes(hs);
  return d.lookup(hs, q.name.nlabels).blocked();
}

bool oursLookup(const CompiledDns& d, std::string_view q) {
  uint64_t hs[dpu::rules::kDnsMaxLabels];
  int n = dpu::rules::dnsSuffixHashes(q, hs, dpu::rules::kDnsMaxLabels);
  return n > 0 && d.lookup(hs, n).blocked();
}

bool setLookup(const StringSet& s, std::string_view q) {
  // Every suffix, as ours does (subtree matching).
  size_t pos = 0;
  for (;;) {
    if (s.find(q.substr(pos)) != s.end()) return true;
    size_t dot = q.find('.', pos);
    if (dot == std::string_view::npos) return false;
    pos = dot + 1;
  }
}

bool setWire(const StringSet& s, const std::vector<uint8_t>& m, dpu::dp::DnsQuestion& q);

void run(const Options& o, size_t n) {
  NameGen gen(o.seed + n);
  std::unordered_set<std::string> uniq;
  uniq.reserve(n + o.add);
  std::vector<std::string> names;
  names.reserve(n);
  while (names.size() < n) {
    std::string s = gen.name();
    if (uniq.insert(s).second) names.push_back(std::move(s));
  }
  std::vector<std::string> extra;
  while (extra.size() < o.add) {
    std::string s = gen.name();
    if (uniq.insert(s).second) extra.push_back(std::move(s));
  }
  std::vector<std::string> misses;
  while (misses.size() < o.lookups) {
    std::string s = gen.name();
    if (!uniq.count(s)) misses.push_back(std::move(s));
  }
  std::vector<std::string> hits_q;
  for (size_t i = 0; i < o.lookups; ++i) {
    const std::string& b = names[gen.next() % n];
    hits_q.push_back(gen.next() & 1 ? gen.label(3, 8) + "." + b : b);
  }
  uniq.clear();
  uniq.rehash(0);

  std::string path = o.dir + "/dns_bench_" + std::to_string(n) + ".txt";
  {
    std::ofstream f(path);
    for (const auto& s : names) f << s << '\n';
  }

  // Ours: load from file.
  DnsModel m;
  dpu::rules::DnsListModel l;
  l.name = "bench";
  l.format = dpu::rules::DnsListFormat::kPlain;
  l.plain_match = dpu::rules::DnsMatch::kSubtree;
  l.files = {path};
  m.lists.push_back(l);
  size_t h0 = heapUsed();
  auto t0 = Clock::now();
  auto ours = dpu::rules::compileDns(m, nullptr);
  auto t1 = Clock::now();
  if (!ours.ok()) {
    fprintf(stderr, "compileDns: %s\n", std::string(ours.status().message()).c_str());
    exit(1);
  }
  size_t ours_bytes = heapUsed() - h0;
  double ours_load = ms(t0, t1);
  const auto& set = (*ours)->lists[0]->set;

  // unordered_set: load from the same file with the same parser.
  size_t h1 = heapUsed();
  auto t2 = Clock::now();
  StringSet ss;
  {
    auto text = dpu::rules::readDnsListFile(path);
    dpu::rules::DnsSource src{"bench", path, "", 1};
    dpu::rules::parseDnsListText(*text, dpu::rules::DnsListFormat::kPlain, dpu::rules::DnsMatch::kSubtree,
                                 src, [&](std::string_view nm, uint8_t) { ss.emplace(nm); }, nullptr);
  }
  auto t3 = Clock::now();
  size_t ss_bytes = heapUsed() - h1;
  double ss_load = ms(t2, t3);

  size_t hh = 0, hm = 0, sh = 0, sm = 0;
  const CompiledDns& d = **ours;
  double ih, ish, im, ism;  // instructions per lookup
  double ours_hit = medianNs(hits_q, [&](const std::string& q) { return oursLookup(d, q); }, hh, &ih);
  double ss_hit = medianNs(hits_q, [&](const std::string& q) { return setLookup(ss, q); }, sh, &ish);
  double ours_miss = medianNs(misses, [&](const std::string& q) { return oursLookup(d, q); }, hm, &im);
  double ss_miss = medianNs(misses, [&](const std::string& q) { return setLookup(ss, q); }, sm, &ism);
  // Bursts of 32 (ns per name), interleaved with the single lookups' peers above.
  auto burst = std::make_unique<Burst>();
  size_t bh = 0, bm = 0;
  double ibh, ibm;
  double burst_hit = medianNsBatch(
      hits_q, [&](size_t a, size_t e) { return oursBurst(d, hits_q, a, e, *burst); }, bh, &ibh);
  double burst_miss = medianNsBatch(
      misses, [&](size_t a, size_t e) { return oursBurst(d, misses, a, e, *burst); }, bm, &ibm);
  // The dataplane's path from DNS query messages.
  std::vector<std::vector<uint8_t>> wire_hits, wire_misses;
  for (size_t i = 0; i < hits_q.size(); ++i) wire_hits.push_back(queryMessage(hits_q[i], uint16_t(i)));
  for (size_t i = 0; i < misses.size(); ++i) wire_misses.push_back(queryMessage(misses[i], uint16_t(i)));
  auto q1 = std::make_unique<dpu::dp::DnsQuestion>();
  uint64_t hs1[dpu::dp::kDnsMaxNameLabels];
  size_t wbh = 0, wbm = 0, wsh = 0, wsm = 0, ssh2 = 0, ssm2 = 0;
  double i1, i2, i3, i4, i5, i6;
  double wb_hit = medianNsBatch(
      wire_hits, [&](size_t a, size_t e) { return oursWireBurst(d, wire_hits, a, e, *burst); }, wbh, &i1);
  double ws_hit = medianNs(
      wire_hits, [&](const std::vector<uint8_t>& m) { return oursWireSingle(d, m, *q1, hs1); }, wsh, &i2);
  double wss_hit = medianNs(
      wire_hits, [&](const std::vector<uint8_t>& m) { return setWire(ss, m, *q1); }, ssh2, &i3);
  double wb_miss = medianNsBatch(
      wire_misses, [&](size_t a, size_t e) { return oursWireBurst(d, wire_misses, a, e, *burst); }, wbm, &i4);
  double ws_miss = medianNs(
      wire_misses, [&](const std::vector<uint8_t>& m) { return oursWireSingle(d, m, *q1, hs1); }, wsm, &i5);
  double wss_miss = medianNs(
      wire_misses, [&](const std::vector<uint8_t>& m) { return setWire(ss, m, *q1); }, ssm2, &i6);

  // Incremental add.
  DnsModel m2 = m;
  m2.lists[0].names = extra;
  auto t4 = Clock::now();
  auto ours2 = dpu::rules::compileDns(m2, ours->get());
  auto t5 = Clock::now();
  for (const auto& s : extra) ss.emplace(s);
  auto t6 = Clock::now();
  bool inc_ok = ours2.ok() && (*ours2)->lists[0]->incremental &&
                (*ours2)->lists[0]->set.size() == n + o.add;

  printf("\n== %zu names (file %s) ==\n", n, path.c_str());
  printf("%-34s %14s %18s %8s\n", "", "ours", "unordered_set", "ratio");
  printf("%-34s %14.1f %18.1f %8.2f\n", "bytes per name (heap)", double(ours_bytes) / n,
         double(ss_bytes) / n, double(ss_bytes) / ours_bytes);
  printf("%-34s %14.1f %18s %8s\n", "  table bytes per name", double(set.memoryBytes()) / n, "", "");
  printf("%-34s %14.1f %18.1f %8.2f\n", "load from file (ms)", ours_load, ss_load, ss_load / ours_load);
  printf("%-34s %14.1f %18.1f %8.2f\n", "lookup hit, median ns", ours_hit, ss_hit, ss_hit / ours_hit);
  printf("%-34s %14.1f %18.1f %8.2f\n", "lookup miss, median ns", ours_miss, ss_miss, ss_miss / ours_miss);
  printf("%-34s %14.1f %18.1f %8.2f\n", "lookup hit, burst of 32, ns/name", burst_hit, ss_hit, ss_hit / burst_hit);
  printf("%-34s %14.1f %18.1f %8.2f\n", "lookup miss, burst of 32, ns/name", burst_miss, ss_miss, ss_miss / burst_miss);
  printf("%-34s %14.2f %18s %8s\n", "  burst speed-up hit (single/burst)", ours_hit / burst_hit, "", "");
  printf("%-34s %14.2f %18s %8s\n", "  burst speed-up miss", ours_miss / burst_miss, "", "");
  printf("dataplane path (DNS query message: parse + lower-case + fingerprint + lookup):\n");
  printf("%-34s %14.1f %18.1f %8.2f\n", "query hit, single, median ns", ws_hit, wss_hit, wss_hit / ws_hit);
  printf("%-34s %14.1f %18.1f %8.2f\n", "query hit, burst of 32, ns/query", wb_hit, wss_hit, wss_hit / wb_hit);
  printf("%-34s %14.1f %18.1f %8.2f\n", "query miss, single, median ns", ws_miss, wss_miss, wss_miss / ws_miss);
  printf("%-34s %14.1f %18.1f %8.2f\n", "query miss, burst of 32, ns/query", wb_miss, wss_miss, wss_miss / wb_miss);
  if (bh != hh || bm != hm || wbh != hh || wbm != hm || wsh != hh || wsm != hm || ssh2 != sh || ssm2 != sm) {
    printf("RESULTS DIFFER: burst %zu/%zu, wire burst %zu/%zu, wire single %zu/%zu, single %zu/%zu, "
           "set wire %zu/%zu, set %zu/%zu\n", bh, bm, wbh, wbm, wsh, wsm, hh, hm, ssh2, ssm2, sh, sm);
  }
  if (ih >= 0 && im >= 0) {
    printf("%-34s %14.1f %18.1f %8.2f\n", "lookup hit, instructions", ih, ish, ish / ih);
    printf("%-34s %14.1f %18.1f %8.2f\n", "lookup miss, instructions", im, ism, ism / im);
  } else {
    printf("%-34s %14s %18s\n", "lookup instructions", "n/a (no CPU instruction counter here)", "");
  }
  printf("%-34s %14.2f %18.2f %8.2f\n", "incremental add (ms)", ms(t4, t5), ms(t5, t6),
         ms(t5, t6) / ms(t4, t5));
  // A "miss" query can still end in a listed name (subtree match: "x.foo.com" when "foo.com"
  // is listed); both structures must agree on it. Ours finding more is a fingerprint false
  // positive.
  printf("hits found: ours %zu / %zu, unordered_set %zu / %zu; miss queries under a listed "
         "suffix: ours %zu, unordered_set %zu -> fingerprint false positives: %lld; incremental "
         "path %s\n",
         hh, hits_q.size() / 1000 * 1000, sh, hits_q.size() / 1000 * 1000, hm, sm,
         static_cast<long long>(hm) - static_cast<long long>(sm), inc_ok ? "ok" : "NOT TAKEN");
  double load1, load5, load15;
  if (FILE* f = fopen("/proc/loadavg", "r")) {
    if (fscanf(f, "%lf %lf %lf", &load1, &load5, &load15) == 3) {
      printf("machine load average during the run: %.1f %.1f %.1f\n", load1, load5, load15);
    }
    fclose(f);
  }
  unlink(path.c_str());
}

bool setWire(const StringSet& s, const std::vector<uint8_t>& m, dpu::dp::DnsQuestion& q) {
  if (dpu::dp::dnsParseQuestion(m.data(), static_cast<uint32_t>(m.size()), q) !=
          dpu::dp::DnsMsgStatus::kOk ||
      q.name.nlabels == 0) {
    return false;
  }
  return setLookup(s, std::string_view(q.name.text, q.name.text_len));
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) { fprintf(stderr, "%s needs a value\n", a.c_str()); exit(2); }
      return argv[++i];
    };
    if (a == "--sizes") {
      o.sizes.clear();
      std::string v = val();
      size_t p = 0;
      while (p <= v.size()) {
        size_t c = v.find(',', p);
        if (c == std::string::npos) c = v.size();
        o.sizes.push_back(std::stoull(v.substr(p, c - p)));
        p = c + 1;
      }
    } else if (a == "--lookups") {
      o.lookups = std::stoull(val());
    } else if (a == "--add") {
      o.add = std::stoull(val());
    } else if (a == "--seed") {
      o.seed = std::stoull(val());
    } else if (a == "--dir") {
      o.dir = val();
    } else {
      fprintf(stderr, "usage: dns_bench [--sizes N,M] [--lookups N] [--add N] [--seed S] [--dir D]\n");
      return 2;
    }
  }
  printf("dns_bench: lookups %zu, incremental add %zu, seed %llu\n", o.lookups, o.add,
         static_cast<unsigned long long>(o.seed));
  for (size_t n : o.sizes) run(o, n);
  return 0;
}
