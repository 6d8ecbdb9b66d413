// The DNS stage's part of explain (explain.h): its decision on the packet's message.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dataplane/packet/parser.h"
#include "dataplane/pipeline/explain.h"
#include "dataplane/stages/dns/dns_stage.h"
#include "rules/compile/dns_parsers.h"

namespace dpu::dp {
namespace {

std::string dnsNameText(const DnsName* n) {
  if (n == nullptr || n->text_len == 0) return ".";
  return std::string(n->text, n->text_len);
}

// The list entry behind a lookup: the name itself (depth 0) or the parent domain whose
// subdomains the entry covers.
std::string dnsEntryText(const DnsName* n, const rules::DnsLookup& l) {
  if (n == nullptr || l.depth < 0 || l.depth >= n->nlabels) return "?";
  std::string suffix(n->text + n->off[l.depth], n->text_len - n->off[l.depth]);
  return l.depth == 0 ? absl::StrCat("'", suffix, "' (the name itself)")
                      : absl::StrCat("'", suffix, "' and its subdomains");
}

// DNS filter (dns_stage.cc): UDP datagrams to or from a DNS port, and the
// first message of a TCP segment toward one, judged by dnsJudge.
bool explainDns(const rules::Snapshot& snap, const uint8_t* frame, uint32_t len,
                const PacketMeta& m, bool tracked, ExplainResult& r) {
  const rules::CompiledDns* dns = snap.dns.get();
  if (dns == nullptr) return false;
  if (!m.has_l4 || m.is_fragment || !(dns->isDnsPort(m.dport) || dns->isDnsPort(m.sport))) {
    explainStep(r, Stage::kDns, "skip", "not DNS (no DNS port: 53 or dns.extra_ports)");
    return false;
  }
  const uint8_t* p = nullptr;
  uint32_t n = 0;
  if (!explainPayload(m, len, frame, &p, &n) || n == 0) {
    explainStep(r, Stage::kDns, "skip", "no payload");
    return false;
  }
  std::string how = "UDP message";
  if (m.l4_proto == 6) {
    if (!tracked) {
      explainStep(r, Stage::kDns, "skip", "TCP without a flow: DNS over TCP is read on tracked connections only");
      return false;
    }
    if (!dns->isDnsPort(m.dport)) {
      explainStep(r, Stage::kDns, "skip", "TCP from the DNS port: responses over TCP are not inspected");
      return false;
    }
    if (n < 2) {
      explainStep(r, Stage::kDns, "pass", "TCP segment shorter than the 2-byte message length: read on with the next segment");
      return false;
    }
    const uint32_t msg_len = uint32_t(p[0] << 8 | p[1]);
    const uint32_t head = std::min<uint32_t>(msg_len, 300);
    if (n - 2 < head) {
      explainStep(r, Stage::kDns, "pass", "the first message's head continues in a later segment");
      return false;
    }
    p += 2;
    n = head;
    how = "TCP message (the first of the segment, as on a connection followed from its SYN; "
          "one picked up mid-stream is passed unread)";
  } else if (m.l4_proto != 17) {
    explainStep(r, Stage::kDns, "skip", "neither UDP nor TCP");
    return false;
  }
  auto scratch = std::make_unique<DnsScratch>();
  uint8_t answer[1024];
  DnsDecision d = dnsJudge(*dns, p, n, *scratch, answer, sizeof(answer));
  const bool response = d.status == DnsMsgStatus::kOk && scratch->q.isResponse();
  const std::string what = absl::StrCat(how, ", ", response ? "response" : "query", " for '",
                                        dnsNameText(&scratch->q.name), "'");
  switch (d.outcome) {
    case DnsOutcome::kNotInspected:
      explainStep(r, Stage::kDns, "pass", absl::StrCat(how, ": not inspected"));
      return false;
    case DnsOutcome::kNonstandard:
      if (dns->nonstandard == rules::Policy::kForward) {
        explainStep(r, Stage::kDns, "pass",
                 absl::StrCat(how, ": not a standard query or response (opcode ",
                              (scratch->q.flags >> 11) & 0xf, ", question count ", scratch->q.qdcount,
                              "); policy dns.nonstandard = FORWARD: not inspected"));
        return false;
      }
      explainDrop(r, Stage::kDns, Verdict::kDrop, DropReason::kDnsNonstandard, kNoRule, "drop",
               absl::StrCat(how, ": not a standard query or response (opcode ",
                            (scratch->q.flags >> 11) & 0xf, ", question count ", scratch->q.qdcount,
                            "); policy dns.nonstandard = DROP"));
      return true;
    case DnsOutcome::kMalformed:
      if (dns->malformed == rules::Policy::kForward) {
        explainStep(r, Stage::kDns, "pass", absl::StrCat(how, ": malformed (", dnsMsgStatusName(d.status),
                                                      "); policy dns.malformed = FORWARD"));
        return false;
      }
      explainDrop(r, Stage::kDns, Verdict::kDrop, DropReason::kDnsMalformed, kNoRule, "drop",
               absl::StrCat(how, ": malformed (", dnsMsgStatusName(d.status),
                            "); policy dns.malformed = DROP"));
      return true;
    case DnsOutcome::kPass:
      if (d.match.list >= 0) {
        explainStep(r, Stage::kDns, "allow",
                 absl::StrCat(what, ": allowed by list '", dns->lists[d.match.list]->name,
                              "', entry ", dnsEntryText(d.name, d.match)));
      } else {
        explainStep(r, Stage::kDns, "pass", absl::StrCat(what, ": on no list"));
      }
      return false;
    case DnsOutcome::kAnswered:
    case DnsOutcome::kDropped:
      break;
  }
  const rules::CompiledDnsList& list = *dns->lists[d.match.list];
  std::string detail = absl::StrCat(what, ": ");
  if (d.cloaked) absl::StrAppend(&detail, "CNAME target '", dnsNameText(d.name), "' ");
  absl::StrAppend(&detail, "blocked by list '", list.name, "', entry ", dnsEntryText(d.name, d.match),
                  ", action ", rules::dnsActionName(d.match.action), "; dropped");
  DropReason reason = DropReason::kDnsDropped;
  if (d.outcome == DnsOutcome::kAnswered && !mayAnswer(frame, m)) {
    // As dnsUdp: no answer to or from a non-unicast address or MAC.
    reason = d.cloaked ? DropReason::kDnsCloaked : DropReason::kDnsDropped;
    absl::StrAppend(&detail, ", no answer (a broadcast, multicast, unspecified or loopback "
                             "address or MAC: answers go only between unicast hosts)");
  } else if (d.outcome == DnsOutcome::kAnswered) {
    reason = d.cloaked ? DropReason::kDnsCloaked : DropReason::kDnsAnswered;
    absl::StrAppend(&detail, d.onward ? ", NXDOMAIN sent on to the client" : ", answer sent back",
                    " (", d.answer_len, " bytes)");
  } else if (d.cloaked) {
    reason = DropReason::kDnsCloaked;
  }
  if (m.l4_proto == 6) absl::StrAppend(&detail, "; the server gets a RST and the connection is closed");
  explainDrop(r, Stage::kDns, Verdict::kDrop, reason, uint32_t(d.match.list), "drop", detail);
  return true;
}

}  // namespace

bool DnsStage::explain(const ExplainInput& in, ExplainResult& r) {
  return explainDns(in.snap, in.frame, in.len, in.meta, in.tracked, r);
}

}  // namespace dpu::dp
