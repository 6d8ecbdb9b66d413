// Minimal TCP connection tracking for a bump-in-the-wire: enough to pick the
// right idle timeout and to know when a connection is over. Not a window checker.
#pragma once

#include <cstdint>

namespace dpu::dp {

enum class TcpState : uint8_t {
  kNone = 0,        // not TCP
  kSynSent,         // initiator sent SYN
  kSynReceived,     // responder answered SYN+ACK
  kEstablished,     // handshake done (or picked up mid-stream)
  kFinWait,         // one side sent FIN
  kClosing,         // both sides sent FIN
  kClosed,          // RST seen, or both FINs acknowledged
  kCount
};

const char* tcpStateName(TcpState s);

}  // namespace dpu::dp
