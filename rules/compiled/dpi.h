// Compiled DPI: YARA rules translated to one Hyperscan streaming database plus condition trees
// evaluated on per-stream match state. Built by rules/compile/yara_translate (control side),
// immutable afterwards, shared through the Snapshot; read by workers (scan + evaluate) and by
// tests (the differential test against libyara). No DPDK here.
//
// Per stream (one flow direction) the caller owns two pieces of memory:
//   - a Hyperscan stream (hs_stream_t, streamStateBytes()),
//   - a match state of matchStateBytes() bytes: the bytes seen so far ("filesize"), one
//     presence bit per string, one bit per positional predicate (`$a at N`, `$a in (N..M)`),
//     a counter per counted string (`#a`) and the first K (offset, length) pairs of strings
//     whose `@a[i]` / `!a[i]` are used.
// filesize in a condition is the number of bytes of the stream seen so far.
#pragma once

#include <hs/hs.h>
#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "rules/compiled/signatures.h"
#include "rules/model/dpi.h"

namespace dpu::rules {

// Condition tree node kinds.
enum class CondOp : uint8_t {
  kConst,        // value
  kFilesize,
  kFound,        // $a                 (a = string)
  kCount,        // #a                 (a = string)
  kOffset,       // @a[value]          (a = string, value = i, constant)
  kLength,       // !a[value]
  kPred,         // $a at N / $a in (N..M): bit `value` of the predicate bitset
  kOf,           // N of (...): a = node giving N (-1 = all), list = strings
  kRule,         // a = rule index
  kUintEq,       // uintXX(N) == C via hidden anchored string a; value = bytes needed
  kAnd, kOr, kNot,
  kEq, kNe, kLt, kLe, kGt, kGe,
  kAdd, kSub, kMul, kDiv, kMod, kNeg,
  kBitAnd, kBitOr, kBitXor, kBitNot, kShl, kShr,
};

struct CondNode {
  CondOp op = CondOp::kConst;
  int64_t value = 0;
  int32_t a = -1;
  int32_t b = -1;
  std::vector<uint32_t> list;
};

// One Hyperscan expression (id = index in CompiledDpi::patterns).
struct DpiPattern {
  uint32_t string_id = 0;
  uint32_t length = 0;      // bytes of the string itself (start = end - trail - length); 0 = variable
  uint32_t trail = 0;       // bytes after the string the expression consumes (fullword)
  bool anchored = false;    // matches only at a position counted from stream start
  int32_t confirm = -1;     // prefiltered (HS_FLAG_PREFILTER): index in CompiledDpi::confirms
  // The expression can match at the end of the data (`\z`: YARA's `$`, fullword at the last
  // byte): such a match is reported when the stream closes (docs/http.md, hold-back).
  bool eod = false;
};

// A pattern Hyperscan cannot compile exactly ("Pattern is too large", resource limits) is
// compiled with HS_FLAG_PREFILTER: Hyperscan then reports a superset of its match end
// offsets, and each candidate counts only when PCRE2 confirms that the exact expression
// matches bytes ending there. Only presence is recorded for such strings (their counts and
// positions are unsupported), so a string already present skips confirmation.
struct DpiConfirm {
  std::string expr;          // PCRE2 source: the exact expression (the narrow form if `wide`)
  unsigned hs_flags = 0;     // flags of the exact Hyperscan expression (CASELESS, DOTALL)
  std::shared_ptr<pcre2_code> code;  // compiled with PCRE2_ENDANCHORED (+ JIT when available)
  uint32_t max_width = 0;    // longest match of the Hyperscan expression, bytes
  bool wide = false;         // the Hyperscan expression is `expr` in YARA's wide form:
                             // confirmed by running `expr` on the narrowed (char, 0) pairs
};

// Per-thread working memory for confirmations, allocated once (per worker at prepare time):
// a buffer of the widest prefiltered match, PCRE2 match data, match context (match limit)
// and JIT stack. No allocation when a candidate is confirmed.
class DpiConfirmScratch {
 public:
  DpiConfirmScratch(uint32_t window_bytes, uint32_t match_limit);
  ~DpiConfirmScratch();
  DpiConfirmScratch(const DpiConfirmScratch&) = delete;
  DpiConfirmScratch& operator=(const DpiConfirmScratch&) = delete;
  bool ok() const { return md_ != nullptr && mctx_ != nullptr; }
  uint8_t* buf() { return buf_.get(); }
  uint32_t bufBytes() const { return cap_; }
  pcre2_match_data* md() { return md_; }
  pcre2_match_context* mctx() { return mctx_; }

