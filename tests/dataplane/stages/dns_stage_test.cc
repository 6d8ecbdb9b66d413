// The DNS stage's decision per message: actions, allow wins, CNAME cloaking, malformed.
#include "dataplane/stages/dns_stage.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tests/util/dns_builder.h"

namespace dpu::dp {
namespace {

using rules::DnsAction;

std::shared_ptr<const rules::CompiledDns> compile() {
  rules::DnsModel m;
  auto add = [&](const char* name, DnsAction a, std::vector<std::string> names) {
    rules::DnsListModel l;
    l.name = name;
    l.action = a;
    l.names = std::move(names);
    l.ttl = 42;
    if (a == DnsAction::kSinkhole) {
      l.sinkhole_v4 = {{10, 1, 2, 3}};
      l.sinkhole_v6 = {{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9}};
    }
    m.lists.push_back(l);
  };
  add("nx", DnsAction::kNxdomain, {"||nx.example^"});
  add("nodata", DnsAction::kNodata, {"||nodata.example^"});
  add("sink", DnsAction::kSinkhole, {"||sink.example^"});
  add("refuse", DnsAction::kRefuse, {"||refuse.example^"});
  add("drop", DnsAction::kDrop, {"||drop.example^"});
  add("ok", DnsAction::kAllow, {"ok.nx.example"});
  auto c = rules::compileDns(m, nullptr);
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

struct Judged {
  DnsDecision d;
  std::vector<uint8_t> answer;
};

Judged judge(const rules::CompiledDns& dns, const std::vector<uint8_t>& msg) {
  static DnsScratch s;
  Judged j;
  j.answer.resize(512);
  j.d = dnsJudge(dns, msg.data(), static_cast<uint32_t>(msg.size()), s, j.answer.data(), 512);
  j.answer.resize(j.d.answer_len);
  return j;
}

TEST(DnsStage, EachAction) {
  auto dns = compile();
  auto j = judge(*dns, test::dnsQuery("a.NX.example."));
  EXPECT_EQ(j.d.outcome, DnsOutcome::kAnswered);
  EXPECT_EQ(j.d.match.list, 0);
  ASSERT_GE(j.answer.size(), 12u);
  EXPECT_EQ(j.answer[3] & 0xf, 3);
  EXPECT_FALSE(j.d.onward);

  j = judge(*dns, test::dnsQuery("nodata.example"));
  EXPECT_EQ(j.d.outcome, DnsOutcome::kAnswered);
  EXPECT_EQ(j.answer[3] & 0xf, 0);
  EXPECT_EQ(dnsGet16(j.answer.data() + 6), 0);

  j = judge(*dns, test::dnsQuery("www.sink.example", kTypeA));
  EXPECT_EQ(j.d.outcome, DnsOutcome::kAnswered);
  EXPECT_EQ(dnsGet16(j.answer.data() + 6), 1);
  EXPECT_EQ(j.answer.back(), 3);  // 10.1.2.3
  j = judge(*dns, test::dnsQuery("www.sink.example", kTypeAaaa));
  EXPECT_EQ(dnsGet16(j.answer.data() + 6), 1);
  EXPECT_EQ(j.answer.back(), 9);
  j = judge(*dns, test::dnsQuery("www.sink.example", 16));  // TXT: NODATA
  EXPECT_EQ(dnsGet16(j.answer.data() + 6), 0);

  j = judge(*dns, test::dnsQuery("refuse.example"));
  EXPECT_EQ(j.answer[3] & 0xf, 5);

  j = judge(*dns, test::dnsQuery("drop.example"));
  EXPECT_EQ(j.d.outcome, DnsOutcome::kDropped);
  EXPECT_EQ(j.d.match.list, 4);

  j = judge(*dns, test::dnsQuery("fine.example"));
  EXPECT_EQ(j.d.outcome, DnsOutcome::kPass);
  EXPECT_EQ(j.d.match.list, -1);
}

TEST(DnsStage, AllowWins) {
  auto dns = compile();
  auto j = judge(*dns, test::dnsQuery("ok.nx.example"));
  EXPECT_EQ(j.d.outcome, DnsOutcome::kPass);
  EXPECT_EQ(j.d.match.list, 5);
  EXPECT_EQ(j.d.match.action, DnsAction::kAllow);
}

TEST(DnsStage, CnameCloaking) {
  auto dns = compile();
  auto r = test::dnsCnameResponse("www.shop.example", {"shop.cdn.net", "x.nx.example"}, 0x77);
  auto j = judge(*dns, r);
  EXPECT_EQ(j.d.outcome, DnsOutcome::kAnswered);
  EXPECT_TRUE(j.d.cloaked);
  EXPECT_TRUE(j.d.onward);
  EXPECT_EQ(std::string(j.d.name->text), "x.nx.example");
  EXPECT_EQ(dnsGet16(j.answer.data()), 0x77);
  EXPECT_EQ(j.answer[3] & 0xf, 3);
  EXPECT_EQ(dnsGet16(j.answer.data() + 6), 0);
  // A chain that ends in an allowed name passes; so does a clean chain.
  EXPECT_EQ(judge(*dns, test::dnsCnameResponse("www.shop.example", {"ok.nx.example"})).d.outcome,
            DnsOutcome::kPass);
  EXPECT_EQ(judge(*dns, test::dnsCnameResponse("www.shop.example", {"a.cdn.net"})).d.outcome,
            DnsOutcome::kPass);
  // The question explicitly allowed: not cloaked.
  EXPECT_EQ(judge(*dns, test::dnsCnameResponse("ok.nx.example", {"x.nx.example"})).d.outcome,
            DnsOutcome::kPass);
}

TEST(DnsStage, CloakingOff) {
  rules::DnsModel m;
  rules::DnsListModel l;
  l.name = "nx";
  l.names = {"||nx.example^"};
  m.lists.push_back(l);
  m.cname_cloaking = false;
  auto c = rules::compileDns(m, nullptr);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(judge(**c, test::dnsCnameResponse("www.shop.example", {"x.nx.example"})).d.outcome,
            DnsOutcome::kPass);
}

TEST(DnsStage, MalformedAndNotInspected) {
  auto dns = compile();
  std::vector<uint8_t> loop = {0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1};
  auto j = judge(*dns, loop);
  EXPECT_EQ(j.d.outcome, DnsOutcome::kMalformed);
  EXPECT_EQ(j.d.status, DnsMsgStatus::kPointerLoop);
  auto notify = test::dnsQuery("nx.example", 6, 1, 0x2000);
  EXPECT_EQ(judge(*dns, notify).d.outcome, DnsOutcome::kNotInspected);
  // A response whose answer section is broken: malformed (only inspected with cloaking).
  auto r = test::dnsCnameResponse("www.shop.example", {"x.example"});
  r.resize(r.size() - 5);
  EXPECT_EQ(judge(*dns, r).d.outcome, DnsOutcome::kMalformed);
}

}  // namespace
}  // namespace dpu::dp
