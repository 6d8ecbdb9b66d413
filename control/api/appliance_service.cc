#include "control/api/appliance_service.h"

#include <google/protobuf/util/field_mask_util.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "control/api/build_info.h"
#include "control/api/frame_builder.h"
#include "control/config/config_loader.h"
#include "rules/compile/firewall_parsers.h"
#include "rules/compile/geoip_db.h"

namespace dpu::ctl {
namespace {

using google::protobuf::util::FieldMaskUtil;

std::string randomInstanceId() {
  std::random_device rd;  // getrandom(2)
  uint64_t hi = (static_cast<uint64_t>(rd()) << 32) | rd();
  uint64_t lo = (static_cast<uint64_t>(rd()) << 32) | rd();
  return absl::StrFormat("%016x%016x", hi, lo);
}

int64_t nowUnixNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void fillApplyResponse(const ApplyResult& r, v1::ApplyConfigResponse* resp) {
  resp->set_version(r.version);
  resp->set_generation(r.generation);
  resp->set_validate_ms(r.validate_ms);
  resp->set_compile_ms(r.compile_ms);
  resp->set_persist_ms(r.persist_ms);
  resp->set_publish_ms(r.publish_ms);
  resp->set_prepare_ms(r.prepare_ms);
  for (const auto& w : r.warnings) resp->add_warnings(w);
  if (const auto& d = r.dpi_compiled) {  // --- dpi ---
    v1::DpiCompileStats* s = resp->mutable_dpi_compile();
    s->set_sources(d->num_namespaces);
    s->set_sources_translated(d->num_namespaces - d->sources_cached);
    s->set_databases(uint32_t(d->shards.size()));
    s->set_databases_compiled(d->shards_compiled);
    s->set_patterns_compiled(d->patterns_compiled);
    s->set_delta_patterns(d->delta_patterns);
    s->set_merges_pending(d->merges_pending);
    s->set_hyperscan_ms(d->compile_ms);
    s->set_translate_ms(d->translate_ms);
  }
}

}  // namespace

// A status travels in HTTP/2 trailers (grpc-message, and grpc-status-details-bin in base64),
// which clients cap (gRPC's default max metadata size is 8 KiB): a status larger than that
// reaches the client as RESOURCE_EXHAUSTED with the real error lost. So what goes there is
// bounded: the message to kMaxStatusMessage bytes, the error list in the details to
// kMaxErrorDetails serialized bytes; ValidateConfig returns every error in its response body.
namespace {
constexpr size_t kMaxStatusMessage = 1536;
constexpr size_t kMaxErrorDetails = 3072;

std::string boundedMessage(const std::string& msg) {
  if (msg.size() <= kMaxStatusMessage) return msg;
  constexpr size_t kRoom = kMaxStatusMessage - 120;
  size_t cut = msg.rfind("; ", kRoom);  // errorsToStatus separates errors with "; "
  if (cut == std::string::npos || cut < kRoom / 2) cut = kRoom;
  return absl::StrCat(std::string(msg.substr(0, cut)), "; ... (cut: ", msg.size(), " bytes in all)");
}
}  // namespace

grpc::Status toGrpc(const absl::Status& st) {
  if (st.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(st.code()), boundedMessage(std::string(st.message())));
}

v1::ConfigError toApiError(const rules::ConfigError& in) {
  const rules::ConfigError e = rules::abbreviated(in);
  v1::ConfigError out;
  out.set_section(e.section);
  out.set_rule(e.rule);
  out.set_index(e.index);
  out.set_line(e.line);
  out.set_file(e.file);
  out.set_field(e.field);
  out.set_reason(e.reason);
  return out;
}

absl::Status applyFleetDocument(ConfigManager& manager, const v1::ApplianceConfig& doc,
                                v1::FleetNodeError* err, uint64_t* config_version) {
  ApplyError e;
  auto r = manager.applyAsFollower(doc, &e);
  if (r.ok()) {
    *config_version = r->version;
    return absl::OkStatus();
  }
  err->set_phase(e.phase);
  err->set_message(std::string(r.status().message()));
  for (const auto& ce : e.errors) *err->add_errors() = toApiError(ce);
  return r.status();
}

grpc::Status applyErrorToGrpc(const ApplyError& err) {
  absl::Status st = err.status;
  if (st.ok()) {
    // A failed apply always has a status; keep the errors visible if it is ever missing.
    st = err.errors.empty() ? absl::InternalError("apply failed without a reason")
                            : rules::errorsToStatus(err.errors);
  }
  if (st.code() != absl::StatusCode::kInvalidArgument || err.errors.empty()) return toGrpc(st);
  v1::ConfigErrors list;
  size_t listed = 0;
  for (const auto& e : err.errors) {
    v1::ConfigError ae = toApiError(e);
    if (list.ByteSizeLong() + ae.ByteSizeLong() + 8 > kMaxErrorDetails - 160) break;
    *list.add_errors() = std::move(ae);
    ++listed;
  }
  if (listed < err.errors.size()) {
    v1::ConfigError* more = list.add_errors();
    more->set_index(-1);
    more->set_reason(absl::StrCat(err.errors.size() - listed, " more errors not listed here (",
                                  err.errors.size(), " in all): ValidateConfig (dpuctl config "
                                  "validate FILE) lists every one"));
  }
  const std::string message = boundedMessage(std::string(st.message()));
  v1::RpcStatus details;
  details.set_code(static_cast<int32_t>(st.code()));
  details.set_message(rules::abbreviate(message, 256));  // the list has the errors
  details.add_details()->PackFrom(list);
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message, details.SerializeAsString());
}

