#include "rules/compile/config_errors.h"

#include "absl/strings/str_cat.h"

namespace dpu::rules {

std::string formatError(const ConfigError& e) {
  std::string s;
  if (!e.file.empty()) {
    absl::StrAppend(&s, e.file);
    if (e.line > 0) absl::StrAppend(&s, ":", e.line);
    absl::StrAppend(&s, ": ");
  }
  if (!e.rule.empty()) absl::StrAppend(&s, "rule '", e.rule, "': ");
  if (!e.field.empty()) {
    absl::StrAppend(&s, e.field);
    if (e.index >= 0 && e.rule.empty()) absl::StrAppend(&s, "[", e.index, "]");
    absl::StrAppend(&s, ": ");
  } else if (!e.section.empty()) {
    absl::StrAppend(&s, e.section, ": ");
  }
  absl::StrAppend(&s, e.reason);
  return s;
}

absl::Status errorsToStatus(const ConfigErrorList& errors) {
  if (errors.empty()) return absl::OkStatus();
  if (errors.size() == 1) return absl::InvalidArgumentError(formatError(errors[0]));
  std::string s = absl::StrCat(errors.size(), " errors: ");
  for (size_t i = 0; i < errors.size(); ++i) {
    absl::StrAppend(&s, i ? "; " : "", formatError(errors[i]));
  }
  return absl::InvalidArgumentError(s);
}

}  // namespace dpu::rules
