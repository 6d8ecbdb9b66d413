// Explain's rule-stage steps (DNS -> DPI -> LB) on a snapshot compiled from a config
// document: what each step reports (the query name and the list entry that matched; the YARA
// rules matching the payload; the LB service, key fields with their bytes, hash and backend),
// that the verdict is the one the stage would give, and that a packet an earlier stage
// decided never reaches the later ones; a DNS block from or to a non-unicast host is not
// answered. No DPDK.
#include <gtest/gtest.h>
#include <google/protobuf/util/json_util.h>
#include <openssl/evp.h>

#include "control/config/config_loader.h"
#include "dataplane/api/control.h"
#include "rules/compiled/lb_hash.h"
#include "tests/util/dns_builder.h"
#include "tests/util/packet_builder.h"

namespace dpu::dp {
namespace {

using test::Frame;
using test::PacketBuilder;

// DNS: a block list (nxdomain, subdomains), an allow entry; DPI: alert / drop / reset rules;
// LB: service "web" on 192.0.2.10 tcp/80 hashed on ip.src and l4.sport, and "raw" on
// 192.0.2.20 with a payload key and fallback drop.
constexpr const char* kConfig = R"({
  "dns": {"lists": [
    {"name": "ads", "action": "DNS_NXDOMAIN", "match_subdomains": true,
     "names": ["ads.example", "metrics.example"]},
    {"name": "ok", "action": "DNS_ALLOW", "names": ["good.ads.example"]}]},
  "dpi": {"rule_sets": [{"name": "local", "text":
    "rule ua_alert : web { meta: author = \"soc\" strings: $a = \"EvilAgent\" condition: $a }\nrule exe_drop { meta: action = \"drop\" strings: $a = \"MZ-DROP-ME\" condition: $a }\nrule kill_reset { meta: action = \"reset\" strings: $a = \"KILL-FLOW\" condition: $a }\nrule tail_end { strings: $a = /TAIL$/ condition: $a }\n"}]},
  "lb": {"services": [
    {"id": "web", "dst": ["192.0.2.10"], "protocol": "tcp", "dst_ports": "80",
     "key": [{"field": "ip.src"}, {"field": "l4.sport"}],
     "backends": [{"id": "be1", "mac": "02:be:00:00:00:01"}, {"id": "be2", "mac": "02:be:00:00:00:02"},
                  {"id": "be3", "mac": "02:be:00:00:00:03"}]},
    {"id": "raw", "dst": ["192.0.2.20"], "protocol": "udp", "mode": "LB_MODE_NAT",
     "fallback": "LB_FALLBACK_DROP",
     "key": [{"field": "raw", "anchor": "payload", "offset": 0, "length": 4}],
     "backends": [{"id": "n1", "ipv4": "10.9.0.1", "port": 8080}]}]}
})";

// The snapshot a config document compiles to (owned by the caller).
void compileConfig(const char* json, rules::Snapshot** out) {
  v1::ApplianceConfig cfg;
  auto st = google::protobuf::util::JsonStringToMessage(json, &cfg);
  ASSERT_TRUE(st.ok()) << st.ToString();
  rules::ConfigErrorList errors;
  auto model = ctl::toModel(cfg, &errors);
  ASSERT_TRUE(model.ok()) << model.status();
  auto snap = rules::compileSnapshot(*model, 3, &errors);
  ASSERT_TRUE(snap.ok()) << snap.status();
  *out = std::move(*snap).release();
}

class ExplainStages : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { compileConfig(kConfig, &snap_); }
  static void TearDownTestSuite() { delete snap_; }

  static ExplainResult run(const Frame& f, uint8_t side = kSideA) {
    return explainPacket(*snap_, f.data(), static_cast<uint32_t>(f.size()), side);
  }
  static const ExplainStep* stepOf(const ExplainResult& r, Stage s) {
    for (const auto& st : r.steps) {
      if (st.stage == s) return &st;
    }
    return nullptr;
  }
  static Frame dnsFrame(const char* name) {
    return PacketBuilder().ipv4("10.0.0.1", "10.0.0.53").udp(40000, 53).payload(test::dnsQuery(name)).build();
  }
  static rules::Snapshot* snap_;
};
rules::Snapshot* ExplainStages::snap_ = nullptr;