void fillCounterSet(const dp::CountersSnapshot::Flat& f, v1::CounterSet* out) {
  fillDnsCounters(f, out);  // DNS filtering
  out->set_rx_packets_a(f.rx_packets[dp::kSideA]);
  out->set_rx_packets_b(f.rx_packets[dp::kSideB]);
  out->set_tx_packets_a(f.tx_packets[dp::kSideA]);
  out->set_tx_packets_b(f.tx_packets[dp::kSideB]);
  out->set_rx_bytes_a(f.rx_bytes[dp::kSideA]);
  out->set_rx_bytes_b(f.rx_bytes[dp::kSideB]);
  out->set_tx_bytes_a(f.tx_bytes[dp::kSideA]);
  out->set_tx_bytes_b(f.tx_bytes[dp::kSideB]);
  out->set_forwarded(f.verdicts[static_cast<int>(dp::Verdict::kForward)]);
  out->set_dropped(f.verdicts[static_cast<int>(dp::Verdict::kDrop)]);
  out->set_rejected(f.verdicts[static_cast<int>(dp::Verdict::kReject)]);
  auto* drops = out->mutable_drops();
  for (int r = 1; r < static_cast<int>(dp::DropReason::kCount); ++r) {
    if (f.drops[r]) (*drops)[dp::dropReasonName(static_cast<dp::DropReason>(r))] = f.drops[r];
  }
  for (int i = 0; i < dp::kHttpCounterCount; ++i) {  // --- http ---
    if (f.http[i]) (*out->mutable_http())[dp::httpCounterName(i)] = f.http[i];
  }
  for (int i = 0; i < dp::kTcpStreamCounterCount; ++i) {  // --- tcp stream ---
    if (f.tcp_stream[i]) (*out->mutable_tcp_stream())[dp::tcpStreamCounterName(i)] = f.tcp_stream[i];
  }
  for (int s = 1; s < static_cast<int>(dp::Stage::kCount); ++s) {
    if (!f.stage_packets[s] && !f.stage_drops[s]) continue;
    v1::StageCounters* sc = out->add_stages();
    sc->set_stage(dp::stageName(static_cast<dp::Stage>(s)));
    sc->set_packets(f.stage_packets[s]);
    sc->set_dropped(f.stage_drops[s]);
  }
  // --- perf ---
  for (int k = 0; k < dp::kCyCount; ++k) {
    if (!f.cycles[k]) continue;
    v1::CycleCounter* cc = out->add_cycles();
    cc->set_bucket(dp::cycleBucketName(k));
    cc->set_cycles(f.cycles[k]);
  }
  out->set_tsc_hz(f.tsc_hz);
  {
    uint64_t n = 0;
    for (uint64_t v : f.latency) n += v;
    if (n) {
      v1::LatencySummary* ls = out->mutable_latency();
      ls->set_samples(n);
      ls->set_p50_ns(dp::latencyQuantile(f.latency, 0.5, f.latency_max_ns));
      ls->set_p90_ns(dp::latencyQuantile(f.latency, 0.9, f.latency_max_ns));
      ls->set_p99_ns(dp::latencyQuantile(f.latency, 0.99, f.latency_max_ns));
      ls->set_p999_ns(dp::latencyQuantile(f.latency, 0.999, f.latency_max_ns));
      ls->set_max_ns(f.latency_max_ns);
      for (int k = 0; k < dp::kLatencyBuckets; ++k) {
        if (f.latency[k]) {
          (*ls->mutable_buckets())[absl::StrCat(dp::latencyBucketLimit(k))] = f.latency[k];
        }
      }
    }
  }
  out->set_flows_created(f.flows_created);
  out->set_flows_expired(f.flows_expired);
  out->set_flows_active(f.flows_active);
  out->set_flows_midstream(f.flows_midstream);
  out->set_flow_table_full(f.flow_table_full);
  out->set_flow_cache_hits(f.flow_cache_hits);
  out->set_fragments(f.frag_packets);
  out->set_fragments_held(f.frag_held);
  out->set_fragment_overlaps(f.frag_overlaps);
  out->set_fragments_first_missing(f.frag_timeouts);
  out->set_non_ip_forwarded(f.non_ip_forwarded);
  out->set_malformed_forwarded(f.malformed_forwarded);
  out->set_untracked_forwarded(f.untracked_forwarded);
  out->set_vxlan_not_parsed(f.vxlan_not_parsed);
  out->set_geneve_not_parsed(f.geneve_not_parsed);
  out->set_gre_not_parsed(f.gre_not_parsed);
  out->set_events_lost(f.events_lost);
  out->set_handed_off(f.dist_handed_off);
  out->set_handed_in(f.dist_handed_in);
  out->set_loops(f.loops);
  out->set_busy_loops(f.busy_loops);
  out->set_idle_sleeps(f.idle_sleeps);
  out->set_idle_sleep_us(f.idle_sleep_us);
  // --- lb ---
  out->set_lb_flows_balanced(f.lb_flows_balanced);
  out->set_lb_flows_rehashed(f.lb_flows_rehashed);
  out->set_lb_flows_reset(f.lb_flows_reset);
  out->set_lb_service_gone(f.lb_service_gone);
  out->set_lb_key_missing(f.lb_key_missing);
  out->set_lb_untracked(f.lb_untracked);
  out->set_lb_nat_reversed(f.lb_nat_reversed);
  out->set_lb_nat_no_reverse(f.lb_nat_no_reverse);
  out->set_lb_nat_reverse_created(f.lb_nat_reverse_created);
  out->set_lb_counters_full(f.lb_counters_full);
  out->set_lb_fragments_followed(f.lb_fragments_followed);
  out->set_fragment_datagrams_active(f.frag_datagrams_active);
  v1::ReassemblyCounters* ra = out->mutable_reassembly();  // datagram normalization
  ra->set_reassembled(f.frag_reassembled);
  ra->set_atomic(f.frag_atomic);
  ra->set_overlap_identical(f.frag_overlap_identical);
  ra->set_overlap_different(f.frag_overlap_conflicts);
  ra->set_no_buffer(f.frag_no_buffer);
  ra->set_too_big(f.frag_too_big);
  ra->set_hold_full(f.frag_hold_full);
  ra->set_fail_open(f.frag_fail_open);
  ra->set_fail_closed(f.frag_fail_closed);
  ra->set_buffers_in_use(f.frag_buffers_in_use);
  v1::FirewallCounters* fw = out->mutable_firewall();
  fw->set_allowed(f.fw_allowed);
  fw->set_denied(f.fw_denied);
  fw->set_rejected(f.fw_rejected);
  fw->set_rst_sent(f.fw_rst_sent);
  fw->set_icmp_sent(f.fw_icmp_sent);
  fw->set_reject_nombuf(f.fw_reject_nombuf);
  fw->set_reject_suppressed(f.fw_reject_suppressed);
  fw->set_geoip_lookups(f.geoip_lookups);
  v1::DpiCounters* dpi = out->mutable_dpi();  // --- ops --- the DPI counters
  dpi->set_bytes_scanned(f.dpi_bytes);
  dpi->set_alerts(f.dpi_alerts);
  dpi->set_drops(f.dpi_drops);
  dpi->set_resets(f.dpi_resets);
  dpi->set_gaps(f.dpi_gaps);
  dpi->set_depth_reached(f.dpi_depth);
  dpi->set_no_stream(f.dpi_no_stream);
  dpi->set_overflow(f.dpi_overflow);
  dpi->set_rst_sent(f.dpi_rst_sent);
  dpi->set_prefilter_confirmed(f.dpi_pf_confirmed);
  dpi->set_prefilter_rejected(f.dpi_pf_rejected);
  dpi->set_prefilter_errors(f.dpi_pf_errors);
  dpi->set_no_window(f.dpi_no_window);
  v1::SignatureCounters* sig = out->mutable_signatures();  // --- signatures ---
  sig->set_inspected(f.sig_inspected);
  sig->set_candidates(f.sig_candidates);
  sig->set_matches(f.sig_matches);
  sig->set_alerts(f.sig_alerts);
  sig->set_drops(f.sig_drops);
  sig->set_rejects(f.sig_rejects);
  sig->set_passes(f.sig_passes);
  sig->set_pcre_errors(f.sig_pcre_errors);
  sig->set_flowbits_full(f.sig_flowbits_full);
  sig->set_threshold_full(f.sig_threshold_full);
  sig->set_hits_dropped(f.sig_hits_dropped);
}

