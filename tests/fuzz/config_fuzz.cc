// Fuzz target: the config loader. The input is a config document; it is parsed as protobuf
// JSON and as protobuf text format (dpu::ctl::parseConfig), turned into the rules model
// (toModel) and compiled (rules::compileSnapshot). It must never crash, and:
// - a rejected document gets InvalidArgument naming the source;
// - a rejected model lists at least one error, each naming a field and a reason;
// - every dataplane setting of an accepted model is the document's value or, when unset
//   (0 / POLICY_DEFAULT), the documented default; the model compiles, or the compiler names
//   a field and a reason outside the dataplane section (which toModel validated); the
//   snapshot carries the model's settings, version and generation;
// - an accepted document survives a round trip through both formats unchanged.
// File paths in the document are replaced by a path that does not exist before toModel
// (no file system access while fuzzing; see neutralizePaths).
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "control/config/config_loader.h"
#include "rules/compiled/snapshot.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using dpu::ctl::ConfigFormat;
namespace v1 = dpu::v1;
namespace rules = dpu::rules;

rules::Policy expectPolicy(v1::PacketPolicy p, rules::Policy dflt) {
  if (p == v1::FORWARD) return rules::Policy::kForward;
  if (p == v1::DROP) return rules::Policy::kDrop;
  return dflt;
}

bool sameSettings(const rules::DataplaneSettings& a, const rules::DataplaneSettings& b) {
  return a.flow_capacity == b.flow_capacity && a.flow_when_full == b.flow_when_full &&
         a.aging_slice == b.aging_slice && a.tcp_syn_s == b.tcp_syn_s &&
         a.tcp_established_s == b.tcp_established_s && a.tcp_closing_s == b.tcp_closing_s &&
         a.tcp_closed_s == b.tcp_closed_s && a.udp_s == b.udp_s && a.icmp_s == b.icmp_s &&
         a.other_s == b.other_s && a.non_ip == b.non_ip && a.malformed == b.malformed &&
         a.frag_max_datagrams == b.frag_max_datagrams &&
         a.frag_timeout_ms == b.frag_timeout_ms && a.frag_max_fragments == b.frag_max_fragments &&
         a.frag_overlapping == b.frag_overlapping && a.frag_tiny == b.frag_tiny &&
         a.tcp_midstream == b.tcp_midstream;
}

void checkDefaults(const v1::ApplianceConfig& cfg, const rules::DataplaneSettings& d) {
  const rules::DataplaneSettings dflt;
  const v1::DataplaneConfig& dp = cfg.dataplane();
#define FUZZ_SETTING(field, value) \
  FUZZ_CHECK(d.field == ((value) != 0 ? (value) : dflt.field))
  FUZZ_SETTING(flow_capacity, dp.flow_table().capacity_per_worker());
  FUZZ_SETTING(aging_slice, dp.flow_table().aging_slice());
  FUZZ_SETTING(tcp_syn_s, dp.timeouts().tcp_syn_s());
  FUZZ_SETTING(tcp_established_s, dp.timeouts().tcp_established_s());
  FUZZ_SETTING(tcp_closing_s, dp.timeouts().tcp_closing_s());
  FUZZ_SETTING(tcp_closed_s, dp.timeouts().tcp_closed_s());
  FUZZ_SETTING(udp_s, dp.timeouts().udp_s());
  FUZZ_SETTING(icmp_s, dp.timeouts().icmp_s());
  FUZZ_SETTING(other_s, dp.timeouts().other_s());
  FUZZ_SETTING(frag_max_datagrams, dp.fragments().max_datagrams());
  FUZZ_SETTING(frag_timeout_ms, dp.fragments().timeout_ms());
  FUZZ_SETTING(frag_max_fragments, dp.fragments().max_fragments());
#undef FUZZ_SETTING
  FUZZ_CHECK(d.flow_when_full == expectPolicy(dp.flow_table().when_full(), dflt.flow_when_full));
  FUZZ_CHECK(d.non_ip == expectPolicy(dp.non_ip(), dflt.non_ip));
  FUZZ_CHECK(d.malformed == expectPolicy(dp.malformed(), dflt.malformed));
  FUZZ_CHECK(d.frag_overlapping == expectPolicy(dp.fragments().overlapping(),
                                                dflt.frag_overlapping));
  FUZZ_CHECK(d.frag_tiny == expectPolicy(dp.fragments().tiny(), dflt.frag_tiny));
  FUZZ_CHECK(d.tcp_midstream == expectPolicy(dp.tcp().midstream(), dflt.tcp_midstream));
}

