// Suricata-format rule parser (sig_parse.h, docs/signatures.md).
#include "rules/compile/sig_parse.h"

#include <arpa/inet.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace dpu::rules {

const char* sigBufferName(SigBuffer b) {
  static constexpr const char* kNames[kSigBufferCount] = {
      "payload", "http.uri", "http.uri.raw", "http.method", "http.host", "http.host.raw",
      "http.header", "http.header.raw", "http.header_names", "http.cookie", "http.user_agent",
      "http.request_body", "http.response_body", "http.stat_code", "http.stat_msg",
      "http.request_line", "http.response_line", "http.protocol", "http.content_type",
      "http.content_len", "http.referer", "http.accept", "http.accept_lang", "http.accept_enc",
      "http.connection", "http.location", "http.server", "http.start", "file.data",
      "dns.query", "tls.sni"};
  int i = int(b);
  return i >= 0 && i < kSigBufferCount ? kNames[i] : "?";
}

namespace {

using Addr = std::array<uint8_t, 16>;
using Range = SigAddrSet::Range;

bool addrLess(const Addr& a, const Addr& b) { return std::memcmp(a.data(), b.data(), 16) < 0; }
Addr addrInc(Addr a) {
  for (int i = 15; i >= 0; --i)
    if (++a[i] != 0) break;
  return a;
}
Addr addrDec(Addr a) {
  for (int i = 15; i >= 0; --i)
    if (a[i]-- != 0) break;
  return a;
}
const Addr kAddrMax = [] {
  Addr a;
  a.fill(0xff);
  return a;
}();

// Sorted, merged ranges.
std::vector<Range> normalize(std::vector<Range> v) {
  std::sort(v.begin(), v.end(), [](const Range& a, const Range& b) { return addrLess(a.lo, b.lo); });
  std::vector<Range> out;
  for (const Range& r : v) {
    if (!out.empty() && (!addrLess(out.back().hi, r.lo) || addrInc(out.back().hi) == r.lo) &&
        out.back().hi != kAddrMax) {
      if (addrLess(out.back().hi, r.hi)) out.back().hi = r.hi;
    } else if (!out.empty() && out.back().hi == kAddrMax) {
      // already covers everything after
    } else {
      out.push_back(r);
    }
  }
  return out;
}
std::vector<Range> complement(const std::vector<Range>& v) {
  std::vector<Range> out;
  Addr next{};
  bool open = true;
  for (const Range& r : v) {
    if (addrLess(next, r.lo)) out.push_back({next, addrDec(r.lo)});
    if (r.hi == kAddrMax) {
      open = false;
      break;
    }
    next = addrInc(r.hi);
  }
  if (open) out.push_back({next, kAddrMax});
  return out;
}
std::vector<Range> subtract(const std::vector<Range>& a, const std::vector<Range>& b) {
  // a ∩ ¬b
  std::vector<Range> nb = complement(b), out;
  for (const Range& x : a)
    for (const Range& y : nb) {
      Addr lo = addrLess(x.lo, y.lo) ? y.lo : x.lo;
      Addr hi = addrLess(x.hi, y.hi) ? x.hi : y.hi;
      if (!addrLess(hi, lo)) out.push_back({lo, hi});
    }
  return normalize(out);
}

absl::string_view trim(absl::string_view s) { return absl::StripAsciiWhitespace(s); }

// The variable's value (the last definition wins: user vars come after the defaults).
const std::string* findVar(const std::vector<std::pair<std::string, std::string>>& v,
                           absl::string_view name) {
  for (auto it = v.rbegin(); it != v.rend(); ++it)
    if (it->first == name) return &it->second;
  return nullptr;
}

// Splits a list body "a,[b,c],!d" at top-level commas.
absl::StatusOr<std::vector<absl::string_view>> splitList(absl::string_view s) {
  std::vector<absl::string_view> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '[') ++depth;
    else if (s[i] == ']') {
      if (--depth < 0) return absl::InvalidArgumentError("unbalanced ']'");
    } else if (s[i] == ',' && depth == 0) {
      out.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  if (depth != 0) return absl::InvalidArgumentError("unbalanced '['");
  out.push_back(trim(s.substr(start)));
  return out;
}

// --- addresses ---
absl::Status parseAddr(absl::string_view s, const SigVars& vars, int depth, std::vector<Range>& pos,
                       std::vector<Range>& neg, bool negate);

absl::Status parseOneAddr(absl::string_view s, std::vector<Range>& out) {
  if (s == "any") {
    out.push_back({Addr{}, kAddrMax});
    return absl::OkStatus();
  }
  absl::string_view ip = s;
  int bits = -1;
  size_t slash = s.find('/');
  std::optional<absl::string_view> hi_ip;
  if (slash != absl::string_view::npos) {
    ip = s.substr(0, slash);
    absl::string_view b = s.substr(slash + 1);
    if (b.find('.') != absl::string_view::npos) {  // netmask form a.b.c.d/255.255.0.0
      in_addr m{};
      if (inet_pton(AF_INET, std::string(b).c_str(), &m) != 1)
        return absl::InvalidArgumentError(absl::StrCat("bad netmask in `", s, "`"));
      uint32_t mm = ntohl(m.s_addr);
      bits = 0;
      while (bits < 32 && (mm & (0x80000000u >> bits))) ++bits;
    } else if (!absl::SimpleAtoi(b, &bits) || bits < 0) {
      return absl::InvalidArgumentError(absl::StrCat("bad prefix length in `", s, "`"));
    }
  } else if (size_t dash = s.find('-'); dash != absl::string_view::npos && s.find(':') == absl::string_view::npos) {
    ip = s.substr(0, dash);
    hi_ip = s.substr(dash + 1);
  }
  auto conv = [](absl::string_view t, Addr& a, bool& v4) {
    std::string str(t);
    in_addr a4{};
    in6_addr a6{};
    a = Addr{};
    if (inet_pton(AF_INET, str.c_str(), &a4) == 1) {
      a[10] = a[11] = 0xff;
      std::memcpy(&a[12], &a4, 4);
      v4 = true;
      return true;
    }
    if (inet_pton(AF_INET6, str.c_str(), &a6) == 1) {
      std::memcpy(a.data(), &a6, 16);
      v4 = false;
      return true;
    }
    return false;
  };
  Addr a;
  bool v4 = false;
  if (!conv(ip, a, v4)) return absl::InvalidArgumentError(absl::StrCat("bad address `", s, "`"));
  if (hi_ip) {
    Addr b;
    bool v4b = false;
    if (!conv(*hi_ip, b, v4b) || v4b != v4 || addrLess(b, a))
      return absl::InvalidArgumentError(absl::StrCat("bad address range `", s, "`"));
    out.push_back({a, b});
    return absl::OkStatus();
  }
  if (bits < 0) bits = v4 ? 32 : 128;
  if (bits > (v4 ? 32 : 128)) return absl::InvalidArgumentError(absl::StrCat("bad prefix length in `", s, "`"));
  int total = v4 ? bits + 96 : bits;
  Addr lo = a, hi = a;
  for (int i = total; i < 128; ++i) {
    lo[i / 8] &= uint8_t(~(0x80u >> (i % 8)));
    hi[i / 8] |= uint8_t(0x80u >> (i % 8));
  }
  out.push_back({lo, hi});
  return absl::OkStatus();
}

absl::Status parseAddr(absl::string_view s, const SigVars& vars, int depth, std::vector<Range>& pos,
                       std::vector<Range>& neg, bool negate) {
  if (depth > 16) return absl::InvalidArgumentError("address variables nest too deep (a loop?)");
  s = trim(s);
  if (s.empty()) return absl::InvalidArgumentError("empty address");
  if (s[0] == '!') return parseAddr(s.substr(1), vars, depth + 1, pos, neg, !negate);
  if (s[0] == '$') {
    const std::string* v = findVar(vars.addresses, s.substr(1));
    if (v == nullptr)
      return absl::InvalidArgumentError(absl::StrCat("address variable `", s, "` is not defined"));
    return parseAddr(*v, vars, depth + 1, pos, neg, negate);
  }
  if (s[0] == '[') {
    if (s.back() != ']') return absl::InvalidArgumentError(absl::StrCat("unbalanced list `", s, "`"));
    auto parts = splitList(s.substr(1, s.size() - 2));
    if (!parts.ok()) return parts.status();
    // A list is the union of its positive members minus its negated ones (all of the
    // space when it has only negated ones); negated as a whole it is that set's complement.
    std::vector<Range> p, n;
    for (absl::string_view e : *parts) {
      absl::Status st = parseAddr(e, vars, depth + 1, p, n, false);
      if (!st.ok()) return st;
    }
    std::vector<Range> base = p.empty() ? std::vector<Range>{{Addr{}, kAddrMax}} : normalize(p);
    std::vector<Range> set = subtract(base, normalize(n));
    if (set.empty()) return absl::InvalidArgumentError(absl::StrCat("address list `", s, "` matches nothing"));
    auto& dst = negate ? neg : pos;
    dst.insert(dst.end(), set.begin(), set.end());
    return absl::OkStatus();
  }
  std::vector<Range> one;
  absl::Status st = parseOneAddr(s, one);
  if (!st.ok()) return st;
  auto& dst = negate ? neg : pos;
  dst.insert(dst.end(), one.begin(), one.end());
  return absl::OkStatus();
}

absl::Status parseAddrSet(absl::string_view s, const SigVars& vars, SigAddrSet& out) {
  std::vector<Range> p, n;
  absl::Status st = parseAddr(s, vars, 0, p, n, false);
  if (!st.ok()) return st;
  std::vector<Range> base = p.empty() ? std::vector<Range>{{Addr{}, kAddrMax}} : normalize(p);
  out.ranges = subtract(base, normalize(n));
  if (out.ranges.empty()) return absl::InvalidArgumentError(absl::StrCat("address `", s, "` matches nothing"));
  out.any = out.ranges.size() == 1 && out.ranges[0].lo == Addr{} && out.ranges[0].hi == kAddrMax;
  return absl::OkStatus();
}

// --- ports ---
using PRange = std::pair<uint32_t, uint32_t>;
std::vector<PRange> pnorm(std::vector<PRange> v) {
  std::sort(v.begin(), v.end());
  std::vector<PRange> out;
  for (auto r : v) {
    if (!out.empty() && r.first <= out.back().second + 1) out.back().second = std::max(out.back().second, r.second);
    else out.push_back(r);
  }
  return out;
}
std::vector<PRange> psub(const std::vector<PRange>& a, const std::vector<PRange>& b) {
  std::vector<PRange> nb;
  uint32_t next = 0;
  for (auto r : b) {
    if (r.first > next) nb.push_back({next, r.first - 1});
    next = r.second + 1;
  }
  if (next <= 65535) nb.push_back({next, 65535});
  std::vector<PRange> out;
  for (auto x : a)
    for (auto y : nb) {
      uint32_t lo = std::max(x.first, y.first), hi = std::min(x.second, y.second);
      if (lo <= hi) out.push_back({lo, hi});
    }
  return pnorm(out);
}
absl::Status parsePort(absl::string_view s, const SigVars& vars, int depth, std::vector<PRange>& pos,
                       std::vector<PRange>& neg, bool negate) {
  if (depth > 16) return absl::InvalidArgumentError("port variables nest too deep (a loop?)");
  s = trim(s);
  if (s.empty()) return absl::InvalidArgumentError("empty port");
  auto& dst = negate ? neg : pos;
  if (s[0] == '!') return parsePort(s.substr(1), vars, depth + 1, pos, neg, !negate);
  if (s[0] == '$') {
    const std::string* v = findVar(vars.ports, s.substr(1));
    if (v == nullptr)
      return absl::InvalidArgumentError(absl::StrCat("port variable `", s, "` is not defined"));
    return parsePort(*v, vars, depth + 1, pos, neg, negate);
  }
  if (s == "any") {
    dst.push_back({0, 65535});
    return absl::OkStatus();
  }
  if (s[0] == '[') {
    if (s.back() != ']') return absl::InvalidArgumentError(absl::StrCat("unbalanced list `", s, "`"));
    auto parts = splitList(s.substr(1, s.size() - 2));
    if (!parts.ok()) return parts.status();
    std::vector<PRange> p, n;
    for (absl::string_view e : *parts) {
      absl::Status st = parsePort(e, vars, depth + 1, p, n, false);
      if (!st.ok()) return st;
    }
    std::vector<PRange> base = p.empty() ? std::vector<PRange>{{0, 65535}} : pnorm(p);
    auto set = psub(base, pnorm(n));
    if (set.empty()) return absl::InvalidArgumentError(absl::StrCat("port list `", s, "` matches nothing"));
    dst.insert(dst.end(), set.begin(), set.end());
    return absl::OkStatus();
  }
  size_t colon = s.find(':');
  uint32_t lo = 0, hi = 65535;
  auto num = [&](absl::string_view t, uint32_t& v) { return absl::SimpleAtoi(trim(t), &v) && v <= 65535; };
  if (colon == absl::string_view::npos) {
    if (!num(s, lo)) return absl::InvalidArgumentError(absl::StrCat("bad port `", s, "`"));
    hi = lo;
  } else {
    absl::string_view a = s.substr(0, colon), b = s.substr(colon + 1);
    if ((!a.empty() && !num(a, lo)) || (!b.empty() && !num(b, hi)) || lo > hi)
      return absl::InvalidArgumentError(absl::StrCat("bad port range `", s, "`"));
  }
  dst.push_back({lo, hi});
  return absl::OkStatus();
}
absl::Status parsePortSet(absl::string_view s, const SigVars& vars, SigPortSet& out) {
  std::vector<PRange> p, n;
  absl::Status st = parsePort(s, vars, 0, p, n, false);
  if (!st.ok()) return st;
  std::vector<PRange> base = p.empty() ? std::vector<PRange>{{0, 65535}} : pnorm(p);
  auto set = psub(base, pnorm(n));
  if (set.empty()) return absl::InvalidArgumentError(absl::StrCat("port `", s, "` matches nothing"));
  for (auto r : set) out.ranges.push_back({uint16_t(r.first), uint16_t(r.second)});
  out.any = set.size() == 1 && set[0].first == 0 && set[0].second == 65535;
  return absl::OkStatus();
}

// --- options ---
struct Option {
  absl::string_view name, value;
  bool has_value = false;
};

// Splits the option body at unescaped ';' (Suricata: `\;` inside a value, quotes do not
// protect a ';').
absl::StatusOr<std::vector<Option>> splitOptions(absl::string_view body) {
  std::vector<Option> out;
  size_t i = 0;
  while (i < body.size()) {
    while (i < body.size() && std::isspace(uint8_t(body[i]))) ++i;
    if (i >= body.size()) break;
    size_t start = i;
    bool quoted = false;
    while (i < body.size()) {
      if (body[i] == '\\' && i + 1 < body.size()) {
        i += 2;
        continue;
      }
      if (body[i] == '"') quoted = !quoted;
      if (body[i] == ';') break;
      ++i;
    }
    if (i >= body.size())
      return absl::InvalidArgumentError(
          absl::StrCat("option `", trim(body.substr(start)), "` is not terminated by ';'"));
    absl::string_view opt = trim(body.substr(start, i - start));
    ++i;
    Option o;
    size_t colon = opt.find(':');
    if (colon == absl::string_view::npos) {
      o.name = opt;
    } else {
      o.name = trim(opt.substr(0, colon));
      o.value = trim(opt.substr(colon + 1));
      o.has_value = true;
    }
    if (o.name.empty()) return absl::InvalidArgumentError("empty option name");
    out.push_back(o);
  }
  return out;
}

// A quoted value: "..." with \" \\ \; \: escapes. Without quotes: the text itself.
absl::StatusOr<std::string> unquote(absl::string_view v) {
  v = trim(v);
  if (v.size() < 2 || v.front() != '"' || v.back() != '"') {
    if (v.find('"') != absl::string_view::npos)
      return absl::InvalidArgumentError(absl::StrCat("unbalanced quotes in `", v, "`"));
    return std::string(v);
  }
  v = v.substr(1, v.size() - 2);
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == '\\' && i + 1 < v.size()) {
      out += v[++i];
    } else if (v[i] == '"') {
      return absl::InvalidArgumentError("unescaped '\"' inside a quoted value");
    } else {
      out += v[i];
    }
  }
  return out;
}

