// Flow key, flow table (rte_hash), TCP state tracking and timeouts.
#include "dataplane/flow/flow_table.h"

#include <gtest/gtest.h>
#include <rte_malloc.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "dataplane/flow/flow_key.h"
#include "dataplane/flow/tcp_state.h"
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

PacketMeta meta(const IpAddr& src, const IpAddr& dst, uint16_t sport, uint16_t dport,
                uint8_t proto, L3Type l3 = L3Type::kIpv4) {
  PacketMeta m;
  m.l3 = l3;
  m.src = src;
  m.dst = dst;
  m.sport = sport;
  m.dport = dport;
  m.l4_proto = proto;
  m.has_l4 = true;
  return m;
}

// Distinct UDP key number i.
FlowKey udpKey(uint32_t i) {
  PacketMeta m = meta(v4(10, static_cast<uint8_t>(i >> 16), static_cast<uint8_t>(i >> 8),
                         static_cast<uint8_t>(i)),
                      v4(192, 168, 0, 1), static_cast<uint16_t>(1024 + (i & 0x3fff)), 53, 17);
  FlowKey k;
  makeFlowKey(m, k);
  return k;
}

std::unique_ptr<FlowTable> makeTable(uint32_t capacity) {
  FlowTableOptions o;
  o.name = uniqueName("fl");
  o.capacity = capacity;
  auto t = FlowTable::create(o);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

bool sameKey(const FlowKey& a, const FlowKey& b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }

// ---------------------------------------------------------------------------- keys

TEST(FlowKeyTest, BothDirectionsShareOneKey) {
  struct Case {
    const char* name;
    PacketMeta fwd;
  };
  const Case cases[] = {
      {"v4 tcp", meta(v4(10, 0, 0, 1), v4(10, 0, 0, 2), 40000, 443, 6)},
      {"v4 tcp, src higher", meta(v4(10, 0, 0, 9), v4(10, 0, 0, 2), 40000, 443, 6)},
      {"v4 same addr, ports decide", meta(v4(127, 0, 0, 1), v4(127, 0, 0, 1), 5000, 80, 6)},
      {"v6 udp", meta(v6(0x2001, 1), v6(0x2001, 2), 5353, 5353, 17, L3Type::kIpv6)},
      {"v6 udp, src higher", meta(v6(0x2001, 7), v6(0x2001, 2), 1, 2, 17, L3Type::kIpv6)},
      {"icmp echo", meta(v4(1, 1, 1, 1), v4(8, 8, 8, 8), 77, 77, 1)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    PacketMeta rev = c.fwd;
    std::swap(rev.src, rev.dst);
    std::swap(rev.sport, rev.dport);
    FlowKey kf, kr;
    std::memset(static_cast<void*>(&kf), 0xab, sizeof(kf));  // garbage in: every byte must be written
    std::memset(static_cast<void*>(&kr), 0xcd, sizeof(kr));
    bool hi_f = makeFlowKey(c.fwd, kf);
    bool hi_r = makeFlowKey(rev, kr);
    EXPECT_TRUE(sameKey(kf, kr));
    bool identical_endpoints = c.fwd.src == c.fwd.dst && c.fwd.sport == c.fwd.dport;
    if (!identical_endpoints) {
      EXPECT_NE(hi_f, hi_r);
    }
    EXPECT_EQ(kf.tunnel_id, 0u);  // none of the cases is in a tunnel
    EXPECT_EQ(kf.pppoe_session, 0);  // none of the cases is inside PPPoE
    EXPECT_EQ(kf.proto, c.fwd.l4_proto);
    EXPECT_EQ(kf.ip_ver, static_cast<uint8_t>(c.fwd.l3));
    // lo endpoint is the smaller (address, port).
    int cmp = std::memcmp(kf.lo_addr.b, kf.hi_addr.b, 16);
    EXPECT_TRUE(cmp < 0 || (cmp == 0 && kf.lo_port <= kf.hi_port));
  }
}

TEST(FlowKeyTest, DirectionBitNamesTheSource) {
  PacketMeta m = meta(v4(10, 0, 0, 9), v4(10, 0, 0, 2), 1000, 2000, 17);
  FlowKey k;
  EXPECT_TRUE(makeFlowKey(m, k));  // source is the hi endpoint
  EXPECT_TRUE(k.hi_addr == m.src);
  EXPECT_EQ(k.hi_port, 1000);
  EXPECT_EQ(k.lo_port, 2000);
  std::swap(m.src, m.dst);
  std::swap(m.sport, m.dport);
  EXPECT_FALSE(makeFlowKey(m, k));
  EXPECT_TRUE(k.lo_addr == m.src);
}

TEST(FlowKeyTest, FieldsThatSeparateFlows) {
  PacketMeta base = meta(v4(10, 0, 0, 1), v4(10, 0, 0, 2), 1000, 2000, 6);
  FlowKey kb;
  makeFlowKey(base, kb);
  auto differs = [&](PacketMeta m) {
    FlowKey k;
    makeFlowKey(m, k);
    return !sameKey(k, kb);
  };
  PacketMeta m = base;
  m.vlan_outer = 10;
  EXPECT_TRUE(differs(m));
  m = base;
  m.vlan_inner = 20;
  EXPECT_TRUE(differs(m));
  // A PPPoE session id separates flows like a VLAN id; without a PPPoE header it is ignored.
  m = base;
  m.pppoe_offset = 14;
  m.pppoe_session = 0x11;
  EXPECT_TRUE(differs(m));
  PacketMeta other_session = m;
  other_session.pppoe_session = 0x22;
  FlowKey k1, k2;
  makeFlowKey(m, k1);
  makeFlowKey(other_session, k2);
  EXPECT_FALSE(sameKey(k1, k2));
  m = base;
  m.pppoe_session = 0x11;  // stale field, no PPPoE header
  EXPECT_FALSE(differs(m));
  m = base;
  m.l4_proto = 17;
  EXPECT_TRUE(differs(m));
  m = base;
  m.sport = 1001;
  EXPECT_TRUE(differs(m));
  m = base;
  m.l3 = L3Type::kIpv6;
  EXPECT_TRUE(differs(m));
}

// ---------------------------------------------------------------------------- create

TEST(FlowTableTest, CreateRejectsBadOptions) {
  FlowTableOptions o;
  o.name = uniqueName("bad");
  o.capacity = 0;
  auto t = FlowTable::create(o);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  o.capacity = (64u << 20) + 1;
  t = FlowTable::create(o);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  o.capacity = 1024;
  o.name = "";
  t = FlowTable::create(o);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  o.name = std::string(40, 'x');
  t = FlowTable::create(o);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FlowTableTest, DuplicateNameIsAnError) {
  FlowTableOptions o;
  o.name = uniqueName("dup");
  o.capacity = 64;
  auto a = FlowTable::create(o);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = FlowTable::create(o);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find(o.name), std::string::npos) << b.status();
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find("File exists"), std::string::npos) << b.status();
  a->reset();
  auto c = FlowTable::create(o);  // the name is free again after destruction
  EXPECT_TRUE(c.ok()) << c.status();
}

