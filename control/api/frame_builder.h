// Builds one Ethernet frame from a 5-tuple (Explain requests that give a tuple instead of
// frame bytes): Ethernet [+ 802.1Q tag] + IPv4 or IPv6 + TCP / UDP / ICMP / ICMPv6 (or any
// other IP protocol number, the payload following the IP header as is). Lengths are
// consistent so the dataplane parser accepts the frame; checksums are computed too.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace dpu::ctl {

struct FrameSpec {
  std::string src_ip;     // IPv4 dotted quad or IPv6 text; both of the same family
  std::string dst_ip;
  std::string proto;      // "tcp", "udp", "icmp", "icmpv6" (any case) or a number 0..255;
                          // "icmp" with IPv6 addresses means ICMPv6
  uint32_t src_port = 0;  // TCP/UDP ports; ICMP echo identifier for icmp / icmpv6
  uint32_t dst_port = 0;
  uint32_t vlan = 0;      // 0 = untagged, else an 802.1Q VID 1..4094
  std::string tcp_flags;  // letters F S R P A U E C, e.g. "S", "SA", "PA"; empty = "S" for tcp
  std::string payload;    // L4 payload bytes
};

// TCP flag letters -> flag bits (FIN=0x01 ... CWR=0x80). Errors name the bad letter.
absl::StatusOr<uint8_t> parseTcpFlags(std::string_view letters);

// The DNS message of a standard query (RD set, one question, class IN) for `name` (labels
// of 1..63 bytes, at most 255 bytes on the wire; a trailing dot is allowed) and `qtype`
// ("A" when empty, a type mnemonic such as "AAAA", "MX", "TXT", "HTTPS", or a number
// 1..65535), with message id `id`. Errors name the field ("dns_query.name: ...").
absl::StatusOr<std::string> buildDnsQuery(std::string_view name, std::string_view qtype,
                                          uint16_t id);

// The frame; an error names the field (e.g. "tuple.src_ip: 'x' is not an IP address").
absl::StatusOr<std::vector<uint8_t>> buildFrame(const FrameSpec& spec);

}  // namespace dpu::ctl
