#include "rules/compiled/dpi.h"

#include <algorithm>
#include <limits>

namespace dpu::rules {

CompiledDpi::~CompiledDpi() {
  if (scratch_proto != nullptr) hs_free_scratch(scratch_proto);
  if (db != nullptr) hs_free_database(db);
}

DpiConfirmScratch::DpiConfirmScratch(uint32_t window_bytes, uint32_t match_limit)
    : buf_(new uint8_t[std::max<uint32_t>(window_bytes, 1)]), cap_(window_bytes) {
  md_ = pcre2_match_data_create(1, nullptr);
  mctx_ = pcre2_match_context_create(nullptr);
  if (mctx_ == nullptr) return;
  pcre2_set_match_limit(mctx_, match_limit);
  // JIT code runs on this stack (reserved here, not per match); without JIT (or when the
  // stack cannot be made) PCRE2's interpreter keeps its backtracking frames in md_.
  jit_ = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr);
  if (jit_ != nullptr) pcre2_jit_stack_assign(mctx_, nullptr, jit_);
}

DpiConfirmScratch::~DpiConfirmScratch() {
  if (jit_ != nullptr) pcre2_jit_stack_free(jit_);
  if (mctx_ != nullptr) pcre2_match_context_free(mctx_);
  if (md_ != nullptr) pcre2_match_data_free(md_);
}

bool CompiledDpi::confirm(const DpiConfirm& c, uint64_t to, DpiWindow& w) const {
  DpiConfirmScratch* sc = w.scratch;
  const uint64_t cur_end = w.cur_off + w.cur_len;
  if (sc == nullptr || !sc->ok() || c.code == nullptr || to > cur_end) {
    ++w.errors;
    return false;
  }
  // The bytes the match can cover: [to - max_width, to), cut to what the window holds.
  const uint64_t held = (w.ring != nullptr && w.ring_size != 0) ? w.ring_from : w.cur_off;
  uint64_t from = to > c.max_width ? to - c.max_width : 0;
  if (from < held) from = std::min(held, to);
  size_t len = size_t(to - from);
  if (len > sc->bufBytes()) {  // (max_width <= the scratch size by construction)
    from = to - sc->bufBytes();
    len = sc->bufBytes();
  }
  const uint8_t* subj;
  if (from >= w.cur_off) {
    subj = w.cur + (from - w.cur_off);
  } else {
    uint8_t* b = sc->buf();
    const uint64_t ring_end = std::min(to, w.cur_off);
    size_t k = 0;
    for (uint64_t o = from; o < ring_end;) {
      const size_t idx = size_t(o % w.ring_size);
      const size_t n = size_t(std::min<uint64_t>(ring_end - o, w.ring_size - idx));
      std::memcpy(b + k, w.ring + idx, n);
      k += n;
      o += n;
    }
    if (to > w.cur_off) std::memcpy(b + k, w.cur, size_t(to - w.cur_off));
    subj = b;
  }
  uint64_t start = from;  // stream offset of the subject's first byte
  if (c.wide) {
    // YARA's wide form of `expr` matches exactly the (char, 0) pairs whose chars match
    // `expr`: take the run of such pairs ending at `to` and confirm on its chars.
    size_t i = len;
    while (i >= 2 && subj[i - 1] == 0) i -= 2;
    uint8_t* b = sc->buf();
    const size_t n = (len - i) / 2;
    for (size_t k = 0; k < n; ++k) b[k] = subj[i + 2 * k];  // in place: b + k <= subj + i + 2k
    start = from + i;
    subj = b;
    len = n;
  }
  static const uint8_t kNothing[1] = {0};
  if (subj == nullptr) subj = kNothing;  // (an empty subject at the stream's close)
  uint32_t opts = 0;
  if (start != 0) opts |= PCRE2_NOTBOL;                   // `^`: the stream's first byte only
  if (!(w.at_end && to == cur_end)) opts |= PCRE2_NOTEOL;  // `$`: the end of the data only
  const int rc = pcre2_match(c.code.get(), subj, len, 0, opts, sc->md(), sc->mctx());
  if (rc >= 0) {
    ++w.confirmed;
    return true;
  }
  if (rc == PCRE2_ERROR_NOMATCH) ++w.rejected;
  else ++w.errors;
  return false;
}

size_t CompiledDpi::streamStateBytes() const {
  size_t sz = 0;
  if (db == nullptr || hs_stream_size(db, &sz) != HS_SUCCESS) return 0;
  return sz;
}

