// Cold parts of the firewall stage: building the rte_acl contexts, opening the GeoIP
// database, and writing reject responses (rare: once per rejected packet).
#include "dataplane/stages/firewall/firewall_tables.h"
#include "dataplane/packet/frame_write.h"

#include <arpa/inet.h>
#include <maxminddb.h>
#include <netinet/in.h>
#include <rte_errno.h>
#include <rte_malloc.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <functional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dpu::dp {
namespace {

constexpr uint32_t kMaxAclFields = 16;  // IPv6 with every group: 1 + 2 + 2 + 1 + 4 + 4 + 2

// Field indexes of one context's layout (-1 = group left out).
struct Layout {
  rte_acl_config cfg{};
  int dir = -1, vlan = -1, src_cc = -1, dst_cc = -1, tunnel = -1, src = -1, dst = -1, sport = -1,
      dport = -1;
  int words = 1;  // 32-bit words per address
};

Layout makeLayout(bool v6, bool dir_vlan, bool countries, bool tunnel) {
  Layout l;
  uint8_t input = 0;
  uint8_t f = 0;
  auto add = [&](uint8_t type, uint8_t size, size_t offset) {
    rte_acl_field_def& d = l.cfg.defs[f];
    d.type = type;
    d.size = size;
    d.field_index = f;
    d.input_index = input;
    d.offset = static_cast<uint32_t>(offset);
    return static_cast<int>(f++);
  };
  // The first field is one byte with its own input index; then groups of 4 bytes.
  add(RTE_ACL_FIELD_TYPE_BITMASK, 1, offsetof(AclKey4, proto));
  if (dir_vlan) {
    ++input;
    l.dir = add(RTE_ACL_FIELD_TYPE_RANGE, 2, offsetof(AclKey4, dir));
    l.vlan = add(RTE_ACL_FIELD_TYPE_RANGE, 2, offsetof(AclKey4, vlan));
  }
  if (countries) {
    ++input;
    l.src_cc = add(RTE_ACL_FIELD_TYPE_RANGE, 2, offsetof(AclKey4, src_cc));
    l.dst_cc = add(RTE_ACL_FIELD_TYPE_RANGE, 2, offsetof(AclKey4, dst_cc));
  }
  if (tunnel) {
    ++input;
    l.tunnel = add(RTE_ACL_FIELD_TYPE_RANGE, 4, offsetof(AclKey4, tunnel));
  }
  l.words = v6 ? 4 : 1;
  size_t src_off = v6 ? offsetof(AclKey6, src) : offsetof(AclKey4, src);
  size_t dst_off = v6 ? offsetof(AclKey6, dst) : offsetof(AclKey4, dst);
  size_t ports_off = v6 ? offsetof(AclKey6, sport) : offsetof(AclKey4, sport);
  for (int w = 0; w < l.words; ++w) {
    ++input;
    int idx = add(RTE_ACL_FIELD_TYPE_MASK, 4, src_off + 4 * w);
    if (w == 0) l.src = idx;
  }
  for (int w = 0; w < l.words; ++w) {
    ++input;
    int idx = add(RTE_ACL_FIELD_TYPE_MASK, 4, dst_off + 4 * w);
    if (w == 0) l.dst = idx;
  }
  ++input;
  l.sport = add(RTE_ACL_FIELD_TYPE_RANGE, 2, ports_off);
  l.dport = add(RTE_ACL_FIELD_TYPE_RANGE, 2, ports_off + 2);
  l.cfg.num_fields = f;
  l.cfg.num_categories = 1;
  l.cfg.max_size = 0;
  return l;
}

void putAddress(const std::array<uint8_t, 16>& a, uint8_t len, int words, rte_acl_field* f) {
  for (int w = 0; w < words; ++w) {
    int bits = std::clamp(static_cast<int>(len) - 32 * w, 0, 32);
    uint32_t v = (static_cast<uint32_t>(a[4 * w]) << 24) | (static_cast<uint32_t>(a[4 * w + 1]) << 16) |
                 (static_cast<uint32_t>(a[4 * w + 2]) << 8) | a[4 * w + 3];
    uint32_t mask = bits == 0 ? 0 : ~0u << (32 - bits);
    f[w].value.u32 = v & mask;
    f[w].mask_range.u32 = static_cast<uint32_t>(bits);
  }
}

uint64_t dpdkHeapBytes() {
  uint64_t total = 0;
  for (unsigned s = 0; s < rte_socket_count(); ++s) {
    rte_malloc_socket_stats st{};
    if (rte_malloc_get_socket_stats(rte_socket_id_by_idx(s), &st) == 0) {
      total += st.heap_allocsz_bytes;
    }
  }
  return total;
}

// rte_acl_build with max_size 0 (DPDK's default, as dpdk-test-acl and l3fwd use it) splits
// the rules into tries of at most 2048 nodes: compact, but a complex rule set needs more than
// the 8 tries a context can have. The second attempt gives the build a memory budget instead:
// it then starts from tries of 16384 nodes and only shrinks them if the result does not fit.
constexpr size_t kAclMaxSizeRetry = size_t{1} << 30;

// One context for entries [begin, end) (pointers into the family's list, ascending rank).
// Returns the rte_acl error code (0 = built).
int buildContext(const rules::CompiledFirewall& fw, bool v6, int socket,
                 const rules::AclEntry* const* begin, const rules::AclEntry* const* end,
                 size_t max_size, rte_acl_ctx** out, uint32_t* nfields, std::string* error) {
  const char* fam = v6 ? "IPv6" : "IPv4";
  const size_t n_entries = static_cast<size_t>(end - begin);
  const uint32_t ncc = static_cast<uint32_t>(fw.countries.size());
  bool dir_vlan = false, countries = false, tunnel = false;
  for (auto it = begin; it != end; ++it) {
    const rules::AclEntry& e = **it;
    if (e.tunnel_lo > 0 || e.tunnel_hi < 0xffffffffu) tunnel = true;
    if (e.dir_lo > 1 || e.dir_hi < 2 || e.vlan_lo > 0 || e.vlan_hi < 4095) dir_vlan = true;
    if (e.src_cc_lo > 0 || e.src_cc_hi < ncc || e.dst_cc_lo > 0 || e.dst_cc_hi < ncc) {
      countries = true;
    }
  }
  Layout l = makeLayout(v6, dir_vlan, countries, tunnel);
  l.cfg.max_size = max_size;
  static std::atomic<uint32_t> seq{0};
  std::string name = absl::StrCat("dpufw", v6 ? 6 : 4, "_", getpid() % 1000000, "_",
                                  seq.fetch_add(1));
  rte_acl_param prm{};
  prm.name = name.c_str();
  prm.socket_id = socket;
  prm.rule_size = RTE_ACL_RULE_SZ(l.cfg.num_fields);
  prm.max_rule_num = static_cast<uint32_t>(n_entries);
  rte_acl_ctx* ctx = rte_acl_create(&prm);
  if (ctx == nullptr) {
    *error = absl::StrCat("cannot create an ", fam, " ACL context for ", n_entries,
                          " entries: ", rte_strerror(rte_errno));
    return -ENOMEM;
  }
  constexpr size_t kBatch = 4096;
  std::vector<uint8_t> buf(prm.rule_size * std::min(kBatch, n_entries));
  for (size_t base = 0; base < n_entries; base += kBatch) {
    size_t n = std::min(kBatch, n_entries - base);
    std::memset(buf.data(), 0, buf.size());
    for (size_t j = 0; j < n; ++j) {
      const rules::AclEntry& e = *begin[base + j];
      auto* r = reinterpret_cast<rte_acl_rule*>(buf.data() + j * prm.rule_size);
      rte_acl_field* f = r->field;
      r->data.category_mask = 1;
      r->data.priority = static_cast<int32_t>(RTE_ACL_MAX_PRIORITY - e.rank);
      r->data.userdata = e.rule + 1;
      f[0].value.u8 = e.proto & e.proto_mask;
      f[0].mask_range.u8 = e.proto_mask;
      if (l.dir >= 0) {
        f[l.dir].value.u16 = e.dir_lo;
        f[l.dir].mask_range.u16 = e.dir_hi;
        f[l.vlan].value.u16 = e.vlan_lo;
        f[l.vlan].mask_range.u16 = e.vlan_hi;
      }
      if (l.tunnel >= 0) {
        f[l.tunnel].value.u32 = e.tunnel_lo;
        f[l.tunnel].mask_range.u32 = e.tunnel_hi;
      }
      if (l.src_cc >= 0) {
        f[l.src_cc].value.u16 = e.src_cc_lo;
        f[l.src_cc].mask_range.u16 = e.src_cc_hi;
        f[l.dst_cc].value.u16 = e.dst_cc_lo;
        f[l.dst_cc].mask_range.u16 = e.dst_cc_hi;
      }
      putAddress(e.src, e.src_len, l.words, f + l.src);
      putAddress(e.dst, e.dst_len, l.words, f + l.dst);
      f[l.sport].value.u16 = e.sport_lo;
      f[l.sport].mask_range.u16 = e.sport_hi;
      f[l.dport].value.u16 = e.dport_lo;
      f[l.dport].mask_range.u16 = e.dport_hi;
    }
    int rc = rte_acl_add_rules(ctx, reinterpret_cast<const rte_acl_rule*>(buf.data()),
                               static_cast<uint32_t>(n));
    if (rc != 0) {
      rte_acl_free(ctx);
      *error = absl::StrCat("rte_acl_add_rules (", fam, ", ", n_entries, " entries) failed: ",
                            rte_strerror(-rc));
      return rc;
    }
  }
  int rc = rte_acl_build(ctx, &l.cfg);
  if (rc != 0) {
    rte_acl_free(ctx);
    *error = absl::StrCat("building the ", fam, " ACL for ", n_entries, " entries failed: ",
                          rte_strerror(-rc));
    return rc;
  }
  *out = ctx;
  *nfields = l.cfg.num_fields;
  return 0;
}

}  // namespace

