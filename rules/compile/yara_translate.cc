#include "rules/compile/yara_translate.h"
#include "rules/compile/progress.h"  // --- ops ---

#include <hs/hs.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <cctype>
#include <climits>
#include <cstring>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "rules/compile/yara_validate.h"

namespace dpu::rules {
namespace {

// ---------------------------------------------------------------------------------------
// Lexer

enum class Tk { kEnd, kIdent, kStrId, kCountId, kOffId, kLenId, kNum, kFloat, kText, kHex,
                kRegex, kPunct };

struct Token {
  Tk kind = Tk::kEnd;
  std::string text;   // identifier / punctuation / decoded text / hex body / regex body
  std::string flags;  // regex flags
  int64_t num = 0;
  int line = 0;
};

struct Unsupported {
  std::string reason;
};

class Lexer {
 public:
  explicit Lexer(const std::string& s) : s_(s) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    while (true) {
      skipSpace();
      Token t;
      t.line = line_;
      if (pos_ >= s_.size()) { out.push_back(t); break; }
      char c = s_[pos_];
      bool prev_assign = !out.empty() && out.back().kind == Tk::kPunct && out.back().text == "=";
      if (c == '{' && prev_assign) {
        size_t e = s_.find('}', pos_);
        if (e == std::string::npos) e = s_.size();
        t.kind = Tk::kHex;
        t.text = s_.substr(pos_ + 1, e - pos_ - 1);
        countLines(pos_, e);
        pos_ = e + 1;
      } else if (std::isalpha(uint8_t(c)) || c == '_') {
        t.kind = Tk::kIdent;
        t.text = ident();
      } else if (c == '$' || c == '#' || c == '@' ||
                 (c == '!' && pos_ + 1 < s_.size() &&
                  (std::isalnum(uint8_t(s_[pos_ + 1])) || s_[pos_ + 1] == '_'))) {
        ++pos_;
        t.kind = c == '$' ? Tk::kStrId : c == '#' ? Tk::kCountId : c == '@' ? Tk::kOffId : Tk::kLenId;
        t.text = std::string(1, '$') + ident();
        if (c == '$' && pos_ < s_.size() && s_[pos_] == '*') { t.text += '*'; ++pos_; }
      } else if (std::isdigit(uint8_t(c))) {
        number(t);
      } else if (c == '"') {
        t.kind = Tk::kText;
        t.text = text();
      } else if (c == '/') {
        t.kind = Tk::kRegex;
        regex(t);
      } else {
        t.kind = Tk::kPunct;
        static const char* kTwo[] = {"==", "!=", "<=", ">=", "<<", ">>", ".."};
        t.text = std::string(1, c);
        for (const char* two : kTwo)
          if (s_.compare(pos_, 2, two) == 0) t.text = two;
        pos_ += t.text.size();
      }
      out.push_back(std::move(t));
    }
    return out;
  }

 private:
  void countLines(size_t from, size_t to) {
    for (size_t i = from; i < to && i < s_.size(); ++i) line_ += s_[i] == '\n';
  }
  void skipSpace() {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == '\n') { ++line_; ++pos_; }
      else if (std::isspace(uint8_t(c))) ++pos_;
      else if (s_.compare(pos_, 2, "//") == 0) {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else if (s_.compare(pos_, 2, "/*") == 0) {
        size_t e = s_.find("*/", pos_ + 2);
        if (e == std::string::npos) e = s_.size();
        countLines(pos_, e);
        pos_ = std::min(s_.size(), e + 2);
      } else break;
    }
  }
  std::string ident() {
    size_t b = pos_;
    while (pos_ < s_.size() && (std::isalnum(uint8_t(s_[pos_])) || s_[pos_] == '_')) ++pos_;
    return s_.substr(b, pos_ - b);
  }
  void number(Token& t) {
    size_t b = pos_;
    int base = 10;
    if (s_.compare(pos_, 2, "0x") == 0 || s_.compare(pos_, 2, "0X") == 0) { base = 16; pos_ += 2; }
    else if (s_.compare(pos_, 2, "0o") == 0) { base = 8; pos_ += 2; }
    size_t ds = pos_;
    while (pos_ < s_.size() && std::isxdigit(uint8_t(s_[pos_]))) {
      if (base == 10 && !std::isdigit(uint8_t(s_[pos_]))) break;
      ++pos_;
    }
    t.kind = Tk::kNum;
    if (base == 10 && pos_ + 1 < s_.size() && s_[pos_] == '.' &&
        std::isdigit(uint8_t(s_[pos_ + 1]))) {
      while (pos_ < s_.size() && (std::isdigit(uint8_t(s_[pos_])) || s_[pos_] == '.')) ++pos_;
      t.kind = Tk::kFloat;
      t.text = s_.substr(b, pos_ - b);
      return;
    }
    uint64_t v = 0;
    for (size_t i = ds; i < pos_; ++i) {
      char c = char(std::tolower(uint8_t(s_[i])));
      v = v * uint64_t(base) + uint64_t(std::isdigit(uint8_t(c)) ? c - '0' : c - 'a' + 10);
    }
    if (s_.compare(pos_, 2, "KB") == 0) { v <<= 10; pos_ += 2; }
    else if (s_.compare(pos_, 2, "MB") == 0) { v <<= 20; pos_ += 2; }
    t.num = int64_t(v);
    t.text = s_.substr(b, pos_ - b);
  }
  static int hexVal(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    c = char(std::tolower(uint8_t(c)));
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  }
  std::string text() {
    std::string out;
    ++pos_;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char c = s_[pos_++];
      if (c == '\n') ++line_;
      if (c != '\\' || pos_ >= s_.size()) { out += c; continue; }
      char e = s_[pos_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'x': {
          int hi = pos_ < s_.size() ? hexVal(s_[pos_]) : -1;
          int lo = pos_ + 1 < s_.size() ? hexVal(s_[pos_ + 1]) : -1;
          if (hi >= 0 && lo >= 0) { out += char(hi * 16 + lo); pos_ += 2; }
          break;
        }
        default: out += e; break;
      }
    }
    ++pos_;
    return out;
  }
  void regex(Token& t) {
    ++pos_;
    while (pos_ < s_.size() && s_[pos_] != '/') {
      if (s_[pos_] == '\\' && pos_ + 1 < s_.size()) t.text += s_[pos_++];
      if (s_[pos_] == '\n') ++line_;
      t.text += s_[pos_++];
    }
    ++pos_;
    while (pos_ < s_.size() && (s_[pos_] == 'i' || s_[pos_] == 's')) t.flags += s_[pos_++];
  }

  const std::string& s_;
  size_t pos_ = 0;
  int line_ = 1;
};

// ---------------------------------------------------------------------------------------
// Rule structure

struct RString {
  std::string ident;  // "$a", "$" (anonymous)
  Tk kind = Tk::kText;
  std::string body;
  std::string flags;
  bool ascii = false, wide = false, nocase = false, fullword = false, priv = false;
  bool xor_ = false, base64 = false;  // base64: base64 or base64wide
  bool b64 = false, b64wide = false;
  std::string b64_alphabet;           // "" = the standard one
  int xor_lo = 0, xor_hi = 255;
  bool hidden = false;
  std::string hidden_bytes;
  int64_t hidden_at = -1;
  int line = 0;
};

struct RRule {
  std::string name;
  int line = 0;
  bool is_private = false, is_global = false;
  std::vector<std::string> tags;
  std::vector<std::pair<std::string, std::string>> meta;
  std::vector<RString> strings;
  std::vector<Token> cond;
  std::string parse_error;  // structural problem found by this parser
};

struct RSource {
  std::vector<std::string> imports;
  std::vector<RRule> rules;
};

bool isKw(const Token& t, const char* kw) { return t.kind == Tk::kIdent && t.text == kw; }
bool isP(const Token& t, const char* p) { return t.kind == Tk::kPunct && t.text == p; }

RSource parseSource(const std::string& text) {
  RSource src;
  std::vector<Token> toks = Lexer(text).run();
  size_t i = 0;
  auto at = [&](size_t k) -> const Token& { return toks[std::min(k, toks.size() - 1)]; };
  while (at(i).kind != Tk::kEnd) {
    if (isKw(at(i), "import")) {
      if (at(i + 1).kind == Tk::kText) src.imports.push_back(at(i + 1).text);
      i += 2;
      continue;
    }
    if (isKw(at(i), "include")) { i += 2; continue; }
    RRule r;
    r.line = at(i).line;
    while (isKw(at(i), "private") || isKw(at(i), "global")) {
      (at(i).text == "private" ? r.is_private : r.is_global) = true;
      ++i;
    }
    if (!isKw(at(i), "rule")) { ++i; continue; }
    r.line = at(i).line;
    r.name = at(i + 1).text;
    i += 2;
    if (isP(at(i), ":")) {
      ++i;
      while (at(i).kind == Tk::kIdent) r.tags.push_back(at(i++).text);
    }
    if (!isP(at(i), "{")) { r.parse_error = "expected {"; src.rules.push_back(r); continue; }
    ++i;
    std::string section;
    while (at(i).kind != Tk::kEnd && !isP(at(i), "}")) {
      if ((isKw(at(i), "meta") || isKw(at(i), "strings") || isKw(at(i), "condition")) &&
          isP(at(i + 1), ":") && section != "condition") {
        section = at(i).text;
        i += 2;
        continue;
      }
      if (section == "meta") {
        std::string key = at(i).text;
        if (!isP(at(i + 1), "=")) { ++i; continue; }
        i += 2;
        std::string val;
        if (isP(at(i), "-")) { val = "-"; ++i; }
        val += at(i).text;
        r.meta.emplace_back(key, val);
        ++i;
      } else if (section == "strings") {
        RString s;
        s.ident = at(i).text;
        s.line = at(i).line;
        if (at(i).kind != Tk::kStrId || !isP(at(i + 1), "=")) { ++i; continue; }
        i += 2;
        s.kind = at(i).kind;
        s.body = at(i).text;
        s.flags = at(i).flags;
        ++i;
        while (at(i).kind == Tk::kIdent) {
          const std::string m = at(i).text;
          if (m == "ascii") s.ascii = true;
          else if (m == "wide") s.wide = true;
          else if (m == "nocase") s.nocase = true;
          else if (m == "fullword") s.fullword = true;
          else if (m == "private") s.priv = true;
          else if (m == "xor") s.xor_ = true;
          else if (m == "base64" || m == "base64wide") {
            s.base64 = true;
            (m == "base64" ? s.b64 : s.b64wide) = true;
          } else break;
          ++i;
          if (isP(at(i), "(")) {  // xor(lo-hi) / xor(k) / base64("alphabet")
            if (m == "xor" && at(i + 1).kind == Tk::kNum) {
              s.xor_lo = s.xor_hi = int(at(i + 1).num);
              if (isP(at(i + 2), "-") && at(i + 3).kind == Tk::kNum) s.xor_hi = int(at(i + 3).num);
            }
            if (m != "xor" && at(i + 1).kind == Tk::kText) s.b64_alphabet = at(i + 1).text;
            while (at(i).kind != Tk::kEnd && !isP(at(i), ")")) ++i;
            ++i;
          }
        }
        r.strings.push_back(std::move(s));
      } else if (section == "condition") {
        r.cond.push_back(at(i++));
      } else {
        ++i;
      }
    }
    // The condition ends at the rule's closing brace (a condition has no braces of its own).
    ++i;
    src.rules.push_back(std::move(r));
  }
  return src;
}

// ---------------------------------------------------------------------------------------
// Pattern generation

struct GenPattern {
  std::string expr;
  unsigned flags = 0;
  uint32_t length = 0;  // 0 = variable
  uint32_t trail = 0;
  bool anchored = false;
  // Regexes and hex strings: the expression a prefilter candidate is confirmed with (the
  // narrow form for a wide regex, see DpiConfirm); empty = not prefilterable (literals).
  std::string confirm_expr{};
  bool confirm_wide = false;
  // Set when the pattern is compiled with HS_FLAG_PREFILTER (see preparePrefilter).
  std::shared_ptr<pcre2_code> confirm_code{};
  uint32_t max_width = 0;
};

