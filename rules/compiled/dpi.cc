#include "rules/compiled/dpi.h"

#include <algorithm>
#include <limits>

namespace dpu::rules {

CompiledDpi::~CompiledDpi() {
  if (scratch_proto != nullptr) hs_free_scratch(scratch_proto);
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
  size_t total = 0;
  for (const DpiShard& sh : shards) {
    size_t sz = 0;
    if (sh.db != nullptr && sh.db->db != nullptr && hs_stream_size(sh.db->db, &sz) == HS_SUCCESS)
      total += sz;
  }
  return total;
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
  if (id >= match_info.size()) return false;
  const MatchInfo& p = match_info[id];
  if (p.anchored && base != 0) return false;  // stream reopened mid-flow: no start anchor
  uint8_t* pres = ms + presenceOffset();
  const uint32_t sid = p.string_id;
  const bool present = (pres[sid >> 3] >> (sid & 7)) & 1u;
  if (p.confirm >= 0) {  // prefiltered: presence only, once confirmed
    if (present) return false;
    if (win == nullptr || !confirm(confirms[size_t(p.confirm)], to, *win)) return false;
  }
  bool changed = !present;
  pres[sid >> 3] |= uint8_t(1u << (sid & 7));
  if (p.length == 0) return changed;  // variable length: presence only
  const uint64_t end = base + to;
  const uint64_t start = end - p.trail - p.length;
  if (p.count_slot >= 0) {
    uint8_t* c = ms + countOffset() + 4 * size_t(p.count_slot);
    uint32_t n;
    std::memcpy(&n, c, 4);
    if (n < p.count_cap) {  // saturated: the conditions read no higher count
      ++n;
      std::memcpy(c, &n, 4);
      changed = true;
      if (p.first_slot >= 0 && n <= p.num_slots) {
        uint32_t rec[2] = {uint32_t(start), p.length};
        std::memcpy(ms + slotOffset() + 8 * size_t(p.first_slot + n - 1), rec, 8);
      }
    }
  }
  uint8_t* preds = ms + predOffset();
  for (uint32_t k = p.pred_begin; k < p.pred_end; ++k) {
    const DpiPosPred& q = match_preds[k];
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
  if (c->ids != nullptr) {
    id = c->ids[id];
    if (id == DpiShard::kMasked) return 0;
  }
  if (c->dpi->onMatch(c->ms, id, to, c->base, c->win)) {
    c->changed = true;
    if (c->dirty != nullptr) {
      const uint32_t r = c->dpi->match_info[id].rule;
      c->dirty[r >> 6] |= uint64_t(1) << (r & 63);
    }
  }
  return 0;
}

namespace {

struct Val {
  int64_t v = 0;
  bool undef = false;
};
constexpr Val kUndef{0, true};

// Bits [lo, hi) of a bitmap that are set.
uint32_t countBits(const uint8_t* bits, uint32_t lo, uint32_t hi) {
  uint32_t n = 0;
  while (lo < hi && (lo & 7) != 0) n += (bits[lo >> 3] >> (lo & 7)) & 1u, ++lo;
  for (; lo + 64 <= hi; lo += 64) {
    uint64_t w;
    std::memcpy(&w, bits + (lo >> 3), 8);
    n += uint32_t(__builtin_popcountll(w));
  }
  for (; lo + 8 <= hi; lo += 8) n += uint32_t(__builtin_popcount(bits[lo >> 3]));
  while (lo < hi) n += (bits[lo >> 3] >> (lo & 7)) & 1u, ++lo;
  return n;
}

// Per-thread evaluation scratch, sized once per rule / namespace count (grows only; never
// per packet). A rule's result is valid in the evaluation whose epoch it carries, so nothing
// is cleared per call.
struct EvalScratch {
  std::vector<uint8_t> result;
  std::vector<uint32_t> stamp;
  std::vector<uint8_t> ns_sat;
  std::vector<uint32_t> ns_stamp;
  std::vector<uint32_t> todo;
  std::vector<uint32_t> tmp;  // evaluateFirst: the changed rules' results
  uint32_t epoch = 0;
  // Starts an evaluation: a new epoch (stamps of earlier ones no longer count).
  void begin(size_t nrules, size_t nns) {
    if (result.size() < nrules) result.resize(nrules), stamp.resize(nrules, 0), todo.resize(nrules);
    if (ns_sat.size() < nns) ns_sat.resize(nns), ns_stamp.resize(nns, 0);
    if (++epoch == 0) {
      std::fill(stamp.begin(), stamp.end(), 0u);
      std::fill(ns_stamp.begin(), ns_stamp.end(), 0u);
      epoch = 1;
    }
  }
};

struct Evaluator {
  const CompiledDpi& d;
  const uint8_t* ms;
  EvalScratch* sc;  // null: no rule references (constant subtrees)

  bool bit(size_t off, uint32_t i) const { return (ms[off + (i >> 3)] >> (i & 7)) & 1u; }
  // Rule q's value on `ms`, evaluated once per evaluation (rule references, global rules).
  bool rule(uint32_t q) const {
    if (sc->stamp[q] == sc->epoch) return sc->result[q] != 0;
    const Val v = eval(d.rules[q].cond);
    sc->result[q] = (!v.undef && v.v) ? 1 : 0;
    sc->stamp[q] = sc->epoch;
    return sc->result[q] != 0;
  }
  // Whether every global rule of namespace `ns` is true.
  bool nsSatisfied(uint32_t ns) const {
    if (ns + 1 >= d.ns_global_begin.size()) return true;
    if (sc->ns_stamp[ns] == sc->epoch) return sc->ns_sat[ns] != 0;
    bool ok = true;
    for (uint32_t k = d.ns_global_begin[ns]; k < d.ns_global_begin[ns + 1] && ok; ++k)
      ok = rule(d.ns_globals[k]);
    sc->ns_sat[ns] = ok;
    sc->ns_stamp[ns] = sc->epoch;
    return ok;
  }
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
        if (need <= 0) return {1, false};
        if (uint64_t(need) > n.list.size()) return {0, false};
        const uint8_t* pres = ms + d.presenceOffset();
        // The list is ascending without repeats (the translator's string sets): a run of
        // consecutive ids (`them`, `$a*`) is counted a word at a time.
        if (n.list.back() - n.list.front() + 1 == n.list.size())
          return {countBits(pres, n.list.front(), n.list.back() + 1) >= uint64_t(need), false};
        int64_t found = 0, left = int64_t(n.list.size());
        for (uint32_t s : n.list) {
          found += (pres[s >> 3] >> (s & 7)) & 1u;
          --left;
          if (found >= need) return {1, false};
          if (found + left < need) return {0, false};
        }
        return {0, false};
      }
      case CondOp::kRule: return {rule(uint32_t(n.a)), false};
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

// Children of a condition node that are nodes (string, rule and constant operands are not).
template <typename F>
void forChildren(const CondNode& n, F&& f) {
  switch (n.op) {
    case CondOp::kConst:
    case CondOp::kFilesize:
    case CondOp::kFound:
    case CondOp::kCount:
    case CondOp::kOffset:
    case CondOp::kLength:
    case CondOp::kPred:
    case CondOp::kRule:
    case CondOp::kUintEq: break;
    case CondOp::kOf:
    case CondOp::kNot:
    case CondOp::kNeg:
    case CondOp::kBitNot:
      if (n.a >= 0) f(n.a);
      break;
    default:  // binary operators
      if (n.a >= 0) f(n.a);
      if (n.b >= 0) f(n.b);
      break;
  }
}

bool isComparison(CondOp op) {
  return op == CondOp::kEq || op == CondOp::kNe || op == CondOp::kLt || op == CondOp::kLe ||
         op == CondOp::kGt || op == CondOp::kGe;
}

// A subtree that reads no state (constants and operators only).
bool constantTree(const CompiledDpi& d, int32_t idx, int depth = 0) {
  if (idx < 0 || size_t(idx) >= d.nodes.size() || depth > 200) return false;
  const CondNode& n = d.nodes[size_t(idx)];
  switch (n.op) {
    case CondOp::kConst: return true;
    case CondOp::kFilesize:
    case CondOp::kFound:
    case CondOp::kCount:
    case CondOp::kOffset:
    case CondOp::kLength:
    case CondOp::kPred:
    case CondOp::kOf:
    case CondOp::kRule:
    case CondOp::kUintEq: return false;
    default: break;
  }
  bool ok = true;
  forChildren(n, [&](int32_t c) { ok = ok && constantTree(d, c, depth + 1); });
  return ok;
}

// `x OP c` with c constant: the values of x between which the comparison's result changes,
// as thresholds t (the result is the same for every x in [t_i, t_i+1)). `x_left`: x is the
// left operand. Appends to `out`.
void comparisonThresholds(CondOp op, int64_t c, bool x_left, std::vector<int64_t>& out) {
  if (!x_left) {  // c OP x  ==  x OP' c
    switch (op) {
      case CondOp::kLt: op = CondOp::kGt; break;
      case CondOp::kLe: op = CondOp::kGe; break;
      case CondOp::kGt: op = CondOp::kLt; break;
      case CondOp::kGe: op = CondOp::kLe; break;
      default: break;
    }
  }
  const int64_t c1 = c == std::numeric_limits<int64_t>::max() ? c : c + 1;
  switch (op) {
    case CondOp::kLt: out.push_back(c); break;   // x < c: true below c
    case CondOp::kGe: out.push_back(c); break;
    case CondOp::kLe: out.push_back(c1); break;  // x <= c: true below c + 1
    case CondOp::kGt: out.push_back(c1); break;
    default: out.push_back(c); out.push_back(c1); break;  // == / !=
  }
}

}  // namespace

void CompiledDpi::buildEvalIndex() {
  const size_t nr = rules.size();
  const uint32_t nns = num_namespaces;
  // Parents of every node (a node has at most one parent in the translator's trees; counted
  // anyway: an analysis below holds only when every use of a node is the one it expects).
  std::vector<int32_t> parent(nodes.size(), -1);
  std::vector<uint32_t> uses(nodes.size(), 0);
  for (size_t i = 0; i < nodes.size(); ++i)
    forChildren(nodes[i], [&](int32_t c) {
      if (size_t(c) < nodes.size()) parent[size_t(c)] = int32_t(i), ++uses[size_t(c)];
    });
  for (size_t r = 0; r < nr; ++r)
    if (rules[r].cond >= 0 && size_t(rules[r].cond) < nodes.size()) ++uses[size_t(rules[r].cond)];
  Evaluator constant{*this, nullptr, nullptr};
  // The constant operand of a comparison whose other operand is node `x`, if there is one.
  auto comparedToConstant = [&](size_t x, int64_t& c, CondOp& op, bool& x_left) {
    if (uses[x] != 1 || parent[x] < 0) return false;
    const CondNode& p = nodes[size_t(parent[x])];
    if (!isComparison(p.op)) return false;
    x_left = p.a == int32_t(x);
    const int32_t other = x_left ? p.b : p.a;
    if (!constantTree(*this, other)) return false;
    const Val v = constant.eval(other);
    if (v.undef) return false;
    c = v.v;
    op = p.op;
    return true;
  };

  // Counter caps: per count slot, the highest count any condition distinguishes.
  count_cap.assign(num_counts, 0);
  std::vector<uint8_t> uncapped(num_counts, 0);
  for (const DpiString& s : strings)
    if (s.count_slot >= 0 && uint32_t(s.count_slot) < num_counts)
      count_cap[size_t(s.count_slot)] = std::max<uint32_t>(1, s.num_slots);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const CondNode& n = nodes[i];
    if (n.op != CondOp::kCount || n.a < 0 || size_t(n.a) >= strings.size()) continue;
    const int32_t slot = strings[size_t(n.a)].count_slot;
    if (slot < 0 || uint32_t(slot) >= num_counts) continue;
    int64_t c = 0;
    CondOp op;
    bool left;
    // #a OP c: every count above c + 1 compares as c + 1 does.
    if (comparedToConstant(i, c, op, left) && c < int64_t(0xfffffff0u)) {
      count_cap[size_t(slot)] = std::max<uint32_t>(count_cap[size_t(slot)], uint32_t(std::max<int64_t>(c + 1, 1)));
    } else {
      uncapped[size_t(slot)] = 1;
    }
  }
  for (uint32_t k = 0; k < num_counts; ++k)
    if (uncapped[k]) count_cap[k] = 0xffffffffu;

  // What onMatch touches, one record per pattern.
  match_info.assign(patterns.size(), MatchInfo{});
  match_preds.clear();
  string_rule.assign(strings.size(), 0);
  for (size_t i = 0; i < nr; ++i)
    for (uint32_t k = rules[i].first_string;
         k < rules[i].first_string + rules[i].num_strings && k < strings.size(); ++k)
      string_rule[k] = uint32_t(i);
  for (size_t id = 0; id < patterns.size(); ++id) {
    const DpiPattern& p = patterns[id];
    MatchInfo& m = match_info[id];
    if (p.string_id >= strings.size()) continue;
    const DpiString& s = strings[p.string_id];
    m.string_id = p.string_id;
    m.rule = string_rule[p.string_id];
    m.length = p.length;
    m.trail = p.trail;
    m.anchored = p.anchored;
    m.confirm = p.confirm;
    m.count_slot = s.count_slot;
    if (s.count_slot >= 0 && uint32_t(s.count_slot) < num_counts) m.count_cap = count_cap[size_t(s.count_slot)];
    m.first_slot = s.first_slot;
    m.num_slots = s.num_slots;
    m.pred_begin = uint32_t(match_preds.size());
    match_preds.insert(match_preds.end(), s.preds.begin(), s.preds.end());
    m.pred_end = uint32_t(match_preds.size());
  }

  // Rule references (dependents), global rules per namespace, filesize thresholds.
  std::vector<std::vector<uint32_t>> deps(nr);
  std::vector<std::vector<uint32_t>> ns_g(nns + 1);
  fs_breaks.clear();
  fs_every.clear();
  bool refs_look_back = true;
  for (size_t r = 0; r < nr; ++r) {
    if (rules[r].is_global && rules[r].ns < ns_g.size()) ns_g[rules[r].ns].push_back(uint32_t(r));
    std::vector<int64_t> th;
    bool every = false;
    std::vector<int32_t> stack{rules[r].cond};
    while (!stack.empty()) {
      const int32_t idx = stack.back();
      stack.pop_back();
      if (idx < 0 || size_t(idx) >= nodes.size()) continue;
      const CondNode& n = nodes[size_t(idx)];
      if (n.op == CondOp::kRule && n.a >= 0 && size_t(n.a) < nr) {
        const uint32_t q = uint32_t(n.a);
        if (q >= r) refs_look_back = false;
        if (deps[q].empty() || deps[q].back() != r) deps[q].push_back(uint32_t(r));
      } else if (n.op == CondOp::kFilesize) {
        int64_t c = 0;
        CondOp op;
        bool left;
        if (comparedToConstant(size_t(idx), c, op, left)) comparisonThresholds(op, c, left, th);
        else every = true;
      } else if (n.op == CondOp::kUintEq) {
        th.push_back(n.value);  // defined from n.value bytes on
      }
      forChildren(n, [&](int32_t c) { stack.push_back(c); });
    }
    if (every) {
      fs_every.push_back(uint32_t(r));
    } else {
      std::sort(th.begin(), th.end());
      th.erase(std::unique(th.begin(), th.end()), th.end());
      // A threshold at or below 0 is never crossed (filesize only grows from 0).
      for (int64_t t : th)
        if (t > 0) fs_breaks.emplace_back(uint64_t(t), uint32_t(r));
    }
  }
  std::sort(fs_breaks.begin(), fs_breaks.end());
  dep_begin.assign(nr + 1, 0);
  dependents.clear();
  for (size_t r = 0; r < nr; ++r) {
    dep_begin[r] = uint32_t(dependents.size());
    std::sort(deps[r].begin(), deps[r].end());
    dependents.insert(dependents.end(), deps[r].begin(), deps[r].end());
  }
  dep_begin[nr] = uint32_t(dependents.size());
  ns_global_begin.assign(nns + 2, 0);
  ns_globals.clear();
  for (uint32_t ns = 0; ns <= nns; ++ns) {
    ns_global_begin[ns] = uint32_t(ns_globals.size());
    ns_globals.insert(ns_globals.end(), ns_g[ns].begin(), ns_g[ns].end());
  }
  ns_global_begin[nns + 1] = uint32_t(ns_globals.size());

  eval_always.clear();
  global_rules.clear();
  eval_index = false;
  incremental = false;
  uint32_t next_string = 0;
  for (size_t i = 0; i < nr; ++i) {
    const DpiRule& r = rules[i];
    if (!r.needs_match) eval_always.push_back(uint32_t(i));
    if (r.is_global) global_rules.push_back(uint32_t(i));
    // Rules own consecutive, ascending string ranges (translation order); anything else and
    // the index is not used.
    if (r.num_strings != 0) {
      if (r.first_string < next_string || r.first_string + r.num_strings > strings.size()) return;
      next_string = r.first_string + r.num_strings;
    }
  }
  eval_index = true;
  // evaluateChanged() walks the dirty rules in ascending order and adds their dependents as
  // it goes: they must come later (YARA references only rules declared before).
  incremental = refs_look_back;
}

namespace {

// Whether any string of rule r is present in `ms`.
bool anyStringPresent(const CompiledDpi& d, const DpiRule& r, const uint8_t* ms) {
  const uint8_t* pres = ms + d.presenceOffset();
  uint32_t lo = r.first_string;
  const uint32_t hi = r.first_string + r.num_strings;
  while (lo < hi && (lo & 7) != 0) {
    if ((pres[lo >> 3] >> (lo & 7)) & 1u) return true;
    ++lo;
  }
  for (; lo + 8 <= hi; lo += 8)
    if (pres[lo >> 3] != 0) return true;
  for (; lo < hi; ++lo)
    if ((pres[lo >> 3] >> (lo & 7)) & 1u) return true;
  return false;
}

inline bool bitSet(const uint8_t* bits, uint32_t i) { return (bits[i >> 3] >> (i & 7)) & 1u; }

// f(string id) for every string present in `ms`, ascending: the presence bitmap 8 bytes at a
// time (mostly zero: a word per step; a constant 8-byte copy for whole words, inlined, not a
// memcpy call per word).
template <typename F>
void forEachPresentString(const CompiledDpi& d, const uint8_t* ms, F&& f) {
  const uint8_t* pres = ms + d.presenceOffset();
  const size_t nbytes = (d.strings.size() + 7) / 8;
  for (size_t byte = 0; byte < nbytes; byte += 8) {
    uint64_t bits = 0;
    if (nbytes - byte >= 8) std::memcpy(&bits, pres + byte, 8);
    else std::memcpy(&bits, pres + byte, nbytes - byte);
    while (bits != 0) {
      const uint32_t sid = uint32_t(byte * 8) + uint32_t(__builtin_ctzll(bits));
      bits &= bits - 1;
      if (sid < d.strings.size()) f(sid);
    }
  }
}

thread_local EvalScratch t_eval;

// The rules of `todo` (ascending) that are true, reportable (public, their namespace's global
// rules true) and not in `fired`, to `out`; returns how many.
uint32_t report(const CompiledDpi& d, Evaluator& ev, const uint32_t* todo, size_t ntodo,
                uint32_t* out, uint32_t max, const uint8_t* fired) {
  uint32_t n = 0;
  for (size_t k = 0; k < ntodo; ++k) {
    const uint32_t i = todo[k];
    const DpiRule& r = d.rules[i];
    if (r.is_private || (fired != nullptr && bitSet(fired, i))) continue;
    if (!ev.rule(i) || !ev.nsSatisfied(r.ns)) continue;
    if (n < max) out[n] = i;
    ++n;
  }
  return n;
}

}  // namespace

uint32_t CompiledDpi::evaluate(const uint8_t* ms, uint32_t* out, uint32_t max,
                               const uint8_t* fired) const {
  if (rules.empty()) return 0;
  EvalScratch& sc = t_eval;
  sc.begin(rules.size(), num_namespaces + 1);
  Evaluator ev{*this, ms, &sc};
  size_t ntodo = 0;
  if (eval_index) {
    // The rules to evaluate, ascending: the always list merged with the owners of the
    // strings present. Every other rule needs a match and has none, so it is false (and is
    // found false if a rule reference or a global check evaluates it).
    size_t ai = 0;
    uint32_t last = std::numeric_limits<uint32_t>::max();
    auto push = [&](uint32_t r) {
      if (r == last) return;
      last = r;
      sc.todo[ntodo++] = r;
    };
    forEachPresentString(*this, ms, [&](uint32_t sid) {
      const uint32_t r = string_rule[sid];
      while (ai < eval_always.size() && eval_always[ai] <= r) push(eval_always[ai++]);
      push(r);
    });
    while (ai < eval_always.size()) push(eval_always[ai++]);
  } else {
    for (size_t i = 0; i < rules.size(); ++i)
      if (!rules[i].needs_match || anyStringPresent(*this, rules[i], ms)) sc.todo[ntodo++] = uint32_t(i);
  }
  return report(*this, ev, sc.todo.data(), ntodo, out, max, fired);
}

void CompiledDpi::buildEmptyTable() {
  empty_table = false;
  empty_bounds.clear();
  empty_begin.clear();
  empty_rules.clear();
  if (!eval_index) return;
  for (uint32_t r : fs_every)
    if (r < rules.size() && !rules[r].needs_match) return;  // can change at any size
  for (const auto& [t, r] : fs_breaks)
    if (empty_bounds.empty() || empty_bounds.back() != t) empty_bounds.push_back(t);
  std::vector<uint8_t> ms(matchStateBytes(), 0);
  std::vector<uint32_t> hit(rules.size() + 1);
  empty_begin.reserve(empty_bounds.size() + 2);
  for (size_t k = 0; k <= empty_bounds.size(); ++k) {
    setFilesize(ms.data(), k == 0 ? 0 : empty_bounds[k - 1]);
    empty_begin.push_back(uint32_t(empty_rules.size()));
    const uint32_t n = evaluate(ms.data(), hit.data(), uint32_t(hit.size()));
    empty_rules.insert(empty_rules.end(), hit.begin(), hit.begin() + std::min<size_t>(n, hit.size()));
  }
  empty_begin.push_back(uint32_t(empty_rules.size()));
  empty_table = true;
}

uint32_t CompiledDpi::evaluateEmpty(uint64_t size, uint32_t* out, uint32_t max,
                                    const uint8_t* fired) const {
  const size_t k = size_t(std::upper_bound(empty_bounds.begin(), empty_bounds.end(), size) -
                          empty_bounds.begin());
  uint32_t n = 0;
  for (uint32_t j = empty_begin[k]; j < empty_begin[k + 1]; ++j) {
    const uint32_t r = empty_rules[j];
    if (fired != nullptr && bitSet(fired, r)) continue;
    if (n < max) out[n] = r;
    ++n;
  }
  return n;
}

uint32_t CompiledDpi::evaluateFirst(const uint8_t* ms, uint32_t* out, uint32_t max,
                                    const uint8_t* fired, uint64_t* dirty) const {
  if (rules.empty()) return 0;
  const size_t nw = dirtyWords();
  if (!empty_table || !incremental) {
    std::memset(dirty, 0, nw * 8);
    return evaluate(ms, out, max, fired);
  }
  auto mark = [&](uint32_t r) { dirty[r >> 6] |= uint64_t(1) << (r & 63); };
  auto marked = [&](uint32_t r) { return (dirty[r >> 6] >> (r & 63)) & 1u; };
  std::memset(dirty, 0, nw * 8);
  // The owners of the strings present.
  bool any = false;
  forEachPresentString(*this, ms, [&](uint32_t sid) {
    mark(string_rule[sid]);
    any = true;
  });
  const size_t k = size_t(std::upper_bound(empty_bounds.begin(), empty_bounds.end(), filesize(ms)) -
                          empty_bounds.begin());
  if (!any) return evaluateEmpty(filesize(ms), out, max, fired);
  EvalScratch& sc = t_eval;
  sc.begin(rules.size(), num_namespaces + 1);
  // Closed over the rules that reference them (always later: the word is read again after
  // each rule), ascending; a global one makes it a full evaluation.
  size_t ntodo = 0;
  for (size_t w = 0; w < nw; ++w) {
    uint64_t done = 0;
    for (uint64_t bits; (bits = dirty[w] & ~done) != 0;) {
      const uint32_t bit = uint32_t(__builtin_ctzll(bits));
      done |= uint64_t(1) << bit;
      const uint32_t r = uint32_t(w * 64) + bit;
      if (r >= rules.size()) continue;
      for (uint32_t q = dep_begin[r]; q < dep_begin[r + 1]; ++q) mark(dependents[q]);
      if (rules[r].is_global) {
        std::memset(dirty, 0, nw * 8);
        return evaluate(ms, out, max, fired);
      }
      if (fired != nullptr && bitSet(fired, r)) continue;
      // false without a string of its own, as in the empty state (a dependent)
      if (rules[r].needs_match && !anyStringPresent(*this, rules[r], ms)) continue;
      sc.todo[ntodo++] = r;
    }
  }
  // The changed rules that are true now, then merged (ascending) with the table's rules
  // that did not change.
  Evaluator ev{*this, ms, &sc};
  if (sc.tmp.size() < rules.size()) sc.tmp.resize(rules.size());
  const uint32_t na = report(*this, ev, sc.todo.data(), ntodo, sc.tmp.data(),
                             uint32_t(sc.tmp.size()), fired);
  uint32_t n = 0, ia = 0;
  auto put = [&](uint32_t r) {
    if (n < max) out[n] = r;
    ++n;
  };
  for (uint32_t j = empty_begin[k]; j < empty_begin[k + 1]; ++j) {
    const uint32_t r = empty_rules[j];
    if (marked(r) || (fired != nullptr && bitSet(fired, r))) continue;
    while (ia < na && sc.tmp[ia] < r) put(sc.tmp[ia++]);
    put(r);
  }
  while (ia < na) put(sc.tmp[ia++]);
  std::memset(dirty, 0, nw * 8);
  return n;
}

uint32_t CompiledDpi::evaluateChanged(const uint8_t* ms, uint32_t* out, uint32_t max,
                                      const uint8_t* fired, uint64_t* dirty,
                                      uint64_t prev_filesize) const {
  if (rules.empty()) return 0;
  const size_t nw = dirtyWords();
  auto full = [&]() {
    std::memset(dirty, 0, nw * 8);
    return evaluate(ms, out, max, fired);
  };
  if (!incremental) return full();
  auto mark = [&](uint32_t r) { dirty[r >> 6] |= uint64_t(1) << (r & 63); };
  const uint64_t size = filesize(ms);
  if (size != prev_filesize) {
    const uint64_t lo = std::min(size, prev_filesize), hi = std::max(size, prev_filesize);
    // Thresholds t with lo < t <= hi.
    auto it = std::upper_bound(fs_breaks.begin(), fs_breaks.end(),
                               std::make_pair(lo, std::numeric_limits<uint32_t>::max()));
    for (; it != fs_breaks.end() && it->first <= hi; ++it) mark(it->second);
    for (uint32_t r : fs_every) mark(r);
  }
  EvalScratch& sc = t_eval;
  sc.begin(rules.size(), num_namespaces + 1);
  // The dirty rules, ascending, with the rules that reference them (always later ones: the
  // word being walked is read again after each rule).
  size_t ntodo = 0;
  bool global = false;
  for (size_t w = 0; w < nw; ++w) {
    for (uint64_t bits; (bits = dirty[w]) != 0;) {
      const uint32_t r = uint32_t(w * 64) + uint32_t(__builtin_ctzll(bits));
      dirty[w] = bits & (bits - 1);
      if (r >= rules.size()) continue;
      for (uint32_t k = dep_begin[r]; k < dep_begin[r + 1]; ++k) mark(dependents[k]);
      global = global || rules[r].is_global;
      const DpiRule& rule = rules[r];
      // Nothing to report of a fired (or masked) rule (the rules that reference it, marked
      // above, evaluate it when they read it); a rule that needs a match and has none is
      // false now as it was then.
      if (fired != nullptr && bitSet(fired, r)) continue;
      if (rule.needs_match && !anyStringPresent(*this, rule, ms)) continue;
      sc.todo[ntodo++] = r;
    }
  }
  // A global rule's change changes what its namespace reports: evaluate everything.
  if (global) return evaluate(ms, out, max, fired);
  Evaluator ev{*this, ms, &sc};
  return report(*this, ev, sc.todo.data(), ntodo, out, max, fired);
}

namespace {

// How a condition node's value behaves as bytes are appended (CompiledDpi::unstableRules).
enum class Growth : uint8_t {
  kConst,  // never changes
  kFixed,  // undefined, then one value for good
  kGrows,  // always defined, >= 0, never decreases
  kBool,   // undefined / 0 / 1 whose truth, once true, stays true
  kOther,  // can go from true to false
};

struct GrowthWalk {
  const CompiledDpi& d;
  const std::vector<uint8_t>& rule_unstable;  // decided for rules before the one walked
  std::vector<uint8_t> fixed_len;             // per string: every pattern has a fixed length

