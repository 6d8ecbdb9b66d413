// HS_FLAG_PREFILTER + PCRE2 confirmation: expressions Hyperscan cannot compile exactly are
// compiled as a prefilter (a superset of their match end offsets) and each candidate counts
// only when PCRE2 confirms the exact expression on the bytes ending there.
//   - the real case (signature-base expl_proxynotshell_owassrf_dec22.yar: a wide regex with
//     [^\n]{0,2000}, "Pattern is too large" for Hyperscan) is accepted, and its verdicts equal
//     libyara's on matches and near misses, split into TCP segments at many boundaries
//     (inside the match, matches longer than a packet), through the test stream and through
//     DpiInspector (history window ring, full and compressed streams);
//   - a near miss the prefilter reports and confirmation rejects (the test fails if
//     confirmation is skipped), and candidates fed to onMatch() directly;
//   - every regex / hex string of hand-written rules prefiltered (prefilter_all) vs libyara;
//   - the reasons when a refused expression cannot be prefiltered.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "dataplane/stages/dpi/dpi_runtime.h"
#include "tests/rules/dpi_test_util.h"

namespace dpu::rules {
namespace {

namespace fs = std::filesystem;
using test::Pair;
using test::scanSegments;

std::string widen(const std::string& s) {
  std::string w;
  for (char c : s) { w += c; w += '\0'; }
  return w;
}

const std::vector<std::vector<size_t>> kSegs = {{1u << 30}, {1}, {2}, {3}, {7}, {13, 1, 64, 3},
                                                {536}, {1460}, {100, 1}, {4053}, {4054}, {4055}};

// `data` through DpiInspector::tcp as one flow direction in segments of `seg` (cycled);
// returns the rules from the direction's final match state (sorted ids) and adds the
// prefilter counters to `o_sum`.
std::vector<std::string> scanInspector(const CompiledDpi& d, const dp::DpiRuntime& rt,
                                       const std::string& data, const std::vector<size_t>& seg,
                                       dp::DpiOutcome& o_sum) {
  dp::DpiDir dir;
  uint32_t off = 0;
  size_t k = 0;
  while (off < data.size()) {
    const size_t n = std::min(data.size() - off, std::max<size_t>(1, seg[k++ % seg.size()]));
    dp::DpiOutcome o;
    dp::DpiInspector::tcp(rt, 0, dir, reinterpret_cast<const uint8_t*>(data.data()) + off,
                          uint32_t(n), 1000 + off, 0x10, o);
    o_sum.pf_confirmed += o.pf_confirmed;
    o_sum.pf_rejected += o.pf_rejected;
    o_sum.no_window |= o.no_window;
    off += uint32_t(n);
  }
  std::vector<uint8_t> ms(d.matchStateBytes());
  d.resetMatchState(ms.data());
  dp::DpiOutcome o;
  if (!data.empty()) dp::DpiInspector::end(rt, 0, dir, o, ms.data());
  o_sum.pf_confirmed += o.pf_confirmed;
  o_sum.pf_rejected += o.pf_rejected;
  std::vector<uint32_t> idx(d.rules.size() + 1);
  uint32_t n = d.evaluate(ms.data(), idx.data(), uint32_t(idx.size()));
  std::vector<std::string> out;
  for (uint32_t j = 0; j < n; ++j) out.push_back(d.rules[idx[j]].id());
  std::sort(out.begin(), out.end());
  return out;
}

std::shared_ptr<dp::DpiRuntime> runtime(std::shared_ptr<const CompiledDpi> d, DpiStreamMode mode,
                                        uint32_t windows = 4) {
  dp::DpiSettings ds;
  ds.stream_mode = mode;
  ds.streams_per_worker = 4;
  ds.full_streams_per_worker = 4;
  ds.ooo_slots_per_worker = 1;
  ds.prefilter_windows_per_worker = windows;
  ds.depth_bytes = 0;
  auto rt = dp::DpiRuntime::create(std::move(d), ds, 1);
  EXPECT_TRUE(rt.ok()) << rt.status();
  return rt.ok() ? *rt : nullptr;
}

const fs::path kProxyNotShell =
    fs::path(DPU_YARA_DIR) / "Neo23x0+signature-base/yara/expl_proxynotshell_owassrf_dec22.yar";

std::string readFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The regex of that rule ($re1), ascii: fill lengths of its three [^\n]{0,N} gaps.
std::string owassrf(size_t a, size_t b, size_t c, char fill = 'q', const char* ps = "PowerShell") {
  return std::string(",/") + ps + std::string(a, fill) + ",Kerberos,true," + std::string(b, fill) +
         ",200,0,,,," + std::string(c, fill) +
         ";OnEndRequest.End.ContentType=application/soap+xml charset UTF-8;"
         "S:ServiceCommonMetadata.HttpMethod=POST;";
}

// The file is compiled once for the suite (its Hyperscan compile takes seconds).
class ProxyNotShell : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!fs::exists(kProxyNotShell)) return;
    DpiModel m;
    m.sources.push_back({"pns", readFile(kProxyNotShell)});
    shared_ = new Pair();
    if (!shared_->build(m, &error_)) {
      delete shared_;
      shared_ = nullptr;
    }
  }
  static void TearDownTestSuite() {
    delete shared_;
    shared_ = nullptr;
  }
  void SetUp() override {
    if (!fs::exists(kProxyNotShell)) GTEST_SKIP() << "no " << kProxyNotShell;
    ASSERT_NE(shared_, nullptr) << error_;
  }
  static Pair* shared_;
  static Pair empty_;  // (bound when the file is missing; the tests are skipped then)
  static std::string error_;
  Pair& p = shared_ != nullptr ? *shared_ : empty_;
};
Pair* ProxyNotShell::shared_ = nullptr;
Pair ProxyNotShell::empty_;
std::string ProxyNotShell::error_;

