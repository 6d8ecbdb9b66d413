// Config documents: ApplianceConfig (proto/appliance.proto) in protobuf JSON mapping or
// protobuf text format, turned into the rules/ model. Every error names the source and
// the field.
#pragma once

#include <string>


#include "absl/status/statusor.h"
#include "proto/appliance.pb.h"
#include "rules/compiled/snapshot.h"

namespace dpu::ctl {

enum class ConfigFormat { kJson, kText };

// Text format for *.txtpb / *.textproto / *.pbtxt, JSON otherwise.
ConfigFormat formatForPath(const std::string& path);

// Parses a document. Unknown fields and bad values are rejected; the message names the
// source, the field and (text format) the line and column. An empty JSON object is valid.
absl::StatusOr<v1::ApplianceConfig> parseConfig(const std::string& text, ConfigFormat format,
                                                const std::string& source);

absl::StatusOr<v1::ApplianceConfig> loadConfigFile(const std::string& path);

// Applies defaults (unset = documented default) and validates ranges; errors name the
// field path, e.g. "dataplane.flow_table.capacity_per_worker: 5 is out of range [...]".
// `errors` (optional) receives every error, one by one.
absl::StatusOr<rules::ConfigModel> toModel(const v1::ApplianceConfig& cfg,
                                           rules::ConfigErrorList* errors = nullptr);

}  // namespace dpu::ctl
