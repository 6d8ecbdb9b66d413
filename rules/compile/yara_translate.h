// YARA -> Hyperscan translation. Every source is first validated by libyara (yara_validate.h)
// so syntax errors read like YARA's; then the accepted subset is parsed again here:
//   strings: text (ascii, wide, nocase, fullword, private, xor[(lo-hi)]), hex (bytes, ??,
//     nibbles, jumps [n] [n-m] [n-] [-], alternatives), regexes (/i, /s; nocase, ascii,
//     private);
//   conditions: and/or/not, $a, #a, @a[i], !a[i], $a at N, $a in (N..M), any/all/N of (set)
//     and them, filesize (bytes of the stream seen so far), integer arithmetic, bitwise and
//     comparison operators, references to earlier rules, private and global rules,
//     uint8/16/32[be](N) == C at a constant offset.
// Everything else makes the rule unsupported, with the rule name and the reason (never
// silently dropped): modules, external variables, `for` loops, base64 strings, counts or
// offsets of variable-length strings, ...
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rules/compile/config_errors.h"
#include "rules/compiled/dpi.h"
#include "rules/model/dpi.h"

namespace dpu::rules {

struct DpiCompileOptions {
  bool validate_with_libyara = true;  // false only for the fuzz target (no libyara there)
  bool compile_hyperscan = true;      // false: translation only (fuzzing, coverage)
  // Tests and benchmarks: every regex and hex string that can be confirmed is compiled with
  // HS_FLAG_PREFILTER + PCRE2 confirmation, not only those Hyperscan refuses exactly.
  bool prefilter_all = false;
};

// Validates and compiles `model.sources` into a CompiledDpi. Errors (YARA syntax, bad meta
// action, unknown rule in actions, unsupported rules when model.unsupported_fails) are
// appended to `errors` and make the result an error status. Unsupported rules otherwise are
// listed in CompiledDpi::unsupported.
absl::StatusOr<std::shared_ptr<const CompiledDpi>> compileDpi(const DpiModel& model,
                                                              ConfigErrorList& errors,
                                                              const DpiCompileOptions& opt = {});

// Compiled databases that could not be written to dpi.cache_dir since the process started
// (each also a CompiledDpi::cache_warning).
uint64_t dpiCacheWriteFailures();

}  // namespace dpu::rules
