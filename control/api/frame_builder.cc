#include "control/api/frame_builder.h"

#include <arpa/inet.h>

#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace dpu::ctl {
namespace {

constexpr uint8_t kSrcMac[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
constexpr uint8_t kDstMac[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x02};

struct Addr {
  bool v6 = false;
  uint8_t b[16] = {0};
};

absl::StatusOr<Addr> parseAddr(const std::string& text, const char* field) {
  Addr a;
  if (inet_pton(AF_INET, text.c_str(), a.b) == 1) return a;
  if (inet_pton(AF_INET6, text.c_str(), a.b) == 1) {
    a.v6 = true;
    return a;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": '", text, "' is not an IPv4 or IPv6 address"));
}

void put16(std::vector<uint8_t>& f, size_t at, uint16_t v) {
  f[at] = static_cast<uint8_t>(v >> 8);
  f[at + 1] = static_cast<uint8_t>(v);
}

uint32_t sum16(const uint8_t* p, size_t n, uint32_t acc = 0) {
  for (size_t i = 0; i + 1 < n; i += 2) acc += static_cast<uint32_t>(p[i] << 8 | p[i + 1]);
  if (n & 1) acc += static_cast<uint32_t>(p[n - 1] << 8);
  return acc;
}

uint16_t fold(uint32_t acc) {
  while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);
  return static_cast<uint16_t>(~acc);
}

}  // namespace

absl::StatusOr<uint8_t> parseTcpFlags(std::string_view letters) {
  uint8_t f = 0;
  for (char c : letters) {
    switch (absl::ascii_toupper(static_cast<unsigned char>(c))) {
      case 'F': f |= 0x01; break;
      case 'S': f |= 0x02; break;
      case 'R': f |= 0x04; break;
      case 'P': f |= 0x08; break;
      case 'A': f |= 0x10; break;
      case 'U': f |= 0x20; break;
      case 'E': f |= 0x40; break;
      case 'C': f |= 0x80; break;
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("tcp_flags: '", std::string(1, c), "' in '", std::string(letters),
                         "' is not a TCP flag (use F S R P A U E C)"));
    }
  }
  return f;
}

absl::StatusOr<std::string> buildDnsQuery(std::string_view name, std::string_view qtype,
                                          uint16_t id) {
  static constexpr std::pair<const char*, uint16_t> kTypes[] = {
      {"A", 1},     {"NS", 2},     {"CNAME", 5}, {"SOA", 6},   {"PTR", 12},  {"MX", 15},
      {"TXT", 16},  {"AAAA", 28},  {"SRV", 33},  {"NAPTR", 35}, {"DS", 43},  {"DNSKEY", 48},
      {"SVCB", 64}, {"HTTPS", 65}, {"ANY", 255}, {"CAA", 257}};
  uint32_t type = 0;
  const std::string upper = absl::AsciiStrToUpper(qtype.empty() ? std::string("A") : std::string(qtype));
  for (const auto& [mnemonic, code] : kTypes) {
    if (upper == mnemonic) type = code;
  }
  if (type == 0 && (!absl::SimpleAtoi(upper, &type) || type == 0 || type > 65535)) {
    std::string names;
    for (const auto& t : kTypes) absl::StrAppend(&names, names.empty() ? "" : ", ", t.first);
    return absl::InvalidArgumentError(absl::StrCat("dns_query.qtype: '", std::string(qtype),
                                                   "' is not one of ", names,
                                                   " or a number 1..65535"));
  }
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);
  if (name.empty()) return absl::InvalidArgumentError("dns_query.name: required");
  std::string msg(12, '\0');
  msg[0] = char(id >> 8);
  msg[1] = char(id & 0xff);
  msg[2] = 0x01;  // RD
  msg[5] = 1;     // QDCOUNT
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string_view::npos) dot = name.size();
    const size_t len = dot - start;
    if (len == 0 || len > 63) {
      return absl::InvalidArgumentError(
          absl::StrCat("dns_query.name: '", std::string(name), "' has a label of ", len,
                       " bytes (1..63)"));
    }
    msg.push_back(char(len));
    msg.append(name.substr(start, len));
    start = dot + 1;
  }
  msg.push_back('\0');
  if (msg.size() - 12 > 255) {
    return absl::InvalidArgumentError(absl::StrCat("dns_query.name: '", std::string(name), "' is ",
                                                   msg.size() - 12,
                                                   " bytes on the wire (at most 255)"));
  }
  for (uint32_t v : {type, 1u}) {  // QTYPE, QCLASS IN
    msg.push_back(char(v >> 8));
    msg.push_back(char(v & 0xff));
  }
  return msg;
}

