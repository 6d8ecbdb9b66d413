// DNS messages on the packet path: a hostile-safe parser of the header, the question and
// (for CNAME cloaking) the answer section, and the writer of synthesized answers and the
// frames that carry them. No DPDK dependency (unit-testable and fuzzable on its own); no
// allocation; every read is bounds-checked against the message length.
//
// Names: labels are read with compression (RFC 1035 4.1.4). A pointer must point strictly
// before the previous pointer's target (before the name's start for the first one): well-
// formed encoders only point back at names written earlier, and the rule makes every chain
// finite (a forward or self pointer is a loop). Labels of type 01/10 (RFC 6891 extended,
// reserved) are malformed; a name longer than 255 bytes on the wire or with more than 127
// labels is malformed. Matching is case-insensitive: labels are kept lower case (A-Z only).
#pragma once

#include <cstdint>
#include <cstring>

#include "dataplane/packet/packet_meta.h"
#include "rules/compiled/dns_name_set.h"

namespace dpu::dp {

enum class DnsMsgStatus : uint8_t {
  kOk = 0,
  kNotInspected,       // not a standard query / response with one question (opcode, qdcount)
  kTruncated,          // the message ends inside the header, a name or a record
  kBadLabelType,       // label type 01 or 10
  kNameTooLong,        // more than 255 bytes on the wire or 127 labels
  kPointerLoop,        // a compression pointer that does not point strictly backwards
  kPointerOutOfBounds, // a compression pointer past the end of the message
  kCount
};
const char* dnsMsgStatusName(DnsMsgStatus s);

inline constexpr int kDnsMaxNameLabels = 127;

// A decoded name: labels lower case, joined by '.' in `text` (for events; a label may itself
// contain '.', so matching goes by off/len, never by re-splitting text).
struct DnsName {
  uint8_t nlabels = 0;
  uint8_t wire_len = 0;    // uncompressed wire length including the root byte
  uint8_t text_len = 0;
  bool compressed = false; // a pointer was followed
  uint8_t off[kDnsMaxNameLabels];
  uint8_t len[kDnsMaxNameLabels];
  char text[256];

