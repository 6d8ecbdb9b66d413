// --- flows view / capture --- ListFlows and CapturePackets of dpu.v1.Appliance.
#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "control/api/appliance_service.h"
#include "control/api/flow_query.h"

namespace dpu::ctl {

namespace {

// How long a worker may take to walk its table (it walks a slice per loop: milliseconds
// normally; a stopped worker never finishes).
constexpr uint32_t kFlowWalkTimeoutMs = 30000;
constexpr uint32_t kMaxCaptureCount = 1000000;

}  // namespace

grpc::Status ApplianceService::ListFlows(grpc::ServerContext* ctx,
                                         const v1::ListFlowsRequest* req,
                                         v1::ListFlowsResponse* resp) {
  auto q = parseFlowQuery(*req);
  if (!q.ok()) return toGrpc(q.status());
  auto first = plane_->listFlows(kFlowWalkTimeoutMs);
  if (!first.ok()) return toGrpc(first.status());
  if (q->window_ms == 0) {
    fillFlows(*q, *first, nullptr, opts_.wall_offset_ns, resp);
    return grpc::Status::OK;
  }
  if (!waitFor(ctx, std::chrono::milliseconds(q->window_ms))) {
    return shutting_down_.load() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down")
                                 : grpc::Status::CANCELLED;
  }
  auto second = plane_->listFlows(kFlowWalkTimeoutMs);
  if (!second.ok()) return toGrpc(second.status());
  fillFlows(*q, *second, &*first, opts_.wall_offset_ns, resp);
  return grpc::Status::OK;
}

grpc::Status ApplianceService::CapturePackets(grpc::ServerContext* ctx,
                                              const v1::CaptureRequest* req,
                                              grpc::ServerWriter<v1::CapturedPacket>* writer) {
  dp::CaptureSpec spec;
  spec.drops = req->drops();
  spec.rule = req->rule();
  if (spec.drops == !spec.rule.empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "give either drops or rule (exactly one)");
  }
  if (!req->reason().empty()) {
    if (!spec.drops) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "reason: goes with drops");
    }
    auto r = parseDropReason(req->reason());
    if (!r.ok()) return toGrpc(r.status());
    spec.any_reason = false;
    spec.reason = *r;
  }
  if (req->count() > kMaxCaptureCount) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("count: ", req->count(), " is out of range [1, ",
                                     kMaxCaptureCount, "] (0 = until duration_ms or cancel)"));
  }
  if (absl::Status st = plane_->armCapture(spec); !st.ok()) return toGrpc(st);
  struct Disarm {
    dp::DataplaneControl* p;
    ~Disarm() { p->disarmCapture(); }
  } disarm{plane_};
  writer->SendInitialMetadata();  // the client knows the capture is armed
  const auto start = std::chrono::steady_clock::now();
  const uint64_t want = req->count();
  uint64_t sent = 0, lost = 0;
  std::vector<dp::CapturedPacket> pkts;
  while (!shutting_down_.load() && !ctx->IsCancelled() && (want == 0 || sent < want)) {
    if (req->duration_ms() != 0 &&
        std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(req->duration_ms())) {
      break;
    }
    pkts.clear();
    const uint32_t max = want ? static_cast<uint32_t>(std::min<uint64_t>(256, want - sent)) : 256;
    plane_->readCapture(&pkts, max, &lost);
    if (pkts.empty()) {
      waitFor(ctx, std::chrono::milliseconds(10));
      continue;
    }
    for (const auto& p : pkts) {
      v1::CapturedPacket o;
      o.set_timestamp_unix_ns(static_cast<int64_t>(p.ts_ns) + opts_.wall_offset_ns);
      o.set_orig_len(p.orig_len);
      o.set_data(p.data.data(), p.data.size());
      o.set_worker(p.worker);
      o.set_in_iface(dp::sideName(p.in_side));
      o.set_verdict(dp::verdictName(p.verdict));
      if (p.stage != dp::Stage::kNone) o.set_stage(dp::stageName(p.stage));
      if (p.reason != dp::DropReason::kNone) o.set_reason(dp::dropReasonName(p.reason));
      o.set_lost(lost);
      lost = 0;
      if (!writer->Write(o)) return grpc::Status::CANCELLED;  // client gone
      ++sent;
    }
  }
  if (shutting_down_.load()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down");
  if (ctx->IsCancelled()) return grpc::Status::CANCELLED;
  return grpc::Status::OK;
}

}  // namespace dpu::ctl
