// The firewall's rte_acl tables against the reference matcher (rules::referenceMatch) on
// random rule sets, the GeoIP database against its documented lookups, and the reject
// frames on their own.
#include "dataplane/stages/firewall/firewall_tables.h"

#include <arpa/inet.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/packet/parser.h"
#include "tests/dataplane/stages/fw_test_util.h"
#include "tests/util/packet_builder.h"

namespace dpu::dp {
namespace {

using rules::AclEntry;
using rules::CompiledFirewall;
using rules::FwAction;
using rules::FwQuery;
using test::Frame;
using test::PacketBuilder;

// Random rule sets with the features that make ACLs hard: mixed families, overlapping
// prefixes of odd lengths from a few shared networks, port ranges, protocols, directions,
// VLANs, country ranges, several entries per rule and priorities with ties (ranks follow
// the compiler: stable sort by priority, ties in config order).
class RuleSetGen {
 public:
  explicit RuleSetGen(uint64_t seed) : rng_(seed) {
    for (int i = 0; i < 12; ++i) {
      std::array<uint8_t, 16> a{};
      for (int b = 0; b < 4; ++b) a[b] = byte();
      nets4_.push_back(a);
      std::array<uint8_t, 16> b6{};
      b6[0] = 0x20;
      b6[1] = 0x01;
      for (int b = 2; b < 16; ++b) b6[b] = byte();
      nets6_.push_back(b6);
    }
  }

  std::shared_ptr<const CompiledFirewall> make(uint32_t nrules, uint32_t ncountries = 6) {
    auto fw = std::make_shared<CompiledFirewall>();
    for (uint32_t c = 0; c < ncountries; ++c) {
      rules::CountryCode cc = {static_cast<char>('A' + c), static_cast<char>('A' + (c * 7) % 26)};
      fw->countries.push_back(cc);
      fw->country_index[(cc[0] - 'A') * 26 + (cc[1] - 'A')] = static_cast<uint16_t>(c + 1);
    }
    fw->uses_countries = ncountries > 0;
    struct Pending {
      int32_t priority;
      uint32_t order;
      std::vector<std::pair<AclEntry, bool>> entries;  // (entry, IPv6)
      FwAction action;
    };
    std::vector<Pending> ps;
    for (uint32_t r = 0; r < nrules; ++r) {
      Pending p;
      p.priority = static_cast<int32_t>(pick(0, 20));  // many ties
      p.order = r;
      p.action = static_cast<FwAction>(pick(1, 3));
      uint32_t ne = pick(1, 3);
      for (uint32_t k = 0; k < ne; ++k) {
        bool v6 = pick(0, 1) == 1;
        p.entries.emplace_back(entry(ncountries, v6), v6);
      }
      ps.push_back(std::move(p));
    }
    std::stable_sort(ps.begin(), ps.end(),
                     [](const Pending& a, const Pending& b) { return a.priority < b.priority; });
    for (uint32_t rank = 0; rank < ps.size(); ++rank) {
      rules::FwRuleInfo info;
      info.id = "r" + std::to_string(ps[rank].order);
      info.action = ps[rank].action;
      info.priority = ps[rank].priority;
      fw->rules.push_back(info);
      for (auto [e, v6] : ps[rank].entries) {
        e.rule = rank;
        e.rank = rank;
        (v6 ? fw->v6 : fw->v4).push_back(e);
      }
    }
    // The compiler emits entries grouped by rule; shuffling shows the order does not matter.
    std::shuffle(fw->v4.begin(), fw->v4.end(), rng_);
    std::shuffle(fw->v6.begin(), fw->v6.end(), rng_);
    return fw;
  }

  // A random entry like the ones make() puts in rules.
  AclEntry randomEntry(uint32_t ncc, bool v6) { return entry(ncc, v6); }
  uint32_t random(uint32_t lo, uint32_t hi) { return pick(lo, hi); }

