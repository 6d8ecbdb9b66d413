// --- dpi rule sets (control) --- Where each rule of a YARA source is: the byte range of its
// declaration (modifiers, `rule`, name, tags, body up to its closing brace) and its lines.
// Used to remove one rule from a rule set (RemoveYaraRule) and to say which rule a libyara
// error line belongs to (AddYaraRule). Comments, text strings, regular expressions and hex
// strings are skipped, so braces or the word `rule` inside them do not count. The source is
// assumed to be valid YARA (libyara judges it before or after); on anything else the ranges
// found so far are returned.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace dpu::ctl {

struct YaraRuleSpan {
  std::string name;
  size_t begin = 0;   // first byte (the first modifier, or `rule`)
  size_t end = 0;     // one past the closing brace
  int line = 0;       // line of the `rule` keyword (1-based)
  int end_line = 0;   // line of the closing brace
};

std::vector<YaraRuleSpan> yaraRuleSpans(std::string_view text);

// The rule a line belongs to: the rule whose lines hold it, else the last rule declared
// before it; "" when none.
std::string yaraRuleAtLine(const std::vector<YaraRuleSpan>& spans, int line);

// `text` without the rule `span` (and the blanks up to the end of its last line).
std::string yaraRemoveSpan(const std::string& text, const YaraRuleSpan& span);

}  // namespace dpu::ctl
