#include "tests/util/packet_builder.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "dataplane/packet/parser.h"

namespace dpu::test {
namespace {

constexpr size_t kEthHeaderLen = 14;
constexpr size_t kIpv4HeaderLen = 20;
constexpr size_t kIpv4MaxOptions = 40;
constexpr size_t kIpv6HeaderLen = 40;
constexpr size_t kTcpHeaderLen = 20;
constexpr size_t kTcpMaxOptions = 40;
constexpr size_t kUdpHeaderLen = 8;
constexpr size_t kIpv6FragHeaderLen = 8;
constexpr uint16_t kIpv4FlagDf = 0x4000;
constexpr uint16_t kIpv4FlagMf = 0x2000;
constexpr uint16_t kIpv4OffsetMask = 0x1FFF;
constexpr uint8_t kIpv4OptCopied = 0x80;
constexpr uint8_t kIpv4OptEol = 0;
constexpr uint8_t kIpv4OptNop = 1;
constexpr uint8_t kIpv6OptPad1 = 0;
constexpr uint8_t kIpv6OptPadN = 1;

void put16(Frame& f, uint16_t v) {
  f.push_back(static_cast<uint8_t>(v >> 8));
  f.push_back(static_cast<uint8_t>(v));
}

void put32(Frame& f, uint32_t v) {
  put16(f, static_cast<uint16_t>(v >> 16));
  put16(f, static_cast<uint16_t>(v));
}

void set16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}

uint16_t get16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }

void append(Frame& f, const uint8_t* p, size_t n) { f.insert(f.end(), p, p + n); }

// Partial (uncomplemented, unfolded) sum of 16-bit big-endian words.
uint32_t partialSum(const uint8_t* p, size_t n, uint32_t sum = 0) {
  uint64_t s = sum;
  for (size_t i = 0; i + 1 < n; i += 2) s += static_cast<uint32_t>((p[i] << 8) | p[i + 1]);
  if (n & 1) s += static_cast<uint32_t>(p[n - 1] << 8);
  while (s >> 32) s = (s & 0xFFFFFFFFu) + (s >> 32);
  return static_cast<uint32_t>(s);
}

uint32_t pseudoHeaderSum(bool v6, const dp::IpAddr& src, const dp::IpAddr& dst, uint8_t proto,
                         size_t l4_len) {
  const size_t alen = v6 ? 16 : 4;
  uint32_t s = partialSum(src.b, alen);
  s = partialSum(dst.b, alen, s);
  uint64_t total = s;
  total += proto;
  total += static_cast<uint32_t>(l4_len >> 16);
  total += static_cast<uint32_t>(l4_len & 0xFFFF);
  while (total >> 32) total = (total & 0xFFFFFFFFu) + (total >> 32);
  return static_cast<uint32_t>(total);
}

// A value different from `good` that does not verify either (0x0000 and 0xffff are the same
// number in one's complement, so neither is used as the damaged value of the other).
uint16_t damaged(uint16_t good) { return good == 0x1234 ? 0x4321 : 0x1234; }

// Offset of the L3 header after Ethernet and any tags; *ether_type gets the inner ethertype.
size_t l3Offset(const Frame& f, uint16_t* ether_type) {
  if (f.size() < kEthHeaderLen) throw std::invalid_argument("frame shorter than Ethernet");
  size_t off = 12;
  uint16_t t = get16(&f[off]);
  while (t == kTpid8021Q || t == kTpid8021Ad || t == kTpidQinQ9100) {
    off += 4;
    if (off + 2 > f.size()) throw std::invalid_argument("truncated VLAN tag");
    t = get16(&f[off]);
  }
  *ether_type = t;
  return off + 2;
}

void padOptions(std::vector<uint8_t>& opts, size_t max, const char* what) {
  while (opts.size() % 4 != 0) opts.push_back(kIpv4OptEol);
  if (opts.size() > max) throw std::invalid_argument(std::string(what) + " longer than 40 bytes");
}