TEST_F(ExplainStages, DnsBlockNamesTheListEntryAndStopsThere) {
  auto r = run(dnsFrame("www.ADS.example"));
  EXPECT_EQ(r.verdict.verdict, Verdict::kDrop);
  EXPECT_EQ(r.verdict.stage, Stage::kDns);
  EXPECT_EQ(r.verdict.reason, DropReason::kDnsAnswered);
  EXPECT_EQ(r.verdict.rule, 0u);  // list index of "ads"
  const ExplainStep* s = stepOf(r, Stage::kDns);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->decision, "drop");
  EXPECT_NE(s->detail.find("query for 'www.ads.example'"), std::string::npos) << s->detail;
  EXPECT_NE(s->detail.find("list 'ads', entry 'ads.example' and its subdomains"), std::string::npos)
      << s->detail;
  EXPECT_NE(s->detail.find("action nxdomain"), std::string::npos) << s->detail;
  // Decided at DNS: no DPI or LB step, no final forward step.
  EXPECT_EQ(stepOf(r, Stage::kDpi), nullptr);
  EXPECT_EQ(stepOf(r, Stage::kLb), nullptr);
  EXPECT_EQ(r.steps.back().stage, Stage::kDns);
}

TEST_F(ExplainStages, DnsBlockFromOrToANonUnicastHostIsNotAnswered) {
  const Frame frames[] = {
      PacketBuilder().ipv4("224.0.0.5", "10.0.0.53").udp(40000, 53).payload(test::dnsQuery("ads.example")).build(),
      PacketBuilder().eth(test::mac("02:00:00:00:00:0a"), test::mac("33:33:00:00:00:fb"))
          .ipv6("2001:db8::1", "ff02::fb").udp(40000, 53).payload(test::dnsQuery("ads.example")).build(),
  };
  for (const Frame& f : frames) {
    auto r = run(f);
    EXPECT_EQ(r.verdict.verdict, Verdict::kDrop);
    EXPECT_EQ(r.verdict.reason, DropReason::kDnsDropped);
    const ExplainStep* s = stepOf(r, Stage::kDns);
    ASSERT_NE(s, nullptr);
    EXPECT_NE(s->detail.find("no answer (a broadcast, multicast"), std::string::npos) << s->detail;
    EXPECT_EQ(s->detail.find("answer sent back"), std::string::npos) << s->detail;
  }
}

TEST_F(ExplainStages, DnsAllowAndUnlisted) {
  auto allow = run(dnsFrame("good.ads.example"));
  EXPECT_EQ(allow.verdict.verdict, Verdict::kForward);
  const ExplainStep* s = stepOf(allow, Stage::kDns);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->decision, "allow");
  EXPECT_NE(s->detail.find("list 'ok', entry 'good.ads.example' (the name itself)"), std::string::npos)
      << s->detail;
  auto none = run(dnsFrame("example.org"));
  EXPECT_EQ(none.verdict.verdict, Verdict::kForward);
  ASSERT_NE(stepOf(none, Stage::kDns), nullptr);
  EXPECT_EQ(stepOf(none, Stage::kDns)->decision, "pass");
  // Not DNS: the step says so.
  auto web = run(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(1000, 443, kTcpSyn).build());
  ASSERT_NE(stepOf(web, Stage::kDns), nullptr);
  EXPECT_EQ(stepOf(web, Stage::kDns)->decision, "skip");
}

TEST_F(ExplainStages, DnsOverTcpJudgesTheFirstMessage) {
  auto framed = [](std::vector<uint8_t> m) {
    std::vector<uint8_t> v = {uint8_t(m.size() >> 8), uint8_t(m.size())};
    v.insert(v.end(), m.begin(), m.end());
    return v;
  };
  auto r = run(PacketBuilder().ipv4("10.0.0.1", "10.0.0.53").tcp(40000, 53, kTcpAck | kTcpPsh)
                   .payload(framed(test::dnsQuery("x.metrics.example"))).build());
  EXPECT_EQ(r.verdict.verdict, Verdict::kDrop);
  EXPECT_EQ(r.verdict.reason, DropReason::kDnsAnswered);
  const ExplainStep* s = stepOf(r, Stage::kDns);
  ASSERT_NE(s, nullptr);
  EXPECT_NE(s->detail.find("TCP message"), std::string::npos) << s->detail;
  EXPECT_NE(s->detail.find("the server gets a RST"), std::string::npos) << s->detail;
  // Only the length prefix so far: read on with the next segment.
  auto part = run(PacketBuilder().ipv4("10.0.0.1", "10.0.0.53").tcp(40000, 53, kTcpAck | kTcpPsh)
                      .payload(std::vector<uint8_t>{0, 40, 0x12}).build());
  EXPECT_EQ(part.verdict.verdict, Verdict::kForward);
  ASSERT_NE(stepOf(part, Stage::kDns), nullptr);
  EXPECT_EQ(stepOf(part, Stage::kDns)->decision, "pass");
  // From the DNS port (a response over TCP): not inspected.
  auto resp = run(PacketBuilder().ipv4("10.0.0.53", "10.0.0.1").tcp(53, 40000, kTcpAck | kTcpPsh)
                      .payload(framed(test::dnsQuery("ads.example"))).build());
  ASSERT_NE(stepOf(resp, Stage::kDns), nullptr);
  EXPECT_EQ(stepOf(resp, Stage::kDns)->decision, "skip");
}

