// Differential test on real rule sets (../shared/data/yara): for every rule our engine accepts,
// generated payloads that contain the rule's strings (and near misses: a byte changed, the
// first byte cut, the header missing) are scanned by libyara as one buffer and by our engine fed
// in many segmentations (Hyperscan streaming); the sets of matching rules must be equal.
// Each file is its own source (YARA namespace), as in dpi-coverage.
// One more segmentation runs through the dataplane's DPI stage (DpiInspector::tcp) in the
// compressed stream mode, two flow directions interleaved packet by packet (each packet
// expands its direction's compact slot and packs it back); their final match states are
// evaluated and compared with libyara too.
//
// Sharding: ctest runs this binary as several entries (yara_differential_shard_K, environment
// YARA_DIFF_SHARD=K/N), each taking a slice of every rule set (the files whose index is K
// modulo N; a set of fewer than 2N files runs whole in one shard), so that the whole corpus
// runs in every build and each entry fits its timeout under the sanitizers on a busy machine.
// Without the variable one process runs everything.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "dataplane/stages/dpi/dpi_runtime.h"
#include "tests/rules/dpi_test_util.h"

namespace dpu::rules {
namespace {

namespace fs = std::filesystem;
using test::Pair;
using test::scanSegments;

// Payloads for one rule: header bytes (hidden uintXX strings) at their offsets, then the
// samples of its strings with separators, in several combinations.
std::vector<std::string> payloadsFor(const CompiledDpi& d, const DpiRule& r, std::mt19937& rng) {
  std::string header;
  std::vector<std::string> samples, extra;
  for (uint32_t i = r.first_string; i < r.first_string + r.num_strings; ++i) {
    const DpiString& s = d.strings[i];
    extra.insert(extra.end(), s.extra_samples.begin(), s.extra_samples.end());
    if (s.sample.empty()) continue;
    if (s.sample_at >= 0) {
      size_t end = size_t(s.sample_at) + s.sample.size();
      if (header.size() < end) header.resize(end, '\x90');
      header.replace(size_t(s.sample_at), s.sample.size(), s.sample);
    } else {
      samples.push_back(s.sample);
    }
  }
  auto filler = [&](size_t n) {
    std::string f;
    for (size_t i = 0; i < n; ++i) f += char(" .,;:-_\n\t\x01\x7f"[rng() % 11]);
    return f;
  };
  std::vector<std::string> out;
  std::string all = header + filler(3);
  for (const std::string& s : samples) all += s + filler(1 + rng() % 4);
  out.push_back(all);
  out.push_back(filler(5) + all);                       // header displaced
  std::string twice = header;
  for (int k = 0; k < 3; ++k)
    for (const std::string& s : samples) twice += " " + s;
  out.push_back(twice);                                 // counts
  for (size_t i = 0; i < samples.size() && i < 8; ++i) {
    out.push_back(header + " " + samples[i] + " ");     // one string alone
    std::string near = all;                             // near miss: one string damaged
    size_t at = near.find(samples[i], header.size());
    if (at != std::string::npos) {
      near[at + samples[i].size() - 1] ^= 0x01;
      out.push_back(near);
      near = all;
      near.erase(at, 1);
      out.push_back(near);
    }
    std::string glued = header + "a" + samples[i] + "b";  // fullword near miss
    out.push_back(glued);
  }
  for (const std::string& x : extra) {  // base64 strings at the other two shifts
    out.push_back(header + " " + x + " ");
    std::string all_x = all + x;
    out.push_back(all_x);
  }
  return out;
}

struct SetResult {
  size_t files = 0, rules = 0, accepted = 0, payloads = 0, scans = 0, positives = 0;
  size_t overflows = 0;  // compressed mode: directions moved to a full stream
  size_t prefiltered = 0, confirmed = 0, rejected = 0;  // prefilter patterns, candidates
};

// `data` as TCP segments of the given sizes (cycled) to two directions, alternating; returns
// each direction's rules at the end (from its final match state).
std::vector<std::vector<std::string>> scanCompressed(const CompiledDpi& d, const dp::DpiRuntime& rt,
                                                     const std::string& data,
                                                     const std::vector<size_t>& seg, size_t& overflows) {
  dp::DpiDir dirs[2];
  uint32_t off[2] = {0, 0};
  size_t k = 0;
  while (off[0] < data.size() || off[1] < data.size()) {
    for (int i = 0; i < 2; ++i) {
      if (off[i] >= data.size()) continue;
      const size_t n = std::min(data.size() - off[i], std::max<size_t>(1, seg[(k + size_t(i)) % seg.size()]));
      dp::DpiOutcome o;
      dp::DpiInspector::tcp(rt, 0, dirs[i], reinterpret_cast<const uint8_t*>(data.data()) + off[i],
                            uint32_t(n), 5000 + off[i], 0x10, o);
      overflows += o.overflow;
      off[i] += uint32_t(n);
    }
    ++k;
  }
  std::vector<std::vector<std::string>> out(2);
  std::vector<uint8_t> ms(d.matchStateBytes());
  std::vector<uint32_t> idx(d.rules.size() + 1);
  for (int i = 0; i < 2; ++i) {
    dp::DpiOutcome o;
    d.resetMatchState(ms.data());
    if (!data.empty()) dp::DpiInspector::end(rt, 0, dirs[i], o, ms.data());
    uint32_t n = d.evaluate(ms.data(), idx.data(), uint32_t(idx.size()));
    for (uint32_t j = 0; j < n; ++j) out[size_t(i)].push_back(d.rules[idx[j]].id());
    std::sort(out[size_t(i)].begin(), out[size_t(i)].end());
  }
  return out;
}

void runSet(const std::vector<fs::path>& files, SetResult& res, const DpiCompileOptions& opt) {
  std::mt19937 rng(12345);
  const std::vector<std::vector<size_t>> segs = {{1u << 30}, {1}, {7}, {13, 1, 64, 3}, {536}};
  for (const fs::path& f : files) {
    DpiModel m;
    m.sources.push_back({f.filename().string(), readFileBytes(f.string())});
    Pair p;
    std::string err;
    if (!p.build(m, &err, opt)) continue;  // libyara rejects the file: not part of the comparison
    res.prefiltered += p.ours->confirms.size();
    dp::DpiSettings ds;
    ds.stream_mode = DpiStreamMode::kCompressed;
    ds.streams_per_worker = 2;
    ds.full_streams_per_worker = 2;
    ds.ooo_slots_per_worker = 1;
    ds.prefilter_windows_per_worker = 2;
    ds.depth_bytes = 0;
    auto rt = dp::DpiRuntime::create(p.ours, ds, 1);
    ASSERT_TRUE(rt.ok()) << rt.status();
    ++res.files;
    res.rules += p.ours->rules.size() + p.ours->unsupported.size();
    res.accepted += p.ours->rules.size();
    for (const DpiRule& r : p.ours->rules) {
      for (const std::string& data : payloadsFor(*p.ours, r, rng)) {
        ++res.payloads;
        const std::vector<std::string> want = p.oracle(data);
        res.positives += !want.empty();
        for (const auto& s : segs) {
          ++res.scans;
          // (the tick check on the segmentations of several bytes: one evaluation per byte
          // would dominate the test's time)
          DpiWindow pf;
          std::vector<std::string> got = scanSegments(*p.ours, p.scratch, data, s, s[0] >= 7, &pf);
          res.confirmed += pf.confirmed;
          res.rejected += pf.rejected;
          if (got != want) {
            std::string w, g;
            for (auto& x : want) w += x + " ";
            for (auto& x : got) g += x + " ";
            ADD_FAILURE() << f << " rule " << r.name << " segment " << s[0] << " len "
                          << data.size() << "\n  libyara: " << w << "\n  ours:    " << g;
            return;
          }
        }
        ++res.scans;
        for (const auto& got : scanCompressed(*p.ours, **rt, data, {5, 1, 200, 17}, res.overflows)) {
          if (got != want) {
            ADD_FAILURE() << f << " rule " << r.name << " (compressed streams, DpiInspector) len "
                          << data.size();
            return;
          }
        }
      }
    }
  }
}

std::vector<fs::path> yarFiles(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::exists(dir)) return out;
  for (const std::string& f : yaraFiles({dir.string()})) out.push_back(f);
  return out;
}

struct Shard {
  size_t k = 0, n = 1;
};

Shard shard() {
  Shard s;
  const char* e = std::getenv("YARA_DIFF_SHARD");
  if (e == nullptr || *e == '\0') return s;
  unsigned long k = 0, n = 0;
  char slash = 0;
  std::istringstream in(e);
  in >> k >> slash >> n;
  if (!in || slash != '/' || n == 0 || k >= n) {
    ADD_FAILURE() << "YARA_DIFF_SHARD='" << e << "': K/N expected, 0 <= K < N";
    return s;
  }
  s.k = k;
  s.n = n;
  return s;
}

// This shard's part of a set: every n-th file from the k-th; a small set whole, in the shard
// its name picks (or none).
std::vector<fs::path> slice(const char* name, const std::vector<fs::path>& files) {
  const Shard s = shard();
  if (s.n == 1) return files;
  if (files.size() < 2 * s.n) {
    uint32_t h = 2166136261u;
    for (const char* c = name; *c; ++c) h = (h ^ static_cast<uint8_t>(*c)) * 16777619u;
    return h % s.n == s.k ? files : std::vector<fs::path>{};
  }
  std::vector<fs::path> out;
  for (size_t i = s.k; i < files.size(); i += s.n) out.push_back(files[i]);
  return out;
}

// Runs this shard's slice of a set. Returns false (the test is skipped) when the slice is
// empty: the set runs in another shard.
bool checkSet(const char* name, const std::vector<fs::path>& all, const DpiCompileOptions& opt = {},
              SetResult* out = nullptr) {
  if (all.empty()) {
    ADD_FAILURE() << "no rule files at " << DPU_YARA_DIR << " for " << name;
    return false;
  }
  const std::vector<fs::path> files = slice(name, all);
  if (files.empty()) return false;
  SetResult r;
  runSet(files, r, opt);
  std::printf("[%s] files %zu rules %zu accepted %zu payloads %zu (libyara matched something in %zu) scans %zu "
              "(compressed-stream directions moved to a full stream: %zu; prefiltered patterns %zu, "
              "candidates confirmed %zu, rejected %zu)\n",
              name, r.files, r.rules, r.accepted, r.payloads, r.positives, r.scans, r.overflows,
              r.prefiltered, r.confirmed, r.rejected);
  if (out != nullptr) *out = r;
  EXPECT_GT(r.accepted, 0u);
  // The payloads must exercise the rules: libyara matches something in more than half as
  // many payloads as there are accepted rules. A shard's slice of a set can hold a single
  // accepted rule (Yara-Rules' smaller folders are mostly module rules), too few for a
  // proportion to mean anything: there the check needs at least 8 accepted rules.
  if (shard().n == 1 || r.accepted >= 8) {
    EXPECT_GT(r.positives, r.accepted / 2) << "payloads do not exercise the rules";
  }
  return true;
}

TEST(YaraDifferential, YaraRulesMalware) {
  if (!checkSet("Yara-Rules/malware", yarFiles(fs::path(DPU_YARA_DIR) / "Yara-Rules+rules/malware"))) {
    GTEST_SKIP() << "in another shard";
  }
}

TEST(YaraDifferential, YaraRulesOther) {
  std::vector<fs::path> files;
  for (const char* d : {"crypto", "webshells", "antidebug_antivm", "cve_rules", "exploit_kits",
                        "maldocs", "packers", "email", "capabilities", "mobile_malware"})
    for (auto& f : yarFiles(fs::path(DPU_YARA_DIR) / "Yara-Rules+rules" / d)) files.push_back(f);
  if (!checkSet("Yara-Rules/other", files)) GTEST_SKIP() << "in another shard";
}

TEST(YaraDifferential, SignatureBaseApt) {
  std::vector<fs::path> files;
  for (auto& f : yarFiles(fs::path(DPU_YARA_DIR) / "Neo23x0+signature-base/yara"))
    if (f.filename().string().rfind("apt_", 0) == 0) files.push_back(f);
  if (!checkSet("signature-base/apt_*", files)) GTEST_SKIP() << "in another shard";
}

// The signature-base files with `base64` strings (outside apt_*).
TEST(YaraDifferential, SignatureBaseBase64) {
  std::vector<fs::path> files;
  for (const char* f : {"expl_cleo_dec24.yar", "mal_teampcp_mar26.yar", "gen_susp_js_obfuscatorio.yar",
                        "vuln_paloalto_cve_2024_3400_apr24.yar", "expl_outlook_cve_2023_23397.yar",
                        "thor-hacktools.yar", "expl_commvault_cve_2025_57791.yar"}) {
    fs::path p = fs::path(DPU_YARA_DIR) / "Neo23x0+signature-base/yara" / f;
    if (fs::exists(p)) files.push_back(p);
  }
  if (!checkSet("signature-base/base64", files)) GTEST_SKIP() << "in another shard";
}

// Every regex and hex string whose match width is bounded (<= 4096 B) compiled with
// HS_FLAG_PREFILTER and each candidate confirmed by PCRE2 (the path Hyperscan-refused
// expressions take), on Yara-Rules' sets rich in regexes and hex strings.
TEST(YaraDifferential, PrefilterAllYaraRules) {
  std::vector<fs::path> files;
  for (const char* d : {"malware", "webshells", "exploit_kits", "cve_rules", "maldocs", "crypto", "packers"})
    for (auto& f : yarFiles(fs::path(DPU_YARA_DIR) / "Yara-Rules+rules" / d)) files.push_back(f);
  DpiCompileOptions opt;
  opt.prefilter_all = true;
  SetResult r;
  if (!checkSet("Yara-Rules/* prefiltered", files, opt, &r)) GTEST_SKIP() << "in another shard";
  if (shard().n == 1) {
    // The whole set (2,446 prefiltered expressions, 217,850 candidates confirmed).
    EXPECT_GT(r.prefiltered, 1000u);
    EXPECT_GT(r.confirmed, 10000u);
  } else {
    // One slice: a few files hold most of the expressions (of 8 slices the smallest has 26
    // and 1,200 confirmed candidates, the largest 1,831 and 175,070); every slice must
    // still exercise the prefilter.
    EXPECT_GE(r.prefiltered, 20u);
    EXPECT_GE(r.confirmed, 1000u);
  }
}

// The rule Hyperscan refuses exactly (a wide regex with [^\n]{0,2000}): prefiltered without
// any option. Its payloads are in yara_prefilter_test (the sampler cannot write its regex).
TEST(YaraDifferential, SignatureBaseRefusedRegex) {
  fs::path p = fs::path(DPU_YARA_DIR) / "Neo23x0+signature-base/yara/expl_proxynotshell_owassrf_dec22.yar";
  ASSERT_TRUE(fs::exists(p)) << p;
  if (slice("refused-regex", {p}).empty()) GTEST_SKIP() << "in another shard";
  SetResult r;
  runSet({p}, r, {});
  EXPECT_GE(r.prefiltered, 1u);
  EXPECT_EQ(r.accepted, r.rules);
}

TEST(YaraDifferential, ReversingLabs) {
  if (!checkSet("reversinglabs",
                yarFiles(fs::path(DPU_YARA_DIR) / "reversinglabs+reversinglabs-yara-rules"))) {
    GTEST_SKIP() << "in another shard";
  }
}

}  // namespace
}  // namespace dpu::rules