void roundTrip(const v1::ApplianceConfig& cfg) {
  std::string json;
  FUZZ_CHECK(google::protobuf::util::MessageToJsonString(cfg, &json).ok());
  auto back = dpu::ctl::parseConfig(json, ConfigFormat::kJson, "roundtrip.json");
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(google::protobuf::util::MessageDifferencer::Equals(*back, cfg));
  std::string text;
  FUZZ_CHECK(google::protobuf::TextFormat::PrintToString(cfg, &text));
  auto back_text = dpu::ctl::parseConfig(text, ConfigFormat::kText, "roundtrip.txtpb");
  FUZZ_CHECK(back_text.ok());
  FUZZ_CHECK(google::protobuf::util::MessageDifferencer::Equals(*back_text, cfg));
}

// toModel reads the files a document names (rule files, IP set files, the GeoIP database).
// A fuzzer must not read /dev/zero or wait on a FIFO: every string field whose name says it
// is a file or path is pointed at one path that does not exist (toModel then reports it).
bool isPathField(const google::protobuf::FieldDescriptor* f) {
  const std::string& n = f->name();
  return absl::StrContains(n, "file") || absl::StrContains(n, "path") ||
         absl::StrContains(n, "database") || absl::StrContains(n, "dir");
}

void neutralizePaths(google::protobuf::Message* msg) {
  const google::protobuf::Reflection* r = msg->GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  r->ListFields(*msg, &fields);
  for (const google::protobuf::FieldDescriptor* f : fields) {
    if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(*msg, f); ++i) {
          neutralizePaths(r->MutableRepeatedMessage(msg, f, i));
        }
      } else {
        neutralizePaths(r->MutableMessage(msg, f));
      }
    } else if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_STRING &&
               isPathField(f)) {
      static const std::string kNowhere = "/nonexistent/dpu-config-fuzz/file";
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(*msg, f); ++i) r->SetRepeatedString(msg, f, i, kNowhere);
      } else {
        r->SetString(msg, f, kNowhere);
      }
    }
  }
}

void checkDocument(const v1::ApplianceConfig& parsed) {
  roundTrip(parsed);
  v1::ApplianceConfig cfg = parsed;
  neutralizePaths(&cfg);
  rules::ConfigErrorList errors;
  auto model = dpu::ctl::toModel(cfg, &errors);
  if (!model.ok()) {
    FUZZ_CHECK(!errors.empty());
    for (const rules::ConfigError& e : errors) {
      FUZZ_CHECK(!e.field.empty() && !e.reason.empty());
      FUZZ_CHECK(absl::StrContains(model.status().message(), e.field));
    }
    return;
  }
  FUZZ_CHECK(errors.empty());
  FUZZ_CHECK(model->version == cfg.version());
  checkDefaults(cfg, model->dataplane);
  auto snap = rules::compileSnapshot(*model, 7, &errors);
  if (!snap.ok()) {
    // Compilers may reject what toModel accepted (e.g. rules that do not compile), but never
    // the dataplane section toModel validated, and every error names a field and a reason.
    FUZZ_CHECK(!errors.empty());
    for (const rules::ConfigError& e : errors) {
      FUZZ_CHECK(e.section != "dataplane");
      FUZZ_CHECK(!e.field.empty() && !e.reason.empty());
    }
    return;
  }
  FUZZ_CHECK(errors.empty());
  FUZZ_CHECK((*snap)->generation == 7);
  FUZZ_CHECK((*snap)->config_version == cfg.version());
  FUZZ_CHECK(sameSettings((*snap)->dataplane, model->dataplane));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 256 * 1024) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (ConfigFormat format : {ConfigFormat::kJson, ConfigFormat::kText}) {
    auto cfg = dpu::ctl::parseConfig(text, format, "fuzz-input");
    if (!cfg.ok()) {
      FUZZ_CHECK(cfg.status().code() == absl::StatusCode::kInvalidArgument);
      FUZZ_CHECK(absl::StartsWith(cfg.status().message(), "fuzz-input: "));
      continue;
    }
    checkDocument(*cfg);
  }
  return 0;
}
