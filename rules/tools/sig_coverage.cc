// sig-coverage: how much of a Suricata-format rule set the appliance accepts, and why the rest
// is not (docs/signatures.md).
//   sig-coverage [--quiet | --list] FILE_OR_DIR...
// Each .rules file is compiled on its own (flowbits and sids checked within the file) and
// then all together. Prints per file: enabled rules, accepted, refused and the percentage;
// then the refusal reasons over all files (quoted names removed so that equal reasons group),
// most frequent first; --quiet: the totals only; --list: every refusal (file:line sid N: reason). Exit status 0 (a coverage report, not a check).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "rules/compile/yara_validate.h"
#include "rules/compiled/signatures.h"

using namespace dpu::rules;

static std::string normalize(const std::string& reason) {
  static const std::regex quoted("`[^`]*`");
  static const std::regex digits("[0-9]+");
  std::string r = reason;
  // keep the keyword / buffer / protocol name of "not supported" reasons
  if (r.find("not supported") == std::string::npos && r.find("not inspected") == std::string::npos)
    r = std::regex_replace(r, quoted, "`X`");
  return std::regex_replace(r, digits, "N");
}

int main(int argc, char** argv) {
  bool quiet = false, list = false;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quiet" || a == "--list") {
      (a == "--quiet" ? quiet : list) = true;
      continue;
    }
    if (std::filesystem::is_directory(a)) {
      std::vector<std::string> in;
      for (const auto& e : std::filesystem::directory_iterator(a))
        if (e.path().extension() == ".rules") in.push_back(e.path().string());
      std::sort(in.begin(), in.end());
      files.insert(files.end(), in.begin(), in.end());
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: sig-coverage [--quiet | --list] FILE_OR_DIR...\n");
    return 2;
  }
  std::map<std::string, size_t> reasons;
  size_t total = 0, accepted = 0;
  std::vector<SigSource> all;
  for (const std::string& f : files) {
    SigSource s{std::filesystem::path(f).filename().string(), readFileBytes(f)};
    all.push_back(s);
    SigCompileOptions o;
    o.compile_hyperscan = false;
    auto c = compileSignatures({s}, o);
    if (!c.ok()) {
      std::printf("  %s: %s\n", f.c_str(), std::string(c.status().message()).c_str());
      continue;
    }
    size_t n = (*c)->rules.size() + (*c)->refused.size();
    total += n;
    accepted += (*c)->rules.size();
    for (const auto& r : (*c)->refused) {
      ++reasons[normalize(r.reason)];
      if (list) std::printf("%s:%u sid %u: %s\n", r.source.c_str(), r.line, r.sid, r.reason.c_str());
    }
    if (!quiet && !list)
      std::printf("  %-40s %6zu rules %6zu accepted %6zu refused %5.1f%%\n", s.name.c_str(), n,
                  (*c)->rules.size(), (*c)->refused.size(), n ? 100.0 * double((*c)->rules.size()) / double(n) : 100.0);
  }
  SigCompileOptions o;
  auto c = compileSignatures(all, o);
  std::printf("%zu rules, %zu accepted (%.1f%%), %zu refused", total, accepted,
              total ? 100.0 * double(accepted) / double(total) : 100.0, total - accepted);
  if (c.ok())
    std::printf("; all files together: %zu accepted, %u fast patterns, compiled in %.1f ms\n",
                (*c)->rules.size(), (*c)->patterns, double((*c)->compile_ns) / 1e6);
  else
    std::printf("; all files together: %s\n", std::string(c.status().message()).c_str());
  if (quiet || list) return 0;
  std::vector<std::pair<size_t, std::string>> v;
  for (auto& [k, n] : reasons) v.push_back({n, k});
  std::sort(v.rbegin(), v.rend());
  std::printf("refusal reasons:\n");
  for (auto& [n, k] : v) std::printf("  %6zu  %s\n", n, k.c_str());
  return 0;
}