  // A query drawn to hit entries of `fw` most of the time.
  FwQuery query(const CompiledFirewall& fw) {
    FwQuery q;
    bool v6 = pick(0, 1) == 1;
    const std::vector<AclEntry>& es = v6 ? fw.v6 : fw.v4;
    q.v6 = v6;
    uint32_t ncc = static_cast<uint32_t>(fw.countries.size());
    if (es.empty() || pick(0, 9) < 2) {  // anything
      randomAddr(q.src, v6);
      randomAddr(q.dst, v6);
      q.proto = static_cast<uint8_t>(std::array<int, 5>{6, 17, 1, 58, 47}[pick(0, 4)]);
      q.dir = static_cast<uint8_t>(pick(1, 2));
      q.vlan = static_cast<uint16_t>(pick(0, 3) == 0 ? pick(0, 4095) : pick(0, 2) * 10);
      q.src_cc = static_cast<uint16_t>(pick(0, ncc));
      q.dst_cc = static_cast<uint16_t>(pick(0, ncc));
      q.sport = static_cast<uint16_t>(pick(0, 65535));
      q.dport = static_cast<uint16_t>(pick(0, 65535));
      return q;
    }
    const AclEntry& e = es[pick(0, static_cast<uint32_t>(es.size() - 1))];
    // Every field inside the entry most of the time, one field off it sometimes.
    inPrefix(q.src, e.src, e.src_len, v6);
    inPrefix(q.dst, e.dst, e.dst_len, v6);
    q.proto = e.proto_mask ? e.proto : static_cast<uint8_t>(pick(0, 1) ? 6 : 17);
    q.dir = static_cast<uint8_t>(pick(e.dir_lo, e.dir_hi));
    q.vlan = static_cast<uint16_t>(pick(e.vlan_lo, e.vlan_hi));
    q.src_cc = static_cast<uint16_t>(pick(e.src_cc_lo, std::min<uint32_t>(e.src_cc_hi, ncc)));
    q.dst_cc = static_cast<uint16_t>(pick(e.dst_cc_lo, std::min<uint32_t>(e.dst_cc_hi, ncc)));
    q.sport = static_cast<uint16_t>(pick(e.sport_lo, e.sport_hi));
    q.dport = static_cast<uint16_t>(pick(e.dport_lo, e.dport_hi));
    if (pick(0, 3) == 0) {
      switch (pick(0, 6)) {
        case 0: q.dport = static_cast<uint16_t>(e.dport_hi + 1); break;
        case 1: q.sport = static_cast<uint16_t>(e.sport_lo - 1); break;
        case 2: q.dir = static_cast<uint8_t>(3 - q.dir); break;
        case 3: q.vlan = static_cast<uint16_t>(q.vlan + 1); break;
        case 4: q.src_cc = static_cast<uint16_t>(pick(0, ncc)); break;
        case 5: q.proto = static_cast<uint8_t>(q.proto ^ 1); break;
        default: q.dst[v6 ? 15 : 3] ^= 1; break;
      }
    }
    return q;
  }

 private:
  uint8_t byte() { return static_cast<uint8_t>(pick(0, 255)); }
  uint32_t pick(uint32_t lo, uint32_t hi) {
    return std::uniform_int_distribution<uint32_t>(lo, hi)(rng_);
  }
  void randomAddr(std::array<uint8_t, 16>& a, bool v6) {
    a.fill(0);
    for (int b = 0; b < (v6 ? 16 : 4); ++b) a[b] = byte();
  }
  void inPrefix(std::array<uint8_t, 16>& a, const std::array<uint8_t, 16>& net, uint8_t len,
                bool v6) {
    randomAddr(a, v6);
    for (int bit = 0; bit < len; ++bit) {
      uint8_t m = static_cast<uint8_t>(0x80 >> (bit % 8));
      a[bit / 8] = static_cast<uint8_t>((a[bit / 8] & ~m) | (net[bit / 8] & m));
    }
  }
  // A prefix near one of the shared networks: same network, a random length (odd ones
  // too), host bits cleared, sometimes a random bit flipped inside (siblings / nested).
  void prefix(std::array<uint8_t, 16>& out, uint8_t& len, bool v6) {
    const auto& base = (v6 ? nets6_ : nets4_)[pick(0, 11)];
    uint32_t maxlen = v6 ? 128 : 32;
    uint32_t r = pick(0, 9);
    len = static_cast<uint8_t>(r == 0 ? 0 : r < 3 ? pick(1, maxlen / 4) : pick(maxlen / 4, maxlen));
    out = base;
    if (len > 0 && pick(0, 2) == 0) {
      uint32_t bit = pick(0, len - 1u);
      out[bit / 8] ^= static_cast<uint8_t>(0x80 >> (bit % 8));
    }
    for (uint32_t bit = len; bit < (v6 ? 128u : 32u); ++bit) {
      out[bit / 8] &= static_cast<uint8_t>(~(0x80 >> (bit % 8)));
    }
    if (!v6) std::fill(out.begin() + 4, out.end(), 0);
  }
  AclEntry entry(uint32_t ncc, bool v6) {
    AclEntry e;
    prefix(e.src, e.src_len, v6);
    prefix(e.dst, e.dst_len, v6);
    uint32_t p = pick(0, 5);
    if (p == 0) {
      e.proto = 0;
      e.proto_mask = 0;
    } else {
      e.proto = static_cast<uint8_t>(std::array<int, 5>{6, 17, 6, v6 ? 58 : 1, 47}[p - 1]);
      e.proto_mask = 0xff;
    }
    if (e.proto == 6 || e.proto == 17) {
      auto ports = [&](uint16_t& lo, uint16_t& hi) {
        switch (pick(0, 3)) {
          case 0: lo = 0; hi = 65535; break;
          case 1: lo = hi = static_cast<uint16_t>(pick(0, 3) ? pick(1, 1024) : pick(0, 65535)); break;
          case 2: lo = static_cast<uint16_t>(pick(1024, 40000)); hi = static_cast<uint16_t>(lo + pick(0, 20000)); break;
          default: lo = static_cast<uint16_t>(pick(0, 100)); hi = static_cast<uint16_t>(pick(100, 2000)); break;
        }
      };
      ports(e.sport_lo, e.sport_hi);
      ports(e.dport_lo, e.dport_hi);
    }
    switch (pick(0, 3)) {
      case 0: e.dir_lo = e.dir_hi = 1; break;
      case 1: e.dir_lo = e.dir_hi = 2; break;
      default: break;
    }
    if (pick(0, 4) == 0) e.vlan_lo = e.vlan_hi = static_cast<uint16_t>(pick(0, 2) * 10);
    if (pick(0, 5) == 0) {
      e.vlan_lo = static_cast<uint16_t>(pick(0, 100));
      e.vlan_hi = static_cast<uint16_t>(e.vlan_lo + pick(0, 3000));
    }
    if (ncc && pick(0, 4) == 0) {
      e.src_cc_lo = static_cast<uint16_t>(pick(0, ncc));
      e.src_cc_hi = static_cast<uint16_t>(pick(e.src_cc_lo, ncc));
    }
    if (ncc && pick(0, 4) == 0) {
      e.dst_cc_lo = static_cast<uint16_t>(pick(1, ncc));
      e.dst_cc_hi = e.dst_cc_lo;
    }
    return e;
  }

