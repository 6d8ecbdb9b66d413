// dpuctl's pieces that do not talk to the network: human rendering of the API messages,
// config diffs, `config set` assignments, error details. No DPDK, no server state.
#pragma once

#include <google/protobuf/field_mask.pb.h>
#include <google/protobuf/message.h>
#include <grpcpp/grpcpp.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/appliance_api.pb.h"

namespace dpu::cli {

// Protobuf JSON (proto field names as in the .proto).
std::string toJson(const google::protobuf::Message& m, bool pretty);
// Reads a whole file; false with "<path>: cannot open" in *err.
bool readFile(const std::string& path, std::string* out, std::string* err);

std::string formatStatus(const v1::StatusResponse& s);
// `prev` (may be null) is the previous sample of a watch: rates are shown when given.
std::string formatStats(const v1::Stats& s, const v1::Stats* prev);
// A watch sample after the first: rates per port (packets and bits per second), verdict and
// new-flow rates, then only the counters that changed since `prev` (value, delta, rate).
std::string formatStatsChanges(const v1::Stats& s, const v1::Stats& prev);
std::string formatEvent(const v1::Event& e);
std::string formatExplain(const v1::ExplainResponse& r);
std::string formatApply(const v1::ApplyConfigResponse& r);
// "file:line: rule 'x': dataplane.timeouts.udp_s: reason" (like rules::formatError).
std::string formatConfigError(const v1::ConfigError& e);
// One line of long work in progress: "config apply: compiling 12/40 rules (30%), 2.0 s".
std::string formatTask(const v1::TaskProgress& t);
std::string formatTime(int64_t unix_ns);

// The ConfigErrors carried in a failed call's details (dpu.v1.RpcStatus, wire-compatible
// with google.rpc.Status); empty when there are none.
std::vector<v1::ConfigError> configErrorsFromStatus(const grpc::Status& st);

struct DiffLine {
  enum Kind { kAdded, kRemoved, kChanged } kind;
  std::string path;       // e.g. "dataplane.non_ip"
  std::string committed;  // JSON value; empty when added
  std::string proposed;   // JSON value; empty when removed
};
// Leaf-by-leaf difference of two documents compared as JSON with proto field names (unset
// fields and defaults are absent); `version` is ignored. Sorted by path.
absl::StatusOr<std::vector<DiffLine>> diffConfigs(const v1::ApplianceConfig& committed,
                                                  const v1::ApplianceConfig& proposed);
std::string formatDiff(const std::vector<DiffLine>& lines);

// `config set` arguments "PATH=VALUE": VALUE is JSON when it parses as JSON (numbers, true,
// "quoted", {...}), otherwise a string (enum names such as DROP); an empty VALUE clears the
// field. Builds the partial document and the update mask; errors name the argument.
absl::StatusOr<v1::ApplianceConfig> configFromAssignments(
    const std::vector<std::string>& assignments, google::protobuf::FieldMask* mask);

// Hex bytes, optionally separated by spaces, ':' or '-' ("0x" prefix allowed).
absl::StatusOr<std::string> parseHex(const std::string& text);

}  // namespace dpu::cli
