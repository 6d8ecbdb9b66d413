// The API -> Prometheus converter on fully populated messages: every numeric field of
// dpu.v1.Stats and dpu.v1.ListFirewallRulesResponse becomes a sample with its value (scaled
// to base units), names and types follow the conventions, no family is exported twice
// with different types, and fields without a rule still get a conventional name.
#include "control/metrics/prom_export.h"

#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>
#include <prometheus/check_names.h>

#include <cmath>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace dpu::ctl::metrics {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// Fills every numeric field (recursively, two elements per repeated message, two entries
// per map) with a distinct value; returns the values (unscaled) by field path.
void fill(Message* m, uint64_t* next, std::map<std::string, double>* values,
          const std::string& path, int depth = 0) {
  const auto* d = m->GetDescriptor();
  const auto* r = m->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    std::string p = absl::StrCat(path, ".", f->name());
    if (f->is_map()) {
      for (int k = 0; k < 2; ++k) {
        Message* e = r->AddMessage(m, f);
        const auto* kf = e->GetDescriptor()->map_key();
        const auto* vf = e->GetDescriptor()->map_value();
        e->GetReflection()->SetString(e, kf, k == 0 ? "ipv4_bad_checksum" : "custom_key");
        uint64_t v = (*next)++;
        e->GetReflection()->SetUInt64(e, vf, v);
        (*values)[absl::StrCat(p, "[", k, "]")] = static_cast<double>(v);
      }
      continue;
    }
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (depth > 4) continue;
      if (f->is_repeated()) {
        for (int k = 0; k < 2; ++k) {
          Message* e = r->AddMessage(m, f);
          fill(e, next, values, absl::StrCat(p, "[", k, "]"), depth + 1);
        }
      } else {
        fill(r->MutableMessage(m, f), next, values, p, depth + 1);
      }
      continue;
    }
    if (f->is_repeated()) continue;
    uint64_t v = (*next)++;
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_UINT64: r->SetUInt64(m, f, v); break;
      case FieldDescriptor::CPPTYPE_UINT32: r->SetUInt32(m, f, static_cast<uint32_t>(v)); break;
      case FieldDescriptor::CPPTYPE_INT64: r->SetInt64(m, f, static_cast<int64_t>(v)); break;
      case FieldDescriptor::CPPTYPE_INT32: r->SetInt32(m, f, static_cast<int32_t>(v)); break;
      case FieldDescriptor::CPPTYPE_DOUBLE: r->SetDouble(m, f, static_cast<double>(v)); break;
      case FieldDescriptor::CPPTYPE_FLOAT: r->SetFloat(m, f, static_cast<float>(v)); break;
      case FieldDescriptor::CPPTYPE_STRING:
        // Keys of repeated messages must differ: the element's path names it.
        r->SetString(m, f, absl::StrCat("s", v));
        continue;
      default: continue;
    }
    (*values)[p] = static_cast<double>(v);
  }
}

std::vector<double> allSampleValues(const std::vector<prometheus::MetricFamily>& fams) {
  std::vector<double> out;
  for (const auto& f : fams) {
    for (const auto& m : f.metric) {
      out.push_back(m.counter.value);
      out.push_back(m.gauge.value);
      out.push_back(m.histogram.sample_sum);
      out.push_back(static_cast<double>(m.histogram.sample_count));
      for (const auto& b : m.histogram.bucket) {
        out.push_back(static_cast<double>(b.cumulative_count));
        out.push_back(b.upper_bound);
      }
    }
  }
  return out;
}

bool hasValue(const std::vector<double>& vals, double want) {
  for (double v : vals) {
    if (std::fabs(v - want) <= 1e-9 * std::max(1.0, std::fabs(want))) return true;
  }
  return false;
}

// Fields that are deliberately not metrics (identities, sums, copies), see kRules.
const std::set<std::string> kNotMetrics = {
    ".timestamp_unix_ns", ".config_applies.last.version", ".config_applies.last.generation",
    ".config_version",  // ListFirewallRulesResponse copy of Stats.config_version
};

bool skipped(const std::string& path) {
  if (absl::StartsWith(path, ".total.")) return true;  // the sum of the workers' series
  if (absl::StrContains(path, ".id") && absl::StartsWith(path, ".workers")) return true;
  if (absl::StrContains(path, ".rule.")) return true;  // the rule itself (id is a label)
  if (absl::EndsWith(path, ".keep_established_on_change")) return true;
  return kNotMetrics.count(path) > 0;
}

