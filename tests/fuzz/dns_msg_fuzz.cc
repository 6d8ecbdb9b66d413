// Fuzz target (DNS filtering): the DNS message parser, the CNAME walk, the stage decision and
// the answer writer (dataplane/stages/dns/dns_message.h, dns_stage.h) on one DNS message.
//
// Beyond "no crash, no out-of-bounds read" (the input sits in a heap buffer of exactly its
// size), every result is checked:
// - a parsed name has at most 127 labels of 1..63 bytes, a wire length <= 255 that equals
//   the sum of its labels + 1, lower-case text whose labels sit at their offsets separated
//   by '.', and question_end inside the message;
// - every CNAME target decoded by dnsScanCnames obeys the same;
// - dnsJudge against a small list set: an answer fits its buffer, parses back as a response
//   with the query's ID, question name, type and class, RD copied, and the rcode of the
//   action; a query is never answered "onward", a response never "back";
// - metamorphic: the same bytes at an odd address give the same status and name.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "dataplane/stages/dns/dns_filter.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using namespace dpu::dp;

const dpu::rules::CompiledDns& lists() {
  static std::shared_ptr<const dpu::rules::CompiledDns> c = [] {
    dpu::rules::DnsModel m;
    auto add = [&](const char* n, dpu::rules::DnsAction a, std::vector<std::string> names) {
      dpu::rules::DnsListModel l;
      l.name = n;
      l.action = a;
      l.names = std::move(names);
      m.lists.push_back(l);
    };
    add("nx", dpu::rules::DnsAction::kNxdomain, {"||a^", "||example.com^"});
    add("sink", dpu::rules::DnsAction::kSinkhole, {"||b^", "*.c"});
    add("nodata", dpu::rules::DnsAction::kNodata, {"d"});
    add("refuse", dpu::rules::DnsAction::kRefuse, {"e"});
    add("allow", dpu::rules::DnsAction::kAllow, {"ok.a"});
    return *dpu::rules::compileDns(m, nullptr);
  }();
  return *c;
}

void checkName(const DnsName& n) {
  FUZZ_CHECK(n.nlabels <= kDnsMaxNameLabels);
  FUZZ_CHECK(n.wire_len <= 255);
  uint32_t wire = 1;
  for (int k = 0; k < n.nlabels; ++k) {
    FUZZ_CHECK(n.len[k] >= 1 && n.len[k] <= 63);
    FUZZ_CHECK(n.off[k] + n.len[k] <= n.text_len);
    if (k > 0) FUZZ_CHECK(n.text[n.off[k] - 1] == '.');
    for (int i = 0; i < n.len[k]; ++i) {
      char c = n.text[n.off[k] + i];
      FUZZ_CHECK(!(c >= 'A' && c <= 'Z'));
    }
    wire += n.len[k] + 1u;
  }
  FUZZ_CHECK(wire == n.wire_len || (n.nlabels == 0 && n.wire_len == 1));
  FUZZ_CHECK(n.text[n.text_len] == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65535) return 0;
  uint32_t len = static_cast<uint32_t>(size);
  static DnsScratch s;
  DnsMsgStatus st = dnsParseQuestion(data, len, s.q);
  if (st == DnsMsgStatus::kOk) {
    checkName(s.q.name);
    FUZZ_CHECK(s.q.question_end <= len);
    DnsName target;
    bool stopped = false;
    dnsScanCnames(data, len, s.q, target, stopped, [](const DnsName& t) {
      checkName(t);
      return false;
    });
  }
  // Metamorphic: an odd address.
  std::vector<uint8_t> shifted(size + 1);
  if (size) std::memcpy(shifted.data() + 1, data, size);
  DnsQuestion q2;
  DnsMsgStatus st2 = dnsParseQuestion(shifted.data() + 1, len, q2);
  FUZZ_CHECK(st2 == st);
  if (st == DnsMsgStatus::kOk) {
    FUZZ_CHECK(std::strcmp(q2.name.text, s.q.name.text) == 0);
    FUZZ_CHECK(q2.qtype == s.q.qtype && q2.question_end == s.q.question_end);
  }

  uint8_t answer[1024];
  DnsDecision d = dnsJudge(lists(), data, len, s, answer, sizeof(answer));
  FUZZ_CHECK(d.answer_len <= sizeof(answer));
  if (d.outcome == DnsOutcome::kAnswered) {
    FUZZ_CHECK(d.answer_len >= 12);
    FUZZ_CHECK(d.match.list >= 0 && d.match.blocked());
    FUZZ_CHECK(d.onward == s.q.isResponse());
    DnsQuestion back;
    FUZZ_CHECK(dnsParseQuestion(answer, d.answer_len, back) == DnsMsgStatus::kOk);
    FUZZ_CHECK(back.isResponse());
    FUZZ_CHECK(back.id == s.q.id);
    FUZZ_CHECK(std::strcmp(back.name.text, s.q.name.text) == 0);
    FUZZ_CHECK(back.qtype == s.q.qtype && back.qclass == s.q.qclass);
    FUZZ_CHECK((back.flags & kDnsRd) == (s.q.flags & kDnsRd));
    uint8_t rcode = back.flags & 0xf;
    if (d.cloaked) {
      FUZZ_CHECK(rcode == 3);
    } else {
      switch (d.match.action) {
        case dpu::rules::DnsAction::kNxdomain: FUZZ_CHECK(rcode == 3); break;
        case dpu::rules::DnsAction::kRefuse: FUZZ_CHECK(rcode == 5); break;
        default: FUZZ_CHECK(rcode == 0); break;
      }
    }
    FUZZ_CHECK(back.question_end + back.ancount * 12u <= d.answer_len);
  }
  return 0;
}
