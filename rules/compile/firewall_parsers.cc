#include "rules/compile/firewall_parsers.h"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "rules/compile/file_read.h"
#include "rules/compile/firewall_compiler.h"

namespace dpu::rules {
namespace {

constexpr size_t kMaxRuleFileBytes = 64u << 20;   // a rule file larger than this is refused
constexpr size_t kMaxCidrFileBytes = 256u << 20;  // a CIDR list file larger than this too
constexpr size_t kMaxFileErrors = 100;            // syntax errors reported per file at most

// Debian's abseil has its own string_view (not std::string_view): convert at the edges.
absl::string_view A(std::string_view s) { return absl::string_view(s.data(), s.size()); }
std::string_view S(absl::string_view s) { return std::string_view(s.data(), s.size()); }
std::string_view trim(std::string_view s) { return S(absl::StripAsciiWhitespace(A(s))); }

// A UTF-8 byte order mark at the start of a file (editors on Windows write one) is not
// part of the first line.
std::string_view skipUtf8Bom(std::string_view text) {
  if (text.size() >= 3 && text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  return text;
}
std::string lower(std::string_view s) { return absl::AsciiStrToLower(A(s)); }

// Printable rendering of a user value inside quotes in a message.
std::string quoteValue(std::string_view s) {
  std::string out = "'";
  for (char c : s.substr(0, 80)) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      absl::StrAppend(&out, "\\x", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
    } else {
      out.push_back(c);
    }
  }
  if (s.size() > 80) out += "...";
  out += "'";
  return out;
}

std::string baseName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool allDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Error of one rule from a spec.
struct SpecErrors {
  const FirewallRuleSpec& spec;
  ConfigErrorList& out;
  size_t before = out.size();

  void add(RuleField f, std::string reason) const {
    ConfigError e;
    e.section = "firewall";
    e.rule = spec.id;
    e.index = spec.index;
    e.file = spec.file;
    e.line = spec.line;
    if (auto it = spec.field_lines.find(f); it != spec.field_lines.end() && it->second > 0) {
      e.line = it->second;
    }
    e.field = ruleFieldName(spec.syntax, spec.index, f);
    e.reason = std::move(reason);
    out.push_back(std::move(e));
  }
  bool any() const { return out.size() != before; }
};

// "any" alone means the empty list; mixed with other values it is an error.
bool isAny(std::string_view s) { return absl::EqualsIgnoreCase(A(s), "any"); }

}  // namespace

// ---- field names --------------------------------------------------------------------------

std::string ruleFieldName(RuleSyntax syntax, int index, RuleField field) {
  static const char* const kProto[] = {"id", "priority", "action", "direction", "protocols",
                                       "src", "dst", "src_ports", "dst_ports", "vlan",
                                       "src_countries", "dst_countries", "description", "",
                                       "tunnel_id"};
  static const char* const kText[] = {"id", "prio", "action", "dir", "protocol", "src", "dst",
                                      "src_port", "dst_port", "vlan", "src-country",
                                      "dst-country", "desc", "rule", "tunnel"};
  static const char* const kJson[] = {"id", "priority", "action", "direction", "protocol",
                                      "src_ip", "dst_ip", "src_port", "dst_port", "vlan",
                                      "src_country", "dst_country", "description", "",
                                      "tunnel_id"};
  const int f = static_cast<int>(field);
  switch (syntax) {
    case RuleSyntax::kText:
      return kText[f];
    case RuleSyntax::kJson: {
      std::string base = index >= 0 ? absl::StrCat("rules[", index, "]") : "rule";
      return field == RuleField::kRule ? base : absl::StrCat(base, ".", kJson[f]);
    }
    case RuleSyntax::kConfig:
    default: {
      std::string base =
          index >= 0 ? absl::StrCat("firewall.rules[", index, "]") : "firewall.rule";
      return field == RuleField::kRule ? base : absl::StrCat(base, ".", kProto[f]);
    }
  }
}

// ---- values -------------------------------------------------------------------------------

absl::StatusOr<IpPrefix> parseAddress(std::string_view text) {
  IpPrefix p;
  std::string s(text);
  if (s.find(':') != std::string::npos) {
    if (inet_pton(AF_INET6, s.c_str(), p.addr.data()) != 1) {
      return absl::InvalidArgumentError(absl::StrCat(quoteValue(text), " is not an IPv6 address"));
    }
    p.v6 = true;
    p.len = 128;
    return p;
  }
  if (inet_pton(AF_INET, s.c_str(), p.addr.data()) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(quoteValue(text), " is not an IPv4 or IPv6 address"));
  }
  p.len = 32;
  return p;
}

IpPrefix maskPrefix(IpPrefix p) {
  const int bits = p.v6 ? 128 : 32;
  for (int i = 0; i < 16; ++i) {
    int lo = i * 8;
    if (lo >= bits) {
      p.addr[i] = 0;
    } else if (lo + 8 > p.len) {
      int keep = p.len > lo ? p.len - lo : 0;
      p.addr[i] &= static_cast<uint8_t>(keep == 0 ? 0 : 0xff << (8 - keep));
    }
  }
  return p;
}

bool prefixHasHostBits(const IpPrefix& p) { return maskPrefix(p).addr != p.addr; }

std::string formatPrefix(const IpPrefix& p, bool bare_hosts) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(p.v6 ? AF_INET6 : AF_INET, p.addr.data(), buf, sizeof(buf));
  if (bare_hosts && p.len == (p.v6 ? 128 : 32)) return buf;
  return absl::StrCat(buf, "/", p.len);
}

