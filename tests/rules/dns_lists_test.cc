// DNS lists: name normalization, every list format, bad lines (file + line, reject / skip),
// the fingerprint name set (add, remove, growth, false positives), precedence across lists,
// reuse and deltas, and real lists from ../shared/data/dns.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <unistd.h>

#include "rules/compile/dns_parsers.h"
#include "rules/compiled/dns.h"

namespace dpu::rules {
namespace {

struct Collected {
  std::map<std::string, uint8_t> entries;
  DnsEntrySink sink() {
    return [this](std::string_view n, uint8_t bits) { entries[std::string(n)] |= bits; };
  }
};

DnsParseCounts parse(std::string_view text, DnsListFormat f, Collected& c, ConfigErrorList* errs,
                     DnsMatch m = DnsMatch::kExact) {
  DnsSource src{"l", "list.txt", "dns.lists[0].files[0]", 1};
  return parseDnsListText(text, f, m, src, c.sink(), errs);
}

constexpr uint8_t kSelf = DnsEntryBits::make(true, 0, false, 0);
constexpr uint8_t kBoth = DnsEntryBits::make(true, 0, true, 0);
constexpr uint8_t kSubOnly = DnsEntryBits::make(false, 0, true, 0);

TEST(DnsNames, Normalize) {
  std::string out, why;
  EXPECT_TRUE(normalizeDnsName("WWW.Example.COM.", out, &why));
  EXPECT_EQ(out, "www.example.com");
  EXPECT_TRUE(normalizeDnsName("_dmarc.x-y.example", out, &why));
  EXPECT_FALSE(normalizeDnsName("a..b", out, &why));
  EXPECT_NE(why.find("empty label"), std::string::npos);
  EXPECT_FALSE(normalizeDnsName("", out, &why));
  EXPECT_FALSE(normalizeDnsName(".", out, &why));
  EXPECT_FALSE(normalizeDnsName("a b", out, &why));
  EXPECT_FALSE(normalizeDnsName("ex*ample.com", out, &why));
  EXPECT_FALSE(normalizeDnsName(std::string(64, 'a') + ".com", out, &why));
  EXPECT_NE(why.find("63"), std::string::npos);
  EXPECT_TRUE(normalizeDnsName(std::string(63, 'a') + ".com", out, &why));
  std::string long_name;
  for (int i = 0; i < 127; ++i) long_name += "a.";
  long_name += "com";  // 257 characters
  EXPECT_FALSE(normalizeDnsName(long_name, out, &why));
}

TEST(DnsNames, SuffixHashesChain) {
  uint64_t hs[kDnsMaxLabels];
  ASSERT_EQ(dnsSuffixHashes("a.b.example.com", hs, kDnsMaxLabels), 4);
  EXPECT_EQ(hs[0], dnsNameHash("a.b.example.com"));
  EXPECT_EQ(hs[1], dnsNameHash("b.example.com"));
  EXPECT_EQ(hs[2], dnsNameHash("example.com"));
  EXPECT_EQ(hs[3], dnsNameHash("com"));
  // Label boundaries matter: "ab.c" and "a.bc" differ.
  EXPECT_NE(dnsNameHash("ab.c"), dnsNameHash("a.bc"));
  EXPECT_NE(dnsNameHash("abcdefgh.x"), dnsNameHash("abcdefgh\0.x"));
}

TEST(DnsFormats, Plain) {
  Collected c;
  ConfigErrorList errs;
  auto n = parse("# comment\n\nAds.Example.com.\ntracker.net  # tail\nbad name here\n", DnsListFormat::kPlain, c, &errs);
  EXPECT_EQ(n.entries, 2u);
  EXPECT_EQ(n.bad_lines, 1u);
  EXPECT_EQ(n.ignored, 2u);
  EXPECT_EQ(c.entries["ads.example.com"], kSelf);
  EXPECT_EQ(c.entries["tracker.net"], kSelf);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].line, 5);
  EXPECT_EQ(errs[0].file, "list.txt");
  EXPECT_EQ(errs[0].rule, "l");
  EXPECT_EQ(errs[0].section, "dns");
  Collected sub;
  parse("example.org\n", DnsListFormat::kPlain, sub, nullptr, DnsMatch::kSubtree);
  EXPECT_EQ(sub.entries["example.org"], kBoth);
}

