#include "rules/compile/dns_parsers.h"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "rules/compile/file_read.h"
#include "rules/compile/progress.h"  // --- ops ---
#include "rules/compiled/dns_name_set.h"

namespace dpu::rules {
namespace {

constexpr uint64_t kMaxListFileBytes = 1ull << 30;

bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && isSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && isSpace(s.back())) s.remove_suffix(1);
  return s;
}

// Splits off the next blank-separated word.
std::string_view nextWord(std::string_view& s) {
  while (!s.empty() && isSpace(s.front())) s.remove_prefix(1);
  size_t n = 0;
  while (n < s.size() && !isSpace(s[n])) ++n;
  std::string_view w = s.substr(0, n);
  s.remove_prefix(n);
  return w;
}

std::string lowerAscii(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = absl::ascii_tolower(static_cast<unsigned char>(c));
  return out;
}

bool isAddress(std::string_view w) {
  size_t zone = w.find('%');  // "fe80::1%lo0": an IPv6 scope (zone) id
  if (zone != std::string_view::npos && w.find(':') != std::string_view::npos) w = w.substr(0, zone);
  if (w.empty() || w.size() > 45) return false;
  char buf[64];
  std::memcpy(buf, w.data(), w.size());
  buf[w.size()] = 0;
  unsigned char out[16];
  return inet_pton(AF_INET, buf, out) == 1 || inet_pton(AF_INET6, buf, out) == 1;
}

bool isLocalhostName(std::string_view n) {
  static constexpr std::string_view kNames[] = {
      "localhost", "localhost.localdomain", "local", "broadcasthost", "ip6-localhost",
      "ip6-loopback", "ip6-localnet", "ip6-mcastprefix", "ip6-allnodes", "ip6-allrouters",
      "ip6-allhosts", "0.0.0.0"};
  for (std::string_view k : kNames) {
    if (n == k) return true;
  }
  return false;
}

std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 80)) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) {
      absl::StrAppend(&out, "\\x", absl::Hex(u, absl::kZeroPad2));
    } else {
      out.push_back(c);
    }
  }
  if (s.size() > 80) out += "...";
  return out;
}

// One list's line parser; RPZ keeps state across lines (parentheses of the SOA record).
class LineParser {
 public:
  LineParser(DnsListFormat format, DnsMatch plain, const DnsEntrySink& sink)
      : format_(format), plain_(plain), sink_(sink) {}

  // Returns "" when the line is fine (entries emitted or nothing to do), else why it is bad.
  // `emitted` / `ignored` count what the line gave.
  std::string parse(std::string_view line, uint64_t& emitted, bool& ignored) {
    emitted_ = 0;
    ignored = false;
    std::string why = parseLine(line, ignored);
    emitted = emitted_;
    return why;
  }

 private:
  std::string emitName(std::string_view raw, bool self, uint8_t self_action, bool sub,
                       uint8_t sub_action) {
    std::string why;
    if (!normalizeDnsName(raw, name_, &why)) return why;
    sink_(name_, DnsEntryBits::make(self, self_action, sub, sub_action));
    ++emitted_;
    return "";
  }

  std::string plainName(std::string_view w) {
    bool sub = plain_ == DnsMatch::kSubtree;
    return emitName(w, true, 0, sub, 0);
  }

  // "*.name" (strict subdomains) or a plain name.
  std::string wildcard(std::string_view w) {
    if (w.size() >= 2 && w[0] == '*' && w[1] == '.') return emitName(w.substr(2), false, 0, true, 0);
    if (w.find('*') != std::string_view::npos) {
      return "a wildcard is only allowed as the first label (\"*.example.com\")";
    }
    return plainName(w);
  }

  static std::string_view stripHashComment(std::string_view s) {
    size_t h = s.find('#');
    return h == std::string_view::npos ? s : s.substr(0, h);
  }

  std::string parsePlain(std::string_view s, bool& ignored) {
    s = trim(stripHashComment(s));
    if (s.empty()) { ignored = true; return ""; }
    std::string_view rest = s;
    std::string_view w = nextWord(rest);
    if (!trim(rest).empty()) return "one name per line expected";
    return plainName(w);
  }

