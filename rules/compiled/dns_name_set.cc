#include "rules/compiled/dns_name_set.h"

#include <bit>

namespace dpu::rules {
namespace {

constexpr size_t kMinCapacity = 16;

size_t capacityFor(size_t n) {
  // load <= 0.7
  size_t want = n + n * 3 / 7 + 1;
  size_t cap = kMinCapacity;
  while (cap < want) cap <<= 1;
  return cap;
}

}  // namespace

uint64_t dnsNameHash(std::string_view name) {
  uint64_t hs[kDnsMaxLabels];
  int n = dnsSuffixHashes(name, hs, kDnsMaxLabels);
  return n > 0 ? hs[0] : 0;
}

DnsNameSet::DnsNameSet(size_t expected) { rehash(capacityFor(expected)); }

void DnsNameSet::reserve(size_t n) {
  size_t cap = capacityFor(n);
  if (cap > keys_.size()) rehash(cap);
}

void DnsNameSet::rehash(size_t capacity) {
  std::vector<uint64_t> old_keys = std::move(keys_);
  keys_.assign(capacity, 0);
  mask_ = capacity - 1;
  shift_ = 64 - std::countr_zero(capacity);
  filter_.assign(capacity / 16, 0);  // capacity >= 16
  fmask_ = filter_.size() - 1;
  for (uint64_t k : old_keys) {
    if (k == 0) continue;
    filterAdd(k);
    uint64_t i = home(k);
    while (keys_[i] != 0) i = (i + 1) & mask_;
    keys_[i] = k;
  }
}

bool DnsNameSet::add(uint64_t h, uint8_t bits) {
  if (bits == 0) return false;
  if ((size_ + 1) * 10 > keys_.size() * 7) rehash(keys_.size() * 2);
  const uint64_t tag = h & kTagMask;
  uint64_t i = home(h);
  while (keys_[i] != 0 && (keys_[i] & kTagMask) != tag) i = (i + 1) & mask_;
  if (keys_[i] == 0) {
    keys_[i] = tag | bits;
    filterAdd(tag);
    ++size_;
    return true;
  }
  uint8_t v = static_cast<uint8_t>(keys_[i]);
  if (bits & DnsEntryBits::kSelf) v = static_cast<uint8_t>((v & 0xf0) | (bits & 0x0f));
  if (bits & DnsEntryBits::kSub) v = static_cast<uint8_t>((v & 0x0f) | (bits & 0xf0));
  keys_[i] = tag | v;
  return false;
}

bool DnsNameSet::remove(uint64_t h, uint8_t bits) {
  const uint64_t tag = h & kTagMask;
  uint64_t i = home(h);
  for (;;) {
    if (keys_[i] == 0) return false;
    if ((keys_[i] & kTagMask) == tag) break;
    i = (i + 1) & mask_;
  }
  uint8_t v = static_cast<uint8_t>(keys_[i]);
  if (bits & DnsEntryBits::kSelf) v &= 0xf0;
  if (bits & DnsEntryBits::kSub) v &= 0x0f;
  if (v != 0) {
    keys_[i] = tag | v;
    return true;
  }
  // Backward-shift deletion: move later members of the probe run into the hole.
  keys_[i] = 0;
  --size_;
  uint64_t hole = i;
  for (uint64_t j = (i + 1) & mask_; keys_[j] != 0; j = (j + 1) & mask_) {
    uint64_t hm = home(keys_[j]);
    // j's entry may move to `hole` when its home is not in (hole, j] cyclically.
    bool in_range = hole <= j ? (hm > hole && hm <= j) : (hm > hole || hm <= j);
    if (in_range) continue;
    keys_[hole] = keys_[j];
    keys_[j] = 0;
    hole = j;
  }
  return true;
}

}  // namespace dpu::rules
