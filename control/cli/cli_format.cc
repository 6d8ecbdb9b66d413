#include "control/cli/cli_format.h"

#include <fstream>
#include <sstream>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/field_mask_util.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <ctime>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "rules/compile/config_errors.h"
#include "rules/compile/progress.h"

namespace dpu::cli {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;
using google::protobuf::util::JsonParseOptions;
using google::protobuf::util::JsonPrintOptions;

std::string fmtRate(double per_s) {
  if (per_s >= 1e6) return absl::StrFormat("%.2f M/s", per_s / 1e6);
  if (per_s >= 1e3) return absl::StrFormat("%.1f k/s", per_s / 1e3);
  return absl::StrFormat("%.0f /s", per_s);
}

std::string fmtDuration(double s) {
  uint64_t t = static_cast<uint64_t>(s);
  uint64_t d = t / 86400, h = t / 3600 % 24, m = t / 60 % 60, sec = t % 60;
  if (d) return absl::StrFormat("%ud %uh %um %us", d, h, m, sec);
  if (h) return absl::StrFormat("%uh %um %us", h, m, sec);
  if (m) return absl::StrFormat("%um %us", m, sec);
  return absl::StrFormat("%.1fs", s);
}

std::string valueJson(const Value& v) {
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(v, &out);
  return out;
}

void flatten(const Value& v, const std::string& path, std::map<std::string, std::string>& out) {
  if (v.kind_case() == Value::kStructValue) {
    for (const auto& [k, child] : v.struct_value().fields()) {
      flatten(child, path.empty() ? k : absl::StrCat(path, ".", k), out);
    }
    if (v.struct_value().fields().empty() && !path.empty()) out[path] = "{}";
  } else if (v.kind_case() == Value::kListValue) {
    const auto& l = v.list_value().values();
    for (int i = 0; i < l.size(); ++i) flatten(l[i], absl::StrCat(path, "[", i, "]"), out);
    if (l.empty()) out[path] = "[]";
  } else {
    out[path] = valueJson(v);
  }
}

absl::StatusOr<std::map<std::string, std::string>> flatConfig(v1::ApplianceConfig cfg) {
  cfg.clear_version();
  JsonPrintOptions po;
  po.preserve_proto_field_names = true;
  std::string json;
  auto st = google::protobuf::util::MessageToJsonString(cfg, &json, po);
  if (!st.ok()) return absl::InternalError(std::string(st.message()));
  Value root;
  st = google::protobuf::util::JsonStringToMessage(json, &root);
  if (!st.ok()) return absl::InternalError(std::string(st.message()));
  std::map<std::string, std::string> out;
  flatten(root, "", out);
  return out;
}

}  // namespace

std::string toJson(const google::protobuf::Message& m, bool pretty) {
  JsonPrintOptions po;
  po.preserve_proto_field_names = true;
  po.add_whitespace = pretty;
  std::string out;
  auto st = google::protobuf::util::MessageToJsonString(m, &out, po);
  if (!st.ok()) return absl::StrCat("{\"error\":\"cannot print ", m.GetTypeName(), "\"}");
  if (!pretty || out.empty() || out.back() != '\n') out.push_back('\n');
  return out;
}

