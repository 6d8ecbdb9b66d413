// TCP stream normalization: one engine per flow direction that every inspecting stage (DNS
// over TCP, DPI, and later decoders) reads from, so that a stage inspects exactly the bytes
// the receiving host accepts, once, in sequence order. No DPDK here (unit-tested without EAL);
// the stream stage drives it (dataplane/stages/stream/stream_stage.cc).
//
// The interface for stages: for each TCP segment of an inspected flow, tcpStreamSegment()
// says whether the segment may pass and, when it may, which of its payload bytes are new
// in-order stream bytes: payload[off, off + len), stream sequence number `seq`. A stage
// reads those bytes and nothing else (they arrive exactly once, contiguous with the last
// bytes it was given); retransmitted bytes are never handed out again.
//
// Policies (Suricata's stream engine in IPS mode and Snort's normalizer as reference):
//   - Out of order: a segment that starts beyond the next expected byte (a gap before it) is
//     dropped (reason tcp_out_of_order); the sender retransmits it after the gap is filled
//     (its data was never acknowledged). Nothing is buffered, so no out-of-order state can
//     run out, and what is inspected is always what the receiver can deliver in order.
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

// Per-worker pool of comparison windows (allocated once; no allocation per packet).
class TcpStreamPool {
 public:
  // window_bytes: a power of two (ring indexed by seq % window_bytes), or 0 = no windows.
  TcpStreamPool(uint32_t window_bytes, uint32_t windows);
  uint32_t windowBytes() const { return wbytes_; }
  uint32_t capacity() const { return nwin_; }
  uint32_t available() const { return static_cast<uint32_t>(free_.size()); }
  bool acquire(uint32_t& w);
  void release(uint32_t w) { free_.push_back(w); }
  uint8_t* window(uint32_t w) { return mem_.get() + size_t(w) * wbytes_; }

 private:
  uint32_t wbytes_ = 0, nwin_ = 0;
  std::unique_ptr<uint8_t[]> mem_;
  std::vector<uint32_t> free_;
};

// One flow direction (the Worker keeps two per flow position).
struct TcpStreamDir {
  static constexpr uint32_t kNoWindow = 0xffffffffu;
  uint32_t next_seq = 0;    // next stream byte to inspect (kSeqKnown)
  uint32_t acked = 0;       // highest ACK the receiver sent for these bytes (kAcked)
  uint32_t win = kNoWindow; // window slot in the pool
  uint32_t win_from = 0;    // first sequence number the window holds (with win)
  uint8_t flags = 0;
  // kNoWindowSeen: the direction already reported a failed window acquisition (reported
  // once until it gets one). kReset: the flow was reset by the overlap policy.
  static constexpr uint8_t kSeqKnown = 1, kAcked = 2, kNoWindowSeen = 4, kReset = 8;
};

struct TcpSegment {
  uint32_t seq = 0, ack = 0;
  uint8_t flags = 0;         // TCP flags (FIN=0x01 SYN=0x02 RST=0x04 ACK=0x10)
  const uint8_t* payload = nullptr;
  uint32_t len = 0;
};

enum class TcpSegVerdict : uint8_t {
  kAccept,            // passes; payload[off, off + len) are new in-order bytes (len may be 0)
  kOutOfOrder,        // starts beyond the next expected byte: dropped
  kOverlapDifferent,  // repeats inspected bytes with different content: overlap policy
  kFailClosed,        // needs comparison state it has not got, fail_closed: dropped
};

struct TcpSegResult {
  TcpSegVerdict verdict = TcpSegVerdict::kAccept;
  uint32_t off = 0;         // new in-order bytes: payload[off, off + len)
  uint32_t len = 0;
  uint32_t seq = 0;         // stream sequence number of payload[off]
  uint32_t unverified = 0;  // overlapping bytes passed uncompared (fail_open)
  bool no_window = false;   // first failed window acquisition of this direction
};

// Judges segment `s` sent in direction `self`; `peer` is the reverse direction (its
// acknowledged byte is advanced by s.ack). Only kAccept changes `self`'s stream state.
TcpSegResult tcpStreamSegment(TcpStreamPool& pool, TcpStreamDir& self, TcpStreamDir& peer,
                              const TcpSegment& s, bool fail_closed);
// The direction's window back to the pool and its state cleared (flow end).
void tcpStreamRelease(TcpStreamPool& pool, TcpStreamDir& d);

// TCP checksum verification in software: `ip` is the IPv4 or IPv6 header (addresses at
// their fixed offsets), `l4` the TCP header followed by its payload, `l4_len` bytes in all.
// True when the checksum over pseudo-header + segment is correct.
bool tcpChecksumOk(const uint8_t* ip, bool v6, const uint8_t* l4, uint32_t l4_len);

}  // namespace dpu::dp