// IPv6 option area of `len` bytes filled with Pad1/PadN.
void fillIpv6Padding(std::vector<uint8_t>& h, size_t len) {
  while (len > 0) {
    if (len == 1) {
      h.push_back(kIpv6OptPad1);
      len = 0;
      continue;
    }
    size_t chunk = std::min<size_t>(len, 257);
    if (len - chunk == 1) --chunk;  // never leave a single byte that PadN cannot cover
    h.push_back(kIpv6OptPadN);
    h.push_back(static_cast<uint8_t>(chunk - 2));
    h.insert(h.end(), chunk - 2, 0);
    len -= chunk;
  }
}

std::vector<uint8_t> ipv6ExtOfLength(size_t len_bytes, const char* what) {
  if (len_bytes < 8 || len_bytes % 8 != 0 || len_bytes > 2048) {
    throw std::invalid_argument(std::string(what) + ": length must be 8..2048, multiple of 8");
  }
  std::vector<uint8_t> h = {0, static_cast<uint8_t>(len_bytes / 8 - 1)};
  return h;
}

}  // namespace

std::optional<dp::IpAddr> parseIp(std::string_view text) {
  std::string s(text);
  dp::IpAddr a{};
  if (inet_pton(AF_INET, s.c_str(), a.b) == 1) return a;
  if (inet_pton(AF_INET6, s.c_str(), a.b) == 1) return a;
  return std::nullopt;
}

dp::IpAddr ip(std::string_view text) {
  std::optional<dp::IpAddr> a = parseIp(text);
  if (!a) throw std::invalid_argument("bad IP address: " + std::string(text));
  return *a;
}

std::string ipToString(const dp::IpAddr& a, bool v6) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(v6 ? AF_INET6 : AF_INET, a.b, buf, sizeof(buf));
  return buf;
}

MacAddr mac(std::string_view text) {
  MacAddr m{};
  if (text.size() != 17) throw std::invalid_argument("bad MAC: " + std::string(text));
  for (size_t i = 0; i < 6; ++i) {
    if (i > 0 && text[i * 3 - 1] != ':') throw std::invalid_argument("bad MAC separator");
    unsigned v = 0;
    for (size_t j = 0; j < 2; ++j) {
      char c = text[i * 3 + j];
      unsigned d;
      if (c >= '0' && c <= '9') {
        d = static_cast<unsigned>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        d = static_cast<unsigned>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        d = static_cast<unsigned>(c - 'A' + 10);
      } else {
        throw std::invalid_argument("bad MAC digit: " + std::string(text));
      }
      v = v * 16 + d;
    }
    m[i] = static_cast<uint8_t>(v);
  }
  return m;
}

uint16_t inetChecksum(const uint8_t* data, size_t len, uint32_t initial) {
  uint64_t s = partialSum(data, len, initial);
  while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
  return static_cast<uint16_t>(~s & 0xFFFF);
}

bool checksumsOk(const Frame& f) {
  dp::PacketMeta m;
  dp::ParseStatus st = dp::parsePacket(f.data(), static_cast<uint32_t>(f.size()), m);
  if (st == dp::ParseStatus::kNonIp) return true;
  if (st != dp::ParseStatus::kOk) return false;
  const bool v6 = m.l3 == dp::L3Type::kIpv6;
  if (!v6) {
    const size_t ihl = static_cast<size_t>(f[m.l3_offset] & 0x0F) * 4;
    if (inetChecksum(&f[m.l3_offset], ihl) != 0) return false;
  }
  if (!m.has_l4 || m.is_fragment) return true;
  const uint8_t* l4 = &f[m.l4_offset];
  const size_t l4_len = static_cast<size_t>(m.l3_offset) + m.l3_len - m.l4_offset;
  switch (m.l4_proto) {
    case kIpProtoIcmp:
      return inetChecksum(l4, l4_len) == 0;
    case kIpProtoUdp:
      if (!v6 && get16(l4 + 6) == 0) return true;
      [[fallthrough]];
    case kIpProtoTcp:
    case kIpProtoIcmpv6:
      return inetChecksum(l4, l4_len, pseudoHeaderSum(v6, m.src, m.dst, m.l4_proto, l4_len)) == 0;
    default:
      return true;
  }
}

