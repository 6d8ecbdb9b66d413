#include "control/cli/lb_cmd.h"

#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "control/cli/cli_format.h"

namespace dpu::cli {

const char* const kLbHelp = R"(usage:
  dpuctl lb list
  dpuctl lb add SERVICE BACKEND [--ipv4 A] [--ipv6 A] [--mac M] [--port N] [--weight W]
                [--state active|draining|down] [--expected-version N | --force]
  dpuctl lb remove SERVICE BACKEND [--drain | --flush [--reset] [--allow-empty]]
                [--expected-version N | --force]
  dpuctl lb set SERVICE BACKEND [--weight W] [--state active|draining|down]
                [--expected-version N | --force]

Load balancer backends of the services in lb.services (config section lb).
  list     every service with its backends: state, weight, Maglev table slots, packets,
           bytes, active and total flows (counters follow a backend's id and addresses)
  add      a new backend (it takes its share of new flows; tracked flows never move)
  remove   --drain (default): the backend stays as 'draining': its flows keep going to it,
           new flows avoid it; remove it with --flush once 'active flows' is 0.
           --flush: the backend goes now; its flows are re-hashed onto the others, or with
           --reset dropped. The service's orphans policy becomes that choice: --flush
           without --reset switches a service that resets its orphans to re-hash.
           The service's last backend goes only with --allow-empty (the service then
           drops every new flow: lb_no_backend)
  set      change the weight (0..65535) and/or the state of a backend

examples:
  dpuctl lb list
  dpuctl lb add web be4 --ipv4 10.1.0.4 --mac 02:00:00:00:01:04 --weight 2
  dpuctl lb remove web be2 --drain
  dpuctl lb remove web be2 --flush --reset
  dpuctl lb set web be1 --weight 3
)";

namespace {

bool parseState(const std::string& s, v1::LbBackendState* out) {
  if (s == "active") *out = v1::LB_BACKEND_ACTIVE;
  else if (s == "draining") *out = v1::LB_BACKEND_DRAINING;
  else if (s == "down") *out = v1::LB_BACKEND_DOWN;
  else return false;
  return true;
}

const char* stateText(v1::LbBackendState s) {
  switch (s) {
    case v1::LB_BACKEND_ACTIVE: return "active";
    case v1::LB_BACKEND_DRAINING: return "draining";
    case v1::LB_BACKEND_DOWN: return "down";
    default: return "?";
  }
}

const char* modeText(v1::LbMode m) {
  switch (m) {
    case v1::LB_MODE_L2: return "l2";
    case v1::LB_MODE_NAT: return "nat";
    case v1::LB_MODE_IPIP: return "ipip";
    default: return "?";
  }
}

int printApply(const LbCmdContext& c, const v1::ApplyConfigResponse& resp) {
  std::fputs(c.json ? toJson(resp, true).c_str() : formatApply(resp).c_str(), stdout);
  return 0;
}

}  // namespace

std::string formatLbServices(const v1::ListLbServicesResponse& r) {
  std::string s = absl::StrCat("config version ", r.config_version(), "\n");
  if (r.services_size() == 0) absl::StrAppend(&s, "no load balancer services\n");
  for (const auto& svc : r.services()) {
    const auto& c = svc.service();
    absl::StrAppend(&s, "\nservice ", c.id(), "  mode ", modeText(c.mode()), "  dst ");
    for (int i = 0; i < c.dst_size(); ++i) absl::StrAppend(&s, i ? "," : "", c.dst(i));
    if (!c.protocol().empty()) absl::StrAppend(&s, "  proto ", c.protocol());
    if (!c.dst_ports().empty()) absl::StrAppend(&s, "  ports ", c.dst_ports());
    absl::StrAppend(&s, "  table ", svc.table_size(), "\n");
    absl::StrAppend(&s, absl::StrFormat("  %-16s %-9s %6s %7s %12s %14s %8s %10s\n", "backend",
                                        "state", "weight", "slots", "packets", "bytes",
                                        "active", "flows"));
    for (const auto& b : svc.backends()) {
      absl::StrAppend(&s, absl::StrFormat("  %-16s %-9s %6u %7u %12u %14u %8u %10u\n",
                                          b.backend().id(), stateText(b.backend().state()),
                                          b.backend().has_weight() ? b.backend().weight() : 1,
                                          b.table_slots(), b.packets(), b.bytes(),
                                          b.active_flows(), b.total_flows()));
    }
  }
  return s;
}

