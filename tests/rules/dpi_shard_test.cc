// Incremental DPI compiles (docs/dpi.md "Shards and incremental compiles"): a rule set spread
// over shard databases by source; an edit translates only the changed source and compiles
// only a delta database, a removal compiles nothing, a background merge folds the delta in,
// and every layout reports what libyara reports, through the test scanner and through the
// dataplane's inspector (full and compressed streams, one Hyperscan stream per shard).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>

#include "dataplane/stages/dpi/dpi_runtime.h"
#include "rules/compile/yara_translate.h"
#include "tests/rules/dpi_test_util.h"

namespace dpu::rules {
namespace {

// These tests look at what each compile builds: no disk cache shared with another run
// (scripts/test.sh's DPU_TEST_HS_CACHE_DIR would serve the sanitizer phase's compiles from
// the first phase's databases).
const bool kNoSharedCache = [] {
  unsetenv("DPU_TEST_HS_CACHE_DIR");
  return true;
}();

using test::Pair;
using test::scanSegments;
using V = std::vector<std::string>;

DpiModel sixSources() {
  DpiModel m;
  m.shards = 4;
  for (int i = 0; i < 6; ++i) {
    const std::string n = "src" + std::to_string(i);
    m.sources.push_back({n, "rule r" + std::to_string(i) + " { strings: $a = \"MARK-" + n +
                                "\" $b = \"HEX-" + n + "\" $c = /RE-" + n +
                                "-[0-9]{3}/ condition: $a or #b >= 2 or $c }\n" +
                                "rule c" + std::to_string(i) + " { strings: $a = \"CNT-" + n +
                                "\" condition: #a >= 2 and r" + std::to_string(i) + " }\n"});
  }
  return m;
}

std::vector<std::string> payloads() {
  return {"nothing here", "xx MARK-src0 yy", "MARK-src3 and MARK-src5",
          "HEX-src1 .. HEX-src1", "HEX-src2 once", "RE-src5-123", "RE-src5-12x",
          "MARK-src4 CNT-src4 CNT-src4", "MARK-src4 CNT-src4 CNT-src4 CNT-src4",
          "MARK-src9 ADD-ME-1 CHANGED-2 MARK-src2 MARK-src1"};
}

void expectOracle(const Pair& p, const char* what) {
  for (const std::string& d : payloads())
    for (const std::vector<size_t>& seg : {std::vector<size_t>{1u << 30}, {3}, {7, 1}})
      EXPECT_EQ(scanSegments(*p.ours, p.scratch, d, seg, true), p.oracle(d))
          << what << ": '" << d << "' segment " << seg[0];
}

// What the dataplane's inspector reports for `data` fed in `seg`-byte segments (every rule
// that fired on the way, sorted).
V inspect(const std::shared_ptr<const CompiledDpi>& d, DpiStreamMode mode, const std::string& data,
          size_t seg) {
  dp::DpiSettings s;
  s.stream_mode = mode;
  s.streams_per_worker = 2;
  s.full_streams_per_worker = 2;
  s.compressed_slot_bytes = 512;  // the default: K streams + match state packed in it
  s.depth_bytes = 0;
  auto rt = dp::DpiRuntime::create(d, s, 1);
  EXPECT_TRUE(rt.ok()) << rt.status();
  if (!rt.ok()) return {};
  V out;
  dp::DpiDir dir;
  auto take = [&](const dp::DpiOutcome& o) {
    for (uint32_t i = 0; i < o.nfired; ++i) out.push_back(d->rules[o.fired[i]].id());
  };
  for (size_t off = 0; off < data.size(); off += seg) {
    dp::DpiOutcome o;
    const uint32_t n = uint32_t(std::min(seg, data.size() - off));
    dp::DpiInspector::tcp(**rt, 0, dir, reinterpret_cast<const uint8_t*>(data.data()) + off, n,
                          1000 + uint32_t(off), 0x10, o);
    take(o);
  }
  dp::DpiOutcome o;
  dp::DpiInspector::end(**rt, 0, dir, o);
  take(o);
  std::sort(out.begin(), out.end());
  return out;
}

void expectInspector(const Pair& p, const char* what) {
  for (DpiStreamMode mode : {DpiStreamMode::kFull, DpiStreamMode::kCompressed})
    for (const std::string& d : payloads())
      for (size_t seg : {size_t(1) << 20, size_t(5)})
        EXPECT_EQ(inspect(p.ours, mode, d, seg), p.oracle(d))
            << what << ": '" << d << "' mode " << int(mode) << " segment " << seg;
}

TEST(DpiShards, EditsCompileOnlyWhatChangedAndReportWhatLibyaraReports) {
  clearDpiCompileCache();
  Pair cold;
  std::string err;
  DpiModel m = sixSources();
  ASSERT_TRUE(cold.build(m, &err)) << err;
  const CompiledDpi& c = *cold.ours;
  EXPECT_TRUE(c.unsupported.empty());
  ASSERT_GE(c.shards.size(), 2u) << "six sources over four shards";
  EXPECT_EQ(c.db, nullptr);  // several databases: no single one to scan with
  EXPECT_EQ(c.sources_cached, 0u);
  EXPECT_EQ(c.shards_compiled, uint32_t(c.shards.size()));
  EXPECT_EQ(c.delta_patterns, 0u);
  for (const DpiShard& sh : c.shards) EXPECT_EQ(sh.live, sh.ids.size());
  expectOracle(cold, "cold");
  expectInspector(cold, "cold");

  // One rule added to src2 and src4's rule changed: two sources translated again, their
  // patterns compiled in a delta database; the home shards keep serving the other sources.
  DpiModel e = m;
  e.sources[2].text += "rule added { strings: $a = \"ADD-ME-1\" condition: $a }\n";
  e.sources[4].text = "rule r4 { strings: $a = \"CHANGED-2\" condition: $a }\n";
  Pair edit;
  ASSERT_TRUE(edit.build(e, &err)) << err;
  const CompiledDpi& d = *edit.ours;
  EXPECT_EQ(d.sources_cached, 4u);
  // The delta, and a home shard whose every source changed (nothing to serve: compiled
  // directly, it holds only changed sources): only the changed sources' patterns.
  EXPECT_GE(d.shards_compiled, 1u);
  uint32_t changed_patterns = 0;
  for (const DpiRule& r : d.rules)
    if (r.source == "src2" || r.source == "src4")
      for (uint32_t s = r.first_string; s < r.first_string + r.num_strings; ++s)
        for (const DpiPattern& pt : d.patterns) changed_patterns += pt.string_id == s;
  EXPECT_EQ(d.patterns_compiled, changed_patterns);
  EXPECT_GT(d.delta_patterns, 0u);
  EXPECT_GE(d.shards_reused, 1u);
  EXPECT_GE(d.merges_pending, 1u);
  ASSERT_TRUE(d.shards.back().delta);
  uint32_t masked = 0;
  for (const DpiShard& sh : d.shards) masked += uint32_t(sh.ids.size()) - sh.live;
  EXPECT_GT(masked, 0u);  // the old src2 / src4 patterns, reported by nothing
  EXPECT_EQ(edit.oracle("CHANGED-2"), (V{"src4:r4"}));
  EXPECT_EQ(edit.oracle("MARK-src4"), V{});  // the old r4 is gone
  expectOracle(edit, "edit");
  expectInspector(edit, "edit");

  // The background merge compiles the home shards again; the next compile of the same
  // rules uses them: no delta, nothing compiled.
  waitDpiMerges();
  Pair merged;
  ASSERT_TRUE(merged.build(e, &err)) << err;
  EXPECT_EQ(merged.ours->sources_cached, 6u);
  EXPECT_EQ(merged.ours->shards_compiled, 0u);
  EXPECT_EQ(merged.ours->delta_patterns, 0u);
  EXPECT_TRUE(merged.ours->from_cache);
  for (const DpiShard& sh : merged.ours->shards) {
    EXPECT_FALSE(sh.delta);
    EXPECT_EQ(sh.live, sh.ids.size());
  }
  expectOracle(merged, "merged");

  // A source removed: nothing compiled, its patterns masked.
  DpiModel r = e;
  r.sources.erase(r.sources.begin() + 3);
  Pair removed;
  ASSERT_TRUE(removed.build(r, &err)) << err;
  EXPECT_EQ(removed.ours->shards_compiled, 0u);
  EXPECT_EQ(removed.ours->delta_patterns, 0u);
  EXPECT_EQ(removed.oracle("MARK-src3"), V{});
  expectOracle(removed, "removed");
  expectInspector(removed, "removed");

  // One rule removed from a source that keeps others: the source's remaining patterns are
  // served by its old version in the shard (the removed rule's masked): nothing compiled.
  DpiModel one_less = r;
  one_less.sources[0].text = one_less.sources[0].text.substr(0, one_less.sources[0].text.find("rule c0"));
  Pair less;
  ASSERT_TRUE(less.build(one_less, &err)) << err;
  EXPECT_EQ(less.ours->shards_compiled, 0u);
  EXPECT_EQ(less.ours->patterns_compiled, 0u);
  EXPECT_EQ(less.ours->delta_patterns, 0u);
  EXPECT_EQ(less.ours->sources_cached, uint32_t(one_less.sources.size()) - 1);
  EXPECT_EQ(less.oracle("MARK-src0 CNT-src0 CNT-src0"), (V{"src0:r0"}));
  expectOracle(less, "one rule removed");
  expectInspector(less, "one rule removed");
  waitDpiMerges();
}

// A match at the end of the data (fullword at the last byte: reported when the stream
// closes) in a rule of one shard while other shards hold other rules (the http-evader
// EICAR file that ends with the string).
TEST(DpiShards, EndOfDataMatchesInEveryShard) {
  clearDpiCompileCache();
  DpiModel m = sixSources();
  m.sources.push_back({"MALW_Eicar.yar",
                       "rule eicar { strings: $s1 = \"X5O!P%@AP[4\\\\PZX54(P^)7CC)7}$EICAR-STANDARD-"
                       "ANTIVIRUS-TEST-FILE!$H+H*\" fullword ascii condition: all of them }\n"});
  m.sources.push_back({"other.yar", "rule tail { strings: $t = \"H+H*\" fullword condition: $t }\n"});
  Pair p;
  std::string err;
  ASSERT_TRUE(p.build(m, &err)) << err;
  ASSERT_GE(p.ours->shards.size(), 2u);
  const std::string file =
      "foobar\r\nX5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*";
  ASSERT_EQ(p.oracle(file), (V{"MALW_Eicar.yar:eicar", "other.yar:tail"}));
  EXPECT_EQ(scanSegments(*p.ours, p.scratch, file, {1u << 30}), p.oracle(file));
  for (DpiStreamMode mode : {DpiStreamMode::kFull, DpiStreamMode::kCompressed})
    for (size_t seg : {size_t(1) << 20, size_t(7)})
      EXPECT_EQ(inspect(p.ours, mode, file, seg), p.oracle(file)) << int(mode) << " " << seg;
}

// A session that straddles an edit (docs/dpi.md "Flows across a change"): the direction's
// streams are reopened on the new rules at its current position, in every shard, changed
// or not; a string split across the swap is not matched, one wholly after it is, and what
// the old rules fired stays fired (the dataplane keeps the flow's verdict).
TEST(DpiShards, ASessionStraddlingAnEditRestartsItsStreamsAtTheSwap) {
  clearDpiCompileCache();
  DpiModel m = sixSources();
  Pair before;
  std::string err;
  ASSERT_TRUE(before.build(m, &err)) << err;
  DpiModel e = m;
  e.sources[3].text += "rule added { strings: $a = \"ADD-ME-1\" condition: $a }\n";
  Pair after;
  ASSERT_TRUE(after.build(e, &err)) << err;
  for (DpiStreamMode mode : {DpiStreamMode::kFull, DpiStreamMode::kCompressed}) {
    dp::DpiSettings s;
    s.stream_mode = mode;
    s.streams_per_worker = 2;
    s.full_streams_per_worker = 2;
    s.depth_bytes = 0;
    auto ra = dp::DpiRuntime::create(before.ours, s, 1);
    auto rb = dp::DpiRuntime::create(after.ours, s, 1);
    ASSERT_TRUE(ra.ok() && rb.ok());
    dp::DpiDir dir;
    V fired;
    auto feed = [&](const dp::DpiRuntime& rt, const std::string& data, uint32_t seq) {
      dp::DpiOutcome o;
      dp::DpiInspector::tcp(rt, 0, dir, reinterpret_cast<const uint8_t*>(data.data()),
                            uint32_t(data.size()), seq, 0x10, o);
      for (uint32_t i = 0; i < o.nfired; ++i) fired.push_back(rt.dpi().rules[o.fired[i]].id());
    };
    feed(**ra, "MARK-src0 .. MARK-sr", 1000);          // r0 fires on the old rules
    feed(**rb, "c1 .. ADD-ME-1 ..", 1000 + 20);        // swap: "MARK-src1" split across it
    dp::DpiOutcome o;
    dp::DpiInspector::end(**rb, 0, dir, o);
    for (uint32_t i = 0; i < o.nfired; ++i) fired.push_back((*rb)->dpi().rules[o.fired[i]].id());
    std::sort(fired.begin(), fired.end());
    EXPECT_EQ(fired, (V{"src0:r0", "src3:added"})) << "mode " << int(mode);
  }
}

// The merge listener runs once the queue is empty; a merge that finished is used by the
// republishing compile.
TEST(DpiShards, MergeListenerRunsWhenMergesAreDone) {
  clearDpiCompileCache();
  std::atomic<int> calls{0};
  setDpiMergeListener([&] { calls.fetch_add(1); });
  DpiModel m = sixSources();
  ConfigErrorList e1, e2;
  ASSERT_TRUE(compileDpi(m, e1).ok());
  EXPECT_EQ(dpiMergeStats().pending, 0u);  // a cold compile leaves nothing to merge
  m.sources[0].text += "rule more { strings: $a = \"MORE\" condition: $a }\n";
  auto d = compileDpi(m, e2);
  ASSERT_TRUE(d.ok());
  ASSERT_GE((*d)->merges_pending, 1u);
  waitDpiMerges();
  EXPECT_GE(calls.load(), 1);
  setDpiMergeListener(nullptr);
}

// One shard: the single-database layout of before (and `db` set); changes to it go through
// the delta as well.
TEST(DpiShards, OneShardIsTheSingleDatabase) {
  clearDpiCompileCache();
  DpiModel m = sixSources();
  m.shards = 1;
  Pair p;
  std::string err;
  ASSERT_TRUE(p.build(m, &err)) << err;
  ASSERT_EQ(p.ours->shards.size(), 1u);
  EXPECT_NE(p.ours->db, nullptr);
  expectOracle(p, "one shard");
  m.sources[1].text += "rule late { strings: $a = \"ADD-ME-1\" condition: $a }\n";
  Pair q;
  ASSERT_TRUE(q.build(m, &err)) << err;
  EXPECT_EQ(q.ours->shards.size(), 2u);  // the shard and the delta
  EXPECT_EQ(q.ours->db, nullptr);
  expectOracle(q, "one shard + delta");
  waitDpiMerges();
}

// A warm restart: a new process finds every shard in dpi.cache_dir (and the expressions
// Hyperscan refused, so it does not compile to find them again).
TEST(DpiShards, WarmRestartLoadsEveryShardFromTheCacheDir) {
  char tmpl[] = "/tmp/dpi-shard-cache-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  clearDpiCompileCache();
  DpiModel m = sixSources();
  m.cache_dir = tmpl;
  ConfigErrorList e1, e2;
  auto a = compileDpi(m, e1);
  ASSERT_TRUE(a.ok());
  clearDpiCompileCache();
  auto b = compileDpi(m, e2);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->shards_compiled, 0u);
  EXPECT_EQ((*b)->shards_loaded, uint32_t((*b)->shards.size()));
  EXPECT_TRUE((*b)->from_cache);
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace dpu::rules
