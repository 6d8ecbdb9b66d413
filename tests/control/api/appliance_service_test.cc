// The gRPC service in-process over a real unix-socket server, with a fake dataplane
// (DataplaneControl) and the real ConfigStore/ConfigManager on a temporary state directory.
#include "control/api/appliance_service.h"

#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <tuple>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "control/api/event_hub.h"
#include "control/api/frame_builder.h"
#include "control/api/server.h"
#include "control/app/summary.h"
#include "control/config/config_manager.h"
#include "control/config/config_store.h"
#include "control/metrics/metrics_server.h"
#include "dataplane/packet/parser.h"
#include "proto/appliance_api.grpc.pb.h"

namespace dpu::ctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

// --- fake dataplane ------------------------------------------------------------------------

class FakePlane : public dp::DataplaneControl {
 public:
  FakePlane() {
    auto s = std::make_unique<rules::Snapshot>();
    s->generation = 1;
    s->config_version = 1;
    current_ = std::move(s);
  }

  absl::StatusOr<std::unique_ptr<dp::PreparedSnapshot>> prepare(
      std::unique_ptr<rules::Snapshot> next) override {
    auto p = std::make_unique<dp::PreparedSnapshot>();
    p->snap = std::move(next);
    return p;
  }
  uint32_t publish(std::unique_ptr<dp::PreparedSnapshot> prepared) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::unique_ptr<rules::Snapshot> next = std::move(prepared->snap);
    next->generation = current_->generation + 1;
    current_ = std::move(next);
    ++publishes_;
    return current_->generation;
  }
  std::vector<dp::RuleCounters> ruleCounters() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return rule_counters_;
  }
  uint32_t currentGeneration() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return current_->generation;
  }
  dp::CountersSnapshot counters() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return counters_;
  }
  std::vector<dp::WorkerInfo> workers() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return {{0, 1, current_->generation}, {1, 2, current_->generation - 1}};
  }
  std::vector<dp::PortInfo> ports() const override {
    dp::PortInfo a;
    a.side = dp::kSideA;
    a.port_id = 0;
    a.name = "net_pcap0";
    a.driver = "net_pcap";
    a.rx_packets = 1000;
    a.rx_bytes = 64000;
    a.rx_missed = 3;
    dp::PortInfo b;
    b.side = dp::kSideB;
    b.port_id = 1;
    b.name = "net_null0";
    b.driver = "net_null";
    b.tx_packets = 990;
    b.tx_errors = 1;
    return {a, b};
  }
  uint32_t drainEvents(const std::function<void(const dp::Event&)>& fn, uint32_t max) override {
    std::deque<dp::Event> batch;
    {
      std::lock_guard<std::mutex> lock(ev_mu_);
      while (!events_.empty() && batch.size() < max) {
        batch.push_back(events_.front());
        events_.pop_front();
      }
    }
    for (const auto& e : batch) fn(e);
    return static_cast<uint32_t>(batch.size());
  }
  dp::ExplainResult explain(const uint8_t* frame, uint32_t len, uint8_t side) const override {
    std::lock_guard<std::mutex> lock(mu_);
    return dp::explainPacket(*current_, frame, len, side);
  }

  void pushEvent(const dp::Event& e) {
    std::lock_guard<std::mutex> lock(ev_mu_);
    events_.push_back(e);
  }
  size_t pendingEvents() const {
    std::lock_guard<std::mutex> lock(ev_mu_);
    return events_.size();
  }
  void setCounters(dp::CountersSnapshot c) {
    std::lock_guard<std::mutex> lock(mu_);
    counters_ = std::move(c);
  }
  int publishes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return publishes_;
  }
  rules::DataplaneSettings settings() const {
    std::lock_guard<std::mutex> lock(mu_);
    return current_->dataplane;
  }
  uint64_t snapshotVersion() const {
    std::lock_guard<std::mutex> lock(mu_);
    return current_->config_version;
  }
  std::shared_ptr<const rules::CompiledFirewall> firewall() const {
    std::lock_guard<std::mutex> lock(mu_);
    return current_->firewall;
  }
  void setRuleCounters(std::vector<dp::RuleCounters> c) {
    std::lock_guard<std::mutex> lock(mu_);
    rule_counters_ = std::move(c);
  }
  // --- flows view / capture --- one UDP flow whose counters move 100 packets / 1000 bytes
  // and whose worker clock moves 100 ms per listing; captures hand out `capture_left_`
  // frames, then nothing.
  absl::StatusOr<dp::FlowListing> listFlows(uint32_t) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++listings_;
    dp::FlowListing l;
    l.now_ns = {listings_ * 100'000'000ull};
    dp::FlowInfo f;
    f.flow_id = (1ull << 32) | 7;
    f.proto = 17;
    f.src.b[0] = 10, f.src.b[3] = 1;
    f.dst.b[0] = 10, f.dst.b[3] = 2;
    f.sport = 5000;
    f.dport = 53;
    f.verdict = dp::Verdict::kForward;
    f.packets[0] = 100 * listings_;
    f.bytes[0] = 1000 * listings_;
    f.first_seen_ns = 1;
    f.last_seen_ns = l.now_ns[0];
    l.flows.push_back(f);
    return l;
  }
  absl::Status armCapture(const dp::CaptureSpec& spec) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (armed_) return absl::FailedPreconditionError("a capture is already running");
    armed_ = true;
    last_spec_ = spec;
    return absl::OkStatus();
  }
  uint32_t readCapture(std::vector<dp::CapturedPacket>* out, uint32_t max, uint64_t* lost) override {
    std::lock_guard<std::mutex> lock(mu_);
    uint32_t n = 0;
    while (capture_left_ > 0 && n < max) {
      dp::CapturedPacket p;
      p.data = {1, 2, 3, static_cast<uint8_t>(capture_left_)};
      p.orig_len = 60;
      p.verdict = dp::Verdict::kDrop;
      p.stage = dp::Stage::kFirewall;
      p.reason = dp::DropReason::kFirewallDeny;
      out->push_back(p);
      --capture_left_;
      ++n;
    }
    if (lost) *lost += 2;
    return n;
  }
  void disarmCapture() override {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = false;
  }
  void setCaptureLeft(uint32_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    capture_left_ = n;
  }
  bool captureArmed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return armed_;
  }
  dp::CaptureSpec lastSpec() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_spec_;
  }

 private:
  mutable std::mutex mu_;
  std::unique_ptr<rules::Snapshot> current_;
  dp::CountersSnapshot counters_;
  std::vector<dp::RuleCounters> rule_counters_;
  int publishes_ = 0;
  uint64_t listings_ = 0;
  bool armed_ = false;
  uint32_t capture_left_ = 0;
  dp::CaptureSpec last_spec_;
  mutable std::mutex ev_mu_;
  std::deque<dp::Event> events_;
};

dp::Event dropEvent(uint64_t seq) {
  dp::Event e{};
  e.type = dp::EventType::kDrop;
  e.in_side = dp::kSideA;
  e.stage = dp::Stage::kParse;
  e.reason = dp::DropReason::kNonIp;
  e.verdict = dp::Verdict::kDrop;
  e.rule = dp::kNoRule;
  e.ts_ns = 1'700'000'000'000'000'000ull + seq;
  e.seq = seq;
  e.flow_id = seq + 1;  // identifies the event on the client side
  return e;
}

std::string makeTempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "dpu_api_test.XXXXXX").string();
  char* d = mkdtemp(tmpl.data());
  return d ? std::string(d) : std::string();
}