std::string esc(uint8_t b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02x", b);
  return buf;
}
std::string escBytes(const std::string& s) {
  std::string o;
  for (char c : s) o += esc(uint8_t(c));
  return o;
}

constexpr const char* kNotAlnum = "[^A-Za-z0-9]";

std::string widen(const std::string& s) {
  std::string w;
  for (char c : s) { w += c; w += '\0'; }
  return w;
}

constexpr const char* kBase64Std = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// Standard base64 (with '=' padding) of `in` in alphabet `a` (64 characters).
std::string base64Encode(const std::string& in, const std::string& a) {
  std::string o;
  size_t k = 0;
  auto b = [&](size_t j) { return uint8_t(in[j]); };
  for (; k + 3 <= in.size(); k += 3) {
    o += a[b(k) >> 2];
    o += a[((b(k) & 3) << 4) | (b(k + 1) >> 4)];
    o += a[((b(k + 1) & 0x0f) << 2) | (b(k + 2) >> 6)];
    o += a[b(k + 2) & 0x3f];
  }
  if (k < in.size()) {
    o += a[b(k) >> 2];
    if (k + 1 == in.size()) {
      o += a[(b(k) & 3) << 4];
      o += '=';
    } else {
      o += a[((b(k) & 3) << 4) | (b(k + 1) >> 4)];
      o += a[(b(k + 1) & 0x0f) << 2];
    }
    o += '=';
  }
  return o;
}

// The byte sequences libyara looks for for a `base64` / `base64wide` string (libyara/
// base64.c): `str` after 0, 1 and 2 prepended bytes, base64-encoded, without the leading
// and trailing characters that depend on the bytes around it (the shift of 1 is skipped for
// a one-byte string); base64wide: that text interleaved with zero bytes. Duplicates once.
void base64Forms(const std::string& str, const std::string& alphabet, bool wide_out,
                 std::vector<std::string>& out) {
  for (size_t i = 0; i <= 2; ++i) {
    if (i == 1 && str.size() == 1) continue;
    const size_t total = i + str.size();
    const size_t pad = total % 3 ? 3 - total % 3 : 0;
    const std::string enc = base64Encode(std::string(i, 'A') + str, alphabet);
    const size_t trailing = pad ? pad + 1 : 0, leading = i ? i + 1 : 0;
    if (enc.size() <= leading + trailing) continue;
    std::string sub = enc.substr(leading, enc.size() - leading - trailing);
    if (wide_out) sub = widen(sub);
    if (std::find(out.begin(), out.end(), sub) == out.end()) out.push_back(std::move(sub));
  }
}

// All forms of a base64 string, in libyara's order (wide input first, then ascii).
std::vector<std::string> base64Strings(const RString& s) {
  const std::string alphabet = s.b64_alphabet.empty() ? kBase64Std : s.b64_alphabet;
  if (alphabet.size() != 64) throw Unsupported{"base64 alphabet of " + s.ident + " (not 64 characters)"};
  std::vector<std::string> forms;
  std::vector<std::string> inputs;
  if (s.wide) inputs.push_back(widen(s.body));
  if (s.ascii || !s.wide) inputs.push_back(s.body);
  for (const std::string& in : inputs) {
    if (s.b64) base64Forms(in, alphabet, false, forms);
    if (s.b64wide) base64Forms(in, alphabet, true, forms);
  }
  return forms;
}

void textPatterns(const RString& s, std::vector<GenPattern>& out) {
  if (s.base64) {
    if (s.xor_ || s.nocase || s.fullword)
      throw Unsupported{"base64 with xor/nocase/fullword on " + s.ident};
    // Literals (one per form): a fixed length only when all forms have the same length.
    for (const std::string& f : base64Strings(s))
      out.push_back({escBytes(f), HS_FLAG_DOTALL, uint32_t(f.size()), 0, false});
    return;
  }
  std::vector<std::pair<std::string, bool>> encs;  // bytes, wide
  if (s.ascii || !s.wide) encs.emplace_back(s.body, false);
  if (s.wide) encs.emplace_back(widen(s.body), true);
  int lo = s.xor_ ? s.xor_lo : 0, hi = s.xor_ ? s.xor_hi : 0;
  if (lo < 0 || hi > 255 || lo > hi) throw Unsupported{"xor range of " + s.ident};
  unsigned flags = HS_FLAG_DOTALL | (s.nocase ? HS_FLAG_CASELESS : 0u);
  for (auto& [bytes, wide] : encs) {
    for (int k = lo; k <= hi; ++k) {
      std::string x = bytes;
      for (char& c : x) c = char(uint8_t(c) ^ uint8_t(k));
      const std::string core = escBytes(x);
      const uint32_t len = uint32_t(x.size());
      if (!s.fullword) {
        out.push_back({core, flags, len, 0, false});
        continue;
      }
      if (!wide) {
        const std::string lead = std::string("(?:^|") + kNotAlnum + ")";
        out.push_back({lead + core + "\\z", flags, len, 0, false});
        out.push_back({lead + core + kNotAlnum, flags, len, 1, false});
      } else {
        // libyara (wide): not a word if the wide char before is alnum,0 or the one after is
        // alnum,0 (the latter checked only when two bytes follow).
        const std::string lead =
            std::string("(?:^|^.|.[^\\x00]|") + kNotAlnum + "\\x00)";
        out.push_back({lead + core + "\\z", flags, len, 0, false});
        out.push_back({lead + core + ".\\z", flags, len, 1, false});
        out.push_back({lead + core + "(?:" + kNotAlnum + ".|.[^\\x00])", flags, len, 2, false});
      }
    }
  }
}

