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

}  // namespace

FragKey makeFragKey(const PacketMeta& m) {
  FragKey k;
  std::memset(&k, 0, sizeof(k));
  std::memcpy(k.src.b, m.src.b, 16);
  std::memcpy(k.dst.b, m.dst.b, 16);
  k.id = m.frag_id;
  k.vlan = m.vlan_outer;
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
  for (size_t i = 0; i < slots; ++i) {
    Entry* e = new (&t->entries_[i]) Entry{};
    e->ranges = t->range_store_ + i * opts.max_fragments;
  }
  t->capacity_ = entries;
  return t;
}

FragTracker::~FragTracker() {
  rte_free(pending_);
  rte_free(range_store_);
  rte_free(entries_);
  rte_hash_free(hash_);
}

FragAction FragTracker::observe(const PacketMeta& m, uint64_t now_ns, int32_t* slot) {
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
  if (begin == 0 && e.first_seen) return FragAction::kDuplicateFirst;
  for (uint32_t i = 0; i < e.nfrags; ++i) {
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

  e.ranges[e.nfrags++] = Range{static_cast<uint16_t>(begin), static_cast<uint16_t>(end)};
  e.bytes_seen += end - begin;
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
  if (!e.in_use || e.nheld >= kMaxHeldPerDatagram) return false;
  e.held[e.nheld++] = pkt;
  return true;
}

uint32_t FragTracker::releaseHeld(int32_t slot, void** out) {
  Entry& e = entries_[slot];
  uint32_t n = e.nheld;
  for (uint32_t i = 0; i < n; ++i) out[i] = e.held[i];
  e.nheld = 0;
  if (e.in_use) markIfComplete(slot);
  return n;
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
  e.nheld = 0;
  --size_;
}

}  // namespace dpu::dp