// --- fixture -------------------------------------------------------------------------------

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = makeTempDir();
    ASSERT_FALSE(dir_.empty());
    state_dir_ = dir_ + "/state";
    auto store = ConfigStore::open(state_dir_, nullptr);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    manager_ = std::make_unique<ConfigManager>(store_.get(), &plane_);
    EventHubOptions ho;
    ho.period = 5ms;
    hub_ = std::make_unique<EventHub>(&plane_, ho);
    ASSERT_TRUE(hub_->start().ok());
    service_ = std::make_unique<ApplianceService>(manager_.get(), &plane_, hub_.get(),
                                                  ServiceOptions{state_dir_});
    ApiServerOptions so;
    so.state_dir = state_dir_;
    so.max_request_bytes = 64 * 1024;
    auto server = ApiServer::start(so, service_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    channel_ = newChannel();
    stub_ = v1::Appliance::NewStub(channel_);
  }

  void TearDown() override {
    if (server_) server_->shutdown(500ms);
    server_.reset();
    service_.reset();
    if (hub_) hub_->stop();
    hub_.reset();
    manager_.reset();
    store_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // A channel of its own (own connection); no BDP probing so the stream flow-control window
  // stays at its 64 KiB default (a client that does not read really stalls its stream).
  std::shared_ptr<grpc::Channel> newChannel() {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    return grpc::CreateCustomChannel(server_->address(), grpc::InsecureChannelCredentials(),
                                     args);
  }

  // A bound for a hung call, not a speed requirement: generous for a busy machine (ASan,
  // 2 cores at load 5), under the test's ctest TIMEOUT.
  static void deadline(grpc::ClientContext* ctx, std::chrono::milliseconds d = 60s) {
    ctx->set_deadline(std::chrono::system_clock::now() + d);
  }

  uint64_t committedVersion() {
    grpc::ClientContext ctx;
    deadline(&ctx);
    v1::GetConfigResponse r;
    EXPECT_TRUE(stub_->GetConfig(&ctx, v1::GetConfigRequest(), &r).ok());
    return r.config().version();
  }

  grpc::Status apply(const v1::ApplianceConfig& cfg, uint64_t expected, bool force,
                     v1::ApplyConfigResponse* resp) {
    grpc::ClientContext ctx;
    deadline(&ctx);
    v1::ApplyConfigRequest req;
    *req.mutable_config() = cfg;
    req.set_expected_version(expected);
    req.set_force(force);
    return stub_->ApplyConfig(&ctx, req, resp);
  }

  grpc::Status update(const v1::ApplianceConfig& cfg, std::vector<std::string> paths,
                      uint64_t expected, v1::ApplyConfigResponse* resp) {
    grpc::ClientContext ctx;
    deadline(&ctx);
    v1::UpdateConfigRequest req;
    *req.mutable_config() = cfg;
    for (auto& p : paths) req.mutable_update_mask()->add_paths(p);
    req.set_expected_version(expected);
    return stub_->UpdateConfig(&ctx, req, resp);
  }

  static v1::ApplianceConfig parse(const std::string& json) {
    v1::ApplianceConfig c;
    auto st = google::protobuf::util::JsonStringToMessage(json, &c);
    EXPECT_TRUE(st.ok()) << st.message();
    return c;
  }

  // The ConfigErrors in a status's details, decoded as any client would (RpcStatus has the
  // wire format of google.rpc.Status).
  static std::vector<v1::ConfigError> decodeErrors(const grpc::Status& st) {
    std::vector<v1::ConfigError> out;
    v1::RpcStatus rs;
    EXPECT_TRUE(rs.ParseFromString(st.error_details()));
    EXPECT_EQ(rs.code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
    EXPECT_EQ(rs.message(), st.error_message());
    EXPECT_EQ(rs.details_size(), 1);
    for (const auto& any : rs.details()) {
      EXPECT_EQ(any.type_url(), "type.googleapis.com/dpu.v1.ConfigErrors");
      v1::ConfigErrors list;
      EXPECT_TRUE(any.UnpackTo(&list));
      out.insert(out.end(), list.errors().begin(), list.errors().end());
    }
    return out;
  }

  FakePlane plane_;
  std::string dir_, state_dir_;
  std::unique_ptr<ConfigStore> store_;
  std::unique_ptr<ConfigManager> manager_;
  std::unique_ptr<EventHub> hub_;
  std::unique_ptr<ApplianceService> service_;
  std::unique_ptr<ApiServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Appliance::Stub> stub_;
};

// --- status, config ------------------------------------------------------------------------

TEST_F(ServiceTest, StatusReportsIdentityVersionsWorkersPortsBuild) {
  grpc::ClientContext ctx;
  deadline(&ctx);
  v1::StatusResponse s;
  ASSERT_TRUE(stub_->GetStatus(&ctx, v1::GetStatusRequest(), &s).ok());
  EXPECT_EQ(s.instance_id().size(), 32u);
  EXPECT_EQ(s.instance_id().find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(s.instance_id(), service_->instanceId());
  EXPECT_GE(s.uptime_seconds(), 0.0);
  EXPECT_EQ(s.config_version(), 1u);
  EXPECT_EQ(s.generation(), 1u);
  ASSERT_EQ(s.workers_size(), 2);
  EXPECT_EQ(s.workers(0).lcore(), 1u);
  EXPECT_EQ(s.workers(0).generation(), 1u);
  EXPECT_EQ(s.workers(1).generation(), 0u);
  ASSERT_EQ(s.ports_size(), 2);
  EXPECT_EQ(s.ports(0).side(), "A");
  EXPECT_EQ(s.ports(0).name(), "net_pcap0");
  EXPECT_EQ(s.ports(1).side(), "B");
  EXPECT_EQ(s.ports(1).driver(), "net_null");
  EXPECT_EQ(s.state_dir(), state_dir_);
  EXPECT_EQ(s.build().version(), "0.1.0");
  EXPECT_FALSE(s.build().git_commit().empty());
  EXPECT_FALSE(s.build().compiler().empty());
  EXPECT_THAT(s.build().dpdk_version(), HasSubstr("22.11"));
}

TEST_F(ServiceTest, InstanceIdsDifferPerService) {
  ApplianceService other(manager_.get(), &plane_, nullptr, ServiceOptions{});
  EXPECT_NE(other.instanceId(), service_->instanceId());
}

TEST_F(ServiceTest, ApplyCommitsPublishesAndPersists) {
  v1::ApplyConfigResponse r;
  auto cfg = parse(R"({"dataplane":{"non_ip":"DROP","timeouts":{"udp_s":30}}})");
  grpc::Status st = apply(cfg, 1, false, &r);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(r.version(), 2u);
  EXPECT_EQ(r.generation(), 2u);
  EXPECT_GE(r.persist_ms(), 0.0);
  EXPECT_EQ(plane_.publishes(), 1);
  EXPECT_EQ(plane_.snapshotVersion(), 2u);
  EXPECT_EQ(plane_.settings().non_ip, rules::Policy::kDrop);
  EXPECT_EQ(plane_.settings().udp_s, 30u);

  grpc::ClientContext ctx;
  deadline(&ctx);
  v1::GetConfigResponse got;
  ASSERT_TRUE(stub_->GetConfig(&ctx, v1::GetConfigRequest(), &got).ok());
  EXPECT_EQ(got.config().version(), 2u);
  EXPECT_EQ(got.config().dataplane().non_ip(), v1::DROP);
  EXPECT_EQ(got.config().dataplane().timeouts().udp_s(), 30u);

  // Persisted: a store opened afresh on the directory sees it.
  auto again = ConfigStore::open(state_dir_, nullptr);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->version(), 2u);
  EXPECT_EQ((*again)->current().dataplane().non_ip(), v1::DROP);
}

TEST_F(ServiceTest, VersionConflictIsAbortedAndChangesNothing) {
  v1::ApplyConfigResponse r;
  ASSERT_TRUE(apply(parse(R"({"dataplane":{"non_ip":"DROP"}})"), 1, false, &r).ok());
  // A second client still based on version 1.
  grpc::Status st = apply(parse(R"({"dataplane":{"malformed":"FORWARD"}})"), 1, false, &r);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_THAT(st.error_message(), HasSubstr("expected 1"));
  EXPECT_THAT(st.error_message(), HasSubstr("committed 2"));
  EXPECT_EQ(committedVersion(), 2u);
  EXPECT_EQ(plane_.publishes(), 1);
  // expected_version 0 without force is a conflict too; with force it applies.
  EXPECT_EQ(apply(parse("{}"), 0, false, &r).error_code(), grpc::StatusCode::ABORTED);
  ASSERT_TRUE(apply(parse(R"({"dataplane":{"malformed":"FORWARD"}})"), 0, true, &r).ok());
  EXPECT_EQ(r.version(), 3u);
  EXPECT_EQ(plane_.settings().malformed, rules::Policy::kForward);
  EXPECT_EQ(plane_.settings().non_ip, rules::Policy::kForward);  // whole document replaced
}

TEST_F(ServiceTest, InvalidConfigListsEveryErrorInStatusDetails) {
  v1::ApplyConfigResponse r;
  grpc::Status st = apply(parse(R"({"dataplane":{"flow_table":{"capacity_per_worker":5},
                                    "timeouts":{"tcp_syn_s":999999999},
                                    "fragments":{"max_fragments":1000}}})"),
                          1, false, &r);
  ASSERT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("3 errors"));
  std::vector<v1::ConfigError> errs = decodeErrors(st);
  ASSERT_EQ(errs.size(), 3u);
  std::vector<std::string> fields;
  for (const auto& e : errs) {
    fields.push_back(e.field());
    EXPECT_EQ(e.section(), "dataplane");
    EXPECT_THAT(e.reason(), HasSubstr("out of range"));
  }
  EXPECT_THAT(fields, ::testing::UnorderedElementsAre("dataplane.flow_table.capacity_per_worker",
                                                      "dataplane.timeouts.tcp_syn_s",
                                                      "dataplane.fragments.max_fragments"));
  EXPECT_EQ(committedVersion(), 1u);
  EXPECT_EQ(plane_.publishes(), 0);
}

TEST_F(ServiceTest, UpdateMergesOnlyMaskedPaths) {
  v1::ApplyConfigResponse r;
  ASSERT_TRUE(apply(parse(R"({"dataplane":{"timeouts":{"udp_s":30,"icmp_s":5},
                                           "tcp":{"midstream":"DROP"}}})"),
                    1, false, &r)
                  .ok());
  // The request carries more than the mask names: only the masked field is taken.
  auto req = parse(R"({"dataplane":{"non_ip":"DROP","malformed":"FORWARD",
                                    "timeouts":{"udp_s":99}}})");
  grpc::Status st = update(req, {"dataplane.non_ip"}, 2, &r);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(r.version(), 3u);
  auto d = plane_.settings();
  EXPECT_EQ(d.non_ip, rules::Policy::kDrop);
  EXPECT_EQ(d.malformed, rules::Policy::kDrop);  // default, not taken from the request
  EXPECT_EQ(d.udp_s, 30u);
  EXPECT_EQ(d.icmp_s, 5u);
  EXPECT_EQ(d.tcp_midstream, rules::Policy::kDrop);

  // A masked scalar inside a message.
  ASSERT_TRUE(update(req, {"dataplane.timeouts.udp_s"}, 3, &r).ok());
  EXPECT_EQ(plane_.settings().udp_s, 99u);
  EXPECT_EQ(plane_.settings().icmp_s, 5u);

  // A masked message absent from the request is cleared (back to defaults).
  ASSERT_TRUE(update(parse("{}"), {"dataplane.timeouts"}, 4, &r).ok());
  EXPECT_EQ(plane_.settings().udp_s, 120u);
  EXPECT_EQ(plane_.settings().icmp_s, 30u);
  EXPECT_EQ(plane_.settings().non_ip, rules::Policy::kDrop);  // untouched

  grpc::ClientContext ctx;
  deadline(&ctx);
  v1::GetConfigResponse got;
  ASSERT_TRUE(stub_->GetConfig(&ctx, v1::GetConfigRequest(), &got).ok());
  EXPECT_EQ(got.config().version(), 5u);
  EXPECT_FALSE(got.config().dataplane().has_timeouts());
  EXPECT_EQ(got.config().dataplane().tcp().midstream(), v1::DROP);
}

TEST_F(ServiceTest, UpdateRejectsBadMasksAndInvalidResults) {
  v1::ApplyConfigResponse r;
  grpc::Status st = update(parse("{}"), {"dataplane.no_such_field"}, 1, &r);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("'dataplane.no_such_field'"));
  st = update(parse("{}"), {"dataplane.non_ip.x"}, 1, &r);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("dataplane.non_ip.x"));
  st = update(parse("{}"), {"version"}, 1, &r);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  st = update(parse("{}"), {}, 1, &r);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("update_mask"));
  // Version conflict.
  st = update(parse(R"({"dataplane":{"non_ip":"DROP"}})"), {"dataplane.non_ip"}, 7, &r);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::ABORTED);
  // The merged document is invalid: same details as ApplyConfig.
  st = update(parse(R"({"dataplane":{"flow_table":{"aging_slice":100000}}})"),
              {"dataplane.flow_table.aging_slice"}, 1, &r);
  ASSERT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  auto errs = decodeErrors(st);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].field(), "dataplane.flow_table.aging_slice");
  EXPECT_EQ(committedVersion(), 1u);
  EXPECT_EQ(plane_.publishes(), 0);
}

TEST_F(ServiceTest, ValidateReportsErrorsWithoutCommitting) {
  grpc::ClientContext ctx;
  deadline(&ctx);
  v1::ValidateConfigRequest req;
  *req.mutable_config() = parse(R"({"dataplane":{"non_ip":"DROP"}})");
  v1::ValidateConfigResponse resp;
  ASSERT_TRUE(stub_->ValidateConfig(&ctx, req, &resp).ok());
  EXPECT_TRUE(resp.valid());
  EXPECT_EQ(resp.errors_size(), 0);

  grpc::ClientContext ctx2;
  deadline(&ctx2);
  *req.mutable_config() =
      parse(R"({"dataplane":{"timeouts":{"udp_s":100000,"icmp_s":100000}}})");
  ASSERT_TRUE(stub_->ValidateConfig(&ctx2, req, &resp).ok());
  EXPECT_FALSE(resp.valid());
  ASSERT_EQ(resp.errors_size(), 2);
  EXPECT_EQ(resp.errors(0).field(), "dataplane.timeouts.udp_s");
  EXPECT_EQ(resp.errors(1).field(), "dataplane.timeouts.icmp_s");
  EXPECT_EQ(committedVersion(), 1u);
  EXPECT_EQ(plane_.publishes(), 0);
}

// --- stats ---------------------------------------------------------------------------------

TEST_F(ServiceTest, StatsMapCountersPortsAndWorkers) {
  dp::CountersSnapshot c;
  c.per_worker.resize(2);
  c.per_worker[0].rx_packets[dp::kSideA] = 600;
  c.per_worker[0].verdicts[static_cast<int>(dp::Verdict::kForward)] = 590;
  c.per_worker[0].verdicts[static_cast<int>(dp::Verdict::kDrop)] = 10;
  c.per_worker[0].drops[static_cast<int>(dp::DropReason::kNonIp)] = 10;
  c.per_worker[0].stage_packets[static_cast<int>(dp::Stage::kParse)] = 600;
  c.per_worker[0].stage_drops[static_cast<int>(dp::Stage::kParse)] = 10;
  c.per_worker[0].generation = 1;
  c.per_worker[1].rx_packets[dp::kSideB] = 400;
  c.per_worker[1].verdicts[static_cast<int>(dp::Verdict::kForward)] = 400;
  c.per_worker[1].flows_active = 7;
  c.per_worker[1].events_lost = 2;
  c.per_worker[1].generation = 1;
  c.per_worker[0].sig_inspected = 50;  // --- signatures ---
  c.per_worker[1].sig_inspected = 25;
  c.per_worker[1].sig_candidates = 9;
  c.per_worker[1].sig_matches = 4;
  c.per_worker[1].sig_rejects = 1;
  c.per_worker[1].sig_hits_dropped = 2;
  for (const auto& w : c.per_worker) dp::accumulate(c.total, w);
  plane_.setCounters(c);

  grpc::ClientContext ctx;
  deadline(&ctx);
  v1::Stats s;
  ASSERT_TRUE(stub_->GetStats(&ctx, v1::GetStatsRequest(), &s).ok());
  EXPECT_GT(s.timestamp_unix_ns(), 0);
  EXPECT_EQ(s.config_version(), 1u);
  EXPECT_EQ(s.generation(), 1u);
  EXPECT_EQ(s.total().rx_packets_a(), 600u);
  EXPECT_EQ(s.total().rx_packets_b(), 400u);
  EXPECT_EQ(s.total().forwarded(), 990u);
  EXPECT_EQ(s.total().dropped(), 10u);
  ASSERT_EQ(s.total().drops_size(), 1);
  EXPECT_EQ(s.total().drops().at("non_ip"), 10u);
  ASSERT_EQ(s.total().stages_size(), 1);
  EXPECT_EQ(s.total().stages(0).stage(), "parse");
  EXPECT_EQ(s.total().stages(0).dropped(), 10u);
  EXPECT_EQ(s.total().flows_active(), 7u);
  EXPECT_EQ(s.total().events_lost(), 2u);
  ASSERT_EQ(s.workers_size(), 2);
  EXPECT_EQ(s.workers(1).counters().rx_packets_b(), 400u);
  EXPECT_EQ(s.workers(0).generation(), 1u);
  EXPECT_EQ(s.total().signatures().inspected(), 75u);
  EXPECT_EQ(s.total().signatures().candidates(), 9u);
  EXPECT_EQ(s.total().signatures().matches(), 4u);
  EXPECT_EQ(s.total().signatures().rejects(), 1u);
  EXPECT_EQ(s.total().signatures().hits_dropped(), 2u);
  EXPECT_EQ(s.workers(0).counters().signatures().inspected(), 50u);
  ASSERT_EQ(s.ports_size(), 2);
  EXPECT_EQ(s.ports(0).side(), "A");
  EXPECT_EQ(s.ports(0).rx_packets(), 1000u);
  EXPECT_EQ(s.ports(0).rx_missed(), 3u);
  EXPECT_EQ(s.ports(1).tx_errors(), 1u);
}

