#include "dataplane/normalize/tcp_stream.h"

#include <algorithm>
#include <cstring>

namespace dpu::dp {
namespace {

constexpr uint8_t kSyn = 0x02, kRst = 0x04, kAck = 0x10;

// One's complement sum of `n` bytes in native byte order, 64 bits at a time with the
// end-around carry (2^16 = 1 mod 0xffff, so wider words fold to the same 16-bit sum), two
// independent accumulators. A valid checksum sums to 0xffff whatever the byte order, which
// is all verification needs.
inline void addCarry(uint64_t& acc, uint64_t w) {
  acc += w;
  acc += acc < w;
}

uint64_t addBytes(const uint8_t* p, uint32_t n, uint64_t acc) {
  uint64_t a1 = 0;
  while (n >= 16) {
    uint64_t w0, w1;
    std::memcpy(&w0, p, 8);
    std::memcpy(&w1, p + 8, 8);
    addCarry(acc, w0);
    addCarry(a1, w1);
    p += 16;
    n -= 16;
  }
  addCarry(acc, a1);
  if (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    addCarry(acc, w);
    p += 8;
    n -= 8;
  }
  uint8_t tail[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // the rest, zero-padded after it
  std::memcpy(tail, p, n);
  uint64_t w;
  std::memcpy(&w, tail, 8);
  addCarry(acc, w);
  return acc;
}

uint16_t fold(uint64_t acc) {
  uint64_t s = (acc & 0xffffffffu) + (acc >> 32);
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  return static_cast<uint16_t>(s);
}

}  // namespace

TcpStreamPool::TcpStreamPool(uint32_t window_bytes, uint32_t windows)
    : wbytes_(window_bytes), nwin_(window_bytes ? windows : 0) {
  if (nwin_ == 0) return;
  mem_.reset(new uint8_t[size_t(nwin_) * wbytes_]);
  free_.reserve(nwin_);
  for (uint32_t i = nwin_; i > 0; --i) free_.push_back(i - 1);
}

bool TcpStreamPool::acquire(uint32_t& w) {
  if (free_.empty()) return false;
  w = free_.back();
  free_.pop_back();
  return true;
}

void tcpStreamRelease(TcpStreamPool& pool, TcpStreamDir& d) {
  if (d.win != TcpStreamDir::kNoWindow) pool.release(d.win);
  d = TcpStreamDir{};
}

TcpSegResult tcpStreamSegment(TcpStreamPool& pool, TcpStreamDir& self, TcpStreamDir& peer,
                              const TcpSegment& s, bool fail_closed) {
  TcpSegResult r;
  // The ACK: the receiver holds the peer's bytes before it (never beyond what was inspected).
  // Once it holds every inspected byte, the peer's window is not needed any more.
  if ((s.flags & kAck) && (peer.flags & TcpStreamDir::kSeqKnown)) {
    uint32_t a = seqLt(peer.next_seq, s.ack) ? peer.next_seq : s.ack;
    if (!(peer.flags & TcpStreamDir::kAcked) || seqLt(peer.acked, a)) {
      peer.acked = a;
      peer.flags |= TcpStreamDir::kAcked;
    }
    if (peer.win != TcpStreamDir::kNoWindow && !seqLt(peer.acked, peer.next_seq)) {
      pool.release(peer.win);
      peer.win = TcpStreamDir::kNoWindow;
    }
  }
  uint32_t seq = s.seq;
  if (s.flags & kSyn) {
    seq += 1;  // data on a SYN (TCP Fast Open) starts after the ISN
    if (!(self.flags & TcpStreamDir::kSeqKnown)) {
      self.next_seq = seq;
      self.flags |= TcpStreamDir::kSeqKnown;
    }
  }
  if (!(self.flags & TcpStreamDir::kSeqKnown)) {  // picked up mid-stream: from here on
    self.next_seq = seq;
    self.flags |= TcpStreamDir::kSeqKnown;
  }
  r.seq = self.next_seq;
  // A RST's payload (RFC 1122 diagnostic text) is not stream data.
  if (s.len == 0 || (s.flags & kRst)) return r;
  const int32_t delta = static_cast<int32_t>(seq - self.next_seq);
  if (delta > 0) {
    r.verdict = TcpSegVerdict::kOutOfOrder;
    return r;
  }
  const uint32_t old = std::min<uint64_t>(s.len, uint64_t(-int64_t(delta)));
  const uint32_t W = pool.windowBytes();
  if (old != 0) {
    // Bytes [seq, seq + old) were inspected. Those the receiver acknowledged it discards;
    // the others must be the bytes inspected: compared where the window holds them.
    const uint32_t to = seq + old;
    uint32_t from = seq;
    if ((self.flags & TcpStreamDir::kAcked) && seqLt(from, self.acked))
      from = seqLt(self.acked, to) ? self.acked : to;
    if (seqLt(from, to)) {
      uint32_t cov = to;  // first byte the window holds
      if (self.win != TcpStreamDir::kNoWindow) {
        uint32_t lo = self.win_from;
        if (seqLt(lo, self.next_seq - W)) lo = self.next_seq - W;
        cov = seqLt(from, lo) ? lo : from;
        if (seqLt(to, cov)) cov = to;
      }
      const uint8_t* ring = cov != to ? pool.window(self.win) : nullptr;
      for (uint32_t k = cov; k != to;) {
        const uint32_t idx = k & (W - 1);
        const uint32_t run = std::min(to - k, W - idx);
        if (std::memcmp(ring + idx, s.payload + (k - seq), run) != 0) {
          r.verdict = TcpSegVerdict::kOverlapDifferent;
          return r;
        }
        k += run;
      }
      r.unverified = cov - from;
      if (r.unverified && fail_closed) {
        r.verdict = TcpSegVerdict::kFailClosed;
        return r;
      }
    }
  }
  const uint32_t nlen = s.len - old;
  if (nlen == 0) return r;
  if (self.win == TcpStreamDir::kNoWindow && W != 0) {
    if (pool.acquire(self.win)) {
      self.win_from = self.next_seq;
      self.flags &= uint8_t(~TcpStreamDir::kNoWindowSeen);
    } else {
      if (!(self.flags & TcpStreamDir::kNoWindowSeen)) {
        r.no_window = true;
        self.flags |= TcpStreamDir::kNoWindowSeen;
      }
      if (fail_closed) {
        r.verdict = TcpSegVerdict::kFailClosed;
        return r;
      }
    }
  }
  const uint8_t* p = s.payload + old;
  const uint32_t end = self.next_seq + nlen;
  if (self.win != TcpStreamDir::kNoWindow) {
    // The last W new bytes into the ring (offset = seq mod W).
    uint8_t* ring = pool.window(self.win);
    uint32_t k = nlen > W ? end - W : self.next_seq;
    const uint8_t* q = p + (k - self.next_seq);
    while (k != end) {
      const uint32_t idx = k & (W - 1);
      const uint32_t run = std::min(end - k, W - idx);
      std::memcpy(ring + idx, q, run);
      q += run;
      k += run;
    }
    if (end - self.win_from > W) self.win_from = end - W;
  }
  r.off = old;
  r.len = nlen;
  r.seq = self.next_seq;
  self.next_seq = end;
  return r;
}

bool tcpChecksumOk(const uint8_t* ip, bool v6, const uint8_t* l4, uint32_t l4_len) {
  // Pseudo-header: addresses, zero, protocol 6, TCP length (RFC 793 / RFC 8200 8.1).
  uint8_t tail[8] = {0, 0, 0, 0, 0, 0, 0, 6};
  uint64_t acc;
  if (v6) {
    acc = addBytes(ip + 8, 32, 0);
    tail[0] = uint8_t(l4_len >> 24);
    tail[1] = uint8_t(l4_len >> 16);
    tail[2] = uint8_t(l4_len >> 8);
    tail[3] = uint8_t(l4_len);
    acc = addBytes(tail, 8, acc);
  } else {
    acc = addBytes(ip + 12, 8, 0);
    const uint8_t t4[4] = {0, 6, uint8_t(l4_len >> 8), uint8_t(l4_len)};
    acc = addBytes(t4, 4, acc);
  }
  return fold(addBytes(l4, l4_len, acc)) == 0xffff;
}

}  // namespace dpu::dp
