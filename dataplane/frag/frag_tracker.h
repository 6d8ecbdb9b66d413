// Per-worker IP fragment tracker (IPv4 and IPv6). The appliance forwards fragments as
// they are (no reassembly on the wire); this table makes every later fragment share the
// verdict of its datagram's first fragment, holds later fragments that arrive before the
// first one (bounded), and detects overlapping fragments and datagrams with too many
// fragments. Single-threaded (one per worker), no allocation after create().
//
// Completion: a datagram is complete when it is judged, its last fragment (MF=0) has
// arrived, the recorded fragments cover [0, total length) and no fragment is held. The
// call that completes it (observe() returning kApply, setVerdict() or releaseHeld()) only
// marks it; the next age() call removes every datagram marked since the previous one,
// before it examines any slot. So a slot handed out by observe() keeps naming the same
// datagram, with its verdict, until the caller's next age() call: a worker can observe()
// a whole burst, then setVerdict()/releaseHeld() and read verdictOf() for it, and call
// age() between bursts. Until it is removed, a completed datagram answers further
// fragments with kOverlap / kDuplicateFirst (every byte is already covered) and counts in
// size(). A fragment arriving after the removal starts a new datagram (first fragment:
// kJudge again; later fragment: kHold until the timeout drops it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "dataplane/packet/packet_meta.h"

struct rte_hash;

namespace dpu::dp {

struct FragKey {
  IpAddr src;
  IpAddr dst;
  uint32_t id;
  uint16_t vlan;
  uint8_t proto;   // IPv4 protocol; 0 for IPv6 (RFC 8200 keys on src, dst, id)
  uint8_t ip_ver;
};
static_assert(sizeof(FragKey) == 40, "FragKey must be packed without holes");

FragKey makeFragKey(const PacketMeta& m);

// What the caller must do with a fragment.
enum class FragAction : uint8_t {
  kJudge,        // first fragment of a new (or so far unjudged) datagram: run the pipeline,
                 // then call setVerdict(slot, ...) and releaseHeld(slot, ...)
  kApply,        // the datagram already has a verdict: verdictOf(slot)
  kHold,         // a later fragment before the first one: call hold(slot, pkt); if that
                 // returns false, drop the packet (reason: too many held)
  kOverlap,      // overlaps bytes already seen for this datagram: drop by policy. Also used
                 // for fragments inconsistent with the datagram's length (a second last
                 // fragment, data past the last fragment's end) and for a zero-length
                 // fragment or one ending past 65535 (the parser rejects those first).
  kTooMany,      // more than max_fragments for this datagram: drop
  kTableFull,    // no slot for a new datagram: drop by policy
  kDuplicateFirst,  // a second first fragment for an already judged datagram: same as kOverlap
};

struct FragVerdict {
  uint8_t verdict = 0;   // Verdict value (dataplane/pipeline/verdict.h)
  uint8_t stage = 0;
  uint32_t rule = 0xffffffffu;
  uint8_t reason = 0;    // DropReason when verdict is drop
  uint64_t flow_id = 0;  // flow of the first fragment (0 = untracked)
};

struct FragOptions {
  std::string name = "frags";     // unique per process
  uint32_t max_datagrams = 8192;  // datagrams tracked at once
  uint64_t timeout_ns = 10ull * 1000000000ull;  // a datagram idle longer than this is forgotten
  uint16_t max_fragments = 64;    // fragments per datagram before kTooMany
  int socket_id = -1;
};

constexpr uint32_t kMaxHeldPerDatagram = 8;

class FragTracker {
 public:
  static absl::StatusOr<std::unique_ptr<FragTracker>> create(const FragOptions& opts);
  ~FragTracker();
  FragTracker(const FragTracker&) = delete;
  FragTracker& operator=(const FragTracker&) = delete;

  // Records fragment `m` (m.is_fragment must be true) seen at now_ns and says what to do.
  // *slot identifies the datagram for the follow-up calls (valid for kJudge/kApply/kHold).
  // For kOverlap/kTooMany/kDuplicateFirst *slot is the datagram's slot when the datagram
  // is tracked (a policy may setVerdict() it, e.g. to drop the rest), else -1; for
  // kTableFull it is -1. Rejected fragments are not recorded and do not refresh the
  // datagram's idle time. Never removes a datagram: slots stay valid until age().
  FragAction observe(const PacketMeta& m, uint64_t now_ns, int32_t* slot);

  // Judges the datagram: later fragments get kApply from now on. Calling it again replaces
  // the verdict.
  void setVerdict(int32_t slot, const FragVerdict& v);
  const FragVerdict& verdictOf(int32_t slot) const;