 private:
  std::unique_ptr<uint8_t[]> buf_;
  uint32_t cap_ = 0;
  pcre2_match_data* md_ = nullptr;
  pcre2_match_context* mctx_ = nullptr;
  pcre2_jit_stack* jit_ = nullptr;
};

// The bytes a scan can confirm prefilter candidates on: the buffer being scanned (`cur`, at
// stream offset cur_off) and, before it, the direction's history ring (ring[o % ring_size]
// holds the byte at stream offset o for o in [ring_from, cur_off)). Candidates whose match
// could start before the first byte held are confirmed on the bytes held (see docs/dpi.md:
// a direction without a history window).
struct DpiWindow {
  const uint8_t* cur = nullptr;
  uint64_t cur_off = 0;
  uint32_t cur_len = 0;
  const uint8_t* ring = nullptr;
  uint32_t ring_size = 0;
  uint64_t ring_from = 0;
  bool at_end = false;       // stream close: YARA's `$` may match at the last byte's end
  DpiConfirmScratch* scratch = nullptr;
  // Outcome counters (added to by confirmations).
  uint32_t confirmed = 0, rejected = 0, errors = 0;
};

struct DpiPosPred {
  bool at = true;           // at: lo == start; in: lo <= start <= hi
  int64_t lo = 0, hi = 0;
  uint32_t bit = 0;
};

struct DpiString {
  std::string ident;        // "$a" (hidden strings: "uint16(0)")
  int32_t count_slot = -1;  // index of its uint32 counter, -1 = not counted
  int32_t first_slot = -1;  // first (offset,len) slot, -1 = none
  uint32_t num_slots = 0;
  std::vector<DpiPosPred> preds;
  // One byte sequence the string matches (text: first encoding; hex: wildcards filled, jumps
  // at their minimum, first alternatives; regex: empty), and for hidden uintXX strings the
  // offset it must sit at (-1 = anywhere). For generated test payloads and `dpuctl dpi list`.
  std::string sample;
  int64_t sample_at = -1;
  std::vector<std::string> extra_samples;  // other forms (base64 at shifts 1 and 2)
};

struct DpiRule {
  std::string source;       // YaraSource::name (the YARA namespace)
  std::string name;
  std::vector<std::string> tags;
  std::vector<std::pair<std::string, std::string>> meta;
  bool is_private = false;
  bool is_global = false;
  DpiAction action = DpiAction::kAlert;
  int32_t cond = -1;        // root node
  uint32_t ns = 0;          // namespace (source) index
  uint32_t first_string = 0;  // its strings: CompiledDpi::strings[first_string, +num_strings)
  uint32_t num_strings = 0;
  int line = 0;
  // The condition can only be true when one of the rule's strings matched (derived from the
  // tree at compile time): with none of them present it is false without evaluating it.
  bool needs_match = false;
  std::string id() const { return source + ":" + name; }
};

struct DpiUnsupported {
  std::string source;
  std::string rule;
  int line = 0;
  std::string reason;
};

// One Hyperscan streaming database of a sharded rule set (rules/compile/yara_translate.cc,
// docs/dpi.md "Shards and incremental compiles"). Immutable and shared: by every CompiledDpi
// version that scans with it and by the compile cache. It holds the patterns of a list of
// rule sources' translations ("fragments", named by the hash of their expressions and
// flags), fragment f's patterns at local ids [frag_begin[f], frag_begin[f] + frag_count[f]).
struct DpiShardDb {
  DpiShardDb() = default;
  ~DpiShardDb() { if (db != nullptr) hs_free_database(db); }
  DpiShardDb(const DpiShardDb&) = delete;
  DpiShardDb& operator=(const DpiShardDb&) = delete;
  hs_database_t* db = nullptr;
  uint64_t key = 0;                    // hash of its content (cache file dpi-shard-<key>.hsdb)
  std::vector<uint64_t> frag_hash;
  std::vector<uint64_t> frag_name;     // hash of each fragment's source name
  std::vector<uint32_t> frag_begin, frag_count;
  std::vector<uint64_t> pattern_hash;  // per local id: hash of its expression and flags
  uint32_t patterns = 0;
  size_t bytes = 0;                    // hs_database_size
  double compile_ms = 0;               // 0 when loaded from the disk cache
};

// A shard as one CompiledDpi version uses it: the database and, per local pattern id, the
// pattern (index in CompiledDpi::patterns) it reports, or kMasked for patterns of rules this
// version does not have (removed or changed since the database was compiled: masked until
// the shard is merged again).
struct DpiShard {
  static constexpr uint32_t kMasked = 0xffffffffu;
  std::shared_ptr<const DpiShardDb> db;
  std::vector<uint32_t> ids;
  bool delta = false;                  // the delta shard (recent changes)
  uint32_t live = 0;                   // ids not masked
};

class CompiledDpi {
 public:
  CompiledDpi() = default;
  ~CompiledDpi();
  CompiledDpi(const CompiledDpi&) = delete;
  CompiledDpi& operator=(const CompiledDpi&) = delete;

