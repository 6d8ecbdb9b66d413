#include "control/app/summary.h"

#include "rules/compile/dns_parsers.h"  // DNS filtering: action names
#include "rules/compile/firewall_parsers.h"  // firewall action names

#include <arpa/inet.h>

#include <algorithm>
#include <ctime>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/ascii.h"
#include "dataplane/flow/tcp_state.h"

namespace dpu::ctl {
namespace {
// A JSON string of text without control characters (rule ids, warnings): quotes and
// backslashes escaped.
std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\\' || c == '"') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

// --- dpi --- any text (YARA tags and meta values) as a JSON string: utf8Safe, then quotes,
// backslashes and control characters escaped.
std::string jsonText(const std::string& t) {
  std::string out = "\"";
  for (char c : utf8Safe(t)) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (u < 0x20 || u == 0x7f) {
      absl::StrAppend(&out, "\\u00", absl::Hex(u, absl::kZeroPad2));
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

std::string jsonStrOrNull(const char* s) { return s ? absl::StrCat("\"", s, "\"") : "null"; }

}  // namespace

std::string utf8Safe(const std::string& t) {
  std::string out;
  out.reserve(t.size());
  for (size_t i = 0; i < t.size(); ++i) {
    const unsigned char u = static_cast<unsigned char>(t[i]);
    if (u < 0x80) {
      out.push_back(t[i]);
      continue;
    }
    // A whole UTF-8 sequence (2..4 bytes, continuation bytes 10xxxxxx) passes as it is.
    const size_t n = (u & 0xe0) == 0xc0 ? 2 : (u & 0xf0) == 0xe0 ? 3 : (u & 0xf8) == 0xf0 ? 4 : 0;
    bool seq = n != 0 && u >= 0xc2 && u <= 0xf4 && i + n <= t.size();
    for (size_t k = 1; seq && k < n; ++k) seq = (static_cast<unsigned char>(t[i + k]) & 0xc0) == 0x80;
    if (seq) {
      out.append(t, i, n);
      i += n - 1;
    } else {
      absl::StrAppend(&out, "\\x", absl::Hex(u, absl::kZeroPad2));
    }
  }
  return out;
}

std::string isoTime(uint64_t ns) {
  time_t sec = static_cast<time_t>(ns / 1000000000ull);
  uint64_t us = (ns % 1000000000ull) / 1000;
  std::tm tm{};
  gmtime_r(&sec, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  return absl::StrFormat("%s.%06uZ", buf, us);
}

std::string ipToString(const dp::IpAddr& a, uint8_t ip_ver) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (ip_ver == 4) {
    inet_ntop(AF_INET, a.b, buf, sizeof(buf));
  } else {
    inet_ntop(AF_INET6, a.b, buf, sizeof(buf));
  }
  return buf;
}

std::string protoName(uint8_t proto) {
  switch (proto) {
    case 1: return "ICMP";
    case 6: return "TCP";
    case 17: return "UDP";
    case 58: return "IPv6-ICMP";
    case 132: return "SCTP";
    case 47: return "GRE";
    default: return std::to_string(proto);
  }
}

void fillPorts(const dp::DataplaneControl& plane, SummaryInput& in) {
  for (const dp::PortInfo& p : plane.ports()) {
    PortReport& r = in.ports[p.side];
    r.name = absl::StrCat(dp::sideName(p.side), " (", p.name, ")");
    r.rx_packets = p.rx_packets;
    r.rx_bytes = p.rx_bytes;
    r.tx_packets = p.tx_packets;
    r.tx_bytes = p.tx_bytes;
    r.rx_missed = p.rx_missed;
    r.rx_errors = p.rx_errors;
    r.rx_nombuf = p.rx_nombuf;
    r.tx_errors = p.tx_errors;
  }
}

// --- tcp stream --- TCP normalization counters (only when the engine read a segment).
static void appendTcpStreamSummary(const SummaryInput& in, std::string& s, bool json) {
  const auto& t = in.counters.total;
  if (t.tcp_stream[dp::kTcpSegments] == 0) return;
  absl::StrAppend(&s, json ? ",\"tcp_stream\":{" : "\ntcp_stream\n ");
  for (int i = 0; i < dp::kTcpStreamCounterCount; ++i) {
    if (json) {
      absl::StrAppend(&s, i ? "," : "", "\"", dp::tcpStreamCounterName(i), "\":", t.tcp_stream[i]);
    } else {
      absl::StrAppend(&s, " ", dp::tcpStreamCounterName(i), " ", t.tcp_stream[i]);
    }
  }
  if (json) absl::StrAppend(&s, "}");
}

// --- http --- HTTP counters (only when a flow was parsed as HTTP or looked at).
static void appendHttpSummary(const SummaryInput& in, std::string& s, bool json) {
  const auto& t = in.counters.total;
  if (t.http[dp::kHttpFlows] == 0 && t.http[dp::kHttpNotHttp] == 0 && t.http[dp::kHttpNoSlot] == 0) return;
  absl::StrAppend(&s, json ? ",\"http\":{" : "\nhttp\n ");
  for (int i = 0; i < dp::kHttpCounterCount; ++i) {
    if (json) {
      absl::StrAppend(&s, i ? "," : "", "\"", dp::httpCounterName(i), "\":", t.http[i]);
    } else {
      absl::StrAppend(&s, " ", dp::httpCounterName(i), " ", t.http[i]);
    }
  }
  if (json) absl::StrAppend(&s, "}");
}

// --- headline ---
void fillStageReports(const dp::DataplaneControl& plane, const rules::Snapshot& snap,
                      SummaryInput& in) {
  in.fw_rules = plane.ruleCounters();
  in.fw_rule_notes.assign(in.fw_rules.size(), {});
  for (size_t i = 0; i < in.fw_rules.size(); ++i) {
    // ruleCounters() is in rank order, as the compiled rules.
    if (snap.firewall && i < snap.firewall->rules.size() &&
        snap.firewall->rules[i].id == in.fw_rules[i].id) {
      in.fw_rule_notes[i].action = rules::actionName(snap.firewall->rules[i].action);
      in.fw_rule_notes[i].description = snap.firewall->rules[i].description;
    }
  }
  in.dns_lists = plane.dnsLists();
  in.dpi_rules = plane.dpiRuleCounters();
  in.dpi_rule_actions.assign(in.dpi_rules.size(), "");
  in.dpi_enabled = snap.dpi != nullptr;
  if (snap.dpi && !snap.dpi->rules.empty() && !snap.dpi_settings.http.enabled) {
    // --- http --- turned off by the config (dpi.http.enabled false): say what it costs.
    in.warnings.push_back(
        "dpi: http parsing off (dpi.http.enabled false): file rules see only raw stream bytes "
        "(no de-chunking or decompression; offset 0 and filesize are the stream's)");
  }
  if (snap.dpi && snap.dpi_settings.http.enabled) {
    // A rule set scoped to the raw stream does not see the files of HTTP flows either.
    for (const rules::DpiScope& sc : snap.dpi_settings.scopes) {
      if (sc.inspect != rules::DpiInspect::kStream) continue;
      in.warnings.push_back(absl::StrCat(
          "dpi: rule set '", sc.source, "' inspects the raw stream only (dpi.scopes "
          "INSPECT_STREAM): its rules do not see HTTP files (de-chunked, decompressed bodies)"));
    }
  }
  if (snap.dpi && snap.dpi->sigs) {  // --- signatures ---
    in.sig_enabled = true;
    in.sig_accepted = snap.dpi->sigs->rules.size();
    in.sig_refused = snap.dpi->sigs->refused;
  }
  if (snap.dpi) {
    in.dpi_accepted = snap.dpi->rules.size();
    in.dpi_unsupported = snap.dpi->unsupported.size();
    for (size_t i = 0; i < in.dpi_rules.size() && i < snap.dpi->rules.size(); ++i) {
      if (snap.dpi->rules[i].id() == in.dpi_rules[i].id) {
        in.dpi_rule_actions[i] = rules::dpiActionName(snap.dpi->rules[i].action);
      }
    }
  }
  in.lb_backends.clear();
  if (snap.lb) {
    std::map<uint64_t, dp::LbBackendStats> stats;
    for (const dp::LbBackendStats& b : plane.lbBackendStats()) stats.emplace(b.identity, b);
    for (const auto& svc : snap.lb->services) {
      for (const rules::CompiledLbBackend& b : svc->backends) {
        SummaryInput::LbBackendFlows r{svc->model.id, b.id, 0, 0};
        if (auto it = stats.find(b.identity); it != stats.end()) {
          r.flows = it->second.flows_total;
          r.packets = it->second.packets;
        }
        in.lb_backends.push_back(std::move(r));
      }
    }
  }
}

void noteDnsBlock(const dp::Event& e, SummaryInput& in) {
  if (e.type != dp::EventType::kDns) return;
  for (SummaryInput::DnsBlock& b : in.dns_blocked) {
    if (b.name == e.dns_name && b.list == e.dns_list) {
      ++b.queries;
      return;
    }
  }
  if (in.dns_blocked.size() >= SummaryInput::kDnsBlockedNames) {
    ++in.dns_blocked_other;
    return;
  }
  in.dns_blocked.push_back(
      {e.dns_name, e.dns_list,
       rules::dnsActionName(static_cast<rules::DnsAction>(e.dns_action)), 1});
}

namespace {

std::string nOf(uint64_t n, const char* one, const char* many) {
  return absl::StrCat(n, " ", n == 1 ? one : many);
}

// What a DNS list's action does to the query, for the headline.
std::string dnsActionWords(const std::string& action) {
  if (action == "nxdomain") return "answered NXDOMAIN";
  if (action == "nodata") return "answered with no records";
  if (action == "sinkhole") return "answered with the sinkhole address";
  if (action == "refuse") return "answered REFUSED";
  if (action == "drop") return "dropped";
  return action;
}

// The first lines of the summary: one line per rule, list or service that acted, so that
// "what was blocked, by which rule, why" reads at a glance. Stages that did nothing print
// nothing; the counters behind each line are in the details below.
void appendHeadline(const SummaryInput& in, std::string& s) {
  const auto& t = in.counters.total;
  const uint64_t in_pkts = t.rx_packets[0] + t.rx_packets[1];
  absl::StrAppend(&s, absl::StrFormat(
      "\nwhat happened: %u packets in, %u forwarded, %u dropped, %u rejected\n", in_pkts,
      t.verdicts[static_cast<int>(dp::Verdict::kForward)],
      t.verdicts[static_cast<int>(dp::Verdict::kDrop)],
      t.verdicts[static_cast<int>(dp::Verdict::kReject)]));
  auto line = [&s](const char* stage, const std::string& text) {
    absl::StrAppend(&s, absl::StrFormat("  %-9s %s\n", stage, text));
  };
  // Firewall: every deny / reject rule that matched, with its description as the why.
  uint64_t by_rules = 0;
  for (size_t i = 0; i < in.fw_rules.size(); ++i) {
    const dp::RuleCounters& r = in.fw_rules[i];
    const std::string action = i < in.fw_rule_notes.size() ? in.fw_rule_notes[i].action : "";
    if (r.packets == 0 || action == "allow") continue;
    by_rules += r.packets;
    std::string text = absl::StrCat(action == "reject" ? "rejected " : "denied ",
                                    nOf(r.flows, "flow", "flows"), " (",
                                    nOf(r.packets, "packet", "packets"), ") by rule ", r.id);
    if (i < in.fw_rule_notes.size() && !in.fw_rule_notes[i].description.empty()) {
      absl::StrAppend(&text, ": \"", in.fw_rule_notes[i].description, "\"");
    }
    if (action == "reject") absl::StrAppend(&text, " (answered: TCP reset / ICMP unreachable)");
    line("firewall", text);
  }
  if (t.fw_denied + t.fw_rejected > by_rules) {
    line("firewall", absl::StrCat(nOf(t.fw_denied + t.fw_rejected - by_rules, "packet", "packets"),
                                  " denied by the default policy (no rule matched)"));
  }
  // DNS: the names blocked (replay) or the lists that blocked (live).
  if (!in.dns_blocked.empty()) {
    for (const SummaryInput::DnsBlock& b : in.dns_blocked) {
      line("dns", absl::StrCat("blocked ", b.name, " (", nOf(b.queries, "query", "queries"),
                               "): list ", b.list, ", ", dnsActionWords(b.action)));
    }
    if (in.dns_blocked_other) {
      line("dns", absl::StrCat("blocked ", nOf(in.dns_blocked_other, "more query", "more queries"),
                               " for other names (the events have them all)"));
    }
  } else {
    for (const dp::DnsListCounters& l : in.dns_lists) {
      if (l.blocked == 0) continue;
      line("dns", absl::StrCat("list ", l.name, " blocked ", nOf(l.blocked, "query", "queries"),
                               ", ", dnsActionWords(l.action)));
    }
  }
  const uint64_t dns_queries = t.dns[dp::kDnsQueries];
  if (dns_queries) {
    // kDnsBlocked counts blocked queries and cloaked resolver answers.
    const uint64_t cloaked = std::min(t.dns[dp::kDnsCloaked], t.dns[dp::kDnsBlocked]);
    const uint64_t blocked = std::min(dns_queries, t.dns[dp::kDnsBlocked] - cloaked);
    std::string text = absl::StrCat(nOf(dns_queries, "query", "queries"), " inspected: ",
                                    blocked, " blocked, ", dns_queries - blocked, " passed on; ",
                                    nOf(t.dns[dp::kDnsAnswersSent], "answer", "answers"),
                                    " sent by the appliance");
    if (cloaked) {
      absl::StrAppend(&text, "; ", nOf(cloaked, "resolver answer", "resolver answers"),
                      " replaced (CNAME to a blocked name)");
    }
    line("dns", text);
  }
  // DPI: the rule set, then every rule that matched with what its action did.
  const bool yara_shown = in.dpi_enabled && (in.dpi_accepted || in.dpi_unsupported || !in.sig_enabled);
  if (yara_shown) {
    std::string text = absl::StrCat(nOf(in.dpi_accepted, "YARA rule", "YARA rules"), " loaded");
    if (in.dpi_unsupported) absl::StrAppend(&text, " (", in.dpi_unsupported, " unsupported, not loaded)");
    uint64_t matched = 0;
    for (const dp::DpiRuleCounters& r : in.dpi_rules) matched += r.matches ? 1 : 0;
    absl::StrAppend(&text, ", ", matched, " matched; ", t.dpi_bytes, " bytes scanned");
    line("dpi", text);
    for (size_t i = 0; i < in.dpi_rules.size(); ++i) {
      const dp::DpiRuleCounters& r = in.dpi_rules[i];
      if (!r.matches) continue;
      const std::string action = i < in.dpi_rule_actions.size() ? in.dpi_rule_actions[i] : "";
      const char* effect = action == "reset"  ? "flow reset (TCP RST both ways)"
                           : action == "drop" ? "flow dropped"
                                              : "alert event, traffic forwarded";
      line("dpi", absl::StrCat("rule ", r.id, " matched ", nOf(r.matches, "time", "times"), ": ",
                               action.empty() ? "" : action, action.empty() ? "" : ", ", effect));
    }
  }
  if (in.sig_enabled) {  // --- signatures ---
    std::string text = absl::StrCat(nOf(in.sig_accepted, "signature", "signatures"), " loaded");
    if (!in.sig_refused.empty()) absl::StrAppend(&text, " (", in.sig_refused.size(), " refused, not loaded)");
    absl::StrAppend(&text, ", ", in.sig_fired.size(), " fired");
    line("sig", text);
    for (const SummaryInput::SigFired& f : in.sig_fired)
      line("sig", absl::StrCat("[", f.gid, ":", f.sid, ":", f.rev, "] ", f.msg, ": ",
                               nOf(f.alerts, "alert", "alerts"), ", ", f.action));
  }
  // Load balancer: flows per backend, per service that got any.
  for (size_t i = 0; i < in.lb_backends.size();) {
    size_t j = i;
    uint64_t flows = 0;
    std::string parts;
    for (; j < in.lb_backends.size() && in.lb_backends[j].service == in.lb_backends[i].service; ++j) {
      flows += in.lb_backends[j].flows;
      absl::StrAppend(&parts, j > i ? ", " : "", in.lb_backends[j].backend, " ",
                      in.lb_backends[j].flows);
    }
    if (flows) {
      line("lb", absl::StrCat("service ", in.lb_backends[i].service, ": ",
                              nOf(flows, "flow", "flows"), " over its backends: ", parts));
    }
    i = j;
  }
  // Drops no stage rule explains: malformed frames, fragments, flow table, ...
  std::string other;
  uint64_t other_n = 0;
  for (int r = 1; r < static_cast<int>(dp::DropReason::kFirewallDeny); ++r) {
    if (!t.drops[r]) continue;
    other_n += t.drops[r];
    absl::StrAppend(&other, other.empty() ? "" : ", ",
                    dp::dropReasonName(static_cast<dp::DropReason>(r)), " ", t.drops[r]);
  }
  if (other_n) line("other", absl::StrCat("dropped ", nOf(other_n, "packet", "packets"), ": ", other));
}

}  // namespace

// DNS filtering: stage counters, blocks by action, per-list counters (only when DNS ran or
// lists are configured).
static void appendDnsSummary(const SummaryInput& in, std::string& s) {
  const auto& t = in.counters.total;
  bool any = !in.dns_lists.empty();
  for (int i = 0; i < dp::kDnsCounterCount; ++i) any = any || t.dns[i];
  if (!any) return;
  absl::StrAppend(&s, "\ndns\n ");
  for (int i = 0; i < dp::kDnsCounterCount; ++i) {
    absl::StrAppend(&s, " ", dp::dnsCounterName(i), " ", t.dns[i]);
  }
  absl::StrAppend(&s, "\n  blocks by action:");
  for (int a = 2; a <= static_cast<int>(rules::DnsAction::kRefuse); ++a) {
    absl::StrAppend(&s, " ", rules::dnsActionName(static_cast<rules::DnsAction>(a)), " ",
                    t.dns_action[a]);
  }
  absl::StrAppend(&s, "\n");
  if (in.dns_lists.empty()) return;
  absl::StrAppend(&s, absl::StrFormat("  %-24s %-9s %10s %10s %10s\n", "list", "action",
                                      "names", "blocked", "allowed"));
  for (const auto& l : in.dns_lists) {
    absl::StrAppend(&s, absl::StrFormat("  %-24s %-9s %10u %10u %10u\n", l.name, l.action, l.names,
                                        l.blocked, l.allowed));
  }
}

static void appendDnsSummaryJson(const SummaryInput& in, std::string& s) {
  const auto& t = in.counters.total;
  bool any = !in.dns_lists.empty();
  for (int i = 0; i < dp::kDnsCounterCount; ++i) any = any || t.dns[i];
  if (!any) return;  // no DNS section configured and nothing counted: no "dns" key
  absl::StrAppend(&s, ",\"dns\":{");
  for (int i = 0; i < dp::kDnsCounterCount; ++i) {
    absl::StrAppend(&s, "\"", dp::dnsCounterName(i), "\":", t.dns[i], ",");
  }
  absl::StrAppend(&s, "\"blocks_by_action\":{");
  for (int a = 2; a <= static_cast<int>(rules::DnsAction::kRefuse); ++a) {
    absl::StrAppend(&s, a > 2 ? "," : "", "\"",
                    rules::dnsActionName(static_cast<rules::DnsAction>(a)), "\":", t.dns_action[a]);
  }
  absl::StrAppend(&s, "},\"lists\":[");
  for (size_t i = 0; i < in.dns_lists.size(); ++i) {
    const auto& l = in.dns_lists[i];
    absl::StrAppend(&s, i ? "," : "", "{\"name\":\"", l.name, "\",\"action\":\"", l.action,
                    "\",\"names\":", l.names, ",\"skipped_lines\":", l.skipped_lines,
                    ",\"blocked\":", l.blocked, ",\"allowed\":", l.allowed, "}");
  }
  absl::StrAppend(&s, "]}");
}

// --- perf --- Where the workers' cycles went, per received packet, and the latency of
// forwarded packets through them. Timing-dependent, so text only (summary.json is compared
// byte for byte by the pcap regression cases).
void appendPerfSummary(const dp::CountersSnapshot::Flat& t, std::string& s) {
  uint64_t busy = 0;
  for (int k = 0; k < dp::kCyCount; ++k) {
    if (k != dp::kCyIdle) busy += t.cycles[k];
  }
  const uint64_t rx = t.rx_packets[0] + t.rx_packets[1];
  if (busy == 0 || rx == 0 || t.tsc_hz == 0) return;
  absl::StrAppend(&s, absl::StrFormat("\nworker cycles per received packet (TSC %.3f GHz)\n ",
                                      static_cast<double>(t.tsc_hz) / 1e9));
  for (int k = 0; k < dp::kCyCount; ++k) {
    if (k == dp::kCyIdle || !t.cycles[k]) continue;
    absl::StrAppend(&s, absl::StrFormat(" %s %.1f", dp::cycleBucketName(k),
                                        static_cast<double>(t.cycles[k]) / rx));
  }
  absl::StrAppend(&s, absl::StrFormat("  = %.1f busy; idle %.3f s\n",
                                      static_cast<double>(busy) / rx,
                                      static_cast<double>(t.cycles[dp::kCyIdle]) / t.tsc_hz));
  uint64_t n = 0;
  for (uint64_t v : t.latency) n += v;
  if (n == 0) return;
  auto us = [](uint64_t ns) { return static_cast<double>(ns) / 1000.0; };
  absl::StrAppend(&s, absl::StrFormat(
                          "latency through the workers (%u forwarded packets): p50 %.1f us   "
                          "p99 %.1f us   p99.9 %.1f us   max %.1f us\n",
                          n, us(dp::latencyQuantile(t.latency, 0.5, t.latency_max_ns)),
                          us(dp::latencyQuantile(t.latency, 0.99, t.latency_max_ns)),
                          us(dp::latencyQuantile(t.latency, 0.999, t.latency_max_ns)), us(t.latency_max_ns)));
}

std::string formatSummary(const SummaryInput& in) {
  const auto& t = in.counters.total;
  std::string s;
  absl::StrAppend(&s, in.title, "\n");
  absl::StrAppend(&s, absl::StrFormat("config version %u, snapshot generation %u, %u worker(s)\n",
                                      in.config_version, in.generation,
                                      in.counters.per_worker.size()));
  for (const std::string& n : in.notes) absl::StrAppend(&s, n, "\n");
  appendHeadline(in, s);  // --- headline ---
  absl::StrAppend(&s, "\ndetails\n\nports\n");
  absl::StrAppend(&s, absl::StrFormat("  %-22s %12s %14s %12s %14s\n", "side", "rx packets",
                                      "rx bytes", "tx packets", "tx bytes"));
  for (int p = 0; p < 2; ++p) {
    const PortReport& r = in.ports[p];
    absl::StrAppend(&s, absl::StrFormat("  %-22s %12u %14u %12u %14u\n", r.name, r.rx_packets,
                                        r.rx_bytes, r.tx_packets, r.tx_bytes));
    if (r.rx_missed || r.rx_nombuf || r.rx_errors || r.tx_errors) {
      absl::StrAppend(&s, absl::StrFormat(
                              "  %-22s rx missed %u, rx no mbuf %u, rx errors %u, tx errors %u\n",
                              "", r.rx_missed, r.rx_nombuf, r.rx_errors, r.tx_errors));
    }
  }
  uint64_t in_pkts = t.rx_packets[0] + t.rx_packets[1];
  absl::StrAppend(&s, absl::StrFormat(
                          "\nverdicts (%u packets in)\n  forwarded %u   dropped %u   rejected %u\n",
                          in_pkts, t.verdicts[static_cast<int>(dp::Verdict::kForward)],
                          t.verdicts[static_cast<int>(dp::Verdict::kDrop)],
                          t.verdicts[static_cast<int>(dp::Verdict::kReject)]));
  if (t.non_ip_forwarded || t.malformed_forwarded || t.untracked_forwarded) {
    absl::StrAppend(&s, absl::StrFormat(
                            "  forwarded without a flow: non-IP %u, malformed %u, untracked %u\n",
                            t.non_ip_forwarded, t.malformed_forwarded, t.untracked_forwarded));
  }
  if (t.vxlan_not_parsed || t.geneve_not_parsed || t.gre_not_parsed) {
    absl::StrAppend(&s, absl::StrFormat(
                            "  not the tunnel its port or protocol names, judged as is: VXLAN %u, Geneve %u, GRE %u\n",
                            t.vxlan_not_parsed, t.geneve_not_parsed, t.gre_not_parsed));
  }
  absl::StrAppend(&s, "\ndrops by reason\n");
  bool any = false;
  for (int r = 1; r < static_cast<int>(dp::DropReason::kCount); ++r) {
    if (!t.drops[r]) continue;
    any = true;
    absl::StrAppend(&s, absl::StrFormat("  %-28s %12u\n",
                                        dp::dropReasonName(static_cast<dp::DropReason>(r)),
                                        t.drops[r]));
  }
  if (!any) absl::StrAppend(&s, "  (none)\n");
  absl::StrAppend(&s, absl::StrFormat(
                          "\nflows\n  created %u   expired %u   active at end %u   picked up "
                          "mid-stream %u\n  table full %u   packets judged by cached flow "
                          "verdict %u\n",
                          t.flows_created, t.flows_expired, in.flows_active_at_end,
                          t.flows_midstream, t.flow_table_full, t.flow_cache_hits));
  absl::StrAppend(&s, absl::StrFormat(
                          "\nfragments\n  packets %u   held for first fragment %u   overlaps %u"
                          "   first fragment missing %u\n",
                          t.frag_packets, t.frag_held, t.frag_overlaps, t.frag_timeouts));
  if (t.frag_reassembled || t.frag_atomic || t.frag_overlap_conflicts || t.frag_fail_open ||
      t.frag_fail_closed) {
    absl::StrAppend(&s, absl::StrFormat(
                            "  reassembled for inspection %u   atomic %u   overlaps identical %u"
                            " / different %u\n  exhausted: no buffer %u   too big %u   hold full"
                            " %u (fail open %u, fail closed %u)\n",
                            t.frag_reassembled, t.frag_atomic, t.frag_overlap_identical,
                            t.frag_overlap_conflicts, t.frag_no_buffer, t.frag_too_big,
                            t.frag_hold_full, t.frag_fail_open, t.frag_fail_closed));
  }
  if (t.fw_allowed || t.fw_denied || t.fw_rejected || !in.fw_rules.empty()) {
    absl::StrAppend(&s, absl::StrFormat(
                            "\nfirewall\n  judged: allowed %u   denied %u   rejected %u"
                            "   (TCP resets sent %u, ICMP unreachables sent %u)\n",
                            t.fw_allowed, t.fw_denied, t.fw_rejected, t.fw_rst_sent,
                            t.fw_icmp_sent));
    if (t.fw_reject_nombuf || t.fw_reject_suppressed) {
      absl::StrAppend(&s, absl::StrFormat("  rejects not answered: no mbuf %u, suppressed %u\n",
                                          t.fw_reject_nombuf, t.fw_reject_suppressed));
    }
    if (!in.fw_rules.empty()) {
      absl::StrAppend(&s, absl::StrFormat("  %-28s %12s %14s %8s\n", "rule", "packets", "bytes",
                                          "flows"));
      for (const dp::RuleCounters& r : in.fw_rules) {
        absl::StrAppend(&s, absl::StrFormat("  %-28s %12u %14u %8u\n", r.id, r.packets, r.bytes,
                                            r.flows));
      }
    }
  }
  absl::StrAppend(&s, "\nstages\n");
  absl::StrAppend(&s, absl::StrFormat("  %-12s %12s %12s\n", "stage", "packets in", "dropped"));
  for (int st = 1; st < static_cast<int>(dp::Stage::kCount); ++st) {
    if (!t.stage_packets[st] && !t.stage_drops[st]) continue;
    absl::StrAppend(&s, absl::StrFormat("  %-12s %12u %12u\n",
                                        dp::stageName(static_cast<dp::Stage>(st)),
                                        t.stage_packets[st], t.stage_drops[st]));
  }
  // --- lb --- (only when the load balancer did something)
  if (t.lb_flows_balanced || t.lb_untracked || t.lb_key_missing || t.lb_nat_reversed ||
      t.lb_flows_reset || t.lb_flows_rehashed) {
    absl::StrAppend(&s, absl::StrFormat(
                            "\nload balancer\n  flows balanced %u   re-hashed %u   reset %u   "
                            "service gone %u\n  key field missing %u   untracked packets %u   "
                            "NAT answers translated %u   NAT without reverse entry %u\n",
                            t.lb_flows_balanced, t.lb_flows_rehashed, t.lb_flows_reset,
                            t.lb_service_gone, t.lb_key_missing, t.lb_untracked,
                            t.lb_nat_reversed, t.lb_nat_no_reverse));
  }
  if (t.dpi_bytes || t.dpi_alerts || t.dpi_drops || t.dpi_resets || t.dpi_gaps) {  // --- dpi ---
    absl::StrAppend(&s, absl::StrFormat(
        "\ndpi: %u bytes scanned, rules fired: %u alert, %u drop, %u reset; %u gaps, %u at depth, "
        "%u not inspected (no stream)\n",
        t.dpi_bytes, t.dpi_alerts, t.dpi_drops, t.dpi_resets, t.dpi_gaps, t.dpi_depth,
        t.dpi_no_stream));
    if (t.dpi_overflow)
      absl::StrAppend(&s, absl::StrFormat("  %u compressed streams moved to full streams (slot too small)\n",
                                          t.dpi_overflow));
    if (t.dpi_rst_sent) absl::StrAppend(&s, absl::StrFormat("  %u TCP RSTs sent (reset rules)\n", t.dpi_rst_sent));
    if (t.dpi_pf_confirmed || t.dpi_pf_rejected || t.dpi_pf_errors || t.dpi_no_window)
      absl::StrAppend(&s, absl::StrFormat(
          "  prefilter candidates: %u confirmed, %u rejected, %u undecided (match limit); "
          "%u directions without a history window\n",
          t.dpi_pf_confirmed, t.dpi_pf_rejected, t.dpi_pf_errors, t.dpi_no_window));
  }
  if (in.dpi_enabled) {  // --- dpi --- the rule set and the rules that matched
    uint64_t matched = 0;
    for (const dp::DpiRuleCounters& r : in.dpi_rules) matched += r.matches != 0;
    absl::StrAppend(&s, absl::StrFormat(
                            "dpi rules: %u loaded, %u matched; %u unsupported (not loaded)\n",
                            in.dpi_accepted, matched, in.dpi_unsupported));
    bool header = false;
    for (const dp::DpiRuleCounters& r : in.dpi_rules) {
      if (!r.matches) continue;
      if (!header) absl::StrAppend(&s, absl::StrFormat("  %-40s %12s\n", "rule", "matches"));
      header = true;
      absl::StrAppend(&s, absl::StrFormat("  %-40s %12u\n", r.id, r.matches));
    }
  }
  if (in.sig_enabled) {  // --- signatures ---
    const auto& tc = in.counters.total;
    absl::StrAppend(&s, absl::StrFormat(
        "signatures: %u loaded, %u refused, %u fired; %u inspections, %u candidates, %u matched; "
        "%u alerts, %u drops, %u rejects, %u passes\n",
        in.sig_accepted, in.sig_refused.size(), in.sig_fired.size(), tc.sig_inspected,
        tc.sig_candidates, tc.sig_matches, tc.sig_alerts, tc.sig_drops, tc.sig_rejects, tc.sig_passes));
    if (tc.sig_pcre_errors || tc.sig_flowbits_full || tc.sig_threshold_full || tc.sig_hits_dropped)
      absl::StrAppend(&s, absl::StrFormat(
          "  undecided pcre (match limit) %u, flowbits without room %u, thresholds without room "
          "%u, hits beyond 64 per packet %u\n",
          tc.sig_pcre_errors, tc.sig_flowbits_full, tc.sig_threshold_full, tc.sig_hits_dropped));
    std::map<std::string, size_t> why;
    for (const rules::SigRefusal& r : in.sig_refused) ++why[r.reason];
    std::vector<std::pair<size_t, std::string>> top;
    for (auto& [k, n] : why) top.push_back({n, k});
    std::sort(top.rbegin(), top.rend());
    for (size_t k = 0; k < top.size() && k < 10; ++k)
      absl::StrAppend(&s, absl::StrFormat("  refused %6u: %s\n", top[k].first, top[k].second));
    if (top.size() > 10) absl::StrAppend(&s, "  (more reasons: --summary-json lists every refusal)\n");
  }
  appendTcpStreamSummary(in, s, false);  // --- tcp stream ---
  appendHttpSummary(in, s, false);  // --- http ---
  appendDnsSummary(in, s);  // DNS filtering
  appendPerfSummary(t, s);  // --- perf ---
  if (t.events_lost) absl::StrAppend(&s, absl::StrFormat("\nevents lost: %u\n", t.events_lost));
  for (const std::string& w : in.warnings) absl::StrAppend(&s, "\nwarning: ", w, "\n");
  return s;
}

std::string summaryJson(const SummaryInput& in) {
  const auto& t = in.counters.total;
  std::string s = "{";
  absl::StrAppend(&s, "\"config_version\":", in.config_version, ",\"generation\":", in.generation,
                  ",\"workers\":", in.counters.per_worker.size(), ",\"ports\":{");
  for (int p = 0; p < 2; ++p) {
    const PortReport& r = in.ports[p];
    absl::StrAppend(&s, p ? "," : "", "\"", dp::sideName(p), "\":{\"rx_packets\":", r.rx_packets,
                    ",\"rx_bytes\":", r.rx_bytes, ",\"tx_packets\":", r.tx_packets,
                    ",\"tx_bytes\":", r.tx_bytes, "}");
  }
  absl::StrAppend(&s, "},\"verdicts\":{\"forward\":", t.verdicts[1], ",\"drop\":", t.verdicts[2],
                  ",\"reject\":", t.verdicts[3], "},\"drops\":{");
  bool first = true;
  for (int r = 1; r < static_cast<int>(dp::DropReason::kCount); ++r) {
    if (!t.drops[r]) continue;
    absl::StrAppend(&s, first ? "" : ",", "\"", dp::dropReasonName(static_cast<dp::DropReason>(r)),
                    "\":", t.drops[r]);
    first = false;
  }
  absl::StrAppend(&s, "},\"flows\":{\"created\":", t.flows_created, ",\"expired\":",
                  t.flows_expired, ",\"active_at_end\":", in.flows_active_at_end,
                  ",\"midstream\":", t.flows_midstream, ",\"table_full\":", t.flow_table_full,
                  "},\"fragments\":{\"packets\":", t.frag_packets, ",\"held\":", t.frag_held,
                  ",\"overlaps\":", t.frag_overlaps, ",\"first_missing\":", t.frag_timeouts,
                  "");
  // Reassembly for inspection: only when it did something (older summaries unchanged).
  if (t.frag_reassembled | t.frag_atomic | t.frag_overlap_identical | t.frag_overlap_conflicts |
      t.frag_no_buffer | t.frag_too_big | t.frag_hold_full | t.frag_fail_open |
      t.frag_fail_closed) {
    absl::StrAppend(&s, ",\"reassembled\":", t.frag_reassembled, ",\"atomic\":", t.frag_atomic,
                    ",\"overlap_identical\":", t.frag_overlap_identical,
                    ",\"overlap_conflicts\":", t.frag_overlap_conflicts,
                    ",\"no_buffer\":", t.frag_no_buffer, ",\"too_big\":", t.frag_too_big,
                    ",\"hold_full\":", t.frag_hold_full, ",\"fail_open\":", t.frag_fail_open,
                    ",\"fail_closed\":", t.frag_fail_closed);
  }
  absl::StrAppend(&s, "},\"stages\":{");
  first = true;
  for (int st = 1; st < static_cast<int>(dp::Stage::kCount); ++st) {
    absl::StrAppend(&s, first ? "" : ",", "\"", dp::stageName(static_cast<dp::Stage>(st)),
                    "\":{\"packets\":", t.stage_packets[st], ",\"dropped\":", t.stage_drops[st],
                    "}");
    first = false;
  }
  absl::StrAppend(&s, "},\"firewall\":{\"allowed\":", t.fw_allowed, ",\"denied\":", t.fw_denied,
                  ",\"rejected\":", t.fw_rejected, ",\"rst_sent\":", t.fw_rst_sent,
                  ",\"icmp_sent\":", t.fw_icmp_sent, ",\"reject_nombuf\":", t.fw_reject_nombuf,
                  ",\"reject_suppressed\":", t.fw_reject_suppressed, ",\"rules\":[");
  for (size_t i = 0; i < in.fw_rules.size(); ++i) {
    const dp::RuleCounters& r = in.fw_rules[i];
    absl::StrAppend(&s, i ? "," : "", "{\"id\":\"", r.id, "\",\"packets\":", r.packets,
                    ",\"bytes\":", r.bytes, ",\"flows\":", r.flows, "}");
  }
  absl::StrAppend(&s, "]");
  absl::StrAppend(&s, "},\"forwarded_without_flow\":{\"non_ip\":", t.non_ip_forwarded,
                  ",\"malformed\":", t.malformed_forwarded, ",\"untracked\":",
                  t.untracked_forwarded, "}");
  // --- tunnels --- only when a datagram on a tunnel port was not the tunnel (other cases'
  // summaries stay as they are)
  if (t.vxlan_not_parsed || t.geneve_not_parsed || t.gre_not_parsed) {
    absl::StrAppend(&s, ",\"tunnel_not_parsed\":{\"vxlan\":", t.vxlan_not_parsed,
                    ",\"geneve\":", t.geneve_not_parsed, ",\"gre\":", t.gre_not_parsed, "}");
  }
  // --- lb --- (only when the load balancer did something: other cases keep their output)
  if (t.lb_flows_balanced || t.lb_untracked || t.lb_key_missing || t.lb_nat_reversed ||
      t.lb_flows_reset || t.lb_flows_rehashed) {
    absl::StrAppend(&s, ",\"lb\":{\"flows_balanced\":", t.lb_flows_balanced,
                    ",\"flows_rehashed\":", t.lb_flows_rehashed, ",\"flows_reset\":",
                    t.lb_flows_reset, ",\"service_gone\":", t.lb_service_gone,
                    ",\"key_missing\":", t.lb_key_missing, ",\"untracked\":", t.lb_untracked,
                    ",\"nat_reversed\":", t.lb_nat_reversed, ",\"nat_no_reverse\":",
                    t.lb_nat_no_reverse, ",\"counters_full\":", t.lb_counters_full,
                    ",\"fragments_followed\":", t.lb_fragments_followed,
                    ",\"nat_reverse_created\":", t.lb_nat_reverse_created, "}");
  }
  // --- dpi --- only when DPI did something (the other cases' summaries stay as they are)
  if (t.dpi_bytes || t.dpi_alerts || t.dpi_drops || t.dpi_resets || t.dpi_gaps || t.dpi_no_stream) {
    absl::StrAppend(&s, ",\"dpi\":{\"bytes_scanned\":", t.dpi_bytes, ",\"alerts\":", t.dpi_alerts,
                    ",\"drops\":", t.dpi_drops, ",\"resets\":", t.dpi_resets, ",\"gaps\":",
                    t.dpi_gaps, ",\"depth_reached\":", t.dpi_depth, ",\"no_stream\":",
                    t.dpi_no_stream);
    if (t.dpi_overflow) absl::StrAppend(&s, ",\"stream_overflow\":", t.dpi_overflow);
    if (t.dpi_rst_sent) absl::StrAppend(&s, ",\"rst_sent\":", t.dpi_rst_sent);
    if (t.dpi_pf_confirmed || t.dpi_pf_rejected || t.dpi_pf_errors || t.dpi_no_window)
      absl::StrAppend(&s, ",\"prefilter\":{\"confirmed\":", t.dpi_pf_confirmed, ",\"rejected\":",
                      t.dpi_pf_rejected, ",\"errors\":", t.dpi_pf_errors, ",\"no_window\":",
                      t.dpi_no_window, "}");
    absl::StrAppend(&s, "}");
  }
  if (in.dpi_enabled) {  // --- dpi --- the rule set; rules that matched
    absl::StrAppend(&s, ",\"dpi_rules\":{\"accepted\":", in.dpi_accepted, ",\"unsupported\":",
                    in.dpi_unsupported, ",\"matches\":{");
    bool first_rule = true;
    for (const dp::DpiRuleCounters& r : in.dpi_rules) {
      if (!r.matches) continue;
      absl::StrAppend(&s, first_rule ? "" : ",", jsonText(r.id), ":", r.matches);
      first_rule = false;
    }
    absl::StrAppend(&s, "}}");
  }
  if (in.sig_enabled) {  // --- signatures ---
    const auto& tc = in.counters.total;
    absl::StrAppend(&s, ",\"signatures\":{\"accepted\":", in.sig_accepted, ",\"refused\":[");
    for (size_t k = 0; k < in.sig_refused.size(); ++k) {
      const rules::SigRefusal& r = in.sig_refused[k];
      absl::StrAppend(&s, k ? "," : "", "{\"sid\":", r.sid, ",\"source\":", jsonText(r.source),
                      ",\"line\":", r.line, ",\"reason\":", jsonText(r.reason), "}");
    }
    absl::StrAppend(&s, "],\"fired\":[");
    for (size_t k = 0; k < in.sig_fired.size(); ++k) {
      const SummaryInput::SigFired& f = in.sig_fired[k];
      absl::StrAppend(&s, k ? "," : "", "{\"gid\":", f.gid, ",\"sid\":", f.sid, ",\"rev\":", f.rev,
                      ",\"signature\":", jsonText(f.msg), ",\"action\":\"", f.action,
                      "\",\"alerts\":", f.alerts, "}");
    }
    absl::StrAppend(&s, "],\"inspected\":", tc.sig_inspected, ",\"candidates\":", tc.sig_candidates,
                    ",\"matched\":", tc.sig_matches, ",\"alerts\":", tc.sig_alerts, ",\"drops\":",
                    tc.sig_drops, ",\"rejects\":", tc.sig_rejects, ",\"passes\":", tc.sig_passes,
                    ",\"pcre_errors\":", tc.sig_pcre_errors, ",\"flowbits_full\":", tc.sig_flowbits_full,
                    ",\"threshold_full\":", tc.sig_threshold_full, ",\"hits_dropped\":",
                    tc.sig_hits_dropped, "}");
  }
  appendTcpStreamSummary(in, s, true);  // --- tcp stream --- ,"tcp_stream":{...}
  appendHttpSummary(in, s, true);  // --- http --- ,"http":{...}
  appendDnsSummaryJson(in, s);  // DNS filtering: ,"dns":{...}
  // Many workers: what each judged, so that the totals above can be checked as their sums
  // (and software distribution's hand-offs seen). Absent with one worker.
  if (in.counters.per_worker.size() > 1) {
    absl::StrAppend(&s, ",\"per_worker\":[");
    for (size_t w = 0; w < in.counters.per_worker.size(); ++w) {
      const auto& c = in.counters.per_worker[w];
      absl::StrAppend(&s, w ? "," : "", "{\"worker\":", w, ",\"rx_packets\":{\"A\":",
                      c.rx_packets[0], ",\"B\":", c.rx_packets[1], "},\"tx_packets\":{\"A\":",
                      c.tx_packets[0], ",\"B\":", c.tx_packets[1], "},\"verdicts\":{\"forward\":",
                      c.verdicts[1], ",\"drop\":", c.verdicts[2], ",\"reject\":", c.verdicts[3],
                      "},\"flows_created\":", c.flows_created, ",\"handed_off\":",
                      c.dist_handed_off, ",\"handed_in\":", c.dist_handed_in, ",\"drops\":{");
      bool f = true;
      for (int r = 1; r < static_cast<int>(dp::DropReason::kCount); ++r) {
        if (!c.drops[r]) continue;
        absl::StrAppend(&s, f ? "" : ",", "\"",
                        dp::dropReasonName(static_cast<dp::DropReason>(r)), "\":", c.drops[r]);
        f = false;
      }
      absl::StrAppend(&s, "}}");
    }
    absl::StrAppend(&s, "]");
  }
  absl::StrAppend(&s, ",\"events_lost\":", t.events_lost, ",\"warnings\":[");
  for (size_t i = 0; i < in.warnings.size(); ++i) {
    absl::StrAppend(&s, i ? "," : "", jsonString(in.warnings[i]));
  }
  absl::StrAppend(&s, "]}");
  return s;
}

void noteSigAlert(const dp::Event& e, const dp::DataplaneControl& plane, SummaryInput& in) {
  if (e.type != dp::EventType::kDpiAlert || e.rule == dp::kNoRule || !(e.rule & rules::kSigRuleBit)) return;
  auto d = plane.dpiRules(e.generation);
  const uint32_t idx = e.rule & ~rules::kSigRuleBit;
  if (!d || !d->sigs || idx >= d->sigs->rules.size()) return;
  const rules::Signature& g = d->sigs->rules[idx].sig;
  for (SummaryInput::SigFired& f : in.sig_fired)
    if (f.gid == g.gid && f.sid == g.sid) {
      ++f.alerts;
      return;
    }
  const char* action = g.action == rules::SigAction::kDrop     ? "drop"
                       : g.action == rules::SigAction::kReject ? "reject"
                                                               : "alert";
  in.sig_fired.push_back({g.gid, g.sid, g.rev, g.msg, action, 1});
}

std::string ruleLabel(const dp::DataplaneControl* names, uint32_t generation, dp::Stage stage,
                      uint32_t rule) {
  std::string id = names ? names->ruleName(generation, stage, rule) : "";
  return id.empty() ? absl::StrCat(rule) : id;
}

std::string verdictJson(const dp::PacketVerdict& v, const dp::DataplaneControl* names) {
  const char* stage = v.stage == dp::Stage::kNone ? nullptr : dp::stageName(v.stage);
  const char* reason = v.reason == dp::DropReason::kNone ? nullptr : dp::dropReasonName(v.reason);
  // Rule ids are 1..128 printable characters without '"' (validated), so no escaping.
  std::string rule = v.rule == dp::kNoRule
                         ? "null"
                         : absl::StrCat("\"", ruleLabel(names, v.generation, v.stage, v.rule),
                                        "\"");
  // --- lb --- the backend by its id; its index in the service when the snapshot is no
  // longer known.
  std::string be_id = v.backend == dp::kNoBackend || !names
                          ? std::string()
                          : names->backendName(v.generation, v.lb_service, v.backend);
  std::string backend = v.backend == dp::kNoBackend ? "null"
                        : be_id.empty()             ? absl::StrCat("\"", v.backend, "\"")
                                                    : jsonText(be_id);
  std::string flow = v.flow_id ? absl::StrCat(v.flow_id) : "null";
  return absl::StrCat("{\"index\":", v.seq, ",\"side\":\"", dp::sideName(v.in_side),
                      "\",\"verdict\":\"", dp::verdictName(v.verdict), "\",\"stage\":",
                      jsonStrOrNull(stage), ",\"rule\":", rule, ",\"reason\":",
                      jsonStrOrNull(reason), ",\"backend\":", backend, ",\"flow_id\":", flow,
                      ",\"new_flow\":", v.flow_new ? "true" : "false", ",\"generation\":",
                      v.generation, "}");
}

// --- http --- the transaction ("http", as Suricata's) and the file ("fileinfo") of an event.
static void appendHttpJson(const dp::HttpEventInfo& h, std::string& s) {
  if (!h.present) return;
  absl::StrAppend(&s, ",\"http\":{\"hostname\":", jsonText(h.host), ",\"url\":", jsonText(h.url),
                  ",\"http_method\":", jsonText(h.method));
  if (h.status) absl::StrAppend(&s, ",\"status\":", h.status);
  if (h.content_type[0]) absl::StrAppend(&s, ",\"http_content_type\":", jsonText(h.content_type));
  absl::StrAppend(&s, ",\"tx_id\":", h.tx_id, "}");
  if (!h.has_file) return;
  const char* state = h.state == dp::HttpFileState::kClosed      ? "CLOSED"
                      : h.state == dp::HttpFileState::kTruncated ? "TRUNCATED"
                                                                 : "OPEN";
  absl::StrAppend(&s, ",\"fileinfo\":{\"filename\":", jsonText(h.filename), ",\"direction\":\"",
                  h.file_dir ? "to_client" : "to_server", "\",\"state\":\"", state,
                  "\",\"size\":", h.size);
  if (h.sha256_valid) {
    std::string hex;
    for (uint8_t b : h.sha256) absl::StrAppend(&hex, absl::Hex(b, absl::kZeroPad2));
    absl::StrAppend(&s, ",\"sha256\":\"", hex, "\"");
  }
  absl::StrAppend(&s, ",\"tx_id\":", h.tx_id, "}");
}

std::string eventJson(const dp::Event& e, int64_t wall_offset_ns,
                      const dp::DataplaneControl* names, bool replay_index) {
  // eve.json's pcap_cnt: the packet's number in the capture, counting from 1 (`seq` is the
  // 0-based index).
  const std::string pcap_cnt = replay_index ? absl::StrCat(",\"pcap_cnt\":", e.seq + 1) : "";
  uint64_t ts = static_cast<uint64_t>(static_cast<int64_t>(e.ts_ns) + wall_offset_ns);
  std::string s = absl::StrCat("{\"timestamp\":\"", isoTime(ts), "\",\"event_type\":\"",
                               dp::eventTypeName(e.type), "\"");
  if (e.flow_id) absl::StrAppend(&s, ",\"flow_id\":", e.flow_id);
  absl::StrAppend(&s, ",\"in_iface\":\"", dp::sideName(e.in_side), "\"");
  if (e.ip_ver) {
    absl::StrAppend(&s, ",\"src_ip\":\"", ipToString(e.src, e.ip_ver), "\",\"src_port\":",
                    e.sport, ",\"dest_ip\":\"", ipToString(e.dst, e.ip_ver),
                    "\",\"dest_port\":", e.dport, ",\"proto\":\"", protoName(e.proto), "\"");
  }
  if (e.vlan) absl::StrAppend(&s, ",\"vlan\":[", e.vlan, "]");
  if (e.type == dp::EventType::kUninspected) {
    absl::StrAppend(&s, pcap_cnt, ",\"uninspected\":{\"reason\":\"",
                    dp::dropReasonName(e.reason), "\",\"stage\":\"", dp::stageName(e.stage),
                    "\"}");
  } else if (e.type == dp::EventType::kDrop) {
    absl::StrAppend(&s, pcap_cnt, ",\"drop\":{\"reason\":\"",
                    dp::dropReasonName(e.reason), "\",\"stage\":\"", dp::stageName(e.stage),
                    "\",\"action\":\"", dp::verdictName(e.verdict), "\"");
    if (e.rule != dp::kNoRule) {
      absl::StrAppend(&s, ",\"rule\":\"", ruleLabel(names, e.generation, e.stage, e.rule), "\"");
    }
    absl::StrAppend(&s, "}");
  } else if (e.type == dp::EventType::kDpiAlert) {  // --- dpi ---
    // An alert raised when its flow ended (a match at a stream's end) has no packet.
    const bool at_end = static_cast<int>(e.end_reason) != 0;
    absl::StrAppend(&s, at_end ? std::string() : pcap_cnt, ",\"alert\":{\"rule\":",
                    e.rule == dp::kNoRule
                        ? std::string("null")
                        : absl::StrCat("\"", ruleLabel(names, e.generation, e.stage, e.rule), "\""),
                    ",\"reason\":", e.reason == dp::DropReason::kNone
                                        ? std::string("null")
                                        : absl::StrCat("\"", dp::dropReasonName(e.reason), "\""),
                    ",\"verdict\":\"", dp::verdictName(e.verdict), "\",\"generation\":",
                    e.generation);
    if (at_end) absl::StrAppend(&s, ",\"flow_end\":\"", dp::flowEndReasonName(e.end_reason), "\"");
    // The rule's action, tags and metadata (as Suricata's alert.metadata: key -> values).
    std::shared_ptr<const rules::CompiledDpi> d =
        names != nullptr && e.rule != dp::kNoRule ? names->dpiRules(e.generation) : nullptr;
    // --- signatures --- a Suricata-format rule: eve.json's alert fields.
    if (d && (e.rule & rules::kSigRuleBit) && d->sigs &&
        (e.rule & ~rules::kSigRuleBit) < d->sigs->rules.size()) {
      const auto& r = d->sigs->rules[e.rule & ~rules::kSigRuleBit];
      const rules::Signature& g = r.sig;
      absl::StrAppend(&s, ",\"action\":\"",
                      e.verdict == dp::Verdict::kForward ? "allowed" : "blocked",
                      "\",\"gid\":", g.gid, ",\"signature_id\":", g.sid, ",\"rev\":", g.rev,
                      ",\"signature\":", jsonText(g.msg), ",\"category\":", jsonText(r.category),
                      ",\"severity\":", r.severity, ",\"source\":", jsonText(g.source));
      if (!g.metadata.empty()) {
        absl::StrAppend(&s, ",\"metadata\":{");
        // "key value, key value" entries -> key: [values]
        std::vector<std::pair<std::string, std::vector<std::string>>> kv;
        for (const std::string& m : g.metadata)
          for (absl::string_view part : absl::StrSplit(m, ',')) {
            part = absl::StripAsciiWhitespace(part);
            size_t sp = part.find(' ');
            if (part.empty() || sp == absl::string_view::npos) continue;
            std::string key(part.substr(0, sp));
            std::string val(absl::StripAsciiWhitespace(part.substr(sp + 1)));
            auto it = std::find_if(kv.begin(), kv.end(), [&](const auto& x) { return x.first == key; });
            if (it == kv.end()) kv.push_back({key, {val}});
            else it->second.push_back(val);
          }
        for (size_t k = 0; k < kv.size(); ++k) {
          absl::StrAppend(&s, k ? "," : "", jsonText(kv[k].first), ":[");
          for (size_t j = 0; j < kv[k].second.size(); ++j)
            absl::StrAppend(&s, j ? "," : "", jsonText(kv[k].second[j]));
          absl::StrAppend(&s, "]");
        }
        absl::StrAppend(&s, "}");
      }
    } else if (d && e.rule < d->rules.size()) {
      const rules::DpiRule& r = d->rules[e.rule];
      absl::StrAppend(&s, ",\"action\":\"", rules::dpiActionName(r.action), "\",\"tags\":[");
      for (size_t k = 0; k < r.tags.size(); ++k) absl::StrAppend(&s, k ? "," : "", jsonText(r.tags[k]));
      absl::StrAppend(&s, "],\"metadata\":{");
      std::vector<std::string> keys;
      for (const auto& [key, value] : r.meta) {
        if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
      }
      for (size_t k = 0; k < keys.size(); ++k) {
        absl::StrAppend(&s, k ? "," : "", jsonText(keys[k]), ":[");
        bool first_value = true;
        for (const auto& [key, value] : r.meta) {
          if (key != keys[k]) continue;
          absl::StrAppend(&s, first_value ? "" : ",", jsonText(value));
          first_value = false;
        }
        absl::StrAppend(&s, "]");
      }
      absl::StrAppend(&s, "}");
    }
    absl::StrAppend(&s, "}");
    appendHttpJson(e.http, s);  // --- http --- the file the rule matched in
  } else if (e.type == dp::EventType::kFileInfo || e.type == dp::EventType::kHttp) {
    appendHttpJson(e.http, s);  // --- http ---
  } else if (e.type == dp::EventType::kDns) {
    // DNS filtering: the block (client = src).
    std::string name;
    for (const char* c = e.dns_name; *c; ++c) {
      unsigned char u = static_cast<unsigned char>(*c);
      if (u < 0x20 || u >= 0x7f || u == '"' || u == '\\') {
        absl::StrAppend(&name, "\\u00", absl::Hex(u, absl::kZeroPad2));
      } else {
        name.push_back(*c);
      }
    }
    absl::StrAppend(&s, ",\"dns\":{\"rrname\":\"", name, "\",\"list\":\"", e.dns_list,
                    "\",\"action\":\"", rules::dnsActionName(static_cast<rules::DnsAction>(e.dns_action)),
                    "\",\"cloaked\":", e.dns_cloaked ? "true" : "false", "}");
  } else if (e.type == dp::EventType::kFlowEnd) {
    uint64_t start = static_cast<uint64_t>(static_cast<int64_t>(e.first_seen_ns) + wall_offset_ns);
    absl::StrAppend(&s, ",\"flow\":{\"pkts_toserver\":", e.packets[0], ",\"pkts_toclient\":",
                    e.packets[1], ",\"bytes_toserver\":", e.bytes[0], ",\"bytes_toclient\":",
                    e.bytes[1], ",\"start\":\"", isoTime(start), "\"");
    if (e.proto == 6) {
      absl::StrAppend(&s, ",\"state\":\"",
                      dp::tcpStateName(static_cast<dp::TcpState>(e.tcp_state)), "\"");
    }
    absl::StrAppend(&s, ",\"reason\":\"", dp::flowEndReasonName(e.end_reason), "\",\"verdict\":\"",
                    dp::verdictName(e.verdict), "\"");
    if (e.rule != dp::kNoRule) {
      absl::StrAppend(&s, ",\"rule\":\"", ruleLabel(names, e.generation, e.stage, e.rule), "\"");
    }
    absl::StrAppend(&s, "}");
  }
  absl::StrAppend(&s, "}");
  return s;
}

}  // namespace dpu::ctl