TEST_F(ServiceTest, WatchStatsStreamsAtTheIntervalUntilCancelled) {
  grpc::ClientContext ctx;
  v1::WatchStatsRequest req;
  req.set_interval_ms(10);  // raised to the 100 ms minimum
  auto reader = stub_->WatchStats(&ctx, req);
  std::vector<int64_t> ts;
  v1::Stats s;
  auto t0 = std::chrono::steady_clock::now();
  while (ts.size() < 3 && reader->Read(&s)) ts.push_back(s.timestamp_unix_ns());
  auto elapsed = std::chrono::steady_clock::now() - t0;
  ASSERT_EQ(ts.size(), 3u);
  // Sent on a fixed 100 ms schedule (not 10 ms): a late wake-up shortens the next gap, so the
  // check spans two intervals with room for scheduling jitter on a loaded machine.
  EXPECT_GE(ts[2] - ts[0], 150'000'000);
  EXPECT_GE(elapsed, 180ms);
  ctx.TryCancel();
  while (reader->Read(&s)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(ServiceTest, ServerShutdownEndsStreams) {
  grpc::ClientContext ctx;
  v1::WatchStatsRequest req;
  req.set_interval_ms(60000);
  auto reader = stub_->WatchStats(&ctx, req);
  v1::Stats s;
  ASSERT_TRUE(reader->Read(&s));
  auto t0 = std::chrono::steady_clock::now();
  server_->shutdown(120s);
  // Not waiting for the grace time (120 s): streams end at once; the margin is for a busy machine.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 60s);
  EXPECT_FALSE(reader->Read(&s));
  EXPECT_FALSE(reader->Finish().ok());
}

// --- explain -------------------------------------------------------------------------------

TEST_F(ServiceTest, ExplainFromTupleAndFromFrame) {
  v1::ExplainRequest req;
  req.mutable_tuple()->set_src_ip("10.0.0.1");
  req.mutable_tuple()->set_dest_ip("10.0.0.2");
  req.mutable_tuple()->set_proto("tcp");
  req.mutable_tuple()->set_src_port(40000);
  req.mutable_tuple()->set_dest_port(443);
  req.mutable_tuple()->set_tcp_flags("S");
  req.set_payload("hello");
  v1::ExplainResponse resp;
  {
    grpc::ClientContext ctx;
    deadline(&ctx);
    grpc::Status st = stub_->Explain(&ctx, req, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  EXPECT_EQ(resp.verdict(), "forward");
  EXPECT_EQ(resp.generation(), 1u);
  EXPECT_THAT(resp.summary(), HasSubstr("10.0.0.1:40000 -> 10.0.0.2:443"));
  EXPECT_THAT(resp.summary(), HasSubstr("payload 5 bytes"));
  ASSERT_GE(resp.steps_size(), 1);
  EXPECT_EQ(resp.steps(0).stage(), "parse");

  // An ARP frame given as bytes, with non-IP dropped by the committed config.
  v1::ApplyConfigResponse ar;
  ASSERT_TRUE(apply(parse(R"({"dataplane":{"non_ip":"DROP"}})"), 1, false, &ar).ok());
  std::string arp(60, '\0');
  arp[12] = 0x08;
  arp[13] = 0x06;
  v1::ExplainRequest fr;
  fr.set_frame(arp);
  fr.set_side("b");
  {
    grpc::ClientContext ctx;
    deadline(&ctx);
    ASSERT_TRUE(stub_->Explain(&ctx, fr, &resp).ok());
  }
  EXPECT_EQ(resp.verdict(), "drop");
  EXPECT_EQ(resp.stage(), "parse");
  EXPECT_EQ(resp.reason(), "non_ip");
  EXPECT_EQ(resp.generation(), 2u);
}

// --- http --- (issue 17) With dpi.http, explain names the HTTP transaction and the file a
// rule matched in (ExplainResponse.http_matches).
TEST_F(ServiceTest, ExplainNamesTheHttpTransactionAndFile) {
  v1::ApplyConfigResponse ar;
  ASSERT_TRUE(apply(parse(R"({"dpi": {"rule_sets": [{"name": "f", "text":
      "rule pe { meta: action = \"drop\" condition: uint16(0) == 0x5A4D }"}],
      "http": {"ports": [80]}}})"), 1, false, &ar).ok());
  v1::ExplainRequest req;
  req.mutable_tuple()->set_src_ip("10.0.0.1");
  req.mutable_tuple()->set_dest_ip("192.0.2.80");
  req.mutable_tuple()->set_proto("tcp");
  req.mutable_tuple()->set_src_port(40000);
  req.mutable_tuple()->set_dest_port(80);
  req.mutable_tuple()->set_tcp_flags("PA");
  req.set_payload("POST /in/x.exe HTTP/1.1\r\nHost: up.test\r\nContent-Length: 10\r\n\r\nMZ12345678");
  v1::ExplainResponse resp;
  {
    grpc::ClientContext ctx;
    deadline(&ctx);
    ASSERT_TRUE(stub_->Explain(&ctx, req, &resp).ok());
  }
  EXPECT_EQ(resp.verdict(), "drop");
  EXPECT_EQ(resp.stage(), "dpi");
  ASSERT_EQ(resp.http_matches_size(), 1);  // (the test plane names DPI rules by index)
  const v1::ExplainHttpMatch& m = resp.http_matches(0);
  EXPECT_EQ(m.rule(), "f:pe");
  EXPECT_EQ(m.action(), "drop");
  EXPECT_EQ(m.method(), "POST");
  EXPECT_EQ(m.host(), "up.test");
  EXPECT_EQ(m.url(), "/in/x.exe");
  EXPECT_EQ(m.filename(), "x.exe");
  EXPECT_EQ(m.direction(), "request");
  EXPECT_EQ(m.offset_from(), 0u);
  EXPECT_EQ(m.offset_to(), 10u);
  EXPECT_EQ(m.size(), 10u);
  EXPECT_EQ(m.state(), "closed");
  EXPECT_EQ(m.sha256().size(), 64u);
  EXPECT_FALSE(m.at_flow_end());
}

TEST_F(ServiceTest, ExplainRejectsBadRequests) {
  auto call = [&](const v1::ExplainRequest& req) {
    grpc::ClientContext ctx;
    deadline(&ctx);
    v1::ExplainResponse resp;
    return stub_->Explain(&ctx, req, &resp);
  };
  v1::ExplainRequest req;
  EXPECT_EQ(call(req).error_code(), grpc::StatusCode::INVALID_ARGUMENT);  // nothing given
  req.mutable_tuple()->set_src_ip("10.0.0.300");
  req.mutable_tuple()->set_dest_ip("10.0.0.2");
  req.mutable_tuple()->set_proto("udp");
  grpc::Status st = call(req);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("tuple.src_ip"));
  req.mutable_tuple()->set_src_ip("10.0.0.1");
  req.set_side("C");
  st = call(req);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("side"));
}