  // --- compiled content (filled by the translator) ---
  std::vector<DpiRule> rules;          // supported rules, evaluation order (declaration order)
  // --- signatures --- the Suricata-format rules of dpi.signatures (null: none). Their hits
  // are reported as rule kSigRuleBit | index (events, verdicts).
  std::shared_ptr<const CompiledSignatures> sigs;
  std::vector<DpiUnsupported> unsupported;
  std::vector<CondNode> nodes;
  std::vector<DpiString> strings;
  std::vector<DpiPattern> patterns;
  uint32_t num_namespaces = 0;
  uint32_t num_counts = 0;
  uint32_t num_slots = 0;
  uint32_t num_preds = 0;
  uint64_t rules_hash = 0;             // hash of the sources (cache key)
  double compile_ms = 0;               // Hyperscan compile (0 when loaded from the cache)
  bool from_cache = false;
  std::string cache_warning;           // the cache could not be written (why); "" = fine
  bool uses_filesize = false;          // some condition reads filesize: evaluate per packet
  // Without filesize in any condition, the rules true on a stream with no match at all
  // (`not $a`, `true`) are fixed: computed once at compile time, so a scan that matched
  // nothing needs no evaluation (needsEvaluation()).
  std::vector<uint32_t> empty_hits;
  bool needsEvaluation(bool changed) const { return changed || uses_filesize; }
  // The same with filesize in conditions (buildEmptyTable, after buildEvalIndex): on a match
  // state without any string (the first bytes of a stream, a UDP datagram, that matched
  // nothing) a rule's value depends on filesize alone and changes only at its thresholds
  // (fs_breaks), so the rules reported are fixed per interval between consecutive thresholds:
  // interval k = [empty_bounds[k - 1], empty_bounds[k]) (k = 0 from 0, the last to the
  // end) reports empty_rules[empty_begin[k] .. empty_begin[k + 1]). Valid (empty_table) unless
  // a rule true without strings reads filesize in another form (fs_every).
  std::vector<uint64_t> empty_bounds;
  std::vector<uint32_t> empty_begin, empty_rules;
  bool empty_table = false;
  void buildEmptyTable();
  // evaluate() on a match state with no string (all zero) and this filesize: the table's
  // rules for it, less those in `fired`. Precondition: empty_table.
  uint32_t evaluateEmpty(uint64_t filesize, uint32_t* out, uint32_t max,
                         const uint8_t* fired = nullptr) const;
  // A stream's (or datagram's) first evaluation, the same result as evaluate(): against the
  // empty state at the same filesize (the table), only the owners of the strings present and
  // the rules that reference them can differ, so only they are evaluated; every other rule
  // reports as the table says. A global rule among them: evaluate(). `dirty`: dirtyWords()
  // words of scratch, all zero on return. Without the table or the index: evaluate().
  uint32_t evaluateFirst(const uint8_t* ms, uint32_t* out, uint32_t max, const uint8_t* fired,
                         uint64_t* dirty) const;
  // The Hyperscan databases: one stream per shard and flow direction, every shard scanned
  // with the same bytes into the same match state (DpiMatchCtx::ids maps its ids). Empty
  // when there are no patterns.
  std::vector<DpiShard> shards;
  // shards[0]'s database when it is the only shard and reports its ids as they are (a rule
  // set of one source, or compiled with one shard): what single-stream callers scan with.
  // Not owned. Null otherwise.
  hs_database_t* db = nullptr;
  hs_scratch_t* scratch_proto = nullptr;  // for every shard; clone per worker (hs_clone_scratch)
  // Incremental compile (yara_translate.cc): sources whose translation came from the cache,
  // shards whose database was compiled for this version, loaded from dpi.cache_dir, or
  // reused from the previous version (masked), patterns in the delta shard, and shards whose
  // merge was left to the background compiler.
  uint32_t sources_cached = 0, shards_compiled = 0, shards_loaded = 0, shards_reused = 0;
  uint32_t delta_patterns = 0, merges_pending = 0, patterns_compiled = 0;
  double translate_ms = 0;