TEST_F(ExplainStages, DpiAlertDropAndReset) {
  auto alert = run(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(1000, 8080, kTcpAck | kTcpPsh)
                       .payload("GET / HTTP/1.1\r\nUser-Agent: EvilAgent\r\n\r\n").build());
  EXPECT_EQ(alert.verdict.verdict, Verdict::kForward);
  const ExplainStep* s = stepOf(alert, Stage::kDpi);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->decision, "alert");
  EXPECT_NE(s->detail.find("'local:ua_alert' (alert)"), std::string::npos) << s->detail;

  auto drop = run(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(5000, 6000).payload("xxMZ-DROP-MExx").build());
  EXPECT_EQ(drop.verdict.verdict, Verdict::kDrop);
  EXPECT_EQ(drop.verdict.stage, Stage::kDpi);
  EXPECT_EQ(drop.verdict.reason, DropReason::kDpiDrop);
  EXPECT_EQ(snap_->dpi->rules[drop.verdict.rule].name, "exe_drop");

  // Two rules in one payload: the strongest action (reset) decides, both are named.
  auto reset = run(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(1000, 8080, kTcpAck | kTcpPsh)
                       .payload("MZ-DROP-ME KILL-FLOW").build());
  EXPECT_EQ(reset.verdict.verdict, Verdict::kReject);
  EXPECT_EQ(reset.verdict.reason, DropReason::kDpiReset);
  EXPECT_EQ(snap_->dpi->rules[reset.verdict.rule].name, "kill_reset");
  s = stepOf(reset, Stage::kDpi);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->decision, "reset");
  EXPECT_NE(s->detail.find("local:exe_drop"), std::string::npos) << s->detail;
  EXPECT_NE(s->detail.find("RST sent to both ends"), std::string::npos) << s->detail;
  // Reset on UDP is a drop.
  auto udp_reset = run(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).payload("KILL-FLOW").build());
  EXPECT_EQ(udp_reset.verdict.verdict, Verdict::kDrop);
  EXPECT_EQ(udp_reset.verdict.reason, DropReason::kDpiDrop);
}

TEST_F(ExplainStages, DpiNoMatchAndStreamEnd) {
  auto clean = run(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(1000, 8080, kTcpAck)
                       .payload("nothing to see").build());
  ASSERT_NE(stepOf(clean, Stage::kDpi), nullptr);
  EXPECT_EQ(stepOf(clean, Stage::kDpi)->decision, "pass");
  EXPECT_NE(stepOf(clean, Stage::kDpi)->detail.find("14 of 14 bytes scanned"), std::string::npos)
      << stepOf(clean, Stage::kDpi)->detail;
  // `/TAIL$/` can only match where the stream ends: reported apart, the packet passes.
  auto tail = run(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(1000, 8080, kTcpAck).payload("xx TAIL").build());
  EXPECT_EQ(tail.verdict.verdict, Verdict::kForward);
  const ExplainStep* s = stepOf(tail, Stage::kDpi);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->decision, "pass");
  EXPECT_NE(s->detail.find("if the stream ended here"), std::string::npos) << s->detail;
  EXPECT_NE(s->detail.find("local:tail_end"), std::string::npos) << s->detail;
  // No payload: skipped.
  auto syn = run(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(1000, 8080, kTcpSyn).build());
  ASSERT_NE(stepOf(syn, Stage::kDpi), nullptr);
  EXPECT_EQ(stepOf(syn, Stage::kDpi)->decision, "skip");
}

