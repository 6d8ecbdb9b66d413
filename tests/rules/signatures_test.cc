// Compiled Suricata-format signatures (rules/compiled/signatures.h): prefilter + confirmation
// on the semantics of Suricata's content inspection, flow, flowbits and thresholds.
#include "rules/compiled/signatures.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "tests/rules/sig_test_util.h"

using namespace dpu::rules;

namespace {

using test::v4;

struct Engine {
  std::shared_ptr<const CompiledSignatures> c;
  SigScratchPtr s;
  explicit Engine(const std::string& rules) {
    auto r = compileSignatures({{"t.rules", rules}}, {});
    EXPECT_TRUE(r.ok()) << r.status();
    c = *r;
    for (const auto& f : c->refused) ADD_FAILURE() << "refused sid " << f.sid << ": " << f.reason;
    auto sc = c->makeScratch();
    EXPECT_TRUE(sc.ok());
    s = std::move(*sc);
  }
  // sids that matched (alerting or not)
  std::set<uint32_t> run(const std::string& payload, SigFlowState* fs = nullptr, bool to_server = true,
                         uint8_t proto = 6, uint16_t sport = 40000, uint16_t dport = 80,
                         bool established = true, uint64_t now = 0, std::set<uint32_t>* alerted = nullptr) {
    SigInput in;
    in.set(SigBuffer::kPayload, reinterpret_cast<const uint8_t*>(payload.data()), uint32_t(payload.size()));
    in.src = v4(to_server ? "10.0.0.1" : "198.51.100.1");
    in.dst = v4(to_server ? "198.51.100.1" : "10.0.0.1");
    in.sport = to_server ? sport : dport;
    in.dport = to_server ? dport : sport;
    in.ip_proto = proto;
    in.to_server = to_server;
    in.established = established;
    in.dsize = uint32_t(payload.size());
    in.now_ns = now;
    SigHit hits[64];
    uint32_t n = c->evaluate(in, fs, *s, hits, 64);
    std::set<uint32_t> out;
    for (uint32_t k = 0; k < n; ++k) {
      out.insert(c->rules[hits[k].rule].sig.sid);
      if (alerted && hits[k].alert) alerted->insert(c->rules[hits[k].rule].sig.sid);
    }
    return out;
  }
  bool hit(uint32_t sid, const std::string& p) { return run(p).count(sid) != 0; }
};

TEST(Signatures, ContentPositions) {
  Engine e(
      "alert tcp any any -> any any (content:\"abc\"; offset:2; depth:5; sid:1;)\n"
      "alert tcp any any -> any any (content:\"GET\"; startswith; sid:2;)\n"
      "alert tcp any any -> any any (content:\".exe\"; endswith; sid:3;)\n"
      "alert tcp any any -> any any (content:\"AbC\"; nocase; sid:4;)\n"
      "alert tcp any any -> any any (content:\"|de ad|\"; sid:5;)\n");
  EXPECT_TRUE(e.hit(1, "xxabcyy"));
  EXPECT_TRUE(e.hit(1, "xxxxabc"));     // offset 2 + depth 5: ends at 7
  EXPECT_FALSE(e.hit(1, "xxxxxabc"));   // ends at 8
  EXPECT_FALSE(e.hit(1, "xabc"));       // starts before offset 2
  EXPECT_TRUE(e.hit(2, "GET / HTTP/1.1"));
  EXPECT_FALSE(e.hit(2, " GET /"));
  EXPECT_TRUE(e.hit(3, "a.exe.exe"));
  EXPECT_FALSE(e.hit(3, "a.exe "));
  EXPECT_TRUE(e.hit(4, "zzabczz"));
  EXPECT_TRUE(e.hit(5, std::string("\x01\xde\xad", 3)));
  EXPECT_FALSE(e.hit(5, std::string("\x01\xde\xae", 3)));
}

TEST(Signatures, RelativeChainsSearchEarlierContentsAgain) {
  Engine e(
      // "b" within 2 bytes after an "a": the first "a" fails, the second one matches.
      "alert tcp any any -> any any (content:\"a\"; content:\"b\"; distance:0; within:2; sid:1;)\n"
      "alert tcp any any -> any any (content:\"x\"; content:!\"y\"; distance:0; within:3; sid:2;)\n"
      "alert tcp any any -> any any (content:\"k\"; content:\"m\"; distance:2; sid:3;)\n"
      "alert tcp any any -> any any (content:\"p\"; pcre:\"/^[0-9]{3}/R\"; sid:4;)\n"
      "alert tcp any any -> any any (content:\"q\"; isdataat:3,relative; sid:5;)\n"
      "alert tcp any any -> any any (content:\"r\"; isdataat:!1,relative; sid:6;)\n");
  EXPECT_TRUE(e.hit(1, "a....ab"));
  EXPECT_TRUE(e.hit(1, "a.b"));
  EXPECT_FALSE(e.hit(1, "a..b"));
  EXPECT_TRUE(e.hit(2, "x...y"));
  EXPECT_FALSE(e.hit(2, "x..y"));
  EXPECT_TRUE(e.hit(2, "x..yx"));  // the second "x" has no "y" after it
  EXPECT_TRUE(e.hit(3, "k..m"));
  EXPECT_FALSE(e.hit(3, "k.m"));
  EXPECT_TRUE(e.hit(4, "p12 p345"));  // the second "p" is followed by 3 digits
  EXPECT_FALSE(e.hit(4, "p12 p3"));
  EXPECT_TRUE(e.hit(5, "q123"));
  EXPECT_FALSE(e.hit(5, "q12"));
  EXPECT_TRUE(e.hit(6, "xxr"));
  EXPECT_FALSE(e.hit(6, "xxr!"));
}

TEST(Signatures, ByteKeywords) {
  Engine e(
      "alert tcp any any -> any any (content:\"L\"; byte_test:2,>,0x100,0,relative; sid:1;)\n"
      "alert tcp any any -> any any (content:\"J\"; byte_jump:1,0,relative; content:\"Z\"; within:1; sid:2;)\n"
      "alert tcp any any -> any any (content:\"E\"; byte_extract:1,0,n,relative; content:\"Q\"; distance:n; within:1; sid:3;)\n"
      "alert tcp any any -> any any (content:\"S\"; byte_test:3,=,123,0,relative,string,dec; sid:4;)\n"
      "alert tcp any any -> any any (content:\"T\"; byte_test:2,&,0x8000,0,relative,little; sid:5;)\n");
  EXPECT_TRUE(e.hit(1, std::string("L\x01\x01", 3)));
  EXPECT_FALSE(e.hit(1, std::string("L\x01\x00", 3)));
  EXPECT_FALSE(e.hit(1, std::string("L\x01", 2)));  // not enough bytes
  EXPECT_TRUE(e.hit(2, std::string("J\x02..Z", 5)));
  EXPECT_FALSE(e.hit(2, std::string("J\x01..Z", 5)));
  EXPECT_TRUE(e.hit(3, std::string("E\x03...Q", 6)));
  EXPECT_FALSE(e.hit(3, std::string("E\x02...Q", 6)));
  EXPECT_TRUE(e.hit(4, "S123"));
  EXPECT_FALSE(e.hit(4, "S124"));
  EXPECT_TRUE(e.hit(5, std::string("T\x00\x80", 3)));
  EXPECT_FALSE(e.hit(5, std::string("T\x80\x00", 3)));
}

TEST(Signatures, HeaderFlowAndDsize) {
  Engine e(
      "alert tcp $HOME_NET any -> $EXTERNAL_NET 80 (content:\"a\"; flow:established,to_server; sid:1;)\n"
      "alert tcp any 80 -> any any (content:\"a\"; flow:to_client; sid:2;)\n"
      "alert udp any any -> any 53 (content:\"a\"; sid:3;)\n"
      "alert tcp any any <> any 80 (content:\"a\"; sid:4;)\n"
      "alert ip any any -> any any (dsize:>5; content:\"a\"; sid:5;)\n"
      "alert tcp any any -> any any (flow:not_established; content:\"a\"; sid:6;)\n");
  auto srv = e.run("a");
  EXPECT_TRUE(srv.count(1));
  EXPECT_FALSE(srv.count(2));
  EXPECT_FALSE(srv.count(3));
  EXPECT_TRUE(srv.count(4));
  EXPECT_FALSE(srv.count(5));
  EXPECT_FALSE(srv.count(6));
  auto cli = e.run("aaaaaa", nullptr, false);
  EXPECT_FALSE(cli.count(1));
  EXPECT_TRUE(cli.count(2));
  EXPECT_TRUE(cli.count(4));  // <>: the reply direction too
  EXPECT_TRUE(cli.count(5));
  auto udp = e.run("a", nullptr, true, 17, 5353, 53);
  EXPECT_TRUE(udp.count(3));
  EXPECT_FALSE(udp.count(1));
  EXPECT_TRUE(e.run("a", nullptr, true, 6, 1, 80, false).count(6));
}

TEST(Signatures, FlowbitsAcrossPacketsAndSettersFirst) {
  Engine e(
      // the checker is written before the setter: setters are evaluated first
      "alert tcp any any -> any any (flow:to_client; content:\"200\"; flowbits:isset,login; sid:2;)\n"
      "alert tcp any any -> any any (flow:to_server; content:\"LOGIN\"; flowbits:set,login; flowbits:noalert; sid:1;)\n"
      "alert tcp any any -> any any (content:\"LOGOUT\"; flowbits:unset,login; sid:3;)\n"
      "alert tcp any any -> any any (content:\"200\"; flowbits:isnotset,login; sid:4;)\n");
  SigFlowState fs;
  EXPECT_EQ(e.run("200 OK", &fs, false), std::set<uint32_t>{4});
  std::set<uint32_t> alerted;
  EXPECT_TRUE(e.run("LOGIN x", &fs, true, 6, 40000, 80, true, 0, &alerted).count(1));
  EXPECT_TRUE(alerted.empty());  // noalert
  EXPECT_EQ(e.run("200 OK", &fs, false), std::set<uint32_t>{2});
  e.run("LOGOUT", &fs);
  EXPECT_EQ(e.run("200 OK", &fs, false), std::set<uint32_t>{4});
  // one packet both sets and checks (setter first)
  Engine same(
      "alert tcp any any -> any any (content:\"Y\"; flowbits:isset,b; sid:2;)\n"
      "alert tcp any any -> any any (content:\"X\"; flowbits:set,b; sid:1;)\n");
  SigFlowState f2;
  EXPECT_EQ(same.run("XY", &f2), (std::set<uint32_t>{1, 2}));
}

TEST(Signatures, Thresholds) {
  Engine e(
      "alert tcp any any -> any any (content:\"L\"; threshold:type limit, track by_src, count 2, seconds 10; sid:1;)\n"
      "alert tcp any any -> any any (content:\"T\"; threshold:type threshold, track by_src, count 3, seconds 10; sid:2;)\n"
      "alert tcp any any -> any any (content:\"D\"; detection_filter:track by_dst, count 2, seconds 10; sid:3;)\n");
  auto count = [&](const char* p, uint32_t sid, int n, uint64_t t0 = 0) {
    int a = 0;
    for (int i = 0; i < n; ++i) {
      std::set<uint32_t> al;
      e.run(p, nullptr, true, 6, 40000, 80, true, t0 + uint64_t(i) * 1000000ull, &al);
      a += int(al.count(sid));
    }
    return a;
  };
  EXPECT_EQ(count("L", 1, 5), 2);
  EXPECT_EQ(count("L", 1, 5, 20000000000ull), 2);  // a new window
  EXPECT_EQ(count("T", 2, 7), 2);                  // the 3rd and the 6th
  EXPECT_EQ(count("D", 3, 5), 3);                  // after the first 2
}

TEST(Signatures, TransformsAndPrefilterCandidates) {
  // No fast pattern (byte keywords only): a candidate on every packet; a fast pattern:
  // candidates only where it occurs.
  Engine e(
      "alert tcp any any -> any any (content:\"needle\"; sid:1;)\n"
      "alert tcp any any -> any any (dsize:3; sid:2;)\n");
  e.s->candidates = 0;
  e.run("haystack without it");
  EXPECT_EQ(e.s->candidates, 1u);  // sid 2 only
  EXPECT_TRUE(e.hit(1, "a needle here"));
  EXPECT_TRUE(e.hit(2, "abc"));
  EXPECT_EQ(e.c->patterns, 1u);
}

TEST(Signatures, RefusalsNameSidLineAndReason) {
  auto r = compileSignatures({{"x.rules",
                               "alert tcp any any -> any any (content:\"a\"; sid:1;)\n"
                               "alert tcp any any -> any any (content:\"b\"; sid:1;)\n"
                               "alert tls any any -> any any (tls.sni; content:\"/a\"; sid:2;)\n"
                               "alert tcp any any -> any any (content:\"a\"; http.uri; content:\"b\"; sid:3;)\n"}},
                             {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->rules.size(), 1u);
  ASSERT_EQ((*r)->refused.size(), 3u);
  EXPECT_EQ((*r)->refused[0].line, 2u);
  EXPECT_NE((*r)->refused[0].reason.find("duplicate signature id 1:1"), std::string::npos);
  EXPECT_EQ((*r)->refused[1].sid, 2u);
  EXPECT_NE((*r)->refused[1].reason.find("not inspected yet"), std::string::npos);
  EXPECT_EQ((*r)->refused[2].sid, 3u);
  EXPECT_NE((*r)->refused[2].reason.find("raw payload and application buffers"), std::string::npos);
}

}  // namespace
