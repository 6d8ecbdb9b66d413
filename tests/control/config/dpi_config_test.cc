// The dpi section's stream-mode settings into the model: the default (auto), each mode, the
// slot size and the full-stream pool, and out-of-range values rejected with the field's name.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "control/config/config_loader.h"

namespace dpu::ctl {
namespace {

absl::StatusOr<rules::ConfigModel> load(const std::string& json, rules::ConfigErrorList* errs) {
  auto c = parseConfig(json, ConfigFormat::kJson, "t.json");
  if (!c.ok()) return c.status();
  return toModel(*c, errs);
}

TEST(DpiConfig, StreamModeDefaultsAndValues) {
  rules::ConfigErrorList errs;
  auto m = load(R"({"dpi": {}})", &errs);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(errs.empty());
  EXPECT_EQ(m->dpi.stream_mode, rules::DpiStreamMode::kAuto);
  EXPECT_EQ(m->dpi.compressed_slot_bytes, 0u);  // the runtime's default: 512 + 192 per database beyond the first
  EXPECT_EQ(m->dpi.shards, 0u);
  EXPECT_FALSE(m->dpi.full_recompile);
  EXPECT_EQ(m->dpi.full_streams_per_worker, 256u);
  m = load(R"({"dpi": {"stream_mode": "STREAM_FULL"}})", &errs);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->dpi.stream_mode, rules::DpiStreamMode::kFull);
  m = load(R"({"dpi": {"stream_mode": "STREAM_COMPRESSED", "compressed_slot_bytes": 256,
                       "full_streams_per_worker": 64}})", &errs);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->dpi.stream_mode, rules::DpiStreamMode::kCompressed);
  EXPECT_EQ(m->dpi.compressed_slot_bytes, 256u);
  EXPECT_EQ(m->dpi.full_streams_per_worker, 64u);
}

TEST(DpiConfig, OutOfRangeNamesTheField) {
  for (const char* json : {R"({"dpi": {"compressed_slot_bytes": 32}})",
                           R"({"dpi": {"compressed_slot_bytes": 70000}})",
                           R"({"dpi": {"full_streams_per_worker": 5000000}})"}) {
    rules::ConfigErrorList errs;
    auto m = load(json, &errs);
    EXPECT_FALSE(m.ok()) << json;
    std::string all(m.status().message());
    for (const auto& e : errs) all += "\n" + rules::formatError(e);
    const std::string field = std::string(json).find("full") != std::string::npos
                                  ? "dpi.full_streams_per_worker" : "dpi.compressed_slot_bytes";
    EXPECT_NE(all.find(field), std::string::npos) << all;
  }
}

// Prefilter settings: defaults, values, and out-of-range values naming the field.
TEST(DpiConfig, PrefilterWindowSettings) {
  rules::ConfigErrorList errs;
  auto m = load(R"({"dpi": {}})", &errs);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->dpi.prefilter_window_bytes, 8192u);
  EXPECT_EQ(m->dpi.prefilter_windows_per_worker, 4096u);
  m = load(R"({"dpi": {"prefilter_window_bytes": 16384, "prefilter_windows_per_worker": 64}})", &errs);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->dpi.prefilter_window_bytes, 16384u);
  EXPECT_EQ(m->dpi.prefilter_windows_per_worker, 64u);
  for (const auto& [json, field] : std::vector<std::pair<const char*, const char*>>{
           {R"({"dpi": {"prefilter_window_bytes": 8}})", "dpi.prefilter_window_bytes"},
           {R"({"dpi": {"prefilter_window_bytes": 2000000}})", "dpi.prefilter_window_bytes"},
           {R"({"dpi": {"prefilter_windows_per_worker": 5000000}})", "dpi.prefilter_windows_per_worker"}}) {
    rules::ConfigErrorList e;
    auto r = load(json, &e);
    EXPECT_FALSE(r.ok()) << json;
    std::string all(r.status().message());
    for (const auto& x : e) all += "\n" + rules::formatError(x);
    EXPECT_NE(all.find(field), std::string::npos) << all;
  }
}

}  // namespace
}  // namespace dpu::ctl

