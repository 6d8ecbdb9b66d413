// TCP connection tracking and per-state idle timeouts. See tcp_state.h / flow_table.h.
#include "dataplane/flow/tcp_state.h"

#include "dataplane/flow/flow_table.h"

namespace dpu::dp {

namespace {

constexpr uint8_t kIpProtoIcmp = 1;
constexpr uint8_t kIpProtoTcp = 6;
constexpr uint8_t kIpProtoUdp = 17;
constexpr uint8_t kIpProtoIcmpv6 = 58;

}  // namespace

const char* tcpStateName(TcpState s) {
  switch (s) {
    case TcpState::kNone: return "none";
    case TcpState::kSynSent: return "syn_sent";
    case TcpState::kSynReceived: return "syn_received";
    case TcpState::kEstablished: return "established";
    case TcpState::kFinWait: return "fin_wait";
    case TcpState::kClosing: return "closing";
    case TcpState::kClosed: return "closed";
    case TcpState::kCount: break;
  }
  return "unknown";
}

// Transitions (dir 0 = initiator):
//   any RST                                    -> kClosed
//   kNone/kSynSent   + SYN (no ACK), dir 0     -> kSynSent
//   kSynSent         + SYN+ACK, dir 1          -> kSynReceived
//   kSynReceived     + ACK (no SYN), dir 0     -> kEstablished
//   kClosed          + SYN (no ACK), dir 0     -> kSynSent, FIN flags cleared (port reuse)
//   FIN from a side (states kSynSent..kClosing) sets kFlowFinOrig / kFlowFinReply, then
//     one FIN seen -> kFinWait, both -> kClosing
//   kClosing (both FINs seen before this packet) + ACK without FIN -> kClosed
// Anything else leaves the state alone (data in kEstablished stays kEstablished; a
// retransmitted FIN in kClosing stays kClosing; kClosed only leaves on a new SYN).
void tcpAdvance(FlowEntry& e, uint8_t tcp_flags, int dir) {
  if (tcp_flags & kTcpRst) {
    e.tcp_state = TcpState::kClosed;
    return;
  }
  const uint8_t syn_ack = tcp_flags & (kTcpSyn | kTcpAck);
  const bool pure_syn = syn_ack == kTcpSyn;
  TcpState s = e.tcp_state;

  switch (s) {
    case TcpState::kNone:
      if (pure_syn && dir == 0) s = TcpState::kSynSent;
      break;
    case TcpState::kSynSent:
      if (syn_ack == (kTcpSyn | kTcpAck) && dir == 1) s = TcpState::kSynReceived;
      break;
    case TcpState::kSynReceived:
      if (syn_ack == kTcpAck && dir == 0) s = TcpState::kEstablished;
      break;
    case TcpState::kClosing:
      if ((tcp_flags & kTcpAck) && !(tcp_flags & kTcpFin)) {
        e.tcp_state = TcpState::kClosed;
        return;
      }
      break;
    case TcpState::kClosed:
      if (pure_syn && dir == 0) {
        e.flags &= static_cast<uint8_t>(~(kFlowFinOrig | kFlowFinReply));
        e.tcp_state = TcpState::kSynSent;
      }
      return;
    case TcpState::kEstablished:
    case TcpState::kFinWait:
    case TcpState::kCount:
      break;
  }

  if ((tcp_flags & kTcpFin) && s != TcpState::kNone) {
    e.flags |= dir == 0 ? kFlowFinOrig : kFlowFinReply;
    const uint8_t both = kFlowFinOrig | kFlowFinReply;
    s = (e.flags & both) == both ? TcpState::kClosing : TcpState::kFinWait;
  }
  e.tcp_state = s;
}

uint64_t flowTimeout(const FlowEntry& e, const FlowTimeouts& t) {
  switch (e.proto) {
    case kIpProtoTcp:
      switch (e.tcp_state) {
        case TcpState::kEstablished: return t.tcp_established_ns;
        case TcpState::kFinWait:
        case TcpState::kClosing: return t.tcp_closing_ns;
        case TcpState::kClosed: return t.tcp_closed_ns;
        case TcpState::kNone:
        case TcpState::kSynSent:
        case TcpState::kSynReceived:
        case TcpState::kCount: return t.tcp_syn_ns;
      }
      return t.tcp_syn_ns;
    case kIpProtoUdp: return t.udp_ns;
    case kIpProtoIcmp:
    case kIpProtoIcmpv6: return t.icmp_ns;
    default: return t.other_ns;
  }
}

}  // namespace dpu::dp
