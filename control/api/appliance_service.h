// dpu.v1.Appliance (proto/appliance_api.proto) over the ConfigManager (every config change)
// and DataplaneControl (status, counters, explain). Events come from the EventHub.
//
// Errors: absl status codes map one to one onto gRPC codes. An invalid configuration is
// INVALID_ARGUMENT whose binary details (grpc-status-details-bin) hold a serialized
// dpu.v1.RpcStatus (wire-compatible with google.rpc.Status) with one Any packing a
// dpu.v1.ConfigErrors that lists every error.
//
// Threads: gRPC's sync server calls the handlers on its own threads; the handlers share
// only the manager (serialized inside), the dataplane control interface (thread-safe for
// control threads) and the hub.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "control/api/event_hub.h"
#include "control/config/config_manager.h"
#include "control/progress/progress_registry.h"
#include "dataplane/api/control.h"
#include "proto/appliance_api.grpc.pb.h"
#include "proto/fleet.pb.h"

namespace dpu::ctl {

struct ServiceOptions {
  std::string state_dir;  // reported by GetStatus
  // Added to dataplane times (rule counters' last hit) to get Unix time (as EventHubOptions).
  int64_t wall_offset_ns = 0;
  // Long work in progress (GetStatus / GetStats `tasks`); optional.
  const ProgressRegistry* progress = nullptr;
  // --- fleet --- Fills GetStatus `fleet` when the appliance follows a fleet; optional.
  std::function<void(v1::FleetAgentStatus*)> fleet_status = nullptr;
};

class ApplianceService final : public v1::Appliance::Service {
 public:
  // Registers a "config" event on the hub for every successful apply (setOnApplied).
  ApplianceService(ConfigManager* config, dp::DataplaneControl* plane, EventHub* events,
                   ServiceOptions opts);
  ~ApplianceService() override;

  // Ends the streaming calls (WatchStats, WatchEvents) within ~100 ms; call before
  // grpc::Server::Shutdown so it does not wait for its deadline.
  void beginShutdown();
  const std::string& instanceId() const { return instance_id_; }
  // What GetStats returns (for in-process readers such as the metrics endpoint).
  void collectStats(v1::Stats* out) const { fillStats(out); }

  grpc::Status GetStatus(grpc::ServerContext* ctx, const v1::GetStatusRequest* req,
                         v1::StatusResponse* resp) override;
  grpc::Status GetConfig(grpc::ServerContext* ctx, const v1::GetConfigRequest* req,
                         v1::GetConfigResponse* resp) override;
  grpc::Status ApplyConfig(grpc::ServerContext* ctx, const v1::ApplyConfigRequest* req,
                           v1::ApplyConfigResponse* resp) override;
  grpc::Status UpdateConfig(grpc::ServerContext* ctx, const v1::UpdateConfigRequest* req,
                            v1::ApplyConfigResponse* resp) override;
  grpc::Status ValidateConfig(grpc::ServerContext* ctx, const v1::ValidateConfigRequest* req,
                              v1::ValidateConfigResponse* resp) override;
  grpc::Status GetStats(grpc::ServerContext* ctx, const v1::GetStatsRequest* req,
                        v1::Stats* resp) override;
  grpc::Status WatchStats(grpc::ServerContext* ctx, const v1::WatchStatsRequest* req,
                          grpc::ServerWriter<v1::Stats>* writer) override;
  grpc::Status WatchEvents(grpc::ServerContext* ctx, const v1::WatchEventsRequest* req,
                           grpc::ServerWriter<v1::Event>* writer) override;
  grpc::Status Explain(grpc::ServerContext* ctx, const v1::ExplainRequest* req,
                       v1::ExplainResponse* resp) override;
  grpc::Status AddFirewallRule(grpc::ServerContext* ctx, const v1::AddFirewallRuleRequest* req,
                               v1::ApplyConfigResponse* resp) override;
  grpc::Status RemoveFirewallRule(grpc::ServerContext* ctx,
                                  const v1::RemoveFirewallRuleRequest* req,
                                  v1::ApplyConfigResponse* resp) override;
  grpc::Status ListFirewallRules(grpc::ServerContext* ctx,
                                 const v1::ListFirewallRulesRequest* req,
                                 v1::ListFirewallRulesResponse* resp) override;
  grpc::Status SetGeoipDatabase(grpc::ServerContext* ctx, const v1::SetGeoipDatabaseRequest* req,
                                v1::ApplyConfigResponse* resp) override;
  grpc::Status LookupCountry(grpc::ServerContext* ctx, const v1::LookupCountryRequest* req,
                             v1::LookupCountryResponse* resp) override;
  // --- lb --- (lb_service.cc)
  grpc::Status AddLbBackend(grpc::ServerContext* ctx, const v1::AddLbBackendRequest* req,
                            v1::ApplyConfigResponse* resp) override;
  grpc::Status RemoveLbBackend(grpc::ServerContext* ctx, const v1::RemoveLbBackendRequest* req,
                               v1::ApplyConfigResponse* resp) override;
  grpc::Status SetLbBackend(grpc::ServerContext* ctx, const v1::SetLbBackendRequest* req,
                            v1::ApplyConfigResponse* resp) override;
  grpc::Status ListLbServices(grpc::ServerContext* ctx, const v1::ListLbServicesRequest* req,
                              v1::ListLbServicesResponse* resp) override;
  grpc::Status CreateLbService(grpc::ServerContext* ctx, const v1::CreateLbServiceRequest* req,
                               v1::ApplyConfigResponse* resp) override;
  grpc::Status DeleteLbService(grpc::ServerContext* ctx, const v1::DeleteLbServiceRequest* req,
                               v1::ApplyConfigResponse* resp) override;
  // --- dns --- (dns_service.cc)
  grpc::Status AddDnsNames(grpc::ServerContext* ctx, const v1::DnsNamesRequest* req,
                           v1::ApplyConfigResponse* resp) override;
  grpc::Status RemoveDnsNames(grpc::ServerContext* ctx, const v1::DnsNamesRequest* req,
                              v1::ApplyConfigResponse* resp) override;
  grpc::Status ListDnsLists(grpc::ServerContext* ctx, const v1::ListDnsListsRequest* req,
                            v1::ListDnsListsResponse* resp) override;
  grpc::Status CreateDnsList(grpc::ServerContext* ctx, const v1::CreateDnsListRequest* req,
                             v1::ApplyConfigResponse* resp) override;
  grpc::Status DeleteDnsList(grpc::ServerContext* ctx, const v1::DeleteDnsListRequest* req,
                             v1::ApplyConfigResponse* resp) override;
  // --- dpi --- (dpi_service.cc)
  grpc::Status AddYaraRule(grpc::ServerContext* ctx, const v1::AddYaraRuleRequest* req,
                           v1::ApplyConfigResponse* resp) override;
  grpc::Status RemoveYaraRule(grpc::ServerContext* ctx, const v1::RemoveYaraRuleRequest* req,
                              v1::ApplyConfigResponse* resp) override;
  grpc::Status ListDpiRules(grpc::ServerContext* ctx, const v1::ListDpiRulesRequest* req,
                            v1::ListDpiRulesResponse* resp) override;
  grpc::Status CreateDpiRuleSet(grpc::ServerContext* ctx, const v1::CreateDpiRuleSetRequest* req,
                                v1::ApplyConfigResponse* resp) override;
  grpc::Status DeleteDpiRuleSet(grpc::ServerContext* ctx, const v1::DeleteDpiRuleSetRequest* req,
                                v1::ApplyConfigResponse* resp) override;
  grpc::Status SetDpiRuleAction(grpc::ServerContext* ctx, const v1::SetDpiRuleActionRequest* req,
                                v1::ApplyConfigResponse* resp) override;
  // --- flows view / capture --- (flows_service.cc)
  grpc::Status ListFlows(grpc::ServerContext* ctx, const v1::ListFlowsRequest* req,
                         v1::ListFlowsResponse* resp) override;
  grpc::Status CapturePackets(grpc::ServerContext* ctx, const v1::CaptureRequest* req,
                              grpc::ServerWriter<v1::CapturedPacket>* writer) override;