TEST_F(ProxyNotShell, TooLargeWideRegexIsPrefilteredNotUnsupported) {
  for (const DpiUnsupported& u : p.ours->unsupported)
    ADD_FAILURE() << u.rule << ": " << u.reason;
  ASSERT_FALSE(p.ours->confirms.empty());
  // The wide form of $re1 is the refused one: its longest match is ~4 KB.
  bool wide = false;
  for (const DpiConfirm& c : p.ours->confirms) wide |= c.wide;
  EXPECT_TRUE(wide);
  EXPECT_EQ(p.ours->prefilter_window, 4484u);  // (12 + 50 + 15 + 50 + 10 + 2000 + 105) x 2
}

TEST_F(ProxyNotShell, VerdictsEqualLibyaraAcrossSegmentations) {
  struct C {
    const char* name;
    std::string data;
    bool match;  // libyara must agree
  };
  std::string odd = widen("x" + owassrf(3, 3, 100) + "x");
  odd[2 * 60 + 1] = 'Z';  // a (char, 0) pair broken inside the {0,2000} gap
  std::string nl_wide = widen("x" + owassrf(3, 3, 100) + "x");
  nl_wide[2 * 60] = '\n';
  const std::vector<C> cases = {
      {"ascii_min", owassrf(0, 0, 0), true},
      {"ascii_max", "..." + owassrf(50, 50, 2000) + "...", true},
      {"wide_min", widen(owassrf(0, 0, 0)), true},
      {"wide_mid", "\x01" + widen("ab" + owassrf(7, 20, 300)) + "zz", true},
      // The longest match libyara finds: it stops a regex at 4096 bytes (RE_SCAN_LIMIT), the
      // expression's longest match is 4484 (documented difference).
      {"wide_long", widen(owassrf(50, 50, 1800)), true},
      {"wide_long_shifted", std::string(3, '\0') + widen(owassrf(50, 50, 1800)), true},
      {"wide_case", widen(owassrf(1, 2, 3, 'q', "pOwErShElL")), true},
      {"wide_fill_zero", widen(owassrf(4, 4, 40, '\0')), true},
      {"wide_gap_2001", widen(owassrf(50, 50, 2001)), false},
      {"wide_gap_a51", widen(owassrf(51, 0, 0)), false},
      {"wide_newline", nl_wide, false},
      {"wide_odd_byte", odd, false},
      {"wide_half", widen(owassrf(3, 3, 100)).substr(1), false},
      {"ascii_newline", owassrf(3, 3, 100, '\n'), false},
      {"ascii_fp", owassrf(1, 1, 1) + " ClientInfo ", false},  // `not 1 of ($fp*)`
      {"wide_fp", widen(owassrf(1, 1, 1) + " Microsoft WinRM Client "), false},
      {"two_near_then_real", widen(owassrf(50, 50, 2001)) + widen(owassrf(1, 1, 1)), true},
  };
  for (const C& c : cases) {
    const std::vector<std::string> want = p.oracle(c.data);
    EXPECT_EQ(!want.empty(), c.match) << c.name << ": libyara disagrees with the test's expectation";
    for (const auto& s : kSegs)
      EXPECT_EQ(scanSegments(*p.ours, p.scratch, c.data, s), want) << c.name << " segments " << s[0];
    for (DpiStreamMode mode : {DpiStreamMode::kFull, DpiStreamMode::kCompressed}) {
      auto rt = runtime(p.ours, mode);
      ASSERT_NE(rt, nullptr);
      for (const auto& s : kSegs) {
        dp::DpiOutcome o;
        EXPECT_EQ(scanInspector(*p.ours, *rt, c.data, s, o), want)
            << c.name << " DpiInspector " << (mode == DpiStreamMode::kFull ? "full" : "compressed")
            << " segments " << s[0];
        EXPECT_FALSE(o.no_window);
      }
    }
  }
}

