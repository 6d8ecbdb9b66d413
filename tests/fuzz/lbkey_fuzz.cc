// Fuzz target: the load balancer's key field extraction (rules/compiled/lb.h) on parsed frames.
//
// Input: 8 bytes of recipe, then the frame (Ethernet first).
//   [0] field kind (mod 9: ip.src ... dns.qname, raw)   [1] anchor (mod 4)
//   [2..3] offset (big-endian)   [4] length (mod 17)   [5] bit 0: masked   [6..7] mask seed
// The frame sits in a heap buffer of exactly its size, so ASan catches any over-read. Beyond
// "no crash", every result is checked against an independent derivation:
// - raw fields are present exactly when [anchor + offset, + length) lies inside the anchor's
//   region (frame / IP datagram / L4 payload) and then equal those bytes (masked);
// - fixed-width named fields have their width, dns.qname is 2..255 bytes ending with a zero
//   label, lower case;
// - keyHash is deterministic and falls back to the 5-tuple hash exactly when a field is missing.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "dataplane/packet/parser.h"
#include "dataplane/stages/lb/lb_view.h"
#include "rules/compile/lb_compiler.h"
#include "rules/compiled/lb.h"
#include "tests/fuzz/fuzz_util.h"

using namespace dpu;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  const uint8_t* r = data;
  std::vector<uint8_t> frame(data + 8, data + size);
  if (frame.size() > 65535) frame.resize(65535);
  uint8_t* f = frame.empty() ? nullptr : frame.data();
  uint32_t n = uint32_t(frame.size());
  dp::PacketMeta m;
  dp::ParseStatus st = dp::parsePacket(f, n, m);
  if (st != dp::ParseStatus::kOk && st != dp::ParseStatus::kNonIp) return 0;
  rules::LbPacket p;
  dp::lbView(m, f, n, p);

  rules::CompiledLbField cf;
  cf.kind = static_cast<rules::LbFieldKind>(r[0] % 9);
  cf.anchor = static_cast<rules::LbAnchor>(r[1] % 4);
  cf.offset = uint16_t(r[2] << 8 | r[3]);
  cf.length = uint8_t(r[4] % 17);
  if (cf.kind == rules::LbFieldKind::kRaw && cf.length == 0) cf.length = 1;
  if (cf.kind != rules::LbFieldKind::kRaw) cf.length = uint8_t(rules::lbFieldWidth(cf.kind));
  cf.masked = (r[5] & 1) && cf.kind != rules::LbFieldKind::kDnsQname;
  for (int i = 0; i < 16; ++i) cf.mask[i] = uint8_t(r[6] * (i + 1) + r[7]);

  uint8_t out[256];
  int w = rules::lbExtractField(cf, p, out);
  FUZZ_CHECK(w <= 255);
  if (cf.kind == rules::LbFieldKind::kRaw) {
    bool want = true;
    uint32_t base = 0, end = n;
    switch (cf.anchor) {
      case rules::LbAnchor::kL2: break;
      case rules::LbAnchor::kL3:
        want = m.l3 != dp::L3Type::kNone;
        base = m.l3_offset;
        end = uint32_t(m.l3_offset) + m.l3_len;
        break;
      case rules::LbAnchor::kL4:
        want = m.has_l4;
        base = m.l4_offset;
        end = uint32_t(m.l3_offset) + m.l3_len;
        break;
      case rules::LbAnchor::kPayload:
        want = m.has_l4;
        base = m.payload_offset;
        end = uint32_t(m.payload_offset) + m.payload_len;
        break;
    }
    if (end > n) end = n;
    uint64_t lo = uint64_t(base) + cf.offset, hi = lo + cf.length;
    want = want && hi <= end;
    FUZZ_CHECK((w >= 0) == want);
    if (w >= 0) {
      FUZZ_CHECK(w == cf.length);
      for (int i = 0; i < w; ++i) {
        uint8_t b = f[lo + i];
        if (cf.masked) b &= cf.mask[i];
        FUZZ_CHECK(out[i] == b);
      }
    }
  } else if (cf.kind == rules::LbFieldKind::kDnsQname) {
    if (w >= 0) {
      FUZZ_CHECK(w >= 1 && out[w - 1] == 0);
      for (int i = 0; i < w; ++i) FUZZ_CHECK(!(out[i] >= 'A' && out[i] <= 'Z'));
    }
  } else if (w >= 0) {
    FUZZ_CHECK(uint32_t(w) == rules::lbFieldWidth(cf.kind));
    FUZZ_CHECK(m.l3 != dp::L3Type::kNone || cf.kind == rules::LbFieldKind::kVlan);
  }

  // A service keyed on this field (plus ip.dst): deterministic, fallback exactly when missing.
  rules::LbService s;
  s.id = "fuzz";
  rules::IpPrefix any;
  s.dst = {any};
  rules::LbKeyField k;
  k.kind = cf.kind;
  if (cf.kind == rules::LbFieldKind::kRaw) {
    k.anchor = cf.anchor;
    k.offset = cf.offset;
    k.length = cf.length;
  }
  rules::LbKeyField dst;
  dst.kind = rules::LbFieldKind::kIpDst;
  s.key = {k, dst};
  rules::LbBackend b;
  b.id = "b";
  b.mac = std::array<uint8_t, 6>{};
  s.backends = {b};
  s.table_size = 251;
  auto svc = rules::buildLbService(s);
  bool m1 = false, m2 = false;
  uint64_t h1 = svc->keyHash(p, &m1), h2 = svc->keyHash(p, &m2);
  FUZZ_CHECK(h1 == h2 && m1 == m2);
  int wk = rules::lbExtractField(svc->fields[0], p, out);
  int wd = rules::lbExtractField(svc->fields[1], p, out);
  FUZZ_CHECK(m1 == (wk < 0 || wd < 0));
  if (m1) FUZZ_CHECK(h1 == rules::lbHash5Tuple(p));
  return 0;
}
