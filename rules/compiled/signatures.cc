// Compiled Suricata-format signatures (signatures.h, docs/signatures.md).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "rules/compiled/signatures.h"

#include <pcre2.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace dpu::rules {

namespace {

constexpr uint64_t bit(SigBuffer b) { return uint64_t(1) << int(b); }

// Buffers of a request only, of a response only; the others exist on both sides.
constexpr uint64_t kRequestOnly =
    bit(SigBuffer::kHttpUri) | bit(SigBuffer::kHttpUriRaw) | bit(SigBuffer::kHttpMethod) |
    bit(SigBuffer::kHttpHost) | bit(SigBuffer::kHttpHostRaw) | bit(SigBuffer::kHttpUserAgent) |
    bit(SigBuffer::kHttpRequestLine) | bit(SigBuffer::kHttpReferer) | bit(SigBuffer::kHttpAccept) |
    bit(SigBuffer::kHttpAcceptLang) | bit(SigBuffer::kHttpAcceptEnc) | bit(SigBuffer::kHttpRequestBody);
constexpr uint64_t kResponseOnly =
    bit(SigBuffer::kHttpStatCode) | bit(SigBuffer::kHttpStatMsg) | bit(SigBuffer::kHttpResponseLine) |
    bit(SigBuffer::kHttpLocation) | bit(SigBuffer::kHttpServer) | bit(SigBuffer::kHttpResponseBody);
constexpr uint64_t kHttpBoth =
    bit(SigBuffer::kHttpHeader) | bit(SigBuffer::kHttpHeaderRaw) | bit(SigBuffer::kHttpHeaderNames) |
    bit(SigBuffer::kHttpCookie) | bit(SigBuffer::kHttpProtocol) | bit(SigBuffer::kHttpContentType) |
    bit(SigBuffer::kHttpContentLen) | bit(SigBuffer::kHttpConnection) | bit(SigBuffer::kHttpStart) |
    bit(SigBuffer::kFileData);
constexpr uint64_t kHttpAll = kRequestOnly | kResponseOnly | kHttpBoth;

inline uint8_t lower(uint8_t c) { return (c >= 'A' && c <= 'Z') ? uint8_t(c + 32) : c; }

// First occurrence of p[0, m) in s[0, n) (nocase: ASCII case-insensitively), or -1.
int64_t find(const uint8_t* s, uint32_t n, const uint8_t* p, uint32_t m, bool nocase) {
  if (m == 0) return 0;
  if (m > n) return -1;
  if (!nocase) {
    const void* r = memmem(s, n, p, m);
    return r == nullptr ? -1 : static_cast<const uint8_t*>(r) - s;
  }
  const uint8_t f = lower(p[0]);
  for (uint32_t i = 0; i + m <= n; ++i) {
    if (lower(s[i]) != f) continue;
    uint32_t j = 1;
    while (j < m && lower(s[i + j]) == lower(p[j])) ++j;
    if (j == m) return i;
  }
  return -1;
}

// Reads a byte_* value at `at`: false when out of the buffer or not a number.
bool readValue(const SigByteRead& r, const uint8_t* b, uint32_t len, int64_t at, uint64_t& v) {
  uint32_t nb = r.nbytes;
  if (nb == 0 && at >= 0 && at < int64_t(len)) nb = std::min<uint32_t>(uint32_t(len - at), 20);
  if (at < 0 || nb == 0 || at + nb > int64_t(len)) return false;
  const uint8_t* p = b + at;
  v = 0;
  if (r.string) {
    for (uint32_t i = 0; i < nb; ++i) {
      uint8_t c = p[i];
      int d = (c >= '0' && c <= '9') ? c - '0'
              : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : 99;
      if (d >= r.base) {
        if (i == 0) return false;  // Suricata: the digits that parse
        break;
      }
      v = v * r.base + uint64_t(d);
    }
  } else if (r.big_endian) {
    for (uint8_t i = 0; i < r.nbytes; ++i) v = (v << 8) | p[i];
  } else {
    for (int i = r.nbytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  }
  if (r.bitmask != 0) {
    v &= r.bitmask;
    uint32_t m = r.bitmask;
    while (m != 0 && !(m & 1)) {
      m >>= 1;
      v >>= 1;
    }
  }
  return true;
}

struct Matcher {
  const CompiledSignatures::Rule& rule;
  const SigBufferMatch& bm;
  pcre2_code* const* re;  // bm's items' compiled expressions
  const uint8_t* b;
  uint32_t len;
  SigScratch& s;

  static constexpr uint32_t kRecursionLimit = 3000;

  int64_t val(int32_t c, int8_t var) const { return var >= 0 ? int64_t(s.vars[var]) : c; }
  bool relativeAt(size_t i) const {
    if (i >= bm.items.size()) return false;
    const SigItem& n = bm.items[i];
    switch (n.kind) {
      case SigItem::kContent: return n.has_distance || n.has_within;
      case SigItem::kPcre: case SigItem::kIsDataAt: return n.relative;
      case SigItem::kByteTest: case SigItem::kByteJump: case SigItem::kByteExtract: return n.read.relative;
      default: return false;
    }
  }

  // 1: items [i, end) match with the previous match ending at `prev`; 0: no; -1: give up.
  int run(size_t i, uint32_t prev) {
    if (i >= bm.items.size()) return 1;
    if (++s.recursion > kRecursionLimit) return -1;
    const SigItem& it = bm.items[i];
    switch (it.kind) {
      case SigItem::kContent: return content(i, it, prev);
      case SigItem::kPcre: return pcre(i, it, prev);
      case SigItem::kIsDataAt: {
        int64_t at = it.value;
        bool ok = it.relative ? int64_t(prev) + at <= int64_t(len) : at < int64_t(len);
        if (it.negated) ok = !ok;
        return ok ? run(i + 1, prev) : 0;
      }
      case SigItem::kBsize: {
        bool ok = it.op == '!' ? len != it.lo : (len >= it.lo && len <= it.hi);
        return ok ? run(i + 1, prev) : -1;
      }
      case SigItem::kByteTest: {
        int64_t at = (it.read.relative ? int64_t(prev) : 0) + val(it.read.offset, it.read.offset_var);
        uint64_t v;
        if (!readValue(it.read, b, len, at, v)) return 0;
        uint64_t c = it.cmp_var >= 0 ? s.vars[it.cmp_var] : it.cmp;
        bool ok;
        switch (it.op) {
          case '<': ok = v < c; break;
          case '>': ok = v > c; break;
          case 'l': ok = v <= c; break;
          case 'g': ok = v >= c; break;
          case '&': ok = (v & c) != 0; break;
          case '^': ok = (v ^ c) != 0; break;
          default: ok = v == c; break;
        }
        if (it.op_negated) ok = !ok;
        return ok ? run(i + 1, prev) : 0;
      }
      case SigItem::kByteJump: {
        int64_t base = (it.read.relative ? int64_t(prev) : 0) + val(it.read.offset, it.read.offset_var);
        uint64_t v;
        if (!readValue(it.read, b, len, base, v)) return 0;
        int64_t jump = int64_t(v) * it.multiplier;
        int64_t to;
        if (it.from_beginning) to = jump;
        else if (it.from_end) to = int64_t(len) + jump;
        else {
          int64_t from = base + it.read.nbytes;
          if (it.align && (jump % 4) != 0) jump += 4 - (jump % 4);
          to = from + jump;
        }
        to += it.post_offset;
        if (to < 0 || to > int64_t(len)) return 0;
        return run(i + 1, uint32_t(to));
      }
      case SigItem::kByteExtract: {
        int64_t at = (it.read.relative ? int64_t(prev) : 0) + it.read.offset;
        uint64_t v;
        if (!readValue(it.read, b, len, at, v)) return 0;
        v *= uint64_t(it.multiplier);
        if (it.post_offset > 1 && (v % uint64_t(it.post_offset)) != 0) v += uint64_t(it.post_offset) - v % uint64_t(it.post_offset);
        s.vars[it.var] = v;
        return run(i + 1, uint32_t(at + it.read.nbytes));
      }
    }
    return 0;
  }

  int content(size_t i, const SigItem& c, uint32_t prev) {
    const bool rel = c.has_distance || c.has_within;
    const uint32_t m = uint32_t(c.bytes.size());
    const uint8_t* pat = reinterpret_cast<const uint8_t*>(c.bytes.data());
    int64_t retry = -1;  // next search start after an occurrence whose tail failed
    for (;;) {
      int64_t start, end = len;
      if (c.startswith) {
        start = 0;
        end = m;
      } else if (rel) {
        start = prev;
        int64_t dist = c.has_distance ? val(c.distance, c.distance_var) : 0;
        start = (dist < 0 && -dist > start) ? 0 : start + dist;
        if (c.has_within) end = std::min<int64_t>(end, int64_t(prev) + val(c.within, c.within_var) + dist);
        if (c.has_depth) end = std::min<int64_t>(end, int64_t(prev) + val(c.depth, c.depth_var));
        if (c.has_offset) start = std::max<int64_t>(start, val(c.offset, c.offset_var));
      } else {
        start = c.has_offset ? val(c.offset, c.offset_var) : 0;
        if (c.has_depth) end = start + val(c.depth, c.depth_var);
      }
      if (retry >= 0) start = retry;
      end = std::min<int64_t>(end, len);
      int64_t at = -1;
      if (start <= end && end > 0 && !(c.endswith && end < int64_t(len)) && end - start >= int64_t(m)) {
        if (c.endswith && !c.negated) {
          // the last occurrence that ends at the buffer end
          int64_t p = end - m;
          if (p >= start && find(b + p, m, pat, m, c.nocase) == 0) at = p;
        } else {
          int64_t r = find(b + start, uint32_t(end - start), pat, m, c.nocase);
          if (r >= 0) at = start + r;
          if (at >= 0 && c.negated && c.endswith && at + int64_t(m) != int64_t(len)) {
            // negated endswith: only an occurrence at the end counts
            int64_t p = int64_t(len) - m;
            at = (p >= start && find(b + p, m, pat, m, c.nocase) == 0) ? p : -1;
          }
        }
      }
      if (c.negated) {
        if (at >= 0) return rel ? 0 : -1;
        return run(i + 1, prev);
      }
      if (at < 0) return rel ? 0 : -1;
      int r = run(i + 1, uint32_t(at + m));
      if (r != 0) return r;
      if (!relativeAt(i + 1)) return -1;  // what follows does not depend on this match
      retry = at + 1;
    }
  }

  int pcre(size_t i, const SigItem& it, uint32_t prev) {
    pcre2_code* code = re[i];
    if (code == nullptr) return -1;
    PCRE2_SIZE from = it.relative ? prev : 0;
    for (;;) {
      if (from > len) return it.negated ? run(i + 1, prev) : 0;
      // The subject starts at `from` (Suricata's relative pcre: `^` is the previous match's end).
      int rc = pcre2_match(code, b + from, len - from, 0, 0, s.md, s.mctx);
      if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) ++s.pcre_errors;
      if (it.negated) return rc >= 0 ? 0 : run(i + 1, prev);
      if (rc < 0) return 0;
      PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.md);
      uint32_t end = uint32_t(from + ov[1]), begin = uint32_t(from + ov[0]);
      int r = run(i + 1, end);
      if (r != 0) return r;
      if (!relativeAt(i + 1)) return 0;
      from = begin + 1;
    }
  }
};

