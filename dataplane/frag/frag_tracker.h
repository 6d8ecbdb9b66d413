// Per-worker IP fragment tracker (IPv4 and IPv6). The appliance forwards fragments as
// they are (no reassembly on the wire); this table makes every later fragment share the
// verdict of its datagram, holds fragments until the datagram is judged (bounded: a
// per-worker pool of max_held handles), and detects overlapping fragments and datagrams
// with too many fragments. Single-threaded (one per worker), no allocation after create().
//
// Two kinds of datagram, chosen when the datagram's first fragment (in arrival order)
// creates its entry:
// - first-fragment datagrams (observe(..., reassemble = false)): the fragment at offset 0
//   is judged alone and the others follow its verdict; later fragments that arrive before
//   it are held (at most kMaxHeldPerDatagram);
// - reassembled datagrams (reassemble = true, dataplane/normalize/datagram.h): observe()
//   returns kReassemble for every fragment until the datagram gets a verdict; the caller
//   compares overlaps with the bytes it copied (overlapping()), records the fragment
//   (record()) and holds it; once covered, the whole datagram is judged and every fragment
//   gets the verdict. Such an entry carries an opaque reassembly buffer (setBuffer()) that
//   the tracker gives back through FragOptions::release_buffer when it forgets the entry.
//   setFirstFragmentMode() turns it into a first-fragment datagram (fail_open).
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
#include <type_traits>

#include "absl/status/statusor.h"
#include "dataplane/packet/packet_meta.h"

struct rte_hash;

namespace dpu::dp {

// The datagram's identity: RFC 791 / 8200 fields plus the layer 2 / tunnel context that
// separates flows (makeFlowKey): equal addresses and id in two VLANs, PPPoE sessions or
// tunnels are two datagrams.
struct FragKey {
  IpAddr src;
  IpAddr dst;
  uint32_t id;
  uint32_t tunnel_id;      // PacketMeta::tunnel_id (0 outside keyed tunnels)
  uint16_t vlan;           // outer VID
  uint16_t vlan_inner;     // inner VID (QinQ)
  uint16_t pppoe_session;  // 0 when not inside PPPoE
  uint8_t proto;   // IPv4 protocol; 0 for IPv6 (RFC 8200 keys on src, dst, id)
  uint8_t ip_ver;
};
static_assert(sizeof(FragKey) == 48, "FragKey must be packed without holes");

FragKey makeFragKey(const PacketMeta& m);

// What the caller must do with a fragment.
enum class FragAction : uint8_t {
  kReassemble,   // a fragment of a reassembled datagram without a verdict: the caller
                 // records and holds it (datagram.h); nothing is recorded yet
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
  uint32_t max_held = 1024;       // fragments held at once (all datagrams)
  int socket_id = -1;
  // Gives back a reassembly buffer (setBuffer) of a datagram the tracker forgets.
  void (*release_buffer)(void* buf) = nullptr;
};

// Progress of a datagram (a view for the reassembly layer).
struct FragProgress {
  bool first_seen;     // the fragment with offset 0 was recorded
  bool last_seen;      // the fragment with MF=0 was recorded
  uint16_t total_len;  // end of the datagram once last_seen
  uint16_t max_end;    // highest end offset recorded
  uint16_t nfrags;     // fragments recorded
  uint32_t bytes_seen; // bytes covered (overlaps counted once)
  uint32_t nheld;
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
  // `reassemble` only matters when the fragment creates a datagram entry (see the top).
  FragAction observe(const PacketMeta& m, uint64_t now_ns, int32_t* slot,
                     bool reassemble = false);

  // --- reassembled datagrams (kReassemble) ---
  // Calls fn(begin, end) for every recorded byte range that intersects [begin, end).
  template <class Fn>
  void overlapping(int32_t slot, uint32_t begin, uint32_t end, Fn&& fn) const;
  // Records fragment m (no overlap check: the caller compared the bytes); refreshes the
  // datagram's idle time. True when the datagram is now covered from 0 to its last
  // fragment's end.
  bool record(int32_t slot, const PacketMeta& m, uint64_t now_ns);
  FragProgress progress(int32_t slot) const;
  bool reassembling(int32_t slot) const { return entries_[slot].reasm; }
  // fail_open: the datagram goes on as a first-fragment datagram (its held fragments stay
  // held; the reassembly buffer is released).
  void setFirstFragmentMode(int32_t slot);
  void setBuffer(int32_t slot, void* buf) { entries_[slot].buf = buf; }
  void* buffer(int32_t slot) const { return entries_[slot].buf; }
  // Takes the buffer out of the entry (the caller owns it now).
  void* takeBuffer(int32_t slot) {
    void* b = entries_[slot].buf;
    entries_[slot].buf = nullptr;
    return b;
  }
  // Handles of held fragments left in the per-worker pool.
  uint32_t heldFree() const { return opts_.max_held - held_used_; }
  // Removes the held fragment `pkt` from the datagram's hold (false: not held there).
  bool unhold(int32_t slot, void* pkt);