  std::string parseWildcard(std::string_view s, bool& ignored) {
    s = trim(stripHashComment(s));
    if (s.empty()) { ignored = true; return ""; }
    std::string_view rest = s;
    std::string_view w = nextWord(rest);
    if (!trim(rest).empty()) return "one name per line expected";
    return wildcard(w);
  }

  std::string parseHosts(std::string_view s, bool& ignored) {
    s = trim(stripHashComment(s));
    if (s.empty()) { ignored = true; return ""; }
    std::string_view rest = s;
    std::string_view addr = nextWord(rest);
    if (!isAddress(addr)) return absl::StrCat("'", printable(addr), "' is not an IPv4 or IPv6 address (hosts format: \"0.0.0.0 name\")");
    bool any = false;
    for (std::string_view w = nextWord(rest); !w.empty(); w = nextWord(rest)) {
      any = true;
      std::string lw = lowerAscii(w);
      if (!lw.empty() && lw.back() == '.') lw.pop_back();
      if (isLocalhostName(lw)) continue;
      std::string why = plainName(w);
      if (!why.empty()) return why;
    }
    if (!any) return "an address without a name";
    if (emitted_ == 0) ignored = true;
    return "";
  }

  std::string parseAdblock(std::string_view s, bool& ignored) {
    s = trim(s);
    if (s.empty() || s[0] == '!' || s[0] == '#' || s[0] == '[') {
      if (!s.empty() && s[0] == '#' && s.size() > 1 && (s[1] == '#' || s[1] == '@' || s[1] == '?')) {
        return "cosmetic rules are not DNS rules";
      }
      ignored = true;
      return "";
    }
    bool allow = false;
    if (s.substr(0, 2) == "@@") { allow = true; s.remove_prefix(2); }
    if (s.substr(0, 2) != "||") return "Adblock rule expected: \"||name^\" or \"@@||name^\"";
    s.remove_prefix(2);
    size_t caret = s.find('^');
    if (caret == std::string_view::npos) return "Adblock rule without the closing '^'";
    std::string_view tail = s.substr(caret + 1);
    if (!tail.empty()) {
      if (tail[0] == '$') return absl::StrCat("Adblock modifiers are not supported ('", printable(tail), "')");
      return absl::StrCat("unexpected text after '^': '", printable(tail), "'");
    }
    std::string_view name = s.substr(0, caret);
    if (name.find('/') != std::string_view::npos) return "Adblock rules with a path are not DNS rules";
    uint8_t act = allow ? static_cast<uint8_t>(DnsAction::kAllow) : 0;
    if (name.size() >= 2 && name[0] == '*' && name[1] == '.') {
      return emitName(name.substr(2), false, 0, true, act);
    }
    return emitName(name, true, act, true, act);
  }

  std::string parseDnsmasq(std::string_view s, bool& ignored) {
    s = trim(s);
    if (s.empty() || s[0] == '#') { ignored = true; return ""; }
    std::string_view body;
    if (s.substr(0, 9) == "address=/") {
      body = s.substr(9);
    } else if (s.substr(0, 8) == "server=/") {
      body = s.substr(8);
    } else if (s.substr(0, 7) == "local=/") {
      body = s.substr(7);
    } else {
      return "dnsmasq rule expected: \"address=/name/0.0.0.0\" or \"server=/name/\"";
    }
    size_t slash = body.find('/');
    if (slash == std::string_view::npos) return "dnsmasq rule without the closing '/'";
    std::string_view name = body.substr(0, slash);
    return emitName(name, true, 0, true, 0);
  }

