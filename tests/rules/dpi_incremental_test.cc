// The evaluation shortcuts of the per-packet path (CompiledDpi::evaluateChanged and the match
// bookkeeping behind it) must not change a result:
//   - counters saturate at what the conditions distinguish (`#a > 3` keeps 4, `#a == 2` 3,
//     `@a[5]` 5, `#a == 0` 1; `#a` in arithmetic is not capped);
//   - filesize thresholds are computed from the conditions (`filesize < C` changes at C,
//     `<= C` / `> C` at C + 1, `==` / `!=` at both, either operand order, uintXX(N) at N);
//   - after a stream's first evaluation only the rules whose strings changed, whose
//     thresholds were crossed, and the rules referencing them are evaluated; a global rule
//     among them evaluates everything; a fired rule nobody references is skipped.
// Checked three ways on rules written to hit each shortcut (`#a == 0`, `not $a`, filesize in
// both directions and operand orders, `at` / `in`, counts and offsets, rule references,
// private and global rules, uint16): the incremental evaluation after every segment equals a
// full one (scanSegments' check), the final result equals libyara's, and DpiInspector::tcp
// (full and compressed streams) reports, packet by packet, exactly what a full evaluation of
// every packet reports.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "dataplane/stages/dpi/dpi_runtime.h"
#include "tests/rules/dpi_test_util.h"

