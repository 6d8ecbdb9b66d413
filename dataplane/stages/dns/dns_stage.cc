// DNS filtering on the packet path (dns_stage.h; the decisions are in
// dataplane/stages/dns/dns_filter.h).
//
// Per burst segment, dnsPrepare parses the question of every UDP DNS message first, computes
// its name's suffix fingerprints and looks them all up at once (CompiledDns::lookupBurst:
// filter words, then table slots prefetched for the whole burst, then probed), so the cache
// misses of the burst's queries overlap; dnsUdp then judges each packet with its question
// and match (a name of more than 16 labels is looked up on its own there).
//
// UDP (port 53 and dns.extra_ports, either direction): one message per datagram. A blocked
// query is dropped and answered back out of its ingress port (addresses, ports and MACs
// swapped); a resolver response whose CNAME chain reaches a blocked name is dropped and an
// NXDOMAIN goes on to the client in its place. No answer is ever sent to or from a
// broadcast, multicast, unspecified or loopback address or MAC (mayAnswer, as for firewall
// rejects): such a blocked message is dropped unanswered (dns_dropped, answers_not_sent).
// A fragmented message is judged once reassembled
// (FragStage hands the stages the whole datagram; its verdict goes to every fragment).
//
// TCP (same ports, client -> server bytes of tracked flows): the bytes come from the TCP
// stream stage (stages/stream): in sequence order, once, checksum-verified; out-of-order,
// bad-checksum and differing overlapping segments never reach this stage (dropped there). Each
// message's 2-byte length and its head (header + question) are read, across segments when
// split (the head is kept in a small per-worker buffer pool), and the rest of the message is
// skipped; several messages in one segment are each judged. When a segment holds a blocked
// query, the segment is dropped and the client gets, in one segment (PSH|ACK|FIN, seq = the
// server's next sequence number as the engine saw it - not the query's ACK, which pipelined
// answers may have passed - ack = the segment's end), the answers of the blocked queries and
// SERVFAIL for the other whole queries of that segment; the server gets a RST (it saw a
// partial stream) and every later packet of the connection is dropped (dns_tcp_closed). A
// query on a SYN (TCP Fast Open) gets what the server would have sent: a SYN-ACK (the
// appliance's ISN, acknowledging the SYN and its data), then the answer. A connection picked
// up mid-stream may be inside a message: passed unread (counted tcp_unsynced).
// Responses (server -> client bytes, followed the same way; a message split across segments is
// reassembled whole in a per-worker pool of 64 buffers of 4 KB, allocated at create, and
// judged when its last byte arrives; one longer than 4094 bytes, or one that finds no free
// buffer, is counted (tcp_response_overflow / tcp_no_buffer) and handled by dns.malformed:
// forward passes it unread, drop drops the segment and closes the connection) are inspected
// for CNAME cloaking: a cloaked response's segment is dropped, the client gets NXDOMAIN in its
// place (at the sequence number of the segment's new bytes, FIN; SERVFAIL for the other
// responses of the segment), the server a RST, and the connection is closed; when the client
// already got the start of a message of that segment, it gets a RST instead of the answer.
#include <rte_mbuf.h>

#include <algorithm>
#include <cstring>

#include "dataplane/packet/frame_write.h"
#include "dataplane/packet/parser.h"
#include "dataplane/stages/dns/dns_stage.h"
#include "dataplane/stages/firewall/firewall_tables.h"