  // --- match state layout ---
  size_t presenceOffset() const { return 8; }
  size_t predOffset() const { return 8 + (strings.size() + 7) / 8; }
  size_t countOffset() const { return align4(predOffset() + (num_preds + 7) / 8); }
  size_t slotOffset() const { return countOffset() + 4 * size_t(num_counts); }
  size_t matchStateBytes() const { return slotOffset() + 8 * size_t(num_slots); }
  size_t streamStateBytes() const;

  void resetMatchState(uint8_t* ms) const { std::memset(ms, 0, matchStateBytes()); }
  static uint64_t filesize(const uint8_t* ms) { uint64_t v; std::memcpy(&v, ms, 8); return v; }
  static void setFilesize(uint8_t* ms, uint64_t v) { std::memcpy(ms, &v, 8); }

  // Records one Hyperscan match of pattern `id` ending at stream offset `to` (base = stream
  // offset where the Hyperscan stream was opened). Returns true when the state changed.
  // (Uses match_info when built; the translator's tables otherwise.)
  // A prefiltered pattern's match is confirmed first on the bytes of `win` (null: rejected).
  bool onMatch(uint8_t* ms, unsigned id, uint64_t to, uint64_t base,
               DpiWindow* win = nullptr) const;

  // --- prefilter (HS_FLAG_PREFILTER + PCRE2 confirmation) ---
  // PCRE2 match limit of one confirmation (a candidate that reaches it is counted as an
  // error and not confirmed).
  static constexpr uint32_t kConfirmMatchLimit = 1000000;
  std::vector<DpiConfirm> confirms;
  uint32_t prefilter_window = 0;       // widest prefiltered match (bytes); 0 = none
  // True when confirms[c]'s exact expression matches the bytes of `w` ending at stream
  // offset `to` (counted in w.confirmed / rejected / errors).
  bool confirm(const DpiConfirm& c, uint64_t to, DpiWindow& w) const;