namespace dpu::rules {
namespace {

using test::Pair;
using test::scanSegments;
using V = std::vector<std::string>;

const char* kMain = R"(
rule count_gt { strings: $a = "QQa1" condition: #a > 3 }
rule count_eq { strings: $a = "QQb2" condition: #a == 2 }
rule count_rev { strings: $a = "QQc3" condition: 1 < #a }
rule count_zero { strings: $a = "QQd4" condition: #a == 0 }
rule not_found { strings: $a = "QQe5" condition: not $a }
rule offset_5 { strings: $a = "QQf6" condition: @a[5] > 0 and #a == 5 }
rule offset_2 { strings: $a = "QQg7" condition: @a[2] == 12 }
rule count_arith { strings: $a = "QQh8" condition: #a * 2 > 4 }
rule at_5 { strings: $a = "QQi9" condition: $a at 5 }
rule in_range { strings: $a = "QQj0" condition: $a in (10..20) }
rule small { condition: filesize < 40 }
rule small_le { strings: $a = "QQk1" condition: $a and filesize <= 40 }
rule big { condition: filesize > 40 }
rule big_rev { strings: $a = "QQl2" condition: $a and 40 < filesize }
rule big_ge_rev { condition: 60 <= filesize }
rule size_eq { condition: filesize == 33 }
rule size_ne { strings: $a = "QQm3" condition: $a and filesize != 50 }
rule mz { condition: uint16(0) == 0x5a4d and filesize < 64 }
private rule base { strings: $a = "QQn4" condition: $a }
rule later { condition: base and filesize > 30 }
rule both { strings: $b = "QQo5" condition: base and $b }
rule arith_size { strings: $a = "QQp6" condition: $a and @a[1] + 10 < filesize }
)";

// A global rule gates its namespace: nothing of it is reported before the stream is 25 bytes
// long, then every true rule of it at once.
const char* kGlobal = R"(
global private rule long_enough { condition: filesize >= 25 }
rule g_str { strings: $a = "QQq7" condition: $a }
rule g_not { strings: $a = "QQr8" condition: not $a }
)";

DpiModel model() {
  DpiModel m;
  m.sources.push_back({"main", kMain});
  m.sources.push_back({"glob", kGlobal});
  return m;
}

uint32_t ruleIndex(const CompiledDpi& d, const std::string& name) {
  for (size_t i = 0; i < d.rules.size(); ++i)
    if (d.rules[i].name == name) return uint32_t(i);
  ADD_FAILURE() << "no rule " << name;
  return 0;
}

// The counter cap of a rule's first string.
uint32_t capOf(const CompiledDpi& d, const std::string& rule) {
  const DpiString& s = d.strings[d.rules[ruleIndex(d, rule)].first_string];
  if (s.count_slot < 0) return 0;
  return d.count_cap[size_t(s.count_slot)];
}

std::vector<uint64_t> thresholdsOf(const CompiledDpi& d, const std::string& rule) {
  std::vector<uint64_t> t;
  for (const auto& [size, r] : d.fs_breaks)
    if (r == ruleIndex(d, rule)) t.push_back(size);
  return t;
}

TEST(DpiIncremental, CountersSaturateWhereConditionsStopDistinguishing) {
  Pair p;
  std::string err;
  ASSERT_TRUE(p.build(model(), &err)) << err;
  const CompiledDpi& d = *p.ours;
  EXPECT_EQ(capOf(d, "count_gt"), 4u);
  EXPECT_EQ(capOf(d, "count_eq"), 3u);
  EXPECT_EQ(capOf(d, "count_rev"), 2u);
  EXPECT_EQ(capOf(d, "count_zero"), 1u);
  EXPECT_EQ(capOf(d, "offset_5"), 6u);   // @a[5] needs 5, #a == 5 needs 6
  EXPECT_EQ(capOf(d, "offset_2"), 2u);
  EXPECT_EQ(capOf(d, "count_arith"), 0xffffffffu);
}

TEST(DpiIncremental, FilesizeThresholdsFollowTheComparisons) {
  Pair p;
  std::string err;
  ASSERT_TRUE(p.build(model(), &err)) << err;
  const CompiledDpi& d = *p.ours;
  using T = std::vector<uint64_t>;
  EXPECT_EQ(thresholdsOf(d, "small"), T{40});
  EXPECT_EQ(thresholdsOf(d, "small_le"), T{41});
  EXPECT_EQ(thresholdsOf(d, "big"), T{41});
  EXPECT_EQ(thresholdsOf(d, "big_rev"), T{41});
  EXPECT_EQ(thresholdsOf(d, "big_ge_rev"), T{60});
  EXPECT_EQ(thresholdsOf(d, "size_eq"), (T{33, 34}));
  EXPECT_EQ(thresholdsOf(d, "size_ne"), (T{50, 51}));
  EXPECT_EQ(thresholdsOf(d, "mz"), (T{2, 64}));
  EXPECT_EQ(thresholdsOf(d, "long_enough"), T{25});
  EXPECT_TRUE(thresholdsOf(d, "base").empty());
  // filesize in arithmetic: evaluated whenever filesize grows.
  EXPECT_TRUE(thresholdsOf(d, "arith_size").empty());
  EXPECT_EQ(d.fs_every, std::vector<uint32_t>{ruleIndex(d, "arith_size")});
  EXPECT_TRUE(d.incremental);
}

// The empty-state table (CompiledDpi::evaluateEmpty): what a first scan that matched nothing
// reports (a UDP datagram, a stream's first segment) is read from the table instead of
// evaluating every rule that needs no string: at every filesize, with and without rules
// already fired, it equals evaluate() on the empty state. A rule true without strings that
// reads filesize in arithmetic disables the table (its value may change at any size).
TEST(DpiIncremental, EmptyStateTableEqualsFullEvaluation) {
  Pair p;
  std::string err;
  ASSERT_TRUE(p.build(model(), &err)) << err;
  const CompiledDpi& d = *p.ours;
  ASSERT_TRUE(d.empty_table);
  EXPECT_FALSE(d.empty_bounds.empty());
  std::vector<uint8_t> ms(d.matchStateBytes(), 0);
  std::vector<uint8_t> fired((d.rules.size() + 7) / 8, 0);
  fired[ruleIndex(d, "small") >> 3] |= uint8_t(1u << (ruleIndex(d, "small") & 7));
  std::vector<uint32_t> a(d.rules.size()), b(d.rules.size());
  size_t nonempty = 0;
  for (uint64_t size = 0; size < 200; ++size) {
    CompiledDpi::setFilesize(ms.data(), size);
    const uint8_t* fired_bits = fired.data();
    for (const uint8_t* f : {static_cast<const uint8_t*>(nullptr), fired_bits}) {
      const uint32_t na = d.evaluate(ms.data(), a.data(), uint32_t(a.size()), f);
      const uint32_t nb = d.evaluateEmpty(size, b.data(), uint32_t(b.size()), f);
      ASSERT_EQ(na, nb) << "filesize " << size;
      EXPECT_EQ(std::vector<uint32_t>(a.begin(), a.begin() + na),
                std::vector<uint32_t>(b.begin(), b.begin() + nb))
          << "filesize " << size;
      nonempty += na != 0;
    }
  }
  EXPECT_GT(nonempty, 100u);  // small, big, size_eq, g_not ... are true without strings
  DpiModel arith;
  arith.sources.push_back({"a", "rule even { condition: filesize % 2 == 0 }\n"});
  Pair q;
  ASSERT_TRUE(q.build(arith, &err)) << err;
  EXPECT_FALSE(q.ours->empty_table);
}

std::vector<std::string> payloads() {
  const std::string f8 = "........";
  return {
      "",
      "QQa1QQa1QQa1",                                 // #a == 3: count_gt false
      "QQa1QQa1QQa1QQa1QQa1QQa1",                     // 6 > 3
      "QQb2..QQb2",                                   // #a == 2
      "QQb2..QQb2..QQb2",                             // 3: not == 2 (a cap of 2 would say yes)
      "QQc3QQc3QQc3QQc3",
      "QQd4" + f8 + f8 + f8 + f8 + f8 + f8,           // #a == 0 false; small / big flips
      "QQe5",
      "QQf6QQf6QQf6QQf6QQf6",                         // exactly 5
      "QQf6QQf6QQf6QQf6QQf6QQf6",                     // 6: #a == 5 false
      "QQg7" + f8 + "QQg7",                           // @a[2] == 12
      "QQg7......QQg7QQg7",                           // @a[2] == 10
      "QQh8QQh8QQh8",
      ".....QQi9" + f8 + "QQj0" + f8 + f8 + f8,       // at 5; in (10..20) at 17
      "...QQi9.............................QQj0",     // neither position
      std::string(33, 'x'),                            // filesize == 33 at the end
      std::string(39, 'x') + "QQk1",                  // small_le: 43 > 40 at the end
      "QQk1" + std::string(30, 'x'),
      "QQl2" + std::string(50, 'x'),                  // big_rev true from 41
      "QQm3" + std::string(46, 'x'),                  // size_ne: false at exactly 50
      "QQm3" + std::string(47, 'x'),
      "MZ" + std::string(30, 'x'),                    // mz
      "MZ" + std::string(70, 'x'),                    // mz false at the end
      "QQn4" + std::string(40, 'x'),                  // base, later from 31
      std::string(40, 'x') + "QQn4",                  // later made true by base's string
      "QQo5" + std::string(20, 'x') + "QQn4",         // both: base's string last
      "QQp6" + std::string(20, 'x'),                  // arith_size from filesize 15
      "QQq7",                                          // global not satisfied
      "QQq7" + std::string(30, 'x'),                  // satisfied from 25: g_str, g_not
      "QQr8" + std::string(30, 'x'),                  // g_not false
      std::string(30, 'y') + "QQq7QQr8",
      "QQa1QQb2QQb2QQc3QQc3QQe5QQf6QQg7" + f8 + "QQn4QQo5QQp6QQq7" + std::string(60, 'z'),
  };
}

const std::vector<std::vector<size_t>> kSegs = {{1u << 30}, {1}, {3}, {7}, {5, 1, 20}, {13, 2}};

TEST(DpiIncremental, IncrementalEqualsFullAndLibyara) {
  Pair p;
  std::string err;
  ASSERT_TRUE(p.build(model(), &err)) << err;
  size_t positives = 0;
  for (const std::string& data : payloads()) {
    const V want = p.oracle(data);
    positives += !want.empty();
    for (const auto& seg : kSegs) {
      // (scanSegments adds a failure when the incremental evaluation of a segment differs)
      EXPECT_EQ(scanSegments(*p.ours, p.scratch, data, seg, true), want)
          << "payload '" << data << "' segment " << seg[0];
    }
  }
  EXPECT_GT(positives, 20u);
}

// CompiledDpi::unstableRules: which rules can turn false as bytes are appended (an HTTP file
// decides those at its end). By name on the rules above, then against libyara: on every
// prefix of every payload, a rule called stable that libyara reports on a prefix is reported
// on every longer prefix, and the unstable ones do turn (the check can fail).
TEST(DpiIncremental, UnstableRulesAreTheOnesThatCanTurnFalse) {
  Pair p;
  std::string err;
  ASSERT_TRUE(p.build(model(), &err)) << err;
  const CompiledDpi& d = *p.ours;
  const std::vector<uint8_t> u = d.unstableRules();
  ASSERT_EQ(u.size(), d.rules.size());
  std::set<std::string> got;
  for (size_t r = 0; r < u.size(); ++r)
    if (u[r]) got.insert(d.rules[r].name);
  const std::set<std::string> want = {"count_eq", "count_zero", "not_found", "offset_5", "small",
                                      "small_le", "size_eq",   "size_ne",   "mz",       "g_not"};
  EXPECT_EQ(got, want);
  std::set<std::string> turned;
  for (const std::string& data : payloads()) {
    std::set<std::string> before;
    for (size_t len = 0; len <= data.size(); ++len) {
      const V now = p.oracle(data.substr(0, len));
      const std::set<std::string> cur(now.begin(), now.end());
      for (const std::string& id : before) {
        if (cur.count(id)) continue;
        const std::string name = id.substr(id.find(':') + 1);
        turned.insert(name);
        EXPECT_TRUE(want.count(name)) << id << " turned false at " << len << " bytes of '" << data << "'";
      }
      before = cur;
    }
  }
  for (const char* name : {"count_eq", "not_found", "small"}) EXPECT_TRUE(turned.count(name)) << name;
}

// Per packet, what a full evaluation of every packet reports (with fired bits kept), and at
// the stream's end: the reference for the dataplane's incremental path.
std::vector<V> fullEveryPacket(const CompiledDpi& d, hs_scratch_t* scratch, const std::string& data,
                               const std::vector<size_t>& seg) {
  std::vector<uint8_t> ms(d.matchStateBytes());
  d.resetMatchState(ms.data());
  DpiMatchCtx ctx{&d, ms.data(), 0, false};
  DpiStreamSet st(d);
  std::vector<uint8_t> fired((d.rules.size() + 7) / 8, 0);
  std::vector<uint32_t> hit(d.rules.size() + 1);
  std::vector<V> out;
  auto fire = [&]() {
    const uint32_t n = d.evaluate(ms.data(), hit.data(), uint32_t(hit.size()), fired.data());
    V names;
    for (uint32_t i = 0; i < n; ++i) {
      fired[hit[i] >> 3] |= uint8_t(1u << (hit[i] & 7));
      names.push_back(d.rules[hit[i]].id());
    }
    std::sort(names.begin(), names.end());
    out.push_back(names);
  };
  size_t off = 0, k = 0;
  while (off < data.size()) {
    const size_t n = std::min(data.size() - off, std::max<size_t>(1, seg[k++ % seg.size()]));
    CompiledDpi::setFilesize(ms.data(), off + n);
    st.scan(data.data() + off, n, scratch, ctx);
    fire();
    off += n;
  }
  st.close(scratch, &ctx);
  fire();
  return out;
}

class DpiIncrementalStage : public ::testing::TestWithParam<DpiStreamMode> {};

TEST_P(DpiIncrementalStage, EveryPacketReportsWhatAFullEvaluationReports) {
  Pair p;
  std::string err;
  ASSERT_TRUE(p.build(model(), &err)) << err;
  const CompiledDpi& d = *p.ours;
  dp::DpiSettings s;
  s.stream_mode = GetParam();
  s.streams_per_worker = 2;
  s.full_streams_per_worker = 2;
  s.ooo_slots_per_worker = 1;
  s.depth_bytes = 0;
  auto rt = dp::DpiRuntime::create(p.ours, s, 1);
  ASSERT_TRUE(rt.ok()) << rt.status();
  for (const std::string& data : payloads()) {
    if (data.empty()) continue;
    for (const auto& seg : kSegs) {
      const std::vector<V> want = fullEveryPacket(d, p.scratch, data, seg);
      std::vector<V> got;
      dp::DpiDir dir;
      size_t off = 0, k = 0;
      auto names = [&](const dp::DpiOutcome& o) {
        V v;
        for (uint32_t i = 0; i < o.nfired; ++i) v.push_back(d.rules[o.fired[i]].id());
        std::sort(v.begin(), v.end());
        return v;
      };
      while (off < data.size()) {
        const size_t n = std::min(data.size() - off, std::max<size_t>(1, seg[k++ % seg.size()]));
        dp::DpiOutcome o;
        dp::DpiInspector::tcp(**rt, 0, dir, reinterpret_cast<const uint8_t*>(data.data()) + off,
                              uint32_t(n), 7000 + uint32_t(off), 0x10, o);
        got.push_back(names(o));
        off += n;
      }
      dp::DpiOutcome o;
      dp::DpiInspector::end(**rt, 0, dir, o);
      got.push_back(names(o));
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_EQ(got[i], want[i]) << "payload '" << data << "' segment " << seg[0] << " packet " << i
                                   << (i + 1 == got.size() ? " (stream end)" : "");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, DpiIncrementalStage,
                         ::testing::Values(DpiStreamMode::kFull, DpiStreamMode::kCompressed));

}  // namespace
}  // namespace dpu::rules