// Explain by DNS name (issue 19.6): the server builds the query (defaults, qtype, TCP
// framing); its errors name the field. And DNS lists created / deleted (19.3).
TEST_F(ServiceTest, ExplainDnsQueryAndDnsListCreateDelete) {
  auto explain = [&](const v1::ExplainRequest& req, v1::ExplainResponse* resp) {
    grpc::ClientContext ctx;
    deadline(&ctx);
    return stub_->Explain(&ctx, req, resp);
  };
  v1::CreateDnsListRequest cr;
  cr.mutable_list()->set_name("ads");
  cr.mutable_list()->add_names("ads.example");
  cr.set_expected_version(1);
  v1::ApplyConfigResponse ar;
  {
    grpc::ClientContext ctx;
    deadline(&ctx);
    grpc::Status st = stub_->CreateDnsList(&ctx, cr, &ar);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  EXPECT_EQ(ar.version(), 2u);
  {
    grpc::ClientContext ctx;
    deadline(&ctx);
    EXPECT_EQ(stub_->CreateDnsList(&ctx, cr, &ar).error_code(), grpc::StatusCode::ABORTED);
  }
  cr.set_force(true);
  {
    grpc::ClientContext ctx;
    deadline(&ctx);
    EXPECT_EQ(stub_->CreateDnsList(&ctx, cr, &ar).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  }
  v1::ExplainRequest req;
  req.mutable_dns_query()->set_name("ads.example");
  v1::ExplainResponse resp;
  ASSERT_TRUE(explain(req, &resp).ok());
  EXPECT_EQ(resp.verdict(), "drop");
  EXPECT_EQ(resp.stage(), "dns");
  EXPECT_EQ(resp.reason(), "dns_answered");
  EXPECT_THAT(resp.summary(), HasSubstr("192.0.2.1:53000 -> 192.0.2.53:53 UDP"));
  // 12-byte header + 13 bytes of name + type + class.
  EXPECT_THAT(resp.summary(), HasSubstr("payload 29 bytes"));
  req.mutable_dns_query()->set_qtype("aaaa");
  req.mutable_tuple()->set_dest_ip("2001:db8::99");
  req.mutable_tuple()->set_proto("tcp");
  ASSERT_TRUE(explain(req, &resp).ok());
  EXPECT_EQ(resp.verdict(), "drop");
  EXPECT_THAT(resp.summary(), HasSubstr("2001:db8::1"));
  EXPECT_THAT(resp.summary(), HasSubstr("payload 31 bytes"));  // + the 2-byte length
  req.clear_tuple();
  req.mutable_dns_query()->set_name("other.example");
  ASSERT_TRUE(explain(req, &resp).ok());
  EXPECT_EQ(resp.verdict(), "forward");
  for (auto [name, qtype, field] : {std::tuple{"", "A", "dns_query.name"},
                                    std::tuple{"a..b", "A", "dns_query.name"},
                                    std::tuple{"a.example", "NOPE", "dns_query.qtype"},
                                    std::tuple{"a.example", "70000", "dns_query.qtype"}}) {
    req.mutable_dns_query()->set_name(name);
    req.mutable_dns_query()->set_qtype(qtype);
    grpc::Status st = explain(req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << name << " " << qtype;
    EXPECT_THAT(st.error_message(), HasSubstr(field));
  }
  req.mutable_dns_query()->set_name("a.example");
  req.mutable_dns_query()->set_qtype("");
  req.set_payload("x");
  EXPECT_EQ(explain(req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  req.clear_payload();
  req.mutable_tuple()->set_proto("icmp");
  EXPECT_EQ(explain(req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  v1::DeleteDnsListRequest del;
  del.set_name("ads");
  del.set_force(true);
  {
    grpc::ClientContext ctx;
    deadline(&ctx);
    ASSERT_TRUE(stub_->DeleteDnsList(&ctx, del, &ar).ok());
  }
  {
    grpc::ClientContext ctx;
    deadline(&ctx);
    EXPECT_EQ(stub_->DeleteDnsList(&ctx, del, &ar).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  req.clear_tuple();
  req.mutable_dns_query()->set_name("ads.example");
  ASSERT_TRUE(explain(req, &resp).ok());
  EXPECT_EQ(resp.verdict(), "forward");
}

TEST_F(ServiceTest, OversizedRequestIsResourceExhausted) {
  v1::ExplainRequest req;
  req.set_frame(std::string(100 * 1024, 'x'));  // server limit is 64 KiB in this fixture
  grpc::ClientContext ctx;
  deadline(&ctx);
  v1::ExplainResponse resp;
  grpc::Status st = stub_->Explain(&ctx, req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(st.error_message(), HasSubstr("larger than max"));
}

// --- events --------------------------------------------------------------------------------

struct Received {
  std::vector<uint64_t> ids;  // flow_id of each event, in order
  uint64_t lost_sum = 0;
  uint64_t accounted = 0;     // sum over received events of (1 + lost)
};

void record(Received& r, const v1::Event& e) {
  r.ids.push_back(e.flow_id());
  r.lost_sum += e.lost();
  r.accounted += 1 + e.lost();
}

TEST_F(ServiceTest, PumpDrainsWithoutSubscribers) {
  for (uint64_t i = 0; i < 5000; ++i) plane_.pushEvent(dropEvent(i));
  // Bounds for a hang, not speed requirements (a busy machine under ASan is slow, not wrong).
  auto until = std::chrono::steady_clock::now() + 120s;
  // The pump empties the rings first and counts what it handled after: wait for both.
  while ((plane_.pendingEvents() > 0 || hub_->drained() < 5000u) &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(plane_.pendingEvents(), 0u);
  EXPECT_EQ(hub_->drained(), 5000u);
}

TEST_F(ServiceTest, SlowSubscriberLosesEventsWhileFastOneGetsAll) {
  auto fast_channel = newChannel();
  auto slow_channel = newChannel();
  auto fast_stub = v1::Appliance::NewStub(fast_channel);
  auto slow_stub = v1::Appliance::NewStub(slow_channel);

  grpc::ClientContext fast_ctx, slow_ctx;
  v1::WatchEventsRequest fast_req, slow_req;
  fast_req.add_types("drop");  // default buffer (4096)
  slow_req.set_buffer_size(16);
  auto fast = fast_stub->WatchEvents(&fast_ctx, fast_req);
  auto slow = slow_stub->WatchEvents(&slow_ctx, slow_req);
  fast->WaitForInitialMetadata();
  slow->WaitForInitialMetadata();
  ASSERT_EQ(hub_->subscriberCount(), 2u);

  Received fr;
  std::atomic<uint64_t> fast_count{0};
  std::thread fast_reader([&] {
    v1::Event e;
    while (fast->Read(&e)) {
      record(fr, e);
      fast_count.store(fr.ids.size());
    }
  });

  // 20 batches of 1000 events (~5 MB on the wire), each handed to the pump only after the
  // fast subscriber got the previous one. The slow client reads nothing meanwhile: its
  // stream window (64 KiB) and its 16-event queue fill up. If the pump ever waited for the
  // slow subscriber, the fast one would stall and this loop would time out.
  constexpr uint64_t kBatches = 20, kBatch = 1000;
  uint64_t next_id = 0;
  for (uint64_t b = 0; b < kBatches; ++b) {
    for (uint64_t i = 0; i < kBatch; ++i) plane_.pushEvent(dropEvent(next_id++));
    auto until = std::chrono::steady_clock::now() + 10s;
    while (fast_count.load() < next_id && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(1ms);
    }
    ASSERT_EQ(fast_count.load(), next_id) << "fast subscriber stalled in batch " << b;
  }

  // Now the slow client reads; marker events follow until one reaches it, so the count of
  // what it lost is carried by an event it receives.
  Received sr;
  std::atomic<bool> slow_got_marker{false};
  const uint64_t first_marker = next_id;
  std::thread slow_reader([&] {
    v1::Event e;
    while (slow->Read(&e)) {
      record(sr, e);
      if (e.flow_id() > first_marker) slow_got_marker.store(true);  // flow_id = seq + 1
    }
  });
  auto until = std::chrono::steady_clock::now() + 120s;  // a bound for a hang (busy machine)
  while (!slow_got_marker.load() && std::chrono::steady_clock::now() < until) {
    plane_.pushEvent(dropEvent(next_id++));
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(slow_got_marker.load());
  // Let the fast subscriber catch up with the markers too, then end both streams.
  until = std::chrono::steady_clock::now() + 120s;
  while (fast_count.load() < next_id && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(1ms);
  }
  fast_ctx.TryCancel();
  slow_ctx.TryCancel();
  fast_reader.join();
  slow_reader.join();
  fast->Finish();
  slow->Finish();

  std::printf("events: %lu emitted; fast got %zu; slow got %zu and was told of %lu lost\n",
              static_cast<unsigned long>(next_id), fr.ids.size(), sr.ids.size(),
              static_cast<unsigned long>(sr.lost_sum));
  // Fast: everything, in order, nothing lost.
  ASSERT_EQ(fr.ids.size(), next_id);
  for (uint64_t i = 0; i < next_id; ++i) ASSERT_EQ(fr.ids[i], i + 1);
  EXPECT_EQ(fr.lost_sum, 0u);

  // Slow: lost events, counted exactly: the events it received plus the `lost` they carry
  // add up to every event up to the last one it received; ids only increase.
  ASSERT_FALSE(sr.ids.empty());
  EXPECT_GT(sr.lost_sum, 0u);
  EXPECT_LT(sr.ids.size(), kBatches * kBatch);
  EXPECT_TRUE(std::is_sorted(sr.ids.begin(), sr.ids.end()));
  EXPECT_EQ(sr.accounted, sr.ids.back());  // ids start at 1
}

TEST_F(ServiceTest, ConfigEventsOnApplyAndTypeFilter) {
  grpc::ClientContext ctx;
  v1::WatchEventsRequest req;
  req.add_types("config");
  auto reader = stub_->WatchEvents(&ctx, req);
  reader->WaitForInitialMetadata();
  plane_.pushEvent(dropEvent(0));  // filtered out
  v1::ApplyConfigResponse r;
  ASSERT_TRUE(apply(parse(R"({"dataplane":{"non_ip":"DROP"}})"), 1, false, &r).ok());
  v1::Event e;
  ASSERT_TRUE(reader->Read(&e));
  EXPECT_EQ(e.type(), "config");
  EXPECT_EQ(e.config_version(), 2u);
  EXPECT_THAT(e.json(), HasSubstr("\"event_type\":\"config\""));
  EXPECT_THAT(e.json(), HasSubstr("\"version\":2"));
  ctx.TryCancel();
  while (reader->Read(&e)) EXPECT_EQ(e.type(), "config");
  reader->Finish();

  grpc::ClientContext bad;
  v1::WatchEventsRequest breq;
  breq.add_types("nope");
  auto br = stub_->WatchEvents(&bad, breq);
  while (br->Read(&e)) {
  }
  grpc::Status st = br->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("nope"));
}

// --- ops --- a refused apply is a "config" event too: the version it was based on, the
// phase, the code, the error count and the first errors, in Event.config and the JSON line;
// counted by phase in GetStats. Every event type of the API can be asked for.
TEST_F(ServiceTest, RefusedAppliesAreConfigEvents) {
  grpc::ClientContext ctx;
  v1::WatchEventsRequest req;
  req.add_types("config");
  auto reader = stub_->WatchEvents(&ctx, req);
  reader->WaitForInitialMetadata();
  v1::ApplyConfigResponse r;
  // 7 errors: more than the event lists.
  std::string rules;
  for (int i = 0; i < 7; ++i) {
    rules += absl::StrCat(i ? "," : "", R"({"id":"r)", i, R"(","action":"DENY","dst_ports":["99999"]})");
  }
  grpc::Status st = apply(parse(R"({"firewall":{"rules":[)" + rules + "]}}"), 1, false, &r);
  ASSERT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  st = apply(parse(R"({"dataplane":{"non_ip":"DROP"}})"), 7, false, &r);  // stale
  ASSERT_EQ(st.error_code(), grpc::StatusCode::ABORTED);
  ASSERT_TRUE(apply(parse(R"({"dataplane":{"non_ip":"DROP"}})"), 1, false, &r).ok());

  v1::Event e;
  ASSERT_TRUE(reader->Read(&e));
  EXPECT_EQ(e.type(), "config");
  EXPECT_EQ(e.config_version(), 1u);  // the committed version stays
  EXPECT_EQ(e.config().result(), "refused");
  EXPECT_EQ(e.config().based_on_version(), 1u);
  EXPECT_EQ(e.config().phase(), "validate");
  EXPECT_EQ(e.config().code(), "INVALID_ARGUMENT");
  EXPECT_EQ(e.config().error_count(), 7u);
  ASSERT_EQ(e.config().errors_size(), 5);
  EXPECT_EQ(e.config().errors(0).rule(), "r0");
  EXPECT_THAT(e.config().errors(0).reason(), HasSubstr("99999"));
  EXPECT_THAT(e.json(), HasSubstr(R"("event_type":"config","config":{"result":"refused","version":1,"based_on_version":1,"phase":"validate","code":"INVALID_ARGUMENT")"));
  EXPECT_THAT(e.json(), HasSubstr(R"("error_count":7,"errors":[{"section":"firewall","rule":"r0")"));

  ASSERT_TRUE(reader->Read(&e));
  EXPECT_EQ(e.config().result(), "refused");
  EXPECT_EQ(e.config().phase(), "version");
  EXPECT_EQ(e.config().code(), "ABORTED");
  EXPECT_EQ(e.config().based_on_version(), 7u);
  EXPECT_EQ(e.config().error_count(), 0u);
  EXPECT_THAT(e.config().message(), HasSubstr("expected 7"));

  ASSERT_TRUE(reader->Read(&e));
  EXPECT_EQ(e.config().result(), "applied");
  EXPECT_EQ(e.config_version(), 2u);
  EXPECT_EQ(e.config().based_on_version(), 1u);
  EXPECT_THAT(e.json(), HasSubstr(R"("result":"applied")"));
  ctx.TryCancel();
  while (reader->Read(&e)) {
  }
  reader->Finish();

  v1::Stats stats;
  {
    grpc::ClientContext sctx;
    ASSERT_TRUE(stub_->GetStats(&sctx, v1::GetStatsRequest(), &stats).ok());
  }
  const auto& by_phase = stats.config_applies().refused_by_phase();
  ASSERT_EQ(by_phase.size(), 2u);
  EXPECT_EQ(by_phase.at("validate"), 1u);
  EXPECT_EQ(by_phase.at("version"), 1u);
  EXPECT_EQ(stats.config_applies().invalid(), 1u);
  EXPECT_EQ(stats.config_applies().conflicts(), 1u);

  for (const char* type : {"drop", "flow", "config", "alert", "dns", "lb"}) {
    grpc::ClientContext tctx;
    tctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    v1::WatchEventsRequest treq;
    treq.add_types(type);
    auto tr = stub_->WatchEvents(&tctx, treq);
    while (tr->Read(&e)) {
    }
    grpc::Status ts = tr->Finish();
    EXPECT_NE(ts.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << type << ": " << ts.error_message();
  }
}

TEST_F(ServiceTest, DropEventMapping) {
  dp::Event d = dropEvent(41);
  d.ip_ver = 4;
  d.proto = 6;
  d.src.b[0] = 10, d.src.b[3] = 1;
  d.dst.b[0] = 10, d.dst.b[3] = 2;
  d.sport = 1234;
  d.dport = 80;
  d.vlan = 7;
  v1::Event e = toApiEvent(d, 1000);
  EXPECT_EQ(e.type(), "drop");
  EXPECT_EQ(e.timestamp_unix_ns(), static_cast<int64_t>(d.ts_ns) + 1000);
  EXPECT_EQ(e.src_ip(), "10.0.0.1");
  EXPECT_EQ(e.dest_ip(), "10.0.0.2");
  EXPECT_EQ(e.src_port(), 1234u);
  EXPECT_EQ(e.proto(), "TCP");
  EXPECT_EQ(e.vlan(), 7u);
  EXPECT_EQ(e.reason(), "non_ip");
  EXPECT_EQ(e.stage(), "parse");
  EXPECT_EQ(e.verdict(), "drop");
  // A live event has no capture to count packets in: no pcap_cnt (replay writes it).
  EXPECT_THAT(e.json(), Not(HasSubstr("pcap_cnt")));
  EXPECT_THAT(eventJson(d, 1000, nullptr, /*replay_index=*/true), HasSubstr("\"pcap_cnt\":42"));
}

// --- health checking and reflection --------------------------------------------------------

bool waitTag(grpc::CompletionQueue& cq, void* want) {
  void* tag = nullptr;
  bool ok = false;
  auto st = cq.AsyncNext(&tag, &ok, std::chrono::system_clock::now() + 10s);
  return st == grpc::CompletionQueue::GOT_EVENT && tag == want && ok;
}

std::string bufferToString(const grpc::ByteBuffer& bb) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!bb.Dump(&slices).ok()) return out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

TEST_F(ServiceTest, HealthCheckServesTheApplianceService) {
  grpc::GenericStub stub(channel_);
  // grpc.health.v1.HealthCheckRequest { service = "dpu.v1.Appliance" } (field 1, bytes).
  std::string name = "dpu.v1.Appliance";
  std::string req_bytes = std::string("\x0a", 1) + static_cast<char>(name.size()) + name;
  grpc::Slice slice(req_bytes);
  grpc::ByteBuffer req(&slice, 1), resp;
  grpc::ClientContext ctx;
  deadline(&ctx);
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &req, &resp,
                 [&](grpc::Status s) { done.set_value(s); });
  grpc::Status st = done.get_future().get();
  ASSERT_TRUE(st.ok()) << st.error_message();
  // HealthCheckResponse { status = SERVING (1) } (field 1, varint).
  EXPECT_EQ(bufferToString(resp), std::string("\x08\x01", 2));
}

TEST_F(ServiceTest, ReflectionListsTheApplianceService) {
  grpc::GenericStub stub(channel_);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  deadline(&ctx);
  auto call = stub.PrepareCall(&ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                               &cq);
  int t1, t2, t3, t4, t5;
  call->StartCall(&t1);
  ASSERT_TRUE(waitTag(cq, &t1));
  // ServerReflectionRequest { list_services = "" } (field 7, bytes).
  grpc::Slice slice(std::string("\x3a\x00", 2));
  grpc::ByteBuffer req(&slice, 1), resp;
  call->Write(req, &t2);
  ASSERT_TRUE(waitTag(cq, &t2));
  call->WritesDone(&t3);
  ASSERT_TRUE(waitTag(cq, &t3));
  call->Read(&resp, &t4);
  ASSERT_TRUE(waitTag(cq, &t4));
  EXPECT_THAT(bufferToString(resp), HasSubstr("dpu.v1.Appliance"));
  grpc::Status st;
  call->Finish(&st, &t5);
  ASSERT_TRUE(waitTag(cq, &t5));
  EXPECT_TRUE(st.ok()) << st.error_message();
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
}

// --- listening -----------------------------------------------------------------------------

TEST_F(ServiceTest, UnixSocketIsPrivateAndNotShared) {
  ASSERT_EQ(server_->address(), "unix:" + state_dir_ + "/api.sock");
  struct stat st{};
  ASSERT_EQ(::stat((state_dir_ + "/api.sock").c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // A second server on the same state directory is refused while the first one serves.
  ApplianceService other(manager_.get(), &plane_, nullptr, ServiceOptions{});
  ApiServerOptions so;
  so.state_dir = state_dir_;
  auto second = ApiServer::start(so, &other);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("another process is serving"));
  // The first one still works.
  EXPECT_EQ(committedVersion(), 1u);
}

TEST(ListenAddress, LoopbackOnlyUnlessListenAny) {
  ApiServerOptions o;
  o.state_dir = "/var/lib/x";
  EXPECT_EQ(*resolveListenAddress(o), "unix:/var/lib/x/api.sock");
  for (const char* ok : {"127.0.0.1:50051", "127.1.2.3:1", "localhost:9", "[::1]:50051",
                         "[::ffff:127.0.0.1]:5", "unix:/tmp/a.sock"}) {
    o.listen = ok;
    EXPECT_TRUE(resolveListenAddress(o).ok()) << ok;
  }
  for (const char* bad : {"0.0.0.0:50051", "[::]:50051", "192.0.2.10:50051", ":50051",
                          "example.com:443", "[2001:db8::1]:1"}) {
    o.listen = bad;
    o.listen_any = false;
    auto r = resolveListenAddress(o);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("--listen-any")) << bad;
    o.listen_any = true;
    EXPECT_TRUE(resolveListenAddress(o).ok()) << bad;
  }
  o.listen_any = false;
  for (const char* malformed : {"127.0.0.1", "127.0.0.1:99999", "::1:50051", "[::1]50051",
                                "unix-abstract:x"}) {
    o.listen = malformed;
    EXPECT_FALSE(resolveListenAddress(o).ok()) << malformed;
  }
}

TEST(ListenAddress, TlsOptionsAreChecked) {
  ApiServerOptions o;
  o.listen = "127.0.0.1:0";
  o.tls_cert = "/nonexistent/cert.pem";
  auto r = ApiServer::start(o, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("--tls-key"));
  o.tls_key = "/nonexistent/key.pem";
  r = ApiServer::start(o, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("/nonexistent/cert.pem"));
  o.tls_cert.clear();
  o.tls_key.clear();
  o.tls_client_ca = "/nonexistent/ca.pem";
  r = ApiServer::start(o, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("--tls-client-ca"));
}

// --- frame builder -------------------------------------------------------------------------

TEST(FrameBuilder, BuildsFramesTheParserAccepts) {
  FrameSpec s;
  s.src_ip = "10.0.0.1";
  s.dst_ip = "10.0.0.2";
  s.proto = "TCP";
  s.src_port = 40000;
  s.dst_port = 443;
  s.tcp_flags = "SA";
  s.vlan = 42;
  s.payload = "abc";
  auto f = buildFrame(s);
  ASSERT_TRUE(f.ok()) << f.status();
  dp::PacketMeta m;
  ASSERT_EQ(dp::parsePacket(f->data(), static_cast<uint32_t>(f->size()), m), dp::ParseStatus::kOk);
  EXPECT_EQ(m.l3, dp::L3Type::kIpv4);
  EXPECT_EQ(m.l4_proto, 6);
  EXPECT_EQ(m.sport, 40000);
  EXPECT_EQ(m.dport, 443);
  EXPECT_EQ(m.tcp_flags, dp::kTcpSyn | dp::kTcpAck);
  EXPECT_EQ(m.vlan_outer, 42);
  EXPECT_EQ(m.payload_len, 3);
  EXPECT_EQ(m.l3_len, 20 + 20 + 3);

  s = FrameSpec{};
  s.src_ip = "2001:db8::1";
  s.dst_ip = "2001:db8::2";
  s.proto = "udp";
  s.src_port = 5353;
  s.dst_port = 53;
  s.payload = std::string(100, 'q');
  f = buildFrame(s);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(dp::parsePacket(f->data(), static_cast<uint32_t>(f->size()), m), dp::ParseStatus::kOk);
  EXPECT_EQ(m.l3, dp::L3Type::kIpv6);
  EXPECT_EQ(m.l4_proto, 17);
  EXPECT_EQ(m.dport, 53);
  EXPECT_EQ(m.payload_len, 100);

  s.proto = "icmp";  // ICMPv6 for IPv6 addresses
  s.src_port = 7;
  s.payload.clear();
  f = buildFrame(s);
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(dp::parsePacket(f->data(), static_cast<uint32_t>(f->size()), m), dp::ParseStatus::kOk);
  EXPECT_EQ(m.l4_proto, 58);
  EXPECT_EQ(m.icmp_type, 128);

  s.src_ip = "192.0.2.1";
  s.dst_ip = "192.0.2.2";
  s.proto = "47";  // GRE: raw payload after IPv4
  s.payload = "xyz";
  f = buildFrame(s);
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(dp::parsePacket(f->data(), static_cast<uint32_t>(f->size()), m), dp::ParseStatus::kOk);
  EXPECT_EQ(m.l4_proto, 47);
  EXPECT_EQ(m.l3_len, 23);
}

TEST(FrameBuilder, ErrorsNameTheField) {
  FrameSpec s;
  s.src_ip = "10.0.0.1";
  s.dst_ip = "2001:db8::1";
  s.proto = "tcp";
  EXPECT_THAT(std::string(buildFrame(s).status().message()), HasSubstr("address family"));
  s.dst_ip = "10.0.0.2";
  s.proto = "sctpx";
  EXPECT_THAT(std::string(buildFrame(s).status().message()), HasSubstr("tuple.proto"));
  s.proto = "tcp";
  s.src_port = 70000;
  EXPECT_THAT(std::string(buildFrame(s).status().message()), HasSubstr("tuple.src_port"));
  s.src_port = 1;
  s.tcp_flags = "SX";
  EXPECT_THAT(std::string(buildFrame(s).status().message()), HasSubstr("'X'"));
  s.tcp_flags.clear();
  s.vlan = 4095;
  EXPECT_THAT(std::string(buildFrame(s).status().message()), HasSubstr("tuple.vlan"));
  s.vlan = 0;
  s.proto = "udp";
  s.tcp_flags = "S";
  EXPECT_THAT(std::string(buildFrame(s).status().message()), HasSubstr("tcp_flags"));
}

// --- firewall rules and GeoIP ---------------------------------------------------------------

#ifndef DPU_MMDB_DIR
#define DPU_MMDB_DIR ""
#endif
// Normalized: SetGeoipDatabase stores paths absolute and normalized.
const std::string kCountryDb =
    std::filesystem::path(std::string(DPU_MMDB_DIR) +
                          "/maxmind+MaxMind-DB/test-data/GeoLite2-Country-Test.mmdb")
        .lexically_normal()
        .string();
const std::string kAsnDb =
    std::filesystem::path(std::string(DPU_MMDB_DIR) +
                          "/maxmind+MaxMind-DB/test-data/GeoLite2-ASN-Test.mmdb")
        .lexically_normal()
        .string();

class FirewallApiTest : public ServiceTest {
 protected:
  static v1::FirewallRule rule(const std::string& json) {
    v1::FirewallRule r;
    auto st = google::protobuf::util::JsonStringToMessage(json, &r);
    EXPECT_TRUE(st.ok()) << st.message();
    return r;
  }
  grpc::Status add(const v1::FirewallRule& r, uint64_t expected, v1::ApplyConfigResponse* resp,
                   std::function<void(v1::AddFirewallRuleRequest&)> pos = nullptr) {
    grpc::ClientContext ctx;
    deadline(&ctx);
    v1::AddFirewallRuleRequest req;
    *req.mutable_rule() = r;
    req.set_expected_version(expected);
    if (pos) pos(req);
    return stub_->AddFirewallRule(&ctx, req, resp);
  }
  grpc::Status remove(const std::string& id, uint64_t expected, v1::ApplyConfigResponse* resp) {
    grpc::ClientContext ctx;
    deadline(&ctx);
    v1::RemoveFirewallRuleRequest req;
    req.set_id(id);
    req.set_expected_version(expected);
    return stub_->RemoveFirewallRule(&ctx, req, resp);
  }
  v1::ListFirewallRulesResponse list() {
    grpc::ClientContext ctx;
    deadline(&ctx);
    v1::ListFirewallRulesResponse r;
    grpc::Status st = stub_->ListFirewallRules(&ctx, v1::ListFirewallRulesRequest(), &r);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return r;
  }
  std::vector<std::string> inlineIds() {
    grpc::ClientContext ctx;
    deadline(&ctx);
    v1::GetConfigResponse got;
    EXPECT_TRUE(stub_->GetConfig(&ctx, v1::GetConfigRequest(), &got).ok());
    std::vector<std::string> ids;
    for (const auto& r : got.config().firewall().rules()) ids.push_back(r.id());
    return ids;
  }
  grpc::Status setGeoip(const std::string& path, uint64_t expected, v1::ApplyConfigResponse* r) {
    grpc::ClientContext ctx;
    deadline(&ctx);
    v1::SetGeoipDatabaseRequest req;
    req.set_path(path);
    req.set_expected_version(expected);
    return stub_->SetGeoipDatabase(&ctx, req, r);
  }
  grpc::Status lookup(const std::string& ip, v1::LookupCountryResponse* r,
                      const std::string& db = "") {
    grpc::ClientContext ctx;
    deadline(&ctx);
    v1::LookupCountryRequest req;
    req.set_ip(ip);
    req.set_database(db);
    return stub_->LookupCountry(&ctx, req, r);
  }
  static bool haveDbs() {
    return std::filesystem::exists(kCountryDb) && std::filesystem::exists(kAsnDb);
  }
};

TEST_F(FirewallApiTest, AddPlacesRulesAndPublishesThem) {
  v1::ApplyConfigResponse r;
  ASSERT_TRUE(add(rule(R"({"id":"ssh","action":"DENY","protocols":["tcp"],"dst_ports":["22"],
                           "priority":10})"),
                  1, &r)
                  .ok());
  EXPECT_EQ(r.version(), 2u);
  auto fw = plane_.firewall();
  ASSERT_TRUE(fw);
  ASSERT_EQ(fw->rules.size(), 1u);
  EXPECT_EQ(fw->rules[0].id, "ssh");
  EXPECT_EQ(fw->v4.size(), 1u);
  ASSERT_TRUE(add(rule(R"({"id":"last","action":"ALLOW"})"), 2, &r).ok());
  ASSERT_TRUE(add(rule(R"({"id":"first","action":"ALLOW"})"), 3, &r,
                  [](v1::AddFirewallRuleRequest& q) { q.set_index(0); })
                  .ok());
  ASSERT_TRUE(add(rule(R"({"id":"before-last","action":"ALLOW"})"), 4, &r,
                  [](v1::AddFirewallRuleRequest& q) { q.set_before_id("last"); })
                  .ok());
  ASSERT_TRUE(add(rule(R"({"id":"after-first","action":"REJECT"})"), 5, &r,
                  [](v1::AddFirewallRuleRequest& q) { q.set_after_id("first"); })
                  .ok());
  EXPECT_THAT(inlineIds(), ::testing::ElementsAre("first", "after-first", "ssh", "before-last",
                                                  "last"));
  EXPECT_EQ(committedVersion(), 6u);
  // Evaluation order: priority 0 rules in list order, then ssh (priority 10).
  std::vector<std::string> ranked;
  for (const auto& ri : plane_.firewall()->rules) ranked.push_back(ri.id);
  EXPECT_THAT(ranked, ::testing::ElementsAre("first", "after-first", "before-last", "last", "ssh"));

  // Persisted like any apply.
  auto again = ConfigStore::open(state_dir_, nullptr);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->current().firewall().rules_size(), 5);
}

TEST_F(FirewallApiTest, AddRejectsDuplicatesBadPositionsAndInvalidRules) {
  v1::ApplyConfigResponse r;
  ASSERT_TRUE(add(rule(R"({"id":"a","action":"DENY"})"), 1, &r).ok());
  grpc::Status st = add(rule(R"({"id":"a","action":"ALLOW"})"), 2, &r);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(st.error_message(), HasSubstr("firewall.rules[0] already has id 'a'"));
  st = add(rule(R"({"id":"b","action":"DENY"})"), 2, &r,
           [](v1::AddFirewallRuleRequest& q) { q.set_before_id("nope"); });
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(st.error_message(), HasSubstr("before_id"));
  st = add(rule(R"({"id":"b","action":"DENY"})"), 2, &r,
           [](v1::AddFirewallRuleRequest& q) { q.set_index(5); });
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  st = add(rule(R"({"action":"DENY"})"), 2, &r);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("rule.id"));
  // An invalid rule: every error in the details, named by the rule's new position.
  st = add(rule(R"({"id":"bad","action":"DENY","protocols":["icmp"],"dst_ports":["22"],
                    "src":["10.0.0.1/8"]})"),
           2, &r, [](v1::AddFirewallRuleRequest& q) { q.set_index(0); });
  ASSERT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  auto errs = decodeErrors(st);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].field(), "firewall.rules[0].src");
  EXPECT_EQ(errs[0].rule(), "bad");
  EXPECT_EQ(errs[0].section(), "firewall");
  EXPECT_EQ(errs[0].reason(), "10.0.0.1/8 has host bits set (did you mean 10.0.0.0/8?)");
  st = add(rule(R"({"id":"bad","action":"DENY","protocols":["icmp"],"dst_ports":["22"]})"), 2, &r);
  ASSERT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  errs = decodeErrors(st);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].field(), "firewall.rules[1].dst_ports");
  // Version conflict.
  EXPECT_EQ(add(rule(R"({"id":"c","action":"DENY"})"), 1, &r).error_code(),
            grpc::StatusCode::ABORTED);
  EXPECT_EQ(committedVersion(), 2u);
  EXPECT_EQ(plane_.publishes(), 1);
}

TEST_F(FirewallApiTest, RemoveInlineRulesOnly) {
  std::string file = dir_ + "/site.rules";
  std::ofstream(file) << "deny tcp any any -> any 23 id telnet\n";
  v1::ApplyConfigResponse r;
  ASSERT_TRUE(apply(parse(absl::StrCat(R"({"firewall":{"rules":[{"id":"a","action":"DENY"},
                                          {"id":"b","action":"ALLOW"}],"rule_files":[")",
                                       file, R"("]}})")),
                    1, false, &r)
                  .ok());
  ASSERT_TRUE(remove("a", 2, &r).ok());
  EXPECT_THAT(inlineIds(), ::testing::ElementsAre("b"));
  ASSERT_EQ(plane_.firewall()->rules.size(), 2u);
  grpc::Status st = remove("a", 3, &r);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  st = remove("telnet", 3, &r);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(st.error_message(), HasSubstr(file + ":1"));
  EXPECT_EQ(remove("b", 1, &r).error_code(), grpc::StatusCode::ABORTED);
  EXPECT_EQ(committedVersion(), 3u);
}

