// --- lb --- The load balancer RPCs of dpu.v1.Appliance: backend edits of the committed
// document (applied like UpdateConfig) and the listing with table shares and counters.
#include <chrono>
#include <map>

#include "absl/strings/str_cat.h"
#include "control/api/appliance_service.h"
#include "control/api/lb_drain.h"
#include "control/app/summary.h"
#include "rules/compiled/lb.h"

namespace dpu::ctl {
namespace {

v1::LbServiceConfig* findService(v1::ApplianceConfig& doc, const std::string& id) {
  for (auto& s : *doc.mutable_lb()->mutable_services()) {
    if (s.id() == id) return &s;
  }
  return nullptr;
}

int findBackend(const v1::LbServiceConfig& s, const std::string& id) {
  for (int i = 0; i < s.backends_size(); ++i) {
    if (s.backends(i).id() == id) return i;
  }
  return -1;
}

absl::Status noService(const std::string& id) {
  return absl::NotFoundError(absl::StrCat("no lb service with id '", id, "'"));
}
absl::Status noBackend(const std::string& svc, const std::string& id) {
  return absl::NotFoundError(absl::StrCat("lb service '", svc, "' has no backend '", id, "'"));
}

const char* stateName(v1::LbBackendState s) {
  switch (s) {
    case v1::LB_BACKEND_ACTIVE: return "active";
    case v1::LB_BACKEND_DRAINING: return "draining";
    case v1::LB_BACKEND_DOWN: return "down";
    default: return "?";
  }
}

const char* orphansName(v1::LbOrphanPolicy p) {
  switch (p) {
    case v1::LB_ORPHANS_RESET: return "reset";
    case v1::LB_ORPHANS_REHASH_OR_RESET: return "rehash_or_reset";
    default: return "rehash";
  }
}

}  // namespace

grpc::Status ApplianceService::AddLbBackend(grpc::ServerContext*,
                                            const v1::AddLbBackendRequest* req,
                                            v1::ApplyConfigResponse* resp) {
  if (req->service_id().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "service_id: required");
  }
  if (req->backend().id().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "backend.id: required");
  }
  auto mutate = [&](v1::ApplianceConfig& doc) -> absl::Status {
    v1::LbServiceConfig* s = findService(doc, req->service_id());
    if (s == nullptr) return noService(req->service_id());
    if (int i = findBackend(*s, req->backend().id()); i >= 0) {
      return absl::AlreadyExistsError(absl::StrCat("lb service '", s->id(), "' already has backend '",
                                                   req->backend().id(), "' (backends[", i, "])"));
    }
    *s->add_backends() = req->backend();
    return absl::OkStatus();
  };
  grpc::Status st = updateWith(mutate, req->expected_version(), req->force(), resp);
  if (st.ok() && events_) {
    events_->publish(lbEvent("add", req->service_id(), req->backend().id(), resp->version(), ""));
  }
  return st;
}

grpc::Status ApplianceService::RemoveLbBackend(grpc::ServerContext*,
                                               const v1::RemoveLbBackendRequest* req,
                                               v1::ApplyConfigResponse* resp) {
  if (!v1::LbRemoveMode_IsValid(req->mode()) || !v1::LbOrphanPolicy_IsValid(req->flows())) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "mode / flows: unknown value");
  }
  auto mutate = [&](v1::ApplianceConfig& doc) -> absl::Status {
    v1::LbServiceConfig* s = findService(doc, req->service_id());
    if (s == nullptr) return noService(req->service_id());
    int i = findBackend(*s, req->backend_id());
    if (i < 0) return noBackend(s->id(), req->backend_id());
    if (req->mode() == v1::LB_REMOVE_DRAIN) {
      s->mutable_backends(i)->set_state(v1::LB_BACKEND_DRAINING);
    } else {
      if (s->backends_size() == 1 && !req->allow_empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "'", req->backend_id(), "' is the last backend of lb service '", s->id(),
            "': without it every new flow is dropped (lb_no_backend); flush it with "
            "allow_empty (dpuctl: --allow-empty)"));
      }
      s->mutable_backends()->DeleteSubrange(i, 1);
      s->set_orphans(req->flows());
    }
    return absl::OkStatus();
  };
  grpc::Status st = updateWith(mutate, req->expected_version(), req->force(), resp);
  if (st.ok() && events_) {
    const bool drain = req->mode() == v1::LB_REMOVE_DRAIN;
    events_->publish(lbEvent(drain ? "drain" : "flush", req->service_id(), req->backend_id(),
                             resp->version(),
                             drain ? "" : absl::StrCat(",\"flows\":\"", orphansName(req->flows()),
                                                       "\"")));
  }
  return st;
}

