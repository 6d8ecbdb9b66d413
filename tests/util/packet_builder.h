// Test packet builder: frames built in code, with correct lengths and checksums unless a test
// asks for a corruption. Test-only code: misuse throws std::invalid_argument / std::logic_error.
//
//   Frame f = PacketBuilder().vlan(10).ipv4("10.0.0.1", "10.0.0.2").tcp(1234, 80, kTcpSyn)
//                 .payload("hello").build();
//   std::vector<Frame> frags = fragmentIpv4(f, 16);
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/packet/packet_meta.h"

namespace dpu::test {

using Frame = std::vector<uint8_t>;
using MacAddr = std::array<uint8_t, 6>;

inline constexpr MacAddr kDefaultSrcMac = {0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
inline constexpr MacAddr kDefaultDstMac = {0x02, 0x00, 0x00, 0x00, 0x00, 0x02};

inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint16_t kEtherTypeArp = 0x0806;
inline constexpr uint16_t kEtherTypeIpv6 = 0x86DD;
inline constexpr uint16_t kEtherTypeLldp = 0x88CC;
inline constexpr uint16_t kTpid8021Q = 0x8100;
inline constexpr uint16_t kTpid8021Ad = 0x88A8;
inline constexpr uint16_t kTpidQinQ9100 = 0x9100;

inline constexpr uint8_t kIpProtoIcmp = 1;
inline constexpr uint8_t kIpProtoTcp = 6;
inline constexpr uint8_t kIpProtoUdp = 17;
inline constexpr uint8_t kIpProtoGre = 47;
inline constexpr uint8_t kIpProtoEsp = 50;
inline constexpr uint8_t kIpProtoAh = 51;
inline constexpr uint8_t kIpProtoIcmpv6 = 58;
inline constexpr uint8_t kIpProtoNoNext = 59;
inline constexpr uint8_t kIpProtoSctp = 132;
inline constexpr uint8_t kIpv6HopByHop = 0;
inline constexpr uint8_t kIpv6Routing = 43;
inline constexpr uint8_t kIpv6Fragment = 44;
inline constexpr uint8_t kIpv6DestOpts = 60;
inline constexpr uint8_t kIpv6Mobility = 135;

// "a.b.c.d" or an RFC 4291 text IPv6 address; nullopt when neither.
std::optional<dp::IpAddr> parseIp(std::string_view text);
// Like parseIp, throwing std::invalid_argument on bad input (for test literals).
dp::IpAddr ip(std::string_view text);
// "a.b.c.d" when v6 is false (b[0..3]), else the compressed IPv6 text form.
std::string ipToString(const dp::IpAddr& a, bool v6);
// "aa:bb:cc:dd:ee:ff"; throws std::invalid_argument on bad input.
MacAddr mac(std::string_view text);

// RFC 1071 Internet checksum of [data, data+len) added to `initial` (a partial 32-bit sum,
// e.g. a pseudo-header); returns the complemented 16-bit value in host order.
uint16_t inetChecksum(const uint8_t* data, size_t len, uint32_t initial = 0);

// True when the IPv4 header checksum and the TCP/UDP/ICMP/ICMPv6 checksum of `f` verify (L4
// checksums only for unfragmented packets; a zero UDP-over-IPv4 checksum counts as valid).
// Non-IP frames and packets the parser rejects return true / false respectively.
bool checksumsOk(const Frame& f);

class PacketBuilder {
 public:
  // L2. eth() is optional (default MACs). vlan() may be called twice for QinQ; the first call is
  // the outer tag. Tags get TPID 0x8100 when alone, outer 0x88a8 + inner 0x8100 when stacked;
  // vlanTag() fixes the TPID of one tag (e.g. 0x9100) and allows any number of tags.
  PacketBuilder& eth(const MacAddr& src = kDefaultSrcMac, const MacAddr& dst = kDefaultDstMac);
  PacketBuilder& vlan(uint16_t vid, uint8_t pcp = 0);
  PacketBuilder& vlanTag(uint16_t tpid, uint16_t vid, uint8_t pcp = 0);

  // PPPoE session header (RFC 2516: ethertype 0x8864, version/type 0x11, code 0, `session`,
  // the length of the PPP frame) and the PPP protocol of the IP packet (0x0021 / 0x0057; one
  // byte when `compressed_protocol`) between the tags and the IP header. The length counts the
  // IP packet (not padTo() bytes) unless pppoeLength() overrides it.
  PacketBuilder& pppoe(uint16_t session, bool compressed_protocol = false);
  PacketBuilder& pppoeLength(uint16_t len);

  // Raw L2 payload with the given ethertype (use payload() for the bytes).
  PacketBuilder& etherType(uint16_t type);
  // ARP over Ethernet/IPv4 (op 1 request, 2 reply); sender MAC is the eth() source.
  PacketBuilder& arp(uint16_t op, std::string_view sender_ip, std::string_view target_ip);

  // IPv4. Options are padded with EOL to a multiple of 4 bytes (at most 40).
  PacketBuilder& ipv4(std::string_view src, std::string_view dst, uint8_t ttl = 64);
  PacketBuilder& ipv4Options(std::vector<uint8_t> options);
  PacketBuilder& ipv4Id(uint16_t id);
  PacketBuilder& ipv4DontFragment(bool df = true);
  // Marks the packet as one fragment: `offset_bytes` must be a multiple of 8.
  PacketBuilder& ipv4Fragment(uint16_t id, uint16_t offset_bytes, bool more_fragments);

  // IPv6 and extension headers, emitted in call order between the IPv6 header and L4. Lengths
  // are total header bytes (multiples of 8), filled with PadN options / zeros.
  PacketBuilder& ipv6(std::string_view src, std::string_view dst, uint8_t hop_limit = 64);
  PacketBuilder& ipv6HopByHop(size_t len_bytes = 8);
  PacketBuilder& ipv6Routing(size_t len_bytes = 8);  // type 0, segments left 0
  PacketBuilder& ipv6DestOpts(size_t len_bytes = 8);
  PacketBuilder& ipv6Fragment(uint32_t id, uint16_t offset_bytes, bool more_fragments);
  // Any header: `bytes` is the whole header; byte 0 (next header) is filled in by build(), the
  // length byte is left as given (so tests can lie about it).
  PacketBuilder& ipv6Ext(uint8_t type, std::vector<uint8_t> bytes);

  // L4 (one of). seq/ack/flags are host order; options padded with EOL to a multiple of 4.
  PacketBuilder& tcp(uint16_t sport, uint16_t dport, uint8_t flags = dp::kTcpAck, uint32_t seq = 0,
                     uint32_t ack = 0);
  PacketBuilder& tcpOptions(std::vector<uint8_t> options);
  PacketBuilder& tcpWindow(uint16_t window);
  PacketBuilder& udp(uint16_t sport, uint16_t dport);
  PacketBuilder& icmp(uint8_t type, uint8_t code, uint16_t id = 0, uint16_t seq = 0);
  PacketBuilder& icmpv6(uint8_t type, uint8_t code, uint16_t id = 0, uint16_t seq = 0);
  // Any IP protocol number: payload() bytes follow the IP header(s) as they are.
  PacketBuilder& l4Raw(uint8_t proto);

  // Bytes after the innermost header (L4 payload, raw L3/L4 body, ICMP echo data).
  PacketBuilder& payload(std::vector<uint8_t> bytes);
  PacketBuilder& payload(std::string_view text);
  // Appends zero bytes after the datagram until the frame is `frame_len` long (Ethernet
  // minimum is 60 without FCS). Lengths and checksums ignore the trailer.
  PacketBuilder& padTo(size_t frame_len);

  // Deliberate damage, for malformed-packet tests. Checksums are computed after overrides.
  PacketBuilder& ipVersion(uint8_t version);         // version nibble of the IP header
  PacketBuilder& ipv4Ihl(uint8_t ihl_words);          // IHL field only; bytes emitted unchanged
  PacketBuilder& ipv4TotalLength(uint16_t total);
  PacketBuilder& ipv6PayloadLength(uint16_t len);
  PacketBuilder& tcpDataOffset(uint8_t words);        // field only; bytes emitted unchanged
  PacketBuilder& udpLength(uint16_t len);
  PacketBuilder& corruptIpv4Checksum();
  PacketBuilder& corruptL4Checksum();

  Frame build() const;

 private:
  enum class L3Kind : uint8_t { kNone, kIpv4, kIpv6, kRaw };
  enum class L4Kind : uint8_t { kNone, kTcp, kUdp, kIcmp, kIcmpv6, kRaw };
  struct VlanTag {
    std::optional<uint16_t> tpid;
    uint16_t tci;
  };
  struct ExtHeader {
    uint8_t type;
    std::vector<uint8_t> bytes;
  };

  Frame buildL4(uint8_t* proto_out) const;
  void requireIp(const char* what) const;

  MacAddr src_mac_ = kDefaultSrcMac;
  MacAddr dst_mac_ = kDefaultDstMac;
  std::vector<VlanTag> vlans_;
  std::optional<uint16_t> pppoe_session_;
  bool pppoe_compressed_ = false;
  std::optional<uint16_t> pppoe_len_override_;
  L3Kind l3_ = L3Kind::kNone;
  uint16_t raw_ether_type_ = 0;
  dp::IpAddr src_ip_{};
  dp::IpAddr dst_ip_{};
  uint8_t ttl_ = 64;
  std::vector<uint8_t> ipv4_options_;
  uint16_t ipv4_id_ = 0;
  bool ipv4_df_ = false;
  uint16_t ipv4_frag_offset_ = 0;
  bool ipv4_mf_ = false;
  std::vector<ExtHeader> ipv6_ext_;
  L4Kind l4_ = L4Kind::kNone;
  uint8_t raw_proto_ = 0;
  uint16_t sport_ = 0;
  uint16_t dport_ = 0;
  uint8_t tcp_flags_ = 0;
  uint32_t tcp_seq_ = 0;
  uint32_t tcp_ack_ = 0;
  uint16_t tcp_window_ = 65535;
  std::vector<uint8_t> tcp_options_;
  uint8_t icmp_type_ = 0;
  uint8_t icmp_code_ = 0;
  uint16_t icmp_id_ = 0;
  uint16_t icmp_seq_ = 0;
  bool arp_ = false;
  uint16_t arp_op_ = 0;
  dp::IpAddr arp_sender_{};
  dp::IpAddr arp_target_{};
  std::vector<uint8_t> payload_;
  size_t pad_to_ = 0;
  std::optional<uint8_t> version_override_;
  std::optional<uint8_t> ihl_override_;
  std::optional<uint16_t> total_len_override_;
  std::optional<uint16_t> ipv6_plen_override_;
  std::optional<uint8_t> tcp_doff_override_;
  std::optional<uint16_t> udp_len_override_;
  bool corrupt_ip_csum_ = false;
  bool corrupt_l4_csum_ = false;
};

// Splits the IPv4 datagram in `frame` (unfragmented, or itself a fragment) into fragments of at
// most `fragment_payload_size` payload bytes (a multiple of 8), in order, each with the L2
// header of `frame` and a fresh header checksum. The first fragment keeps all IP options, later
// ones only options with the copied flag. DF is cleared. A datagram that fits is returned as is.
std::vector<Frame> fragmentIpv4(const Frame& frame, size_t fragment_payload_size);

// Splits the IPv6 packet in `frame` (without a fragment header) per RFC 8200: hop-by-hop and
// routing headers (and destination options before a routing header) are repeated in every
// fragment, followed by a fragment header with identification `id` and a slice of the rest.
std::vector<Frame> fragmentIpv6(const Frame& frame, size_t fragment_payload_size, uint32_t id);

}  // namespace dpu::test