// The prefilter reports a candidate for this near miss (a nonzero byte where the wide form
// needs 0, inside the long gap); only the confirmation rejects it. Without confirmation the
// rule would fire and differ from libyara.
TEST_F(ProxyNotShell, NearMissThePrefilterAcceptsIsRejectedByConfirmation) {
  std::string odd = widen("x" + owassrf(3, 3, 100) + "x");
  odd[2 * 60 + 1] = 'Z';
  ASSERT_TRUE(p.oracle(odd).empty());
  for (const auto& s : kSegs) {
    DpiWindow stats;
    EXPECT_TRUE(scanSegments(*p.ours, p.scratch, odd, s, false, &stats).empty()) << s[0];
    EXPECT_GT(stats.rejected, 0u) << "segments " << s[0] << ": the prefilter reported no candidate";
    EXPECT_EQ(stats.confirmed, 0u);
    auto rt = runtime(p.ours, DpiStreamMode::kFull);
    dp::DpiOutcome o;
    EXPECT_TRUE(scanInspector(*p.ours, *rt, odd, s, o).empty());
    EXPECT_GT(o.pf_rejected, 0u);
  }
  // The real match: confirmed once (the string is then present: later candidates skip it).
  DpiWindow stats;
  EXPECT_EQ(scanSegments(*p.ours, p.scratch, widen(owassrf(5, 5, 5)), {3}, false, &stats).size(), 1u);
  EXPECT_EQ(stats.confirmed, 1u);
}

