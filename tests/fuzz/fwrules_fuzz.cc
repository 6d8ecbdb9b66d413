// Fuzz target: the firewall rule file parsers (rules/compile/firewall_parsers.h) and what
// follows them. The first input byte picks the format (0: text rule file, 1: JSON rule file
// (DOCA-like), 2: CIDR list, 3: one text rule as `dpuctl fw add` takes it); the rest is the
// file. Invariants:
//  - never a crash; a refusal is InvalidArgument with a message, and every ConfigError it
//    lists has a reason;
//  - text rules: formatTextRule of a parsed rule parses back, and formatting that again gives
//    the same line (the format is a fixed point after one round; descriptions lose newlines);
//  - every parsed rule converts (rulesFromSpecs) or is refused with errors, and what converts
//    compiles (compileFirewall) or is refused with errors;
//  - CIDR lists: every prefix has no host bits and formats/parses back to itself.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "rules/compile/firewall_compiler.h"
#include "rules/compile/firewall_parsers.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using namespace dpu::rules;

void checkRefusal(const absl::Status& st, const ConfigErrorList& errors) {
  FUZZ_CHECK(st.code() == absl::StatusCode::kInvalidArgument);
  FUZZ_CHECK(!st.message().empty());
  for (const auto& e : errors) FUZZ_CHECK(!e.reason.empty());
}

void roundTrip(const FirewallRuleSpec& spec) {
  if (!spec.action) return;  // JSON rules may leave it to the default
  std::string line = formatTextRule(spec);
  auto again = parseTextRule(line, "", 0);
  if (!again.ok()) {
    // JSON accepts values the text format writes in other words only when they are valid
    // there too; a rule that parsed must format to something that parses.
    std::fprintf(stderr, "formatted rule does not parse: %s\n  %s\n", line.c_str(),
                 std::string(again.status().message()).c_str());
    FUZZ_CHECK(again.ok());
  }
  std::string line2 = formatTextRule(*again);
  if (line2 != line) {
    // The first formatting may normalise (e.g. a description's newline); from then on stable.
    auto third = parseTextRule(line2, "", 0);
    FUZZ_CHECK(third.ok());
    FUZZ_CHECK(formatTextRule(*third) == line2);
  }
}

void convertAndCompile(const std::vector<FirewallRuleSpec>& specs) {
  IpSetTable sets;
  sets["corp"] = {*parsePrefix("10.0.0.0/8")};
  ConfigErrorList errors;
  auto rules = rulesFromSpecs(specs, sets, /*geoip_configured=*/true, &errors);
  if (!rules.ok()) {
    checkRefusal(rules.status(), errors);
    FUZZ_CHECK(!errors.empty());
    return;
  }
  FirewallModel model;
  model.rules = std::move(*rules);
  ConfigErrorList cerr;
  auto fw = compileFirewall(model, &cerr);
  if (!fw.ok()) {
    FUZZ_CHECK(!fw.status().message().empty());
    for (const auto& e : cerr) FUZZ_CHECK(!e.reason.empty());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 64 * 1024) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  ConfigErrorList errors;
  switch (data[0] % 4) {
    case 0: {
      auto specs = parseTextRules(text, "fuzz.rules", &errors);
      if (!specs.ok()) return checkRefusal(specs.status(), errors), 0;
      for (const auto& s : *specs) roundTrip(s);
      convertAndCompile(*specs);
      break;
    }
    case 1: {
      auto specs = parseJsonRules(text, "fuzz.json", &errors);
      if (!specs.ok()) return checkRefusal(specs.status(), errors), 0;
      convertAndCompile(*specs);
      break;
    }
    case 2: {
      auto list = parseCidrList(text, "fuzz.cidr", "fuzzset", &errors);
      if (!list.ok()) return checkRefusal(list.status(), errors), 0;
      for (const auto& p : *list) {
        FUZZ_CHECK(!prefixHasHostBits(p));
        auto back = parsePrefix(formatPrefix(p));
        FUZZ_CHECK(back.ok());
        FUZZ_CHECK(*back == p);
      }
      break;
    }
    default: {
      auto spec = parseTextRule(text, "", 0, &errors);
      if (!spec.ok()) return checkRefusal(spec.status(), errors), 0;
      roundTrip(*spec);
      convertAndCompile({*spec});
      break;
    }
  }
  return 0;
}
