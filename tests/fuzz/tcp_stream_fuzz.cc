// Fuzz target: the TCP stream engine's reorder buffers (dataplane/normalize/tcp_stream.h).
// The input picks the pool sizes and a sequence of segments of one direction (offset, length,
// whether its bytes are the stream's true bytes or other bytes, same run or a new one, an ACK
// from the receiver, fail open or closed). Invariants, whatever the order:
//   - the bytes handed out are contiguous and each exactly once (seq == what was handed out);
//   - when every segment carries the true bytes, the bytes handed out are the stream's and no
//     overlap is ever "different"; otherwise every handed-out byte is the first copy the
//     engine took in of that position (kept or in order): never a later, different copy;
//   - a gap is reported only after bytes passed unkept (fail open), and the stream then
//     resumes at the receiver's ACK;
//   - after the flow ends every window and reorder buffer is back in the pool.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "dataplane/normalize/tcp_stream.h"
#include "tests/fuzz/fuzz_util.h"

using namespace dpu::dp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4 || size > 4096) return 0;
  const uint32_t wbytes = 16u << (data[0] & 3);            // 16 .. 128
  const uint32_t rbytes = 32u << ((data[0] >> 2) & 3);     // 32 .. 256
  const uint32_t nreo = 1 + ((data[0] >> 4) & 1);
  const bool true_only = data[1] & 1;
  TcpStreamPool pool(wbytes, 2, rbytes, nreo);
  TcpStreamDir self, peer;
  const uint32_t isn = uint32_t(data[2]) << 24 | 0xfffff0u;  // some wrap past 2^32
  {
    TcpSegment syn;
    syn.seq = isn;
    syn.flags = 0x02;
    tcpStreamSegment(pool, self, peer, syn, false);
  }
  // The stream's true bytes: position k holds uint8_t(k * 7 + 3).
  auto truth = [](uint32_t k) { return uint8_t(k * 7 + 3); };
  // What the engine took in first at each position (-1: nothing yet), and what it handed out.
  std::vector<int> first(rbytes * 8, -1);
  std::string out;
  uint32_t out_from = 0;  // stream offset of out[0] (moves on a gap)
  bool unkept = false;
  uint8_t buf[512];
  size_t i = 3;
  while (i + 3 <= size) {
    const uint8_t a = data[i], b = data[i + 1], c = data[i + 2];
    i += 3;
    pool.beginRun();
    if ((c & 0xc0) == 0xc0) {  // the receiver acknowledges up to a stream offset
      TcpSegment ack;
      ack.seq = 7000;
      ack.flags = 0x10;
      const uint32_t to = uint32_t(a) | uint32_t(b & 3) << 8;
      ack.ack = isn + 1 + to;
      const uint32_t before = self.next_seq;
      tcpStreamSegment(pool, peer, self, ack, false);
      if (self.next_seq != before) {
        FUZZ_CHECK(unkept);  // only after bytes passed unkept
        FUZZ_CHECK(self.next_seq == isn + 1 + to);
      }
      continue;
    }
    const uint32_t off = uint32_t(a) | uint32_t(b & 3) << 8;  // 0 .. 1023
    const uint32_t len = 1 + (c & 0x3f);
    if (off + len > first.size()) continue;
    const bool other = !true_only && (b & 4);
    for (uint32_t k = 0; k < len; ++k) buf[k] = other ? uint8_t(truth(off + k) ^ 0x5a) : truth(off + k);
    TcpSegment s;
    s.seq = isn + 1 + off;
    s.flags = 0x18 | ((b & 8) ? 0x01 : 0);
    s.payload = buf;
    s.len = len;
    const bool fail_closed = b & 16;
    const uint32_t next_before = self.next_seq;
    TcpSegResult r = tcpStreamSegment(pool, self, peer, s, fail_closed);
    if (true_only) FUZZ_CHECK(r.verdict != TcpSegVerdict::kOverlapDifferent);
    if (r.unkept) unkept = true;
    if (r.verdict == TcpSegVerdict::kKept) {
      for (uint32_t k = 0; k < len; ++k)
        if (first[off + k] < 0) first[off + k] = buf[k];
      continue;
    }
    if (r.verdict != TcpSegVerdict::kAccept || r.len == 0) continue;
    const uint32_t at = r.seq - (isn + 1);
    if (r.gap) {
      FUZZ_CHECK(unkept);
      out_from = at;
      out.clear();
    } else {
      FUZZ_CHECK(r.seq == next_before);
      FUZZ_CHECK(at == out_from + uint32_t(out.size()));  // contiguous, once
    }
    // The segment's own new bytes count as taken in now (where nothing was kept before): the
    // ones handed out, and, when it lay beyond a hole a gap moved next_seq to, the rest kept.
    for (uint32_t k = 0; k < len; ++k) {
      const uint32_t pos = off + k;
      if (pos >= at && first[pos] < 0) first[pos] = buf[k];
    }
    for (uint32_t k = 0; k < r.len; ++k) {
      const uint32_t pos = at + k;
      FUZZ_CHECK(pos < first.size() && first[pos] >= 0);
      FUZZ_CHECK(r.data[k] == uint8_t(first[pos]));  // the first copy, never a later one
      if (true_only) FUZZ_CHECK(r.data[k] == truth(pos));
    }
    out.append(reinterpret_cast<const char*>(r.data), r.len);
    FUZZ_CHECK(self.next_seq == uint32_t(isn + 1 + out_from + uint32_t(out.size())));
  }
  tcpStreamRelease(pool, self);
  tcpStreamRelease(pool, peer);
  pool.beginRun();
  FUZZ_CHECK(pool.available() == pool.capacity());
  FUZZ_CHECK(pool.reorderAvailable() == pool.reorderCapacity());
  return 0;
}