void fillTasks(const ProgressRegistry* progress,
               google::protobuf::RepeatedPtrField<v1::TaskProgress>* out) {
  if (progress == nullptr) return;
  for (const TaskInfo& t : progress->tasks()) {
    v1::TaskProgress* p = out->Add();
    p->set_task(t.task);
    p->set_step(t.step);
    p->set_done(t.done);
    p->set_total(t.total);
    p->set_unit(t.unit);
    p->set_elapsed_seconds(t.elapsed_s);
  }
}

void fillApplyStats(const ApplyStats& s, v1::ConfigApplyStats* out) {
  out->set_applied(s.applied);
  out->set_invalid(s.invalid);
  out->set_conflicts(s.conflicts);
  out->set_failed(s.failed);
  v1::Histogram* h = out->mutable_duration_seconds();
  h->set_count(s.duration_count);
  h->set_sum(s.duration_sum_s);
  for (size_t i = 0; i < ApplyStats::kBuckets; ++i) {
    v1::HistogramBucket* b = h->add_buckets();
    b->set_le(ApplyStats::kBucketsS[i]);
    b->set_count(s.duration_le[i]);
  }
  if (s.last_unix_ns) fillApplyResponse(s.last, out->mutable_last());
  out->set_last_unix_ns(s.last_unix_ns);
  for (const auto& [phase, n] : s.refused_by_phase) (*out->mutable_refused_by_phase())[phase] = n;
}