int runLbCommand(LbCmdContext& c, const std::vector<std::string>& a) {
  for (const auto& x : a) {
    if (x == "--help" || x == "-h") return std::fputs(kLbHelp, stdout), 0;
  }
  if (a.empty()) return c.usage("lb: which one? list, add, remove or set", kLbHelp);
  const std::string sub = a[0];
  if (sub == "list") {
    if (a.size() != 1) return c.usage("lb list: unexpected argument '" + a[1] + "'", kLbHelp);
    grpc::ClientContext ctx;
    c.unary(&ctx);
    v1::ListLbServicesResponse resp;
    grpc::Status st = c.stub->ListLbServices(&ctx, v1::ListLbServicesRequest(), &resp);
    if (!st.ok()) return c.fail("lb list", st);
    std::fputs(c.json ? toJson(resp, true).c_str() : formatLbServices(resp).c_str(), stdout);
    return 0;
  }
  if (sub != "add" && sub != "remove" && sub != "set") {
    return c.usage("lb: unknown subcommand '" + sub + "'", kLbHelp);
  }
  if (a.size() < 3 || a[1].rfind("--", 0) == 0 || a[2].rfind("--", 0) == 0) {
    return c.usage("lb " + sub + ": give SERVICE and BACKEND", kLbHelp);
  }
  const std::string svc = a[1], be = a[2];
  uint64_t expected = 0;
  bool have_expected = false, force = false, drain = false, flush = false, reset = false;
  bool allow_empty = false;
  v1::LbBackendConfig b;
  b.set_id(be);
  bool have_weight = false, have_state = false;
  for (size_t i = 3; i < a.size(); ++i) {
    const std::string& o = a[i];
    auto value = [&](std::string* v) {
      if (i + 1 >= a.size()) return false;
      *v = a[++i];
      return true;
    };
    std::string v;
    uint32_t n = 0;
    if (o == "--force") {
      force = true;
    } else if (o == "--drain" && sub == "remove") {
      drain = true;
    } else if (o == "--flush" && sub == "remove") {
      flush = true;
    } else if (o == "--reset" && sub == "remove") {
      reset = true;
    } else if (o == "--allow-empty" && sub == "remove") {
      allow_empty = true;
    } else if (o == "--expected-version") {
      if (!value(&v) || !absl::SimpleAtoi(v, &expected)) {
        return c.usage("--expected-version needs a number", kLbHelp);
      }
      have_expected = true;
    } else if (o == "--weight" && sub != "remove") {
      int64_t w = 0;
      if (!value(&v) || !absl::SimpleAtoi(v, &w)) return c.usage("--weight needs a number", kLbHelp);
      // A number out of range is an invalid backend (exit 4), not a usage error: the
      // appliance refuses one over 65535 naming the field; one the request cannot carry
      // (negative) is refused here the same way.
      if (w < 0 || w > int64_t(UINT32_MAX)) {
        return c.fail("lb " + sub,
                      grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                   absl::StrCat("backend '", be, "' weight: ", w,
                                                " is out of range [0, 65535]")));
      }
      b.set_weight(uint32_t(w));
      have_weight = true;
    } else if (o == "--state" && sub != "remove") {
      v1::LbBackendState s;
      if (!value(&v) || !parseState(v, &s)) {
        return c.usage("--state needs active, draining or down", kLbHelp);
      }
      b.set_state(s);
      have_state = true;
    } else if (sub == "add" && (o == "--ipv4" || o == "--ipv6" || o == "--mac" || o == "--port")) {
      if (!value(&v)) return c.usage(o + " needs a value", kLbHelp);
      if (o == "--ipv4") b.set_ipv4(v);
      else if (o == "--ipv6") b.set_ipv6(v);
      else if (o == "--mac") b.set_mac(v);
      else if (!absl::SimpleAtoi(v, &n)) return c.usage("--port needs a number", kLbHelp);
      else b.set_port(n);
    } else {
      return c.usage("lb " + sub + ": unknown option '" + o + "'", kLbHelp);
    }
  }
  if (force && have_expected) {
    return c.usage("--expected-version and --force exclude each other", kLbHelp);
  }
  if (drain && flush) return c.usage("lb remove: --drain or --flush, not both", kLbHelp);
  if (reset && !flush) return c.usage("lb remove: --reset goes with --flush", kLbHelp);
  if (allow_empty && !flush) return c.usage("lb remove: --allow-empty goes with --flush", kLbHelp);
  if (sub == "set" && !have_weight && !have_state) {
    return c.usage("lb set: give --weight and/or --state", kLbHelp);
  }
  if (!force && !have_expected) {
    int rc = 0;
    if (!c.committed_version(&expected, &rc)) return rc;
  }
  grpc::ClientContext ctx;
  c.unary(&ctx);
  v1::ApplyConfigResponse resp;
  grpc::Status st;
  if (sub == "add") {
    v1::AddLbBackendRequest req;
    req.set_service_id(svc);
    *req.mutable_backend() = b;
    req.set_expected_version(expected);
    req.set_force(force);
    st = c.stub->AddLbBackend(&ctx, req, &resp);
  } else if (sub == "remove") {
    v1::RemoveLbBackendRequest req;
    req.set_service_id(svc);
    req.set_backend_id(be);
    req.set_mode(flush ? v1::LB_REMOVE_FLUSH : v1::LB_REMOVE_DRAIN);
    req.set_flows(reset ? v1::LB_ORPHANS_RESET : v1::LB_ORPHANS_REHASH);
    req.set_allow_empty(allow_empty);
    req.set_expected_version(expected);
    req.set_force(force);
    st = c.stub->RemoveLbBackend(&ctx, req, &resp);
  } else {
    v1::SetLbBackendRequest req;
    req.set_service_id(svc);
    req.set_backend_id(be);
    if (have_weight) req.set_weight(b.weight());
    if (have_state) req.set_state(b.state());
    req.set_expected_version(expected);
    req.set_force(force);
    st = c.stub->SetLbBackend(&ctx, req, &resp);
  }
  if (!st.ok()) return c.fail("lb " + sub, st);
  return printApply(c, resp);
}

}  // namespace dpu::cli