PacketBuilder& PacketBuilder::eth(const MacAddr& src, const MacAddr& dst) {
  src_mac_ = src;
  dst_mac_ = dst;
  return *this;
}

PacketBuilder& PacketBuilder::vlan(uint16_t vid, uint8_t pcp) {
  if (vid > 0x0FFF || pcp > 7) throw std::invalid_argument("VLAN id > 4095 or PCP > 7");
  vlans_.push_back({std::nullopt, static_cast<uint16_t>((pcp << 13) | vid)});
  return *this;
}

PacketBuilder& PacketBuilder::vlanTag(uint16_t tpid, uint16_t vid, uint8_t pcp) {
  if (vid > 0x0FFF || pcp > 7) throw std::invalid_argument("VLAN id > 4095 or PCP > 7");
  vlans_.push_back({tpid, static_cast<uint16_t>((pcp << 13) | vid)});
  return *this;
}

PacketBuilder& PacketBuilder::pppoe(uint16_t session, bool compressed_protocol) {
  pppoe_session_ = session;
  pppoe_compressed_ = compressed_protocol;
  return *this;
}

PacketBuilder& PacketBuilder::pppoeLength(uint16_t len) {
  pppoe_len_override_ = len;
  return *this;
}

PacketBuilder& PacketBuilder::etherType(uint16_t type) {
  l3_ = L3Kind::kRaw;
  raw_ether_type_ = type;
  return *this;
}

PacketBuilder& PacketBuilder::arp(uint16_t op, std::string_view sender_ip,
                                  std::string_view target_ip) {
  etherType(kEtherTypeArp);
  arp_op_ = op;
  if (sender_ip.find(':') != std::string_view::npos ||
      target_ip.find(':') != std::string_view::npos) {
    throw std::invalid_argument("arp() needs dotted IPv4 addresses");
  }
  arp_sender_ = ip(sender_ip);
  arp_target_ = ip(target_ip);
  arp_ = true;
  return *this;
}

PacketBuilder& PacketBuilder::ipv4(std::string_view src, std::string_view dst, uint8_t ttl) {
  l3_ = L3Kind::kIpv4;
  if (src.find(':') != std::string_view::npos || dst.find(':') != std::string_view::npos) {
    throw std::invalid_argument("ipv4() needs dotted IPv4 addresses");
  }
  src_ip_ = ip(src);
  dst_ip_ = ip(dst);
  ttl_ = ttl;
  return *this;
}

PacketBuilder& PacketBuilder::ipv4Options(std::vector<uint8_t> options) {
  padOptions(options, kIpv4MaxOptions, "IPv4 options");
  ipv4_options_ = std::move(options);
  return *this;
}

PacketBuilder& PacketBuilder::ipv4Id(uint16_t id) {
  ipv4_id_ = id;
  return *this;
}

PacketBuilder& PacketBuilder::ipv4DontFragment(bool df) {
  ipv4_df_ = df;
  return *this;
}

PacketBuilder& PacketBuilder::ipv4Fragment(uint16_t id, uint16_t offset_bytes,
                                           bool more_fragments) {
  if (offset_bytes % 8 != 0) throw std::invalid_argument("fragment offset not a multiple of 8");
  ipv4_id_ = id;
  ipv4_frag_offset_ = offset_bytes;
  ipv4_mf_ = more_fragments;
  return *this;
}

PacketBuilder& PacketBuilder::ipv6(std::string_view src, std::string_view dst, uint8_t hop_limit) {
  l3_ = L3Kind::kIpv6;
  if (src.find(':') == std::string_view::npos || dst.find(':') == std::string_view::npos) {
    throw std::invalid_argument("ipv6() needs IPv6 addresses");
  }
  src_ip_ = ip(src);
  dst_ip_ = ip(dst);
  ttl_ = hop_limit;
  return *this;
}