std::string formatTime(int64_t ns) {
  time_t sec = static_cast<time_t>(ns / 1000000000ll);
  int64_t ms = (ns % 1000000000ll) / 1000000;
  std::tm tm{};
  gmtime_r(&sec, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  return absl::StrFormat("%s.%03dZ", buf, ms);
}

std::string formatStatus(const v1::StatusResponse& s) {
  std::string o;
  absl::StrAppendFormat(&o, "instance     %s\n", s.instance_id());
  absl::StrAppendFormat(&o, "uptime       %s\n", fmtDuration(s.uptime_seconds()));
  absl::StrAppendFormat(&o, "config       version %u, snapshot generation %u\n",
                        s.config_version(), s.generation());
  absl::StrAppendFormat(&o, "state dir    %s\n", s.state_dir());
  const auto& b = s.build();
  absl::StrAppendFormat(&o, "build        %s (commit %s, %s), %s, %s\n", b.version(),
                        b.git_commit(), b.build_type(), b.compiler(), b.dpdk_version());
  absl::StrAppend(&o, "ports\n");
  absl::StrAppendFormat(&o, "  %-4s %-5s %-24s %s\n", "side", "port", "name", "driver");
  for (const auto& p : s.ports()) {
    absl::StrAppendFormat(&o, "  %-4s %-5u %-24s %s\n", p.side(), p.port_id(), p.name(),
                          p.driver());
  }
  absl::StrAppend(&o, "workers\n");
  absl::StrAppendFormat(&o, "  %-4s %-5s %s\n", "id", "lcore", "generation");
  for (const auto& w : s.workers()) {
    absl::StrAppendFormat(&o, "  %-4u %-5u %u%s\n", w.id(), w.lcore(), w.generation(),
                          w.generation() == s.generation() ? "" : "  (catching up)");
  }
  if (s.tasks_size() > 0) {
    absl::StrAppend(&o, "in progress\n");
    for (const auto& t : s.tasks()) absl::StrAppend(&o, "  ", formatTask(t), "\n");
  }
  return o;
}

std::string formatTask(const v1::TaskProgress& t) {
  rules::ProgressInfo p;
  p.task = t.task();
  p.step = t.step();
  p.unit = t.unit();
  p.done = t.done();
  p.total = t.total();
  p.elapsed_s = t.elapsed_seconds();
  return rules::formatProgress(p);
}

namespace {

// Every counter of a Stats sample by a readable path ("drops[firewall_deny]",
// "stages[dns].dropped", "ports[A].rx_packets"), for the changes view of a watch. Leaves out
// what changes on every sample without being an event (time, uptime, cycles, latency
// quantiles) and the per-worker copies of the totals.
void flattenCounters(const google::protobuf::Message& m, const std::string& prefix,
                     std::map<std::string, int64_t>* out) {
  using google::protobuf::FieldDescriptor;
  const auto* d = m.GetDescriptor();
  const auto* r = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    const std::string& n = f->name();
    if (n == "workers" || n == "timestamp_unix_ns" || n == "uptime_seconds" || n == "cycles" ||
        n == "latency" || n == "tasks" || n == "last_match_unix_ns" || n == "last_apply_unix_ns") {
      continue;
    }
    const std::string path = prefix.empty() ? n : prefix + "." + n;
    if (f->is_map()) {
      for (int k = 0; k < r->FieldSize(m, f); ++k) {
        const auto& e = r->GetRepeatedMessage(m, f, k);
        const auto* ed = e.GetDescriptor();
        const auto* kf = ed->FindFieldByName("key");
        const auto* vf = ed->FindFieldByName("value");
        if (kf->cpp_type() != FieldDescriptor::CPPTYPE_STRING) continue;
        const std::string key = e.GetReflection()->GetString(e, kf);
        switch (vf->cpp_type()) {
          case FieldDescriptor::CPPTYPE_UINT64:
            (*out)[n + "[" + key + "]"] = int64_t(e.GetReflection()->GetUInt64(e, vf));
            break;
          case FieldDescriptor::CPPTYPE_UINT32:
            (*out)[n + "[" + key + "]"] = e.GetReflection()->GetUInt32(e, vf);
            break;
          default:
            break;
        }
      }
      continue;
    }
    if (f->is_repeated()) {
      if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) continue;
      for (int k = 0; k < r->FieldSize(m, f); ++k) {
        const auto& e = r->GetRepeatedMessage(m, f, k);
        // The element's name: its first string field (side, stage, name, id ...).
        std::string key = std::to_string(k);
        const auto* ed = e.GetDescriptor();
        for (int j = 0; j < ed->field_count(); ++j) {
          const auto* kf = ed->field(j);
          if (!kf->is_repeated() && kf->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
            key = e.GetReflection()->GetString(e, kf);
            break;
          }
        }
        flattenCounters(e, n + "[" + key + "]", out);
      }
      continue;
    }
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_UINT64: (*out)[path] = int64_t(r->GetUInt64(m, f)); break;
      case FieldDescriptor::CPPTYPE_UINT32: (*out)[path] = r->GetUInt32(m, f); break;
      case FieldDescriptor::CPPTYPE_INT64: (*out)[path] = r->GetInt64(m, f); break;
      case FieldDescriptor::CPPTYPE_INT32: (*out)[path] = r->GetInt32(m, f); break;
      case FieldDescriptor::CPPTYPE_MESSAGE:
        if (r->HasField(m, f)) flattenCounters(r->GetMessage(m, f), n == "total" ? "" : path, out);
        break;
      default:
        break;
    }
  }
}

