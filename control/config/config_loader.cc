#include "control/config/config_loader.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "control/config/dpi_config.h"
#include "control/config/dns_config.h"
#include "rules/compile/firewall_compiler.h"
#include "rules/compile/geoip_db.h"
#include "control/config/json_check.h"
#include "control/config/lb_loader.h"
#include "rules/compiled/snapshot.h"

namespace dpu::ctl {
namespace {

class TextErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    errors.push_back(absl::StrCat("line ", line + 1, ", column ", column + 1, ": ", message));
  }
  void AddWarning(int line, google::protobuf::io::ColumnNumber column,
                  const std::string& message) override {}
  std::vector<std::string> errors;
};

rules::Policy policyOr(v1::PacketPolicy p, rules::Policy dflt) {
  switch (p) {
    case v1::FORWARD: return rules::Policy::kForward;
    case v1::DROP: return rules::Policy::kDrop;
    default: return dflt;
  }
}

template <class T>
void setIf(T v, T& out) {
  if (v != 0) out = v;
}

}  // namespace

ConfigFormat formatForPath(const std::string& path) {
  for (const char* ext : {".txtpb", ".textproto", ".pbtxt"}) {
    if (absl::EndsWith(path, ext)) return ConfigFormat::kText;
  }
  return ConfigFormat::kJson;
}

absl::StatusOr<v1::ApplianceConfig> parseConfig(const std::string& text, ConfigFormat format,
                                                const std::string& source) {
  v1::ApplianceConfig cfg;
  if (format == ConfigFormat::kText) {
    google::protobuf::TextFormat::Parser parser;
    TextErrors errors;
    parser.RecordErrorsTo(&errors);
    if (!parser.ParseFromString(std::string(text), &cfg)) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": ", absl::StrJoin(errors.errors, "; ")));
    }
    return cfg;
  }
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = false;
  auto st = google::protobuf::util::JsonStringToMessage(std::string(text), &cfg, opts);
  if (!st.ok()) {
    // Every problem of the document, not only the first protobuf met.
    ParsedConfig all = parseConfigAll(text, format, source);
    std::vector<std::string> parts;
    for (const rules::ConfigError& e : all.errors) {
      rules::ConfigError shown = e;
      shown.file.clear();  // the source prefixes the message
      parts.push_back(rules::formatError(shown));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": invalid config: ",
        parts.size() > 1 ? absl::StrCat(parts.size(), " errors: ") : "", absl::StrJoin(parts, "; ")));
  }
  return cfg;
}

ParsedConfig parseConfigAll(const std::string& text, ConfigFormat format,
                            const std::string& source) {
  ParsedConfig out;
  if (format == ConfigFormat::kText) {
    google::protobuf::TextFormat::Parser parser;
    TextErrors errors;
    parser.RecordErrorsTo(&errors);
    if (!parser.ParseFromString(std::string(text), &out.config)) {
      out.usable = false;
      for (const std::string& m : errors.errors) {
        rules::ConfigError e;
        e.file = source;
        e.reason = m;
        out.errors.push_back(std::move(e));
      }
      if (out.errors.empty()) out.errors.push_back({"", "", -1, 0, source, "", "not a config"});
    }
    return out;
  }
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = false;
  auto st = google::protobuf::util::JsonStringToMessage(std::string(text), &out.config, opts);
  if (st.ok()) return out;
  out.config.Clear();
  JsonCheck check = checkJsonDocument(text, v1::ApplianceConfig::descriptor(), source);
  out.errors = std::move(check.errors);
  if (check.syntax_error) {
    out.usable = false;
    return out;
  }
  // What is left parses (unless the check missed something protobuf refuses: then that is
  // reported as protobuf says it, and nothing more).
  auto rest = google::protobuf::util::JsonStringToMessage(check.cleaned, &out.config, opts);
  if (!rest.ok() || out.errors.empty()) {
    out.usable = false;
    const auto& why = rest.ok() ? st : rest;
    out.errors.push_back({"", "", -1, 0, source, "", std::string(why.message())});
  }
  return out;
}

absl::StatusOr<ParsedConfig> loadConfigFileAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open config file"));
  std::stringstream ss;
  ss << in.rdbuf();
  ParsedConfig p = parseConfigAll(ss.str(), formatForPath(path), path);
  if (p.usable) resolveRelativePaths(&p.config, std::filesystem::path(path).parent_path().string());
  return p;
}

