// Fuzz target: the flow key (makeFlowKey) and fragment key (makeFragKey) builders on frames
// the parser accepts. The input is a frame; frames the parser rejects are skipped.
//
// Invariants:
// - every byte of a key is written (two builds over different garbage are byte-identical:
//   rte_hash hashes and compares keys as raw bytes);
// - the flow key is canonical: lo endpoint (address, port) <= hi endpoint, the direction bit
//   says which endpoint sent the packet, proto / IP version / VLANs come from the meta;
// - symmetry: the mirrored frame (source and destination addresses swapped, TCP/UDP ports
//   swapped, ICMP echo request <-> reply) parses to the mirrored meta and gets the same key
//   with the opposite direction bit (the same direction when both endpoints are equal);
// - the key ignores what is not part of the flow (payload bytes, TTL, TCP sequence numbers
//   and flags) and changes when a port changes;
// - the fragment key names (src, dst, id, outer VLAN, IPv4 protocol / 0 for IPv6, version)
//   and is the same for every fragment of the datagram (another offset, MF flipped).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "dataplane/flow/flow_key.h"
#include "dataplane/frag/frag_tracker.h"
#include "dataplane/packet/parser.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using dpu::dp::FlowKey;
using dpu::dp::FragKey;
using dpu::dp::IpAddr;
using dpu::dp::L3Type;
using dpu::dp::PacketMeta;
using dpu::dp::ParseStatus;
using dpu::fuzz::be16;
using dpu::fuzz::be32;

bool buildFlowKey(const PacketMeta& m, FlowKey& k) {
  FlowKey a, b;
  std::memset(static_cast<void*>(&a), 0x5A, sizeof(a));  // garbage: every byte must be written
  std::memset(static_cast<void*>(&b), 0xC3, sizeof(b));
  const bool da = dpu::dp::makeFlowKey(m, a);
  const bool db = dpu::dp::makeFlowKey(m, b);
  FUZZ_CHECK(da == db);
  FUZZ_CHECK(std::memcmp(&a, &b, sizeof(a)) == 0);  // no byte left unwritten
  k = a;
  return da;
}

FragKey buildFragKey(const PacketMeta& m) {
  const FragKey a = dpu::dp::makeFragKey(m);
  const FragKey b = dpu::dp::makeFragKey(m);
  FUZZ_CHECK(std::memcmp(&a, &b, sizeof(a)) == 0);
  return a;
}

int cmpEndpoint(const IpAddr& a, uint16_t ap, const IpAddr& b, uint16_t bp) {
  const int c = std::memcmp(a.b, b.b, 16);
  if (c != 0) return c;
  return ap < bp ? -1 : (ap > bp ? 1 : 0);
}

void checkFlowKey(const PacketMeta& m, const FlowKey& k, bool src_is_hi) {
  FUZZ_CHECK(cmpEndpoint(k.lo_addr, k.lo_port, k.hi_addr, k.hi_port) <= 0);
  const IpAddr& from = src_is_hi ? k.hi_addr : k.lo_addr;
  const IpAddr& to = src_is_hi ? k.lo_addr : k.hi_addr;
  FUZZ_CHECK(from == m.src && to == m.dst);
  FUZZ_CHECK((src_is_hi ? k.hi_port : k.lo_port) == m.sport);
  FUZZ_CHECK((src_is_hi ? k.lo_port : k.hi_port) == m.dport);
  // The direction bit is set only when the source is strictly the higher endpoint.
  if (src_is_hi) FUZZ_CHECK(cmpEndpoint(k.lo_addr, k.lo_port, k.hi_addr, k.hi_port) < 0);
  FUZZ_CHECK(k.proto == m.l4_proto);
  FUZZ_CHECK(k.ip_ver == (m.l3 == L3Type::kIpv4 ? 4 : 6));
  FUZZ_CHECK(k.vlan == m.vlan_outer && k.vlan_inner == m.vlan_inner);
  FUZZ_CHECK(k.pppoe_session == (m.pppoe_offset != 0 ? m.pppoe_session : 0));
  FUZZ_CHECK(k.tunnel_id == m.tunnel_id);
}

