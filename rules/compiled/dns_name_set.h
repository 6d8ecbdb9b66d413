// A compact set of domain names for million-name block lists: an open-addressing table
// (linear probing) of one 64-bit word per name: the top 56 bits of the name's 64-bit
// fingerprint and, in the low byte, its match data (never 0 for a stored name, so a zero word
// is an empty slot). A probe is one memory access (one cache miss in a table far larger than
// the caches). The home slot is taken from the fingerprint's top bits, so it can be computed
// back from a stored word (rehash, deletion). Names themselves are not stored.
//
// Hashing: a name's fingerprint is a chain over its labels from the right (TLD first):
//   h("com") = step(seed, "com"), h("example.com") = step(h("com"), "example"), ...
// so one right-to-left pass over a query gives the fingerprint of every suffix, and a
// subtree entry ("||example.com^", "*.example.com") is found by looking up each suffix.
// Labels are hashed lower case as given (callers normalize: A-Z -> a-z, no trailing dot).
//
// False positives: a name that is not in the set matches only when the top 56 bits of its
// fingerprint equal a stored word's. For a set of n names and a query of L labels (L suffix
// look-ups) the probability is at most L * n / 2^56 (~1.5e-10 for n = 2M, L = 5);
// bench/dns_bench and tests/rules/dns_lists_test measure it (0 false positives in their runs).
//
// Memory: capacity is a power of two kept at load <= 0.7 (grown x2 beyond), 8 bytes a slot,
// plus the filter (below), half a byte a slot: 12.1 .. 24.3 bytes per name, 17.8 at 1M and 2M.
//
// Filter: most probes are for suffixes that are not in the set ("com", "example.com" of a
// query "www.example.com"), and each is a cache miss in a table of many MB. In front of the
// table, a blocked Bloom filter of 4 bits a slot (1 MB for 1M names, small enough to stay in
// the caches) holds two bits in one 64-bit word per stored name: a suffix whose bits are not
// both set is not in the set, without touching the table (of absent suffixes ~4.5 % pass at
// load 0.48, the load at 1M and 2M names, ~9 % at load 0.7). It is a function of the stored
// words only (bits 8..63 of the fingerprint), so a rehash rebuilds it; a removal leaves its
// bits set (still correct, a little less selective until the next rehash).
//
// Immutable once published (shared by workers through the Snapshot); the control side copies
// a set to change it (incremental add / remove) and publishes the copy.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace dpu::rules {

// Per-slot match data: the name itself ("self") and/or its strict subdomains ("sub"), each
// with a 3-bit action (0 = the list's action, else a DnsAction value).
struct DnsEntryBits {
  static constexpr uint8_t kSelf = 0x01;
  static constexpr uint8_t kSub = 0x10;
  static constexpr uint8_t selfAction(uint8_t v) { return (v >> 1) & 7; }
  static constexpr uint8_t subAction(uint8_t v) { return (v >> 5) & 7; }
  static constexpr uint8_t make(bool self, uint8_t self_action, bool sub, uint8_t sub_action) {
    return static_cast<uint8_t>((self ? kSelf | (self_action & 7) << 1 : 0) |
                                (sub ? kSub | (sub_action & 7) << 5 : 0));
  }
};

// A prefetch the compiler keeps: GCC deletes a loop whose only effect is __builtin_prefetch
// (a loop without side effects may be removed), which silently dropped the prefetch loops
// of a lookup; a volatile asm is a side effect.
inline void dnsPrefetch(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p);
#endif
}

inline constexpr uint64_t kDnsHashSeed = 0x6a09e667f3bcc909ull;
inline constexpr int kDnsMaxLabels = 128;  // a 255-byte wire name has at most 127 labels

inline uint64_t dnsMix(uint64_t x) {
  x ^= x >> 32;
  x *= 0xd6e8feb86659fd93ull;
  x ^= x >> 32;
  x *= 0xd6e8feb86659fd93ull;
  x ^= x >> 32;
  return x;
}

