// The DNS filter stage's decision for one DNS message (a UDP payload, or one message of a
// TCP stream): parse, match the query name (and, in resolver responses, every CNAME
// target) against the compiled lists, and write the answer that replaces a blocked
// message. No DPDK dependency; no allocation; the caller owns every buffer.
//
//   query, name blocked          -> answer to the sender by the list's action (drop: none)
//   query, allowed / no match    -> pass
//   response, a CNAME target blocked (cname_cloaking) and the question name not allowed
//                                -> NXDOMAIN onward to the client, the response dropped
//   not a standard query (opcode, qdcount != 1)   -> the dns.nonstandard policy, counted
//   malformed                    -> the dns.malformed policy (forward / drop), counted
#pragma once

#include <cstdint>

#include "dataplane/stages/dns/dns_message.h"
#include "rules/compiled/dns.h"

namespace dpu::dp {

enum class DnsOutcome : uint8_t {
  kPass = 0,        // forward the message
  kNotInspected,    // forward unread (set by the TCP path: a cut head, a query from a server)
  kNonstandard,     // opcode != QUERY or QDCOUNT != 1; the caller applies CompiledDns::nonstandard
  kMalformed,       // status says why; the caller applies CompiledDns::malformed
  kAnswered,        // drop the message, send `answer` (back to the sender, or onward)
  kDropped,         // drop the message, no answer (action drop)
};

struct DnsDecision {
  DnsOutcome outcome = DnsOutcome::kPass;
  DnsMsgStatus status = DnsMsgStatus::kOk;
  rules::DnsLookup match;        // the list and action that decided (blocks and allows)
  bool cloaked = false;          // a response blocked for a CNAME target
  bool onward = false;           // the answer goes on to the destination (cloaking)
  bool response = false;         // the question parsed and QR set
  uint16_t answer_len = 0;       // bytes written to the caller's answer buffer
  const DnsName* name = nullptr; // the name that matched (query name or CNAME target)
};

// Per-worker scratch (a few KB: keep it out of the stack of a hot loop).
struct DnsScratch {
  DnsQuestion q;
  DnsName target;
  uint64_t suffix[kDnsMaxNameLabels];
};

// The DNS messages of one burst segment (UDP datagrams): questions parsed and names looked
// up together (rules::CompiledDns::lookupBurst), so the table's cache misses overlap across
// the burst; then each packet is judged with its question and match (dnsJudgeQuestion).
template <int kMax>
struct DnsBurstScratch {
  static constexpr int kMaxLabels = 16;  // a name with more labels is looked up on its own
  int8_t slot[kMax];                     // by burst position: the slot, -1 = not prepared
  DnsMsgStatus status[kMax];
  rules::DnsLookup match[kMax];
  const uint64_t* suffix[kMax];
  int nlabels[kMax];
  uint64_t hashes[kMax][kMaxLabels];
  DnsQuestion q[kMax];
};

inline rules::DnsLookup dnsMatchName(const rules::CompiledDns& dns, const DnsName& n,
                                     uint64_t* suffix) {
  if (n.nlabels == 0) return {};
  n.suffixHashes(suffix);
  return dns.lookup(suffix, n.nlabels);
}

// A negative answer (NXDOMAIN / NODATA) carries the SOA of `dns` with the list's negative TTL.
inline void dnsAddSoa(const rules::CompiledDns& dns, const rules::CompiledDnsList& list,
                      DnsAnswerSpec& a) {
  if (dns.soa_names.empty()) return;
  a.soa_names = dns.soa_names.data();
  a.soa_names_len = static_cast<uint16_t>(dns.soa_names.size());
  a.soa_fields[0] = dns.soa_serial;
  a.soa_fields[1] = dns.soa_refresh;
  a.soa_fields[2] = dns.soa_retry;
  a.soa_fields[3] = dns.soa_expire;
  a.soa_minimum = dns.negativeTtl(list);
}

// Writes the answer for `action` into out (room `cap`); returns its length (0 = no room).
inline uint16_t dnsAnswerFor(const rules::CompiledDns& dns, const rules::CompiledDnsList& list,
                             rules::DnsAction action, const uint8_t* msg, const DnsQuestion& q,
                             uint8_t* out, uint32_t cap) {
  DnsAnswerSpec a;
  a.ttl = list.ttl;
  switch (action) {
    case rules::DnsAction::kNxdomain: a.rcode = 3; dnsAddSoa(dns, list, a); break;
    case rules::DnsAction::kRefuse: a.rcode = 5; break;
    case rules::DnsAction::kNodata: a.rcode = 0; dnsAddSoa(dns, list, a); break;
    case rules::DnsAction::kSinkhole:
      a.rcode = 0;
      if (q.qclass == 1 && q.qtype == kTypeA) {
        a.rr_type = kTypeA;
        a.addrs = list.sinkhole_v4.data()->data();
        a.naddrs = static_cast<uint8_t>(list.sinkhole_v4.size());
      } else if (q.qclass == 1 && q.qtype == kTypeAaaa) {
        a.rr_type = kTypeAaaa;
        a.addrs = list.sinkhole_v6.data()->data();
        a.naddrs = static_cast<uint8_t>(list.sinkhole_v6.size());
      } else {
        dnsAddSoa(dns, list, a);  // other types: NODATA
      }
      break;
    default: return 0;
  }
  return dnsWriteAnswer(msg, q, a, out, cap);
}

// Judges a message whose question was parsed into `q` (status `st`); `pre` is the question
// name's match when it was looked up already (a burst), else it is looked up here. `s`
// holds the CNAME targets and their fingerprints.
inline DnsDecision dnsJudgeQuestion(const rules::CompiledDns& dns, const uint8_t* msg,
                                    uint32_t len, DnsMsgStatus st, const DnsQuestion& q,
                                    const rules::DnsLookup* pre, DnsScratch& s, uint8_t* answer,
                                    uint32_t cap) {
  DnsDecision d;
  d.status = st;
  if (d.status == DnsMsgStatus::kNotInspected) {
    d.outcome = DnsOutcome::kNonstandard;
    return d;
  }
  if (d.status != DnsMsgStatus::kOk) {
    d.outcome = DnsOutcome::kMalformed;
    return d;
  }
  d.response = q.isResponse();
  rules::DnsLookup m = pre ? *pre : dnsMatchName(dns, q.name, s.suffix);
  d.match = m;
  d.name = &q.name;
  if (!q.isResponse()) {
    if (!m.blocked()) return d;
    if (m.action == rules::DnsAction::kDrop) {
      d.outcome = DnsOutcome::kDropped;
      return d;
    }
    d.answer_len = dnsAnswerFor(dns, *dns.lists[m.list], m.action, msg, q, answer, cap);
    d.outcome = d.answer_len ? DnsOutcome::kAnswered : DnsOutcome::kDropped;
    return d;
  }
  // A response: CNAME cloaking (the question name itself allowed: leave it alone).
  if (!dns.cname_cloaking || (m.list >= 0 && !m.blocked())) return d;
  bool stopped = false;
  rules::DnsLookup hit;
  d.status = dnsScanCnames(msg, len, q, s.target, stopped, [&](const DnsName& t) {
    hit = dnsMatchName(dns, t, s.suffix);
    return hit.blocked();
  });
  if (d.status != DnsMsgStatus::kOk) {
    d.outcome = DnsOutcome::kMalformed;
    return d;
  }
  if (!stopped) {
    if (m.blocked()) {
      // The question itself is on a block list (a query that passed before the list
      // changed, or one this appliance did not see): blocked too.
      hit = m;
      s.target = q.name;
    } else {
      return d;
    }
  }
  d.match = hit;
  d.name = &s.target;
  d.cloaked = true;
  d.onward = true;
  if (hit.action == rules::DnsAction::kDrop) {
    d.outcome = DnsOutcome::kDropped;
    return d;
  }
  DnsAnswerSpec a;
  a.rcode = 3;
  dnsAddSoa(dns, *dns.lists[hit.list], a);
  d.answer_len = dnsWriteAnswer(msg, q, a, answer, cap);
  d.outcome = d.answer_len ? DnsOutcome::kAnswered : DnsOutcome::kDropped;
  return d;
}

// Parses the message's question into s.q and judges it.
inline DnsDecision dnsJudge(const rules::CompiledDns& dns, const uint8_t* msg, uint32_t len,
                            DnsScratch& s, uint8_t* answer, uint32_t cap) {
  DnsMsgStatus st = dnsParseQuestion(msg, len, s.q);
  return dnsJudgeQuestion(dns, msg, len, st, s.q, nullptr, s, answer, cap);
}

}  // namespace dpu::dp
