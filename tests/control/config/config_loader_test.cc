#include "control/config/config_loader.h"

#include <gtest/gtest.h>

#include <string>

namespace dpu::ctl {
namespace {

absl::StatusOr<rules::ConfigModel> load(const std::string& text,
                                        ConfigFormat f = ConfigFormat::kJson) {
  auto c = parseConfig(text, f, "test.json");
  if (!c.ok()) return c.status();
  return toModel(*c);
}

TEST(ConfigLoader, EmptyObjectMeansDefaults) {
  auto m = load("{}");
  ASSERT_TRUE(m.ok()) << m.status();
  rules::DataplaneSettings d;
  EXPECT_EQ(m->dataplane.flow_capacity, d.flow_capacity);
  EXPECT_EQ(m->dataplane.flow_capacity, 1u << 20);
  EXPECT_EQ(m->dataplane.non_ip, rules::Policy::kForward);
  EXPECT_EQ(m->dataplane.malformed, rules::Policy::kDrop);
  EXPECT_EQ(m->dataplane.frag_overlapping, rules::Policy::kDrop);
  EXPECT_EQ(m->dataplane.tcp_midstream, rules::Policy::kForward);
}

TEST(ConfigLoader, FieldsAreApplied) {
  auto m = load(R"({"dataplane": {"flowTable": {"capacityPerWorker": 65536, "whenFull": "DROP"},
                   "timeouts": {"udpS": 30, "tcpEstablishedS": 600},
                   "nonIp": "DROP", "malformed": "FORWARD",
                   "fragments": {"overlapping": "FORWARD", "timeoutMs": 500},
                   "tcp": {"midstream": "DROP"}}})");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->dataplane.flow_capacity, 65536u);
  EXPECT_EQ(m->dataplane.flow_when_full, rules::Policy::kDrop);
  EXPECT_EQ(m->dataplane.udp_s, 30u);
  EXPECT_EQ(m->dataplane.tcp_established_s, 600u);
  EXPECT_EQ(m->dataplane.tcp_syn_s, 60u);  // untouched default
  EXPECT_EQ(m->dataplane.non_ip, rules::Policy::kDrop);
  EXPECT_EQ(m->dataplane.malformed, rules::Policy::kForward);
  EXPECT_EQ(m->dataplane.frag_overlapping, rules::Policy::kForward);
  EXPECT_EQ(m->dataplane.frag_timeout_ms, 500u);
  EXPECT_EQ(m->dataplane.tcp_midstream, rules::Policy::kDrop);
}

TEST(ConfigLoader, ProtoFieldNamesAreAcceptedToo) {
  auto m = load(R"({"dataplane": {"flow_table": {"capacity_per_worker": 2048}}})");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->dataplane.flow_capacity, 2048u);
}

TEST(ConfigLoader, UnknownFieldIsRejectedByName) {
  auto m = load(R"({"dataplane": {"flowTable": {"capacity": 10}}})");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("capacity"), std::string::npos) << m.status();
  EXPECT_NE(m.status().message().find("test.json"), std::string::npos) << m.status();
}

TEST(ConfigLoader, BadEnumValueIsRejectedByName) {
  auto m = load(R"({"dataplane": {"nonIp": "MAYBE"}})");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("dataplane.non_ip"), std::string::npos) << m.status();
}

TEST(ConfigLoader, WrongTypeIsRejected) {
  auto m = load(R"({"dataplane": {"flowTable": {"capacityPerWorker": "lots"}}})");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("dataplane.flow_table.capacity_per_worker"), std::string::npos) << m.status();
}

TEST(ConfigLoader, OutOfRangeNamesTheFieldPath) {
  auto m = load(R"({"dataplane": {"flowTable": {"capacityPerWorker": 5}}})");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("dataplane.flow_table.capacity_per_worker"),
            std::string::npos)
      << m.status();
  auto t = load(R"({"dataplane": {"fragments": {"maxFragments": 1000}}})");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("dataplane.fragments.max_fragments"), std::string::npos)
      << t.status();
}

TEST(ConfigLoader, MalformedJsonIsRejected) {
  auto m = load(R"({"dataplane": )");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ConfigLoader, TextFormatWithLineNumbers) {
  auto ok = load("dataplane {\n  timeouts { udp_s: 9 }\n}\n", ConfigFormat::kText);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->dataplane.udp_s, 9u);
  auto bad = load("dataplane {\n  timeouts { udp_seconds: 9 }\n}\n", ConfigFormat::kText);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("udp_seconds"), std::string::npos) << bad.status();
}

TEST(ConfigLoader, FormatFollowsExtension) {
  EXPECT_EQ(formatForPath("a.json"), ConfigFormat::kJson);
  EXPECT_EQ(formatForPath("a.txtpb"), ConfigFormat::kText);
  EXPECT_EQ(formatForPath("a.textproto"), ConfigFormat::kText);
}

TEST(ConfigLoader, MissingFileIsNotFound) {
  auto c = loadConfigFile("/nonexistent/dpu.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
}

TEST(ConfigLoader, ShippedExampleConfigIsValid) {
  auto c = loadConfigFile(std::string(DPU_SOURCE_DIR) + "/examples/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  auto m = toModel(*c);
  EXPECT_TRUE(m.ok()) << m.status();
}

}  // namespace
}  // namespace dpu::ctl

namespace dpu::ctl {
namespace {

TEST(ConfigLoader, EveryBadFieldIsReported) {
  auto c = parseConfig(R"({"dataplane": {"flowTable": {"capacityPerWorker": 5, "agingSlice": 99999},
                          "fragments": {"maxFragments": 1}}})",
                       ConfigFormat::kJson, "t.json");
  ASSERT_TRUE(c.ok());
  rules::ConfigErrorList errors;
  auto m = toModel(*c, &errors);
  ASSERT_FALSE(m.ok());
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0].field, "dataplane.flow_table.capacity_per_worker");
  EXPECT_EQ(errors[1].field, "dataplane.flow_table.aging_slice");
  EXPECT_EQ(errors[2].field, "dataplane.fragments.max_fragments");
  EXPECT_EQ(errors[0].section, "dataplane");
  EXPECT_NE(m.status().message().find("3 errors"), std::string::npos) << m.status();
}

}  // namespace
}  // namespace dpu::ctl