std::string fmtBits(double bytes_per_s) {
  const double b = bytes_per_s * 8;
  if (b >= 1e9) return absl::StrFormat("%.2f Gbit/s", b / 1e9);
  if (b >= 1e6) return absl::StrFormat("%.1f Mbit/s", b / 1e6);
  if (b >= 1e3) return absl::StrFormat("%.1f kbit/s", b / 1e3);
  return absl::StrFormat("%.0f bit/s", b);
}

}  // namespace

std::string formatStatsChanges(const v1::Stats& s, const v1::Stats& prev) {
  std::string o;
  const double dt = (s.timestamp_unix_ns() - prev.timestamp_unix_ns()) / 1e9;
  const auto& t = s.total();
  const auto& q = prev.total();
  auto rate = [dt](uint64_t now, uint64_t before) {
    return dt > 0 && now >= before ? double(now - before) / dt : 0.0;
  };
  absl::StrAppendFormat(&o, "%s  +%.2f s  config version %u, generation %u\n",
                        formatTime(s.timestamp_unix_ns()), dt, s.config_version(),
                        s.generation());
  for (int i = 0; i < s.ports_size() && i < prev.ports_size(); ++i) {
    const auto& p = s.ports(i);
    const auto& pp = prev.ports(i);
    absl::StrAppendFormat(&o, "  %s %-12s rx %s %s   tx %s %s\n", p.side(), p.name(),
                          fmtRate(rate(p.rx_packets(), pp.rx_packets())),
                          fmtBits(rate(p.rx_bytes(), pp.rx_bytes())),
                          fmtRate(rate(p.tx_packets(), pp.tx_packets())),
                          fmtBits(rate(p.tx_bytes(), pp.tx_bytes())));
  }
  absl::StrAppendFormat(&o, "  forwarded %s   dropped %s   rejected %s   new flows %s   active flows %u\n",
                        fmtRate(rate(t.forwarded(), q.forwarded())),
                        fmtRate(rate(t.dropped(), q.dropped())),
                        fmtRate(rate(t.rejected(), q.rejected())),
                        fmtRate(rate(t.flows_created(), q.flows_created())), t.flows_active());
  std::map<std::string, int64_t> a, b;
  flattenCounters(s, "", &a);
  flattenCounters(prev, "", &b);
  std::vector<std::string> lines;
  for (const auto& [k, v] : a) {
    auto it = b.find(k);
    const int64_t before = it == b.end() ? 0 : it->second;
    if (v == before) continue;
    const int64_t d = v - before;
    lines.push_back(absl::StrFormat("  %-40s %14d  %+d%s", k, v, d,
                                    d > 0 && dt > 0 ? "  (" + fmtRate(d / dt) + ")" : ""));
  }
  for (const auto& [k, v] : b) {
    if (!a.count(k)) lines.push_back(absl::StrFormat("  %-40s %14s  (gone)", k, "-"));
  }
  if (lines.empty()) {
    absl::StrAppend(&o, "  (no counter changed)\n");
  } else {
    absl::StrAppend(&o, "changed:\n", absl::StrJoin(lines, "\n"), "\n");
  }
  return o;
}