const char* dpiActionName(DpiAction a) {
  switch (a) {
    case DpiAction::kAlert: return "alert";
    case DpiAction::kDrop: return "drop";
    case DpiAction::kReset: return "reset";
  }
  return "?";
}

bool CompiledDpi::onMatch(uint8_t* ms, unsigned id, uint64_t to, uint64_t base,
                          DpiWindow* win) const {
  if (id >= patterns.size()) return false;
  const DpiPattern& p = patterns[id];
  if (p.anchored && base != 0) return false;  // stream reopened mid-flow: no start anchor
  const DpiString& s = strings[p.string_id];
  uint8_t* pres = ms + presenceOffset();
  const uint32_t sid = p.string_id;
  if (p.confirm >= 0) {  // prefiltered: presence only, once confirmed
    if (pres[sid >> 3] & (1u << (sid & 7))) return false;
    if (win == nullptr || !confirm(confirms[size_t(p.confirm)], to, *win)) return false;
  }
  bool changed = (pres[sid >> 3] & (1u << (sid & 7))) == 0;
  pres[sid >> 3] |= uint8_t(1u << (sid & 7));
  if (p.length == 0) return changed;  // variable length: presence only
  const uint64_t end = base + to;
  const uint64_t start = end - p.trail - p.length;
  uint32_t n = 0;
  if (s.count_slot >= 0) {
    uint8_t* c = ms + countOffset() + 4 * size_t(s.count_slot);
    std::memcpy(&n, c, 4);
    if (n != std::numeric_limits<uint32_t>::max()) ++n;
    std::memcpy(c, &n, 4);
    changed = true;
  }
  if (s.first_slot >= 0 && n >= 1 && n <= s.num_slots) {
    uint32_t rec[2] = {uint32_t(start), p.length};
    std::memcpy(ms + slotOffset() + 8 * size_t(s.first_slot + n - 1), rec, 8);
  }
  uint8_t* preds = ms + predOffset();
  for (const DpiPosPred& q : s.preds) {
    const int64_t st = int64_t(start);
    if (q.at ? st == q.lo : (st >= q.lo && st <= q.hi)) {
      if ((preds[q.bit >> 3] & (1u << (q.bit & 7))) == 0) changed = true;
      preds[q.bit >> 3] |= uint8_t(1u << (q.bit & 7));
    }
  }
  return changed;
}

int dpiMatchCallback(unsigned id, unsigned long long /*from*/, unsigned long long to,
                     unsigned /*flags*/, void* ctx) {
  auto* c = static_cast<DpiMatchCtx*>(ctx);
  if (c->dpi->onMatch(c->ms, id, to, c->base, c->win)) c->changed = true;
  return 0;
}

namespace {

struct Val {
  int64_t v = 0;
  bool undef = false;
};
constexpr Val kUndef{0, true};

struct Evaluator {
  const CompiledDpi& d;
  const uint8_t* ms;
  const uint8_t* rule_results;

  bool bit(size_t off, uint32_t i) const { return (ms[off + (i >> 3)] >> (i & 7)) & 1u; }
  uint32_t count(const DpiString& s) const {
    uint32_t n = 0;
    std::memcpy(&n, ms + d.countOffset() + 4 * size_t(s.count_slot), 4);
    return n;
  }

