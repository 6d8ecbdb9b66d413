#include "dataplane/normalize/tcp_stream.h"

#include <algorithm>
#include <cstring>

namespace dpu::dp {
namespace {

constexpr uint8_t kFin = 0x01, kSyn = 0x02, kRst = 0x04, kAck = 0x10;

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

TcpStreamPool::TcpStreamPool(uint32_t window_bytes, uint32_t windows, uint32_t reorder_bytes,
                             uint32_t reorder_buffers)
    : wbytes_(window_bytes), nwin_(window_bytes ? windows : 0),
      rbytes_(reorder_buffers ? reorder_bytes : 0), nreo_(reorder_bytes ? reorder_buffers : 0) {
  if (nwin_ != 0) {
    mem_.reset(new uint8_t[size_t(nwin_) * wbytes_]);
    free_.reserve(nwin_);
    for (uint32_t i = nwin_; i > 0; --i) free_.push_back(i - 1);
  }
  if (nreo_ != 0) {
    // Untouched until used (the pages of buffers never taken are never faulted in).
    reo_mem_.reset(new uint8_t[size_t(nreo_) * rbytes_]);
    reo_.reset(new Reorder[nreo_]);
    reo_free_.reserve(nreo_);
    reo_later_.reserve(nreo_);
    for (uint32_t i = nreo_; i > 0; --i) reo_free_.push_back(i - 1);
  }
}

bool TcpStreamPool::acquire(uint32_t& w) {
  if (free_.empty()) return false;
  w = free_.back();
  free_.pop_back();
  return true;
}

bool TcpStreamPool::acquireReorder(uint32_t& r, uint32_t base) {
  if (reo_free_.empty()) return false;
  r = reo_free_.back();
  reo_free_.pop_back();
  Reorder& R = reo_[r];
  R.base = base;
  R.n = 0;
  R.fin = false;
  R.epoch = 0;
  return true;
}

namespace {

using Reorder = TcpStreamPool::Reorder;

// The direction's reorder buffer back to the pool: now, or after this run when bytes were
// handed out of it in this run (the stages read them after the engine).
void dropReorder(TcpStreamPool& pool, TcpStreamDir& d) {
  if (d.ooo == TcpStreamDir::kNoWindow) return;
  if (pool.reorder(d.ooo).epoch == pool.epoch()) pool.releaseReorderAfterRun(d.ooo);
  else pool.releaseReorder(d.ooo);
  d.ooo = TcpStreamDir::kNoWindow;
}

// True when the segment's bytes [from, to) (sequence numbers; the segment starts at `seq`)
// differ from kept bytes they overlap.
bool keptDiffers(TcpStreamPool& pool, uint32_t ro, const TcpSegment& s, uint32_t seq,
                 uint32_t from, uint32_t to) {
  const Reorder& R = pool.reorder(ro);
  const uint8_t* mem = pool.reorderMem(ro);
  for (uint32_t k = 0; k < R.n; ++k) {
    const uint32_t lo = seqLt(from, R.lo[k]) ? R.lo[k] : from;
    const uint32_t hi = seqLt(R.hi[k], to) ? R.hi[k] : to;
    if (seqLt(lo, hi) && std::memcmp(mem + (lo - R.base), s.payload + (lo - seq), hi - lo) != 0)
      return true;
  }
  return false;
}

// [lo, hi) into the kept runs, merged with the runs it overlaps or touches; false (nothing
// changed) when that would make more than kIslands runs.
bool addRun(Reorder& R, uint32_t lo, uint32_t hi) {
  uint32_t nlo[TcpStreamPool::kIslands], nhi[TcpStreamPool::kIslands];
  uint32_t m = 0;
  bool placed = false;
  auto push = [&](uint32_t a, uint32_t b) {
    if (m == TcpStreamPool::kIslands) return false;
    nlo[m] = a;
    nhi[m] = b;
    ++m;
    return true;
  };
  for (uint32_t k = 0; k < R.n; ++k) {
    if (seqLt(R.hi[k], lo)) {
      if (!push(R.lo[k], R.hi[k])) return false;
    } else if (seqLt(hi, R.lo[k])) {
      if (!placed && !push(lo, hi)) return false;
      placed = true;
      if (!push(R.lo[k], R.hi[k])) return false;
    } else {  // overlaps or touches: one run
      if (seqLt(R.lo[k], lo)) lo = R.lo[k];
      if (seqLt(hi, R.hi[k])) hi = R.hi[k];
    }
  }
  if (!placed && !push(lo, hi)) return false;
  std::memcpy(R.lo, nlo, m * sizeof(uint32_t));
  std::memcpy(R.hi, nhi, m * sizeof(uint32_t));
  R.n = static_cast<uint8_t>(m);
  return true;
}

// The receiver acknowledged `ack`, beyond every byte the engine handed out, after bytes
// beyond a hole passed unkept: it holds bytes the stages never read. The stream resumes at
// `ack` (the next delivery reports the gap); kept runs before it are dropped.
void skipTo(TcpStreamPool& pool, TcpStreamDir& d, uint32_t ack) {
  d.next_seq = ack;
  d.win_from = ack;  // the comparison window holds nothing of what follows
  d.flags |= TcpStreamDir::kGapPending;
  if (d.ooo == TcpStreamDir::kNoWindow) return;
  Reorder& R = pool.reorder(d.ooo);
  uint32_t m = 0;
  for (uint32_t k = 0; k < R.n; ++k) {
    if (seqLe(R.hi[k], ack)) continue;
    R.lo[m] = seqLt(R.lo[k], ack) ? ack : R.lo[k];
    R.hi[m] = R.hi[k];
    ++m;
  }
  R.n = static_cast<uint8_t>(m);
  if (m == 0 && !(R.fin && seqLe(ack, R.fin_seq))) dropReorder(pool, d);
}

// Takes a comparison window for new bytes when the direction has none; false when it must
// fail closed. (Sets r.no_window the first time a direction finds none.)
bool takeWindow(TcpStreamPool& pool, TcpStreamDir& self, bool fail_closed, TcpSegResult& r) {
  if (self.win != TcpStreamDir::kNoWindow || pool.windowBytes() == 0) return true;
  if (pool.acquire(self.win)) {
    self.win_from = self.next_seq;
    self.flags &= uint8_t(~TcpStreamDir::kNoWindowSeen);
    return true;
  }
  if (!(self.flags & TcpStreamDir::kNoWindowSeen)) {
    r.no_window = true;
    self.flags |= TcpStreamDir::kNoWindowSeen;
  }
  return !fail_closed;
}

// Hands out p[0, n) as the direction's next stream bytes: into the comparison window (the
// last W of them, at offset seq mod W), into the result, next_seq past them.
void handOut(TcpStreamPool& pool, TcpStreamDir& self, const uint8_t* p, uint32_t n,
             TcpSegResult& r) {
  const uint32_t W = pool.windowBytes();
  const uint32_t end = self.next_seq + n;
  if (self.win != TcpStreamDir::kNoWindow) {
    uint8_t* ring = pool.window(self.win);
    uint32_t k = n > W ? end - W : self.next_seq;
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
  r.data = p;
  r.len = n;
  r.seq = self.next_seq;
  self.next_seq = end;
  if (self.flags & TcpStreamDir::kGapPending) {
    r.gap = true;
    self.flags &= uint8_t(~TcpStreamDir::kGapPending);
  }
}

// Kept runs that start at next_seq (after a gap moved it) handed out.
void handOutKeptHead(TcpStreamPool& pool, TcpStreamDir& self, bool fail_closed,
                     TcpSegResult& r) {
  if (self.ooo == TcpStreamDir::kNoWindow) return;
  Reorder& R = pool.reorder(self.ooo);
  if (R.n == 0 || R.lo[0] != self.next_seq || !takeWindow(pool, self, fail_closed, r)) return;
  const uint32_t n = R.hi[0] - R.lo[0];
  R.epoch = pool.epoch();
  handOut(pool, self, pool.reorderMem(self.ooo) + (R.lo[0] - R.base), n, r);
  r.kept = n;
  r.verdict = TcpSegVerdict::kAccept;
  std::memmove(R.lo, R.lo + 1, (R.n - 1) * sizeof(uint32_t));
  std::memmove(R.hi, R.hi + 1, (R.n - 1) * sizeof(uint32_t));
  --R.n;
  if (R.fin && R.fin_seq == self.next_seq) r.fin = true;
  if (R.n == 0 && !(R.fin && seqLt(self.next_seq, R.fin_seq))) dropReorder(pool, self);
}

// A segment that starts beyond next_seq (payload len > 0): kept for when the hole fills.
void keepOutOfOrder(TcpStreamPool& pool, TcpStreamDir& self, const TcpSegment& s, uint32_t seq,
                    bool fail_closed, TcpSegResult& r) {
  const uint32_t W = pool.reorderBytes();
  if (W == 0) {
    r.verdict = TcpSegVerdict::kOutOfOrder;
    return;
  }
  const uint32_t end = seq + s.len;
  const bool had = self.ooo != TcpStreamDir::kNoWindow;
  auto full = [&] {
    r.reorder_full = true;
    if (!had && self.ooo != TcpStreamDir::kNoWindow) dropReorder(pool, self);
    if (fail_closed) {
      r.verdict = TcpSegVerdict::kFailClosed;
    } else {
      r.unkept = s.len;
      self.flags |= TcpStreamDir::kUnkept;
    }
  };
  if (end - self.next_seq > W || (!had && !pool.acquireReorder(self.ooo, self.next_seq))) {
    full();
    return;
  }
  Reorder& R = pool.reorder(self.ooo);
  uint8_t* mem = pool.reorderMem(self.ooo);
  if (had && keptDiffers(pool, self.ooo, s, seq, seq, end)) {
    r.verdict = TcpSegVerdict::kOverlapDifferent;
    return;
  }
  if (end - R.base > W) {
    // Move the kept bytes down to next_seq (only the kept span, up to the last run's end) -
    // unless bytes were handed out of the buffer in this run: the stages have not read them
    // yet. Nothing to gain when the buffer already starts at next_seq.
    const uint32_t sh = self.next_seq - R.base;  // (a gap may have moved next_seq past W)
    if (sh == 0 || R.epoch == pool.epoch()) {
      full();
      return;
    }
    if (R.n != 0) std::memmove(mem, mem + sh, R.hi[R.n - 1] - self.next_seq);
    R.base = self.next_seq;
  }
  if (!addRun(R, seq, end)) {
    full();
    return;
  }
  std::memcpy(mem + (seq - R.base), s.payload, s.len);
  if (s.flags & kFin) {
    R.fin = true;
    R.fin_seq = end;
  }
  r.verdict = TcpSegVerdict::kKept;
  handOutKeptHead(pool, self, fail_closed, r);  // only after a gap: a run at next_seq
}

}  // namespace

void tcpStreamRelease(TcpStreamPool& pool, TcpStreamDir& d) {
  if (d.win != TcpStreamDir::kNoWindow) pool.release(d.win);
  dropReorder(pool, d);
  d = TcpStreamDir{};
}

TcpSegResult tcpStreamSegment(TcpStreamPool& pool, TcpStreamDir& self, TcpStreamDir& peer,
                              const TcpSegment& s, bool fail_closed) {
  TcpSegResult r;
  // The ACK: the receiver holds the peer's bytes before it (never beyond what was inspected,
  // unless bytes beyond a hole passed unkept: then it is a gap). Once it holds every
  // inspected byte, the peer's window is not needed any more.
  if ((s.flags & kAck) && (peer.flags & TcpStreamDir::kSeqKnown)) {
    if ((peer.flags & TcpStreamDir::kUnkept) && seqLt(peer.next_seq, s.ack))
      skipTo(pool, peer, s.ack);
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
  r.data = s.payload;
  const int32_t delta = static_cast<int32_t>(seq - self.next_seq);
  // A RST's payload (RFC 1122 diagnostic text) is not stream data.
  if (s.len == 0 || (s.flags & kRst)) {
    if ((s.flags & (kFin | kRst)) == kFin) {
      if (delta == 0) {
        r.fin = true;
      } else if (delta > 0 && pool.reorderBytes() != 0) {
        // A FIN beyond a hole: where the direction ends, once the hole fills.
        if (self.ooo != TcpStreamDir::kNoWindow || pool.acquireReorder(self.ooo, self.next_seq)) {
          Reorder& R = pool.reorder(self.ooo);
          R.fin = true;
          R.fin_seq = seq;
        }
      }
    }
    return r;
  }
  if (delta > 0) {
    keepOutOfOrder(pool, self, s, seq, fail_closed, r);
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
  if (nlen == 0) {
    handOutKeptHead(pool, self, fail_closed, r);
    return r;
  }
  const uint32_t nfrom = self.next_seq, end = nfrom + nlen;
  // New bytes that kept ones overlap must be the same bytes.
  if (self.ooo != TcpStreamDir::kNoWindow && keptDiffers(pool, self.ooo, s, seq, nfrom, end)) {
    r.verdict = TcpSegVerdict::kOverlapDifferent;
    return r;
  }
  if (!takeWindow(pool, self, fail_closed, r)) {
    r.verdict = TcpSegVerdict::kFailClosed;
    return r;
  }
  const uint8_t* p = s.payload + old;
  uint32_t n = nlen;
  bool from_buffer = false;
  if (self.ooo != TcpStreamDir::kNoWindow) {
    Reorder& R = pool.reorder(self.ooo);
    uint8_t* mem = pool.reorderMem(self.ooo);
    if (R.n != 0 && seqLe(R.lo[0], end)) {
      // The segment fills the hole before kept bytes (compared equal above where it
      // overlaps them).
      if (seqLe(R.hi[R.n - 1], end)) {
        for (uint32_t k = 0; k < R.n; ++k) r.kept += R.hi[k] - R.lo[k];  // all in the segment
        R.n = 0;
      } else {
        // Into the buffer (end < the last run's end <= base + W, so it fits), then the runs
        // it reaches handed out with it.
        std::memcpy(mem + (nfrom - R.base), p, nlen);
        uint32_t e = end, k = 0;
        while (k < R.n && seqLe(R.lo[k], e)) {
          if (seqLt(e, R.hi[k])) {
            r.kept += R.hi[k] - e;
            e = R.hi[k];
          }
          ++k;
        }
        std::memmove(R.lo, R.lo + k, (R.n - k) * sizeof(uint32_t));
        std::memmove(R.hi, R.hi + k, (R.n - k) * sizeof(uint32_t));
        R.n = static_cast<uint8_t>(R.n - k);
        R.epoch = pool.epoch();
        p = mem + (nfrom - R.base);
        n = e - nfrom;
        from_buffer = true;
      }
    }
    if (R.fin && R.fin_seq == nfrom + n) r.fin = true;
    if (R.n == 0 && !(R.fin && seqLt(nfrom + n, R.fin_seq))) dropReorder(pool, self);
  }
  handOut(pool, self, p, n, r);
  r.off = from_buffer ? 0 : old;
  if ((s.flags & kFin) && seq + s.len == self.next_seq) r.fin = true;
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
