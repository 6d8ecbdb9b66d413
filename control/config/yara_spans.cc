#include "control/config/yara_spans.h"

namespace dpu::ctl {
namespace {

bool identChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

class Scanner {
 public:
  explicit Scanner(std::string_view t) : t_(t) {}

  std::vector<YaraRuleSpan> run() {
    std::vector<YaraRuleSpan> out;
    size_t pending = npos;  // start of `private` / `global` before `rule`
    while (skipBlanks()) {
      const char c = t_[i_];
      if (c == '"') {
        skipString();
        pending = npos;
        continue;
      }
      if (!identChar(c)) {
        ++i_;
        pending = npos;
        continue;
      }
      const size_t wb = i_;
      std::string_view w = word();
      if (w == "private" || w == "global") {
        if (pending == npos) pending = wb;
        continue;
      }
      if (w != "rule") {
        pending = npos;
        continue;
      }
      YaraRuleSpan s;
      s.begin = pending == npos ? wb : pending;
      s.line = lineAt(wb);
      pending = npos;
      if (!skipBlanks() || !identChar(t_[i_])) break;
      s.name = std::string(word());
      // Tags up to the body.
      while (skipBlanks() && t_[i_] != '{') ++i_;
      if (i_ >= t_.size()) break;
      if (!body()) break;
      s.end = i_;
      s.end_line = lineAt(i_ - 1);
      out.push_back(std::move(s));
    }
    return out;
  }

 private:
  static constexpr size_t npos = std::string_view::npos;

  // Skips white space and comments; false at the end.
  bool skipBlanks() {
    while (i_ < t_.size()) {
      const char c = t_[i_];
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        ++i_;
      } else if (c == '/' && i_ + 1 < t_.size() && t_[i_ + 1] == '/') {
        while (i_ < t_.size() && t_[i_] != '\n') ++i_;
      } else if (c == '/' && i_ + 1 < t_.size() && t_[i_ + 1] == '*') {
        size_t e = t_.find("*/", i_ + 2);
        i_ = e == npos ? t_.size() : e + 2;
      } else {
        return true;
      }
    }
    return false;
  }
  std::string_view word() {
    size_t b = i_;
    while (i_ < t_.size() && identChar(t_[i_])) ++i_;
    return t_.substr(b, i_ - b);
  }
  // From an opening quote (or slash) to just past the closing one; backslash escapes.
  void skipDelimited(char close) {
    ++i_;
    while (i_ < t_.size() && t_[i_] != close && t_[i_] != '\n') {
      if (t_[i_] == '\\') ++i_;
      ++i_;
    }
    if (i_ < t_.size()) ++i_;
  }
  void skipString() { skipDelimited('"'); }
  // From the body's '{' to just past its matching '}'; false when it never closes.
  bool body() {
    int depth = 0;
    bool regex_may_start = false;  // the previous token was '=' or `matches`
    while (skipBlanks()) {
      const char c = t_[i_];
      if (c == '"') {
        skipString();
        regex_may_start = false;
      } else if (c == '/' && regex_may_start) {
        skipDelimited('/');
        while (i_ < t_.size() && identChar(t_[i_])) ++i_;  // flags (i, s)
        regex_may_start = false;
      } else if (identChar(c)) {
        regex_may_start = word() == "matches";
      } else {
        ++i_;
        regex_may_start = c == '=';
        if (c == '{') {
          ++depth;
        } else if (c == '}') {
          if (--depth == 0) return true;
        }
      }
    }
    return false;
  }
  int lineAt(size_t pos) {
    while (line_pos_ < pos && line_pos_ < t_.size()) {
      if (t_[line_pos_] == '\n') ++line_;
      ++line_pos_;
    }
    return line_;
  }

  std::string_view t_;
  size_t i_ = 0;
  size_t line_pos_ = 0;
  int line_ = 1;
};

}  // namespace

std::vector<YaraRuleSpan> yaraRuleSpans(std::string_view text) { return Scanner(text).run(); }

std::string yaraRuleAtLine(const std::vector<YaraRuleSpan>& spans, int line) {
  std::string best;
  for (const YaraRuleSpan& s : spans) {
    if (s.line > line) break;
    best = s.name;
  }
  return best;
}

std::string yaraRemoveSpan(const std::string& text, const YaraRuleSpan& span) {
  size_t end = span.end;
  while (end < text.size() && (text[end] == ' ' || text[end] == '\t' || text[end] == '\r')) ++end;
  if (end < text.size() && text[end] == '\n') ++end;
  return text.substr(0, span.begin) + text.substr(end);
}

}  // namespace dpu::ctl
