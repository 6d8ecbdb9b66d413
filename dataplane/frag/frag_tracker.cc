// Per-worker IP fragment tracker on rte_hash. See frag_tracker.h.
#include "dataplane/frag/frag_tracker.h"

#include <rte_errno.h>
#include <rte_hash.h>
#include <rte_hash_crc.h>
#include <rte_malloc.h>
#include <rte_memory.h>
#include <rte_ring_core.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dataplane/port/eal.h"

namespace dpu::dp {

namespace {

constexpr uint32_t kMaxDatagrams = 1u << 22;
// A fragment carries at least 8 bytes (except the last), so no datagram of 65535 bytes
// has more fragments than this.
constexpr uint16_t kMaxFragmentsLimit = 8192;
constexpr uint32_t kMinHashEntries = 8;  // one rte_hash bucket (RTE_HASH_BUCKET_ENTRIES)
// rte_hash names its rings "HT_<name>" and "HT_EXT_<name>", truncated silently to
// RTE_RING_NAMESIZE - 1 characters; refuse names that would be truncated.
constexpr size_t kMaxNameLen = RTE_RING_NAMESIZE - 1 - (sizeof("HT_EXT_") - 1);
constexpr uint32_t kHashInitVal = 0x7f4a7c15u;
constexpr uint32_t kMaxIpPayloadEnd = 65535;
constexpr uint32_t kMaxHeldLimit = 1u << 22;

}  // namespace

FragKey makeFragKey(const PacketMeta& m) {
  FragKey k;
  std::memset(&k, 0, sizeof(k));
  std::memcpy(k.src.b, m.src.b, 16);
  std::memcpy(k.dst.b, m.dst.b, 16);
  k.id = m.frag_id;
  k.vlan = m.vlan_outer;
  k.vlan_inner = m.vlan_inner;
  k.pppoe_session = m.pppoe_offset != 0 ? m.pppoe_session : 0;
  k.tunnel_id = m.tunnel_id;
  // RFC 791 keys IPv4 reassembly on the protocol too; RFC 8200 keys IPv6 on (src, dst, id)
  // only, and a later IPv6 fragment cannot tell which transport the first one carries.
  k.proto = m.l3 == L3Type::kIpv4 ? m.l4_proto : 0;
  k.ip_ver = static_cast<uint8_t>(m.l3);
  return k;
}

absl::StatusOr<std::unique_ptr<FragTracker>> FragTracker::create(const FragOptions& opts) {
  if (opts.name.empty() || opts.name.size() > kMaxNameLen) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fragment tracker name '", opts.name, "' must be 1..", kMaxNameLen, " characters"));
  }
  if (opts.max_datagrams == 0 || opts.max_datagrams > kMaxDatagrams) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fragment tracker '", opts.name, "': max_datagrams ", opts.max_datagrams,
        " out of range [1, ", kMaxDatagrams, "]"));
  }
  if (opts.max_fragments == 0 || opts.max_fragments > kMaxFragmentsLimit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fragment tracker '", opts.name, "': max_fragments ", opts.max_fragments,
        " out of range [1, ", kMaxFragmentsLimit, "]"));
  }
  if (opts.timeout_ns == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("fragment tracker '", opts.name, "': timeout_ns must be > 0"));
  }
  if (opts.max_held == 0 || opts.max_held > kMaxHeldLimit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fragment tracker '", opts.name, "': max_held ", opts.max_held, " out of range [1, ",
        kMaxHeldLimit, "]"));
  }
  uint32_t entries = opts.max_datagrams < kMinHashEntries ? kMinHashEntries : opts.max_datagrams;

  rte_hash_parameters params{};
  params.name = opts.name.c_str();
  params.entries = entries;
  params.key_len = sizeof(FragKey);
  params.hash_func = rte_hash_crc;
  params.hash_func_init_val = kHashInitVal;
  params.socket_id = opts.socket_id < 0 ? SOCKET_ID_ANY : opts.socket_id;
  // Single-threaded: no concurrency flags (deletes free the slot at once). The extendable
  // bucket table lets every insert succeed below `entries`.
  params.extra_flag = RTE_HASH_EXTRA_FLAGS_EXT_TABLE;

  std::unique_ptr<FragTracker> t(new FragTracker());
  t->opts_ = opts;
  t->hash_ = rte_hash_create(&params);
  if (t->hash_ == nullptr) {
    int err = rte_errno;
    std::string msg = absl::StrCat("fragment tracker '", opts.name,
                                   "': rte_hash_create(entries=", entries,
                                   ") failed: ", rte_strerror(err));
    if (err == EEXIST || err == EINVAL || err == ENAMETOOLONG) {
      return absl::InvalidArgumentError(msg);
    }
    return absl::ResourceExhaustedError(msg);
  }
  int32_t max_key_id = rte_hash_max_key_id(t->hash_);
  if (max_key_id < 0) {
    return absl::InternalError(absl::StrCat("fragment tracker '", opts.name,
                                            "': rte_hash_max_key_id failed: ",
                                            rte_strerror(-max_key_id)));
  }
  size_t slots = static_cast<size_t>(max_key_id) + 1;
  t->entries_ = static_cast<Entry*>(rte_zmalloc_socket(
      "frag_entries", slots * sizeof(Entry), RTE_CACHE_LINE_SIZE, params.socket_id));
  if (t->entries_ == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "fragment tracker '", opts.name, "': cannot allocate ", slots * sizeof(Entry),
        " bytes for ", slots, " datagram entries: ", rte_strerror(rte_errno)));
  }
  size_t nranges = slots * opts.max_fragments;
  t->range_store_ = static_cast<Range*>(rte_zmalloc_socket(
      "frag_ranges", nranges * sizeof(Range), RTE_CACHE_LINE_SIZE, params.socket_id));
  if (t->range_store_ == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "fragment tracker '", opts.name, "': cannot allocate ", nranges * sizeof(Range),
        " bytes for fragment ranges: ", rte_strerror(rte_errno)));
  }
  t->pending_ = static_cast<uint32_t*>(rte_zmalloc_socket(
      "frag_pending", slots * sizeof(uint32_t), RTE_CACHE_LINE_SIZE, params.socket_id));
  if (t->pending_ == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "fragment tracker '", opts.name, "': cannot allocate the completion queue: ",
        rte_strerror(rte_errno)));
  }
  t->held_pkt_ = static_cast<void**>(rte_zmalloc_socket(
      "frag_held", size_t(opts.max_held) * sizeof(void*), RTE_CACHE_LINE_SIZE, params.socket_id));
  t->held_next_ = static_cast<uint32_t*>(rte_zmalloc_socket(
      "frag_held_next", size_t(opts.max_held) * sizeof(uint32_t), RTE_CACHE_LINE_SIZE,
      params.socket_id));
  if (t->held_pkt_ == nullptr || t->held_next_ == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "fragment tracker '", opts.name, "': cannot allocate the pool of ", opts.max_held,
        " held fragments: ", rte_strerror(rte_errno)));
  }
  for (uint32_t h = 0; h < opts.max_held; ++h) {
    t->held_next_[h] = h + 1 < opts.max_held ? h + 1 : kNoHeld;
  }
  t->held_free_ = 0;
  for (size_t i = 0; i < slots; ++i) {
    Entry* e = new (&t->entries_[i]) Entry{};
    e->ranges = t->range_store_ + i * opts.max_fragments;
    e->held_head = e->held_tail = kNoHeld;
  }
  t->capacity_ = entries;
  return t;
}