// content's pattern: text with |hex| blocks.
absl::StatusOr<std::string> decodeContent(absl::string_view raw) {
  std::string out;
  bool hex = false;
  int nib = -1;
  for (size_t i = 0; i < raw.size(); ++i) {
    char ch = raw[i];
    if (ch == '|') {
      if (hex && nib >= 0) return absl::InvalidArgumentError("odd number of hex digits in |...|");
      hex = !hex;
      continue;
    }
    if (hex) {
      if (ch == ' ' || ch == '\t') {
        if (nib >= 0) return absl::InvalidArgumentError("a hex byte split by a space in |...|");
        continue;
      }
      int d = std::isdigit(uint8_t(ch)) ? ch - '0'
              : (ch >= 'a' && ch <= 'f') ? ch - 'a' + 10
              : (ch >= 'A' && ch <= 'F') ? ch - 'A' + 10 : -1;
      if (d < 0) return absl::InvalidArgumentError(absl::StrCat("bad hex digit '", std::string(1, ch), "' in |...|"));
      if (nib < 0) nib = d;
      else {
        out += char(nib * 16 + d);
        nib = -1;
      }
    } else {
      out += ch;
    }
  }
  if (hex) return absl::InvalidArgumentError("unterminated |hex| block");
  if (out.empty()) return absl::InvalidArgumentError("empty content");
  return out;
}