  std::mt19937_64 rng_;
  std::vector<std::array<uint8_t, 16>> nets4_, nets6_;
};

// rte_acl result == reference result for every query, classified in bursts of random sizes.
// Queries are drawn from the entries of `fw`, and of `also` (when given) for every other one.
void differential(const CompiledFirewall& fw, const FirewallTables& t, RuleSetGen& g,
                  uint32_t nqueries, std::mt19937& rng, uint64_t* matched,
                  const CompiledFirewall* also = nullptr) {
  std::vector<FwQuery> qs;
  qs.reserve(nqueries);
  for (uint32_t i = 0; i < nqueries; ++i) qs.push_back(g.query(also && i % 2 ? *also : fw));
  std::vector<const FwQuery*> qp;
  for (const FwQuery& q : qs) qp.push_back(&q);
  std::vector<int64_t> got(qs.size(), -7);
  for (size_t i = 0; i < qs.size();) {
    size_t n = std::min<size_t>(std::uniform_int_distribution<int>(1, 80)(rng), qs.size() - i);
    t.classifyBurst(qp.data() + i, static_cast<uint32_t>(n), got.data() + i);
    i += n;
  }
  int shown = 0;
  for (size_t i = 0; i < qs.size(); ++i) {
    int64_t want = rules::referenceMatch(fw, qs[i]);
    if (want >= 0) ++*matched;
    if (got[i] != want && shown++ < 10) {
      const FwQuery& q = qs[i];
      ADD_FAILURE() << "query " << i << (q.v6 ? " v6" : " v4") << " proto " << int(q.proto)
                    << " dir " << int(q.dir) << " vlan " << q.vlan << " cc " << q.src_cc << "/"
                    << q.dst_cc << " " << test::ipToString(test::toIp(q.src), q.v6) << ":" << q.sport
                    << " -> " << test::ipToString(test::toIp(q.dst), q.v6) << ":" << q.dport
                    << ": rte_acl " << got[i] << ", reference " << want;
    }
  }
  EXPECT_EQ(shown, 0) << "mismatches";
}

TEST(FirewallTables, MatchesTheReferenceOnRandomRuleSets) {
  struct Size {
    uint32_t rules, queries;
    uint32_t max_context_entries;  // 0: one context per family if rte_acl can
  };
  // The last set is split in contexts of at most 120 entries: classification across several
  // contexts (what rte_acl needs for rule sets beyond 8 tries) must give the same answers.
  const Size sizes[] = {{1, 5000, 0},     {10, 15000, 0}, {100, 25000, 0},
                        {1000, 30000, 0}, {1000, 30000, 120}};
  std::mt19937 rng(12345);
  uint64_t total = 0, matched = 0;
  for (const Size& s : sizes) {
    SCOPED_TRACE(s.rules);
    RuleSetGen g(1000 + s.rules);
    auto fw = g.make(s.rules);
    auto t = FirewallTables::build(fw, SOCKET_ID_ANY, s.max_context_entries);
    ASSERT_TRUE(t.ok()) << t.status();
    const auto& st = (*t)->stats();
    if (s.max_context_entries) {
      EXPECT_GE(st.v4_contexts, 8u);
      EXPECT_GE(st.v6_contexts, 8u);
    }
    std::printf("[ info ] %u rules: %u v4 + %u v6 entries, contexts %u/%u, fields %u/%u, "
                "build %.1f ms, %.1f KiB\n",
                s.rules, st.v4_entries, st.v6_entries, st.v4_contexts, st.v6_contexts,
                st.v4_fields, st.v6_fields, st.build_ms, st.bytes / 1024.0);
    differential(*fw, **t, g, s.queries, rng, &matched);
    total += s.queries;
  }
  EXPECT_GE(total, 100000u);
  // The queries are biased toward the rules: most of them match one.
  EXPECT_GT(matched, total / 2);
  std::printf("[ info ] %lu queries, %lu matched a rule\n", static_cast<unsigned long>(total),
              static_cast<unsigned long>(matched));
}

// A rule set with some rules removed, changed (same id, new entries), moved (priority
// order) and added: what a config change through the API does to the compiled firewall.
std::shared_ptr<const CompiledFirewall> changed(const CompiledFirewall& b, RuleSetGen& g,
                                                uint32_t nremove, uint32_t nchange,
                                                uint32_t nmove, uint32_t nadd, int tag) {
  struct R {
    rules::FwRuleInfo info;
    std::vector<std::pair<AclEntry, bool>> entries;
  };
  std::vector<R> rs(b.rules.size());
  for (size_t r = 0; r < b.rules.size(); ++r) rs[r].info = b.rules[r];
  for (bool v6 : {false, true}) {
    for (const AclEntry& e : v6 ? b.v6 : b.v4) rs[e.rule].entries.emplace_back(e, v6);
  }
  const uint32_t ncc = static_cast<uint32_t>(b.countries.size());
  auto any = [&]() { return g.random(0, static_cast<uint32_t>(rs.size() - 1)); };
  for (uint32_t i = 0; i < nremove && rs.size() > 1; ++i) rs.erase(rs.begin() + any());
  for (uint32_t i = 0; i < nchange; ++i) {
    R& r = rs[any()];
    bool v6 = g.random(0, 1) == 1;
    r.entries.assign(1, {g.randomEntry(ncc, v6), v6});
  }
  for (uint32_t i = 0; i < nmove; ++i) std::swap(rs[any()], rs[any()]);
  for (uint32_t i = 0; i < nadd; ++i) {
    R r;
    r.info.id = "new" + std::to_string(tag) + "_" + std::to_string(i);
    r.info.action = static_cast<FwAction>(g.random(1, 3));
    for (uint32_t k = g.random(1, 2); k > 0; --k) {
      bool v6 = g.random(0, 1) == 1;
      r.entries.emplace_back(g.randomEntry(ncc, v6), v6);
    }
    rs.insert(rs.begin() + g.random(0, static_cast<uint32_t>(rs.size())), std::move(r));
  }
  auto fw = std::make_shared<CompiledFirewall>();
  fw->countries = b.countries;
  fw->country_index = b.country_index;
  fw->uses_countries = b.uses_countries;
  for (uint32_t rank = 0; rank < rs.size(); ++rank) {
    fw->rules.push_back(rs[rank].info);
    for (auto [e, v6] : rs[rank].entries) {
      e.rule = e.rank = rank;
      (v6 ? fw->v6 : fw->v4).push_back(e);
    }
  }
  return fw;
}

TEST(FirewallTables, IncrementalBuildsMatchTheReference) {
  // Tables built as a delta on a full build answer like the reference for the new rule set,
  // also for packets of removed and changed rules; consecutive changes stay deltas on the
  // same full build; a large change is built in full.
  RuleSetGen g(4242);
  std::mt19937 rng(99);
  auto b = g.make(500);
  auto full = FirewallTables::build(b);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_FALSE((*full)->stats().incremental);
  std::shared_ptr<const FirewallTables> prev = *full;
  std::shared_ptr<const CompiledFirewall> prev_fw = b;
  uint64_t matched = 0, total = 0;
  int incremental = 0;
  for (int step = 0; step < 6; ++step) {
    SCOPED_TRACE(step);
    auto n = changed(*prev_fw, g, 3, 2, step % 2, 4, step);
    auto t = FirewallTables::build(n, SOCKET_ID_ANY, 0, prev, /*merge=*/false);
    ASSERT_TRUE(t.ok()) << t.status();
    const auto& st = (*t)->stats();
    // The deltas grow with every step (always against the first full build) and these sets
    // overlap a lot: the later steps may go past the delta cap and be built in full.
    if (step == 0) {
      EXPECT_TRUE(st.incremental);
      EXPECT_GT(st.delta_entries, 0u);
      EXPECT_GT(st.base_rules_replaced, 0u);
    }
    incremental += st.incremental;
    std::printf("[ info ] change %d: %u rules, delta %u entries, %u base rules replaced, "
                "%.1f ms\n", step, static_cast<unsigned>(n->rules.size()), st.delta_entries,
                st.base_rules_replaced, st.build_ms);
    // Against the full build's rule set too: its removed / changed rules' packets.
    differential(*n, **t, g, 10000, rng, &matched, b.get());
    total += 10000;
    prev = *t;
    prev_fw = n;
  }
  EXPECT_GT(matched, total / 3);
  EXPECT_GE(incremental, 2);
  // A change larger than kMaxDeltaEntries (rules added at the end, all alike so the full
  // build stays quick): built in full, same answers.
  auto big = std::make_shared<CompiledFirewall>(*prev_fw);
  const AclEntry like = g.randomEntry(static_cast<uint32_t>(big->countries.size()), false);
  for (uint32_t i = 0; i <= FirewallTables::kMaxDeltaEntries; ++i) {
    rules::FwRuleInfo info;
    info.id = "bulk" + std::to_string(i);
    info.action = FwAction::kDeny;
    AclEntry e = like;
    e.rule = e.rank = static_cast<uint32_t>(big->rules.size());
    big->rules.push_back(info);
    big->v4.push_back(e);
  }
  auto t = FirewallTables::build(big, SOCKET_ID_ANY, 0, prev, false);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FALSE((*t)->stats().incremental);
  differential(*big, **t, g, 10000, rng, &matched, prev_fw.get());
  // Another country list: country indices mean other countries, built in full.
  auto cc = std::make_shared<CompiledFirewall>(*prev_fw);
  std::swap(cc->countries[0], cc->countries[1]);
  auto tc = FirewallTables::build(cc, SOCKET_ID_ANY, 0, prev, false);
  ASSERT_TRUE(tc.ok()) << tc.status();
  EXPECT_FALSE((*tc)->stats().incremental);
  // The same rule set again: an empty delta, every base rule kept.
  auto same = FirewallTables::build(std::make_shared<CompiledFirewall>(*prev_fw), SOCKET_ID_ANY,
                                    0, prev, false);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_TRUE((*same)->stats().incremental);
  EXPECT_EQ((*same)->stats().base_rules_replaced, (*prev).stats().base_rules_replaced);
  differential(*prev_fw, **same, g, 10000, rng, &matched, b.get());
}

TEST(FirewallTables, IncrementalTablesMergeInTheBackground) {
  // With merge on, incremental tables build the whole rule set on a thread of their own and
  // then classify with it alone; the next change is a delta on that merged build.
  RuleSetGen g(777);
  std::mt19937 rng(7);
  auto b = g.make(300);
  auto full = FirewallTables::build(b);
  ASSERT_TRUE(full.ok()) << full.status();
  auto n = changed(*b, g, 1, 1, 0, 2, 1);
  auto t = FirewallTables::build(n, SOCKET_ID_ANY, 0, *full);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_TRUE((*t)->stats().incremental);
  uint64_t matched = 0;
  differential(*n, **t, g, 5000, rng, &matched, b.get());  // before or after the merge
  for (int i = 0; i < 6000 && (*t)->merged() == nullptr; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_NE((*t)->merged(), nullptr) << "no merged build after 60 s";
  EXPECT_FALSE((*t)->merged()->stats().incremental);
  differential(*n, **t, g, 10000, rng, &matched, b.get());
  // The same rules again: a delta on the merged build, nothing replaced.
  auto again = FirewallTables::build(std::make_shared<CompiledFirewall>(*n), SOCKET_ID_ANY, 0,
                                     *t, false);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE((*again)->stats().incremental);
  EXPECT_EQ((*again)->stats().base_rules_replaced, 0u);
  EXPECT_EQ((*again)->stats().delta_entries, 0u);
  differential(*n, **again, g, 5000, rng, &matched);
  EXPECT_GT(matched, 5000u);
}

TEST(FirewallTables, ShapeGroupsMatchTheReference) {
  // Entries naming a source with any destination, entries with any source naming a
  // destination (each kind above kShapeSplitMin), and the random mix: IPv6 is built as two
  // shape groups (IPv4 stays one), answers as the reference, with and without contexts
  // split by rank.
  RuleSetGen g(4242);
  auto base = g.make(300);
  auto fw = std::make_shared<CompiledFirewall>(*base);
  uint32_t rank = 0;
  for (auto* list : {&fw->v4, &fw->v6}) {
    const bool v6 = list == &fw->v6;
    for (int k = 0; k < 2 * static_cast<int>(FirewallTables::kShapeSplitMin); ++k) {
      AclEntry e = g.randomEntry(static_cast<uint32_t>(fw->countries.size()), v6);
      rank = g.random(0, static_cast<uint32_t>(fw->rules.size() - 1));
      e.rule = e.rank = rank;
      if (k % 2) {
        e.src_len = 0;
        e.src.fill(0);
        if (e.dst_len == 0) e.dst_len = 8;
      } else {
        e.dst_len = 0;
        e.dst.fill(0);
        if (e.src_len == 0) e.src_len = 8;
      }
      for (auto* a : {&e.src, &e.dst}) {
        const uint8_t len = a == &e.src ? e.src_len : e.dst_len;
        for (uint32_t bit = len; bit < 128; ++bit) (*a)[bit / 8] &= static_cast<uint8_t>(~(0x80 >> (bit % 8)));
      }
      list->push_back(e);
    }
  }
  std::mt19937 rng(9);
  for (uint32_t max_context_entries : {0u, 100u}) {
    SCOPED_TRACE(max_context_entries);
    auto t = FirewallTables::build(fw, SOCKET_ID_ANY, max_context_entries);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_FALSE((*t)->stats().v4_shapes);
    EXPECT_TRUE((*t)->stats().v6_shapes);
    EXPECT_GE((*t)->stats().v6_contexts, 2u);
    uint64_t matched = 0;
    differential(*fw, **t, g, 30000, rng, &matched);
    EXPECT_GT(matched, 10000u);
  }
  // A small rule set stays one group.
  auto small = FirewallTables::build(g.make(10));
  ASSERT_TRUE(small.ok());
  EXPECT_FALSE((*small)->stats().v6_shapes);
  EXPECT_EQ((*small)->stats().v6_contexts, 1u);
}

TEST(FirewallTables, LayoutWithoutOptionalGroupsStillMatches) {
  // No entry constrains direction, VLAN or countries: those fields are left out of the
  // tries, and queries with any value there still match like the reference says.
  RuleSetGen g(77);
  auto base = g.make(300, 0);
  auto fw = std::make_shared<CompiledFirewall>(*base);
  for (auto* list : {&fw->v4, &fw->v6}) {
    for (AclEntry& e : *list) {
      e.dir_lo = 1;
      e.dir_hi = 2;
      e.vlan_lo = 0;
      e.vlan_hi = 4095;
      e.src_cc_lo = e.dst_cc_lo = 0;
      e.src_cc_hi = e.dst_cc_hi = 0xffff;
    }
  }
  auto t = FirewallTables::build(fw);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->stats().v4_fields, 5u);
  EXPECT_EQ((*t)->stats().v6_fields, 11u);
  std::mt19937 rng(5);
  uint64_t matched = 0;
  differential(*fw, **t, g, 20000, rng, &matched);
  EXPECT_GT(matched, 5000u);
}

TEST(FirewallTables, EmptyRuleListsHaveNoContextAndMatchNothing) {
  auto fw = std::make_shared<CompiledFirewall>();
  fw->default_action[0] = FwAction::kDeny;
  auto t = FirewallTables::build(fw);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->stats().v4_fields, 0u);
  EXPECT_EQ((*t)->stats().v6_fields, 0u);
  FwQuery a, b;
  b.v6 = true;
  const FwQuery* qp[] = {&a, &b};
  int64_t r[2] = {5, 5};
  (*t)->classifyBurst(qp, 2, r);
  EXPECT_EQ(r[0], -1);
  EXPECT_EQ(r[1], -1);