std::string formatStats(const v1::Stats& s, const v1::Stats* prev) {
  std::string o;
  const auto& t = s.total();
  double dt = prev ? (s.timestamp_unix_ns() - prev->timestamp_unix_ns()) / 1e9 : 0;
  absl::StrAppendFormat(&o, "%s  config version %u, generation %u\n",
                        formatTime(s.timestamp_unix_ns()), s.config_version(), s.generation());
  absl::StrAppend(&o, "ports\n");
  absl::StrAppendFormat(&o, "  %-4s %-14s %14s %16s %14s %16s %8s %8s %8s\n", "side", "name",
                        "rx packets", "rx bytes", "tx packets", "tx bytes", "missed", "nombuf",
                        "tx err");
  for (int i = 0; i < s.ports_size(); ++i) {
    const auto& p = s.ports(i);
    absl::StrAppendFormat(&o, "  %-4s %-14s %14u %16u %14u %16u %8u %8u %8u\n", p.side(),
                          p.name(), p.rx_packets(), p.rx_bytes(), p.tx_packets(), p.tx_bytes(),
                          p.rx_missed(), p.rx_nombuf(), p.tx_errors());
    if (prev && dt > 0 && i < prev->ports_size()) {
      const auto& q = prev->ports(i);
      absl::StrAppendFormat(&o, "  %-4s %-14s %14s %16s %14s\n", "", "rate",
                            fmtRate((p.rx_packets() - q.rx_packets()) / dt), "",
                            fmtRate((p.tx_packets() - q.tx_packets()) / dt));
    }
  }
  uint64_t rx = t.rx_packets_a() + t.rx_packets_b();
  absl::StrAppend(&o, "verdicts\n");
  absl::StrAppendFormat(&o, "  packets in %u (A %u, B %u)   out A %u, B %u\n", rx,
                        t.rx_packets_a(), t.rx_packets_b(), t.tx_packets_a(), t.tx_packets_b());
  absl::StrAppendFormat(&o, "  forwarded %u   dropped %u   rejected %u\n", t.forwarded(),
                        t.dropped(), t.rejected());
  if (t.non_ip_forwarded() || t.malformed_forwarded() || t.untracked_forwarded()) {
    absl::StrAppendFormat(&o, "  forwarded without a flow: non-IP %u, malformed %u, untracked %u\n",
                          t.non_ip_forwarded(), t.malformed_forwarded(), t.untracked_forwarded());
  }
  if (t.vxlan_not_parsed() || t.geneve_not_parsed() || t.gre_not_parsed()) {
    absl::StrAppendFormat(&o, "  not the tunnel its port or protocol names, judged as is: VXLAN %u, Geneve %u, GRE %u\n",
                          t.vxlan_not_parsed(), t.geneve_not_parsed(), t.gre_not_parsed());
  }
  absl::StrAppend(&o, "drops by reason\n");
  std::map<std::string, uint64_t> drops(t.drops().begin(), t.drops().end());
  if (drops.empty()) absl::StrAppend(&o, "  (none)\n");
  for (const auto& [reason, n] : drops) absl::StrAppendFormat(&o, "  %-28s %14u\n", reason, n);
  absl::StrAppend(&o, "flows\n");
  absl::StrAppendFormat(&o,
                        "  active %u   created %u   expired %u   mid-stream %u   table full %u"
                        "   cache hits %u\n",
                        t.flows_active(), t.flows_created(), t.flows_expired(),
                        t.flows_midstream(), t.flow_table_full(), t.flow_cache_hits());
  if (t.fragments() || t.fragments_held() || t.fragment_overlaps() ||
      t.fragments_first_missing()) {
    absl::StrAppendFormat(&o, "fragments\n  packets %u   held %u   overlaps %u   first missing %u\n",
                          t.fragments(), t.fragments_held(), t.fragment_overlaps(),
                          t.fragments_first_missing());
  }
  // Normalization for the inspecting stages: fragments reassembled, TCP streams.
  if (t.has_reassembly()) {
    const auto& r = t.reassembly();
    if (r.reassembled() || r.atomic() || r.overlap_identical() || r.overlap_different() ||
        r.no_buffer() || r.too_big() || r.hold_full() || r.buffers_in_use()) {
      absl::StrAppendFormat(&o,
                            "reassembly\n  datagrams %u   atomic %u   overlaps identical %u"
                            "   different %u   buffers in use %u\n"
                            "  exhausted: no buffer %u   too big %u   hold full %u   (fail open %u,"
                            " fail closed %u)\n",
                            r.reassembled(), r.atomic(), r.overlap_identical(),
                            r.overlap_different(), r.buffers_in_use(), r.no_buffer(), r.too_big(),
                            r.hold_full(), r.fail_open(), r.fail_closed());
    }
  }
  if (t.tcp_stream_size()) {
    absl::StrAppend(&o, "tcp stream\n ");
    for (const auto& [name, v] :
         std::map<std::string, uint64_t>(t.tcp_stream().begin(), t.tcp_stream().end())) {
      absl::StrAppend(&o, " ", name, " ", v);
    }
    absl::StrAppend(&o, "\n");
  }
  if (t.stages_size()) {
    absl::StrAppendFormat(&o, "stages\n  %-12s %14s %14s\n", "stage", "packets in", "dropped");
    for (const auto& st : t.stages()) {
      absl::StrAppendFormat(&o, "  %-12s %14u %14u\n", st.stage(), st.packets(), st.dropped());
    }
  }
  // DNS filtering: stage counters (non-zero ones) and per-list counters.
  if (t.dns_size() || s.dns_lists_size()) {
    absl::StrAppend(&o, "dns\n ");
    for (const auto& [name, v] : std::map<std::string, uint64_t>(t.dns().begin(), t.dns().end())) {
      absl::StrAppend(&o, " ", name, " ", v);
    }
    absl::StrAppend(&o, "\n");
    for (const auto& l : s.dns_lists()) {
      absl::StrAppendFormat(&o, "  list %-24s %-9s names %u   blocked %u   allowed %u\n", l.name(),
                            l.action(), l.names(), l.blocked(), l.allowed());
    }
  }
  // --- perf --- where the worker cycles went (per received packet) and the latency.
  const uint64_t rx_all = t.rx_packets_a() + t.rx_packets_b();
  if (t.cycles_size() && rx_all) {
    absl::StrAppend(&o, "cycles per received packet\n ");
    for (const auto& c : t.cycles()) {
      if (c.bucket() == "idle") continue;
      absl::StrAppendFormat(&o, " %s %.1f", c.bucket(), double(c.cycles()) / double(rx_all));
    }
    absl::StrAppend(&o, "\n");
  }
  if (t.has_latency() && t.latency().samples()) {
    const auto& l = t.latency();
    absl::StrAppendFormat(&o,
                          "latency (forwarded packets, rx burst -> tx burst)\n  p50 %.1f us   "
                          "p99 %.1f us   p99.9 %.1f us   max %.1f us\n",
                          l.p50_ns() / 1e3, l.p99_ns() / 1e3, l.p999_ns() / 1e3,
                          l.max_ns() / 1e3);
  }
  // --- dpi --- counters, the running rule set's counts, the rules that matched.
  if (s.has_dpi()) {
    absl::StrAppendFormat(&o, "dpi\n  bytes scanned %u   rules fired: alert %u   drop %u   reset %u"
                              "   gaps %u   at depth %u   no stream %u\n",
                          t.dpi().bytes_scanned(), t.dpi().alerts(), t.dpi().drops(), t.dpi().resets(),
                          t.dpi().gaps(), t.dpi().depth_reached(), t.dpi().no_stream());
    absl::StrAppendFormat(&o, "  rules: %u matched, %u unsupported (not matched)\n",
                          s.dpi().rules_accepted(), s.dpi().rules_unsupported());
    for (const auto& r : s.dpi().rules()) {
      absl::StrAppendFormat(&o, "  rule %-40s %-6s matches %u\n", r.id(), r.action(), r.matches());
    }
  }
  // --- signatures --- the engine's counters, when it inspected anything.
  if (t.has_signatures() && t.signatures().inspected() > 0) {
    const v1::SignatureCounters& g = t.signatures();
    absl::StrAppendFormat(&o,
                          "signatures\n  inspected %u   candidates %u   matched %u   acted on: "
                          "alert %u   drop %u   reject %u   pass %u\n",
                          g.inspected(), g.candidates(), g.matches(), g.alerts(), g.drops(),
                          g.rejects(), g.passes());
    if (g.pcre_errors() + g.flowbits_full() + g.threshold_full() + g.hits_dropped() > 0) {
      absl::StrAppendFormat(&o,
                            "  pcre undecided %u   flowbits full %u   threshold full %u   hits "
                            "dropped %u\n",
                            g.pcre_errors(), g.flowbits_full(), g.threshold_full(),
                            g.hits_dropped());
    }
  }
  absl::StrAppendFormat(&o, "workers\n  %-4s %-10s %14s %14s %14s %12s %12s\n", "id", "generation",
                        "packets in", "forwarded", "dropped", "flows", "events lost");
  for (const auto& w : s.workers()) {
    const auto& c = w.counters();
    absl::StrAppendFormat(&o, "  %-4u %-10u %14u %14u %14u %12u %12u\n", w.id(), w.generation(),
                          c.rx_packets_a() + c.rx_packets_b(), c.forwarded(), c.dropped(),
                          c.flows_active(), c.events_lost());
  }
  return o;
}