bool parseInt(absl::string_view s, int32_t& v) {
  s = trim(s);
  return absl::SimpleAtoi(s, &v);
}
bool parseU64(absl::string_view s, uint64_t& v) {
  s = trim(s);
  if (absl::StartsWith(s, "0x") || absl::StartsWith(s, "0X")) return absl::SimpleHexAtoi(s.substr(2), &v);
  return absl::SimpleAtoi(s, &v);
}

struct Builder {
  explicit Builder(Signature& s) : sig(s) {}
  Signature& sig;
  std::vector<std::string> vars;     // byte_extract names
  int cur = -1;                      // index in sig.buffers of the sticky buffer, -1: payload
  int lc_buf = -1, lc_item = -1;     // the content that modifiers apply to (buffer, item)
  int last_buffer = -1;              // buffer of the last item
  SigItem* lastContent() {
    return lc_buf < 0 ? nullptr : &sig.buffers[size_t(lc_buf)].items[size_t(lc_item)];
  }
  void setLastContent(int b) {
    lc_buf = b;
    lc_item = int(sig.buffers[size_t(b)].items.size()) - 1;
  }
  void clearLastContent() { lc_buf = lc_item = -1; }
  bool seen_sid = false;

  int bufferIndex(SigBuffer b) {
    for (size_t i = 0; i < sig.buffers.size(); ++i)
      if (sig.buffers[i].buffer == b) return int(i);
    sig.buffers.push_back({b, {}, {}});
    return int(sig.buffers.size() - 1);
  }
  SigBufferMatch& current() {
    if (cur < 0) cur = bufferIndex(SigBuffer::kPayload);
    return sig.buffers[size_t(cur)];
  }
  SigItem& add(SigItem it) {
    SigBufferMatch& b = current();
    // A content's modifiers may follow other items (`isdataat:30,relative; fast_pattern;`):
    // they apply to the last content, as in Suricata.
    b.items.push_back(std::move(it));
    last_buffer = cur;
    return b.items.back();
  }
  // The last item (content or pcre) moved to buffer `b` (legacy content modifiers).
  absl::Status moveLast(SigBuffer b, absl::string_view kw) {
    if (last_buffer < 0 || sig.buffers[size_t(last_buffer)].items.empty())
      return absl::InvalidArgumentError(absl::StrCat("`", kw, "` without a content before it"));
    auto& from = sig.buffers[size_t(last_buffer)];
    SigItem it = std::move(from.items.back());
    from.items.pop_back();
    bool was_content = it.kind == SigItem::kContent;
    // (an empty payload list left behind is dropped when the rule is complete)
    int to = bufferIndex(b);
    sig.buffers[size_t(to)].items.push_back(std::move(it));
    last_buffer = to;
    if (was_content) setLastContent(to);
    else clearLastContent();
    return absl::OkStatus();
  }
  int varIndex(absl::string_view name) const {
    for (size_t i = 0; i < vars.size(); ++i)
      if (vars[i] == name) return int(i);
    return -1;
  }
};

bool stickyBuffer(absl::string_view k, SigBuffer& b) {
  static const std::pair<const char*, SigBuffer> kMap[] = {
      {"pkt_data", SigBuffer::kPayload},
      {"http.uri", SigBuffer::kHttpUri}, {"http.uri.raw", SigBuffer::kHttpUriRaw},
      {"http.method", SigBuffer::kHttpMethod}, {"http.host", SigBuffer::kHttpHost},
      {"http.host.raw", SigBuffer::kHttpHostRaw}, {"http.header", SigBuffer::kHttpHeader},
      {"http.header.raw", SigBuffer::kHttpHeaderRaw},
      {"http.header_names", SigBuffer::kHttpHeaderNames}, {"http.cookie", SigBuffer::kHttpCookie},
      {"http.user_agent", SigBuffer::kHttpUserAgent},
      {"http.request_body", SigBuffer::kHttpRequestBody},
      {"http.response_body", SigBuffer::kHttpResponseBody},
      {"http.stat_code", SigBuffer::kHttpStatCode}, {"http.stat_msg", SigBuffer::kHttpStatMsg},
      {"http.request_line", SigBuffer::kHttpRequestLine}, {"http_request_line", SigBuffer::kHttpRequestLine},
      {"http.response_line", SigBuffer::kHttpResponseLine}, {"http_response_line", SigBuffer::kHttpResponseLine},
      {"http.protocol", SigBuffer::kHttpProtocol}, {"http.content_type", SigBuffer::kHttpContentType},
      {"http.content_len", SigBuffer::kHttpContentLen}, {"http.referer", SigBuffer::kHttpReferer},
      {"http.accept", SigBuffer::kHttpAccept}, {"http.accept_lang", SigBuffer::kHttpAcceptLang},
      {"http.accept_enc", SigBuffer::kHttpAcceptEnc}, {"http.connection", SigBuffer::kHttpConnection},
      {"http.location", SigBuffer::kHttpLocation}, {"http.server", SigBuffer::kHttpServer},
      {"http.start", SigBuffer::kHttpStart}, {"file.data", SigBuffer::kFileData},
      {"file_data", SigBuffer::kFileData}, {"dns.query", SigBuffer::kDnsQuery},
      {"dns_query", SigBuffer::kDnsQuery}, {"tls.sni", SigBuffer::kTlsSni}, {"tls_sni", SigBuffer::kTlsSni},
  };
  for (auto& [n, v] : kMap)
    if (k == n) {
      b = v;
      return true;
    }
  return false;
}
// Legacy content modifiers: the content before them is in that buffer.
bool legacyModifier(absl::string_view k, SigBuffer& b) {
  static const std::pair<const char*, SigBuffer> kMap[] = {
      {"http_uri", SigBuffer::kHttpUri}, {"http_raw_uri", SigBuffer::kHttpUriRaw},
      {"http_method", SigBuffer::kHttpMethod}, {"http_header", SigBuffer::kHttpHeader},
      {"http_raw_header", SigBuffer::kHttpHeaderRaw}, {"http_cookie", SigBuffer::kHttpCookie},
      {"http_user_agent", SigBuffer::kHttpUserAgent}, {"http_host", SigBuffer::kHttpHost},
      {"http_raw_host", SigBuffer::kHttpHostRaw}, {"http_client_body", SigBuffer::kHttpRequestBody},
      {"http_server_body", SigBuffer::kHttpResponseBody}, {"http_stat_code", SigBuffer::kHttpStatCode},
      {"http_stat_msg", SigBuffer::kHttpStatMsg},
  };
  for (auto& [n, v] : kMap)
    if (k == n) {
      b = v;
      return true;
    }
  return false;
}

