// dpu-appliance: the inline appliance.
//   dpu-appliance run [--config FILE] [--state-dir DIR] [--listen ADDR] [--listen-any]
//                     [--tls-cert F --tls-key F [--tls-client-ca F]] [--max-request-bytes N]
//                     [--events FILE] [--stats-interval S] [--duration S] [--mbufs N]
//                     -- <EAL args>
//   dpu-appliance replay --config FILE --in IN.pcap [--in-b B.pcap] [--out OUT.pcap]
//                        [--out-a A.pcap] [--verdicts V.jsonl] [--events E.jsonl]
//                        [--summary-json S.json] [--change INDEX:FILE]... [--quiet]
//   dpu-appliance validate --config FILE
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "control/app/live.h"
#include "control/app/replay.h"
#include "control/config/config_loader.h"

namespace {

constexpr const char* kUsage =
    "usage:\n"
    "  dpu-appliance run [--config FILE] [--state-dir DIR] [--listen ADDR] [--listen-any]\n"
    "                    [--tls-cert F --tls-key F [--tls-client-ca F]] [--max-request-bytes N]\n"
    "                    [--events FILE] [--stats-interval S] [--duration S] [--mbufs N]\n"
    "                    -- <EAL args>\n"
    "      Live mode. Port 0 is side A, port 1 side B (any PMD given to EAL). The main\n"
    "      lcore runs control, every other lcore a worker. SIGINT/SIGTERM stop it and print\n"
    "      the final counters.\n"
    "      --state-dir DIR  committed config (DIR/config.json) and the API socket; default\n"
    "                       /var/lib/dpu-appliance (created 0700). A committed config wins;\n"
    "                       --config FILE only seeds an empty state directory.\n"
    "      --listen ADDR    gRPC API address: unix:PATH (default unix:DIR/api.sock, mode 0600)\n"
    "                       or HOST:PORT on loopback; other TCP addresses need --listen-any.\n"
    "      --tls-cert F --tls-key F   serve TLS; --tls-client-ca F also requires client\n"
    "                       certificates signed by that CA (mTLS).\n"
    "      --max-request-bytes N  largest request accepted (default 16777216).\n"
    "      --events FILE    append every event (eve-style JSON lines) to FILE.\n"
    "      --mbufs N        packet buffers in the pool (default: sized from workers and\n"
    "                       descriptors); e.g. net_pcap infinite_rx needs one per packet.\n"
    "      Manage it with dpuctl (dpuctl --help).\n"
    "      e.g. dpu-appliance run -- -l 0,1 --no-huge --no-pci -m 1024 \\\n"
    "             --vdev net_af_packet0,iface=veth0 --vdev net_af_packet1,iface=veth1\n"
    "  dpu-appliance replay --config FILE --in IN.pcap [--in-b B.pcap] [--out OUT.pcap]\n"
    "                       [--out-a A.pcap] [--verdicts V.jsonl] [--events E.jsonl]\n"
    "                       [--summary-json S.json] [--change INDEX:FILE]... [--quiet]\n"
    "      Offline mode over DPDK net_pcap ports, same packet path as run. IN arrives on\n"
    "      side A, B.pcap on side B (merged by timestamp). --out gets what leaves side B,\n"
    "      --out-a what leaves side A. Deterministic: same inputs, same outputs.\n"
    "      --change INDEX:FILE  commits config FILE (a new generation, as a live apply\n"
    "                       would) just before input packet INDEX (0-based, in the merged\n"
    "                       order of the verdicts); repeatable, in increasing INDEX.\n"
    "                       Start-only settings (table sizes) keep their first value.\n"
    "  dpu-appliance validate --config FILE\n"
    "      Checks a config file and prints the error, if any.\n";

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
      if (a == "--config") dst = &o.config;
      else if (a == "--in") dst = &o.in_a;
      else if (a == "--in-b") dst = &o.in_b;
      else if (a == "--out") dst = &o.out_b;
      else if (a == "--out-a") dst = &o.out_a;
      else if (a == "--verdicts") dst = &o.verdicts;
      else if (a == "--events") dst = &o.events;
      else if (a == "--summary-json") dst = &o.summary_json;
      else if (a == "--quiet") { o.quiet = true; continue; }
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
      else return fail("replay: unknown option '" + a + "'\n" + kUsage);
      if (!takeValue(i, argc, argv, *dst)) return fail("replay: " + a + " needs a value");
    }
    absl::Status st = dpu::ctl::runReplay(o);
    if (!st.ok()) return fail(std::string(st.message()), 1);
    return 0;
  }
  if (cmd == "run") {
    dpu::ctl::LiveOptions o;
    int i = 2;
    for (; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--") { ++i; break; }
      if (a == "--listen-any") { o.api.listen_any = true; continue; }
      std::string v;
      if (!takeValue(i, argc, argv, v)) return fail("run: " + a + " needs a value");
      if (a == "--config") o.config = v;
      else if (a == "--events") o.events = v;
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
      } else {
        return fail("run: unknown option '" + a + "' (EAL arguments go after --)");
      }
    }
    for (; i < argc; ++i) o.eal_args.push_back(argv[i]);
    absl::Status st = dpu::ctl::runLive(o);
    if (!st.ok()) return fail(std::string(st.message()), 1);
    return 0;
  }
  if (cmd == "validate") {
    std::string cfg;
    for (int i = 2; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--config" && takeValue(i, argc, argv, cfg)) continue;
      return fail("validate: usage: dpu-appliance validate --config FILE");
    }
    if (cfg.empty()) return fail("validate: usage: dpu-appliance validate --config FILE");
    auto c = dpu::ctl::loadConfigFile(cfg);
    if (!c.ok()) return fail(std::string(c.status().message()), 1);
    auto m = dpu::ctl::toModel(*c);
    if (!m.ok()) return fail(cfg + ": " + std::string(m.status().message()), 1);
    std::printf("%s: ok\n", cfg.c_str());
    return 0;
  }
  return fail("unknown command '" + cmd + "'\n" + kUsage);
}