void fillPortStats(const dp::PortInfo& p, v1::PortStats* out) {
  out->set_side(dp::sideName(p.side));
  out->set_name(p.name);
  out->set_rx_packets(p.rx_packets);
  out->set_rx_bytes(p.rx_bytes);
  out->set_tx_packets(p.tx_packets);
  out->set_tx_bytes(p.tx_bytes);
  out->set_rx_missed(p.rx_missed);
  out->set_rx_nombuf(p.rx_nombuf);
  out->set_tx_errors(p.tx_errors);
  out->set_rx_errors(p.rx_errors);
}

// ---------------------------------------------------------------------------------------

ApplianceService::ApplianceService(ConfigManager* config, dp::DataplaneControl* plane,
                                   EventHub* events, ServiceOptions opts)
    : config_(config),
      plane_(plane),
      events_(events),
      opts_(std::move(opts)),
      instance_id_(randomInstanceId()),
      started_(std::chrono::steady_clock::now()) {
  if (events_) {
    EventHub* hub = events_;
    config_->setOnApplied([hub](const ApplyResult& r) {
      hub->publish(configEvent(r, nowUnixNs()));
    });
    config_->setOnRefused([hub](const RefusedApply& r) {  // --- ops ---
      hub->publish(refusedConfigEvent(r, nowUnixNs()));
    });
  }
}

ApplianceService::~ApplianceService() {
  beginShutdown();
  if (events_) config_->setOnApplied(nullptr);
  if (events_) config_->setOnRefused(nullptr);  // --- ops ---
}

void ApplianceService::beginShutdown() {
  {
    std::lock_guard<std::mutex> lock(wait_mu_);
    shutting_down_.store(true);
  }
  wait_cv_.notify_all();
}

bool ApplianceService::waitFor(grpc::ServerContext* ctx, std::chrono::milliseconds d) {
  auto until = std::chrono::steady_clock::now() + d;
  std::unique_lock<std::mutex> lock(wait_mu_);
  while (!shutting_down_.load() && !ctx->IsCancelled()) {
    auto now = std::chrono::steady_clock::now();
    if (now >= until) return true;
    // Wake at least every 100 ms to notice a cancelled call.
    wait_cv_.wait_for(lock, std::min<std::chrono::steady_clock::duration>(
                                until - now, std::chrono::milliseconds(100)));
  }
  return false;
}

grpc::Status ApplianceService::GetStatus(grpc::ServerContext*, const v1::GetStatusRequest*,
                                         v1::StatusResponse* resp) {
  resp->set_instance_id(instance_id_);
  resp->set_uptime_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
  resp->set_config_version(config_->version());
  resp->set_generation(plane_->currentGeneration());
  for (const auto& w : plane_->workers()) {
    v1::WorkerStatus* ws = resp->add_workers();
    ws->set_id(w.id);
    ws->set_lcore(w.lcore);
    ws->set_generation(w.generation);
  }
  *resp->mutable_build() = buildInfo();
  resp->set_state_dir(opts_.state_dir);
  fillTasks(opts_.progress, resp->mutable_tasks());
  if (opts_.fleet_status) opts_.fleet_status(resp->mutable_fleet());  // --- fleet ---
  for (const auto& p : plane_->ports()) {
    v1::PortStatus* ps = resp->add_ports();
    ps->set_side(dp::sideName(p.side));
    ps->set_port_id(p.port_id);
    ps->set_name(p.name);
    ps->set_driver(p.driver);
  }
  return grpc::Status::OK;
}

grpc::Status ApplianceService::GetConfig(grpc::ServerContext*, const v1::GetConfigRequest*,
                                         v1::GetConfigResponse* resp) {
  *resp->mutable_config() = config_->current();
  return grpc::Status::OK;
}

grpc::Status ApplianceService::ApplyConfig(grpc::ServerContext*,
                                           const v1::ApplyConfigRequest* req,
                                           v1::ApplyConfigResponse* resp) {
  ApplyError err;
  auto r = config_->apply(req->config(), req->expected_version(), req->force(), &err);
  if (!r.ok()) {
    if (err.status.ok()) err.status = r.status();
    return applyErrorToGrpc(err);
  }
  fillApplyResponse(*r, resp);
  return grpc::Status::OK;
}

grpc::Status ApplianceService::UpdateConfig(grpc::ServerContext*,
                                            const v1::UpdateConfigRequest* req,
                                            v1::ApplyConfigResponse* resp) {
  const auto& mask = req->update_mask();
  if (mask.paths_size() == 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "update_mask: no paths; name the fields to change, e.g. "
                        "\"dataplane.non_ip\" (ApplyConfig replaces the whole document)");
  }
  for (const std::string& path : mask.paths()) {
    if (path == "version") {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "update_mask: path 'version' cannot be set; the version is assigned "
                          "on commit (use expected_version)");
    }
    if (!FieldMaskUtil::IsValidPath<v1::ApplianceConfig>(path)) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("update_mask: '", path,
                                       "' is not a field path of dpu.v1.ApplianceConfig (use "
                                       "proto field names, e.g. dataplane.flow_table.when_full)"));
    }
  }
  FieldMaskUtil::MergeOptions mo;
  mo.set_replace_message_fields(true);
  mo.set_replace_repeated_fields(true);
  const v1::ApplianceConfig& src = req->config();
  auto mutate = [&](v1::ApplianceConfig& doc) -> absl::Status {
    uint64_t version = doc.version();
    FieldMaskUtil::MergeMessageTo(src, mask, mo, &doc);
    doc.set_version(version);
    return absl::OkStatus();
  };
  ApplyError err;
  auto r = config_->update(mutate, req->expected_version(), req->force(), &err);
  if (!r.ok()) {
    if (err.status.ok()) err.status = r.status();
    return applyErrorToGrpc(err);
  }
  fillApplyResponse(*r, resp);
  return grpc::Status::OK;
}