namespace dpu::ctl {
namespace {

// --- http --- dpi.http and dpi.scopes into the model (docs/http.md): absent = off, defaults,
// values, and bad values rejected with the field's name.
TEST(DpiConfig, HttpSettingsAndScopes) {
  rules::ConfigErrorList errs;
  auto m = load(R"({"dpi": {}})", &errs);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(m->dpi.http.enabled);  // no rules: nothing to see files with
  m = load(R"({"dpi": {"http": {}}})", &errs);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->dpi.http.enabled);
  EXPECT_FALSE(m->dpi.http.implicit);
  EXPECT_TRUE(m->dpi.scopes.empty());
  EXPECT_EQ(m->dpi.http.decompress_layers, 3u);
  EXPECT_EQ(m->dpi.http.ports, (std::vector<uint16_t>{80, 8000, 8080, 8888, 3128}));
  EXPECT_TRUE(m->dpi.http.detect_on_other_ports);
  EXPECT_EQ(m->dpi.http.personality, 2);  // HTP_SERVER_IDS
  EXPECT_TRUE(m->dpi.http.fileinfo_events);
  EXPECT_FALSE(m->dpi.http.http_events);
  m = load(R"({"dpi": {"ruleSets": [{"name": "s", "text": "rule r { condition: true }"}],
               "http": {"ports": [81], "detectOnOtherPorts": false, "personality": "PERSONALITY_APACHE_2",
                        "flowSlotsPerWorker": 7, "decompressLayers": 3, "httpEvents": true,
                        "fileinfoEvents": false},
               "scopes": [{"source": "s", "inspect": "INSPECT_BOTH"}]}})", &errs);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->dpi.http.ports, (std::vector<uint16_t>{81}));
  EXPECT_FALSE(m->dpi.http.detect_on_other_ports);
  EXPECT_EQ(m->dpi.http.personality, 9);  // HTP_SERVER_APACHE_2
  EXPECT_EQ(m->dpi.http.flow_slots_per_worker, 7u);
  EXPECT_EQ(m->dpi.http.decompress_layers, 3u);
  EXPECT_TRUE(m->dpi.http.http_events);
  EXPECT_FALSE(m->dpi.http.fileinfo_events);
  ASSERT_EQ(m->dpi.scopes.size(), 1u);
  EXPECT_EQ(m->dpi.scopes[0].inspect, rules::DpiInspect::kBoth);
  for (auto [json, field] : std::vector<std::pair<const char*, const char*>>{
           {R"({"dpi": {"http": {"ports": [70000]}}})", "dpi.http.ports[0]"},
           {R"({"dpi": {"http": {"decompressLayers": 9}}})", "dpi.http.decompress_layers"},
           {R"({"dpi": {"http": {"flowSlotsPerWorker": 2000000}}})", "dpi.http.flow_slots_per_worker"},
           {R"({"dpi": {"scopes": [{"source": "nope", "inspect": "INSPECT_FILES"}]}})", "dpi.scopes[0].source"}}) {
    rules::ConfigErrorList e;
    auto bad = load(json, &e);
    std::string all(bad.ok() ? "" : bad.status().message());
    for (const auto& x : e) all += "\n" + rules::formatError(x);
    EXPECT_FALSE(bad.ok() && e.empty()) << json;
    EXPECT_NE(all.find(field), std::string::npos) << json << ": " << all;
  }
}