absl::Status FirewallTables::buildFamily(const rules::CompiledFirewall& fw,
                                         const std::vector<rules::AclEntry>& es, bool v6,
                                         int socket, uint32_t max_context_entries, Family& out,
                                         uint32_t* first_fields) {
  const char* fam = v6 ? "IPv6" : "IPv4";
  const uint8_t max_len = v6 ? 128 : 32;
  out.n = out.split = 0;
  *first_fields = 0;
  if (es.empty()) return absl::OkStatus();
  std::vector<const rules::AclEntry*> sorted;
  sorted.reserve(es.size());
  for (const rules::AclEntry& e : es) {
    if (e.rule >= fw.rules.size() || e.rank >= static_cast<uint32_t>(RTE_ACL_MAX_PRIORITY)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "firewall: ", fam, " ACL entry with rule ", e.rule, " / rank ", e.rank,
          " outside the ", fw.rules.size(), " compiled rules"));
    }
    if (e.src_len > max_len || e.dst_len > max_len) {
      return absl::InvalidArgumentError(absl::StrCat("firewall: ", fam, " ACL entry of rule '",
                                                     fw.rules[e.rule].id,
                                                     "' has a prefix longer than ", max_len));
    }
    sorted.push_back(&e);
  }
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const rules::AclEntry* a, const rules::AclEntry* b) { return a->rank < b->rank; });
  // Shapes (see the class comment): entries with a source prefix first, then the others,
  // each part in rank order, when both parts are large enough to multiply.
  size_t with_src = 0, open_src_dst = 0;
  for (const rules::AclEntry* e : sorted) {
    if (e->src_len > 0) ++with_src;
    else if (e->dst_len > 0) ++open_src_dst;
  }
  const bool shapes = v6 && with_src >= kShapeSplitMin && open_src_dst >= kShapeSplitMin;
  if (shapes) {
    std::stable_partition(sorted.begin(), sorted.end(),
                          [](const rules::AclEntry* e) { return e->src_len > 0; });
  }
  // Build [lo, hi) as one context; when rte_acl cannot (more than 8 tries, or memory), split
  // it in two rank ranges, in order, as long as contexts are left.
  std::string error;
  std::function<bool(size_t, size_t)> build = [&](size_t lo, size_t hi) {
    if (max_context_entries && hi - lo > max_context_entries) {
      if (out.n + 2 > kMaxContexts) {
        error = absl::StrCat("more than ", kMaxContexts, " contexts of at most ",
                             max_context_entries, " entries needed");
        return false;
      }
      size_t mid = lo + (hi - lo) / 2;
      return build(lo, mid) && build(mid, hi);
    }
    rte_acl_ctx* ctx = nullptr;
    uint32_t nf = 0;
    int rc = buildContext(fw, v6, socket, sorted.data() + lo, sorted.data() + hi, 0, &ctx, &nf,
                          &error);
    if (rc == -ENOMEM || rc == -ERANGE) {
      rc = buildContext(fw, v6, socket, sorted.data() + lo, sorted.data() + hi, kAclMaxSizeRetry,
                        &ctx, &nf, &error);
    }
    if (rc == 0) {
      if (out.n == 0) *first_fields = nf;
      out.ctx[out.n++] = ctx;
      return true;
    }
    bool splittable = (rc == -ENOMEM || rc == -ERANGE) && hi - lo > 1 &&
                      out.n + 2 <= kMaxContexts;
    if (!splittable) return false;
    size_t mid = lo + (hi - lo) / 2;
    return build(lo, mid) && build(mid, hi);
  };
  bool built = shapes ? build(0, with_src) && (out.split = out.n, build(with_src, sorted.size()))
                     : build(0, sorted.size());
  if (!shapes) out.split = out.n;
  if (!built) {
    for (uint32_t c = 0; c < out.n; ++c) rte_acl_free(out.ctx[c]);
    out.n = out.split = 0;
    return absl::ResourceExhaustedError(absl::StrCat(
        "firewall: ", error, " (", es.size(), " ", fam,
        " entries in all; rte_acl holds a context's rules in at most 8 tries, up to ",
        kMaxContexts, " contexts per family are tried; fewer or simpler rules, or more DPDK "
        "memory (EAL -m), may help)"));
  }
  return absl::OkStatus();
}