grpc::Status ApplianceService::ValidateConfig(grpc::ServerContext*,
                                              const v1::ValidateConfigRequest* req,
                                              v1::ValidateConfigResponse* resp) {
  rules::ConfigErrorList errors = config_->validate(req->config());
  resp->set_valid(errors.empty());
  for (const auto& e : errors) *resp->add_errors() = toApiError(e);
  return grpc::Status::OK;
}

void ApplianceService::fillStats(v1::Stats* out) const {
  out->set_timestamp_unix_ns(nowUnixNs());
  out->set_config_version(config_->version());
  out->set_generation(plane_->currentGeneration());
  for (const auto& p : plane_->ports()) fillPortStats(p, out->add_ports());
  dp::CountersSnapshot c = plane_->counters();
  fillCounterSet(c.total, out->mutable_total());
  for (size_t w = 0; w < c.per_worker.size(); ++w) {
    v1::WorkerStats* ws = out->add_workers();
    ws->set_id(static_cast<uint32_t>(w));
    ws->set_generation(static_cast<uint32_t>(c.per_worker[w].generation));
    fillCounterSet(c.per_worker[w], ws->mutable_counters());
  }
  fillApplyStats(config_->applyStats(), out->mutable_config_applies());
  if (events_) {
    EventHub::Stats e = events_->stats();
    v1::EventPumpStats* es = out->mutable_events();
    es->set_dataplane_events(e.dataplane_events);
    es->set_control_events(e.control_events);
    es->set_file_events(e.file.lines);
    es->set_file_bytes(e.file.bytes);
    es->set_file_rotations(e.file.rotations);
    es->set_file_errors(e.file.errors);
    es->set_subscribers(e.subscribers);
    es->set_subscriber_lost(e.subscriber_lost);
  }
  out->set_uptime_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
  fillTasks(opts_.progress, out->mutable_tasks());
  for (const auto& l : plane_->dnsLists()) fillDnsListStats(l, out->add_dns_lists());  // DNS
  fillDpiStats(*plane_, opts_.wall_offset_ns, out);  // --- dpi ---
}

grpc::Status ApplianceService::GetStats(grpc::ServerContext*, const v1::GetStatsRequest*,
                                        v1::Stats* resp) {
  fillStats(resp);
  return grpc::Status::OK;
}

grpc::Status ApplianceService::WatchStats(grpc::ServerContext* ctx,
                                          const v1::WatchStatsRequest* req,
                                          grpc::ServerWriter<v1::Stats>* writer) {
  uint32_t interval = req->interval_ms() ? std::max<uint32_t>(req->interval_ms(), 100) : 1000;
  auto next = std::chrono::steady_clock::now();
  for (;;) {
    v1::Stats s;
    fillStats(&s);
    if (!writer->Write(s)) break;  // client gone
    next += std::chrono::milliseconds(interval);
    auto now = std::chrono::steady_clock::now();
    if (next < now) next = now;
    if (!waitFor(ctx, std::chrono::duration_cast<std::chrono::milliseconds>(next - now))) break;
  }
  if (shutting_down_.load()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down");
  return grpc::Status::OK;
}

grpc::Status ApplianceService::WatchEvents(grpc::ServerContext* ctx,
                                           const v1::WatchEventsRequest* req,
                                           grpc::ServerWriter<v1::Event>* writer) {
  if (!events_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "no event source configured");
  // --- ops --- every type an event can have ("alert": DPI, "dns", "lb" were refused).
  static const char* const kTypes[] = {"drop", "flow", "config", "alert", "dns", "lb"};
  std::vector<std::string> types;
  for (const std::string& t : req->types()) {
    std::string lt = absl::AsciiStrToLower(t);
    if (std::find(std::begin(kTypes), std::end(kTypes), lt) == std::end(kTypes)) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("types: unknown event type '", t,
                                       "' (known: drop, flow, config, alert, dns, lb)"));
    }
    types.push_back(lt);
  }
  if (req->buffer_size() > EventHub::kMaxBuffer) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("buffer_size: ", req->buffer_size(),
                                     " is out of range [1, ", EventHub::kMaxBuffer,
                                     "] (0 = default ", EventHub::kDefaultBuffer, ")"));
  }
  auto sub = events_->subscribe(req->buffer_size(), std::move(types));
  // Headers out now, so the client knows the subscription exists before any event.
  writer->SendInitialMetadata();
  v1::Event ev;
  while (!shutting_down_.load() && !ctx->IsCancelled()) {
    if (!sub->next(&ev, std::chrono::milliseconds(100))) {
      if (sub->closed()) break;
      continue;
    }
    if (!writer->Write(ev)) break;
  }
  events_->unsubscribe(sub);
  if (shutting_down_.load() || sub->closed()) {
    if (ctx->IsCancelled()) return grpc::Status::CANCELLED;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down");
  }
  return grpc::Status::OK;
}

