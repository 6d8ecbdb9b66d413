#include "control/cli/flows_cmd.h"

#include <pcap/pcap.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "control/cli/cli_format.h"

namespace dpu::cli {

const char* const kFlowsHelp = R"(usage: dpuctl flows [--address A] [--src A] [--dst A] [--port N] [--sport N] [--dport N]
                    [--proto P] [--state S] [--verdict V] [--rule ID] [--backend ID]
                    [--service ID] [--vlan N] [--tunnel ID] [--sort K] [--asc] [--limit N] [--offset N]
                    [--top N [--by packets|bytes] [--window S]]

The flows every worker tracks, like conntrack -L: one line per flow, initiator (SRC) ->
responder (DST), TCP state, the cached verdict with the stage and rule that decided it, the
load-balancer backend it is pinned to, packets and bytes each way (> to the responder,
< back), age and idle time. Workers copy their tables a bounded slice per loop between
bursts: listing never stalls the packet path, and is not one instant (a flow created or
ended during the walk may be missing).

filters (all given must match):
  --address A      either endpoint in A (an IP or a CIDR prefix, v4 or v6)
  --src A, --dst A the initiator / the responder in A
  --port N         either port; --sport N, --dport N: the initiator's / responder's
  --proto P        tcp, udp, icmp, icmpv6, sctp, gre or a number
  --state S        TCP state: syn_sent syn_received established fin_wait closing closed
  --verdict V      cached verdict: forward, drop, reject, none (not decided yet)
  --rule ID        the firewall rule (DPI: SOURCE:RULE) that decided it
  --backend ID     pinned to this LB backend; --service ID: balanced by this LB service
  --vlan N         outer VLAN id
  --tunnel ID      innermost VNI (VXLAN/Geneve) or GRE key (docs/tunnels.md)
output:
  --sort K         packets, bytes (both directions), age (oldest first), last-seen (most
                   recent first); default: worker, then flow id. --asc reverses.
  --limit N        at most N flows; --offset N skips the first N (paging)
  --top N          top talkers: the N flows that moved the most within a window of
                   --window S seconds (default 1, 0.1 .. 600) by --by packets (default) or
                   bytes. Method: two listings S seconds apart; per flow the difference of
                   its counters (all of them for a flow created meanwhile) over the window
                   measured on the worker's clock. Flows that ended within the window are
                   not listed.
  --json           the ListFlows answer (dpu.v1.ListFlowsResponse) as JSON

examples:
  dpuctl flows
  dpuctl flows --proto tcp --state established --sort bytes --limit 20
  dpuctl flows --address 10.0.0.0/8 --dport 443
  dpuctl flows --verdict drop --rule ssh-block
  dpuctl flows --backend web-2 --sort last-seen
  dpuctl flows --sort packets --limit 50 --offset 50
  dpuctl flows --top 10 --by bytes --window 5
  dpuctl --json flows --src 2001:db8::/32
)";

const char* const kCaptureHelp = R"(usage: dpuctl capture (--drops [--reason R] | --rule ID) -w FILE.pcap [--count N]
                    [--duration S] [--quiet]

Copies packets the appliance drops (or rejects) - all of them or those of drop reason R
(see 'dpuctl stats': firewall_deny, dns_answered, dpi_drop ...) - or the packets firewall
rule ID judges (any verdict), on every worker, into FILE.pcap (Ethernet, nanosecond
timestamps, frames cut at 2048 bytes), until N packets (--count), S seconds (--duration) or
Ctrl-C. One line per packet on stdout unless --quiet. Workers copy only while a capture
runs, into bounded per-worker rings; packets that find a ring full are lost and counted
(reported at the end). One capture at a time (another one: exit 1).

examples:
  dpuctl capture --drops --count 100 -w drops.pcap
  dpuctl capture --drops --reason firewall_deny --duration 30 -w denied.pcap
  dpuctl capture --rule ssh-block --count 10 -w ssh.pcap
)";