  // Holds an opaque packet handle until the datagram is judged. False when the hold is full
  // (the fragment stays recorded as seen; the caller drops the packet).
  bool hold(int32_t slot, void* pkt);
  // Moves held packets (in arrival order) to out[0..n), n <= kMaxHeldPerDatagram; returns n.
  uint32_t releaseHeld(int32_t slot, void** out);

  // First removes the datagrams completed since the previous call (not counted, not
  // limited by `budget`: at most one per fragment observed since). Then forgets datagrams
  // idle past the timeout, at most `budget` slots examined per call, and returns how many
  // it forgot. Held packets of forgotten datagrams are passed to on_drop(void* pkt) (caller
  // frees them and counts them as dropped: reason "fragment first never arrived").
  // Invalidates every slot handed out before it.
  // age(UINT64_MAX, capacity(), on_drop) forgets every datagram (shutdown / drain); do
  // that before destroying the tracker, which cannot free held packets itself.
  template <class Fn>
  uint32_t age(uint64_t now_ns, uint32_t budget, Fn&& on_drop);

  // Removes the datagrams completed so far (what age() does first). A worker calls it once
  // the fragments it observed have been given their verdicts, so that a datagram id reused
  // right after completion starts a new datagram whatever the burst boundaries are.
  // Invalidates every slot handed out before it.
  void flushCompleted() {
    if (npending_ != 0) removeCompleted();
  }

  // If the datagram of fragment `m` is tracked and idle past the timeout at now_ns, forgets
  // it (held packets to on_drop, as in age()) and returns true: the fragment then starts a
  // new datagram instead of joining a stale one. Call it before observe().
  template <class Fn>
  bool expireStale(const PacketMeta& m, uint64_t now_ns, Fn&& on_drop);

  uint32_t size() const { return size_; }
  // Datagram slots (max_datagrams rounded up to rte_hash's minimum of 8); slot < capacity().
  uint32_t capacity() const { return capacity_; }

 private:
  struct Range { uint16_t begin, end; };
  struct Entry {
    uint64_t last_seen_ns;
    FragVerdict verdict;
    bool in_use;
    bool judged;
    bool first_seen;        // the fragment with offset 0 arrived
    bool last_seen;         // the fragment with MF=0 arrived
    bool complete;          // complete, queued in pending_ for removal by the next age()
    uint16_t total_len;     // end offset of the datagram once the last fragment arrived
    uint16_t max_end;       // highest end offset recorded so far
    uint32_t bytes_seen;
    uint16_t nfrags;
    uint8_t nheld;
    void* held[kMaxHeldPerDatagram];
    Range* ranges;          // max_fragments ranges, preallocated
  };
  FragTracker() = default;
  void removeSlot(int32_t slot);
  void markIfComplete(int32_t slot);
  void removeCompleted();
  int32_t find(const PacketMeta& m) const;

  rte_hash* hash_ = nullptr;
  Entry* entries_ = nullptr;
  Range* range_store_ = nullptr;
  uint32_t* pending_ = nullptr;   // slots of complete datagrams (capacity_ entries)
  uint32_t npending_ = 0;
  FragOptions opts_;
  uint32_t capacity_ = 0;
  uint32_t size_ = 0;
  uint32_t cursor_ = 0;
};

template <class Fn>
uint32_t FragTracker::age(uint64_t now_ns, uint32_t budget, Fn&& on_drop) {
  if (npending_ != 0) removeCompleted();
  uint32_t removed = 0;
  for (uint32_t i = 0; i < budget && capacity_ != 0; ++i) {
    uint32_t pos = cursor_;
    cursor_ = (cursor_ + 1 == capacity_) ? 0 : cursor_ + 1;
    Entry& e = entries_[pos];
    if (!e.in_use) continue;
    if (now_ns > e.last_seen_ns && now_ns - e.last_seen_ns > opts_.timeout_ns) {
      for (uint32_t h = 0; h < e.nheld; ++h) on_drop(e.held[h]);
      e.nheld = 0;
      removeSlot(static_cast<int32_t>(pos));
      ++removed;
    }
  }
  return removed;
}

template <class Fn>
bool FragTracker::expireStale(const PacketMeta& m, uint64_t now_ns, Fn&& on_drop) {
  if (npending_ != 0) removeCompleted();
  int32_t pos = find(m);
  if (pos < 0) return false;
  Entry& e = entries_[pos];
  if (!(now_ns > e.last_seen_ns && now_ns - e.last_seen_ns > opts_.timeout_ns)) return false;
  for (uint32_t h = 0; h < e.nheld; ++h) on_drop(e.held[h]);
  e.nheld = 0;
  removeSlot(pos);
  return true;
}

}  // namespace dpu::dp
