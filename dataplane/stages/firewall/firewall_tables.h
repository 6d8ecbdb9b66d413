// Firewall stage: the rte_acl tables built from a rules::CompiledFirewall, the GeoIP
// database, the per-rule hit counters and the reject responses (TCP RST, ICMP unreachable).
//
// Ownership: FirewallTables and GeoIpDb are built on the control thread (Dataplane::prepare)
// and are immutable afterwards; they hang off the published state (PublishedState), which
// workers read through the published pointer and the control side frees after an
// rte_rcu_qsbr grace period. Consecutive states share them (shared_ptr) when the compiled
// firewall object / the database file did not change. RuleHit arrays are written by one
// worker each and read by control threads (relaxed atomics, see counters.h).
#pragma once

#include <rte_acl.h>
#include <rte_byteorder.h>
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "dataplane/api/control.h"
#include "dataplane/flow/flow_key.h"
#include "dataplane/flow/flow_table.h"
#include "dataplane/packet/packet_meta.h"
#include "dataplane/pipeline/counters.h"
#include "rules/compiled/firewall.h"

struct MMDB_s;

namespace dpu::dp {

// rte_acl input keys. rte_acl reads multi-byte fields most significant byte first, so they
// are stored in network byte order (rule values are given in host order). Layout per the
// rte_acl rules: the first field is one byte (with its own input index), every later field
// sits in a group of 4 consecutive bytes (one input index per group):
//   proto | dir vlan | src_cc dst_cc | tunnel id | src (1 or 4 words) | dst (1 or 4 words) |
//   sport dport
// Groups no entry constrains (dir+vlan, countries, tunnel id) are left out of a context's field list
// (the bytes stay in the key; rte_acl never reads them), so plain 5-tuple rule sets get a
// 5-tuple trie.
struct AclKey4 {
  uint8_t proto;
  uint8_t pad[3];
  uint16_t dir;
  uint16_t vlan;
  uint16_t src_cc;
  uint16_t dst_cc;
  uint32_t tunnel;
  uint8_t src[4];
  uint8_t dst[4];
  uint16_t sport;
  uint16_t dport;
};
static_assert(sizeof(AclKey4) == 28, "AclKey4 has no holes");

struct AclKey6 {
  uint8_t proto;
  uint8_t pad[3];
  uint16_t dir;
  uint16_t vlan;
  uint16_t src_cc;
  uint16_t dst_cc;
  uint32_t tunnel;
  uint8_t src[16];
  uint8_t dst[16];
  uint16_t sport;
  uint16_t dport;
};
static_assert(sizeof(AclKey6) == 52, "AclKey6 has no holes");
static_assert(offsetof(AclKey4, tunnel) == offsetof(AclKey6, tunnel), "shared group offsets");

// Packs a query into the ACL key layout (AclKey4 or AclKey6: same fields, address size
// differs), multi-byte fields in network order as rte_acl expects.
template <class Key>
inline void packAclKey(const rules::FwQuery& q, Key& k) {
  static_assert(sizeof(k.src) == 4 || sizeof(k.src) == 16, "IPv4 or IPv6 key");
  k.proto = q.proto;
  k.pad[0] = k.pad[1] = k.pad[2] = 0;
  k.dir = rte_cpu_to_be_16(q.dir);
  k.vlan = rte_cpu_to_be_16(q.vlan);
  k.src_cc = rte_cpu_to_be_16(q.src_cc);
  k.dst_cc = rte_cpu_to_be_16(q.dst_cc);
  k.tunnel = rte_cpu_to_be_32(q.tunnel_id);
  std::memcpy(k.src, q.src.data(), sizeof(k.src));
  std::memcpy(k.dst, q.dst.data(), sizeof(k.dst));
  k.sport = rte_cpu_to_be_16(q.sport);
  k.dport = rte_cpu_to_be_16(q.dport);
}

struct FirewallTablesStats {
  uint32_t v4_entries = 0, v6_entries = 0;
  uint32_t v4_contexts = 0, v6_contexts = 0;  // rte_acl contexts per family (0: no entries)
  uint32_t v4_fields = 0, v6_fields = 0;      // fields of the first context of each family
  bool v4_shapes = false, v6_shapes = false;   // built as two shape groups (see below)
  double build_ms = 0;  // rte_acl_create + add_rules + build, everything
  uint64_t bytes = 0;   // DPDK heap bytes the contexts hold after the build
  // Incremental tables (built against earlier tables, see FirewallTables::build): the
  // entries of the delta contexts, and the base's rules no longer in force as they were.
  bool incremental = false;
  uint32_t delta_entries = 0;  // v4 + v6 (the v4/v6_entries above are the whole rule set)
  uint32_t base_rules_replaced = 0;
};

// The compiled firewall as rte_acl contexts, per family (IPv4, IPv6): normally one each.
// rte_acl puts a context's rules in at most 8 tries; a rule set that needs more (or more
// memory than one build may use) is split by rank into several contexts, classified in rank
// order (a match in an earlier context wins: its ranks are all lower). An empty entry list
// has no context: every query of that family gets -1 (no rule, the default action applies).
//
// Shapes. rte_acl builds a DFA over the fields in order (source before destination): when
// many entries name a source prefix and leave the destination open, and many others leave
// the source open and name a destination, every source path must carry a copy of the
// destination trie, 16 bytes deep for IPv6 (a cross product: 3 rules over 600 IPv6
// prefixes built in 53 s instead of 7 s, see docs/firewall.md "Size and memory"). So when
// both kinds reach kShapeSplitMin IPv6 entries, the IPv6 family is built as two groups,
// entries with a source prefix and entries without, each with its own context(s); a query
// is classified by both groups and the lower rank wins. IPv4 (4-byte addresses: ClassBench-
// like sets build fine as one group, and a second lookup would cost more than it saves)
// and smaller IPv6 rule sets stay one group (one lookup).
//
// Incremental tables. rte_acl_build costs ~3 us per trie node on this machine whatever the
// layout (a 10k-rule ClassBench-like set: ~110k nodes, ~330 ms, the same in dpdk-test-acl),
// so a small change to a large rule set is not rebuilt from scratch: the new tables keep
// the earlier full build as their base (shared, untouched) and build only a delta:
//   - base rules still in force unchanged (same id, same entries, same relative order) are
//     mapped to their new rank (remap_);
//   - the entries of new or changed rules go into the delta contexts;
//   - a base rule no longer in force ("replaced") can still win in the base, so the delta
//     also gets every still-in-force base entry that overlaps one of its entries and ranks
//     after it: whenever the base's best match is a replaced rule, the delta alone holds
//     every rule the packet can still match.
// A query's answer is then the lower rank of the base's (mapped) and the delta's, or the
// delta's when the base's is a replaced rule: the same rule as a full build would give (the
// differential tests check both ways). The delta is always against the full build, never
// chained; when it would get large (see kMaxDeltaEntries) or the country list changed,
// the tables are built in full instead.
class FirewallTables {
 public:
  // Builds the contexts (control thread). Fails when rte_acl cannot (memory, too many
  // entries), with the family and the entry count in the message. `max_context_entries`
  // (0 = no limit) caps the entries of one context, splitting the family up front.
  // With `previous` (the tables in force), builds incrementally on its full build when the
  // difference is small (see above), else in full.
  // Incremental tables then start a full build of the same rules on a thread of their own
  // (`merge` false: they do not); once done, classifyBurst uses it alone (one lookup per
  // packet again, see merged()) and the next incremental build takes it as its base.
  static absl::StatusOr<std::shared_ptr<const FirewallTables>> build(
      std::shared_ptr<const rules::CompiledFirewall> fw, int socket_id = SOCKET_ID_ANY,
      uint32_t max_context_entries = 0,
      std::shared_ptr<const FirewallTables> previous = nullptr, bool merge = true);
  ~FirewallTables();
  FirewallTables(const FirewallTables&) = delete;
  FirewallTables& operator=(const FirewallTables&) = delete;