TEST(FlowTableTest, SmallCapacityIsRoundedUpToOneBucket) {
  auto t = makeTable(3);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->capacity(), 8u);
}

// ---------------------------------------------------------------------------- basic ops

TEST(FlowTableTest, InsertLookupRemove) {
  auto t = makeTable(1024);
  ASSERT_NE(t, nullptr);
  FlowKey k;
  makeFlowKey(meta(v4(10, 0, 0, 1), v4(10, 0, 0, 2), 40000, 443, 6), k);
  EXPECT_EQ(t->lookup(k), -1);
  EXPECT_EQ(t->keyAt(0), nullptr);

  int32_t pos = t->insert(k, 5 * kSec);
  ASSERT_GE(pos, 0);
  ASSERT_LT(static_cast<uint32_t>(pos), t->capacity());
  EXPECT_EQ(t->size(), 1u);
  EXPECT_EQ(t->lookup(k), pos);
  const FlowEntry& e = t->entry(pos);
  EXPECT_EQ(t->cold(pos).first_seen_ns, 5 * kSec);
  EXPECT_EQ(e.last_seen_ns, 5 * kSec);
  EXPECT_EQ(e.proto, 6);
  EXPECT_EQ(e.flags, kFlowInUse);
  EXPECT_EQ(e.tcp_state, TcpState::kNone);
  EXPECT_EQ(e.verdict, 0);
  EXPECT_EQ(e.rule, ~0u);
  EXPECT_EQ(e.backend, 0xffff);
  EXPECT_EQ(e.packets[0] + e.packets[1] + e.bytes[0] + e.bytes[1], 0u);
  ASSERT_NE(t->keyAt(pos), nullptr);
  EXPECT_TRUE(sameKey(*t->keyAt(pos), k));

  // Inserting the same key again returns the same flow untouched.
  t->entry(pos).packets[0] = 7;
  EXPECT_EQ(t->insert(k, 9 * kSec), pos);
  EXPECT_EQ(t->entry(pos).packets[0], 7u);
  EXPECT_EQ(t->cold(pos).first_seen_ns, 5 * kSec);
  EXPECT_EQ(t->size(), 1u);

  t->remove(pos);
  EXPECT_EQ(t->size(), 0u);
  EXPECT_EQ(t->lookup(k), -1);
  EXPECT_EQ(t->keyAt(pos), nullptr);
  EXPECT_EQ(t->entry(pos).flags, 0);
  t->remove(pos);  // removing a free position is a no-op
  EXPECT_EQ(t->size(), 0u);

  int32_t again = t->insert(k, 10 * kSec);
  ASSERT_GE(again, 0);
  EXPECT_EQ(t->cold(again).first_seen_ns, 10 * kSec);
  EXPECT_EQ(t->entry(again).packets[0], 0u);
  EXPECT_EQ(t->size(), 1u);
}

