// The shared Emerging Threats Open files (../shared/data/rules/et-open, 20 category files):
// every enabled rule is either accepted or refused with its sid, line and a reason that
// names what is not supported (no rule of the set fails to parse), acceptance per file is
// reported, the whole set compiles into one engine, and a packet goes through it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "rules/compiled/signatures.h"

using namespace dpu::rules;

namespace {

const std::string kDir = std::string(DPU_ETOPEN_DIR);

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> files() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(kDir, ec))
    if (e.path().extension() == ".rules") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(SigEtOpen, EveryRuleAcceptedOrRefusedWithWhereAndWhy) {
  const auto fs = files();
  if (fs.empty()) GTEST_SKIP() << "SKIPPED: no .rules files in " << kDir;
  auto cls = parseClassification(slurp(kDir + "/classification.config"), "classification.config");
  ASSERT_TRUE(cls.ok()) << cls.status();
  size_t total = 0, accepted = 0;
  std::vector<SigSource> all;
  for (const std::string& f : fs) {
    const std::string text = slurp(f);
    SigSource src{std::filesystem::path(f).filename().string(), text};
    all.push_back(src);
    // Enabled rules counted here on their own: lines that start with an action.
    std::vector<std::string> lines;
    std::stringstream ss(text);
    for (std::string l; std::getline(ss, l);) lines.push_back(l);
    size_t enabled = 0;
    for (const std::string& l : lines)
      for (const char* a : {"alert ", "drop ", "reject ", "pass "})
        if (l.rfind(a, 0) == 0) ++enabled;
    SigCompileOptions o;
    o.classification = &*cls;
    o.compile_hyperscan = false;
    auto c = compileSignatures({src}, o);
    ASSERT_TRUE(c.ok()) << f << ": " << c.status();
    EXPECT_EQ((*c)->rules.size() + (*c)->refused.size(), enabled) << f;
    for (const SigRefusal& r : (*c)->refused) {
      ASSERT_GT(r.line, 0u) << f;
      ASSERT_LE(r.line, lines.size()) << f;
      EXPECT_NE(lines[r.line - 1].find("sid:" + std::to_string(r.sid) + ";"), std::string::npos)
          << f << ":" << r.line << " sid " << r.sid;
      // A refusal names what is missing; anything else would be a parse error of a rule
      // Suricata loads.
      EXPECT_TRUE(r.reason.find("not supported") != std::string::npos ||
                  r.reason.find("not inspected yet") != std::string::npos)
          << f << ":" << r.line << " sid " << r.sid << ": " << r.reason;
    }
    for (const auto& r : (*c)->rules) {
      EXPECT_GT(r.sig.sid, 0u);
      EXPECT_FALSE(r.sig.msg.empty()) << r.sig.sid;
      if (!r.sig.classtype.empty()) {
        EXPECT_FALSE(r.category.empty()) << r.sig.sid << " " << r.sig.classtype;
      }
    }
    total += enabled;
    accepted += (*c)->rules.size();
    std::printf("  %-36s %5zu enabled %5zu accepted (%.1f%%)\n", src.name.c_str(), enabled,
                (*c)->rules.size(), enabled ? 100.0 * double((*c)->rules.size()) / double(enabled) : 0.0);
  }
  std::printf("ET Open (shared files): %zu enabled, %zu accepted (%.1f%%)\n", total, accepted,
              100.0 * double(accepted) / double(total));
  EXPECT_GT(accepted, 0u);
  // All files in one engine (Hyperscan prefilter databases included), one packet through it.
  SigCompileOptions o;
  o.classification = &*cls;
  auto c = compileSignatures(all, o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->rules.size(), accepted);
  auto sc = (*c)->makeScratch();
  ASSERT_TRUE(sc.ok());
  // A packet carrying the fast pattern of the first payload rule: the prefilter database
  // built from the real set finds it (a candidate), and confirmation runs.
  const CompiledSignatures::Rule* pick = nullptr;
  for (const auto& r : (*c)->rules)
    if (r.fp_buffer == int(SigBuffer::kPayload)) {
      pick = &r;
      break;
    }
  ASSERT_NE(pick, nullptr);
  const std::string p = "xx" + pick->fp + "yy";
  SigInput in;
  in.set(SigBuffer::kPayload, reinterpret_cast<const uint8_t*>(p.data()), uint32_t(p.size()));
  in.ip_proto = 6;
  in.dport = 80;
  in.sport = 40000;
  in.established = true;
  in.dsize = uint32_t(p.size());
  SigHit hits[64];
  SigFlowState state;
  (*sc)->candidates = 0;
  (*c)->evaluate(in, &state, **sc, hits, 64);
  EXPECT_GE((*sc)->candidates, 1u) << "sid " << pick->sig.sid;
}

}  // namespace
