// Config documents: ApplianceConfig (proto/appliance.proto) in protobuf JSON mapping or
// protobuf text format, turned into the rules/ model. Every error names the source and
// the field.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/appliance.pb.h"
#include "rules/compile/firewall_parsers.h"
#include "rules/compiled/snapshot.h"

namespace dpu::ctl {

enum class ConfigFormat { kJson, kText };

// Text format for *.txtpb / *.textproto / *.pbtxt, JSON otherwise.
ConfigFormat formatForPath(const std::string& path);

// Parses a document. Unknown fields and bad values are rejected; the message names the
// source, the field and (text format) the line and column. An empty JSON object is valid.
absl::StatusOr<v1::ApplianceConfig> parseConfig(const std::string& text, ConfigFormat format,
                                                const std::string& source);

// A document parsed as far as it goes: every syntax, type, enum and unknown-field error
// (JSON: all of them, see json_check.h; text format: protobuf's first error), and `config`,
// the document without the bad values. usable is false when nothing could be parsed (a JSON
// syntax error, any text format error): then only `errors` mean something.
struct ParsedConfig {
  v1::ApplianceConfig config;
  rules::ConfigErrorList errors;
  bool usable = true;
};
ParsedConfig parseConfigAll(const std::string& text, ConfigFormat format,
                            const std::string& source);
// loadConfigFile with every error: NotFound when the file cannot be read; relative paths
// resolved as loadConfigFile does.
absl::StatusOr<ParsedConfig> loadConfigFileAll(const std::string& path);

// Reads and parses a config file. Relative paths in it (firewall.rule_files,
// firewall.ip_sets[].file, geoip.database) are made absolute against the file's directory,
// so the document means the same wherever it is applied or persisted.
absl::StatusOr<v1::ApplianceConfig> loadConfigFile(const std::string& path);

// Calls `fn` on every non-empty path of a file the document names (firewall rule and IP set
// files, the GeoIP database, DPI rule, signature and classification files, DNS list files; not
// dpi.cache_dir, a directory). The fleet ships these files with the document.
void forEachConfigFile(v1::ApplianceConfig* cfg, const std::function<void(std::string*)>& fn);

// Makes the relative file paths of `cfg` (see loadConfigFile) absolute against `base_dir`
// (itself made absolute against the working directory).
void resolveRelativePaths(v1::ApplianceConfig* cfg, const std::string& base_dir);

// What toModel learned besides the model.
struct ModelDetails {
  // Every firewall rule as written, in model order (firewall.rules, then each rule file's
  // rules): what ListFirewallRules shows.
  std::vector<rules::FirewallRuleSpec> firewall_rules;
  // Not errors, but worth telling whoever applies the config (e.g. a rule's country that
  // no network of the GeoIP database has), one line each.
  std::vector<std::string> warnings;
};

// Applies defaults (unset = documented default) and validates ranges; errors name the
// field path, e.g. "dataplane.flow_table.capacity_per_worker: 5 is out of range [...]".
// The firewall section is converted too: rule files and IP set files are read (relative
// paths against the working directory), every rule is checked on its own (errors name
// "firewall.rules[3].dst_ports", or file:line and the file's field name) and the rule set as
// a whole (unique ids, the ACL entry cap); geoip.database is opened and must hold country
// data. `errors` (optional) receives every error, one by one.
absl::StatusOr<rules::ConfigModel> toModel(const v1::ApplianceConfig& cfg,
                                           rules::ConfigErrorList* errors = nullptr,
                                           ModelDetails* details = nullptr);

// Warnings about a valid model whose policies contradict each other (apply returns them,
// validate and replay print them): a firewall whose default is DENY or REJECT (either
// direction) with dataplane.non_ip FORWARD lets every frame without IPv4/IPv6 (ARP, LLDP,
// MPLS, PPPoE discovery and PPP control, ...) through without a verdict.
std::vector<std::string> policyWarnings(const rules::ConfigModel& m);
// Every error of a document in one list: toModel's, then compileSnapshot's (rule files, DNS
// list files, YARA rules, LB tables). When toModel refuses some sections, the others are
// still compiled (each on its own) so their errors come in the same answer.
rules::ConfigErrorList validateConfig(const v1::ApplianceConfig& cfg);
// The errors `errors` (toModel's, or compileSnapshot's when compiled_already) kept hidden:
// each section is compiled on its own, a section with errors again without the fields they
// name (a few rounds), and what is new is appended to `errors`. compiled_already: only the
// sections with errors are tried (the others compiled cleanly).
void compileCleanSections(const v1::ApplianceConfig& cfg, rules::ConfigErrorList& errors,
                          bool compiled_already = false);
// Every error of a parsed document: its parse errors, then (when usable) validateConfig's
// on what parsed, less those that only repeat a parse error (a value left out).
rules::ConfigErrorList allErrors(const ParsedConfig& parsed);

// A firewall rule of the config document as a rule spec (index = its position in
// firewall.rules, -1 when it is not in the document yet), and back.
rules::FirewallRuleSpec specFromProto(const v1::FirewallRule& rule, int index);
v1::FirewallRule protoFromSpec(const rules::FirewallRuleSpec& spec);

}  // namespace dpu::ctl