namespace {

// Explain with a dns_query: the tuple's blanks filled with the documented defaults and the
// query as the UDP payload (TCP: length-prefixed, one PSH+ACK segment).
absl::Status dnsQuerySpec(const v1::DnsQuery& q, FrameSpec* spec) {
  if (!spec->payload.empty()) return absl::InvalidArgumentError("give either dns_query or payload, not both");
  const std::string p = absl::AsciiStrToLower(spec->proto);
  const bool tcp = p == "tcp" || p == "6";
  if (!p.empty() && p != "udp" && p != "17" && !tcp) {
    return absl::InvalidArgumentError(
        absl::StrCat("tuple.proto: '", spec->proto, "' with dns_query: udp or tcp"));
  }
  spec->proto = tcp ? "tcp" : "udp";
  if (tcp && spec->tcp_flags.empty()) spec->tcp_flags = "PA";
  const bool v6 = spec->src_ip.find(':') != std::string::npos ||
                  spec->dst_ip.find(':') != std::string::npos;
  if (spec->src_ip.empty()) spec->src_ip = v6 ? "2001:db8::1" : "192.0.2.1";
  if (spec->dst_ip.empty()) spec->dst_ip = v6 ? "2001:db8::53" : "192.0.2.53";
  if (spec->src_port == 0) spec->src_port = 53000;
  if (spec->dst_port == 0) spec->dst_port = 53;
  if (q.id() > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("dns_query.id: ", q.id(), " is out of range [0, 65535]"));
  }
  auto msg = buildDnsQuery(q.name(), q.qtype(), uint16_t(q.id() ? q.id() : 0x1234));
  if (!msg.ok()) return msg.status();
  // DNS over TCP: the message with its 2-byte length, as the first segment of the stream.
  if (tcp) spec->payload = {char(msg->size() >> 8), char(msg->size() & 0xff)};
  spec->payload += *msg;
  return absl::OkStatus();
}

}  // namespace

grpc::Status ApplianceService::Explain(grpc::ServerContext*, const v1::ExplainRequest* req,
                                       v1::ExplainResponse* resp) {
  uint8_t side = dp::kSideA;
  std::string s = absl::AsciiStrToUpper(req->side());
  if (s == "B") {
    side = dp::kSideB;
  } else if (!s.empty() && s != "A") {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("side: '", req->side(), "' is not A or B"));
  }
  std::vector<uint8_t> built;
  const uint8_t* frame = nullptr;
  size_t len = 0;
  if (!req->frame().empty()) {
    if (req->has_tuple() || !req->payload().empty() || req->has_dns_query()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "give either frame or tuple (+ payload or dns_query), not both");
    }
    frame = reinterpret_cast<const uint8_t*>(req->frame().data());
    len = req->frame().size();
  } else {
    if (!req->has_tuple() && !req->has_dns_query()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "give a frame (Ethernet bytes), a tuple or a dns_query to build one from");
    }
    const v1::PacketTuple& t = req->tuple();
    FrameSpec spec;
    spec.src_ip = t.src_ip();
    spec.dst_ip = t.dest_ip();
    spec.proto = t.proto();
    spec.src_port = t.src_port();
    spec.dst_port = t.dest_port();
    spec.vlan = t.vlan();
    spec.tcp_flags = t.tcp_flags();
    spec.payload = req->payload();
    if (req->has_dns_query()) {
      if (auto st = dnsQuerySpec(req->dns_query(), &spec); !st.ok()) return toGrpc(st);
    }
    auto f = buildFrame(spec);
    if (!f.ok()) return toGrpc(f.status());
    built = std::move(*f);
    frame = built.data();
    len = built.size();
  }
  if (len > UINT32_MAX) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "frame: too large");
  }
  dp::ExplainResult r = plane_->explain(frame, static_cast<uint32_t>(len), side);
  const dp::PacketVerdict& v = r.verdict;
  resp->set_verdict(dp::verdictName(v.verdict));
  if (v.stage != dp::Stage::kNone) resp->set_stage(dp::stageName(v.stage));
  if (v.rule != dp::kNoRule) {  // the rule's id (DNS: the list), else its index
    std::string id = plane_->ruleName(v.generation, v.stage, v.rule);
    resp->set_rule(id.empty() ? absl::StrCat(v.rule) : id);
  }
  if (v.reason != dp::DropReason::kNone) resp->set_reason(dp::dropReasonName(v.reason));
  if (v.backend != dp::kNoBackend) {  // --- lb --- by id (its index when unknown)
    resp->set_backend(r.backend.empty() ? absl::StrCat(v.backend) : r.backend);
  }
  resp->set_generation(v.generation);
  for (const auto& st : r.steps) {
    v1::ExplainStep* step = resp->add_steps();
    // The final step (the verdict itself) belongs to no stage: left empty.
    if (st.stage != dp::Stage::kNone) step->set_stage(dp::stageName(st.stage));
    step->set_decision(st.decision);
    step->set_detail(st.detail);
  }
  resp->set_summary(r.summary);
  for (const dp::ExplainHttpMatch& h : r.http) {  // --- http ---
    v1::ExplainHttpMatch* o = resp->add_http_matches();
    o->set_rule(h.rule);
    o->set_action(h.action);
    o->set_at_flow_end(h.at_flow_end);
    o->set_method(h.method);
    o->set_host(h.host);
    o->set_url(h.url);
    o->set_status(h.status);
    o->set_tx_id(h.tx_id);
    o->set_filename(h.filename);
    o->set_direction(h.direction);
    o->set_offset_from(h.offset_from);
    o->set_offset_to(h.offset_to);
    o->set_size(h.size);
    o->set_state(h.state);
    o->set_sha256(h.sha256);
  }
  return grpc::Status::OK;
}

