// Per-worker flow table on DPDK rte_hash. Owned and used by exactly one worker
// lcore: no locks, no allocation after create(). Entries live in an array indexed by
// the rte_hash key position, so the hot per-flow state is one cache line.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include <rte_hash_crc.h>

#include "absl/status/statusor.h"
#include "dataplane/flow/flow_key.h"
#include "dataplane/flow/tcp_state.h"
#include "dataplane/packet/packet_meta.h"

struct rte_hash;

namespace dpu::dp {

// Idle timeouts in nanoseconds, per protocol / TCP state.
struct FlowTimeouts {
  uint64_t tcp_syn_ns = 60ull * 1000000000ull;
  uint64_t tcp_established_ns = 7200ull * 1000000000ull;
  uint64_t tcp_closing_ns = 120ull * 1000000000ull;
  uint64_t tcp_closed_ns = 10ull * 1000000000ull;
  uint64_t udp_ns = 120ull * 1000000000ull;
  uint64_t icmp_ns = 30ull * 1000000000ull;
  uint64_t other_ns = 120ull * 1000000000ull;
};

// Flow flags.
constexpr uint8_t kFlowInitiatorIsHi = 0x01;  // the first packet came from the key's hi endpoint
constexpr uint8_t kFlowMidstream = 0x02;      // TCP picked up without a SYN
constexpr uint8_t kFlowFinOrig = 0x04;        // initiator sent FIN
constexpr uint8_t kFlowFinReply = 0x08;       // responder sent FIN
constexpr uint8_t kFlowInitiatorSideB = 0x10; // the first packet arrived on side B
constexpr uint8_t kFlowNoLb = 0x20;           // created while no LB service existed: never balanced
constexpr uint8_t kFlowInUse = 0x80;

// Hot per-flow state: exactly one cache line. Direction index 0 = initiator -> responder
// ("orig"), 1 = responder -> initiator ("reply").
struct alignas(64) FlowEntry {
  uint64_t last_seen_ns;
  uint64_t packets[2];
  uint64_t bytes[2];
  uint32_t generation;   // snapshot generation whose verdict is cached below
  uint32_t rule;         // rule index (in that snapshot) of the cached verdict, ~0u = none
  uint32_t flow_seq;     // per-worker creation number, set by the caller (flow id in events)
  uint16_t backend;      // load-balancer backend index, 0xffff = none
  uint8_t verdict;       // cached Verdict (dataplane/pipeline/verdict.h), 0 = not decided
  uint8_t stage;         // stage that decided the cached verdict
  uint8_t proto;         // IPPROTO_* (copied from the key, used for timeouts)
  TcpState tcp_state;
  uint8_t flags;         // kFlow*
  uint8_t reserved[5];
};
static_assert(sizeof(FlowEntry) == 64, "FlowEntry is one cache line");

// Per-flow state that no per-packet path touches: read and written when a flow starts,
// is (re)classified or ends. Same positions as FlowEntry, separate array.
struct FlowCold {
  uint64_t first_seen_ns;
  char src_country[2];   // ISO 3166 alpha-2 of the initiator's address ("\0\0" = unknown /
  char dst_country[2];   // not looked up); snapshot-independent, so kept across reloads
  uint8_t countries_known;  // 1 once the GeoIP lookup was done for this flow
  uint8_t reserved[3];
};
static_assert(sizeof(FlowCold) == 16, "FlowCold is 16 bytes");

// TCP state transition for one packet with `tcp_flags` travelling in direction `dir`
// (0 = from initiator). Updates e.tcp_state and the FIN flags. Pure logic, exposed for tests.
void tcpAdvance(FlowEntry& e, uint8_t tcp_flags, int dir);

// Idle timeout that applies to an entry in its current state.
uint64_t flowTimeout(const FlowEntry& e, const FlowTimeouts& t);

struct FlowTableOptions {
  std::string name = "flows";   // unique per process (rte_hash names are global)
  uint32_t capacity = 1u << 20; // flows this table must hold
  int socket_id = -1;           // NUMA socket (-1 = any)
};

class FlowTable {
 public:
  static absl::StatusOr<std::unique_ptr<FlowTable>> create(const FlowTableOptions& opts);
  ~FlowTable();
  FlowTable(const FlowTable&) = delete;
  FlowTable& operator=(const FlowTable&) = delete;

