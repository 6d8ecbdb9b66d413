// Helpers for DPI tests: our engine fed in segments vs libyara on the whole buffer.
#pragma once

#include <cstdlib>
#include <gtest/gtest.h>
#include <hs/hs.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "rules/compile/yara_translate.h"
#include "rules/compile/yara_validate.h"

namespace dpu::rules::test {

// Feeds `data` to a fresh Hyperscan stream in segments of the given sizes (cycled), then
// closes the stream and evaluates. Returns "ns:rule" ids, sorted.
// check_incremental: after every segment but the first, the dataplane's incremental
// evaluation (evaluateChanged: the rules whose strings changed in the segment, as the match
// callback marked them, whose filesize thresholds the segment crossed, and their dependents)
// must report exactly the rules a full evaluation reports, with the fired bits kept as the
// dataplane keeps them (a gtest failure names the rules otherwise). `stats`: receives the
// prefilter confirmation counters.
inline std::vector<std::string> scanSegments(const CompiledDpi& d, hs_scratch_t* scratch,
                                             const std::string& data,
                                             const std::vector<size_t>& seg,
                                             bool check_incremental = false,
                                             DpiWindow* stats = nullptr) {
  std::vector<uint8_t> ms(d.matchStateBytes());
  d.resetMatchState(ms.data());
  // Prefiltered patterns are confirmed on the bytes scanned so far (all of `data` up to the
  // segment's end: the stream's whole history).
  DpiConfirmScratch cs(d.prefilter_window, CompiledDpi::kConfirmMatchLimit);
  DpiWindow win;
  win.cur = reinterpret_cast<const uint8_t*>(data.data());
  win.scratch = &cs;
  DpiMatchCtx ctx{&d, ms.data(), 0, false, &win};
  std::vector<uint64_t> dirty(d.dirtyWords() + 1, 0);
  ctx.dirty = dirty.data();
  DpiStreamSet st(d);  // one stream per shard
  std::vector<uint8_t> fired((d.rules.size() + 7) / 8, 0);
  std::vector<uint32_t> full(d.rules.size() + 1), inc(d.rules.size() + 1);
  size_t off = 0, k = 0;
  while (off < data.size()) {
    size_t n = std::min(data.size() - off, std::max<size_t>(1, seg[k++ % seg.size()]));
    CompiledDpi::setFilesize(ms.data(), off + n);
    ctx.changed = false;
    win.cur_len = uint32_t(off + n);
    st.scan(data.data() + off, n, scratch, ctx);
    if (check_incremental) {
      const uint32_t nf = std::min<uint32_t>(
          d.evaluate(ms.data(), full.data(), uint32_t(full.size()), fired.data()), uint32_t(full.size()));
      {
        // The first evaluation against the empty-state table, later ones incremental.
        const uint32_t ni = std::min<uint32_t>(
            off == 0 ? d.evaluateFirst(ms.data(), inc.data(), uint32_t(inc.size()), fired.data(), dirty.data())
                     : d.evaluateChanged(ms.data(), inc.data(), uint32_t(inc.size()), fired.data(), dirty.data(), off),
            uint32_t(inc.size()));
        std::vector<uint32_t> a(full.begin(), full.begin() + nf), b(inc.begin(), inc.begin() + ni);
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        if (a != b) {
          std::string fa, fb;
          for (uint32_t r : a) fa += d.rules[r].id() + " ";
          for (uint32_t r : b) fb += d.rules[r].id() + " ";
          ADD_FAILURE() << "incremental evaluation differs at stream offset " << off + n
                        << (ctx.changed ? " (a match changed the state)" : " (only filesize grew)")
                        << "\n  full:        " << fa << "\n  incremental: " << fb;
        }
      }
      std::fill(dirty.begin(), dirty.end(), 0);
      for (uint32_t i = 0; i < nf; ++i) fired[full[i] >> 3] |= uint8_t(1u << (full[i] & 7));
    }
    off += n;
  }
  win.cur_len = uint32_t(data.size());
  win.at_end = true;
  st.close(scratch, &ctx);
  if (stats != nullptr) *stats = win;
  std::vector<uint32_t> idx(d.rules.size() + 1);
  uint32_t n = d.evaluate(ms.data(), idx.data(), uint32_t(idx.size()));
  std::vector<std::string> out;
  for (uint32_t i = 0; i < n; ++i) out.push_back(d.rules[idx[i]].id());
  std::sort(out.begin(), out.end());
  return out;
}

struct Pair {
  std::shared_ptr<const CompiledDpi> ours;
  YaraRulesPtr yara;
  hs_scratch_t* scratch = nullptr;
  std::vector<std::string> accepted;  // ids of supported rules (sorted)
  ~Pair() { if (scratch) hs_free_scratch(scratch); }

  // With DPU_TEST_HS_CACHE_DIR set, the Hyperscan databases go through the product's cache
  // (dpi.cache_dir: keyed by the expressions, their flags and the library version), so a
  // second build's run of the same rules loads what the first compiled.
  bool build(const DpiModel& model, std::string* err, const DpiCompileOptions& opt = {}) {
    DpiModel m = model;
    if (const char* dir = std::getenv("DPU_TEST_HS_CACHE_DIR"); m.cache_dir.empty() && dir && *dir)
      m.cache_dir = dir;
    ConfigErrorList errs;
    auto c = compileDpi(m, errs, opt);
    if (!c.ok()) { *err = std::string(c.status().message()); return false; }
    ours = *c;
    ConfigErrorList yerrs;
    yara = yaraCompile(m.sources, yerrs);
    if (!yara) { *err = "libyara rejected"; return false; }
    if (ours->scratch_proto) hs_clone_scratch(ours->scratch_proto, &scratch);
    for (const DpiRule& r : ours->rules) if (!r.is_private) accepted.push_back(r.id());
    std::sort(accepted.begin(), accepted.end());
    return true;
  }
  // libyara's verdict restricted to the rules we accept.
  std::vector<std::string> oracle(const std::string& data) const {
    std::vector<std::string> all = yaraScan(yara.get(), reinterpret_cast<const uint8_t*>(data.data()), data.size());
    std::vector<std::string> out;
    std::set_intersection(all.begin(), all.end(), accepted.begin(), accepted.end(), std::back_inserter(out));
    return out;
  }
};

}  // namespace dpu::rules::test
