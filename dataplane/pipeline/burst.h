// Per-burst scratch of a worker, read and written by the loop and the stages (through the
// PathContext): indexed by the packet's position in the burst.
#pragma once

#include <cstdint>

#include "dataplane/flow/flow_key.h"
#include "dataplane/packet/packet_meta.h"
#include "dataplane/pipeline/verdict.h"

struct rte_mbuf;

namespace dpu::dp {

constexpr uint16_t kBurst = 32;

struct Burst {
  PacketMeta meta[kBurst];
  PacketVerdict v[kBurst];
  FlowKey keys[kBurst];
  const FlowKey* kp[kBurst];
  uint32_t ksig[kBurst];     // FlowTable::hashOf(*kp[j]), by flow-stage index like kp
  uint32_t sig[kBurst];      // FlowTable::hashOf(keys[i]), by packet index
  uint8_t flow_idx[kBurst];  // packets of the current segment going to the flow stage
  bool src_is_hi[kBurst];
  int32_t pos[kBurst];       // flow-table position after the flow stage; -1 = untracked
  uint8_t dir[kBurst];       // 0: initiator -> responder, 1: the other way (tracked only)
  int32_t frag_slot[kBurst];  // a first fragment to judge: its datagram's slot; else -1
  int32_t frag_follow[kBurst];  // a fragment given its datagram's verdict: the slot; else -1
  // What the stages judge for packet i (FragStage): the packet itself; the reassembled
  // datagram (an mbuf of the reassembly pool) that packet i completed (every fragment of
  // datagram reasm_slot[i] gets the verdict); or, after a reassembly failed open, the
  // datagram's held first fragment judged in packet i's place.
  enum Judge : uint8_t { kJudgeSelf = 0, kJudgeDatagram, kJudgeFirstFragment };
  rte_mbuf* work[kBurst];
  int32_t reasm_slot[kBurst];
  uint8_t judge[kBurst];
  uint64_t ts[kBurst];
  // Set by the stream stage: the new in-order stream bytes packet i carries are
  // st_data[0, st_len) at sequence number st_seq (st_read), else unset - a part of its
  // payload, or, when it filled a hole (st_kept), its bytes and the kept ones behind it out
  // of the engine's reorder buffer (valid until the stream stage's next run); st_fin: the
  // direction's FIN is at st_seq + st_len; st_gap: bytes before st_seq reached the receiver
  // uninspected (fail open). The other direction's next sequence number when this packet
  // was read (st_peer_known): the stages run after the engine has read the whole burst
  // segment, so a stage answering on the connection takes it from here, not from the
  // engine's current state.
  bool st_read[kBurst];
  bool st_peer_known[kBurst];
  bool st_kept[kBurst], st_fin[kBurst], st_gap[kBurst];
  const uint8_t* st_data[kBurst];
  uint32_t st_len[kBurst];
  uint32_t st_seq[kBurst];
  uint32_t st_peer_next[kBurst];
  // Hold-back flags of packet i (reset by the loop; set by a stage that holds packets back,
  // read by it at finish: PathContext::holder).
  enum Hold : uint8_t { kHoldWanted = 1, kHoldRead = 2, kHoldNewBytes = 4, kHoldFin = 8,
                       // TCP hold mode (the stream stage, PathContext::tcp_holder): a segment
                       // kept beyond a hole, to hold; one accepted while its direction holds
                       // packets (it may have made them in order).
                       kHoldTcpKeep = 16, kHoldTcpAccepted = 32 };
  uint8_t hold[kBurst];
  uint32_t nflow = 0;
};

}  // namespace dpu::dp
