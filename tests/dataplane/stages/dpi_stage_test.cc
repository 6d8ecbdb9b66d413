// DPI stage without DPDK: TCP segments in order, split, out of order, retransmitted with other
// bytes, beyond the buffer (gap), past the depth; stream pool exhaustion; end-of-stream
// matches at flow end; UDP block scans; a rule change mid-flow.
#include "dataplane/stages/dpi_stage.h"

#include <gtest/gtest.h>

#include "rules/compile/yara_translate.h"

namespace dpu::dp {
namespace {

std::shared_ptr<const rules::CompiledDpi> compile(const std::string& text) {
  rules::DpiModel m;
  m.sources.push_back({"t", text});
  rules::ConfigErrorList errs;
  auto c = rules::compileDpi(m, errs);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : nullptr;
}

const char* kRules = R"(
rule split { strings: $a = "ATTACKSTRING" condition: $a }
rule word_end { strings: $a = "quit" fullword condition: $a }
rule two { strings: $a = "first" $b = "second" condition: $a and $b }
)";

struct Fixture : ::testing::Test {
  void SetUp() override {
    dpi = compile(kRules);
    DpiSettings s;
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
  std::shared_ptr<const rules::CompiledDpi> dpi;
  std::shared_ptr<DpiRuntime> rt;
};

using V = std::vector<std::string>;

TEST_F(Fixture, MatchSplitAcrossSegmentsFiresOnce) {
  DpiDir d;
  DpiOutcome syn;
  DpiInspector::tcp(*rt, 0, d, nullptr, 0, 999, 0x02, syn);
  EXPECT_EQ(feed(d, 1000, "xxATTA"), V{});
  EXPECT_EQ(feed(d, 1006, "CKSTR"), V{});
  EXPECT_EQ(feed(d, 1011, "INGyy"), V{"split"});
  EXPECT_EQ(feed(d, 1016, "ATTACKSTRING"), V{});  // already fired in this direction
}

TEST_F(Fixture, OutOfOrderIsReassembledAndRetransmitsNotRescanned) {
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

TEST_F(Fixture, RetransmissionWithOtherBytesKeepsTheFirstCopy) {
  DpiDir d;
  EXPECT_EQ(feed(d, 0, "ATTACKxxxxxx"), V{});
  EXPECT_EQ(feed(d, 0, "ATTACKSTRING"), V{});  // same range, other bytes: not scanned
}

TEST_F(Fixture, GapBeyondTheBufferStopsInspection) {
  DpiDir d;
  DpiOutcome o;
  EXPECT_EQ(feed(d, 0, "ATTA"), V{});
  feed(d, 500, "ATTACKSTRING", &o);
  EXPECT_TRUE(o.gap);
  EXPECT_TRUE(d.flags & DpiDir::kDone);
  EXPECT_EQ(feed(d, 4, "CKSTRING"), V{});
  EXPECT_EQ(rt->worker(0).free_streams.size(), 4u);  // stream returned to the pool
}

TEST_F(Fixture, DepthLimit) {
  DpiDir d;
  DpiOutcome o;
  feed(d, 0, std::string(995, '.'), &o);
  EXPECT_EQ(feed(d, 995, "ATTACKSTRING", &o), V{});  // bytes past 1000 are not inspected
  EXPECT_TRUE(o.depth_reached);
}

TEST_F(Fixture, StreamPoolExhaustion) {
  DpiDir d[5];
  DpiOutcome o;
  for (int i = 0; i < 4; ++i) feed(d[i], 0, "x");
  feed(d[4], 0, "x", &o);
  EXPECT_TRUE(o.no_stream);
  DpiOutcome end;
  DpiInspector::end(*rt, 0, d[0], end);
  EXPECT_EQ(rt->worker(0).free_streams.size(), 1u);
}

TEST_F(Fixture, EndOfStreamMatchesAtFlowEnd) {
  DpiDir d;
  EXPECT_EQ(feed(d, 0, "now quit"), V{});  // fullword at the very end: only known at the end
  DpiOutcome o;
  DpiInspector::end(*rt, 0, d, o);
  ASSERT_EQ(o.nfired, 1u);
  EXPECT_EQ(dpi->rules[o.fired[0]].name, "word_end");
  EXPECT_EQ(rt->worker(0).free_streams.size(), 4u);
}

TEST_F(Fixture, UdpBlockScanPerDatagram) {
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

TEST_F(Fixture, NewRulesMidFlowStartAFreshStream) {
  DpiDir d;
  feed(d, 0, "ATTACK");
  auto rt2 = DpiRuntime::create(compile(kRules), rt->settings(), 1);
  ASSERT_TRUE(rt2.ok());
  DpiOutcome o;
  const std::string p = "STRING ATTACKSTRING";
  DpiInspector::tcp(**rt2, 0, d, reinterpret_cast<const uint8_t*>(p.data()), uint32_t(p.size()), 6, 0x10, o);
  EXPECT_EQ(o.nfired, 1u);  // the match fully inside the new stream
  EXPECT_EQ(d.rt_id, (*rt2)->id());
}

}  // namespace
}  // namespace dpu::dp
namespace dpu::dp {
namespace {
TEST_F(Fixture, OutOfOrderAfterHandshake) {
  rules::DpiModel m;
  DpiDir d;
  DpiOutcome syn;
  DpiInspector::tcp(*rt, 0, d, nullptr, 0, 999, 0x02, syn);
  EXPECT_EQ(feed(d, 1000 + 6, "CKSTRING bye"), V{});
  EXPECT_EQ(feed(d, 1000, "xxATTA"), V{"split"});
}
}  // namespace
}  // namespace dpu::dp
