// Weighted Maglev tables (rules/compiled/lb.cc): the fast build equals the paper's pseudocode
// (reference), and the properties of the issue over 1M random 5-tuple keys: balance, minimal
// disruption on remove / add, determinism (two builds, any listing order).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rules/compile/lb_compiler.h"
#include "rules/compiled/lb.h"

namespace dpu::rules {
namespace {

constexpr uint32_t kM = 65537;
constexpr size_t kKeys = 1'000'000;

std::vector<std::string> names(size_t n, size_t first = 0) {
  std::vector<std::string> v;
  for (size_t i = 0; i < n; ++i) v.push_back(absl::StrCat("backend-", first + i));
  return v;
}

// 1M key hashes of random 5-tuples (fixed PRNG seed: the test is reproducible).
const std::vector<uint64_t>& keys() {
  static const std::vector<uint64_t> k = [] {
    std::mt19937_64 rng(20261121);
    std::vector<uint64_t> out(kKeys);
    for (auto& h : out) {
      LbPacket p;
      p.l3 = 4;
      uint32_t s = uint32_t(rng()), d = uint32_t(rng());
      std::memcpy(p.src, &s, 4);
      std::memcpy(p.dst, &d, 4);
      p.sport = uint16_t(rng());
      p.dport = uint16_t(rng());
      p.proto = (rng() & 1) ? 6 : 17;
      h = lbHash5Tuple(p);
    }
    return out;
  }();
  return k;
}

std::vector<uint16_t> assign(const std::vector<uint16_t>& table) {
  std::vector<uint16_t> out(kKeys);
  for (size_t i = 0; i < kKeys; ++i) out[i] = table[lbReduce(keys()[i], kM)];
  return out;
}

TEST(Maglev, FastEqualsReference) {
  std::mt19937 rng(7);
  for (uint32_t m : {251u, 4099u, kM}) {
    for (size_t n : {1u, 2u, 3u, 10u, 25u}) {
      if (n * 10 > m) continue;
      std::vector<uint32_t> eq(n, 1), w(n);
      for (auto& x : w) x = 1 + rng() % 20;
      w[0] = 0;  // one backend out of the table
      auto ids = names(n);
      EXPECT_EQ(maglevBuild(ids, eq, m), maglevBuildReference(ids, eq, m)) << n << " " << m;
      if (n > 1) {
        EXPECT_EQ(maglevBuild(ids, w, m), maglevBuildReference(ids, w, m)) << n << " " << m;
      }
    }
  }
  auto ids = names(1000);
  std::vector<uint32_t> eq(1000, 1);
  EXPECT_EQ(maglevBuild(ids, eq, kM), maglevBuildReference(ids, eq, kM));
}

TEST(Maglev, EmptyWhenNoWeight) {
  EXPECT_TRUE(maglevBuild(names(3), {0, 0, 0}, 251).empty());
  EXPECT_TRUE(maglevBuild({}, {}, 251).empty());
  auto one = maglevBuild(names(3), {0, 5, 0}, 251);
  ASSERT_EQ(one.size(), 251u);
  for (uint16_t b : one) EXPECT_EQ(b, 1);
}

// max over backends of |observed share / weight share - 1|.
double worstDeviation(const std::vector<uint64_t>& count, const std::vector<uint32_t>& w) {
  double total = 0, wsum = 0, worst = 0;
  for (auto c : count) total += double(c);
  for (auto x : w) wsum += x;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] == 0) {
      EXPECT_EQ(count[i], 0u);
      continue;
    }
    worst = std::max(worst, std::fabs((count[i] / total) / (w[i] / wsum) - 1));
  }
  return worst;
}

TEST(Maglev, BalanceOfTheTable) {
  // Table slots per backend within 1% of the weight's share, up to 1000 backends.
  std::mt19937 rng(11);
  for (size_t n : {2u, 10u, 100u, 1000u}) {
    std::vector<uint32_t> eq(n, 1);
    auto t = maglevBuild(names(n), eq, kM);
    std::vector<uint64_t> slots(n, 0);
    for (auto b : t) slots[b]++;
    auto mm = std::minmax_element(slots.begin(), slots.end());
    std::printf("table, %zu equal backends: slots %lu..%lu, worst deviation %.3f%%\n", n,
                (unsigned long)*mm.first, (unsigned long)*mm.second,
                100 * worstDeviation(slots, eq));
    EXPECT_LE(worstDeviation(slots, eq), 0.01) << n << " backends, slots " << *mm.first << ".."
                                               << *mm.second;
  }
  for (size_t n : {2u, 10u, 100u}) {
    std::vector<uint32_t> w(n);
    for (auto& x : w) x = 1 + rng() % 5;
    auto t = maglevBuild(names(n), w, kM);
    std::vector<uint64_t> slots(n, 0);
    for (auto b : t) slots[b]++;
    EXPECT_LE(worstDeviation(slots, w), 0.01) << n << " weighted backends";
  }
}