TEST(FlowTableTest, LookupBurst) {
  auto t = makeTable(4096);
  ASSERT_NE(t, nullptr);
  std::vector<FlowKey> keys;
  for (uint32_t i = 0; i < 64; ++i) keys.push_back(udpKey(i));
  std::vector<int32_t> inserted(64, -1);
  for (uint32_t i = 0; i < 64; i += 2) inserted[i] = t->insert(keys[i], 0);  // even ones only

  const FlowKey* ptrs[64];
  for (uint32_t i = 0; i < 64; ++i) ptrs[i] = &keys[i];
  int32_t pos[64];
  t->lookupBurst(ptrs, 64, pos);
  for (uint32_t i = 0; i < 64; ++i) {
    SCOPED_TRACE(i);
    if (i % 2 == 0) {
      EXPECT_GE(pos[i], 0);
      EXPECT_EQ(pos[i], inserted[i]);
    } else {
      EXPECT_EQ(pos[i], -1);
    }
  }
  // A short burst and an empty one.
  t->lookupBurst(ptrs + 1, 3, pos);
  EXPECT_EQ(pos[0], -1);
  EXPECT_EQ(pos[1], inserted[2]);
  EXPECT_EQ(pos[2], -1);
  t->lookupBurst(ptrs, 0, pos);
}

// The pipeline hashes each key once (FlowTable::hashOf) and hands the hash to the lookups
// and the insert: that hash must be the one rte_hash computes itself, or a flow inserted
// through one path would not be found through the other.
TEST(FlowTableTest, PrecomputedHashPathsAgreeWithPlainOnes) {
  auto t = makeTable(4096);
  ASSERT_NE(t, nullptr);
  std::vector<FlowKey> keys;
  for (uint32_t i = 0; i < 64; ++i) keys.push_back(udpKey(i));
  std::vector<int32_t> inserted(64, -1);
  for (uint32_t i = 0; i < 64; i += 2) {
    // Half through the plain insert (rte_hash hashes), half with the precomputed hash.
    inserted[i] = i % 4 == 0 ? t->insert(keys[i], 0)
                             : t->insertWithHash(keys[i], FlowTable::hashOf(keys[i]), 0);
    ASSERT_GE(inserted[i], 0);
  }
  const FlowKey* ptrs[64];
  uint32_t sigs[64];
  for (uint32_t i = 0; i < 64; ++i) {
    ptrs[i] = &keys[i];
    sigs[i] = FlowTable::hashOf(keys[i]);
  }
  int32_t pos[64];
  t->lookupBurstWithHash(ptrs, sigs, 64, pos);
  for (uint32_t i = 0; i < 64; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(pos[i], i % 2 == 0 ? inserted[i] : -1);
    EXPECT_EQ(t->lookup(keys[i]), i % 2 == 0 ? inserted[i] : -1);  // rte_hash's own hash
    EXPECT_EQ(t->lookupWithHash(keys[i], sigs[i]), i % 2 == 0 ? inserted[i] : -1);
  }
  // Inserting a present key with its hash returns its position and adds nothing.
  EXPECT_EQ(t->insertWithHash(keys[2], sigs[2], 5), inserted[2]);
  EXPECT_EQ(t->size(), 32u);
  t->lookupBurstWithHash(ptrs, sigs, 0, pos);
}

// The canonical key written field by field, as the struct declares it: the reference for the
// register-built words (flowKeyWords) that makeFlowKey and keyAndHash store.
bool referenceKey(const PacketMeta& m, FlowKey& k) {
  const int c = std::memcmp(m.src.b, m.dst.b, 16);
  const bool src_is_hi = c > 0 || (c == 0 && m.sport > m.dport);
  std::memset(&k, 0, sizeof k);
  k.lo_addr = src_is_hi ? m.dst : m.src;
  k.hi_addr = src_is_hi ? m.src : m.dst;
  k.lo_port = src_is_hi ? m.dport : m.sport;
  k.hi_port = src_is_hi ? m.sport : m.dport;
  k.vlan = m.vlan_outer;
  k.vlan_inner = m.vlan_inner;
  k.pppoe_session = m.pppoe_offset != 0 ? m.pppoe_session : 0;
  k.proto = m.l4_proto;
  k.ip_ver = static_cast<uint8_t>(m.l3);
  k.tunnel_id = m.tunnel_id;
  return src_is_hi;
}

