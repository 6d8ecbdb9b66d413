// Helpers for DPI tests: our engine fed in segments vs libyara on the whole buffer.
#pragma once

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
inline std::vector<std::string> scanSegments(const CompiledDpi& d, hs_scratch_t* scratch,
                                             const std::string& data,
                                             const std::vector<size_t>& seg) {
  std::vector<uint8_t> ms(d.matchStateBytes());
  d.resetMatchState(ms.data());
  DpiMatchCtx ctx{&d, ms.data(), 0, false};
  hs_stream_t* st = nullptr;
  if (d.db != nullptr) hs_open_stream(d.db, 0, &st);
  size_t off = 0, k = 0;
  while (off < data.size()) {
    size_t n = std::min(data.size() - off, std::max<size_t>(1, seg[k++ % seg.size()]));
    CompiledDpi::setFilesize(ms.data(), off + n);
    if (st != nullptr) hs_scan_stream(st, data.data() + off, unsigned(n), 0, scratch, dpiMatchCallback, &ctx);
    off += n;
  }
  if (st != nullptr) hs_close_stream(st, scratch, dpiMatchCallback, &ctx);
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

  bool build(const DpiModel& m, std::string* err) {
    ConfigErrorList errs;
    auto c = compileDpi(m, errs);
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
