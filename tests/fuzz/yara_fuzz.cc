// Fuzz target: the YARA translator and the condition evaluator (--- dpi ---). The input is
// YARA source, optionally followed by "\n\0\n" and bytes to scan. It must never crash, and:
// - the translator alone (no libyara validation, no Hyperscan compile: arbitrary text reaches
//   the parser) either accepts or reports errors / unsupported rules with a reason;
// - the evaluator runs on a match state filled with the input's bytes (any bit pattern);
// - when libyara accepts the source, our engine's matching rules on the bytes (one buffer and
//   split in 3-byte segments) equal libyara's restricted to the rules we accept.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "rules/compile/yara_translate.h"
#include "rules/compile/yara_validate.h"
#include "tests/fuzz/fuzz_util.h"

using namespace dpu::rules;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  std::string text, bytes;
  dpu::fuzz::splitRulesAndBytes(data, size, text, bytes);
  DpiModel m;
  m.sources.push_back({"f", text});
  {
    ConfigErrorList errs;
    DpiCompileOptions o;
    o.validate_with_libyara = false;
    o.compile_hyperscan = false;
    auto c = compileDpi(m, errs, o);
    if (!c.ok() && errs.empty()) std::abort();
    if (c.ok()) {
      for (const DpiUnsupported& u : (*c)->unsupported)
        if (u.reason.empty()) std::abort();
      std::vector<uint8_t> ms((*c)->matchStateBytes());
      for (size_t i = 0; i < ms.size(); ++i) ms[i] = bytes.empty() ? 0 : uint8_t(bytes[i % bytes.size()]);
      std::vector<uint32_t> out((*c)->rules.size() + 1);
      (*c)->evaluate(ms.data(), out.data(), uint32_t(out.size()));
    }
  }
  ConfigErrorList yerrs;
  YaraRulesPtr y = yaraCompile(m.sources, yerrs);
  if (!y) return 0;
  ConfigErrorList errs;
  auto c = compileDpi(m, errs);
  if (!c.ok()) return 0;  // e.g. a meta action that is not alert/drop/reset
  const CompiledDpi& d = **c;
  std::vector<std::string> accepted;
  for (const DpiRule& r : d.rules)
    if (!r.is_private) accepted.push_back(r.id());
  std::vector<std::string> all =
      yaraScan(y.get(), reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  std::vector<std::string> want;
  for (const std::string& id : all)
    for (const std::string& a : accepted)
      if (id == a) want.push_back(id);
  std::vector<uint8_t> ms(d.matchStateBytes());
  hs_scratch_t* scratch = nullptr;
  if (d.scratch_proto != nullptr && hs_clone_scratch(d.scratch_proto, &scratch) != HS_SUCCESS) return 0;
  std::vector<uint32_t> idx = d.scanBuffer(reinterpret_cast<const uint8_t*>(bytes.data()),
                                           bytes.size(), ms.data(), scratch);
  std::vector<std::string> got;
  for (uint32_t i : idx) got.push_back(d.rules[i].id());
  std::sort(got.begin(), got.end());
  if (scratch != nullptr) hs_free_scratch(scratch);
  if (got != want) {  // say which rules differ before the crash report
    std::fprintf(stderr, "yara_fuzz: our engine matched {");
    for (const auto& g : got) std::fprintf(stderr, " %s", g.c_str());
    std::fprintf(stderr, " }, libyara {");
    for (const auto& w : want) std::fprintf(stderr, " %s", w.c_str());
    std::fprintf(stderr, " }\n");
    std::abort();
  }
  return 0;
}