FragTracker::~FragTracker() {
  if (dpdkHeapLeftToExit()) return;  // the process is exiting (eal.h)
  rte_free(held_next_);
  rte_free(held_pkt_);
  rte_free(pending_);
  rte_free(range_store_);
  rte_free(entries_);
  rte_hash_free(hash_);
}

FragAction FragTracker::observe(const PacketMeta& m, uint64_t now_ns, int32_t* slot,
                                bool reassemble) {
  *slot = -1;
  const FragKey key = makeFragKey(m);
  int32_t p = rte_hash_lookup(hash_, &key);
  const uint32_t begin = m.frag_offset;
  const uint32_t end = begin + m.frag_payload_len;
  if (m.frag_payload_len == 0 || end > kMaxIpPayloadEnd) {
    if (p >= 0) *slot = p;
    return FragAction::kOverlap;
  }

  if (p < 0) {
    if (size_ >= capacity_) return FragAction::kTableFull;
    p = rte_hash_add_key(hash_, &key);
    if (p < 0) return FragAction::kTableFull;
    if (static_cast<uint32_t>(p) >= capacity_) {  // impossible without lcore caches
      rte_hash_del_key(hash_, &key);
      return FragAction::kTableFull;
    }
    Entry& n = entries_[p];
    n.last_seen_ns = now_ns;
    n.verdict = FragVerdict{};
    n.in_use = true;
    n.reasm = reassemble;
    n.buf = nullptr;
    n.nranges = 0;
    n.held_head = n.held_tail = kNoHeld;
    n.judged = false;
    n.first_seen = false;
    n.last_seen = false;
    n.complete = false;
    n.total_len = 0;
    n.max_end = 0;
    n.bytes_seen = 0;
    n.nfrags = 0;
    n.nheld = 0;
    ++size_;
  }

  Entry& e = entries_[p];
  *slot = p;
  if (e.reasm && !e.judged) return FragAction::kReassemble;
  if (begin == 0 && e.first_seen) return FragAction::kDuplicateFirst;
  for (uint32_t i = 0; i < e.nranges; ++i) {
    const Range& r = e.ranges[i];
    if (begin < r.end && r.begin < end) return FragAction::kOverlap;
  }
  if (!m.more_fragments) {
    // A second last fragment, or a last fragment ending before data already seen.
    if (e.last_seen || end < e.max_end) return FragAction::kOverlap;
  } else if (e.last_seen && end > e.total_len) {
    return FragAction::kOverlap;  // data past the end of the datagram
  }
  if (e.nfrags >= opts_.max_fragments) return FragAction::kTooMany;

  ++e.nfrags;
  addRange(e, begin, end);
  if (end > e.max_end) e.max_end = static_cast<uint16_t>(end);
  if (!m.more_fragments) {
    e.last_seen = true;
    e.total_len = static_cast<uint16_t>(end);
  }
  e.last_seen_ns = now_ns;

  if (e.judged) {  // judged by an earlier first fragment, or by a policy verdict
    if (begin == 0) e.first_seen = true;
    markIfComplete(p);
    return FragAction::kApply;
  }
  if (begin == 0) {
    e.first_seen = true;
    return FragAction::kJudge;
  }
  return FragAction::kHold;
}

