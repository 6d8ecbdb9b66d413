// libyara as the judge of YARA syntax: every source is compiled with yr_compiler first, so an
// error reads exactly as YARA's ("file:line: message"). Also builds YR_RULES for the oracle in
// tests and benchmarks. Each source is its own YARA namespace (its name).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rules/compile/config_errors.h"
#include "rules/model/dpi.h"

struct YR_RULES;

namespace dpu::rules {

struct YaraRulesDeleter {
  void operator()(YR_RULES* r) const;
};
using YaraRulesPtr = std::unique_ptr<YR_RULES, YaraRulesDeleter>;

// Compiles `sources` with libyara. Appends one ConfigError per YARA error (section "dpi",
// file = source name, line, reason = YARA's message) and returns null on any error.
YaraRulesPtr yaraCompile(const std::vector<YaraSource>& sources, ConfigErrorList& errors);

// The .yar / .yara files under each path (a directory, recursively, or a file), sorted; and
// a file's bytes ("" when unreadable). For the tools, tests and benchmarks on rule sets.
std::vector<std::string> yaraFiles(const std::vector<std::string>& paths);
std::string readFileBytes(const std::string& path);

// Scans `data` with libyara; returns "namespace:rule" of every matching rule (sorted).
std::vector<std::string> yaraScan(YR_RULES* rules, const uint8_t* data, size_t len);

}  // namespace dpu::rules