// "N", "<N", ">N", "<=N", ">=N", "!N", "N<>M" (exclusive), "N-M" (inclusive) -> op, lo, hi
// where op is '=' (lo..hi inclusive), '!' (not lo), '<', '>'.
absl::Status parseRange(absl::string_view v, absl::string_view kw, char& op, uint32_t& lo, uint32_t& hi) {
  v = trim(v);
  auto num = [](absl::string_view s, uint32_t& x) { return absl::SimpleAtoi(trim(s), &x); };
  auto bad = [&] { return absl::InvalidArgumentError(absl::StrCat("bad ", kw, " `", v, "`")); };
  if (size_t p = v.find("<>"); p != absl::string_view::npos) {
    uint32_t a, b;
    if (!num(v.substr(0, p), a) || !num(v.substr(p + 2), b) || b <= a + 1) return bad();
    op = '=';
    lo = a + 1;
    hi = b - 1;
    return absl::OkStatus();
  }
  if (absl::StartsWith(v, "<=") || absl::StartsWith(v, ">=")) {
    uint32_t a;
    if (!num(v.substr(2), a)) return bad();
    op = '=';
    if (v[0] == '<') lo = 0, hi = a;
    else lo = a, hi = UINT32_MAX;
    return absl::OkStatus();
  }
  if (!v.empty() && (v[0] == '<' || v[0] == '>' || v[0] == '!')) {
    uint32_t a;
    if (!num(v.substr(1), a)) return bad();
    op = '=';
    if (v[0] == '<') {
      if (a == 0) return bad();
      lo = 0, hi = a - 1;
    } else if (v[0] == '>') {
      if (a == UINT32_MAX) return bad();
      lo = a + 1, hi = UINT32_MAX;
    } else {
      op = '!', lo = hi = a;
    }
    return absl::OkStatus();
  }
  if (size_t p = v.find('-'); p != absl::string_view::npos && p > 0) {
    uint32_t a, b;
    if (!num(v.substr(0, p), a) || !num(v.substr(p + 1), b) || b < a) return bad();
    op = '=', lo = a, hi = b;
    return absl::OkStatus();
  }
  uint32_t a;
  if (!num(v, a)) return bad();
  op = '=', lo = hi = a;
  return absl::OkStatus();
}

absl::Status parsePcre(absl::string_view value, Builder& bld) {
  SigItem it;
  it.kind = SigItem::kPcre;
  absl::string_view v = trim(value);
  if (!v.empty() && v[0] == '!') {
    it.negated = true;
    v = trim(v.substr(1));
  }
  // The expression as written between the quotes: PCRE escapes (\d, \x2f, \;, \") are
  // PCRE's own.
  if (v.size() < 2 || v.front() != '"' || v.back() != '"')
    return absl::InvalidArgumentError("pcre must be \"/regex/flags\"");
  const std::string s(v.substr(1, v.size() - 2));
  if (s.size() < 2 || s[0] != '/') return absl::InvalidArgumentError("pcre must be \"/regex/flags\"");
  size_t end = s.rfind('/');
  if (end == 0) return absl::InvalidArgumentError("pcre without its closing '/'");
  it.pcre = s.substr(1, end - 1);
  std::optional<SigBuffer> buf;
  for (char f : absl::string_view(s).substr(end + 1)) {
    switch (f) {
      case 'i': it.pcre_opts |= PCRE2_CASELESS; break;
      case 's': it.pcre_opts |= PCRE2_DOTALL; break;
      case 'm': it.pcre_opts |= PCRE2_MULTILINE; break;
      case 'x': it.pcre_opts |= PCRE2_EXTENDED; break;
      case 'A': it.pcre_opts |= PCRE2_ANCHORED; break;
      case 'E': it.pcre_opts |= PCRE2_DOLLAR_ENDONLY; break;
      case 'G': it.pcre_opts |= PCRE2_UNGREEDY; break;
      case 'R': it.relative = true; break;
      case 'B': case 'O': break;  // rawbytes (no-op on our buffers), match-limit override
      case 'U': buf = SigBuffer::kHttpUri; break;
      case 'I': buf = SigBuffer::kHttpUriRaw; break;
      case 'P': buf = SigBuffer::kHttpRequestBody; break;
      case 'Q': buf = SigBuffer::kFileData; break;
      case 'H': buf = SigBuffer::kHttpHeader; break;
      case 'D': buf = SigBuffer::kHttpHeaderRaw; break;
      case 'M': buf = SigBuffer::kHttpMethod; break;
      case 'C': buf = SigBuffer::kHttpCookie; break;
      case 'S': buf = SigBuffer::kHttpStatCode; break;
      case 'Y': buf = SigBuffer::kHttpStatMsg; break;
      case 'V': buf = SigBuffer::kHttpUserAgent; break;
      case 'W': buf = SigBuffer::kHttpHost; break;
      case 'Z': buf = SigBuffer::kHttpHostRaw; break;
      default:
        return absl::InvalidArgumentError(absl::StrCat("pcre flag '", std::string(1, f), "' not supported"));
    }
  }
  // Checked here so that a bad expression names this rule (compiled again by the engine).
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(it.pcre.data()), it.pcre.size(),
                                   it.pcre_opts, &err, &off, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    return absl::InvalidArgumentError(absl::StrCat("pcre does not compile at offset ", off, ": ",
                                                   reinterpret_cast<const char*>(msg)));
  }
  pcre2_code_free(code);
  if (buf) {
    int to = bld.bufferIndex(*buf);
    bld.sig.buffers[size_t(to)].items.push_back(std::move(it));
    bld.last_buffer = to;
  } else {
    bld.add(std::move(it));
  }
  return absl::OkStatus();
}

absl::Status parseByteRead(std::vector<absl::string_view>& a, size_t from, SigItem& it,
                           absl::string_view kw) {
  for (size_t i = from; i < a.size(); ++i) {
    absl::string_view t = trim(a[i]);
    if (t == "relative") it.read.relative = true;
    else if (t == "big") it.read.big_endian = true;
    else if (t == "little") it.read.big_endian = false;
    else if (t == "dce") return absl::InvalidArgumentError(absl::StrCat(kw, ": dce not supported"));
    else if (t == "string") it.read.string = true;
    else if (t == "hex") it.read.base = 16;
    else if (t == "dec") it.read.base = 10;
    else if (t == "oct") it.read.base = 8;
    else if (t == "align") it.align = true;
    else if (t == "from_beginning") it.from_beginning = true;
    else if (t == "from_end") it.from_end = true;
    else if (absl::StartsWith(t, "multiplier")) {
      if (!parseInt(t.substr(10), it.multiplier) || it.multiplier <= 0)
        return absl::InvalidArgumentError(absl::StrCat(kw, ": bad multiplier `", t, "`"));
    } else if (absl::StartsWith(t, "post_offset")) {
      if (!parseInt(t.substr(11), it.post_offset))
        return absl::InvalidArgumentError(absl::StrCat(kw, ": bad post_offset `", t, "`"));
    } else if (absl::StartsWith(t, "bitmask")) {
      uint64_t m = 0;
      if (!parseU64(t.substr(7), m) || m == 0 || m > 0xffffffffu)
        return absl::InvalidArgumentError(absl::StrCat(kw, ": bad bitmask `", t, "`"));
      it.read.bitmask = uint32_t(m);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(kw, ": unknown argument `", t, "`"));
    }
  }
  // nbytes 0: with `string`, the digits up to the end of the buffer (byte_test only)
  if (it.read.nbytes == 0 && (!it.read.string || kw != "byte_test"))
    return absl::InvalidArgumentError(absl::StrCat(kw, ": 0 bytes (only byte_test with `string` reads to the end)"));
  if (!it.read.string && it.read.nbytes > 8)
    return absl::InvalidArgumentError(absl::StrCat(kw, ": more than 8 bytes needs `string`"));
  return absl::OkStatus();
}