  // Only IPv6 entries: IPv4 queries match nothing, IPv6 ones do.
  auto fw6 = std::make_shared<CompiledFirewall>();
  fw6->rules.push_back({"v6only", FwAction::kAllow, 0, ""});
  AclEntry e;  // matches everything of its family
  fw6->v6.push_back(e);
  auto t6 = FirewallTables::build(fw6);
  ASSERT_TRUE(t6.ok()) << t6.status();
  (*t6)->classifyBurst(qp, 2, r);
  EXPECT_EQ(r[0], -1);
  EXPECT_EQ(r[1], 0);

  // Incremental builds from and to empty rule sets (a config without firewall rules that
  // changes something else; the first rule added; the last one removed).
  auto empty2 = FirewallTables::build(std::make_shared<CompiledFirewall>(*fw), SOCKET_ID_ANY, 0,
                                      *t);
  ASSERT_TRUE(empty2.ok()) << empty2.status();
  (*empty2)->classifyBurst(qp, 2, r);
  EXPECT_EQ(r[0], -1);
  EXPECT_EQ(r[1], -1);
  auto to6 = FirewallTables::build(fw6, SOCKET_ID_ANY, 0, *empty2, false);
  ASSERT_TRUE(to6.ok()) << to6.status();
  (*to6)->classifyBurst(qp, 2, r);
  EXPECT_EQ(r[0], -1);
  EXPECT_EQ(r[1], 0);
  auto back = FirewallTables::build(fw, SOCKET_ID_ANY, 0, *t6, false);
  ASSERT_TRUE(back.ok()) << back.status();
  r[0] = r[1] = 5;
  (*back)->classifyBurst(qp, 2, r);
  EXPECT_EQ(r[0], -1);
  EXPECT_EQ(r[1], -1);
}

TEST(FirewallTables, BadEntriesAreRefused) {
  auto fw = std::make_shared<CompiledFirewall>();
  AclEntry e;
  e.rule = 3;  // no such rule
  fw->v4.push_back(e);
  auto t = FirewallTables::build(fw);
  EXPECT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("outside the 0 compiled rules"), std::string::npos)
      << t.status();
}