TEST_F(FirewallApiTest, ListShowsRanksSourcesEntriesAndCounters) {
  std::string file = dir_ + "/site.rules";
  std::ofstream(file) << "# site\nreject tcp @corp any -> any 25,465 prio -1 id smtp\n";
  v1::ApplyConfigResponse r;
  ASSERT_TRUE(apply(parse(absl::StrCat(R"({"firewall":{
      "default_b_to_a":"DENY", "keep_established_on_change": true,
      "ip_sets":[{"name":"corp","prefixes":["10.0.0.0/8","2001:db8::/32"]}],
      "rules":[{"id":"dns","action":"ALLOW","dst_ports":["53"],"description":"resolvers"}],
      "rule_files":[")", file, R"("]}})")),
                    1, false, &r)
                  .ok());
  dp::RuleCounters smtp;
  smtp.id = "smtp";
  smtp.packets = 10;
  smtp.bytes = 1500;
  smtp.flows = 2;
  smtp.last_hit_ns = 1'700'000'000'000'000'000ull;
  dp::RuleCounters stale;
  stale.id = "gone";
  stale.packets = 99;
  plane_.setRuleCounters({smtp, stale});
  v1::ListFirewallRulesResponse l = list();
  EXPECT_EQ(l.config_version(), 2u);
  ASSERT_EQ(l.rules_size(), 2);
  const auto& a = l.rules(0);
  EXPECT_EQ(a.rule().id(), "smtp");
  EXPECT_EQ(a.rank(), 0u);
  EXPECT_EQ(a.source(), file + ":2");
  EXPECT_EQ(a.rule().src(0), "@corp");  // as written
  EXPECT_EQ(a.rule().action(), v1::REJECT);
  EXPECT_EQ(a.acl_entries(), 4u);  // (v4 + v6 source) x 2 ports
  EXPECT_EQ(a.packets(), 10u);
  EXPECT_EQ(a.bytes(), 1500u);
  EXPECT_EQ(a.flows(), 2u);
  EXPECT_EQ(a.last_hit_unix_ns(), 1'700'000'000'000'000'000ll);
  const auto& b = l.rules(1);
  EXPECT_EQ(b.rule().id(), "dns");
  EXPECT_EQ(b.source(), "config");
  EXPECT_EQ(b.rule().description(), "resolvers");
  EXPECT_EQ(b.acl_entries(), 4u);  // tcp + udp, v4 + v6
  EXPECT_EQ(b.packets(), 0u);
  EXPECT_EQ(b.last_hit_unix_ns(), 0);
  EXPECT_EQ(l.default_a_to_b(), v1::ALLOW);
  EXPECT_EQ(l.default_b_to_a(), v1::DENY);
  EXPECT_TRUE(l.keep_established_on_change());
  EXPECT_EQ(l.acl_entries_v4() + l.acl_entries_v6(), 8u);

  // Times: dataplane clock + the wall offset.
  ServiceOptions so;
  so.wall_offset_ns = 1000;
  ApplianceService other(manager_.get(), &plane_, nullptr, so);
  v1::ListFirewallRulesResponse l2;
  ASSERT_TRUE(other.ListFirewallRules(nullptr, nullptr, &l2).ok());
  EXPECT_EQ(l2.rules(0).last_hit_unix_ns(), 1'700'000'000'000'001'000ll);
}

