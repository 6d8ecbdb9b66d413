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

#include <functional>
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
  // A shard whose content changed is served by its previous database (the changed sources'
  // patterns in a delta database) until a background merge has compiled it again. false:
  // every shard whose database is not in the cache is compiled before the call returns.
  bool incremental = true;
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

// --- incremental compile (docs/dpi.md "Shards and incremental compiles") ---
// The process keeps, across compileDpi calls: each source's translation (by its text and the
// options that shape it), the sources libyara accepted, the expressions Hyperscan refused,
// and the shard databases in use. A shard whose content changed is compiled again by a
// background thread at low priority; when the queue is empty after a merge, `fn` runs (on
// that thread): the control plane republishes its rule set, which then compiles from the
// cache with no delta. One listener per process (the last set).
void setDpiMergeListener(std::function<void()> fn);
struct DpiMergeStats {
  uint32_t pending = 0;          // queued or running
  uint64_t done = 0, failed = 0;
};
DpiMergeStats dpiMergeStats();
void waitDpiMerges();            // until no merge is queued or running (listener included)
// Forgets everything above (benchmarks of cold compiles, tests of the disk cache).
void clearDpiCompileCache();

}  // namespace dpu::rules
