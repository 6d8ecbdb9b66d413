// The /metrics scrape against its peer, the GetStats/ListFirewallRules answer gRPC sends:
// the same API messages (2 workers, every counter set; N firewall rules with counters)
// turned into Prometheus text (exportMessage + TextSerializer, what a scrape costs the
// control thread) versus serialized as protobuf (what the gRPC answer costs). Prints
// microseconds per scrape / answer, the ratio, and the size of each.
// usage: metrics_bench [--rules 100,1000,10000] [--reps N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "control/metrics/prom_export.h"
#include "proto/appliance_api.pb.h"

namespace {

using Clock = std::chrono::steady_clock;

dpu::v1::Stats makeStats() {
  dpu::v1::Stats s;
  s.set_config_version(7);
  s.set_generation(7);
  for (const char* side : {"A", "B"}) {
    auto* p = s.add_ports();
    p->set_side(side);
    p->set_name(std::string("net_") + side);
    p->set_rx_packets(123456789);
    p->set_tx_packets(123456700);
  }
  for (uint32_t w = 0; w < 2; ++w) {
    auto* ws = s.add_workers();
    ws->set_id(w);
    ws->set_generation(7);
    auto* c = ws->mutable_counters();
    c->set_rx_packets_a(1000000 + w);
    c->set_forwarded(999000 + w);
    c->set_dropped(1000);
    (*c->mutable_drops())["firewall_deny"] = 1000;
    auto* st = c->add_stages();
    st->set_stage("firewall");
    st->set_packets(1000000);
    c->set_flows_active(50000);
    c->mutable_firewall()->set_denied(1000);
  }
  return s;
}

dpu::v1::ListFirewallRulesResponse makeRules(int n) {
  dpu::v1::ListFirewallRulesResponse r;
  for (int i = 0; i < n; ++i) {
    auto* st = r.add_rules();
    st->mutable_rule()->set_id("rule-" + std::to_string(i));
    st->set_rank(i);
    st->set_acl_entries(4);
    st->set_packets(1000 + i);
    st->set_bytes(64000 + i);
    st->set_flows(10 + i);
    st->set_last_hit_unix_ns(1'700'000'000'000'000'000ll);
  }
  r.set_acl_entries_v4(2 * n);
  r.set_acl_entries_v6(2 * n);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes = {100, 1000, 10000};
  int reps = 50;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rules")) {
      sizes.clear();
      for (auto p : absl::StrSplit(argv[i + 1], ',')) {
        int v = 0;
        if (absl::SimpleAtoi(p, &v)) sizes.push_back(v);
      }
    } else if (!std::strcmp(argv[i], "--reps")) {
      reps = std::atoi(argv[i + 1]);
    }
  }
  std::printf("%-8s %16s %16s %8s %14s %14s\n", "rules", "metrics us", "protobuf us", "ratio",
              "text bytes", "proto bytes");
  for (int n : sizes) {
    const dpu::v1::Stats stats = makeStats();
    const dpu::v1::ListFirewallRulesResponse rules = makeRules(n);
    size_t text_bytes = 0, proto_bytes = 0;
    auto t0 = Clock::now();
    for (int r = 0; r < reps; ++r) {
      dpu::ctl::metrics::Families f;
      dpu::ctl::metrics::exportMessage(stats, "", {}, f);
      dpu::ctl::metrics::exportMessage(rules, "firewall_", {}, f);
      text_bytes = dpu::ctl::metrics::toText(f.take()).size();
    }
    auto t1 = Clock::now();
    for (int r = 0; r < reps; ++r) {
      std::string a = stats.SerializeAsString();
      std::string b = rules.SerializeAsString();
      proto_bytes = a.size() + b.size();
    }
    auto t2 = Clock::now();
    double m = std::chrono::duration<double, std::micro>(t1 - t0).count() / reps;
    double p = std::chrono::duration<double, std::micro>(t2 - t1).count() / reps;
    std::printf("%-8d %16.1f %16.1f %8.1f %14zu %14zu\n", n, m, p, m / p, text_bytes,
                proto_bytes);
  }
  return 0;
}