// One step of the label chain: the fingerprint of "<label>.<suffix>" from the suffix's.
// `avail` (>= n) is how many bytes from s may be read: the last 1..7 bytes of the label are
// read as one 8-byte word and masked when 8 bytes are readable there, else byte by byte
// (same value: the bytes little-endian in a zeroed word; a variable-length memcpy here was a
// library call and a store-forwarding stall on every short label).
inline uint64_t dnsLabelStep(uint64_t h, const char* s, size_t n, size_t avail) {
  static_assert(std::endian::native == std::endian::little, "fingerprints assume little-endian");
  uint64_t a = (h ^ (n * 0x9e3779b97f4a7c15ull)) * 0xbf58476d1ce4e5b9ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, s + i, 8);
    a = dnsMix(a ^ w);
  }
  if (i < n) {
    uint64_t w = 0;
    const size_t r = n - i;  // 1..7
    if (avail - i >= 8) {
      std::memcpy(&w, s + i, 8);
      w &= ~uint64_t{0} >> (64 - 8 * r);
    } else {
      for (size_t j = 0; j < r; ++j) w |= uint64_t{static_cast<uint8_t>(s[i + j])} << (8 * j);
    }
    a ^= w ^ 0xff00000000000000ull;  // mixed by the final step (one mix per short label)
  }
  return dnsMix(a + h);
}

// Fingerprints of every suffix of a dotted, normalized name ("a.b.c"): out[0] = whole name,
// out[k] = the name without its first k labels. Returns the number of labels (0 for "",
// -1 when there are more than `max`).
inline int dnsSuffixHashes(std::string_view name, uint64_t* out, int max) {
  if (name.empty()) return 0;
  int n = 1;
  for (char c : name) n += c == '.';
  if (n > max) return -1;
  uint64_t h = kDnsHashSeed;
  size_t end = name.size();
  for (int k = n - 1; k >= 0; --k) {
    size_t dot = k == 0 ? std::string_view::npos : name.rfind('.', end - 1);
    size_t begin = dot == std::string_view::npos ? 0 : dot + 1;
    h = dnsLabelStep(h, name.data() + begin, end - begin, name.size() - begin);
    out[k] = h;
    end = begin == 0 ? 0 : begin - 1;
  }
  return n;
}

// The fingerprint of a whole dotted, normalized name.
uint64_t dnsNameHash(std::string_view name);

class DnsNameSet {
 public:
  explicit DnsNameSet(size_t expected = 0);

  // Merges `bits` into the name's slot: a part (self / sub) given in `bits` replaces that
  // part's action. Returns true when the name was new.
  bool add(uint64_t h, uint8_t bits);
  // Clears the parts given in `bits` (their actions are ignored); the slot is freed when no
  // part is left. Returns true when the name was present.
  bool remove(uint64_t h, uint8_t bits);
  // False when the name is certainly absent (the filter); true when it may be present.
  bool mayContain(uint64_t h) const {
    const uint64_t m = filterBits(h);
    return (filter_[(h >> 8) & fmask_] & m) == m;
  }
  // The name's match data, 0 when absent.
  uint8_t find(uint64_t h) const {
    if (!mayContain(h)) return 0;
    for (uint64_t i = h >> shift_;; i = (i + 1) & mask_) {
      uint64_t k = keys_[i];
      if (k == 0) return 0;
      if (((k ^ h) & kTagMask) == 0) return static_cast<uint8_t>(k);
    }
  }
  // Two-step prefetch of a lookup: the filter word, then (once it is in the cache) the home
  // slot of a name the filter lets through.
  void prefetchFilter(uint64_t h) const { dnsPrefetch(&filter_[(h >> 8) & fmask_]); }
  void prefetchSlot(uint64_t h) const {
    if (mayContain(h)) dnsPrefetch(&keys_[h >> shift_]);
  }

  size_t size() const { return size_; }
  size_t capacity() const { return keys_.size(); }
  size_t memoryBytes() const { return (keys_.size() + filter_.size()) * sizeof(uint64_t); }
  void reserve(size_t n);

 private:
  void rehash(size_t capacity);

  static constexpr uint64_t kTagMask = ~uint64_t{0xff};
  uint64_t home(uint64_t word) const { return word >> shift_; }
  static uint64_t filterBits(uint64_t h) {
    return (uint64_t{1} << ((h >> 32) & 63)) | (uint64_t{1} << ((h >> 38) & 63));
  }
  void filterAdd(uint64_t h) { filter_[(h >> 8) & fmask_] |= filterBits(h); }
  std::vector<uint64_t> keys_;  // 0 = empty, else fingerprint & kTagMask | match data
  std::vector<uint64_t> filter_;  // capacity / 16 words: 4 bits a slot
  uint64_t fmask_ = 0;
  uint64_t mask_ = 0;
  int shift_ = 64;              // 64 - log2(capacity): the home slot is h >> shift_
  size_t size_ = 0;
};

}  // namespace dpu::rules