absl::StatusOr<std::vector<uint8_t>> buildFrame(const FrameSpec& spec) {
  auto src = parseAddr(spec.src_ip, "tuple.src_ip");
  if (!src.ok()) return src.status();
  auto dst = parseAddr(spec.dst_ip, "tuple.dest_ip");
  if (!dst.ok()) return dst.status();
  if (src->v6 != dst->v6) {
    return absl::InvalidArgumentError(absl::StrCat("tuple: src_ip '", spec.src_ip,
                                                   "' and dest_ip '", spec.dst_ip,
                                                   "' are not of the same address family"));
  }
  const bool v6 = src->v6;
  std::string p = absl::AsciiStrToLower(spec.proto);
  uint8_t proto = 0;
  if (p == "tcp") {
    proto = 6;
  } else if (p == "udp") {
    proto = 17;
  } else if (p == "icmp") {
    proto = v6 ? 58 : 1;
  } else if (p == "icmpv6" || p == "ipv6-icmp") {
    proto = 58;
  } else {
    uint32_t n = 0;
    if (p.empty() || !absl::SimpleAtoi(p, &n) || n > 255) {
      return absl::InvalidArgumentError(
          absl::StrCat("tuple.proto: '", spec.proto,
                       "' is not tcp, udp, icmp, icmpv6 or a protocol number 0..255"));
    }
    proto = static_cast<uint8_t>(n);
  }
  if (proto == 1 && v6) {
    return absl::InvalidArgumentError("tuple.proto: ICMP (1) with IPv6 addresses; use icmpv6");
  }
  if (proto == 58 && !v6) {
    return absl::InvalidArgumentError("tuple.proto: ICMPv6 (58) with IPv4 addresses; use icmp");
  }
  if (spec.src_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("tuple.src_port: ", spec.src_port, " is out of range [0, 65535]"));
  }
  if (spec.dst_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("tuple.dest_port: ", spec.dst_port, " is out of range [0, 65535]"));
  }
  if (spec.vlan > 4094) {
    return absl::InvalidArgumentError(
        absl::StrCat("tuple.vlan: ", spec.vlan, " is out of range [0, 4094] (0 = untagged)"));
  }
  if (!spec.tcp_flags.empty() && proto != 6) {
    return absl::InvalidArgumentError("tuple.tcp_flags: only for proto tcp");
  }
  uint8_t flags = 0x02;
  if (!spec.tcp_flags.empty()) {
    auto f = parseTcpFlags(spec.tcp_flags);
    if (!f.ok()) return absl::InvalidArgumentError(absl::StrCat("tuple.", f.status().message()));
    flags = *f;
  }

  size_t l4_hdr = 0;
  switch (proto) {
    case 6: l4_hdr = 20; break;
    case 17: l4_hdr = 8; break;
    case 1: case 58: l4_hdr = 8; break;  // echo request: type, code, csum, id, seq
    default: l4_hdr = 0;
  }
  const size_t ip_hdr = v6 ? 40 : 20;
  const size_t l4_len = l4_hdr + spec.payload.size();
  if (l4_len + (v6 ? 0 : ip_hdr) > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "payload: ", spec.payload.size(), " bytes do not fit in one IP packet"));
  }
  const size_t l2 = 14 + (spec.vlan ? 4 : 0);
  std::vector<uint8_t> f(l2 + ip_hdr + l4_len, 0);
  std::memcpy(f.data(), kDstMac, 6);
  std::memcpy(f.data() + 6, kSrcMac, 6);
  size_t at = 12;
  if (spec.vlan) {
    put16(f, at, 0x8100);
    put16(f, at + 2, static_cast<uint16_t>(spec.vlan));
    at += 4;
  }
  put16(f, at, v6 ? 0x86DD : 0x0800);
  const size_t l3 = l2;
  const size_t l4 = l3 + ip_hdr;
  uint32_t pseudo = 0;
  if (v6) {
    f[l3] = 0x60;
    put16(f, l3 + 4, static_cast<uint16_t>(l4_len));
    f[l3 + 6] = proto;
    f[l3 + 7] = 64;
    std::memcpy(&f[l3 + 8], src->b, 16);
    std::memcpy(&f[l3 + 24], dst->b, 16);
    pseudo = sum16(src->b, 16);
    pseudo = sum16(dst->b, 16, pseudo);
    pseudo += static_cast<uint32_t>(l4_len >> 16) + static_cast<uint32_t>(l4_len & 0xffff);
    pseudo += proto;
  } else {
    f[l3] = 0x45;
    put16(f, l3 + 2, static_cast<uint16_t>(ip_hdr + l4_len));
    f[l3 + 8] = 64;
    f[l3 + 9] = proto;
    std::memcpy(&f[l3 + 12], src->b, 4);
    std::memcpy(&f[l3 + 16], dst->b, 4);
    put16(f, l3 + 10, fold(sum16(&f[l3], 20)));
    pseudo = sum16(src->b, 4);
    pseudo = sum16(dst->b, 4, pseudo);
    pseudo += static_cast<uint32_t>(l4_len) + proto;
  }
  std::memcpy(&f[l4 + l4_hdr], spec.payload.data(), spec.payload.size());
  size_t csum_at = 0;
  bool csum_pseudo = true;
  switch (proto) {
    case 6:
      put16(f, l4, static_cast<uint16_t>(spec.src_port));
      put16(f, l4 + 2, static_cast<uint16_t>(spec.dst_port));
      f[l4 + 4 + 3] = (flags & 0x02) ? 0 : 1;  // seq 0 for a SYN, else 1
      if (flags & 0x10) f[l4 + 8 + 3] = 1;     // ack 1 when ACK is set
      f[l4 + 12] = 5 << 4;
      f[l4 + 13] = flags;
      put16(f, l4 + 14, 65535);
      csum_at = l4 + 16;
      break;
    case 17:
      put16(f, l4, static_cast<uint16_t>(spec.src_port));
      put16(f, l4 + 2, static_cast<uint16_t>(spec.dst_port));
      put16(f, l4 + 4, static_cast<uint16_t>(l4_len));
      csum_at = l4 + 6;
      break;
    case 1:
    case 58:
      f[l4] = proto == 1 ? 8 : 128;  // echo request
      put16(f, l4 + 4, static_cast<uint16_t>(spec.src_port));
      put16(f, l4 + 6, 1);
      csum_at = l4 + 2;
      csum_pseudo = proto == 58;
      break;
    default:
      break;
  }
  if (csum_at) {
    uint16_t c = fold(sum16(&f[l4], l4_len, csum_pseudo ? pseudo : 0));
    if (proto == 17 && c == 0) c = 0xffff;
    put16(f, csum_at, c);
  }
  // Ethernet minimum (without FCS): pad; IP lengths ignore the trailer.
  if (f.size() < 60) f.resize(60, 0);
  return f;
}

}  // namespace dpu::ctl