  static bool stableTruth(Growth g) { return g != Growth::kOther; }
  static bool fixedOrConst(Growth g) { return g == Growth::kConst || g == Growth::kFixed; }
  static Growth join(Growth a, Growth b) {  // both constant or fixed
    return a == Growth::kConst && b == Growth::kConst ? Growth::kConst : Growth::kFixed;
  }
  bool constNonNegative(int32_t idx) const {
    return idx >= 0 && size_t(idx) < d.nodes.size() && d.nodes[size_t(idx)].op == CondOp::kConst &&
           d.nodes[size_t(idx)].value >= 0;
  }

  Growth of(int32_t idx, int depth = 0) const {
    if (idx < 0 || size_t(idx) >= d.nodes.size() || depth > 200) return Growth::kOther;
    const CondNode& n = d.nodes[size_t(idx)];
    switch (n.op) {
      case CondOp::kConst: return Growth::kConst;
      case CondOp::kFilesize:
      case CondOp::kFound:
      case CondOp::kCount:
      case CondOp::kPred: return Growth::kGrows;
      case CondOp::kOffset:
      case CondOp::kLength:
        // The i-th match's record is fixed once it exists when matches arrive in start order
        // (strings of one length); a variable-length string's can be displaced.
        return n.a >= 0 && size_t(n.a) < fixed_len.size() && fixed_len[size_t(n.a)] ? Growth::kFixed
                                                                                    : Growth::kOther;
      case CondOp::kUintEq: return Growth::kFixed;
      case CondOp::kRule:
        return n.a >= 0 && size_t(n.a) < rule_unstable.size() && !rule_unstable[size_t(n.a)]
                   ? Growth::kBool : Growth::kOther;
      case CondOp::kOf:
        // `N of`: found strings only grow; N constant (or all).
        return n.a < 0 || of(n.a, depth + 1) == Growth::kConst ? Growth::kGrows : Growth::kOther;
      case CondOp::kNot: {
        const Growth a = of(n.a, depth + 1);
        return fixedOrConst(a) ? a : Growth::kOther;
      }
      case CondOp::kAnd:
      case CondOp::kOr: {
        const Growth a = of(n.a, depth + 1), b = of(n.b, depth + 1);
        if (a == Growth::kConst && b == Growth::kConst) return Growth::kConst;
        return stableTruth(a) && stableTruth(b) ? Growth::kBool : Growth::kOther;
      }
      default: break;
    }
    const Growth a = of(n.a, depth + 1);
    const Growth b = (n.op == CondOp::kNeg || n.op == CondOp::kBitNot) ? Growth::kConst : of(n.b, depth + 1);
    if (fixedOrConst(a) && fixedOrConst(b)) return join(a, b);  // fixed once both are defined
    const bool ga = a == Growth::kGrows, gb = b == Growth::kGrows;
    switch (n.op) {
      case CondOp::kGt:
      case CondOp::kGe:  // growing > fixed: once true, true
        return ga && fixedOrConst(b) ? Growth::kBool : Growth::kOther;
      case CondOp::kLt:
      case CondOp::kLe:
        return gb && fixedOrConst(a) ? Growth::kBool : Growth::kOther;
      case CondOp::kAdd:
        if ((ga || a == Growth::kConst) && (gb || b == Growth::kConst))
          return (ga || constNonNegative(n.a)) && (gb || constNonNegative(n.b)) ? Growth::kGrows
                                                                               : Growth::kOther;
        return Growth::kOther;
      case CondOp::kMul:
        if ((ga && gb) || (ga && constNonNegative(n.b)) || (gb && constNonNegative(n.a)))
          return Growth::kGrows;
        return Growth::kOther;
      default: return Growth::kOther;
    }
  }
};

}  // namespace

std::vector<uint8_t> CompiledDpi::unstableRules() const {
  std::vector<uint8_t> out(rules.size(), 0);
  GrowthWalk w{*this, out, std::vector<uint8_t>(strings.size(), 1)};
  for (const DpiPattern& p : patterns)
    if (p.string_id < w.fixed_len.size() && p.length == 0) w.fixed_len[p.string_id] = 0;
  // Rules reference earlier rules only (declaration order); a later reference is unstable.
  for (size_t r = 0; r < rules.size(); ++r) out[r] = w.of(rules[r].cond) == Growth::kOther ? 1 : 0;
  std::vector<uint8_t> ns_unstable(num_namespaces + 1, 0);
  for (size_t r = 0; r < rules.size(); ++r)
    if (rules[r].is_global && out[r] && rules[r].ns < ns_unstable.size()) ns_unstable[rules[r].ns] = 1;
  for (size_t r = 0; r < rules.size(); ++r)
    if (rules[r].ns < ns_unstable.size() && ns_unstable[rules[r].ns]) out[r] = 1;
  return out;
}

std::vector<uint32_t> CompiledDpi::scanBuffer(const uint8_t* data, size_t len, uint8_t* ms,
                                              hs_scratch_t* scratch) const {
  resetMatchState(ms);
  setFilesize(ms, len);
  if (!shards.empty()) {
    std::unique_ptr<DpiConfirmScratch> cs;
    if (!confirms.empty()) cs = std::make_unique<DpiConfirmScratch>(prefilter_window, kConfirmMatchLimit);
    DpiWindow win;
    win.cur = data;
    win.cur_len = uint32_t(len);
    win.scratch = cs.get();
    DpiMatchCtx ctx{this, ms, 0, false, &win};
    DpiStreamSet set(*this);
    set.scan(reinterpret_cast<const char*>(data), len, scratch, ctx);
    win.at_end = true;
    set.close(scratch, &ctx);
  }
  std::vector<uint32_t> out(rules.size());
  uint32_t n = evaluate(ms, out.data(), uint32_t(out.size()));
  out.resize(n);
  return out;
}

DpiStreamSet::DpiStreamSet(const CompiledDpi& d) : d_(d) {
  for (const DpiShard& sh : d.shards) {
    hs_stream_t* st = nullptr;
    if (hs_open_stream(sh.db->db, 0, &st) != HS_SUCCESS) {
      close(nullptr, nullptr);
      return;
    }
    st_.push_back(st);
  }
}

void DpiStreamSet::scan(const char* p, size_t n, hs_scratch_t* scratch, DpiMatchCtx& ctx) {
  for (size_t k = 0; k < st_.size(); ++k) {
    ctx.ids = d_.shards[k].ids.data();
    hs_scan_stream(st_[k], p, unsigned(n), 0, scratch, dpiMatchCallback, &ctx);
  }
}

void DpiStreamSet::close(hs_scratch_t* scratch, DpiMatchCtx* ctx) {
  for (size_t k = 0; k < st_.size(); ++k) {
    if (ctx != nullptr) ctx->ids = d_.shards[k].ids.data();
    hs_close_stream(st_[k], ctx != nullptr ? scratch : nullptr, ctx != nullptr ? dpiMatchCallback : nullptr, ctx);
  }
  st_.clear();
}

}  // namespace dpu::rules