// The transformed copy of a buffer (transforms in order), in one of the scratch's buffers.
const uint8_t* transform(const SigBufferMatch& bm, const uint8_t* p, uint32_t& n, SigScratch& s) {
  if (bm.transforms.empty()) return p;
  int which = 0;
  const uint8_t* cur = p;
  for (SigTransform t : bm.transforms) {
    std::vector<uint8_t>& out = s.tbuf[which];
    size_t cap = out.size();
    size_t o = 0;
    auto put = [&](uint8_t c) {
      if (o < cap) out[o++] = c;
      else ++s.truncated;
    };
    switch (t) {
      case SigTransform::kToLowercase:
        for (uint32_t i = 0; i < n; ++i) put(lower(cur[i]));
        break;
      case SigTransform::kDotPrefix:
        put('.');
        for (uint32_t i = 0; i < n; ++i) put(cur[i]);
        break;
      case SigTransform::kStripWhitespace:
        for (uint32_t i = 0; i < n; ++i)
          if (!std::isspace(cur[i])) put(cur[i]);
        break;
      case SigTransform::kCompressWhitespace:
        for (uint32_t i = 0; i < n; ++i) {
          if (std::isspace(cur[i])) {
            if (o == 0 || out[o - 1] != ' ' ) put(' ');
            while (i + 1 < n && std::isspace(cur[i + 1])) ++i;
          } else {
            put(cur[i]);
          }
        }
        break;
      case SigTransform::kUrlDecode:
        for (uint32_t i = 0; i < n; ++i) {
          auto hex = [](uint8_t c) {
            return (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                   : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
          };
          if (cur[i] == '%' && i + 2 < n && hex(cur[i + 1]) >= 0 && hex(cur[i + 2]) >= 0) {
            put(uint8_t(hex(cur[i + 1]) * 16 + hex(cur[i + 2])));
            i += 2;
          } else if (cur[i] == '+') {
            put(' ');
          } else {
            put(cur[i]);
          }
        }
        break;
    }
    n = uint32_t(o);
    cur = out.data();
    which ^= 1;
  }
  return cur;
}

int onMatch(unsigned int id, unsigned long long, unsigned long long, unsigned int, void* ctx) {
  auto* a = static_cast<std::pair<const std::vector<uint32_t>*, SigScratch*>*>(ctx);
  uint32_t r = (*a->first)[id];
  uint64_t& w = a->second->cand[r >> 6];
  const uint64_t m = uint64_t(1) << (r & 63);
  if (!(w & m)) {
    w |= m;
    a->second->cand_list.push_back(r);
  }
  return 0;
}

}  // namespace