absl::StatusOr<IpPrefix> parsePrefix(std::string_view text) {
  std::string_view t = trim(text);
  if (t.empty()) return absl::InvalidArgumentError("empty prefix");
  size_t slash = t.find('/');
  auto addr = parseAddress(t.substr(0, slash));
  if (!addr.ok()) {
    if (slash == std::string_view::npos) return addr.status();
    return absl::InvalidArgumentError(
        absl::StrCat(quoteValue(t), " is not a prefix: ", addr.status().message()));
  }
  IpPrefix p = *addr;
  if (slash != std::string_view::npos) {
    std::string_view len = t.substr(slash + 1);
    uint32_t n = 0;
    const uint32_t max = p.v6 ? 128 : 32;
    if (!allDigits(len) || len.size() > 3 || !absl::SimpleAtoi(A(len), &n) || n > max) {
      return absl::InvalidArgumentError(absl::StrCat(quoteValue(t), ": prefix length ",
                                                     quoteValue(len), " is not in 0..", max));
    }
    p.len = static_cast<uint8_t>(n);
  }
  if (prefixHasHostBits(p)) {
    return absl::InvalidArgumentError(absl::StrCat(A(t), " has host bits set (did you mean ",
                                                   formatPrefix(maskPrefix(p)), "?)"));
  }
  return p;
}

namespace {
struct ProtoName {
  const char* name;
  uint8_t proto;
};
constexpr ProtoName kProtoNames[] = {{"icmp", 1},   {"tcp", 6},        {"udp", 17},
                                     {"gre", 47},   {"icmpv6", 58},    {"ipv6-icmp", 58},
                                     {"sctp", 132}};
}  // namespace

absl::StatusOr<uint8_t> parseProtocol(std::string_view text) {
  std::string t = lower(trim(text));
  for (const ProtoName& p : kProtoNames) {
    if (t == p.name) return p.proto;
  }
  uint32_t n = 0;
  if (allDigits(t) && t.size() <= 3 && absl::SimpleAtoi(t, &n) && n <= 255) {
    return static_cast<uint8_t>(n);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      quoteValue(text), " is not a protocol (tcp, udp, icmp, icmpv6, sctp, gre or 0..255)"));
}

std::string protocolName(uint8_t proto) {
  for (const ProtoName& p : kProtoNames) {
    if (p.proto == proto) return p.name;
  }
  return absl::StrCat(proto);
}

absl::StatusOr<PortRange> parsePortRange(std::string_view text) {
  std::string_view t = trim(text);
  auto port = [&](std::string_view s, uint16_t* out) {
    uint32_t n = 0;
    if (!allDigits(s) || s.size() > 5 || !absl::SimpleAtoi(A(s), &n) || n > 65535) return false;
    *out = static_cast<uint16_t>(n);
    return true;
  };
  PortRange r;
  size_t dash = t.find('-');
  if (dash == std::string_view::npos) {
    if (!port(t, &r.lo)) {
      return absl::InvalidArgumentError(
          absl::StrCat(quoteValue(t), " is not a port (0..65535) or a range (1024-65535)"));
    }
    r.hi = r.lo;
    return r;
  }
  if (!port(t.substr(0, dash), &r.lo) || !port(t.substr(dash + 1), &r.hi)) {
    return absl::InvalidArgumentError(
        absl::StrCat(quoteValue(t), " is not a port (0..65535) or a range (1024-65535)"));
  }
  if (r.lo > r.hi) {
    return absl::InvalidArgumentError(
        absl::StrCat("port range ", A(t), ": low end ", r.lo, " is above high end ", r.hi));
  }
  return r;
}

std::string formatPortRange(const PortRange& r) {
  return r.lo == r.hi ? absl::StrCat(r.lo) : absl::StrCat(r.lo, "-", r.hi);
}

absl::StatusOr<CountryCode> parseCountry(std::string_view text) {
  std::string_view t = trim(text);
  if (t.size() != 2 || t[0] < 'A' || t[0] > 'Z' || t[1] < 'A' || t[1] > 'Z') {
    return absl::InvalidArgumentError(absl::StrCat(
        quoteValue(t), " is not an ISO 3166-1 alpha-2 country code (two upper-case letters, e.g. US)"));
  }
  return CountryCode{t[0], t[1]};
}

std::string countryString(const CountryCode& cc) { return std::string(cc.data(), 2); }

absl::StatusOr<FwAction> parseAction(std::string_view text) {
  std::string t = lower(trim(text));
  if (t == "allow") return FwAction::kAllow;
  if (t == "deny") return FwAction::kDeny;
  if (t == "reject") return FwAction::kReject;
  return absl::InvalidArgumentError(
      absl::StrCat(quoteValue(text), " is not an action (allow, deny or reject)"));
}

const char* actionName(FwAction a) {
  switch (a) {
    case FwAction::kAllow: return "allow";
    case FwAction::kDeny: return "deny";
    case FwAction::kReject: return "reject";
  }
  return "?";
}

absl::StatusOr<FwDirection> parseDirection(std::string_view text) {
  std::string t = lower(trim(text));
  if (t == "both") return FwDirection::kBoth;
  if (t == "a->b" || t == "a_to_b" || t == "a2b") return FwDirection::kAtoB;
  if (t == "b->a" || t == "b_to_a" || t == "b2a") return FwDirection::kBtoA;
  return absl::InvalidArgumentError(
      absl::StrCat(quoteValue(text), " is not a direction (a->b, b->a or both)"));
}

const char* directionName(FwDirection d) {
  switch (d) {
    case FwDirection::kBoth: return "both";
    case FwDirection::kAtoB: return "a->b";
    case FwDirection::kBtoA: return "b->a";
  }
  return "?";
}