  // Evaluates every rule on `ms`; writes the indices (into `rules`) of the matching non-private
  // rules to `out` (up to `max`) and returns how many matched in all. With `fired` (one bit
  // per rule), rules whose bit is set are left out of `out` and of the count.
  uint32_t evaluate(const uint8_t* ms, uint32_t* out, uint32_t max,
                    const uint8_t* fired = nullptr) const;

  // Incremental evaluation of a stream that was evaluated before (the dataplane's per-packet
  // path): only the rules whose value or reportability can differ from that evaluation's are
  // evaluated, with the same result as evaluate() on the same state and `fired`:
  //   - `dirty` (dirtyWords() words, one bit per rule; set by dpiMatchCallback through
  //     DpiMatchCtx::dirty, cleared here): the rules whose strings changed the match state,
  //   - the rules that read filesize and have a threshold in (prev_filesize, filesize(ms)]
  //     (fs_breaks; fs_every: filesize read in a form without thresholds: every change),
  //   - closed over the rules that reference them (dependents); a global rule among them
  //     makes the call a full evaluation (its namespace's reportability may change).
  // A dirty rule already in `fired` is not evaluated (nothing could be reported of it; the
  // rules that reference it evaluate it when they read it). Preconditions: the previous evaluation of the stream was at
  // prev_filesize and recorded every rule it reported in `fired` (max >= rules.size()); the
  // report mask (the bits of `fired` that are not fired rules) did not change since then
  // (the HTTP layer clears its size mask right before the stream end, which evaluates in
  // full). Without the index it is evaluate().
  uint32_t evaluateChanged(const uint8_t* ms, uint32_t* out, uint32_t max, const uint8_t* fired,
                           uint64_t* dirty, uint64_t prev_filesize) const;
  size_t dirtyWords() const { return (rules.size() + 63) / 64; }

  // Evaluation index, built once after compiling (buildEvalIndex): evaluate() then looks at
  // the rules that need no string (always) and the rules owning a string present in `ms`
  // (found through the presence bitmap), instead of walking every rule: a rule that needs a
  // match and has none is false without evaluation, exactly as in the full walk. Without the
  // index (or when string ids do not follow rule order) evaluate() walks every rule.
  void buildEvalIndex();
  std::vector<uint32_t> eval_always;   // rules with needs_match == false, ascending
  std::vector<uint32_t> string_rule;   // string id -> index of the rule that owns it
  std::vector<uint32_t> global_rules;  // every global rule, ascending
  bool eval_index = false;
  // Per namespace, its global rules (CSR: ns_globals[ns_global_begin[ns] .. [ns + 1])).
  std::vector<uint32_t> ns_global_begin, ns_globals;
  // Rule references (CSR): the rules whose condition names rule r,
  // dependents[dep_begin[r] .. dep_begin[r + 1]), all after r.
  std::vector<uint32_t> dep_begin, dependents;
  // filesize thresholds (buildEvalIndex): a rule that reads filesize only as
  // `filesize OP constant` (either side; OP a comparison) or through uintXX(N) (defined from
  // N bytes on) keeps its value while filesize stays between two consecutive thresholds of
  // its own: (threshold, rule) pairs, sorted; `filesize < C` changes at C, `<= C` at C + 1,
  // `== C` at C and C + 1, and so on. Other reads of filesize (arithmetic): fs_every.
  std::vector<std::pair<uint64_t, uint32_t>> fs_breaks;
  std::vector<uint32_t> fs_every;
  bool incremental = false;            // evaluateChanged() may use the index