TEST(DnsFormats, Hosts) {
  Collected c;
  ConfigErrorList errs;
  auto n = parse(
      "127.0.0.1 localhost\n::1 ip6-localhost\n0.0.0.0 a.example b.example # two\n"
      "127.0.0.1 c.example\n:: d.example\nnot-an-ip e.example\n0.0.0.0\n"
      "fe80::1%lo0 localhost\n",
      DnsListFormat::kHosts, c, &errs);
  EXPECT_EQ(n.entries, 4u);
  EXPECT_EQ(n.bad_lines, 2u);
  EXPECT_EQ(c.entries.count("localhost"), 0u);
  EXPECT_EQ(c.entries["a.example"], kSelf);
  EXPECT_EQ(c.entries["b.example"], kSelf);
  EXPECT_EQ(c.entries["d.example"], kSelf);
  ASSERT_EQ(errs.size(), 2u);
  EXPECT_EQ(errs[0].line, 6);
  EXPECT_NE(errs[0].reason.find("not an IPv4 or IPv6 address"), std::string::npos);
  EXPECT_EQ(errs[1].line, 7);
}

TEST(DnsFormats, Adblock) {
  Collected c;
  ConfigErrorList errs;
  auto n = parse(
      "[Adblock Plus 2.0]\n! title\n||ads.example^\n@@||good.ads.example^\n"
      "||x.example^$third-party\n||y.example/path^\nexample##.banner\n||noclose.example\n",
      DnsListFormat::kAdblock, c, &errs);
  EXPECT_EQ(n.entries, 2u);
  EXPECT_EQ(n.bad_lines, 4u);
  EXPECT_EQ(c.entries["ads.example"], kBoth);
  uint8_t allow = static_cast<uint8_t>(DnsAction::kAllow);
  EXPECT_EQ(c.entries["good.ads.example"], DnsEntryBits::make(true, allow, true, allow));
  ASSERT_EQ(errs.size(), 4u);
  EXPECT_EQ(errs[0].line, 5);
  EXPECT_NE(errs[0].reason.find("modifiers"), std::string::npos);
  EXPECT_EQ(errs[3].line, 8);
}

TEST(DnsFormats, Wildcard) {
  Collected c;
  ConfigErrorList errs;
  auto n = parse("*.example.com\nplain.example\nfoo.*.example\n", DnsListFormat::kWildcard, c, &errs);
  EXPECT_EQ(n.entries, 2u);
  EXPECT_EQ(c.entries["example.com"], kSubOnly);
  EXPECT_EQ(c.entries["plain.example"], kSelf);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].line, 3);
}

TEST(DnsFormats, Rpz) {
  Collected c;
  ConfigErrorList errs;
  auto n = parse(
      "$TTL 3600\n@ SOA localhost. root.localhost. (1 2\n 3 4 5)\n  NS  localhost.\n; comment\n"
      "nx.example CNAME .\n*.nx.example CNAME .\nnodata.example 60 IN CNAME *.\n"
      "pass.nx.example CNAME rpz-passthru.\ndrop.example CNAME rpz-drop.\n"
      "local.example A 10.0.0.1\nother.example CNAME elsewhere.example.\n",
      DnsListFormat::kRpz, c, &errs);
  EXPECT_EQ(n.entries, 5u);
  EXPECT_EQ(n.bad_lines, 2u);
  uint8_t nx = static_cast<uint8_t>(DnsAction::kNxdomain);
  EXPECT_EQ(c.entries["nx.example"], DnsEntryBits::make(true, nx, true, nx));
  EXPECT_EQ(c.entries["nodata.example"],
            DnsEntryBits::make(true, static_cast<uint8_t>(DnsAction::kNodata), false, 0));
  EXPECT_EQ(c.entries["pass.nx.example"],
            DnsEntryBits::make(true, static_cast<uint8_t>(DnsAction::kAllow), false, 0));
  EXPECT_EQ(c.entries["drop.example"],
            DnsEntryBits::make(true, static_cast<uint8_t>(DnsAction::kDrop), false, 0));
  ASSERT_EQ(errs.size(), 2u);
  EXPECT_EQ(errs[0].line, 11);
  EXPECT_NE(errs[0].reason.find("record type"), std::string::npos);
  EXPECT_EQ(errs[1].line, 12);
}