// A direction that gets no history window confirms on the packet that completes the match
// only: a match inside one packet is still found, one that began in an earlier packet is not
// (documented; counted as no_window).
TEST_F(ProxyNotShell, NoWindowConfirmsOnThePacketOnly) {
  auto rt = runtime(p.ours, DpiStreamMode::kFull, /*windows=*/1);
  ASSERT_NE(rt, nullptr);
  const std::string m = widen(owassrf(5, 5, 5));
  dp::DpiDir first, second, third;
  dp::DpiOutcome o1, o2, o3;
  const uint8_t* b = reinterpret_cast<const uint8_t*>(m.data());
  dp::DpiInspector::tcp(*rt, 0, first, b, 10, 1, 0x10, o1);  // takes the only window
  EXPECT_FALSE(o1.no_window);
  dp::DpiInspector::tcp(*rt, 0, second, b, uint32_t(m.size()), 1, 0x10, o2);  // one packet
  EXPECT_TRUE(o2.no_window);
  EXPECT_EQ(o2.nfired, 1u);
  dp::DpiInspector::tcp(*rt, 0, third, b, 20, 1, 0x10, o3);  // split: not confirmed
  EXPECT_TRUE(o3.no_window);
  dp::DpiOutcome o4;
  dp::DpiInspector::tcp(*rt, 0, third, b + 20, uint32_t(m.size() - 20), 21, 0x10, o4);
  EXPECT_EQ(o4.nfired, 0u);
  EXPECT_GT(o4.pf_rejected, 0u);
  // The window comes back at flow end.
  dp::DpiOutcome e;
  dp::DpiInspector::end(*rt, 0, first, e);
  dp::DpiDir fourth;
  dp::DpiOutcome o5, o6;
  dp::DpiInspector::tcp(*rt, 0, fourth, b, 20, 1, 0x10, o5);
  EXPECT_FALSE(o5.no_window);
  dp::DpiInspector::tcp(*rt, 0, fourth, b + 20, uint32_t(m.size() - 20), 21, 0x10, o6);
  EXPECT_EQ(o6.nfired, 1u);
}

TEST_F(ProxyNotShell, UdpDatagramsAreConfirmedOnThemselves) {
  auto rt = runtime(p.ours, DpiStreamMode::kFull);
  ASSERT_NE(rt, nullptr);
  const std::string m = widen(owassrf(5, 5, 5));
  std::string odd = widen("x" + owassrf(3, 3, 100) + "x");
  odd[2 * 60 + 1] = 'Z';
  dp::DpiOutcome o1, o2;
  dp::DpiInspector::block(*rt, 0, reinterpret_cast<const uint8_t*>(m.data()), uint32_t(m.size()), o1);
  EXPECT_EQ(o1.nfired, 1u);
  dp::DpiInspector::block(*rt, 0, reinterpret_cast<const uint8_t*>(odd.data()), uint32_t(odd.size()), o2);
  EXPECT_EQ(o2.nfired, 0u);
  EXPECT_GT(o2.pf_rejected, 0u);
}

TEST_F(ProxyNotShell, WindowBoundBelowTheMatchWidthKeepsTheRuleUnsupported) {
  DpiModel m;
  m.sources.push_back({"pns", readFile(kProxyNotShell)});
  m.prefilter_window_bytes = 1024;
  ConfigErrorList errs;
  auto c = compileDpi(m, errs);
  ASSERT_TRUE(c.ok()) << c.status();
  bool found = false;
  for (const DpiUnsupported& u : (*c)->unsupported) {
    if (u.reason.find("Pattern is too large") == std::string::npos) continue;
    found = true;
    EXPECT_NE(u.reason.find("exceeds dpi.prefilter_window_bytes (1024 B)"), std::string::npos) << u.reason;
  }
  EXPECT_TRUE(found);
  EXPECT_TRUE((*c)->confirms.empty());
}

