// TCP stream normalization: one engine per flow direction that every inspecting stage (DNS
// over TCP, DPI, and later decoders) reads from, so that a stage inspects exactly the bytes
// the receiving host accepts, once, in sequence order. No DPDK here (unit-tested without EAL);
// the stream stage drives it (dataplane/stages/stream/stream_stage.cc).
//
// The interface for stages: for each TCP segment of an inspected flow, tcpStreamSegment()
// says whether the segment may pass and, when it may, which bytes are new in-order stream
// bytes: data[0, len), stream sequence number `seq` - usually a part of the segment's
// payload, and when the segment fills a hole also the bytes kept behind it. A stage reads
// those bytes and nothing else (they arrive exactly once, contiguous with the last bytes it
// was given); retransmitted bytes are never handed out again.
//
// Policies (Suricata's stream engine in IPS mode and Snort's normalizer as reference):
//   - Out of order: a segment that starts beyond the next expected byte (a hole before it)
//     is forwarded and its bytes are kept (kKept) in a per-direction reorder buffer from a
//     per-worker pool: the receiving host cannot hand bytes past a hole to its application,
//     so forwarding them delivers nothing uninspected. When the hole fills, the filling
//     bytes and the kept bytes contiguous behind them are handed out together, in order,
//     once (TcpSegResult::data may then point into the reorder buffer), so a verdict on any
//     of them acts on the hole-filling segment, which the application needs first. Kept
//     bytes that a later segment repeats are compared like inspected ones (overlap policy).
//     No room (no free buffer, more than reorder_bytes past the hole, more than kIslands
//     separate runs, or the buffer still being read this run): the fail policy - fail closed
//     drops the segment (kFailClosed, reorder_full), fail open passes it unkept (unkept);
//     the receiver's ACK beyond the hole then says it holds bytes never inspected, and the
//     stream resumes there with a gap (TcpSegResult::gap). reorder_bytes 0: no reorder
//     buffers, a segment beyond a hole is dropped (kOutOfOrder, the sender retransmits).
//   - Overlap: bytes before the next expected one were already inspected. They are compared
//     with a per-direction window of the last `window_bytes` inspected bytes (a ring in a
//     per-worker pool); when they differ the segment is dropped (policy kDropPacket, "first
//     copy wins", like Suricata's stream-event overlap-with-different-data in IPS mode) or
//     the flow is reset (kResetFlow). Bytes the receiver already acknowledged need no
//     comparison (a receiver discards data before its rcv_nxt), so a window is taken only
//     while the direction has unacknowledged inspected bytes and given back when the
//     receiver's ACK reaches the next expected byte.
//   - Exhaustion: overlapping bytes that are unacknowledged but no longer (or never) in the
//     window - the pool was empty, or more than window_bytes are in flight - cannot be
//     compared: with fail_closed the segment is dropped (kFailClosed), with fail_open it
//     passes with its overlap unverified (counted in `unverified`). A direction whose new
//     bytes find no free window is flagged (`no_window`); with fail_closed that segment is
//     dropped too (the sender retransmits it, maybe when a window is free).
//   - Data on SYN (TCP Fast Open): the payload after the SYN's sequence number is stream
//     data (its first byte is ISN + 1).
//   - Sequence numbers compare modulo 2^32 (RFC 1982 serial arithmetic), so streams across
//     the wrap behave as any other; a segment more than 2^31 ahead reads as behind (old).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace dpu::dp {

inline bool seqLt(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) < 0; }
inline bool seqLe(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) <= 0; }

enum class TcpOverlapPolicy : uint8_t {
  kDropPacket = 0,  // the segment carrying different bytes is dropped (first copy wins)
  kResetFlow = 1,   // the segment is dropped and the connection reset both ways
};

// Per-worker pool of comparison windows and reorder buffers (allocated once; no allocation
// per packet).
class TcpStreamPool {
 public:
  // window_bytes: a power of two (ring indexed by seq % window_bytes), or 0 = no windows.
  // reorder_bytes per reorder buffer (0 = out-of-order segments are dropped), buffers.
  TcpStreamPool(uint32_t window_bytes, uint32_t windows, uint32_t reorder_bytes = 0,
                uint32_t reorder_buffers = 0);
  uint32_t windowBytes() const { return wbytes_; }
  uint32_t capacity() const { return nwin_; }
  uint32_t available() const { return static_cast<uint32_t>(free_.size()); }
  bool acquire(uint32_t& w);
  void release(uint32_t w) { free_.push_back(w); }
  uint8_t* window(uint32_t w) { return mem_.get() + size_t(w) * wbytes_; }