// The per-packet path builds the key and its hash in one go (keyAndHash, from registers):
// the same key bytes and direction as the field-by-field reference (and makeFlowKey), the
// same hash as hashOf, for IPv4 and IPv6, equal addresses (ports decide), every field of the
// key's tail set, and PPPoE offsets without a session. A wrong field order or byte in the
// register form fails here.
TEST(FlowTableTest, KeyAndHashEqualsTheTwoStepForm) {
  uint64_t x = 0x243f6a8885a308d3ull;
  auto rnd = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  int hi = 0, lo = 0;
  for (int i = 0; i < 20000; ++i) {
    SCOPED_TRACE(i);
    PacketMeta m;
    const bool six = i % 2 == 1;
    m.l3 = six ? L3Type::kIpv6 : L3Type::kIpv4;
    for (IpAddr* a : {&m.src, &m.dst}) {
      for (int j = 0; j < (six ? 16 : 4); ++j) a->b[j] = uint8_t(rnd() % 4);  // many ties
    }
    if (i % 7 == 0) m.dst = m.src;
    if (i % 11 == 0 && six) std::memcpy(m.dst.b, m.src.b, 8);  // equal first halves
    m.sport = uint16_t(rnd() % 3);
    m.dport = uint16_t(rnd() % 3);
    m.l4_proto = uint8_t(rnd());
    m.vlan_outer = uint16_t(rnd());
    m.vlan_inner = uint16_t(rnd());
    m.pppoe_offset = uint16_t(rnd() % 2 ? 14 : 0);
    m.pppoe_session = uint16_t(rnd());
    m.tunnel_id = uint32_t(rnd());
    FlowKey a, b, r;
    std::memset(&a, 0xa5, sizeof a);
    std::memset(&b, 0x5a, sizeof b);
    const bool dr = referenceKey(m, r);
    const bool da = makeFlowKey(m, a);
    uint32_t sig = 0;
    const bool db = FlowTable::keyAndHash(m, b, &sig);
    ASSERT_EQ(da, dr);
    ASSERT_EQ(da, db);
    ASSERT_EQ(std::memcmp(&a, &r, sizeof a), 0);
    ASSERT_EQ(std::memcmp(&a, &b, sizeof a), 0);
    ASSERT_EQ(sig, FlowTable::hashOf(a));
    (da ? hi : lo)++;
  }
  EXPECT_GT(hi, 1000);
  EXPECT_GT(lo, 1000);
}

TEST(FlowTableTest, FillsToExactlyCapacity) {
  for (uint32_t cap : {8u, 1000u, 4096u, 65536u}) {
    SCOPED_TRACE(cap);
    auto t = makeTable(cap);
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->capacity(), cap);
    std::set<int32_t> positions;
    for (uint32_t i = 0; i < cap; ++i) {
      int32_t p = t->insert(udpKey(i), i);
      ASSERT_GE(p, 0) << "insert " << i << " failed below capacity";
      ASSERT_LT(static_cast<uint32_t>(p), cap);
      positions.insert(p);
    }
    EXPECT_EQ(positions.size(), cap);
    EXPECT_EQ(t->size(), cap);
    EXPECT_EQ(t->insert(udpKey(cap), 0), -1);
    EXPECT_EQ(t->insert(udpKey(cap + 1), 0), -1);
    EXPECT_EQ(t->size(), cap);
    // Every key is still found where it was put.
    for (uint32_t i = 0; i < cap; i += 97) EXPECT_GE(t->lookup(udpKey(i)), 0);
    // Freeing one flow makes room for exactly one more.
    int32_t victim = t->lookup(udpKey(cap / 2));
    ASSERT_GE(victim, 0);
    t->remove(victim);
    int32_t p = t->insert(udpKey(cap), 0);
    EXPECT_GE(p, 0);
    EXPECT_EQ(t->insert(udpKey(cap + 1), 0), -1);
    EXPECT_EQ(t->lookup(udpKey(cap / 2)), -1);
  }
}

TEST(FlowTableTest, ChurnKeepsSizeAndPositionsConsistent) {
  auto t = makeTable(512);
  ASSERT_NE(t, nullptr);
  std::vector<int32_t> pos_of(4096, -1);
  uint32_t live = 0;
  // Insert and remove in a rotating window so key slots are recycled many times.
  for (uint32_t i = 0; i < 4096; ++i) {
    pos_of[i] = t->insert(udpKey(i), i);
    ASSERT_GE(pos_of[i], 0);
    ++live;
    if (i >= 400) {
      t->remove(pos_of[i - 400]);
      --live;
    }
    ASSERT_EQ(t->size(), live);
  }
  for (uint32_t i = 4096 - 400; i < 4096; ++i) {
    ASSERT_EQ(t->lookup(udpKey(i)), pos_of[i]);
    ASSERT_TRUE(sameKey(*t->keyAt(pos_of[i]), udpKey(i)));
  }
  EXPECT_EQ(t->lookup(udpKey(0)), -1);
}