int hexNib(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = char(std::tolower(uint8_t(c)));
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Translates a hex string body; returns (min, max) length (max = -1 unbounded).
struct HexOut {
  std::string re;
  int64_t min = 0, max = 0;
};

HexOut hexSeq(const std::string& b, size_t& i, int depth);

HexOut hexAlt(const std::string& b, size_t& i, int depth) {
  // after '(': alternatives until ')'
  HexOut o;
  o.re = "(?:";
  bool first = true;
  while (true) {
    HexOut a = hexSeq(b, i, depth + 1);
    if (first) { o.min = a.min; o.max = a.max; }
    else {
      o.min = std::min(o.min, a.min);
      o.max = (o.max < 0 || a.max < 0) ? -1 : std::max(o.max, a.max);
      o.re += "|";
    }
    o.re += a.re;
    first = false;
    if (i < b.size() && b[i] == '|') { ++i; continue; }
    if (i < b.size() && b[i] == ')') ++i;
    break;
  }
  o.re += ")";
  return o;
}

HexOut hexSeq(const std::string& b, size_t& i, int depth) {
  HexOut o;
  if (depth > 16) throw Unsupported{"hex string nesting"};
  while (i < b.size()) {
    char c = b[i];
    if (std::isspace(uint8_t(c))) { ++i; continue; }
    if (c == '|' || c == ')') break;
    if (c == '(') {
      ++i;
      HexOut a = hexAlt(b, i, depth);
      o.re += a.re;
      o.min += a.min;
      o.max = (o.max < 0 || a.max < 0) ? -1 : o.max + a.max;
      continue;
    }
    if (c == '[') {
      size_t e = b.find(']', i);
      if (e == std::string::npos) throw Unsupported{"hex jump"};
      std::string j = b.substr(i + 1, e - i - 1);
      j.erase(std::remove_if(j.begin(), j.end(), [](char x) { return std::isspace(uint8_t(x)); }),
              j.end());
      i = e + 1;
      size_t dash = j.find('-');
      int64_t lo = 0, hi = -1;
      if (dash == std::string::npos) {
        lo = hi = std::stoll(j.empty() ? "0" : j);
      } else {
        lo = dash == 0 ? 0 : std::stoll(j.substr(0, dash));
        hi = dash + 1 >= j.size() ? -1 : std::stoll(j.substr(dash + 1));
      }
      if (hi >= 0) o.re += "." + (lo == hi ? absl::StrCat("{", lo, "}") : absl::StrCat("{", lo, ",", hi, "}"));
      else o.re += absl::StrCat(".{", lo, ",}");
      o.min += lo;
      o.max = (o.max < 0 || hi < 0) ? -1 : o.max + hi;
      continue;
    }
    bool neg = false;
    if (c == '~') { neg = true; ++i; }
    if (i + 1 >= b.size()) throw Unsupported{"hex string byte"};
    char h = b[i], l = b[i + 1];
    i += 2;
    int hv = hexNib(h), lv = hexNib(l);
    std::string cls;
    if (h == '?' && l == '?') {
      if (neg) throw Unsupported{"hex ~??"};
      cls = ".";
    } else if (h == '?' && lv >= 0) {
      cls = "[";
      for (int k = 0; k < 16; ++k) cls += esc(uint8_t(k * 16 + lv));
      cls += "]";
    } else if (hv >= 0 && l == '?') {
      cls = "[" + esc(uint8_t(hv * 16)) + "-" + esc(uint8_t(hv * 16 + 15)) + "]";
    } else if (hv >= 0 && lv >= 0) {
      cls = esc(uint8_t(hv * 16 + lv));
    } else {
      throw Unsupported{"hex string token"};
    }
    if (neg) cls = cls.front() == '[' ? "[^" + cls.substr(1) : "[^" + cls + "]";
    o.re += cls;
    o.min += 1;
    if (o.max >= 0) o.max += 1;
  }
  return o;
}

void hexPatterns(const RString& s, std::vector<GenPattern>& out) {
  size_t i = 0;
  HexOut h = hexSeq(s.body, i, 0);
  uint32_t len = (h.max >= 0 && h.max == h.min) ? uint32_t(h.min) : 0;
  out.push_back({h.re, HS_FLAG_DOTALL, len, 0, false, h.re, false, nullptr, 0});
}

// A regex (Hyperscan syntax, as regexPatterns makes it) in YARA's `wide` form: every
// character-consuming item (literal, escape, class, `.`) followed by a zero byte, quantifiers
// applied to the pair, groups and alternatives kept: /ab+[cd]/ -> a\x00(?:b\x00)+[cd]\x00.
// Word boundaries (YARA looks two bytes around in wide mode) are not translated.
std::string wideRegex(const std::string& r, size_t& i, int depth) {
  if (depth > 32) throw Unsupported{"regular expression nesting"};
  std::string out;
  while (i < r.size() && r[i] != ')') {
    const char c = r[i];
    if (c == '|' || c == '^') { out += c; ++i; continue; }
    std::string atom;
    bool group = false;
    if (c == '\\') {
      if (i + 1 >= r.size()) throw Unsupported{"regular expression escape"};
      const char e = r[i + 1];
      if (e == 'b' || e == 'B') throw Unsupported{"word boundary in a wide regular expression"};
      if (e == 'z' || e == 'Z' || e == 'A') { out += r.substr(i, 2); i += 2; continue; }
      const size_t n = e == 'x' ? 4 : 2;
      atom = r.substr(i, n);
      i += n;
    } else if (c == '[') {
      size_t e = i + 1;
      if (e < r.size() && r[e] == '^') ++e;
      if (e < r.size() && r[e] == ']') ++e;
      while (e < r.size() && r[e] != ']') e += r[e] == '\\' ? 2 : 1;
      if (e >= r.size()) throw Unsupported{"regular expression class"};
      atom = r.substr(i, e + 1 - i);
      i = e + 1;
    } else if (c == '(') {
      ++i;
      if (r.compare(i, 2, "?:") == 0) i += 2;
      atom = "(?:" + wideRegex(r, i, depth + 1);
      if (i >= r.size() || r[i] != ')') throw Unsupported{"regular expression group"};
      ++i;
      atom += ")";
      group = true;
    } else {
      atom = std::string(1, c);
      ++i;
    }
    std::string q;
    if (i < r.size() && (r[i] == '*' || r[i] == '+' || r[i] == '?')) {
      q = r[i++];
    } else if (i < r.size() && r[i] == '{') {
      size_t e = i + 1;
      while (e < r.size() && (std::isdigit(uint8_t(r[e])) || r[e] == ',')) ++e;
      if (e < r.size() && r[e] == '}' && e > i + 1) {
        q = r.substr(i, e + 1 - i);
        i = e + 1;
      }
    }
    if (!q.empty() && i < r.size() && r[i] == '?') q += r[i++];  // lazy
    if (group) out += atom + q;
    else if (q.empty()) out += atom + "\\x00";
    else out += "(?:" + atom + "\\x00)" + q;
  }
  return out;
}

void regexPatterns(const RString& s, std::vector<GenPattern>& out) {
  if (s.fullword) throw Unsupported{"fullword regular expression " + s.ident};
  if (s.xor_ || s.base64) throw Unsupported{"modifier on regular expression " + s.ident};
  std::string re;
  bool in_class = false;
  const std::string& b = s.body;
  for (size_t i = 0; i < b.size(); ++i) {
    char c = b[i];
    if (c == '\\' && i + 1 < b.size()) {
      re += c;
      re += b[++i];
      continue;
    }
    if (in_class) {
      if (c == ']') in_class = false;
      re += c;
      continue;
    }
    if (c == '[') {
      in_class = true;
      re += c;
      if (i + 1 < b.size() && b[i + 1] == '^') re += b[++i];
      if (i + 1 < b.size() && b[i + 1] == ']') re += b[++i];
      continue;
    }
    if (c == '$') { re += "\\z"; continue; }  // YARA: end of data only
    if (c == '{' && i + 1 < b.size() && b[i + 1] == ',') { re += "{0"; continue; }
    re += c;
  }
  unsigned flags = 0;
  if (s.flags.find('i') != std::string::npos || s.nocase) flags |= HS_FLAG_CASELESS;
  if (s.flags.find('s') != std::string::npos) flags |= HS_FLAG_DOTALL;
  if (s.ascii || !s.wide) out.push_back({re, flags, 0, 0, false, re, false, nullptr, 0});
  if (s.wide) {
    size_t i = 0;
    std::string w = wideRegex(re, i, 0);
    if (i != re.size()) throw Unsupported{"regular expression syntax of " + s.ident};
    out.push_back({w, flags, 0, 0, false, re, true, nullptr, 0});
  }
}

// ---------------------------------------------------------------------------------------
// Prefilter (HS_FLAG_PREFILTER) + PCRE2 confirmation for expressions Hyperscan cannot
// compile exactly.

// The PCRE2 source of a confirmation: the Hyperscan expression with `\z` (YARA's `$`, the
// end of the data) written as `$` (compiled with PCRE2_DOLLAR_ENDONLY, and matched with
// PCRE2_NOTEOL except at the end of the data).
std::string pcreSource(const std::string& e) {
  std::string o;
  bool in_class = false;
  for (size_t i = 0; i < e.size(); ++i) {
    const char c = e[i];
    if (c == '\\' && i + 1 < e.size()) {
      if (!in_class && e[i + 1] == 'z') o += '$';
      else o += e.substr(i, 2);
      ++i;
      continue;
    }
    if (in_class) {
      if (c == ']') in_class = false;
      o += c;
      continue;
    }
    if (c == '[') {
      in_class = true;
      o += c;
      if (i + 1 < e.size() && e[i + 1] == '^') o += e[++i];
      if (i + 1 < e.size() && e[i + 1] == ']') o += e[++i];
      continue;
    }
    o += c;
  }
  return o;
}

bool hasWordBoundary(const std::string& e) {
  for (size_t i = 0; i + 1 < e.size(); ++i) {
    if (e[i] != '\\') continue;
    if (e[i + 1] == 'b' || e[i + 1] == 'B') return true;
    ++i;
  }
  return false;
}

std::shared_ptr<pcre2_code> pcreCompile(const std::string& src, unsigned hs_flags, std::string* err) {
  pcre2_compile_context* cc = pcre2_compile_context_create(nullptr);
  if (cc == nullptr) {
    *err = "PCRE2: out of memory";
    return nullptr;
  }
  pcre2_set_newline(cc, PCRE2_NEWLINE_LF);  // YARA's `.` is any byte but \n
  uint32_t opts = PCRE2_ENDANCHORED | PCRE2_DOLLAR_ENDONLY | PCRE2_NEVER_UTF | PCRE2_NEVER_UCP |
                  PCRE2_NEVER_BACKSLASH_C;
  if (hs_flags & HS_FLAG_CASELESS) opts |= PCRE2_CASELESS;
  if (hs_flags & HS_FLAG_DOTALL) opts |= PCRE2_DOTALL;
  int ec = 0;
  PCRE2_SIZE eo = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(src.data()), src.size(), opts, &ec,
                                   &eo, cc);
  pcre2_compile_context_free(cc);
  if (code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(ec, msg, sizeof msg);
    *err = absl::StrCat("PCRE2 cannot compile it: ", reinterpret_cast<const char*>(msg), " at offset ", eo);
    return nullptr;
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // without JIT the interpreter confirms
  return std::shared_ptr<pcre2_code>(code, pcre2_code_free);
}

// Makes `p` a prefiltered pattern when it can be confirmed exactly: a regex or hex string,
// presence only (no count, offset, length or position of string `s` in the condition), no
// word boundary (its confirmation would need bytes after the candidate's end), a bounded
// longest match of at most `window_bound` bytes (the history kept per flow direction), a
// prefilter Hyperscan can compile and a PCRE2 confirmation. Else false and why not.
bool preparePrefilter(GenPattern& p, bool positional, uint32_t window_bound, std::string* why) {
  if (p.confirm_expr.empty()) {
    *why = "a literal is not prefiltered";
    return false;
  }
  if (positional) {
    *why = "its count, offset or position is used (prefiltered strings give presence only)";
    return false;
  }
  if (hasWordBoundary(p.confirm_expr)) {
    *why = "word boundary (\\b, \\B)";
    return false;
  }
  hs_expr_info_t* info = nullptr;
  hs_compile_error_t* err = nullptr;
  if (hs_expression_info(p.expr.c_str(), p.flags | HS_FLAG_PREFILTER, &info, &err) != HS_SUCCESS) {
    *why = "Hyperscan refuses it as a prefilter too";
    hs_free_compile_error(err);
    return false;
  }
  std::free(info);
  if (hs_expression_info(p.expr.c_str(), p.flags, &info, &err) != HS_SUCCESS) {
    *why = absl::StrCat("its match width is unknown (", err != nullptr ? err->message : "error", ")");
    hs_free_compile_error(err);
    return false;
  }
  const unsigned max_width = info->max_width;
  std::free(info);
  if (max_width == UINT_MAX) {
    *why = "its match width is unbounded";
    return false;
  }
  if (max_width > window_bound) {
    *why = absl::StrCat("its longest match (", max_width, " B) exceeds dpi.prefilter_window_bytes (",
                        window_bound, " B)");
    return false;
  }
  std::shared_ptr<pcre2_code> code = pcreCompile(pcreSource(p.confirm_expr), p.flags, why);
  if (!code) return false;
  p.confirm_code = std::move(code);
  p.max_width = max_width;
  p.length = 0;  // presence only
  return true;
}

std::string patternKey(const GenPattern& p) { return absl::StrCat(p.flags, "/", p.expr); }

// Samples: one byte sequence each string matches (test payloads, `dpuctl dpi list`).
std::string hexSampleSeq(const std::string& b, size_t& i, int depth) {
  std::string o;
  while (i < b.size() && depth < 16) {
    char c = b[i];
    if (std::isspace(uint8_t(c))) { ++i; continue; }
    if (c == '|' || c == ')') break;
    if (c == '(') {
      ++i;
      std::string first = hexSampleSeq(b, i, depth + 1);
      while (i < b.size() && b[i] == '|') { ++i; hexSampleSeq(b, i, depth + 1); }
      if (i < b.size() && b[i] == ')') ++i;
      o += first;
      continue;
    }
    if (c == '[') {
      size_t e = b.find(']', i);
      if (e == std::string::npos) break;
      std::string j = b.substr(i + 1, e - i - 1);
      i = e + 1;
      int64_t lo = 0;
      size_t k = 0;
      while (k < j.size() && std::isspace(uint8_t(j[k]))) ++k;
      while (k < j.size() && std::isdigit(uint8_t(j[k]))) lo = lo * 10 + (j[k++] - '0');
      o.append(size_t(std::min<int64_t>(lo, 4096)), '\x20');
      continue;
    }
    bool neg = c == '~';
    if (neg) ++i;
    if (i + 1 >= b.size()) break;
    int hv = hexNib(b[i]), lv = hexNib(b[i + 1]);
    i += 2;
    uint8_t v = uint8_t((hv < 0 ? 2 : hv) * 16 + (lv < 0 ? 0 : lv));
    if (neg) v ^= 0x01;
    o += char(v);
  }
  return o;
}

std::string regexSample(const std::string& re) {
  // Literal characters and escapes only; gives up (empty) on anything else.
  std::string o;
  for (size_t i = 0; i < re.size(); ++i) {
    char c = re[i];
    if (c == '\\' && i + 1 < re.size()) {
      char e = re[++i];
      if (e == 'x' && i + 2 < re.size()) {
        int hv = hexNib(re[i + 1]), lv = hexNib(re[i + 2]);
        if (hv < 0 || lv < 0) return "";
        o += char(hv * 16 + lv);
        i += 2;
      } else if (std::isalnum(uint8_t(e))) {
        if (e == 'n') o += '\n';
        else if (e == 't') o += '\t';
        else if (e == 'd') o += '7';
        else if (e == 'w') o += 'k';
        else if (e == 's') o += ' ';
        else return "";
      } else {
        o += e;
      }
      continue;
    }
    if (std::strchr("[](){}|*+?.^$", c) != nullptr) {
      if (c == '.' ) { o += 'q'; continue; }
      if ((c == '+' ) && !o.empty()) continue;
      if (c == '^' && i == 0) continue;
      return "";
    }
    o += c;
  }
  return o;
}

std::string stringSample(const RString& s) {
  if (s.hidden) return s.hidden_bytes;
  if (s.kind == Tk::kHex) {
    size_t i = 0;
    return hexSampleSeq(s.body, i, 0);
  }
  if (s.kind == Tk::kRegex) return s.wide && !s.ascii ? widen(regexSample(s.body)) : regexSample(s.body);
  if (s.base64) {  // the whole encoding of the string itself (contains the unshifted form)
    const std::string alphabet = s.b64_alphabet.size() == 64 ? s.b64_alphabet : kBase64Std;
    std::string e = base64Encode(s.wide && !s.ascii ? widen(s.body) : s.body, alphabet);
    return s.b64 ? e : widen(e);
  }
  std::string b = s.body;
  if (s.wide && !s.ascii) b = widen(s.body);
  if (s.xor_) for (char& c : b) c = char(uint8_t(c) ^ uint8_t(s.xor_lo));
  return b;
}

// Base64 strings: the whole encodings of the string after 1 and 2 leading bytes (they
// contain the shifted forms), for test payloads.
std::vector<std::string> base64ShiftedSamples(const RString& s) {
  const std::string alphabet = s.b64_alphabet.size() == 64 ? s.b64_alphabet : kBase64Std;
  const std::string in = s.wide && !s.ascii ? widen(s.body) : s.body;
  std::vector<std::string> out;
  for (const char* lead : {"x", "yz"}) {
    std::string e = base64Encode(lead + in, alphabet);
    out.push_back(s.b64 ? e : widen(e));
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Condition parsing

struct LocalNode {
  CondNode n;
  bool is_uint = false;  // uintXX(offset) read, unresolved: value=offset, a=size, b=be
};

struct RuleCtx {
  const RRule& rule;
  std::vector<RString>& strings;             // rule strings + hidden ones appended
  const std::map<std::string, int>& rule_index;       // supported rules of this namespace
  const std::map<std::string, std::string>& bad_rules;  // unsupported ones -> reason
  const std::set<std::string>& imports;
  std::vector<LocalNode> nodes;
  std::map<int, uint32_t> count_needed;      // string -> 1
  std::map<int, uint32_t> slots_needed;      // string -> K
  std::vector<std::pair<int, DpiPosPred>> preds;
  size_t pos = 0;

  const Token& tok(size_t k = 0) const {
    static const Token kEnd;
    return pos + k < rule.cond.size() ? rule.cond[pos + k] : kEnd;
  }
  int add(CondNode n) {
    nodes.push_back({std::move(n), false});
    return int(nodes.size() - 1);
  }
  int add(CondOp op, int a = -1, int b = -1, int64_t v = 0) {
    CondNode n;
    n.op = op;
    n.a = a;
    n.b = b;
    n.value = v;
    return add(std::move(n));
  }
  void expectP(const char* p) {
    if (!isP(tok(), p)) throw Unsupported{absl::StrCat("condition syntax near '", tok().text, "'")};
    ++pos;
  }
  int stringIndex(const std::string& ident) const {
    for (size_t i = 0; i < strings.size(); ++i)
      if (!strings[i].hidden && strings[i].ident == ident) return int(i);
    throw Unsupported{"string " + ident + " outside a for loop"};
  }
  std::vector<uint32_t> stringSet() {
    std::vector<uint32_t> out;
    auto addMatching = [&](const std::string& pat) {
      bool wild = !pat.empty() && pat.back() == '*';
      std::string pre = wild ? pat.substr(0, pat.size() - 1) : pat;
      for (size_t i = 0; i < strings.size(); ++i) {
        if (strings[i].hidden) continue;
        if (wild ? strings[i].ident.compare(0, pre.size(), pre) == 0 : strings[i].ident == pre)
          out.push_back(uint32_t(i));
      }
    };
    if (isKw(tok(), "them")) {
      ++pos;
      addMatching("$*");
      return out;
    }
    expectP("(");
    while (true) {
      if (tok().kind != Tk::kStrId) throw Unsupported{"rule sets in `of` (only strings)"};
      addMatching(tok().text);
      ++pos;
      if (isP(tok(), ",")) { ++pos; continue; }
      break;
    }
    expectP(")");
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
  // Constant value of a node built from constants only.
  bool constVal(int idx, int64_t& v) const {
    const CondNode& n = nodes[size_t(idx)].n;
    if (nodes[size_t(idx)].is_uint) return false;
    int64_t a = 0, b = 0;
    switch (n.op) {
      case CondOp::kConst: v = n.value; return true;
      case CondOp::kNeg: if (!constVal(n.a, a)) return false; v = int64_t(0ull - uint64_t(a)); return true;
      case CondOp::kAdd: case CondOp::kSub: case CondOp::kMul:
        if (!constVal(n.a, a) || !constVal(n.b, b)) return false;
        v = n.op == CondOp::kAdd ? int64_t(uint64_t(a) + uint64_t(b))
            : n.op == CondOp::kSub ? int64_t(uint64_t(a) - uint64_t(b))
                                   : int64_t(uint64_t(a) * uint64_t(b));
        return true;
      default: return false;
    }
  }
  int64_t needConst(int idx, const std::string& what) const {
    int64_t v = 0;
    if (!constVal(idx, v)) throw Unsupported{what + " that is not a constant"};
    return v;
  }

  int primary() {
    const Token t = tok();
    if (t.kind == Tk::kEnd) throw Unsupported{"condition syntax"};
    if (isKw(t, "not")) { ++pos; return add(CondOp::kNot, expr(3)); }
    if (isP(t, "(")) {
      ++pos;
      int e = expr(0);
      expectP(")");
      return e;
    }
    if (isP(t, "-")) { ++pos; return add(CondOp::kNeg, expr(12)); }
    if (isP(t, "~")) { ++pos; return add(CondOp::kBitNot, expr(12)); }
    if (isKw(t, "true") || isKw(t, "false")) { ++pos; return add(CondOp::kConst, -1, -1, t.text == "true"); }
    if (t.kind == Tk::kNum) { ++pos; return add(CondOp::kConst, -1, -1, t.num); }
    if (t.kind == Tk::kFloat) throw Unsupported{"floating-point value " + t.text};
    if (t.kind == Tk::kText) throw Unsupported{"text string value in condition"};
    if (t.kind == Tk::kRegex) throw Unsupported{"regular expression in condition"};
    if (isKw(t, "filesize")) { ++pos; return add(CondOp::kFilesize); }
    if (isKw(t, "entrypoint")) throw Unsupported{"entrypoint"};
    if (isKw(t, "for")) throw Unsupported{"for loop"};
    if (isKw(t, "defined")) throw Unsupported{"defined"};
    if (isKw(t, "any") || isKw(t, "all") || isKw(t, "none")) {
      if (t.text == "none") throw Unsupported{"none of"};
      ++pos;
      if (!isKw(tok(), "of")) throw Unsupported{"condition syntax near " + t.text};
      ++pos;
      int n = t.text == "any" ? add(CondOp::kConst, -1, -1, 1) : -1;
      return ofNode(n);
    }
    if (t.kind == Tk::kStrId) {
      ++pos;
      if (t.text == "$") throw Unsupported{"anonymous string reference outside a for loop"};
      int s = stringIndex(t.text);
      if (isKw(tok(), "at")) {
        ++pos;
        int64_t at = needConst(expr(6), "`at` offset");
        return predNode(s, DpiPosPred{true, at, at, 0});
      }
      if (isKw(tok(), "in")) {
        ++pos;
        expectP("(");
        int lo = expr(6);
        expectP("..");
        int hi = expr(6);
        expectP(")");
        return predNode(s, DpiPosPred{false, needConst(lo, "`in` range bound"),
                                      needConst(hi, "`in` range bound"), 0});
      }
      return add(CondOp::kFound, s);
    }
    if (t.kind == Tk::kCountId) {
      ++pos;
      int s = stringIndex(t.text);
      if (isKw(tok(), "in")) throw Unsupported{"#a in (range)"};
      count_needed[s] = 1;
      return add(CondOp::kCount, s);
    }
    if (t.kind == Tk::kOffId || t.kind == Tk::kLenId) {
      ++pos;
      int s = stringIndex(t.text);
      int64_t i = 1;
      if (isP(tok(), "[")) {
        ++pos;
        i = needConst(expr(0), "match index");
        expectP("]");
      }
      if (i < 1 || i > 64) throw Unsupported{absl::StrCat("match index ", i, " (1..64 supported)")};
      count_needed[s] = 1;
      uint32_t& k = slots_needed[s];
      k = std::max<uint32_t>(k, uint32_t(i));
      return add(t.kind == Tk::kOffId ? CondOp::kOffset : CondOp::kLength, s, -1, i);
    }
    if (t.kind == Tk::kIdent) {
      static const std::map<std::string, std::pair<int, int>> kInts = {
          {"uint8", {1, 0}},    {"uint16", {2, 0}},   {"uint32", {4, 0}},
          {"uint8be", {1, 1}},  {"uint16be", {2, 1}}, {"uint32be", {4, 1}}};
      auto it = kInts.find(t.text);
      if (it != kInts.end() && isP(tok(1), "(")) {
        if (tok(2).kind == Tk::kIdent && (tok(2).text.rfind("uint", 0) == 0 || tok(2).text.rfind("int", 0) == 0))
          throw Unsupported{t.text + " at an offset read from the data (e.g. the PE header check " +
                            t.text + "(uint32(0x3C)))"};
        pos += 2;
        int off = expr(0);
        expectP(")");
        int64_t o = needConst(off, t.text + " offset");
        if (o < 0 || o > 65535) throw Unsupported{t.text + " offset out of range"};
        LocalNode ln;
        ln.is_uint = true;
        ln.n.value = o;
        ln.n.a = it->second.first;
        ln.n.b = it->second.second;
        ln.n.list = {0};
        nodes.push_back(ln);
        return int(nodes.size() - 1);
      }
      if (t.text.rfind("int", 0) == 0 && isP(tok(1), "("))
        throw Unsupported{t.text + " (signed read)"};
      if (isP(tok(1), ".") || isP(tok(1), "(") || isP(tok(1), "["))
        throw Unsupported{"module or function " + t.text};
      if (imports.count(t.text)) throw Unsupported{"module " + t.text};
      auto r = rule_index.find(t.text);
      if (r != rule_index.end()) { ++pos; return add(CondOp::kRule, r->second); }
      auto b = bad_rules.find(t.text);
      if (b != bad_rules.end()) throw Unsupported{"references unsupported rule " + t.text};
      throw Unsupported{"identifier " + t.text + " (external variable or module)"};
    }
    throw Unsupported{"condition syntax near '" + t.text + "'"};
  }

  int ofNode(int count_node) {
    CondNode n;
    n.op = CondOp::kOf;
    n.a = count_node;
    n.list = stringSet();
    return add(std::move(n));
  }
  int predNode(int s, DpiPosPred p) {
    p.bit = uint32_t(preds.size());
    preds.emplace_back(s, p);
    return add(CondOp::kPred, s, -1, p.bit);
  }

  static int bindingPower(const Token& t, CondOp& op) {
    static const std::map<std::string, std::pair<int, CondOp>> kOps = {
        {"or", {1, CondOp::kOr}},    {"and", {2, CondOp::kAnd}},   {"==", {4, CondOp::kEq}},
        {"!=", {4, CondOp::kNe}},    {"<", {5, CondOp::kLt}},      {"<=", {5, CondOp::kLe}},
        {">", {5, CondOp::kGt}},     {">=", {5, CondOp::kGe}},     {"|", {6, CondOp::kBitOr}},
        {"^", {7, CondOp::kBitXor}}, {"&", {8, CondOp::kBitAnd}},  {"<<", {9, CondOp::kShl}},
        {">>", {9, CondOp::kShr}},   {"+", {10, CondOp::kAdd}},    {"-", {10, CondOp::kSub}},
        {"*", {11, CondOp::kMul}},   {"\\", {11, CondOp::kDiv}},   {"%", {11, CondOp::kMod}}};
    if (t.kind != Tk::kPunct && t.kind != Tk::kIdent) return -1;
    auto it = kOps.find(t.text);
    if (it == kOps.end()) return -1;
    op = it->second.second;
    return it->second.first;
  }

  int uintEq(int u, int c) {
    const LocalNode ln = nodes[size_t(u)];
    int64_t v = needConst(c, "value compared with " + std::string("uint read"));
    const int size = ln.n.a;
    const bool be = ln.n.b != 0;
    const uint64_t mask = size == 8 ? ~0ull : ((1ull << (8 * size)) - 1);
    if (v < 0 || uint64_t(v) > mask) return add(CondOp::kConst, -1, -1, 0);  // never equal
    std::string bytes;
    for (int k = 0; k < size; ++k) {
      int sh = be ? 8 * (size - 1 - k) : 8 * k;
      bytes += char(uint8_t(uint64_t(v) >> sh));
    }
    RString h;
    h.hidden = true;
    h.kind = Tk::kIdent;
    h.ident = absl::StrCat("uint", 8 * size, be ? "be" : "", "(", ln.n.value, ")");
    h.hidden_bytes = bytes;
    h.hidden_at = ln.n.value;
    h.body = (ln.n.value > 0 ? absl::StrCat("^.{", ln.n.value, "}") : std::string("^")) +
             escBytes(bytes);
    strings.push_back(h);
    CondNode n;
    n.op = CondOp::kUintEq;
    n.a = int(strings.size() - 1);
    n.value = ln.n.value + size;
    return add(std::move(n));
  }

  int expr(int min_bp) {
    int left = primary();
    while (true) {
      const Token& t = tok();
      if (isKw(t, "of")) {
        ++pos;
        left = ofNode(left);
        continue;
      }
      if (t.kind == Tk::kIdent &&
          (t.text == "contains" || t.text == "icontains" || t.text == "startswith" ||
           t.text == "istartswith" || t.text == "endswith" || t.text == "iendswith" ||
           t.text == "matches" || t.text == "iequals"))
        throw Unsupported{"string operator " + t.text};
      CondOp op;
      int bp = bindingPower(t, op);
      if (bp < 0 || bp <= min_bp) break;
      ++pos;
      int right = expr(bp);
      const bool lu = nodes[size_t(left)].is_uint, ru = nodes[size_t(right)].is_uint;
      if (lu || ru) {
        if (op != CondOp::kEq || (lu && ru))
          throw Unsupported{"uint read used other than `uintXX(constant) == constant`"};
        left = lu ? uintEq(left, right) : uintEq(right, left);
        continue;
      }
      left = add(op, left, right);
    }
    if (nodes[size_t(left)].is_uint && min_bp < 4)
      throw Unsupported{"uint read used other than `uintXX(constant) == constant`"};
    return left;
  }
};

// ---------------------------------------------------------------------------------------
// Whole-model translation

uint64_t fnv(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (char c : s) { h ^= uint8_t(c); h *= 1099511628211ull; }
  return h;
}

bool needsMatch(const std::vector<CondNode>& nodes, int32_t idx, int depth = 0);

struct Translated {
  std::shared_ptr<CompiledDpi> dpi;
  std::vector<std::string> exprs;
  std::vector<unsigned> flags;
  std::vector<uint32_t> pattern_rule;  // pattern -> rule index in dpi->rules
  std::vector<std::string> pattern_key;  // patternKey() of the exact expression
};

// Which patterns are prefiltered: those Hyperscan refused to compile exactly (key ->
// Hyperscan's message), and with `all` (tests, benchmarks) every regex and hex string that
// can be.
struct PrefilterPlan {
  std::map<std::string, std::string> refused;
  bool all = false;
  uint32_t window_bound = 8192;
};

bool parseAction(const std::string& v, DpiAction& a) {
  if (v == "alert") a = DpiAction::kAlert;
  else if (v == "drop") a = DpiAction::kDrop;
  else if (v == "reset") a = DpiAction::kReset;
  else return false;
  return true;
}

// One source (YARA namespace) translated on its own: indices local to it (namespace 0, its
// first rule, string, node, pattern at 0); linkFragments() places it in a whole rule set.
Translated translateSource(const DpiModel& model, size_t si, const RSource& rs,
                           const std::map<std::string, std::string>& excluded,
                           const PrefilterPlan& plan, ConfigErrorList& errors) {
  Translated tr;
  tr.dpi = std::make_shared<CompiledDpi>();
  CompiledDpi& d = *tr.dpi;
  d.num_namespaces = 1;
  {
    const YaraSource& src = model.sources[si];
    std::set<std::string> imports(rs.imports.begin(), rs.imports.end());
    std::map<std::string, int> rule_index;
    std::map<std::string, std::string> bad;
    for (const RRule& r : rs.rules) {
      std::string reason;
      std::vector<RString> strings = r.strings;
      RuleCtx ctx{r, strings, rule_index, bad, imports, {}, {}, {}, {}, 0};
      int root = -1;
      std::vector<std::vector<GenPattern>> gen;
      const std::string id = src.name + ":" + r.name;
      auto ex = excluded.find(id);
      try {
        if (ex != excluded.end()) throw Unsupported{ex->second};
        if (!r.parse_error.empty()) throw Unsupported{r.parse_error};
        root = ctx.expr(0);
        if (ctx.tok().kind != Tk::kEnd)
          throw Unsupported{"condition syntax near '" + ctx.tok().text + "'"};
        if (ctx.nodes[size_t(root)].is_uint) throw Unsupported{"uint read as a condition"};
        for (const RString& s : strings) {
          std::vector<GenPattern> g;
          if (s.hidden) g.push_back({s.body, HS_FLAG_DOTALL, 0, 0, true});
          else if (s.kind == Tk::kText) textPatterns(s, g);
          else if (s.kind == Tk::kHex) hexPatterns(s, g);
          else if (s.kind == Tk::kRegex) regexPatterns(s, g);
          else throw Unsupported{"string " + s.ident};
          const int si = int(&s - strings.data());
          const bool positional = ctx.count_needed.count(si) || ctx.slots_needed.count(si) ||
                                  std::any_of(ctx.preds.begin(), ctx.preds.end(),
                                              [&](const auto& q) { return q.first == si; });
          for (GenPattern& p : g) {
            hs_expr_info_t* info = nullptr;
            hs_compile_error_t* err = nullptr;
            std::string refused;
            if (hs_expression_info(p.expr.c_str(), p.flags, &info, &err) != HS_SUCCESS) {
              refused = err != nullptr ? err->message : "error";
              hs_free_compile_error(err);
            } else {
              std::free(info);
              auto r = plan.refused.find(patternKey(p));
              if (r != plan.refused.end()) refused = r->second;
            }
            // Refused by Hyperscan: prefiltered when it can be confirmed, else unsupported.
            // (With plan.all, every regex / hex string that can be.)
            if (refused.empty() && !(plan.all && !p.confirm_expr.empty())) continue;
            std::string why;
            if (preparePrefilter(p, positional, plan.window_bound, &why)) continue;
            if (!refused.empty())
              throw Unsupported{"hyperscan cannot compile " + s.ident + ": " + refused +
                                (p.confirm_expr.empty() ? "" : "; not prefiltered: " + why)};
          }
          gen.push_back(std::move(g));
        }
        auto fixedOrdered = [&](int s) {
          const auto& g = gen[size_t(s)];
          if (g.empty()) return false;
          for (const GenPattern& p : g)
            if (p.length == 0 || p.length != g[0].length) return false;
          return true;
        };
        for (auto& [s, one] : ctx.count_needed)
          if (!fixedOrdered(s))
            throw Unsupported{"count/offset/length of " + strings[size_t(s)].ident +
                              " (variable length or several encodings)"};
        for (auto& [s, p] : ctx.preds)
          if (!fixedOrdered(s))
            throw Unsupported{"position of " + strings[size_t(s)].ident +
                              " (variable length or several encodings)"};
      } catch (const Unsupported& u) {
        reason = u.reason;
      } catch (const std::exception& e) {
        reason = std::string("translation: ") + e.what();
      }
      if (!reason.empty()) {
        bad[r.name] = reason;
        d.unsupported.push_back({src.name, r.name, r.line, reason});
        continue;
      }
      // Commit: strings, patterns, nodes.
      DpiRule out;
      out.source = src.name;
      out.name = r.name;
      out.tags = r.tags;
      out.meta = r.meta;
      out.is_private = r.is_private;
      out.is_global = r.is_global;
      out.ns = 0;
      out.action = model.default_action;
      for (auto& [k, v] : r.meta) {
        if (k != "action") continue;
        std::string val = v;
        if (!parseAction(val, out.action))
          errors.push_back({"dpi", id, -1, r.line, src.name, "meta.action",
                            "\"" + val + "\" is not alert, drop or reset"});
      }
      for (const DpiRuleAction& a : model.actions)
        if (a.rule == r.name || a.rule == id) out.action = a.action;
      const uint32_t rule_no = uint32_t(d.rules.size());
      out.first_string = uint32_t(d.strings.size());
      out.num_strings = uint32_t(strings.size());
      out.line = r.line;
      std::vector<int32_t> smap(strings.size());
      for (size_t s = 0; s < strings.size(); ++s) {
        DpiString ds;
        ds.ident = strings[s].ident;
        ds.sample = stringSample(strings[s]);
        ds.sample_at = strings[s].hidden ? strings[s].hidden_at : -1;
        if (strings[s].base64) ds.extra_samples = base64ShiftedSamples(strings[s]);
        smap[s] = int32_t(d.strings.size());
        if (ctx.count_needed.count(int(s))) ds.count_slot = int32_t(d.num_counts++);
        auto k = ctx.slots_needed.find(int(s));
        if (k != ctx.slots_needed.end()) {
          ds.first_slot = int32_t(d.num_slots);
          ds.num_slots = k->second;
          d.num_slots += k->second;
        }
        for (auto& [ps, p] : ctx.preds) {
          if (ps != int(s)) continue;
          DpiPosPred q = p;
          q.bit = d.num_preds + p.bit;
          ds.preds.push_back(q);
        }
        const bool needs_all = ds.count_slot >= 0 || !ds.preds.empty();
        for (const GenPattern& g : gen[s]) {
          DpiPattern dp{uint32_t(smap[s]), g.length, g.trail, g.anchored, -1};
          dp.eod = g.expr.find("\\z") != std::string::npos;  // YARA's `$`, fullword at the end
          unsigned hs_flags = g.flags | (needs_all ? 0u : HS_FLAG_SINGLEMATCH);
          if (g.confirm_code) {
            // Every candidate is reported (a rejected one must not hide a later real match).
            dp.confirm = int32_t(d.confirms.size());
            d.confirms.push_back({pcreSource(g.confirm_expr), g.flags, g.confirm_code, g.max_width,
                                  g.confirm_wide});
            d.prefilter_window = std::max(d.prefilter_window, g.max_width);
            hs_flags = g.flags | HS_FLAG_PREFILTER;
          }
          d.patterns.push_back(dp);
          tr.exprs.push_back(g.expr);
          tr.flags.push_back(hs_flags);
          tr.pattern_rule.push_back(rule_no);
          tr.pattern_key.push_back(patternKey(g));
        }
        d.strings.push_back(std::move(ds));
      }
      const int32_t base = int32_t(d.nodes.size());
      for (LocalNode& ln : ctx.nodes) {
        CondNode n = ln.n;
        switch (n.op) {
          case CondOp::kFound: case CondOp::kCount: case CondOp::kOffset:
          case CondOp::kLength: case CondOp::kUintEq:
            n.a = smap[size_t(n.a)];
            break;
          case CondOp::kPred:
            n.a = smap[size_t(n.a)];
            n.value += d.num_preds;
            break;
          case CondOp::kOf:
            if (n.a >= 0) n.a += base;
            for (uint32_t& s : n.list) s = uint32_t(smap[s]);
            break;
          case CondOp::kRule: case CondOp::kConst: case CondOp::kFilesize:
            break;
          default:
            if (n.a >= 0) n.a += base;
            if (n.b >= 0) n.b += base;
        }
        if (n.op == CondOp::kFilesize || n.op == CondOp::kUintEq) d.uses_filesize = true;
        d.nodes.push_back(std::move(n));
      }
      d.num_preds += uint32_t(ctx.preds.size());
      out.cond = base + root;
      out.needs_match = needsMatch(d.nodes, out.cond);
      rule_index[r.name] = int(rule_no);
      d.rules.push_back(std::move(out));
    }
  }
  return tr;
}

// True when the subtree can only be true (non-zero) if some string of the rule matched.
bool needsMatch(const std::vector<CondNode>& nodes, int32_t idx, int depth) {
  if (idx < 0 || depth > 200) return false;
  const CondNode& n = nodes[size_t(idx)];
  switch (n.op) {
    case CondOp::kFound: case CondOp::kPred: case CondOp::kUintEq:
      return true;
    case CondOp::kOf: {
      if (n.list.empty()) return false;
      if (n.a < 0) return true;  // all of
      const CondNode& c = nodes[size_t(n.a)];
      return c.op == CondOp::kConst && c.value >= 1;
    }
    case CondOp::kAnd:
      return needsMatch(nodes, n.a, depth + 1) || needsMatch(nodes, n.b, depth + 1);
    case CondOp::kOr:
      return needsMatch(nodes, n.a, depth + 1) && needsMatch(nodes, n.b, depth + 1);
    default:
      return false;
  }
}

std::atomic<uint64_t> g_cache_write_failures{0};

std::string hexKey(uint64_t h) {
  char b[24];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(h));
  return b;
}

// ---------------------------------------------------------------------------------------
// Incremental compile (docs/dpi.md "Shards and incremental compiles")
//
// A rule set is compiled source by source ("fragments": one YARA namespace translated on its
// own, cached by its text and the options that shape its translation) and linked into one
// CompiledDpi. Its Hyperscan patterns live in `shards` databases: a source's patterns go to
// the shard its name hashes to, and each shard's database is named by the hash of its
// content (the fragments' expressions and flags, in order, and the Hyperscan version), kept
// in memory while a version uses it and in dpi.cache_dir. When a shard's content changed
// since the previous compile, the previous database keeps serving the fragments it holds
// (the patterns of the others masked), the changed fragments go to a small delta database
// compiled now, and the shard's new database is compiled by a background thread at low
// priority ("merge"); when merges are done the listener republishes (its compile then finds
// every database in the cache and no delta).

struct Fragment {
  Translated tr;
  ConfigErrorList errors;  // meta.action errors of the source
  uint64_t phash = 0;      // its expressions and flags
  std::vector<uint64_t> pat_hash;  // per pattern: its expression and flags
  uint64_t epoch = 0;      // last compile that used it
};
using FragPtr = std::shared_ptr<Fragment>;

// What one shard database holds, to compile it.
struct ShardContent {
  uint64_t key = 0;
  uint32_t home = 0;       // home shard (merges)
  std::vector<uint64_t> frag_hash, frag_name;
  std::vector<uint32_t> frag_count;
  std::vector<uint64_t> pattern_hash;
  std::vector<uint32_t> frag_source;  // source index of each fragment (this compile)
  std::vector<std::string> exprs;
  std::vector<unsigned> flags;
  std::vector<uint32_t> global;       // local id -> pattern (this compile)
};

struct ShardFailure {
  uint32_t pattern = 0;  // global pattern index
  std::string message;
  bool fatal = false;    // not one expression (whole compile): an error of the config
};

// What a database of content `c` holds (its fragments and their local ids).
void describeShard(const ShardContent& c, DpiShardDb& db) {
  db.key = c.key;
  db.frag_hash = c.frag_hash;
  db.frag_name = c.frag_name;
  db.pattern_hash = c.pattern_hash;
  db.frag_count = c.frag_count;
  uint32_t at = 0;
  for (uint32_t n : c.frag_count) { db.frag_begin.push_back(at); at += n; }
  db.patterns = at;
}

std::shared_ptr<DpiShardDb> compileShard(const ShardContent& c, ShardFailure* fail) {
  auto db = std::make_shared<DpiShardDb>();
  describeShard(c, *db);
  std::vector<const char*> ex;
  std::vector<unsigned> ids;
  for (size_t i = 0; i < c.exprs.size(); ++i) {
    ex.push_back(c.exprs[i].c_str());
    ids.push_back(unsigned(i));
  }
  hs_compile_error_t* err = nullptr;
  auto t0 = std::chrono::steady_clock::now();
  hs_error_t rc = hs_compile_multi(ex.data(), c.flags.data(), ids.data(), unsigned(ex.size()),
                                   HS_MODE_STREAM, nullptr, &db->db, &err);
  db->compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (rc == HS_SUCCESS) {
    hs_database_size(db->db, &db->bytes);
    return db;
  }
  fail->message = err != nullptr ? err->message : "unknown error";
  const int which = err != nullptr ? err->expression : -1;
  hs_free_compile_error(err);
  db->db = nullptr;
  if (which < 0 || size_t(which) >= c.global.size()) fail->fatal = true;
  else fail->pattern = c.global[size_t(which)];
  return nullptr;
}

std::string hexEncode(const std::string& s) {
  static const char* kHex = "0123456789abcdef";
  std::string o;
  for (unsigned char ch : s) { o += kHex[ch >> 4]; o += kHex[ch & 15]; }
  return o;
}
std::string hexDecode(const std::string& s) {
  std::string o;
  for (size_t i = 0; i + 1 < s.size(); i += 2) o += char(std::stoi(s.substr(i, 2), nullptr, 16));
  return o;
}

// Writes `bytes` to `path` through a temporary name; "" or why it failed.
std::string writeAtomically(const std::string& path, const char* bytes, size_t len) {
  std::string why;
  std::string tmp = path + ".tmp";
  std::ofstream o(tmp, std::ios::binary);
  if (!o) why = std::strerror(errno);
  o.write(bytes, std::streamsize(len));
  o.close();
  if (!o && why.empty()) why = "write failed";
  if (why.empty() && std::rename(tmp.c_str(), path.c_str()) != 0) why = std::strerror(errno);
  if (!why.empty()) std::remove(tmp.c_str());
  return why;
}

std::string shardFile(const std::string& dir, uint64_t key) {
  return dir + "/dpi-shard-" + hexKey(key) + ".hsdb";
}

// "" or why the database was not cached.
std::string saveShard(const std::string& dir, const DpiShardDb& db) {
  if (dir.empty()) return "";
  char* bytes = nullptr;
  size_t len = 0;
  if (hs_serialize_database(db.db, &bytes, &len) != HS_SUCCESS) return "hs_serialize_database failed";
  std::string why = writeAtomically(shardFile(dir, db.key), bytes, len);
  std::free(bytes);
  return why.empty() ? "" : "compiled database not cached: " + shardFile(dir, db.key) + ": " + why;
}

std::shared_ptr<DpiShardDb> loadShard(const std::string& dir, const ShardContent& c) {
  if (dir.empty()) return nullptr;
  std::ifstream in(shardFile(dir, c.key), std::ios::binary);
  if (!in) return nullptr;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto db = std::make_shared<DpiShardDb>();
  if (bytes.empty() || hs_deserialize_database(bytes.data(), bytes.size(), &db->db) != HS_SUCCESS) {
    db->db = nullptr;
    return nullptr;
  }
  describeShard(c, *db);
  hs_database_size(db->db, &db->bytes);
  return db;
}

class CompileCache {
 public:
  static CompileCache& get() {
    static CompileCache* c = new CompileCache();  // never destroyed: the merge thread may run at exit
    return *c;
  }
  std::mutex mu;  // held by compileDpi for its whole run, by the merge thread to publish
  uint64_t epoch = 0;
  std::map<uint64_t, FragPtr> frags;
  std::set<uint64_t> validated;                       // sources libyara accepted (name + text)
  std::map<std::string, std::string> refused;         // pattern key -> Hyperscan's message
  std::map<uint64_t, std::map<std::string, std::string>> hs_excluded;  // source -> rule id -> why
  std::set<std::string> refused_dirs;                 // cache dirs whose refusals were read
  std::map<uint64_t, std::weak_ptr<const DpiShardDb>> dbs;
  std::vector<std::shared_ptr<const DpiShardDb>> last;  // per home shard, the newest database
  uint32_t last_k = 0;
  // Background merges.
  struct Merge { ShardContent content; uint32_t k = 0; std::string dir; };
  std::deque<Merge> queue;
  bool running = false;
  std::condition_variable cv;
  std::function<void()> listener;
  uint64_t merges_done = 0, merges_failed = 0;

  std::shared_ptr<const DpiShardDb> memDb(uint64_t key) {
    auto it = dbs.find(key);
    if (it == dbs.end()) return nullptr;
    auto p = it->second.lock();
    if (!p) dbs.erase(it);
    return p;
  }
  void remember(const std::shared_ptr<const DpiShardDb>& db) {
    dbs[db->key] = db;
    for (auto it = dbs.begin(); it != dbs.end();) it = it->second.expired() ? dbs.erase(it) : std::next(it);
  }

  void loadRefused(const std::string& dir) {
    if (dir.empty() || !refused_dirs.insert(dir).second) return;
    std::ifstream in(dir + "/dpi-refused.tsv");
    std::string line;
    while (std::getline(in, line)) {
      size_t t = line.find('\t');
      if (t == std::string::npos) continue;
      try {
        refused.emplace(hexDecode(line.substr(0, t)), hexDecode(line.substr(t + 1)));
      } catch (const std::exception&) {
        // a damaged line is a refusal rediscovered by compiling
      }
    }
  }
  void saveRefused(const std::string& dir) {
    if (dir.empty() || refused.empty()) return;
    std::string out;
    for (auto& [k, v] : refused) out += hexEncode(k) + "\t" + hexEncode(v) + "\n";
    (void)writeAtomically(dir + "/dpi-refused.tsv", out.data(), out.size());
  }

  void enqueue(Merge m) {  // mu held
    for (Merge& q : queue)
      if (q.content.home == m.content.home && q.k == m.k) { q = std::move(m); return; }
    queue.push_back(std::move(m));
    if (!thread_started_) {
      thread_started_ = true;
      std::thread([this] { mergeLoop(); }).detach();
    }
    cv.notify_all();
  }

  void waitIdle() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return queue.empty() && !running; });
  }

 private:
  bool thread_started_ = false;
  void mergeLoop() {
    // Low priority: merges use what the control side leaves (never the worker lcores, which
    // the dataplane pins).
    setpriority(PRIO_PROCESS, pid_t(syscall(SYS_gettid)), 19);
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return !queue.empty(); });
      Merge m = std::move(queue.front());
      queue.pop_front();
      running = true;
      lock.unlock();
      ShardFailure fail;
      std::shared_ptr<DpiShardDb> db = compileShard(m.content, &fail);
      std::string warn = db ? saveShard(m.dir, *db) : "";
      if (!warn.empty()) g_cache_write_failures.fetch_add(1, std::memory_order_relaxed);
      lock.lock();
      if (db) {
        remember(db);
        if (last_k == m.k && m.content.home < last.size()) last[m.content.home] = db;
        ++merges_done;
      } else {
        ++merges_failed;  // the masked layout stays (it is correct); a later edit retries
      }
      // The listener (the republish) runs before the merge counts as done, so waitIdle()
      // returns after it.
      if (queue.empty() && db) {
        std::function<void()> fn = listener;
        if (fn) {
          lock.unlock();
          fn();
          lock.lock();
        }
      }
      running = false;
      cv.notify_all();
    }
  }
};