namespace {

constexpr int kOk = 0, kFailed = 1, kUsage = 2;

int usage(const std::string& msg, const char* help) {
  std::fprintf(stderr, "dpuctl: %s\n\n%s", msg.c_str(), help);
  return kUsage;
}

bool wantsHelp(const std::vector<std::string>& a) {
  for (const auto& s : a) {
    if (s == "--help" || s == "-h") return true;
  }
  return false;
}

std::atomic<bool> g_stop{false};
void onStop(int) { g_stop.store(true); }

std::string human(uint64_t v) {
  if (v < 10000) return absl::StrCat(v);
  if (v < 1000000) return absl::StrFormat("%.1fk", v / 1e3);
  if (v < 1000000000) return absl::StrFormat("%.1fM", v / 1e6);
  return absl::StrFormat("%.1fG", v / 1e9);
}

std::string endpoint(const std::string& ip, uint32_t port, const std::string& proto) {
  const bool ports = proto == "TCP" || proto == "UDP" || proto == "SCTP";
  const std::string a = ip.find(':') != std::string::npos && ports ? "[" + ip + "]" : ip;
  return ports ? absl::StrCat(a, ":", port) : a;
}

std::string seconds(double s) {
  if (s < 60) return absl::StrFormat("%.1fs", s);
  if (s < 3600) return absl::StrFormat("%dm%02ds", int(s) / 60, int(s) % 60);
  return absl::StrFormat("%dh%02dm", int(s) / 3600, int(s) % 3600 / 60);
}

}  // namespace

std::string formatFlows(const v1::ListFlowsResponse& r, bool window) {
  std::string out;
  if (window) {
    absl::StrAppendFormat(&out, "%-5s %-22s %-6s %-40s %-40s %-12s %-8s %10s %10s %10s %12s\n",
                          "W", "FLOW", "PROTO", "SRC", "DST", "STATE", "VERDICT", "PKTS",
                          "BYTES", "PPS", "BPS");
  } else {
    absl::StrAppendFormat(&out, "%-5s %-22s %-6s %-40s %-40s %-12s %-20s %-16s %-16s %15s %15s %8s %8s\n",
                          "W", "FLOW", "PROTO", "SRC", "DST", "STATE", "VERDICT", "RULE",
                          "BACKEND", "PKTS >/<", "BYTES >/<", "AGE", "IDLE");
  }
  for (const auto& f : r.flows()) {
    std::string state = f.state().empty() ? "-" : f.state();
    if (f.midstream()) state += "*";
    std::string verdict = f.verdict();
    if (!f.stage().empty() && f.verdict() != "none") verdict += "/" + f.stage();
    const std::string src = endpoint(f.src_ip(), f.src_port(), f.proto());
    const std::string dst = endpoint(f.dest_ip(), f.dest_port(), f.proto());
    if (window) {
      absl::StrAppendFormat(&out, "%-5u %-22u %-6s %-40s %-40s %-12s %-8s %10s %10s %10.1f %12s\n",
                            f.worker(), f.flow_id(), f.proto(), src, dst, state, f.verdict(),
                            human(f.window_packets()), human(f.window_bytes()),
                            f.packets_per_second(), human(uint64_t(f.bits_per_second())));
    } else {
      absl::StrAppendFormat(
          &out, "%-5u %-22u %-6s %-40s %-40s %-12s %-20s %-16s %-16s %15s %15s %8s %8s\n",
          f.worker(), f.flow_id(), f.proto(), src, dst, state, verdict,
          f.rule().empty() ? "-" : f.rule(), f.backend().empty() ? "-" : f.backend(),
          absl::StrCat(human(f.packets_toserver()), "/", human(f.packets_toclient())),
          absl::StrCat(human(f.bytes_toserver()), "/", human(f.bytes_toclient())),
          seconds(f.age_seconds()), seconds(f.idle_seconds()));
    }
  }
  absl::StrAppendFormat(&out, "%d of %u matching flows shown (%u flows listed by the workers)",
                        r.flows_size(), r.matched(), r.scanned());
  if (window) absl::StrAppendFormat(&out, "; window %.1f s", r.window_ms() / 1000.0);
  out += "\n";
  if (r.missed()) {
    absl::StrAppendFormat(&out, "warning: %u flows created during the walk did not fit: the listing is incomplete\n",
                          r.missed());
  }
  return out;
}

