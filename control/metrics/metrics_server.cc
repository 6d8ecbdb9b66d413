#include "control/metrics/metrics_server.h"

#include <CivetServer.h>
#include <prometheus/text_serializer.h>

#include <atomic>
#include <cstdio>
#include <exception>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "control/api/appliance_service.h"
#include "control/api/server.h"

namespace dpu::ctl {
namespace {

// A source from a unary RPC of the service: its response message through exportMessage.
// The gauge dpu_metrics_source_up{source} says whether the call succeeded.
template <typename Req, typename Resp>
MetricsSource rpcSource(ApplianceService* svc,
                        grpc::Status (ApplianceService::*rpc)(grpc::ServerContext*, const Req*,
                                                              Resp*),
                        std::string source, std::string prefix) {
  return [svc, rpc, source, prefix](metrics::Families& f) {
    grpc::ServerContext ctx;
    Req req;
    Resp resp;
    grpc::Status st = (svc->*rpc)(&ctx, &req, &resp);
    f.add("dpu_metrics_source_up", prometheus::MetricType::Gauge,
          "1 when the API call behind a group of metrics succeeded at this scrape.",
          {{"source", source}}, st.ok() ? 1 : 0);
    if (st.ok()) metrics::exportMessage(resp, prefix, {}, f);
  };
}

}  // namespace

std::vector<MetricsSource> applianceSources(ApplianceService* svc) {
  std::vector<MetricsSource> out;
  out.push_back([svc](metrics::Families& f) {
    v1::Stats s;
    svc->collectStats(&s);
    metrics::exportMessage(s, "", {}, f);
  });
  out.push_back([svc](metrics::Families& f) {
    grpc::ServerContext ctx;
    v1::GetStatusRequest req;
    v1::StatusResponse st;
    if (!svc->GetStatus(&ctx, &req, &st).ok()) return;
    const v1::BuildInfo& b = st.build();
    f.add("dpu_build_info", prometheus::MetricType::Gauge,
          "Build of the running appliance (always 1; the labels carry the information).",
          {{"version", b.version()},
           {"git_commit", b.git_commit()},
           {"dpdk_version", b.dpdk_version()},
           {"build_type", b.build_type()}},
          1);
    if (st.has_fleet()) {  // --- fleet --- the node agent (docs/fleet.md)
      const v1::FleetAgentStatus& fl = st.fleet();
      const metrics::Labels l = {
          {"fleet", fl.fleet()}, {"node", fl.node()}, {"group", fl.group()}};
      using T = prometheus::MetricType;
      f.add("dpu_fleet_etcd_connected", T::Gauge,
            "1 when the last exchange of the fleet agent with etcd succeeded; 0 while etcd is "
            "unreachable (the node keeps enforcing its applied version).",
            l, fl.etcd_connected() ? 1 : 0);
      f.add("dpu_fleet_applied_version", T::Gauge,
            "The fleet version this node runs (0: none yet).", l,
            static_cast<double>(fl.applied_version()));
      f.add("dpu_fleet_desired_version", T::Gauge,
            "The fleet version this node's group should run.", l,
            static_cast<double>(fl.desired_version()));
      f.add("dpu_fleet_synced", T::Gauge,
            "1 when the node runs the version its group should run.", l,
            fl.state() == "synced" ? 1 : 0);
      f.add("dpu_fleet_last_contact_timestamp_seconds", T::Gauge,
            "Unix time of the last successful exchange with etcd.", l,
            static_cast<double>(fl.last_contact_unix_ns()) / 1e9);
      f.add("dpu_fleet_applies_total", T::Counter, "Fleet versions applied since start.", l,
            static_cast<double>(fl.applies()));
      f.add("dpu_fleet_refusals_total", T::Counter,
            "Fleet versions this node refused since start (see dpuctl fleet status).", l,
            static_cast<double>(fl.refusals()));
      f.add("dpu_fleet_relists_total", T::Counter,
            "Full relists of the fleet's control keys (after a compacted watch) since start.", l,
            static_cast<double>(fl.relists()));
    }
  });
  out.push_back(rpcSource(svc, &ApplianceService::ListFirewallRules, "firewall_rules",
                          "firewall_"));
  // --- features with a List RPC of their own add a line here (names and labels of their
  // fields in kRules of prom_export.cc) ---
  out.push_back(rpcSource(svc, &ApplianceService::ListLbServices, "lb_services", "lb_"));
  return out;
}

std::vector<prometheus::MetricFamily> collectMetrics(const std::vector<MetricsSource>& sources,
                                                     std::vector<std::string>* problems) {
  metrics::Families f;
  for (const auto& s : sources) s(f);
  if (problems) *problems = f.problems();
  return f.take();
}

// GET /metrics: the text exposition format; GET /: a small page that links it (what a browser
// pointed at the port finds); anything else: 404. Handlers run on civetweb's threads.
class MetricsServer::Handler final : public CivetHandler {
 public:
  explicit Handler(std::vector<MetricsSource> sources) : sources_(std::move(sources)) {}