PacketBuilder& PacketBuilder::ipv6HopByHop(size_t len_bytes) {
  std::vector<uint8_t> h = ipv6ExtOfLength(len_bytes, "hop-by-hop");
  fillIpv6Padding(h, len_bytes - 2);
  return ipv6Ext(kIpv6HopByHop, std::move(h));
}

PacketBuilder& PacketBuilder::ipv6Routing(size_t len_bytes) {
  std::vector<uint8_t> h = ipv6ExtOfLength(len_bytes, "routing");
  h.resize(len_bytes, 0);  // routing type 0, segments left 0: ignored by every node
  return ipv6Ext(kIpv6Routing, std::move(h));
}

PacketBuilder& PacketBuilder::ipv6DestOpts(size_t len_bytes) {
  std::vector<uint8_t> h = ipv6ExtOfLength(len_bytes, "destination options");
  fillIpv6Padding(h, len_bytes - 2);
  return ipv6Ext(kIpv6DestOpts, std::move(h));
}

PacketBuilder& PacketBuilder::ipv6Fragment(uint32_t id, uint16_t offset_bytes,
                                           bool more_fragments) {
  if (offset_bytes % 8 != 0) throw std::invalid_argument("fragment offset not a multiple of 8");
  Frame h = {0, 0};
  put16(h, static_cast<uint16_t>(offset_bytes | (more_fragments ? 1 : 0)));
  put32(h, id);
  return ipv6Ext(kIpv6Fragment, std::move(h));
}

PacketBuilder& PacketBuilder::ipv6Ext(uint8_t type, std::vector<uint8_t> bytes) {
  if (bytes.size() < 2) throw std::invalid_argument("extension header shorter than 2 bytes");
  ipv6_ext_.push_back({type, std::move(bytes)});
  return *this;
}

PacketBuilder& PacketBuilder::tcp(uint16_t sport, uint16_t dport, uint8_t flags, uint32_t seq,
                                  uint32_t ack) {
  l4_ = L4Kind::kTcp;
  sport_ = sport;
  dport_ = dport;
  tcp_flags_ = flags;
  tcp_seq_ = seq;
  tcp_ack_ = ack;
  return *this;
}

PacketBuilder& PacketBuilder::tcpOptions(std::vector<uint8_t> options) {
  padOptions(options, kTcpMaxOptions, "TCP options");
  tcp_options_ = std::move(options);
  return *this;
}

PacketBuilder& PacketBuilder::tcpWindow(uint16_t window) {
  tcp_window_ = window;
  return *this;
}

PacketBuilder& PacketBuilder::udp(uint16_t sport, uint16_t dport) {
  l4_ = L4Kind::kUdp;
  sport_ = sport;
  dport_ = dport;
  return *this;
}

PacketBuilder& PacketBuilder::icmp(uint8_t type, uint8_t code, uint16_t id, uint16_t seq) {
  l4_ = L4Kind::kIcmp;
  icmp_type_ = type;
  icmp_code_ = code;
  icmp_id_ = id;
  icmp_seq_ = seq;
  return *this;
}

PacketBuilder& PacketBuilder::icmpv6(uint8_t type, uint8_t code, uint16_t id, uint16_t seq) {
  icmp(type, code, id, seq);
  l4_ = L4Kind::kIcmpv6;
  return *this;
}

PacketBuilder& PacketBuilder::l4Raw(uint8_t proto) {
  l4_ = L4Kind::kRaw;
  raw_proto_ = proto;
  return *this;
}

PacketBuilder& PacketBuilder::payload(std::vector<uint8_t> bytes) {
  payload_ = std::move(bytes);
  return *this;
}

PacketBuilder& PacketBuilder::payload(std::string_view text) {
  payload_.assign(text.begin(), text.end());
  return *this;
}

PacketBuilder& PacketBuilder::padTo(size_t frame_len) {
  pad_to_ = frame_len;
  return *this;
}

