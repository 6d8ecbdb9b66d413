#include "control/config/dpi_config.h"

#include <htp/htp.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "rules/compile/progress.h"  // --- ops ---

namespace dpu::ctl {
namespace {

rules::ConfigError dpiError(std::string field, std::string reason) {
  rules::ConfigError e;
  e.section = "dpi";
  e.field = std::move(field);
  e.reason = std::move(reason);
  return e;
}

bool toAction(v1::DpiAction a, rules::DpiAction fallback, rules::DpiAction* out) {
  switch (a) {
    case v1::DPI_ACTION_DEFAULT: *out = fallback; return true;
    case v1::DPI_ALERT: *out = rules::DpiAction::kAlert; return true;
    case v1::DPI_DROP: *out = rules::DpiAction::kDrop; return true;
    case v1::DPI_RESET: *out = rules::DpiAction::kReset; return true;
    default: return false;
  }
}

// --- http --- Whether libhtp implements server personality `p` (htp_server_personality_t):
// asked of the library itself (0.5 refuses IIS 4.0 and IIS 5.0), so validation and the
// HTTP runtime (dataplane/normalize/http.cc) agree.
bool libhtpHasPersonality(int p) {
  htp_cfg_t* cfg = htp_config_create();
  if (cfg == nullptr) return true;  // cannot ask; the runtime reports it
  const bool ok = htp_config_set_server_personality(cfg, static_cast<htp_server_personality_t>(p)) == HTP_OK;
  htp_config_destroy(cfg);
  return ok;
}

// A rule file's text into `out`; false (an error on `field`) when it cannot be read.
// `ext`: the files a directory given instead should be named by (".yar").
bool readRuleFile(const std::string& path, const std::string& field, const char* ext,
                  rules::ConfigErrorList& errors, std::string* out) {
  if (path.empty()) {
    errors.push_back(dpiError(field, "empty path"));
    return false;
  }
  std::error_code dir_ec;
  if (std::filesystem::is_directory(path, dir_ec)) {
    errors.push_back(dpiError(field, absl::StrCat(path, ": is a directory (name its ", ext, " files)")));
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    errors.push_back(dpiError(field, absl::StrCat(path, ": cannot be read")));
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

}  // namespace

absl::Status checkRuleSetName(const std::string& name) {
  if (name.empty() || name.size() > 64)
    return absl::InvalidArgumentError("a rule set name has 1 to 64 characters");
  for (char ch : name) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                    ch == '_' || ch == '.' || ch == '-';
    if (!ok)
      return absl::InvalidArgumentError(
          absl::StrCat("'", name, "': a rule set name is made of letters, digits, '_', '.' and '-'"));
  }
  return absl::OkStatus();
}

void dpiToModel(const v1::ApplianceConfig& cfg, rules::DpiModel* m, rules::ConfigErrorList& errors) {
  if (!cfg.has_dpi()) return;
  const v1::DpiConfig& c = cfg.dpi();
  m->enabled = true;
  rules::ProgressStep reading("reading YARA rule files", c.rule_files_size(), "files", 1);  // --- ops ---
  for (int k = 0; k < c.rule_files_size(); ++k) {
    reading.advance();
    const std::string& path = c.rule_files(k);
    std::string text;
    if (!readRuleFile(path, absl::StrCat("dpi.rule_files[", k, "]"), ".yar", errors, &text)) continue;
    m->sources.push_back({path, std::move(text)});
  }
  // Sources are named by their file name (rule ids "<file name>:<rule>", the same wherever
  // the files live); by the full path when two files share a name.
  std::map<std::string, int> seen;
  for (const rules::YaraSource& s : m->sources) ++seen[std::filesystem::path(s.name).filename().string()];
  for (rules::YaraSource& s : m->sources) {
    std::string base = std::filesystem::path(s.name).filename().string();
    if (seen[base] == 1) s.name = base;
  }
  // --- dpi rule sets (control) --- inline sources after the files, named as given.
  std::set<std::string> names;
  for (const rules::YaraSource& f : m->sources) names.insert(f.name);
  for (int k = 0; k < c.rule_sets_size(); ++k) {
    const v1::DpiRuleSet& rs = c.rule_sets(k);
    const std::string field = absl::StrCat("dpi.rule_sets[", k, "].name");
    if (absl::Status st = checkRuleSetName(rs.name()); !st.ok()) {
      errors.push_back(dpiError(field, std::string(st.message())));
      continue;
    }
    if (!names.insert(rs.name()).second) {
      errors.push_back(dpiError(field, absl::StrCat("'", rs.name(), "' names another rule set or a rule file")));
      continue;
    }
    m->sources.push_back({rs.name(), rs.text()});
  }
  if (!toAction(c.default_action(), rules::DpiAction::kAlert, &m->default_action))
    errors.push_back(dpiError("dpi.default_action", "not ALERT, DROP or RESET"));
  for (int k = 0; k < c.actions_size(); ++k) {
    rules::DpiRuleAction a;
    a.rule = c.actions(k).rule();
    if (a.rule.empty()) errors.push_back(dpiError(absl::StrCat("dpi.actions[", k, "].rule"), "empty"));
    if (!toAction(c.actions(k).action(), m->default_action, &a.action))
      errors.push_back(dpiError(absl::StrCat("dpi.actions[", k, "].action"), "not ALERT, DROP or RESET"));
    m->actions.push_back(std::move(a));
  }
  if (c.depth_bytes() != 0) m->depth_bytes = c.depth_bytes();
  if (c.unlimited_depth()) m->depth_bytes = 0;
  if (c.ooo_buffer_bytes() != 0) m->ooo_buffer_bytes = c.ooo_buffer_bytes();
  if (m->ooo_buffer_bytes > (1u << 20))
    errors.push_back(dpiError("dpi.ooo_buffer_bytes", absl::StrCat(m->ooo_buffer_bytes, " is out of range [1, 1048576]")));
  switch (c.gap_policy()) {
    case v1::GAP_STOP_INSPECTING: m->gap_policy = rules::DpiGapPolicy::kStopInspecting; break;
    case v1::GAP_ALERT: m->gap_policy = rules::DpiGapPolicy::kAlert; break;
    case v1::GAP_DROP: m->gap_policy = rules::DpiGapPolicy::kDrop; break;
    default: errors.push_back(dpiError("dpi.gap_policy", "not STOP_INSPECTING, ALERT or DROP"));
  }
  m->unsupported_fails = c.fail_on_unsupported();
  m->udp_stream = c.udp_stream();
  if (c.streams_per_worker() != 0) m->streams_per_worker = c.streams_per_worker();
  if (c.ooo_slots_per_worker() != 0) m->ooo_slots_per_worker = c.ooo_slots_per_worker();
  if (m->streams_per_worker > (1u << 22))
    errors.push_back(dpiError("dpi.streams_per_worker", absl::StrCat(m->streams_per_worker, " is out of range [1, 4194304]")));
  if (m->ooo_slots_per_worker > (1u << 20))
    errors.push_back(dpiError("dpi.ooo_slots_per_worker", absl::StrCat(m->ooo_slots_per_worker, " is out of range [1, 1048576]")));
  m->cache_dir = c.cache_dir();
  m->shards = c.shards();
  m->full_recompile = c.full_recompile();
  if (m->shards > 64)
    errors.push_back(dpiError("dpi.shards", absl::StrCat(m->shards, " is out of range [1, 64]")));
  switch (c.stream_mode()) {
    case v1::STREAM_MODE_DEFAULT: m->stream_mode = rules::DpiStreamMode::kAuto; break;
    case v1::STREAM_COMPRESSED: m->stream_mode = rules::DpiStreamMode::kCompressed; break;
    case v1::STREAM_FULL: m->stream_mode = rules::DpiStreamMode::kFull; break;
    default: errors.push_back(dpiError("dpi.stream_mode", "not COMPRESSED or FULL"));
  }
  if (c.compressed_slot_bytes() != 0) m->compressed_slot_bytes = c.compressed_slot_bytes();
  if (m->compressed_slot_bytes != 0 && (m->compressed_slot_bytes < 64 || m->compressed_slot_bytes > 65536))
    errors.push_back(dpiError("dpi.compressed_slot_bytes",
                              absl::StrCat(m->compressed_slot_bytes, " is out of range [64, 65536]")));
  if (c.full_streams_per_worker() != 0) m->full_streams_per_worker = c.full_streams_per_worker();
  if (m->full_streams_per_worker > (1u << 22))
    errors.push_back(dpiError("dpi.full_streams_per_worker",
                              absl::StrCat(m->full_streams_per_worker, " is out of range [1, 4194304]")));
  if (c.prefilter_window_bytes() != 0) m->prefilter_window_bytes = c.prefilter_window_bytes();
  if (m->prefilter_window_bytes < 16 || m->prefilter_window_bytes > (1u << 20))
    errors.push_back(dpiError("dpi.prefilter_window_bytes",
                              absl::StrCat(m->prefilter_window_bytes, " is out of range [16, 1048576]")));
  if (c.prefilter_windows_per_worker() != 0) m->prefilter_windows_per_worker = c.prefilter_windows_per_worker();
  // --- http --- A dpi.http section parses HTTP unless it says `enabled: false`; without one,
  // HTTP is parsed with the defaults when there are rules (files are what YARA rules are
  // written for: a rule file alone must see a chunked or gzip download).
  if (!c.has_http()) {
    // (signatures: their HTTP buffers come from the same parser)
    m->http.enabled = m->http.implicit =
        !m->sources.empty() || (c.has_signatures() && (c.signatures().files_size() || c.signatures().sets_size()));
  } else {
    const v1::DpiHttpConfig& h = c.http();
    rules::DpiHttpModel& hm = m->http;
    hm.enabled = !h.has_enabled() || h.enabled();
    if (h.ports_size() != 0) hm.ports.clear();
    for (int k = 0; k < h.ports_size(); ++k) {
      if (h.ports(k) == 0 || h.ports(k) > 65535)
        errors.push_back(dpiError(absl::StrCat("dpi.http.ports[", k, "]"),
                                  absl::StrCat(h.ports(k), " is out of range [1, 65535]")));
      else hm.ports.push_back(uint16_t(h.ports(k)));
    }
    if (h.has_detect_on_other_ports()) hm.detect_on_other_ports = h.detect_on_other_ports();
    if (h.personality() < 0 || h.personality() > v1::PERSONALITY_APACHE_2)
      errors.push_back(dpiError("dpi.http.personality", "not a libhtp personality"));
    else if (h.personality() != v1::PERSONALITY_DEFAULT) {
      hm.personality = int(h.personality()) - 1;
      if (!libhtpHasPersonality(hm.personality))
        errors.push_back(dpiError("dpi.http.personality",
                                  absl::StrCat(v1::HttpPersonality_Name(h.personality()),
                                               " is not implemented by libhtp (its IIS 4.0 and 5.0 "
                                               "personalities are missing); IIS_5_1 is the closest")));
    }
    if (h.flow_slots_per_worker() != 0) hm.flow_slots_per_worker = h.flow_slots_per_worker();
    if (hm.flow_slots_per_worker > (1u << 20))
      errors.push_back(dpiError("dpi.http.flow_slots_per_worker",
                                absl::StrCat(hm.flow_slots_per_worker, " is out of range [1, 1048576]")));
    if (h.decompress_layers() != 0) hm.decompress_layers = h.decompress_layers();
    if (hm.decompress_layers > 8)
      errors.push_back(dpiError("dpi.http.decompress_layers",
                                absl::StrCat(hm.decompress_layers, " is out of range [1, 8]")));
    if (h.bomb_limit_bytes() != 0) hm.bomb_limit_bytes = h.bomb_limit_bytes();
    if (h.bomb_time_limit_us() != 0) hm.bomb_time_limit_us = h.bomb_time_limit_us();
    hm.http_events = h.http_events();
    if (h.has_fileinfo_events()) hm.fileinfo_events = h.fileinfo_events();
    if (h.has_hold_last_packet()) hm.hold_last_packet = h.hold_last_packet();
    if (h.hold_slots_per_worker() != 0) hm.hold_slots_per_worker = h.hold_slots_per_worker();
    if (hm.hold_slots_per_worker > 65535)
      errors.push_back(dpiError("dpi.http.hold_slots_per_worker",
                                absl::StrCat(hm.hold_slots_per_worker, " is out of range [1, 65535]")));
    if (h.hold_timeout_ms() != 0) hm.hold_timeout_ms = h.hold_timeout_ms();
    if (hm.hold_timeout_ms > 10000)
      errors.push_back(dpiError("dpi.http.hold_timeout_ms",
                                absl::StrCat(hm.hold_timeout_ms, " is out of range [1, 10000]")));
  }
  for (int k = 0; k < c.scopes_size(); ++k) {
    const v1::DpiScope& sc = c.scopes(k);
    rules::DpiScope s;
    s.source = sc.source();
    bool known = false;
    for (const rules::YaraSource& y : m->sources) known = known || y.name == s.source;
    if (!known)
      errors.push_back(dpiError(absl::StrCat("dpi.scopes[", k, "].source"),
                                absl::StrCat("'", s.source, "' names no rule file or rule set")));
    switch (sc.inspect()) {
      case v1::INSPECT_DEFAULT: s.inspect = rules::DpiInspect::kDefault; break;
      case v1::INSPECT_FILES: s.inspect = rules::DpiInspect::kFiles; break;
      case v1::INSPECT_STREAM: s.inspect = rules::DpiInspect::kStream; break;
      case v1::INSPECT_BOTH: s.inspect = rules::DpiInspect::kBoth; break;
      default: errors.push_back(dpiError(absl::StrCat("dpi.scopes[", k, "].inspect"), "not FILES, STREAM or BOTH"));
    }
    m->scopes.push_back(std::move(s));
  }
  // HTTP on by default: a source without a scope keeps the raw stream of HTTP flows it saw
  // before (rules written for the stream, e.g. on request headers) and gains the files.
  if (m->http.implicit) {
    for (const rules::YaraSource& y : m->sources) {
      bool scoped = false;
      for (const rules::DpiScope& sc : m->scopes) scoped = scoped || sc.source == y.name;
      if (!scoped) m->scopes.push_back({y.name, rules::DpiInspect::kBoth});
    }
  }
  // --- signatures --- Suricata-format rule files and sets (docs/signatures.md).
  if (c.has_signatures()) {
    const v1::DpiSignatures& sg = c.signatures();
    rules::SigModel& sm = m->signatures;
    std::set<std::string> sig_names;
    for (int k = 0; k < sg.files_size(); ++k) {
      rules::SigSource src;
      const std::string field = absl::StrCat("dpi.signatures.files[", k, "]");
      if (!readRuleFile(sg.files(k), field, ".rules", errors, &src.text)) continue;
      src.name = std::filesystem::path(sg.files(k)).filename().string();
      if (!sig_names.insert(src.name).second) src.name = sg.files(k);  // two files of one name
      sm.sources.push_back(std::move(src));
    }
    for (int k = 0; k < sg.sets_size(); ++k) {
      const v1::DpiRuleSet& rs = sg.sets(k);
      const std::string field = absl::StrCat("dpi.signatures.sets[", k, "].name");
      if (absl::Status st = checkRuleSetName(rs.name()); !st.ok()) {
        errors.push_back(dpiError(field, std::string(st.message())));
        continue;
      }
      if (!sig_names.insert(rs.name()).second) {
        errors.push_back(dpiError(field, absl::StrCat("'", rs.name(), "' names another signature set or file")));
        continue;
      }
      sm.sources.push_back({rs.name(), rs.text()});
    }
    // Sorted: the model (and so "did it change") does not depend on the map's order.
    std::map<std::string, std::string> av(sg.address_vars().begin(), sg.address_vars().end());
    std::map<std::string, std::string> pv(sg.port_vars().begin(), sg.port_vars().end());
    for (auto& [k, v] : av) sm.vars.addresses.emplace_back(k, v);
    for (auto& [k, v] : pv) sm.vars.ports.emplace_back(k, v);
    if (sg.body_limit_bytes() != 0) sm.body_limit_bytes = sg.body_limit_bytes();
    if (sm.body_limit_bytes < 64 || sm.body_limit_bytes > (1u << 24))
      errors.push_back(dpiError("dpi.signatures.body_limit_bytes",
                                absl::StrCat(sm.body_limit_bytes, " is out of range [64, 16777216]")));
    if (sg.body_buffers_per_worker() != 0) sm.body_buffers_per_worker = sg.body_buffers_per_worker();
    if (sm.body_buffers_per_worker > 65536)
      errors.push_back(dpiError("dpi.signatures.body_buffers_per_worker",
                                absl::StrCat(sm.body_buffers_per_worker, " is out of range [1, 65536]")));
    std::string cls = sg.classification_file();
    if (cls.empty() && sg.files_size() > 0) {
      std::filesystem::path beside = std::filesystem::path(sg.files(0)).parent_path() / "classification.config";
      std::error_code ec;
      if (std::filesystem::is_regular_file(beside, ec)) cls = beside.string();
    }
    if (!cls.empty() && readRuleFile(cls, "dpi.signatures.classification_file", "", errors,
                                     &sm.classification_text))
      sm.classification_name = cls;
  }
  if (m->prefilter_windows_per_worker > (1u << 22))
    errors.push_back(dpiError("dpi.prefilter_windows_per_worker",
                              absl::StrCat(m->prefilter_windows_per_worker, " is out of range [1, 4194304]")));
}

}  // namespace dpu::ctl