namespace {

bool v4Unicast(const IpAddr& a) {
  uint8_t b0 = a.b[0];
  bool broadcast = a.b[0] == 255 && a.b[1] == 255 && a.b[2] == 255 && a.b[3] == 255;
  return b0 != 0 && b0 != 127 && b0 < 224 && !broadcast;
}

bool v6Unicast(const IpAddr& a) {
  static const uint8_t kZero[16] = {};
  static const uint8_t kLoopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  return a.b[0] != 0xff && std::memcmp(a.b, kZero, 16) != 0 &&
         std::memcmp(a.b, kLoopback, 16) != 0;
}

}  // namespace

// May the appliance answer this packet at all? Only between two unicast hosts: never to or
// from a link-layer broadcast / multicast address (either MAC of the frame: the answer
// swaps them), and never to or from an IP broadcast, multicast, unspecified or loopback
// address (the answer comes from the packet's destination address).
bool mayAnswer(const uint8_t* frame, const PacketMeta& m) {
  if ((frame[0] & 1) || (frame[6] & 1)) return false;
  if (!tunnelAnswerable(m)) return false;
  if (m.l3 == L3Type::kIpv6) return v6Unicast(m.src) && v6Unicast(m.dst);
  return v4Unicast(m.src) && v4Unicast(m.dst);
}