void checkConventions(const std::vector<prometheus::MetricFamily>& fams) {
  std::set<std::string> series;
  for (const auto& f : fams) {
    EXPECT_TRUE(prometheus::CheckMetricName(f.name)) << f.name;
    EXPECT_TRUE(absl::StartsWith(f.name, "dpu_")) << f.name;
    EXPECT_FALSE(f.help.empty()) << f.name;
    EXPECT_EQ(f.help.find('\n'), std::string::npos) << f.name;
    if (f.type == prometheus::MetricType::Counter) {
      EXPECT_TRUE(absl::EndsWith(f.name, "_total")) << f.name << " is a counter";
    } else {
      EXPECT_FALSE(absl::EndsWith(f.name, "_total")) << f.name << " is not a counter";
    }
    EXPECT_FALSE(absl::EndsWith(f.name, "_ms")) << f.name << ": base units are seconds";
    EXPECT_FALSE(absl::EndsWith(f.name, "_ns")) << f.name << ": base units are seconds";
    for (const auto& m : f.metric) {
      std::string key = f.name;
      for (const auto& l : m.label) {
        EXPECT_TRUE(prometheus::CheckLabelName(l.name)) << f.name << " label " << l.name;
        absl::StrAppend(&key, ",", l.name, "=", l.value);
      }
      EXPECT_TRUE(series.insert(key).second) << "series exported twice: " << key;
    }
  }
}

TEST(PromExport, EveryNumericFieldOfStatsIsASample) {
  v1::Stats s;
  uint64_t next = 1001;
  std::map<std::string, double> values;
  fill(&s, &next, &values, "");
  Families f;
  exportMessage(s, "", {}, f);
  EXPECT_TRUE(f.problems().empty()) << f.problems()[0];
  auto fams = f.take();
  checkConventions(fams);
  auto vals = allSampleValues(fams);
  int checked = 0;
  for (const auto& [path, v] : values) {
    if (skipped(path)) continue;
    // The unit conventions scale *_ms, *_ns and *_unix_ns fields to seconds.
    double want = v;
    if (absl::EndsWith(path, "_ms")) want = v * 1e-3;
    if (absl::EndsWith(path, "_ns")) want = v * 1e-9;
    EXPECT_TRUE(hasValue(vals, want)) << path << " = " << v << " is not exported";
    ++checked;
  }
  EXPECT_GT(checked, 60);
}

TEST(PromExport, EveryNumericFieldOfTheRuleListIsASample) {
  v1::ListFirewallRulesResponse r;
  uint64_t next = 5001;
  std::map<std::string, double> values;
  fill(&r, &next, &values, "");
  Families f;
  exportMessage(r, "firewall_", {}, f);
  EXPECT_TRUE(f.problems().empty());
  auto fams = f.take();
  checkConventions(fams);
  auto vals = allSampleValues(fams);
  for (const auto& [path, v] : values) {
    if (skipped(path)) continue;
    double want = absl::EndsWith(path, "_ns") ? v * 1e-9 : v;
    EXPECT_TRUE(hasValue(vals, want)) << path << " = " << v << " is not exported";
  }
}

TEST(PromExport, EveryNumericFieldOfTheLbServiceListIsASample) {
  v1::ListLbServicesResponse r;
  uint64_t next = 9001;
  std::map<std::string, double> values;
  fill(&r, &next, &values, "");
  Families f;
  exportMessage(r, "lb_", {}, f);
  EXPECT_TRUE(f.problems().empty());
  auto fams = f.take();
  checkConventions(fams);
  auto vals = allSampleValues(fams);
  int checked = 0;
  for (const auto& [path, v] : values) {
    // The service and backend configs are not metrics (their ids are labels).
    if (path == ".config_version" || absl::StrContains(path, ".service.") ||
        absl::StrContains(path, ".backend.")) {
      continue;
    }
    EXPECT_TRUE(hasValue(vals, v)) << path << " = " << v << " is not exported";
    ++checked;
  }
  EXPECT_GE(checked, 12);  // 2 services x (table_size + 2 backends x 5)
}