  Val eval(int32_t idx) const {
    const CondNode& n = d.nodes[size_t(idx)];
    switch (n.op) {
      case CondOp::kConst: return {n.value, false};
      case CondOp::kFilesize: return {int64_t(CompiledDpi::filesize(ms)), false};
      case CondOp::kFound: return {bit(d.presenceOffset(), uint32_t(n.a)), false};
      case CondOp::kCount: return {int64_t(count(d.strings[size_t(n.a)])), false};
      case CondOp::kOffset:
      case CondOp::kLength: {
        const DpiString& s = d.strings[size_t(n.a)];
        if (n.value < 1 || uint64_t(n.value) > s.num_slots) return kUndef;
        if (count(s) < uint64_t(n.value)) return kUndef;
        uint32_t rec[2];
        std::memcpy(rec, ms + d.slotOffset() + 8 * size_t(s.first_slot + n.value - 1), 8);
        return {int64_t(n.op == CondOp::kOffset ? rec[0] : rec[1]), false};
      }
      case CondOp::kPred: return {bit(d.predOffset(), uint32_t(n.value)), false};
      case CondOp::kOf: {
        int64_t need = int64_t(n.list.size());
        if (n.a >= 0) {
          Val q = eval(n.a);
          if (!q.undef) need = q.v;
        }
        int64_t found = 0;
        for (uint32_t s : n.list) found += bit(d.presenceOffset(), s);
        return {found >= need, false};
      }
      case CondOp::kRule: return {rule_results[size_t(n.a)] != 0, false};
      case CondOp::kUintEq:
        if (CompiledDpi::filesize(ms) < uint64_t(n.value)) return kUndef;
        return {bit(d.presenceOffset(), uint32_t(n.a)), false};
      case CondOp::kAnd: {
        Val l = eval(n.a);
        if (l.undef || !l.v) return l.undef ? kUndef : Val{0, false};
        Val r = eval(n.b);
        return {(!r.undef && r.v) ? 1 : 0, false};
      }
      case CondOp::kOr: {
        Val l = eval(n.a);
        if (!l.undef && l.v) return {1, false};
        Val r = eval(n.b);
        if (l.undef) return r.undef ? kUndef : Val{r.v != 0, false};
        if (r.undef) return {0, false};
        return {r.v != 0, false};
      }
      case CondOp::kNot: {
        Val l = eval(n.a);
        if (l.undef) return kUndef;
        return {!l.v, false};
      }
      case CondOp::kNeg:
      case CondOp::kBitNot: {
        Val l = eval(n.a);
        if (l.undef) return kUndef;
        return {n.op == CondOp::kNeg ? int64_t(0ull - uint64_t(l.v)) : ~l.v, false};
      }
      default: break;
    }
    Val l = eval(n.a);
    Val r = eval(n.b);
    if (l.undef || r.undef) return kUndef;
    const uint64_t ul = uint64_t(l.v), ur = uint64_t(r.v);
    switch (n.op) {
      case CondOp::kEq: return {l.v == r.v, false};
      case CondOp::kNe: return {l.v != r.v, false};
      case CondOp::kLt: return {l.v < r.v, false};
      case CondOp::kLe: return {l.v <= r.v, false};
      case CondOp::kGt: return {l.v > r.v, false};
      case CondOp::kGe: return {l.v >= r.v, false};
      case CondOp::kAdd: return {int64_t(ul + ur), false};
      case CondOp::kSub: return {int64_t(ul - ur), false};
      case CondOp::kMul: return {int64_t(ul * ur), false};
      case CondOp::kDiv:
        if (r.v == 0 || (r.v == -1 && l.v == std::numeric_limits<int64_t>::min())) return kUndef;
        return {l.v / r.v, false};
      case CondOp::kMod:
        if (r.v == 0 || r.v == -1) return r.v == 0 ? kUndef : Val{0, false};
        return {l.v % r.v, false};
      case CondOp::kBitAnd: return {l.v & r.v, false};
      case CondOp::kBitOr: return {l.v | r.v, false};
      case CondOp::kBitXor: return {l.v ^ r.v, false};
      case CondOp::kShl:
        if (r.v < 0) return kUndef;
        return {r.v < 64 ? int64_t(ul << r.v) : 0, false};
      case CondOp::kShr:
        if (r.v < 0) return kUndef;
        return {r.v < 64 ? (l.v >> r.v) : 0, false};
      default: return kUndef;
    }
  }
};

}  // namespace

namespace {

// Walks a condition tree: whether it reads filesize, and the rules it references.
void condInputs(const CompiledDpi& d, int32_t root, bool& fs, std::vector<uint32_t>& refs) {
  std::vector<int32_t> stack{root};
  while (!stack.empty()) {
    const int32_t idx = stack.back();
    stack.pop_back();
    if (idx < 0 || size_t(idx) >= d.nodes.size()) continue;
    const CondNode& n = d.nodes[size_t(idx)];
    switch (n.op) {
      case CondOp::kFilesize:
      case CondOp::kUintEq: fs = true; break;
      case CondOp::kRule: refs.push_back(uint32_t(n.a)); break;
      case CondOp::kConst:
      case CondOp::kFound:
      case CondOp::kCount:
      case CondOp::kOffset:
      case CondOp::kLength:
      case CondOp::kPred: break;
      case CondOp::kOf:
      case CondOp::kNot:
      case CondOp::kNeg:
      case CondOp::kBitNot: stack.push_back(n.a); break;
      default:  // binary operators
        stack.push_back(n.a);
        stack.push_back(n.b);
        break;
    }
  }
}

}  // namespace

