// DPI stage without DPDK: TCP segments in order, split, out of order, retransmitted with other
// bytes, beyond the buffer (gap), past the depth; stream pool exhaustion; end-of-stream
// matches at flow end; UDP block scans; a rule change mid-flow. Every case runs in both stream
// modes (full streams, compressed slots); the compressed mode's own cases: directions
// interleaved on the one working stream, a slot too small (moved to a full stream, or not
// inspected when none is free), match state (counts) packed and unpacked between packets.
#include "dataplane/stages/dpi/dpi_runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "rules/compile/yara_translate.h"
#include "tests/util/dpi_compile.h"

namespace dpu::dp {
namespace {

using test::compileDpiText;

const char* kRules = R"(
rule split { strings: $a = "ATTACKSTRING" condition: $a }
rule word_end { strings: $a = "quit" fullword condition: $a }
rule two { strings: $a = "first" $b = "second" condition: $a and $b }
)";

struct Fixture : ::testing::TestWithParam<rules::DpiStreamMode> {
  void SetUp() override {
    dpi = compileDpiText(kRules);
    DpiSettings s;
    s.stream_mode = GetParam();
    s.full_streams_per_worker = 1;  // kCompressed: 4 compact slots + 1 full stream
    s.streams_per_worker = 4;
    s.ooo_slots_per_worker = 2;
    s.ooo_buffer_bytes = 64;
    s.depth_bytes = 1000;
    auto r = DpiRuntime::create(dpi, s, 1);
    ASSERT_TRUE(r.ok()) << r.status();
    rt = *r;
  }
  std::vector<std::string> feed(DpiDir& d, uint32_t seq, const std::string& p, DpiOutcome* o = nullptr) {
    DpiOutcome out;
    DpiInspector::tcp(*rt, 0, d, reinterpret_cast<const uint8_t*>(p.data()), uint32_t(p.size()), seq, 0x10, out);
    if (o) *o = out;
    std::vector<std::string> names;
    for (uint32_t i = 0; i < out.nfired; ++i) names.push_back(dpi->rules[out.fired[i]].name);
    return names;
  }
  // Flow directions the pools hold, and how many are free.
  size_t poolSize() const { return rt->compressed() ? 5 : 4; }
  size_t freeSlots() const { return rt->worker(0).free_streams.size() + rt->worker(0).free_compact.size(); }
  std::shared_ptr<const rules::CompiledDpi> dpi;
  std::shared_ptr<DpiRuntime> rt;
};

using V = std::vector<std::string>;

TEST_P(Fixture, MatchSplitAcrossSegmentsFiresOnce) {
  DpiDir d;
  DpiOutcome syn;
  DpiInspector::tcp(*rt, 0, d, nullptr, 0, 999, 0x02, syn);
  EXPECT_EQ(feed(d, 1000, "xxATTA"), V{});
  EXPECT_EQ(feed(d, 1006, "CKSTR"), V{});
  EXPECT_EQ(feed(d, 1011, "INGyy"), V{"split"});
  EXPECT_EQ(feed(d, 1016, "ATTACKSTRING"), V{});  // already fired in this direction
}

TEST_P(Fixture, OutOfOrderIsReassembledAndRetransmitsNotRescanned) {
  DpiDir d;
  EXPECT_EQ(feed(d, 100, "..ATT"), V{});
  EXPECT_EQ(feed(d, 110, "TRING"), V{});   // future: buffered
  // Retransmission overlapping the scanned "..ATT": only its new bytes "ACKSTRING" are
  // scanned (the stream reads "..ATTACKSTRING": match); the buffered bytes at 110..113 are
  // superseded by them, the buffered "G" at 114 then continues the stream.
  DpiOutcome o;
  EXPECT_EQ(feed(d, 100, "..ATTACKSTRING", &o), V{"split"});
  EXPECT_EQ(o.scanned, 10u);
  EXPECT_EQ(rt->worker(0).free_ooo.size(), 2u);  // buffer drained and returned
  DpiDir e;
  EXPECT_EQ(feed(e, 0, "ATTA"), V{});
  EXPECT_EQ(feed(e, 8, "RING"), V{});      // buffered
  EXPECT_EQ(feed(e, 4, "CKST"), V{"split"});  // fills the hole; buffer drained
}

TEST_P(Fixture, RetransmissionWithOtherBytesKeepsTheFirstCopy) {
  DpiDir d;
  EXPECT_EQ(feed(d, 0, "ATTACKxxxxxx"), V{});
  EXPECT_EQ(feed(d, 0, "ATTACKSTRING"), V{});  // same range, other bytes: not scanned
}

TEST_P(Fixture, GapBeyondTheBufferStopsInspection) {
  DpiDir d;
  DpiOutcome o;
  EXPECT_EQ(feed(d, 0, "ATTA"), V{});
  feed(d, 500, "ATTACKSTRING", &o);
  EXPECT_TRUE(o.gap);
  EXPECT_TRUE(d.flags & DpiDir::kDone);
  EXPECT_EQ(feed(d, 4, "CKSTRING"), V{});
  EXPECT_EQ(freeSlots(), poolSize());  // stream returned to the pool
}

TEST_P(Fixture, DepthLimit) {
  DpiDir d;
  DpiOutcome o;
  feed(d, 0, std::string(995, '.'), &o);
  EXPECT_EQ(feed(d, 995, "ATTACKSTRING", &o), V{});  // bytes past 1000 are not inspected
  EXPECT_TRUE(o.depth_reached);
}

TEST_P(Fixture, StreamPoolExhaustion) {
  DpiDir d[6];
  DpiOutcome o;
  for (size_t i = 0; i < poolSize(); ++i) {
    feed(d[i], 0, "x", &o);
    EXPECT_FALSE(o.no_stream);
  }
  feed(d[poolSize()], 0, "x", &o);
  EXPECT_TRUE(o.no_stream);
  DpiOutcome end;
  DpiInspector::end(*rt, 0, d[0], end);
  EXPECT_EQ(freeSlots(), 1u);
}

TEST_P(Fixture, EndOfStreamMatchesAtFlowEnd) {
  DpiDir d;
  EXPECT_EQ(feed(d, 0, "now quit"), V{});  // fullword at the very end: only known at the end
  DpiOutcome o;
  DpiInspector::end(*rt, 0, d, o);
  ASSERT_EQ(o.nfired, 1u);
  EXPECT_EQ(dpi->rules[o.fired[0]].name, "word_end");
  EXPECT_EQ(freeSlots(), poolSize());
}

TEST_P(Fixture, UdpBlockScanPerDatagram) {
  DpiDir d;
  DpiOutcome a, b, c;
  std::string p1 = "first", p2 = "second", p3 = "first second";
  DpiInspector::udp(*rt, 0, d, reinterpret_cast<const uint8_t*>(p1.data()), 5, a);
  DpiInspector::udp(*rt, 0, d, reinterpret_cast<const uint8_t*>(p2.data()), 6, b);
  DpiInspector::udp(*rt, 0, d, reinterpret_cast<const uint8_t*>(p3.data()), uint32_t(p3.size()), c);
  EXPECT_EQ(a.nfired + b.nfired, 0u);
  ASSERT_EQ(c.nfired, 1u);
  EXPECT_EQ(dpi->rules[c.fired[0]].name, "two");
}

TEST_P(Fixture, NewRulesMidFlowStartAFreshStream) {
  DpiDir d;
  feed(d, 0, "ATTACK");
  auto rt2 = DpiRuntime::create(compileDpiText(kRules), rt->settings(), 1);
  ASSERT_TRUE(rt2.ok());
  DpiOutcome o;
  const std::string p = "STRING ATTACKSTRING";
  DpiInspector::tcp(**rt2, 0, d, reinterpret_cast<const uint8_t*>(p.data()), uint32_t(p.size()), 6, 0x10, o);
  EXPECT_EQ(o.nfired, 1u);  // the match fully inside the new stream
  EXPECT_EQ(d.rt_id, (*rt2)->id());
}

TEST_P(Fixture, OutOfOrderAfterHandshake) {
  rules::DpiModel m;
  DpiDir d;
  DpiOutcome syn;
  DpiInspector::tcp(*rt, 0, d, nullptr, 0, 999, 0x02, syn);
  EXPECT_EQ(feed(d, 1000 + 6, "CKSTRING bye"), V{});
  EXPECT_EQ(feed(d, 1000, "xxATTA"), V{"split"});
}

TEST_P(Fixture, InterleavedDirectionsKeepTheirOwnState) {
  DpiDir a, b, c;
  EXPECT_EQ(feed(a, 0, "xxATTA"), V{});
  EXPECT_EQ(feed(b, 0, "first "), V{});
  EXPECT_EQ(feed(c, 0, "ATTACKST"), V{});
  EXPECT_EQ(feed(b, 6, "ATTA"), V{});
  EXPECT_EQ(feed(a, 6, "CKSTRING"), V{"split"});
  EXPECT_EQ(feed(c, 8, "xRING second"), V{});  // c's bytes were "ATTACKST" + "x": no match
  EXPECT_EQ(feed(b, 10, "second"), V{"two"});
  EXPECT_EQ(feed(a, 14, "first second"), V{"two"});
}

INSTANTIATE_TEST_SUITE_P(StreamModes, Fixture,
                         ::testing::Values(rules::DpiStreamMode::kFull, rules::DpiStreamMode::kCompressed),
                         [](const auto& i) {
                           return i.param == rules::DpiStreamMode::kFull ? "Full" : "Compressed";
                         });

// Compressed mode with slots too small for the stream: the direction moves to a full stream
// and its matches continue there; with no full stream free it is not inspected.
TEST(DpiCompressed, SlotTooSmallMovesToAFullStream) {
  auto dpi = compileDpiText(kRules);
  DpiSettings s;
  s.stream_mode = rules::DpiStreamMode::kCompressed;
  s.compressed_slot_bytes = 8;  // header + almost nothing (the config allows >= 64)
  s.streams_per_worker = 4;
  s.full_streams_per_worker = 1;
  auto r = DpiRuntime::create(dpi, s, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  const DpiRuntime& rt = **r;
  auto feed = [&](DpiDir& d, uint32_t seq, const std::string& p, DpiOutcome& o) {
    o = DpiOutcome{};
    DpiInspector::tcp(rt, 0, d, reinterpret_cast<const uint8_t*>(p.data()), uint32_t(p.size()), seq, 0x10, o);
  };
  DpiDir a, b;
  DpiOutcome o;
  feed(a, 0, "xxfirst ATTACK", o);
  EXPECT_TRUE(o.overflow);
  EXPECT_FALSE(o.no_stream);
  EXPECT_TRUE(a.flags & DpiDir::kFull);
  EXPECT_EQ(rt.worker(0).free_compact.size(), 4u);  // its compact slot went back
  feed(a, 14, "STRING second", o);
  EXPECT_FALSE(o.overflow);
  ASSERT_EQ(o.nfired, 2u);  // split (across the move) and two (match state carried over)
  feed(b, 0, "ATTACK", o);
  EXPECT_TRUE(o.overflow);
  EXPECT_TRUE(o.no_stream);  // the one full stream is a's
  EXPECT_TRUE(b.flags & DpiDir::kDone);
  DpiInspector::end(rt, 0, a, o);
  DpiInspector::end(rt, 0, b, o);
  EXPECT_EQ(rt.worker(0).free_streams.size(), 1u);
  EXPECT_EQ(rt.worker(0).free_compact.size(), 4u);
}

TEST(DpiCompressed, CountsAndPositionsSurvivePacking) {
  auto dpi = compileDpiText(R"(
rule three { strings: $a = "abc" condition: #a == 3 and @a[2] == 10 and $a at 4 }
rule big { condition: filesize > 300 }
)");
  DpiSettings s;
  s.stream_mode = rules::DpiStreamMode::kCompressed;
  s.streams_per_worker = 2;
  auto r = DpiRuntime::create(dpi, s, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  const DpiRuntime& rt = **r;
  DpiDir a, b;
  std::vector<std::string> fired;
  auto feed = [&](DpiDir& d, uint32_t seq, const std::string& p) {
    DpiOutcome o;
    DpiInspector::tcp(rt, 0, d, reinterpret_cast<const uint8_t*>(p.data()), uint32_t(p.size()), seq, 0x10, o);
    EXPECT_FALSE(o.overflow);
    for (uint32_t i = 0; i < o.nfired; ++i) fired.push_back(dpi->rules[o.fired[i]].name);
  };
  feed(a, 0, "....ab");
  feed(b, 0, std::string(200, 'z'));
  feed(a, 6, "c...");         // abc at 4
  feed(b, 200, std::string(101, 'z'));
  feed(a, 10, "abc");         // at 10
  EXPECT_EQ(fired, V{"big"});
  feed(a, 13, "..abc");       // the third
  EXPECT_EQ(fired, (V{"big", "three"}));
}

}  // namespace
}  // namespace dpu::dp

namespace dpu::dp {
namespace {

// Packets after a stream's first evaluate only the rules whose strings changed, whose filesize
// thresholds (CompiledDpi::fs_breaks) the packet crossed, and the rules that reference them
// (CompiledDpi::evaluateChanged); a rule that depends on filesize only through a global rule
// of its namespace, or that another filesize rule references, still fires on the packet that
// makes it true. And however many rules become true at once, all are reported then.
struct TickFixture : ::testing::TestWithParam<rules::DpiStreamMode> {
  void make(const std::string& text) {
    dpi = compileDpiText(text);
    ASSERT_NE(dpi, nullptr);
    DpiSettings s;
    s.stream_mode = GetParam();
    s.full_streams_per_worker = 2;
    s.streams_per_worker = 4;
    auto r = DpiRuntime::create(dpi, s, 1);
    ASSERT_TRUE(r.ok()) << r.status();
    rt = *r;
  }
  std::vector<std::string> feed(DpiDir& d, uint32_t& seq, const std::string& p, DpiOutcome* o = nullptr) {
    DpiOutcome out;
    DpiInspector::tcp(*rt, 0, d, reinterpret_cast<const uint8_t*>(p.data()), uint32_t(p.size()), seq, 0x10, out);
    seq += uint32_t(p.size());
    if (o) *o = out;
    std::vector<std::string> names;
    for (uint32_t i = 0; i < out.nfired; ++i) names.push_back(dpi->rules[out.fired[i]].name);
    std::sort(names.begin(), names.end());
    return names;
  }
  uint32_t index(const std::string& rule) const {
    for (size_t i = 0; i < dpi->rules.size(); ++i)
      if (dpi->rules[i].name == rule) return uint32_t(i);
    ADD_FAILURE() << "no rule " << rule;
    return 0;
  }
  // The filesize thresholds of a rule's own condition.
  std::vector<uint64_t> thresholds(const std::string& rule) const {
    std::vector<uint64_t> t;
    for (const auto& [size, r] : dpi->fs_breaks)
      if (r == index(rule)) t.push_back(size);
    return t;
  }
  // The rules whose conditions name `rule`.
  std::vector<std::string> dependents(const std::string& rule) const {
    const uint32_t r = index(rule);
    std::vector<std::string> out;
    for (uint32_t k = dpi->dep_begin[r]; k < dpi->dep_begin[r + 1]; ++k)
      out.push_back(dpi->rules[dpi->dependents[k]].name);
    return out;
  }
  std::shared_ptr<const rules::CompiledDpi> dpi;
  std::shared_ptr<DpiRuntime> rt;
};

TEST_P(TickFixture, GlobalFilesizeRuleGatesAStringRule) {
  make(R"(
global private rule big { condition: filesize > 20 }
rule r { strings: $a = "abc" condition: $a }
)");
  EXPECT_EQ(thresholds("big"), std::vector<uint64_t>{21});
  EXPECT_TRUE(thresholds("r").empty());  // through its namespace's global rule
  EXPECT_TRUE(dpi->incremental);
  DpiDir d;
  uint32_t seq = 100;
  EXPECT_EQ(feed(d, seq, "abc"), V{});                    // big is false: r is not reported
  EXPECT_EQ(feed(d, seq, std::string(30, '.')), V{"r"});  // no new match; big turns true
  EXPECT_EQ(feed(d, seq, std::string(10, '.')), V{});     // fired once
}

TEST_P(TickFixture, ReferencedRuleAndFilesize) {
  make(R"(
rule base { strings: $a = "abc" condition: $a }
rule later { condition: base and filesize > 20 }
rule plain { strings: $b = "zzz" condition: $b }
)");
  EXPECT_EQ(thresholds("later"), std::vector<uint64_t>{21});
  EXPECT_TRUE(thresholds("base").empty());
  EXPECT_EQ(dependents("base"), V{"later"});  // re-evaluated with base
  EXPECT_TRUE(dependents("plain").empty());
  EXPECT_TRUE(dpi->fs_every.empty());
  DpiDir d;
  uint32_t seq = 7;
  EXPECT_EQ(feed(d, seq, "abc"), V{"base"});
  EXPECT_EQ(feed(d, seq, std::string(30, '.')), (V{"later"}));
  EXPECT_EQ(feed(d, seq, "zzz"), V{"plain"});
}

std::string manyRules(int n) {
  std::string t;
  for (int i = 0; i < n; ++i) t += "rule r" + std::to_string(100 + i) + " { strings: $a = \"hit\" condition: $a }\n";
  return t;
}

// More rules than the old 16-entry outcome held become true at once: every one is reported
// by the packet (or the stream end, or the datagram) that makes it true, none later, none lost.
TEST_P(TickFixture, EveryNewMatchIsReportedByThePacketThatMakesItTrue) {
  make(manyRules(40));
  DpiDir d;
  uint32_t seq = 1;
  DpiOutcome o1;
  V first = feed(d, seq, "a hit", &o1);
  EXPECT_EQ(first.size(), 40u);
  EXPECT_EQ(std::set<std::string>(first.begin(), first.end()).size(), 40u);
  EXPECT_EQ(feed(d, seq, "..."), V{});  // nothing left over for the next packet
  EXPECT_EQ(feed(d, seq, "hit"), V{});  // fired once per direction
  DpiDir other;                         // the other direction fires them again, all of them
  uint32_t seq2 = 50;
  EXPECT_EQ(feed(other, seq2, "hit").size(), 40u);
}

TEST_P(TickFixture, BlockScanReportsEveryMatch) {
  make(manyRules(40));
  DpiDir d;
  DpiOutcome o;
  const std::string p = "hit";
  DpiInspector::udp(*rt, 0, d, reinterpret_cast<const uint8_t*>(p.data()), 3, o);
  EXPECT_EQ(o.nfired, 40u);
  DpiOutcome o2;  // the next datagram: scanned on its own, all of them again
  DpiInspector::udp(*rt, 0, d, reinterpret_cast<const uint8_t*>(p.data()), 3, o2);
  EXPECT_EQ(o2.nfired, 40u);
}

TEST_P(TickFixture, StreamEndReportsEveryMatch) {
  // fullword at the very end of the stream: all 40 become true only at the end.
  std::string t;
  for (int i = 0; i < 40; ++i) t += "rule e" + std::to_string(100 + i) + " { strings: $a = \"quit\" fullword condition: $a }\n";
  make(t);
  DpiDir d;
  uint32_t seq = 1;
  EXPECT_EQ(feed(d, seq, "now quit"), V{});
  DpiOutcome o;
  DpiInspector::end(*rt, 0, d, o);
  EXPECT_EQ(o.nfired, 40u);
  std::set<uint32_t> distinct(o.fired, o.fired + o.nfired);
  EXPECT_EQ(distinct.size(), 40u);
}

INSTANTIATE_TEST_SUITE_P(StreamModes, TickFixture,
                         ::testing::Values(rules::DpiStreamMode::kFull, rules::DpiStreamMode::kCompressed),
                         [](const auto& i) {
                           return i.param == rules::DpiStreamMode::kFull ? "Full" : "Compressed";
                         });

}  // namespace
}  // namespace dpu::dp
