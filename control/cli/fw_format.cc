#include "control/cli/fw_format.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "control/cli/cli_format.h"
#include "control/config/config_loader.h"
#include "rules/compile/firewall_parsers.h"

namespace dpu::cli {
namespace {

std::string actionWord(v1::FirewallAction a) {
  switch (a) {
    case v1::ALLOW: return "allow";
    case v1::DENY: return "deny";
    case v1::REJECT: return "reject";
    default: return "allow";  // ACTION_DEFAULT: the documented default of the defaults
  }
}

// 1234567 -> "1.2M"; small numbers as they are.
std::string human(uint64_t v) {
  if (v < 100000) return absl::StrCat(v);
  const char* units[] = {"k", "M", "G", "T", "P"};
  double d = static_cast<double>(v);
  int u = -1;
  while (d >= 1000 && u < 4) {
    d /= 1000;
    ++u;
  }
  return absl::StrFormat("%.1f%s", d, units[u]);
}

}  // namespace

absl::StatusOr<v1::FirewallRule> firewallRuleFromText(const std::string& text) {
  rules::ConfigErrorList errors;
  auto spec = rules::parseTextRule(text, "", 0, &errors);
  if (spec.ok()) {
    // Values (prefixes, ports, countries ...) checked locally; sets and countries are the
    // server's business (it knows the sets and the GeoIP database).
    // A set may hold either family: stand in for it with both.
    rules::FirewallRuleSpec local = *spec;
    for (auto* list : {&local.src, &local.dst}) {
      bool had_set = false;
      list->erase(std::remove_if(list->begin(), list->end(),
                                 [&](const std::string& s) {
                                   bool set = !s.empty() && s[0] == '@';
                                   had_set |= set;
                                   return set;
                                 }),
                  list->end());
      if (had_set) {
        list->push_back("0.0.0.0/0");
        list->push_back("::/0");
      }
    }
    rules::convertRuleSpec(local, {}, /*geoip_configured=*/true, errors);
  }
  if (!errors.empty()) {
    std::vector<std::string> lines;
    for (const auto& e : errors) lines.push_back(rules::formatError(e));
    return absl::InvalidArgumentError(absl::StrJoin(lines, "; "));
  }
  return ctl::protoFromSpec(*spec);
}

absl::StatusOr<std::vector<v1::FirewallRule>> firewallRulesFromFile(
    const std::string& path, std::vector<std::string>* errors, std::vector<int>* lines) {
  rules::ConfigErrorList errs;
  auto specs = rules::loadRuleFile(path, &errs);
  if (!specs.ok()) {
    if (errors) {
      for (const auto& e : errs) errors->push_back(rules::formatError(e));
    }
    return specs.status();
  }
  std::vector<v1::FirewallRule> out;
  for (const auto& s : *specs) {
    out.push_back(ctl::protoFromSpec(s));
    if (lines) lines->push_back(s.line);
  }
  return out;
}

std::string firewallRuleText(const v1::FirewallRule& rule) {
  return rules::formatTextRule(ctl::specFromProto(rule, -1));
}

std::string firewallMatchText(const v1::FirewallRule& rule) {
  rules::FirewallRuleSpec s = ctl::specFromProto(rule, -1);
  s.id.clear();
  s.priority = 0;
  s.description.clear();
  s.action = rules::FwAction::kDeny;
  std::string t = rules::formatTextRule(s);
  return t.substr(t.find(' ') + 1);  // without the action word
}

std::string formatFirewallRules(const v1::ListFirewallRulesResponse& r) {
  std::string o = absl::StrFormat(
      "firewall (config version %d): %d rule(s), defaults a->b %s, b->a %s; existing flows %s "
      "on rule changes\n",
      r.config_version(), r.rules_size(), actionWord(r.default_a_to_b()),
      actionWord(r.default_b_to_a()),
      r.keep_established_on_change() ? "keep their verdict" : "are judged again");
  absl::StrAppendFormat(&o, "ACL entries: %d IPv4, %d IPv6; GeoIP database: %s", r.acl_entries_v4(),
                        r.acl_entries_v6(),
                        r.geoip_database().empty() ? "none" : r.geoip_database());
  if (r.countries_size()) absl::StrAppend(&o, " (countries ", absl::StrJoin(r.countries(), ","), ")");
  absl::StrAppend(&o, "\n");
  if (r.rules_size() == 0) return o;
  std::vector<std::vector<std::string>> rows = {{"RANK", "ID", "ACTION", "PRIO", "PACKETS",
                                                 "BYTES", "FLOWS", "LAST HIT", "ENTRIES",
                                                 "SOURCE", "RULE"}};
  for (const auto& st : r.rules()) {
    const v1::FirewallRule& rule = st.rule();
    std::string match = firewallMatchText(rule);
    if (!rule.description().empty()) absl::StrAppend(&match, "  # ", rule.description());
    rows.push_back({absl::StrCat(st.rank()), rule.id(), actionWord(rule.action()),
                    absl::StrCat(rule.priority()), human(st.packets()), human(st.bytes()),
                    human(st.flows()),
                    st.last_hit_unix_ns() ? formatTime(st.last_hit_unix_ns()) : "-",
                    absl::StrCat(st.acl_entries()), st.source(), match});
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      // Numbers right-aligned, text left-aligned; the last column is not padded.
      const bool numeric = c == 0 || (c >= 3 && c <= 6) || c == 8;
      if (c + 1 == row.size()) {
        absl::StrAppend(&line, row[c]);
      } else if (numeric) {
        absl::StrAppend(&line, std::string(width[c] - row[c].size(), ' '), row[c], "  ");
      } else {
        absl::StrAppend(&line, row[c], std::string(width[c] - row[c].size(), ' '), "  ");
      }
    }
    absl::StrAppend(&o, line, "\n");
  }
  return o;
}

std::string formatLookupCountry(const v1::LookupCountryResponse& r) {
  std::string o;
  if (!r.found()) {
    absl::StrAppendFormat(&o, "%s: not in the database\n", r.ip());
  } else {
    absl::StrAppendFormat(&o, "%s: country %s", r.ip(),
                          r.country().empty() ? "(none)" : r.country());
    if (!r.registered_country().empty() && r.registered_country() != r.country()) {
      absl::StrAppendFormat(&o, ", registered country %s", r.registered_country());
    }
    absl::StrAppendFormat(&o, ", network %s\n", r.network());
  }
  absl::StrAppendFormat(&o, "firewall country index %d (%s)\n", r.country_index(),
                        r.country_index() ? "named by the rules" : "no rule names it");
  absl::StrAppendFormat(&o, "database %s (%s, built %s)\n", r.database(), r.database_type(),
                        r.database_build_epoch()
                            ? formatTime(static_cast<int64_t>(r.database_build_epoch()) *
                                         1000000000ll)
                            : std::string("?"));
  return o;
}

}  // namespace dpu::cli
