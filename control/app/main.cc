// dpu-appliance: the inline appliance (run / replay / validate). Usage: kUsage and each
// command's help below (`dpu-appliance <command> --help`).
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "control/app/live.h"
#include "control/app/replay.h"
#include "control/config/config_loader.h"
#include "rules/compiled/snapshot.h"  // --- ops ---

namespace {

constexpr const char* kRunHelp = R"(usage: dpu-appliance run [options] -- <EAL args>

Live mode. Port 0 is side A, port 1 side B (any PMD given to EAL after --). The main lcore
runs control, every other lcore a worker. SIGINT/SIGTERM stop it and print the final
counters; SIGHUP re-reads the files the committed configuration names (see below). Manage
it with dpuctl.

options:
  --config FILE          seeds an empty state directory (later starts, SIGHUP and dpuctl
                         use the committed configuration; `dpuctl config reseed FILE` makes
                         FILE the running configuration again, after showing what it
                         discards). SIGHUP applies the committed configuration again as the
                         next version, so the rule, list, YARA and GeoIP files it names are
                         read again; a file that no longer loads changes nothing (logged)
  --state-dir DIR        committed config (DIR/config.json) and the API socket; default
                         /var/lib/dpu-appliance (created 0700). A committed config wins over
                         --config at start.
  --listen ADDR          gRPC API address: unix:PATH (default unix:DIR/api.sock, mode 0600)
                         or HOST:PORT on loopback; other TCP addresses need --listen-any.
  --listen-any           accept a non-loopback --listen address.
  --tls-cert F --tls-key F [--tls-client-ca F]
                         serve TLS; with a client CA, require client certificates (mTLS).
  --max-request-bytes N  largest API request accepted (default 16777216).
  --metrics-listen ADDR  serve Prometheus metrics on http://ADDR/metrics; ADDR is PORT
                         (= 127.0.0.1:PORT), HOST:PORT or [V6]:PORT, loopback only unless
                         --metrics-listen-any. Off by default.
  --metrics-listen-any   accept a non-loopback --metrics-listen address.
  --events FILE          append every event (eve.json-style JSON lines) to FILE.
  --events-max-bytes N   rotate FILE at N bytes (FILE -> FILE.1 ...; default 67108864,
                         0 = never). SIGHUP also reopens FILE (for logrotate).
  --events-keep N        rotated files kept (default 4).
  --stats-interval S     every S seconds a line of rates over the interval (rx pps, forwarded,
                         dropped, rejected and new flows per second, active flows) and the
                         drop reasons that grew, with their rate
  --duration S           stop after S seconds.
  --mbufs N              packet buffers in the pool (default: sized from workers and
                         descriptors); e.g. net_pcap infinite_rx needs one per packet.
  --poll busy|idle       busy (default): workers spin on their queues, one core each at
                         100%, the lowest latency; idle: after 64 empty polls a worker
                         sleeps (16 us, doubling while nothing comes), for boxes whose cores
                         are shared (a lab, many appliances on one host); docs/operations.md
  --idle-sleep-max-us N  with --poll idle: the longest sleep, the added latency of the first
                         frame after a quiet spell (16 .. 100000; default 1000)

fleet (docs/fleet.md): follow one policy kept in etcd with other appliances
  --fleet NAME           the fleet to follow; its versions are applied as they come (the
                         state directory keeps the last one applied: a restart without etcd
                         runs it); local edits through the API are refused.
  --etcd URLS            etcd endpoints, comma separated (http://, https:// or HOST:PORT).
  --node ID              this node's name in the fleet (default: the host name).
  --group G              its group for rollouts (default "default"; e.g. canary).
  --etcd-ca F [--etcd-cert F --etcd-key F]
                         TLS to etcd; with a client certificate for client-cert-auth (mTLS).
  --fleet-lease-ttl S    the node's status disappears S seconds after it dies (default 10).

examples:
  dpu-appliance run --config /etc/dpu-appliance/config.json --metrics-listen 9464 -- \
      -l 0,1 --no-huge --no-pci -m 1024 \
      --vdev net_af_packet0,iface=veth0 --vdev net_af_packet1,iface=veth1
  dpu-appliance run --events /var/log/dpu-appliance/eve.json -- -l 0-2 -a 0000:03:00.0 -a 0000:03:00.1
  kill -HUP $(pidof dpu-appliance)      # re-apply --config FILE
)";

constexpr const char* kReplayHelp = R"(usage: dpu-appliance replay --config FILE --in IN.pcap [options]

Offline mode over DPDK net_pcap ports, same packet path as run. IN arrives on side A,
B.pcap on side B (merged by timestamp). Deterministic: same inputs, same outputs.
Input paths cannot contain ',' (DPDK device arguments are comma-separated).

options:
  --in-b B.pcap          frames arriving on side B
  --out OUT.pcap         what leaves side B
  --out-a A.pcap         what leaves side A
  --verdicts V.jsonl     one JSON line per input frame (verdict, stage, rule, reason, flow)
  --events E.jsonl       eve.json-style events (drops, flow ends)
  --summary-json S.json  the summary as JSON
  --change INDEX:FILE    commit config FILE (a new generation, as a live apply would) just
                         before input packet INDEX (0-based, merged order); repeatable, in
                         increasing INDEX. Start-only settings keep their first value.
  --workers N            N workers (default 1) on lcores 0 .. N-1 (threads free to share
                         the process's CPUs, so N may exceed them): this thread runs worker
                         0, which reads both inputs in order and hands each packet to the
                         worker of its flow (software distribution: a symmetric hash of
                         the addresses, docs/operations.md "Many workers"). Verdicts are
                         the same as with one worker except where a per-worker table runs
                         full; the order of output frames and events across flows then
                         depends on scheduling (--verdicts stays in input order).
  --rules FILE           a Suricata-format rule file (dpi.signatures.files; repeatable),
                         as suricata -r X.pcap -S FILE; --config may then be left out
                         (docs/signatures.md)
  --extract-files DIR    write every decoded HTTP file (body after de-chunking and
                         decompression, multipart part) the YARA rules scanned to
                         DIR/<sha256> (the fileinfo event's sha256); DIR must exist
  --extract-max-bytes N  at most N bytes extracted in all (default 268435456); a file
                         that would pass it is not written (a warning in the summary)
  --quiet                no summary on stdout
  --memory MB, -m MB     DPDK memory in MB, 64-1048576 (default: sized from the config:
                         512 MB, plus the flow and fragment tables, plus 4 KiB per firewall
                         ACL entry). Only the pages in use are backed by RAM.

examples:
  dpu-appliance replay --config examples/config.json --in examples/example.pcap \
      --out out_b.pcap --verdicts verdicts.jsonl
  dpu-appliance replay --config examples/firewall/config.json --in examples/example.pcap \
      --events events.jsonl --summary-json summary.json --quiet
)";

constexpr const char* kValidateHelp = R"(usage: dpu-appliance validate --config FILE [--state-dir DIR]

Checks a config file (and the rule files, lists and databases it names) without running
anything: prints "FILE: ok", or every error of the file at once, one per line, with its
field path, rule id and line (a JSON file: syntax, type, enum and unknown-field errors,
enums with their valid values, together with the validation errors of what parsed).

exit codes: 0 valid, 1 the file cannot be read, 2 usage, 4 invalid (as dpuctl).

With --state-dir, checks the configuration `run --state-dir DIR --config FILE` would run:
the committed DIR/config.json when there is one (FILE then only seeds an empty state
directory and is not what runs), else FILE. The systemd unit's ExecStartPre uses this.

examples:
  dpu-appliance validate --config examples/config.json
  dpu-appliance validate --config /etc/dpu-appliance/config.json --state-dir /var/lib/dpu-appliance
  dpu-appliance validate --state-dir /var/lib/dpu-appliance && systemctl reload dpu-appliance
)";

constexpr const char* kUsage =
    "usage: dpu-appliance <command> [options]\n"
    "\n"
    "commands:\n"
    "  run [options] -- <EAL args>        live mode between two DPDK ports\n"
    "  replay --config FILE --in IN.pcap  offline mode on captures\n"
    "  validate --config FILE             check a config file\n"
    "\n"
    "'dpu-appliance <command> --help' shows each command's options and examples.\n"
    "Manage a running appliance with dpuctl (dpuctl --help).\n";

int fail(const std::string& msg, int code = 2) {
  std::fprintf(stderr, "dpu-appliance: %s\n", msg.c_str());
  return code;
}

bool takeValue(int& i, int argc, char** argv, std::string& out) {
  if (i + 1 >= argc) return false;
  out = argv[++i];
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string cmd = argv[1];
  if (cmd == "replay") {
    dpu::ctl::ReplayOptions o;
    for (int i = 2; i < argc; ++i) {
      std::string a = argv[i];
      std::string* dst = nullptr;
      if (a == "--help" || a == "-h") {
        std::fputs(kReplayHelp, stdout);
        return 0;
      }
      if (a == "--config") dst = &o.config;
      else if (a == "--rules") {  // --- signatures ---
        std::string v;
        if (!takeValue(i, argc, argv, v)) return fail("replay: --rules needs a file");
        o.rules.push_back(v);
        continue;
      }
      else if (a == "--in") dst = &o.in_a;
      else if (a == "--in-b") dst = &o.in_b;
      else if (a == "--out") dst = &o.out_b;
      else if (a == "--out-a") dst = &o.out_a;
      else if (a == "--verdicts") dst = &o.verdicts;
      else if (a == "--events") dst = &o.events;
      else if (a == "--summary-json") dst = &o.summary_json;
      else if (a == "--quiet") { o.quiet = true; continue; }
      else if (a == "--extract-files") dst = &o.extract_files;  // --- http ---
      else if (a == "--extract-max-bytes") {
        std::string v;
        if (!takeValue(i, argc, argv, v) || !absl::SimpleAtoi(v, &o.extract_max_bytes))
          return fail("replay: --extract-max-bytes needs a byte count");
        continue;
      }
      else if (a == "-m" || a == "--memory") {
        std::string v;
        if (!takeValue(i, argc, argv, v)) return fail("replay: " + a + " needs a value (MB)");
        if (!absl::SimpleAtoi(v, &o.memory_mb) || o.memory_mb < dpu::ctl::kMinReplayMemoryMb ||
            o.memory_mb > dpu::ctl::kMaxReplayMemoryMb) {
          return fail("replay: " + a + " '" + v + "': expected MB in [" +
                      std::to_string(dpu::ctl::kMinReplayMemoryMb) + ", " +
                      std::to_string(dpu::ctl::kMaxReplayMemoryMb) + "]");
        }
        continue;
      }
      else if (a == "--workers") {
        std::string v;
        if (!takeValue(i, argc, argv, v)) return fail("replay: --workers needs a value");
        uint32_t n = 0;
        if (!absl::SimpleAtoi(v, &n) || n < 1 || n > dpu::ctl::kMaxReplayWorkers) {
          return fail("replay: --workers '" + v + "': expected 1 .. " +
                      std::to_string(dpu::ctl::kMaxReplayWorkers));
        }
        o.workers = static_cast<uint16_t>(n);
        continue;
      }
      else if (a == "--change") {
        std::string v;
        if (!takeValue(i, argc, argv, v)) return fail("replay: --change needs INDEX:FILE");
        size_t colon = v.find(':');
        uint64_t at = 0;
        if (colon == std::string::npos || !absl::SimpleAtoi(v.substr(0, colon), &at) ||
            colon + 1 == v.size()) {
          return fail("replay: --change '" + v + "': expected INDEX:FILE, e.g. 120:new.json");
        }
        if (!o.changes.empty() && at < o.changes.back().first) {
          return fail("replay: --change '" + v + "': indexes must not decrease");
        }
        o.changes.emplace_back(at, v.substr(colon + 1));
        continue;
      }
      else return fail("replay: unknown option '" + a + "'\n" + kReplayHelp);
      if (!takeValue(i, argc, argv, *dst)) return fail("replay: " + a + " needs a value");
    }
    absl::Status st = dpu::ctl::runReplay(o);
    if (!st.ok()) return fail(std::string(st.message()), 1);
    return 0;
  }
  if (cmd == "run") {
    dpu::ctl::LiveOptions o;
    bool poll_idle = false, idle_max_given = false;
    uint32_t idle_max_us = 1000;
    int i = 2;
    for (; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--") { ++i; break; }
      if (a == "--help" || a == "-h") {
        std::fputs(kRunHelp, stdout);
        return 0;
      }
      if (a == "--listen-any") { o.api.listen_any = true; continue; }
      if (a == "--metrics-listen-any") { o.metrics_listen_any = true; continue; }
      static const char* const kWithValue[] = {
          "--config", "--events", "--metrics-listen", "--events-max-bytes", "--events-keep",
          "--state-dir", "--listen", "--tls-cert", "--tls-key", "--tls-client-ca",
          "--max-request-bytes", "--stats-interval", "--duration", "--mbufs",
          "--fleet", "--etcd", "--node", "--group", "--etcd-ca", "--etcd-cert", "--etcd-key",
          "--fleet-lease-ttl", "--poll", "--idle-sleep-max-us"};
      if (std::find(std::begin(kWithValue), std::end(kWithValue), a) == std::end(kWithValue)) {
        return fail("run: unknown option '" + a + "' (EAL arguments go after --; see "
                    "dpu-appliance run --help)");
      }
      std::string v;
      if (!takeValue(i, argc, argv, v)) return fail("run: " + a + " needs a value");
      if (a == "--config") o.config = v;
      else if (a == "--events") o.events = v;
      else if (a == "--metrics-listen") o.metrics_listen = v;
      else if (a == "--events-max-bytes") {
        if (!absl::SimpleAtoi(v, &o.events_max_bytes)) {
          return fail("run: bad --events-max-bytes '" + v + "' (bytes, 0 = never rotate)");
        }
      } else if (a == "--events-keep") {
        if (!absl::SimpleAtoi(v, &o.events_keep) || o.events_keep > 1000) {
          return fail("run: bad --events-keep '" + v + "' (0..1000)");
        }
      }
      else if (a == "--state-dir") o.state_dir = v;
      else if (a == "--listen") o.api.listen = v;
      else if (a == "--tls-cert") o.api.tls_cert = v;
      else if (a == "--tls-key") o.api.tls_key = v;
      else if (a == "--tls-client-ca") o.api.tls_client_ca = v;
      else if (a == "--max-request-bytes") {
        if (!absl::SimpleAtoi(v, &o.api.max_request_bytes)) {
          return fail("run: bad --max-request-bytes '" + v + "'");
        }
      } else if (a == "--stats-interval") {
        if (!absl::SimpleAtod(v, &o.stats_interval_s)) return fail("run: bad --stats-interval");
      } else if (a == "--duration") {
        if (!absl::SimpleAtod(v, &o.duration_s)) return fail("run: bad --duration");
      } else if (a == "--mbufs") {
        if (!absl::SimpleAtoi(v, &o.mbufs) || o.mbufs < 1024 || o.mbufs > (1u << 26)) {
          return fail("run: bad --mbufs '" + v + "' (1024 .. 67108864)");
        }
      } else if (a == "--poll") {
        if (v == "busy") {
          poll_idle = false;
        } else if (v == "idle") {
          poll_idle = true;
        } else {
          return fail("run: bad --poll '" + v + "' (busy: workers spin, the lowest latency; "
                      "idle: workers sleep when nothing comes)");
        }
      } else if (a == "--idle-sleep-max-us") {
        if (!absl::SimpleAtoi(v, &idle_max_us) || idle_max_us < 16 || idle_max_us > 100000) {
          return fail("run: bad --idle-sleep-max-us '" + v + "' (16 .. 100000)");
        }
        idle_max_given = true;
      } else if (a == "--fleet") {  // --- fleet ---
        o.fleet.fleet = v;
      } else if (a == "--etcd") {
        o.fleet.etcd.endpoints = v;
      } else if (a == "--node") {
        o.fleet.node = v;
      } else if (a == "--group") {
        o.fleet.group = v;
      } else if (a == "--etcd-ca") {
        o.fleet.etcd.ca_file = v;
      } else if (a == "--etcd-cert") {
        o.fleet.etcd.cert_file = v;
      } else if (a == "--etcd-key") {
        o.fleet.etcd.key_file = v;
      } else if (a == "--fleet-lease-ttl") {
        if (!absl::SimpleAtoi(v, &o.fleet.lease_ttl_s) || o.fleet.lease_ttl_s < 2 ||
            o.fleet.lease_ttl_s > 3600) {
          return fail("run: bad --fleet-lease-ttl '" + v + "' (2 .. 3600 seconds)");
        }
      } else {
        return fail("run: unknown option '" + a + "' (EAL arguments go after --; see "
                    "dpu-appliance run --help)");
      }
    }
    if (idle_max_given && !poll_idle) {
      return fail("run: --idle-sleep-max-us goes with --poll idle");
    }
    o.idle_sleep_max_us = poll_idle ? idle_max_us : 0;
    if (o.fleet.fleet.empty() &&
        (!o.fleet.etcd.endpoints.empty() || !o.fleet.node.empty() || o.fleet.group != "default" ||
         !o.fleet.etcd.ca_file.empty() || !o.fleet.etcd.cert_file.empty())) {
      return fail("run: --etcd, --node, --group and the --etcd-* options go with --fleet NAME");
    }
    if (!o.fleet.fleet.empty() && o.fleet.etcd.endpoints.empty()) {
      return fail("run: --fleet needs --etcd URLS (e.g. --etcd 127.0.0.1:2379)");
    }
    if (o.fleet.etcd.cert_file.empty() != o.fleet.etcd.key_file.empty()) {
      return fail("run: --etcd-cert and --etcd-key go together");
    }
    for (; i < argc; ++i) o.eal_args.push_back(argv[i]);
    absl::Status st = dpu::ctl::runLive(o);
    if (!st.ok()) return fail(std::string(st.message()), 1);
    return 0;
  }
  if (cmd == "validate") {
    std::string cfg, state_dir;
    for (int i = 2; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--help" || a == "-h") {
        std::fputs(kValidateHelp, stdout);
        return 0;
      }
      if (a == "--config" && takeValue(i, argc, argv, cfg)) continue;
      if (a == "--state-dir" && takeValue(i, argc, argv, state_dir)) continue;
      return fail(std::string("validate: bad argument '") + a + "'\n" + kValidateHelp);
    }
    if (cfg.empty() && state_dir.empty()) {
      return fail(std::string("validate: --config FILE or --state-dir DIR is required\n") +
                  kValidateHelp);
    }
    if (!state_dir.empty()) {
      // What `run` uses: the committed config wins over --config (ConfigStore::open).
      const std::string committed = state_dir + "/config.json";
      struct stat sb {};
      if (::stat(committed.c_str(), &sb) == 0) {
        if (!cfg.empty()) {
          std::printf("%s: not checked: %s holds the committed config, which is what runs\n",
                      cfg.c_str(), committed.c_str());
        }
        cfg = committed;
      } else if (errno != ENOENT) {
        return fail(committed + ": " + std::strerror(errno), 1);
      } else if (cfg.empty()) {
        return fail(state_dir + " holds no committed config and no --config FILE was given", 1);
      }
    }
    auto c = dpu::ctl::loadConfigFileAll(cfg);
    if (!c.ok()) return fail(std::string(c.status().message()), 1);
    // Every error at once: parse errors (types, enums, unknown fields) and, on what parsed,
    // validation and compilation as an apply does them (DNS list files, YARA rules, LB
    // tables are only read and checked there).
    const dpu::rules::ConfigErrorList errors = dpu::ctl::allErrors(*c);
    if (!errors.empty()) {
      std::fprintf(stderr, "%s: invalid, %zu error(s)\n", cfg.c_str(), errors.size());
      for (const auto& e : errors) {
        std::fprintf(stderr, "  error: %s\n", dpu::rules::formatError(e).c_str());
      }
      return 4;
    }
    dpu::ctl::ModelDetails details;
    if (auto m = dpu::ctl::toModel(c->config, nullptr, &details); m.ok()) {
      for (const std::string& w : details.warnings) {
        std::fprintf(stderr, "dpu-appliance: warning: %s: %s\n", cfg.c_str(), w.c_str());
      }
      for (const std::string& w : dpu::ctl::policyWarnings(*m)) {
        std::fprintf(stderr, "%s: warning: %s\n", cfg.c_str(), w.c_str());
      }
    }
    std::printf("%s: ok\n", cfg.c_str());
    return 0;
  }
  return fail("unknown command '" + cmd + "'\n" + kUsage);
}