// ---------------------------------------------------------------------------- aging

// --- flows view --- visit(): a walk in slices of `budget` slots, cut short by the callback
// (as a flow dump that copies a bounded number of flows per worker loop), sees every flow
// exactly once and nothing else.
TEST(FlowTableTest, VisitInSlicesSeesEveryFlowOnce) {
  auto t = makeTable(1000);
  ASSERT_NE(t, nullptr);
  std::vector<int> held(t->capacity(), 0);
  for (uint32_t i = 0; i < 700; ++i) {
    FlowKey k;
    makeFlowKey(meta(v4(10, 1, uint8_t(i >> 8), uint8_t(i)), v4(10, 0, 0, 2), 1000, 53, 17), k);
    int32_t p = t->insert(k, kSec);
    ASSERT_GE(p, 0);
    held[p] = 1;
  }
  for (uint32_t i = 0; i < 700; i += 3) {  // holes
    FlowKey k;
    makeFlowKey(meta(v4(10, 1, uint8_t(i >> 8), uint8_t(i)), v4(10, 0, 0, 2), 1000, 53, 17), k);
    int32_t p = t->lookup(k);
    ASSERT_GE(p, 0);
    t->remove(p);
    held[p] = 0;
  }
  for (uint32_t budget : {1u, 63u, 64u, 100u, 5000u}) {
    for (uint32_t per_call : {1u, 7u, 1000u}) {
      std::vector<int> seen(t->capacity(), 0);
      uint32_t cursor = 0, calls = 0;
      while (cursor < t->capacity()) {
        uint32_t n = 0;
        const uint32_t next = t->visit(cursor, budget, [&](int32_t p) {
          ++seen[p];
          return ++n < per_call;
        });
        ASSERT_GT(next, cursor);
        ASSERT_LE(n, per_call);
        cursor = next;
        ASSERT_LT(++calls, 100000u);
      }
      EXPECT_EQ(seen, held) << "budget " << budget << " per call " << per_call;
    }
  }
}

TEST(FlowTableTest, AgingIsBoundedAndExpiresOnlyIdleFlows) {
  constexpr uint32_t kCap = 1024;
  constexpr uint32_t kBudget = 64;
  auto t = makeTable(kCap);
  ASSERT_NE(t, nullptr);
  FlowTimeouts to;  // UDP: 120 s
  std::vector<FlowKey> key_at(kCap);
  for (uint32_t i = 0; i < kCap; ++i) {
    int32_t p = t->insert(udpKey(i), 0);
    ASSERT_GE(p, 0);
    key_at[p] = udpKey(i);
    if (p % 2 == 1) t->entry(p).last_seen_ns = 100 * kSec;  // odd positions stay active
  }
  const uint64_t now = 121 * kSec;  // even positions idle 121 s > 120 s; odd ones 21 s
  std::set<int32_t> expired;
  uint32_t calls = 0;
  while (t->size() > kCap / 2) {
    ASSERT_LT(calls, kCap / kBudget) << "a full sweep took more than capacity/budget calls";
    uint32_t removed = t->age(now, kBudget, to, [&](int32_t pos, const FlowEntry& e,
                                                    const FlowKey& k) {
      EXPECT_EQ(pos % 2, 0);
      EXPECT_EQ(e.last_seen_ns, 0u);
      EXPECT_TRUE(e.flags & kFlowInUse);
      EXPECT_TRUE(sameKey(k, key_at[pos])) << "on_expire got the wrong key for " << pos;
      EXPECT_TRUE(expired.insert(pos).second);
    });
    // Each call examines exactly `budget` consecutive slots, half of them idle.
    EXPECT_EQ(removed, kBudget / 2);
    ++calls;
  }
  EXPECT_EQ(calls, kCap / kBudget);
  EXPECT_EQ(expired.size(), kCap / 2);
  EXPECT_EQ(t->size(), kCap / 2);
  // Another full sweep removes nothing at the same time.
  for (uint32_t i = 0; i < kCap / kBudget; ++i) {
    EXPECT_EQ(t->age(now, kBudget, to, [](int32_t, const FlowEntry&, const FlowKey&) {
      ADD_FAILURE() << "active flow expired";
    }), 0u);
  }
  // The survivors are exactly the odd positions, each still under its own key.
  for (uint32_t p = 1; p < kCap; p += 2) {
    ASSERT_EQ(t->lookup(key_at[p]), static_cast<int32_t>(p));
  }
  for (uint32_t p = 0; p < kCap; p += 2) ASSERT_EQ(t->lookup(key_at[p]), -1);
}

