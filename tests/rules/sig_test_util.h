// Helpers of the signature tests (sig_parse_test, signatures_test).
#pragma once

#include <arpa/inet.h>

#include <array>
#include <cstdint>
#include <cstring>

namespace dpu::rules::test {

// An IPv4 address as signatures hold it: ::ffff:a.b.c.d.
inline std::array<uint8_t, 16> v4(const char* s) {
  std::array<uint8_t, 16> a{};
  a[10] = a[11] = 0xff;
  in_addr x{};
  inet_pton(AF_INET, s, &x);
  std::memcpy(&a[12], &x, 4);
  return a;
}

inline std::array<uint8_t, 16> v6(const char* s) {
  std::array<uint8_t, 16> a{};
  inet_pton(AF_INET6, s, a.data());
  return a;
}

}  // namespace dpu::rules::test