void checkFragKey(const PacketMeta& m, const FragKey& k) {
  FUZZ_CHECK(k.src == m.src && k.dst == m.dst);
  FUZZ_CHECK(k.id == m.frag_id);
  FUZZ_CHECK(k.vlan == m.vlan_outer);
  FUZZ_CHECK(k.vlan_inner == m.vlan_inner);
  FUZZ_CHECK(k.pppoe_session == (m.pppoe_offset != 0 ? m.pppoe_session : 0));
  FUZZ_CHECK(k.tunnel_id == m.tunnel_id);
  FUZZ_CHECK(k.proto == (m.l3 == L3Type::kIpv4 ? m.l4_proto : 0));
  FUZZ_CHECK(k.ip_ver == (m.l3 == L3Type::kIpv4 ? 4 : 6));
}

ParseStatus reparse(const std::vector<uint8_t>& f, PacketMeta& m) {
  std::vector<uint8_t> exact(f);  // heap buffer of exactly the frame's size
  return dpu::dp::parsePacket(exact.data(), static_cast<uint32_t>(exact.size()), m);
}

void swapBytes(std::vector<uint8_t>& f, size_t a, size_t b, size_t n) {
  for (size_t i = 0; i < n; ++i) std::swap(f[a + i], f[b + i]);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65535) return 0;
  const std::vector<uint8_t> frame(data, data + size);
  PacketMeta m;
  if (reparse(frame, m) != ParseStatus::kOk) return 0;
  FUZZ_CHECK(m.l3 != L3Type::kNone);
  const bool v4 = m.l3 == L3Type::kIpv4;
  const uint32_t l3 = m.l3_offset;
  const uint32_t l4 = m.l4_offset;
  const bool ports = m.has_l4 && (m.l4_proto == 6 || m.l4_proto == 17);
  const bool echo = m.has_l4 && (v4 ? (m.l4_proto == 1 && (m.icmp_type == 0 || m.icmp_type == 8))
                                    : (m.l4_proto == 58 &&
                                       (m.icmp_type == 128 || m.icmp_type == 129)));

  FlowKey k;
  const bool dir = buildFlowKey(m, k);
  checkFlowKey(m, k, dir);

  // Mirror: the same flow in the other direction.
  std::vector<uint8_t> mir = frame;
  if (v4) {
    swapBytes(mir, l3 + 12, l3 + 16, 4);
  } else {
    swapBytes(mir, l3 + 8, l3 + 24, 16);
  }
  if (ports) swapBytes(mir, l4, l4 + 2, 2);
  if (echo) {
    uint8_t& type = mir[l4];
    type = v4 ? static_cast<uint8_t>(8 - type) : static_cast<uint8_t>(257 - type);
  }
  PacketMeta mm;
  FUZZ_CHECK(reparse(mir, mm) == ParseStatus::kOk);
  FUZZ_CHECK(mm.src == m.dst && mm.dst == m.src);
  FUZZ_CHECK(mm.sport == m.dport && mm.dport == m.sport);
  FUZZ_CHECK(mm.l4_proto == m.l4_proto && mm.has_l4 == m.has_l4);
  FlowKey km;
  const bool dirm = buildFlowKey(mm, km);
  checkFlowKey(mm, km, dirm);
  FUZZ_CHECK(std::memcmp(&k, &km, sizeof(k)) == 0);
  const bool same_endpoint = m.src == m.dst && m.sport == m.dport;
  if (same_endpoint) {
    FUZZ_CHECK(!dir && !dirm);
  } else {
    FUZZ_CHECK(dirm == !dir);
  }

  // What is not part of the flow does not change the key: payload, TTL, TCP seq/ack/flags.
  // (Without a parsed L4 header the "payload" of a first fragment may hold a partial transport
  // or extension header: only payload after a parsed header, or of a later fragment, is noise.)
  std::vector<uint8_t> noise = frame;
  if (m.has_l4 || m.isLaterFragment()) {
    const uint32_t end = static_cast<uint32_t>(m.payload_offset) + m.payload_len;
    for (uint32_t i = m.payload_offset; i < end; ++i) noise[i] ^= 0xFF;
  }
  noise[l3 + (v4 ? 8 : 7)] ^= 0x55;
  if (m.has_l4 && m.l4_proto == 6) {
    for (uint32_t i = 4; i < 12; ++i) noise[l4 + i] ^= 0xA5;
    noise[l4 + 13] ^= 0x3F;
  }
  PacketMeta mn;
  FUZZ_CHECK(reparse(noise, mn) == ParseStatus::kOk);
  FlowKey kn;
  FUZZ_CHECK(buildFlowKey(mn, kn) == dir);
  FUZZ_CHECK(std::memcmp(&k, &kn, sizeof(k)) == 0);

  // Another PPPoE session is another flow (the session id is in the key, like a VLAN id).
  if (m.pppoe_offset != 0) {
    std::vector<uint8_t> other = frame;
    other[m.pppoe_offset + 3] ^= 0x01;
    PacketMeta mo;
    FUZZ_CHECK(reparse(other, mo) == ParseStatus::kOk);
    FlowKey ko;
    buildFlowKey(mo, ko);
    FUZZ_CHECK(std::memcmp(&k, &ko, sizeof(k)) != 0);
  }

  // Another source port is another flow.
  if (ports) {
    std::vector<uint8_t> other = frame;
    const uint16_t sp = static_cast<uint16_t>(be16(&frame[l4]) + 1);
    other[l4] = static_cast<uint8_t>(sp >> 8);
    other[l4 + 1] = static_cast<uint8_t>(sp);
    PacketMeta mo;
    FUZZ_CHECK(reparse(other, mo) == ParseStatus::kOk);
    FlowKey ko;
    buildFlowKey(mo, ko);
    FUZZ_CHECK(std::memcmp(&k, &ko, sizeof(k)) != 0);
  }

  if (!m.is_fragment) return 0;
  const FragKey fk = buildFragKey(m);
  checkFragKey(m, fk);
  const FragKey fkm = buildFragKey(mm);
  checkFragKey(mm, fkm);
  FUZZ_CHECK(fkm.src == fk.dst && fkm.dst == fk.src && fkm.id == fk.id && fkm.proto == fk.proto);

  // A sibling fragment of the same datagram (another offset, MF flipped) has the same key.
  const uint8_t sel = size != 0 ? data[size - 1] : 0;
  std::vector<uint8_t> sib = frame;
  if (v4) {
    const uint16_t fo = be16(&frame[l3 + 6]);
    const uint16_t units = static_cast<uint16_t>(((fo & 0x1FFF) + 1 + sel) & 0x1FFF);
    const uint16_t nfo = static_cast<uint16_t>((fo & 0xC000) | ((fo ^ 0x2000) & 0x2000) | units);
    sib[l3 + 6] = static_cast<uint8_t>(nfo >> 8);
    sib[l3 + 7] = static_cast<uint8_t>(nfo);
  } else {
    if (!m.isLaterFragment()) return 0;  // the fragment header is not at a known place
    const uint32_t fh = l4 - 8;          // a later fragment: right before l4_offset
    FUZZ_CHECK(be32(&frame[fh + 4]) == m.frag_id);
    const uint16_t fo = be16(&frame[fh + 2]);
    const uint16_t off8 = static_cast<uint16_t>(((fo >> 3) + 1 + sel) & 0x1FFF);
    const uint16_t nfo = static_cast<uint16_t>((off8 << 3) | (fo & 0x6) | ((fo ^ 1) & 1));
    sib[fh + 2] = static_cast<uint8_t>(nfo >> 8);
    sib[fh + 3] = static_cast<uint8_t>(nfo);
  }
  PacketMeta ms;
  if (reparse(sib, ms) != ParseStatus::kOk || !ms.is_fragment) return 0;
  const FragKey fks = buildFragKey(ms);
  checkFragKey(ms, fks);
  FUZZ_CHECK(std::memcmp(&fk, &fks, sizeof(fk)) == 0);
  return 0;
}
