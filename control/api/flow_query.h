// --- flows view --- ListFlows without gRPC or DPDK: the request checked into a FlowQuery,
// flows matched, sorted and paged, the answer filled (testable on FlowInfo built in code).
//
// Top talkers (window): two listings `before` and `after`; a flow of `after` is the same
// flow as one of `before` when worker, flow id and first packet time agree. Its window
// counts are after - before (all of after when it is new), its rates those counts over the
// window measured on the worker's clock (after.now_ns - before.now_ns). Flows that ended
// within the window are not in `after` and not listed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "dataplane/api/flow_view.h"
#include "proto/appliance_api.pb.h"
#include "rules/model/firewall.h"

namespace dpu::ctl {

enum class FlowSort : uint8_t { kNone, kPackets, kBytes, kAge, kLastSeen };

struct FlowQuery {
  std::optional<rules::IpPrefix> address, src, dst;
  uint16_t port = 0, src_port = 0, dst_port = 0;  // 0 = any
  std::optional<uint8_t> proto;
  std::optional<dp::TcpState> state;
  std::optional<dp::Verdict> verdict;
  std::string rule, backend, service;  // "" = any
  std::optional<uint16_t> vlan;
  std::optional<uint32_t> tunnel_id;
  FlowSort sort = FlowSort::kNone;
  bool ascending = false;
  uint32_t limit = 0, offset = 0;
  uint32_t window_ms = 0;
};

constexpr uint32_t kMinFlowWindowMs = 100;
constexpr uint32_t kMaxFlowWindowMs = 600000;

// INVALID_ARGUMENT naming the field ("filter.src: ...") for a value that does not parse.
absl::StatusOr<FlowQuery> parseFlowQuery(const v1::ListFlowsRequest& req);

bool flowMatches(const FlowQuery& q, const dp::FlowInfo& f);

// Fills `out` from `after` (and `before` for a window): filter, sort (ties by worker and
// flow id, so pages do not overlap), offset / limit. `wall_offset_ns` turns worker times
// into Unix time.
void fillFlows(const FlowQuery& q, const dp::FlowListing& after, const dp::FlowListing* before,
               int64_t wall_offset_ns, v1::ListFlowsResponse* out);

// The drop reason named `name` (dropReasonName), or INVALID_ARGUMENT listing the names.
absl::StatusOr<dp::DropReason> parseDropReason(const std::string& name);

}  // namespace dpu::ctl