int cmdFlows(const DnsCmdEnv& env, const std::vector<std::string>& a) {
  if (wantsHelp(a)) return std::fputs(kFlowsHelp, stdout), kOk;
  v1::ListFlowsRequest req;
  v1::FlowFilter* f = req.mutable_filter();
  uint32_t top = 0;
  double window_s = 1;
  bool window_given = false;
  std::string by;
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string& o = a[i];
    if (o == "--asc") {
      req.set_ascending(true);
      continue;
    }
    if (i + 1 >= a.size()) return usage("flows: " + o + " needs a value", kFlowsHelp);
    const std::string& v = a[++i];
    uint32_t n = 0;
    const bool num = absl::SimpleAtoi(v, &n);
    if (o == "--address") f->set_address(v);
    else if (o == "--src") f->set_src(v);
    else if (o == "--dst") f->set_dst(v);
    else if (o == "--proto") f->set_proto(v);
    else if (o == "--state") f->set_state(v);
    else if (o == "--verdict") f->set_verdict(v);
    else if (o == "--rule") f->set_rule(v);
    else if (o == "--backend") f->set_backend(v);
    else if (o == "--service") f->set_service(v);
    else if (o == "--sort") req.set_sort(v);
    else if (o == "--by") by = v;
    else if (o == "--port" && num && n > 0 && n <= 65535) f->set_port(n);
    else if (o == "--sport" && num && n > 0 && n <= 65535) f->set_src_port(n);
    else if (o == "--dport" && num && n > 0 && n <= 65535) f->set_dst_port(n);
    else if (o == "--vlan" && num && n <= 4095) f->set_vlan(n);
    else if (o == "--tunnel" && num) f->set_tunnel_id(n);
    else if (o == "--limit" && num) req.set_limit(n);
    else if (o == "--offset" && num) req.set_offset(n);
    else if (o == "--top" && num && n > 0) top = n;
    else if (o == "--window" && absl::SimpleAtod(v, &window_s) && window_s >= 0.1 && window_s <= 600) {
      window_given = true;
    } else {
      return usage("flows: bad argument '" + o + " " + v + "'", kFlowsHelp);
    }
  }
  if (!top && (window_given || !by.empty())) {
    return usage("flows: --by and --window go with --top N", kFlowsHelp);
  }
  if (top) {
    if (!req.sort().empty() || req.limit() || req.offset()) {
      return usage("flows: --top sorts and limits itself (no --sort, --limit, --offset)", kFlowsHelp);
    }
    if (by.empty()) by = "packets";
    if (by != "packets" && by != "bytes") {
      return usage("flows: --by is packets or bytes, not '" + by + "'", kFlowsHelp);
    }
    req.set_sort(by);
    req.set_limit(top);
    req.set_window_ms(static_cast<uint32_t>(window_s * 1000 + 0.5));
  }
  grpc::ClientContext ctx;
  env.unary(&ctx);
  if (top && ctx.deadline() < std::chrono::system_clock::now() + std::chrono::hours(24 * 365)) {
    ctx.set_deadline(ctx.deadline() + std::chrono::milliseconds(req.window_ms()));  // + the window
  }
  v1::ListFlowsResponse resp;
  grpc::Status st = env.stub->ListFlows(&ctx, req, &resp);
  if (!st.ok()) return env.rpc_fail("flows (ListFlows)", st);
  std::fputs(env.json ? toJson(resp, true).c_str() : formatFlows(resp, top != 0).c_str(), stdout);
  return kOk;
}

