// Test-only DNS message builder: queries and responses (with CNAME chains) as bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dpu::test {

inline void dnsPut16(std::vector<uint8_t>& v, uint16_t x) {
  v.push_back(static_cast<uint8_t>(x >> 8));
  v.push_back(static_cast<uint8_t>(x));
}

// "www.example.com" -> \3www\7example\3com\0 (no compression).
inline void dnsPutName(std::vector<uint8_t>& v, std::string_view name) {
  size_t pos = 0;
  while (pos < name.size()) {
    size_t dot = name.find('.', pos);
    if (dot == std::string_view::npos) dot = name.size();
    v.push_back(static_cast<uint8_t>(dot - pos));
    v.insert(v.end(), name.begin() + pos, name.begin() + dot);
    pos = dot + 1;
  }
  v.push_back(0);
}

inline std::vector<uint8_t> dnsQuery(std::string_view name, uint16_t qtype = 1, uint16_t id = 0x1234,
                                     uint16_t flags = 0x0100) {
  std::vector<uint8_t> v;
  dnsPut16(v, id);
  dnsPut16(v, flags);
  dnsPut16(v, 1);
  dnsPut16(v, 0);
  dnsPut16(v, 0);
  dnsPut16(v, 0);
  dnsPutName(v, name);
  dnsPut16(v, qtype);
  dnsPut16(v, 1);
  return v;
}

// A response to `name` whose answer section is the CNAME chain name -> chain[0] -> ... and
// an A record for the last name (owners compressed as pointers to the question / previous
// target, targets written in full).
inline std::vector<uint8_t> dnsCnameResponse(std::string_view name,
                                             const std::vector<std::string>& chain,
                                             uint16_t id = 0x1234) {
  std::vector<uint8_t> v = dnsQuery(name, 1, id, 0x8180);
  v[7] = static_cast<uint8_t>(chain.size() + 1);
  uint16_t owner = 12;
  for (const std::string& t : chain) {
    dnsPut16(v, static_cast<uint16_t>(0xc000 | owner));
    dnsPut16(v, 5);
    dnsPut16(v, 1);
    dnsPut16(v, 0);
    dnsPut16(v, 300);
    std::vector<uint8_t> rd;
    dnsPutName(rd, t);
    dnsPut16(v, static_cast<uint16_t>(rd.size()));
    owner = static_cast<uint16_t>(v.size());
    v.insert(v.end(), rd.begin(), rd.end());
  }
  dnsPut16(v, static_cast<uint16_t>(0xc000 | owner));
  dnsPut16(v, 1);
  dnsPut16(v, 1);
  dnsPut16(v, 0);
  dnsPut16(v, 300);
  dnsPut16(v, 4);
  v.insert(v.end(), {192, 0, 2, 1});
  return v;
}

}  // namespace dpu::test