// A source's name and text hashed 8 bytes at a time (the in-memory cache keys: one pass over
// megabytes of rule text per compile, where the byte-wise FNV took ~5 ms per MiB).
uint64_t textHash(const std::string& name, const std::string& text) {
  uint64_t h = fnv(name) ^ (uint64_t(text.size()) * 0x9E3779B97F4A7C15ull);
  size_t i = 0;
  for (; i + 8 <= text.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, text.data() + i, 8);
    h ^= w * 0x87C37B91114253D5ull;
    h = ((h << 31) | (h >> 33)) * 0x4CF5AD432745937Full;
  }
  for (; i < text.size(); ++i) h = (h ^ uint8_t(text[i])) * 1099511628211ull;
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  return h;
}

uint64_t fragKey(const DpiModel& model, uint64_t src_hash, const DpiCompileOptions& opt,
                 const std::map<std::string, std::string>& excl) {
  uint64_t h = src_hash;
  h = fnv(absl::StrCat(int(model.default_action), "/", model.prefilter_window_bytes, "/",
                       opt.prefilter_all), h);
  for (const DpiRuleAction& a : model.actions) h = fnv(absl::StrCat(a.rule, "=", int(a.action), ";"), h);
  for (auto& [k, v] : excl) h = fnv(k + "\n" + v + "\n", h);
  return h;
}