rules::ConfigErrorList validateConfig(const v1::ApplianceConfig& cfg) {
  rules::ConfigErrorList errors;
  auto model = toModel(cfg, &errors);
  absl::Status st = model.status();
  if (model.ok()) {
    st = rules::compileSnapshot(*model, 0, &errors).status();
    if (!errors.empty()) compileCleanSections(cfg, errors, /*compiled_already=*/true);
  } else {
    compileCleanSections(cfg, errors);
  }
  if (!st.ok() && errors.empty()) {
    // A failure that did not come with a per-field error still has to be reported.
    rules::ConfigError e;
    e.reason = std::string(st.message());
    errors.push_back(std::move(e));
  }
  return errors;
}

void compileCleanSections(const v1::ApplianceConfig& cfg, rules::ConfigErrorList& errors,
                          bool compiled_already) {
  auto named = [&](std::initializer_list<const char*> sections) {
    for (const rules::ConfigError& e : errors) {
      for (const char* s : sections) {
        if (e.section == s) return true;
      }
    }
    return false;
  };
  const bool dataplane_ok = !named({"dataplane"});
  struct Section {
    std::initializer_list<const char*> names;
    bool present;
    std::function<void(const v1::ApplianceConfig&, v1::ApplianceConfig&)> copy;
  };
  const Section sections[] = {
      {{"firewall", "geoip"}, cfg.has_firewall() || cfg.has_geoip(),
       [](const v1::ApplianceConfig& from, v1::ApplianceConfig& to) {
         if (from.has_firewall()) *to.mutable_firewall() = from.firewall();
         if (from.has_geoip()) *to.mutable_geoip() = from.geoip();
       }},
      {{"lb"}, cfg.has_lb(),
       [](const v1::ApplianceConfig& from, v1::ApplianceConfig& to) { *to.mutable_lb() = from.lb(); }},
      {{"dpi"}, cfg.has_dpi(),
       [](const v1::ApplianceConfig& from, v1::ApplianceConfig& to) { *to.mutable_dpi() = from.dpi(); }},
      {{"dns"}, cfg.has_dns(),
       [](const v1::ApplianceConfig& from, v1::ApplianceConfig& to) { *to.mutable_dns() = from.dns(); }},
  };
  // A section toModel refused is tried again without the fields its errors name (left
  // out, as the parse pass leaves bad values out), up to a few rounds, so its compile errors
  // (list entries, YARA, tables) come in the same answer; errors that only repeat one
  // already reported are not added again.
  constexpr int kRounds = 4;
  rules::ConfigErrorList found;
  std::set<std::string> seen;
  for (const rules::ConfigError& e : errors) seen.insert(rules::formatError(e));
  for (const Section& s : sections) {
    if (!s.present || (compiled_already && !named(s.names))) continue;
    v1::ApplianceConfig one;
    if (dataplane_ok && cfg.has_dataplane()) *one.mutable_dataplane() = cfg.dataplane();
    s.copy(cfg, one);
    rules::ConfigErrorList reported;  // this section's errors so far
    for (const rules::ConfigError& e : errors) {
      for (const char* n : s.names) {
        if (e.section == n) reported.push_back(e);
      }
    }
    for (int round = 0; round < kRounds; ++round) {
      bool cleared = reported.empty();
      for (const rules::ConfigError& e : reported) cleared |= clearFieldPath(&one, e.field);
      if (!cleared) break;  // nothing more can be left out
      rules::ConfigErrorList section_errors;
      auto model = toModel(one, &section_errors);
      if (model.ok()) (void)rules::compileSnapshot(*model, 0, &section_errors);
      size_t fresh = 0;
      for (rules::ConfigError& e : section_errors) {
        if (e.section == "dataplane") continue;  // reported by the whole document's toModel
        if (shadowedByParseError(reported, e.field) && !e.field.empty()) continue;
        if (!seen.insert(rules::formatError(e)).second) continue;
        reported.push_back(e);
        found.push_back(std::move(e));
        ++fresh;
      }
      if (fresh == 0) break;  // clean now, or nothing new behind what was left out
    }
  }
  errors.insert(errors.end(), found.begin(), found.end());
}