absl::Status checkRuleId(std::string_view id) {
  if (id.empty()) return absl::InvalidArgumentError("required (a unique name for the rule)");
  if (id.size() > 128) {
    return absl::InvalidArgumentError(absl::StrCat("longer than 128 characters (", id.size(), ")"));
  }
  for (char c : id) {
    if (c <= 0x20 || c >= 0x7f || c == ',' || c == '"') {
      return absl::InvalidArgumentError(
          absl::StrCat(quoteValue(id),
                       ": ids are printable characters without spaces, ',' or '\"'"));
    }
  }
  if (id[0] == '#') {
    return absl::InvalidArgumentError(absl::StrCat(quoteValue(id), ": ids cannot start with '#'"));
  }
  return absl::OkStatus();
}

absl::Status checkSetName(std::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("required (referenced as @name)");
  if (name.size() > 64) return absl::InvalidArgumentError("longer than 64 characters");
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') {
      return absl::InvalidArgumentError(
          absl::StrCat(quoteValue(name), ": set names are letters, digits, '_', '-' and '.'"));
    }
  }
  return absl::OkStatus();
}

// ---- text format --------------------------------------------------------------------------

namespace {

struct Token {
  std::string text;
  bool quoted = false;
};

// What separates words: every ASCII space character, the same set trim() strips from a list
// item. (Found by the fwrules fuzz target: a form feed before a quoted word kept the quote in
// a bare word, trim() then dropped the form feed, and the formatted line held a quoted value
// where only desc takes one.)
bool isSeparator(char c) { return absl::ascii_isspace(static_cast<unsigned char>(c)); }

// Splits a line into words; "..." is one word (\" and \\ escape); '#' at the start of a word
// ends the line. Returns false (with a reason) on an unterminated quote.
bool tokenize(std::string_view line, std::vector<Token>* out, std::string* err) {
  size_t i = 0;
  while (i < line.size()) {
    char c = line[i];
    if (isSeparator(c)) {
      ++i;
      continue;
    }
    if (c == '#') break;
    Token t;
    if (c == '"') {
      t.quoted = true;
      ++i;
      bool closed = false;
      while (i < line.size()) {
        char d = line[i++];
        if (d == '\\' && i < line.size() && (line[i] == '"' || line[i] == '\\')) {
          t.text.push_back(line[i++]);
        } else if (d == '"') {
          closed = true;
          break;
        } else {
          t.text.push_back(d);
        }
      }
      if (!closed) {
        *err = "unterminated quoted string";
        return false;
      }
      if (i < line.size() && !isSeparator(line[i])) {
        *err = "a quoted string must be followed by a space";
        return false;
      }
    } else {
      while (i < line.size() && !isSeparator(line[i])) {
        t.text.push_back(line[i++]);
      }
    }
    out->push_back(std::move(t));
  }
  return true;
}

// A comma-separated list ("any" = empty). Empty items are an error.
bool splitList(std::string_view s, std::vector<std::string>* out, std::string* err) {
  std::vector<std::string> items;
  for (absl::string_view part : absl::StrSplit(A(s), ',')) {
    std::string_view p = trim(S(part));
    if (p.empty()) {
      *err = absl::StrCat(quoteValue(s), ": empty item in a comma-separated list");
      return false;
    }
    items.emplace_back(p);
  }
  bool any = std::any_of(items.begin(), items.end(), [](const std::string& x) { return isAny(x); });
  if (any && items.size() > 1) {
    *err = absl::StrCat(quoteValue(s), ": 'any' cannot be combined with other values");
    return false;
  }
  if (!any) out->insert(out->end(), items.begin(), items.end());
  return true;
}

// A word the format writes bare, given in quotes: fine unless it holds what a bare word
// cannot (whitespace, a quote, a leading '#'); formatTextRule could not write such a value
// back, and no field but desc takes one. (Found by the fwrules fuzz target: a quoted
// `"quoted \"x\""` as the destination ports parsed, and its formatted line did not.)
bool bareWordOk(const Token& t, std::string* err) {
  if (!t.quoted) return true;
  if ((!t.text.empty() && t.text[0] == '#') || t.text.find('"') != std::string::npos ||
      std::any_of(t.text.begin(), t.text.end(), isSeparator)) {
    *err = absl::StrCat(quoteValue(t.text),
                        ": only desc takes a quoted text; this value cannot hold spaces, quotes "
                        "or a leading '#'");
    return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<FirewallRuleSpec> parseTextRule(std::string_view text, const std::string& file,
                                               int line, ConfigErrorList* errors) {
  FirewallRuleSpec spec;
  spec.syntax = RuleSyntax::kText;
  spec.file = file;
  spec.line = line;
  ConfigErrorList local;
  SpecErrors errs{spec, local};
  auto finish = [&]() -> absl::StatusOr<FirewallRuleSpec> {
    if (errors) errors->insert(errors->end(), local.begin(), local.end());
    if (!local.empty()) return errorsToStatus(local);
    return spec;
  };

  // Without an id option: "<file name>:<line>" (none without a file).
  if (!file.empty() && line > 0) spec.id = absl::StrCat(baseName(file), ":", line);
  std::vector<Token> tok;
  std::string err;
  if (!tokenize(text, &tok, &err)) {
    errs.add(RuleField::kRule, err);
    return finish();
  }
  // The id first, so that every other error names the rule.
  for (size_t i = 7; i + 1 < tok.size(); ++i) {
    if (!tok[i].quoted && lower(tok[i].text) == "id") {
      spec.id = tok[i + 1].text;
      break;
    }
  }
  if (tok.size() < 7 || tok[4].text != "->") {
    std::string got;
    for (size_t i = 0; i < tok.size() && i < 8; ++i) absl::StrAppend(&got, i ? " " : "", tok[i].text);
    errs.add(RuleField::kRule,
             tok.empty()
                 ? std::string("empty rule: expected 'ACTION PROTO SRC SPORT -> DST DPORT "
                               "[options]'")
                 : absl::StrCat("expected 'ACTION PROTO SRC SPORT -> DST DPORT [options]', got ",
                                quoteValue(got)));
    return finish();
  }
  if (auto a = parseAction(tok[0].text); a.ok()) {
    spec.action = *a;
  } else {
    errs.add(RuleField::kAction, std::string(a.status().message()));
  }
  struct ListField {
    size_t pos;
    RuleField field;
    std::vector<std::string>* out;
  };
  for (const ListField& lf : {ListField{1, RuleField::kProtocols, &spec.protocols},
                              ListField{2, RuleField::kSrc, &spec.src},
                              ListField{3, RuleField::kSrcPorts, &spec.src_ports},
                              ListField{5, RuleField::kDst, &spec.dst},
                              ListField{6, RuleField::kDstPorts, &spec.dst_ports}}) {
    if (!bareWordOk(tok[lf.pos], &err) || !splitList(tok[lf.pos].text, lf.out, &err)) {
      errs.add(lf.field, err);
    }
  }
  std::set<std::string> seen;
  for (size_t i = 7; i < tok.size(); i += 2) {
    std::string key = lower(tok[i].text);
    if (key == "priority") key = "prio";
    if (key == "direction") key = "dir";
    if (key == "description") key = "desc";
    static const std::set<std::string> kKnown = {"prio", "id", "dir", "vlan", "tunnel",
                                                 "src-country", "dst-country", "desc"};
    if (tok[i].quoted || !kKnown.count(key)) {
      errs.add(RuleField::kRule,
               absl::StrCat("unknown option ", quoteValue(tok[i].text),
                            " (options: prio N, id ID, dir a->b|b->a|both, vlan N, tunnel N, "
                            "src-country CC,.., dst-country CC,.., desc \"text\")"));
      break;
    }
    RuleField field = key == "prio"          ? RuleField::kPriority
                      : key == "id"          ? RuleField::kId
                      : key == "dir"         ? RuleField::kDirection
                      : key == "vlan"        ? RuleField::kVlan
                      : key == "tunnel"      ? RuleField::kTunnelId
                      : key == "src-country" ? RuleField::kSrcCountries
                      : key == "dst-country" ? RuleField::kDstCountries
                                             : RuleField::kDescription;
    if (i + 1 >= tok.size()) {
      errs.add(field, absl::StrCat("'", key, "' needs a value"));
      break;
    }
    if (!seen.insert(key).second) {
      errs.add(field, absl::StrCat("'", key, "' is given more than once"));
      continue;
    }
    const std::string& v = tok[i + 1].text;
    if (field != RuleField::kDescription && !bareWordOk(tok[i + 1], &err)) {
      errs.add(field, err);
      continue;
    }
    if (field == RuleField::kPriority) {
      int32_t n = 0;
      if (!absl::SimpleAtoi(v, &n)) {
        errs.add(field, absl::StrCat(quoteValue(v), " is not a priority (an integer, lower first)"));
      }
      spec.priority = n;
    } else if (field == RuleField::kId) {
      spec.id = v;
    } else if (field == RuleField::kDirection) {
      if (auto d = parseDirection(v); d.ok()) {
        spec.direction = *d;
      } else {
        errs.add(field, std::string(d.status().message()));
      }
    } else if (field == RuleField::kVlan) {
      uint32_t n = 0;
      if (!allDigits(v) || !absl::SimpleAtoi(v, &n)) {
        errs.add(field, absl::StrCat(quoteValue(v), " is not a VLAN id (0..4095)"));
      } else {
        spec.vlan = n;
      }
    } else if (field == RuleField::kTunnelId) {
      uint64_t n = 0;
      if (!allDigits(v) || v.size() > 12 || !absl::SimpleAtoi(v, &n)) {
        errs.add(field, absl::StrCat(quoteValue(v), " is not a tunnel id (0..4294967295)"));
      } else {
        spec.tunnel_id = n;
      }
    } else if (field == RuleField::kSrcCountries || field == RuleField::kDstCountries) {
      auto* out = field == RuleField::kSrcCountries ? &spec.src_countries : &spec.dst_countries;
      if (!splitList(v, out, &err)) errs.add(field, err);
    } else {
      spec.description = v;
    }
  }
  // Errors found before the id option was read name the rule too.
  for (ConfigError& e : local) e.rule = spec.id;
  return finish();
}

absl::StatusOr<std::vector<FirewallRuleSpec>> parseTextRules(std::string_view text,
                                                             const std::string& file,
                                                             ConfigErrorList* errors) {
  text = skipUtf8Bom(text);
  std::vector<FirewallRuleSpec> out;
  ConfigErrorList local;
  int line_no = 0;
  for (absl::string_view line_a : absl::StrSplit(A(text), '\n')) {
    std::string_view line = S(line_a);
    ++line_no;
    std::vector<Token> tok;
    std::string err;
    if (tokenize(line, &tok, &err) && tok.empty()) continue;  // blank or comment
    auto spec = parseTextRule(line, file, line_no, &local);
    if (!spec.ok()) {
      if (local.size() >= kMaxFileErrors) {
        ConfigError e;
        e.section = "firewall";
        e.file = file;
        e.line = line_no;
        e.field = "rule";
        e.reason = absl::StrCat("more than ", kMaxFileErrors,
                                " errors: the rest of the file is not checked (is it a rule file?)");
        local.push_back(std::move(e));
        break;
      }
      continue;
    }
    spec->index = static_cast<int>(out.size());
    out.push_back(std::move(*spec));
  }
  // Index the errors like the rules (position among the file's rules).
  if (errors) errors->insert(errors->end(), local.begin(), local.end());
  if (!local.empty()) return errorsToStatus(local);
  return out;
}

std::string formatTextRule(const FirewallRuleSpec& s) {
  auto list = [](const std::vector<std::string>& v) {
    return v.empty() ? std::string("any") : absl::StrJoin(v, ",");
  };
  std::string out = absl::StrCat(actionName(s.action.value_or(FwAction::kDeny)), " ",
                                 list(s.protocols), " ", list(s.src), " ", list(s.src_ports),
                                 " -> ", list(s.dst), " ", list(s.dst_ports));
  if (s.priority != 0) absl::StrAppend(&out, " prio ", s.priority);
  if (!s.id.empty()) absl::StrAppend(&out, " id ", s.id);
  if (s.direction != FwDirection::kBoth) absl::StrAppend(&out, " dir ", directionName(s.direction));
  if (s.vlan) absl::StrAppend(&out, " vlan ", *s.vlan);
  if (s.tunnel_id) absl::StrAppend(&out, " tunnel ", *s.tunnel_id);
  if (!s.src_countries.empty()) absl::StrAppend(&out, " src-country ", list(s.src_countries));
  if (!s.dst_countries.empty()) absl::StrAppend(&out, " dst-country ", list(s.dst_countries));
  if (!s.description.empty()) {
    std::string d;
    for (char c : s.description) {
      if (c == '"' || c == '\\') d.push_back('\\');
      d.push_back(c == '\n' || c == '\r' ? ' ' : c);
    }
    absl::StrAppend(&out, " desc \"", d, "\"");
  }
  return out;
}

// ---- JSON format --------------------------------------------------------------------------

namespace {

using Json = nlohmann::json;

// Input iterator over the text that publishes how many characters the JSON lexer has read,
// so the parser callback knows where it is (line numbers for rules and keys).
class CountingIter {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  CountingIter(const char* p, const char* base, size_t* consumed)
      : p_(p), base_(base), consumed_(consumed) {}
  reference operator*() const { return *p_; }
  CountingIter& operator++() {
    ++p_;
    *consumed_ = static_cast<size_t>(p_ - base_);
    return *this;
  }
  CountingIter operator++(int) {
    CountingIter t = *this;
    ++*this;
    return t;
  }
  bool operator==(const CountingIter& o) const { return p_ == o.p_; }
  bool operator!=(const CountingIter& o) const { return p_ != o.p_; }

 private:
  const char* p_;
  const char* base_;
  size_t* consumed_;
};

class LineIndex {
 public:
  explicit LineIndex(std::string_view text) {
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\n') nl_.push_back(i);
    }
  }
  // 1-based line of byte offset `pos`.
  int lineOf(size_t pos) const {
    return 1 + static_cast<int>(std::lower_bound(nl_.begin(), nl_.end(), pos) - nl_.begin());
  }

 private:
  std::vector<size_t> nl_;
};

struct JsonRuleLines {
  int line = 0;
  std::map<std::string, int> keys;
  std::vector<std::pair<std::string, int>> duplicates;
};

const std::map<std::string, RuleField>& jsonKeys() {
  static const std::map<std::string, RuleField> k = {
      {"id", RuleField::kId},
      {"priority", RuleField::kPriority},
      {"action", RuleField::kAction},
      {"direction", RuleField::kDirection},
      {"protocol", RuleField::kProtocols},
      {"src_ip", RuleField::kSrc},
      {"dst_ip", RuleField::kDst},
      {"src_port", RuleField::kSrcPorts},
      {"dst_port", RuleField::kDstPorts},
      {"vlan", RuleField::kVlan},
      {"tunnel_id", RuleField::kTunnelId},
      {"src_country", RuleField::kSrcCountries},
      {"dst_country", RuleField::kDstCountries},
      {"description", RuleField::kDescription},
  };
  return k;
}

std::string jsonTypeName(const Json& v) { return v.type_name(); }

// A string (comma-separated), a number (when numbers are allowed) or an array of those.
bool jsonList(const Json& v, bool numbers_ok, std::vector<std::string>* out, std::string* err) {
  auto one = [&](const Json& x) {
    if (x.is_string()) return splitList(x.get<std::string>(), out, err);
    if (numbers_ok && x.is_number_integer()) {
      out->push_back(x.is_number_unsigned() ? absl::StrCat(x.get<uint64_t>())
                                            : absl::StrCat(x.get<int64_t>()));
      return true;
    }
    *err = absl::StrCat("expected a string", numbers_ok ? ", an integer" : "",
                        " or an array of those, got ", jsonTypeName(x), " ", x.dump());
    return false;
  };
  if (v.is_array()) {
    for (const Json& x : v) {
      if (x.is_array()) {
        *err = "nested arrays are not allowed";
        return false;
      }
      if (!one(x)) return false;
    }
    return true;
  }
  return one(v);
}

}  // namespace

absl::StatusOr<std::vector<FirewallRuleSpec>> parseJsonRules(std::string_view text,
                                                             const std::string& file,
                                                             ConfigErrorList* errors) {
  text = skipUtf8Bom(text);
  ConfigErrorList local;
  auto fileError = [&](int line, std::string field, std::string reason) {
    ConfigError e;
    e.section = "firewall";
    e.file = file;
    e.line = line;
    e.field = std::move(field);
    e.reason = std::move(reason);
    local.push_back(std::move(e));
  };
  auto finish = [&](std::vector<FirewallRuleSpec> out)
      -> absl::StatusOr<std::vector<FirewallRuleSpec>> {
    if (errors) errors->insert(errors->end(), local.begin(), local.end());
    if (!local.empty()) return errorsToStatus(local);
    return out;
  };

  LineIndex lines(text);
  size_t consumed = 0;
  int rule_depth = -1;
  std::string top_key;
  std::vector<JsonRuleLines> rule_lines;
  auto cb = [&](int depth, Json::parse_event_t ev, Json& parsed) -> bool {
    const int line = lines.lineOf(consumed > 0 ? consumed - 1 : 0);
    switch (ev) {
      case Json::parse_event_t::array_start:
        if (depth == 0) rule_depth = 1;
        if (depth == 1 && top_key == "rules" && rule_depth < 0) rule_depth = 2;
        break;
      case Json::parse_event_t::object_start:
        if (depth == rule_depth) rule_lines.push_back(JsonRuleLines{line, {}, {}});
        break;
      case Json::parse_event_t::key:
        if (depth == 1 && rule_depth < 0) top_key = parsed.is_string() ? parsed.get<std::string>() : "";
        if (depth == rule_depth + 1 && !rule_lines.empty() && parsed.is_string()) {
          std::string k = parsed.get<std::string>();
          auto& r = rule_lines.back();
          if (!r.keys.emplace(k, line).second) r.duplicates.emplace_back(k, line);
        }
        break;
      default:
        break;
    }
    return true;
  };
  Json doc;
  try {
    std::string_view body = text;
    CountingIter first(body.data(), body.data(), &consumed);
    CountingIter last(body.data() + body.size(), body.data(), &consumed);
    doc = Json::parse(first, last, cb, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const Json::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 3, column 5: ..." -> the part
    // after the bracketed id.
    std::string msg = e.what();
    if (size_t close = msg.find("] "); msg.rfind("[json.exception", 0) == 0 &&
                                       close != std::string::npos) {
      msg = msg.substr(close + 2);
    }
    fileError(lines.lineOf(consumed > 0 ? consumed - 1 : 0), "json", std::move(msg));
    return finish({});
  }

  const Json* list = nullptr;
  if (doc.is_array()) {
    list = &doc;
  } else if (doc.is_object()) {
    for (auto it = doc.begin(); it != doc.end(); ++it) {
      if (it.key() != "rules") {
        fileError(1, it.key(), "unknown key (a rule file is {\"rules\": [...]} or [...])");
      }
    }
    auto it = doc.find("rules");
    if (it == doc.end()) {
      fileError(1, "rules", "missing: a rule file is {\"rules\": [...]} or [...]");
    } else if (!it->is_array()) {
      fileError(1, "rules", absl::StrCat("expected an array, got ", jsonTypeName(*it)));
    } else {
      list = &*it;
    }
  } else {
    fileError(1, "json", absl::StrCat("expected {\"rules\": [...]} or [...], got ",
                                      jsonTypeName(doc)));
  }
  std::vector<FirewallRuleSpec> out;
  if (!list) return finish({});

  size_t obj_i = 0;  // index into rule_lines (objects only)
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& r = (*list)[i];
    const int idx = static_cast<int>(i);
    if (!r.is_object()) {
      fileError(0, absl::StrCat("rules[", idx, "]"),
                absl::StrCat("expected an object, got ", jsonTypeName(r)));
      continue;
    }
    const JsonRuleLines* rl = obj_i < rule_lines.size() ? &rule_lines[obj_i] : nullptr;
    ++obj_i;
    FirewallRuleSpec spec;
    spec.syntax = RuleSyntax::kJson;
    spec.file = file;
    spec.index = idx;
    spec.line = rl ? rl->line : 0;
    spec.action = FwAction::kDeny;  // DOCA firewall rules are drop rules
    // The id first, so that every other error names it.
    if (auto it = r.find("id"); it != r.end()) {
      if (it->is_string()) spec.id = it->get<std::string>();
      else if (it->is_number_integer()) spec.id = it->dump();
    } else if (!file.empty()) {
      spec.id = absl::StrCat(baseName(file), "#", idx + 1);
    }
    const auto& keys = jsonKeys();
    if (rl) {
      for (const auto& [k, line] : rl->keys) {
        if (auto f = keys.find(k); f != keys.end()) spec.field_lines[f->second] = line;
      }
    }
    SpecErrors errs{spec, local};
    if (rl) {
      for (const auto& [k, line] : rl->duplicates) {
        ConfigError e;
        e.section = "firewall";
        e.rule = spec.id;
        e.index = idx;
        e.file = file;
        e.line = line;
        e.field = absl::StrCat("rules[", idx, "].", k);
        e.reason = "key given more than once";
        local.push_back(std::move(e));
      }
    }
    for (auto it = r.begin(); it != r.end(); ++it) {
      const std::string& k = it.key();
      const Json& v = it.value();
      auto f = keys.find(k);
      if (f == keys.end()) {
        ConfigError e;
        e.section = "firewall";
        e.rule = spec.id;
        e.index = idx;
        e.file = file;
        e.line = rl && rl->keys.count(k) ? rl->keys.at(k) : spec.line;
        e.field = absl::StrCat("rules[", idx, "].", k);
        std::vector<std::string> known;
        for (const auto& [name, unused] : keys) known.push_back(name);
        e.reason = absl::StrCat("unknown key (known: ", absl::StrJoin(known, ", "), ")");
        local.push_back(std::move(e));
        continue;
      }
      const RuleField field = f->second;
      std::string err;
      switch (field) {
        case RuleField::kId:
          if (!v.is_string() && !v.is_number_integer()) {
            errs.add(field, absl::StrCat("expected a string, got ", jsonTypeName(v)));
          }
          break;
        case RuleField::kPriority:
          if (!v.is_number_integer() ||
              (v.is_number_unsigned() ? v.get<uint64_t>() > INT32_MAX
                                      : (v.get<int64_t>() < INT32_MIN || v.get<int64_t>() > INT32_MAX))) {
            errs.add(field, absl::StrCat("expected an integer (int32), got ", v.dump()));
          } else {
            spec.priority = static_cast<int32_t>(v.get<int64_t>());
          }
          break;
        case RuleField::kAction:
        case RuleField::kDirection:
          if (!v.is_string()) {
            errs.add(field, absl::StrCat("expected a string, got ", jsonTypeName(v)));
          } else if (field == RuleField::kAction) {
            if (auto a = parseAction(v.get<std::string>()); a.ok()) spec.action = *a;
            else errs.add(field, std::string(a.status().message()));
          } else {
            if (auto d = parseDirection(v.get<std::string>()); d.ok()) spec.direction = *d;
            else errs.add(field, std::string(d.status().message()));
          }
          break;
        case RuleField::kVlan:
          if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0)) {
            errs.add(field, absl::StrCat("expected an integer 0..4095, got ", v.dump()));
          } else {
            uint64_t n = v.get<uint64_t>();
            spec.vlan = static_cast<uint32_t>(std::min<uint64_t>(n, UINT32_MAX));
          }
          break;
        case RuleField::kTunnelId:
          if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0)) {
            errs.add(field, absl::StrCat("expected an integer 0..4294967295, got ", v.dump()));
          } else {
            spec.tunnel_id = v.get<uint64_t>();
          }
          break;
        case RuleField::kDescription:
          if (!v.is_string()) errs.add(field, absl::StrCat("expected a string, got ", jsonTypeName(v)));
          else spec.description = v.get<std::string>();
          break;
        default: {
          std::vector<std::string>* outl =
              field == RuleField::kProtocols      ? &spec.protocols
              : field == RuleField::kSrc          ? &spec.src
              : field == RuleField::kDst          ? &spec.dst
              : field == RuleField::kSrcPorts     ? &spec.src_ports
              : field == RuleField::kDstPorts     ? &spec.dst_ports
              : field == RuleField::kSrcCountries ? &spec.src_countries
                                                  : &spec.dst_countries;
          bool numbers = field == RuleField::kProtocols || field == RuleField::kSrcPorts ||
                         field == RuleField::kDstPorts;
          if (!jsonList(v, numbers, outl, &err)) errs.add(field, err);
        }
      }
    }
    out.push_back(std::move(spec));
  }
  return finish(std::move(out));
}