TEST_F(ExplainStages, LbServiceKeyHashAndBackend) {
  auto r = run(PacketBuilder().ipv4("10.0.0.7", "192.0.2.10").tcp(40001, 80, kTcpSyn).build());
  EXPECT_EQ(r.verdict.verdict, Verdict::kForward);
  const ExplainStep* s = stepOf(r, Stage::kLb);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->decision, "balance");
  EXPECT_NE(s->detail.find("service 'web' (l2)"), std::string::npos) << s->detail;
  // ip.src is 16 bytes (IPv4 in the first 4), l4.sport 2 bytes: 40001 = 0x9c41.
  EXPECT_NE(s->detail.find("ip.src = 0a000007000000000000000000000000"), std::string::npos) << s->detail;
  EXPECT_NE(s->detail.find("l4.sport = 9c41"), std::string::npos) << s->detail;
  // The backend is what the compiled service itself picks for this hash.
  const rules::CompiledLbService& svc = *snap_->lb->services[0];
  ASSERT_NE(r.verdict.backend, kNoBackend);
  EXPECT_EQ(r.backend, svc.backends[r.verdict.backend].id);
  EXPECT_NE(s->detail.find("-> backend '" + r.backend + "'"), std::string::npos) << s->detail;
  EXPECT_NE(s->detail.find("destination MAC := 02:be:00:00:00:0"), std::string::npos) << s->detail;
  // Another source port may go elsewhere, but always where pick() says.
  for (uint16_t sport = 40000; sport < 40020; ++sport) {
    auto x = run(PacketBuilder().ipv4("10.0.0.7", "192.0.2.10").tcp(sport, 80, kTcpSyn).build());
    ASSERT_NE(x.verdict.backend, kNoBackend);
    uint8_t key[18] = {10, 0, 0, 7};
    key[16] = uint8_t(sport >> 8);
    key[17] = uint8_t(sport);
    EXPECT_EQ(x.verdict.backend, svc.pick(rules::lbHash64(key, sizeof(key), rules::kLbKeySeed)));
  }
  // Not for a service: passes unchanged.
  auto other = run(PacketBuilder().ipv4("10.0.0.7", "192.0.2.99").tcp(1, 80, kTcpSyn).build());
  ASSERT_NE(stepOf(other, Stage::kLb), nullptr);
  EXPECT_EQ(stepOf(other, Stage::kLb)->decision, "pass");
  EXPECT_EQ(other.verdict.backend, kNoBackend);
}

TEST_F(ExplainStages, LbNatAndMissingKeyWithFallbackDrop) {
  auto nat = run(PacketBuilder().ipv4("10.0.0.7", "192.0.2.20").udp(1, 9).payload("ABCDEF").build());
  const ExplainStep* s = stepOf(nat, Stage::kLb);
  ASSERT_NE(s, nullptr);
  EXPECT_NE(s->detail.find("raw payload+0/4 = 41424344"), std::string::npos) << s->detail;
  EXPECT_NE(s->detail.find("destination := 10.9.0.1 port 8080"), std::string::npos) << s->detail;
  EXPECT_EQ(nat.backend, "n1");
  auto short_payload = run(PacketBuilder().ipv4("10.0.0.7", "192.0.2.20").udp(1, 9).payload("AB").build());
  EXPECT_EQ(short_payload.verdict.verdict, Verdict::kDrop);
  EXPECT_EQ(short_payload.verdict.reason, DropReason::kLbKeyMissing);
  s = stepOf(short_payload, Stage::kLb);
  ASSERT_NE(s, nullptr);
  EXPECT_NE(s->detail.find("raw payload+0/4 = missing"), std::string::npos) << s->detail;
}