  // Reorder buffers. A buffer holds the bytes [base, base + reorderBytes()) of one direction
  // at offset seq - base; `lo/hi` are the kept runs (sorted, disjoint, not adjacent).
  static constexpr uint32_t kIslands = 16;
  struct Reorder {
    uint32_t base = 0;
    uint32_t fin_seq = 0;  // with fin: a kept FIN ends the direction there
    uint32_t epoch = 0;    // the run that last handed bytes out of it (no compaction then)
    uint8_t n = 0;
    bool fin = false;
    uint32_t lo[kIslands], hi[kIslands];
  };
  uint32_t reorderBytes() const { return rbytes_; }
  uint32_t reorderCapacity() const { return nreo_; }
  uint32_t reorderAvailable() const { return static_cast<uint32_t>(reo_free_.size()); }
  bool acquireReorder(uint32_t& r, uint32_t base);
  // Back to the pool now (flow end) or at the next run (its bytes were handed out this run
  // and the stages have not read them yet).
  void releaseReorder(uint32_t r) { reo_free_.push_back(r); }
  void releaseReorderAfterRun(uint32_t r) { reo_later_.push_back(r); }
  Reorder& reorder(uint32_t r) { return reo_[r]; }
  uint8_t* reorderMem(uint32_t r) { return reo_mem_.get() + size_t(r) * rbytes_; }
  // A new run of the stream stage: the bytes handed out before it have been read by the
  // stages; buffers emptied then go back to the pool.
  void beginRun() {
    ++epoch_;
    for (uint32_t r : reo_later_) reo_free_.push_back(r);
    reo_later_.clear();
  }
  uint32_t epoch() const { return epoch_; }

 private:
  uint32_t wbytes_ = 0, nwin_ = 0;
  std::unique_ptr<uint8_t[]> mem_;
  std::vector<uint32_t> free_;
  uint32_t rbytes_ = 0, nreo_ = 0, epoch_ = 1;
  std::unique_ptr<uint8_t[]> reo_mem_;
  std::unique_ptr<Reorder[]> reo_;
  std::vector<uint32_t> reo_free_, reo_later_;
};

// One flow direction (the Worker keeps two per flow position).
struct TcpStreamDir {
  static constexpr uint32_t kNoWindow = 0xffffffffu;
  uint32_t next_seq = 0;    // next stream byte to inspect (kSeqKnown)
  uint32_t acked = 0;       // highest ACK the receiver sent for these bytes (kAcked)
  uint32_t win = kNoWindow; // window slot in the pool
  uint32_t win_from = 0;    // first sequence number the window holds (with win)
  uint32_t ooo = kNoWindow; // reorder buffer in the pool (bytes kept beyond a hole)
  uint8_t flags = 0;
  // kNoWindowSeen: the direction already reported a failed window acquisition (reported
  // once until it gets one). kReset: the flow was reset by the overlap policy. kUnkept:
  // bytes beyond a hole passed unkept (fail open): an ACK beyond next_seq is then a gap.
  // kGapPending: the stream jumped over such bytes; the next delivery says so.
  static constexpr uint8_t kSeqKnown = 1, kAcked = 2, kNoWindowSeen = 4, kReset = 8,
                           kUnkept = 16, kGapPending = 32;
};

struct TcpSegment {
  uint32_t seq = 0, ack = 0;
  uint8_t flags = 0;         // TCP flags (FIN=0x01 SYN=0x02 RST=0x04 ACK=0x10)
  const uint8_t* payload = nullptr;
  uint32_t len = 0;
};

enum class TcpSegVerdict : uint8_t {
  kAccept,            // passes; data[0, len) are new in-order bytes (len may be 0)
  kKept,              // beyond a hole: passes, its bytes kept until the hole fills
  kOutOfOrder,        // beyond a hole and no reorder buffers configured: dropped
  kOverlapDifferent,  // repeats inspected bytes with different content: overlap policy
  kFailClosed,        // needs comparison state it has not got, fail_closed: dropped
};

struct TcpSegResult {
  TcpSegVerdict verdict = TcpSegVerdict::kAccept;
  // New in-order bytes: data[0, len) at stream sequence number seq. From the segment
  // (data = payload + off) or, when it filled a hole, from the reorder buffer (kept > 0:
  // the segment's new bytes and the kept ones behind them; valid until the next run).
  const uint8_t* data = nullptr;
  uint32_t off = 0;
  uint32_t len = 0;
  uint32_t seq = 0;
  uint32_t kept = 0;        // of len, bytes that had been kept beyond a hole
  uint32_t unverified = 0;  // overlapping bytes passed uncompared (fail_open)
  uint32_t unkept = 0;      // bytes beyond a hole passed without room to keep them (fail_open)
  bool no_window = false;   // first failed window acquisition of this direction
  bool reorder_full = false;  // no room to keep bytes beyond a hole (either fail policy)
  bool gap = false;         // bytes before seq reached the receiver uninspected (see kUnkept)
  bool fin = false;         // the direction's FIN is at seq + len: its stream ends there
};

// Judges segment `s` sent in direction `self`; `peer` is the reverse direction (its
// acknowledged byte is advanced by s.ack). Only kAccept changes `self`'s stream state.
TcpSegResult tcpStreamSegment(TcpStreamPool& pool, TcpStreamDir& self, TcpStreamDir& peer,
                              const TcpSegment& s, bool fail_closed);
// The direction's window and reorder buffer back to the pool, its state cleared (flow end).
void tcpStreamRelease(TcpStreamPool& pool, TcpStreamDir& d);

// TCP checksum verification in software: `ip` is the IPv4 or IPv6 header (addresses at
// their fixed offsets), `l4` the TCP header followed by its payload, `l4_len` bytes in all.
// True when the checksum over pseudo-header + segment is correct.
bool tcpChecksumOk(const uint8_t* ip, bool v6, const uint8_t* l4, uint32_t l4_len);

}  // namespace dpu::dp
