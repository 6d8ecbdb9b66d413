// The load balancer's hash: 64-bit, deterministic (fixed seeds, little-endian loads on every
// host), so two appliances with the same backends map the same key to the same backend
// (scale-out behind ECMP). Not keyed: the key bytes come from traffic, but the table only
// spreads flows; it is not a defence against chosen collisions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace dpu::rules {

namespace lb_hash_detail {
constexpr uint64_t kC1 = 0x87c37b91114253d5ull;
constexpr uint64_t kC2 = 0x4cf5ad432745937full;
inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t fmix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ull;
  k ^= k >> 33;
  return k;
}
inline uint64_t load64le(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64(v);
#endif
  return v;
}
inline uint64_t mixBlock(uint64_t h, uint64_t k) {
  k *= kC1;
  k = rotl(k, 31);
  k *= kC2;
  h ^= k;
  h = rotl(h, 27);
  return h * 5 + 0x52dce729;
}
}  // namespace lb_hash_detail

// Seeds: flows use kLbKeySeed; the Maglev permutation of a backend uses the two others.
constexpr uint64_t kLbKeySeed = 0x6c625f6b65795f31ull;     // "lb_key_1"
constexpr uint64_t kLbOffsetSeed = 0x6d61676c65765f6full;  // "maglev_o"
constexpr uint64_t kLbSkipSeed = 0x6d61676c65765f73ull;    // "maglev_s"

// Murmur3-style 64-bit hash of n bytes.
inline uint64_t lbHash64(const uint8_t* p, size_t n, uint64_t seed) {
  using namespace lb_hash_detail;
  uint64_t h = seed ^ (static_cast<uint64_t>(n) * kC2);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) h = mixBlock(h, load64le(p + i));
  if (i < n) {
    uint8_t tail[8] = {0};
    std::memcpy(tail, p + i, n - i);
    h = mixBlock(h, load64le(tail));
  }
  return fmix(h ^ static_cast<uint64_t>(n));
}

inline uint64_t lbHash64(const char* s, size_t n, uint64_t seed) {
  return lbHash64(reinterpret_cast<const uint8_t*>(s), n, seed);
}

// Maps a 64-bit hash onto [0, m) (multiply-high; uniform for a uniform hash).
inline uint32_t lbReduce(uint64_t h, uint32_t m) {
  return static_cast<uint32_t>((static_cast<unsigned __int128>(h) * m) >> 64);
}

}  // namespace dpu::rules