  // Classifies n queries of any family mix: rule_out[i] = rule index (rank) of the best
  // matching entry, or -1 when none matches. Any n; no allocation, no locks (rte_acl
  // classify is read-only on the context), callable from any number of lcores at once.
  void classifyBurst(const rules::FwQuery* const* q, uint32_t n, int64_t* rule_out) const;

  const rules::CompiledFirewall& compiled() const { return *fw_; }
  const std::shared_ptr<const rules::CompiledFirewall>& compiledPtr() const { return fw_; }
  const FirewallTablesStats& stats() const { return stats_; }
  // Incremental tables: the full build made in the background, once it is done (else null).
  const FirewallTables* merged() const { return merged_.load(std::memory_order_acquire); }

  static constexpr uint32_t kMaxContexts = 16;  // per family
  static constexpr uint32_t kShapeSplitMin = 64;  // entries of each shape (see above)
  static constexpr uint32_t kChunk = 64;        // queries per rte_acl_classify call
  // Largest delta (entries, both families) an incremental build may have: about 40 ms of
  // rte_acl build for ClassBench-like entries; a larger difference, or one above a quarter
  // of the rule set's entries, is built in full.
  static constexpr uint32_t kMaxDeltaEntries = 1024;

 private:
  struct Family {
    rte_acl_ctx* ctx[kMaxContexts] = {};
    uint32_t n = 0;
    // Groups (shapes): contexts [0, split) and [split, n); split == n: one group.
    uint32_t split = 0;
  };
  // Contexts c[0, nc) of one group (ascending rank ranges) for n keys: rule_out[idx[j]].
  static void classifyChain(rte_acl_ctx* const* c, uint32_t nc, const uint8_t** d,
                            const uint32_t* idx, uint32_t n, int64_t* rule_out);
  static constexpr int32_t kReplaced = -2;  // remap_ value of a base rule no longer in force
  FirewallTables() = default;
  // This object's own contexts (the whole rule set, or the delta of incremental tables).
  void classifyOwn(const rules::FwQuery* const* q, uint32_t n, int64_t* rule_out) const;
  void classifyFamily(const Family& f, const uint8_t** d, const uint32_t* idx, uint32_t n,
                      int64_t* rule_out) const;
  static absl::Status buildFamily(const rules::CompiledFirewall& fw,
                                  const std::vector<rules::AclEntry>& es, bool v6, int socket,
                                  uint32_t max_context_entries, Family& out,
                                  uint32_t* first_fields);
  // The delta entries of `fw` against the full build `base` (false: build in full).
  static bool makeDelta(const FirewallTables& base, const rules::CompiledFirewall& fw,
                        std::vector<int32_t>& remap, std::vector<rules::AclEntry>& d4,
                        std::vector<rules::AclEntry>& d6, uint32_t& replaced);
  std::shared_ptr<const rules::CompiledFirewall> fw_;
  Family f4_, f6_;
  FirewallTablesStats stats_;
  std::shared_ptr<const FirewallTables> base_;  // incremental tables: the full build
  std::vector<int32_t> remap_;                  // base rank -> rank here, or kReplaced
  // The background full build: merged_owner_ is written by merge_thread_ before the release
  // store of merged_ and never after; the destructor joins the thread (so freeing tables
  // whose merge is still running waits for it: up to one full build, on the control thread).
  std::atomic<const FirewallTables*> merged_{nullptr};
  std::shared_ptr<const FirewallTables> merged_owner_;
  std::thread merge_thread_;
};

// The packed keys of up to kChunk queries, split by family: k4/d4/i4[0, n4) for IPv4 (key,
// pointer rte_acl reads, position of the query in `out`), the same for IPv6.
struct AclChunk {
  AclKey4 k4[FirewallTables::kChunk];
  AclKey6 k6[FirewallTables::kChunk];
  const uint8_t* d4[FirewallTables::kChunk];
  const uint8_t* d6[FirewallTables::kChunk];
  uint32_t i4[FirewallTables::kChunk], i6[FirewallTables::kChunk];
  uint32_t n4 = 0, n6 = 0;