// --- GeoIP ----------------------------------------------------------------------------------

TEST(GeoIpDb, CountriesAsDocumentedForTheTestDatabase) {
  std::string db = test::countryTestDb();
  std::string tsv = test::countryTestLookups();
  if (db.empty() || tsv.empty()) {
    GTEST_SKIP() << "no GeoIP country test database / lookups under " << test::kMmdbDir
                 << " (GeoIP2-Country-Test.mmdb or maxmind+MaxMind-DB/test-data/"
                    "GeoLite2-Country-Test.mmdb)";
  }
  auto g = GeoIpDb::open(db);
  ASSERT_TRUE(g.ok()) << g.status();
  std::ifstream in(tsv);
  std::string line;
  int checked = 0, with_country = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string x;
    while (std::getline(ss, x, '\t')) f.push_back(x);
    ASSERT_GE(f.size(), 5u) << line;
    if (f[2] != "country.iso_code") continue;
    IpAddr a{};
    bool v6 = f[0].find(':') != std::string::npos;
    ASSERT_EQ(inet_pton(v6 ? AF_INET6 : AF_INET, f[0].c_str(), a.b), 1) << f[0];
    char cc[2];
    bool found = (*g)->country(a, v6, cc);
    // Found with a JSON string value: that code; "null" / not_found: no country.
    std::string want = f[4] == "found" && f[3].size() == 4 && f[3][0] == '"' ? f[3].substr(1, 2) : "";
    SCOPED_TRACE(line);
    if (want.empty()) {
      EXPECT_FALSE(found);
    } else {
      ASSERT_TRUE(found);
      EXPECT_EQ(std::string(cc, 2), want);
      ++with_country;
    }
    ++checked;
  }
  EXPECT_GT(checked, 700);
  EXPECT_GT(with_country, 600);
  EXPECT_TRUE((*g)->sameFile(db));
}