// Hand-written rules with every regex and hex string prefiltered (prefilter_all): the
// confirmation semantics (anchors, nocase, dotall, classes, jumps, wide) against libyara.
const char* kRules = R"YARA(
rule re_basic { strings: $a = /user=[a-z]{3,8}&pass/ condition: $a }
rule re_flags { strings: $a = /GET .+HTTP\/1\.[01]/is condition: $a }
rule re_dot { strings: $a = /k.y/ condition: $a }
rule re_end { strings: $a = /tail$/ condition: $a }
rule re_start { strings: $a = /^head/ condition: $a }
rule re_alt { strings: $a = /(cat|dog)s? +(eat|run)/ nocase condition: $a }
rule re_wide { strings: $a = /us(er|r)=[a-z]{2,4}\d+;/ wide condition: $a }
rule re_wide_ascii { strings: $a = /ge.t[^x]?\./ wide ascii nocase condition: $a }
rule re_wide_end { strings: $a = /zz[0-9]{1,5}$/ wide condition: $a }
rule hex_jump { strings: $a = { 4D 5A ?? 00 [2-4] ( 50 45 | 4E 45 ) } condition: $a }
rule hex_nibble { strings: $a = { 1? ?2 [1] FF } condition: $a }
rule hex_long { strings: $a = { AA BB [10-300] CC DD } condition: $a and filesize > 10 }
rule mixed { strings: $t = "plain" $r = /r[0-9]{2}r/ condition: $t and $r }
rule not_re { strings: $r = /nope[0-9]/ condition: not $r and filesize > 3 }
)YARA";

absl::StatusOr<std::shared_ptr<const CompiledDpi>> compileAllPrefiltered(const DpiModel& m) {
  ConfigErrorList errs;
  DpiCompileOptions opt;
  opt.prefilter_all = true;
  return compileDpi(m, errs, opt);
}

TEST(YaraPrefilter, EveryRegexAndHexPrefilteredEqualsLibyara) {
  DpiModel m;
  m.sources.push_back({"t", kRules});
  auto c = compileAllPrefiltered(m);
  ASSERT_TRUE(c.ok()) << c.status();
  const CompiledDpi& d = **c;
  EXPECT_TRUE(d.unsupported.empty());
  // Every regex / hex pattern but the literal "plain" and the three unbounded regexes
  // (re_flags `.+`, re_alt ` +`, re_wide `\d+`: no window can hold their matches; they stay
  // exact).
  std::string exact;
  for (const DpiPattern& pt : d.patterns)
    if (pt.confirm < 0)
      for (const DpiRule& r : d.rules)
        if (pt.string_id >= r.first_string && pt.string_id < r.first_string + r.num_strings)
          exact += r.name + "." + d.strings[pt.string_id].ident + " ";
  EXPECT_EQ(d.confirms.size(), 12u) << "exact: " << exact;
  EXPECT_EQ(d.patterns.size(), 16u);
  Pair p;  // libyara side
  {
    std::string err;
    ASSERT_TRUE(p.build(m, &err)) << err;
  }
  hs_scratch_t* scratch = nullptr;
  ASSERT_EQ(hs_clone_scratch(d.scratch_proto, &scratch), HS_SUCCESS);
  const std::vector<std::string> data = {
      "?user=alice&pass=1", "?user=al&pass=1", "?user=alicealiceal&pass",
      "get /x\nhttp/1.1", "GET /x HTTP/1.2", "k\ny", "kqy", "the tail", "the tail\n", "tail tail",
      "head of it", " head", "headhead", "CATS   RUN", "dogeat", "dog eat",
      widen("?user=bob12; "), "x" + widen("usr=abcd7;"), widen("user=b1;"), "user=bob12;",
      widen("GEXT."), "gext.", widen("gext") + "x" + widen("."),
      widen("zz12"), widen("zz12") + "x", widen("zz12") + std::string(1, '\0'), "zz12",
      std::string("\x4d\x5a\x01\x00\x10\x11\x12\x4e\x45", 9), std::string("\x4d\x5a\x01\x00\x10\x4e\x45", 7),
      std::string("\x1a\x72\x00\xff", 4), std::string("\x1a\x72\xff", 3),
      "\xaa\xbb" + std::string(10, 'q') + "\xcc\xdd", "\xaa\xbb" + std::string(300, 'q') + "\xcc\xdd",
      "\xaa\xbb" + std::string(301, 'q') + "\xcc\xdd", "\xaa\xbb" + std::string(9, 'q') + "\xcc\xdd",
      "plain r12r", "plain r1r", "r12r", "nope", "nope7", "abcdef",
  };
  size_t matched = 0;
  for (const std::string& x : data) {
    const std::vector<std::string> want = p.oracle(x);
    matched += !want.empty();
    for (const auto& s : kSegs)
      EXPECT_EQ(scanSegments(d, scratch, x, s), want) << "'" << x << "' segments " << s[0];
    for (DpiStreamMode mode : {DpiStreamMode::kFull, DpiStreamMode::kCompressed}) {
      auto rt = runtime(*c, mode);
      for (const auto& s : {std::vector<size_t>{1}, std::vector<size_t>{2, 5}, std::vector<size_t>{1460}}) {
        dp::DpiOutcome o;
        EXPECT_EQ(scanInspector(d, *rt, x, s, o), want) << "'" << x << "' DpiInspector segments " << s[0];
      }
    }
  }
  EXPECT_GT(matched, data.size() / 3);
  hs_free_scratch(scratch);
}