namespace {

// Do two entries of one family match a common packet?
bool entriesOverlap(const rules::AclEntry& a, const rules::AclEntry& b) {
  auto meet = [](uint32_t alo, uint32_t ahi, uint32_t blo, uint32_t bhi) {
    return std::max(alo, blo) <= std::min(ahi, bhi);
  };
  const uint8_t pm = a.proto_mask & b.proto_mask;
  if ((a.proto & pm) != (b.proto & pm)) return false;
  if (!meet(a.dir_lo, a.dir_hi, b.dir_lo, b.dir_hi) ||
      !meet(a.vlan_lo, a.vlan_hi, b.vlan_lo, b.vlan_hi) ||
      !meet(a.src_cc_lo, a.src_cc_hi, b.src_cc_lo, b.src_cc_hi) ||
      !meet(a.dst_cc_lo, a.dst_cc_hi, b.dst_cc_lo, b.dst_cc_hi) ||
      !meet(a.sport_lo, a.sport_hi, b.sport_lo, b.sport_hi) ||
      !meet(a.dport_lo, a.dport_hi, b.dport_lo, b.dport_hi) ||
      !meet(a.tunnel_lo, a.tunnel_hi, b.tunnel_lo, b.tunnel_hi)) {
    return false;
  }
  auto prefixesMeet = [](const std::array<uint8_t, 16>& x, uint8_t xl,
                         const std::array<uint8_t, 16>& y, uint8_t yl) {
    const int len = std::min(xl, yl);
    for (int bit = 0; bit < len; bit += 8) {
      const int k = std::min(8, len - bit);
      const uint8_t m = static_cast<uint8_t>(0xff00 >> k);
      if ((x[bit / 8] ^ y[bit / 8]) & m) return false;
    }
    return true;
  };
  return prefixesMeet(a.src, a.src_len, b.src, b.src_len) &&
         prefixesMeet(a.dst, a.dst_len, b.dst, b.dst_len);
}

// Same packets matched (rule / rank aside)?
bool sameEntry(const rules::AclEntry& a, const rules::AclEntry& b) {
  return a.proto == b.proto && a.proto_mask == b.proto_mask && a.dir_lo == b.dir_lo &&
         a.dir_hi == b.dir_hi && a.vlan_lo == b.vlan_lo && a.vlan_hi == b.vlan_hi &&
         a.src_cc_lo == b.src_cc_lo && a.src_cc_hi == b.src_cc_hi &&
         a.dst_cc_lo == b.dst_cc_lo && a.dst_cc_hi == b.dst_cc_hi && a.src == b.src &&
         a.dst == b.dst && a.src_len == b.src_len && a.dst_len == b.dst_len &&
         a.sport_lo == b.sport_lo && a.sport_hi == b.sport_hi && a.dport_lo == b.dport_lo &&
         a.dport_hi == b.dport_hi && a.tunnel_lo == b.tunnel_lo && a.tunnel_hi == b.tunnel_hi;
}

// The entries of each rule of one family list, in list order: index[off[r] .. off[r + 1]).
struct ByRule {
  std::vector<uint32_t> off, index;
  ByRule(const std::vector<rules::AclEntry>& es, size_t nrules) : off(nrules + 2, 0) {
    for (const rules::AclEntry& e : es) ++off[std::min<size_t>(e.rule, nrules) + 2];
    for (size_t r = 2; r < off.size(); ++r) off[r] += off[r - 1];
    index.resize(es.size());
    for (uint32_t i = 0; i < es.size(); ++i) {
      index[off[std::min<size_t>(es[i].rule, nrules) + 1]++] = i;
    }
    off.pop_back();
  }
  size_t count(size_t r) const { return off[r + 1] - off[r]; }
};

}  // namespace

