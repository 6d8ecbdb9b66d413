// Errors found while validating / compiling a configuration. Every error says where it is:
// section, rule id or index, file and line when the rule came from a file, the field path,
// and why. Compilers collect all of them instead of stopping at the first.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace dpu::rules {

struct ConfigError {
  std::string section;   // "dataplane", "firewall", ...
  std::string rule;      // rule / list / backend id, when there is one
  int index = -1;        // position in a repeated field, -1 when not applicable
  int line = 0;          // line in a source file, 0 when none
  std::string file;
  std::string field;     // field path, e.g. "dataplane.flow_table.capacity_per_worker"
  std::string reason;
};

using ConfigErrorList = std::vector<ConfigError>;

// "dataplane.flow_table.capacity_per_worker: 5 is out of range [1024, 67108864]", with
// file:line and rule when set. Absurdly long parts (a rule id of a megabyte, a reason quoting
// a huge value) are shortened (see abbreviate), so one bad input cannot make an error huge.
std::string formatError(const ConfigError& e);
// `s` when at most `max` bytes, else its first max/2 bytes + "... (N bytes)".
std::string abbreviate(std::string_view s, size_t max);
// The error with every text field shortened as formatError shortens it (for the API).
ConfigError abbreviated(const ConfigError& e);
// The word that names ConfigError::rule in messages: "list" in section "dns" (the rule is a
// DNS list's name), "rule" elsewhere.
const char* configErrorSubject(std::string_view section);
// InvalidArgument listing every error ("N errors: ...; ..."), or OK when the list is empty.
absl::Status errorsToStatus(const ConfigErrorList& errors);

}  // namespace dpu::rules