  bool handleGet(CivetServer*, mg_connection* conn) override {
    const mg_request_info* ri = mg_get_request_info(conn);
    const std::string uri = ri && ri->local_uri ? ri->local_uri : "";
    if (uri == "/metrics") {
      std::vector<std::string> problems;
      auto families = collectMetrics(sources_, &problems);
      if (!problems.empty() && !told_.exchange(true)) {
        std::fprintf(stderr, "dpu-appliance: metrics: %s\n", absl::StrJoin(problems, "; ").c_str());
      }
      send(conn, 200, "OK", "text/plain; version=0.0.4; charset=utf-8",
           prometheus::TextSerializer().Serialize(families));
    } else if (uri == "/") {
      send(conn, 200, "OK", "text/html; charset=utf-8", kIndexPage);
    } else {
      send(conn, 404, "Not Found", "text/plain; charset=utf-8",
           "not found: this endpoint serves /metrics (Prometheus text format) and /\n");
    }
    return true;
  }

  static constexpr const char* kIndexPage =
      "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>dpu-appliance metrics</title>"
      "</head>\n<body><h1>dpu-appliance</h1>\n"
      "<p>Prometheus metrics: <a href=\"/metrics\">/metrics</a> (text exposition format, every "
      "counter of GetStats and of the firewall rules and LB services, names prefixed "
      "<code>dpu_</code>).</p>\n"
      "<p>Dashboards and alert rules: <code>examples/grafana/</code> and "
      "<code>examples/prometheus/</code> of the source tree; docs/operations.md, "
      "\"Prometheus metrics\".</p>\n</body></html>\n";

 private:
  static void send(mg_connection* conn, int code, const char* text, const char* type,
                   const std::string& body) {
    mg_printf(conn,
              "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
              "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
              code, text, type, body.size());
    mg_write(conn, body.data(), body.size());
  }

  std::vector<MetricsSource> sources_;
  std::atomic<bool> told_{false};
};

absl::StatusOr<std::string> resolveMetricsAddress(const MetricsOptions& o) {
  std::string addr = o.listen;
  uint32_t port_only = 0;
  if (absl::SimpleAtoi(addr, &port_only)) addr = absl::StrCat("127.0.0.1:", addr);
  std::string host, port;
  if (absl::Status st = splitHostPort(addr, &host, &port); !st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics-listen: ", absl::StripPrefix(st.message(), "listen: ")));
  }
  if (!isLoopbackHost(host) && !o.listen_any) {
    return absl::PermissionDeniedError(absl::StrCat(
        "metrics-listen: refusing '", o.listen, "': ",
        host.empty() ? "an empty host means every interface" : "not a loopback address",
        "; the metrics name rules and show traffic. Add --metrics-listen-any to accept it"));
  }
  if (absl::AsciiStrToLower(host) == "localhost") host = "127.0.0.1";  // civetweb wants an IP
  // civetweb takes IPv6 as [addr]:port, IPv4 as addr:port.
  return host.find(':') != std::string::npos ? absl::StrCat("[", host, "]:", port)
                                             : absl::StrCat(host, ":", port);
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::start(
    const MetricsOptions& opts, std::vector<MetricsSource> sources) {
  auto addr = resolveMetricsAddress(opts);
  if (!addr.ok()) return addr.status();
  std::unique_ptr<MetricsServer> s(new MetricsServer());
  s->handler_ = std::make_unique<Handler>(std::move(sources));
  // No document root: only the two handlers answer (no file is ever served).
  const std::vector<std::string> options = {"listening_ports", *addr, "num_threads", "2"};
  try {
    s->server_ = std::make_unique<CivetServer>(options);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("metrics-listen: cannot listen on ", *addr, ": ", e.what()));
  }
  s->server_->addHandler("/", s->handler_.get());
  std::vector<int> ports = s->server_->getListeningPorts();
  std::string host = addr->substr(0, addr->rfind(':'));
  s->address_ = absl::StrCat(host, ":", ports.empty() ? 0 : ports[0]);
  return s;
}

MetricsServer::~MetricsServer() {
  if (server_) server_->close();  // joins civetweb's threads before the handler goes
  server_.reset();
}

}  // namespace dpu::ctl