bool FirewallTables::makeDelta(const FirewallTables& base, const rules::CompiledFirewall& fw,
                               std::vector<int32_t>& remap, std::vector<rules::AclEntry>& d4,
                               std::vector<rules::AclEntry>& d6, uint32_t& replaced) {
  const rules::CompiledFirewall& b = base.compiled();
  // Country indices are positions in the country list: the base's tries only mean the
  // same countries when the list is the same.
  if (b.countries != fw.countries) return false;
  const size_t nb = b.rules.size(), nn = fw.rules.size();
  const ByRule b4(b.v4, nb), b6(b.v6, nb), n4(fw.v4, nn), n6(fw.v6, nn);
  auto sameEntries = [](const ByRule& bx, const std::vector<rules::AclEntry>& be, size_t br,
                        const ByRule& nx, const std::vector<rules::AclEntry>& ne, size_t nr) {
    if (bx.count(br) != nx.count(nr)) return false;
    for (size_t k = 0; k < bx.count(br); ++k) {
      if (!sameEntry(be[bx.index[bx.off[br] + k]], ne[nx.index[nx.off[nr] + k]])) return false;
    }
    return true;
  };
  std::unordered_map<std::string_view, uint32_t> rank_of;
  rank_of.reserve(nn);
  for (uint32_t r = 0; r < nn; ++r) rank_of.emplace(fw.rules[r].id, r);
  // Candidates: base rules still there with the same id and entries (their new rank).
  std::vector<int32_t> cand(nb, kReplaced);
  for (uint32_t r = 0; r < nb; ++r) {
    auto it = rank_of.find(b.rules[r].id);
    if (it != rank_of.end() && sameEntries(b4, b.v4, r, n4, fw.v4, it->second) &&
        sameEntries(b6, b.v6, r, n6, fw.v6, it->second)) {
      cand[r] = static_cast<int32_t>(it->second);
    }
  }
  // Kept: the most candidates whose new ranks keep their base order (a longest increasing
  // subsequence, O(n log n)); a rule that moved past others is replaced instead.
  std::vector<uint32_t> tail;                 // tail[k]: base rank ending a run of k + 1
  std::vector<int64_t> prev_in_run(nb, -1);
  for (uint32_t r = 0; r < nb; ++r) {
    if (cand[r] == kReplaced) continue;
    auto pos = std::lower_bound(tail.begin(), tail.end(), cand[r],
                                [&](uint32_t x, int32_t v) { return cand[x] < v; });
    if (pos != tail.begin()) prev_in_run[r] = *(pos - 1);
    if (pos == tail.end()) tail.push_back(r);
    else *pos = r;
  }
  remap.assign(nb, kReplaced);
  std::vector<bool> kept(nn, false);
  for (int64_t r = tail.empty() ? int64_t{-1} : int64_t{tail.back()}; r >= 0;
       r = prev_in_run[static_cast<size_t>(r)]) {
    remap[r] = cand[r];
    kept[cand[r]] = true;
  }
  replaced = static_cast<uint32_t>(nb - tail.size());
  d4.clear();
  d6.clear();
  // A delta above a quarter of the rule set would not build much faster than all of it.
  const size_t cap = std::min<size_t>(kMaxDeltaEntries, (fw.v4.size() + fw.v6.size()) / 4);
  size_t total = 0;
  for (uint32_t r = 0; r < nn; ++r) {
    if (kept[r]) continue;
    for (size_t k = 0; k < n4.count(r); ++k) d4.push_back(fw.v4[n4.index[n4.off[r] + k]]);
    for (size_t k = 0; k < n6.count(r); ++k) d6.push_back(fw.v6[n6.index[n6.off[r] + k]]);
    total = d4.size() + d6.size();
    if (total > cap) return false;
  }
  // Kept base entries a replaced rule's entry overlaps and ranks before: the base may
  // answer with the replaced rule where one of them is the right answer.
  for (int f = 0; f < 2; ++f) {
    const std::vector<rules::AclEntry>& be = f ? b.v6 : b.v4;
    std::vector<rules::AclEntry>& out = f ? d6 : d4;
    std::vector<uint32_t> dead;
    for (const rules::AclEntry& e : be) {
      if (e.rule < nb && remap[e.rule] == kReplaced) dead.push_back(&e - be.data());
    }
    if (dead.empty()) continue;
    // Bound the scan (dead x base entries) to what a full build would cost anyway.
    if (dead.size() * be.size() > size_t{50} * 1000 * 1000) return false;
    std::vector<bool> added(be.size(), false);
    for (uint32_t x : dead) {
      const rules::AclEntry& de = be[x];
      for (uint32_t i = 0; i < be.size(); ++i) {
        const rules::AclEntry& e = be[i];
        if (added[i] || e.rule >= nb || remap[e.rule] == kReplaced || e.rank <= de.rank) {
          continue;
        }
        if (!entriesOverlap(de, e)) continue;
        added[i] = true;
        rules::AclEntry c = e;
        c.rule = c.rank = static_cast<uint32_t>(remap[e.rule]);
        out.push_back(c);
        if (++total > cap) return false;
      }
    }
  }
  return true;
}