// Aging walks an occupancy bitmap a word at a time: budgets that are not multiples of 64,
// a capacity that is not either, sparse tables and the cursor's wrap must still examine
// every slot exactly once per sweep.
TEST(FlowTableTest, AgingSweepCoversEverySlotWithUnalignedBudgets) {
  constexpr uint32_t kCap = 5000;  // rounded up by rte_hash to a multiple of 8, not of 64
  auto t = makeTable(kCap);
  ASSERT_NE(t, nullptr);
  const uint32_t cap = t->capacity();
  FlowTimeouts to;
  std::set<int32_t> idle;
  for (uint32_t i = 0; i < kCap; i += 7) {  // sparse: one flow in 7 keys
    int32_t p = t->insert(udpKey(i), 0);
    ASSERT_GE(p, 0);
    if (i % 3 == 0) {
      idle.insert(p);
    } else {
      t->entry(p).last_seen_ns = 100 * kSec;
    }
  }
  const uint32_t held = t->size();
  for (uint32_t budget : {1u, 37u, 63u, 64u, 65u, 1000u}) {
    auto t2 = makeTable(kCap);
    ASSERT_NE(t2, nullptr);
    std::set<int32_t> idle2;
    for (uint32_t i = 0; i < kCap; i += 7) {
      int32_t p = t2->insert(udpKey(i), 0);
      if (i % 3 == 0) {
        idle2.insert(p);
      } else {
        t2->entry(p).last_seen_ns = 100 * kSec;
      }
    }
    // Start the sweep mid-table so it wraps: examine cap/2 + 13 slots first.
    t2->age(0, cap / 2 + 13, to, [](int32_t, const FlowEntry&, const FlowKey&) {
      ADD_FAILURE() << "nothing is idle at time 0";
    });
    std::set<int32_t> seen;
    uint64_t examined = 0;
    while (examined < cap) {
      uint32_t b = static_cast<uint32_t>(std::min<uint64_t>(budget, cap - examined));
      t2->age(121 * kSec, b, to, [&](int32_t pos, const FlowEntry&, const FlowKey&) {
        EXPECT_TRUE(seen.insert(pos).second) << "slot " << pos << " examined twice";
      });
      examined += b;
    }
    EXPECT_EQ(seen, idle2) << "budget " << budget;
    EXPECT_EQ(t2->size(), held - idle2.size()) << "budget " << budget;
  }
  EXPECT_EQ(t->size(), held);
}

TEST(FlowTableTest, AgingUsesPerStateTimeouts) {
  FlowTimeouts to;
  struct Flow {
    const char* name;
    uint8_t proto;
    TcpState state;
    uint64_t timeout;
  };
  const Flow flows[] = {
      {"tcp syn", 6, TcpState::kSynSent, to.tcp_syn_ns},
      {"tcp established", 6, TcpState::kEstablished, to.tcp_established_ns},
      {"tcp closing", 6, TcpState::kClosing, to.tcp_closing_ns},
      {"tcp closed", 6, TcpState::kClosed, to.tcp_closed_ns},
      {"udp", 17, TcpState::kNone, to.udp_ns},
      {"icmp", 1, TcpState::kNone, to.icmp_ns},
      {"icmpv6", 58, TcpState::kNone, to.icmp_ns},
      {"gre", 47, TcpState::kNone, to.other_ns},
  };
  auto t = makeTable(64);
  ASSERT_NE(t, nullptr);
  const uint64_t t0 = 1000 * kSec;
  for (const Flow& f : flows) {
    SCOPED_TRACE(f.name);
    FlowKey k;
    makeFlowKey(meta(v4(10, 0, 1, 1), v4(10, 0, 2, 1), 1000, 80, f.proto), k);
    int32_t p = t->insert(k, t0);
    ASSERT_GE(p, 0);
    t->entry(p).tcp_state = f.state;
    auto never = [](int32_t, const FlowEntry&, const FlowKey&) { ADD_FAILURE(); };
    // Idle for exactly the timeout: alive. One nanosecond more: expired.
    EXPECT_EQ(t->age(t0 + f.timeout, t->capacity(), to, never), 0u);
    EXPECT_EQ(t->size(), 1u);
    int32_t seen = -1;
    EXPECT_EQ(t->age(t0 + f.timeout + 1, t->capacity(), to,
                     [&](int32_t pos, const FlowEntry& e, const FlowKey& key) {
                       seen = pos;
                       EXPECT_EQ(e.tcp_state, f.state);
                       EXPECT_TRUE(sameKey(key, k));
                     }),
              1u);
    EXPECT_EQ(seen, p);
    EXPECT_EQ(t->size(), 0u);
    EXPECT_EQ(t->lookup(k), -1);
  }
}