  std::string parseRpz(std::string_view s, bool& ignored) {
    size_t semi = s.find(';');
    if (semi != std::string_view::npos) s = s.substr(0, semi);
    bool continuation = !s.empty() && isSpace(s[0]);
    // Parentheses (a multi-line SOA): ignore everything until they close.
    bool was_in_parens = paren_depth_ > 0;
    for (char c : s) {
      if (c == '(') ++paren_depth_;
      if (c == ')' && paren_depth_ > 0) --paren_depth_;
    }
    s = trim(s);
    if (s.empty() || was_in_parens) { ignored = true; return ""; }
    if (s[0] == '$') {
      std::string_view rest = s;
      std::string d = lowerAscii(nextWord(rest));
      if (d == "$ttl") { ignored = true; return ""; }
      if (d == "$origin") { ignored = true; return setOrigin(rest); }
      return absl::StrCat("unsupported directive ", printable(d));
    }
    std::string_view rest = s;
    std::string_view owner;
    if (!continuation) owner = nextWord(rest);
    // [ttl] [class] type
    std::string type;
    for (int k = 0; k < 3; ++k) {
      std::string w = lowerAscii(nextWord(rest));
      if (w.empty()) return "record type missing";
      bool digits = std::all_of(w.begin(), w.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (digits || w == "in") continue;
      type = w;
      break;
    }
    if (type.empty()) return "record type missing";
    if (type == "soa" || type == "ns") {
      if (continuation) { ignored = true; return ""; }
      std::string abs = absoluteName(owner);
      if (!apex_known_ && type == "soa" && owner != "@") {
        // A fully written SOA owner names the zone (as the zone's name does for a server
        // loading the file): the implicit origin too.
        std::string why = checkZoneName(abs);
        if (!why.empty()) return why;
        apex_ = origin_ = abs;
        apex_known_ = true;
      }
      if (apex_known_ ? abs == apex_ : owner == "@") { ignored = true; return ""; }
      return absl::StrCat(type, " records are only allowed at the zone apex");
    }
    if (continuation) return "a policy record needs an owner name";
    if (type != "cname") return absl::StrCat("unsupported record type ", printable(type), " (only CNAME policy records)");
    std::string target = lowerAscii(nextWord(rest));
    if (!trim(rest).empty()) return "unexpected text after the CNAME target";
    DnsAction action;
    if (target == ".") {
      action = DnsAction::kNxdomain;
    } else if (target == "*.") {
      action = DnsAction::kNodata;
    } else if (target == "rpz-passthru.") {
      action = DnsAction::kAllow;
    } else if (target == "rpz-drop.") {
      action = DnsAction::kDrop;
    } else if (target.empty()) {
      return "CNAME target missing";
    } else {
      return absl::StrCat("unsupported CNAME target '", printable(target),
                          "' (supported: '.', '*.', 'rpz-passthru.', 'rpz-drop.')");
    }
    // The policy's name: the owner, resolved against $ORIGIN, without the zone's name.
    std::string rel;
    if (!inZone(absoluteName(owner), rel)) {
      return absl::StrCat("owner '", printable(absoluteName(owner)), ".' is outside the zone '",
                          printable(apex_), ".'");
    }
    if (rel.empty()) return "a policy record needs an owner name below the zone apex";
    size_t last = rel.rfind('.');
    std::string_view top = std::string_view(rel).substr(last == std::string::npos ? 0 : last + 1);
    if (top == "rpz-ip" || top == "rpz-nsip" || top == "rpz-nsdname" || top == "rpz-client-ip") {
      return absl::StrCat(std::string(top), " triggers are not supported (only query-name policies)");
    }
    uint8_t a = static_cast<uint8_t>(action);
    if (rel.size() >= 2 && rel[0] == '*' && rel[1] == '.') {
      return emitName(std::string_view(rel).substr(2), false, 0, true, a);
    }
    return emitName(rel, true, a, false, 0);
  }

  // --- RPZ zone names: lower case, no trailing dot, "" = the root. ---
  // A zone-file name resolved against the current $ORIGIN: "@" is the origin, a name ending
  // in '.' is fully qualified, any other is relative to the origin.
  std::string absoluteName(std::string_view raw) const {
    std::string n = lowerAscii(raw);
    if (n == "@") return origin_;
    if (!n.empty() && n.back() == '.') {
      n.pop_back();
      return n;
    }
    return origin_.empty() ? n : absl::StrCat(n, ".", origin_);
  }

  // `abs` relative to the zone's apex (rel "" = the apex itself); false when outside it.
  // Without a known apex (no $ORIGIN, no named SOA) names are their own policy names.
  bool inZone(const std::string& abs, std::string& rel) const {
    if (apex_.empty()) {
      rel = abs;
      return true;
    }
    if (abs == apex_) {
      rel.clear();
      return true;
    }
    const size_t k = apex_.size();
    if (abs.size() > k + 1 && abs[abs.size() - k - 1] == '.' && abs.compare(abs.size() - k, k, apex_) == 0) {
      rel = abs.substr(0, abs.size() - k - 1);
      return true;
    }
    return false;
  }

  static std::string checkZoneName(const std::string& abs) {
    std::string norm, why;
    if (abs.empty() || normalizeDnsName(abs, norm, &why)) return "";
    return absl::StrCat("bad zone name: ", why);
  }

  // "$ORIGIN name": the first one names the zone (its apex); later ones must stay inside it.
  std::string setOrigin(std::string_view rest) {
    std::string_view w = nextWord(rest);
    if (w.empty()) return "$ORIGIN without a name";
    if (!trim(rest).empty()) return "unexpected text after the $ORIGIN name";
    std::string abs = absoluteName(w);
    std::string why = checkZoneName(abs);
    if (!why.empty()) return why;
    if (!apex_known_) {
      apex_ = abs;
      apex_known_ = true;
    } else if (std::string rel; !inZone(abs, rel)) {
      return absl::StrCat("$ORIGIN '", printable(abs), ".' is outside the zone '", printable(apex_), ".'");
    }
    origin_ = abs;
    return "";
  }

  std::string parseAuto(std::string_view s, bool& ignored) {
    std::string_view t = trim(s);
    if (t.empty() || t[0] == '#' || t[0] == '!') { ignored = true; return ""; }
    if (t.substr(0, 2) == "||" || t.substr(0, 4) == "@@||") return parseAdblock(t, ignored);
    if (t[0] == '[') return parseAdblock(t, ignored);
    if (t.substr(0, 9) == "address=/" || t.substr(0, 8) == "server=/" || t.substr(0, 7) == "local=/") {
      return parseDnsmasq(t, ignored);
    }
    std::string_view rest = t;
    std::string_view first = nextWord(rest);
    if (isAddress(first)) return parseHosts(t, ignored);
    return parseWildcard(t, ignored);
  }

  std::string parseLine(std::string_view line, bool& ignored) {
    switch (format_) {
      case DnsListFormat::kPlain: return parsePlain(line, ignored);
      case DnsListFormat::kHosts: return parseHosts(line, ignored);
      case DnsListFormat::kAdblock: return parseAdblock(line, ignored);
      case DnsListFormat::kWildcard: return parseWildcard(line, ignored);
      case DnsListFormat::kRpz: return parseRpz(line, ignored);
      case DnsListFormat::kDnsmasq: return parseDnsmasq(line, ignored);
      case DnsListFormat::kAuto: break;
    }
    return parseAuto(line, ignored);
  }

  DnsListFormat format_;
  DnsMatch plain_;
  const DnsEntrySink& sink_;
  std::string name_;
  uint64_t emitted_ = 0;
  int paren_depth_ = 0;
  std::string origin_;       // RPZ: the current $ORIGIN
  std::string apex_;         // RPZ: the zone's name (first $ORIGIN or named SOA owner)
  bool apex_known_ = false;
};

}  // namespace