absl::StatusOr<std::shared_ptr<const FirewallTables>> FirewallTables::build(
    std::shared_ptr<const rules::CompiledFirewall> fw, int socket_id,
    uint32_t max_context_entries, std::shared_ptr<const FirewallTables> previous, bool merge) {
  if (!fw) return absl::InvalidArgumentError("firewall: no compiled firewall");
  std::shared_ptr<FirewallTables> t(new FirewallTables());
  t->fw_ = std::move(fw);
  auto t0 = std::chrono::steady_clock::now();
  uint64_t before = dpdkHeapBytes();
  // Incremental on the full build of the tables in force, when the difference is small.
  std::vector<rules::AclEntry> d4, d6;
  if (previous) {
    std::shared_ptr<const FirewallTables> full =
        previous->merged() ? previous->merged_owner_
                           : previous->base_ ? previous->base_ : previous;
    uint32_t replaced = 0;
    if (makeDelta(*full, *t->fw_, t->remap_, d4, d6, replaced)) {
      t->base_ = std::move(full);
      t->stats_.incremental = true;
      t->stats_.delta_entries = static_cast<uint32_t>(d4.size() + d6.size());
      t->stats_.base_rules_replaced = replaced;
    } else {
      t->remap_.clear();
    }
  }
  const std::vector<rules::AclEntry>& e4 = t->base_ ? d4 : t->fw_->v4;
  const std::vector<rules::AclEntry>& e6 = t->base_ ? d6 : t->fw_->v6;
  absl::Status st = buildFamily(*t->fw_, e4, false, socket_id, max_context_entries, t->f4_,
                                &t->stats_.v4_fields);
  if (st.ok()) {
    st = buildFamily(*t->fw_, e6, true, socket_id, max_context_entries, t->f6_,
                     &t->stats_.v6_fields);
  }
  if (!st.ok()) return st;  // the destructor frees what was built
  t->stats_.v4_contexts = t->f4_.n;
  t->stats_.v6_contexts = t->f6_.n;
  t->stats_.v4_shapes = t->f4_.split != t->f4_.n;
  t->stats_.v6_shapes = t->f6_.split != t->f6_.n;
  uint64_t after = dpdkHeapBytes();
  t->stats_.bytes = after > before ? after - before : 0;
  t->stats_.build_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  t->stats_.v4_entries = static_cast<uint32_t>(t->fw_->v4.size());
  t->stats_.v6_entries = static_cast<uint32_t>(t->fw_->v6.size());
  if (t->base_ && merge) {
    FirewallTables* self = t.get();
    self->merge_thread_ = std::thread([self, socket_id, max_context_entries]() {
      auto full = build(self->fw_, socket_id, max_context_entries);
      if (!full.ok()) return;  // stays on base + delta (same answers)
      self->merged_owner_ = std::move(*full);
      self->merged_.store(self->merged_owner_.get(), std::memory_order_release);
    });
  }
  return std::shared_ptr<const FirewallTables>(std::move(t));
}