 private:
  void fillStats(v1::Stats* out) const;
  // ConfigManager::update with `mutate`, answered like UpdateConfig.
  grpc::Status updateWith(const std::function<absl::Status(v1::ApplianceConfig&)>& mutate,
                          uint64_t expected_version, bool force, v1::ApplyConfigResponse* resp);
  // The same with an edit that names the errors of what it refuses (DNS list entries).
  grpc::Status updateWith(
      const std::function<absl::Status(v1::ApplianceConfig&, rules::ConfigErrorList&)>& mutate,
      uint64_t expected_version, bool force, v1::ApplyConfigResponse* resp);
  // DNS filtering: checks a DnsNamesRequest, applies `edit` to its list in the committed
  // document and applies the document like UpdateConfig.
  grpc::Status editDnsList(const v1::DnsNamesRequest& req, v1::ApplyConfigResponse* resp,
                           const std::function<void(v1::DnsList&)>& edit);
  // Sleeps up to `d`; false when the call was cancelled or the server is shutting down.
  bool waitFor(grpc::ServerContext* ctx, std::chrono::milliseconds d);

  ConfigManager* config_;
  dp::DataplaneControl* plane_;
  EventHub* events_;
  ServiceOptions opts_;
  std::string instance_id_;
  std::chrono::steady_clock::time_point started_;
  std::atomic<bool> shutting_down_{false};
  std::mutex wait_mu_;
  std::condition_variable wait_cv_;
};

// absl -> gRPC status (same code, same message).
grpc::Status toGrpc(const absl::Status& st);
// An apply failure: INVALID_ARGUMENT carries every ConfigError in the status details.
grpc::Status applyErrorToGrpc(const ApplyError& err);
v1::ConfigError toApiError(const rules::ConfigError& e);
// --- fleet --- A fleet version's document applied as the node agent does (the hook of
// fleet::AgentHooks::apply): manager.applyAsFollower; a refusal fills `err` with its phase,
// message and every error. `config_version`: the committed version after it.
absl::Status applyFleetDocument(ConfigManager& manager, const v1::ApplianceConfig& doc,
                                v1::FleetNodeError* err, uint64_t* config_version);

// Long work in progress as the API's TaskProgress.
void fillTasks(const ProgressRegistry* progress,
               google::protobuf::RepeatedPtrField<v1::TaskProgress>* out);
// Apply outcomes and durations as the API's ConfigApplyStats.
void fillApplyStats(const ApplyStats& s, v1::ConfigApplyStats* out);

// Counters and ports as the API's Stats message.
void fillCounterSet(const dp::CountersSnapshot::Flat& f, v1::CounterSet* out);
void fillPortStats(const dp::PortInfo& p, v1::PortStats* out);
// DNS filtering: the DNS counters of a counter set, and one list's stats (dns_service.cc).
void fillDnsCounters(const dp::CountersSnapshot::Flat& f, v1::CounterSet* out);
void fillDnsListStats(const dp::DnsListCounters& c, v1::DnsListStats* out);
// --- dpi --- the DPI counters of a counter set; the running rule set's accepted /
// unsupported counts and per-rule matches (Stats.dpi, absent when DPI is off) (dpi_service.cc).
void fillDpiStats(const dp::DataplaneControl& plane, int64_t wall_offset_ns, v1::Stats* out);

}  // namespace dpu::ctl