PacketBuilder& PacketBuilder::ipVersion(uint8_t version) {
  version_override_ = static_cast<uint8_t>(version & 0x0F);
  return *this;
}

PacketBuilder& PacketBuilder::ipv4Ihl(uint8_t ihl_words) {
  ihl_override_ = static_cast<uint8_t>(ihl_words & 0x0F);
  return *this;
}

PacketBuilder& PacketBuilder::ipv4TotalLength(uint16_t total) {
  total_len_override_ = total;
  return *this;
}

PacketBuilder& PacketBuilder::ipv6PayloadLength(uint16_t len) {
  ipv6_plen_override_ = len;
  return *this;
}

PacketBuilder& PacketBuilder::tcpDataOffset(uint8_t words) {
  tcp_doff_override_ = static_cast<uint8_t>(words & 0x0F);
  return *this;
}

PacketBuilder& PacketBuilder::udpLength(uint16_t len) {
  udp_len_override_ = len;
  return *this;
}

PacketBuilder& PacketBuilder::corruptIpv4Checksum() {
  corrupt_ip_csum_ = true;
  return *this;
}

PacketBuilder& PacketBuilder::corruptL4Checksum() {
  corrupt_l4_csum_ = true;
  return *this;
}

// L4 header + payload, checksum field zero; *proto_out gets the IP protocol number.
Frame PacketBuilder::buildL4(uint8_t* proto_out) const {
  Frame l4;
  switch (l4_) {
    case L4Kind::kNone:
      throw std::logic_error("IP packet without L4: call tcp/udp/icmp/icmpv6/l4Raw");
    case L4Kind::kTcp: {
      *proto_out = kIpProtoTcp;
      put16(l4, sport_);
      put16(l4, dport_);
      put32(l4, tcp_seq_);
      put32(l4, tcp_ack_);
      const size_t hlen = kTcpHeaderLen + tcp_options_.size();
      const uint8_t doff =
          tcp_doff_override_ ? *tcp_doff_override_ : static_cast<uint8_t>(hlen / 4);
      l4.push_back(static_cast<uint8_t>(doff << 4));
      l4.push_back(tcp_flags_);
      put16(l4, tcp_window_);
      put16(l4, 0);  // checksum
      put16(l4, 0);  // urgent pointer
      append(l4, tcp_options_.data(), tcp_options_.size());
      break;
    }
    case L4Kind::kUdp:
      *proto_out = kIpProtoUdp;
      put16(l4, sport_);
      put16(l4, dport_);
      put16(l4, udp_len_override_ ? *udp_len_override_
                                  : static_cast<uint16_t>(kUdpHeaderLen + payload_.size()));
      put16(l4, 0);
      break;
    case L4Kind::kIcmp:
    case L4Kind::kIcmpv6:
      *proto_out = l4_ == L4Kind::kIcmp ? kIpProtoIcmp : kIpProtoIcmpv6;
      l4.push_back(icmp_type_);
      l4.push_back(icmp_code_);
      put16(l4, 0);
      put16(l4, icmp_id_);
      put16(l4, icmp_seq_);
      break;
    case L4Kind::kRaw:
      *proto_out = raw_proto_;
      break;
  }
  append(l4, payload_.data(), payload_.size());
  return l4;
}

void PacketBuilder::requireIp(const char* what) const {
  if (l3_ != L3Kind::kIpv4 && l3_ != L3Kind::kIpv6) {
    throw std::logic_error(std::string(what) + " needs ipv4() or ipv6()");
  }
}