  // Packs q[0, m) (m <= kChunk); a query whose family has no context (has4 / has6 false)
  // is not packed and gets out[pos] = -1. Positions are pos0 + index.
  void pack(const rules::FwQuery* const* q, uint32_t m, uint32_t pos0, bool has4, bool has6,
            int64_t* out) {
    n4 = n6 = 0;
    for (uint32_t j = 0; j < m; ++j) {
      const rules::FwQuery& x = *q[j];
      if (x.v6 ? !has6 : !has4) {
        out[pos0 + j] = -1;
      } else if (x.v6) {
        packAclKey(x, k6[n6]);
        d6[n6] = reinterpret_cast<const uint8_t*>(&k6[n6]);
        i6[n6++] = pos0 + j;
      } else {
        packAclKey(x, k4[n4]);
        d4[n4] = reinterpret_cast<const uint8_t*>(&k4[n4]);
        i4[n4++] = pos0 + j;
      }
    }
  }
};

inline void FirewallTables::classifyFamily(const Family& f, const uint8_t** d,
                                           const uint32_t* idx, uint32_t n,
                                           int64_t* rule_out) const {
  if (f.split == f.n) {
    classifyChain(f.ctx, f.n, d, idx, n, rule_out);
    return;
  }
  // Two shape groups: each gives its best rank; the lower one wins.
  // (positions 0..kChunk-1 whatever n is: the whole array is initialized, which GCC 12's
  // -Wmaybe-uninitialized can see, at the cost of a few stores on this split-family path)
  uint32_t pos[kChunk];
  int64_t a[kChunk], b[kChunk];
  for (uint32_t j = 0; j < kChunk; ++j) pos[j] = j;
  classifyChain(f.ctx, f.split, d, pos, n, a);
  classifyChain(f.ctx + f.split, f.n - f.split, d, pos, n, b);
  for (uint32_t j = 0; j < n; ++j) {
    rule_out[idx[j]] = a[j] < 0 ? b[j] : b[j] < 0 ? a[j] : std::min(a[j], b[j]);
  }
}

inline void FirewallTables::classifyChain(rte_acl_ctx* const* ctx, uint32_t nc,
                                          const uint8_t** d, const uint32_t* idx, uint32_t n,
                                          int64_t* rule_out) {
  uint32_t r[kChunk];
  rte_acl_classify(ctx[0], d, r, n, 1);
  if (nc == 1) {
    for (uint32_t j = 0; j < n; ++j) rule_out[idx[j]] = static_cast<int64_t>(r[j]) - 1;
    return;
  }
  // Several contexts (ascending rank ranges): the unmatched go on to the next one.
  const uint8_t* dd[kChunk];
  uint32_t ii[kChunk];
  uint32_t m = 0;
  for (uint32_t j = 0; j < n; ++j) {
    if (r[j] != 0) {
      rule_out[idx[j]] = static_cast<int64_t>(r[j]) - 1;
    } else {
      dd[m] = d[j];
      ii[m++] = idx[j];
    }
  }
  for (uint32_t c = 1; c < nc && m > 0; ++c) {
    rte_acl_classify(ctx[c], dd, r, m, 1);
    uint32_t k = 0;
    for (uint32_t j = 0; j < m; ++j) {
      if (r[j] != 0) {
        rule_out[ii[j]] = static_cast<int64_t>(r[j]) - 1;
      } else {
        dd[k] = dd[j];
        ii[k++] = ii[j];
      }
    }
    m = k;
  }
  for (uint32_t j = 0; j < m; ++j) rule_out[ii[j]] = -1;
}

inline void FirewallTables::classifyBurst(const rules::FwQuery* const* q, uint32_t n,
                                          int64_t* rule_out) const {
  if (!base_) {
    classifyOwn(q, n, rule_out);
    return;
  }
  if (const FirewallTables* m = merged()) {
    m->classifyOwn(q, n, rule_out);
    return;
  }
  // Incremental: the keys are packed once and classified by the base's and the delta's
  // contexts of their family.
  AclChunk c;
  int64_t b[kChunk], d[kChunk];
  for (uint32_t base = 0; base < n; base += kChunk) {
    uint32_t m = std::min(kChunk, n - base);
    std::fill(b, b + m, -1);
    std::fill(d, d + m, -1);
    c.pack(q + base, m, 0, base_->f4_.n || f4_.n, base_->f6_.n || f6_.n, b);
    if (c.n4 && base_->f4_.n) classifyFamily(base_->f4_, c.d4, c.i4, c.n4, b);
    if (c.n4 && f4_.n) classifyFamily(f4_, c.d4, c.i4, c.n4, d);
    if (c.n6 && base_->f6_.n) classifyFamily(base_->f6_, c.d6, c.i6, c.n6, b);
    if (c.n6 && f6_.n) classifyFamily(f6_, c.d6, c.i6, c.n6, d);
    for (uint32_t j = 0; j < m; ++j) {
      int64_t r = b[j] < 0 ? -1 : remap_[static_cast<size_t>(b[j])];
      if (r < 0) {  // no base match, or a replaced rule: the delta has the answer
        rule_out[base + j] = d[j];
      } else {
        rule_out[base + j] = d[j] >= 0 && d[j] < r ? d[j] : r;
      }
    }
  }
}

inline void FirewallTables::classifyOwn(const rules::FwQuery* const* q, uint32_t n,
                                        int64_t* rule_out) const {
  AclChunk c;
  for (uint32_t base = 0; base < n; base += kChunk) {
    uint32_t m = std::min(kChunk, n - base);
    c.pack(q + base, m, base, f4_.n != 0, f6_.n != 0, rule_out);
    if (c.n4) classifyFamily(f4_, c.d4, c.i4, c.n4, rule_out);
    if (c.n6) classifyFamily(f6_, c.d6, c.i6, c.n6, rule_out);
  }
}

// The firewall's view of a flow: the direction of its first packet (initiator ->
// responder), whichever direction the packet at hand travels. Countries are left 0.
inline void fwQueryForFlow(const FlowKey& k, uint8_t flow_flags, rules::FwQuery& q) {
  bool init_hi = (flow_flags & kFlowInitiatorIsHi) != 0;
  const IpAddr& s = init_hi ? k.hi_addr : k.lo_addr;
  const IpAddr& d = init_hi ? k.lo_addr : k.hi_addr;
  q.v6 = k.ip_ver == static_cast<uint8_t>(L3Type::kIpv6);
  q.proto = k.proto;
  q.dir = (flow_flags & kFlowInitiatorSideB) ? 2 : 1;
  q.vlan = k.vlan;
  q.tunnel_id = k.tunnel_id;
  q.src_cc = 0;
  q.dst_cc = 0;
  std::memcpy(q.src.data(), s.b, 16);
  std::memcpy(q.dst.data(), d.b, 16);
  q.sport = init_hi ? k.hi_port : k.lo_port;
  q.dport = init_hi ? k.lo_port : k.hi_port;
}

// A packet judged on its own (no flow: Explain, untracked packets): its own direction.
inline void fwQueryForPacket(const PacketMeta& m, uint8_t in_side, rules::FwQuery& q) {
  q.v6 = m.l3 == L3Type::kIpv6;
  q.proto = m.l4_proto;
  q.dir = in_side == 1 ? 2 : 1;
  q.vlan = m.vlan_outer;
  q.tunnel_id = m.tunnel_id;
  q.src_cc = 0;
  q.dst_cc = 0;
  std::memcpy(q.src.data(), m.src.b, 16);
  std::memcpy(q.dst.data(), m.dst.b, 16);
  q.sport = m.sport;
  q.dport = m.dport;
}

// A MaxMind database opened with MMDB_MODE_MMAP (control thread); lookups are read-only and
// allocation-free (MMDB_lookup_sockaddr + MMDB_aget_value("country", "iso_code")), safe from
// any number of lcores.
class GeoIpDb : public CountryLookup {
 public:
  static absl::StatusOr<std::shared_ptr<const GeoIpDb>> open(const std::string& path);
  ~GeoIpDb() override;
  GeoIpDb(const GeoIpDb&) = delete;
  GeoIpDb& operator=(const GeoIpDb&) = delete;