namespace dpu::dp {
namespace {

constexpr uint32_t kDnsBufBytes = 8192;     // answers (UDP <= 65535 is cut to this) + stream
constexpr uint32_t kAnswerCap = 1024;       // one synthesized answer at most
constexpr int kMaxTcpMessages = 16;         // messages judged per segment

}  // namespace

DnsStage::DnsStage(PathContext& cx) : PathStage(cx, "dns", kCyDns), c_(cx.c), flows_(cx.flows) {
  dns_tcp_.reset(new DnsTcpFlow[size_t(flows_->capacity()) * 2]());
  dns_heads_.reset(new uint8_t[kDnsHeadSlots * kDnsHeadBytes]);
  for (uint32_t k = 0; k < kDnsHeadSlots; ++k) dns_free_heads_[k] = static_cast<uint8_t>(k + 1);
  dns_nfree_heads_ = kDnsHeadSlots;
  dns_resps_.reset(new uint8_t[size_t(kDnsRespSlots) * kDnsRespBytes]);
  for (uint32_t k = 0; k < kDnsRespSlots; ++k) dns_free_resps_[k] = static_cast<uint8_t>(k + 1);
  dns_nfree_resps_ = kDnsRespSlots;
  dns_burst_ = std::make_unique<DnsBurstScratch<kBurst>>();
  std::fill(std::begin(dns_burst_->slot), std::end(dns_burst_->slot), int8_t{-1});
  dns_scratch_ = std::make_unique<DnsScratch>();
  // Answers, then the copy of a reassembled TCP response being judged.
  dns_buf_.reset(new uint8_t[kDnsBufBytes + kDnsRespBytes]);
}

absl::StatusOr<std::unique_ptr<PathStage>> DnsStage::make(PathContext& cx,
                                                          const rules::DataplaneSettings&) {
  return std::make_unique<DnsStage>(cx);
}

bool DnsStage::refresh() {
  dns_ = cx_.snap ? cx_.snap->dns.get() : nullptr;
  if (dns_ != nullptr) cx_.reassemble = true;  // fragmented messages judged whole
  return dns_ != nullptr;
}

void DnsStage::run(uint16_t from, uint16_t to) {
  Burst& b = *cx_.burst;
  const rules::CompiledDns& dns = *dns_;
  dnsPrepare(b.work, b, from, to, dns);  // the segment's UDP questions, looked up as a burst
  for (uint16_t i = from; i < to; ++i) {
    if (b.v[i].verdict == Verdict::kForward) dnsStage(b.work[i], i, b, dns);
  }
}

void DnsStage::flowEnded(int32_t pos) {
  dnsReleaseFlow(pos);
  cx_.closed[pos] &= uint8_t(~kClosedByDns);
}

void DnsStage::dnsReleaseFlow(int32_t pos) {
  if (pos < 0) return;
  for (int d = 0; d < 2; ++d) {
    DnsTcpFlow& f = dns_tcp_[size_t(pos) * 2 + d];
    dnsTcpRelease(f, d == 1);
    f = DnsTcpFlow{};
  }
}

void DnsStage::dnsPrepare(rte_mbuf** pkts, Burst& b, uint16_t from, uint16_t to,
                        const rules::CompiledDns& dns) {
  DnsBurstScratch<kBurst>& bs = *dns_burst_;
  int n = 0;
  for (uint16_t i = from; i < to; ++i) {
    bs.slot[i] = -1;
    const PacketMeta& pm = b.meta[i];
    // Exactly the packets dnsStage hands to dnsUdp.
    if (b.v[i].verdict != Verdict::kForward || !pm.has_l4 || pm.is_fragment ||
        pm.l4_proto != 17 || pm.payload_len == 0 ||
        (!dns.isDnsPort(pm.dport) && !dns.isDnsPort(pm.sport))) {
      continue;
    }
    const rte_mbuf* m = pkts[i];
    const uint8_t* msg = rte_pktmbuf_mtod(m, const uint8_t*) + pm.payload_offset;
    uint32_t len = std::min<uint32_t>(pm.payload_len, m->data_len - pm.payload_offset);
    DnsQuestion& q = bs.q[n];
    bs.status[n] = dnsParseQuestion(msg, len, q);
    bs.slot[i] = static_cast<int8_t>(n);
    if (bs.status[n] == DnsMsgStatus::kOk && q.name.nlabels <= bs.kMaxLabels) {
      q.name.suffixHashes(bs.hashes[n]);
      bs.suffix[n] = bs.hashes[n];
      bs.nlabels[n] = q.name.nlabels;
    } else {
      bs.suffix[n] = bs.hashes[n];
      bs.nlabels[n] = 0;  // no lookup here (not parsed, or a long name: dnsUdp looks it up)
    }
    ++n;
  }
  if (n) dns.lookupBurst(bs.suffix, bs.nlabels, n, bs.match);
}

void DnsStage::dnsStage(rte_mbuf* m, uint16_t i, Burst& b, const rules::CompiledDns& dns) {
  const PacketMeta& pm = b.meta[i];
  if (!pm.has_l4 || pm.is_fragment) return;
  if (!dns.isDnsPort(pm.dport) && !dns.isDnsPort(pm.sport)) return;
  if (pm.l4_proto == 17) {
    if (pm.payload_len == 0) return;
    c_->stage_packets[static_cast<int>(Stage::kDns)].add();
    dnsUdp(m, i, b, dns);
  } else if (pm.l4_proto == 6 && b.pos[i] >= 0) {
    c_->stage_packets[static_cast<int>(Stage::kDns)].add();
    dnsTcp(m, i, b, dns);
  }
}

bool DnsStage::dnsAccount(const DnsDecision& d, const rules::CompiledDns& dns, const PacketMeta& pm,
                        uint8_t in_side, uint64_t t) {
  c_->dns[kDnsMessages].add();
  c_->dns[d.status == DnsMsgStatus::kOk && d.response ? kDnsResponses : kDnsQueries].add();
  switch (d.outcome) {
    case DnsOutcome::kNotInspected:
      c_->dns[kDnsNotInspected].add();
      return false;
    case DnsOutcome::kNonstandard:
      c_->dns[kDnsNonstandard].add();
      if (dns.nonstandard == rules::Policy::kForward) {
        c_->dns[kDnsNonstandardForwarded].add();
        return false;
      }
      return true;
    case DnsOutcome::kMalformed:
      c_->dns[kDnsMalformed].add();
      if (dns.malformed == rules::Policy::kForward) {
        c_->dns[kDnsMalformedForwarded].add();
        return false;
      }
      return true;
    case DnsOutcome::kPass:
      if (d.match.list >= 0) {
        c_->dns[kDnsAllowed].add();
        c_->dns_list_allowed[dns.lists[d.match.list]->slot % kDnsListSlots].add();
      }
      return false;
    case DnsOutcome::kAnswered:
    case DnsOutcome::kDropped:
      break;
  }
  const rules::CompiledDnsList& list = *dns.lists[d.match.list];
  c_->dns[kDnsBlocked].add();
  if (d.cloaked) c_->dns[kDnsCloaked].add();
  c_->dns_action[static_cast<int>(d.match.action) % kDnsActions].add();
  c_->dns_list_blocked[list.slot % kDnsListSlots].add();
  Event* ev = cx_.newEvent();
  if (ev) {
    ev->type = EventType::kDns;
    ev->worker = static_cast<uint8_t>(cx_.opts.id);
    ev->in_side = in_side;
    ev->stage = Stage::kDns;
    ev->reason = d.cloaked ? DropReason::kDnsCloaked
                           : (d.outcome == DnsOutcome::kAnswered ? DropReason::kDnsAnswered
                                                                 : DropReason::kDnsDropped);
    ev->verdict = Verdict::kDrop;
    ev->rule = static_cast<uint32_t>(d.match.list);
    ev->generation = cx_.generation;
    ev->ts_ns = t;
    ev->ip_ver = static_cast<uint8_t>(pm.l3);
    ev->proto = pm.l4_proto;
    // The client: the query's sender, or the response's destination.
    ev->src = d.cloaked ? pm.dst : pm.src;
    ev->dst = d.cloaked ? pm.src : pm.dst;
    ev->sport = d.cloaked ? pm.dport : pm.sport;
    ev->dport = d.cloaked ? pm.sport : pm.dport;
    ev->vlan = pm.vlan_outer;
    size_t n = std::min<size_t>(d.name ? d.name->text_len : 0, sizeof(ev->dns_name) - 1);
    if (n) std::memcpy(ev->dns_name, d.name->text, n);
    size_t ln = std::min(list.name.size(), sizeof(ev->dns_list) - 1);
    std::memcpy(ev->dns_list, list.name.data(), ln);
    ev->dns_action = static_cast<uint8_t>(d.match.action);
    ev->dns_cloaked = d.cloaked;
    cx_.postEvent(ev);
  }
  return true;
}

bool DnsStage::dnsSend(rte_mbuf* m, const PacketMeta& pm, uint8_t in_side, bool onward,
                     const uint8_t* payload, uint32_t len, bool fin, bool syn) {
  if (!mayAnswer(rte_pktmbuf_mtod(m, const uint8_t*), pm)) {  // see dnsUdp
    c_->dns[kDnsAnswerNoMbuf].add();
    return false;
  }
  rte_mbuf* r = cx_.shared.pkt_pool ? rte_pktmbuf_alloc(cx_.shared.pkt_pool) : nullptr;
  if (r == nullptr || len > 65535) {
    if (r) rte_pktmbuf_free(r);
    c_->dns[kDnsAnswerNoMbuf].add();
    return false;
  }
  uint32_t flen = dnsBuildFrame(rte_pktmbuf_mtod(m, const uint8_t*), pm, !onward, payload,
                                static_cast<uint16_t>(len), fin, rte_pktmbuf_mtod(r, uint8_t*),
                                rte_pktmbuf_tailroom(r));
  if (flen == 0) {
    rte_pktmbuf_free(r);
    c_->dns[kDnsAnswerNoMbuf].add();
    return false;
  }
  if (syn) {
    // PSH|ACK -> SYN|ACK, the TCP checksum updated for the changed word (RFC 1624 eqn. 3).
    uint8_t* l4 = rte_pktmbuf_mtod(r, uint8_t*) + pm.l3_offset + (pm.l3 == L3Type::kIpv6 ? 40 : 20);
    const uint16_t old_w = uint16_t(l4[12] << 8 | l4[13]);
    l4[13] = kTcpSyn | kTcpAck;
    const uint16_t new_w = uint16_t(l4[12] << 8 | l4[13]);
    uint32_t sum = uint16_t(~(l4[16] << 8 | l4[17])) + uint16_t(~old_w) + new_w;
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    const uint16_t ck = uint16_t(~sum);
    l4[16] = uint8_t(ck >> 8);
    l4[17] = uint8_t(ck);
    sealTunnel(rte_pktmbuf_mtod(r, uint8_t*), flen, pm);  // checksums over the inner packet
  }
  r->data_len = static_cast<uint16_t>(flen);
  r->pkt_len = flen;
  cx_.queueGenerated(r, onward ? in_side ^ 1 : in_side, m);
  c_->dns[kDnsAnswersSent].add();
  return true;
}

void DnsStage::dnsUdp(rte_mbuf* m, uint16_t i, Burst& b, const rules::CompiledDns& dns) {
  const PacketMeta& pm = b.meta[i];
  const uint8_t* msg = rte_pktmbuf_mtod(m, const uint8_t*) + pm.payload_offset;
  uint32_t len = std::min<uint32_t>(pm.payload_len, m->data_len - pm.payload_offset);
  uint8_t* answer = dns_buf_.get();
  const DnsBurstScratch<kBurst>& bs = *dns_burst_;
  const int sl = bs.slot[i];  // prepared by dnsPrepare (always, by run())
  DnsDecision d;
  if (sl >= 0) {
    const bool looked_up = bs.nlabels[sl] > 0;
    d = dnsJudgeQuestion(dns, msg, len, bs.status[sl], bs.q[sl], looked_up ? &bs.match[sl] : nullptr,
                         *dns_scratch_, answer, kAnswerCap);
  } else {
    d = dnsJudge(dns, msg, len, *dns_scratch_, answer, kAnswerCap);
  }
  PacketVerdict& v = b.v[i];
  if (d.outcome == DnsOutcome::kAnswered &&
      !mayAnswer(rte_pktmbuf_mtod(m, const uint8_t*), pm)) {
    // Like a firewall reject: no answer to or from a broadcast, multicast, unspecified or
    // loopback address (IP or MAC); the message is still blocked, dropped unanswered.
    d.outcome = DnsOutcome::kDropped;
    c_->dns[kDnsAnswerNoMbuf].add();
  }
  if (!dnsAccount(d, dns, pm, v.in_side, b.ts[i])) return;
  v.verdict = Verdict::kDrop;
  v.stage = Stage::kDns;
  v.rule = static_cast<uint32_t>(d.match.list);
  if (d.outcome == DnsOutcome::kMalformed || d.outcome == DnsOutcome::kNonstandard) {
    v.reason = d.outcome == DnsOutcome::kMalformed ? DropReason::kDnsMalformed
                                                   : DropReason::kDnsNonstandard;
    v.rule = kNoRule;
    return;
  }
  v.reason = d.cloaked ? DropReason::kDnsCloaked
                       : (d.outcome == DnsOutcome::kAnswered ? DropReason::kDnsAnswered
                                                             : DropReason::kDnsDropped);
  if (d.outcome == DnsOutcome::kAnswered) dnsSend(m, pm, v.in_side, d.onward, answer, d.answer_len, false);
}

void DnsStage::dnsTcpRelease(DnsTcpFlow& f, bool resp) {
  if (f.head_slot) {
    if (resp) {
      dns_free_resps_[dns_nfree_resps_++] = f.head_slot;
    } else {
      dns_free_heads_[dns_nfree_heads_++] = f.head_slot;
    }
  }
  f.head_slot = 0;
  f.head_have = 0;
}

bool DnsStage::dnsTcpUnread(DnsTcpFlow& f, uint32_t msg_len, DnsCounter why,
                          const rules::CompiledDns& dns, bool& malformed_drop) {
  // A response that cannot be read whole: counted as malformed, the dns.malformed policy
  // decides (forward: skipped, the stream still followed; drop: the segment is dropped and
  // the connection closed).
  c_->dns[why].add();
  c_->dns[kDnsMessages].add();
  c_->dns[kDnsResponses].add();
  c_->dns[kDnsMalformed].add();
  if (dns.malformed == rules::Policy::kForward) {
    c_->dns[kDnsMalformedForwarded].add();
    f.msg_left = static_cast<uint16_t>(msg_len);
    return false;
  }
  malformed_drop = true;
  return true;
}

void DnsStage::dnsTcp(rte_mbuf* m, uint16_t i, Burst& b, const rules::CompiledDns& dns) {
  const PacketMeta& pm = b.meta[i];
  PacketVerdict& v = b.v[i];
  DnsTcpFlow* pair = &dns_tcp_[size_t(b.pos[i]) * 2];
  if (pair[0].state == 3) {  // closed by the appliance after an answer
    v.verdict = Verdict::kDrop;
    v.stage = Stage::kDns;
    v.reason = DropReason::kDnsTcpClosed;
    return;
  }
  if (!b.st_read[i] || b.st_len[i] == 0) return;  // nothing new in the stream
  // Client -> server bytes (toward the DNS port): queries. Server -> client: responses, read
  // for CNAME cloaking.
  bool resp;
  if (dns.isDnsPort(pm.dport)) {
    resp = false;
  } else if (dns.cname_cloaking) {
    resp = true;
  } else {
    return;
  }
  DnsTcpFlow& f = pair[resp ? 1 : 0];
  if (f.state == 2) return;
  c_->dns[kDnsTcpSegments].add();
  const uint8_t* p = b.st_data[i];
  const uint32_t n = b.st_len[i];
  if (b.st_gap[i]) {
    // Bytes before these reached the server uninspected (fail open, no room to keep bytes
    // beyond a hole): the message framing is lost; the connection passes unread.
    c_->dns[kDnsTcpUnsynced].add();
    f.state = 2;
    return;
  }
  // The stream is read from its first data byte; a connection picked up mid-stream may be
  // inside a message: not followed.
  bool midstream_drop = false;
  if (f.state == 0) {
    if (flows_->entry(b.pos[i]).flags & kFlowMidstream) {
      c_->dns[kDnsTcpUnsynced].add();
      if (dns.tcp_midstream != rules::Policy::kDrop) {
        f.state = 2;
        return;
      }
      // dns.tcp_midstream DROP: unread bytes never pass; the connection is closed below.
      midstream_drop = true;
    } else {
      f.state = 1;
    }
  }
  // The segment starts on a message boundary: what the peer got so far is whole messages.
  const bool at_boundary = f.msg_left == 0 && f.head_have == 0;

  // Judge every message completed in this segment: the whole message when it is all in the
  // segment, else its head (length + up to kDnsHeadBytes - 2 bytes, across segments).
  int nj = 0;
  int32_t first_list = -1;  // the list of the first block in the segment
  bool malformed_drop = false;
  bool exhausted = false;  // no head buffer, fail closed
  DropReason malformed_reason = DropReason::kDnsMalformed;  // or kDnsNonstandard
  bool blocked = false;
  uint8_t* answers = dns_buf_.get();
  uint32_t answers_len = 0;
  DnsScratch& s = *dns_scratch_;
  uint32_t off = 0;
  while (!midstream_drop && off < n) {
    if (f.msg_left) {
      uint32_t k = std::min<uint32_t>(f.msg_left, n - off);
      f.msg_left = static_cast<uint16_t>(f.msg_left - k);
      off += k;
      continue;
    }
    // Assemble the length and the head (queries) or the whole message (responses): straight
    // from the segment when it is all there, else in a buffer of the flow.
    const uint8_t* head;
    uint32_t msg_len, head_len;
    const uint32_t cap = resp ? kDnsRespBytes : kDnsHeadBytes;
    if (f.head_have == 0 && n - off >= 2) {
      msg_len = static_cast<uint32_t>(p[off] << 8 | p[off + 1]);
      head_len = n - off - 2 >= msg_len ? msg_len : std::min<uint32_t>(msg_len, cap - 2);
      if (n - off - 2 >= head_len) {
        head = p + off + 2;
        off += 2 + head_len;
        f.msg_left = static_cast<uint16_t>(msg_len - head_len);
        goto judge;
      }
      if (resp && msg_len > cap - 2) {
        off += 2;
        if (dnsTcpUnread(f, msg_len, kDnsTcpRespOverflow, dns, malformed_drop)) break;
        continue;
      }
    }
    {
      if (!f.head_slot) {
        uint8_t* free_list = resp ? dns_free_resps_ : dns_free_heads_;
        uint32_t& nfree = resp ? dns_nfree_resps_ : dns_nfree_heads_;
        if (nfree == 0) {
          if (resp) {
            // No buffer for this response: its length is read (from the segment or over the
            // next ones, without a buffer) only to skip it.
            if (n - off < 2) {
              c_->dns[kDnsTcpUnsynced].add();
              f.state = 2;
              return;
            }
            msg_len = static_cast<uint32_t>(p[off] << 8 | p[off + 1]);
            off += 2;
            if (dnsTcpUnread(f, msg_len, kDnsTcpNoBuffer, dns, malformed_drop)) break;
            continue;
          }
          // No buffer for a query's head: dataplane.tcp.dns_fail. Fail closed: the segment
          // is dropped and the connection closed (its bytes are in the stream already, a
          // retransmission would not be read again); fail open: the connection is passed
          // unread from here on.
          c_->dns[kDnsTcpNoBuffer].add();
          if (cx_.snap->dataplane.tcp_dns_fail == rules::Policy::kDrop) {
            exhausted = true;
            malformed_drop = true;
            break;
          }
          c_->dns[kDnsTcpUnsynced].add();
          f.state = 2;
          return;
        }
        f.head_slot = free_list[--nfree];
      }
      uint8_t* hb = (resp ? dns_resps_.get() : dns_heads_.get()) + size_t(f.head_slot - 1) * cap;
      // The length first, then the head (the whole response).
      uint32_t want = 2;
      if (f.head_have >= 2) {
        msg_len = static_cast<uint32_t>(hb[0] << 8 | hb[1]);
        want = 2 + std::min<uint32_t>(msg_len, cap - 2);
      }
      uint32_t k = std::min<uint32_t>(want - f.head_have, n - off);
      std::memcpy(hb + f.head_have, p + off, k);
      f.head_have = static_cast<uint16_t>(f.head_have + k);
      off += k;
      if (f.head_have < 2) continue;
      msg_len = static_cast<uint32_t>(hb[0] << 8 | hb[1]);
      if (resp && msg_len > cap - 2) {
        // Too long to reassemble (only its length is buffered so far).
        dnsTcpRelease(f, resp);
        if (dnsTcpUnread(f, msg_len, kDnsTcpRespOverflow, dns, malformed_drop)) break;
        continue;
      }
      head_len = std::min<uint32_t>(msg_len, cap - 2);
      if (f.head_have < 2 + head_len) continue;
      // Complete: judge from a copy (the slot goes back to the pool now).
      uint8_t* copy = resp ? answers + kDnsBufBytes : answers + kDnsBufBytes - kDnsHeadBytes;
      std::memcpy(copy, hb + 2, head_len);
      head = copy;
      dnsTcpRelease(f, resp);
      f.msg_left = static_cast<uint16_t>(msg_len - head_len);
    }
  judge:
    if (nj == kMaxTcpMessages) {
      c_->dns[kDnsNotInspected].add();
      continue;
    }
    {
      uint8_t one[kAnswerCap];
      DnsDecision d = dnsJudge(dns, head, head_len, s, one, sizeof(one));
      // A cut head of a longer message cannot hold a whole response: not inspected.
      if (d.outcome == DnsOutcome::kMalformed && head_len < msg_len && s.q.isResponse()) {
        d.outcome = DnsOutcome::kNotInspected;
      }
      // Only responses are judged on the server's side.
      if (resp && d.status == DnsMsgStatus::kOk && !s.q.isResponse()) {
        d.outcome = DnsOutcome::kNotInspected;
      }
      bool blocks = dnsAccount(d, dns, pm, v.in_side, b.ts[i]);
      ++nj;
      if (blocks && (d.outcome == DnsOutcome::kMalformed || d.outcome == DnsOutcome::kNonstandard)) {
        // Dropped by policy: the stream is broken for the server, close it too.
        if (!malformed_drop && d.outcome == DnsOutcome::kNonstandard) {
          malformed_reason = DropReason::kDnsNonstandard;
        }
        malformed_drop = true;
        continue;
      }
      if (blocks) {
        blocked = true;
        if (first_list < 0) first_list = d.match.list;
        if (d.outcome == DnsOutcome::kAnswered) {
          uint32_t before = answers_len;
          if (!dnsTcpAppend(one, d.answer_len, answers, kDnsBufBytes - kDnsHeadBytes, &answers_len)) {
            answers_len = before;
          }
        }
      } else if (d.status == DnsMsgStatus::kOk && s.q.isResponse() == resp) {
        // Other whole messages of the segment: SERVFAIL if the segment ends up dropped.
        DnsAnswerSpec fail;
        fail.rcode = 2;
        uint16_t al = dnsWriteAnswer(head, s.q, fail, one, sizeof(one));
        uint32_t before = answers_len;
        if (al && !dnsTcpAppend(one, al, answers, kDnsBufBytes - kDnsHeadBytes, &answers_len)) {
          answers_len = before;
        }
      }
    }
  }
  if (midstream_drop) {
    malformed_drop = true;
    malformed_reason = DropReason::kDnsTcpMidstream;
  }
  if (!blocked && !malformed_drop) return;
  // Drop the segment, answer the client (with FIN), reset the server, close the flow. Queries:
  // the answers go back to the sender (the client). Responses: onward to the client in place
  // of the segment's bytes (same sequence numbers), unless the client already holds part of a
  // message of this segment: then it gets a RST instead.
  v.verdict = Verdict::kDrop;
  v.stage = Stage::kDns;
  v.reason = exhausted ? DropReason::kTcpStreamExhausted
           : !blocked ? malformed_reason
                      : (resp ? DropReason::kDnsCloaked
                              : (answers_len ? DropReason::kDnsAnswered : DropReason::kDnsDropped));
  // A response segment that filled a hole carries kept bytes the client already has, past
  // the hole: a replacement cannot take their place, so the client gets a RST instead.
  if (!blocked || (resp && (!at_boundary || b.st_kept[i]))) answers_len = 0;
  v.rule = first_list >= 0 ? static_cast<uint32_t>(first_list) : kNoRule;
  if (answers_len) {
    // Sequence numbers from the stream engine: an answer to the client continues the
    // server's bytes (its next sequence number when the query arrived, which pipelined
    // answers may have moved past the query's ACK) and acknowledges the segment's end; a cloaked response's replacement
    // starts where the segment's new bytes start.
    PacketMeta am = pm;
    am.tcp_seq = b.st_seq[i];
    am.payload_len = b.st_len[i];
    if (!resp) {
      if (b.st_peer_known[i]) am.tcp_ack = b.st_peer_next[i];
      if ((pm.tcp_flags & kTcpSyn) && !(pm.tcp_flags & kTcpAck)) {
        // A query on a SYN (TCP Fast Open): the client is in SYN-SENT and takes no data
        // before a SYN-ACK. It gets one from the appliance (an ISN derived from the
        // client's), acknowledging the SYN and its data, then the answer after that ISN.
        const uint32_t isn = ~pm.tcp_seq ^ (uint32_t(pm.sport) << 16 | pm.dport);
        am.tcp_ack = isn;
        if (dnsSend(m, am, v.in_side, false, answers, 0, false, true)) am.tcp_ack = isn + 1;
        else answers_len = 0;
      }
    }
    if (answers_len) dnsSend(m, am, v.in_side, resp, answers, answers_len, true);
  }
  auto reset = [&](bool to_sender) {
    if (!(pm.tcp_flags & kTcpAck) || !cx_.shared.pkt_pool) return;
    rte_mbuf* r = rte_pktmbuf_alloc(cx_.shared.pkt_pool);
    if (!r) return;
    uint16_t len = buildTcpReset(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, pm, to_sender,
                                 rte_pktmbuf_mtod(r, uint8_t*), rte_pktmbuf_tailroom(r));
    if (len) {
      r->data_len = len;
      r->pkt_len = len;
      cx_.queueGenerated(r, to_sender ? v.in_side : v.in_side ^ 1, m);
      c_->dns[kDnsResetsSent].add();
    } else {
      rte_pktmbuf_free(r);
    }
  };
  reset(resp);  // the server: the segment's receiver (queries) or its sender (responses)
  if (resp && !answers_len) reset(false);  // the client, when it got no answer
  if (midstream_drop && !resp) reset(true);  // the client too: it reconnects, read from the start
  dnsReleaseFlow(b.pos[i]);
  pair[0].state = 3;
  cx_.closed[b.pos[i]] |= kClosedByDns;  // the stream stage stops reading it
  c_->dns[kDnsTcpClosed].add();
}

}  // namespace dpu::dp