absl::Status parseOffsetArg(absl::string_view t, Builder& bld, int32_t& v, int8_t& var, absl::string_view kw) {
  t = trim(t);
  if (parseInt(t, v)) return absl::OkStatus();
  int i = bld.varIndex(t);
  if (i < 0) return absl::InvalidArgumentError(absl::StrCat(kw, ": `", t, "` is neither a number nor a byte_extract variable"));
  var = int8_t(i);
  v = 0;
  return absl::OkStatus();
}

absl::Status parseByteTest(absl::string_view value, Builder& bld) {
  std::vector<absl::string_view> a = absl::StrSplit(value, ',');
  if (a.size() < 4) return absl::InvalidArgumentError("byte_test needs nbytes, operator, value, offset");
  SigItem it;
  it.kind = SigItem::kByteTest;
  int32_t n;
  if (!parseInt(a[0], n) || n < 0 || n > 23) return absl::InvalidArgumentError(absl::StrCat("byte_test: bad nbytes `", trim(a[0]), "`"));
  it.read.nbytes = uint8_t(n);
  absl::string_view op = trim(a[1]);
  if (!op.empty() && op[0] == '!') {
    it.op_negated = true;
    op = trim(op.substr(1));
  }
  if (op == "<") it.op = '<';
  else if (op == ">") it.op = '>';
  else if (op == "=") it.op = '=';
  else if (op == "&") it.op = '&';
  else if (op == "^") it.op = '^';
  else if (op == "<=") it.op = 'l';
  else if (op == ">=") it.op = 'g';
  else if (op.empty() && it.op_negated) {
    it.op = '=';  // "!" alone is "not equal"
  } else {
    return absl::InvalidArgumentError(absl::StrCat("byte_test: bad operator `", trim(a[1]), "`"));
  }
  absl::string_view val = trim(a[2]);
  if (!parseU64(val, it.cmp)) {
    int i = bld.varIndex(val);
    if (i < 0) return absl::InvalidArgumentError(absl::StrCat("byte_test: bad value `", val, "`"));
    it.cmp_var = int8_t(i);
  }
  absl::Status st = parseOffsetArg(a[3], bld, it.read.offset, it.read.offset_var, "byte_test");
  if (!st.ok()) return st;
  st = parseByteRead(a, 4, it, "byte_test");
  if (!st.ok()) return st;
  if (it.align || it.from_beginning || it.from_end || it.multiplier != 1 || it.post_offset != 0)
    return absl::InvalidArgumentError("byte_test: argument only valid for byte_jump");
  bld.add(std::move(it));
  return absl::OkStatus();
}

absl::Status parseByteJump(absl::string_view value, Builder& bld) {
  std::vector<absl::string_view> a = absl::StrSplit(value, ',');
  if (a.size() < 2) return absl::InvalidArgumentError("byte_jump needs nbytes, offset");
  SigItem it;
  it.kind = SigItem::kByteJump;
  int32_t n;
  if (!parseInt(a[0], n) || n <= 0 || n > 23) return absl::InvalidArgumentError(absl::StrCat("byte_jump: bad nbytes `", trim(a[0]), "`"));
  it.read.nbytes = uint8_t(n);
  absl::Status st = parseOffsetArg(a[1], bld, it.read.offset, it.read.offset_var, "byte_jump");
  if (!st.ok()) return st;
  st = parseByteRead(a, 2, it, "byte_jump");
  if (!st.ok()) return st;
  bld.add(std::move(it));
  return absl::OkStatus();
}

absl::Status parseByteExtract(absl::string_view value, Builder& bld) {
  std::vector<absl::string_view> a = absl::StrSplit(value, ',');
  if (a.size() < 3) return absl::InvalidArgumentError("byte_extract needs nbytes, offset, name");
  SigItem it;
  it.kind = SigItem::kByteExtract;
  int32_t n;
  if (!parseInt(a[0], n) || n <= 0 || n > 23) return absl::InvalidArgumentError(absl::StrCat("byte_extract: bad nbytes `", trim(a[0]), "`"));
  it.read.nbytes = uint8_t(n);
  if (!parseInt(a[1], it.read.offset)) return absl::InvalidArgumentError(absl::StrCat("byte_extract: bad offset `", trim(a[1]), "`"));
  std::string name(trim(a[2]));
  if (name.empty() || !(std::isalpha(uint8_t(name[0])) || name[0] == '_'))
    return absl::InvalidArgumentError(absl::StrCat("byte_extract: bad variable name `", name, "`"));
  if (bld.varIndex(name) >= 0) return absl::InvalidArgumentError(absl::StrCat("byte_extract: variable `", name, "` defined twice"));
  if (bld.vars.size() >= 16) return absl::InvalidArgumentError("byte_extract: more than 16 variables");
  // "align N" takes a value for byte_extract (2 or 4)
  std::vector<absl::string_view> rest;
  int32_t align = 0;
  for (size_t i = 3; i < a.size(); ++i) {
    absl::string_view t = trim(a[i]);
    if (absl::StartsWith(t, "align ")) {
      if (!parseInt(t.substr(6), align) || (align != 2 && align != 4))
        return absl::InvalidArgumentError(absl::StrCat("byte_extract: bad align `", t, "`"));
    } else {
      rest.push_back(t);
    }
  }
  rest.insert(rest.begin(), {a[0], a[1], a[2]});
  absl::Status st = parseByteRead(rest, 3, it, "byte_extract");
  if (!st.ok()) return st;
  if (it.from_beginning || it.from_end || it.post_offset != 0 || it.align)
    return absl::InvalidArgumentError("byte_extract: argument only valid for byte_jump");
  it.post_offset = align;  // byte_extract: the alignment (0, 2, 4)
  it.var = int8_t(bld.vars.size());
  bld.vars.push_back(name);
  bld.sig.nvars = uint8_t(bld.vars.size());
  bld.add(std::move(it));
  return absl::OkStatus();
}

absl::Status parseFlow(absl::string_view value, Signature& s) {
  for (absl::string_view t : absl::StrSplit(value, ',')) {
    t = trim(t);
    if (t == "to_server" || t == "from_client") s.to_server = true;
    else if (t == "to_client" || t == "from_server") s.to_client = true;
    else if (t == "established") s.established = true;
    else if (t == "not_established") s.not_established = true;
    else if (t == "stateless") s.stateless = true;
    else if (t == "only_stream") s.only_stream = true;
    else if (t == "no_stream") s.no_stream = true;
    else return absl::InvalidArgumentError(absl::StrCat("flow: `", t, "` not supported"));
  }
  if (s.to_server && s.to_client) return absl::InvalidArgumentError("flow: to_server and to_client together");
  if (s.established && s.not_established) return absl::InvalidArgumentError("flow: established and not_established together");
  if (s.only_stream && s.no_stream) return absl::InvalidArgumentError("flow: only_stream and no_stream together");
  return absl::OkStatus();
}

