// dpuctl: command-line client of the appliance's gRPC API (dpu.v1.Appliance).
// Usage: dpuctl --help; every command has --help with examples.
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "control/cli/dns_cmd.h"  // DNS filtering
#include "control/cli/fleet_cmd.h"  // --- fleet ---
#include "control/cli/dpi_cmd.h"  // --- dpi ---
#include "control/cli/flows_cmd.h"  // --- flows view / capture ---
#include "control/cli/cli_format.h"
#include "control/cli/fw_format.h"
#include "control/cli/lb_cmd.h"
#include "control/config/config_loader.h"
#include "control/config/json_check.h"
#include "proto/appliance_api.grpc.pb.h"

namespace {

using dpu::v1::Appliance;

constexpr const char* kDefaultServer = "unix:/var/lib/dpu-appliance/api.sock";

// Exit codes.
constexpr int kOk = 0;
constexpr int kFailed = 1;       // server unreachable, RPC failed, file unreadable
constexpr int kUsage = 2;        // bad command line
constexpr int kConflict = 3;     // ABORTED: the committed version moved
constexpr int kInvalid = 4;      // INVALID_ARGUMENT: invalid configuration / request

constexpr const char* kMainHelp = R"(usage: dpuctl [global options] <command> [options]

Client of the dpu-appliance gRPC API.

global options (anywhere on the line):
  --server ADDR        unix:/path/api.sock or HOST:PORT
                       (default $DPUCTL_SERVER, else unix:/var/lib/dpu-appliance/api.sock)
  --tls-ca FILE        use TLS; verify the server certificate with this CA (PEM)
  --tls-cert FILE      client certificate (PEM) for mTLS; needs --tls-key
  --tls-key FILE       client private key (PEM)
  --tls-server-name N  name expected in the server certificate (default: host of ADDR)
  --timeout S          deadline of one-shot calls in seconds (default $DPUCTL_TIMEOUT,
                       else 30); 0: no deadline, wait for the server's answer
  --json               print the API messages as protobuf JSON instead of tables

commands:
  status                                    instance, uptime, versions, workers, ports, build
  config get                                the committed configuration (JSON)
  config apply FILE [--expected-version N | --force]
  config diff FILE                          committed configuration vs FILE, field by field
  config validate FILE                      check FILE on the server without committing
  config set PATH=VALUE... [--expected-version N | --force]
  config reseed FILE [--yes]                FILE becomes the running config again (diff, confirm)
  stats [--watch [--interval MS] [--count N] [--full]]
  events [--types drop,flow,config] [--count N] [--buffer N]
  explain (--frame-hex HEX | --src IP --dst IP --proto P [--sport N] [--dport N]
           [--flags F] [--vlan N] [--payload TEXT] | --dns-query NAME [--qtype T])
           [--side A|B]
  fw list                                   firewall rules in evaluation order, with counters
  fw add "RULE" [--index N | --before ID | --after ID] [--expected-version N | --force]
  fw remove ID [--expected-version N | --force]
  fw load FILE [--expected-version N | --force]
  geo set FILE.mmdb [--expected-version N | --force]
  geo clear [--expected-version N | --force]
  geo lookup IP [--database FILE.mmdb]
  lb list                                   load balancer services, backends and counters
  lb show SERVICE                           one service: match, key, policies, backends
  lb create SERVICE --dst VIP[,VIP] [--proto P] [--ports N] [--mode M] [--key F,..] [...]
  lb delete SERVICE [--expected-version N | --force]
  lb add SERVICE BACKEND [--ipv4 A] [--ipv6 A] [--mac M] [--port N] [--weight W] [...]
  lb remove SERVICE BACKEND [--drain | --flush [--reset]] [--expected-version N | --force]
  lb set SERVICE BACKEND [--weight W] [--state active|draining|down] [...]
  dns list                                  DNS lists with their sizes and counters
  dns show LIST                             one list as configured, with its stats
  dns create LIST [ENTRY...] [--action A] [--format F] [--list-file PATH] [...]
  dns delete LIST [--expected-version N | --force]
  dns add LIST ENTRY... [--file FILE] [--expected-version N | --force]
  dns remove LIST ENTRY... [--file FILE] [--expected-version N | --force]
  dpi list                                  YARA rules: action, tags, matches, unsupported ones
  dpi add [FILE.yar | -] [--set NAME] [--expected-version N | --force]
  dpi remove RULE [--expected-version N | --force]
  dpi show SET                              the rules of one rule set or rule file
  dpi create SET [FILE.yar | -] [--expected-version N | --force]
  dpi delete SET [--expected-version N | --force]
  dpi action RULE alert|drop|reset|default [--expected-version N | --force]
  flows [--address A] [--proto P] [--state S] [--verdict V] [--rule ID] [--backend ID] [...]
        [--sort packets|bytes|age|last-seen] [--limit N] [--offset N]
        [--top N [--by packets|bytes] [--window S]]   flows of every worker, top talkers
  capture (--drops [--reason R] | --rule ID) -w FILE.pcap [--count N] [--duration S]
  fleet apply FILE | status | rollout | rollback | history | diff A B | show
                                            the fleet's policy in etcd (dpuctl fleet --help)

'dpuctl <command> --help' shows each command's options and examples.

environment: DPUCTL_SERVER (default --server); DPUCTL_TIMEOUT (default --timeout);
             DPUCTL_PROGRESS=0|1: the progress line of long applies (on by default when
             stderr is a terminal)

exit codes: 0 ok, 1 failure (server unreachable, call failed, file unreadable), 2 usage,
            3 version conflict (the committed version moved), 4 invalid configuration or
            request (every error is listed on stderr, one per line)

examples:
  dpuctl status
  dpuctl --server 127.0.0.1:50051 --tls-ca ca.pem --tls-cert me.pem --tls-key me.key status
  dpuctl config set dataplane.non_ip=DROP
  dpuctl fw add "deny tcp any any -> 192.0.2.0/24 22 prio 10 id ssh-block"
)";

constexpr const char* kStatusHelp = R"(usage: dpuctl status

Instance id, uptime, committed config version, snapshot generation published last and the
one each worker runs, ports, build (version, commit, compiler, DPDK), state directory.

examples:
  dpuctl status
  dpuctl --json status
)";