// --- firewall and GeoIP ------------------------------------------------------------------

namespace {

int findInlineRule(const v1::ApplianceConfig& doc, const std::string& id) {
  const auto& rules = doc.firewall().rules();
  for (int i = 0; i < rules.size(); ++i) {
    if (rules[i].id() == id) return i;
  }
  return -1;
}

v1::FirewallAction apiAction(rules::FwAction a) {
  switch (a) {
    case rules::FwAction::kAllow: return v1::ALLOW;
    case rules::FwAction::kDeny: return v1::DENY;
    case rules::FwAction::kReject: return v1::REJECT;
  }
  return v1::ACTION_DEFAULT;
}

}  // namespace

grpc::Status ApplianceService::updateWith(
    const std::function<absl::Status(v1::ApplianceConfig&)>& mutate, uint64_t expected_version,
    bool force, v1::ApplyConfigResponse* resp) {
  return updateWith(
      std::function<absl::Status(v1::ApplianceConfig&, rules::ConfigErrorList&)>(
          [&](v1::ApplianceConfig& doc, rules::ConfigErrorList&) { return mutate(doc); }),
      expected_version, force, resp);
}

grpc::Status ApplianceService::updateWith(
    const std::function<absl::Status(v1::ApplianceConfig&, rules::ConfigErrorList&)>& mutate,
    uint64_t expected_version, bool force, v1::ApplyConfigResponse* resp) {
  ApplyError err;
  auto r = config_->update(mutate, expected_version, force, &err);
  if (!r.ok()) {
    if (err.status.ok()) err.status = r.status();
    return applyErrorToGrpc(err);
  }
  fillApplyResponse(*r, resp);
  return grpc::Status::OK;
}

grpc::Status ApplianceService::AddFirewallRule(grpc::ServerContext*,
                                               const v1::AddFirewallRuleRequest* req,
                                               v1::ApplyConfigResponse* resp) {
  if (!req->has_rule()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "rule: missing");
  }
  const v1::FirewallRule& rule = req->rule();
  if (absl::Status st = rules::checkRuleId(rule.id()); !st.ok()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("rule.id: ", st.message()));
  }
  auto mutate = [&](v1::ApplianceConfig& doc) -> absl::Status {
    auto* list = doc.mutable_firewall()->mutable_rules();
    const int n = list->size();
    if (int i = findInlineRule(doc, rule.id()); i >= 0) {
      return absl::AlreadyExistsError(
          absl::StrCat("firewall.rules[", i, "] already has id '", rule.id(), "'"));
    }
    int pos = n;
    switch (req->position_case()) {
      case v1::AddFirewallRuleRequest::kIndex:
        if (req->index() > static_cast<uint32_t>(n)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "index: ", req->index(), " is beyond the end of firewall.rules (", n, " rules)"));
        }
        pos = static_cast<int>(req->index());
        break;
      case v1::AddFirewallRuleRequest::kBeforeId:
      case v1::AddFirewallRuleRequest::kAfterId: {
        const bool before = req->position_case() == v1::AddFirewallRuleRequest::kBeforeId;
        const std::string& ref = before ? req->before_id() : req->after_id();
        int i = findInlineRule(doc, ref);
        if (i < 0) {
          return absl::NotFoundError(absl::StrCat(before ? "before_id" : "after_id",
                                                  ": no rule with id '", ref,
                                                  "' in firewall.rules"));
        }
        pos = before ? i : i + 1;
        break;
      }
      default:
        break;
    }
    *list->Add() = rule;
    for (int i = n; i > pos; --i) list->SwapElements(i, i - 1);
    return absl::OkStatus();
  };
  return updateWith(mutate, req->expected_version(), req->force(), resp);
}

grpc::Status ApplianceService::RemoveFirewallRule(grpc::ServerContext*,
                                                  const v1::RemoveFirewallRuleRequest* req,
                                                  v1::ApplyConfigResponse* resp) {
  if (req->id().empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "id: required");
  auto mutate = [&](v1::ApplianceConfig& doc) -> absl::Status {
    int i = findInlineRule(doc, req->id());
    if (i >= 0) {
      doc.mutable_firewall()->mutable_rules()->DeleteSubrange(i, 1);
      return absl::OkStatus();
    }
    // A rule of a rule file cannot be removed here: say where it is.
    ModelDetails details;
    if (toModel(doc, nullptr, &details).ok()) {
      for (const rules::FirewallRuleSpec& s : details.firewall_rules) {
        if (s.id == req->id() && !s.file.empty()) {
          return absl::FailedPreconditionError(absl::StrCat(
              "rule '", req->id(), "' comes from the rule file ", s.file, ":", s.line,
              "; edit the file (or remove it from firewall.rule_files) and apply again"));
        }
      }
    }
    return absl::NotFoundError(absl::StrCat("no rule with id '", req->id(), "'"));
  };
  return updateWith(mutate, req->expected_version(), req->force(), resp);
}