TEST(Maglev, BalanceOverOneMillionKeys) {
  // Keys per backend within 1% of the weights where 1M keys can show it (the binomial noise of
  // a backend's count is sqrt(k p (1-p)): 0.3% of its mean at p = 0.1, 3% at p = 0.001).
  // For more backends the key counts must agree with the table's slot shares within 5 sigma of
  // that noise (the table itself is within 1%: BalanceOfTheTable).
  std::mt19937 rng(3);
  struct Case { size_t n; bool weighted; };
  for (Case c : {Case{2, false}, Case{5, true}, Case{10, false}, Case{100, false},
                 Case{100, true}, Case{1000, false}}) {
    std::vector<uint32_t> w(c.n, 1);
    if (c.weighted) for (auto& x : w) x = 1 + rng() % 4;
    auto t = maglevBuild(names(c.n), w, kM);
    std::vector<uint64_t> count(c.n, 0), slots(c.n, 0);
    for (auto b : assign(t)) count[b]++;
    for (auto b : t) slots[b]++;
    std::printf("1M keys, %zu backends%s: worst deviation from the weights %.3f%%\n", c.n,
                c.weighted ? " (weighted)" : "", 100 * worstDeviation(count, w));
    if (c.n <= 10) {
      EXPECT_LE(worstDeviation(count, w), 0.01) << c.n << (c.weighted ? " weighted" : "");
    }
    for (size_t i = 0; i < c.n; ++i) {
      double p = double(slots[i]) / kM, mean = p * kKeys, sigma = std::sqrt(kKeys * p * (1 - p));
      EXPECT_LE(std::fabs(count[i] - mean), 5 * sigma) << c.n << " backend " << i;
    }
  }
}

double moved(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b,
             const std::vector<std::string>& ida, const std::vector<std::string>& idb) {
  // Compare by backend id (indexes differ between the two lists).
  size_t n = 0;
  for (size_t i = 0; i < kKeys; ++i) n += ida[a[i]] != idb[b[i]];
  return double(n) / kKeys;
}

TEST(Maglev, RemoveOneRemapsAtMostItsShare) {
  for (size_t n : {3u, 10u, 100u, 1000u}) {
    auto ids = names(n);
    std::vector<uint32_t> w(n, 1);
    auto before = assign(maglevBuild(ids, w, kM));
    for (size_t victim : {size_t(0), n / 2, n - 1}) {
      auto ids2 = ids;
      ids2.erase(ids2.begin() + long(victim));
      auto after = assign(maglevBuild(ids2, std::vector<uint32_t>(n - 1, 1), kM));
      double f = moved(before, after, ids, ids2);
      EXPECT_LE(f, 1.0 / n + 0.01) << "remove " << victim << " of " << n;
      std::printf("remove 1 of %zu: %.4f%% of keys moved (bound %.4f%%)\n", n, 100 * f,
                  100 * (1.0 / n + 0.01));
      // Draining (weight 0) is the same table as removing.
      auto w0 = w;
      w0[victim] = 0;
      auto drained = assign(maglevBuild(ids, w0, kM));
      EXPECT_EQ(moved(after, drained, ids2, ids), 0.0) << "drain == remove for new flows";
    }
  }
}

TEST(Maglev, AddOneRemapsAtMostItsShare) {
  for (size_t n : {2u, 10u, 100u, 999u}) {
    auto ids = names(n);
    auto before = assign(maglevBuild(ids, std::vector<uint32_t>(n, 1), kM));
    auto ids2 = names(n + 1);
    auto after = assign(maglevBuild(ids2, std::vector<uint32_t>(n + 1, 1), kM));
    double f = moved(before, after, ids, ids2);
    EXPECT_LE(f, 1.0 / (n + 1) + 0.01) << "add to " << n;
    std::printf("add 1 to %zu: %.4f%% of keys moved (bound %.4f%%)\n", n, 100 * f,
                100 * (1.0 / (n + 1) + 0.01));
  }
}

TEST(Maglev, IndependentBuildsAgree) {
  // Two appliances with the same backends (listed in any order) pick the same backend (by id)
  // for every key: a deterministic hash, no per-process seed.
  auto ids = names(100);
  std::vector<uint32_t> w(100);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 1 + i % 3;
  auto a = maglevBuild(ids, w, kM);
  auto ids2 = ids;
  auto w2 = w;
  std::reverse(ids2.begin(), ids2.end());
  std::reverse(w2.begin(), w2.end());
  auto b = maglevBuild(ids2, w2, kM);
  for (uint32_t s = 0; s < kM; ++s) ASSERT_EQ(ids[a[s]], ids2[b[s]]) << "slot " << s;
  // Pinned content: the table of a fixed backend set never changes across builds/versions.
  uint64_t h = 0;
  for (uint16_t x : maglevBuild(names(10), std::vector<uint32_t>(10, 1), kM)) h = h * 31 + x;
  EXPECT_EQ(h, 17277574749075742802ull);
}

}  // namespace
}  // namespace dpu::rules