Frame PacketBuilder::build() const {
  if (l3_ == L3Kind::kNone) throw std::logic_error("no L3: call ipv4/ipv6/etherType/arp");
  if (l3_ == L3Kind::kIpv4 && (l4_ == L4Kind::kIcmpv6 || !ipv6_ext_.empty())) {
    throw std::logic_error("icmpv6() / IPv6 extension headers need ipv6()");
  }
  if (l3_ == L3Kind::kIpv6 && (l4_ == L4Kind::kIcmp || !ipv4_options_.empty())) {
    throw std::logic_error("icmp() / IPv4 options need ipv4()");
  }
  if (l3_ == L3Kind::kRaw && l4_ != L4Kind::kNone) requireIp("an L4 header");

  Frame f;
  append(f, dst_mac_.data(), dst_mac_.size());
  append(f, src_mac_.data(), src_mac_.size());
  for (size_t i = 0; i < vlans_.size(); ++i) {
    uint16_t tpid = kTpid8021Q;
    if (vlans_[i].tpid) {
      tpid = *vlans_[i].tpid;
    } else if (vlans_.size() >= 2 && i == 0) {
      tpid = kTpid8021Ad;
    }
    put16(f, tpid);
    put16(f, vlans_[i].tci);
  }

  if (l3_ == L3Kind::kRaw) {
    put16(f, raw_ether_type_);
    if (arp_) {
      put16(f, 1);  // hardware type Ethernet
      put16(f, kEtherTypeIpv4);
      f.push_back(6);
      f.push_back(4);
      put16(f, arp_op_);
      append(f, src_mac_.data(), 6);
      append(f, arp_sender_.b, 4);
      if (arp_op_ == 2) {
        append(f, dst_mac_.data(), 6);
      } else {
        f.insert(f.end(), 6, 0);
      }
      append(f, arp_target_.b, 4);
    }
    append(f, payload_.data(), payload_.size());
    if (f.size() < pad_to_) f.resize(pad_to_, 0);
    return f;
  }

  uint8_t proto = 0;
  Frame l4 = buildL4(&proto);
  const bool v6 = l3_ == L3Kind::kIpv6;
  size_t pppoe_off = 0;
  if (pppoe_session_) {
    put16(f, 0x8864);
    pppoe_off = f.size();
    f.push_back(0x11);  // version 1, type 1
    f.push_back(0);     // code: session data
    put16(f, *pppoe_session_);
    put16(f, 0);        // length, set below
    const uint16_t ppp = v6 ? 0x0057 : 0x0021;
    if (pppoe_compressed_) {
      f.push_back(static_cast<uint8_t>(ppp));
    } else {
      put16(f, ppp);
    }
  } else {
    put16(f, v6 ? kEtherTypeIpv6 : kEtherTypeIpv4);
  }
  const size_t l3_off = f.size();

  if (!v6) {
    const size_t hlen = kIpv4HeaderLen + ipv4_options_.size();
    const uint8_t ihl = ihl_override_ ? *ihl_override_ : static_cast<uint8_t>(hlen / 4);
    const uint8_t version = version_override_ ? *version_override_ : 4;
    f.push_back(static_cast<uint8_t>((version << 4) | ihl));
    f.push_back(0);  // DSCP/ECN
    put16(f, total_len_override_ ? *total_len_override_ : static_cast<uint16_t>(hlen + l4.size()));
    put16(f, ipv4_id_);
    put16(f, static_cast<uint16_t>((ipv4_df_ ? kIpv4FlagDf : 0) | (ipv4_mf_ ? kIpv4FlagMf : 0) |
                                   (ipv4_frag_offset_ / 8)));
    f.push_back(ttl_);
    f.push_back(proto);
    put16(f, 0);
    append(f, src_ip_.b, 4);
    append(f, dst_ip_.b, 4);
    append(f, ipv4_options_.data(), ipv4_options_.size());
    uint16_t csum = inetChecksum(&f[l3_off], hlen);
    set16(&f[l3_off + 10], corrupt_ip_csum_ ? damaged(csum) : csum);
  } else {
    size_t ext_len = 0;
    for (const ExtHeader& e : ipv6_ext_) ext_len += e.bytes.size();
    const uint8_t version = version_override_ ? *version_override_ : 6;
    f.push_back(static_cast<uint8_t>(version << 4));
    f.push_back(0);
    put16(f, 0);  // flow label
    put16(f, ipv6_plen_override_ ? *ipv6_plen_override_
                                 : static_cast<uint16_t>(ext_len + l4.size()));
    f.push_back(ipv6_ext_.empty() ? proto : ipv6_ext_.front().type);
    f.push_back(ttl_);
    append(f, src_ip_.b, 16);
    append(f, dst_ip_.b, 16);
    for (size_t i = 0; i < ipv6_ext_.size(); ++i) {
      const size_t start = f.size();
      append(f, ipv6_ext_[i].bytes.data(), ipv6_ext_[i].bytes.size());
      f[start] = i + 1 < ipv6_ext_.size() ? ipv6_ext_[i + 1].type : proto;
    }
  }

  size_t csum_pos = 0;
  bool pseudo = true;
  switch (l4_) {
    case L4Kind::kTcp: csum_pos = 16; break;
    case L4Kind::kUdp: csum_pos = 6; break;
    case L4Kind::kIcmp: csum_pos = 2; pseudo = false; break;
    case L4Kind::kIcmpv6: csum_pos = 2; break;
    default: csum_pos = 0; break;
  }
  if (csum_pos != 0 && l4.size() >= csum_pos + 2) {
    const uint32_t init = pseudo ? pseudoHeaderSum(v6, src_ip_, dst_ip_, proto, l4.size()) : 0;
    uint16_t csum = inetChecksum(l4.data(), l4.size(), init);
    if (l4_ == L4Kind::kUdp && csum == 0) csum = 0xFFFF;
    set16(&l4[csum_pos], corrupt_l4_csum_ ? damaged(csum) : csum);
  }
  append(f, l4.data(), l4.size());
  if (pppoe_session_) {
    set16(&f[pppoe_off + 4], pppoe_len_override_ ? *pppoe_len_override_
                                                 : static_cast<uint16_t>(f.size() - pppoe_off - 6));
  }
  if (f.size() < pad_to_) f.resize(pad_to_, 0);
  return f;
}