// Candidates handed to onMatch() directly (as a prefilter may report them: end offsets where
// the exact expression does not match): only confirmed ones set the string present.
TEST(YaraPrefilter, OnMatchConfirmsCandidatesOnTheWindow) {
  DpiModel m;
  m.sources.push_back({"t", R"YARA(
rule r { strings: $a = /ab[0-9]{3}cd/ condition: $a }
rule s { strings: $a = /^st[a-z]{1,9}$/ condition: $a }
rule w { strings: $a = /w[0-9]x/ wide condition: $a }
)YARA"});
  auto c = compileAllPrefiltered(m);
  ASSERT_TRUE(c.ok()) << c.status();
  const CompiledDpi& d = **c;
  ASSERT_EQ(d.confirms.size(), 3u);
  DpiConfirmScratch cs(d.prefilter_window, CompiledDpi::kConfirmMatchLimit);
  std::vector<uint8_t> ms(d.matchStateBytes());
  auto present = [&](uint32_t sid) { return (ms[d.presenceOffset() + sid / 8] >> (sid % 8)) & 1; };
  auto cand = [&](unsigned pat, const std::string& bytes, uint64_t to, bool at_end = false,
                  uint64_t cur_off = 0) {
    d.resetMatchState(ms.data());
    DpiWindow w;
    w.cur = reinterpret_cast<const uint8_t*>(bytes.data());
    w.cur_off = cur_off;
    w.cur_len = uint32_t(bytes.size());
    w.at_end = at_end;
    w.scratch = &cs;
    d.onMatch(ms.data(), pat, to, 0, &w);
    return present(d.patterns[pat].string_id) != 0;
  };
  EXPECT_TRUE(cand(0, "xxab123cd", 9));
  EXPECT_FALSE(cand(0, "xxab123cd", 8));   // not a match end
  EXPECT_FALSE(cand(0, "xxab12xcd", 9));   // a superset's candidate: rejected
  EXPECT_FALSE(cand(0, "123cd", 9, false, 4));  // the bytes before the window are not held
  EXPECT_TRUE(cand(1, "stop", 4, true));    // ^ at the stream start, $ at its end
  EXPECT_FALSE(cand(1, "stop", 4, false));  // $: not the end of the data yet
  EXPECT_FALSE(cand(1, "stop", 104, true, 100));  // ^: not the stream start
  EXPECT_FALSE(cand(1, "stop!", 4, true));  // $: the data goes on
  EXPECT_TRUE(cand(2, widen("w7x"), 6));
  EXPECT_TRUE(cand(2, "q" + widen("w7x"), 7));
  EXPECT_FALSE(cand(2, "w7x", 3));
  EXPECT_FALSE(cand(2, std::string("w\0007\001x\0", 6), 6));
  // History ring + packet: the match begins in the ring (wrapping around it).
  {
    d.resetMatchState(ms.data());
    const std::string all = "....ab123cd";  // stream offsets 0..10
    const uint32_t W = d.prefilter_window;
    std::vector<uint8_t> ring(W);
    for (uint64_t o = 0; o < 7; ++o) ring[o % W] = uint8_t(all[o]);
    DpiWindow w;
    w.ring = ring.data();
    w.ring_size = W;
    w.ring_from = 0;
    w.cur = reinterpret_cast<const uint8_t*>(all.data()) + 7;
    w.cur_off = 7;
    w.cur_len = 4;
    w.scratch = &cs;
    d.onMatch(ms.data(), 0, 11, 0, &w);
    EXPECT_TRUE(present(d.patterns[0].string_id));
    EXPECT_EQ(w.confirmed, 1u);
  }
}

TEST(YaraPrefilter, ReasonsWhenARefusedExpressionCannotBePrefiltered) {
  // Refused exactly ("Pattern is too large"); as a prefilter its longest match (10004 B)
  // exceeds the window bound. The empty-buffer one (Yara-Rules RAT_PoetRATPython.yar) is
  // refused as a prefilter too.
  const char* src = R"YARA(
rule big { strings: $a = /x[^\n]{0,5000}y/ wide condition: $a }
rule empty { strings: $a = /BADD|Bad Error Happened|/ condition: $a }
)YARA";
  DpiModel m;
  m.sources.push_back({"u", src});
  ConfigErrorList errs;
  auto c = compileDpi(m, errs);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ((*c)->unsupported.size(), 2u);
  for (const DpiUnsupported& u : (*c)->unsupported) {
    if (u.rule == "big") {
      EXPECT_NE(u.reason.find("Pattern is too large.; not prefiltered: its longest match (10004 B) "
                              "exceeds dpi.prefilter_window_bytes (8192 B)"), std::string::npos) << u.reason;
    } else {
      EXPECT_NE(u.reason.find("empty buffer"), std::string::npos) << u.reason;
      // (hs_expression_info does not see it; hs_compile_multi refuses it exactly and as a
      // prefilter)
      EXPECT_NE(u.reason.find("(prefiltered)"), std::string::npos) << u.reason;
    }
  }
  // The fail option refuses the whole apply.
  m.unsupported_fails = true;
  ConfigErrorList errs2;
  EXPECT_FALSE(compileDpi(m, errs2).ok());
  // A larger bound: `big` is prefiltered, and equal to libyara (matches up to libyara's own
  // 4096-byte regex limit).
  DpiModel m2;
  m2.sources.push_back({"u", "rule big { strings: $a = /x[^\\n]{0,5000}y/ wide condition: $a }"});
  m2.prefilter_window_bytes = 16384;
  Pair p;
  std::string err;
  ASSERT_TRUE(p.build(m2, &err)) << err;
  ASSERT_EQ(p.ours->rules.size(), 1u);
  ASSERT_EQ(p.ours->confirms.size(), 1u);
  EXPECT_EQ(p.ours->prefilter_window, 10004u);
  for (const std::string& x : std::vector<std::string>{widen("x" + std::string(2000, 'q') + "y"), widen("xy"),
                               widen("x" + std::string(10, 'q') + "\n" + "y"),
                               widen("x" + std::string(5001, 'q') + "yy"), std::string("xy")}) {
    const std::vector<std::string> want = p.oracle(x);
    for (const auto& s : kSegs)
      EXPECT_EQ(scanSegments(*p.ours, p.scratch, x, s), want) << x.size() << " segments " << s[0];
    auto rt = runtime(p.ours, DpiStreamMode::kFull);
    for (const auto& s : kSegs) {
      dp::DpiOutcome o;
      EXPECT_EQ(scanInspector(*p.ours, *rt, x, s, o), want) << x.size() << " DpiInspector " << s[0];
    }
  }
}

}  // namespace
}  // namespace dpu::rules
