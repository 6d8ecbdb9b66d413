// dpi-coverage: how much of a YARA rule set the DPI engine accepts, and why the rest is not.
//   dpi-coverage [--quiet] FILE_OR_DIR...
// Each .yar/.yara file is its own source (namespace). A file libyara rejects is reported with
// YARA's error and counted apart. Prints per file set: rules, accepted, unsupported, and the
// reasons (identifiers removed so that equal reasons group), most frequent first.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "rules/compile/yara_translate.h"
#include "rules/compile/yara_validate.h"

using namespace dpu::rules;

static std::string normalize(const std::string& reason) {
  static const std::regex ident(R"((\$|#|@|!)[A-Za-z0-9_]*\*?)");
  static const std::regex rule_ref(R"((rule|module or function|identifier|module) [A-Za-z0-9_.]+)");
  std::string r = std::regex_replace(reason, ident, "$$x");
  r = std::regex_replace(r, rule_ref, "$1 X");
  size_t c = r.find(": ");
  if (r.rfind("hyperscan", 0) == 0 && c != std::string::npos) r = r.substr(0, c) + ": " + r.substr(c + 2, 40);
  return r;
}

int main(int argc, char** argv) {
  bool quiet = false;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quiet") quiet = true;
    else args.push_back(a);
  }
  const std::vector<std::string> files = yaraFiles(args);
  size_t rules = 0, accepted = 0, bad_files = 0;
  std::map<std::string, size_t> reasons;
  for (const std::string& f : files) {
    DpiModel m;
    m.sources.push_back({f, readFileBytes(f)});
    ConfigErrorList errs;
    auto c = compileDpi(m, errs);
    if (!c.ok()) {
      ++bad_files;
      if (!quiet) std::printf("  rejected file %s: %s\n", f.c_str(), formatError(errs.front()).c_str());
      continue;
    }
    rules += (*c)->rules.size() + (*c)->unsupported.size();
    accepted += (*c)->rules.size();
    for (const DpiUnsupported& u : (*c)->unsupported) {
      ++reasons[normalize(u.reason)];
      if (!quiet) std::printf("  unsupported %s:%s (line %d): %s\n", u.source.c_str(), u.rule.c_str(), u.line, u.reason.c_str());
    }
  }
  std::printf("files %zu (libyara rejected %zu), rules %zu, accepted %zu (%.1f%%), unsupported %zu\n",
              files.size(), bad_files, rules, accepted, rules ? 100.0 * double(accepted) / double(rules) : 0.0,
              rules - accepted);
  std::vector<std::pair<size_t, std::string>> byCount;
  for (auto& [r, n] : reasons) byCount.emplace_back(n, r);
  std::sort(byCount.rbegin(), byCount.rend());
  for (auto& [n, r] : byCount) std::printf("  %6zu  %s\n", n, r.c_str());
  return 0;
}
