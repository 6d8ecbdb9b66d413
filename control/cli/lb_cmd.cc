#include "control/cli/lb_cmd.h"

#include <google/protobuf/util/json_util.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "control/cli/cli_format.h"

namespace dpu::cli {

const char* const kLbHelp = R"(usage:
  dpuctl lb list
  dpuctl lb show SERVICE
  dpuctl lb create SERVICE --dst VIP[,VIP...] [--proto P] [--ports N[-M]] [--vlan N]
                [--mode l2|nat|ipip] [--key FIELD[,FIELD...]] [--fallback hash|drop]
                [--orphans rehash|reset] [--tunnel-src-v4 A] [--tunnel-src-v6 A]
                [--table-size N] [--drain-remove-idle] [--drain-timeout S] [--file FILE.json]
                [--index N | --before ID | --after ID] [--expected-version N | --force]
  dpuctl lb delete SERVICE [--expected-version N | --force]
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
  show     one service: its match, mode, key, policies and backends with their counters
  create   a new service (lb.services[]) without backends: add them with `lb add`.
           --dst the VIPs (prefixes or addresses); --key the hashed fields (ip.src, ip.dst,
           l4.sport, l4.dport, ip.proto, vlan, ipv6.flowlabel, dns.qname, tunnel_id; default the
           5-tuple); --file FILE.json a whole service in protobuf JSON (LbServiceConfig, with
           backends if you like; the other options override its fields). Services are tried
           in order: the new one goes last unless --index (0 = first), --before or --after.
           A service with that id already: exit 1; an invalid service: exit 4, every error.
  delete   the service and its backends; its tracked flows are no longer balanced

examples:
  dpuctl lb list
  dpuctl lb create web --dst 192.0.2.10 --proto tcp --ports 80 --mode nat
  dpuctl lb create dns --dst 192.0.2.53,2001:db8::53 --proto udp --ports 53 --key dns.qname --index 0
  dpuctl lb create api --file api-service.json
  dpuctl lb show web
  dpuctl lb delete web
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

template <class T, size_t N>
bool lookupWord(const std::pair<const char*, T> (&table)[N], const std::string& word, T* out) {
  for (const auto& [name, v] : table) {
    if (word == name) {
      *out = v;
      return true;
    }
  }
  return false;
}

constexpr std::pair<const char*, v1::LbMode> kModes[] = {
    {"l2", v1::LB_MODE_L2}, {"nat", v1::LB_MODE_NAT}, {"ipip", v1::LB_MODE_IPIP}};
constexpr std::pair<const char*, v1::LbFallback> kFallbacks[] = {
    {"hash", v1::LB_FALLBACK_HASH_5TUPLE}, {"drop", v1::LB_FALLBACK_DROP}};
constexpr std::pair<const char*, v1::LbOrphanPolicy> kOrphans[] = {
    {"rehash", v1::LB_ORPHANS_REHASH}, {"reset", v1::LB_ORPHANS_RESET}};

// Consumes --expected-version N / --force at a[i]: 1 consumed, 0 not an option of these,
// -1 a usage error (printed, *rc set).
int versionOption(LbCmdContext& c, const std::vector<std::string>& a, size_t& i,
                  uint64_t* expected, bool* have_expected, bool* force, int* rc) {
  if (a[i] == "--force") {
    *force = true;
    return 1;
  }
  if (a[i] != "--expected-version") return 0;
  if (i + 1 >= a.size() || !absl::SimpleAtoi(a[i + 1], expected)) {
    *rc = c.usage("--expected-version needs a number", kLbHelp);
    return -1;
  }
  ++i;
  *have_expected = true;
  return 1;
}

int runShow(LbCmdContext& c, const std::vector<std::string>& a) {
  if (a.size() != 2 || a[1].rfind("--", 0) == 0) {
    return c.usage("lb show: give exactly one SERVICE", kLbHelp);
  }
  grpc::ClientContext ctx;
  c.unary(&ctx);
  v1::ListLbServicesResponse all;
  grpc::Status st = c.stub->ListLbServices(&ctx, v1::ListLbServicesRequest(), &all);
  if (!st.ok()) return c.fail("lb show", st);
  v1::ListLbServicesResponse one;
  one.set_config_version(all.config_version());
  for (const auto& svc : all.services()) {
    if (svc.service().id() == a[1]) *one.add_services() = svc;
  }
  if (one.services_size() == 0) {
    std::fprintf(stderr, "dpuctl: lb show: no lb service with id '%s'\n", a[1].c_str());
    return 1;
  }
  std::fputs(c.json ? toJson(one.services(0), true).c_str() : formatLbService(one).c_str(), stdout);
  return 0;
}

int runCreateDelete(LbCmdContext& c, const std::vector<std::string>& a) {
  const std::string sub = a[0];
  const bool create = sub == "create";
  if (a.size() < 2 || a[1].rfind("--", 0) == 0) {
    return c.usage("lb " + sub + ": give the SERVICE id", kLbHelp);
  }
  uint64_t expected = 0;
  bool have_expected = false, force = false;
  v1::CreateLbServiceRequest req;
  v1::LbServiceConfig opts;   // fields given as options (override --file)
  std::vector<std::string> set_fields;
  std::string file;
  for (size_t i = 2; i < a.size(); ++i) {
    int rc = 0;
    int v = versionOption(c, a, i, &expected, &have_expected, &force, &rc);
    if (v < 0) return rc;
    if (v > 0) continue;
    const std::string& o = a[i];
    if (!create) return c.usage("lb delete: unknown option '" + o + "'", kLbHelp);
    if (o == "--drain-remove-idle") {
      opts.set_drain_remove_idle(true);
      set_fields.push_back("drain_remove_idle");
      continue;
    }
    static const char* const kValued[] = {"--dst", "--proto", "--ports", "--vlan", "--mode",
                                          "--key", "--fallback", "--orphans", "--tunnel-src-v4",
                                          "--tunnel-src-v6", "--table-size", "--drain-timeout",
                                          "--file", "--index", "--before", "--after"};
    bool valued = false;
    for (const char* k : kValued) valued |= o == k;
    if (!valued) return c.usage("lb create: unknown option '" + o + "'", kLbHelp);
    if (i + 1 >= a.size()) return c.usage("lb create: " + o + " needs a value", kLbHelp);
    const std::string& val = a[++i];
    uint32_t n = 0;
    const bool numeric = o == "--vlan" || o == "--table-size" || o == "--drain-timeout" || o == "--index";
    if (numeric && !absl::SimpleAtoi(val, &n)) {
      return c.usage("lb create: " + o + " needs a number", kLbHelp);
    }
    if ((o == "--index" || o == "--before" || o == "--after") &&
        req.position_case() != v1::CreateLbServiceRequest::POSITION_NOT_SET) {
      return c.usage("lb create: give one of --index, --before, --after", kLbHelp);
    }
    if (o == "--dst") {
      for (auto d : absl::StrSplit(val, ',', absl::SkipEmpty())) opts.add_dst(std::string(d));
      set_fields.push_back("dst");
    } else if (o == "--key") {
      for (auto k : absl::StrSplit(val, ',', absl::SkipEmpty())) opts.add_key()->set_field(std::string(k));
      set_fields.push_back("key");
    } else if (o == "--mode" || o == "--fallback" || o == "--orphans") {
      bool ok = true;
      if (o == "--mode") {
        v1::LbMode m;
        if ((ok = lookupWord(kModes, val, &m))) opts.set_mode(m);
      } else if (o == "--fallback") {
        v1::LbFallback f;
        if ((ok = lookupWord(kFallbacks, val, &f))) opts.set_fallback(f);
      } else {
        v1::LbOrphanPolicy p;
        if ((ok = lookupWord(kOrphans, val, &p))) opts.set_orphans(p);
      }
      if (!ok) {
        return c.usage("lb create: " + o + " '" + val + "': " +
                           (o == "--mode" ? "l2, nat or ipip"
                            : o == "--fallback" ? "hash or drop" : "rehash or reset"),
                       kLbHelp);
      }
      set_fields.push_back(o.substr(2));
    } else if (o == "--proto") {
      opts.set_protocol(val);
      set_fields.push_back("protocol");
    } else if (o == "--ports") {
      opts.set_dst_ports(val);
      set_fields.push_back("dst_ports");
    } else if (o == "--vlan") {
      opts.set_vlan(n);
      set_fields.push_back("vlan");
    } else if (o == "--tunnel-src-v4") {
      opts.set_tunnel_src_v4(val);
      set_fields.push_back("tunnel_src_v4");
    } else if (o == "--tunnel-src-v6") {
      opts.set_tunnel_src_v6(val);
      set_fields.push_back("tunnel_src_v6");
    } else if (o == "--table-size") {
      opts.set_table_size(n);
      set_fields.push_back("table_size");
    } else if (o == "--drain-timeout") {
      opts.set_drain_timeout_seconds(n);
      set_fields.push_back("drain_timeout_seconds");
    } else if (o == "--file") {
      file = val;
    } else if (o == "--index") {
      req.set_index(n);
    } else if (o == "--before") {
      req.set_before_id(val);
    } else {
      req.set_after_id(val);
    }
  }
  if (force && have_expected) {
    return c.usage("--expected-version and --force exclude each other", kLbHelp);
  }
  v1::LbServiceConfig svc;
  if (create && !file.empty()) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "dpuctl: %s: cannot open\n", file.c_str());
      return 1;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    google::protobuf::util::JsonParseOptions po;
    auto st = google::protobuf::util::JsonStringToMessage(ss.str(), &svc, po);
    if (!st.ok()) {
      std::fprintf(stderr, "dpuctl: lb create: %s: not an LbServiceConfig in protobuf JSON: %s\n",
                   file.c_str(), std::string(st.message()).c_str());
      return 4;
    }
  }
  // Options override the file's fields (repeated ones are replaced, not appended).
  const google::protobuf::Descriptor* d = v1::LbServiceConfig::descriptor();
  const google::protobuf::Reflection* r = v1::LbServiceConfig::GetReflection();
  for (const std::string& f : set_fields) {
    const google::protobuf::FieldDescriptor* fd = d->FindFieldByName(f);
    if (fd == nullptr) continue;
    r->ClearField(&svc, fd);
  }
  svc.MergeFrom(opts);
  svc.set_id(a[1]);
  if (create && svc.dst_size() == 0) {
    return c.usage("lb create: give --dst (the VIPs), or a --file with dst", kLbHelp);
  }
  if (!force && !have_expected) {
    int rc = 0;
    if (!c.committed_version(&expected, &rc)) return rc;
  }
  grpc::ClientContext ctx;
  c.unary(&ctx);
  v1::ApplyConfigResponse resp;
  grpc::Status st;
  if (create) {
    *req.mutable_service() = svc;
    req.set_expected_version(expected);
    req.set_force(force);
    st = c.stub->CreateLbService(&ctx, req, &resp);
  } else {
    v1::DeleteLbServiceRequest dr;
    dr.set_id(a[1]);
    dr.set_expected_version(expected);
    dr.set_force(force);
    st = c.stub->DeleteLbService(&ctx, dr, &resp);
  }
  if (!st.ok()) return c.fail("lb " + sub, st);
  return printApply(c, resp);
}

}  // namespace