bool isJsonRuleFile(std::string_view path) {
  return absl::EndsWithIgnoreCase(A(path), ".json");
}

absl::StatusOr<std::vector<FirewallRuleSpec>> loadRuleFile(const std::string& path,
                                                           ConfigErrorList* errors,
                                                           const std::string& field) {
  auto data = readRegularFile(path, kMaxRuleFileBytes);
  if (!data.ok()) {
    if (errors) {
      ConfigError e;
      e.section = "firewall";
      e.file = path;
      e.field = field.empty() ? "rule_files" : field;
      e.reason = std::string(data.status().message());
      if (absl::StartsWith(e.reason, path + ": ")) e.reason = e.reason.substr(path.size() + 2);
      errors->push_back(std::move(e));
    }
    return data.status();
  }
  return isJsonRuleFile(path) ? parseJsonRules(*data, path, errors)
                              : parseTextRules(*data, path, errors);
}

// ---- CIDR lists ---------------------------------------------------------------------------

absl::StatusOr<std::vector<IpPrefix>> parseCidrList(std::string_view text,
                                                    const std::string& file,
                                                    const std::string& set,
                                                    ConfigErrorList* errors) {
  text = skipUtf8Bom(text);
  std::vector<IpPrefix> out;
  ConfigErrorList local;
  int line_no = 0;
  for (absl::string_view line_a : absl::StrSplit(A(text), '\n')) {
    std::string_view line = S(line_a);
    ++line_no;
    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = trim(line);
    if (line.empty()) continue;
    auto p = parsePrefix(line);
    if (!p.ok()) {
      ConfigError e;
      e.section = "firewall";
      e.rule = set;
      e.file = file;
      e.line = line_no;
      e.field = "prefix";
      e.reason = std::string(p.status().message());
      local.push_back(std::move(e));
      if (local.size() >= kMaxFileErrors) break;  // a file of garbage: enough to see what is wrong
      continue;
    }
    out.push_back(*p);
  }
  if (errors) errors->insert(errors->end(), local.begin(), local.end());
  if (!local.empty()) return errorsToStatus(local);
  return out;
}

