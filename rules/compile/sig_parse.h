// Suricata-format rule parser (docs/signatures.md): `.rules` text -> Signature models, and
// for every rule that is not accepted a refusal with its sid, line and reason (the way
// unsupported YARA rules are reported). Hand-written (no maintained C/C++ library parses
// Suricata's rule language outside Suricata itself); fuzzed by tests/fuzz/sig_parse_fuzz.cc.
//
// Accepted: the header (actions alert / drop / reject / pass; protocols ip, tcp, udp, icmp,
// tcp-pkt, tcp-stream, http, dns, tls; address and port lists, ranges, negation, variables;
// -> and <>), and the options of the subset in docs/signatures.md. A rule with any other
// keyword, protocol or form is refused as a whole, never loaded with a part ignored.
#pragma once

#include <map>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "rules/model/signature.h"

namespace dpu::rules {

// classification.config: short name -> (description, priority).
struct SigClassification {
  std::map<std::string, std::pair<std::string, int>, std::less<>> classes;
};
// Parses `config classification: name,description,priority` lines (others ignored).
absl::StatusOr<SigClassification> parseClassification(absl::string_view text,
                                                      absl::string_view source);

// Suricata's default variables (suricata.yaml): HOME_NET, EXTERNAL_NET, HTTP_SERVERS,
// HTTP_PORTS, ... Entries of `vars` override and extend them.
SigVars sigDefaultVars();

struct SigParseResult {
  std::vector<Signature> rules;     // accepted, in file order
  std::vector<SigRefusal> refused;  // in file order
  uint32_t commented = 0;           // disabled rules (`# alert ...`), not counted as refused
};

// One rule (text without the trailing newline; continuation lines already joined).
absl::StatusOr<Signature> parseSignature(absl::string_view rule, const SigVars& vars);

// A whole file or rule set: one rule per line (a line ending in `\` continues), `#`
// comments, blank lines. `source` names it in refusals and in Signature::source; `cls`
// (optional) gives each rule's default priority from its classtype.
void parseSignatures(absl::string_view text, absl::string_view source, const SigVars& vars,
                     const SigClassification* cls, SigParseResult& out);

}  // namespace dpu::rules