// RPZ owners are zone-file names: relative to $ORIGIN, and the policy's name is the owner
// without the zone's name (the first $ORIGIN, or a named SOA owner). Feeds write fully
// qualified owners ("bad.example.rpz.local.") or relative ones under a $ORIGIN; before,
// $ORIGIN was ignored and such owners became names ending in the zone's name (no match).
TEST(DnsFormats, RpzOrigin) {
  const uint8_t nx = static_cast<uint8_t>(DnsAction::kNxdomain);
  const uint8_t nodata = static_cast<uint8_t>(DnsAction::kNodata);
  {
    Collected c;
    ConfigErrorList errs;
    auto n = parse(
        "$ORIGIN rpz.local.\n@ 3600 IN SOA ns.rpz.local. admin.rpz.local. 1 2 3 4 5\n@ NS ns.rpz.local.\n"
        "bad.example CNAME .\n"                      // relative: bad.example.rpz.local
        "full.example.rpz.local. CNAME .\n"          // fully qualified
        "*.wild.example CNAME *.\n"
        "$ORIGIN sub.example.rpz.local.\n"            // a sub-origin inside the zone
        "www CNAME .\n@ CNAME *.\n* CNAME .\n"
        "$ORIGIN deeper\n"                           // relative to the current origin
        "x CNAME .\n"
        "other.example. CNAME .\n"                   // fully qualified, outside the zone
        "$ORIGIN elsewhere.example.\n"               // outside the zone
        "32.1.2.0.192.rpz-ip.rpz.local. CNAME .\n",  // not a query-name trigger
        DnsListFormat::kRpz, c, &errs);
    EXPECT_EQ(n.entries, 7u);
    EXPECT_EQ(c.entries["bad.example"], DnsEntryBits::make(true, nx, false, 0));
    EXPECT_EQ(c.entries["full.example"], DnsEntryBits::make(true, nx, false, 0));
    EXPECT_EQ(c.entries["wild.example"], DnsEntryBits::make(false, 0, true, nodata));
    EXPECT_EQ(c.entries["www.sub.example"], DnsEntryBits::make(true, nx, false, 0));
    EXPECT_EQ(c.entries["sub.example"], DnsEntryBits::make(true, nodata, true, nx));
    EXPECT_EQ(c.entries["x.deeper.sub.example"], DnsEntryBits::make(true, nx, false, 0));
    EXPECT_EQ(c.entries.count("bad.example.rpz.local"), 0u);
    ASSERT_EQ(errs.size(), 3u);
    EXPECT_EQ(errs[0].line, 13);
    EXPECT_NE(errs[0].reason.find("outside the zone 'rpz.local.'"), std::string::npos) << errs[0].reason;
    EXPECT_EQ(errs[1].line, 14);
    EXPECT_NE(errs[1].reason.find("$ORIGIN 'elsewhere.example.'"), std::string::npos) << errs[1].reason;
    EXPECT_EQ(errs[2].line, 15);
    EXPECT_NE(errs[2].reason.find("rpz-ip triggers are not supported"), std::string::npos) << errs[2].reason;
  }
  {
    // No $ORIGIN, a fully written SOA owner: it names the zone and is the implicit origin.
    Collected c;
    ConfigErrorList errs;
    auto n = parse(
        "rpz.example.net. 300 IN SOA ns. admin. 1 2 3 4 5\nrpz.example.net. 300 IN NS ns.\n"
        "a.example.rpz.example.net. 300 IN CNAME .\nb.example 300 IN CNAME rpz-drop.\n"
        "rpz.example.net. CNAME .\n",
        DnsListFormat::kRpz, c, &errs);
    EXPECT_EQ(n.entries, 2u);
    EXPECT_EQ(c.entries["a.example"], DnsEntryBits::make(true, nx, false, 0));
    EXPECT_EQ(c.entries["b.example"],
              DnsEntryBits::make(true, static_cast<uint8_t>(DnsAction::kDrop), false, 0));
    ASSERT_EQ(errs.size(), 1u);
    EXPECT_NE(errs[0].reason.find("needs an owner name"), std::string::npos) << errs[0].reason;
  }
  {
    // Neither (most blocklist feeds): owners are the names, fully qualified or not.
    Collected c;
    ConfigErrorList errs;
    parse("@ SOA localhost. root.localhost. 1 2 3 4 5\nplain.example CNAME .\nfq.example. CNAME .\n",
          DnsListFormat::kRpz, c, &errs);
    EXPECT_TRUE(errs.empty());
    EXPECT_EQ(c.entries["plain.example"], DnsEntryBits::make(true, nx, false, 0));
    EXPECT_EQ(c.entries["fq.example"], DnsEntryBits::make(true, nx, false, 0));
  }
}