  // The table's hash of `key` (what rte_hash computes itself: rte_hash_crc over the 48
  // bytes with the table's seed), inline, so a caller can compute it once per packet and
  // hand it to the *WithHash calls below (no per-key indirect call into librte_hash).
  static uint32_t hashOf(const FlowKey& key) {
    return rte_hash_crc(&key, sizeof(FlowKey), kHashInitVal);
  }
  // makeFlowKey(m, k) and hashOf(k) in one go, for the per-packet path: the key's words
  // (flowKeyWords) are hashed from the registers, not read back from the key just stored.
  // Same hash as hashOf (flow_table_test checks it).
  static bool keyAndHash(const PacketMeta& m, FlowKey& k, uint32_t* sig);

  // Looks up n keys (n <= 64) in one call (rte_hash_lookup_bulk); pos[i] = position or -1.
  void lookupBurst(const FlowKey* const* keys, uint32_t n, int32_t* pos) const;
  // The same with each key's hashOf() given (rte_hash_lookup_with_hash_bulk).
  void lookupBurstWithHash(const FlowKey* const* keys, const uint32_t* sigs, uint32_t n,
                           int32_t* pos) const;
  int32_t lookup(const FlowKey& key) const;
  int32_t lookupWithHash(const FlowKey& key, uint32_t sig) const;

  // Inserts a new flow; returns its position, or -1 when the table is full. The entry is
  // zeroed, marked in use, with first/last_seen = now_ns, proto from the key and rule =
  // 0xffff (none). If the key is already present, returns its position and leaves the
  // entry untouched.
  int32_t insert(const FlowKey& key, uint64_t now_ns) { return insertWithHash(key, hashOf(key), now_ns); }
  // The same with the key's hashOf() given.
  int32_t insertWithHash(const FlowKey& key, uint32_t sig, uint64_t now_ns);

  FlowEntry& entry(int32_t pos) { return entries_[pos]; }
  const FlowEntry& entry(int32_t pos) const { return entries_[pos]; }
  FlowCold& cold(int32_t pos) { return cold_[pos]; }
  const FlowCold& cold(int32_t pos) const { return cold_[pos]; }
  // The key stored at `pos` (from the rte_hash key store); nullptr when `pos` holds no flow.
  const FlowKey* keyAt(int32_t pos) const;

  // Removes the flow at `pos` (no-op when `pos` holds no flow). The position may be handed
  // out again by the next insert().
  void remove(int32_t pos);

  // Examines up to `budget` slots starting from an internal cursor (wrapping), removing
  // entries idle for longer than their timeout at `now_ns`. `on_expire(pos, entry, key)` is
  // called before each removal. Returns the number removed. Bounded work per call so a
  // worker never stalls; a full sweep takes capacity()/budget calls.
  template <class Fn>
  uint32_t age(uint64_t now_ns, uint32_t budget, const FlowTimeouts& t, Fn&& on_expire);

  // Calls fn(pos) for every flow held in slots [from, from + budget) (clamped to
  // capacity()) until fn returns false (after which no other flow is visited); returns the
  // next slot to examine, capacity() once the walk is over. Reads the occupancy bitmap 64
  // slots per word, like age(). For walks spread over many calls (flow dumps): a flow
  // inserted or removed meanwhile may or may not be seen.
  template <class Fn>
  uint32_t visit(uint32_t from, uint32_t budget, Fn&& fn) const;