constexpr const char* kConfigHelp = R"(usage:
  dpuctl config get
      Prints the committed configuration as JSON (proto field names, with its version).
      The output can be edited and applied again.
  dpuctl config apply FILE [--expected-version N | --force]
      Replaces the whole configuration with FILE (protobuf JSON, or text format for
      *.txtpb/*.textproto/*.pbtxt). Without options the change is based on the version
      read just before: if someone commits in between, nothing changes and dpuctl exits 3.
      --expected-version N  fail (exit 3) unless N is the committed version
      --force               apply whatever the committed version is
  dpuctl config diff FILE
      Shows which fields FILE changes relative to the committed configuration
      (~ changed, + set in FILE only, - set in the committed config only; absent = default).
  dpuctl config validate FILE
      Validates and compiles FILE on the server without committing it; exit 4 and every
      error when it is invalid.
  dpuctl config reseed FILE [--yes]
      Makes FILE the running configuration again (e.g. the file the appliance was first
      started with), discarding every change made since through dpuctl or the API: prints
      the difference (committed values are the ones discarded), asks for confirmation
      (--yes: do not ask; required when stdin is not a terminal), then applies it based on
      the version shown (exit 3 if someone commits in between). SIGHUP / systemctl reload
      never does this: it only re-reads the files the committed configuration names.
  dpuctl config set PATH=VALUE... [--expected-version N | --force]
      Changes only the named fields (UpdateConfig with an update mask). PATH uses proto
      field names; VALUE is JSON (numbers, true/false, "strings", {...}) or a bare word
      (enum names such as DROP); an empty VALUE clears the field back to its default.

examples:
  dpuctl config get > current.json
  dpuctl config diff new.json && dpuctl config apply new.json
  dpuctl config reseed /etc/dpu-appliance/config.json
  dpuctl config apply new.json --expected-version 7
  dpuctl config validate new.json
  dpuctl config set dataplane.non_ip=DROP dataplane.timeouts.udp_s=30
  dpuctl config set dataplane.tcp.midstream=       # back to the default
)";

constexpr const char* kStatsHelp = R"(usage: dpuctl stats [--watch [--interval MS] [--count N] [--full]]

Counters: ports (packets, bytes, missed, no-mbuf, tx errors), verdicts, drops by reason,
flows, fragments, stages, per worker. --watch streams a sample every --interval ms (default
1000, minimum 100) until Ctrl-C or --count samples: the first in full, then per sample the
rates (packets and bits per second per port, forwarded / dropped / rejected / new flows per
second) and only the counters that changed, with their delta and rate. --full prints every
sample in full (with port rates) instead.

examples:
  dpuctl stats
  dpuctl stats --watch --interval 500
  dpuctl stats --watch --full
  dpuctl --json stats --watch --count 3
)";

constexpr const char* kEventsHelp = R"(usage: dpuctl events [--types drop,flow,config] [--count N] [--buffer N]

Streams dataplane events (drop, flow end, dns: a blocked DNS query or cloaked answer with the
client, name, list and reason; alert: a YARA rule matched), config commits and refusals
(config: the phase that refused, the errors) and load balancer changes (lb) as they
happen, until Ctrl-C or N events. --types: any of drop, flow, config, dns, alert, lb.
The server buffers --buffer events for this client (default 4096); when the client
falls behind, events are dropped for it and the next one says how many were lost.

examples:
  dpuctl events
  dpuctl events --types drop --count 10
  dpuctl events --types dns
  dpuctl --json events --types config
  dpuctl events --types config,lb
)";

constexpr const char* kExplainHelp = R"(usage:
  dpuctl explain --frame-hex HEX [--side A|B]
  dpuctl explain --src IP --dst IP --proto tcp|udp|icmp|icmpv6|N [--sport N] [--dport N]
                 [--flags F] [--vlan N] [--payload TEXT] [--side A|B]
  dpuctl explain --dns-query NAME [--qtype T] [--proto udp|tcp] [--src IP] [--dst IP]
                 [--sport N] [--dport N] [--vlan N] [--side A|B]

Runs one packet through the running configuration without side effects (no flow is
created, no counter moves) and shows each stage's decision. With a tuple the server builds
an Ethernet frame (TCP flags letters F S R P A U E C, default S). With --dns-query the server
builds a UDP DNS query for NAME (type --qtype: A by default, AAAA, MX, TXT, HTTPS ... or a
number) from --src (default 192.0.2.1, or 2001:db8::1 with an IPv6 --dst) port --sport
(53000) to --dst (192.0.2.53 / 2001:db8::53) port --dport (53), over UDP (default) or, with
--proto tcp, as the first message of a DNS-over-TCP stream. --side is the ingress side
(default A).

examples:
  dpuctl explain --dns-query ads.example
  dpuctl explain --dns-query ads.example --qtype AAAA --src 10.0.0.5 --dst 10.0.0.53
  dpuctl explain --dns-query ads.example --proto tcp
  dpuctl explain --src 10.0.0.1 --dst 10.0.0.2 --proto tcp --sport 40000 --dport 443 --flags S
  dpuctl explain --src 2001:db8::1 --dst 2001:db8::2 --proto udp --sport 5353 --dport 53
  dpuctl explain --frame-hex ffffffffffff020000000001080600010800060400010200000000010a0000010000000000000a000002
)";

constexpr const char* kFwHelp = R"(usage:
  dpuctl fw list
      Every firewall rule of the running configuration in evaluation order (priority, then
      order: inline rules, then rule files): id, action, priority, packets, bytes, flows,
      last hit, ACL entries, where it comes from, and the match. --json prints the API
      message.
  dpuctl fw add "RULE" [--index N | --before ID | --after ID] [--expected-version N | --force]
      Adds one rule to firewall.rules, in the syntax of text rule files:
        ACTION PROTO SRC SPORT -> DST DPORT [prio N] [id ID] [dir a->b|b->a|both]
               [vlan N] [src-country CC,..] [dst-country CC,..] [desc "text"]
      ACTION allow|deny|reject; PROTO tcp,udp,icmp,icmpv6,sctp,gre,0..255 or any; SRC/DST
      prefixes, addresses, @set or any; ports "80", "1024-65535" or any (lists are
      comma-separated). The id is required. Quote the rule: '->' means a redirection to
      the shell. The rule goes last unless --index (0 = first), --before or --after (an
      inline rule's id) says otherwise; order only matters between equal priorities.
      An id that is already taken is an invalid request (exit 4, ALREADY_EXISTS).
  dpuctl fw remove ID [--expected-version N | --force]
      Removes the inline rule ID. Rules of rule files are edited in their file.
  dpuctl fw load FILE [--expected-version N | --force]
      Replaces the rule set with FILE's rules (a text rule file, or JSON for *.json): they
      become firewall.rules, and firewall.rule_files is cleared. IP sets, defaults and the
      GeoIP database are kept. The file is read here, on the client.

Without --expected-version or --force, changes are based on the version read just before
(exit 3 if someone commits in between).

examples:
  dpuctl fw list
  dpuctl fw add "deny tcp any any -> 192.0.2.0/24 22 prio 10 id ssh-block"
  dpuctl fw add "allow udp 10.0.0.0/8 any -> any 53 id dns" --before ssh-block
  dpuctl fw add "reject tcp any any -> any any src-country RU,KP id geo-block prio 5"
  dpuctl fw remove ssh-block
  dpuctl fw load /etc/dpu/rules.txt
)";

constexpr const char* kGeoHelp = R"(usage:
  dpuctl geo set FILE.mmdb [--expected-version N | --force]
      Uses FILE.mmdb (a MaxMind DB with country data, e.g. GeoLite2-Country) for country
      rules: the appliance opens and checks it before anything changes. A relative path is
      made absolute here (the file must be on the appliance's host).
  dpuctl geo clear [--expected-version N | --force]
      Removes the database (rules with countries then make the configuration invalid).
  dpuctl geo lookup IP [--database FILE.mmdb]
      The country of IP in the configured database (or FILE.mmdb), the database network
      that holds it, and its index in the running firewall.

examples:
  dpuctl geo set /var/lib/GeoIP/GeoLite2-Country.mmdb
  dpuctl geo lookup 81.2.69.142
  dpuctl geo clear --expected-version 12
  dpuctl --json geo lookup 2001:db8::1
)";

struct Global {
  std::string server;
  std::string tls_ca, tls_cert, tls_key, tls_server_name;
  double timeout_s = 30;
  bool json = false;
};

std::atomic<bool> g_interrupted{false};
void onInterrupt(int) { g_interrupted.store(true); }

// Cancels a streaming call when Ctrl-C arrives (TryCancel is not async-signal-safe).
class CancelOnInterrupt {
 public:
  explicit CancelOnInterrupt(grpc::ClientContext* ctx) {
    std::signal(SIGINT, onInterrupt);
    std::signal(SIGTERM, onInterrupt);
    thread_ = std::thread([this, ctx] {
      while (!done_.load()) {
        if (g_interrupted.load()) {
          ctx->TryCancel();
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
  }
  ~CancelOnInterrupt() {
    done_.store(true);
    thread_.join();
  }

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

int usage(const std::string& msg, const char* help = nullptr) {
  std::fprintf(stderr, "dpuctl: %s\n", msg.c_str());
  if (help) std::fprintf(stderr, "\n%s", help);
  else std::fprintf(stderr, "see 'dpuctl --help'\n");
  return kUsage;
}

const char* codeName(grpc::StatusCode c) {
  switch (c) {
    case grpc::OK: return "OK";
    case grpc::CANCELLED: return "CANCELLED";
    case grpc::UNKNOWN: return "UNKNOWN";
    case grpc::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::NOT_FOUND: return "NOT_FOUND";
    case grpc::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::ABORTED: return "ABORTED";
    case grpc::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::INTERNAL: return "INTERNAL";
    case grpc::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::DATA_LOSS: return "DATA_LOSS";
    case grpc::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "ERROR";
  }
}

int rpcFail(const Global& g, const std::string& what, const grpc::Status& st) {
  std::fprintf(stderr, "dpuctl: %s failed: %s: %s\n", what.c_str(), codeName(st.error_code()),
               st.error_message().c_str());
  for (const auto& e : dpu::cli::configErrorsFromStatus(st)) {
    std::fprintf(stderr, "  error: %s\n", dpu::cli::formatConfigError(e).c_str());
  }
  switch (st.error_code()) {
    case grpc::UNAVAILABLE:
      std::fprintf(stderr,
                   "dpuctl: is dpu-appliance running and serving at %s? (--server or "
                   "DPUCTL_SERVER; TLS servers need --tls-ca)\n",
                   g.server.c_str());
      return kFailed;
    case grpc::ABORTED: return kConflict;
    case grpc::INVALID_ARGUMENT: return kInvalid;
    case grpc::DEADLINE_EXCEEDED:
      // The server finishes a change it accepted even when the client stopped waiting.
      std::fprintf(stderr,
                   "dpuctl: no answer within --timeout %g s; a change may still be committed "
                   "(see 'dpuctl config get'); --timeout 0 waits as long as it takes\n",
                   g.timeout_s);
      return kFailed;
    default: return kFailed;
  }
}

class Client {
 public:
  explicit Client(const Global& g) : g_(g) {}

  // Builds the channel; false (with a message) when TLS files cannot be read.
  bool connect(std::string* err) {
    std::shared_ptr<grpc::ChannelCredentials> creds;
    bool tls = !g_.tls_ca.empty() || !g_.tls_cert.empty() || !g_.tls_key.empty();
    if (g_.tls_cert.empty() != g_.tls_key.empty()) {
      *err = "--tls-cert and --tls-key go together";
      return false;
    }
    if (tls) {
      grpc::SslCredentialsOptions o;
      if (!g_.tls_ca.empty() && !dpu::cli::readFile(g_.tls_ca, &o.pem_root_certs, err)) return false;
      if (!g_.tls_cert.empty() && !dpu::cli::readFile(g_.tls_cert, &o.pem_cert_chain, err)) return false;
      if (!g_.tls_key.empty() && !dpu::cli::readFile(g_.tls_key, &o.pem_private_key, err)) return false;
      creds = grpc::SslCredentials(o);
    } else {
      creds = grpc::InsecureChannelCredentials();
    }
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    if (!g_.tls_server_name.empty()) args.SetSslTargetNameOverride(g_.tls_server_name);
    std::string target = g_.server;
    if (!target.empty() && target[0] == '/') target = "unix:" + target;
    stub_ = Appliance::NewStub(grpc::CreateCustomChannel(target, creds, args));
    return true;
  }

  void unary(grpc::ClientContext* ctx) const {
    if (g_.timeout_s <= 0) return;  // --timeout 0: no deadline
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(static_cast<int64_t>(g_.timeout_s * 1000)));
  }

  Appliance::Stub& stub() { return *stub_; }
  const Global& global() const { return g_; }

  // The committed version (for the default --expected-version).
  bool committedVersion(uint64_t* v, int* rc) {
    grpc::ClientContext ctx;
    unary(&ctx);
    dpu::v1::GetConfigRequest req;
    dpu::v1::GetConfigResponse resp;
    grpc::Status st = stub_->GetConfig(&ctx, req, &resp);
    if (!st.ok()) {
      *rc = rpcFail(g_, "reading the committed version (GetConfig)", st);
      return false;
    }
    *v = resp.config().version();
    return true;
  }

 private:
  const Global& g_;
  std::unique_ptr<Appliance::Stub> stub_;
};

// While a change is being applied: the server's long work in progress (GetStatus `tasks`,
// e.g. "config apply: compiling YARA rules 1200/5000 rules (24%), 3.1 s") on stderr, polled
// every 500 ms once the call has taken DPUCTL_PROGRESS_AFTER_MS (default 1000). On a
// terminal one line is updated in place and cleared at the end. When stderr is not a
// terminal only with DPUCTL_PROGRESS=1: then a line per new step. DPUCTL_PROGRESS=0: never.
class ProgressWatcher {
 public:
  explicit ProgressWatcher(Client& c) : c_(c) {
    const char* mode = std::getenv("DPUCTL_PROGRESS");
    tty_ = isatty(fileno(stderr)) != 0;
    if (mode ? std::string(mode) == "0" : !tty_) return;
    int after_ms = 1000;
    if (const char* a = std::getenv("DPUCTL_PROGRESS_AFTER_MS")) absl::SimpleAtoi(a, &after_ms);
    thread_ = std::thread([this, after_ms] { run(after_ms); });
  }
  ~ProgressWatcher() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    if (tty_ && shown_) std::fputs("\r\033[K", stderr);
  }

 private:
  bool waitMs(int ms) {  // false when the call has ended
    std::unique_lock<std::mutex> lock(mu_);
    return !cv_.wait_for(lock, std::chrono::milliseconds(ms), [&] { return done_; });
  }
  void run(int after_ms) {
    if (!waitMs(after_ms)) return;
    std::string last_step;
    do {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
      dpu::v1::StatusResponse st;
      if (!c_.stub().GetStatus(&ctx, dpu::v1::GetStatusRequest(), &st).ok()) continue;
      for (const auto& t : st.tasks()) {
        std::string line = dpu::cli::formatTask(t);
        if (tty_) {
          std::fprintf(stderr, "\r\033[K%s", line.c_str());
          std::fflush(stderr);
          shown_ = true;
        } else if (t.task() + t.step() != last_step) {
          std::fprintf(stderr, "dpuctl: %s\n", line.c_str());
          last_step = t.task() + t.step();
        }
        break;  // the first task: the one this call started, normally
      }
    } while (waitMs(500));
  }

  Client& c_;
  bool tty_ = false;
  bool shown_ = false;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

bool wantsHelp(const std::vector<std::string>& a) {
  for (const auto& s : a) {
    if (s == "--help" || s == "-h") return true;
  }
  return false;
}

// Loads a config file; prints the error and sets rc when it cannot. A file with parse
// errors (types, enums, unknown fields) is refused with every one of them, together with the
// server's validation of what parsed when `c` is given (ValidateConfig, nothing committed):
// the whole list in one answer, rc 4.
bool loadFile(const std::string& path, dpu::v1::ApplianceConfig* out, int* rc,
              Client* c = nullptr) {
  auto p = dpu::ctl::loadConfigFileAll(path);
  if (!p.ok()) {
    std::fprintf(stderr, "dpuctl: %s\n", std::string(p.status().message()).c_str());
    *rc = p.status().code() == absl::StatusCode::kNotFound ? kFailed : kInvalid;
    return false;
  }
  if (p->errors.empty()) {
    *out = std::move(p->config);
    return true;
  }
  std::vector<std::string> lines;
  for (const auto& e : p->errors) lines.push_back(dpu::rules::formatError(e));
  if (c != nullptr && p->usable) {
    dpu::v1::ValidateConfigRequest req;
    *req.mutable_config() = p->config;
    dpu::v1::ValidateConfigResponse resp;
    grpc::ClientContext ctx;
    c->unary(&ctx);
    grpc::Status st = c->stub().ValidateConfig(&ctx, req, &resp);
    if (st.ok()) {
      for (const auto& e : resp.errors()) {
        if (!dpu::ctl::shadowedByParseError(p->errors, e.field())) {
          lines.push_back(dpu::cli::formatConfigError(e));
        }
      }
    } else {
      lines.push_back("(the rest of the file was not validated: ValidateConfig failed: " +
                      st.error_message() + ")");
    }
  }
  std::fprintf(stderr, "dpuctl: %s: invalid, %zu error(s); nothing changed\n", path.c_str(),
               lines.size());
  for (const auto& l : lines) std::fprintf(stderr, "  error: %s\n", l.c_str());
  *rc = kInvalid;
  return false;
}

struct VersionOpts {
  bool have_expected = false;
  uint64_t expected = 0;
  bool force = false;
};

// Consumes --expected-version N / --force at args[i]; true when it did.
bool versionOpt(const std::vector<std::string>& a, size_t& i, VersionOpts& v, std::string* err) {
  if (a[i] == "--force") {
    v.force = true;
    return true;
  }
  if (a[i] == "--expected-version") {
    if (i + 1 >= a.size() || !absl::SimpleAtoi(a[i + 1], &v.expected)) {
      *err = "--expected-version needs a number";
      return true;
    }
    v.have_expected = true;
    ++i;
    return true;
  }
  return false;
}

int resolveExpected(Client& c, VersionOpts& v) {
  if (v.force && v.have_expected) {
    return usage("--expected-version and --force exclude each other", kConfigHelp);
  }
  if (v.force || v.have_expected) return kOk;
  int rc = kOk;
  if (!c.committedVersion(&v.expected, &rc)) return rc;
  return kOk;
}

int cmdStatus(Client& c, const std::vector<std::string>& a) {
  if (wantsHelp(a)) return std::fputs(kStatusHelp, stdout), kOk;
  if (!a.empty()) return usage("status: unexpected argument '" + a[0] + "'", kStatusHelp);
  grpc::ClientContext ctx;
  c.unary(&ctx);
  dpu::v1::StatusResponse resp;
  grpc::Status st = c.stub().GetStatus(&ctx, dpu::v1::GetStatusRequest(), &resp);
  if (!st.ok()) return rpcFail(c.global(), "status", st);
  std::fputs(c.global().json ? dpu::cli::toJson(resp, true).c_str()
                             : dpu::cli::formatStatus(resp).c_str(),
             stdout);
  return kOk;
}

// `config reseed FILE [--yes]`: the running configuration becomes FILE again (typically the
// file the appliance was first started with), discarding what was changed since (dpuctl and
// API edits): shows the difference first and asks, or needs --yes when stdin is no terminal.
int cmdConfigReseed(Client& c, const std::vector<std::string>& a) {
  bool yes = false;
  std::vector<std::string> pos;
  for (size_t i = 1; i < a.size(); ++i) {
    if (a[i] == "--yes" || a[i] == "-y") {
      yes = true;
    } else if (a[i].rfind("--", 0) == 0) {
      return usage("config reseed: unknown option '" + a[i] + "'", kConfigHelp);
    } else {
      pos.push_back(a[i]);
    }
  }
  if (pos.size() != 1) return usage("config reseed: give exactly one FILE", kConfigHelp);
  int rc = kOk;
  dpu::v1::ApplianceConfig cfg;
  if (!loadFile(pos[0], &cfg, &rc)) return rc;
  dpu::v1::GetConfigResponse cur;
  {
    grpc::ClientContext ctx;
    c.unary(&ctx);
    grpc::Status st = c.stub().GetConfig(&ctx, dpu::v1::GetConfigRequest(), &cur);
    if (!st.ok()) return rpcFail(c.global(), "config reseed (GetConfig)", st);
  }
  auto diff = dpu::cli::diffConfigs(cur.config(), cfg);
  if (!diff.ok()) {
    std::fprintf(stderr, "dpuctl: config reseed: %s\n", std::string(diff.status().message()).c_str());
    return kFailed;
  }
  const unsigned long version = static_cast<unsigned long>(cur.config().version());
  if (diff->empty()) {
    std::printf("committed version %lu already equals %s: nothing to do\n", version,
                pos[0].c_str());
    return kOk;
  }
  std::printf("committed version %lu -> %s: %zu difference(s); the committed values (left) "
              "are discarded:\n%s",
              version, pos[0].c_str(), diff->size(), dpu::cli::formatDiff(*diff).c_str());
  if (!yes) {
    if (!isatty(STDIN_FILENO)) {
      std::fprintf(stderr, "dpuctl: config reseed: stdin is not a terminal: give --yes to "
                           "replace the running configuration\n");
      return kUsage;
    }
    std::printf("Replace the running configuration (version %lu) with %s? [y/N] ", version,
                pos[0].c_str());
    std::fflush(stdout);
    char answer[16] = {0};
    if (std::fgets(answer, sizeof answer, stdin) == nullptr ||
        (answer[0] != 'y' && answer[0] != 'Y')) {
      std::printf("not changed\n");
      return kFailed;
    }
  }
  // Based on the version shown: a commit in between fails (exit 3) instead of being lost.
  dpu::v1::ApplyConfigRequest req;
  *req.mutable_config() = cfg;
  req.set_expected_version(cur.config().version());
  dpu::v1::ApplyConfigResponse resp;
  grpc::ClientContext ctx;
  c.unary(&ctx);
  grpc::Status st;
  {
    ProgressWatcher progress(c);
    st = c.stub().ApplyConfig(&ctx, req, &resp);
  }
  if (!st.ok()) return rpcFail(c.global(), "config reseed", st);
  std::fputs(c.global().json ? dpu::cli::toJson(resp, true).c_str()
                             : dpu::cli::formatApply(resp).c_str(),
             stdout);
  return kOk;
}

int cmdConfig(Client& c, const std::vector<std::string>& a) {
  if (a.empty()) {
    return usage("config: which one? get, apply, diff, validate, set or reseed", kConfigHelp);
  }
  if (wantsHelp(a)) return std::fputs(kConfigHelp, stdout), kOk;
  const std::string sub = a[0];
  const bool json = c.global().json;
  if (sub == "get") {
    if (a.size() != 1) return usage("config get: unexpected argument '" + a[1] + "'", kConfigHelp);
    grpc::ClientContext ctx;
    c.unary(&ctx);
    dpu::v1::GetConfigResponse resp;
    grpc::Status st = c.stub().GetConfig(&ctx, dpu::v1::GetConfigRequest(), &resp);
    if (!st.ok()) return rpcFail(c.global(), "config get", st);
    std::fputs(json ? dpu::cli::toJson(resp, true).c_str()
                    : dpu::cli::toJson(resp.config(), true).c_str(),
               stdout);
    return kOk;
  }
  if (sub == "apply" || sub == "set") {
    VersionOpts v;
    std::vector<std::string> pos;
    for (size_t i = 1; i < a.size(); ++i) {
      std::string err;
      if (versionOpt(a, i, v, &err)) {
        if (!err.empty()) return usage("config " + sub + ": " + err, kConfigHelp);
        continue;
      }
      if (a[i].size() > 1 && a[i][0] == '-' && a[i][1] == '-') {
        return usage("config " + sub + ": unknown option '" + a[i] + "'", kConfigHelp);
      }
      pos.push_back(a[i]);
    }
    dpu::v1::ApplyConfigResponse resp;
    grpc::Status st;
    int rc = kOk;
    if (sub == "apply") {
      if (pos.size() != 1) return usage("config apply: give exactly one FILE", kConfigHelp);
      dpu::v1::ApplianceConfig cfg;
      if (!loadFile(pos[0], &cfg, &rc, &c)) return rc;
      if ((rc = resolveExpected(c, v)) != kOk) return rc;
      dpu::v1::ApplyConfigRequest req;
      *req.mutable_config() = cfg;
      req.set_expected_version(v.expected);
      req.set_force(v.force);
      grpc::ClientContext ctx;
      c.unary(&ctx);
      {
        ProgressWatcher progress(c);
        st = c.stub().ApplyConfig(&ctx, req, &resp);
      }
    } else {
      dpu::v1::UpdateConfigRequest req;
      auto cfg = dpu::cli::configFromAssignments(pos, req.mutable_update_mask());
      if (!cfg.ok()) {
        return usage("config set: " + std::string(cfg.status().message()), kConfigHelp);
      }
      if ((rc = resolveExpected(c, v)) != kOk) return rc;
      *req.mutable_config() = *cfg;
      req.set_expected_version(v.expected);
      req.set_force(v.force);
      grpc::ClientContext ctx;
      c.unary(&ctx);
      {
        ProgressWatcher progress(c);
        st = c.stub().UpdateConfig(&ctx, req, &resp);
      }
    }
    if (!st.ok()) return rpcFail(c.global(), "config " + sub, st);
    std::fputs(json ? dpu::cli::toJson(resp, true).c_str() : dpu::cli::formatApply(resp).c_str(),
               stdout);
    return kOk;
  }
  if (sub == "reseed") return cmdConfigReseed(c, a);
  if (sub == "diff" || sub == "validate") {
    if (a.size() != 2 || a[1].rfind("--", 0) == 0) {
      return usage("config " + sub + ": give exactly one FILE", kConfigHelp);
    }
    int rc = kOk;
    dpu::v1::ApplianceConfig cfg;
    if (!loadFile(a[1], &cfg, &rc, sub == "validate" ? &c : nullptr)) return rc;
    if (sub == "validate") {
      dpu::v1::ValidateConfigRequest req;
      *req.mutable_config() = cfg;
      dpu::v1::ValidateConfigResponse resp;
      grpc::ClientContext ctx;
      c.unary(&ctx);
      grpc::Status st = c.stub().ValidateConfig(&ctx, req, &resp);
      if (!st.ok()) return rpcFail(c.global(), "config validate", st);
      if (json) {
        std::fputs(dpu::cli::toJson(resp, true).c_str(), stdout);
      } else if (resp.valid()) {
        std::printf("%s: valid\n", a[1].c_str());
      } else {
        std::fprintf(stderr, "%s: invalid, %d error(s)\n", a[1].c_str(), resp.errors_size());
        for (const auto& e : resp.errors()) {
          std::fprintf(stderr, "  error: %s\n", dpu::cli::formatConfigError(e).c_str());
        }
      }
      for (const auto& w : resp.warnings()) std::fprintf(stderr, "warning: %s\n", w.c_str());
      return resp.valid() ? kOk : kInvalid;
    }
    grpc::ClientContext ctx;
    c.unary(&ctx);
    dpu::v1::GetConfigResponse cur;
    grpc::Status st = c.stub().GetConfig(&ctx, dpu::v1::GetConfigRequest(), &cur);
    if (!st.ok()) return rpcFail(c.global(), "config diff (GetConfig)", st);
    auto diff = dpu::cli::diffConfigs(cur.config(), cfg);
    if (!diff.ok()) {
      std::fprintf(stderr, "dpuctl: config diff: %s\n",
                   std::string(diff.status().message()).c_str());
      return kFailed;
    }
    if (json) {
      std::string out = "[";
      for (size_t i = 0; i < diff->size(); ++i) {
        const auto& l = (*diff)[i];
        absl::StrAppend(&out, i ? "," : "", "\n  {\"path\":\"", l.path, "\",\"committed\":",
                        l.committed.empty() ? "null" : l.committed, ",\"file\":",
                        l.proposed.empty() ? "null" : l.proposed, "}");
      }
      absl::StrAppend(&out, diff->empty() ? "]\n" : "\n]\n");
      std::fputs(out.c_str(), stdout);
      return kOk;
    }
    std::printf("committed version %lu vs %s: ",
                static_cast<unsigned long>(cur.config().version()), a[1].c_str());
    if (diff->empty()) {
      std::printf("no differences\n");
    } else {
      std::printf("%zu difference(s)\n%s", diff->size(), dpu::cli::formatDiff(*diff).c_str());
    }
    return kOk;
  }
  return usage("config: unknown subcommand '" + sub + "'", kConfigHelp);
}

int cmdStats(Client& c, const std::vector<std::string>& a) {
  if (wantsHelp(a)) return std::fputs(kStatsHelp, stdout), kOk;
  bool watch = false, full = false;
  uint32_t interval = 0;
  uint64_t count = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == "--watch") {
      watch = true;
    } else if (a[i] == "--full") {
      full = true;
    } else if (a[i] == "--interval" && i + 1 < a.size() && absl::SimpleAtoi(a[i + 1], &interval)) {
      ++i;
    } else if (a[i] == "--count" && i + 1 < a.size() && absl::SimpleAtoi(a[i + 1], &count)) {
      ++i;
    } else {
      return usage("stats: bad argument '" + a[i] + "'", kStatsHelp);
    }
  }
  if (!watch && (interval || count || full)) {
    return usage("stats: --interval, --count and --full need --watch", kStatsHelp);
  }
  const bool json = c.global().json;
  if (!watch) {
    grpc::ClientContext ctx;
    c.unary(&ctx);
    dpu::v1::Stats s;
    grpc::Status st = c.stub().GetStats(&ctx, dpu::v1::GetStatsRequest(), &s);
    if (!st.ok()) return rpcFail(c.global(), "stats", st);
    std::fputs(json ? dpu::cli::toJson(s, true).c_str() : dpu::cli::formatStats(s, nullptr).c_str(),
               stdout);
    return kOk;
  }
  grpc::ClientContext ctx;
  CancelOnInterrupt cancel(&ctx);
  dpu::v1::WatchStatsRequest req;
  req.set_interval_ms(interval);
  auto reader = c.stub().WatchStats(&ctx, req);
  dpu::v1::Stats s, prev;
  uint64_t n = 0;
  while (reader->Read(&s)) {
    if (json) {
      std::fputs(dpu::cli::toJson(s, false).c_str(), stdout);
    } else if (n == 0 || full) {
      std::fputs(dpu::cli::formatStats(s, n ? &prev : nullptr).c_str(), stdout);
      std::fputs("\n", stdout);
    } else {
      // After the first sample: rates and only what changed.
      std::fputs(dpu::cli::formatStatsChanges(s, prev).c_str(), stdout);
      std::fputs("\n", stdout);
    }
    std::fflush(stdout);
    prev = s;
    if (count && ++n >= count) {
      ctx.TryCancel();
      break;
    }
    if (!count) ++n;
  }
  grpc::Status st = reader->Finish();
  if (!st.ok() && !(st.error_code() == grpc::CANCELLED && (g_interrupted || count))) {
    return rpcFail(c.global(), "stats --watch", st);
  }
  return kOk;
}

int cmdEvents(Client& c, const std::vector<std::string>& a) {
  if (wantsHelp(a)) return std::fputs(kEventsHelp, stdout), kOk;
  dpu::v1::WatchEventsRequest req;
  uint64_t count = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    uint32_t n = 0;
    if (a[i] == "--types" && i + 1 < a.size()) {
      for (auto t : absl::StrSplit(a[++i], ',', absl::SkipEmpty())) req.add_types(std::string(t));
    } else if (a[i] == "--count" && i + 1 < a.size() && absl::SimpleAtoi(a[i + 1], &count)) {
      ++i;
    } else if (a[i] == "--buffer" && i + 1 < a.size() && absl::SimpleAtoi(a[i + 1], &n) && n > 0) {
      req.set_buffer_size(n);
      ++i;
    } else {
      return usage("events: bad argument '" + a[i] + "'", kEventsHelp);
    }
  }
  grpc::ClientContext ctx;
  CancelOnInterrupt cancel(&ctx);
  auto reader = c.stub().WatchEvents(&ctx, req);
  dpu::v1::Event e;
  uint64_t n = 0;
  bool done = false;
  while (!done && reader->Read(&e)) {
    if (c.global().json) {
      std::fputs(dpu::cli::toJson(e, false).c_str(), stdout);
    } else {
      std::printf("%s\n", dpu::cli::formatEvent(e).c_str());
    }
    std::fflush(stdout);
    if (count && ++n >= count) {
      ctx.TryCancel();
      done = true;
    }
  }
  grpc::Status st = reader->Finish();
  if (!st.ok() && !(st.error_code() == grpc::CANCELLED && (g_interrupted || done))) {
    return rpcFail(c.global(), "events", st);
  }
  return kOk;
}

int cmdExplain(Client& c, const std::vector<std::string>& a) {
  if (wantsHelp(a)) return std::fputs(kExplainHelp, stdout), kOk;
  dpu::v1::ExplainRequest req;
  dpu::v1::PacketTuple* t = nullptr;
  auto tuple = [&]() {
    if (!t) t = req.mutable_tuple();
    return t;
  };
  std::string frame_hex;
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string& o = a[i];
    if (i + 1 >= a.size()) return usage("explain: " + o + " needs a value", kExplainHelp);
    const std::string& v = a[++i];
    uint32_t n = 0;
    if (o == "--frame-hex") frame_hex = v;
    else if (o == "--side") req.set_side(v);
    else if (o == "--src") tuple()->set_src_ip(v);
    else if (o == "--dst") tuple()->set_dest_ip(v);
    else if (o == "--proto") tuple()->set_proto(v);
    else if (o == "--flags") tuple()->set_tcp_flags(v);
    else if (o == "--payload") req.set_payload(v);
    else if (o == "--dns-query") req.mutable_dns_query()->set_name(v);
    else if (o == "--qtype") req.mutable_dns_query()->set_qtype(v);
    else if ((o == "--sport" || o == "--dport" || o == "--vlan") && absl::SimpleAtoi(v, &n)) {
      if (o == "--sport") tuple()->set_src_port(n);
      else if (o == "--dport") tuple()->set_dest_port(n);
      else tuple()->set_vlan(n);
    } else {
      return usage("explain: bad argument '" + o + " " + v + "'", kExplainHelp);
    }
  }
  if (!frame_hex.empty()) {
    if (t || req.has_dns_query()) {
      return usage("explain: --frame-hex excludes the tuple and --dns-query options", kExplainHelp);
    }
    auto bytes = dpu::cli::parseHex(frame_hex);
    if (!bytes.ok()) {
      return usage("explain: --frame-hex: " + std::string(bytes.status().message()), kExplainHelp);
    }
    req.set_frame(*bytes);
  } else if (req.has_dns_query()) {
    if (req.dns_query().name().empty()) {
      return usage("explain: --qtype goes with --dns-query NAME", kExplainHelp);
    }
    if (!req.payload().empty()) {
      return usage("explain: --dns-query excludes --payload", kExplainHelp);
    }
  } else if (!t || t->src_ip().empty() || t->dest_ip().empty() || t->proto().empty()) {
    return usage("explain: give --frame-hex, --dns-query NAME, or --src, --dst and --proto",
                 kExplainHelp);
  }
  grpc::ClientContext ctx;
  c.unary(&ctx);
  dpu::v1::ExplainResponse resp;
  grpc::Status st = c.stub().Explain(&ctx, req, &resp);
  if (!st.ok()) return rpcFail(c.global(), "explain", st);
  std::fputs(c.global().json ? dpu::cli::toJson(resp, true).c_str()
                             : dpu::cli::formatExplain(resp).c_str(),
             stdout);
  return kOk;
}

// Consumes the version options of fw / geo commands; the rest are positional or other
// options (returned in `rest`). Prints usage (rc 2) on a bad option.
bool fwOptions(const std::vector<std::string>& a, size_t from, const char* help, VersionOpts& v,
               std::vector<std::string>* rest, int* rc) {
  for (size_t i = from; i < a.size(); ++i) {
    std::string err;
    if (versionOpt(a, i, v, &err)) {
      if (!err.empty()) {
        *rc = usage(err, help);
        return false;
      }
      continue;
    }
    rest->push_back(a[i]);
  }
  if (v.force && v.have_expected) {
    *rc = usage("--expected-version and --force exclude each other", help);
    return false;
  }
  return true;
}

// Failure of a firewall change; errors about firewall.rules[i] also name the rule file
// line the rule came from (fw load).
int fwFail(const Global& g, const std::string& what, const grpc::Status& st,
           const std::string& file = "", const std::vector<int>& lines = {}) {
  if (file.empty() || st.error_code() != grpc::INVALID_ARGUMENT) return rpcFail(g, what, st);
  std::fprintf(stderr, "dpuctl: %s failed: %s: %s\n", what.c_str(), codeName(st.error_code()),
               st.error_message().c_str());
  for (const auto& e : dpu::cli::configErrorsFromStatus(st)) {
    std::string where;
    const std::string prefix = "firewall.rules[";
    if (e.field().rfind(prefix, 0) == 0) {
      size_t idx = 0;
      if (absl::SimpleAtoi(e.field().substr(prefix.size(),
                                            e.field().find(']') - prefix.size()),
                           &idx) &&
          idx < lines.size()) {
        where = absl::StrCat(" (", file, ":", lines[idx], ")");
      }
    }
    std::fprintf(stderr, "  error: %s%s\n", dpu::cli::formatConfigError(e).c_str(),
                 where.c_str());
  }
  return kInvalid;
}

int printApply(const Client& c, const dpu::v1::ApplyConfigResponse& resp) {
  std::fputs(c.global().json ? dpu::cli::toJson(resp, true).c_str()
                             : dpu::cli::formatApply(resp).c_str(),
             stdout);
  return kOk;
}

int cmdFw(Client& c, const std::vector<std::string>& a) {
  if (a.empty()) return usage("fw: which one? list, add, remove or load", kFwHelp);
  if (wantsHelp(a)) return std::fputs(kFwHelp, stdout), kOk;
  const std::string sub = a[0];
  if (sub == "list") {
    if (a.size() != 1) return usage("fw list: unexpected argument '" + a[1] + "'", kFwHelp);
    grpc::ClientContext ctx;
    c.unary(&ctx);
    dpu::v1::ListFirewallRulesResponse resp;
    grpc::Status st =
        c.stub().ListFirewallRules(&ctx, dpu::v1::ListFirewallRulesRequest(), &resp);
    if (!st.ok()) return rpcFail(c.global(), "fw list", st);
    std::fputs(c.global().json ? dpu::cli::toJson(resp, true).c_str()
                               : dpu::cli::formatFirewallRules(resp).c_str(),
               stdout);
    return kOk;
  }
  if (sub != "add" && sub != "remove" && sub != "load") {
    return usage("fw: unknown subcommand '" + sub + "'", kFwHelp);
  }
  VersionOpts v;
  std::vector<std::string> rest;
  int rc = kOk;
  if (!fwOptions(a, 1, kFwHelp, v, &rest, &rc)) return rc;
  dpu::v1::ApplyConfigResponse resp;
  if (sub == "add") {
    dpu::v1::AddFirewallRuleRequest req;
    std::vector<std::string> words;
    for (size_t i = 0; i < rest.size(); ++i) {
      const std::string& o = rest[i];
      if (o == "--index" || o == "--before" || o == "--after") {
        if (req.position_case() != dpu::v1::AddFirewallRuleRequest::POSITION_NOT_SET) {
          return usage("fw add: give one of --index, --before, --after", kFwHelp);
        }
        uint32_t n = 0;
        if (i + 1 >= rest.size()) return usage("fw add: " + o + " needs a value", kFwHelp);
        const std::string& val = rest[++i];
        if (o == "--index") {
          if (!absl::SimpleAtoi(val, &n)) return usage("fw add: --index needs a number", kFwHelp);
          req.set_index(n);
        } else if (o == "--before") {
          req.set_before_id(val);
        } else {
          req.set_after_id(val);
        }
      } else if (o.size() > 2 && o.rfind("--", 0) == 0) {
        return usage("fw add: unknown option '" + o + "'", kFwHelp);
      } else {
        words.push_back(o);
      }
    }
    if (words.empty()) return usage("fw add: give the rule, e.g. \"deny tcp any any -> any 22 id ssh\"", kFwHelp);
    std::string text;
    for (const auto& w : words) absl::StrAppend(&text, text.empty() ? "" : " ", w);
    auto rule = dpu::cli::firewallRuleFromText(text);
    if (!rule.ok()) {
      std::fprintf(stderr, "dpuctl: fw add: %s\n", std::string(rule.status().message()).c_str());
      return kInvalid;
    }
    if ((rc = resolveExpected(c, v)) != kOk) return rc;
    *req.mutable_rule() = *rule;
    req.set_expected_version(v.expected);
    req.set_force(v.force);
    grpc::ClientContext ctx;
    c.unary(&ctx);
    grpc::Status st;
    {
      ProgressWatcher progress(c);
      st = c.stub().AddFirewallRule(&ctx, req, &resp);
    }
    if (!st.ok()) {
      const int rc = rpcFail(c.global(), "fw add", st);
      // A duplicate id is a bad request like any other invalid rule.
      return st.error_code() == grpc::ALREADY_EXISTS ? kInvalid : rc;
    }
    return printApply(c, resp);
  }
  if (sub == "remove") {
    if (rest.size() != 1 || rest[0].rfind("--", 0) == 0) {
      return usage("fw remove: give exactly one rule ID", kFwHelp);
    }
    if ((rc = resolveExpected(c, v)) != kOk) return rc;
    dpu::v1::RemoveFirewallRuleRequest req;
    req.set_id(rest[0]);
    req.set_expected_version(v.expected);
    req.set_force(v.force);
    grpc::ClientContext ctx;
    c.unary(&ctx);
    grpc::Status st;
    {
      ProgressWatcher progress(c);
      st = c.stub().RemoveFirewallRule(&ctx, req, &resp);
    }
    if (!st.ok()) return rpcFail(c.global(), "fw remove", st);
    return printApply(c, resp);
  }
  // load
  if (rest.size() != 1 || rest[0].rfind("--", 0) == 0) {
    return usage("fw load: give exactly one FILE", kFwHelp);
  }
  const std::string& file = rest[0];
  std::vector<std::string> errors;
  std::vector<int> lines;
  auto rules = dpu::cli::firewallRulesFromFile(file, &errors, &lines);
  if (!rules.ok()) {
    std::fprintf(stderr, "dpuctl: fw load: %s\n", std::string(rules.status().message()).c_str());
    return rules.status().code() == absl::StatusCode::kNotFound ? kFailed : kInvalid;
  }
  if ((rc = resolveExpected(c, v)) != kOk) return rc;
  dpu::v1::UpdateConfigRequest req;
  for (auto& r : *rules) *req.mutable_config()->mutable_firewall()->add_rules() = std::move(r);
  req.mutable_update_mask()->add_paths("firewall.rules");
  req.mutable_update_mask()->add_paths("firewall.rule_files");
  req.set_expected_version(v.expected);
  req.set_force(v.force);
  grpc::ClientContext ctx;
  c.unary(&ctx);
  grpc::Status st;
  {
    ProgressWatcher progress(c);
    st = c.stub().UpdateConfig(&ctx, req, &resp);
  }
  if (!st.ok()) return fwFail(c.global(), "fw load", st, file, lines);
  if (!c.global().json) {
    std::printf("%s: %zu rule(s) loaded\n", file.c_str(), lines.size());
  }
  return printApply(c, resp);
}

int cmdGeo(Client& c, const std::vector<std::string>& a) {
  if (a.empty()) return usage("geo: which one? set, clear or lookup", kGeoHelp);
  if (wantsHelp(a)) return std::fputs(kGeoHelp, stdout), kOk;
  const std::string sub = a[0];
  if (sub == "lookup") {
    dpu::v1::LookupCountryRequest req;
    for (size_t i = 1; i < a.size(); ++i) {
      if (a[i] == "--database") {
        if (i + 1 >= a.size()) return usage("geo lookup: --database needs a FILE", kGeoHelp);
        std::error_code ec;
        auto abs = std::filesystem::absolute(a[++i], ec);
        req.set_database(ec ? a[i] : abs.lexically_normal().string());
      } else if (a[i].rfind("--", 0) == 0 || !req.ip().empty()) {
        return usage("geo lookup: bad argument '" + a[i] + "'", kGeoHelp);
      } else {
        req.set_ip(a[i]);
      }
    }
    if (req.ip().empty()) return usage("geo lookup: give an IP address", kGeoHelp);
    grpc::ClientContext ctx;
    c.unary(&ctx);
    dpu::v1::LookupCountryResponse resp;
    grpc::Status st = c.stub().LookupCountry(&ctx, req, &resp);
    if (!st.ok()) return rpcFail(c.global(), "geo lookup", st);
    std::fputs(c.global().json ? dpu::cli::toJson(resp, true).c_str()
                               : dpu::cli::formatLookupCountry(resp).c_str(),
               stdout);
    return kOk;
  }
  if (sub != "set" && sub != "clear") return usage("geo: unknown subcommand '" + sub + "'", kGeoHelp);
  VersionOpts v;
  std::vector<std::string> rest;
  int rc = kOk;
  if (!fwOptions(a, 1, kGeoHelp, v, &rest, &rc)) return rc;
  dpu::v1::SetGeoipDatabaseRequest req;
  if (sub == "set") {
    if (rest.size() != 1 || rest[0].empty() || rest[0].rfind("--", 0) == 0) {
      return usage("geo set: give exactly one FILE.mmdb", kGeoHelp);
    }
    std::error_code ec;
    auto abs = std::filesystem::absolute(rest[0], ec);
    req.set_path(ec ? rest[0] : abs.lexically_normal().string());
  } else if (!rest.empty()) {
    return usage("geo clear: unexpected argument '" + rest[0] + "'", kGeoHelp);
  }
  if ((rc = resolveExpected(c, v)) != kOk) return rc;
  req.set_expected_version(v.expected);
  req.set_force(v.force);
  grpc::ClientContext ctx;
  c.unary(&ctx);
  dpu::v1::ApplyConfigResponse resp;
  grpc::Status st;
  {
    ProgressWatcher progress(c);
    st = c.stub().SetGeoipDatabase(&ctx, req, &resp);
  }
  if (!st.ok()) return rpcFail(c.global(), "geo " + sub, st);
  return printApply(c, resp);
}

// --- lb --- (control/cli/lb_cmd.cc)
int cmdLb(Client& c, const std::vector<std::string>& a) {
  dpu::cli::LbCmdContext ctx;
  if (!wantsHelp(a)) ctx.stub = &c.stub();
  ctx.unary = [&](grpc::ClientContext* x) { c.unary(x); };
  ctx.fail = [&](const std::string& what, const grpc::Status& st) {
    return rpcFail(c.global(), what, st);
  };
  ctx.usage = [](const std::string& msg, const char* help) { return usage(msg, help); };
  ctx.committed_version = [&](uint64_t* v, int* rc) { return c.committedVersion(v, rc); };
  ctx.json = c.global().json;
  return dpu::cli::runLbCommand(ctx, a);
}

}  // namespace

// The environment the subcommands of their own files get (DnsCmdEnv): this client's stub,
// output mode, deadline, error printing and version options (`v` holds the options parsed).
dpu::cli::DnsCmdEnv subcommandEnv(Client& c, const std::vector<std::string>& a, VersionOpts& v) {
  dpu::cli::DnsCmdEnv env;
  if (!wantsHelp(a)) env.stub = &c.stub();  // no connection for --help
  env.json = c.global().json;
  env.unary = [&c](grpc::ClientContext* ctx) { c.unary(ctx); };
  env.rpc_fail = [&c](const std::string& what, const grpc::Status& st) {
    return rpcFail(c.global(), what, st);
  };
  env.print_apply = [&c](const dpu::v1::ApplyConfigResponse& r) { return printApply(c, r); };
  env.version_opt = [&v](const std::vector<std::string>& args, size_t& i, std::string* err) {
    return versionOpt(args, i, v, err);
  };
  env.resolve_expected = [&c, &v](uint64_t* expected, bool* force) {
    int rc = resolveExpected(c, v);
    *expected = v.expected;
    *force = v.force;
    return rc;
  };
  return env;
}

// DNS filtering: `dpuctl dns ...` (control/cli/dns_cmd.cc) with this client.
int cmdDnsDispatch(Client& c, const std::vector<std::string>& a) {
  VersionOpts v;
  return dpu::cli::cmdDns(subcommandEnv(c, a, v), a);
}

// --- dpi --- `dpuctl dpi ...` (control/cli/dpi_cmd.cc) with this client.
int cmdDpiDispatch(Client& c, const std::vector<std::string>& a) {
  VersionOpts v;
  return dpu::cli::cmdDpi(subcommandEnv(c, a, v), a);
}

// --- flows view / capture --- (control/cli/flows_cmd.cc) with this client.
int cmdFlowsDispatch(Client& c, const std::vector<std::string>& a) {
  VersionOpts v;
  return dpu::cli::cmdFlows(subcommandEnv(c, a, v), a);
}
int cmdCaptureDispatch(Client& c, const std::vector<std::string>& a) {
  VersionOpts v;
  return dpu::cli::cmdCapture(subcommandEnv(c, a, v), a);
}

int main(int argc, char** argv) {
  Global g;
  const char* env = std::getenv("DPUCTL_SERVER");
  g.server = env && *env ? env : kDefaultServer;
  if (const char* t = std::getenv("DPUCTL_TIMEOUT"); t && *t) {
    if (!absl::SimpleAtod(t, &g.timeout_s) || g.timeout_s < 0) {
      return usage("DPUCTL_TIMEOUT needs a number of seconds (0: no deadline)");
    }
  }
  std::vector<std::string> rest;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string* dst = nullptr;
    if (a == "--server") dst = &g.server;
    else if (a == "--tls-ca") dst = &g.tls_ca;
    else if (a == "--tls-cert") dst = &g.tls_cert;
    else if (a == "--tls-key") dst = &g.tls_key;
    else if (a == "--tls-server-name") dst = &g.tls_server_name;
    else if (a == "--json") { g.json = true; continue; }
    else if (a == "--timeout") {
      if (i + 1 >= argc || !absl::SimpleAtod(argv[i + 1], &g.timeout_s) || g.timeout_s < 0) {
        return usage("--timeout needs a number of seconds (0: no deadline)");
      }
      ++i;
      continue;
    } else {
      rest.push_back(a);
      continue;
    }
    if (i + 1 >= argc) return usage(a + " needs a value");
    *dst = argv[++i];
  }
  if (rest.empty()) {
    std::fputs(kMainHelp, stderr);
    return kUsage;
  }
  const std::string cmd = rest[0];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::fputs(kMainHelp, stdout);
    return kOk;
  }
  std::vector<std::string> args(rest.begin() + 1, rest.end());
  if (cmd == "fleet") return dpu::cli::cmdFleet(args, g.json);  // --- fleet --- (etcd, no API)
  Client client(g);
  auto run = [&](int (*fn)(Client&, const std::vector<std::string>&)) {
    if (!wantsHelp(args)) {
      std::string err;
      if (!client.connect(&err)) {
        std::fprintf(stderr, "dpuctl: %s\n", err.c_str());
        return err.find("cannot open") != std::string::npos ? kFailed : kUsage;
      }
    }
    return fn(client, args);
  };
  if (cmd == "status") return run(cmdStatus);
  if (cmd == "config") return run(cmdConfig);
  if (cmd == "stats") return run(cmdStats);
  if (cmd == "events") return run(cmdEvents);
  if (cmd == "explain") return run(cmdExplain);
  if (cmd == "fw") return run(cmdFw);
  if (cmd == "geo") return run(cmdGeo);
  if (cmd == "lb") return run(cmdLb);  // --- lb ---
  if (cmd == "dns") return run(cmdDnsDispatch);  // DNS filtering
  if (cmd == "dpi") return run(cmdDpiDispatch);  // --- dpi ---
  if (cmd == "flows") return run(cmdFlowsDispatch);      // --- flows view ---
  if (cmd == "capture") return run(cmdCaptureDispatch);  // --- capture ---
  return usage("unknown command '" + cmd + "'");
}
