// Per-worker flow table on rte_hash. See flow_table.h.
#include "dataplane/flow/flow_table.h"

#include <rte_errno.h>
#include <rte_hash.h>
#include <rte_hash_crc.h>
#include <rte_malloc.h>
#include <rte_memory.h>
#include <rte_ring_core.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dataplane/port/eal.h"

namespace dpu::dp {

namespace {

constexpr uint32_t kMaxFlowCapacity = 64u << 20;
// Smallest table rte_hash accepts (one bucket of RTE_HASH_BUCKET_ENTRIES, a private
// constant of rte_cuckoo_hash.h).
constexpr uint32_t kMinHashEntries = 8;
// rte_hash derives two ring names from the table name: "HT_<name>" and "HT_EXT_<name>",
// and truncates them silently to RTE_RING_NAMESIZE - 1 characters. Longer names could
// collide after truncation, so they are refused.
constexpr size_t kMaxNameLen = RTE_RING_NAMESIZE - 1 - (sizeof("HT_EXT_") - 1);

}  // namespace

absl::StatusOr<std::unique_ptr<FlowTable>> FlowTable::create(const FlowTableOptions& opts) {
  if (opts.capacity == 0 || opts.capacity > kMaxFlowCapacity) {
    return absl::InvalidArgumentError(absl::StrCat("flow table '", opts.name, "': capacity ",
                                                   opts.capacity, " out of range [1, ",
                                                   kMaxFlowCapacity, "]"));
  }
  if (opts.name.empty() || opts.name.size() > kMaxNameLen) {
    return absl::InvalidArgumentError(absl::StrCat("flow table name '", opts.name,
                                                   "' must be 1..", kMaxNameLen, " characters"));
  }
  uint32_t entries = opts.capacity < kMinHashEntries ? kMinHashEntries : opts.capacity;

  rte_hash_parameters params{};
  params.name = opts.name.c_str();
  params.entries = entries;
  params.key_len = sizeof(FlowKey);
  params.hash_func = rte_hash_crc;
  params.hash_func_init_val = kHashInitVal;
  params.socket_id = opts.socket_id < 0 ? SOCKET_ID_ANY : opts.socket_id;
  // Single writer and reader (the owning worker): no RW-concurrency or multi-writer flags,
  // so deletes free the key slot at once and no lcore-local free-slot caches exist. The
  // extendable bucket table makes every insert succeed while fewer than `entries` keys
  // are stored.
  params.extra_flag = RTE_HASH_EXTRA_FLAGS_EXT_TABLE;

  std::unique_ptr<FlowTable> t(new FlowTable());
  t->hash_ = rte_hash_create(&params);
  if (t->hash_ == nullptr) {
    int err = rte_errno;
    std::string msg = absl::StrCat("flow table '", opts.name, "': rte_hash_create(entries=",
                                   entries, ") failed: ", rte_strerror(err));
    if (err == EEXIST || err == EINVAL || err == ENAMETOOLONG) {
      return absl::InvalidArgumentError(msg);
    }
    return absl::ResourceExhaustedError(msg);
  }
  // Positions returned by rte_hash_add_key are in [0, max_key_id]; without lcore caches
  // they are in fact < entries, which is what capacity() promises. The array covers the
  // whole documented range anyway.
  int32_t max_key_id = rte_hash_max_key_id(t->hash_);
  if (max_key_id < 0) {
    return absl::InternalError(absl::StrCat("flow table '", opts.name,
                                            "': rte_hash_max_key_id failed: ",
                                            rte_strerror(-max_key_id)));
  }
  size_t slots = static_cast<size_t>(max_key_id) + 1;
  t->entries_ = static_cast<FlowEntry*>(rte_zmalloc_socket(
      "flow_entries", slots * sizeof(FlowEntry), RTE_CACHE_LINE_SIZE, params.socket_id));
  if (t->entries_ == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "flow table '", opts.name, "': cannot allocate ", slots * sizeof(FlowEntry),
        " bytes for ", slots, " flow entries: ", rte_strerror(rte_errno)));
  }
  t->cold_ = static_cast<FlowCold*>(rte_zmalloc_socket(
      "flow_cold", slots * sizeof(FlowCold), RTE_CACHE_LINE_SIZE, params.socket_id));
  if (t->cold_ == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "flow table '", opts.name, "': cannot allocate ", slots * sizeof(FlowCold),
        " bytes for ", slots, " cold flow entries: ", rte_strerror(rte_errno)));
  }
  t->used_ = static_cast<uint64_t*>(rte_zmalloc_socket(
      "flow_used", (slots + 63) / 64 * sizeof(uint64_t), RTE_CACHE_LINE_SIZE,
      params.socket_id));
  if (t->used_ == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "flow table '", opts.name, "': cannot allocate the occupancy bitmap for ", slots,
        " flows: ", rte_strerror(rte_errno)));
  }
  t->capacity_ = entries;
  return t;
}

