// Datagram normalization: IP fragments reassembled for inspection (IPv4 and IPv6).
//
// The appliance never reassembles on the wire: the fragments leave as they came. When an
// inspecting stage (DNS filter, DPI) is configured, every fragmented datagram is held
// whole (all of its fragments, the first included) in the fragment tracker
// (dataplane/frag/frag_tracker.h), its bytes are copied into a reassembly buffer, and
// once it is covered the worker runs the flow, firewall, DNS, DPI and LB stages on ONE
// reassembled packet; the verdict then applies to every fragment (all forwarded unchanged,
// or all dropped). What the stages read is what the receiving host will reassemble:
//
//   the interface: a reassembled datagram is an ordinary single-segment rte_mbuf holding
//   a complete unfragmented frame (the first fragment's L2 and L3 headers, fragment fields
//   cleared, lengths and IPv4 checksum fixed; an IPv6 datagram keeps its fragment header
//   as an atomic fragment), parsed into an ordinary PacketMeta (is_fragment false). The
//   stages read it exactly like any packet (rte_pktmbuf_mtod + payload_offset), so DNS,
//   DPI and any later decoder need nothing fragment-specific.
//
// Like Suricata's defrag engine, bytes are copied from each fragment as it arrives
// (arrival order free: out of order, tiny 8-byte fragments, duplicates), overlaps are
// compared byte for byte: identical overlaps are accepted; overlaps with different data
// are reported (kConflict) and the caller applies dataplane.fragments.overlapping (DROP:
// the whole datagram is dropped; FORWARD: the first copy is kept and inspected).
//
// Memory: a pool of `buffers` reassembly buffers (private mbufs of kHeaderRoom +
// max_bytes bytes), allocated at create; a buffer is taken by a datagram's first arriving
// fragment and given back when the datagram is built, dropped or forgotten. Running out
// of buffers, of held-fragment handles, or a datagram larger than max_bytes is reported
// (kNoBuffer / kHoldFull / kTooBig) for the caller's fail policy. Single-threaded (one per
// worker), no allocation after create().
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "dataplane/frag/frag_tracker.h"
#include "dataplane/packet/packet_meta.h"

struct rte_mbuf;
struct rte_mempool;

namespace dpu::dp {

// A first fragment that is cut before (or inside) its transport header: a tiny fragment
// (RFC 1858) when the transport needs a header, or an IPv6 extension header chain continues
// in a later fragment.
inline bool fragmentIsTiny(const PacketMeta& m) {
  if (m.has_l4 || !m.more_fragments || m.frag_offset != 0) return false;
  const uint8_t p = m.l4_proto;
  const bool needs_header = p == 6 || p == 17 || p == 1 || p == 58;
  const bool ipv6_ext = p == 0 || p == 43 || p == 44 || p == 60 || p == 51 || p == 135;
  return needs_header || ipv6_ext;
}

struct DatagramOptions {
  std::string name = "reasm";      // mempool name, unique per process
  uint32_t buffers = 256;          // reassembly buffers (0: none, every datagram kNoBuffer)
  uint32_t max_bytes = 16384;      // largest fragmentable part (IP payload) reassembled
  uint16_t max_fragments = 64;     // fragments per datagram (the tracker's max_fragments)
  int socket_id = -1;
};

enum class DatagramStep : uint8_t {
  kHeld,      // recorded and held; the datagram is not complete
  kComplete,  // recorded; the datagram is covered: build() it (this fragment is NOT held)
  kConflict,  // not recorded: overlaps recorded bytes with different data (unless
              // keep_first), or contradicts the datagram's length (a second last fragment
              // with another end, data past the end)
  kNoBuffer,  // no reassembly buffer for a new datagram
  kTooBig,    // the datagram (or its headers) does not fit a buffer
  kHoldFull,  // the worker's held-fragment pool is used up
  kTooMany,   // more than max_fragments fragments
};

// What add() saw besides its result.
struct DatagramAddInfo {
  bool overlap = false;            // the fragment overlapped recorded bytes
  bool conflict = false;           // ... with different data
};

class DatagramReassembler {
 public:
  static constexpr uint32_t kHeaderRoom = 512;  // L2 + L3 headers of the first fragment
  static constexpr uint32_t kMaxBytes = 65535 - kHeaderRoom;

  static absl::StatusOr<std::unique_ptr<DatagramReassembler>> create(const DatagramOptions& o);
  ~DatagramReassembler();
  DatagramReassembler(const DatagramReassembler&) = delete;
  DatagramReassembler& operator=(const DatagramReassembler&) = delete;

  // For FragOptions::release_buffer.
  static void releaseBuffer(void* buf);

  // Adds fragment `m` of frame `frame` (its packet handle `pkt`) to the reassembled
  // datagram `slot` of `t` (observe() returned kReassemble) at now_ns: compares, copies,
  // records and, unless the datagram is now complete, holds it. keep_first: an overlap
  // with different data keeps the bytes already there (policy FORWARD) instead of
  // returning kConflict.
  DatagramStep add(FragTracker& t, int32_t slot, const PacketMeta& m, const uint8_t* frame,
                   void* pkt, uint64_t now_ns, bool keep_first, DatagramAddInfo* info);

  // The held packet of the fragment at offset 0, or null (fail_open hands it to the
  // pipeline to be judged alone).
  void* firstFragment(const FragTracker& t, int32_t slot) const;
  // Whether the first fragment was too short for its transport header (RFC 1858).
  bool firstWasTiny(const FragTracker& t, int32_t slot) const;

  // The complete datagram as one frame in its buffer, taken out of the tracker entry: the
  // caller owns the mbuf (rte_pktmbuf_free gives it back). Null (buffer released) when
  // the reassembled IP datagram would exceed 65535 bytes.
  rte_mbuf* build(FragTracker& t, int32_t slot);

  uint32_t buffers() const { return opts_.buffers; }
  uint32_t buffersInUse() const;

 private:
  DatagramReassembler() = default;
  DatagramOptions opts_;
  rte_mempool* pool_ = nullptr;
};

}  // namespace dpu::dp