absl::Status parseFlowbits(absl::string_view value, Signature& s) {
  std::vector<absl::string_view> a = absl::StrSplit(value, absl::MaxSplits(',', 1));
  absl::string_view op = trim(a[0]);
  SigFlowbit fb;
  if (op == "set") fb.op = SigFlowbit::kSet;
  else if (op == "isset") fb.op = SigFlowbit::kIsSet;
  else if (op == "isnotset") fb.op = SigFlowbit::kIsNotSet;
  else if (op == "unset") fb.op = SigFlowbit::kUnset;
  else if (op == "toggle") fb.op = SigFlowbit::kToggle;
  else if (op == "noalert") {
    if (a.size() > 1) return absl::InvalidArgumentError("flowbits:noalert takes no name");
    s.noalert = true;
    return absl::OkStatus();
  } else {
    return absl::InvalidArgumentError(absl::StrCat("flowbits: `", op, "` not supported"));
  }
  if (a.size() < 2 || trim(a[1]).empty()) return absl::InvalidArgumentError(absl::StrCat("flowbits:", op, " needs a name"));
  absl::string_view names = trim(a[1]);
  bool has_or = names.find('|') != absl::string_view::npos, has_and = names.find('&') != absl::string_view::npos;
  if (has_or && has_and) return absl::InvalidArgumentError("flowbits: '|' and '&' together");
  if ((has_or || has_and) && fb.op != SigFlowbit::kIsSet && fb.op != SigFlowbit::kIsNotSet &&
      !(has_and && (fb.op == SigFlowbit::kSet || fb.op == SigFlowbit::kUnset || fb.op == SigFlowbit::kToggle)))
    return absl::InvalidArgumentError(absl::StrCat("flowbits:", op, " takes one name"));
  fb.all = has_and;
  for (absl::string_view n : absl::StrSplit(names, absl::ByAnyChar("|&"))) {
    n = trim(n);
    if (n.empty() || n.find_first_of(" \t,") != absl::string_view::npos)
      return absl::InvalidArgumentError(absl::StrCat("flowbits: bad name `", n, "`"));
    fb.names.emplace_back(n);
  }
  s.flowbits.push_back(std::move(fb));
  return absl::OkStatus();
}

absl::Status parseThreshold(absl::string_view value, Signature& s, bool detection_filter) {
  if (s.threshold.type != SigThreshold::kNone)
    return absl::InvalidArgumentError("more than one threshold / detection_filter");
  SigThreshold t;
  t.type = detection_filter ? SigThreshold::kDetectionFilter : SigThreshold::kNone;
  bool have_track = false, have_count = false, have_seconds = false;
  for (absl::string_view p : absl::StrSplit(value, ',')) {
    p = trim(p);
    std::vector<absl::string_view> kv = absl::StrSplit(p, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (kv.size() != 2) return absl::InvalidArgumentError(absl::StrCat("threshold: bad argument `", p, "`"));
    if (kv[0] == "type" && !detection_filter) {
      if (kv[1] == "limit") t.type = SigThreshold::kLimit;
      else if (kv[1] == "threshold") t.type = SigThreshold::kThreshold;
      else if (kv[1] == "both") t.type = SigThreshold::kBoth;
      else return absl::InvalidArgumentError(absl::StrCat("threshold: type `", kv[1], "` not supported"));
    } else if (kv[0] == "track") {
      if (kv[1] == "by_src") t.by_dst = false;
      else if (kv[1] == "by_dst") t.by_dst = true;
      else return absl::InvalidArgumentError(absl::StrCat("threshold: track `", kv[1], "` not supported"));
      have_track = true;
    } else if (kv[0] == "count") {
      if (!absl::SimpleAtoi(kv[1], &t.count) || t.count == 0)
        return absl::InvalidArgumentError(absl::StrCat("threshold: bad count `", kv[1], "`"));
      have_count = true;
    } else if (kv[0] == "seconds") {
      if (!absl::SimpleAtoi(kv[1], &t.seconds) || t.seconds == 0)
        return absl::InvalidArgumentError(absl::StrCat("threshold: bad seconds `", kv[1], "`"));
      have_seconds = true;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("threshold: unknown argument `", kv[0], "`"));
    }
  }
  if (t.type == SigThreshold::kNone) return absl::InvalidArgumentError("threshold: no type");
  if (!have_track || !have_count || !have_seconds)
    return absl::InvalidArgumentError(absl::StrCat(detection_filter ? "detection_filter" : "threshold",
                                                   " needs track, count and seconds"));
  s.threshold = t;
  return absl::OkStatus();
}

// Content modifiers (applied to bld.last_content).
absl::Status contentModifier(const Option& o, Builder& bld) {
  SigItem* c = bld.lastContent();
  if (c == nullptr) return absl::InvalidArgumentError(absl::StrCat("`", o.name, "` without a content before it"));
  auto num = [&](int32_t& v, int8_t& var) -> absl::Status {
    if (!o.has_value) return absl::InvalidArgumentError(absl::StrCat("`", o.name, "` needs a value"));
    return parseOffsetArg(o.value, bld, v, var, o.name);
  };
  absl::string_view k = o.name;
  absl::Status st;
  if (k == "nocase") c->nocase = true;
  else if (k == "rawbytes") {
  } else if (k == "fast_pattern") {
    c->fast_pattern = true;  // ":only" and ":offset,length" choose the same pattern here
  } else if (k == "startswith") {
    if (c->has_offset || c->has_distance || c->has_within || c->has_depth)
      return absl::InvalidArgumentError("startswith with offset / depth / distance / within");
    c->startswith = true;
  } else if (k == "endswith") c->endswith = true;
  else if (k == "offset") {
    if ((st = num(c->offset, c->offset_var)).ok()) c->has_offset = true;
  } else if (k == "depth") {
    if ((st = num(c->depth, c->depth_var)).ok()) c->has_depth = true;
    if (st.ok() && c->depth_var < 0 && c->depth <= 0) return absl::InvalidArgumentError("depth must be positive");
  } else if (k == "distance") {
    if ((st = num(c->distance, c->distance_var)).ok()) c->has_distance = true;
  } else if (k == "within") {
    if ((st = num(c->within, c->within_var)).ok()) c->has_within = true;
    if (st.ok() && c->within_var < 0 && c->within <= 0) return absl::InvalidArgumentError("within must be positive");
  }
  if (!st.ok()) return st;
  if (c->startswith && (c->has_offset || c->has_depth || c->has_distance || c->has_within))
    return absl::InvalidArgumentError("startswith with offset / depth / distance / within");
  return absl::OkStatus();
}

bool isContentModifier(absl::string_view k) {
  return k == "nocase" || k == "rawbytes" || k == "fast_pattern" || k == "startswith" ||
         k == "endswith" || k == "offset" || k == "depth" || k == "distance" || k == "within";
}