void FragTracker::addRange(Entry& e, uint32_t begin, uint32_t end) {
  // Keeps ranges sorted and disjoint (touching ranges merged); bytes_seen counts each
  // byte once.
  uint32_t i = 0;
  while (i < e.nranges && e.ranges[i].end < begin) ++i;
  uint32_t j = i;
  uint32_t b = begin, en = end, covered = 0;
  while (j < e.nranges && e.ranges[j].begin <= end) {
    const Range& r = e.ranges[j];
    uint32_t lo = r.begin > begin ? r.begin : begin;
    uint32_t hi = r.end < end ? r.end : end;
    if (hi > lo) covered += hi - lo;
    if (r.begin < b) b = r.begin;
    if (r.end > en) en = r.end;
    ++j;
  }
  e.bytes_seen += (end - begin) - covered;
  const uint32_t merged = j - i;  // ranges replaced by the one at i
  if (merged == 0) {
    for (uint32_t k = e.nranges; k > i; --k) e.ranges[k] = e.ranges[k - 1];
    ++e.nranges;
  } else if (merged > 1) {
    for (uint32_t k = j; k < e.nranges; ++k) e.ranges[k - merged + 1] = e.ranges[k];
    e.nranges = static_cast<uint16_t>(e.nranges - merged + 1);
  }
  e.ranges[i] = Range{static_cast<uint16_t>(b), static_cast<uint16_t>(en)};
}

bool FragTracker::record(int32_t slot, const PacketMeta& m, uint64_t now_ns) {
  Entry& e = entries_[slot];
  const uint32_t begin = m.frag_offset;
  const uint32_t end = begin + m.frag_payload_len;
  ++e.nfrags;
  addRange(e, begin, end);
  if (end > e.max_end) e.max_end = static_cast<uint16_t>(end);
  if (begin == 0) e.first_seen = true;
  if (!m.more_fragments) {
    e.last_seen = true;
    e.total_len = static_cast<uint16_t>(end);
  }
  e.last_seen_ns = now_ns;
  return e.first_seen && e.last_seen && e.bytes_seen == e.total_len;
}

FragProgress FragTracker::progress(int32_t slot) const {
  const Entry& e = entries_[slot];
  return FragProgress{e.first_seen, e.last_seen, e.total_len, e.max_end,
                      e.nfrags,     e.bytes_seen, e.nheld};
}