FirewallTables::~FirewallTables() {
  if (merge_thread_.joinable()) merge_thread_.join();
  for (uint32_t c = 0; c < f4_.n; ++c) rte_acl_free(f4_.ctx[c]);
  for (uint32_t c = 0; c < f6_.n; ++c) rte_acl_free(f6_.ctx[c]);
}

absl::StatusOr<std::shared_ptr<const GeoIpDb>> GeoIpDb::open(const std::string& path) {
  struct stat sb {};
  if (::stat(path.c_str(), &sb) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("firewall.geoip_database: cannot open ", path,
                                                   ": ", std::strerror(errno)));
  }
  std::shared_ptr<GeoIpDb> g(new GeoIpDb());
  g->path_ = path;
  g->db_ = std::make_unique<MMDB_s>();
  int rc = MMDB_open(path.c_str(), MMDB_MODE_MMAP, g->db_.get());
  if (rc != MMDB_SUCCESS) {
    int err = errno;
    g->db_.reset();
    return absl::InvalidArgumentError(absl::StrCat(
        "firewall.geoip_database: cannot open ", path, " as a MaxMind database: ",
        MMDB_strerror(rc), rc == MMDB_IO_ERROR ? absl::StrCat(" (", std::strerror(err), ")") : ""));
  }
  g->dev_ = sb.st_dev;
  g->ino_ = sb.st_ino;
  g->size_ = sb.st_size;
  g->mtime_ = sb.st_mtim;
  return std::shared_ptr<const GeoIpDb>(std::move(g));
}

GeoIpDb::~GeoIpDb() {
  if (db_) MMDB_close(db_.get());
}

bool GeoIpDb::sameFile(const std::string& path) const {
  if (path != path_) return false;
  struct stat sb {};
  if (::stat(path.c_str(), &sb) != 0) return false;
  return sb.st_dev == dev_ && sb.st_ino == ino_ && sb.st_size == size_ &&
         sb.st_mtim.tv_sec == mtime_.tv_sec && sb.st_mtim.tv_nsec == mtime_.tv_nsec;
}

bool GeoIpDb::country(const IpAddr& a, bool v6, char cc[2]) const {
  cc[0] = cc[1] = 0;
  sockaddr_in s4{};
  sockaddr_in6 s6{};
  const sockaddr* sa;
  if (v6) {
    s6.sin6_family = AF_INET6;
    std::memcpy(&s6.sin6_addr, a.b, 16);
    sa = reinterpret_cast<const sockaddr*>(&s6);
  } else {
    s4.sin_family = AF_INET;
    std::memcpy(&s4.sin_addr, a.b, 4);
    sa = reinterpret_cast<const sockaddr*>(&s4);
  }
  int err = MMDB_SUCCESS;
  MMDB_lookup_result_s r = MMDB_lookup_sockaddr(db_.get(), sa, &err);
  if (err != MMDB_SUCCESS || !r.found_entry) return false;
  // MMDB_aget_value, not MMDB_get_value: the varargs form allocates the path array.
  static const char* const kPath[] = {"country", "iso_code", nullptr};
  MMDB_entry_data_s d{};
  if (MMDB_aget_value(&r.entry, &d, kPath) != MMDB_SUCCESS || !d.has_data ||
      d.type != MMDB_DATA_TYPE_UTF8_STRING || d.data_size != 2) {
    return false;
  }
  char c0 = d.utf8_string[0], c1 = d.utf8_string[1];
  if (c0 < 'A' || c0 > 'Z' || c1 < 'A' || c1 > 'Z') return false;
  cc[0] = c0;
  cc[1] = c1;
  return true;
}