absl::Status parseOption(const Option& o, Builder& bld) {
  Signature& s = bld.sig;
  absl::string_view k = o.name;
  auto need = [&]() -> absl::Status {
    return o.has_value ? absl::OkStatus()
                       : absl::InvalidArgumentError(absl::StrCat("`", k, "` needs a value"));
  };
  absl::Status st;
  SigBuffer b;
  if (k == "msg") {
    if (!(st = need()).ok()) return st;
    auto v = unquote(o.value);
    if (!v.ok()) return v.status();
    s.msg = *v;
  } else if (k == "sid" || k == "rev" || k == "gid" || k == "priority") {
    if (!(st = need()).ok()) return st;
    uint32_t v;
    if (!absl::SimpleAtoi(o.value, &v)) return absl::InvalidArgumentError(absl::StrCat("bad ", k, " `", o.value, "`"));
    if (k == "sid") {
      if (v == 0) return absl::InvalidArgumentError("sid 0");
      s.sid = v;
      bld.seen_sid = true;
    } else if (k == "rev") s.rev = v;
    else if (k == "gid") s.gid = v;
    else {
      if (v < 1 || v > 255) return absl::InvalidArgumentError(absl::StrCat("bad priority `", o.value, "`"));
      s.priority = int(v);
    }
  } else if (k == "classtype") {
    if (!(st = need()).ok()) return st;
    s.classtype = std::string(o.value);
  } else if (k == "reference") {
    if (!(st = need()).ok()) return st;
    s.references.emplace_back(o.value);
  } else if (k == "metadata") {
    if (!(st = need()).ok()) return st;
    s.metadata.emplace_back(o.value);
  } else if (k == "target") {
    if (o.value != "src_ip" && o.value != "dest_ip") return absl::InvalidArgumentError(absl::StrCat("bad target `", o.value, "`"));
    s.target = std::string(o.value);
  } else if (k == "flow") {
    if (!(st = need()).ok()) return st;
    return parseFlow(o.value, s);
  } else if (k == "content") {
    if (!(st = need()).ok()) return st;
    SigItem it;
    it.kind = SigItem::kContent;
    absl::string_view v = o.value;
    if (!v.empty() && v[0] == '!') {
      it.negated = true;
      v = trim(v.substr(1));
    }
    if (v.size() < 2 || v.front() != '"' || v.back() != '"')
      return absl::InvalidArgumentError(absl::StrCat("content must be quoted: `", o.value, "`"));
    auto uq = unquote(v);
    if (!uq.ok()) return uq.status();
    auto bytes = decodeContent(*uq);
    if (!bytes.ok()) return absl::InvalidArgumentError(absl::StrCat("content: ", bytes.status().message()));
    it.bytes = *bytes;
    bld.add(std::move(it));
    bld.setLastContent(bld.cur);
  } else if (isContentModifier(k)) {
    return contentModifier(o, bld);
  } else if (legacyModifier(k, b) && !o.has_value) {
    if (bld.last_buffer < 0 || bld.sig.buffers[size_t(bld.last_buffer)].buffer != SigBuffer::kPayload ||
        bld.lastContent() == nullptr) {
      // http_uri after a sticky buffer's content, or twice
      if (bld.lastContent() == nullptr)
        return absl::InvalidArgumentError(absl::StrCat("`", k, "` without a content before it"));
      if (bld.sig.buffers[size_t(bld.last_buffer)].buffer != SigBuffer::kPayload)
        return absl::InvalidArgumentError(absl::StrCat("`", k, "` on a content already in ",
                                                       sigBufferName(bld.sig.buffers[size_t(bld.last_buffer)].buffer)));
    }
    return bld.moveLast(b, k);
  } else if (stickyBuffer(k, b)) {
    if (o.has_value) return absl::InvalidArgumentError(absl::StrCat("`", k, "` takes no value"));
    bld.cur = bld.bufferIndex(b);
    bld.clearLastContent();
  } else if (k == "pcre") {
    if (!(st = need()).ok()) return st;
    return parsePcre(o.value, bld);
  } else if (k == "isdataat") {
    if (!(st = need()).ok()) return st;
    SigItem it;
    it.kind = SigItem::kIsDataAt;
    std::vector<absl::string_view> a = absl::StrSplit(o.value, ',');
    absl::string_view n = trim(a[0]);
    if (!n.empty() && n[0] == '!') {
      it.negated = true;
      n = trim(n.substr(1));
    }
    if (!parseInt(n, it.value) || it.value < 0) return absl::InvalidArgumentError(absl::StrCat("isdataat: bad offset `", n, "`"));
    for (size_t i = 1; i < a.size(); ++i) {
      absl::string_view t = trim(a[i]);
      if (t == "relative") it.relative = true;
      else if (t == "rawbytes") {
      } else return absl::InvalidArgumentError(absl::StrCat("isdataat: unknown argument `", t, "`"));
    }
    bld.add(std::move(it));
  } else if (k == "bsize") {
    if (!(st = need()).ok()) return st;
    SigItem it;
    it.kind = SigItem::kBsize;
    if (!(st = parseRange(o.value, "bsize", it.op, it.lo, it.hi)).ok()) return st;
    if (bld.cur < 0 || bld.sig.buffers[size_t(bld.cur)].buffer == SigBuffer::kPayload)
      return absl::InvalidArgumentError("bsize outside a sticky buffer");
    // a length check, position-independent: first in the list, the last content stays the
    // one later modifiers apply to
    auto& items = bld.sig.buffers[size_t(bld.cur)].items;
    items.insert(items.begin(), std::move(it));
    if (bld.lc_buf == bld.cur) ++bld.lc_item;
  } else if (k == "dsize") {
    if (!(st = need()).ok()) return st;
    if (s.has_dsize) return absl::InvalidArgumentError("dsize twice");
    if (!(st = parseRange(o.value, "dsize", s.dsize_op, s.dsize_lo, s.dsize_hi)).ok()) return st;
    s.has_dsize = true;
  } else if (k == "urilen") {
    if (!(st = need()).ok()) return st;
    std::vector<absl::string_view> a = absl::StrSplit(o.value, ',');
    SigItem it;
    it.kind = SigItem::kBsize;
    if (!(st = parseRange(a[0], "urilen", it.op, it.lo, it.hi)).ok()) return st;
    SigBuffer ub = SigBuffer::kHttpUri;
    if (a.size() > 1) {
      absl::string_view t = trim(a[1]);
      if (t == "raw") ub = SigBuffer::kHttpUriRaw;
      else if (t != "norm") return absl::InvalidArgumentError(absl::StrCat("urilen: unknown argument `", t, "`"));
    }
    int to = bld.bufferIndex(ub);
    auto& items = bld.sig.buffers[size_t(to)].items;
    items.insert(items.begin(), std::move(it));  // a length check: position-independent
    if (bld.lc_buf == to) ++bld.lc_item;
  } else if (k == "byte_test") {
    if (!(st = need()).ok()) return st;
    return parseByteTest(o.value, bld);
  } else if (k == "byte_jump") {
    if (!(st = need()).ok()) return st;
    return parseByteJump(o.value, bld);
  } else if (k == "byte_extract") {
    if (!(st = need()).ok()) return st;
    return parseByteExtract(o.value, bld);
  } else if (k == "flowbits") {
    if (!(st = need()).ok()) return st;
    return parseFlowbits(o.value, s);
  } else if (k == "threshold" || k == "detection_filter") {
    if (!(st = need()).ok()) return st;
    return parseThreshold(o.value, s, k == "detection_filter");
  } else if (k == "noalert") {
    s.noalert = true;
  } else if (k == "to_lowercase" || k == "dotprefix" || k == "strip_whitespace" ||
             k == "compress_whitespace" || k == "url_decode") {
    if (bld.cur < 0 || bld.sig.buffers[size_t(bld.cur)].buffer == SigBuffer::kPayload)
      return absl::InvalidArgumentError(absl::StrCat("transform `", k, "` outside a sticky buffer"));
    auto& bm = bld.sig.buffers[size_t(bld.cur)];
    if (!bm.items.empty()) return absl::InvalidArgumentError(absl::StrCat("transform `", k, "` after the buffer's first match"));
    bm.transforms.push_back(k == "to_lowercase"      ? SigTransform::kToLowercase
                            : k == "dotprefix"       ? SigTransform::kDotPrefix
                            : k == "strip_whitespace" ? SigTransform::kStripWhitespace
                            : k == "compress_whitespace" ? SigTransform::kCompressWhitespace
                                                     : SigTransform::kUrlDecode);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("keyword `", k, "` not supported"));
  }
  return absl::OkStatus();
}

// Splits the header into its 7 fields, brackets kept together.
absl::StatusOr<std::vector<std::string>> headerFields(absl::string_view h) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char ch : h) {
    if (ch == '[') ++depth;
    if (ch == ']') --depth;
    if (std::isspace(uint8_t(ch)) && depth <= 0) {
      if (!cur.empty()) out.push_back(std::move(cur)), cur.clear();
    } else if (!std::isspace(uint8_t(ch))) {
      cur += ch;
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  if (depth != 0) return absl::InvalidArgumentError("unbalanced '[' in the header");
  if (out.size() != 7)
    return absl::InvalidArgumentError(absl::StrCat("the header has ", out.size(),
                                                   " fields, expected 7 (action proto src sport dir dst dport)"));
  return out;
}

}  // namespace

bool SigAddrSet::contains(const std::array<uint8_t, 16>& a) const {
  if (any) return true;
  size_t lo = 0, hi = ranges.size();
  while (lo < hi) {  // first range whose hi >= a
    size_t mid = (lo + hi) / 2;
    if (addrLess(ranges[mid].hi, a)) lo = mid + 1;
    else hi = mid;
  }
  return lo < ranges.size() && !addrLess(a, ranges[lo].lo);
}
bool SigPortSet::contains(uint16_t p) const {
  if (any) return true;
  for (auto& r : ranges)
    if (p >= r.first && p <= r.second) return true;
  return false;
}