TEST(GeoIpDb, ABadFileIsAClearError) {
  auto missing = GeoIpDb::open("/nonexistent/geo.mmdb");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("firewall.geoip_database"), std::string::npos);
  std::string path = testing::TempDir() + "not_an_mmdb.bin";
  {
    std::ofstream f(path);
    f << "this is not a MaxMind database";
  }
  auto bad = GeoIpDb::open(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("as a MaxMind database"), std::string::npos)
      << bad.status();
  std::remove(path.c_str());
}

// --- reject frames --------------------------------------------------------------------------

PacketMeta parsed(const Frame& f) {
  PacketMeta m;
  EXPECT_EQ(parsePacket(f.data(), static_cast<uint32_t>(f.size()), m), ParseStatus::kOk);
  return m;
}

TEST(RejectFrames, NothingIsSentWhereTheRfcsSayNot) {
  uint8_t out[2048];
  auto icmp = [&](const Frame& f) {
    return buildIcmpUnreachable(f.data(), static_cast<uint32_t>(f.size()), parsed(f), out,
                                sizeof(out));
  };
  auto rst = [&](const Frame& f, bool to_sender) {
    return buildTcpReset(f.data(), static_cast<uint32_t>(f.size()), parsed(f), to_sender, out,
                         sizeof(out));
  };
  // An ICMP error is not answered with one; an echo request is.
  EXPECT_EQ(icmp(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").icmp(3, 1).payload(std::string(28, 'x')).build()), 0);
  EXPECT_GT(icmp(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").icmp(8, 0, 1, 1).build()), 0);
  EXPECT_EQ(icmp(PacketBuilder().ipv6("2001:db8::1", "2001:db8::2").icmpv6(1, 0).payload(std::string(48, 'x')).build()), 0);
  EXPECT_GT(icmp(PacketBuilder().ipv6("2001:db8::1", "2001:db8::2").icmpv6(128, 0, 1, 1).build()), 0);
  // Multicast / broadcast destinations, unspecified sources.
  EXPECT_EQ(icmp(PacketBuilder().ipv4("10.0.0.1", "224.0.0.5").udp(1, 2).build()), 0);
  EXPECT_EQ(icmp(PacketBuilder().ipv4("10.0.0.1", "255.255.255.255").udp(1, 2).build()), 0);
  EXPECT_EQ(icmp(PacketBuilder().ipv4("0.0.0.0", "10.0.0.1").udp(68, 67).build()), 0);
  EXPECT_EQ(icmp(PacketBuilder().ipv6("2001:db8::1", "ff02::1").udp(1, 2).build()), 0);
  EXPECT_EQ(icmp(PacketBuilder().ipv6("::", "2001:db8::1").udp(1, 2).build()), 0);
  EXPECT_EQ(icmp(PacketBuilder().eth(test::kDefaultSrcMac, test::mac("ff:ff:ff:ff:ff:ff"))
                     .ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build()), 0);
  // A reset is never answered; the receiver only gets one for a segment with ACK.
  EXPECT_EQ(rst(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 2, kTcpRst | kTcpAck).build(), true), 0);
  EXPECT_EQ(rst(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 2, kTcpSyn).build(), false), 0);
  EXPECT_GT(rst(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 2, kTcpSyn).build(), true), 0);
}

TEST(RejectFrames, NoResetToOrFromBroadcastMulticastOrUnspecified) {
  uint8_t out[2048];
  auto rst = [&](const Frame& f, bool to_sender) {
    return buildTcpReset(f.data(), static_cast<uint32_t>(f.size()), parsed(f), to_sender, out,
                         sizeof(out));
  };
  const uint8_t syn = kTcpSyn, ack = kTcpAck | kTcpPsh;
  for (uint8_t flags : {syn, ack}) {
    SCOPED_TRACE(static_cast<int>(flags));
    for (bool to_sender : {true, false}) {
      // IP broadcast, multicast and unspecified destinations or sources.
      for (const char* dst : {"255.255.255.255", "224.0.0.251", "239.1.2.3", "0.0.0.0",
                              "127.0.0.1"}) {
        SCOPED_TRACE(dst);
        EXPECT_EQ(rst(PacketBuilder().ipv4("10.0.0.1", dst).tcp(1000, 80, flags, 5, 6).build(),
                      to_sender), 0);
        EXPECT_EQ(rst(PacketBuilder().ipv4(dst, "10.0.0.1").tcp(1000, 80, flags, 5, 6).build(),
                      to_sender), 0);
      }
      for (const char* dst : {"ff02::1", "ff05::fb", "::", "::1"}) {
        SCOPED_TRACE(dst);
        EXPECT_EQ(rst(PacketBuilder().ipv6("2001:db8::1", dst).tcp(1000, 80, flags, 5, 6).build(),
                      to_sender), 0);
        EXPECT_EQ(rst(PacketBuilder().ipv6(dst, "2001:db8::1").tcp(1000, 80, flags, 5, 6).build(),
                      to_sender), 0);
      }
      // Unicast addresses behind a broadcast or multicast destination MAC.
      for (const char* mac : {"ff:ff:ff:ff:ff:ff", "01:00:5e:00:00:fb", "33:33:00:00:00:01"}) {
        SCOPED_TRACE(mac);
        EXPECT_EQ(rst(PacketBuilder().eth(test::kDefaultSrcMac, test::mac(mac))
                          .ipv4("10.0.0.1", "10.0.0.2").tcp(1000, 80, flags, 5, 6).build(),
                      to_sender), 0);
        EXPECT_EQ(rst(PacketBuilder().eth(test::kDefaultSrcMac, test::mac(mac))
                          .ipv6("2001:db8::1", "2001:db8::2").tcp(1000, 80, flags, 5, 6).build(),
                      to_sender), 0);
      }
    }
  }
  // Unicast both ways: answered, from the destination's unicast address.
  Frame ok = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(1000, 80, syn).build();
  uint16_t n = rst(ok, true);
  ASSERT_GT(n, 0);
  PacketMeta m = parsed(Frame(out, out + n));
  EXPECT_EQ(test::ipToString(m.src, false), "10.0.0.2");
  EXPECT_EQ(out[0] & 1, 0);
  EXPECT_EQ(out[6] & 1, 0);
  EXPECT_GT(rst(PacketBuilder().ipv6("2001:db8::1", "2001:db8::2").tcp(1000, 80, syn).build(), true),
            0);
}

TEST(RejectFrames, IcmpQuoteIsCappedAt576And1280Bytes) {
  uint8_t out[4096];
  Frame big4 = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).payload(std::string(1400, 'q')).build();
  uint16_t n4 = buildIcmpUnreachable(big4.data(), static_cast<uint32_t>(big4.size()), parsed(big4),
                                     out, sizeof(out));
  EXPECT_EQ(n4, 14 + 576);
  Frame r4(out, out + n4);
  EXPECT_TRUE(test::checksumsOk(r4));
  EXPECT_EQ(0, std::memcmp(out + 14 + 28, big4.data() + 14, 576 - 28));  // the quote
  Frame big6 = PacketBuilder().ipv6("2001:db8::1", "2001:db8::2").udp(1, 2).payload(std::string(1400, 'q')).build();
  uint16_t n6 = buildIcmpUnreachable(big6.data(), static_cast<uint32_t>(big6.size()), parsed(big6),
                                     out, sizeof(out));
  EXPECT_EQ(n6, 14 + 1280);
  EXPECT_TRUE(test::checksumsOk(Frame(out, out + n6)));
  // Small packets are quoted whole (Ethernet padding excluded).
  Frame small = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).padTo(60).build();
  uint16_t ns = buildIcmpUnreachable(small.data(), static_cast<uint32_t>(small.size()), parsed(small),
                                     out, sizeof(out));
  EXPECT_EQ(ns, 14 + 20 + 8 + 28);
}