TEST_F(FirewallApiTest, UnchangedFirewallIsSharedAcrossApplies) {
  v1::ApplyConfigResponse r;
  ASSERT_TRUE(add(rule(R"({"id":"a","action":"DENY","protocols":["tcp"]})"), 1, &r).ok());
  auto fw1 = plane_.firewall();
  ASSERT_TRUE(update(parse(R"({"dataplane":{"timeouts":{"udp_s":44}}})"),
                     {"dataplane.timeouts.udp_s"}, 2, &r)
                  .ok());
  EXPECT_EQ(plane_.settings().udp_s, 44u);
  EXPECT_EQ(plane_.firewall().get(), fw1.get());  // same compiled firewall
  ASSERT_TRUE(add(rule(R"({"id":"b","action":"DENY"})"), 3, &r).ok());
  EXPECT_NE(plane_.firewall().get(), fw1.get());
}

TEST_F(FirewallApiTest, GeoipDatabaseIsCheckedBeforeTheSwap) {
  if (!haveDbs()) GTEST_SKIP() << "MaxMind test databases absent (" << DPU_MMDB_DIR << ")";
  v1::ApplyConfigResponse r;
  grpc::Status st = setGeoip("/nonexistent/x.mmdb", 1, &r);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  st = setGeoip(kAsnDb, 1, &r);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(st.error_message(), HasSubstr("no country data"));
  st = setGeoip(dir_, 1, &r);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(committedVersion(), 1u);
  EXPECT_EQ(plane_.publishes(), 0);

  // A country rule needs the database first.
  st = add(rule(R"({"id":"geo","action":"DENY","src_countries":["GB"]})"), 1, &r);
  ASSERT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(decodeErrors(st)[0].field(), "firewall.rules[0].src_countries");
  ASSERT_TRUE(setGeoip(kCountryDb, 1, &r).ok());
  EXPECT_EQ(r.version(), 2u);
  ASSERT_TRUE(add(rule(R"({"id":"geo","action":"DENY","src_countries":["GB"]})"), 2, &r).ok());
  auto fw = plane_.firewall();
  EXPECT_EQ(fw->geoip_database, kCountryDb);
  EXPECT_TRUE(fw->uses_countries);
  EXPECT_EQ(fw->countryIndex("GB"), 1);
  // Removing the database now would leave a country rule without one.
  st = setGeoip("", 3, &r);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(FirewallApiTest, LookupCountry) {
  if (!haveDbs()) GTEST_SKIP() << "MaxMind test databases absent (" << DPU_MMDB_DIR << ")";
  v1::LookupCountryResponse l;
  grpc::Status st = lookup("81.2.69.142", &l);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  // Another database on request, before any is configured.
  ASSERT_TRUE(lookup("81.2.69.142", &l, kCountryDb).ok());
  EXPECT_EQ(l.country(), "GB");
  v1::ApplyConfigResponse r;
  ASSERT_TRUE(setGeoip(kCountryDb, 1, &r).ok());
  ASSERT_TRUE(add(rule(R"({"id":"geo","action":"DENY","src_countries":["US","GB"]})"), 2, &r).ok());
  ASSERT_TRUE(lookup("81.2.69.142", &l).ok());
  EXPECT_TRUE(l.found());
  EXPECT_EQ(l.ip(), "81.2.69.142");
  EXPECT_EQ(l.country(), "GB");
  EXPECT_EQ(l.network(), "81.2.69.142/31");
  EXPECT_EQ(l.database(), kCountryDb);
  EXPECT_EQ(l.database_type(), "GeoLite2-Country");
  EXPECT_EQ(l.country_index(), 2u);
  ASSERT_TRUE(lookup("2a02:d500::1", &l).ok());  // a record without a country
  EXPECT_TRUE(l.found());
  EXPECT_EQ(l.country(), "");
  EXPECT_EQ(l.country_index(), 0u);
  ASSERT_TRUE(lookup("10.0.0.1", &l).ok());
  EXPECT_FALSE(l.found());
  st = lookup("10.0.0.300", &l);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("ip: "));
}