rules::ConfigErrorList allErrors(const ParsedConfig& parsed) {
  rules::ConfigErrorList out = parsed.errors;
  if (!parsed.usable) return out;
  for (rules::ConfigError& e : validateConfig(parsed.config)) {
    if (!shadowedByParseError(parsed.errors, e.field)) out.push_back(std::move(e));
  }
  return out;
}

absl::StatusOr<v1::ApplianceConfig> loadConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open config file"));
  std::stringstream ss;
  ss << in.rdbuf();
  auto cfg = parseConfig(ss.str(), formatForPath(path), path);
  if (cfg.ok()) resolveRelativePaths(&*cfg, std::filesystem::path(path).parent_path().string());
  return cfg;
}

void forEachConfigFile(v1::ApplianceConfig* cfg, const std::function<void(std::string*)>& fn) {
  auto each = [&](std::string* p) {
    if (!p->empty()) fn(p);
  };
  // Only sections that are present are touched (the document stays byte-identical
  // otherwise).
  if (cfg->has_firewall()) {
    v1::FirewallConfig* fw = cfg->mutable_firewall();
    for (std::string& f : *fw->mutable_rule_files()) each(&f);
    for (v1::IpSet& set : *fw->mutable_ip_sets()) each(set.mutable_file());
  }
  if (cfg->has_geoip()) each(cfg->mutable_geoip()->mutable_database());
  if (cfg->has_dpi()) {  // --- dpi ---
    for (std::string& f : *cfg->mutable_dpi()->mutable_rule_files()) each(&f);
    if (cfg->dpi().has_signatures()) {  // --- signatures ---
      v1::DpiSignatures* sg = cfg->mutable_dpi()->mutable_signatures();
      for (std::string& f : *sg->mutable_files()) each(&f);
      each(sg->mutable_classification_file());
    }
  }
  fixDnsPaths(cfg, each);  // DNS filtering: list files
}

void resolveRelativePaths(v1::ApplianceConfig* cfg, const std::string& base_dir) {
  std::error_code ec;
  std::filesystem::path base = std::filesystem::absolute(
      base_dir.empty() ? std::filesystem::path(".") : std::filesystem::path(base_dir), ec);
  if (ec) return;  // no working directory: leave the paths as they are
  auto fix = [&](std::string* p) {
    if (p->empty() || (*p)[0] == '/') return;
    *p = (base / *p).lexically_normal().string();
  };
  forEachConfigFile(cfg, fix);
  if (cfg->has_dpi() && !cfg->dpi().cache_dir().empty()) {
    fix(cfg->mutable_dpi()->mutable_cache_dir());  // a directory, not a file the config names
  }
}

rules::FirewallRuleSpec specFromProto(const v1::FirewallRule& r, int index) {
  rules::FirewallRuleSpec s;
  s.syntax = rules::RuleSyntax::kConfig;
  s.index = index;
  s.id = r.id();
  s.priority = r.priority();
  switch (r.action()) {
    case v1::ALLOW: s.action = rules::FwAction::kAllow; break;
    case v1::DENY: s.action = rules::FwAction::kDeny; break;
    case v1::REJECT: s.action = rules::FwAction::kReject; break;
    default: break;  // unset (or unknown): "action required"
  }
  s.direction = r.direction() == v1::A_TO_B   ? rules::FwDirection::kAtoB
                : r.direction() == v1::B_TO_A ? rules::FwDirection::kBtoA
                                              : rules::FwDirection::kBoth;
  s.protocols.assign(r.protocols().begin(), r.protocols().end());
  s.src.assign(r.src().begin(), r.src().end());
  s.dst.assign(r.dst().begin(), r.dst().end());
  s.src_ports.assign(r.src_ports().begin(), r.src_ports().end());
  s.dst_ports.assign(r.dst_ports().begin(), r.dst_ports().end());
  if (r.has_vlan()) s.vlan = r.vlan();
  if (r.has_tunnel_id()) s.tunnel_id = r.tunnel_id();
  s.src_countries.assign(r.src_countries().begin(), r.src_countries().end());
  s.dst_countries.assign(r.dst_countries().begin(), r.dst_countries().end());
  s.description = r.description();
  return s;
}