FlowTable::~FlowTable() {
  if (dpdkHeapLeftToExit()) return;  // the process is exiting (eal.h)
  rte_free(used_);
  rte_free(cold_);
  rte_free(entries_);
  rte_hash_free(hash_);
}

void FlowTable::lookupBurst(const FlowKey* const* keys, uint32_t n, int32_t* pos) const {
  if (n == 0) return;
  // rte_hash_lookup_bulk takes `const void**`; it only reads the keys.
  int rc = rte_hash_lookup_bulk(hash_, const_cast<const void**>(
                                           reinterpret_cast<const void* const*>(keys)),
                                n, pos);
  if (rc < 0) {  // n > RTE_HASH_LOOKUP_BULK_MAX: caller bug; report all misses
    for (uint32_t i = 0; i < n; ++i) pos[i] = -1;
    return;
  }
  for (uint32_t i = 0; i < n; ++i) {
    if (pos[i] < 0) pos[i] = -1;
  }
}

void FlowTable::lookupBurstWithHash(const FlowKey* const* keys, const uint32_t* sigs,
                                    uint32_t n, int32_t* pos) const {
  if (n == 0) return;
  int rc = rte_hash_lookup_with_hash_bulk(
      hash_, const_cast<const void**>(reinterpret_cast<const void* const*>(keys)),
      const_cast<hash_sig_t*>(sigs), n, pos);
  if (rc < 0) {  // n > RTE_HASH_LOOKUP_BULK_MAX: caller bug; report all misses
    for (uint32_t i = 0; i < n; ++i) pos[i] = -1;
    return;
  }
  for (uint32_t i = 0; i < n; ++i) {
    if (pos[i] < 0) pos[i] = -1;
  }
}

int32_t FlowTable::lookup(const FlowKey& key) const {
  int32_t p = rte_hash_lookup(hash_, &key);
  return p < 0 ? -1 : p;
}

int32_t FlowTable::lookupWithHash(const FlowKey& key, uint32_t sig) const {
  int32_t p = rte_hash_lookup_with_hash(hash_, &key, sig);
  return p < 0 ? -1 : p;
}

int32_t FlowTable::insertWithHash(const FlowKey& key, uint32_t sig, uint64_t now_ns) {
  if (size_ >= capacity_) return -1;
  int32_t p = rte_hash_add_key_with_hash(hash_, &key, sig);
  if (p < 0) return -1;
  if (static_cast<uint32_t>(p) >= capacity_) {
    // Cannot happen without lcore caches; keep positions within capacity() regardless,
    // since callers size side arrays by it.
    rte_hash_del_key_with_hash(hash_, &key, sig);
    return -1;
  }
  FlowEntry& e = entries_[p];
  if (e.flags & kFlowInUse) return p;  // key already present: leave the flow as it is
  std::memset(&e, 0, sizeof(e));
  std::memset(&cold_[p], 0, sizeof(FlowCold));
  cold_[p].first_seen_ns = now_ns;
  e.last_seen_ns = now_ns;
  e.rule = ~0u;
  e.backend = 0xffff;
  e.proto = key.proto;
  e.flags = kFlowInUse;
  used_[static_cast<uint32_t>(p) >> 6] |= uint64_t{1} << (p & 63);
  ++size_;
  return p;
}

const FlowKey* FlowTable::keyAt(int32_t pos) const {
  void* k = nullptr;
  if (pos < 0 || rte_hash_get_key_with_position(hash_, pos, &k) != 0) return nullptr;
  return static_cast<const FlowKey*>(k);
}

void FlowTable::remove(int32_t pos) {
  if (pos < 0 || static_cast<uint32_t>(pos) >= capacity_) return;
  FlowEntry& e = entries_[pos];
  if (!(e.flags & kFlowInUse)) return;
  const FlowKey* stored = keyAt(pos);
  if (stored != nullptr) {
    FlowKey k = *stored;  // copy out of the key store before the slot is freed
    rte_hash_del_key(hash_, &k);
  }
  std::memset(&e, 0, sizeof(e));
  used_[static_cast<uint32_t>(pos) >> 6] &= ~(uint64_t{1} << (pos & 63));
  --size_;
}

}  // namespace dpu::dp
