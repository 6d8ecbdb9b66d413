// YARA translation and condition evaluation, each feature checked two ways: the expected
// verdict written here, and libyara's verdict on the same bytes (the oracle), with our engine
// fed the bytes in many segmentations.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "tests/rules/dpi_test_util.h"

namespace dpu::rules {
namespace {

using test::Pair;
using test::scanSegments;

const char* kRules = R"YARA(
rule text_plain { strings: $a = "evil.exe" condition: $a }
rule text_nocase { strings: $a = "PowerShell" nocase condition: $a }
rule text_wide { strings: $a = "cmd" wide condition: $a }
rule text_wide_ascii { strings: $a = "svc" wide ascii condition: $a and not text_plain }
rule text_fullword { strings: $a = "root" fullword condition: $a }
rule text_fullword_wide { strings: $a = "adm" fullword wide condition: $a }
rule text_xor { strings: $a = "secret" xor(1-3) condition: $a }
rule text_private { strings: $a = "priv" private condition: $a }
rule hex_basic { strings: $a = { 4D 5A ?? 00 [2-4] ( 50 45 | 4E 45 ) } condition: $a }
rule hex_nibble { strings: $a = { 1? ?2 [1] FF } condition: $a }
rule hex_unbounded { strings: $a = { AA BB [-] CC DD } condition: $a }
rule re_basic { strings: $a = /user=[a-z]{3,8}&pass/ condition: $a }
rule re_flags { strings: $a = /GET .+HTTP\/1\.[01]/is condition: $a }
rule re_end { strings: $a = /tail$/ condition: $a }
rule count_gt { strings: $a = "ab" condition: #a > 2 }
rule at_zero { strings: $a = "HDR" condition: $a at 0 }
rule in_range { strings: $a = "mid" condition: $a in (10..20) }
rule offset_idx { strings: $a = "xy" condition: @a[2] == 5 }
rule length_idx { strings: $a = "len" condition: !a[1] == 3 and #a == 1 }
rule n_of { strings: $a = "one" $b = "two" $c = "three" condition: 2 of them }
rule n_of_set { strings: $p1 = "pa" $p2 = "pb" $q = "qq" condition: all of ($p*) and not $q }
rule any_of { strings: $a = "k1" $b = "k2" condition: any of ($a, $b) }
rule size_cmp { strings: $a = "sz" condition: $a and filesize < 40 }
rule arith { strings: $a = "w" condition: (#a * 2 + 1) % 5 == 0 or (#a << 1) == 8 }
rule mz_header { strings: $a = "This program" condition: uint16(0) == 0x5A4D and $a }
rule be_read { condition: uint32be(4) == 0x41424344 }
private rule helper { strings: $a = "helper" condition: $a }
rule uses_helper { condition: helper and filesize > 10 }
rule undef_not { strings: $a = "zz" condition: not (@a[3] > 0) }
rule anon { strings: $ = "anon1" $ = "anon2" condition: all of them }
rule b64_plain { strings: $a = "Invoke-Mimikatz" base64 condition: $a }
rule b64_wide_out { strings: $a = "cmd.exe /c" base64wide condition: $a }
rule b64_wide_in { strings: $a = "powershell" wide base64 condition: $a }
rule b64_alpha { strings: $a = "secret!" base64("KLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/ABCDEFGHIJ") condition: $a }
rule b64_count { strings: $a = "hello" base64 condition: #a == 2 }
rule re_wide { strings: $a = /us(er|r)=[a-z]{2,4}\d+;/ wide condition: $a }
rule re_wide_ascii { strings: $a = /ge.t[^x]?\./ wide ascii nocase condition: $a }
)YARA";

const char* kStdAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
std::string b64(const std::string& in, const char* a = kStdAlphabet) {
  std::string o;
  size_t i = 0;
  auto b = [&](size_t j) { return j < in.size() ? uint8_t(in[j]) : 0; };
  for (; i < in.size(); i += 3) {
    uint32_t v = (uint32_t(b(i)) << 16) | (uint32_t(b(i + 1)) << 8) | b(i + 2);
    o += a[(v >> 18) & 63];
    o += a[(v >> 12) & 63];
    o += i + 1 < in.size() ? a[(v >> 6) & 63] : '=';
    o += i + 2 < in.size() ? a[v & 63] : '=';
  }
  return o;
}
std::string widen(const std::string& s) {
  std::string w;
  for (char c : s) { w += c; w += '\0'; }
  return w;
}

struct Case {
  const char* name;
  std::string data;
  std::vector<std::string> expect;  // rule names expected to match (besides what libyara says)
};

class YaraTranslateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DpiModel m;
    m.sources.push_back({"t", kRules});
    std::string err;
    ASSERT_TRUE(p.build(m, &err)) << err;
  }
  Pair p;
};

TEST_F(YaraTranslateTest, EveryRuleAccepted) {
  for (const DpiUnsupported& u : p.ours->unsupported) ADD_FAILURE() << u.rule << ": " << u.reason;
  EXPECT_EQ(p.ours->rules.size(), 37u);
}

TEST_F(YaraTranslateTest, VerdictsEqualLibyaraAcrossSegmentations) {
  std::string w;
  for (char c : std::string("xxcmdxx")) { w += c; w += '\0'; }
  std::string adm_word = std::string("a\0 \0a\0d\0m\0 \0", 12);
  std::string adm_inside = std::string("x\0a\0d\0m\0", 8);
  std::string sec;
  for (char c : std::string("secret")) sec += char(c ^ 2);
  std::vector<Case> cases = {
      {"plain", "...evil.exe...", {"text_plain"}},
      {"nocase", "run pOWERsHELL now", {"text_nocase"}},
      {"wide", w, {"text_wide"}},
      {"svc_wide", std::string("s\0v\0c\0", 6), {"text_wide_ascii"}},
      {"fullword_yes", "the root user", {"text_fullword"}},
      {"fullword_no", "the rooted user", {}},
      {"fullword_end", "root", {"text_fullword"}},
      {"fullword_wide_yes", adm_word, {"text_fullword_wide"}},
      {"fullword_wide_no", adm_inside, {}},
      {"xor", "--" + sec + "--", {"text_xor"}},
      {"xor_key0_no", "--secret--", {}},
      {"hex", std::string("\x4d\x5a\x01\x00\x10\x11\x12\x4e\x45", 9), {"hex_basic"}},
      {"hex_no", std::string("\x4d\x5a\x01\x00\x10\x4e\x45", 7), {}},
      {"nibble", std::string("\x1a\x72\x00\xff", 4), {"hex_nibble"}},
      {"unbounded", std::string("\xaa\xbb") + std::string(300, 'q') + "\xcc\xdd", {"hex_unbounded"}},
      {"re", "?user=alice&pass=1", {"re_basic"}},
      {"re_flags", "get /x\nhttp/1.1", {"re_flags"}},
      {"re_end_yes", "the tail", {"re_end"}},
      {"re_end_no", "the tail\n", {}},
      {"count3", "ababab", {"count_gt"}},
      {"count_overlap", "abab", {}},
      {"at0", "HDR and more", {"at_zero"}},
      {"at1", " HDR", {}},
      {"in", "0123456789abcmid", {"in_range"}},
      {"offset", "xy...xy", {"offset_idx"}},
      {"length", "len", {"length_idx"}},
      {"n_of", "one...three", {"n_of"}},
      {"n_of_set", "pa pb", {"n_of_set"}},
      {"n_of_set_q", "pa pb qq", {}},
      {"any", "k2", {"any_of"}},
      {"size", "sz", {"size_cmp"}},
      {"size_big", "sz" + std::string(60, '.'), {}},
      {"arith", "wwww", {"arith"}},
      {"mz", "MZ This program cannot", {"mz_header"}},
      {"mz_no", " MZ This program", {}},
      {"be", "....ABCD", {"be_read"}},
      {"helper", "helper and more text", {"uses_helper"}},
      {"undef", "zz", {}},
      {"anon", "anon2 anon1", {"anon"}},
      {"short", "M", {}},
      {"b64_shift0", "data=" + b64("Invoke-Mimikatz -DumpCreds"), {"b64_plain"}},
      {"b64_shift1", b64("x Invoke-Mimikatz"), {"b64_plain"}},
      {"b64_shift2", "[" + b64("yzInvoke-Mimikatz!") + "]", {"b64_plain"}},
      {"b64_cut", b64("Invoke-Mimikat"), {}},
      {"b64_plain_text", "Invoke-Mimikatz", {}},
      {"b64wide", widen(b64("run cmd.exe /c dir")), {"b64_wide_out"}},
      {"b64wide_narrow", b64("run cmd.exe /c dir"), {}},
      {"b64_wide_input", b64(widen("xpowershell")), {"b64_wide_in"}},
      {"b64_alpha", b64("a secret! b", "KLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/ABCDEFGHIJ"), {"b64_alpha"}},
      {"b64_alpha_std", b64("a secret! b"), {}},
      {"b64_count", b64("hello") + " " + b64("xhello"), {"b64_count"}},
      {"re_wide", widen("?user=bob12; "), {"re_wide"}},
      {"re_wide_usr", "x" + widen("usr=abcd7;"), {"re_wide"}},
      {"re_wide_short", widen("user=b1;"), {}},
      {"re_wide_ascii_only", "user=bob12;", {}},
      {"re_wide_ascii_w", widen("GEXT."), {"re_wide_ascii"}},
      {"re_wide_ascii_a", "gext.", {"re_wide_ascii"}},
      {"re_wide_ascii_no", widen("gext") + "x" + widen("."), {}},
  };
  const std::vector<std::vector<size_t>> segs = {{1 << 20}, {1}, {2}, {3}, {5, 1, 7}, {4, 9}};
  for (const Case& c : cases) {
    std::vector<std::string> want = p.oracle(c.data);
    for (const std::string& e : c.expect)
      EXPECT_TRUE(std::find(want.begin(), want.end(), "t:" + e) != want.end())
          << c.name << ": libyara does not match " << e;
    for (const auto& s : segs)
      EXPECT_EQ(scanSegments(*p.ours, p.scratch, c.data, s), want)
          << c.name << " segments " << s[0];
  }
}

TEST(YaraTranslate, UnsupportedRulesAreReportedWithReasons) {
  DpiModel m;
  m.sources.push_back({"u", R"YARA(
import "pe"
rule uses_pe { condition: pe.number_of_sections > 2 }
rule loop { strings: $a = "a" condition: for any i in (1..#a) : (@a[i] > 10) }
rule b64 { strings: $a = "hi!!" base64 condition: #a > 1 }
rule var_count { strings: $a = /ab+c/ condition: #a > 1 }
rule ext { condition: filetype == "exe" }
rule refs_bad { condition: uses_pe }
rule ok { strings: $a = "fine" condition: $a }
)YARA"});
  ConfigErrorList errs;
  auto c = compileDpi(m, errs);
  ASSERT_TRUE(c.ok()) << c.status();
  std::map<std::string, std::string> why;
  for (const DpiUnsupported& u : (*c)->unsupported) why[u.rule] = u.reason;
  EXPECT_EQ(why.size(), 6u);
  EXPECT_NE(why["uses_pe"].find("pe"), std::string::npos);
  EXPECT_NE(why["loop"].find("for loop"), std::string::npos);
  EXPECT_NE(why["b64"].find("several encodings"), std::string::npos) << why["b64"];
  EXPECT_NE(why["var_count"].find("variable length"), std::string::npos);
  EXPECT_NE(why["ext"].find("filetype"), std::string::npos) << why["ext"];
  EXPECT_NE(why["refs_bad"].find("unsupported rule uses_pe"), std::string::npos);
  ASSERT_EQ((*c)->rules.size(), 1u);
  EXPECT_EQ((*c)->rules[0].name, "ok");

  m.unsupported_fails = true;
  ConfigErrorList errs2;
  auto f = compileDpi(m, errs2);
  EXPECT_FALSE(f.ok());
  EXPECT_EQ(errs2.size(), 6u);
  EXPECT_NE(std::string(f.status().message()).find("u:loop"), std::string::npos);
}

TEST(YaraTranslate, SyntaxErrorsReadLikeYaras) {
  DpiModel m;
  m.sources.push_back({"bad.yar", "rule a {\n strings: $a = \"x\"\n condition: $b\n}\n"});
  ConfigErrorList errs;
  auto c = compileDpi(m, errs);
  ASSERT_FALSE(c.ok());
  ASSERT_FALSE(errs.empty());
  EXPECT_EQ(errs[0].file, "bad.yar");
  EXPECT_GE(errs[0].line, 3);  // the line libyara names
  EXPECT_EQ(errs[0].reason, "yara: undefined string \"$b\"");
  EXPECT_EQ(formatError(errs[0]).find("bad.yar:"), 0u) << formatError(errs[0]);
}

// Found by the yara fuzz target: libyara reads a source as a C string, so a NUL byte (here
// in a comment) hid every rule after it from the libyara validation while the translator
// compiled them all. Such a source is refused, naming the file and line.
TEST(YaraTranslate, NulByteInASourceIsRefused) {
  DpiModel m;
  std::string text = "/* a comment\n with a NUL ";
  text += '\0';
  text += " byte */\nrule a { strings: $a = \"x\" condition: $a and $b }\n";
  m.sources.push_back({"nul.yar", text});
  ConfigErrorList errs;
  auto c = compileDpi(m, errs);
  ASSERT_FALSE(c.ok());
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].file, "nul.yar");
  EXPECT_EQ(errs[0].line, 2);
  EXPECT_NE(errs[0].reason.find("NUL byte"), std::string::npos) << errs[0].reason;
  // Without the NUL the same text is a plain syntax error ($b undefined), as libyara says.
  text.erase(text.find('\0'), 1);
  m.sources[0].text = text;
  errs.clear();
  EXPECT_FALSE(compileDpi(m, errs).ok());
  ASSERT_FALSE(errs.empty());
  EXPECT_EQ(errs[0].reason, "yara: undefined string \"$b\"");
}

TEST(YaraTranslate, ActionsFromMetaAndConfig) {
  DpiModel m;
  m.sources.push_back({"s", R"YARA(
rule d { meta: action = "drop" strings: $a = "a1" condition: $a }
rule r { meta: action = "reset" strings: $a = "a2" condition: $a }
rule c { meta: action = "drop" strings: $a = "a3" condition: $a }
rule x { strings: $a = "a4" condition: $a }
)YARA"});
  m.actions.push_back({"s:c", DpiAction::kAlert});
  m.default_action = DpiAction::kAlert;
  ConfigErrorList errs;
  auto c = compileDpi(m, errs);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->rules[0].action, DpiAction::kDrop);
  EXPECT_EQ((*c)->rules[1].action, DpiAction::kReset);
  EXPECT_EQ((*c)->rules[2].action, DpiAction::kAlert);
  EXPECT_EQ((*c)->rules[3].action, DpiAction::kAlert);

  m.actions.push_back({"nosuch", DpiAction::kDrop});
  ConfigErrorList errs2;
  EXPECT_FALSE(compileDpi(m, errs2).ok());
  m.actions.pop_back();
  m.sources[0].text += "rule y { meta: action = \"explode\" condition: true }\n";
  ConfigErrorList errs3;
  EXPECT_FALSE(compileDpi(m, errs3).ok());
}

TEST(YaraTranslate, GlobalRuleGatesItsNamespace) {
  DpiModel m;
  m.sources.push_back({"g", R"YARA(
global rule small { condition: filesize < 20 }
rule hit { strings: $a = "hit" condition: $a }
)YARA"});
  Pair p;
  std::string err;
  ASSERT_TRUE(p.build(m, &err)) << err;
  for (std::string d : {std::string("hit"), "hit" + std::string(40, '.')}) {
    EXPECT_EQ(scanSegments(*p.ours, p.scratch, d, {3}), p.oracle(d)) << d.size();
  }
  EXPECT_EQ(p.oracle("hit"), (std::vector<std::string>{"g:hit", "g:small"}));
}

TEST(YaraTranslate, CompiledDatabaseCachedOnDisk) {
  char tmpl[] = "/tmp/dpi-cache-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  DpiModel m;
  m.cache_dir = tmpl;
  m.sources.push_back({"c", "rule a { strings: $a = \"cached\" condition: $a }"});
  ConfigErrorList e1, e2;
  clearDpiCompileCache();  // what a new process knows: only the disk cache
  auto a = compileDpi(m, e1);
  clearDpiCompileCache();
  auto b = compileDpi(m, e2);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_FALSE((*a)->from_cache);
  EXPECT_TRUE((*b)->from_cache);
  EXPECT_EQ((*b)->shards_loaded, 1u);
  std::vector<uint8_t> ms((*b)->matchStateBytes());
  const std::string d = "is cached";
  EXPECT_EQ((*b)->scanBuffer(reinterpret_cast<const uint8_t*>(d.data()), d.size(), ms.data(),
                             (*b)->scratch_proto).size(), 1u);
  std::filesystem::remove_all(tmpl);
}

// dpi.cache_dir is created when missing (like mkdir -p); a path that cannot be a directory
// refuses the config naming the field; a database that cannot be written is a warning and
// counted (the rules still load).
TEST(YaraTranslate, CacheDirectoryCreatedOrRefusedAndWriteFailuresCounted) {
  char tmpl[] = "/tmp/dpi-cache-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  DpiModel m;
  m.sources.push_back({"c", "rule a { strings: $a = \"cached\" condition: $a }"});
  m.cache_dir = root + "/a/b/c";
  ConfigErrorList e1, e2;
  clearDpiCompileCache();
  auto a = compileDpi(m, e1);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(std::filesystem::is_directory(m.cache_dir));
  EXPECT_TRUE((*a)->cache_warning.empty()) << (*a)->cache_warning;
  clearDpiCompileCache();
  auto b = compileDpi(m, e2);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE((*b)->from_cache);
  // A regular file where the directory should be.
  { std::ofstream f(root + "/file"); f << "x"; }
  DpiModel bad = m;
  bad.cache_dir = root + "/file";
  ConfigErrorList e3;
  auto c = compileDpi(bad, e3);
  ASSERT_FALSE(c.ok());
  ASSERT_FALSE(e3.empty());
  EXPECT_EQ(e3.front().field, "dpi.cache_dir");
  EXPECT_NE(e3.front().reason.find(root + "/file: cannot create the directory"), std::string::npos)
      << e3.front().reason;
  // The database file cannot be written (its temporary name is a directory).
  std::string db;
  for (const auto& f : std::filesystem::directory_iterator(m.cache_dir))
    if (f.path().extension() == ".hsdb") db = f.path().string();
  ASSERT_FALSE(db.empty());
  std::filesystem::remove(db);
  std::filesystem::create_directory(db + ".tmp");
  const uint64_t failures = dpiCacheWriteFailures();
  clearDpiCompileCache();
  ConfigErrorList e4;
  auto d = compileDpi(m, e4);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE((*d)->from_cache);
  EXPECT_NE((*d)->cache_warning.find("compiled database not cached: " + db), std::string::npos)
      << (*d)->cache_warning;
  EXPECT_EQ(dpiCacheWriteFailures(), failures + 1);
  EXPECT_EQ((*d)->rules.size(), 1u);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace dpu::rules