  uint32_t size() const { return size_; }
  // Flows this table holds: the requested capacity, rounded up to 8 (rte_hash's minimum).
  // Every position is < capacity(), so side arrays indexed by position can be sized by it.
  uint32_t capacity() const { return capacity_; }

 private:
  static constexpr uint32_t kHashInitVal = 0x9e3779b9u;
  FlowTable() = default;
  rte_hash* hash_ = nullptr;
  FlowEntry* entries_ = nullptr;
  FlowCold* cold_ = nullptr;
  uint64_t* used_ = nullptr;  // occupancy bitmap, one bit per position (kFlowInUse)
  uint32_t capacity_ = 0;
  uint32_t size_ = 0;
  uint32_t cursor_ = 0;
};

__attribute__((always_inline)) inline bool FlowTable::keyAndHash(const PacketMeta& m, FlowKey& k,
                                                                 uint32_t* sig) {
  const FlowKeyWords w = flowKeyWords(m);
  storeFlowKey(w, k);
  // rte_hash_crc(&k, 48, kHashInitVal): six 8-byte steps in key order, from the registers.
  uint32_t c = kHashInitVal;
  c = rte_hash_crc_8byte(w.w[0], c);
  c = rte_hash_crc_8byte(w.w[1], c);
  c = rte_hash_crc_8byte(w.w[2], c);
  c = rte_hash_crc_8byte(w.w[3], c);
  c = rte_hash_crc_8byte(w.w[4], c);
  c = rte_hash_crc_8byte(w.w[5], c);
  *sig = c;
  return w.src_is_hi;
}

template <class Fn>
uint32_t FlowTable::age(uint64_t now_ns, uint32_t budget, const FlowTimeouts& t, Fn&& on_expire) {
  // Walks the occupancy bitmap 64 slots per word: the cost of a sweep follows the flows
  // held, not the capacity (a 1M-slot table holding 100k flows reads 16k words per sweep,
  // not 1M cache lines).
  uint32_t removed = 0;
  uint32_t examined = 0;
  while (examined < budget && capacity_ != 0) {
    const uint32_t pos = cursor_;
    const uint32_t bit = pos & 63;
    uint32_t span = 64 - bit;
    if (span > capacity_ - pos) span = capacity_ - pos;
    if (span > budget - examined) span = budget - examined;
    uint64_t bits = used_[pos >> 6] >> bit;
    if (span < 64) bits &= (uint64_t{1} << span) - 1;
    while (bits) {
      const uint32_t p = pos + static_cast<uint32_t>(__builtin_ctzll(bits));
      bits &= bits - 1;
      FlowEntry& e = entries_[p];
      if (now_ns > e.last_seen_ns && now_ns - e.last_seen_ns > flowTimeout(e, t)) {
        on_expire(static_cast<int32_t>(p), e, *keyAt(static_cast<int32_t>(p)));
        remove(static_cast<int32_t>(p));
        ++removed;
      }
    }
    examined += span;
    cursor_ = pos + span == capacity_ ? 0 : pos + span;
  }
  return removed;
}

template <class Fn>
uint32_t FlowTable::visit(uint32_t from, uint32_t budget, Fn&& fn) const {
  uint32_t pos = from;
  const uint32_t end = budget > capacity_ - std::min(from, capacity_)
                           ? capacity_
                           : from + budget;
  while (pos < end) {
    const uint32_t bit = pos & 63;
    uint32_t span = 64 - bit;
    if (span > end - pos) span = end - pos;
    uint64_t bits = used_[pos >> 6] >> bit;
    if (span < 64) bits &= (uint64_t{1} << span) - 1;
    while (bits) {
      const uint32_t p = pos + static_cast<uint32_t>(__builtin_ctzll(bits));
      if (!fn(static_cast<int32_t>(p))) return p + 1;
      bits &= bits - 1;
    }
    pos += span;
  }
  return pos;
}

}  // namespace dpu::dp
