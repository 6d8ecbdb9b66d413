// The DNS stage's decision per message: actions, allow wins, CNAME cloaking, malformed.
#include "dataplane/stages/dns/dns_filter.h"

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

// The SOA record of the authority section at the end of a negative answer: owner (pointer to
// the question), type, class, TTL, RDATA = mname, rname, serial, refresh, retry, expire,
// minimum. Returns false (with a failure) when it is not there.
struct Soa {
  uint32_t ttl = 0, serial = 0, refresh = 0, retry = 0, expire = 0, minimum = 0;
  std::string mname, rname;
};
bool soaOf(const std::vector<uint8_t>& a, Soa& out) {
  if (a.size() < 12 || dnsGet16(a.data() + 8) != 1) {
    ADD_FAILURE() << "nscount " << (a.size() >= 12 ? dnsGet16(a.data() + 8) : -1);
    return false;
  }
  // Skip the question and the answers: the SOA is the last record; find it from the names.
  DnsQuestion q;
  if (dnsParseQuestion(a.data(), uint32_t(a.size()), q) != DnsMsgStatus::kOk) return false;
  uint32_t pos = q.question_end;
  for (uint32_t i = 0; i < q.ancount; ++i) pos += 12 + dnsGet16(a.data() + pos + 10);
  const uint8_t* r = a.data() + pos;
  EXPECT_EQ(dnsGet16(r), 0xc00c);
  EXPECT_EQ(dnsGet16(r + 2), kTypeSoa);
  EXPECT_EQ(dnsGet16(r + 4), 1);
  out.ttl = uint32_t(dnsGet16(r + 6)) << 16 | dnsGet16(r + 8);
  uint32_t rdlen = dnsGet16(r + 10);
  EXPECT_EQ(pos + 12 + rdlen, a.size()) << "the SOA is the last record";
  uint32_t p = pos + 12;
  for (std::string* n : {&out.mname, &out.rname}) {
    while (a[p] != 0) {
      if (!n->empty()) n->push_back('.');
      n->append(reinterpret_cast<const char*>(&a[p + 1]), a[p]);
      p += 1 + a[p];
    }
    ++p;
  }
  auto u32 = [&](uint32_t at) { return uint32_t(dnsGet16(&a[at])) << 16 | dnsGet16(&a[at + 2]); };
  out.serial = u32(p);
  out.refresh = u32(p + 4);
  out.retry = u32(p + 8);
  out.expire = u32(p + 12);
  out.minimum = u32(p + 16);
  EXPECT_EQ(p + 20, a.size());
  return true;
}

TEST(DnsStage, NegativeAnswersCarryTheSoaWithTheNegativeTtl) {
  auto dns = compile();  // default SOA, lists' ttl 42
  for (const char* name : {"x.nx.example", "nodata.example"}) {
    auto j = judge(*dns, test::dnsQuery(name));
    Soa soa;
    ASSERT_TRUE(soaOf(j.answer, soa)) << name;
    EXPECT_EQ(soa.mname, "dns-filter.invalid");
    EXPECT_EQ(soa.rname, "hostmaster.dns-filter.invalid");
    EXPECT_EQ(soa.serial, 1u);
    EXPECT_EQ(soa.refresh, 1800u);
    EXPECT_EQ(soa.retry, 900u);
    EXPECT_EQ(soa.expire, 604800u);
    EXPECT_EQ(soa.minimum, 42u) << "the list's ttl";
    EXPECT_EQ(soa.ttl, 42u) << "RFC 2308: the SOA's TTL is the negative TTL";
  }
  // Sinkhole: NODATA for other types carries it; the A answer and REFUSED do not.
  auto txt = judge(*dns, test::dnsQuery("www.sink.example", 16));
  Soa soa;
  EXPECT_TRUE(soaOf(txt.answer, soa));
  EXPECT_EQ(dnsGet16(judge(*dns, test::dnsQuery("www.sink.example", kTypeA)).answer.data() + 8), 0);
  EXPECT_EQ(dnsGet16(judge(*dns, test::dnsQuery("refuse.example")).answer.data() + 8), 0);

  // Configured fields; minimum overrides the lists' ttl.
  rules::DnsModel m;
  rules::DnsListModel l;
  l.name = "nx";
  l.names = {"blocked.example"};
  m.lists.push_back(l);
  m.soa.mname = "NS1.Filter.Example.";
  m.soa.rname = "noc.filter.example";
  m.soa.serial = 2026112101;
  m.soa.refresh = 7;
  m.soa.retry = 8;
  m.soa.expire = 9;
  m.soa.minimum = 60;
  auto c = rules::compileDns(m, nullptr);
  ASSERT_TRUE(c.ok()) << c.status();
  auto j = judge(**c, test::dnsQuery("blocked.example"));
  soa = Soa{};
  ASSERT_TRUE(soaOf(j.answer, soa));
  EXPECT_EQ(soa.mname, "ns1.filter.example");
  EXPECT_EQ(soa.rname, "noc.filter.example");
  EXPECT_EQ(soa.serial, 2026112101u);
  EXPECT_EQ(soa.refresh, 7u);
  EXPECT_EQ(soa.retry, 8u);
  EXPECT_EQ(soa.expire, 9u);
  EXPECT_EQ(soa.minimum, 60u);
  EXPECT_EQ(soa.ttl, 60u);
  // Bad names are config errors naming the field.
  m.soa.rname = "bad..name";
  rules::ConfigErrorList errs;
  EXPECT_FALSE(rules::compileDns(m, nullptr, &errs).ok());
  ASSERT_FALSE(errs.empty());
  EXPECT_NE(errs[0].field.find("dns.soa.rname"), std::string::npos) << errs[0].field;
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
  Soa soa;
  EXPECT_TRUE(soaOf(j.answer, soa));
  EXPECT_EQ(soa.ttl, 42u);
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
  EXPECT_EQ(judge(*dns, notify).d.outcome, DnsOutcome::kNonstandard);
  auto two = test::dnsQuery("a.nx.example");
  two[5] = 2;  // QDCOUNT 2
  EXPECT_EQ(judge(*dns, two).d.outcome, DnsOutcome::kNonstandard);
  // A response whose answer section is broken: malformed (only inspected with cloaking).
  auto r = test::dnsCnameResponse("www.shop.example", {"x.example"});
  r.resize(r.size() - 5);
  EXPECT_EQ(judge(*dns, r).d.outcome, DnsOutcome::kMalformed);
}

}  // namespace
}  // namespace dpu::dp
