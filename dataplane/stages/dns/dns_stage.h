// DNS filtering as a stage (docs/dns.md; the decisions are dns_filter.h, the message
// parser and answer writer dns_message.h): UDP messages and the TCP stream bytes of DNS
// ports, blocked queries answered, cloaked responses replaced (see dns_stage.cc).
#pragma once

#include <cstdint>
#include <memory>

#include "dataplane/pipeline/stage.h"
#include "dataplane/stages/dns/dns_filter.h"

namespace dpu::dp {

class DnsStage final : public PathStage {
 public:
  explicit DnsStage(PathContext& cx);
  static absl::StatusOr<std::unique_ptr<PathStage>> make(PathContext& cx,
                                                         const rules::DataplaneSettings& s);

  static bool explain(const ExplainInput& in, ExplainResult& r);  // explain.h

  bool refresh() override;  // true while DNS filtering is configured
  void run(uint16_t from, uint16_t to) override;
  void flowEnded(int32_t pos) override;

 private:
  // Per-flow DNS-over-TCP stream state, by flow position: [2 * pos] client -> server bytes
  // (its state 3 = the connection closed by us), [2 * pos + 1] server -> client (cloaking);
  // and per-worker pools (allocated at create) of buffers for messages split across
  // segments: query heads (kDnsHeadBytes) and whole responses (kDnsRespBytes).
  // The bytes come in order, once, from the stream stage (Burst::st_*).
  struct DnsTcpFlow {
    uint16_t msg_left;   // bytes of the current message still to pass (head judged)
    uint16_t head_have;  // bytes of length prefix + message buffered in head_slot
    uint8_t state;       // 0 none, 1 read, 2 not read (mid-stream / no buffer), 3 closed by us
    uint8_t head_slot;   // 1 + index into dns_heads_ (client -> server) or dns_resps_
                         // (server -> client), 0 = none
  };
  static constexpr uint32_t kDnsHeadBytes = 2 + 300;  // length + header + question (<= 271)
  static constexpr uint32_t kDnsHeadSlots = 255;  // none free: dataplane.tcp.dns_fail
  // A response split across segments is reassembled whole (length + message) to be read for
  // CNAME cloaking; a longer one (dns_tcp_response_overflow) or one that finds no free
  // buffer (dns_tcp_no_buffer) is handled by the dns.malformed policy.
  static constexpr uint32_t kDnsRespBytes = 2 + 4094;
  static constexpr uint32_t kDnsRespSlots = 64;

  // The UDP DNS messages of packets [from, to): questions parsed and names looked up as one
  // burst (dns_burst_), read back by dnsUdp.
  void dnsPrepare(rte_mbuf** pkts, Burst& b, uint16_t from, uint16_t to,
                  const rules::CompiledDns& dns);
  // Judges packet i (UDP / TCP to or from a DNS port) and sets its verdict when it blocks.
  void dnsStage(rte_mbuf* m, uint16_t i, Burst& b, const rules::CompiledDns& dns);
  void dnsUdp(rte_mbuf* m, uint16_t i, Burst& b, const rules::CompiledDns& dns);
  void dnsTcp(rte_mbuf* m, uint16_t i, Burst& b, const rules::CompiledDns& dns);
  // Counts a decision, emits its block event; true when the message is blocked.
  bool dnsAccount(const DnsDecision& d, const rules::CompiledDns& dns,
                  const PacketMeta& pm, uint8_t in_side, uint64_t t);
  // Sends `payload` (a DNS message over UDP, stream bytes over TCP) as a frame built from
  // packet `m` as described by `pm` (its sequence numbers may be adjusted); `syn`: a TCP
  // SYN-ACK instead of PSH|ACK. False (counted) when no mbuf or no room.
  bool dnsSend(rte_mbuf* m, const PacketMeta& pm, uint8_t in_side, bool onward,
               const uint8_t* payload, uint32_t len, bool fin, bool syn = false);
  void dnsReleaseFlow(int32_t pos);
  void dnsTcpRelease(DnsTcpFlow& f, bool resp);  // gives its buffer back
  // A response of msg_len bytes that cannot be reassembled (`why`): the malformed policy;
  // forward skips it (false), drop sets malformed_drop (true: stop reading the segment).
  bool dnsTcpUnread(DnsTcpFlow& f, uint32_t msg_len, DnsCounter why,
                    const rules::CompiledDns& dns, bool& malformed_drop);

  WorkerCounters* const c_;
  FlowTable* const flows_;
  const rules::CompiledDns* dns_ = nullptr;  // the current snapshot's
  std::unique_ptr<DnsTcpFlow[]> dns_tcp_;
  std::unique_ptr<uint8_t[]> dns_heads_;      // kDnsHeadSlots * kDnsHeadBytes
  uint8_t dns_free_heads_[kDnsHeadSlots];
  uint32_t dns_nfree_heads_ = 0;
  std::unique_ptr<uint8_t[]> dns_resps_;      // kDnsRespSlots * kDnsRespBytes
  uint8_t dns_free_resps_[kDnsRespSlots];
  uint32_t dns_nfree_resps_ = 0;
  std::unique_ptr<DnsBurstScratch<kBurst>> dns_burst_;
  std::unique_ptr<DnsScratch> dns_scratch_;
  std::unique_ptr<uint8_t[]> dns_buf_;        // answers and TCP stream payloads (8 KB)
};

}  // namespace dpu::dp