uint16_t buildTcpReset(const uint8_t* frame, uint32_t frame_len, const PacketMeta& m,
                       bool to_sender, uint8_t* out, uint32_t cap) {
  if (m.l3 == L3Type::kNone || m.l4_proto != 6 || !m.has_l4) return 0;
  if (m.tcp_flags & kTcpRst) return 0;  // never answer a reset (RFC 793)
  bool has_ack = (m.tcp_flags & kTcpAck) != 0;
  if (!to_sender && !has_ack) return 0;
  bool v6 = m.l3 == L3Type::kIpv6;
  uint16_t l2 = m.l3_offset;
  uint32_t len = l2 + (v6 ? 40u : 20u) + 20u;
  if (l2 < 14 || l2 > frame_len || len > cap) return 0;
  if (!mayAnswer(frame, m)) return 0;

  uint32_t seq, ack = 0;
  uint8_t flags;
  if (!to_sender) {
    seq = m.tcp_seq;
    ack = m.tcp_ack;
    flags = kTcpRst | kTcpAck;
  } else if (has_ack) {
    seq = m.tcp_ack;
    flags = kTcpRst;
  } else {
    uint32_t seg_len = m.payload_len + ((m.tcp_flags & kTcpSyn) ? 1u : 0u) +
                       ((m.tcp_flags & kTcpFin) ? 1u : 0u);
    seq = 0;
    ack = m.tcp_seq + seg_len;
    flags = kTcpRst | kTcpAck;
  }
  const IpAddr& src = to_sender ? m.dst : m.src;
  const IpAddr& dst = to_sender ? m.src : m.dst;
  copyL2(frame, m, to_sender, len - l2, out);
  uint8_t* ip = out + l2;
  uint16_t iph = writeIpHeader(ip, v6, src, dst, 6, 20, 0);
  uint8_t* tcp = ip + iph;
  put16(tcp, to_sender ? m.dport : m.sport);
  put16(tcp + 2, to_sender ? m.sport : m.dport);
  put32(tcp + 4, seq);
  put32(tcp + 8, ack);
  tcp[12] = 5 << 4;
  tcp[13] = flags;
  put16(tcp + 14, 0);  // window
  put16(tcp + 16, 0);  // checksum
  put16(tcp + 18, 0);  // urgent pointer
  put16(tcp + 16, finish(sum16(tcp, 20, pseudoSum(v6, src, dst, 6, 20))));
  sealTunnel(out, len, m);
  return static_cast<uint16_t>(len);
}

uint16_t buildIcmpUnreachable(const uint8_t* frame, uint32_t frame_len, const PacketMeta& m,
                              uint8_t* out, uint32_t cap) {
  if (m.l3 == L3Type::kNone || m.isLaterFragment()) return 0;
  uint16_t l2 = m.l3_offset;
  if (l2 < 14 || l2 >= frame_len) return 0;
  if (!mayAnswer(frame, m)) return 0;
  bool v6 = m.l3 == L3Type::kIpv6;
  uint32_t avail = std::min<uint32_t>(m.l3_len, frame_len - l2);
  uint32_t quote, ip_len;
  if (!v6) {
    if (m.l4_proto == 1) {
      // About an ICMP error message: never. An ICMP packet whose type is unknown (cut
      // first fragment) is treated the same.
      uint8_t t = m.icmp_type;
      if (!m.has_l4 || t == 3 || t == 4 || t == 5 || t == 11 || t == 12) return 0;
    }
    quote = std::min<uint32_t>(avail, 576 - 20 - 8);
    ip_len = 20;
  } else {
    if (m.l4_proto == 58 && (!m.has_l4 || m.icmp_type < 128)) return 0;
    quote = std::min<uint32_t>(avail, 1280 - 40 - 8);
    ip_len = 40;
  }
  uint32_t len = l2 + ip_len + 8 + quote;
  if (len > cap) return 0;
  copyL2(frame, m, true, len - l2, out);
  uint8_t* ip = out + l2;
  uint16_t l4_len = static_cast<uint16_t>(8 + quote);
  // The response comes from the packet's destination (the appliance is transparent).
  writeIpHeader(ip, v6, m.dst, m.src, v6 ? 58 : 1, l4_len, v6 ? 0 : 0xc0);
  uint8_t* icmp = ip + ip_len;
  icmp[0] = v6 ? 1 : 3;   // destination unreachable
  icmp[1] = v6 ? 1 : 13;  // administratively prohibited
  put16(icmp + 2, 0);
  put32(icmp + 4, 0);
  std::memcpy(icmp + 8, frame + l2, quote);
  uint32_t s = v6 ? pseudoSum(true, m.dst, m.src, 58, l4_len) : 0;
  put16(icmp + 2, finish(sum16(icmp, l4_len, s)));
  sealTunnel(out, len, m);
  return static_cast<uint16_t>(len);
}

}  // namespace dpu::dp