absl::StatusOr<std::vector<IpPrefix>> loadCidrListFile(const std::string& path,
                                                       const std::string& set,
                                                       ConfigErrorList* errors,
                                                       const std::string& field) {
  auto data = readRegularFile(path, kMaxCidrFileBytes);
  if (!data.ok()) {
    if (errors) {
      ConfigError e;
      e.section = "firewall";
      e.rule = set;
      e.file = path;
      e.field = field.empty() ? "file" : field;
      e.reason = std::string(data.status().message());
      if (absl::StartsWith(e.reason, path + ": ")) e.reason = e.reason.substr(path.size() + 2);
      errors->push_back(std::move(e));
    }
    return data.status();
  }
  return parseCidrList(*data, path, set, errors);
}

// ---- to the model -------------------------------------------------------------------------

std::optional<FirewallRule> convertRuleSpec(const FirewallRuleSpec& spec, const IpSetTable& sets,
                                            bool geoip_configured, ConfigErrorList& errors) {
  SpecErrors errs{spec, errors};
  FirewallRule r;
  r.id = spec.id;
  r.priority = spec.priority;
  r.direction = spec.direction;
  r.description = spec.description;
  r.file = spec.file;
  r.line = spec.line;
  if (spec.action) {
    r.action = *spec.action;
  } else {
    errs.add(RuleField::kAction, "required: allow, deny or reject");
  }

  auto anyList = [&](RuleField f, const std::vector<std::string>& in) {
    // "any" is accepted alone (the empty list).
    if (in.size() == 1 && isAny(in[0])) return true;
    if (std::any_of(in.begin(), in.end(), [](const std::string& s) { return isAny(s); })) {
      errs.add(f, "'any' cannot be combined with other values");
      return true;
    }
    return false;
  };

  if (!anyList(RuleField::kProtocols, spec.protocols)) {
    for (const std::string& s : spec.protocols) {
      auto p = parseProtocol(s);
      if (!p.ok()) {
        errs.add(RuleField::kProtocols, std::string(p.status().message()));
      } else if (std::find(r.protocols.begin(), r.protocols.end(), *p) == r.protocols.end()) {
        r.protocols.push_back(*p);
      }
    }
  }
  auto addrs = [&](RuleField f, const std::vector<std::string>& in, std::vector<IpPrefix>* out) {
    if (anyList(f, in)) return;
    for (const std::string& s : in) {
      if (!s.empty() && s[0] == '@') {
        auto it = sets.find(std::string_view(s).substr(1));
        if (it == sets.end()) {
          std::vector<std::string> names;
          for (const auto& [name, unused] : sets) names.push_back("@" + name);
          errs.add(f, absl::StrCat("unknown IP set ", quoteValue(s),
                                   names.empty() ? " (no firewall.ip_sets are defined)"
                                                 : absl::StrCat(" (defined: ",
                                                                absl::StrJoin(names, ", "), ")")));
          continue;
        }
        out->insert(out->end(), it->second.begin(), it->second.end());
        continue;
      }
      auto p = parsePrefix(s);
      if (!p.ok()) {
        errs.add(f, std::string(p.status().message()));
      } else {
        out->push_back(*p);
      }
    }
  };
  addrs(RuleField::kSrc, spec.src, &r.src);
  addrs(RuleField::kDst, spec.dst, &r.dst);
  auto ports = [&](RuleField f, const std::vector<std::string>& in, std::vector<PortRange>* out) {
    if (anyList(f, in)) return;
    for (const std::string& s : in) {
      auto p = parsePortRange(s);
      if (!p.ok()) errs.add(f, std::string(p.status().message()));
      else out->push_back(*p);
    }
  };
  ports(RuleField::kSrcPorts, spec.src_ports, &r.src_ports);
  ports(RuleField::kDstPorts, spec.dst_ports, &r.dst_ports);
  if (spec.tunnel_id) {
    if (*spec.tunnel_id > 0xffffffffull) {
      errs.add(RuleField::kTunnelId,
               absl::StrCat(*spec.tunnel_id, " is out of range [0, 4294967295]"));
    } else {
      r.tunnel_id = static_cast<uint32_t>(*spec.tunnel_id);
    }
  }
  if (spec.vlan) {
    if (*spec.vlan > 4095) {
      errs.add(RuleField::kVlan, absl::StrCat(*spec.vlan, " is out of range [0, 4095]"));
    } else {
      r.vlan = static_cast<uint16_t>(*spec.vlan);
    }
  }
  auto countries = [&](RuleField f, const std::vector<std::string>& in,
                       std::vector<CountryCode>* out) {
    if (anyList(f, in)) return;
    for (const std::string& s : in) {
      auto c = parseCountry(s);
      if (!c.ok()) {
        errs.add(f, std::string(c.status().message()));
      } else if (std::find(out->begin(), out->end(), *c) == out->end()) {
        out->push_back(*c);
      }
    }
  };
  countries(RuleField::kSrcCountries, spec.src_countries, &r.src_countries);
  countries(RuleField::kDstCountries, spec.dst_countries, &r.dst_countries);
  if (errs.any()) return std::nullopt;

  // The rule's consistency, named in this source's terms.
  RuleErrorContext ctx;
  ctx.base.section = "firewall";
  ctx.base.rule = spec.id;
  ctx.base.index = spec.index;
  ctx.base.file = spec.file;
  ctx.base.line = spec.line;
  ctx.field = [&spec](RuleField f) { return ruleFieldName(spec.syntax, spec.index, f); };
  ctx.line = [&spec](RuleField f) {
    auto it = spec.field_lines.find(f);
    return it == spec.field_lines.end() ? 0 : it->second;
  };
  checkFirewallRule(r, geoip_configured, ctx, errors);
  if (errs.any()) return std::nullopt;
  return r;
}

absl::StatusOr<std::vector<FirewallRule>> rulesFromSpecs(
    const std::vector<FirewallRuleSpec>& specs, const IpSetTable& sets, bool geoip_configured,
    ConfigErrorList* errors) {
  ConfigErrorList local;
  std::vector<FirewallRule> out;
  out.reserve(specs.size());
  for (const FirewallRuleSpec& s : specs) {
    if (auto r = convertRuleSpec(s, sets, geoip_configured, local)) out.push_back(std::move(*r));
  }
  if (errors) errors->insert(errors->end(), local.begin(), local.end());
  if (!local.empty()) return errorsToStatus(local);
  return out;
}

}  // namespace dpu::rules