TEST(FlowTableTest, AgingDoesNotExpireFlowsSeenInTheFuture) {
  auto t = makeTable(16);
  ASSERT_NE(t, nullptr);
  int32_t p = t->insert(udpKey(1), 500 * kSec);
  ASSERT_GE(p, 0);
  FlowTimeouts to;
  EXPECT_EQ(t->age(10 * kSec, 16, to, [](int32_t, const FlowEntry&, const FlowKey&) {}), 0u);
  EXPECT_EQ(t->size(), 1u);
}

// ---------------------------------------------------------------------------- TCP

struct Step {
  uint8_t flags;
  int dir;
  TcpState expect;
};

struct TcpCase {
  const char* name;
  TcpState start;
  uint8_t start_flags;
  std::vector<Step> steps;
  uint8_t expect_fin_flags;
};

constexpr uint8_t S = kTcpSyn, A = kTcpAck, F = kTcpFin, R = kTcpRst, P = kTcpPsh;

TEST(TcpStateTest, Transitions) {
  const TcpCase cases[] = {
      {"handshake, data, orderly close",
       TcpState::kNone, 0,
       {{S, 0, TcpState::kSynSent},
        {S | A, 1, TcpState::kSynReceived},
        {A, 0, TcpState::kEstablished},
        {P | A, 0, TcpState::kEstablished},
        {A, 1, TcpState::kEstablished},
        {P | A, 1, TcpState::kEstablished},
        {F | A, 0, TcpState::kFinWait},
        {A, 1, TcpState::kFinWait},
        {P | A, 1, TcpState::kFinWait},
        {F | A, 1, TcpState::kClosing},
        {A, 0, TcpState::kClosed}},
       kFlowFinOrig | kFlowFinReply},
      {"responder closes first",
       TcpState::kEstablished, 0,
       {{F | A, 1, TcpState::kFinWait}, {F | A, 0, TcpState::kClosing}, {A, 1, TcpState::kClosed}},
       kFlowFinOrig | kFlowFinReply},
      {"retransmitted FIN in closing stays closing",
       TcpState::kEstablished, 0,
       {{F | A, 0, TcpState::kFinWait},
        {F | A, 1, TcpState::kClosing},
        {F | A, 1, TcpState::kClosing},
        {A, 0, TcpState::kClosed}},
       kFlowFinOrig | kFlowFinReply},
      {"FIN retransmitted by the same side stays fin_wait",
       TcpState::kEstablished, 0,
       {{F | A, 0, TcpState::kFinWait}, {F | A, 0, TcpState::kFinWait}},
       kFlowFinOrig},
      {"SYN retransmit", TcpState::kNone, 0,
       {{S, 0, TcpState::kSynSent}, {S, 0, TcpState::kSynSent}, {S | A, 1, TcpState::kSynReceived},
        {S | A, 1, TcpState::kSynReceived}, {A, 0, TcpState::kEstablished}},
       0},
      {"SYN from the responder does not open", TcpState::kNone, 0,
       {{S, 1, TcpState::kNone}},
       0},
      {"SYN+ACK from the initiator is ignored", TcpState::kNone, 0,
       {{S, 0, TcpState::kSynSent}, {S | A, 0, TcpState::kSynSent}},
       0},
      {"ACK from the responder does not establish", TcpState::kNone, 0,
       {{S, 0, TcpState::kSynSent}, {S | A, 1, TcpState::kSynReceived},
        {A, 1, TcpState::kSynReceived}},
       0},
      {"RST during handshake", TcpState::kNone, 0,
       {{S, 0, TcpState::kSynSent}, {R | A, 1, TcpState::kClosed}},
       0},
      {"RST in established from either side", TcpState::kEstablished, 0,
       {{P | A, 0, TcpState::kEstablished}, {R, 0, TcpState::kClosed}, {A, 1, TcpState::kClosed}},
       0},
      {"RST while closing", TcpState::kEstablished, 0,
       {{F | A, 0, TcpState::kFinWait}, {R, 1, TcpState::kClosed}},
       kFlowFinOrig},
      {"midstream pickup closes normally", TcpState::kEstablished, kFlowMidstream,
       {{A, 1, TcpState::kEstablished}, {F | A, 1, TcpState::kFinWait},
        {F | A, 0, TcpState::kClosing}, {A, 1, TcpState::kClosed}},
       kFlowFinOrig | kFlowFinReply},
      {"closed stays closed on data and FIN", TcpState::kClosed, 0,
       {{A, 0, TcpState::kClosed}, {F | A, 1, TcpState::kClosed}},
       0},
      {"new SYN after close reopens (port reuse)", TcpState::kEstablished, 0,
       {{F | A, 0, TcpState::kFinWait}, {F | A, 1, TcpState::kClosing}, {A, 0, TcpState::kClosed},
        {S, 0, TcpState::kSynSent}, {S | A, 1, TcpState::kSynReceived},
        {A, 0, TcpState::kEstablished}},
       0},
      {"SYN+FIN during handshake counts the FIN", TcpState::kNone, 0,
       {{S, 0, TcpState::kSynSent}, {F, 0, TcpState::kFinWait}},
       kFlowFinOrig},
      {"not TCP-tracked flows ignore FIN", TcpState::kNone, 0,
       {{F | A, 0, TcpState::kNone}},
       0},
  };
  for (const TcpCase& c : cases) {
    SCOPED_TRACE(c.name);
    FlowEntry e{};
    e.proto = 6;
    e.flags = static_cast<uint8_t>(kFlowInUse | c.start_flags);
    e.tcp_state = c.start;
    for (size_t i = 0; i < c.steps.size(); ++i) {
      const Step& s = c.steps[i];
      tcpAdvance(e, s.flags, s.dir);
      EXPECT_EQ(e.tcp_state, s.expect)
          << "step " << i << ": got " << tcpStateName(e.tcp_state) << ", want "
          << tcpStateName(s.expect);
    }
    EXPECT_EQ(e.flags & (kFlowFinOrig | kFlowFinReply), c.expect_fin_flags);
    EXPECT_TRUE(e.flags & kFlowInUse);
    EXPECT_EQ(e.flags & kFlowMidstream, c.start_flags & kFlowMidstream);
  }
}

