#include "control/config/config_loader.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dpu::ctl {
namespace {

class TextErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    errors.push_back(absl::StrCat("line ", line + 1, ", column ", column + 1, ": ", message));
  }
  void AddWarning(int line, google::protobuf::io::ColumnNumber column,
                  const std::string& message) override {}
  std::vector<std::string> errors;
};

rules::Policy policyOr(v1::PacketPolicy p, rules::Policy dflt) {
  switch (p) {
    case v1::FORWARD: return rules::Policy::kForward;
    case v1::DROP: return rules::Policy::kDrop;
    default: return dflt;
  }
}

template <class T>
void setIf(T v, T& out) {
  if (v != 0) out = v;
}

}  // namespace

ConfigFormat formatForPath(const std::string& path) {
  for (const char* ext : {".txtpb", ".textproto", ".pbtxt"}) {
    if (absl::EndsWith(path, ext)) return ConfigFormat::kText;
  }
  return ConfigFormat::kJson;
}

absl::StatusOr<v1::ApplianceConfig> parseConfig(const std::string& text, ConfigFormat format,
                                                const std::string& source) {
  v1::ApplianceConfig cfg;
  if (format == ConfigFormat::kText) {
    google::protobuf::TextFormat::Parser parser;
    TextErrors errors;
    parser.RecordErrorsTo(&errors);
    if (!parser.ParseFromString(std::string(text), &cfg)) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": ", absl::StrJoin(errors.errors, "; ")));
    }
    return cfg;
  }
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = false;
  auto st = google::protobuf::util::JsonStringToMessage(std::string(text), &cfg, opts);
  if (!st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": invalid config: ", std::string(st.message())));
  }
  return cfg;
}

absl::StatusOr<v1::ApplianceConfig> loadConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open config file"));
  std::stringstream ss;
  ss << in.rdbuf();
  return parseConfig(ss.str(), formatForPath(path), path);
}

absl::StatusOr<rules::ConfigModel> toModel(const v1::ApplianceConfig& cfg,
                                           rules::ConfigErrorList* out) {
  rules::ConfigModel m;
  m.version = cfg.version();
  rules::DataplaneSettings& d = m.dataplane;
  const v1::DataplaneConfig& dp = cfg.dataplane();
  setIf(dp.flow_table().capacity_per_worker(), d.flow_capacity);
  d.flow_when_full = policyOr(dp.flow_table().when_full(), d.flow_when_full);
  setIf(dp.flow_table().aging_slice(), d.aging_slice);
  const v1::FlowTimeouts& t = dp.timeouts();
  setIf(t.tcp_syn_s(), d.tcp_syn_s);
  setIf(t.tcp_established_s(), d.tcp_established_s);
  setIf(t.tcp_closing_s(), d.tcp_closing_s);
  setIf(t.tcp_closed_s(), d.tcp_closed_s);
  setIf(t.udp_s(), d.udp_s);
  setIf(t.icmp_s(), d.icmp_s);
  setIf(t.other_s(), d.other_s);
  d.non_ip = policyOr(dp.non_ip(), d.non_ip);
  d.malformed = policyOr(dp.malformed(), d.malformed);
  const v1::FragmentConfig& f = dp.fragments();
  setIf(f.max_datagrams(), d.frag_max_datagrams);
  setIf(f.timeout_ms(), d.frag_timeout_ms);
  setIf(f.max_fragments(), d.frag_max_fragments);
  d.frag_overlapping = policyOr(f.overlapping(), d.frag_overlapping);
  d.frag_tiny = policyOr(f.tiny(), d.frag_tiny);
  d.tcp_midstream = policyOr(dp.tcp().midstream(), d.tcp_midstream);
  rules::ConfigErrorList errors;
  rules::validateDataplane(d, errors);
  if (!errors.empty()) {
    absl::Status st = rules::errorsToStatus(errors);
    if (out) out->insert(out->end(), errors.begin(), errors.end());
    return st;
  }
  return m;
}

}  // namespace dpu::ctl