// --- ops: the Prometheus endpoint, scraped over HTTP, against the gRPC answers ------------

// GET http://addr/path; returns the whole response (status line, headers, body).
std::string httpGet(const std::string& addr, const std::string& path) {
  std::string host = addr.substr(0, addr.rfind(':'));
  int port = std::stoi(addr.substr(addr.rfind(':') + 1));
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, host.c_str(), &sa.sin_addr);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) {
    std::string req = "GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nConnection: close\r\n\r\n";
    if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[65536];
      ssize_t n;
      while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return out;
}

struct Scrape {
  std::map<std::string, std::string> types;            // family -> TYPE
  std::map<std::string, std::string> help;             // family -> HELP
  std::map<std::string, double> samples;               // "name{k=v,...}" (labels sorted)
};

// Parses the text exposition format (the subset prometheus-cpp writes).
Scrape parseExposition(const std::string& body) {
  Scrape s;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream l(line.substr(7));
      std::string name, type;
      l >> name >> type;
      s.types[name] = type;
      continue;
    }
    if (line.rfind("# HELP ", 0) == 0) {
      std::string rest = line.substr(7);
      s.help[rest.substr(0, rest.find(' '))] = rest.substr(rest.find(' ') + 1);
      continue;
    }
    if (line[0] == '#') continue;
    size_t sp = line.rfind(' ');
    std::string series = line.substr(0, sp);
    double v = std::stod(line.substr(sp + 1));
    std::string name = series.substr(0, series.find('{'));
    std::map<std::string, std::string> labels;
    if (size_t b = series.find('{'); b != std::string::npos) {
      std::string ls = series.substr(b + 1, series.size() - b - 2);
      size_t i = 0;
      while (i < ls.size()) {
        size_t eq = ls.find('=', i);
        size_t q2 = ls.find('"', eq + 2);
        labels[ls.substr(i, eq - i)] = ls.substr(eq + 2, q2 - eq - 2);
        i = q2 + 2;
      }
    }
    std::string key = name + "{";
    for (const auto& [k, val] : labels) key += k + "=" + val + ",";
    s.samples[key + "}"] = v;
  }
  return s;
}

double sample(const Scrape& s, const std::string& key) {
  auto it = s.samples.find(key);
  EXPECT_NE(it, s.samples.end()) << "no sample " << key;
  return it == s.samples.end() ? -1 : it->second;
}

TEST_F(FirewallApiTest, MetricsEndpointMatchesGetStatsAndRuleList) {
  // Committed applies (1 ok, 1 invalid, 1 conflict) and per-rule counters.
  v1::ApplyConfigResponse r;
  ASSERT_TRUE(apply(parse(R"({"firewall":{"rules":[
      {"id":"ssh","action":"DENY","protocols":["tcp"],"dst_ports":["22"]},
      {"id":"web","action":"ALLOW","protocols":["tcp"],"dst_ports":["80"]}]}})"),
                    1, false, &r)
                  .ok());
  EXPECT_FALSE(apply(parse(R"({"dataplane":{"flow_table":{"capacity_per_worker":5}}})"), 2,
                     false, &r)
                   .ok());
  EXPECT_FALSE(apply(parse("{}"), 1, false, &r).ok());
  dp::RuleCounters ssh;
  ssh.id = "ssh";
  ssh.packets = 41;
  ssh.bytes = 2624;
  ssh.flows = 40;
  ssh.last_hit_ns = 1'700'000'000'000'000'000ull;
  plane_.setRuleCounters({ssh});
  dp::CountersSnapshot c;
  c.per_worker.resize(2);
  for (int w = 0; w < 2; ++w) {
    auto& f = c.per_worker[w];
    uint64_t base = 1000 * (w + 1);
    f.rx_packets[0] = base + 1;
    f.rx_packets[1] = base + 2;
    f.tx_packets[1] = base + 3;
    f.rx_bytes[0] = base * 64;
    f.verdicts[static_cast<int>(dp::Verdict::kForward)] = base + 4;
    f.verdicts[static_cast<int>(dp::Verdict::kDrop)] = base + 5;
    f.drops[static_cast<int>(dp::DropReason::kFirewallDeny)] = base + 5;
    f.stage_packets[static_cast<int>(dp::Stage::kFirewall)] = base + 6;
    f.stage_drops[static_cast<int>(dp::Stage::kFirewall)] = base + 5;
    f.flows_created = base + 7;
    f.flows_active = base + 8;
    f.fw_denied = base + 9;
    f.fw_rst_sent = base + 10;
    f.frag_datagrams_active = base + 11;
    f.events_lost = base + 12;
    f.generation = 2;
  }
  for (const auto& w : c.per_worker) dp::accumulate(c.total, w);
  plane_.setCounters(c);

  // The applies' control events reach the event hub through its pump thread: wait (bounded)
  // until GetStats counts all three, so the scrape and GetStats below read the same numbers
  // (on a loaded machine the pump can lag the applies).
  for (int i = 0; i < 12000; ++i) {  // up to 120 s: a bound for a hang on a busy machine
    grpc::ClientContext c0;
    deadline(&c0);
    v1::Stats s0;
    if (stub_->GetStats(&c0, v1::GetStatsRequest(), &s0).ok() && s0.events().control_events() >= 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto srv = MetricsServer::start(MetricsOptions{"127.0.0.1:0"}, applianceSources(service_.get()));
  ASSERT_TRUE(srv.ok()) << srv.status();
  std::string resp = httpGet((*srv)->address(), "/metrics");
  ASSERT_NE(resp.find("200 OK"), std::string::npos) << resp.substr(0, 200);
  Scrape m = parseExposition(resp.substr(resp.find("\r\n\r\n") + 4));

  grpc::ClientContext ctx;
  deadline(&ctx);
  v1::Stats s;
  ASSERT_TRUE(stub_->GetStats(&ctx, v1::GetStatsRequest(), &s).ok());
  v1::ListFirewallRulesResponse rules = list();

  // Types and help of every family; counters are *_total.
  for (const auto& [name, type] : m.types) {
    EXPECT_FALSE(m.help[name].empty()) << name;
    if (name.rfind("dpu_", 0) != 0) continue;  // the exposer's own (exposer_*)
    EXPECT_EQ(type == "counter", name.size() > 6 && name.substr(name.size() - 6) == "_total")
        << name << " " << type;
  }
  EXPECT_EQ(m.types["dpu_rx_packets_total"], "counter");
  EXPECT_EQ(m.types["dpu_flows_active"], "gauge");
  EXPECT_EQ(m.types["dpu_config_version"], "gauge");
  EXPECT_EQ(m.types["dpu_config_apply_duration_seconds"], "histogram");
  EXPECT_EQ(m.types["dpu_firewall_rule_packets_total"], "counter");

  // Values: the same numbers gRPC gives.
  EXPECT_EQ(sample(m, "dpu_config_version{}"), s.config_version());
  EXPECT_EQ(s.config_version(), 2u);
  EXPECT_EQ(sample(m, "dpu_snapshot_generation{}"), s.generation());
  for (int w = 0; w < 2; ++w) {
    const v1::CounterSet& cs = s.workers(w).counters();
    std::string wl = "worker=" + std::to_string(w) + ",";
    EXPECT_EQ(sample(m, "dpu_rx_packets_total{side=A," + wl + "}"), cs.rx_packets_a());
    EXPECT_EQ(sample(m, "dpu_rx_packets_total{side=B," + wl + "}"), cs.rx_packets_b());
    EXPECT_EQ(sample(m, "dpu_tx_packets_total{side=B," + wl + "}"), cs.tx_packets_b());
    EXPECT_EQ(sample(m, "dpu_rx_bytes_total{side=A," + wl + "}"), cs.rx_bytes_a());
    EXPECT_EQ(sample(m, "dpu_verdicts_total{verdict=forward," + wl + "}"), cs.forwarded());
    EXPECT_EQ(sample(m, "dpu_verdicts_total{verdict=drop," + wl + "}"), cs.dropped());
    EXPECT_EQ(sample(m, "dpu_drops_total{reason=firewall_deny," + wl + "}"),
              cs.drops().at("firewall_deny"));
    EXPECT_EQ(sample(m, "dpu_drops_total{reason=tcp_midstream," + wl + "}"), 0);
    EXPECT_EQ(sample(m, "dpu_stage_packets_total{stage=firewall," + wl + "}"),
              cs.stages(0).packets());
    EXPECT_EQ(sample(m, "dpu_stage_dropped_total{stage=firewall," + wl + "}"),
              cs.stages(0).dropped());
    EXPECT_EQ(sample(m, "dpu_flows_created_total{" + wl + "}"), cs.flows_created());
    EXPECT_EQ(sample(m, "dpu_flows_active{" + wl + "}"), cs.flows_active());
    EXPECT_EQ(sample(m, "dpu_fragment_datagrams_active{" + wl + "}"),
              cs.fragment_datagrams_active());
    EXPECT_EQ(sample(m, "dpu_firewall_verdicts_total{action=deny," + wl + "}"),
              cs.firewall().denied());
    EXPECT_EQ(sample(m, "dpu_firewall_reject_replies_total{kind=tcp_rst," + wl + "}"),
              cs.firewall().rst_sent());
    EXPECT_EQ(sample(m, "dpu_events_lost_total{" + wl + "}"), cs.events_lost());
    EXPECT_EQ(sample(m, "dpu_worker_snapshot_generation{" + wl + "}"), s.workers(w).generation());
  }
  EXPECT_EQ(sample(m, "dpu_port_rx_packets_total{device=net_pcap0,side=A,}"), s.ports(0).rx_packets());
  EXPECT_EQ(sample(m, "dpu_port_rx_missed_total{device=net_pcap0,side=A,}"), s.ports(0).rx_missed());
  EXPECT_EQ(sample(m, "dpu_port_tx_errors_total{device=net_null0,side=B,}"), s.ports(1).tx_errors());
  // Applies: 1 committed, 1 invalid, 1 conflict; the histogram counts the committed one.
  EXPECT_EQ(sample(m, "dpu_config_applies_total{result=applied,}"), s.config_applies().applied());
  EXPECT_EQ(s.config_applies().applied(), 1u);
  EXPECT_EQ(sample(m, "dpu_config_applies_total{result=invalid,}"), 1);
  EXPECT_EQ(sample(m, "dpu_config_applies_total{result=conflict,}"), 1);
  EXPECT_EQ(sample(m, "dpu_config_apply_duration_seconds_count{}"), 1);
  EXPECT_EQ(sample(m, "dpu_config_apply_duration_seconds_bucket{le=+Inf,}"), 1);
  EXPECT_NEAR(sample(m, "dpu_config_apply_duration_seconds_sum{}"),
              s.config_applies().duration_seconds().sum(), 1e-9);
  EXPECT_NEAR(sample(m, "dpu_config_last_apply_phase_seconds{phase=publish,}"),
              s.config_applies().last().publish_ms() / 1000.0, 1e-12);
  EXPECT_NEAR(sample(m, "dpu_config_last_apply_timestamp_seconds{}"),
              s.config_applies().last_unix_ns() / 1e9, 1e-3);
  EXPECT_EQ(sample(m, "dpu_events_total{source=control,}"), s.events().control_events());
  // Per rule, as ListFirewallRules says.
  ASSERT_EQ(rules.rules_size(), 2);
  EXPECT_EQ(sample(m, "dpu_firewall_rule_packets_total{rule=ssh,}"), rules.rules(0).packets());
  EXPECT_EQ(sample(m, "dpu_firewall_rule_bytes_total{rule=ssh,}"), rules.rules(0).bytes());
  EXPECT_EQ(sample(m, "dpu_firewall_rule_flows_total{rule=ssh,}"), rules.rules(0).flows());
  EXPECT_EQ(sample(m, "dpu_firewall_rule_last_hit_timestamp_seconds{rule=ssh,}"),
            rules.rules(0).last_hit_unix_ns() / 1e9);
  EXPECT_EQ(sample(m, "dpu_firewall_rule_packets_total{rule=web,}"), 0);
  EXPECT_EQ(sample(m, "dpu_firewall_acl_entries{family=ipv4,}"), rules.acl_entries_v4());
  EXPECT_EQ(sample(m, "dpu_metrics_source_up{source=firewall_rules,}"), 1);
  bool build = false;
  for (const auto& [k, v] : m.samples) {
    build = build || (k.rfind("dpu_build_info{", 0) == 0 && v == 1 &&
                      k.find("version=0.1.0,") != std::string::npos);
  }
  EXPECT_TRUE(build);
  // / is a small page linking /metrics; nothing else is served.
  const std::string index = httpGet((*srv)->address(), "/");
  EXPECT_NE(index.find(" 200 "), std::string::npos) << index;
  EXPECT_NE(index.find("href=\"/metrics\""), std::string::npos) << index;
  EXPECT_NE(httpGet((*srv)->address(), "/other").find("404"), std::string::npos);
}

TEST(MetricsAddress, LoopbackByDefault) {
  auto a = resolveMetricsAddress(MetricsOptions{"9464"});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, "127.0.0.1:9464");
  a = resolveMetricsAddress(MetricsOptions{"localhost:9"});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, "127.0.0.1:9");
  a = resolveMetricsAddress(MetricsOptions{"[::1]:9464"});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, "[::1]:9464");
  a = resolveMetricsAddress(MetricsOptions{"0.0.0.0:9464"});
  EXPECT_EQ(a.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("--metrics-listen-any"));
  a = resolveMetricsAddress(MetricsOptions{"0.0.0.0:9464", true});
  EXPECT_TRUE(a.ok());
  a = resolveMetricsAddress(MetricsOptions{"127.0.0.1"});
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  a = resolveMetricsAddress(MetricsOptions{"127.0.0.1:70000"});
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MetricsAddress, BusyPortIsAClearError) {
  auto first = MetricsServer::start(MetricsOptions{"127.0.0.1:0"}, {});
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = MetricsServer::start(MetricsOptions{(*first)->address()}, {});
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("cannot listen on"));
}