TEST_F(ExplainStages, EarlierStagesKeepPacketsFromLaterOnes) {
  // To the LB service, but DPI drops it first: no LB step, no backend.
  auto r = run(PacketBuilder().ipv4("10.0.0.7", "192.0.2.10").tcp(40001, 80, kTcpAck)
                   .payload("MZ-DROP-ME").build());
  EXPECT_EQ(r.verdict.stage, Stage::kDpi);
  EXPECT_EQ(stepOf(r, Stage::kLb), nullptr);
  EXPECT_EQ(r.verdict.backend, kNoBackend);
  // A DNS query carrying a DPI string: the DNS block decides, DPI never scans it.
  auto q = test::dnsQuery("ads.example");
  const std::string marker = "MZ-DROP-ME";
  q.insert(q.end(), marker.begin(), marker.end());
  auto d = run(PacketBuilder().ipv4("10.0.0.1", "10.0.0.53").udp(40000, 53).payload(q).build());
  EXPECT_EQ(d.verdict.stage, Stage::kDns);
  EXPECT_EQ(stepOf(d, Stage::kDpi), nullptr);
  // The same payload to a DNS port when the name is fine: DPI drops it.
  auto q2 = test::dnsQuery("example.org");
  q2.insert(q2.end(), marker.begin(), marker.end());
  auto d2 = run(PacketBuilder().ipv4("10.0.0.1", "10.0.0.53").udp(40000, 53).payload(q2).build());
  EXPECT_EQ(d2.verdict.stage, Stage::kDpi);
  ASSERT_NE(stepOf(d2, Stage::kDns), nullptr);
  EXPECT_EQ(stepOf(d2, Stage::kDns)->decision, "pass");
}

TEST_F(ExplainStages, FirewallDenyComesBeforeEveryRuleStage) {
  v1::ApplianceConfig cfg;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(kConfig, &cfg).ok());
  auto* rule = cfg.mutable_firewall()->add_rules();
  rule->set_id("no-dns");
  rule->set_action(v1::DENY);
  rule->add_protocols("udp");
  rule->add_dst_ports("53");
  auto model = ctl::toModel(cfg);
  ASSERT_TRUE(model.ok()) << model.status();
  auto snap = rules::compileSnapshot(*model, 4);
  ASSERT_TRUE(snap.ok()) << snap.status();
  Frame f = dnsFrame("ads.example");
  auto r = explainPacket(**snap, f.data(), uint32_t(f.size()), kSideA);
  EXPECT_EQ(r.verdict.stage, Stage::kFirewall);
  EXPECT_EQ(r.verdict.reason, DropReason::kFirewallDeny);
  EXPECT_EQ(stepOf(r, Stage::kDns), nullptr);
  EXPECT_EQ(stepOf(r, Stage::kDpi), nullptr);
  EXPECT_EQ(stepOf(r, Stage::kLb), nullptr);
}


// --- http --- (issue 17, docs/http.md "Explain") With dpi.http, explain parses the packet as
// the first bytes of an HTTP connection's direction, as the worker does: the rules that match
// in a file name the transaction and the file (direction, the file bytes the packet carried,
// size, state, sha256 once it ended).
constexpr const char* kHttpConfig = R"({
  "dpi": {"rule_sets": [{"name": "files", "text":
    "rule pe_header { meta: action = \"drop\" condition: uint16(0) == 0x5A4D }\nrule small_pe { meta: action = \"drop\" condition: uint16(0) == 0x5A4D and filesize < 100 }\nrule raw_only { strings: $a = \"Host: files.test\" condition: $a }\n"}],
   "http": {"ports": [80]}}
})";

class ExplainHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { compileConfig(kHttpConfig, &snap_); }
  static void TearDownTestSuite() { delete snap_; }
  static ExplainResult run(const Frame& f) {
    return explainPacket(*snap_, f.data(), static_cast<uint32_t>(f.size()), kSideA);
  }
  static rules::Snapshot* snap_;
};
rules::Snapshot* ExplainHttp::snap_ = nullptr;

std::string sha256Hex(const std::string& s) {
  unsigned char md[32];
  unsigned len = 0;
  EVP_Digest(s.data(), s.size(), md, &len, EVP_sha256(), nullptr);
  std::string h;
  char b[3];
  for (unsigned k = 0; k < len; ++k) {
    snprintf(b, sizeof(b), "%02x", md[k]);
    h += b;
  }
  return h;
}