// Linked rule set: every fragment's tables placed after the previous ones.
struct Linked {
  std::shared_ptr<CompiledDpi> dpi;
  std::vector<std::string> exprs;
  std::vector<unsigned> flags;
  std::vector<uint32_t> pattern_rule;
  std::vector<std::string> pattern_key;
  std::vector<uint32_t> frag_pat_begin;  // per source
};

Linked linkFragments(const std::vector<FragPtr>& frags) {
  Linked L;
  L.dpi = std::make_shared<CompiledDpi>();
  CompiledDpi& d = *L.dpi;
  d.num_namespaces = uint32_t(frags.size());
  for (size_t si = 0; si < frags.size(); ++si) {
    const CompiledDpi& s = *frags[si]->tr.dpi;
    const uint32_t R = uint32_t(d.rules.size()), S = uint32_t(d.strings.size()),
                   N = uint32_t(d.nodes.size()), P = uint32_t(d.patterns.size()),
                   CF = uint32_t(d.confirms.size()), C = d.num_counts, SL = d.num_slots,
                   PB = d.num_preds;
    L.frag_pat_begin.push_back(P);
    for (DpiRule r : s.rules) {
      r.ns = uint32_t(si);
      r.first_string += S;
      if (r.cond >= 0) r.cond += int32_t(N);
      d.rules.push_back(std::move(r));
    }
    for (DpiString st : s.strings) {
      if (st.count_slot >= 0) st.count_slot += int32_t(C);
      if (st.first_slot >= 0) st.first_slot += int32_t(SL);
      for (DpiPosPred& q : st.preds) q.bit += PB;
      d.strings.push_back(std::move(st));
    }
    for (CondNode n : s.nodes) {
      switch (n.op) {
        case CondOp::kFound: case CondOp::kCount: case CondOp::kOffset:
        case CondOp::kLength: case CondOp::kUintEq:
          n.a += int32_t(S);
          break;
        case CondOp::kPred:
          n.a += int32_t(S);
          n.value += PB;
          break;
        case CondOp::kOf:
          if (n.a >= 0) n.a += int32_t(N);
          for (uint32_t& x : n.list) x += S;
          break;
        case CondOp::kRule:
          n.a += int32_t(R);
          break;
        case CondOp::kConst: case CondOp::kFilesize:
          break;
        default:
          if (n.a >= 0) n.a += int32_t(N);
          if (n.b >= 0) n.b += int32_t(N);
      }
      d.nodes.push_back(std::move(n));
    }
    for (DpiPattern p : s.patterns) {
      p.string_id += S;
      if (p.confirm >= 0) p.confirm += int32_t(CF);
      d.patterns.push_back(p);
    }
    d.confirms.insert(d.confirms.end(), s.confirms.begin(), s.confirms.end());
    d.unsupported.insert(d.unsupported.end(), s.unsupported.begin(), s.unsupported.end());
    d.num_counts += s.num_counts;
    d.num_slots += s.num_slots;
    d.num_preds += s.num_preds;
    d.uses_filesize |= s.uses_filesize;
    d.prefilter_window = std::max(d.prefilter_window, s.prefilter_window);
    const Translated& t = frags[si]->tr;
    L.exprs.insert(L.exprs.end(), t.exprs.begin(), t.exprs.end());
    L.flags.insert(L.flags.end(), t.flags.begin(), t.flags.end());
    for (uint32_t r : t.pattern_rule) L.pattern_rule.push_back(r + R);
    L.pattern_key.insert(L.pattern_key.end(), t.pattern_key.begin(), t.pattern_key.end());
  }
  return L;
}