TEST(DnsFormats, DnsmasqAndAuto) {
  Collected c;
  ConfigErrorList errs;
  auto n = parse(
      "address=/a.example/0.0.0.0\nserver=/b.example/\n||c.example^\n0.0.0.0 d.example\n"
      "*.e.example\nf.example\n",
      DnsListFormat::kAuto, c, &errs);
  EXPECT_EQ(n.entries, 6u);
  EXPECT_TRUE(errs.empty());
  EXPECT_EQ(c.entries["a.example"], kBoth);
  EXPECT_EQ(c.entries["b.example"], kBoth);
  EXPECT_EQ(c.entries["c.example"], kBoth);
  EXPECT_EQ(c.entries["d.example"], kSelf);
  EXPECT_EQ(c.entries["e.example"], kSubOnly);
  EXPECT_EQ(c.entries["f.example"], kSelf);
}

TEST(DnsFormats, HostileLines) {
  Collected c;
  ConfigErrorList errs;
  std::string text = std::string("a\0b.example\n", 12) + std::string(100000, 'x') + "\n" +
                     "||\n@@\n*.\n\xff\xfe.example\n";
  for (DnsListFormat f : {DnsListFormat::kAuto, DnsListFormat::kPlain, DnsListFormat::kHosts,
                          DnsListFormat::kAdblock, DnsListFormat::kWildcard, DnsListFormat::kRpz,
                          DnsListFormat::kDnsmasq}) {
    auto n = parse(text, f, c, &errs);
    EXPECT_EQ(n.entries, 0u) << dnsListFormatName(f);
    EXPECT_GE(n.bad_lines, 5u) << dnsListFormatName(f);
  }
}

TEST(DnsNameSetTest, AddFindRemoveGrow) {
  DnsNameSet s;
  std::vector<uint64_t> hs;
  for (int i = 0; i < 5000; ++i) hs.push_back(dnsNameHash("n" + std::to_string(i) + ".example"));
  for (uint64_t h : hs) EXPECT_TRUE(s.add(h, kSelf));
  EXPECT_EQ(s.size(), 5000u);
  EXPECT_LE(s.size() * 10, s.capacity() * 7);
  for (uint64_t h : hs) EXPECT_EQ(s.find(h), kSelf);
  // Merge: adding the sub part keeps the self part.
  s.add(hs[0], kSubOnly);
  EXPECT_EQ(s.find(hs[0]), kBoth);
  EXPECT_TRUE(s.remove(hs[0], kSelf));
  EXPECT_EQ(s.find(hs[0]), kSubOnly);
  // Remove every other name: the rest stay findable (backward-shift deletion).
  for (size_t i = 0; i < hs.size(); i += 2) EXPECT_TRUE(s.remove(hs[i], kBoth));
  for (size_t i = 0; i < hs.size(); ++i) EXPECT_EQ(s.find(hs[i]) != 0, i % 2 == 1) << i;
  EXPECT_EQ(s.size(), 2500u);
  EXPECT_FALSE(s.remove(dnsNameHash("absent.example"), kBoth));
}