v1::FirewallRule protoFromSpec(const rules::FirewallRuleSpec& s) {
  v1::FirewallRule r;
  r.set_id(s.id);
  r.set_priority(s.priority);
  if (s.action) {
    r.set_action(*s.action == rules::FwAction::kAllow  ? v1::ALLOW
                 : *s.action == rules::FwAction::kDeny ? v1::DENY
                                                       : v1::REJECT);
  }
  r.set_direction(s.direction == rules::FwDirection::kAtoB   ? v1::A_TO_B
                  : s.direction == rules::FwDirection::kBtoA ? v1::B_TO_A
                                                             : v1::BOTH);
  for (const auto& x : s.protocols) r.add_protocols(x);
  for (const auto& x : s.src) r.add_src(x);
  for (const auto& x : s.dst) r.add_dst(x);
  for (const auto& x : s.src_ports) r.add_src_ports(x);
  for (const auto& x : s.dst_ports) r.add_dst_ports(x);
  if (s.vlan) r.set_vlan(*s.vlan);
  if (s.tunnel_id) r.set_tunnel_id(static_cast<uint32_t>(*s.tunnel_id));
  for (const auto& x : s.src_countries) r.add_src_countries(x);
  for (const auto& x : s.dst_countries) r.add_dst_countries(x);
  r.set_description(s.description);
  return r;
}