void CompiledDpi::buildEvalIndex() {
  // Tick set (see filesize_tick).
  {
    const size_t nr = rules.size();
    std::vector<std::vector<uint32_t>> refs(nr);
    std::vector<uint8_t> fs_dep(nr, 0), ns_fs_global(num_namespaces + 1, 0);
    for (size_t i = 0; i < nr; ++i) {
      bool fs = false;
      condInputs(*this, rules[i].cond, fs, refs[i]);
      for (uint32_t r : refs[i]) fs = fs || (r < nr && fs_dep[r]);
      fs_dep[i] = fs;
      if (fs && rules[i].is_global && rules[i].ns < ns_fs_global.size()) ns_fs_global[rules[i].ns] = 1;
    }
    filesize_tick.assign(nr, 0);
    for (size_t i = 0; i < nr; ++i)
      filesize_tick[i] = fs_dep[i] || (rules[i].ns < ns_fs_global.size() && ns_fs_global[rules[i].ns]);
    // Close over referenced rules and over the global rules of namespaces with tick rules
    // (references may point anywhere; repeat until nothing changes).
    for (bool grew = true; grew;) {
      grew = false;
      for (size_t k = nr; k-- > 0;) {
        if (!filesize_tick[k]) continue;
        for (uint32_t r : refs[k]) {
          if (r < nr && !filesize_tick[r]) filesize_tick[r] = 1, grew = true;
        }
      }
      std::vector<uint8_t> ns_tick(num_namespaces + 1, 0);
      for (size_t i = 0; i < nr; ++i)
        if (filesize_tick[i] && rules[i].ns < ns_tick.size()) ns_tick[rules[i].ns] = 1;
      for (size_t i = 0; i < nr; ++i) {
        if (rules[i].is_global && !filesize_tick[i] && rules[i].ns < ns_tick.size() &&
            ns_tick[rules[i].ns])
          filesize_tick[i] = 1, grew = true;
      }
    }
    num_tick_rules = 0;
    for (uint8_t t : filesize_tick) num_tick_rules += t;
  }
  eval_always.clear();
  global_rules.clear();
  string_rule.assign(strings.size(), 0);
  eval_index = false;
  uint32_t next_string = 0;
  for (size_t i = 0; i < rules.size(); ++i) {
    const DpiRule& r = rules[i];
    if (!r.needs_match) eval_always.push_back(uint32_t(i));
    if (r.is_global) global_rules.push_back(uint32_t(i));
    // Rules own consecutive, ascending string ranges (translation order); anything else and
    // the index is not used.
    if (r.num_strings != 0) {
      if (r.first_string < next_string || r.first_string + r.num_strings > strings.size()) return;
      for (uint32_t k = r.first_string; k < r.first_string + r.num_strings; ++k)
        string_rule[k] = uint32_t(i);
      next_string = r.first_string + r.num_strings;
    }
  }
  eval_index = true;
}