TEST(DnsNameSetTest, RemoveKeepsClustersReachable) {
  // Keys chosen to collide on their home slot and wrap around the table's end.
  DnsNameSet s(8);  // capacity 16
  std::vector<uint64_t> keys;
  for (uint64_t j = 0; j < 6; ++j) keys.push_back((j << 20) | 14);  // home 14, runs to 3
  keys.push_back((7ull << 20) | 15);
  keys.push_back((8ull << 20) | 0);
  for (uint64_t k : keys) s.add(k, kSelf);
  for (size_t drop = 0; drop < keys.size(); ++drop) {
    DnsNameSet t = s;
    t.remove(keys[drop], kSelf);
    for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(t.find(keys[i]) != 0, i != drop) << drop << " " << i;
  }
}

// The measured false-positive rate: 1M names in, 2M other names (each 3 suffix look-ups)
// must not be found; the bound is 3 * 2M * 1M / 2^64 ~ 3e-7 expected hits in the whole run.
TEST(DnsNameSetTest, NoFalsePositivesAtOneMillion) {
  std::mt19937_64 rng(42);
  DnsNameSet s;
  char buf[64];
  for (int i = 0; i < 1000000; ++i) {
    snprintf(buf, sizeof(buf), "h%llx.in.example", static_cast<unsigned long long>(rng()));
    s.add(dnsNameHash(buf), kSelf);
  }
  EXPECT_LE(s.memoryBytes() / s.size(), 32u);
  uint64_t fp = 0;
  uint64_t hs[kDnsMaxLabels];
  for (int i = 0; i < 2000000; ++i) {
    snprintf(buf, sizeof(buf), "m%llx.out.example", static_cast<unsigned long long>(rng()));
    int n = dnsSuffixHashes(buf, hs, kDnsMaxLabels);
    for (int k = 0; k < n; ++k) fp += s.find(hs[k]) != 0;
  }
  EXPECT_EQ(fp, 0u);
  // The filter in front of the table: every stored name passes it, and it turns away most
  // absent ones (~4.5 % pass at this load) without a table probe.
  std::mt19937_64 again(42);
  uint64_t stored_pass = 0, absent_pass = 0;
  for (int i = 0; i < 1000000; ++i) {
    snprintf(buf, sizeof(buf), "h%llx.in.example", static_cast<unsigned long long>(again()));
    stored_pass += s.mayContain(dnsNameHash(buf));
  }
  EXPECT_EQ(stored_pass, 1000000u);
  for (int i = 0; i < 100000; ++i) {
    snprintf(buf, sizeof(buf), "a%llx.absent.example", static_cast<unsigned long long>(rng()));
    absent_pass += s.mayContain(dnsNameHash(buf));
  }
  EXPECT_LT(absent_pass, 8000u);  // < 8 %
}

DnsListModel list(std::string name, DnsAction a, std::vector<std::string> names,
                  DnsListFormat f = DnsListFormat::kAuto) {
  DnsListModel m;
  m.name = std::move(name);
  m.action = a;
  m.names = std::move(names);
  m.format = f;
  return m;
}

