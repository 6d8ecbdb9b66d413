// Explain (Dataplane::explain, `dpuctl explain`): the worker's decisions for one packet on a
// snapshot, step by step. explain.cc does the loop's part (parse, fragments, flow) and asks
// each stage of the list for its part (StageSpec::explain), in order; the packet is taken as
// the first packet of a new flow, since flow tables belong to the workers.
#pragma once

#include <cstdint>
#include <string>

#include "dataplane/api/control.h"
#include "dataplane/packet/packet_meta.h"
#include "rules/compiled/snapshot.h"

namespace dpu::dp {

struct ExplainInput {
  const rules::Snapshot& snap;
  const uint8_t* frame;
  uint32_t len;
  const PacketMeta& meta;  // parsed
  uint8_t side;
  bool tracked;  // the packet would get a flow (not a stray TCP reset)
  const CountryLookup* countries;  // GeoIP, or nullptr
};

// A stage's part of explain: appends its steps to r; true when it ends the trace (a drop,
// a reject: r.verdict set).
using StageExplain = bool (*)(const ExplainInput& in, ExplainResult& r);

// Helpers of the stages' explain parts.
void explainStep(ExplainResult& r, Stage st, std::string decision, std::string detail);
void explainDrop(ExplainResult& r, Stage st, Verdict verdict, DropReason reason, uint32_t rule,
                 std::string decision, std::string detail);
// An address as text (inet_ntop).
std::string explainAddr(const IpAddr& a, L3Type l3);
// The payload the stages read (inside the frame).
bool explainPayload(const PacketMeta& m, uint32_t len, const uint8_t* frame, const uint8_t** p,
                    uint32_t* n);

}  // namespace dpu::dp