void SigScratchDeleter::operator()(SigScratch* s) const {
  if (s == nullptr) return;
  if (s->hs) hs_free_scratch(s->hs);
  if (s->md) pcre2_match_data_free(s->md);
  if (s->mctx) pcre2_match_context_free(s->mctx);
  if (s->jit) pcre2_jit_stack_free(s->jit);
  delete s;
}

CompiledSignatures::~CompiledSignatures() {
  for (auto& st : pf)
    for (auto& p : st)
      if (p.db) hs_free_database(p.db);
  for (auto& r : rules)
    for (auto* c : r.re)
      if (c) pcre2_code_free(c);
}

bool CompiledSignatures::bufferInspected(SigBuffer b) {
  // The raw payload and the HTTP request / response line and header buffers (libhtp:
  // dataplane/normalize/http.cc) and bodies, dns.query (UDP queries); not yet tls.sni.
  switch (b) {
    case SigBuffer::kTlsSni: case SigBuffer::kCount:
      return false;
    default:
      return true;
  }
}

absl::StatusOr<SigScratchPtr> CompiledSignatures::makeScratch() const {
  SigScratchPtr s(new SigScratch);
  for (const auto& st : pf)
    for (const auto& p : st)
      if (p.db && hs_alloc_scratch(p.db, &s->hs) != HS_SUCCESS)
        return absl::ResourceExhaustedError("signatures: Hyperscan scratch allocation failed");
  s->md = pcre2_match_data_create(32, nullptr);
  s->mctx = pcre2_match_context_create(nullptr);
  s->jit = pcre2_jit_stack_create(32 * 1024, 512 * 1024, nullptr);
  if (!s->md || !s->mctx || !s->jit) return absl::ResourceExhaustedError("signatures: PCRE2 allocation failed");
  pcre2_jit_stack_assign(s->mctx, nullptr, s->jit);
  pcre2_set_match_limit(s->mctx, 100000);
  pcre2_set_depth_limit(s->mctx, 10000);
  s->cand.assign((rules.size() + 63) / 64, 0);
  s->cand_list.reserve(rules.size());
  for (auto& t : s->tbuf) t.resize(65536);
  s->thresh.resize(threshold_slots);
  return s;
}