grpc::Status ApplianceService::ListFirewallRules(grpc::ServerContext*,
                                                 const v1::ListFirewallRulesRequest*,
                                                 v1::ListFirewallRulesResponse* resp) {
  auto view = config_->firewallView();
  if (!view.ok()) return toGrpc(view.status());
  const rules::CompiledFirewall& fw = *view->compiled;
  resp->set_config_version(view->version);
  std::map<std::string, const rules::FirewallRuleSpec*> by_id;
  for (const auto& s : view->rules) by_id.emplace(s.id, &s);
  std::map<std::string, dp::RuleCounters> counters;
  for (auto& c : plane_->ruleCounters()) counters.emplace(c.id, c);
  std::vector<uint64_t> entries(fw.rules.size(), 0);
  for (const auto* list : {&fw.v4, &fw.v6}) {
    for (const rules::AclEntry& e : *list) {
      if (e.rule < entries.size()) ++entries[e.rule];
    }
  }
  for (size_t rank = 0; rank < fw.rules.size(); ++rank) {
    const rules::FwRuleInfo& info = fw.rules[rank];
    v1::FirewallRuleStatus* st = resp->add_rules();
    if (auto it = by_id.find(info.id); it != by_id.end()) {
      *st->mutable_rule() = protoFromSpec(*it->second);
      st->set_source(it->second->file.empty()
                         ? std::string("config")
                         : absl::StrCat(it->second->file, ":", it->second->line));
    } else {
      st->mutable_rule()->set_id(info.id);
      st->mutable_rule()->set_priority(info.priority);
      st->mutable_rule()->set_action(apiAction(info.action));
      st->mutable_rule()->set_description(info.description);
    }
    st->set_rank(static_cast<uint32_t>(rank));
    st->set_acl_entries(entries[rank]);
    if (auto it = counters.find(info.id); it != counters.end()) {
      st->set_packets(it->second.packets);
      st->set_bytes(it->second.bytes);
      st->set_flows(it->second.flows);
      if (it->second.last_hit_ns) {
        st->set_last_hit_unix_ns(static_cast<int64_t>(it->second.last_hit_ns) +
                                 opts_.wall_offset_ns);
      }
    }
  }
  resp->set_default_a_to_b(apiAction(fw.default_action[0]));
  resp->set_default_b_to_a(apiAction(fw.default_action[1]));
  resp->set_keep_established_on_change(!fw.reevaluate_on_change);
  resp->set_geoip_database(fw.geoip_database);
  resp->set_acl_entries_v4(fw.v4.size());
  resp->set_acl_entries_v6(fw.v6.size());
  for (const auto& cc : fw.countries) resp->add_countries(rules::countryString(cc));
  return grpc::Status::OK;
}

grpc::Status ApplianceService::SetGeoipDatabase(grpc::ServerContext*,
                                                const v1::SetGeoipDatabaseRequest* req,
                                                v1::ApplyConfigResponse* resp) {
  std::string path = req->path();
  if (!path.empty()) {
    // Stored absolute: the document must mean the same file whatever reads it later.
    std::error_code ec;
    std::filesystem::path abs = std::filesystem::absolute(path, ec);
    if (!ec) path = abs.lexically_normal().string();
    // Checked before anything changes (and again, with the whole document, by the apply).
    if (absl::Status st = rules::checkGeoipDatabase(path); !st.ok()) {
      return toGrpc(absl::Status(st.code(), absl::StrCat("path: ", st.message())));
    }
  }
  auto mutate = [&](v1::ApplianceConfig& doc) -> absl::Status {
    if (path.empty()) {
      doc.clear_geoip();
    } else {
      doc.mutable_geoip()->set_database(path);
    }
    return absl::OkStatus();
  };
  return updateWith(mutate, req->expected_version(), req->force(), resp);
}

grpc::Status ApplianceService::LookupCountry(grpc::ServerContext*,
                                             const v1::LookupCountryRequest* req,
                                             v1::LookupCountryResponse* resp) {
  auto addr = rules::parseAddress(req->ip());
  if (!addr.ok()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("ip: ", addr.status().message()));
  }
  std::string path = req->database();
  if (path.empty()) path = config_->current().geoip().database();
  if (path.empty()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "no GeoIP database is configured (geoip.database); set one "
                        "(SetGeoipDatabase) or name one in 'database'");
  }
  auto db = rules::GeoipDb::open(path);
  if (!db.ok()) return toGrpc(db.status());
  auto r = (*db)->lookup(*addr);
  if (!r.ok()) return toGrpc(r.status());
  resp->set_ip(rules::formatPrefix(*addr, true));
  resp->set_found(r->found);
  resp->set_country(r->country);
  resp->set_registered_country(r->registered_country);
  if (r->found) resp->set_network(rules::formatPrefix(r->network));
  resp->set_database(path);
  resp->set_database_type((*db)->databaseType());
  resp->set_database_build_epoch((*db)->buildEpoch());
  if (r->country.size() == 2) {
    if (auto view = config_->firewallView(); view.ok() && view->compiled) {
      resp->set_country_index(view->compiled->countryIndex(r->country.c_str()));
    }
  }
  return grpc::Status::OK;
}

}  // namespace dpu::ctl