SigVars sigDefaultVars() {
  SigVars v;
  v.addresses = {{"HOME_NET", "[192.168.0.0/16,10.0.0.0/8,172.16.0.0/12]"},
                 {"EXTERNAL_NET", "!$HOME_NET"}};
  for (const char* n : {"HTTP_SERVERS", "SMTP_SERVERS", "SQL_SERVERS", "DNS_SERVERS", "TELNET_SERVERS",
                        "AIM_SERVERS", "DC_SERVERS", "DNP3_SERVER", "DNP3_CLIENT", "MODBUS_CLIENT",
                        "MODBUS_SERVER", "ENIP_CLIENT", "ENIP_SERVER"})
    v.addresses.emplace_back(n, "$HOME_NET");
  v.ports = {{"HTTP_PORTS", "80"},          {"SHELLCODE_PORTS", "!80"}, {"ORACLE_PORTS", "1521"},
             {"SSH_PORTS", "22"},           {"DNP3_PORTS", "20000"},    {"MODBUS_PORTS", "502"},
             {"FILE_DATA_PORTS", "[$HTTP_PORTS,110,143]"}, {"FTP_PORTS", "21"},
             {"GENEVE_PORTS", "6081"},      {"VXLAN_PORTS", "4789"},    {"TEREDO_PORTS", "3544"}};
  return v;
}

absl::StatusOr<SigClassification> parseClassification(absl::string_view text, absl::string_view source) {
  SigClassification c;
  uint32_t line = 0;
  for (absl::string_view l : absl::StrSplit(text, '\n')) {
    ++line;
    l = trim(l);
    if (!absl::ConsumePrefix(&l, "config classification:")) continue;
    std::vector<absl::string_view> f = absl::StrSplit(l, ',');
    int prio = 0;
    if (f.size() != 3 || trim(f[0]).empty() || !absl::SimpleAtoi(trim(f[2]), &prio))
      return absl::InvalidArgumentError(absl::StrCat(source, " line ", line,
                                                     ": expected `config classification: name,description,priority`"));
    c.classes[std::string(trim(f[0]))] = {std::string(trim(f[1])), prio};
  }
  return c;
}

absl::StatusOr<Signature> parseSignature(absl::string_view rule, const SigVars& vars) {
  Signature s;
  rule = trim(rule);
  s.text = std::string(rule);
  size_t open = rule.find('(');
  if (open == absl::string_view::npos || rule.back() != ')')
    return absl::InvalidArgumentError("expected `action proto src sport -> dst dport (options)`");
  auto hf = headerFields(rule.substr(0, open));
  if (!hf.ok()) return hf.status();
  const auto& h = *hf;
  if (h[0] == "alert") s.action = SigAction::kAlert;
  else if (h[0] == "drop") s.action = SigAction::kDrop;
  else if (h[0] == "reject" || h[0] == "rejectsrc" || h[0] == "rejectdst" || h[0] == "rejectboth") s.action = SigAction::kReject;
  else if (h[0] == "pass") s.action = SigAction::kPass;
  else return absl::InvalidArgumentError(absl::StrCat("action `", h[0], "` not supported"));
  static const std::pair<const char*, SigProto> kProtos[] = {
      {"ip", SigProto::kIp},     {"pkthdr", SigProto::kIp},  {"tcp", SigProto::kTcp},
      {"udp", SigProto::kUdp},   {"icmp", SigProto::kIcmp},  {"tcp-pkt", SigProto::kTcpPkt},
      {"tcp-stream", SigProto::kTcpStream}, {"http", SigProto::kHttp}, {"http1", SigProto::kHttp},
      {"dns", SigProto::kDns},   {"tls", SigProto::kTls}};
  bool proto_ok = false;
  for (auto& [n, p] : kProtos)
    if (h[1] == n) s.proto = p, proto_ok = true;
  if (!proto_ok) return absl::InvalidArgumentError(absl::StrCat("protocol `", h[1], "` not supported"));
  absl::Status st;
  if (!(st = parseAddrSet(h[2], vars, s.src)).ok()) return absl::InvalidArgumentError(absl::StrCat("source address: ", st.message()));
  if (!(st = parsePortSet(h[3], vars, s.sport)).ok()) return absl::InvalidArgumentError(absl::StrCat("source port: ", st.message()));
  if (h[4] == "<>") s.bidirectional = true;
  else if (h[4] != "->") return absl::InvalidArgumentError(absl::StrCat("direction `", h[4], "` not supported (-> or <>)"));
  if (!(st = parseAddrSet(h[5], vars, s.dst)).ok()) return absl::InvalidArgumentError(absl::StrCat("destination address: ", st.message()));
  if (!(st = parsePortSet(h[6], vars, s.dport)).ok()) return absl::InvalidArgumentError(absl::StrCat("destination port: ", st.message()));
  auto opts = splitOptions(rule.substr(open + 1, rule.size() - open - 2));
  if (!opts.ok()) return opts.status();
  Builder bld(s);
  for (const Option& o : *opts) {
    st = parseOption(o, bld);
    if (!st.ok()) {
      if (absl::StartsWith(st.message(), "keyword")) return st;
      return absl::InvalidArgumentError(absl::StrCat(o.name, ": ", st.message()));
    }
  }
  if (!bld.seen_sid) return absl::InvalidArgumentError("no sid");
  // Empty lists left by legacy modifiers moving their content.
  std::erase_if(s.buffers, [](const SigBufferMatch& m) { return m.items.empty() && m.transforms.empty(); });
  for (const SigBufferMatch& m : s.buffers)
    if (m.items.empty())
      return absl::InvalidArgumentError(absl::StrCat(sigBufferName(m.buffer), " has transforms but nothing to match"));
  // A relative item first in a buffer is relative to the buffer start (Suricata too).
  return s;
}

void parseSignatures(absl::string_view text, absl::string_view source, const SigVars& vars,
                     const SigClassification* cls, SigParseResult& out) {
  uint32_t line = 0;
  std::string rule;
  uint32_t first = 0;
  auto sidOf = [](absl::string_view r) -> uint32_t {
    size_t p = 0;
    while ((p = r.find("sid", p)) != absl::string_view::npos) {
      if ((p == 0 || r[p - 1] == ';' || r[p - 1] == '(' || std::isspace(uint8_t(r[p - 1])))) {
        size_t q = p + 3;
        while (q < r.size() && std::isspace(uint8_t(r[q]))) ++q;
        if (q < r.size() && r[q] == ':') {
          uint32_t v = 0;
          size_t e = r.find(';', q);
          if (absl::SimpleAtoi(trim(r.substr(q + 1, e == absl::string_view::npos ? absl::string_view::npos : e - q - 1)), &v)) return v;
        }
      }
      p += 3;
    }
    return 0;
  };
  for (absl::string_view l : absl::StrSplit(text, '\n')) {
    ++line;
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    if (rule.empty()) {
      absl::string_view t = trim(l);
      if (t.empty()) continue;
      if (t[0] == '#') {
        absl::string_view c = trim(t.substr(1));
        for (const char* a : {"alert ", "drop ", "reject ", "pass "})
          if (absl::StartsWith(c, a)) {
            ++out.commented;
            break;
          }
        continue;
      }
      first = line;
    }
    if (!l.empty() && l.back() == '\\') {
      rule.append(l.data(), l.size() - 1);
      continue;
    }
    rule.append(l.data(), l.size());
    auto s = parseSignature(rule, vars);
    if (s.ok()) {
      s->source = std::string(source);
      s->line = first;
      if (s->priority == 0 && cls != nullptr && !s->classtype.empty()) {
        auto it = cls->classes.find(s->classtype);
        if (it != cls->classes.end()) s->priority = it->second.second;
      }
      out.rules.push_back(std::move(*s));
    } else {
      out.refused.push_back({sidOf(rule), std::string(source), first, std::string(s.status().message())});
    }
    rule.clear();
  }
  if (!rule.empty())
    out.refused.push_back({sidOf(rule), std::string(source), first, "the file ends inside a rule continued by '\\'"});
}

}  // namespace dpu::rules