uint32_t defaultShards() { return 2; }  // bench/RESULTS.md "Incremental DPI compiles"

}  // namespace

uint64_t dpiCacheWriteFailures() { return g_cache_write_failures.load(std::memory_order_relaxed); }

void setDpiMergeListener(std::function<void()> fn) {
  CompileCache& c = CompileCache::get();
  std::lock_guard<std::mutex> lock(c.mu);
  c.listener = std::move(fn);
}

void waitDpiMerges() { CompileCache::get().waitIdle(); }

DpiMergeStats dpiMergeStats() {
  CompileCache& c = CompileCache::get();
  std::lock_guard<std::mutex> lock(c.mu);
  return DpiMergeStats{uint32_t(c.queue.size()) + (c.running ? 1u : 0u), c.merges_done, c.merges_failed};
}

void clearDpiCompileCache() {
  CompileCache& c = CompileCache::get();
  c.waitIdle();
  std::lock_guard<std::mutex> lock(c.mu);
  c.frags.clear();
  c.validated.clear();
  c.refused.clear();
  c.hs_excluded.clear();
  c.refused_dirs.clear();
  c.dbs.clear();
  c.last.clear();
  c.last_k = 0;
}

absl::StatusOr<std::shared_ptr<const CompiledDpi>> compileDpi(const DpiModel& model,
                                                              ConfigErrorList& errors,
                                                              const DpiCompileOptions& opt) {
  const size_t errors_before = errors.size();
  CompileCache& cache = CompileCache::get();
  std::unique_lock<std::mutex> lock(cache.mu);
  const uint64_t epoch = ++cache.epoch;
  std::vector<uint64_t> src_hash;
  for (const YaraSource& s : model.sources) src_hash.push_back(textHash(s.name, s.text));
  // libyara judges each source once (sources are separate namespaces: checking the new ones
  // alone is checking the set).
  if (opt.validate_with_libyara) {
    std::vector<YaraSource> fresh;
    std::vector<uint64_t> keys;
    for (size_t si = 0; si < model.sources.size(); ++si) {
      const YaraSource& s = model.sources[si];
      const uint64_t k = src_hash[si];
      if (!cache.validated.count(k)) { fresh.push_back(s); keys.push_back(k); }
    }
    if (!fresh.empty()) {
      YaraRulesPtr y = yaraCompile(fresh, errors);
      if (!y) return errorsToStatus(errors);
      if (cache.validated.size() > 100000) cache.validated.clear();
      cache.validated.insert(keys.begin(), keys.end());
    }
  }
  if (!model.cache_dir.empty()) {
    // The cache directory is created like `mkdir -p`; one that cannot be refuses the
    // config (a cache that silently never works would recompile on every start).
    std::error_code ec;
    std::filesystem::create_directories(model.cache_dir, ec);
    if (ec || !std::filesystem::is_directory(model.cache_dir)) {
      errors.push_back({"dpi", "", -1, 0, "", "dpi.cache_dir",
                        model.cache_dir + ": cannot create the directory" +
                            (ec ? ": " + ec.message() : ": not a directory")});
      return errorsToStatus(errors);
    }
    cache.loadRefused(model.cache_dir);
  }
  const uint32_t K = std::max<uint32_t>(1, model.shards != 0 ? model.shards : defaultShards());
  if (cache.last_k != K) {
    cache.last.assign(K, nullptr);
    cache.last_k = K;
  }
  const size_t refused_before = cache.refused.size();
  double hs_ms = 0, translate_ms = 0;
  uint32_t cached_sources = 0;
  Linked L;
  std::vector<FragPtr> frags(model.sources.size());
  std::vector<std::shared_ptr<const DpiShardDb>> used_db;   // per shard of the result
  std::vector<std::vector<uint32_t>> used_frags;            // its fragments (source indices) served
  // Per shard of the result, sources served by an older version of themselves: the local
  // id of each of their patterns.
  std::vector<std::map<uint32_t, std::vector<uint32_t>>> used_subset;
  std::vector<bool> used_delta;
  std::vector<ShardContent> pending;                        // merges to queue
  std::string cache_warning;
  uint32_t n_compiled = 0, n_loaded = 0, n_reused = 0, n_delta = 0, n_patterns = 0;
  for (int round = 0; round < 64; ++round) {
    n_loaded = n_reused = n_delta = 0;
    // --- translation, source by source, from the cache where the source did not change
    auto t0 = std::chrono::steady_clock::now();
    cached_sources = 0;
    {
      ProgressStep translating(absl::StrCat("translating YARA rules to Hyperscan (pass ", round + 1,  // --- ops ---
                                            ")"), model.sources.size(), "files", 16);
      for (size_t si = 0; si < model.sources.size(); ++si) {
        translating.advance();
        const YaraSource& src = model.sources[si];
        const uint64_t base = src_hash[si];
        std::map<std::string, std::string> excl;
        if (auto it = cache.hs_excluded.find(base); it != cache.hs_excluded.end()) excl = it->second;
        const uint64_t key = fragKey(model, base, opt, excl);
        if (auto it = cache.frags.find(key); it != cache.frags.end()) {
          frags[si] = it->second;
          frags[si]->epoch = epoch;
          ++cached_sources;
          continue;
        }
        const RSource rs = parseSource(src.text);
        PrefilterPlan plan;
        plan.refused = cache.refused;
        plan.all = opt.prefilter_all;
        plan.window_bound = model.prefilter_window_bytes;
        // An unsupported global rule makes its whole namespace unsupported (the others'
        // verdicts depend on it).
        auto f = std::make_shared<Fragment>();
        for (int g = 0; g < 64; ++g) {
          f->errors.clear();
          f->tr = translateSource(model, si, rs, excl, plan, f->errors);
          bool again = false;
          for (const DpiUnsupported& u : f->tr.dpi->unsupported) {
            for (const RRule& r : rs.rules) {
              if (r.name != u.rule || !r.is_global) continue;
              for (const RRule& o : rs.rules) {
                std::string id = src.name + ":" + o.name;
                if (o.name != u.rule && !excl.count(id)) {
                  excl[id] = "global rule " + u.rule + " in the same namespace is unsupported";
                  again = true;
                }
              }
            }
          }
          if (!again) break;
        }
        uint64_t ph = fnv(hs_version());
        for (size_t i = 0; i < f->tr.exprs.size(); ++i) {
          const std::string e = absl::StrCat(f->tr.flags[i], "/", f->tr.exprs[i], "\n");
          ph = fnv(e, ph);
          f->pat_hash.push_back(fnv(e));
        }
        f->phash = ph;
        f->epoch = epoch;
        cache.frags[key] = f;
        frags[si] = f;
      }
    }
    translate_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    L = linkFragments(frags);
    used_db.clear();
    used_frags.clear();
    used_subset.clear();
    used_delta.clear();
    pending.clear();
    if (!opt.compile_hyperscan || L.exprs.empty()) break;

    // --- layout: per home shard its database, from memory, disk, the previous one + delta,
    // or compiled now
    auto contentOf = [&](const std::vector<uint32_t>& srcs, uint32_t home) {
      ShardContent c;
      c.home = home;
      uint64_t h = fnv(hs_version());
      for (uint32_t si : srcs) {
        const Translated& t = frags[si]->tr;
        c.frag_hash.push_back(frags[si]->phash);
        c.frag_name.push_back(fnv(model.sources[si].name));
        c.pattern_hash.insert(c.pattern_hash.end(), frags[si]->pat_hash.begin(), frags[si]->pat_hash.end());
        c.frag_count.push_back(uint32_t(t.exprs.size()));
        c.frag_source.push_back(si);
        c.exprs.insert(c.exprs.end(), t.exprs.begin(), t.exprs.end());
        c.flags.insert(c.flags.end(), t.flags.begin(), t.flags.end());
        for (size_t j = 0; j < t.exprs.size(); ++j) c.global.push_back(L.frag_pat_begin[si] + uint32_t(j));
        h = fnv(hexKey(frags[si]->phash) + "/" + std::to_string(t.exprs.size()) + ";", h);
      }
      c.key = h;
      return c;
    };
    std::vector<std::vector<uint32_t>> home(K);
    for (uint32_t si = 0; si < model.sources.size(); ++si)
      if (!frags[si]->tr.exprs.empty()) home[fnv(model.sources[si].name) % K].push_back(si);
    std::vector<ShardContent> to_compile;
    std::vector<int> compile_slot;         // index in used_db of each compile
    std::vector<uint32_t> delta_srcs;
    std::vector<int> home_slot(K, -1);
    for (uint32_t k = 0; k < K; ++k) {
      if (home[k].empty()) continue;
      ShardContent c = contentOf(home[k], k);
      std::shared_ptr<const DpiShardDb> db = cache.memDb(c.key);
      if (!db) {
        if ((db = loadShard(model.cache_dir, c))) { ++n_loaded; cache.remember(db); }
      }
      home_slot[k] = int(used_db.size());
      if (db) {
        used_db.push_back(db);
        used_frags.push_back(home[k]);
        used_delta.push_back(false);
        continue;
      }
      // The previous database of this shard serves the fragments it holds.
      const std::shared_ptr<const DpiShardDb>& prev = cache.last[k];
      if (opt.incremental && !model.full_recompile && prev) {
        std::vector<bool> taken(prev->frag_hash.size(), false);
        std::vector<uint32_t> served, left;
        std::map<uint32_t, std::vector<uint32_t>> subset;
        uint32_t left_patterns = 0;
        for (uint32_t si : home[k]) {
          bool found = false;
          for (size_t j = 0; j < prev->frag_hash.size() && !found; ++j)
            if (!taken[j] && prev->frag_hash[j] == frags[si]->phash) taken[j] = found = true;
          // The same source with rules removed (or with only patterns the old version had):
          // served by the old version's patterns, the others masked. No compile.
          for (size_t j = 0; j < prev->frag_hash.size() && !found; ++j) {
            if (taken[j] || prev->frag_name.size() != prev->frag_hash.size() ||
                prev->frag_name[j] != fnv(model.sources[si].name))
              continue;
            std::multimap<uint64_t, uint32_t> old;
            for (uint32_t t = 0; t < prev->frag_count[j]; ++t)
              old.emplace(prev->pattern_hash[prev->frag_begin[j] + t], prev->frag_begin[j] + t);
            std::vector<uint32_t> local;
            for (uint64_t h : frags[si]->pat_hash) {
              auto it = old.find(h);
              if (it == old.end()) break;
              local.push_back(it->second);
              old.erase(it);
            }
            if (local.size() != frags[si]->pat_hash.size()) continue;
            taken[j] = found = true;
            subset[si] = std::move(local);
          }
          if (found) served.push_back(si);
          else { left.push_back(si); left_patterns += uint32_t(frags[si]->tr.exprs.size()); }
        }
        if (!served.empty() && left_patterns <= std::max<uint32_t>(256, uint32_t(c.exprs.size()) / 4)) {
          used_db.push_back(prev);
          used_frags.push_back(served);
          used_subset.resize(used_db.size());
          used_subset.back() = std::move(subset);
          used_delta.push_back(false);
          delta_srcs.insert(delta_srcs.end(), left.begin(), left.end());
          ++n_reused;
          pending.push_back(std::move(c));
          continue;
        }
      }
      used_db.push_back(nullptr);
      used_frags.push_back(home[k]);
      used_delta.push_back(false);
      compile_slot.push_back(home_slot[k]);
      to_compile.push_back(std::move(c));
    }
    if (!delta_srcs.empty()) {
      std::sort(delta_srcs.begin(), delta_srcs.end());
      ShardContent c = contentOf(delta_srcs, K);
      n_delta = uint32_t(c.exprs.size());
      std::shared_ptr<const DpiShardDb> db = cache.memDb(c.key);
      used_db.push_back(db);
      used_frags.push_back(delta_srcs);
      used_delta.push_back(true);
      if (!db) {
        compile_slot.push_back(int(used_db.size()) - 1);
        to_compile.push_back(std::move(c));
      }
    }
    // --- compile what is missing, two at a time (cold compiles use both cores)
    std::vector<ShardFailure> failures(to_compile.size());
    std::vector<std::shared_ptr<DpiShardDb>> built(to_compile.size());
    if (!to_compile.empty()) {
      uint32_t pats = 0;
      for (const ShardContent& c : to_compile) pats += uint32_t(c.exprs.size());
      // --- ops --- one call per shard with no progress of its own (seconds for thousands of
      // rules): the step says what it is; the progress ticker logs it while it runs.
      ProgressStep hs_step(absl::StrCat("Hyperscan compile of ", pats, " patterns (",
                                        L.dpi->rules.size(), " rules, ", to_compile.size(),
                                        " of ", used_db.size(), " databases)"), 0, "");
      auto t1 = std::chrono::steady_clock::now();
      std::atomic<size_t> next{0};
      auto work = [&] {
        for (size_t i; (i = next.fetch_add(1)) < to_compile.size();)
          built[i] = compileShard(to_compile[i], &failures[i]);
      };
      const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
      const size_t nthreads = std::min<size_t>(std::min<unsigned>(hw, 4), to_compile.size());
      std::vector<std::thread> threads;
      for (size_t t = 1; t < nthreads; ++t) threads.emplace_back(work);
      work();
      for (std::thread& t : threads) t.join();
      hs_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
    }
    bool again = false, fatal = false;
    std::string fatal_msg;
    for (size_t i = 0; i < to_compile.size(); ++i) {
      if (built[i]) {
        ++n_compiled;
        n_patterns += uint32_t(to_compile[i].exprs.size());
        used_db[size_t(compile_slot[i])] = built[i];
        cache.remember(built[i]);
        std::string warn = saveShard(model.cache_dir, *built[i]);
        if (!warn.empty()) {  // counted, and a warning of the apply (the rules still load)
          cache_warning = warn;
          g_cache_write_failures.fetch_add(1, std::memory_order_relaxed);
        }
        continue;
      }
      const ShardFailure& f = failures[i];
      if (f.fatal) { fatal = true; fatal_msg = f.message; continue; }
      // Refused exactly: the next pass prefilters it when it can be confirmed (else the rule
      // is unsupported with this message). Refused as a prefilter too: the rule is excluded.
      const CompiledDpi& d = *L.dpi;
      const uint32_t p = f.pattern;
      const std::string& pkey = L.pattern_key[p];
      if (d.patterns[p].confirm < 0 && !cache.refused.count(pkey)) {
        cache.refused[pkey] = f.message;
        for (auto it = cache.frags.begin(); it != cache.frags.end();) {
          const auto& keys = it->second->tr.pattern_key;
          it = std::find(keys.begin(), keys.end(), pkey) != keys.end() ? cache.frags.erase(it) : std::next(it);
        }
      } else {
        const DpiRule& bad = d.rules[L.pattern_rule[p]];
        cache.hs_excluded[src_hash[bad.ns]][bad.id()] =
            "hyperscan cannot compile " + d.strings[d.patterns[p].string_id].ident + ": " +
            f.message + (d.patterns[p].confirm >= 0 ? " (prefiltered)" : "");
      }
      again = true;
    }
    if (fatal) {
      errors.push_back({"dpi", "", -1, 0, "", "dpi.rule_files", "hyperscan: " + fatal_msg});
      return errorsToStatus(errors);
    }
    if (again) continue;
    // The newest database of each home shard serves the next compile; shards served by an
    // older one (masked) are merged in the background.
    for (uint32_t k = 0; k < K; ++k)
      if (home_slot[k] >= 0 && used_db[size_t(home_slot[k])] && !used_delta[size_t(home_slot[k])])
        cache.last[k] = used_db[size_t(home_slot[k])];
    break;
  }
  if (cache.refused.size() != refused_before) cache.saveRefused(model.cache_dir);
  // Translations no compile used lately are dropped.
  for (auto it = cache.frags.begin(); it != cache.frags.end();)
    it = it->second->epoch + 8 < epoch ? cache.frags.erase(it) : std::next(it);

  CompiledDpi& d = *L.dpi;
  for (const FragPtr& f : frags) errors.insert(errors.end(), f->errors.begin(), f->errors.end());
  for (uint64_t h : src_hash) d.rules_hash = fnv(hexKey(h), d.rules_hash);
  d.compile_ms = hs_ms;
  d.translate_ms = translate_ms;
  d.sources_cached = cached_sources;
  d.shards_compiled = n_compiled;
  d.patterns_compiled = n_patterns;
  d.shards_loaded = n_loaded;
  d.shards_reused = n_reused;
  d.delta_patterns = n_delta;
  d.from_cache = !used_db.empty() && n_compiled == 0;
  d.cache_warning = cache_warning;
  for (size_t i = 0; i < used_db.size(); ++i) {
    DpiShard sh;
    sh.db = used_db[i];
    sh.delta = used_delta[i];
    sh.ids.assign(sh.db->patterns, DpiShard::kMasked);
    std::vector<bool> taken(sh.db->frag_hash.size(), false);
    for (uint32_t si : used_frags[i]) {
      if (i < used_subset.size()) {
        if (auto it = used_subset[i].find(si); it != used_subset[i].end()) {
          for (uint32_t t = 0; t < it->second.size(); ++t) sh.ids[it->second[t]] = L.frag_pat_begin[si] + t;
          sh.live += uint32_t(it->second.size());
          continue;
        }
      }
      for (size_t j = 0; j < sh.db->frag_hash.size(); ++j) {
        if (taken[j] || sh.db->frag_hash[j] != frags[si]->phash) continue;
        taken[j] = true;
        for (uint32_t t = 0; t < sh.db->frag_count[j]; ++t)
          sh.ids[sh.db->frag_begin[j] + t] = L.frag_pat_begin[si] + t;
        sh.live += sh.db->frag_count[j];
        break;
      }
    }
    d.shards.push_back(std::move(sh));
  }
  if (d.shards.size() == 1) {
    const DpiShard& sh = d.shards[0];
    bool identity = sh.ids.size() == d.patterns.size();
    for (size_t i = 0; identity && i < sh.ids.size(); ++i) identity = sh.ids[i] == i;
    if (identity) d.db = sh.db->db;
  }
  for (const ShardContent& c : pending) {
    cache.enqueue(CompileCache::Merge{c, K, model.cache_dir});
    ++d.merges_pending;
  }
  lock.unlock();

  d.buildEvalIndex();
  d.buildEmptyTable();
  if (!d.uses_filesize) {
    std::vector<uint8_t> ms(d.matchStateBytes(), 0);
    d.empty_hits.resize(d.rules.size());
    d.empty_hits.resize(d.evaluate(ms.data(), d.empty_hits.data(), uint32_t(d.empty_hits.size())));
  }
  for (const DpiShard& sh : d.shards) {
    if (hs_alloc_scratch(sh.db->db, &d.scratch_proto) != HS_SUCCESS) {
      errors.push_back({"dpi", "", -1, 0, "", "dpi", "hyperscan: cannot allocate scratch"});
      return errorsToStatus(errors);
    }
  }
  if (model.unsupported_fails) {
    for (const DpiUnsupported& u : d.unsupported)
      errors.push_back({"dpi", u.source + ":" + u.rule, -1, u.line, u.source, "dpi.unsupported_fails",
                        "rule unsupported: " + u.reason});
  }
  for (const DpiRuleAction& a : model.actions) {
    bool found = false;
    for (const DpiRule& r : d.rules) found |= (a.rule == r.name || a.rule == r.id());
    for (const DpiUnsupported& u : d.unsupported)
      found |= (a.rule == u.rule || a.rule == u.source + ":" + u.rule);
    if (!found)
      errors.push_back({"dpi", a.rule, -1, 0, "", "dpi.actions", "no such YARA rule"});
  }
  if (errors.size() > errors_before) return errorsToStatus(errors);
  // --- signatures --- compiled beside the YARA rules (the last set kept: an edit of the
  // YARA rules, or a merge's republish, does not compile them again).
  if (!model.signatures.sources.empty()) {
    static SigModel* last_model = new SigModel();  // under cache.mu; never destroyed (as the cache)
    static auto* last = new std::shared_ptr<const CompiledSignatures>();
    if (*last && *last_model == model.signatures) {
      L.dpi->sigs = *last;
    } else {
      SigClassification cls;
      SigCompileOptions so;
      so.vars = model.signatures.vars;
      so.body_limit = model.signatures.body_limit_bytes;
      so.body_buffers = model.signatures.body_buffers_per_worker;
      if (!model.signatures.classification_text.empty()) {
        auto c = parseClassification(model.signatures.classification_text,
                                     model.signatures.classification_name);
        if (!c.ok()) {
          errors.push_back({"dpi", "", -1, 0, model.signatures.classification_name,
                            "dpi.signatures.classification_file", std::string(c.status().message())});
          return errorsToStatus(errors);
        }
        cls = std::move(*c);
        so.classification = &cls;
      }
      so.compile_hyperscan = opt.compile_hyperscan;
      auto sg = compileSignatures(model.signatures.sources, so);
      if (!sg.ok()) {
        errors.push_back({"dpi", "", -1, 0, "", "dpi.signatures", std::string(sg.status().message())});
        return errorsToStatus(errors);
      }
      L.dpi->sigs = *sg;
      if (opt.compile_hyperscan) {
        *last_model = model.signatures;
        *last = *sg;
      }
    }
    if (model.unsupported_fails)
      for (const SigRefusal& r : L.dpi->sigs->refused)
        errors.push_back({"dpi", absl::StrCat("sid:", r.sid), -1, int(r.line), r.source,
                          "dpi.unsupported_fails", "signature refused: " + r.reason});
    if (errors.size() > errors_before) return errorsToStatus(errors);
  }
  return std::shared_ptr<const CompiledDpi>(L.dpi);
}

}  // namespace dpu::rules