std::vector<Frame> fragmentIpv4(const Frame& frame, size_t fragment_payload_size) {
  if (fragment_payload_size == 0 || fragment_payload_size % 8 != 0) {
    throw std::invalid_argument("fragment payload size must be a positive multiple of 8");
  }
  uint16_t type = 0;
  const size_t l3 = l3Offset(frame, &type);
  if (type != kEtherTypeIpv4 || frame.size() < l3 + kIpv4HeaderLen) {
    throw std::invalid_argument("not an IPv4 frame");
  }
  const uint8_t* ip = &frame[l3];
  const size_t ihl = static_cast<size_t>(ip[0] & 0x0F) * 4;
  const size_t total = get16(ip + 2);
  if (ihl < kIpv4HeaderLen || total < ihl || l3 + total > frame.size()) {
    throw std::invalid_argument("inconsistent IPv4 lengths");
  }
  const size_t plen = total - ihl;
  if (plen <= fragment_payload_size) return {frame};

  const uint16_t frag = get16(ip + 6);
  const size_t base_off = static_cast<size_t>(frag & kIpv4OffsetMask) * 8;
  const bool base_mf = (frag & kIpv4FlagMf) != 0;
  std::vector<uint8_t> first_opts(ip + kIpv4HeaderLen, ip + ihl);
  std::vector<uint8_t> later_opts;
  for (size_t i = 0; i < first_opts.size();) {
    const uint8_t t = first_opts[i];
    if (t == kIpv4OptEol) break;
    if (t == kIpv4OptNop) {
      ++i;
      continue;
    }
    if (i + 1 >= first_opts.size() || first_opts[i + 1] < 2 ||
        i + first_opts[i + 1] > first_opts.size()) {
      throw std::invalid_argument("malformed IPv4 option");
    }
    const size_t olen = first_opts[i + 1];
    if (t & kIpv4OptCopied) {
      later_opts.insert(later_opts.end(), first_opts.begin() + static_cast<std::ptrdiff_t>(i),
                        first_opts.begin() + static_cast<std::ptrdiff_t>(i + olen));
    }
    i += olen;
  }
  padOptions(later_opts, kIpv4MaxOptions, "IPv4 options");

  std::vector<Frame> out;
  for (size_t pos = 0; pos < plen; pos += fragment_payload_size) {
    const size_t chunk = std::min(fragment_payload_size, plen - pos);
    const bool last = pos + chunk == plen;
    const std::vector<uint8_t>& opts = pos == 0 ? first_opts : later_opts;
    const size_t off = base_off + pos;
    if (off / 8 > kIpv4OffsetMask) throw std::invalid_argument("fragment offset overflow");
    Frame f(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(l3));
    const size_t h = f.size();
    append(f, ip, kIpv4HeaderLen);
    f[h] = static_cast<uint8_t>(0x40 | ((kIpv4HeaderLen + opts.size()) / 4));
    set16(&f[h + 2], static_cast<uint16_t>(kIpv4HeaderLen + opts.size() + chunk));
    set16(&f[h + 6], static_cast<uint16_t>(((base_mf || !last) ? kIpv4FlagMf : 0) | (off / 8)));
    set16(&f[h + 10], 0);
    append(f, opts.data(), opts.size());
    set16(&f[h + 10], inetChecksum(&f[h], kIpv4HeaderLen + opts.size()));
    append(f, ip + ihl + pos, chunk);
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<Frame> fragmentIpv6(const Frame& frame, size_t fragment_payload_size, uint32_t id) {
  if (fragment_payload_size == 0 || fragment_payload_size % 8 != 0) {
    throw std::invalid_argument("fragment payload size must be a positive multiple of 8");
  }
  uint16_t type = 0;
  const size_t l3 = l3Offset(frame, &type);
  if (type != kEtherTypeIpv6 || frame.size() < l3 + kIpv6HeaderLen) {
    throw std::invalid_argument("not an IPv6 frame");
  }
  const size_t l3_end = l3 + kIpv6HeaderLen + get16(&frame[l3 + 4]);
  if (l3_end > frame.size()) throw std::invalid_argument("IPv6 payload length past the frame");

  // Per-fragment part: the IPv6 header and extension headers up to the last hop-by-hop or
  // routing header (destination options before a routing header belong to it).
  size_t cur = l3 + kIpv6HeaderLen;
  size_t unfrag_end = cur;
  size_t unfrag_nh_pos = l3 + 6;
  uint8_t nh = frame[l3 + 6];
  while (nh == kIpv6HopByHop || nh == kIpv6Routing || nh == kIpv6DestOpts) {
    if (cur + 2 > l3_end) throw std::invalid_argument("truncated extension header");
    const size_t hlen = (static_cast<size_t>(frame[cur + 1]) + 1) * 8;
    if (cur + hlen > l3_end) throw std::invalid_argument("truncated extension header");
    if (nh != kIpv6DestOpts) {
      unfrag_end = cur + hlen;
      unfrag_nh_pos = cur;
    }
    nh = frame[cur];
    cur += hlen;
  }
  if (nh == kIpv6Fragment) throw std::invalid_argument("already fragmented");
  const size_t plen = l3_end - unfrag_end;
  if (plen <= fragment_payload_size) return {frame};
  const uint8_t frag_nh = frame[unfrag_nh_pos];

  std::vector<Frame> out;
  for (size_t pos = 0; pos < plen; pos += fragment_payload_size) {
    const size_t chunk = std::min(fragment_payload_size, plen - pos);
    const bool last = pos + chunk == plen;
    if (pos > 0xFFF8) throw std::invalid_argument("fragment offset overflow");
    Frame f(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(unfrag_end));
    f[unfrag_nh_pos] = kIpv6Fragment;
    set16(&f[l3 + 4], static_cast<uint16_t>(unfrag_end - l3 - kIpv6HeaderLen +
                                            kIpv6FragHeaderLen + chunk));
    f.push_back(frag_nh);
    f.push_back(0);
    put16(f, static_cast<uint16_t>(pos | (last ? 0 : 1)));
    put32(f, id);
    append(f, &frame[unfrag_end + pos], chunk);
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace dpu::test