std::string formatEvent(const v1::Event& e) {
  std::string o = absl::StrCat(formatTime(e.timestamp_unix_ns()), " ", e.type());
  if (e.type() == "config" && e.config().result() == "refused") {  // --- ops ---
    const v1::ConfigEventDetail& c = e.config();
    absl::StrAppend(&o, " refused in phase ", c.phase(), " (based on version ",
                    c.based_on_version(), ", version ", e.config_version(), " stays): ", c.code());
    if (c.error_count()) absl::StrAppend(&o, ", ", c.error_count(), " error(s)");
    for (const auto& err : c.errors()) {
      absl::StrAppend(&o, "\n  error: ", err.file().empty() ? "" : err.file() + ":",
                      err.line() ? absl::StrCat(err.line(), ": ") : std::string(),
                      err.rule().empty() ? "" : absl::StrCat(rules::configErrorSubject(err.section()), " '", err.rule(), "': "),
                      err.field().empty() ? "" : err.field() + ": ", err.reason());
    }
    if (c.errors_size() == 0 && !c.message().empty()) absl::StrAppend(&o, ": ", c.message());
  } else if (e.type() == "config") {
    absl::StrAppend(&o, " committed version ", e.config_version());
  } else if (e.type() == "lb") {  // --- ops --- (lb events carry their fields in the JSON)
    absl::StrAppend(&o, " version ", e.config_version(), " ", e.json());
  } else {
    absl::StrAppend(&o, " ", e.in_iface());
    if (!e.src_ip().empty()) {
      absl::StrAppend(&o, " ", e.proto(), " ", e.src_ip(), ":", e.src_port(), " -> ",
                      e.dest_ip(), ":", e.dest_port());
    } else {
      absl::StrAppend(&o, " non-IP");
    }
    if (e.vlan()) absl::StrAppend(&o, " vlan ", e.vlan());
    if (e.flow_id()) absl::StrAppend(&o, " flow ", e.flow_id());
    if (!e.verdict().empty()) absl::StrAppend(&o, " verdict ", e.verdict());
    if (!e.stage().empty()) absl::StrAppend(&o, " stage ", e.stage());
    if (!e.reason().empty()) absl::StrAppend(&o, " reason ", e.reason());
    if (!e.rule().empty()) absl::StrAppend(&o, " rule ", e.rule());
    if (!e.dns_name().empty()) absl::StrAppend(&o, " name ", e.dns_name());  // DNS filtering
    if (e.tags_size()) absl::StrAppend(&o, " tags ", absl::StrJoin(e.tags(), ","));  // --- dpi ---
    if (e.has_flow()) {
      const auto& f = e.flow();
      absl::StrAppend(&o, " pkts ", f.pkts_toserver(), "/", f.pkts_toclient(), " bytes ",
                      f.bytes_toserver(), "/", f.bytes_toclient());
      if (!f.state().empty()) absl::StrAppend(&o, " state ", f.state());
      if (!f.end_reason().empty()) absl::StrAppend(&o, " ended ", f.end_reason());
    }
  }
  if (e.lost()) absl::StrAppend(&o, "  [", e.lost(), " events lost before this one]");
  return o;
}