// Statuses travel in HTTP/2 trailers, which clients cap (8 KiB by default): a huge error list
// or an error quoting a huge input must not turn into RESOURCE_EXHAUSTED at the client.
TEST(ApplyErrorToGrpc, StaysSmallForHugeInputsAndManyErrors) {
  ApplyError err;
  for (int i = 0; i < 5000; ++i) {
    rules::ConfigError e;
    e.section = "firewall";
    e.rule = i == 0 ? std::string(1 << 20, 'y') : absl::StrCat("r", i);
    e.index = i;
    e.field = absl::StrCat("firewall.rules[", i, "].protocols[0]");
    e.reason = i == 1 ? std::string(1 << 20, 'z') : "'nonsense' is not a protocol";
    err.errors.push_back(std::move(e));
  }
  err.status = rules::errorsToStatus(err.errors);
  ASSERT_GT(err.status.message().size(), 100000u);  // 5000 errors (each part abbreviated)
  grpc::Status st = applyErrorToGrpc(err);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LE(st.error_message().size(), 1536u);
  EXPECT_THAT(st.error_message(), HasSubstr("5000 errors: "));
  EXPECT_THAT(st.error_message(), HasSubstr("(1048576 bytes)"));  // the id, abbreviated
  EXPECT_LE(st.error_details().size(), 3600u);
  v1::RpcStatus rs;
  ASSERT_TRUE(rs.ParseFromString(st.error_details()));
  ASSERT_EQ(rs.details_size(), 1);
  v1::ConfigErrors list;
  ASSERT_TRUE(rs.details(0).UnpackTo(&list));
  ASSERT_GT(list.errors_size(), 3);
  EXPECT_LE(list.errors(0).rule().size(), 200u);
  EXPECT_EQ(list.errors(1).rule(), "r1");
  EXPECT_LE(list.errors(1).reason().size(), 1100u);
  EXPECT_THAT(list.errors(list.errors_size() - 1).reason(),
              HasSubstr("more errors not listed here (5000 in all)"));
  // A single small error passes unchanged.
  ApplyError one;
  one.errors = {err.errors[2]};
  one.status = rules::errorsToStatus(one.errors);
  grpc::Status st1 = applyErrorToGrpc(one);
  EXPECT_EQ(st1.error_message(), rules::formatError(err.errors[2]));
}

// --- flows view --- ListFlows over gRPC: the answer, a bad filter naming its field, a window
// (two listings: window counts and rates from the worker clocks).
TEST_F(ServiceTest, ListFlowsFiltersAndWindows) {
  {
    grpc::ClientContext ctx;
    deadline(&ctx);
    v1::ListFlowsRequest req;
    req.mutable_filter()->set_dst("10.0.0.0/24");
    req.mutable_filter()->set_proto("udp");
    v1::ListFlowsResponse r;
    ASSERT_TRUE(stub_->ListFlows(&ctx, req, &r).ok());
    ASSERT_EQ(r.flows_size(), 1);
    EXPECT_EQ(r.flows(0).src_ip(), "10.0.0.1");
    EXPECT_EQ(r.flows(0).dest_port(), 53u);
    EXPECT_EQ(r.flows(0).verdict(), "forward");
    EXPECT_EQ(r.matched(), 1u);
  }
  {
    grpc::ClientContext ctx;
    deadline(&ctx);
    v1::ListFlowsRequest req;
    req.mutable_filter()->set_proto("tcp");
    v1::ListFlowsResponse r;
    ASSERT_TRUE(stub_->ListFlows(&ctx, req, &r).ok());
    EXPECT_EQ(r.flows_size(), 0);
    EXPECT_EQ(r.scanned(), 1u);
  }
  {
    grpc::ClientContext ctx;
    deadline(&ctx);
    v1::ListFlowsRequest req;
    req.mutable_filter()->set_address("10.0.0.0/33");
    v1::ListFlowsResponse r;
    grpc::Status st = stub_->ListFlows(&ctx, req, &r);
    EXPECT_EQ(st.error_code(), grpc::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find("filter.address"), std::string::npos) << st.error_message();
  }
  {
    grpc::ClientContext ctx;
    deadline(&ctx);
    v1::ListFlowsRequest req;
    req.set_window_ms(100);
    req.set_sort("bytes");
    v1::ListFlowsResponse r;
    ASSERT_TRUE(stub_->ListFlows(&ctx, req, &r).ok());
    ASSERT_EQ(r.flows_size(), 1);
    // Two consecutive fake listings: +100 packets, +1000 bytes over 100 ms of worker clock.
    EXPECT_EQ(r.flows(0).window_packets(), 100u);
    EXPECT_EQ(r.flows(0).window_bytes(), 1000u);
    EXPECT_DOUBLE_EQ(r.flows(0).packets_per_second(), 1000.0);
    EXPECT_DOUBLE_EQ(r.flows(0).bits_per_second(), 80000.0);
    EXPECT_EQ(r.window_ms(), 100u);
  }
}

// --- capture --- CapturePackets: request checks, the stream of `count` packets with the lost
// count, one capture at a time, disarmed when the call ends.
TEST_F(ServiceTest, CapturePacketsStreamsCountAndDisarms) {
  auto code = [&](v1::CaptureRequest req, std::string* msg = nullptr) {
    grpc::ClientContext ctx;
    deadline(&ctx);
    auto reader = stub_->CapturePackets(&ctx, req);
    v1::CapturedPacket p;
    while (reader->Read(&p)) {
    }
    grpc::Status st = reader->Finish();
    if (msg) *msg = st.error_message();
    return st.error_code();
  };
  v1::CaptureRequest both;
  both.set_drops(true);
  both.set_rule("x");
  EXPECT_EQ(code(both), grpc::INVALID_ARGUMENT);
  v1::CaptureRequest reason_rule;
  reason_rule.set_rule("x");
  reason_rule.set_reason("firewall_deny");
  EXPECT_EQ(code(reason_rule), grpc::INVALID_ARGUMENT);
  v1::CaptureRequest bad_reason;
  bad_reason.set_drops(true);
  bad_reason.set_reason("acl_deny");
  std::string msg;
  EXPECT_EQ(code(bad_reason, &msg), grpc::INVALID_ARGUMENT);
  EXPECT_NE(msg.find("firewall_deny"), std::string::npos) << msg;
  EXPECT_FALSE(plane_.captureArmed());

  plane_.setCaptureLeft(5);
  v1::CaptureRequest req;
  req.set_drops(true);
  req.set_reason("firewall_deny");
  req.set_count(3);
  grpc::ClientContext ctx;
  deadline(&ctx);
  auto reader = stub_->CapturePackets(&ctx, req);
  std::vector<v1::CapturedPacket> got;
  v1::CapturedPacket p;
  while (reader->Read(&p)) got.push_back(p);
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].data(), std::string("\x01\x02\x03\x05", 4));
  EXPECT_EQ(got[0].orig_len(), 60u);
  EXPECT_EQ(got[0].reason(), "firewall_deny");
  EXPECT_EQ(got[0].stage(), "firewall");
  EXPECT_EQ(got[0].lost(), 2u);  // the read's lost count, on the first packet after it
  EXPECT_EQ(got[1].lost(), 0u);
  EXPECT_FALSE(plane_.captureArmed());
  EXPECT_FALSE(plane_.lastSpec().any_reason);
  EXPECT_EQ(plane_.lastSpec().reason, dp::DropReason::kFirewallDeny);

  // Another capture while one runs: FAILED_PRECONDITION.
  dp::CaptureSpec drops;
  drops.drops = true;
  ASSERT_TRUE(plane_.armCapture(drops).ok());
  v1::CaptureRequest any;
  any.set_drops(true);
  any.set_count(1);
  EXPECT_EQ(code(any), grpc::FAILED_PRECONDITION);
  plane_.disarmCapture();
  // A duration ends a capture that finds nothing.
  v1::CaptureRequest timed;
  timed.set_drops(true);
  timed.set_duration_ms(100);
  EXPECT_EQ(code(timed), grpc::OK);
  EXPECT_FALSE(plane_.captureArmed());
}

}  // namespace
}  // namespace dpu::ctl