  // Judges the datagram: later fragments get kApply from now on. Calling it again replaces
  // the verdict.
  void setVerdict(int32_t slot, const FragVerdict& v);
  const FragVerdict& verdictOf(int32_t slot) const;

  // Holds an opaque packet handle until the datagram is judged. False when the hold is full
  // (kMaxHeldPerDatagram for a first-fragment datagram, or the worker's pool of max_held
  // handles is used up; the fragment stays recorded as seen; the caller drops the packet).
  bool hold(int32_t slot, void* pkt);
  // Moves held packets (in arrival order) to out[0..n), n <= kMaxHeldPerDatagram (a
  // first-fragment datagram); returns n.
  uint32_t releaseHeld(int32_t slot, void** out);
  // Releases every held packet, in arrival order, to fn(void* pkt); returns how many.
  template <class Fn>
  uint32_t releaseHeldTo(int32_t slot, Fn&& fn) {
    return releaseHeldImpl(slot, fn, true);
  }

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
  static constexpr uint32_t kNoHeld = 0xffffffffu;
  struct Entry {
    uint64_t last_seen_ns;
    FragVerdict verdict;
    bool in_use;
    bool judged;
    bool first_seen;        // the fragment with offset 0 arrived
    bool last_seen;         // the fragment with MF=0 arrived
    bool complete;          // complete, queued in pending_ for removal by the next age()
    bool reasm;             // a reassembled datagram (see the top)
    uint16_t total_len;     // end offset of the datagram once the last fragment arrived
    uint16_t max_end;       // highest end offset recorded so far
    uint32_t bytes_seen;    // bytes covered by ranges
    uint16_t nfrags;        // fragments recorded
    uint16_t nranges;       // disjoint, sorted ranges covering what was recorded
    uint32_t nheld;
    uint32_t held_head, held_tail;  // list in the held pool, arrival order
    void* buf;              // reassembly buffer (reassembled datagrams), or null
    Range* ranges;          // max_fragments ranges, preallocated
  };
  FragTracker() = default;
  void removeSlot(int32_t slot);
  void markIfComplete(int32_t slot);
  void removeCompleted();
  int32_t find(const PacketMeta& m) const;
  void addRange(Entry& e, uint32_t begin, uint32_t end);
  template <class Fn>
  void dropHeld(Entry& e, Fn& on_drop);
  template <class Fn>
  uint32_t releaseHeldImpl(int32_t slot, Fn& fn, bool mark);

  rte_hash* hash_ = nullptr;
  Entry* entries_ = nullptr;
  Range* range_store_ = nullptr;
  uint32_t* pending_ = nullptr;   // slots of complete datagrams (capacity_ entries)
  void** held_pkt_ = nullptr;     // held pool: max_held handles, linked by held_next_
  uint32_t* held_next_ = nullptr;
  uint32_t held_free_ = kNoHeld;  // free list head
  uint32_t held_used_ = 0;
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
      dropHeld(e, on_drop);
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
  dropHeld(e, on_drop);
  removeSlot(pos);
  return true;
}

template <class Fn>
void FragTracker::dropHeld(Entry& e, Fn& on_drop) {
  const bool reasm = e.reasm;
  auto fn = [&](void* p) {
    if constexpr (std::is_invocable_v<Fn&, void*, bool>) {
      on_drop(p, reasm);
    } else {
      on_drop(p);
    }
  };
  releaseHeldImpl(static_cast<int32_t>(&e - entries_), fn, false);
}

template <class Fn>
uint32_t FragTracker::releaseHeldImpl(int32_t slot, Fn& fn, bool mark) {
  Entry& e = entries_[slot];
  uint32_t n = 0;
  uint32_t h = e.held_head;
  while (h != kNoHeld) {
    uint32_t next = held_next_[h];
    void* p = held_pkt_[h];
    held_next_[h] = held_free_;
    held_free_ = h;
    --held_used_;
    ++n;
    fn(p);
    h = next;
  }
  e.held_head = e.held_tail = kNoHeld;
  e.nheld = 0;
  if (mark && e.in_use) markIfComplete(slot);
  return n;
}

template <class Fn>
void FragTracker::overlapping(int32_t slot, uint32_t begin, uint32_t end, Fn&& fn) const {
  const Entry& e = entries_[slot];
  for (uint32_t i = 0; i < e.nranges; ++i) {
    const Range& r = e.ranges[i];
    if (r.begin >= end) break;
    if (begin < r.end && r.begin < end) fn(begin > r.begin ? begin : r.begin, end < r.end ? end : r.end);
  }
}

}  // namespace dpu::dp