std::string formatExplain(const v1::ExplainResponse& r) {
  std::string o;
  absl::StrAppendFormat(&o, "packet     %s\n", r.summary());
  absl::StrAppendFormat(&o, "verdict    %s", r.verdict());
  if (!r.stage().empty()) absl::StrAppend(&o, " at stage ", r.stage());
  if (!r.reason().empty()) absl::StrAppend(&o, ", reason ", r.reason());
  if (!r.rule().empty()) absl::StrAppend(&o, ", rule ", r.rule());
  if (!r.backend().empty()) absl::StrAppend(&o, ", backend ", r.backend());
  absl::StrAppendFormat(&o, "\ngeneration %u\nsteps\n", r.generation());
  for (const auto& s : r.steps()) {
    absl::StrAppendFormat(&o, "  %-10s %-8s %s\n", s.stage().empty() ? "-" : s.stage(),
                          s.decision(), s.detail());
  }
  if (r.http_matches_size() != 0) absl::StrAppend(&o, "http files\n");  // --- http ---
  for (const auto& h : r.http_matches()) {
    absl::StrAppendFormat(&o, "  rule %s (%s)%s\n", h.rule(), h.action(),
                          h.at_flow_end() ? ", if the flow ended here" : "");
    absl::StrAppendFormat(&o, "    transaction %u: %s %s%s", h.tx_id(), h.method(), h.host(), h.url());
    if (h.status() != 0) absl::StrAppendFormat(&o, " -> %u", h.status());
    absl::StrAppendFormat(&o, "\n    file '%s' (%s body): bytes %u..%u of it in this packet, %s, size %u",
                          h.filename(), h.direction(), h.offset_from(), h.offset_to(), h.state(),
                          h.size());
    if (!h.sha256().empty()) absl::StrAppend(&o, ", sha256 ", h.sha256());
    absl::StrAppend(&o, "\n");
  }
  return o;
}

