// Fuzz target (DNS filtering): the list parsers (rules/compile/dns_parsers.h) on one list
// text, in every format, and the name set built from it.
//
// Checks: never a crash; every emitted name is normalized (normalizing it again gives the
// same name) and its bits name at least one part; entries + bad lines + ignored lines never
// exceed what the lines allow (a hosts line may give several entries); at most
// kMaxDnsLineErrors errors, each with section "dns", the source's list, file and a line
// number inside the text, and a reason; every emitted name is found in a DnsNameSet with the
// parts it was added with (before removal) and gone after removing every part.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "rules/compile/dns_parsers.h"
#include "rules/compiled/dns_name_set.h"
#include "tests/fuzz/fuzz_util.h"

using namespace dpu::rules;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  int lines = 1;
  for (char c : text) lines += c == '\n';
  for (DnsListFormat f : {DnsListFormat::kAuto, DnsListFormat::kPlain, DnsListFormat::kHosts,
                          DnsListFormat::kAdblock, DnsListFormat::kWildcard, DnsListFormat::kRpz,
                          DnsListFormat::kDnsmasq}) {
    for (DnsMatch m : {DnsMatch::kExact, DnsMatch::kSubtree}) {
      std::map<std::string, uint8_t> seen;
      DnsSource src{"fuzz", "fuzz.txt", "dns.lists[0].files[0]", 1};
      ConfigErrorList errs;
      DnsParseCounts c = parseDnsListText(text, f, m, src, [&](std::string_view n, uint8_t bits) {
        FUZZ_CHECK(bits != 0);
        FUZZ_CHECK((bits & (DnsEntryBits::kSelf | DnsEntryBits::kSub)) != 0);
        std::string again, why;
        FUZZ_CHECK(normalizeDnsName(n, again, &why));
        FUZZ_CHECK(again == n);
        seen[std::string(n)] |= bits;
      }, &errs);
      FUZZ_CHECK(c.bad_lines + c.ignored <= static_cast<uint64_t>(lines));
      FUZZ_CHECK(errs.size() <= kMaxDnsLineErrors);
      FUZZ_CHECK(errs.size() == std::min<uint64_t>(c.bad_lines, kMaxDnsLineErrors));
      for (const ConfigError& e : errs) {
        FUZZ_CHECK(e.section == "dns" && e.rule == "fuzz" && e.file == "fuzz.txt");
        FUZZ_CHECK(e.line >= 1 && e.line <= lines);
        FUZZ_CHECK(!e.reason.empty());
      }
      DnsNameSet set;
      for (const auto& [n, bits] : seen) set.add(dnsNameHash(n), bits & (DnsEntryBits::kSelf | DnsEntryBits::kSub));
      for (const auto& [n, bits] : seen) {
        uint8_t v = set.find(dnsNameHash(n));
        FUZZ_CHECK((v & (DnsEntryBits::kSelf | DnsEntryBits::kSub)) ==
                   (bits & (DnsEntryBits::kSelf | DnsEntryBits::kSub)));
      }
      for (const auto& [n, bits] : seen) set.remove(dnsNameHash(n), 0xff);
      FUZZ_CHECK(set.size() == 0);
    }
  }
  return 0;
}