TEST(CompiledDnsTest, ExactSubtreeAndPrecedence) {
  DnsModel m;
  m.lists.push_back(list("ads", DnsAction::kNxdomain, {"||ads.example^", "exact.example", "*.wild.example"}));
  m.lists.push_back(list("mal", DnsAction::kSinkhole, {"||bad.example^", "deep.ads.example"}));
  m.lists.push_back(list("allow", DnsAction::kAllow, {"ok.bad.example"}));
  auto c = compileDns(m, nullptr);
  ASSERT_TRUE(c.ok()) << c.status();
  const CompiledDns& d = **c;
  auto L = [&](const char* n) { return d.lookupName(n); };
  EXPECT_EQ(L("ads.example").list, 0);
  EXPECT_EQ(L("ads.example").action, DnsAction::kNxdomain);
  EXPECT_EQ(L("X.Ads.Example.").list, 0);  // case-insensitive, trailing dot
  EXPECT_EQ(L("exact.example").list, 0);
  EXPECT_EQ(L("sub.exact.example").list, -1);  // exact only
  EXPECT_EQ(L("wild.example").list, -1);       // *.x: subdomains only
  EXPECT_EQ(L("a.wild.example").list, 0);
  EXPECT_EQ(L("example").list, -1);
  EXPECT_EQ(L("notads.example").list, -1);
  // Most specific block wins: deep.ads.example is in "mal" exactly.
  EXPECT_EQ(L("deep.ads.example").list, 1);
  EXPECT_EQ(L("deep.ads.example").action, DnsAction::kSinkhole);
  EXPECT_EQ(L("x.deep.ads.example").list, 0);
  // Allow wins over the block of a parent.
  EXPECT_EQ(L("ok.bad.example").action, DnsAction::kAllow);
  EXPECT_FALSE(L("ok.bad.example").blocked());
  EXPECT_TRUE(L("x.bad.example").blocked());
  EXPECT_EQ(L("x.ok.bad.example").list, 1);  // the allow entry is exact
}

TEST(CompiledDnsTest, AdblockAllowInsideABlockList) {
  DnsModel m;
  m.lists.push_back(list("a", DnsAction::kNxdomain, {"||example.com^", "@@||cdn.example.com^"}));
  m.lists.push_back(list("b", DnsAction::kRefuse, {"||img.cdn.example.com^"}));
  auto c = compileDns(m, nullptr);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE((*c)->lookupName("www.example.com").blocked());
  EXPECT_FALSE((*c)->lookupName("cdn.example.com").blocked());
  EXPECT_FALSE((*c)->lookupName("img.cdn.example.com").blocked());  // allow wins over list b
}

TEST(CompiledDnsTest, RpzActionsPerEntry) {
  DnsModel m;
  m.lists.push_back(list("rpz", DnsAction::kNxdomain,
                         {"nx.example CNAME .", "*.nx.example CNAME *.", "d.example CNAME rpz-drop."},
                         DnsListFormat::kRpz));
  auto c = compileDns(m, nullptr);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->lookupName("nx.example").action, DnsAction::kNxdomain);
  EXPECT_EQ((*c)->lookupName("a.nx.example").action, DnsAction::kNodata);
  EXPECT_EQ((*c)->lookupName("d.example").action, DnsAction::kDrop);
}

std::string writeTemp(const std::string& content) {
  char path[] = "/tmp/dns_list_XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
  close(fd);
  return path;
}

TEST(CompiledDnsTest, BadLinePolicy) {
  std::string path = writeTemp("good.example\nbad..example\nalso good.example\nfine.example\n");
  DnsModel m;
  DnsListModel l = list("f", DnsAction::kNxdomain, {}, DnsListFormat::kPlain);
  l.files = {path};
  m.lists.push_back(l);
  ConfigErrorList errs;
  auto c = compileDns(m, nullptr, &errs);
  ASSERT_FALSE(c.ok());
  ASSERT_EQ(errs.size(), 2u);
  EXPECT_EQ(errs[0].line, 2);
  EXPECT_EQ(errs[0].file, path);
  EXPECT_EQ(errs[0].field, "dns.lists[0].files[0]");
  EXPECT_EQ(errs[1].line, 3);
  std::string msg(c.status().message());
  EXPECT_NE(msg.find(path + ":2"), std::string::npos) << msg;

  m.lists[0].bad_lines = DnsBadLines::kSkip;
  auto s = compileDns(m, nullptr);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->lists[0]->skipped_lines, 2u);
  EXPECT_EQ((*s)->lists[0]->set.size(), 2u);
  ASSERT_FALSE((*s)->lists[0]->skipped_samples.empty());
  EXPECT_NE((*s)->lists[0]->skipped_samples[0].find(":2"), std::string::npos);
  unlink(path.c_str());
}