std::string formatApply(const v1::ApplyConfigResponse& r) {
  std::string o = absl::StrFormat(
      "committed version %u (snapshot generation %u): validate %.2f ms, compile %.2f ms, "
      "prepare %.2f ms, persist %.2f ms, publish %.2f ms\n",
      r.version(), r.generation(), r.validate_ms(), r.compile_ms(), r.prepare_ms(),
      r.persist_ms(), r.publish_ms());
  for (const auto& w : r.warnings()) absl::StrAppend(&o, "warning: ", w, "\n");
  return o;
}

std::string formatConfigError(const v1::ConfigError& e) {
  std::string s;
  if (!e.file().empty()) {
    absl::StrAppend(&s, e.file());
    if (e.line() > 0) absl::StrAppend(&s, ":", e.line());
    absl::StrAppend(&s, ": ");
  }
  if (!e.rule().empty()) absl::StrAppend(&s, rules::configErrorSubject(e.section()), " '", e.rule(), "': ");
  if (!e.field().empty()) {
    absl::StrAppend(&s, e.field());
    if (e.index() >= 0 && e.rule().empty()) absl::StrAppend(&s, "[", e.index(), "]");
    absl::StrAppend(&s, ": ");
  } else if (!e.section().empty()) {
    absl::StrAppend(&s, e.section(), ": ");
  }
  absl::StrAppend(&s, e.reason());
  return s;
}

std::vector<v1::ConfigError> configErrorsFromStatus(const grpc::Status& st) {
  std::vector<v1::ConfigError> out;
  if (st.error_details().empty()) return out;
  v1::RpcStatus rs;
  if (!rs.ParseFromString(st.error_details())) return out;
  for (const auto& any : rs.details()) {
    v1::ConfigErrors list;
    if (any.Is<v1::ConfigErrors>() && any.UnpackTo(&list)) {
      out.insert(out.end(), list.errors().begin(), list.errors().end());
    }
  }
  return out;
}

absl::StatusOr<std::vector<DiffLine>> diffConfigs(const v1::ApplianceConfig& committed,
                                                  const v1::ApplianceConfig& proposed) {
  auto a = flatConfig(committed);
  if (!a.ok()) return a.status();
  auto b = flatConfig(proposed);
  if (!b.ok()) return b.status();
  // An empty message or list ("{}", "[]") on one side is no line of its own when the other
  // side fills it: `firewall: {}` against `firewall.rules[0].id` is an addition of rules,
  // not the removal of the firewall section.
  auto filledIn = [](const std::map<std::string, std::string>& m, const std::string& path,
                     const std::string& v) {
    if (v != "{}" && v != "[]") return false;
    auto it = m.lower_bound(path);
    for (; it != m.end() && absl::StartsWith(it->first, path); ++it) {
      char next = it->first.size() > path.size() ? it->first[path.size()] : '\0';
      if (next == '.' || next == '[') return true;
    }
    return false;
  };
  std::vector<DiffLine> out;
  for (const auto& [path, v] : *a) {
    auto it = b->find(path);
    if (it == b->end()) {
      if (filledIn(*b, path, v)) continue;
      out.push_back({DiffLine::kRemoved, path, v, ""});
    } else if (it->second != v) {
      out.push_back({DiffLine::kChanged, path, v, it->second});
    }
  }
  for (const auto& [path, v] : *b) {
    if (!a->count(path) && !filledIn(*a, path, v)) out.push_back({DiffLine::kAdded, path, "", v});
  }
  std::sort(out.begin(), out.end(),
            [](const DiffLine& x, const DiffLine& y) { return x.path < y.path; });
  return out;
}