std::string formatLbService(const v1::ListLbServicesResponse& r) {
  std::string s = formatLbServices(r);
  for (const auto& svc : r.services()) {
    const auto& c = svc.service();
    std::string key;
    for (const auto& k : c.key()) {
      absl::StrAppend(&key, key.empty() ? "" : ",", k.field());
      if (k.field() == "raw") absl::StrAppend(&key, "(", k.anchor(), "+", k.offset(), ":", k.length(), ")");
      if (!k.mask().empty()) absl::StrAppend(&key, "/", k.mask());
    }
    absl::StrAppend(&s, "  key ", key.empty() ? "5-tuple" : key, "  fallback ",
                    c.fallback() == v1::LB_FALLBACK_DROP ? "drop" : "hash",
                    "  orphans ", c.orphans() == v1::LB_ORPHANS_RESET ? "reset" : "rehash");
    if (c.has_vlan()) absl::StrAppend(&s, "  vlan ", c.vlan());
    if (!c.tunnel_src_v4().empty()) absl::StrAppend(&s, "  tunnel-src-v4 ", c.tunnel_src_v4());
    if (!c.tunnel_src_v6().empty()) absl::StrAppend(&s, "  tunnel-src-v6 ", c.tunnel_src_v6());
    if (c.drain_remove_idle()) absl::StrAppend(&s, "  drain-remove-idle");
    if (c.drain_timeout_seconds()) absl::StrAppend(&s, "  drain-timeout ", c.drain_timeout_seconds(), "s");
    absl::StrAppend(&s, "\n");
  }
  return s;
}

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
  if (a.empty()) {
    return c.usage("lb: which one? list, show, create, delete, add, remove or set", kLbHelp);
  }
  const std::string sub = a[0];
  if (sub == "show") return runShow(c, a);
  if (sub == "create" || sub == "delete") return runCreateDelete(c, a);
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