bool normalizeDnsName(std::string_view in, std::string& out, std::string* why) {
  auto fail = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  if (!in.empty() && in.back() == '.') in.remove_suffix(1);
  if (in.empty()) return fail("empty name");
  if (in.size() > 253) return fail(absl::StrCat("name longer than 253 characters (", in.size(), ")"));
  out.assign(in.data(), in.size());
  size_t label = 0;
  int labels = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    char c = out[i];
    if (c >= 'A' && c <= 'Z') {
      out[i] = static_cast<char>(c - 'A' + 'a');
      ++label;
    } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_') {
      ++label;
    } else if (c == '.') {
      if (label == 0) return fail(absl::StrCat("empty label in '", printable(in), "'"));
      label = 0;
      ++labels;
    } else {
      return fail(absl::StrCat("character '", printable(std::string_view(&c, 1)), "' not allowed in a name ('",
                               printable(in), "')"));
    }
    if (label > 63) return fail(absl::StrCat("label longer than 63 characters in '", printable(in), "'"));
  }
  if (label == 0) return fail(absl::StrCat("empty label in '", printable(in), "'"));
  if (labels >= kDnsMaxLabels) return fail("too many labels");
  return true;
}

absl::StatusOr<DnsAction> parseDnsAction(std::string_view text) {
  std::string t = lowerAscii(trim(text));
  if (t == "nxdomain") return DnsAction::kNxdomain;
  if (t == "nodata") return DnsAction::kNodata;
  if (t == "sinkhole") return DnsAction::kSinkhole;
  if (t == "refuse" || t == "refused") return DnsAction::kRefuse;
  if (t == "drop") return DnsAction::kDrop;
  if (t == "allow") return DnsAction::kAllow;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown action '", printable(text), "' (allow, drop, nxdomain, nodata, sinkhole, refuse)"));
}