  // ISO 3166 alpha-2 code of the country of `a` (upper case); false with cc = "\0\0" when
  // the database has no country for it.
  bool country(const IpAddr& a, bool v6, char cc[2]) const override;
  const std::string& path() const { return path_; }
  // True when `path` names the very file this database was opened from (device, inode,
  // size and modification time unchanged).
  bool sameFile(const std::string& path) const;

 private:
  GeoIpDb() = default;
  std::string path_;
  std::unique_ptr<MMDB_s> db_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  off_t size_ = 0;
  timespec mtime_{};
};

// Per-rule hit counters of one worker (one writer, see counters.h): packets and bytes judged
// by the rule (a flow's first packet and every later packet served from its cached verdict,
// both directions), flows that got the rule's verdict, and the time of the last packet.
struct alignas(32) RuleHit {
  Counter packets, bytes, flows, last_hit_ns;
};
struct alignas(64) RuleHitPair {
  RuleHit h[2];
};

// May the appliance answer the packet `frame` (parsed into `m`) at all: both MACs unicast
// and both IP addresses unicast (not broadcast, multicast, unspecified or loopback). The
// answer comes from the packet's destination and goes to its source, so both must be unicast
// hosts. Every answer the appliance makes up (reject RST / ICMP, DNS answers) asks this first.
bool mayAnswer(const uint8_t* frame, const PacketMeta& m);

// Reject responses, written into `out` (room for `cap` bytes); both return the frame length,
// or 0 when nothing may be sent. `frame` is the rejected packet as parsed into `m`.
//
// TCP RST per RFC 793 (reset generation): to the sender (addresses, ports and MACs swapped):
// with ACK in the segment, seq = SEG.ACK and flag RST; without, seq = 0, ack = SEG.SEQ +
// SEG.LEN (payload, +1 for SYN, +1 for FIN) and flags RST|ACK. Toward the receiver (as from
// the sender, out of the other port; for a segment with ACK, i.e. a connection the receiver
// holds): seq = SEG.SEQ, ack = SEG.ACK, RST|ACK. Never in answer to a RST, and never (0
// returned) when either MAC is broadcast / multicast or either IP address is broadcast,
// multicast, unspecified or loopback: the answer's source is the packet's destination
// (the appliance is transparent), which must be a unicast host. The L2 header
// (VLAN tags included) is the packet's own; IP TTL / hop limit 64.
uint16_t buildTcpReset(const uint8_t* frame, uint32_t frame_len, const PacketMeta& m,
                       bool to_sender, uint8_t* out, uint32_t cap);
// ICMP destination unreachable, administratively prohibited (IPv4 type 3 code 13, RFC 1812;
// IPv6 type 1 code 1, RFC 4443) from the packet's destination to its source, quoting the
// packet from its IP header on: as much as fits in 576 bytes of IPv4 (RFC 1812 4.3.2.3) /
// 1280 bytes of IPv6 (RFC 4443 2.4(c)). Not sent (RFC 1122 3.2.2, RFC 4443 2.4(e)) about
// an ICMP error message, a later fragment, a packet sent to a multicast or broadcast
// address (IP or link layer), or from an address that is not unicast (the same address
// rules as buildTcpReset).
uint16_t buildIcmpUnreachable(const uint8_t* frame, uint32_t frame_len, const PacketMeta& m,
                              uint8_t* out, uint32_t cap);

}  // namespace dpu::dp