TEST_F(ExplainHttp, UploadMatchNamesTheTransactionAndTheFile) {
  const std::string body = "MZ" + std::string(38, 'x');
  auto r = run(PacketBuilder().ipv4("10.0.0.1", "192.0.2.80").tcp(40000, 80, kTcpAck | kTcpPsh)
                   .payload("POST /up/tool.exe HTTP/1.1\r\nHost: files.test\r\nContent-Length: 40\r\n\r\n" + body)
                   .build());
  EXPECT_EQ(r.verdict.verdict, Verdict::kDrop);
  EXPECT_EQ(r.verdict.reason, DropReason::kDpiDrop);
  EXPECT_EQ(snap_->dpi->rules[r.verdict.rule].name, "pe_header");
  // Both rules matched in the file (small_pe when it closed at its Content-Length); the
  // request's header is not a file: raw_only (files scope) does not fire on the raw stream.
  ASSERT_EQ(r.http.size(), 2u);
  for (const ExplainHttpMatch& m : r.http) {
    SCOPED_TRACE(m.rule);
    EXPECT_FALSE(m.at_flow_end);
    EXPECT_EQ(m.method, "POST");
    EXPECT_EQ(m.host, "files.test");
    EXPECT_EQ(m.url, "/up/tool.exe");
    EXPECT_EQ(m.status, 0u);
    EXPECT_EQ(m.tx_id, 0u);
    EXPECT_EQ(m.filename, "tool.exe");
    EXPECT_EQ(m.direction, "request");
    EXPECT_EQ(m.offset_from, 0u);
    EXPECT_EQ(m.offset_to, 40u);
    EXPECT_EQ(m.size, 40u);
    EXPECT_EQ(m.state, "closed");
    EXPECT_EQ(m.sha256, sha256Hex(body));
  }
  EXPECT_EQ(r.http[0].rule, "files:pe_header");
  EXPECT_EQ(r.http[0].action, "drop");
  EXPECT_EQ(r.http[1].rule, "files:small_pe");
  const ExplainStep* s = nullptr;
  for (const auto& st : r.steps)
    if (st.stage == Stage::kDpi) s = &st;
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->decision, "drop");
  EXPECT_NE(s->detail.find("HTTP flow (to HTTP port 80"), std::string::npos) << s->detail;
  EXPECT_NE(s->detail.find("file 'tool.exe' (request body of POST files.test/up/tool.exe"), std::string::npos)
      << s->detail;
  EXPECT_NE(s->detail.find("'files:pe_header' in file 'tool.exe'"), std::string::npos) << s->detail;
  EXPECT_EQ(s->detail.find("raw_only"), std::string::npos) << s->detail;
}

TEST_F(ExplainHttp, OpenFileAndMatchesAtTheFlowsEnd) {
  // 30 of 500 announced bytes: pe_header fires on the packet; small_pe needs the final size:
  // it would fire only if the flow ended here (the file cut short, truncated at 30 bytes).
  const std::string body = "MZ" + std::string(28, 'y');
  auto r = run(PacketBuilder().ipv4("10.0.0.1", "192.0.2.80").tcp(40000, 80, kTcpAck | kTcpPsh)
                   .payload("PUT /a/b.bin HTTP/1.1\r\nHost: h.test\r\nContent-Length: 500\r\n\r\n" + body)
                   .build());
  ASSERT_EQ(r.http.size(), 2u);
  EXPECT_EQ(r.http[0].rule, "files:pe_header");
  EXPECT_FALSE(r.http[0].at_flow_end);
  EXPECT_EQ(r.http[0].state, "open");
  EXPECT_EQ(r.http[0].sha256, "");
  EXPECT_EQ(r.http[0].offset_to, 30u);
  EXPECT_EQ(r.http[1].rule, "files:small_pe");
  EXPECT_TRUE(r.http[1].at_flow_end);
  EXPECT_EQ(r.http[1].state, "truncated");
  EXPECT_EQ(r.http[1].sha256, sha256Hex(body));
  // small_pe (drop) is decided at the file's end, the file stays open: held back.
  bool held = false;
  for (const auto& st : r.steps)
    held = held || (st.stage == Stage::kDpi && st.detail.find("held back") != std::string::npos);
  EXPECT_TRUE(held);
}

TEST_F(ExplainHttp, NotHttpIsTheRawStream) {
  auto r = run(PacketBuilder().ipv4("10.0.0.1", "192.0.2.80").tcp(40000, 9999, kTcpAck | kTcpPsh)
                   .payload("xx Host: files.test xx").build());
  EXPECT_TRUE(r.http.empty());
  EXPECT_EQ(r.verdict.verdict, Verdict::kForward);
  bool alert = false;
  for (const auto& st : r.steps) alert = alert || (st.stage == Stage::kDpi && st.decision == "alert");
  EXPECT_TRUE(alert);  // raw_only on the raw stream of a flow that is not HTTP
}

}  // namespace
}  // namespace dpu::dp