// Answers to packets inside a PPPoE session go back inside it, with a PPPoE length that fits
// the answer (the query's would be wrong: the answer has another size).
TEST(RejectFrames, AnswersInsidePppoeCarryTheirOwnLength) {
  uint8_t out[2048];
  auto pppoeLen = [&](const uint8_t* f, uint16_t at) { return static_cast<uint16_t>(f[at + 4] << 8 | f[at + 5]); };
  for (bool v6 : {false, true}) {
    for (bool compressed : {false, true}) {
      SCOPED_TRACE(std::string(v6 ? "v6" : "v4") + (compressed ? " compressed" : ""));
      auto base = [&] {
        PacketBuilder b;
        b.pppoe(0x77, compressed);
        if (v6) b.ipv6("2001:db8::1", "2001:db8::2"); else b.ipv4("10.0.0.1", "10.0.0.2");
        return b;
      };
      Frame syn = base().tcp(1000, 25, kTcpSyn, 41).payload(std::string(30, 's')).padTo(120).build();
      PacketMeta sm = parsed(syn);
      uint16_t n = buildTcpReset(syn.data(), static_cast<uint32_t>(syn.size()), sm, true, out, sizeof(out));
      ASSERT_GT(n, 0);
      PacketMeta rm;
      ASSERT_EQ(parsePacket(out, n, rm), ParseStatus::kOk);
      EXPECT_TRUE(test::checksumsOk(Frame(out, out + n)));
      EXPECT_EQ(rm.pppoe_offset, 14);
      EXPECT_EQ(rm.pppoe_session, 0x77);
      EXPECT_EQ(rm.l3_offset, sm.l3_offset);
      EXPECT_EQ(pppoeLen(out, 14), (compressed ? 1 : 2) + rm.l3_len);
      EXPECT_EQ(n, rm.l3_offset + rm.l3_len);
      EXPECT_EQ(rm.tcp_flags, kTcpRst | kTcpAck);
      EXPECT_EQ(rm.tcp_ack, 41u + 30 + 1);
      EXPECT_EQ(rm.dst, sm.src);

      Frame udp = base().udp(1000, 161).payload(std::string(50, 'u')).build();
      PacketMeta um = parsed(udp);
      n = buildIcmpUnreachable(udp.data(), static_cast<uint32_t>(udp.size()), um, out, sizeof(out));
      ASSERT_GT(n, 0);
      PacketMeta im;
      ASSERT_EQ(parsePacket(out, n, im), ParseStatus::kOk);
      EXPECT_TRUE(test::checksumsOk(Frame(out, out + n)));
      EXPECT_EQ(im.pppoe_session, 0x77);
      EXPECT_EQ(pppoeLen(out, 14), (compressed ? 1 : 2) + im.l3_len);
      EXPECT_EQ(im.l4_proto, v6 ? 58 : 1);
      EXPECT_EQ(im.icmp_type, v6 ? 1 : 3);
      // The quote is the IP packet, not the PPPoE header.
      EXPECT_EQ(0, std::memcmp(out + im.payload_offset, udp.data() + um.l3_offset, um.l3_len));
    }
  }
}

}  // namespace
}  // namespace dpu::dp
