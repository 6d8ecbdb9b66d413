// API messages -> Prometheus metric families, by walking their fields with protobuf
// reflection. This is the one place that decides metric names, types, labels, units and
// help texts (kRules in prom_export.cc); the sources (metrics_sources.cc) only say which
// API messages to walk. A numeric field without a rule is still exported, with a name
// derived from its path (counter dpu_<path>_total, or a gauge per the unit conventions
// below), so a counter a feature adds to the API appears in the metrics without touching
// this code; a rule gives it a better name, a label or a type.
//
// Conventions (prometheus.io/docs/practices/naming): prefix dpu_; counters end in _total;
// base units in the name: fields *_ms, *_s, *_ns become *_seconds (scaled), *_unix_ns become
// *_timestamp_seconds; *_bytes stay bytes. Strings, enums and repeated scalars are not
// metrics (strings serve as labels of repeated messages: port side, stage, rule id).
// A repeated message is exported once per element, labelled by its key field(s); a map by
// its key; "domains" list the keys always exported (0 when absent: drop reasons, stages),
// so a series exists before its first increment.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <google/protobuf/message.h>
#include <prometheus/metric_family.h>

#include "proto/appliance_api.pb.h"

namespace dpu::ctl::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

// Metric families being collected for one scrape, by name.
class Families {
 public:
  // One sample. A name seen before with another type or help is a bug of the rules: the
  // sample is dropped and the clash recorded in problems().
  void add(const std::string& name, prometheus::MetricType type, const std::string& help,
           const Labels& labels, double value);
  void addHistogram(const std::string& name, const std::string& help, const Labels& labels,
                    const v1::Histogram& h, double scale = 1.0);
  // The families sorted by name.
  std::vector<prometheus::MetricFamily> take();
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  prometheus::MetricFamily* family(const std::string& name, prometheus::MetricType type,
                                   const std::string& help);
  std::map<std::string, prometheus::MetricFamily> by_name_;
  std::vector<std::string> problems_;
};

// Exports every numeric field of `m` (recursively) into `out`. `prefix` goes before derived
// names (without "dpu_"); `labels` are added to every sample.
void exportMessage(const google::protobuf::Message& m, const std::string& prefix,
                   const Labels& labels, Families& out);

// The Prometheus text exposition format (version 0.0.4) of `families`.
std::string toText(const std::vector<prometheus::MetricFamily>& families);

}  // namespace dpu::ctl::metrics