namespace {

rules::ConfigError fwError(std::string field, std::string reason, std::string section = "firewall") {
  rules::ConfigError e;
  e.section = std::move(section);
  e.field = std::move(field);
  e.reason = std::move(reason);
  return e;
}

bool actionOr(v1::FirewallAction a, rules::FwAction* out) {
  switch (a) {
    case v1::ACTION_DEFAULT: *out = rules::FwAction::kAllow; return true;
    case v1::ALLOW: *out = rules::FwAction::kAllow; return true;
    case v1::DENY: *out = rules::FwAction::kDeny; return true;
    case v1::REJECT: *out = rules::FwAction::kReject; return true;
    default: return false;
  }
}

// Country codes of the rules that the configured database never returns: valid ISO codes
// (the rule check refused the others), but with this database the rule's country part
// matches nothing. A warning, not an error: a database update may bring the country.
void countryWarnings(const rules::GeoipDb& db, const rules::FirewallModel* fw,
                     std::vector<std::string>& warnings) {
  bool any = false;
  for (const rules::FirewallRule& r : fw->rules) {
    any = any || !r.src_countries.empty() || !r.dst_countries.empty();
  }
  if (!any) return;
  auto codes = db.countryCodes();
  if (!codes.ok()) {
    warnings.push_back(absl::StrCat("geoip.database: ", codes.status().message()));
    return;
  }
  const std::set<std::string> known(codes->begin(), codes->end());
  for (const rules::FirewallRule& r : fw->rules) {
    std::vector<std::string> missing;
    for (const auto* list : {&r.src_countries, &r.dst_countries}) {
      for (const rules::CountryCode& cc : *list) {
        std::string c(cc.begin(), cc.end());
        if (!known.count(c) && std::find(missing.begin(), missing.end(), c) == missing.end()) {
          missing.push_back(std::move(c));
        }
      }
    }
    if (missing.empty()) continue;
    std::string where = r.file.empty() ? std::string() : absl::StrCat(r.file, ":", r.line, ": ");
    warnings.push_back(absl::StrCat(
        "firewall: ", where, "rule '", r.id, "': ", absl::StrJoin(missing, ","),
        missing.size() == 1 ? " is" : " are", " in no network of ", fw->geoip_database, " (",
        known.size(), " countries): the rule matches no address of ",
        missing.size() == 1 ? "that country" : "those countries", " with this database"));
  }
}

// The firewall and geoip sections into m->firewall; errors appended.
void firewallToModel(const v1::ApplianceConfig& cfg, rules::FirewallModel* fw,
                     rules::ConfigErrorList& errors, ModelDetails* details) {
  const v1::FirewallConfig& fc = cfg.firewall();
  const size_t before = errors.size();
  for (auto [field, value, out] :
       {std::tuple{"firewall.default_a_to_b", fc.default_a_to_b(), &fw->default_a_to_b},
        std::tuple{"firewall.default_b_to_a", fc.default_b_to_a(), &fw->default_b_to_a}}) {
    if (!actionOr(value, out)) {
      errors.push_back(fwError(field, absl::StrCat(static_cast<int>(value),
                                                   " is not an action (ALLOW, DENY or REJECT)")));
    }
  }
  fw->reevaluate_on_change = !fc.keep_established_on_change();
  if (fc.max_acl_entries() > rules::kMaxFirewallEntriesLimit) {
    errors.push_back(fwError("firewall.max_acl_entries",
                             absl::StrCat(fc.max_acl_entries(), " is out of range [1, ",
                                          rules::kMaxFirewallEntriesLimit, "] (0 = default ",
                                          rules::kMaxFirewallEntries, ")")));
  } else {
    fw->max_acl_entries = fc.max_acl_entries();
  }

  // GeoIP database: opened and checked now, so a bad one never reaches the dataplane.
  fw->geoip_database = cfg.geoip().database();
  std::unique_ptr<rules::GeoipDb> geodb;
  if (!fw->geoip_database.empty()) {
    auto db = rules::GeoipDb::open(fw->geoip_database);
    absl::Status st = db.ok() ? (*db)->checkCountryData() : db.status();
    if (st.ok()) geodb = std::move(*db);
    if (!st.ok()) {
      std::string reason(st.message());
      if (absl::StartsWith(reason, fw->geoip_database + ": ")) {
        reason = reason.substr(fw->geoip_database.size() + 2);
      }
      errors.push_back(fwError("geoip.database", absl::StrCat(fw->geoip_database, ": ", reason),
                               "geoip"));
    } else {
      fw->geoip_database_stamp = rules::geoipDatabaseStamp(fw->geoip_database);
    }
  }
  const bool geoip = !fw->geoip_database.empty();

  // IP sets.
  rules::IpSetTable sets;
  for (int i = 0; i < fc.ip_sets_size(); ++i) {
    const v1::IpSet& set = fc.ip_sets(i);
    const std::string base = absl::StrCat("firewall.ip_sets[", i, "]");
    auto err = [&](std::string field, std::string reason) {
      rules::ConfigError e = fwError(std::move(field), std::move(reason));
      e.rule = set.name();
      e.index = i;
      errors.push_back(std::move(e));
    };
    if (absl::Status st = rules::checkSetName(set.name()); !st.ok()) {
      err(base + ".name", std::string(st.message()));
      continue;
    }
    if (sets.count(set.name())) {
      err(base + ".name", absl::StrCat("duplicate IP set name '", set.name(), "'"));
      continue;
    }
    std::vector<rules::IpPrefix> prefixes;
    bool ok = true;
    for (int j = 0; j < set.prefixes_size(); ++j) {
      const std::string& text = set.prefixes(j);
      const std::string field = absl::StrCat(base, ".prefixes[", j, "]");
      if (!text.empty() && text[0] == '@') {
        err(field, absl::StrCat("'", text, "': IP sets cannot reference other sets"));
        ok = false;
        continue;
      }
      auto p = rules::parsePrefix(text);
      if (!p.ok()) {
        err(field, std::string(p.status().message()));
        ok = false;
        continue;
      }
      prefixes.push_back(*p);
    }
    if (!set.file().empty()) {
      auto more = rules::loadCidrListFile(set.file(), set.name(), &errors, base + ".file");
      if (more.ok()) {
        prefixes.insert(prefixes.end(), more->begin(), more->end());
      } else {
        ok = false;
      }
    }
    if (set.prefixes_size() == 0 && set.file().empty()) {
      err(base, "an IP set needs prefixes or a file");
      ok = false;
    }
    if (ok) sets.emplace(set.name(), std::move(prefixes));
    else sets.emplace(set.name(), std::vector<rules::IpPrefix>{});  // no "unknown set" errors
  }

  // Rules: inline ones, then each rule file's, in order.
  std::vector<rules::FirewallRuleSpec> specs;
  for (int i = 0; i < fc.rules_size(); ++i) {
    const v1::FirewallRule& r = fc.rules(i);
    bool enums_ok = true;
    auto enumError = [&](const char* field, int v, const char* names) {
      rules::ConfigError e = fwError(absl::StrCat("firewall.rules[", i, "].", field),
                                     absl::StrCat(v, " is not one of ", names));
      e.rule = r.id();
      e.index = i;
      errors.push_back(std::move(e));
      enums_ok = false;
    };
    if (!v1::FirewallAction_IsValid(r.action())) enumError("action", r.action(), "ALLOW, DENY, REJECT");
    if (!v1::RuleDirection_IsValid(r.direction())) {
      enumError("direction", r.direction(), "BOTH, A_TO_B, B_TO_A");
    }
    if (!enums_ok) continue;
    specs.push_back(specFromProto(r, i));
  }
  for (int k = 0; k < fc.rule_files_size(); ++k) {
    const std::string& path = fc.rule_files(k);
    const std::string field = absl::StrCat("firewall.rule_files[", k, "]");
    if (path.empty()) {
      errors.push_back(fwError(field, "empty path"));
      continue;
    }
    auto file_specs = rules::loadRuleFile(path, &errors, field);
    if (file_specs.ok()) specs.insert(specs.end(), file_specs->begin(), file_specs->end());
  }
  // Unique ids over all of them (named the way each source names fields).
  std::map<std::string, const rules::FirewallRuleSpec*> ids;
  for (const rules::FirewallRuleSpec& s : specs) {
    if (s.id.empty()) continue;
    auto [it, fresh] = ids.emplace(s.id, &s);
    if (fresh) continue;
    const rules::FirewallRuleSpec& first = *it->second;
    rules::ConfigError e = fwError(rules::ruleFieldName(s.syntax, s.index, rules::RuleField::kId),
                                   "");
    e.rule = s.id;
    e.index = s.index;
    e.file = s.file;
    e.line = s.line;
    std::string where =
        first.file.empty()
            ? rules::ruleFieldName(first.syntax, first.index, rules::RuleField::kRule)
            : absl::StrCat(first.file, ":", first.line);
    e.reason = absl::StrCat("duplicate id '", s.id, "': also used by ", where);
    errors.push_back(std::move(e));
  }
  constexpr size_t kMaxErrors = 1000;  // enough to fix; a garbage file could give millions
  for (const rules::FirewallRuleSpec& s : specs) {
    if (errors.size() - before >= kMaxErrors) {
      errors.push_back(fwError("firewall.rules", absl::StrCat("more than ", kMaxErrors,
                                                              " errors: the other rules are not "
                                                              "checked")));
      break;
    }
    if (auto r = rules::convertRuleSpec(s, sets, geoip, errors)) fw->rules.push_back(std::move(*r));
  }
  // The rule set as a whole (the cap), once every rule is valid on its own.
  if (errors.size() == before) rules::validateFirewallSet(*fw, errors);
  if (details && errors.size() == before) details->firewall_rules = std::move(specs);
  if (details && errors.size() == before && geodb) countryWarnings(*geodb, fw, details->warnings);
}

}  // namespace