int cmdCapture(const DnsCmdEnv& env, const std::vector<std::string>& a) {
  if (wantsHelp(a)) return std::fputs(kCaptureHelp, stdout), kOk;
  v1::CaptureRequest req;
  std::string file;
  bool quiet = false;
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string& o = a[i];
    if (o == "--drops") {
      req.set_drops(true);
      continue;
    }
    if (o == "--quiet") {
      quiet = true;
      continue;
    }
    if (i + 1 >= a.size()) return usage("capture: " + o + " needs a value", kCaptureHelp);
    const std::string& v = a[++i];
    uint32_t n = 0;
    double s = 0;
    if (o == "--reason") req.set_reason(v);
    else if (o == "--rule") req.set_rule(v);
    else if (o == "-w" || o == "--write") file = v;
    else if (o == "--count" && absl::SimpleAtoi(v, &n) && n > 0) req.set_count(n);
    else if (o == "--duration" && absl::SimpleAtod(v, &s) && s > 0 && s < 4e6) {
      req.set_duration_ms(static_cast<uint32_t>(s * 1000 + 0.5));
    } else {
      return usage("capture: bad argument '" + o + " " + v + "'", kCaptureHelp);
    }
  }
  if (req.drops() == !req.rule().empty()) {
    return usage("capture: give --drops or --rule ID (one of them)", kCaptureHelp);
  }
  if (!req.reason().empty() && !req.drops()) {
    return usage("capture: --reason goes with --drops", kCaptureHelp);
  }
  if (file.empty()) return usage("capture: -w FILE.pcap is required", kCaptureHelp);

  pcap_t* dead = pcap_open_dead_with_tstamp_precision(DLT_EN10MB, 65535, PCAP_TSTAMP_PRECISION_NANO);
  if (dead == nullptr) {
    std::fprintf(stderr, "dpuctl: capture: libpcap cannot open a writer\n");
    return kFailed;
  }
  pcap_dumper_t* dump = pcap_dump_open(dead, file.c_str());
  if (dump == nullptr) {
    std::fprintf(stderr, "dpuctl: capture: %s: %s\n", file.c_str(), pcap_geterr(dead));
    pcap_close(dead);
    return kFailed;
  }
  grpc::ClientContext ctx;
  g_stop.store(false);
  std::signal(SIGINT, onStop);
  std::signal(SIGTERM, onStop);
  std::atomic<bool> done{false};
  std::thread canceller([&] {
    while (!done.load()) {
      if (g_stop.load()) {
        ctx.TryCancel();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  auto reader = env.stub->CapturePackets(&ctx, req);
  v1::CapturedPacket p;
  uint64_t n = 0, lost = 0;
  while (reader->Read(&p)) {
    pcap_pkthdr h{};
    const int64_t ts = p.timestamp_unix_ns();
    h.ts.tv_sec = ts / 1000000000;
    h.ts.tv_usec = ts % 1000000000;  // nanoseconds: the file's precision
    h.caplen = static_cast<bpf_u_int32>(p.data().size());
    h.len = p.orig_len();
    pcap_dump(reinterpret_cast<u_char*>(dump), &h,
              reinterpret_cast<const u_char*>(p.data().data()));
    ++n;
    lost += p.lost();
    if (env.json) {
      std::fputs(toJson(p, false).c_str(), stdout);
    } else if (!quiet) {
      std::printf("%s %s %s %s%s%s %u bytes\n", formatTime(ts).c_str(), p.in_iface().c_str(),
                  p.verdict().c_str(), p.stage().c_str(), p.reason().empty() ? "" : " ",
                  p.reason().c_str(), p.orig_len());
    }
    std::fflush(stdout);
  }
  grpc::Status st = reader->Finish();
  done.store(true);
  canceller.join();
  pcap_dump_close(dump);
  pcap_close(dead);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  if (!st.ok() && !(st.error_code() == grpc::CANCELLED && g_stop.load())) {
    return env.rpc_fail("capture (CapturePackets)", st);
  }
  std::fprintf(stderr, "dpuctl: captured %llu packets to %s", static_cast<unsigned long long>(n),
               file.c_str());
  if (lost) std::fprintf(stderr, " (%llu lost: capture rings full)", static_cast<unsigned long long>(lost));
  std::fprintf(stderr, "\n");
  return kOk;
}

}  // namespace dpu::cli