const prometheus::MetricFamily* find(const std::vector<prometheus::MetricFamily>& fams,
                                     const std::string& name) {
  for (const auto& f : fams) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::string labelsOf(const prometheus::ClientMetric& m) {
  std::string s;
  for (const auto& l : m.label) absl::StrAppend(&s, s.empty() ? "" : ",", l.name, "=", l.value);
  return s;
}

TEST(PromExport, NamesLabelsAndDomains) {
  v1::Stats s;
  s.set_config_version(7);
  v1::WorkerStats* w = s.add_workers();
  w->set_id(1);
  w->mutable_counters()->set_rx_packets_a(10);
  w->mutable_counters()->set_rx_packets_b(20);
  w->mutable_counters()->set_flows_active(5);
  (*w->mutable_counters()->mutable_drops())["firewall_deny"] = 3;
  v1::StageCounters* st = w->mutable_counters()->add_stages();
  st->set_stage("firewall");
  st->set_packets(9);
  v1::PortStats* p = s.add_ports();
  p->set_side("A");
  p->set_name("net_pcap0");
  p->set_rx_missed(4);
  s.mutable_config_applies()->set_applied(2);
  v1::Histogram* h = s.mutable_config_applies()->mutable_duration_seconds();
  h->set_count(2);
  h->set_sum(0.3);
  auto* b = h->add_buckets();
  b->set_le(0.1);
  b->set_count(1);
  s.mutable_config_applies()->mutable_last()->set_publish_ms(250);
  Families f;
  exportMessage(s, "", {}, f);
  auto fams = f.take();

  const auto* rx = find(fams, "dpu_rx_packets_total");
  ASSERT_NE(rx, nullptr);
  EXPECT_EQ(rx->type, prometheus::MetricType::Counter);
  ASSERT_EQ(rx->metric.size(), 2u);
  EXPECT_EQ(labelsOf(rx->metric[0]), "worker=1,side=A");
  EXPECT_EQ(rx->metric[0].counter.value, 10);
  EXPECT_EQ(labelsOf(rx->metric[1]), "worker=1,side=B");
  EXPECT_EQ(rx->metric[1].counter.value, 20);

  const auto* flows = find(fams, "dpu_flows_active");
  ASSERT_NE(flows, nullptr);
  EXPECT_EQ(flows->type, prometheus::MetricType::Gauge);
  EXPECT_EQ(flows->metric[0].gauge.value, 5);

  // Every drop reason has a series (0 until it happens).
  const auto* drops = find(fams, "dpu_drops_total");
  ASSERT_NE(drops, nullptr);
  EXPECT_GT(drops->metric.size(), 20u);
  bool deny = false, midstream = false;
  for (const auto& m : drops->metric) {
    if (labelsOf(m) == "worker=1,reason=firewall_deny") deny = m.counter.value == 3;
    if (labelsOf(m) == "worker=1,reason=tcp_midstream") midstream = m.counter.value == 0;
  }
  EXPECT_TRUE(deny);
  EXPECT_TRUE(midstream);

  // Every stage too.
  const auto* stages = find(fams, "dpu_stage_packets_total");
  ASSERT_NE(stages, nullptr);
  std::set<std::string> seen;
  for (const auto& m : stages->metric) seen.insert(labelsOf(m));
  EXPECT_TRUE(seen.count("worker=1,stage=firewall"));
  EXPECT_TRUE(seen.count("worker=1,stage=dns"));
  EXPECT_TRUE(seen.count("worker=1,stage=lb"));

  const auto* missed = find(fams, "dpu_port_rx_missed_total");
  ASSERT_NE(missed, nullptr);
  EXPECT_EQ(labelsOf(missed->metric[0]), "side=A,device=net_pcap0");
  EXPECT_EQ(missed->metric[0].counter.value, 4);

  const auto* ver = find(fams, "dpu_config_version");
  ASSERT_NE(ver, nullptr);
  EXPECT_EQ(ver->type, prometheus::MetricType::Gauge);
  EXPECT_EQ(ver->metric[0].gauge.value, 7);

  const auto* applies = find(fams, "dpu_config_applies_total");
  ASSERT_NE(applies, nullptr);
  EXPECT_EQ(applies->metric.size(), 4u);  // applied, invalid, conflict, failed
  EXPECT_EQ(labelsOf(applies->metric[0]), "result=applied");
  EXPECT_EQ(applies->metric[0].counter.value, 2);

  const auto* dur = find(fams, "dpu_config_apply_duration_seconds");
  ASSERT_NE(dur, nullptr);
  EXPECT_EQ(dur->type, prometheus::MetricType::Histogram);
  EXPECT_EQ(dur->metric[0].histogram.sample_count, 2u);
  ASSERT_EQ(dur->metric[0].histogram.bucket.size(), 2u);  // 0.1 and +Inf
  EXPECT_TRUE(std::isinf(dur->metric[0].histogram.bucket[1].upper_bound));
  EXPECT_EQ(dur->metric[0].histogram.bucket[1].cumulative_count, 2u);

  const auto* phase = find(fams, "dpu_config_last_apply_phase_seconds");
  ASSERT_NE(phase, nullptr);
  bool publish = false;
  for (const auto& m : phase->metric) {
    if (labelsOf(m) == "phase=publish") publish = std::fabs(m.gauge.value - 0.25) < 1e-12;
  }
  EXPECT_TRUE(publish);

  // The total is not exported beside the per-worker series (sum() would count twice).
  for (const auto& fam : fams) {
    for (const auto& m : fam.metric) EXPECT_FALSE(m.label.empty() && fam.name == "dpu_rx_packets_total");
  }

  std::string text = toText(fams);
  EXPECT_NE(text.find("# TYPE dpu_rx_packets_total counter"), std::string::npos);
  EXPECT_NE(text.find("dpu_rx_packets_total{worker=\"1\",side=\"A\"} 10"), std::string::npos);
  EXPECT_NE(text.find("dpu_config_apply_duration_seconds_bucket{le=\"+Inf\"} 2"), std::string::npos);
}

// --- ops --- DNS, DPI and refused-apply metrics have names, labels and help of their own
// (not the names derived from the field paths).
const prometheus::ClientMetric* sample(const std::vector<prometheus::MetricFamily>& fams,
                                       const std::string& name, const std::string& labels) {
  const auto* f = find(fams, name);
  if (f == nullptr) return nullptr;
  for (const auto& m : f->metric) {
    if (labelsOf(m) == labels) return &m;
  }
  return nullptr;
}

TEST(PromExport, DnsDpiAndRefusalNames) {
  v1::Stats s;
  v1::WorkerStats* w = s.add_workers();
  w->set_id(0);
  v1::CounterSet* c = w->mutable_counters();
  (*c->mutable_dns())["queries"] = 40;
  (*c->mutable_dns())["blocked"] = 7;
  (*c->mutable_dns())["allowed"] = 2;
  (*c->mutable_dns())["answers_sent"] = 6;
  (*c->mutable_dns())["answers_not_sent"] = 1;
  (*c->mutable_dns())["resets_sent"] = 3;
  (*c->mutable_dns())["a_future_counter"] = 5;  // no rule yet: still exported
  (*c->mutable_dns_blocks_by_action())["nxdomain"] = 6;
  c->mutable_dpi()->set_bytes_scanned(123456);
  c->mutable_dpi()->set_alerts(4);
  c->mutable_dpi()->set_resets(1);
  c->mutable_dpi()->set_no_stream(2);
  c->mutable_signatures()->set_inspected(30);  // --- signatures ---
  c->mutable_signatures()->set_matches(3);
  c->mutable_signatures()->set_rejects(1);
  v1::DnsListStats* l = s.add_dns_lists();
  l->set_name("ads");
  l->set_action("nxdomain");
  l->set_names(1000);
  l->set_blocked(7);
  l->set_load_ms(12.5);
  (*s.mutable_config_applies()->mutable_refused_by_phase())["compile"] = 2;
  v1::CycleCounter* cyc = c->add_cycles();  // --- perf fields, named too
  cyc->set_bucket("dns");
  cyc->set_cycles(5000);
  c->set_tsc_hz(2'000'000'000);
  c->mutable_latency()->set_samples(10);
  c->mutable_latency()->set_p99_ns(8000);
  Families f;
  exportMessage(s, "", {}, f);
  EXPECT_TRUE(f.problems().empty()) << f.problems()[0];
  auto fams = f.take();
  checkConventions(fams);

  struct Want {
    const char* name;
    const char* labels;
    double value;
    prometheus::MetricType type;
  };
  const auto kC = prometheus::MetricType::Counter, kG = prometheus::MetricType::Gauge;
  const Want wants[] = {
      {"dpu_dns_queries_total", "worker=0", 40, kC},
      {"dpu_dns_messages_total", "worker=0", 0, kC},  // every DNS counter has a series
      {"dpu_dns_decisions_total", "worker=0,decision=blocked", 7, kC},
      {"dpu_dns_decisions_total", "worker=0,decision=allowed", 2, kC},
      {"dpu_dns_answers_total", "worker=0,result=sent", 6, kC},
      {"dpu_dns_answers_total", "worker=0,result=not_sent", 1, kC},
      {"dpu_dns_tcp_resets_sent_total", "worker=0", 3, kC},
      {"dpu_dns_total", "worker=0,key=a_future_counter", 5, kC},
      {"dpu_dns_block_actions_total", "worker=0,action=nxdomain", 6, kC},
      {"dpu_dns_block_actions_total", "worker=0,action=sinkhole", 0, kC},
      {"dpu_dns_blocked_total", "list=ads,action=nxdomain", 7, kC},
      {"dpu_dns_allowed_total", "list=ads,action=nxdomain", 0, kC},
      {"dpu_dns_list_names", "list=ads,action=nxdomain", 1000, kG},
      {"dpu_dns_list_load_seconds", "list=ads,action=nxdomain", 0.0125, kG},
      {"dpu_dpi_scanned_bytes_total", "worker=0", 123456, kC},
      {"dpu_dpi_matches_total", "worker=0,action=alert", 4, kC},
      {"dpu_dpi_matches_total", "worker=0,action=drop", 0, kC},
      {"dpu_dpi_matches_total", "worker=0,action=reset", 1, kC},
      {"dpu_dpi_streams_not_inspected_total", "worker=0", 2, kC},
      {"dpu_signature_inspections_total", "worker=0", 30, kC},
      {"dpu_signature_matches_total", "worker=0", 3, kC},
      {"dpu_signature_actions_total", "worker=0,action=reject", 1, kC},
      {"dpu_signature_actions_total", "worker=0,action=alert", 0, kC},
      {"dpu_signature_hits_dropped_total", "worker=0", 0, kC},
      {"dpu_config_refused_total", "phase=compile", 2, kC},
      {"dpu_config_refused_total", "phase=version", 0, kC},
      {"dpu_worker_cycles_total", "worker=0,bucket=dns", 5000, kC},
      {"dpu_worker_tsc_hertz", "worker=0", 2e9, kG},
      {"dpu_forward_latency_samples_total", "worker=0", 10, kC},
      {"dpu_forward_latency_seconds", "worker=0,quantile=0.99", 8e-6, kG},
  };
  for (const Want& want : wants) {
    const auto* fam = find(fams, want.name);
    ASSERT_NE(fam, nullptr) << want.name;
    EXPECT_EQ(fam->type, want.type) << want.name;
    EXPECT_EQ(fam->help.find("proto/appliance_api.proto"), std::string::npos)
        << want.name << " has a derived help text: " << fam->help;
    const auto* m = sample(fams, want.name, want.labels);
    ASSERT_NE(m, nullptr) << want.name << "{" << want.labels << "}";
    const double got = want.type == kC ? m->counter.value : m->gauge.value;
    EXPECT_NEAR(got, want.value, 1e-12) << want.name << "{" << want.labels << "}";
  }
  // No DNS/DPI family keeps a derived name (the old generic ones).
  for (const char* old : {"dpu_dns_blocks_by_action_total", "dpu_dns_lists_blocked_total",
                          "dpu_dpi_bytes_scanned_total", "dpu_dpi_alerts_total"}) {
    EXPECT_EQ(find(fams, old), nullptr) << old;
  }
}

// Normalization counters (issue 16): fragment reassembly and TCP stream normalization, each
// with a dpu_ family of its own name (labels by cause / policy / data), zeros exported.
TEST(PromExport, NormalizationCounters) {
  v1::Stats s;
  v1::WorkerStats* w = s.add_workers();
  w->set_id(0);
  v1::CounterSet* c = w->mutable_counters();
  v1::ReassemblyCounters* r = c->mutable_reassembly();
  r->set_reassembled(12);
  r->set_atomic(1);
  r->set_overlap_identical(3);
  r->set_overlap_different(2);
  r->set_no_buffer(5);
  r->set_hold_full(4);
  r->set_fail_open(6);
  r->set_fail_closed(3);
  r->set_buffers_in_use(7);
  (*c->mutable_tcp_stream())["bad_checksum"] = 9;
  (*c->mutable_tcp_stream())["syn_data"] = 2;
  Families f;
  exportMessage(s, "", {}, f);
  EXPECT_TRUE(f.problems().empty()) << f.problems()[0];
  auto fams = f.take();
  checkConventions(fams);
  const auto kC = prometheus::MetricType::Counter, kG = prometheus::MetricType::Gauge;
  struct Want {
    const char* name;
    const char* labels;
    double value;
    prometheus::MetricType type;
  };
  const Want wants[] = {
      {"dpu_fragment_reassembled_datagrams_total", "worker=0", 12, kC},
      {"dpu_fragment_atomic_total", "worker=0", 1, kC},
      {"dpu_fragment_reassembly_overlaps_total", "worker=0,data=identical", 3, kC},
      {"dpu_fragment_reassembly_overlaps_total", "worker=0,data=different", 2, kC},
      {"dpu_fragment_reassembly_exhausted_total", "worker=0,cause=no_buffer", 5, kC},
      {"dpu_fragment_reassembly_exhausted_total", "worker=0,cause=too_big", 0, kC},
      {"dpu_fragment_reassembly_exhausted_total", "worker=0,cause=hold_full", 4, kC},
      {"dpu_fragment_reassembly_fail_policy_total", "worker=0,policy=open", 6, kC},
      {"dpu_fragment_reassembly_fail_policy_total", "worker=0,policy=closed", 3, kC},
      {"dpu_fragment_reassembly_buffers_in_use", "worker=0", 7, kG},
      {"dpu_tcp_stream_total", "worker=0,counter=bad_checksum", 9, kC},
      {"dpu_tcp_stream_total", "worker=0,counter=syn_data", 2, kC},
      {"dpu_tcp_stream_total", "worker=0,counter=out_of_order", 0, kC},  // the whole domain
      {"dpu_tcp_stream_total", "worker=0,counter=fail_closed", 0, kC},
  };
  for (const Want& want : wants) {
    const auto* fam = find(fams, want.name);
    ASSERT_NE(fam, nullptr) << want.name;
    EXPECT_EQ(fam->type, want.type) << want.name;
    EXPECT_EQ(fam->help.find("proto/appliance_api.proto"), std::string::npos) << want.name;
    const auto* m = sample(fams, want.name, want.labels);
    ASSERT_NE(m, nullptr) << want.name << "{" << want.labels << "}";
    const double got = want.type == kC ? m->counter.value : m->gauge.value;
    EXPECT_NEAR(got, want.value, 1e-12) << want.name << "{" << want.labels << "}";
  }
  EXPECT_EQ(find(fams, "dpu_dpi_unreported_matches_total"), nullptr);  // every match is reported
}

TEST(PromExport, FieldsWithoutARuleGetConventionalNames) {
  // FlowSummary has no rule: integers become counters, *_unix_ns timestamps in seconds.
  v1::FlowSummary fs;
  fs.set_pkts_toserver(12);
  fs.set_start_unix_ns(3'000'000'000);
  Families f;
  exportMessage(fs, "flow_", {{"k", "v"}}, f);
  auto fams = f.take();
  const auto* pk = find(fams, "dpu_flow_pkts_toserver_total");
  ASSERT_NE(pk, nullptr);
  EXPECT_EQ(pk->type, prometheus::MetricType::Counter);
  EXPECT_EQ(labelsOf(pk->metric[0]), "k=v");
  EXPECT_EQ(pk->metric[0].counter.value, 12);
  const auto* ts = find(fams, "dpu_flow_start_timestamp_seconds");
  ASSERT_NE(ts, nullptr);
  EXPECT_EQ(ts->type, prometheus::MetricType::Gauge);
  EXPECT_DOUBLE_EQ(ts->metric[0].gauge.value, 3.0);
  checkConventions(fams);
}

TEST(PromExport, TypeClashIsReportedNotExported) {
  Families f;
  f.add("dpu_x_total", prometheus::MetricType::Counter, "h", {}, 1);
  f.add("dpu_x_total", prometheus::MetricType::Gauge, "h", {{"a", "b"}}, 2);
  ASSERT_EQ(f.problems().size(), 1u);
  auto fams = f.take();
  ASSERT_EQ(fams.size(), 1u);
  EXPECT_EQ(fams[0].metric.size(), 1u);
}

}  // namespace
}  // namespace dpu::ctl::metrics