uint32_t CompiledDpi::evaluate(const uint8_t* ms, uint32_t* out, uint32_t max,
                               const uint8_t* fired, bool tick_only) const {
  // No rule, no match (and the scratch below would be empty: memset of a null pointer).
  if (rules.empty()) return 0;
  // Per-thread scratch sized once per rule count (grows only; never per packet).
  thread_local std::vector<uint8_t> results;
  thread_local std::vector<uint8_t> ns_unsat;
  thread_local std::vector<uint32_t> todo;
  if (results.size() < rules.size()) results.resize(rules.size());
  if (ns_unsat.size() < num_namespaces) ns_unsat.resize(num_namespaces);
  std::memset(ns_unsat.data(), 0, num_namespaces);
  Evaluator ev{*this, ms, results.data()};
  if (eval_index) {
    // The rules to evaluate, ascending (rule references only look back): the always list
    // merged with the owners of the strings present. Every other rule needs a match and has
    // none, so it is false, as the full walk below would find.
    if (todo.size() < rules.size()) todo.resize(rules.size());
    std::memset(results.data(), 0, rules.size());
    const uint8_t* pres = ms + presenceOffset();
    const size_t nbytes = (strings.size() + 7) / 8;
    size_t ntodo = 0, ai = 0;
    uint32_t last = std::numeric_limits<uint32_t>::max();
    const bool tick = tick_only && filesize_tick.size() == rules.size();
    auto push = [&](uint32_t r) {
      if (r == last) return;
      last = r;
      if (!tick || filesize_tick[r]) todo[ntodo++] = r;
    };
    auto add = [&](uint32_t r) {
      while (ai < eval_always.size() && eval_always[ai] <= r) push(eval_always[ai++]);
      push(r);
    };
    // The presence bitmap 8 bytes at a time (mostly zero: skipped a word per step).
    for (size_t byte = 0; byte < nbytes; byte += 8) {
      uint64_t bits = 0;
      std::memcpy(&bits, pres + byte, nbytes - byte >= 8 ? 8 : nbytes - byte);
      while (bits != 0) {
        const uint32_t sid = uint32_t(byte * 8) + uint32_t(__builtin_ctzll(bits));
        bits &= bits - 1;
        if (sid < strings.size()) add(string_rule[sid]);
      }
    }
    while (ai < eval_always.size()) push(eval_always[ai++]);
    for (size_t k = 0; k < ntodo; ++k) {
      const uint32_t i = todo[k];
      Val v = ev.eval(rules[i].cond);
      results[i] = (!v.undef && v.v) ? 1 : 0;
    }
    for (uint32_t g : global_rules) {
      if (!results[g]) ns_unsat[rules[g].ns] = 1;
    }
    uint32_t n = 0;
    for (size_t k = 0; k < ntodo; ++k) {
      const uint32_t i = todo[k];
      if (!results[i] || rules[i].is_private || ns_unsat[rules[i].ns]) continue;
      if (fired != nullptr && ((fired[i >> 3] >> (i & 7)) & 1u)) continue;
      if (n < max) out[n] = i;
      ++n;
    }
    return n;
  }
  for (size_t i = 0; i < rules.size(); ++i) {
    const DpiRule& r = rules[i];
    if (r.needs_match) {
      // Any presence bit in [first_string, first_string + num_strings): whole bytes at once.
      const uint8_t* pres = ms + presenceOffset();
      uint32_t lo = r.first_string, hi = r.first_string + r.num_strings;
      bool any = false;
      while (lo < hi && (lo & 7) != 0 && !any) any = (pres[lo >> 3] >> (lo & 7)) & 1u, ++lo;
      while (lo + 8 <= hi && !any) any = pres[lo >> 3] != 0, lo += 8;
      while (lo < hi && !any) any = (pres[lo >> 3] >> (lo & 7)) & 1u, ++lo;
      if (!any) {
        results[i] = 0;
        if (r.is_global) ns_unsat[r.ns] = 1;
        continue;
      }
    }
    Val v = ev.eval(rules[i].cond);
    results[i] = (!v.undef && v.v) ? 1 : 0;
    if (!results[i] && rules[i].is_global) ns_unsat[rules[i].ns] = 1;
  }
  uint32_t n = 0;
  for (size_t i = 0; i < rules.size(); ++i) {
    if (!results[i] || rules[i].is_private || ns_unsat[rules[i].ns]) continue;
    if (fired != nullptr && ((fired[i >> 3] >> (i & 7)) & 1u)) continue;
    if (n < max) out[n] = uint32_t(i);
    ++n;
  }
  return n;
}

std::vector<uint32_t> CompiledDpi::scanBuffer(const uint8_t* data, size_t len, uint8_t* ms,
                                              hs_scratch_t* scratch) const {
  resetMatchState(ms);
  setFilesize(ms, len);
  if (db != nullptr) {
    std::unique_ptr<DpiConfirmScratch> cs;
    if (!confirms.empty()) cs = std::make_unique<DpiConfirmScratch>(prefilter_window, kConfirmMatchLimit);
    DpiWindow win;
    win.cur = data;
    win.cur_len = uint32_t(len);
    win.scratch = cs.get();
    DpiMatchCtx ctx{this, ms, 0, false, &win};
    hs_stream_t* st = nullptr;
    if (hs_open_stream(db, 0, &st) == HS_SUCCESS) {
      hs_scan_stream(st, reinterpret_cast<const char*>(data), unsigned(len), 0, scratch,
                     dpiMatchCallback, &ctx);
      win.at_end = true;
      hs_close_stream(st, scratch, dpiMatchCallback, &ctx);
    }
  }
  std::vector<uint32_t> out(rules.size());
  uint32_t n = evaluate(ms, out.data(), uint32_t(out.size()));
  out.resize(n);
  return out;
}

}  // namespace dpu::rules
