// Rule loading shared by the DPI benchmarks (dpi_bench, http_bench): the rules our engine
// accepts, cut out of a YARA file's text, so libyara can run exactly the same rule set.
#pragma once

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "rules/compile/yara_translate.h"

namespace dpu::bench {

// The accepted rules' text: from each rule's first line to the line before the next rule of
// the file (accepted or not); import / include lines left out.
inline std::string acceptedText(const std::string& text, const rules::CompiledDpi& d) {
  std::set<int> starts;
  for (const rules::DpiRule& r : d.rules) starts.insert(r.line);
  for (const rules::DpiUnsupported& u : d.unsupported) starts.insert(u.line);
  std::vector<std::string> lines;
  std::stringstream ss(text);
  for (std::string l; std::getline(ss, l);) lines.push_back(l);
  std::string out;
  for (const rules::DpiRule& r : d.rules) {
    auto next = starts.upper_bound(r.line);
    int end = next == starts.end() ? int(lines.size()) + 1 : *next;
    for (int i = r.line; i < end && i <= int(lines.size()); ++i) {
      const std::string& l = lines[size_t(i - 1)];
      if (l.rfind("import", 0) == 0 || l.rfind("include", 0) == 0) continue;
      out += l + "\n";
    }
  }
  return out;
}

// `text` (a file named `name`) translated alone, without Hyperscan: its accepted rules' text
// ("" when it does not compile: libyara refused it); `total_rules` += its rules (accepted or
// not).
inline std::string acceptedRulesText(const std::string& name, const std::string& text, size_t* total_rules) {
  rules::DpiModel one;
  one.sources.push_back({name, text});
  rules::ConfigErrorList errs;
  rules::DpiCompileOptions o;
  o.compile_hyperscan = false;
  auto c = rules::compileDpi(one, errs, o);
  if (!c.ok()) return "";
  if (total_rules != nullptr) *total_rules += (*c)->rules.size() + (*c)->unsupported.size();
  return acceptedText(text, **c);
}

}  // namespace dpu::bench
