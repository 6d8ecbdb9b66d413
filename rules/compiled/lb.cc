#include "rules/compiled/lb.h"

#include <algorithm>

namespace dpu::rules {

const char* lbFieldName(LbFieldKind k) {
  switch (k) {
    case LbFieldKind::kIpSrc: return "ip.src";
    case LbFieldKind::kIpDst: return "ip.dst";
    case LbFieldKind::kL4Sport: return "l4.sport";
    case LbFieldKind::kL4Dport: return "l4.dport";
    case LbFieldKind::kIpProto: return "ip.proto";
    case LbFieldKind::kVlan: return "vlan";
    case LbFieldKind::kIpv6FlowLabel: return "ipv6.flowlabel";
    case LbFieldKind::kDnsQname: return "dns.qname";
    case LbFieldKind::kRaw: return "raw";
    case LbFieldKind::kTunnelId: return "tunnel_id";
  }
  return "?";
}

const char* lbAnchorName(LbAnchor a) {
  switch (a) {
    case LbAnchor::kL2: return "l2";
    case LbAnchor::kL3: return "l3";
    case LbAnchor::kL4: return "l4";
    case LbAnchor::kPayload: return "payload";
  }
  return "?";
}

const char* lbModeName(LbMode m) {
  switch (m) {
    case LbMode::kL2: return "l2";
    case LbMode::kNat: return "nat";
    case LbMode::kIpip: return "ipip";
  }
  return "?";
}

const char* lbStateName(LbBackendState s) {
  switch (s) {
    case LbBackendState::kActive: return "active";
    case LbBackendState::kDraining: return "draining";
    case LbBackendState::kDown: return "down";
  }
  return "?";
}

bool isPrime(uint32_t n) {
  if (n < 2) return false;
  if (n % 2 == 0) return n == 2;
  for (uint32_t d = 3; uint64_t(d) * d <= n; d += 2) {
    if (n % d == 0) return false;
  }
  return true;
}

namespace {

struct Perm {
  uint32_t offset, skip;
};

Perm preference(const std::string& id, uint32_t m) {
  uint64_t h1 = lbHash64(id.data(), id.size(), kLbOffsetSeed);
  uint64_t h2 = lbHash64(id.data(), id.size(), kLbSkipSeed);
  return {uint32_t(h1 % m), uint32_t(h2 % (m - 1) + 1)};
}

// Turn order: by id, so the table does not depend on the order backends are listed in (two
// appliances configured in a different order still agree).
std::vector<size_t> byId(const std::vector<std::string>& ids) {
  std::vector<size_t> order(ids.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ids[a] < ids[b]; });
  return order;
}

}  // namespace

std::vector<uint16_t> maglevBuild(const std::vector<std::string>& ids,
                                  const std::vector<uint32_t>& weights, uint32_t m) {
  struct Turn {
    uint32_t next;   // next preferred slot
    uint32_t skip;
    uint32_t weight;
    uint32_t credit;
    uint16_t index;
  };
  std::vector<Turn> in;
  uint32_t max_w = 0;
  for (size_t i : byId(ids)) {
    if (weights[i] == 0) continue;
    Perm p = preference(ids[i], m);
    in.push_back({p.offset, p.skip, weights[i], 0, uint16_t(i)});
    max_w = std::max(max_w, weights[i]);
  }
  if (in.empty() || m == 0) return {};
  constexpr uint16_t kFree = kLbNoBackend;
  std::vector<uint16_t> table(m, kFree);
  uint32_t filled = 0;
  while (true) {
    for (Turn& t : in) {
      t.credit += t.weight;
      while (t.credit >= max_w) {
        t.credit -= max_w;
        uint32_t c = t.next;
        while (table[c] != kFree) {
          c += t.skip;
          if (c >= m) c -= m;
        }
        table[c] = t.index;
        c += t.skip;
        if (c >= m) c -= m;
        t.next = c;
        if (++filled == m) return table;
      }
    }
  }
}

std::vector<uint16_t> maglevBuildReference(const std::vector<std::string>& ids,
                                           const std::vector<uint32_t>& weights, uint32_t m) {
  // Pseudocode 1 of the paper: permutation[i][j] = (offset + j * skip) mod M for every
  // backend first; then next[i] = 0, entry[*] = -1 and the population loop.
  const size_t n = ids.size();
  std::vector<std::vector<uint32_t>> permutation(n);
  uint32_t max_w = 0;
  for (size_t i = 0; i < n; ++i) {
    max_w = std::max(max_w, weights[i]);
    if (weights[i] == 0) continue;
    Perm p = preference(ids[i], m);
    permutation[i].resize(m);
    for (uint32_t j = 0; j < m; ++j) {
      permutation[i][j] = uint32_t((p.offset + uint64_t(j) * p.skip) % m);
    }
  }
  if (max_w == 0 || m == 0) return {};
  std::vector<uint32_t> next(n, 0), credit(n, 0);
  std::vector<int64_t> entry(m, -1);
  uint32_t filled = 0;
  const std::vector<size_t> order = byId(ids);
  while (true) {
    for (size_t i : order) {
      if (weights[i] == 0) continue;
      credit[i] += weights[i];
      while (credit[i] >= max_w) {
        credit[i] -= max_w;
        uint32_t c = permutation[i][next[i]];
        while (entry[c] >= 0) {
          next[i] = next[i] + 1;
          c = permutation[i][next[i]];
        }
        entry[c] = int64_t(i);
        next[i] = next[i] + 1;
        filled = filled + 1;
        if (filled == m) {
          std::vector<uint16_t> out(m);
          for (uint32_t s = 0; s < m; ++s) out[s] = uint16_t(entry[s]);
          return out;
        }
      }
    }
  }
}

}  // namespace dpu::rules
