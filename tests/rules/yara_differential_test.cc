// Differential test on real rule sets (../shared/data/yara): for every rule our engine accepts,
// generated payloads that contain the rule's strings (and near misses: a byte changed, the
// first byte cut, the header missing) are scanned by libyara as one buffer and by our engine fed
// in many segmentations (Hyperscan streaming); the sets of matching rules must be equal.
// Each file is its own source (YARA namespace), as in dpi-coverage.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

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
  std::vector<std::string> samples;
  for (uint32_t i = r.first_string; i < r.first_string + r.num_strings; ++i) {
    const DpiString& s = d.strings[i];
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
  return out;
}

struct SetResult {
  size_t files = 0, rules = 0, accepted = 0, payloads = 0, scans = 0, positives = 0;
};

void runSet(const std::vector<fs::path>& files, SetResult& res) {
  std::mt19937 rng(12345);
  const std::vector<std::vector<size_t>> segs = {{1u << 30}, {1}, {7}, {13, 1, 64, 3}, {536}};
  for (const fs::path& f : files) {
    DpiModel m;
    m.sources.push_back({f.filename().string(), readFileBytes(f.string())});
    Pair p;
    std::string err;
    if (!p.build(m, &err)) continue;  // libyara rejects the file: not part of the comparison
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
          std::vector<std::string> got = scanSegments(*p.ours, p.scratch, data, s);
          if (got != want) {
            std::string w, g;
            for (auto& x : want) w += x + " ";
            for (auto& x : got) g += x + " ";
            ADD_FAILURE() << f << " rule " << r.name << " segment " << s[0] << " len "
                          << data.size() << "\n  libyara: " << w << "\n  ours:    " << g;
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

void checkSet(const char* name, const std::vector<fs::path>& files) {
  if (files.empty()) GTEST_SKIP() << "no rule files at " << DPU_YARA_DIR;
  SetResult r;
  runSet(files, r);
  std::printf("[%s] files %zu rules %zu accepted %zu payloads %zu (libyara matched something in %zu) scans %zu\n",
              name, r.files, r.rules, r.accepted, r.payloads, r.positives, r.scans);
  EXPECT_GT(r.accepted, 0u);
  EXPECT_GT(r.positives, r.accepted / 2) << "payloads do not exercise the rules";
}

TEST(YaraDifferential, YaraRulesMalware) {
  checkSet("Yara-Rules/malware", yarFiles(fs::path(DPU_YARA_DIR) / "Yara-Rules+rules/malware"));
}

TEST(YaraDifferential, YaraRulesOther) {
  std::vector<fs::path> files;
  for (const char* d : {"crypto", "webshells", "antidebug_antivm", "cve_rules", "exploit_kits",
                        "maldocs", "packers", "email", "capabilities", "mobile_malware"})
    for (auto& f : yarFiles(fs::path(DPU_YARA_DIR) / "Yara-Rules+rules" / d)) files.push_back(f);
  checkSet("Yara-Rules/other", files);
}

TEST(YaraDifferential, SignatureBaseApt) {
  std::vector<fs::path> files;
  for (auto& f : yarFiles(fs::path(DPU_YARA_DIR) / "Neo23x0+signature-base/yara"))
    if (f.filename().string().rfind("apt_", 0) == 0) files.push_back(f);
  checkSet("signature-base/apt_*", files);
}

TEST(YaraDifferential, ReversingLabs) {
  checkSet("reversinglabs", yarFiles(fs::path(DPU_YARA_DIR) / "reversinglabs+reversinglabs-yara-rules"));
}

}  // namespace
}  // namespace dpu::rules