uint32_t CompiledSignatures::evaluate(const SigInput& in, SigFlowState* fs, SigScratch& s,
                                      SigHit* hits, uint32_t max_hits) const {
  const int st = int(in.stage);
  if (!(stages_ & (1u << st))) return 0;
  s.cand_list.clear();
  for (int b = 0; b < kSigBufferCount; ++b) {
    const Prefilter& p = pf[st][b];
    if (p.db == nullptr || !(in.present & (uint64_t(1) << b)) || in.len[b] == 0) continue;
    std::pair<const std::vector<uint32_t>*, SigScratch*> ctx{&p.rule_of, &s};
    hs_scan(p.db, reinterpret_cast<const char*>(in.buf[b]), in.len[b], 0, s.hs, onMatch, &ctx);
  }
  for (uint32_t r : always[st]) {
    uint64_t& w = s.cand[r >> 6];
    const uint64_t m = uint64_t(1) << (r & 63);
    if (!(w & m)) {
      w |= m;
      s.cand_list.push_back(r);
    }
  }
  std::sort(s.cand_list.begin(), s.cand_list.end());
  s.candidates += s.cand_list.size();
  uint32_t nh = 0;
  for (uint32_t ri : s.cand_list) {
    s.cand[ri >> 6] = 0;  // cleared as we go
    const Rule& r = rules[ri];
    const Signature& g = r.sig;
    // protocol
    switch (g.proto) {
      case SigProto::kTcp: case SigProto::kTcpPkt: case SigProto::kTcpStream:
        if (in.ip_proto != 6) continue;
        break;
      case SigProto::kUdp: if (in.ip_proto != 17) continue; break;
      case SigProto::kIcmp: if (in.ip_proto != 1 && in.ip_proto != 58) continue; break;
      case SigProto::kHttp: if (in.app != SigInput::kAppHttp) continue; break;
      case SigProto::kDns: if (in.app != SigInput::kAppDns) continue; break;
      case SigProto::kTls: if (in.app != SigInput::kAppTls) continue; break;
      case SigProto::kIp: break;
    }
    // addresses and ports, in the rule's direction (either with <>)
    auto fwd = [&] {
      return g.src.contains(in.src) && g.dst.contains(in.dst) && g.sport.contains(in.sport) &&
             g.dport.contains(in.dport);
    };
    auto rev = [&] {
      return g.src.contains(in.dst) && g.dst.contains(in.src) && g.sport.contains(in.dport) &&
             g.dport.contains(in.sport);
    };
    if (!fwd() && !(g.bidirectional && rev())) continue;
    // flow
    if ((g.to_server && !in.to_server) || (g.to_client && in.to_server)) continue;
    if ((g.established && !in.established) || (g.not_established && in.established)) continue;
    if (g.only_stream && in.ip_proto != 6) continue;
    if (g.has_dsize) {
      bool ok = g.dsize_op == '!' ? in.dsize != g.dsize_lo : (in.dsize >= g.dsize_lo && in.dsize <= g.dsize_hi);
      if (!ok) continue;
    }
    // flowbit conditions
    bool ok = true;
    for (const Rule::Bit& fb : r.bits) {
      if (fb.op != SigFlowbit::kIsSet && fb.op != SigFlowbit::kIsNotSet) continue;
      uint32_t set = 0;
      for (uint16_t id : fb.ids) set += (fs != nullptr && fs->has(id)) ? 1 : 0;
      const uint32_t n = uint32_t(fb.ids.size());
      bool c = fb.op == SigFlowbit::kIsSet ? (fb.all ? set == n : set > 0)
                                           : (fb.all ? set == 0 : set < n);
      if (!c) {
        ok = false;
        break;
      }
    }
    if (!ok) continue;
    // buffers
    for (size_t k = 0; k < g.buffers.size() && ok; ++k) {
      const SigBufferMatch& bm = g.buffers[k];
      const int b = int(bm.buffer);
      if (!(in.present & (uint64_t(1) << b))) {
        ok = false;
        break;
      }
      uint32_t n = in.len[b];
      const uint8_t* p = transform(bm, in.buf[b], n, s);
      s.recursion = 0;
      Matcher mt{r, bm, r.re.data() + r.re_at[k], p, n, s};
      ok = mt.run(0, 0) == 1;
    }
    if (!ok) continue;
    ++s.confirmed;
    // post-match: flowbits, threshold
    bool alert = !g.noalert;
    for (const Rule::Bit& fb : r.bits) {
      if (fs == nullptr) break;
      for (uint16_t id : fb.ids) {
        const int at = fs->find(id);
        bool want;
        if (fb.op == SigFlowbit::kSet) want = true;
        else if (fb.op == SigFlowbit::kUnset) want = false;
        else if (fb.op == SigFlowbit::kToggle) want = at < 0;
        else continue;
        if (want && at < 0) {
          if (fs->n < SigFlowState::kMaxBits) fs->bits[fs->n++] = id;
          else {
            fs->full = true;
            ++s.flowbits_full;
          }
        } else if (!want && at >= 0) {
          fs->bits[at] = fs->bits[--fs->n];
        }
      }
    }
    if (alert && g.threshold.type != SigThreshold::kNone && !s.thresh.empty()) {
      const auto& ip = g.threshold.by_dst ? in.dst : in.src;
      uint64_t h = ri * 0x9E3779B97F4A7C15ull;
      for (uint8_t c : ip) h = (h ^ c) * 0x100000001B3ull;
      const uint64_t win = uint64_t(g.threshold.seconds) * 1000000000ull;
      const size_t cap = s.thresh.size();
      SigScratch::Thresh* e = nullptr;
      for (size_t probe = 0; probe < 8; ++probe) {
        SigScratch::Thresh& t = s.thresh[(h + probe) % cap];
        if (t.rule == ri && t.ip == ip) {
          e = &t;
          break;
        }
        if (t.rule == UINT32_MAX || in.now_ns - t.window_start >= win * 2) {
          t = {};
          t.rule = ri;
          t.ip = ip;
          t.window_start = in.now_ns;
          e = &t;
          break;
        }
      }
      if (e == nullptr) {
        ++s.threshold_full;  // no room: alerts as if unthresholded (fail open, counted)
      } else {
        if (in.now_ns - e->window_start >= win) {
          e->window_start = in.now_ns;
          e->count = 0;
          e->alerted = false;
        }
        ++e->count;
        const uint32_t c = g.threshold.count;
        switch (g.threshold.type) {
          case SigThreshold::kLimit: alert = e->count <= c; break;
          case SigThreshold::kThreshold:
            alert = e->count >= c;
            if (alert) {
              e->count = 0;
              e->window_start = in.now_ns;
            }
            break;
          case SigThreshold::kBoth:
            alert = e->count >= c && !e->alerted;
            if (alert) e->alerted = true;
            break;
          case SigThreshold::kDetectionFilter: alert = e->count > c; break;
          default: break;
        }
      }
    }
    if (nh < max_hits) hits[nh++] = {ri, alert};
    else ++s.hits_dropped;
  }
  s.cand_list.clear();
  return nh;
}