std::string formatDiff(const std::vector<DiffLine>& lines) {
  std::string o;
  for (const auto& l : lines) {
    switch (l.kind) {
      case DiffLine::kChanged:
        absl::StrAppend(&o, "~ ", l.path, ": ", l.committed, " -> ", l.proposed, "\n");
        break;
      case DiffLine::kAdded:
        absl::StrAppend(&o, "+ ", l.path, ": ", l.proposed, "   (committed: default)\n");
        break;
      case DiffLine::kRemoved:
        absl::StrAppend(&o, "- ", l.path, ": ", l.committed, "   (file: default)\n");
        break;
    }
  }
  return o;
}

absl::StatusOr<v1::ApplianceConfig> configFromAssignments(
    const std::vector<std::string>& assignments, google::protobuf::FieldMask* mask) {
  using google::protobuf::util::FieldMaskUtil;
  if (assignments.empty()) {
    return absl::InvalidArgumentError("no PATH=VALUE given, e.g. dataplane.non_ip=DROP");
  }
  Struct root;
  std::vector<std::string> paths;
  for (const std::string& a : assignments) {
    size_t eq = a.find('=');
    if (eq == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", a, "' is not PATH=VALUE (e.g. dataplane.non_ip=DROP)"));
    }
    std::string path(absl::StripAsciiWhitespace(a.substr(0, eq)));
    std::string text = a.substr(eq + 1);
    if (path == "version") {
      return absl::InvalidArgumentError(
          "'version' is assigned on commit; use --expected-version or --force");
    }
    if (!FieldMaskUtil::IsValidPath<v1::ApplianceConfig>(path)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", path, "' is not a field path of dpu.v1.ApplianceConfig (proto field names, "
                     "e.g. dataplane.flow_table.when_full)"));
    }
    for (const std::string& p : paths) {
      if (p == path || absl::StartsWith(path, p + ".") || absl::StartsWith(p, path + ".")) {
        return absl::InvalidArgumentError(
            absl::StrCat("'", path, "' and '", p, "' overlap; set each field once"));
      }
    }
    paths.push_back(path);
    Value v;
    if (absl::StripAsciiWhitespace(text).empty()) {
      v.set_null_value(google::protobuf::NULL_VALUE);
    } else {
      Struct wrap;
      if (google::protobuf::util::JsonStringToMessage(absl::StrCat("{\"v\":", text, "}"), &wrap)
              .ok()) {
        v = wrap.fields().at("v");
      } else {
        v.set_string_value(text);
      }
    }
    std::vector<std::string> segs = absl::StrSplit(path, '.');
    Struct* cur = &root;
    for (size_t i = 0; i + 1 < segs.size(); ++i) {
      Value& child = (*cur->mutable_fields())[segs[i]];
      cur = child.mutable_struct_value();
    }
    (*cur->mutable_fields())[segs.back()] = v;
    mask->add_paths(path);
  }
  std::string json;
  auto st = google::protobuf::util::MessageToJsonString(root, &json);
  if (!st.ok()) return absl::InternalError(std::string(st.message()));
  v1::ApplianceConfig cfg;
  JsonParseOptions po;
  po.ignore_unknown_fields = false;
  st = google::protobuf::util::JsonStringToMessage(json, &cfg, po);
  if (!st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("values ", json, " do not fit the config: ",
                                                   std::string(st.message())));
  }
  return cfg;
}

absl::StatusOr<std::string> parseHex(const std::string& text) {
  std::string t = text;
  if (absl::StartsWith(t, "0x") || absl::StartsWith(t, "0X")) t = t.substr(2);
  std::string digits;
  for (char c : t) {
    if (c == ' ' || c == ':' || c == '-' || c == '\n' || c == '\t') continue;
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", std::string(1, c), "' is not a hex digit"));
    }
    digits.push_back(c);
  }
  if (digits.empty()) return absl::InvalidArgumentError("no hex bytes");
  if (digits.size() % 2) return absl::InvalidArgumentError("odd number of hex digits");
  std::string out;
  for (size_t i = 0; i < digits.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(digits.substr(i, 2), nullptr, 16)));
  }
  return out;
}

bool readFile(const std::string& path, std::string* out, std::string* err) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *err = path + ": cannot open";
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

}  // namespace dpu::cli
