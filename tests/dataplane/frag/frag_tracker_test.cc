// Fragment tracker: verdict sharing, holding, overlap / duplicate / too-many detection,
// table limits, timeouts and completion.
#include "dataplane/frag/frag_tracker.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "dataplane/packet/packet_meta.h"

namespace dpu::dp {
namespace {

constexpr uint64_t kSec = 1000000000ull;

std::string uniqueName(const char* base) {
  static int n = 0;
  return std::string(base) + std::to_string(n++);
}

IpAddr v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  IpAddr ip{};
  ip.b[0] = a;
  ip.b[1] = b;
  ip.b[2] = c;
  ip.b[3] = d;
  return ip;
}

IpAddr v6(uint16_t first, uint16_t last) {
  IpAddr ip{};
  ip.b[0] = static_cast<uint8_t>(first >> 8);
  ip.b[1] = static_cast<uint8_t>(first);
  ip.b[14] = static_cast<uint8_t>(last >> 8);
  ip.b[15] = static_cast<uint8_t>(last);
  return ip;
}

// An IPv4 UDP fragment of datagram `id` from 10.0.0.1 to 10.0.0.2 carrying
// [offset, offset + len).
PacketMeta frag(uint32_t id, uint16_t offset, uint16_t len, bool mf, uint8_t proto = 17) {
  PacketMeta m;
  m.l3 = L3Type::kIpv4;
  m.ether_type = 0x0800;
  m.src = v4(10, 0, 0, 1);
  m.dst = v4(10, 0, 0, 2);
  m.l4_proto = proto;
  m.is_fragment = true;
  m.more_fragments = mf;
  m.frag_offset = offset;
  m.frag_payload_len = len;
  m.frag_id = id;
  m.has_l4 = offset == 0;
  if (offset == 0) {
    m.sport = 5000;
    m.dport = 53;
  }
  return m;
}

PacketMeta frag6(uint32_t id, uint16_t offset, uint16_t len, bool mf) {
  PacketMeta m = frag(id, offset, len, mf);
  m.l3 = L3Type::kIpv6;
  m.ether_type = 0x86dd;
  m.src = v6(0x2001, 1);
  m.dst = v6(0x2001, 2);
  return m;
}

std::unique_ptr<FragTracker> makeTracker(uint32_t max_datagrams = 64,
                                         uint16_t max_fragments = 64,
                                         uint64_t timeout_ns = 10 * kSec) {
  FragOptions o;
  o.name = uniqueName("fr");
  o.max_datagrams = max_datagrams;
  o.max_fragments = max_fragments;
  o.timeout_ns = timeout_ns;
  auto t = FragTracker::create(o);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

FragVerdict verdict(uint8_t v, uint16_t rule) {
  FragVerdict fv;
  fv.verdict = v;
  fv.stage = 1;
  fv.rule = rule;
  return fv;
}

// Runs only the completion part of age(): a zero budget examines no slot for timeouts.
void removeCompleted(FragTracker& t) {
  EXPECT_EQ(t.age(0, 0, [](void*) { ADD_FAILURE() << "nothing is held"; }), 0u);
}

// Opaque packet handles.
void* pkt(uintptr_t n) { return reinterpret_cast<void*>(0x1000 + n * 8); }

// ---------------------------------------------------------------------------- create

TEST(FragTrackerTest, CreateRejectsBadOptions) {
  FragOptions o;
  o.name = uniqueName("bad");
  o.max_datagrams = 0;
  EXPECT_EQ(FragTracker::create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.max_datagrams = 16;
  o.max_fragments = 0;
  EXPECT_EQ(FragTracker::create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.max_fragments = 64;
  o.timeout_ns = 0;
  EXPECT_EQ(FragTracker::create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.timeout_ns = kSec;
  o.name = std::string(40, 'y');
  EXPECT_EQ(FragTracker::create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.name = uniqueName("ok");
  auto a = FragTracker::create(o);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = FragTracker::create(o);  // rte_hash names are process-global
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << b.status();
}

TEST(FragTrackerTest, KeyFields) {
  PacketMeta m = frag(0xbeef, 0, 8, true, 6);
  m.vlan_outer = 42;
  m.vlan_inner = 7;
  m.pppoe_offset = 14;
  m.pppoe_session = 0x1234;
  m.tunnel_id = 0xabcdef;
  FragKey k = makeFragKey(m);
  EXPECT_TRUE(k.src == m.src);
  EXPECT_TRUE(k.dst == m.dst);
  EXPECT_EQ(k.id, 0xbeefu);
  EXPECT_EQ(k.vlan, 42);
  EXPECT_EQ(k.vlan_inner, 7);
  EXPECT_EQ(k.pppoe_session, 0x1234);
  EXPECT_EQ(k.tunnel_id, 0xabcdefu);
  EXPECT_EQ(k.proto, 6);
  EXPECT_EQ(k.ip_ver, 4);
  // Fragments of one datagram share the key whatever their offset / ports.
  PacketMeta later = frag(0xbeef, 1480, 8, false, 6);
  later.vlan_outer = 42;
  later.vlan_inner = 7;
  later.pppoe_offset = 14;
  later.pppoe_session = 0x1234;
  later.tunnel_id = 0xabcdef;
  FragKey k2 = makeFragKey(later);
  EXPECT_EQ(std::memcmp(&k, &k2, sizeof(k)), 0);
}

// ---------------------------------------------------------------------------- ordering

TEST(FragTrackerTest, InOrderDatagram) {
  auto t = makeTracker();
  ASSERT_NE(t, nullptr);
  int32_t slot = -1;
  ASSERT_EQ(t->observe(frag(1, 0, 1480, true), 1, &slot), FragAction::kJudge);
  ASSERT_GE(slot, 0);
  EXPECT_EQ(t->size(), 1u);
  t->setVerdict(slot, verdict(2, 17));
  void* out[kMaxHeldPerDatagram];
  EXPECT_EQ(t->releaseHeld(slot, out), 0u);

  int32_t s2 = -1;
  ASSERT_EQ(t->observe(frag(1, 1480, 1480, true), 2, &s2), FragAction::kApply);
  EXPECT_EQ(s2, slot);
  EXPECT_EQ(t->verdictOf(s2).verdict, 2);
  EXPECT_EQ(t->verdictOf(s2).rule, 17);
  EXPECT_EQ(t->size(), 1u);

  // The last fragment completes the datagram. It stays (with its verdict) until age().
  int32_t s3 = -1;
  ASSERT_EQ(t->observe(frag(1, 2960, 100, false), 3, &s3), FragAction::kApply);
  EXPECT_EQ(s3, slot);
  EXPECT_EQ(t->size(), 1u);
  EXPECT_EQ(t->verdictOf(s3).verdict, 2);
  EXPECT_EQ(t->verdictOf(s3).rule, 17);
  EXPECT_EQ(t->verdictOf(s3).stage, 1);
  // Until then, repeats are refused: every byte is covered.
  EXPECT_EQ(t->observe(frag(1, 1480, 1480, true), 4, &s3), FragAction::kOverlap);
  EXPECT_EQ(t->observe(frag(1, 0, 1480, true), 4, &s3), FragAction::kDuplicateFirst);
  EXPECT_EQ(t->verdictOf(slot).rule, 17);
  removeCompleted(*t);
  EXPECT_EQ(t->size(), 0u);
}

TEST(FragTrackerTest, OutOfOrderHoldsThenReleasesInArrivalOrder) {
  auto t = makeTracker();
  ASSERT_NE(t, nullptr);
  int32_t s = -1, slot = -1;
  // Last fragment first, then the middle one: both held.
  ASSERT_EQ(t->observe(frag(9, 2960, 100, false), 1, &slot), FragAction::kHold);
  ASSERT_TRUE(t->hold(slot, pkt(3)));
  ASSERT_EQ(t->observe(frag(9, 1480, 1480, true), 2, &s), FragAction::kHold);
  EXPECT_EQ(s, slot);
  ASSERT_TRUE(t->hold(slot, pkt(2)));

  ASSERT_EQ(t->observe(frag(9, 0, 1480, true), 3, &s), FragAction::kJudge);
  EXPECT_EQ(s, slot);
  t->setVerdict(slot, verdict(1, 4));
  // Every byte has been seen and the datagram is judged, but held packets keep it alive
  // until they are released.
  EXPECT_EQ(t->size(), 1u);
  void* out[kMaxHeldPerDatagram];
  ASSERT_EQ(t->releaseHeld(slot, out), 2u);
  EXPECT_EQ(out[0], pkt(3));
  EXPECT_EQ(out[1], pkt(2));
  EXPECT_EQ(t->verdictOf(slot).verdict, 1);
  EXPECT_EQ(t->verdictOf(slot).rule, 4);
  EXPECT_EQ(t->releaseHeld(slot, out), 0u);
  EXPECT_EQ(t->size(), 1u);
  removeCompleted(*t);  // complete: removed by the next age()
  EXPECT_EQ(t->size(), 0u);
}

TEST(FragTrackerTest, LaterFragmentsAfterJudgingAreApplied) {
  auto t = makeTracker();
  ASSERT_NE(t, nullptr);
  int32_t slot = -1, s = -1;
  ASSERT_EQ(t->observe(frag(5, 1480, 1480, true), 1, &slot), FragAction::kHold);
  ASSERT_TRUE(t->hold(slot, pkt(1)));
  ASSERT_EQ(t->observe(frag(5, 0, 1480, true), 2, &s), FragAction::kJudge);
  t->setVerdict(s, verdict(3, 0));
  void* out[kMaxHeldPerDatagram];
  ASSERT_EQ(t->releaseHeld(s, out), 1u);
  EXPECT_EQ(t->size(), 1u);  // last fragment not seen yet
  ASSERT_EQ(t->observe(frag(5, 2960, 8, false), 3, &s), FragAction::kApply);
  EXPECT_EQ(t->verdictOf(s).verdict, 3);
  removeCompleted(*t);
  EXPECT_EQ(t->size(), 0u);
}

TEST(FragTrackerTest, HoldIsBounded) {
  auto t = makeTracker();
  ASSERT_NE(t, nullptr);
  int32_t slot = -1;
  for (uint32_t i = 0; i < kMaxHeldPerDatagram; ++i) {
    ASSERT_EQ(t->observe(frag(3, static_cast<uint16_t>(8 + 8 * i), 8, true), i, &slot),
              FragAction::kHold);
    ASSERT_TRUE(t->hold(slot, pkt(i)));
  }
  ASSERT_EQ(t->observe(frag(3, 8 + 8 * kMaxHeldPerDatagram, 8, true), 99, &slot),
            FragAction::kHold);
  EXPECT_FALSE(t->hold(slot, pkt(99)));
  void* out[kMaxHeldPerDatagram];
  ASSERT_EQ(t->releaseHeld(slot, out), kMaxHeldPerDatagram);
  for (uint32_t i = 0; i < kMaxHeldPerDatagram; ++i) EXPECT_EQ(out[i], pkt(i));
}

// ---------------------------------------------------------------------------- attacks

TEST(FragTrackerTest, OverlapsAreDetected) {
  struct Case {
    const char* name;
    uint16_t offset, len;
    bool mf;
    FragAction want;
  };
  // Datagram so far: [0, 1480) first fragment and [2960, 4440) with MF.
  const Case cases[] = {
      {"tail of the first", 1472, 16, true, FragAction::kOverlap},
      {"inside the second", 3000, 8, true, FragAction::kOverlap},
      {"spans both", 1000, 3000, true, FragAction::kOverlap},
      {"exact duplicate of the second", 2960, 1480, true, FragAction::kOverlap},
      {"covers the second", 2952, 1496, true, FragAction::kOverlap},
      {"adjacent to both, fills the gap", 1480, 1480, true, FragAction::kApply},
      {"now a duplicate of the gap", 1480, 1480, true, FragAction::kOverlap},
  };
  auto t = makeTracker();
  ASSERT_NE(t, nullptr);
  int32_t slot = -1, s = -1;
  ASSERT_EQ(t->observe(frag(7, 0, 1480, true), 1, &slot), FragAction::kJudge);
  t->setVerdict(slot, verdict(1, 0));
  ASSERT_EQ(t->observe(frag(7, 2960, 1480, true), 2, &s), FragAction::kApply);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    s = -2;
    EXPECT_EQ(t->observe(frag(7, c.offset, c.len, c.mf), 3, &s), c.want);
    EXPECT_EQ(s, slot);  // the datagram is named even when the fragment is refused
  }
  EXPECT_EQ(t->size(), 1u);
}

TEST(FragTrackerTest, OverlapAmongHeldFragmentsBeforeTheFirst) {
  auto t = makeTracker();
  ASSERT_NE(t, nullptr);
  int32_t slot = -1, s = -1;
  ASSERT_EQ(t->observe(frag(8, 800, 800, true), 1, &slot), FragAction::kHold);
  ASSERT_EQ(t->observe(frag(8, 1200, 800, true), 2, &s), FragAction::kOverlap);
  // A first fragment reaching into held data is an overlap too (teardrop).
  EXPECT_EQ(t->observe(frag(8, 0, 808, true), 3, &s), FragAction::kOverlap);
  // The refused first fragment was not recorded: a proper one is judged.
  EXPECT_EQ(t->observe(frag(8, 0, 800, true), 4, &s), FragAction::kJudge);
}

TEST(FragTrackerTest, InconsistentLengthsAreOverlaps) {
  auto t = makeTracker();
  ASSERT_NE(t, nullptr);
  int32_t slot = -1, s = -1;
  ASSERT_EQ(t->observe(frag(11, 0, 800, true), 1, &slot), FragAction::kJudge);
  t->setVerdict(slot, verdict(1, 0));
  ASSERT_EQ(t->observe(frag(11, 1600, 800, true), 2, &s), FragAction::kApply);
  // A last fragment ending before data already seen.
  EXPECT_EQ(t->observe(frag(11, 800, 400, false), 3, &s), FragAction::kOverlap);
  ASSERT_EQ(t->observe(frag(11, 2400, 80, false), 4, &s), FragAction::kApply);
  // A second last fragment, and data past the end.
  EXPECT_EQ(t->observe(frag(11, 2480, 8, false), 5, &s), FragAction::kOverlap);
  EXPECT_EQ(t->observe(frag(11, 2480, 8, true), 6, &s), FragAction::kOverlap);
  // Malformed: zero length, or past 65535 (the parser refuses these first).
  EXPECT_EQ(t->observe(frag(11, 800, 0, true), 7, &s), FragAction::kOverlap);
  EXPECT_EQ(t->observe(frag(11, 65528, 16, false), 8, &s), FragAction::kOverlap);
  // The hole is still fillable and completes the datagram.
  ASSERT_EQ(t->observe(frag(11, 800, 800, true), 9, &s), FragAction::kApply);
  removeCompleted(*t);
  EXPECT_EQ(t->size(), 0u);
}

TEST(FragTrackerTest, DuplicateFirstFragment) {
  auto t = makeTracker();
  ASSERT_NE(t, nullptr);
  int32_t slot = -1, s = -1;
  ASSERT_EQ(t->observe(frag(2, 0, 1480, true), 1, &slot), FragAction::kJudge);
  // Before the verdict is set (same burst) ...
  EXPECT_EQ(t->observe(frag(2, 0, 1480, true), 2, &s), FragAction::kDuplicateFirst);
  EXPECT_EQ(s, slot);
  t->setVerdict(slot, verdict(1, 0));
  // ... and after; also with a different length, which does not overlap-test first.
  EXPECT_EQ(t->observe(frag(2, 0, 1480, true), 3, &s), FragAction::kDuplicateFirst);
  EXPECT_EQ(t->observe(frag(2, 0, 8, true), 4, &s), FragAction::kDuplicateFirst);
  EXPECT_EQ(t->observe(frag(2, 1480, 8, false), 5, &s), FragAction::kApply);
  removeCompleted(*t);
  EXPECT_EQ(t->size(), 0u);
}

TEST(FragTrackerTest, TooManyFragments) {
  auto t = makeTracker(64, 4);
  ASSERT_NE(t, nullptr);
  int32_t slot = -1, s = -1;
  ASSERT_EQ(t->observe(frag(4, 0, 8, true), 1, &slot), FragAction::kJudge);
  t->setVerdict(slot, verdict(1, 0));
  for (uint16_t i = 1; i < 4; ++i) {
    ASSERT_EQ(t->observe(frag(4, static_cast<uint16_t>(8 * i), 8, true), 1, &s),
              FragAction::kApply);
  }
  EXPECT_EQ(t->observe(frag(4, 32, 8, true), 2, &s), FragAction::kTooMany);
  EXPECT_EQ(s, slot);
  EXPECT_EQ(t->observe(frag(4, 40, 8, false), 3, &s), FragAction::kTooMany);
  // Overlap is still reported as such.
  EXPECT_EQ(t->observe(frag(4, 8, 8, true), 4, &s), FragAction::kOverlap);
  EXPECT_EQ(t->size(), 1u);
}

TEST(FragTrackerTest, PolicyVerdictOnAnUnjudgedDatagram) {
  auto t = makeTracker();
  ASSERT_NE(t, nullptr);
  int32_t slot = -1, s = -1;
  ASSERT_EQ(t->observe(frag(6, 800, 800, true), 1, &slot), FragAction::kHold);
  ASSERT_TRUE(t->hold(slot, pkt(1)));
  ASSERT_EQ(t->observe(frag(6, 1000, 8, true), 2, &s), FragAction::kOverlap);
  // The caller decides to drop the whole datagram.
  t->setVerdict(s, verdict(9, 0));
  void* out[kMaxHeldPerDatagram];
  EXPECT_EQ(t->releaseHeld(s, out), 1u);
  EXPECT_EQ(t->observe(frag(6, 0, 800, true), 3, &s), FragAction::kApply);
  EXPECT_EQ(t->verdictOf(s).verdict, 9);
}

// ---------------------------------------------------------------------------- limits

TEST(FragTrackerTest, TableFull) {
  auto t = makeTracker(8);
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->capacity(), 8u);
  int32_t s = -1;
  std::vector<int32_t> slots;
  for (uint32_t id = 0; id < 8; ++id) {
    ASSERT_EQ(t->observe(frag(id, 0, 800, true), 1, &s), FragAction::kJudge) << id;
    ASSERT_LT(static_cast<uint32_t>(s), t->capacity());
    t->setVerdict(s, verdict(1, static_cast<uint16_t>(id)));
    slots.push_back(s);
  }
  EXPECT_EQ(t->size(), 8u);
  EXPECT_EQ(t->observe(frag(100, 0, 800, true), 2, &s), FragAction::kTableFull);
  EXPECT_EQ(s, -1);
  EXPECT_EQ(t->observe(frag(101, 800, 800, false), 2, &s), FragAction::kTableFull);
  // Known datagrams still work.
  EXPECT_EQ(t->observe(frag(3, 800, 800, true), 3, &s), FragAction::kApply);
  EXPECT_EQ(t->verdictOf(s).rule, 3);
  // Completing one makes room for one new datagram.
  EXPECT_EQ(t->observe(frag(5, 800, 8, false), 4, &s), FragAction::kApply);
  EXPECT_EQ(t->observe(frag(100, 0, 800, true), 5, &s), FragAction::kTableFull);
  removeCompleted(*t);
  EXPECT_EQ(t->size(), 7u);
  EXPECT_EQ(t->observe(frag(100, 0, 800, true), 5, &s), FragAction::kJudge);
  EXPECT_EQ(t->observe(frag(101, 0, 800, true), 5, &s), FragAction::kTableFull);
}

TEST(FragTrackerTest, SmallMaxDatagramsIsRoundedUp) {
  auto t = makeTracker(2);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->capacity(), 8u);
}

// ---------------------------------------------------------------------------- timeouts

TEST(FragTrackerTest, TimeoutDropsHeldFragments) {
  const uint64_t timeout = 10 * kSec;
  auto t = makeTracker(64, 64, timeout);
  ASSERT_NE(t, nullptr);
  int32_t a = -1, b = -1, s = -1;
  // Datagram A: two held fragments, never gets its first fragment.
  ASSERT_EQ(t->observe(frag(20, 800, 800, true), 1 * kSec, &a), FragAction::kHold);
  ASSERT_TRUE(t->hold(a, pkt(1)));
  ASSERT_EQ(t->observe(frag(20, 1600, 800, false), 2 * kSec, &s), FragAction::kHold);
  ASSERT_TRUE(t->hold(a, pkt(2)));
  // Datagram B: judged, last fragment missing, refreshed later.
  ASSERT_EQ(t->observe(frag(21, 0, 800, true), 1 * kSec, &b), FragAction::kJudge);
  t->setVerdict(b, verdict(1, 0));
  ASSERT_EQ(t->observe(frag(21, 800, 800, true), 8 * kSec, &s), FragAction::kApply);
  // A rejected fragment does not refresh A.
  ASSERT_EQ(t->observe(frag(20, 800, 800, true), 11 * kSec, &s), FragAction::kOverlap);

  std::vector<void*> dropped;
  auto on_drop = [&](void* p) { dropped.push_back(p); };
  // A is idle for exactly the timeout at 12 s: kept.
  EXPECT_EQ(t->age(12 * kSec, t->capacity(), on_drop), 0u);
  EXPECT_TRUE(dropped.empty());
  EXPECT_EQ(t->age(12 * kSec + 1, t->capacity(), on_drop), 1u);
  ASSERT_EQ(dropped.size(), 2u);
  EXPECT_EQ(dropped[0], pkt(1));
  EXPECT_EQ(dropped[1], pkt(2));
  EXPECT_EQ(t->size(), 1u);
  // B goes at 18 s + 1 ns; nothing held.
  dropped.clear();
  EXPECT_EQ(t->age(18 * kSec + 1, t->capacity(), on_drop), 1u);
  EXPECT_TRUE(dropped.empty());
  EXPECT_EQ(t->size(), 0u);
  // A fragment of A now starts over.
  EXPECT_EQ(t->observe(frag(20, 800, 800, true), 20 * kSec, &s), FragAction::kHold);
}

TEST(FragTrackerTest, AgingIsBoundedPerCall) {
  auto t = makeTracker(64);
  ASSERT_NE(t, nullptr);
  int32_t s = -1;
  for (uint32_t id = 0; id < 64; ++id) {
    ASSERT_EQ(t->observe(frag(id, 8, 8, true), 0, &s), FragAction::kHold);
    ASSERT_TRUE(t->hold(s, pkt(id)));
  }
  uint32_t drops = 0;
  auto on_drop = [&](void*) { ++drops; };
  uint32_t calls = 0;
  while (t->size() > 0) {
    ASSERT_LT(calls, 4u);
    EXPECT_EQ(t->age(100 * kSec, 16, on_drop), 16u);
    ++calls;
  }
  EXPECT_EQ(calls, 4u);
  EXPECT_EQ(drops, 64u);
}

TEST(FragTrackerTest, DrainForgetsEverything) {
  auto t = makeTracker(32);
  ASSERT_NE(t, nullptr);
  int32_t s = -1;
  for (uint32_t id = 0; id < 20; ++id) {
    ASSERT_EQ(t->observe(frag(id, 8, 8, true), 5 * kSec, &s), FragAction::kHold);
    ASSERT_TRUE(t->hold(s, pkt(id)));
  }
  uint32_t drops = 0;
  EXPECT_EQ(t->age(UINT64_MAX, t->capacity(), [&](void*) { ++drops; }), 20u);
  EXPECT_EQ(drops, 20u);
  EXPECT_EQ(t->size(), 0u);
}

// ---------------------------------------------------------------------------- keys

TEST(FragTrackerTest, Ipv6UsesAll32IdBits) {
  auto t = makeTracker();
  ASSERT_NE(t, nullptr);
  int32_t a = -1, b = -1, c = -1;
  ASSERT_EQ(t->observe(frag6(0x00000001, 0, 1232, true), 1, &a), FragAction::kJudge);
  // Same low 16 bits, different high bits: another datagram.
  ASSERT_EQ(t->observe(frag6(0x80000001, 0, 1232, true), 1, &b), FragAction::kJudge);
  EXPECT_NE(a, b);
  // IPv4 with the same id and the same (mapped) bytes is another datagram too.
  PacketMeta m4 = frag6(0x00000001, 0, 1232, true);
  m4.l3 = L3Type::kIpv4;
  ASSERT_EQ(t->observe(m4, 1, &c), FragAction::kJudge);
  EXPECT_NE(c, a);
  EXPECT_EQ(t->size(), 3u);
  t->setVerdict(a, verdict(1, 10));
  t->setVerdict(b, verdict(2, 20));
  int32_t s = -1;
  ASSERT_EQ(t->observe(frag6(0x80000001, 1232, 1232, true), 2, &s), FragAction::kApply);
  EXPECT_EQ(s, b);
  EXPECT_EQ(t->verdictOf(s).rule, 20);
  ASSERT_EQ(t->observe(frag6(0x00000001, 1232, 100, false), 2, &s), FragAction::kApply);
  EXPECT_EQ(s, a);
  EXPECT_EQ(t->verdictOf(s).rule, 10);
  removeCompleted(*t);
  EXPECT_EQ(t->size(), 2u);  // a completed
}

TEST(FragTrackerTest, Ipv6KeyIgnoresTheTransport) {
  // The first IPv6 fragment reports its transport (UDP); a later one can only report the
  // fragment header's next header (here destination options). RFC 8200: same datagram.
  PacketMeta first = frag(0x12345678, 0, 64, true, 17);
  first.l3 = L3Type::kIpv6;
  PacketMeta later = frag(0x12345678, 64, 64, false, 60);
  later.l3 = L3Type::kIpv6;
  FragKey a = makeFragKey(first);
  FragKey b = makeFragKey(later);
  EXPECT_EQ(a.proto, 0);
  EXPECT_EQ(std::memcmp(&a, &b, sizeof(a)), 0);
}

TEST(FragTrackerTest, VlanAndProtocolSeparateDatagrams) {
  auto t = makeTracker();
  ASSERT_NE(t, nullptr);
  int32_t a = -1, b = -1, c = -1;
  PacketMeta m = frag(77, 0, 800, true);
  ASSERT_EQ(t->observe(m, 1, &a), FragAction::kJudge);
  m.vlan_outer = 100;
  ASSERT_EQ(t->observe(m, 1, &b), FragAction::kJudge);
  m.vlan_outer = 0;
  m.l4_proto = 6;
  ASSERT_EQ(t->observe(m, 1, &c), FragAction::kJudge);
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(b, c);
  EXPECT_EQ(t->size(), 3u);
}

// Equal addresses and IP id in different PPPoE sessions, tunnels (VNI / GRE key) or inner
// VLANs are different datagrams (as they are different flows, makeFlowKey): their fragments
// must never be reassembled together.
TEST(FragTrackerTest, PppoeSessionTunnelAndInnerVlanSeparateDatagrams) {
  auto t = makeTracker();
  ASSERT_NE(t, nullptr);
  PacketMeta base = frag(78, 0, 800, true);
  PacketMeta s1 = base, s2 = base, n1 = base, n2 = base, q1 = base;
  s1.pppoe_offset = s2.pppoe_offset = 14;
  s1.pppoe_session = 1;
  s2.pppoe_session = 2;
  n1.tunnel_id = 5000;
  n2.tunnel_id = 5001;
  q1.vlan_outer = 10;
  PacketMeta q2 = q1;
  q1.vlan_inner = 20;
  q2.vlan_inner = 21;
  const PacketMeta all[] = {base, s1, s2, n1, n2, q1, q2};
  int32_t slot[7];
  for (int i = 0; i < 7; ++i) {
    slot[i] = -1;
    ASSERT_EQ(t->observe(all[i], 1, &slot[i]), FragAction::kJudge) << i;
    for (int j = 0; j < i; ++j) EXPECT_NE(slot[i], slot[j]) << i << " " << j;
  }
  EXPECT_EQ(t->size(), 7u);
  // A session id without a PPPoE header (left over) is not part of the key.
  PacketMeta stale = base;
  stale.pppoe_session = 9;
  const FragKey ks = makeFragKey(stale), kb = makeFragKey(base);
  EXPECT_EQ(std::memcmp(&ks, &kb, sizeof(FragKey)), 0);
}

// ---------------------------------------------------------------------------- completion

TEST(FragTrackerTest, CompletionRemovesAndFreesTheSlot) {
  auto t = makeTracker(8);
  ASSERT_NE(t, nullptr);
  int32_t s = -1;
  // Single-fragment datagram (offset 0, MF=0): complete once judged.
  ASSERT_EQ(t->observe(frag(1, 0, 500, false), 1, &s), FragAction::kJudge);
  t->setVerdict(s, verdict(4, 44));
  EXPECT_EQ(t->size(), 1u);
  removeCompleted(*t);
  EXPECT_EQ(t->size(), 0u);

  // Many datagrams through a small table: completion keeps it from filling up.
  for (uint32_t id = 100; id < 1100; ++id) {
    int32_t s1 = -1, s2 = -1;
    ASSERT_EQ(t->observe(frag(id, 0, 1480, true), id, &s1), FragAction::kJudge) << id;
    t->setVerdict(s1, verdict(1, static_cast<uint16_t>(id)));
    ASSERT_EQ(t->observe(frag(id, 1480, 20, false), id, &s2), FragAction::kApply) << id;
    ASSERT_EQ(s2, s1);
    ASSERT_EQ(t->verdictOf(s2).rule, id);
    if (id % 4 == 3) {  // age() every few datagrams, like a worker between bursts
      removeCompleted(*t);
      ASSERT_EQ(t->size(), 0u);
    }
  }
  // A late duplicate after removal starts a new datagram.
  EXPECT_EQ(t->observe(frag(1099, 1480, 20, false), 2000, &s), FragAction::kHold);
  EXPECT_EQ(t->size(), 1u);
  EXPECT_EQ(t->verdictOf(s).verdict, 0);  // a new datagram starts with no verdict
}

// The worker observes a whole burst, then sets verdicts and releases held fragments, and
// ages between bursts: no slot may change hands before age().
TEST(FragTrackerTest, SlotsStayValidUntilAge) {
  auto t = makeTracker(8);
  ASSERT_NE(t, nullptr);
  int32_t a = -1, s = -1;
  ASSERT_EQ(t->observe(frag(1, 0, 500, false), 1, &a), FragAction::kJudge);
  t->setVerdict(a, verdict(7, 70));  // complete now
  std::vector<int32_t> others;
  for (uint32_t id = 2; id < 9; ++id) {
    ASSERT_EQ(t->observe(frag(id, 8, 8, true), 1, &s), FragAction::kHold);
    ASSERT_NE(s, a);
    ASSERT_TRUE(t->hold(s, pkt(id)));
    others.push_back(s);
  }
  // The completed datagram still owns its slot: no room for a ninth.
  EXPECT_EQ(t->observe(frag(50, 0, 8, true), 1, &s), FragAction::kTableFull);
  // Late calls for the completed datagram are harmless and keep its verdict.
  t->setVerdict(a, verdict(7, 71));
  void* out[kMaxHeldPerDatagram];
  EXPECT_EQ(t->releaseHeld(a, out), 0u);
  EXPECT_EQ(t->verdictOf(a).rule, 71);
  // The other datagrams' held packets are untouched.
  for (size_t i = 0; i < others.size(); ++i) {
    ASSERT_EQ(t->releaseHeld(others[i], out), 1u);
    EXPECT_EQ(out[0], pkt(i + 2));
  }
  EXPECT_EQ(t->age(2, 0, [](void*) {}), 0u);  // removes the completed one only
  EXPECT_EQ(t->size(), 7u);
  EXPECT_EQ(t->observe(frag(50, 0, 8, true), 3, &s), FragAction::kJudge);
}

TEST(FragTrackerTest, IncompleteWithoutLastFragmentStays) {
  auto t = makeTracker();
  ASSERT_NE(t, nullptr);
  int32_t s = -1;
  ASSERT_EQ(t->observe(frag(30, 0, 800, true), 1, &s), FragAction::kJudge);
  t->setVerdict(s, verdict(1, 0));
  ASSERT_EQ(t->observe(frag(30, 800, 800, true), 2, &s), FragAction::kApply);
  EXPECT_EQ(t->size(), 1u);
  // Last fragment present but a hole remains.
  ASSERT_EQ(t->observe(frag(30, 2400, 8, false), 3, &s), FragAction::kApply);
  EXPECT_EQ(t->size(), 1u);
  ASSERT_EQ(t->observe(frag(30, 1600, 800, true), 4, &s), FragAction::kApply);
  EXPECT_EQ(t->size(), 1u);
  removeCompleted(*t);
  EXPECT_EQ(t->size(), 0u);
}

// Reassembled datagrams (dataplane/normalize/datagram.h): observe() records nothing,
// record() keeps the covered ranges merged so overlaps count once, and the datagram is
// covered only when the gaps are filled.
TEST(FragTracker, ReassembledDatagramCountsOverlapsOnce) {
  auto t = makeTracker();
  int32_t s = -1;
  ASSERT_EQ(t->observe(frag(40, 16, 16, true), 1, &s, true), FragAction::kReassemble);
  EXPECT_TRUE(t->reassembling(s));
  EXPECT_EQ(t->progress(s).nfrags, 0u);  // nothing recorded by observe()
  EXPECT_FALSE(t->record(s, frag(40, 16, 16, true), 1));
  EXPECT_FALSE(t->record(s, frag(40, 24, 16, false), 2));  // overlaps 24..32
  FragProgress p = t->progress(s);
  EXPECT_EQ(p.bytes_seen, 24u);  // 16..40, the overlap once
  EXPECT_EQ(p.total_len, 40u);
  uint32_t n = 0, covered = 0;
  t->overlapping(s, 0, 20, [&](uint32_t lo, uint32_t hi) {
    ++n;
    covered += hi - lo;
  });
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(covered, 4u);  // 16..20
  ASSERT_EQ(t->observe(frag(40, 0, 16, true), 3, &s, true), FragAction::kReassemble);
  EXPECT_TRUE(t->record(s, frag(40, 0, 16, true), 3));  // 0..40 covered
  EXPECT_EQ(t->progress(s).bytes_seen, 40u);
}

// Held fragments come from one pool per tracker: a reassembled datagram may hold more than
// kMaxHeldPerDatagram, but never more than max_held in all.
TEST(FragTracker, HeldPoolIsSharedAndBounded) {
  FragOptions o;
  o.name = uniqueName("frh");
  o.max_held = 12;
  auto t = FragTracker::create(o);
  ASSERT_TRUE(t.ok()) << t.status();
  int32_t a = -1, b = -1;
  ASSERT_EQ((*t)->observe(frag(50, 8, 8, true), 1, &a, true), FragAction::kReassemble);
  for (uintptr_t i = 0; i < 10; ++i) EXPECT_TRUE((*t)->hold(a, pkt(i)));
  ASSERT_EQ((*t)->observe(frag(51, 8, 8, true), 1, &b), FragAction::kHold);
  EXPECT_TRUE((*t)->hold(b, pkt(20)));
  EXPECT_TRUE((*t)->hold(b, pkt(21)));
  EXPECT_EQ((*t)->heldFree(), 0u);
  EXPECT_FALSE((*t)->hold(b, pkt(22)));
  EXPECT_TRUE((*t)->unhold(a, pkt(3)));
  EXPECT_FALSE((*t)->unhold(a, pkt(3)));
  EXPECT_EQ((*t)->heldFree(), 1u);
  std::vector<void*> got;
  EXPECT_EQ((*t)->releaseHeldTo(a, [&](void* p) { got.push_back(p); }), 9u);
  ASSERT_EQ(got.size(), 9u);
  EXPECT_EQ(got[2], pkt(2));
  EXPECT_EQ(got[3], pkt(4));  // arrival order, pkt(3) taken out
  EXPECT_EQ((*t)->heldFree(), 10u);
  (*t)->age(UINT64_MAX, (*t)->capacity(), [](void*) {});
}

}  // namespace
}  // namespace dpu::dp
