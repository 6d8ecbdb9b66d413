#include "rules/compile/config_errors.h"

#include "absl/strings/str_cat.h"

namespace dpu::rules {
namespace {
// Longest rule id is 128 characters; field paths, file paths and reasons are written by us
// and stay well under these unless they quote an absurd input.
constexpr size_t kMaxRule = 160;
constexpr size_t kMaxField = 256;
constexpr size_t kMaxFile = 512;
constexpr size_t kMaxReason = 1024;
}  // namespace

std::string abbreviate(std::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  return absl::StrCat(std::string(s.substr(0, max / 2)), "... (", s.size(), " bytes)");
}

ConfigError abbreviated(const ConfigError& in) {
  ConfigError e = in;
  if (e.rule.size() > kMaxRule) e.rule = abbreviate(e.rule, kMaxRule);
  if (e.field.size() > kMaxField) e.field = abbreviate(e.field, kMaxField);
  if (e.file.size() > kMaxFile) e.file = abbreviate(e.file, kMaxFile);
  if (e.reason.size() > kMaxReason) e.reason = abbreviate(e.reason, kMaxReason);
  if (e.section.size() > kMaxField) e.section = abbreviate(e.section, kMaxField);
  return e;
}

const char* configErrorSubject(std::string_view section) {
  return section == "dns" ? "list" : "rule";
}

std::string formatError(const ConfigError& in) {
  if (in.rule.size() > kMaxRule || in.field.size() > kMaxField || in.file.size() > kMaxFile ||
      in.reason.size() > kMaxReason || in.section.size() > kMaxField) {
    return formatError(abbreviated(in));
  }
  const ConfigError& e = in;
  std::string s;
  if (!e.file.empty()) {
    absl::StrAppend(&s, e.file);
    if (e.line > 0) absl::StrAppend(&s, ":", e.line);
    absl::StrAppend(&s, ": ");
  }
  if (!e.rule.empty()) absl::StrAppend(&s, configErrorSubject(e.section), " '", e.rule, "': ");
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