TEST(CompiledDnsTest, Validation) {
  DnsModel m;
  m.lists.push_back(list("dup", DnsAction::kNxdomain, {"a.example"}));
  m.lists.push_back(list("dup", DnsAction::kNxdomain, {"b.example"}));
  m.lists.push_back(list("bad name", DnsAction::kNxdomain, {"c.example"}));
  m.lists.push_back(list("empty", DnsAction::kNxdomain, {}));
  DnsListModel missing = list("missing", DnsAction::kNxdomain, {});
  missing.files = {"/nonexistent/list.txt"};
  m.lists.push_back(missing);
  m.extra_ports = {5353, 53, 5353};
  ConfigErrorList errs;
  auto c = compileDns(m, nullptr, &errs);
  ASSERT_FALSE(c.ok());
  std::string all;
  for (auto& e : errs) all += formatError(e) + "\n";
  EXPECT_NE(all.find("list name used twice"), std::string::npos) << all;
  EXPECT_NE(all.find("dns.lists[2].name"), std::string::npos) << all;
  EXPECT_NE(all.find("needs names or files"), std::string::npos) << all;
  EXPECT_NE(all.find("/nonexistent/list.txt"), std::string::npos) << all;
  EXPECT_NE(all.find("dns.extra_ports[1]"), std::string::npos) << all;
  EXPECT_NE(all.find("dns.extra_ports[2]"), std::string::npos) << all;
}

TEST(CompiledDnsTest, ReuseAndDelta) {
  std::string path = writeTemp("one.example\ntwo.example\n");
  DnsModel m;
  DnsListModel a = list("a", DnsAction::kNxdomain, {"x.example"}, DnsListFormat::kPlain);
  a.files = {path};
  m.lists.push_back(a);
  m.lists.push_back(list("b", DnsAction::kDrop, {"b.example"}));
  auto c1 = compileDns(m, nullptr);
  ASSERT_TRUE(c1.ok());
  // Unchanged: same pointers.
  auto c2 = compileDns(m, c1->get());
  ASSERT_TRUE(c2.ok());
  EXPECT_EQ((*c2)->lists[0].get(), (*c1)->lists[0].get());
  EXPECT_EQ((*c2)->lists[1].get(), (*c1)->lists[1].get());
  // Appended names and a removal: list a patched (not re-read), b shared.
  unlink(path.c_str());  // a re-read would now fail
  m.lists[0].names.push_back("y.example");
  m.lists[0].removed.push_back("one.example");
  auto c3 = compileDns(m, c2->get());
  ASSERT_TRUE(c3.ok()) << c3.status();
  EXPECT_TRUE((*c3)->lists[0]->incremental);
  EXPECT_EQ((*c3)->lists[1].get(), (*c1)->lists[1].get());
  EXPECT_TRUE((*c3)->lookupName("y.example").blocked());
  EXPECT_TRUE((*c3)->lookupName("two.example").blocked());
  EXPECT_FALSE((*c3)->lookupName("one.example").blocked());
  // Adding a removed name again keeps it removed ((files + names) - removed).
  m.lists[0].names.push_back("one.example");
  auto c4 = compileDns(m, c3->get());
  ASSERT_TRUE(c4.ok()) << c4.status();
  EXPECT_FALSE((*c4)->lookupName("one.example").blocked());
  // The old snapshot is untouched.
  EXPECT_FALSE((*c1)->lookupName("y.example").blocked());
  EXPECT_TRUE((*c1)->lookupName("one.example").blocked());
  // Anything else: the list is built again (here: the file is gone -> error with its name).
  m.lists[0].format = DnsListFormat::kAuto;
  auto c5 = compileDns(m, c4->get());
  ASSERT_FALSE(c5.ok());
  EXPECT_NE(std::string(c5.status().message()).find(path), std::string::npos);
}