grpc::Status ApplianceService::SetLbBackend(grpc::ServerContext*,
                                            const v1::SetLbBackendRequest* req,
                                            v1::ApplyConfigResponse* resp) {
  if (!req->has_weight() && !req->has_state()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "weight or state: required");
  }
  if (req->has_state() && !v1::LbBackendState_IsValid(req->state())) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "state: unknown value");
  }
  auto mutate = [&](v1::ApplianceConfig& doc) -> absl::Status {
    v1::LbServiceConfig* s = findService(doc, req->service_id());
    if (s == nullptr) return noService(req->service_id());
    int i = findBackend(*s, req->backend_id());
    if (i < 0) return noBackend(s->id(), req->backend_id());
    v1::LbBackendConfig* b = s->mutable_backends(i);
    if (req->has_weight()) b->set_weight(req->weight());
    if (req->has_state()) b->set_state(req->state());
    return absl::OkStatus();
  };
  grpc::Status st = updateWith(mutate, req->expected_version(), req->force(), resp);
  if (st.ok() && events_) {
    std::string extra;
    if (req->has_weight()) absl::StrAppend(&extra, ",\"weight\":", req->weight());
    if (req->has_state()) absl::StrAppend(&extra, ",\"state\":\"", stateName(req->state()), "\"");
    events_->publish(lbEvent("set", req->service_id(), req->backend_id(), resp->version(), extra));
  }
  return st;
}

grpc::Status ApplianceService::CreateLbService(grpc::ServerContext*,
                                               const v1::CreateLbServiceRequest* req,
                                               v1::ApplyConfigResponse* resp) {
  if (req->service().id().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "service.id: required");
  }
  auto mutate = [&](v1::ApplianceConfig& doc) -> absl::Status {
    if (findService(doc, req->service().id()) != nullptr) {
      return absl::AlreadyExistsError(
          absl::StrCat("an lb service with id '", req->service().id(), "' exists already"));
    }
    auto* services = doc.mutable_lb()->mutable_services();
    const int n = services->size();
    int at = n;
    switch (req->position_case()) {
      case v1::CreateLbServiceRequest::kIndex:
        if (req->index() > uint32_t(n)) {
          return absl::InvalidArgumentError(
              absl::StrCat("index: ", req->index(), " is past the end (", n, " service(s))"));
        }
        at = int(req->index());
        break;
      case v1::CreateLbServiceRequest::kBeforeId:
      case v1::CreateLbServiceRequest::kAfterId: {
        const bool before = req->position_case() == v1::CreateLbServiceRequest::kBeforeId;
        const std::string& id = before ? req->before_id() : req->after_id();
        at = -1;
        for (int k = 0; k < n; ++k) {
          if (services->Get(k).id() == id) at = before ? k : k + 1;
        }
        if (at < 0) return noService(id);
        break;
      }
      default:
        break;
    }
    *services->Add() = req->service();
    for (int k = n; k > at; --k) services->SwapElements(k, k - 1);
    return absl::OkStatus();
  };
  grpc::Status st = updateWith(mutate, req->expected_version(), req->force(), resp);
  if (st.ok() && events_) {
    events_->publish(lbEvent("create", req->service().id(), "", resp->version(), ""));
  }
  return st;
}

grpc::Status ApplianceService::DeleteLbService(grpc::ServerContext*,
                                               const v1::DeleteLbServiceRequest* req,
                                               v1::ApplyConfigResponse* resp) {
  if (req->id().empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "id: required");
  auto mutate = [&](v1::ApplianceConfig& doc) -> absl::Status {
    auto* services = doc.mutable_lb()->mutable_services();
    for (int k = 0; k < services->size(); ++k) {
      if (services->Get(k).id() == req->id()) {
        services->DeleteSubrange(k, 1);
        return absl::OkStatus();
      }
    }
    return noService(req->id());
  };
  grpc::Status st = updateWith(mutate, req->expected_version(), req->force(), resp);
  if (st.ok() && events_) events_->publish(lbEvent("delete", req->id(), "", resp->version(), ""));
  return st;
}

grpc::Status ApplianceService::ListLbServices(grpc::ServerContext*,
                                              const v1::ListLbServicesRequest*,
                                              v1::ListLbServicesResponse* resp) {
  auto view = config_->lbView();
  if (!view.ok()) return toGrpc(view.status());
  // The document as written (addresses as the operator spelled them); an apply between the
  // two reads only means a backend's written form may be missing from this answer.
  v1::ApplianceConfig doc = config_->current();
  std::map<uint64_t, dp::LbBackendStats> stats;
  for (const auto& s : plane_->lbBackendStats()) stats.emplace(s.identity, s);
  resp->set_config_version(view->version);
  for (const auto& svc : view->compiled->services) {
    v1::LbServiceStatus* out = resp->add_services();
    const v1::LbServiceConfig* written = findService(doc, svc->model.id);
    if (written) {
      *out->mutable_service() = *written;
      out->mutable_service()->clear_backends();
    } else {
      out->mutable_service()->set_id(svc->model.id);
    }
    out->set_table_size(svc->table_size);
    std::vector<uint32_t> slots(svc->backends.size(), 0);
    for (uint16_t b : svc->table) slots[b]++;
    for (size_t i = 0; i < svc->backends.size(); ++i) {
      const rules::CompiledLbBackend& b = svc->backends[i];
      v1::LbBackendStatus* bs = out->add_backends();
      if (written) {
        if (int k = findBackend(*written, b.id); k >= 0) *bs->mutable_backend() = written->backends(k);
      }
      bs->mutable_backend()->set_id(b.id);
      bs->set_table_slots(slots[i]);
      if (auto it = stats.find(b.identity); it != stats.end()) {
        bs->set_packets(it->second.packets);
        bs->set_bytes(it->second.bytes);
        bs->set_active_flows(it->second.flows_active);
        bs->set_total_flows(it->second.flows_total);
      }
    }
  }
  return grpc::Status::OK;
}

}  // namespace dpu::ctl