  // Per pattern, what onMatch touches (buildEvalIndex), in one record: its string's
  // counter and slots, position predicates (match_preds[pred_begin, pred_end)), owner rule.
  // count_cap: the counter saturates there (computed from the conditions: `#a OP C` with a
  // constant C needs C + 1, `@a[i]` / `!a[i]` need i; other uses of `#a`: no cap); a match
  // that changes nothing (counter saturated, presence and predicates already set) does not
  // mark its rule dirty.
  struct MatchInfo {
    uint32_t string_id = 0;
    uint32_t rule = 0;
    uint32_t length = 0;
    uint32_t trail = 0;
    int32_t count_slot = -1;
    uint32_t count_cap = 0xffffffffu;
    int32_t first_slot = -1;
    uint32_t num_slots = 0;
    uint32_t pred_begin = 0, pred_end = 0;
    int32_t confirm = -1;
    bool anchored = false;
  };
  std::vector<MatchInfo> match_info;
  std::vector<DpiPosPred> match_preds;
  std::vector<uint32_t> count_cap;     // per count slot (buildEvalIndex)

  // Rules whose report can go from true back to false as bytes are appended to the data: 1
  // per such rule. A condition is followed through its operators: presence, counts,
  // `$a at / in`, `N of` with a constant N and filesize only grow; `@a[i]`, `!a[i]` (strings of
  // fixed length) and uintXX(N) are undefined until their bytes exist and then fixed;
  // and / or / `>` / `>=` (and `<`, `<=` mirrored) of growing and fixed values, and `not`, `==`,
  // arithmetic of fixed values keep a true result true. Anything else (`not $a`, `#a == 2`,
  // `#a < 3`, arithmetic on counts) is unstable, as is every rule that references an unstable
  // rule or sits in a namespace with an unstable global rule. On an HTTP file such rules are
  // decided at the file's end, where libyara decides them on the whole file (docs/http.md).
  std::vector<uint8_t> unstableRules() const;

  // Convenience for tests and block scans: whole buffer, one stream, state reset first.
  // `ms` must hold matchStateBytes(). Returns matching rule indices. (Allocates a confirmation
  // scratch when the rules have prefiltered patterns: not for the packet path.)
  std::vector<uint32_t> scanBuffer(const uint8_t* data, size_t len, uint8_t* ms,
                                   hs_scratch_t* scratch) const;

 private:
  static size_t align4(size_t v) { return (v + 3) & ~size_t(3); }
};

// Hyperscan match-callback context for one stream.
struct DpiMatchCtx {
  const CompiledDpi* dpi;
  uint8_t* ms;
  uint64_t base;
  bool changed;
  DpiWindow* win = nullptr;  // bytes to confirm prefilter candidates on
  // The scanned shard's ids -> pattern index (DpiShard::ids); null: ids are pattern indices.
  const uint32_t* ids = nullptr;
  // With the evaluation index: the owner rule of each string whose state a match changed is
  // set here (CompiledDpi::evaluateChanged), one bit per rule.
  uint64_t* dirty = nullptr;
};
int dpiMatchCallback(unsigned id, unsigned long long from, unsigned long long to,
                     unsigned flags, void* ctx);

// One Hyperscan stream per shard of a rule set, scanned with the same bytes (tests, tools
// and block scans; allocates, not for the packet path, which keeps its streams in pools).
class DpiStreamSet {
 public:
  explicit DpiStreamSet(const CompiledDpi& d);
  ~DpiStreamSet() { close(nullptr, nullptr); }
  DpiStreamSet(const DpiStreamSet&) = delete;
  DpiStreamSet& operator=(const DpiStreamSet&) = delete;
  bool empty() const { return st_.empty(); }
  void scan(const char* p, size_t n, hs_scratch_t* scratch, DpiMatchCtx& ctx);
  // End of data: matches at the end reported to `ctx` (null: none), the streams closed.
  void close(hs_scratch_t* scratch, DpiMatchCtx* ctx);

 private:
  const CompiledDpi& d_;
  std::vector<hs_stream_t*> st_;
};

const char* dpiActionName(DpiAction a);

}  // namespace dpu::rules