// Issue 30: HTTP parsing is on by default when DPI has rules (a rule file alone catches a
// chunked / gzip download), with the defaults of a dpi.http section; a source without a
// scope then inspects files and the raw stream of HTTP flows (what it saw before stays seen).
// `dpi.http.enabled: false` turns it off; a dpi.http section keeps meaning what it meant.
TEST(DpiConfig, HttpOnByDefaultWhenThereAreRules) {
  rules::ConfigErrorList errs;
  auto m = load(R"({"dpi": {"ruleSets": [{"name": "s", "text": "rule r { condition: true }"},
                                         {"name": "t", "text": "rule q { condition: true }"}],
                            "scopes": [{"source": "t", "inspect": "INSPECT_STREAM"}]}})", &errs);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->dpi.http.enabled);
  EXPECT_TRUE(m->dpi.http.implicit);
  EXPECT_EQ(m->dpi.http.ports, (std::vector<uint16_t>{80, 8000, 8080, 8888, 3128}));
  EXPECT_TRUE(m->dpi.http.detect_on_other_ports);
  EXPECT_EQ(m->dpi.http.decompress_layers, 3u);
  ASSERT_EQ(m->dpi.scopes.size(), 2u);
  EXPECT_EQ(m->dpi.scopes[0].source, "t");  // the config's scope stays
  EXPECT_EQ(m->dpi.scopes[0].inspect, rules::DpiInspect::kStream);
  EXPECT_EQ(m->dpi.scopes[1].source, "s");
  EXPECT_EQ(m->dpi.scopes[1].inspect, rules::DpiInspect::kBoth);
  // Explicitly off: no HTTP parsing, no scopes added.
  m = load(R"({"dpi": {"ruleSets": [{"name": "s", "text": "rule r { condition: true }"}],
                       "http": {"enabled": false}}})", &errs);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(m->dpi.http.enabled);
  EXPECT_FALSE(m->dpi.http.implicit);
  EXPECT_TRUE(m->dpi.scopes.empty());
  // A section is on unless it says otherwise, and `enabled: true` is the same.
  for (const char* json : {R"({"dpi": {"ruleSets": [{"name": "s", "text": "rule r { condition: true }"}],
                                     "http": {"ports": [80]}}})",
                           R"({"dpi": {"ruleSets": [{"name": "s", "text": "rule r { condition: true }"}],
                                     "http": {"enabled": true, "ports": [80]}}})"}) {
    m = load(json, &errs);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_TRUE(m->dpi.http.enabled) << json;
    EXPECT_FALSE(m->dpi.http.implicit) << json;
    EXPECT_EQ(m->dpi.http.ports, (std::vector<uint16_t>{80})) << json;
    EXPECT_TRUE(m->dpi.scopes.empty()) << json;  // the documented default scope: files
  }
  // Turned off, its fields are still validated (by name).
  rules::ConfigErrorList e;
  auto bad = load(R"({"dpi": {"http": {"enabled": false, "decompressLayers": 9}}})", &e);
  std::string all(bad.ok() ? "" : bad.status().message());
  for (const auto& x : e) all += "\n" + rules::formatError(x);
  EXPECT_NE(all.find("dpi.http.decompress_layers"), std::string::npos) << all;
}

// Found by the http fuzz target: libhtp 0.5 refuses the IIS 4.0 and IIS 5.0 personalities
// (htp_config_set_server_personality fails), so validate said "ok" to a config whose HTTP
// runtime then could not be created (replay / apply failed with "libhtp does not know
// personality 3"). Validation asks libhtp and names the field; every other personality loads.
TEST(DpiConfig, HttpPersonalityLibhtpDoesNotImplementIsRefused) {
  for (const char* p : {"PERSONALITY_IIS_4_0", "PERSONALITY_IIS_5_0"}) {
    rules::ConfigErrorList e;
    auto bad = load(std::string(R"({"dpi": {"http": {"personality": ")") + p + R"("}}})", &e);
    std::string all(bad.ok() ? "" : bad.status().message());
    for (const auto& x : e) all += "\n" + rules::formatError(x);
    EXPECT_FALSE(bad.ok() && e.empty()) << p;
    EXPECT_NE(all.find("dpi.http.personality"), std::string::npos) << p << ": " << all;
    EXPECT_NE(all.find("libhtp"), std::string::npos) << p << ": " << all;
  }
  for (const char* p : {"PERSONALITY_MINIMAL", "PERSONALITY_GENERIC", "PERSONALITY_IDS", "PERSONALITY_IIS_5_1",
                        "PERSONALITY_IIS_6_0", "PERSONALITY_IIS_7_0", "PERSONALITY_IIS_7_5", "PERSONALITY_APACHE_2"}) {
    rules::ConfigErrorList e;
    auto ok = load(std::string(R"({"dpi": {"http": {"personality": ")") + p + R"("}}})", &e);
    EXPECT_TRUE(ok.ok() && e.empty()) << p << ": " << (ok.ok() ? "" : ok.status().message());
  }
}

}  // namespace
}  // namespace dpu::ctl