absl::StatusOr<rules::ConfigModel> toModel(const v1::ApplianceConfig& cfg,
                                           rules::ConfigErrorList* out,
                                           ModelDetails* details) {
  rules::ConfigModel m;
  m.version = cfg.version();
  rules::DataplaneSettings& d = m.dataplane;
  const v1::DataplaneConfig& dp = cfg.dataplane();
  setIf(dp.flow_table().capacity_per_worker(), d.flow_capacity);
  d.flow_when_full = policyOr(dp.flow_table().when_full(), d.flow_when_full);
  setIf(dp.flow_table().aging_slice(), d.aging_slice);
  const v1::FlowTimeouts& t = dp.timeouts();
  setIf(t.tcp_syn_s(), d.tcp_syn_s);
  setIf(t.tcp_established_s(), d.tcp_established_s);
  setIf(t.tcp_closing_s(), d.tcp_closing_s);
  setIf(t.tcp_closed_s(), d.tcp_closed_s);
  setIf(t.udp_s(), d.udp_s);
  setIf(t.icmp_s(), d.icmp_s);
  setIf(t.other_s(), d.other_s);
  d.non_ip = policyOr(dp.non_ip(), d.non_ip);
  d.malformed = policyOr(dp.malformed(), d.malformed);
  const v1::FragmentConfig& f = dp.fragments();
  setIf(f.max_datagrams(), d.frag_max_datagrams);
  setIf(f.timeout_ms(), d.frag_timeout_ms);
  setIf(f.max_fragments(), d.frag_max_fragments);
  d.frag_overlapping = policyOr(f.overlapping(), d.frag_overlapping);
  d.frag_tiny = policyOr(f.tiny(), d.frag_tiny);
  setIf(f.reassembly_buffers(), d.frag_reassembly_buffers);
  setIf(f.max_datagram_bytes(), d.frag_max_datagram_bytes);
  setIf(f.max_held_fragments(), d.frag_max_held);
  d.frag_on_exhaustion = policyOr(f.on_exhaustion(), d.frag_on_exhaustion);
  d.tcp_midstream = policyOr(dp.tcp().midstream(), d.tcp_midstream);
  d.tcp_overlap_reset = dp.tcp().overlap() == v1::OVERLAP_RESET;
  setIf(dp.tcp().overlap_window_bytes(), d.tcp_window_bytes);
  setIf(dp.tcp().overlap_windows_per_worker(), d.tcp_windows_per_worker);
  setIf(dp.tcp().reorder_bytes(), d.tcp_reorder_bytes);
  if (dp.tcp().drop_out_of_order()) d.tcp_reorder_bytes = 0;
  setIf(dp.tcp().reorder_buffers_per_worker(), d.tcp_reorder_buffers_per_worker);
  d.tcp_hold_out_of_order = dp.tcp().hold_out_of_order();
  setIf(dp.tcp().hold_packets_per_worker(), d.tcp_hold_packets_per_worker);
  setIf(dp.tcp().hold_timeout_ms(), d.tcp_hold_timeout_ms);
  d.tcp_dns_fail = policyOr(dp.tcp().dns_fail(), d.tcp_dns_fail);
  d.tcp_dpi_fail = policyOr(dp.tcp().dpi_fail(), d.tcp_dpi_fail);
  d.tcp_verify_checksum = !dp.tcp().skip_checksum();
  rules::ConfigErrorList errors;
  const v1::TunnelConfig& tun = dp.tunnels();
  switch (tun.mode()) {
    case v1::TUNNEL_MODE_DEFAULT:
    case v1::INSPECT: d.tunnels_inspect = true; break;
    case v1::OUTER_ONLY: d.tunnels_inspect = false; break;
    default: {
      rules::ConfigError e;
      e.section = "dataplane";
      e.field = "dataplane.tunnels.mode";
      e.reason = absl::StrCat("unknown tunnel mode ", tun.mode(), " (INSPECT or OUTER_ONLY)");
      errors.push_back(std::move(e));
    }
  }
  if (tun.vxlan_ports_size() > 0) d.vxlan_ports.assign(tun.vxlan_ports().begin(), tun.vxlan_ports().end());
  if (tun.geneve_ports_size() > 0) {
    d.geneve_ports.assign(tun.geneve_ports().begin(), tun.geneve_ports().end());
  }
  setIf(tun.max_depth(), d.tunnel_max_depth);
  d.tunnels_strict = tun.strict();
  switch (dp.distribution()) {
    case v1::DISTRIBUTION_DEFAULT:
    case v1::AUTO: d.distribution = rules::Distribution::kAuto; break;
    case v1::RSS: d.distribution = rules::Distribution::kRss; break;
    case v1::SOFTWARE: d.distribution = rules::Distribution::kSoftware; break;
    default: {
      rules::ConfigError e;
      e.section = "dataplane";
      e.field = "dataplane.distribution";
      e.reason = absl::StrCat("unknown distribution ", dp.distribution(),
                              " (AUTO, RSS or SOFTWARE)");
      errors.push_back(std::move(e));
    }
  }
  rules::validateDataplane(d, errors);
  firewallToModel(cfg, &m.firewall, errors, details);
  lbToModel(cfg.lb(), &m.lb, errors);  // --- lb ---
  dpiToModel(cfg, &m.dpi, errors);  // --- dpi ---
  dnsToModel(cfg, &m.dns, errors);  // DNS filtering
  if (!errors.empty()) {
    absl::Status st = rules::errorsToStatus(errors);
    if (out) out->insert(out->end(), errors.begin(), errors.end());
    return st;
  }
  return m;
}

std::vector<std::string> policyWarnings(const rules::ConfigModel& m) {
  std::vector<std::string> out;
  const bool closed = m.firewall.default_a_to_b != rules::FwAction::kAllow ||
                      m.firewall.default_b_to_a != rules::FwAction::kAllow;
  if (closed && m.dataplane.non_ip == rules::Policy::kForward) {
    out.push_back(
        "dataplane.non_ip: FORWARD while a firewall default is DENY/REJECT: frames without "
        "IPv4/IPv6 (ARP, LLDP, MPLS, PPPoE discovery, PPP control, ...) pass without a firewall "
        "verdict; set dataplane.non_ip: DROP unless the network needs them (ARP does)");
  }
  return out;
}

}  // namespace dpu::ctl