void FragTracker::setFirstFragmentMode(int32_t slot) {
  Entry& e = entries_[slot];
  e.reasm = false;
  if (e.buf != nullptr && opts_.release_buffer != nullptr) opts_.release_buffer(e.buf);
  e.buf = nullptr;
}

bool FragTracker::unhold(int32_t slot, void* pkt) {
  Entry& e = entries_[slot];
  uint32_t prev = kNoHeld;
  for (uint32_t h = e.held_head; h != kNoHeld; prev = h, h = held_next_[h]) {
    if (held_pkt_[h] != pkt) continue;
    const uint32_t next = held_next_[h];
    if (prev == kNoHeld) {
      e.held_head = next;
    } else {
      held_next_[prev] = next;
    }
    if (e.held_tail == h) e.held_tail = prev;
    held_next_[h] = held_free_;
    held_free_ = h;
    --held_used_;
    --e.nheld;
    return true;
  }
  return false;
}

void FragTracker::setVerdict(int32_t slot, const FragVerdict& v) {
  Entry& e = entries_[slot];
  if (!e.in_use) return;
  e.verdict = v;
  e.judged = true;
  markIfComplete(slot);
}

int32_t FragTracker::find(const PacketMeta& m) const {
  const FragKey key = makeFragKey(m);
  int32_t p = rte_hash_lookup(hash_, &key);
  return p >= 0 ? p : -1;
}

const FragVerdict& FragTracker::verdictOf(int32_t slot) const { return entries_[slot].verdict; }

bool FragTracker::hold(int32_t slot, void* pkt) {
  Entry& e = entries_[slot];
  if (!e.in_use || (!e.reasm && e.nheld >= kMaxHeldPerDatagram) || held_free_ == kNoHeld) {
    return false;
  }
  const uint32_t h = held_free_;
  held_free_ = held_next_[h];
  ++held_used_;
  held_pkt_[h] = pkt;
  held_next_[h] = kNoHeld;
  if (e.held_tail == kNoHeld) {
    e.held_head = h;
  } else {
    held_next_[e.held_tail] = h;
  }
  e.held_tail = h;
  ++e.nheld;
  return true;
}

uint32_t FragTracker::releaseHeld(int32_t slot, void** out) {
  uint32_t n = 0;
  return releaseHeldTo(slot, [&](void* p) {
    if (n < kMaxHeldPerDatagram) out[n] = p;
    ++n;
  });
}

void FragTracker::markIfComplete(int32_t slot) {
  Entry& e = entries_[slot];
  // Recorded ranges never overlap and all lie in [0, total_len), so bytes_seen equal to
  // total_len means the datagram is covered. Each datagram is queued at most once, so
  // the queue (capacity_ long) cannot overflow.
  if (!e.complete && e.judged && e.last_seen && e.nheld == 0 && e.bytes_seen == e.total_len) {
    e.complete = true;
    pending_[npending_++] = static_cast<uint32_t>(slot);
  }
}

void FragTracker::removeCompleted() {
  for (uint32_t i = 0; i < npending_; ++i) {
    int32_t slot = static_cast<int32_t>(pending_[i]);
    const Entry& e = entries_[slot];
    if (e.in_use && e.complete) removeSlot(slot);
  }
  npending_ = 0;
}

void FragTracker::removeSlot(int32_t slot) {
  Entry& e = entries_[slot];
  if (!e.in_use) return;
  void* stored = nullptr;
  if (rte_hash_get_key_with_position(hash_, slot, &stored) == 0) {
    FragKey k;
    std::memcpy(&k, stored, sizeof(k));  // copy out of the key store before it is freed
    rte_hash_del_key(hash_, &k);
  }
  if (e.buf != nullptr && opts_.release_buffer != nullptr) opts_.release_buffer(e.buf);
  e.buf = nullptr;
  e.reasm = false;
  e.nranges = 0;
  // The verdict stays readable until observe() hands the slot to a new datagram.
  e.in_use = false;
  e.complete = false;
  e.judged = false;
  e.first_seen = false;
  e.last_seen = false;
  e.total_len = 0;
  e.max_end = 0;
  e.bytes_seen = 0;
  e.nfrags = 0;
  --size_;
}

}  // namespace dpu::dp