namespace {

// The stage a rule is evaluated at, or a reason it cannot be.
absl::StatusOr<SigStage> stageOf(const Signature& g) {
  uint64_t used = 0;
  for (const auto& bm : g.buffers) used |= bit(bm.buffer);
  const bool payload = used & bit(SigBuffer::kPayload);
  const bool http = used & kHttpAll;
  const bool dns = used & bit(SigBuffer::kDnsQuery), tls = used & bit(SigBuffer::kTlsSni);
  if (int(payload) + int(http) + int(dns) + int(tls) > 1)
    return absl::InvalidArgumentError("raw payload and application buffers, or buffers of two protocols, in one rule: not supported");
  auto protoFits = [&](SigProto app) {
    return g.proto == app || g.proto == SigProto::kIp ||
           ((g.proto == SigProto::kTcp) && app != SigProto::kDns) ||
           ((g.proto == SigProto::kTcp || g.proto == SigProto::kUdp) && app == SigProto::kDns);
  };
  if (http) {
    if (!protoFits(SigProto::kHttp)) return absl::InvalidArgumentError("HTTP buffers in a rule of another protocol");
    if (g.has_dsize) return absl::InvalidArgumentError("dsize with HTTP buffers: not supported");
    const bool resp = (used & kResponseOnly) || g.to_client;
    if (resp && g.to_server) return absl::InvalidArgumentError("response buffers in a to_server rule");
    if (resp) {
      bool body = used & (bit(SigBuffer::kHttpResponseBody) | bit(SigBuffer::kFileData));
      if (used & bit(SigBuffer::kHttpRequestBody)) return absl::InvalidArgumentError("request and response bodies in one rule: not supported");
      return body ? SigStage::kResponseBody : SigStage::kResponse;
    }
    bool body = used & (bit(SigBuffer::kHttpRequestBody) | bit(SigBuffer::kFileData));
    return body ? SigStage::kRequestBody : SigStage::kRequest;
  }
  if (dns) {
    if (!protoFits(SigProto::kDns)) return absl::InvalidArgumentError("dns.query in a rule of another protocol");
    if (g.has_dsize) return absl::InvalidArgumentError("dsize with dns.query: not supported");
    return SigStage::kDns;
  }
  if (tls) {
    if (!protoFits(SigProto::kTls)) return absl::InvalidArgumentError("tls.sni in a rule of another protocol");
    if (g.has_dsize) return absl::InvalidArgumentError("dsize with tls.sni: not supported");
    return SigStage::kTls;
  }
  return SigStage::kPacket;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const CompiledSignatures>> compileSignatures(
    const std::vector<SigSource>& sources, const SigCompileOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  auto out = std::make_shared<CompiledSignatures>();
  out->body_limit = opt.body_limit;
  out->body_buffers = opt.body_buffers;
  SigVars vars = sigDefaultVars();
  vars.addresses.insert(vars.addresses.end(), opt.vars.addresses.begin(), opt.vars.addresses.end());
  vars.ports.insert(vars.ports.end(), opt.vars.ports.begin(), opt.vars.ports.end());
  std::vector<Signature> parsed;
  for (const SigSource& src : sources) {
    SigParseResult pr;
    parseSignatures(src.text, src.name, vars, opt.classification, pr);
    for (auto& f : pr.refused) out->refused.push_back(std::move(f));
    for (auto& g : pr.rules) parsed.push_back(std::move(g));
  }
  // Duplicate sids (gid:sid): the later one is refused, as Suricata does.
  std::vector<std::pair<uint64_t, size_t>> ids;
  for (size_t i = 0; i < parsed.size(); ++i) ids.push_back({uint64_t(parsed[i].gid) << 32 | parsed[i].sid, i});
  std::sort(ids.begin(), ids.end());
  std::vector<bool> dup(parsed.size(), false);
  for (size_t i = 1; i < ids.size(); ++i)
    if (ids[i].first == ids[i - 1].first) dup[ids[i].second] = true;
  std::vector<CompiledSignatures::Rule> rules;
  auto refuse = [&](const Signature& g, std::string why) {
    out->refused.push_back({g.sid, g.source, g.line, std::move(why)});
  };
  auto bitId = [&](const std::string& n) -> uint16_t {
    for (size_t i = 0; i < out->flowbit_names.size(); ++i)
      if (out->flowbit_names[i] == n) return uint16_t(i);
    out->flowbit_names.push_back(n);
    return uint16_t(out->flowbit_names.size() - 1);
  };
  for (size_t i = 0; i < parsed.size(); ++i) {
    Signature& g = parsed[i];
    if (dup[i]) {
      refuse(g, absl::StrCat("duplicate signature id ", g.gid, ":", g.sid));
      continue;
    }
    std::string why;
    for (const auto& bm : g.buffers)
      if (!CompiledSignatures::bufferInspected(bm.buffer)) {
        why = absl::StrCat("buffer ", sigBufferName(bm.buffer), " is not inspected yet");
        break;
      }
    if (!why.empty()) {
      refuse(g, why);
      continue;
    }
    auto stage = stageOf(g);
    if (!stage.ok()) {
      refuse(g, std::string(stage.status().message()));
      continue;
    }
    CompiledSignatures::Rule r;
    r.stage = *stage;
    bool bad = false;
    for (const auto& bm : g.buffers) {
      r.re_at.push_back(uint32_t(r.re.size()));
      for (const SigItem& it : bm.items) {
        pcre2_code* code = nullptr;
        if (it.kind == SigItem::kPcre) {
          int err = 0;
          PCRE2_SIZE off = 0;
          code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(it.pcre.data()), it.pcre.size(),
                               it.pcre_opts, &err, &off, nullptr);
          if (code == nullptr) {
            refuse(g, "pcre does not compile");
            bad = true;
            break;
          }
          pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // interpreted when JIT is unavailable
        }
        r.re.push_back(code);
      }
      if (bad) break;
    }
    if (bad) {
      for (auto* c : r.re)
        if (c) pcre2_code_free(c);
      continue;
    }
    for (const SigFlowbit& fb : g.flowbits) {
      CompiledSignatures::Rule::Bit b{uint8_t(fb.op), fb.all, {}};
      for (const auto& n : fb.names) b.ids.push_back(bitId(n));
      if (fb.op == SigFlowbit::kSet || fb.op == SigFlowbit::kUnset || fb.op == SigFlowbit::kToggle) r.sets_bits = true;
      r.bits.push_back(std::move(b));
    }
    // fast pattern: the one marked, else the longest positive content without transforms
    const SigItem* best = nullptr;
    int best_buf = -1;
    for (const auto& bm : g.buffers) {
      if (!bm.transforms.empty()) continue;
      for (const SigItem& it : bm.items) {
        if (it.kind != SigItem::kContent || it.negated) continue;
        if (best == nullptr || (it.fast_pattern && !best->fast_pattern) ||
            (it.fast_pattern == best->fast_pattern && it.bytes.size() > best->bytes.size())) {
          best = &it;
          best_buf = int(bm.buffer);
        }
      }
    }
    // A marked fast pattern in a transformed buffer: no prefilter (the transform differs per
    // rule), the rule is a candidate at every inspection of its stage.
    for (const auto& bm : g.buffers)
      for (const SigItem& it : bm.items)
        if (it.fast_pattern && !bm.transforms.empty()) best = nullptr;
    if (best != nullptr) {
      r.fp = best->bytes;
      r.fp_nocase = best->nocase;
      r.fp_buffer = best_buf;
    }
    if (opt.classification != nullptr && !g.classtype.empty()) {
      auto it = opt.classification->classes.find(g.classtype);
      if (it != opt.classification->classes.end()) {
        r.category = it->second.first;
        if (g.priority == 0) g.priority = it->second.second;
      }
    }
    r.severity = g.priority != 0 ? g.priority : 3;
    if (g.threshold.type != SigThreshold::kNone) out->threshold_slots = 65536;
    r.sig = std::move(g);
    rules.push_back(std::move(r));
  }
  // Refusals in source order (parse and compile refusals were gathered apart).
  std::vector<std::string> order;
  for (const SigSource& src : sources) order.push_back(src.name);
  auto rank = [&](const std::string& n) {
    return size_t(std::find(order.begin(), order.end(), n) - order.begin());
  };
  std::stable_sort(out->refused.begin(), out->refused.end(), [&](const SigRefusal& a, const SigRefusal& b) {
    const size_t ra = rank(a.source), rb = rank(b.source);
    return ra != rb ? ra < rb : a.line < b.line;
  });
  // Evaluation order: rules that set flowbits first (Suricata's default ordering), then by
  // priority, then as loaded.
  std::stable_sort(rules.begin(), rules.end(), [](const auto& a, const auto& b) {
    if (a.sets_bits != b.sets_bits) return a.sets_bits;
    return a.severity < b.severity;
  });
  out->rules = std::move(rules);
  // Prefilter databases.
  std::vector<std::vector<uint32_t>> members[kSigStageCount];
  for (auto& m : members) m.resize(kSigBufferCount);
  for (uint32_t i = 0; i < out->rules.size(); ++i) {
    const auto& r = out->rules[i];
    out->stages_ |= 1u << int(r.stage);
    if (r.fp_buffer < 0) out->always[int(r.stage)].push_back(i);
    else members[int(r.stage)][size_t(r.fp_buffer)].push_back(i);
  }
  for (int st = 0; st < kSigStageCount; ++st)
    for (int b = 0; b < kSigBufferCount; ++b) {
      const auto& mem = members[st][size_t(b)];
      if (mem.empty()) continue;
      auto& p = out->pf[st][b];
      p.rule_of = mem;
      out->patterns += uint32_t(mem.size());
      if (!opt.compile_hyperscan) continue;
      std::vector<const char*> exprs;
      std::vector<size_t> lens;
      std::vector<unsigned> flags, idv;
      for (uint32_t k = 0; k < mem.size(); ++k) {
        const auto& r = out->rules[mem[k]];
        exprs.push_back(r.fp.data());
        lens.push_back(r.fp.size());
        flags.push_back(HS_FLAG_SINGLEMATCH | (r.fp_nocase ? HS_FLAG_CASELESS : 0));
        idv.push_back(k);
      }
      hs_compile_error_t* err = nullptr;
      if (hs_compile_lit_multi(exprs.data(), flags.data(), idv.data(), lens.data(),
                               unsigned(exprs.size()), HS_MODE_BLOCK, nullptr, &p.db, &err) != HS_SUCCESS) {
        std::string m = err != nullptr ? err->message : "unknown error";
        if (err) hs_free_compile_error(err);
        return absl::InternalError(absl::StrCat("signatures: Hyperscan refused the ",
                                                sigBufferName(SigBuffer(b)), " fast patterns: ", m));
      }
    }
  out->compile_ns = uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now() - t0).count());
  return std::shared_ptr<const CompiledSignatures>(std::move(out));
}

}  // namespace dpu::rules