const char* dnsActionName(DnsAction a) {
  switch (a) {
    case DnsAction::kAllow: return "allow";
    case DnsAction::kDrop: return "drop";
    case DnsAction::kNxdomain: return "nxdomain";
    case DnsAction::kNodata: return "nodata";
    case DnsAction::kSinkhole: return "sinkhole";
    case DnsAction::kRefuse: return "refuse";
  }
  return "?";
}

absl::StatusOr<DnsListFormat> parseDnsListFormat(std::string_view text) {
  std::string t = lowerAscii(trim(text));
  if (t == "auto" || t.empty()) return DnsListFormat::kAuto;
  if (t == "plain" || t == "domains") return DnsListFormat::kPlain;
  if (t == "hosts") return DnsListFormat::kHosts;
  if (t == "adblock") return DnsListFormat::kAdblock;
  if (t == "wildcard") return DnsListFormat::kWildcard;
  if (t == "rpz") return DnsListFormat::kRpz;
  if (t == "dnsmasq") return DnsListFormat::kDnsmasq;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown list format '", printable(text), "' (auto, plain, hosts, adblock, wildcard, rpz, dnsmasq)"));
}

const char* dnsListFormatName(DnsListFormat f) {
  switch (f) {
    case DnsListFormat::kAuto: return "auto";
    case DnsListFormat::kPlain: return "plain";
    case DnsListFormat::kHosts: return "hosts";
    case DnsListFormat::kAdblock: return "adblock";
    case DnsListFormat::kWildcard: return "wildcard";
    case DnsListFormat::kRpz: return "rpz";
    case DnsListFormat::kDnsmasq: return "dnsmasq";
  }
  return "?";
}

DnsParseCounts parseDnsListText(std::string_view text, DnsListFormat format, DnsMatch plain,
                                const DnsSource& source, const DnsEntrySink& sink,
                                ConfigErrorList* errors) {
  DnsParseCounts counts;
  LineParser parser(format, plain, sink);
  size_t reported = 0;
  int line_no = source.first_line;
  size_t pos = 0;
  // --- ops --- a list file's load is a progress step (bytes parsed of the file's size);
  // inline entries (one call each) are counted by the caller.
  std::optional<ProgressStep> progress;
  if (!source.file.empty()) {
    progress.emplace(absl::StrCat("loading DNS list ", source.list, " from ", source.file),
                     text.size(), "bytes", uint64_t{1} << 20);
  }
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    if (progress) progress->advance(std::min(text.size(), nl + 1) - pos);
    bool last = nl == text.size();
    if (!(last && line.empty())) {
      uint64_t emitted = 0;
      bool ignored = false;
      std::string why;
      if (line.find('\0') != std::string_view::npos) {
        why = "NUL byte in the line";
      } else {
        why = parser.parse(line, emitted, ignored);
      }
      counts.entries += emitted;
      if (!why.empty()) {
        ++counts.bad_lines;
        if (errors && reported < kMaxDnsLineErrors) {
          ++reported;
          ConfigError e;
          e.section = "dns";
          e.rule = source.list;
          e.file = source.file;
          e.line = source.first_line > 0 ? line_no : 0;
          e.field = source.field;
          e.reason = std::move(why);
          errors->push_back(std::move(e));
        }
      } else if (ignored) {
        ++counts.ignored;
      }
    }
    if (last) break;
    pos = nl + 1;
    if (source.first_line > 0) ++line_no;
  }
  return counts;
}

absl::StatusOr<std::string> readDnsListFile(const std::string& path) {
  return readRegularFile(path, kMaxListFileBytes);
}

}  // namespace dpu::rules