TEST(TcpStateTest, Names) {
  EXPECT_STREQ(tcpStateName(TcpState::kNone), "none");
  EXPECT_STREQ(tcpStateName(TcpState::kSynSent), "syn_sent");
  EXPECT_STREQ(tcpStateName(TcpState::kSynReceived), "syn_received");
  EXPECT_STREQ(tcpStateName(TcpState::kEstablished), "established");
  EXPECT_STREQ(tcpStateName(TcpState::kFinWait), "fin_wait");
  EXPECT_STREQ(tcpStateName(TcpState::kClosing), "closing");
  EXPECT_STREQ(tcpStateName(TcpState::kClosed), "closed");
  EXPECT_STREQ(tcpStateName(TcpState::kCount), "unknown");
}

TEST(TcpStateTest, TimeoutPerProtocolAndState) {
  FlowTimeouts t;
  t.tcp_syn_ns = 1;
  t.tcp_established_ns = 2;
  t.tcp_closing_ns = 3;
  t.tcp_closed_ns = 4;
  t.udp_ns = 5;
  t.icmp_ns = 6;
  t.other_ns = 7;
  struct Case {
    uint8_t proto;
    TcpState state;
    uint64_t want;
  };
  const Case cases[] = {
      {6, TcpState::kNone, 1},        {6, TcpState::kSynSent, 1},
      {6, TcpState::kSynReceived, 1}, {6, TcpState::kEstablished, 2},
      {6, TcpState::kFinWait, 3},     {6, TcpState::kClosing, 3},
      {6, TcpState::kClosed, 4},      {17, TcpState::kNone, 5},
      {1, TcpState::kNone, 6},        {58, TcpState::kNone, 6},
      {47, TcpState::kNone, 7},       {132, TcpState::kNone, 7},
      // tcp_state is only meaningful for TCP.
      {17, TcpState::kEstablished, 5},
  };
  for (const Case& c : cases) {
    FlowEntry e{};
    e.proto = c.proto;
    e.tcp_state = c.state;
    EXPECT_EQ(flowTimeout(e, t), c.want)
        << "proto " << int(c.proto) << " state " << tcpStateName(c.state);
  }
}

// ---------------------------------------------------------------------------- scale

TEST(FlowTableTest, MillionFlowsMemory) {
  constexpr uint32_t kFlows = 1u << 20;
  rte_malloc_socket_stats before{}, after{};
  rte_malloc_get_socket_stats(0, &before);
  auto t = makeTable(kFlows);
  ASSERT_NE(t, nullptr);
  rte_malloc_get_socket_stats(0, &after);
  size_t bytes = after.heap_allocsz_bytes - before.heap_allocsz_bytes;
  std::printf("[ info ] flow table for %u flows: %.1f MiB of DPDK heap (%.0f bytes/flow)\n",
              kFlows, bytes / 1048576.0, static_cast<double>(bytes) / kFlows);
  RecordProperty("heap_bytes_1m_flows", std::to_string(bytes));
  for (uint32_t i = 0; i < kFlows; ++i) {
    ASSERT_GE(t->insert(udpKey(i), 0), 0) << i;
  }
  EXPECT_EQ(t->size(), kFlows);
  EXPECT_EQ(t->insert(udpKey(kFlows), 0), -1);
}

}  // namespace
}  // namespace dpu::dp
