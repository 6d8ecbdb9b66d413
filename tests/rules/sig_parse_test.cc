// Suricata-format rule parser (rules/compile/sig_parse.h): header, options, refusals.
#include "rules/compile/sig_parse.h"

#include <gtest/gtest.h>

#include <cstring>

#include "tests/rules/sig_test_util.h"

using namespace dpu::rules;

namespace {

using test::v4;
using test::v6;

Signature parse(const std::string& r, const SigVars& vars = sigDefaultVars()) {
  auto s = parseSignature(r, vars);
  EXPECT_TRUE(s.ok()) << r << ": " << s.status();
  return s.ok() ? *s : Signature{};
}
std::string refusal(const std::string& r) {
  auto s = parseSignature(r, sigDefaultVars());
  EXPECT_FALSE(s.ok()) << r;
  return s.ok() ? "" : std::string(s.status().message());
}

TEST(SigParse, HeaderAddressesPortsAndVariables) {
  Signature g = parse(
      "alert tcp $HOME_NET any -> $EXTERNAL_NET [80,443,8000:8100,!8080] (msg:\"m\"; sid:1; rev:3;)");
  EXPECT_EQ(g.action, SigAction::kAlert);
  EXPECT_EQ(g.proto, SigProto::kTcp);
  EXPECT_EQ(g.sid, 1u);
  EXPECT_EQ(g.rev, 3u);
  EXPECT_EQ(g.msg, "m");
  EXPECT_TRUE(g.src.contains(v4("10.1.2.3")));
  EXPECT_TRUE(g.src.contains(v4("192.168.9.9")));
  EXPECT_FALSE(g.src.contains(v4("8.8.8.8")));
  EXPECT_FALSE(g.src.contains(v6("2001:db8::1")));
  EXPECT_TRUE(g.dst.contains(v4("8.8.8.8")));
  EXPECT_TRUE(g.dst.contains(v6("2001:db8::1")));  // !$HOME_NET: everything else, IPv6 too
  EXPECT_FALSE(g.dst.contains(v4("172.16.0.1")));
  EXPECT_TRUE(g.sport.any);
  for (uint16_t p : {80, 443, 8000, 8050, 8100}) EXPECT_TRUE(g.dport.contains(p)) << p;
  for (uint16_t p : {81, 7999, 8080, 8101}) EXPECT_FALSE(g.dport.contains(p)) << p;
  EXPECT_FALSE(g.bidirectional);

  Signature b = parse("drop udp [10.0.0.0/8,!10.1.0.0/16] 1024: <> ![1.2.3.4,5.6.7.0/24] :1023 (sid:2;)");
  EXPECT_EQ(b.action, SigAction::kDrop);
  EXPECT_TRUE(b.bidirectional);
  EXPECT_TRUE(b.src.contains(v4("10.2.0.1")));
  EXPECT_FALSE(b.src.contains(v4("10.1.0.1")));
  EXPECT_FALSE(b.dst.contains(v4("5.6.7.99")));
  EXPECT_TRUE(b.dst.contains(v4("5.6.8.1")));
  EXPECT_TRUE(b.sport.contains(65535));
  EXPECT_FALSE(b.sport.contains(1023));
  EXPECT_TRUE(b.dport.contains(0));
  EXPECT_FALSE(b.dport.contains(1024));

  SigVars vars = sigDefaultVars();
  vars.addresses.emplace_back("HOME_NET", "[192.0.2.0/24]");
  vars.ports.emplace_back("HTTP_PORTS", "[80,8080]");
  Signature c = parse("alert http $EXTERNAL_NET any -> $HOME_NET $HTTP_PORTS (sid:3;)", vars);
  EXPECT_TRUE(c.dst.contains(v4("192.0.2.7")));
  EXPECT_FALSE(c.dst.contains(v4("10.0.0.1")));
  EXPECT_TRUE(c.src.contains(v4("10.0.0.1")));  // EXTERNAL_NET follows the new HOME_NET
  EXPECT_TRUE(c.dport.contains(8080));
  EXPECT_EQ(c.proto, SigProto::kHttp);

  Signature d = parse("pass ip 2001:db8::/32 any -> 192.0.2.1-192.0.2.9 any (sid:4;)");
  EXPECT_EQ(d.action, SigAction::kPass);
  EXPECT_TRUE(d.src.contains(v6("2001:db8:ffff::1")));
  EXPECT_FALSE(d.src.contains(v6("2001:db9::1")));
  EXPECT_TRUE(d.dst.contains(v4("192.0.2.9")));
  EXPECT_FALSE(d.dst.contains(v4("192.0.2.10")));
}

TEST(SigParse, HeaderRefusals) {
  EXPECT_NE(refusal("alert smtp any any -> any any (sid:1;)").find("protocol `smtp` not supported"), std::string::npos);
  EXPECT_NE(refusal("log tcp any any -> any any (sid:1;)").find("action `log`"), std::string::npos);
  EXPECT_NE(refusal("alert tcp $NOPE any -> any any (sid:1;)").find("`$NOPE` is not defined"), std::string::npos);
  EXPECT_NE(refusal("alert tcp any any <- any any (sid:1;)").find("direction"), std::string::npos);
  EXPECT_NE(refusal("alert tcp any 70000 -> any any (sid:1;)").find("bad port"), std::string::npos);
  EXPECT_NE(refusal("alert tcp [1.2.3.4,!1.2.3.4] any -> any any (sid:1;)").find("matches nothing"), std::string::npos);
  EXPECT_NE(refusal("alert tcp any any -> any any (msg:\"x\";)").find("no sid"), std::string::npos);
  EXPECT_NE(refusal("alert tcp any any -> any (sid:1;)").find("6 fields"), std::string::npos);
  SigVars loop = sigDefaultVars();
  loop.addresses.emplace_back("A", "$B");
  loop.addresses.emplace_back("B", "$A");
  EXPECT_FALSE(parseSignature("alert tcp $A any -> any any (sid:1;)", loop).ok());
}

TEST(SigParse, ContentAndModifiers) {
  Signature g = parse(
      "alert tcp any any -> any any (content:\"GET |2f 41|b\\;c\\\"d\"; nocase; offset:2; depth:10; "
      "content:!\"x\"; distance:1; within:5; content:\"end\"; endswith; fast_pattern; sid:7;)");
  ASSERT_EQ(g.buffers.size(), 1u);
  EXPECT_EQ(g.buffers[0].buffer, SigBuffer::kPayload);
  const auto& it = g.buffers[0].items;
  ASSERT_EQ(it.size(), 3u);
  EXPECT_EQ(it[0].bytes, "GET /Ab;c\"d");
  EXPECT_TRUE(it[0].nocase);
  EXPECT_TRUE(it[0].has_offset && it[0].has_depth);
  EXPECT_EQ(it[0].offset, 2);
  EXPECT_EQ(it[0].depth, 10);
  EXPECT_TRUE(it[1].negated);
  EXPECT_TRUE(it[1].has_distance && it[1].has_within);
  EXPECT_TRUE(it[2].endswith && it[2].fast_pattern);
  EXPECT_NE(refusal("alert tcp any any -> any any (nocase; sid:1;)").find("without a content"), std::string::npos);
  EXPECT_NE(refusal("alert tcp any any -> any any (content:\"|4|\"; sid:1;)").find("hex"), std::string::npos);
  EXPECT_NE(refusal("alert tcp any any -> any any (content:\"a\"; depth:0; sid:1;)").find("depth"), std::string::npos);
  EXPECT_NE(refusal("alert tcp any any -> any any (content:\"a\" sid:1;)").find("content must be quoted"), std::string::npos);
  EXPECT_NE(refusal("alert tcp any any -> any any (content:\"a\"; sid:1)").find("not terminated"), std::string::npos);
}

TEST(SigParse, StickyBuffersLegacyModifiersAndTransforms) {
  Signature g = parse(
      "alert http any any -> any any (flow:established,to_server; content:\"x\"; http_cookie; "
      "http.method; content:\"POST\"; http.uri; content:\"/a.php\"; startswith; bsize:6; fast_pattern; "
      "dns.query; dotprefix; content:\".evil.com\"; endswith; sid:9;)");
  EXPECT_TRUE(g.to_server && g.established);
  ASSERT_EQ(g.buffers.size(), 4u);
  EXPECT_EQ(g.buffers[0].buffer, SigBuffer::kHttpCookie);  // "x" moved by http_cookie
  EXPECT_EQ(g.buffers[1].buffer, SigBuffer::kHttpMethod);
  EXPECT_EQ(g.buffers[2].buffer, SigBuffer::kHttpUri);
  // bsize first (a length check), the content before it keeps taking modifiers
  ASSERT_EQ(g.buffers[2].items.size(), 2u);
  EXPECT_EQ(g.buffers[2].items[0].kind, SigItem::kBsize);
  EXPECT_TRUE(g.buffers[2].items[1].startswith && g.buffers[2].items[1].fast_pattern);
  EXPECT_EQ(g.buffers[3].buffer, SigBuffer::kDnsQuery);
  ASSERT_EQ(g.buffers[3].transforms.size(), 1u);
  EXPECT_EQ(g.buffers[3].transforms[0], SigTransform::kDotPrefix);

  Signature l = parse("alert tcp any any -> any 80 (content:\"/cgi\"; http_uri; content:\"Host\"; http_header; sid:10;)");
  ASSERT_EQ(l.buffers.size(), 2u);  // the empty payload list left by the moves is dropped
  EXPECT_EQ(l.buffers[0].buffer, SigBuffer::kHttpUri);
  EXPECT_EQ(l.buffers[1].buffer, SigBuffer::kHttpHeader);
  EXPECT_NE(refusal("alert tcp any any -> any any (http.uri; content:\"a\"; http_header; sid:1;)").find("already in http.uri"),
            std::string::npos);
  EXPECT_NE(refusal("alert tcp any any -> any any (to_lowercase; content:\"a\"; sid:1;)").find("outside a sticky buffer"),
            std::string::npos);
}

TEST(SigParse, PcreKeepsItsEscapes) {
  Signature g = parse("alert tcp any any -> any any (content:\"a\"; pcre:\"/^\\d{2}\\x2f[a-z]\\;/Ri\"; sid:11;)");
  ASSERT_EQ(g.buffers[0].items.size(), 2u);
  const SigItem& p = g.buffers[0].items[1];
  EXPECT_EQ(p.kind, SigItem::kPcre);
  EXPECT_EQ(p.pcre, "^\\d{2}\\x2f[a-z]\\;");
  EXPECT_TRUE(p.relative);
  Signature u = parse("alert http any any -> any any (pcre:\"/\\.exe$/U\"; sid:12;)");
  ASSERT_EQ(u.buffers.size(), 1u);
  EXPECT_EQ(u.buffers[0].buffer, SigBuffer::kHttpUri);
  EXPECT_NE(refusal("alert tcp any any -> any any (pcre:\"/a(/\"; sid:1;)").find("does not compile"), std::string::npos);
  EXPECT_NE(refusal("alert tcp any any -> any any (pcre:\"/a/q\"; sid:1;)").find("flag 'q'"), std::string::npos);
}

TEST(SigParse, ByteKeywordsFlowbitsThresholds) {
  Signature g = parse(
      "alert tcp any any -> any any (content:\"|00|\"; byte_extract:2,0,len,relative,little; "
      "byte_test:2,>,len,0,relative; byte_jump:4,0,relative,multiplier 2,post_offset -1,big; "
      "byte_test:0,>,1000,0,string,dec; isdataat:!10,relative; dsize:<300; "
      "flowbits:set,a; flowbits:isset,b|c; flowbits:noalert; "
      "threshold:type limit, track by_src, count 2, seconds 60; sid:13;)");
  const auto& it = g.buffers[0].items;
  ASSERT_EQ(it.size(), 6u);
  EXPECT_EQ(it[1].kind, SigItem::kByteExtract);
  EXPECT_EQ(it[1].var, 0);
  EXPECT_FALSE(it[1].read.big_endian);
  EXPECT_EQ(it[2].kind, SigItem::kByteTest);
  EXPECT_EQ(it[2].cmp_var, 0);
  EXPECT_EQ(it[2].op, '>');
  EXPECT_EQ(it[3].multiplier, 2);
  EXPECT_EQ(it[3].post_offset, -1);
  EXPECT_EQ(it[4].read.nbytes, 0);  // string digits to the end of the buffer
  EXPECT_TRUE(it[5].negated && it[5].relative);
  EXPECT_TRUE(g.has_dsize);
  EXPECT_EQ(g.dsize_hi, 299u);
  ASSERT_EQ(g.flowbits.size(), 2u);
  EXPECT_EQ(g.flowbits[1].names.size(), 2u);
  EXPECT_FALSE(g.flowbits[1].all);
  EXPECT_TRUE(g.noalert);
  EXPECT_EQ(g.threshold.type, SigThreshold::kLimit);
  EXPECT_EQ(g.threshold.count, 2u);
  EXPECT_NE(refusal("alert tcp any any -> any any (byte_test:2,~,1,0; sid:1;)").find("bad operator"), std::string::npos);
  EXPECT_NE(refusal("alert tcp any any -> any any (byte_test:2,=,nope,0; sid:1;)").find("bad value"), std::string::npos);
  EXPECT_NE(refusal("alert tcp any any -> any any (threshold:type limit, count 1, seconds 1; sid:1;)").find("needs track"),
            std::string::npos);
  EXPECT_NE(refusal("alert tcp any any -> any any (flowbits:set,a|b; sid:1;)").find("one name"), std::string::npos);
}

TEST(SigParse, FilesContinuationsCommentsAndRefusalsWithLines) {
  const std::string text =
      "# a comment\n"
      "\n"
      "alert tcp any any -> any any (msg:\"one\"; \\\n"
      "    content:\"a\"; sid:100; classtype:trojan-activity;)\n"
      "# alert tcp any any -> any any (msg:\"disabled\"; sid:101;)\n"
      "alert tcp any any -> any any (msg:\"bad\"; tls.certs; content:\"x\"; sid:102;)\r\n"
      "alert tcp any any -> any any (msg:\"no end\"; sid:103;\n";
  SigClassification cls;
  cls.classes["trojan-activity"] = {"A Network Trojan was detected", 1};
  SigParseResult r;
  parseSignatures(text, "t.rules", sigDefaultVars(), &cls, r);
  ASSERT_EQ(r.rules.size(), 1u);
  EXPECT_EQ(r.rules[0].sid, 100u);
  EXPECT_EQ(r.rules[0].line, 3u);
  EXPECT_EQ(r.rules[0].priority, 1);
  EXPECT_EQ(r.rules[0].source, "t.rules");
  EXPECT_EQ(r.commented, 1u);
  ASSERT_EQ(r.refused.size(), 2u);
  EXPECT_EQ(r.refused[0].sid, 102u);
  EXPECT_EQ(r.refused[0].line, 6u);
  EXPECT_NE(r.refused[0].reason.find("tls.certs"), std::string::npos);
  EXPECT_EQ(r.refused[1].sid, 103u);
  EXPECT_EQ(r.refused[1].line, 7u);
}

TEST(SigParse, Classification) {
  auto c = parseClassification(
      "# c\nconfig classification: not-suspicious,Not Suspicious Traffic,3\n"
      "config classification: trojan-activity,A Network Trojan was detected,1\n",
      "classification.config");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->classes.size(), 2u);
  EXPECT_EQ(c->classes.at("trojan-activity").second, 1);
  EXPECT_FALSE(parseClassification("config classification: x,y\n", "c").ok());
}

}  // namespace