// Real lists (../shared/data/dns, see its MANIFEST.tsv): the counts agree with INDEX.tsv.
std::string dataPath(const char* rel) { return std::string(DPU_DNS_DATA_DIR) + "/" + rel; }

TEST(RealLists, OneHostsMiniInFourFormats) {
  struct Case { const char* file; DnsListFormat f; size_t unique; };
  const Case cases[] = {
      // INDEX.tsv counts 65811 hosts entries including 5 localhost-style names (localhost,
      // local, broadcasthost, ip6-*), which are not entries here: 65806, the same names as
      // the list's plain-domains version.
      {"badmojr+1Hosts/mini/hosts.txt", DnsListFormat::kHosts, 65806},
      {"badmojr+1Hosts/mini/domains.txt", DnsListFormat::kPlain, 65806},
      {"badmojr+1Hosts/mini/adblock.txt", DnsListFormat::kAdblock, 51280},
      {"badmojr+1Hosts/mini/wildcards.txt", DnsListFormat::kWildcard, 51280},
      {"badmojr+1Hosts/mini/dnsmasq.conf", DnsListFormat::kDnsmasq, 51280},
      {"badmojr+1Hosts/mini/adblock.txt", DnsListFormat::kAuto, 51280},
  };
  for (const Case& k : cases) {
    std::string path = dataPath(k.file);
    ASSERT_EQ(access(path.c_str(), R_OK), 0) << path << " missing (../shared/data/dns)";
    DnsModel m;
    DnsListModel l = list("real", DnsAction::kNxdomain, {}, k.f);
    l.files = {path};
    m.lists.push_back(l);
    ConfigErrorList errs;
    auto c = compileDns(m, nullptr, &errs);
    ASSERT_TRUE(c.ok()) << k.file << ": " << c.status();
    EXPECT_EQ((*c)->lists[0]->set.size(), k.unique) << k.file;
  }
  // Adblock semantics: a blocked name and its subdomains; the wildcard form: subdomains only.
  DnsModel m;
  DnsListModel ab = list("adblock", DnsAction::kNxdomain, {}, DnsListFormat::kAdblock);
  ab.files = {dataPath("badmojr+1Hosts/mini/adblock.txt")};
  DnsListModel wc = list("wild", DnsAction::kRefuse, {}, DnsListFormat::kWildcard);
  wc.files = {dataPath("badmojr+1Hosts/mini/wildcards.txt")};
  m.lists = {ab, wc};
  auto c = compileDns(m, nullptr);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->lookupName("marketing.globalpointofcare.abbott").list, 0);
  EXPECT_EQ((*c)->lookupName("x.marketing.globalpointofcare.abbott").list, 0);
  EXPECT_EQ((*c)->lookupName("globalpointofcare.abbott").list, -1);
  EXPECT_EQ((*c)->lookupName("www.example.com").list, -1);
}

TEST(RealLists, HageziRpz) {
  std::string path = dataPath("hagezi+dns-blocklists/rpz/native.apple.txt");
  ASSERT_EQ(access(path.c_str(), R_OK), 0) << path << " missing (../shared/data/dns)";
  DnsModel m;
  DnsListModel l = list("apple", DnsAction::kNxdomain, {}, DnsListFormat::kRpz);
  l.files = {path};
  m.lists.push_back(l);
  auto c = compileDns(m, nullptr);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->lists[0]->set.size(), 108u);  // 216 records: each name and "*.name"
  EXPECT_EQ((*c)->lookupName("marketing.services.apple").action, DnsAction::kNxdomain);
  EXPECT_EQ((*c)->lookupName("a.b.marketing.services.apple").action, DnsAction::kNxdomain);
  EXPECT_EQ((*c)->lookupName("services.apple").list, -1);
}

}  // namespace
}  // namespace dpu::rules
