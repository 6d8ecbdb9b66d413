// Every type, enum and unknown-field error of a JSON config document at once. Protobuf's JSON
// parser stops at the first problem; this pass walks the document (nlohmann_json) against
// ApplianceConfig's descriptor, names each bad value by its field path (proto field names,
// "firewall.rules[2].action"), lists the valid values of enums, and leaves the bad values out
// of a cleaned copy so the rest of the document still parses and can be validated.
#pragma once

#include <string>
#include <string_view>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include "rules/compile/config_errors.h"

namespace dpu::ctl {

struct JsonCheck {
  // Syntax error: the document is not JSON at all (errors hold the one syntax error, with
  // its line and column); nothing else can be said.
  bool syntax_error = false;
  rules::ConfigErrorList errors;  // in document order
  std::string cleaned;            // the document without the bad values (when !syntax_error)
};

// Checks `text` against message type `type`. `source` is the file name the errors carry.
JsonCheck checkJsonDocument(const std::string& text, const google::protobuf::Descriptor* type,
                            const std::string& source);

// True when a semantic error about `field` only repeats what a parse error already said:
// the field is one a parse error names (or lies below it), e.g. "firewall.rules[0].action"
// (left out, so "action required") under the parse error "firewall.rules[0].action".
bool shadowedByParseError(const rules::ConfigErrorList& parse_errors, std::string_view field);

// Clears the field a path names ("dns.lists[2].ttl", "firewall.rules[1].dst_ports[0]") in
// `msg`: a singular field is cleared, an element of a repeated field set to its default
// (the indices of the others stay). False when the path names no field of `msg`.
bool clearFieldPath(google::protobuf::Message* msg, std::string_view path);

}  // namespace dpu::ctl