  // Fingerprints of every suffix (rules::dnsSuffixHashes over the labels).
  void suffixHashes(uint64_t* out) const {
    uint64_t h = rules::kDnsHashSeed;
    for (int k = nlabels - 1; k >= 0; --k) {
      h = rules::dnsLabelStep(h, text + off[k], len[k], sizeof(text) - off[k]);
      out[k] = h;
    }
  }
};

inline uint16_t dnsGet16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

// Decodes the name at `pos` (advanced past it: past the first pointer when compressed).
// `out` may be null to skip a name.
inline DnsMsgStatus dnsDecodeName(const uint8_t* msg, uint32_t len, uint32_t& pos, DnsName* out) {
  uint32_t p = pos;
  uint32_t limit = pos;  // pointers must go strictly below this
  bool jumped = false;
  uint32_t wire = 0;
  uint32_t n = 0, t = 0;
  if (out) out->compressed = false;
  for (;;) {
    if (p >= len) return DnsMsgStatus::kTruncated;
    uint8_t c = msg[p];
    if (c == 0) {
      ++wire;
      if (!jumped) pos = p + 1;
      break;
    }
    if ((c & 0xc0) == 0xc0) {
      if (p + 1 >= len) return DnsMsgStatus::kTruncated;
      uint32_t target = static_cast<uint32_t>(c & 0x3f) << 8 | msg[p + 1];
      if (target >= len) return DnsMsgStatus::kPointerOutOfBounds;
      if (target >= limit) return DnsMsgStatus::kPointerLoop;
      if (!jumped) pos = p + 2;
      jumped = true;
      if (out) out->compressed = true;
      limit = target;
      p = target;
      continue;
    }
    if (c & 0xc0) return DnsMsgStatus::kBadLabelType;
    if (p + 1 + c > len) return DnsMsgStatus::kTruncated;
    wire += c + 1u;
    if (wire + 1 > 255 || n >= kDnsMaxNameLabels) return DnsMsgStatus::kNameTooLong;
    if (out) {
      if (n > 0) out->text[t++] = '.';
      out->off[n] = static_cast<uint8_t>(t);
      out->len[n] = c;
      const uint8_t* s = msg + p + 1;
      for (uint32_t i = 0; i < c; ++i) {
        uint8_t b = s[i];
        out->text[t++] = static_cast<char>(b >= 'A' && b <= 'Z' ? b + 32 : b);
      }
    }
    ++n;
    p += 1 + c;
  }
  if (out) {
    out->nlabels = static_cast<uint8_t>(n);
    out->wire_len = static_cast<uint8_t>(wire);
    out->text_len = static_cast<uint8_t>(t);
    out->text[t] = 0;
  }
  return DnsMsgStatus::kOk;
}

// Header flags.
inline constexpr uint16_t kDnsQr = 0x8000;
inline constexpr uint16_t kDnsAa = 0x0400;
inline constexpr uint16_t kDnsTc = 0x0200;
inline constexpr uint16_t kDnsRd = 0x0100;
inline constexpr uint16_t kDnsRa = 0x0080;
inline constexpr uint16_t kDnsCd = 0x0010;
inline constexpr uint16_t kTypeA = 1, kTypeCname = 5, kTypeSoa = 6, kTypeAaaa = 28;

struct DnsQuestion {
  uint16_t id = 0;
  uint16_t flags = 0;
  uint16_t qdcount = 0, ancount = 0, nscount = 0, arcount = 0;
  uint16_t qtype = 0;
  uint16_t qclass = 0;
  uint16_t question_end = 0;  // offset just past QTYPE/QCLASS
  DnsName name;
  bool isResponse() const { return (flags & kDnsQr) != 0; }
};

// Parses the header and the (one) question of a message. kNotInspected for opcodes other
// than QUERY and for qdcount != 1 (nothing to match; forwarded as is).
inline DnsMsgStatus dnsParseQuestion(const uint8_t* msg, uint32_t len, DnsQuestion& q) {
  if (len < 12) return DnsMsgStatus::kTruncated;
  q.id = dnsGet16(msg);
  q.flags = dnsGet16(msg + 2);
  q.qdcount = dnsGet16(msg + 4);
  q.ancount = dnsGet16(msg + 6);
  q.nscount = dnsGet16(msg + 8);
  q.arcount = dnsGet16(msg + 10);
  if (((q.flags >> 11) & 0xf) != 0 || q.qdcount != 1) return DnsMsgStatus::kNotInspected;
  uint32_t pos = 12;
  DnsMsgStatus s = dnsDecodeName(msg, len, pos, &q.name);
  if (s != DnsMsgStatus::kOk) return s;
  if (pos + 4 > len) return DnsMsgStatus::kTruncated;
  q.qtype = dnsGet16(msg + pos);
  q.qclass = dnsGet16(msg + pos + 2);
  q.question_end = static_cast<uint16_t>(pos + 4);
  return DnsMsgStatus::kOk;
}

// Walks the answer section of a response whose question `q` was parsed, decoding every
// CNAME target into `scratch` and calling on_cname(scratch); stops early when it returns
// true (and returns kOk with `stopped` set). Other records are skipped by RDLENGTH.
template <class F>
inline DnsMsgStatus dnsScanCnames(const uint8_t* msg, uint32_t len, const DnsQuestion& q,
                                  DnsName& scratch, bool& stopped, F&& on_cname) {
  stopped = false;
  uint32_t pos = q.question_end;
  for (uint32_t i = 0; i < q.ancount; ++i) {
    DnsMsgStatus s = dnsDecodeName(msg, len, pos, nullptr);
    if (s != DnsMsgStatus::kOk) return s;
    if (pos + 10 > len) return DnsMsgStatus::kTruncated;
    uint16_t type = dnsGet16(msg + pos);
    uint16_t rdlen = dnsGet16(msg + pos + 8);
    pos += 10;
    if (pos + rdlen > len) return DnsMsgStatus::kTruncated;
    if (type == kTypeCname) {
      uint32_t rp = pos;
      s = dnsDecodeName(msg, pos + rdlen, rp, &scratch);
      if (s != DnsMsgStatus::kOk) return s;
      if (on_cname(static_cast<const DnsName&>(scratch))) {
        stopped = true;
        return DnsMsgStatus::kOk;
      }
    }
    pos += rdlen;
  }
  return DnsMsgStatus::kOk;
}

// A synthesized answer.
struct DnsAnswerSpec {
  uint8_t rcode = 0;              // 0 NOERROR, 3 NXDOMAIN, 5 REFUSED
  uint16_t rr_type = 0;           // kTypeA / kTypeAaaa with addresses, 0 = no answer records
  const uint8_t* addrs = nullptr; // naddrs addresses of 4 (A) or 16 (AAAA) bytes
  uint8_t naddrs = 0;
  uint32_t ttl = 0;
  // Negative answers (RFC 2308): an SOA record in the authority section, owner the question
  // name, TTL = MINIMUM = soa_minimum. soa_names: MNAME then RNAME in wire format; nullptr =
  // no SOA. soa_fields: serial, refresh, retry, expire.
  const uint8_t* soa_names = nullptr;
  uint16_t soa_names_len = 0;
  uint32_t soa_fields[4] = {0, 0, 0, 0};
  uint32_t soa_minimum = 0;
};

// Writes the DNS answer to the question `q` of `query` (the query message as received):
// same ID, the question as asked (original letter case; re-encoded without compression when
// the query compressed it), QR=1, opcode 0, AA=0, TC=0, RD and CD copied, RA=1, the rcode,
// the answer records (each owner a pointer to the question name) and, with soa_names, the
// SOA record in the authority section. Returns the length, 0 when it does not fit in `cap`.
uint16_t dnsWriteAnswer(const uint8_t* query, const DnsQuestion& q, const DnsAnswerSpec& a,
                        uint8_t* out, uint32_t cap);

// Frames carrying an answer. `frame`/`m`: the packet the answer replaces (parsed).
//   back_to_sender = true: out of the ingress port to the packet's sender (MACs, addresses
//   and ports swapped); false: onward to the packet's destination (cloaked responses: the
//   resolver's own addresses). UDP: the payload is one DNS message; the checksum is always
//   computed (mandatory over IPv6). TCP: the payload is stream bytes (each message with its
//   2-byte length, see dnsTcpAppend), seq = the packet's ACK and ack = its SEQ + its payload
//   (back to the sender) or seq/ack as in the packet (onward); flags PSH|ACK, plus FIN when
//   `fin`. IP TTL / hop limit 64. Returns the frame length, 0 when it cannot be built (no
//   room, not UDP/TCP).
uint32_t dnsBuildFrame(const uint8_t* frame, const PacketMeta& m, bool back_to_sender,
                       const uint8_t* payload, uint16_t payload_len, bool fin, uint8_t* out,
                       uint32_t cap);

// Appends one message with its 2-byte length (DNS over TCP, RFC 1035 4.2.2) at out[*len];
// false when it does not fit in `cap`.
inline bool dnsTcpAppend(const uint8_t* msg, uint16_t n, uint8_t* out, uint32_t cap, uint32_t* len) {
  if (*len + 2u + n > cap) return false;
  out[*len] = static_cast<uint8_t>(n >> 8);
  out[*len + 1] = static_cast<uint8_t>(n);
  std::memcpy(out + *len + 2, msg, n);
  *len += 2u + n;
  return true;
}

}  // namespace dpu::dp
