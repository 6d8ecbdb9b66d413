#include "rules/compiled/snapshot.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "rules/compile/firewall_compiler.h"
#include "rules/compile/lb_compiler.h"
#include "rules/compile/yara_translate.h"

namespace dpu::rules {
namespace {


}  // namespace

void validateDataplane(const DataplaneSettings& s, ConfigErrorList& errors) {
  constexpr uint64_t kDay = 86400;
  struct R { const char* f; uint64_t v, lo, hi; };
  const R ranges[] = {
      {"flow_table.capacity_per_worker", s.flow_capacity, 1024, 64ull << 20},
      {"flow_table.aging_slice", s.aging_slice, 1, 4096},
      {"timeouts.tcp_syn_s", s.tcp_syn_s, 1, kDay},
      {"timeouts.tcp_established_s", s.tcp_established_s, 1, 30 * kDay},
      {"timeouts.tcp_closing_s", s.tcp_closing_s, 1, kDay},
      {"timeouts.tcp_closed_s", s.tcp_closed_s, 1, kDay},
      {"timeouts.udp_s", s.udp_s, 1, kDay},
      {"timeouts.icmp_s", s.icmp_s, 1, kDay},
      {"timeouts.other_s", s.other_s, 1, kDay},
      {"fragments.max_datagrams", s.frag_max_datagrams, 16, 1u << 20},
      {"fragments.timeout_ms", s.frag_timeout_ms, 1, 600000},
      {"fragments.max_fragments", s.frag_max_fragments, 2, 256},
      {"fragments.reassembly_buffers", s.frag_reassembly_buffers, 1, 65536},
      {"fragments.max_datagram_bytes", s.frag_max_datagram_bytes, 1280, 65023},
      {"fragments.max_held_fragments", s.frag_max_held, 16, 1u << 20},
      {"tcp.overlap_window_bytes", s.tcp_window_bytes, 64, 65536},
      {"tcp.overlap_windows_per_worker", s.tcp_windows_per_worker, 16, 1u << 20},
      {"tcp.reorder_buffers_per_worker", s.tcp_reorder_buffers_per_worker, 1, 1u << 16},
  };
  for (const R& r : ranges) {
    if (r.v >= r.lo && r.v <= r.hi) continue;
    ConfigError e;
    e.section = "dataplane";
    e.field = absl::StrCat("dataplane.", r.f);
    e.reason = absl::StrCat(r.v, " is out of range [", r.lo, ", ", r.hi, "]");
    errors.push_back(std::move(e));
  }
  // Tunnel ports: 1 .. 65535, at most 8 per list (the parser's fixed arrays), no repeats,
  // none in both lists (a port is VXLAN or Geneve).
  auto tunnelError = [&](std::string field, std::string reason) {
    ConfigError e;
    e.section = "dataplane";
    e.field = std::move(field);
    e.reason = std::move(reason);
    errors.push_back(std::move(e));
  };
  if (s.tunnel_max_depth < 1 || s.tunnel_max_depth > kMaxTunnelDepthSetting) {
    tunnelError("dataplane.tunnels.max_depth",
                absl::StrCat(s.tunnel_max_depth, " is out of range [1, ", kMaxTunnelDepthSetting, "]"));
  }
  struct L { const char* name; const std::vector<uint32_t>* ports; };
  const L lists[] = {{"vxlan_ports", &s.vxlan_ports}, {"geneve_ports", &s.geneve_ports}};
  for (const L& l : lists) {
    const std::string base = absl::StrCat("dataplane.tunnels.", l.name);
    if (l.ports->size() > kMaxTunnelPortsSetting) {
      tunnelError(base, absl::StrCat(l.ports->size(), " ports: at most ", kMaxTunnelPortsSetting));
    }
    for (size_t i = 0; i < l.ports->size(); ++i) {
      const uint32_t p = (*l.ports)[i];
      const std::string f = absl::StrCat(base, "[", i, "]");
      if (p < 1 || p > 65535) {
        tunnelError(f, absl::StrCat(p, " is not a UDP port (1 .. 65535)"));
        continue;
      }
      for (size_t j = 0; j < i; ++j) {
        if ((*l.ports)[j] == p) {
          tunnelError(f, absl::StrCat("port ", p, " repeats ", base, "[", j, "]"));
          break;
        }
      }
      if (l.ports == &s.geneve_ports) {
        for (size_t j = 0; j < s.vxlan_ports.size(); ++j) {
          if (s.vxlan_ports[j] == p) {
            tunnelError(f, absl::StrCat("port ", p, " is also dataplane.tunnels.vxlan_ports[", j,
                                        "]: a port carries VXLAN or Geneve, not both"));
            break;
          }
        }
      }
    }
  }
  if (s.tcp_reorder_bytes != 0 && (s.tcp_reorder_bytes < 1024 || s.tcp_reorder_bytes > (16u << 20))) {
    ConfigError e;
    e.section = "dataplane";
    e.field = "dataplane.tcp.reorder_bytes";
    e.reason = absl::StrCat(s.tcp_reorder_bytes, " is out of range [1024, 16777216]");
    errors.push_back(std::move(e));
  }
  auto tcpError = [&](const char* field, std::string reason) {
    ConfigError e;
    e.section = "dataplane";
    e.field = field;
    e.reason = std::move(reason);
    errors.push_back(std::move(e));
  };
  if (s.tcp_hold_out_of_order && s.tcp_reorder_bytes == 0) {
    tcpError("dataplane.tcp.hold_out_of_order",
             "needs the reorder buffers that dataplane.tcp.drop_out_of_order turns off: set one "
             "of the two");
  }
  if (s.tcp_hold_packets_per_worker < 1 || s.tcp_hold_packets_per_worker > 65536) {
    tcpError("dataplane.tcp.hold_packets_per_worker",
             absl::StrCat(s.tcp_hold_packets_per_worker, " is out of range [1, 65536]"));
  }
  if (s.tcp_hold_timeout_ms < 10 || s.tcp_hold_timeout_ms > 60000) {
    tcpError("dataplane.tcp.hold_timeout_ms",
             absl::StrCat(s.tcp_hold_timeout_ms, " is out of range [10, 60000]"));
  }
  if (s.tcp_window_bytes & (s.tcp_window_bytes - 1)) {
    ConfigError e;
    e.section = "dataplane";
    e.field = "dataplane.tcp.overlap_window_bytes";
    e.reason = absl::StrCat(s.tcp_window_bytes, " is not a power of two");
    errors.push_back(std::move(e));
  }
}

absl::StatusOr<std::unique_ptr<Snapshot>> compileSnapshot(const ConfigModel& model,
                                                          uint32_t generation,
                                                          ConfigErrorList* errors) {
  return compileSnapshot(model, generation, errors, nullptr);
}

absl::StatusOr<std::unique_ptr<Snapshot>> compileSnapshot(const ConfigModel& model,
                                                          uint32_t generation,
                                                          ConfigErrorList* errors,
                                                          const FirewallReuse* reuse) {
  return compileSnapshot(model, generation, errors, reuse, nullptr);
}

absl::StatusOr<std::unique_ptr<Snapshot>> compileSnapshot(const ConfigModel& model,
                                                          uint32_t generation,
                                                          ConfigErrorList* errors,
                                                          const FirewallReuse* reuse,
                                                          const LbReuse* lb_reuse,
                                                          const DpiReuse* dpi_reuse,
                                                          const DnsReuse* dns_reuse) {
  ConfigErrorList local;
  ConfigErrorList& errs = errors ? *errors : local;
  size_t before = errs.size();
  validateDataplane(model.dataplane, errs);
  std::shared_ptr<const CompiledFirewall> firewall;
  if (reuse && reuse->compiled && reuse->model == model.firewall) {
    firewall = reuse->compiled;
  } else {
    // Errors go to `errs` (the status repeats them).
    auto fw = compileFirewall(model.firewall, &errs);
    if (fw.ok()) {
      firewall = std::move(*fw);
    } else if (errs.size() == before) {
      ConfigError e;
      e.section = "firewall";
      e.field = "firewall";
      e.reason = std::string(fw.status().message());
      errs.push_back(std::move(e));
    }
  }
  // --- lb ---
  std::shared_ptr<const CompiledLb> lb;
  {
    auto c = compileLb(model.lb, &errs, lb_reuse ? lb_reuse->compiled.get() : nullptr);
    if (c.ok()) lb = std::move(*c);
  }
  // --- dpi ---
  std::shared_ptr<const CompiledDpi> dpi;
  if (model.dpi.enabled) {
    if (dpi_reuse && dpi_reuse->compiled && dpi_reuse->model == model.dpi) {
      dpi = dpi_reuse->compiled;
    } else {
      auto d = compileDpi(model.dpi, errs);
      if (d.ok()) dpi = std::move(*d);
      else if (errs.size() == before)
        errs.push_back({"dpi", "", -1, 0, "", "dpi", std::string(d.status().message())});
    }
  }
  // DNS filtering (errors go to `errs`).
  std::shared_ptr<const CompiledDns> dns;
  if (model.dns.enabled() || !model.dns.extra_ports.empty()) {
    auto d = compileDns(model.dns, dns_reuse ? dns_reuse->compiled.get() : nullptr, &errs);
    if (d.ok() && model.dns.enabled()) dns = std::move(*d);
  }
  if (errs.size() != before) {
    return errorsToStatus(ConfigErrorList(errs.begin() + before, errs.end()));
  }
  auto snap = std::make_unique<Snapshot>();
  snap->dpi = std::move(dpi);
  snap->dpi_settings = model.dpi;
  snap->dpi_settings.sources.clear();
  snap->dpi_settings.signatures.sources.clear();
  snap->generation = generation;
  snap->config_version = model.version;
  snap->dataplane = model.dataplane;
  snap->firewall = std::move(firewall);
  snap->lb = std::move(lb);
  snap->dns = std::move(dns);
  return snap;
}

}  // namespace dpu::rules
