#include "dataplane/stages/dns/dns_message.h"

#include "dataplane/packet/frame_write.h"

namespace dpu::dp {

const char* dnsMsgStatusName(DnsMsgStatus s) {
  switch (s) {
    case DnsMsgStatus::kOk: return "ok";
    case DnsMsgStatus::kNotInspected: return "not_inspected";
    case DnsMsgStatus::kTruncated: return "truncated";
    case DnsMsgStatus::kBadLabelType: return "bad_label_type";
    case DnsMsgStatus::kNameTooLong: return "name_too_long";
    case DnsMsgStatus::kPointerLoop: return "pointer_loop";
    case DnsMsgStatus::kPointerOutOfBounds: return "pointer_out_of_bounds";
    case DnsMsgStatus::kCount: break;
  }
  return "?";
}

uint16_t dnsWriteAnswer(const uint8_t* query, const DnsQuestion& q, const DnsAnswerSpec& a,
                        uint8_t* out, uint32_t cap) {
  uint32_t alen = a.rr_type == kTypeAaaa ? 16 : 4;
  uint32_t naddrs = a.rr_type ? a.naddrs : 0;
  uint32_t qlen = q.name.wire_len + 4u;
  uint32_t soa_len = a.soa_names ? 12u + a.soa_names_len + 20u : 0u;
  uint32_t total = 12 + qlen + naddrs * (12 + alen) + soa_len;
  if (total > cap || total > 65535) return 0;
  put16(out, q.id);
  uint16_t flags = static_cast<uint16_t>(kDnsQr | kDnsRa | (q.flags & (kDnsRd | kDnsCd)) | (a.rcode & 0xf));
  put16(out + 2, flags);
  put16(out + 4, 1);
  put16(out + 6, static_cast<uint16_t>(naddrs));
  put16(out + 8, a.soa_names ? 1 : 0);
  put16(out + 10, 0);
  uint8_t* p = out + 12;
  if (!q.name.compressed) {
    std::memcpy(p, query + 12, qlen);  // the question as asked (0x20 letter case kept)
    p += qlen;
  } else {
    for (int k = 0; k < q.name.nlabels; ++k) {
      *p++ = q.name.len[k];
      std::memcpy(p, q.name.text + q.name.off[k], q.name.len[k]);
      p += q.name.len[k];
    }
    *p++ = 0;
    put16(p, q.qtype);
    put16(p + 2, q.qclass);
    p += 4;
  }
  for (uint32_t i = 0; i < naddrs; ++i) {
    put16(p, 0xc00c);  // the question name
    put16(p + 2, a.rr_type);
    put16(p + 4, 1);   // IN
    put32(p + 6, a.ttl);
    put16(p + 10, static_cast<uint16_t>(alen));
    std::memcpy(p + 12, a.addrs + i * alen, alen);
    p += 12 + alen;
  }
  if (a.soa_names) {
    put16(p, 0xc00c);  // owner: the question name
    put16(p + 2, kTypeSoa);
    put16(p + 4, 1);   // IN
    put32(p + 6, a.soa_minimum);
    put16(p + 10, static_cast<uint16_t>(a.soa_names_len + 20u));
    p += 12;
    std::memcpy(p, a.soa_names, a.soa_names_len);
    p += a.soa_names_len;
    for (uint32_t f : a.soa_fields) {
      put32(p, f);
      p += 4;
    }
    put32(p, a.soa_minimum);
    p += 4;
  }
  return static_cast<uint16_t>(p - out);
}

uint32_t dnsBuildFrame(const uint8_t* frame, const PacketMeta& m, bool back_to_sender,
                       const uint8_t* payload, uint16_t payload_len, bool fin, uint8_t* out,
                       uint32_t cap) {
  if (m.l3 == L3Type::kNone || !m.has_l4 || (m.l4_proto != 6 && m.l4_proto != 17)) return 0;
  bool v6 = m.l3 == L3Type::kIpv6;
  bool tcp = m.l4_proto == 6;
  uint16_t l2 = m.l3_offset;
  uint32_t l4_len = (tcp ? 20u : 8u) + payload_len;
  uint32_t len = l2 + (v6 ? 40u : 20u) + l4_len;
  if (l2 < 14 || l2 > m.frame_len || len > cap || l4_len > 65535 - 40) return 0;
  if (!tunnelAnswerable(m)) return 0;
  const IpAddr& src = back_to_sender ? m.dst : m.src;
  const IpAddr& dst = back_to_sender ? m.src : m.dst;
  uint16_t sport = back_to_sender ? m.dport : m.sport;
  uint16_t dport = back_to_sender ? m.sport : m.dport;
  copyL2(frame, m, back_to_sender, len - l2, out);
  uint8_t* ip = out + l2;
  uint16_t iph = writeIpHeader(ip, v6, src, dst, tcp ? 6 : 17, static_cast<uint16_t>(l4_len), 0);
  uint8_t* l4 = ip + iph;
  if (tcp) {
    put16(l4, sport);
    put16(l4 + 2, dport);
    uint32_t seq = back_to_sender ? m.tcp_ack : m.tcp_seq;
    uint32_t ack = back_to_sender ? m.tcp_seq + m.payload_len : m.tcp_ack;
    put32(l4 + 4, seq);
    put32(l4 + 8, ack);
    l4[12] = 5 << 4;
    l4[13] = static_cast<uint8_t>(kTcpPsh | kTcpAck | (fin ? kTcpFin : 0));
    put16(l4 + 14, 65535);
    put16(l4 + 16, 0);
    put16(l4 + 18, 0);
    std::memcpy(l4 + 20, payload, payload_len);
    put16(l4 + 16, finish(sum16(l4, l4_len, pseudoSum(v6, src, dst, 6, l4_len))));
  } else {
    put16(l4, sport);
    put16(l4 + 2, dport);
    put16(l4 + 4, static_cast<uint16_t>(l4_len));
    put16(l4 + 6, 0);
    std::memcpy(l4 + 8, payload, payload_len);
    uint16_t c = finish(sum16(l4, l4_len, pseudoSum(v6, src, dst, 17, l4_len)));
    put16(l4 + 6, c == 0 ? 0xffff : c);  // RFC 768: a computed 0 is sent as all ones
  }
  sealTunnel(out, len, m);
  return len;
}

}  // namespace dpu::dp
