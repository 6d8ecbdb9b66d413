#include "rules/compiled/dns.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "rules/compile/dns_parsers.h"
#include "rules/compile/progress.h"  // --- ops ---

namespace dpu::rules {
namespace {

constexpr size_t kMaxLists = kDnsCounterSlots;
constexpr uint32_t kMaxTtl = 7 * 86400;
constexpr size_t kMaxSkippedSamples = 5;

ConfigError dnsError(const std::string& list, const std::string& field, std::string reason) {
  ConfigError e;
  e.section = "dns";
  e.rule = list;
  e.field = field;
  e.reason = std::move(reason);
  return e;
}

bool validListName(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-' || c == '.';
  });
}

// The parts of DnsListModel that decide the file-backed content.
bool sameBase(const DnsListModel& a, const DnsListModel& b) {
  return a.name == b.name && a.format == b.format && a.bad_lines == b.bad_lines &&
         a.plain_match == b.plain_match && a.files == b.files && a.file_stamps == b.file_stamps;
}

bool isPrefix(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
}

// Parses `lines` (inline entries) with the list's syntax into `sink`; counts bad lines.
void parseInline(const DnsListModel& m, int index, const char* what,
                 const std::vector<std::string>& lines, size_t from, const DnsEntrySink& sink,
                 ConfigErrorList& errs, uint64_t& bad) {
  if (from >= lines.size()) return;
  // --- ops --- progress: entries parsed of those given (a million-name RPC or config list).
  ProgressStep progress(absl::StrCat("DNS list ", m.name, ": ", what), lines.size() - from,
                        "names", 4096);
  for (size_t i = from; i < lines.size(); ++i) {
    progress.advance();
    DnsSource src;
    src.list = m.name;
    src.field = absl::StrCat("dns.lists[", index, "].", what, "[", i, "]");
    src.first_line = 0;
    DnsParseCounts c = parseDnsListText(lines[i], m.format, m.plain_match, src, sink, &errs);
    bad += c.bad_lines;
    if (c.bad_lines == 0 && c.entries == 0) {
      errs.push_back(dnsError(m.name, src.field, "no name in the entry"));
      ++bad;
    }
  }
}

// Applies the bad-line policy to the errors of one list. Returns false when the list fails.
bool settleBadLines(const DnsListModel& m, ConfigErrorList& local, uint64_t bad,
                    CompiledDnsList& out, ConfigErrorList& errs) {
  if (bad == 0 && local.empty()) return true;
  if (m.bad_lines == DnsBadLines::kSkip) {
    out.skipped_lines += bad;
    for (const ConfigError& e : local) {
      if (out.skipped_samples.size() >= kMaxSkippedSamples) break;
      out.skipped_samples.push_back(formatError(e));
    }
    return true;
  }
  errs.insert(errs.end(), local.begin(), local.end());
  if (bad > local.size()) {
    errs.push_back(dnsError(m.name, "", absl::StrCat(bad, " bad lines in all (the first ",
                                                      local.size(), " are listed)")));
  }
  return false;
}

std::shared_ptr<CompiledDnsList> buildList(const DnsListModel& m, int index,
                                           const CompiledDnsList* prev, ConfigErrorList& errs) {
  auto t0 = std::chrono::steady_clock::now();
  auto out = std::make_shared<CompiledDnsList>();
  out->name = m.name;
  out->action = m.action;
  out->ttl = m.ttl;
  out->sinkhole_v4 = m.sinkhole_v4;
  out->sinkhole_v6 = m.sinkhole_v6;
  if (out->sinkhole_v4.empty()) out->sinkhole_v4.push_back({0, 0, 0, 0});
  if (out->sinkhole_v6.empty()) out->sinkhole_v6.push_back({});
  out->model = m;

  ConfigErrorList local;
  uint64_t bad = 0;
  DnsNameSet& set = out->set;
  DnsEntrySink adder = [&set](std::string_view name, uint8_t bits) {
    set.add(dnsNameHash(name), bits);
  };
  DnsEntrySink remover = [&set](std::string_view name, uint8_t bits) {
    set.remove(dnsNameHash(name), bits);
  };

  bool delta = prev && sameBase(prev->model, m) && isPrefix(prev->model.names, m.names) &&
               isPrefix(prev->model.removed, m.removed);
  if (delta) {
    // Copy the previous set and patch it: (files + names) - removed.
    set = prev->set;
    out->skipped_lines = prev->skipped_lines;
    out->skipped_samples = prev->skipped_samples;
    out->incremental = true;
    std::unordered_set<uint64_t> added;
    DnsEntrySink add_new = [&](std::string_view name, uint8_t bits) {
      uint64_t h = dnsNameHash(name);
      set.add(h, bits);
      added.insert(h);
    };
    set.reserve(set.size() + (m.names.size() - prev->model.names.size()));
    parseInline(m, index, "names", m.names, prev->model.names.size(), add_new, local, bad);
    // Removals already in force apply again to the names just added.
    DnsEntrySink reremove = [&](std::string_view name, uint8_t bits) {
      uint64_t h = dnsNameHash(name);
      if (added.count(h)) set.remove(h, bits);
    };
    if (!added.empty()) {
      ConfigErrorList ignore;
      uint64_t ignore_bad = 0;
      parseInline(m, index, "removed", m.removed, 0, reremove, ignore, ignore_bad);
    }
    parseInline(m, index, "removed", m.removed, prev->model.removed.size(), remover, local, bad);
  } else {
    for (size_t j = 0; j < m.files.size(); ++j) {
      std::string field = absl::StrCat("dns.lists[", index, "].files[", j, "]");
      auto text = readDnsListFile(m.files[j]);
      if (!text.ok()) {
        ConfigError e = dnsError(m.name, field, std::string(text.status().message()));
        e.file = m.files[j];
        errs.push_back(std::move(e));
        return nullptr;
      }
      set.reserve(set.size() + static_cast<size_t>(std::count(text->begin(), text->end(), '\n')) + 1);
      DnsSource src{m.name, m.files[j], field, 1};
      DnsParseCounts c = parseDnsListText(*text, m.format, m.plain_match, src, adder, &local);
      bad += c.bad_lines;
    }
    parseInline(m, index, "names", m.names, 0, adder, local, bad);
    parseInline(m, index, "removed", m.removed, 0, remover, local, bad);
  }
  if (!settleBadLines(m, local, bad, *out, errs)) return nullptr;
  out->load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace

DnsLookup CompiledDns::lookupName(std::string_view name) const {
  std::string norm;
  if (!normalizeDnsName(name, norm, nullptr)) return {};
  uint64_t hs[kDnsMaxLabels];
  int n = dnsSuffixHashes(norm, hs, kDnsMaxLabels);
  if (n <= 0) return {};
  return lookup(hs, n);
}

absl::StatusOr<std::shared_ptr<const CompiledDns>> compileDns(const DnsModel& model,
                                                              const CompiledDns* previous,
                                                              ConfigErrorList* errors) {
  ConfigErrorList local;
  ConfigErrorList& errs = errors ? *errors : local;
  size_t before = errs.size();
  if (model.lists.size() > kMaxLists) {
    errs.push_back(dnsError("", "dns.lists", absl::StrCat(model.lists.size(), " lists; at most ", kMaxLists)));
  }
  std::set<uint16_t> ports;
  for (size_t i = 0; i < model.extra_ports.size(); ++i) {
    uint16_t p = model.extra_ports[i];
    std::string field = absl::StrCat("dns.extra_ports[", i, "]");
    if (p == 0 || p == 53) {
      errs.push_back(dnsError("", field, absl::StrCat(p, ": a port 1..65535 other than 53 (always inspected)")));
    } else if (!ports.insert(p).second) {
      errs.push_back(dnsError("", field, absl::StrCat("port ", p, " listed twice")));
    }
  }
  std::map<std::string, const CompiledDnsList*> prev_by_name;
  if (previous) {
    for (const auto& l : previous->lists) prev_by_name[l->name] = l.get();
  }
  auto out = std::make_shared<CompiledDns>();
  out->extra_ports = model.extra_ports;
  out->malformed = model.malformed;
  out->nonstandard = model.nonstandard;
  out->tcp_midstream = model.tcp_midstream;
  out->cname_cloaking = model.cname_cloaking;
  // The SOA of negative answers: both names in wire format.
  for (const auto& [text, field] : {std::pair<const std::string&, const char*>{model.soa.mname, "dns.soa.mname"},
                                    std::pair<const std::string&, const char*>{model.soa.rname, "dns.soa.rname"}}) {
    std::string norm, why;
    if (text.empty() || !normalizeDnsName(text, norm, &why)) {
      errs.push_back(dnsError("", field, absl::StrCat("'", text, "' is not a domain name",
                                                      why.empty() ? "" : ": ", why)));
      continue;
    }
    size_t start = 0;
    while (start <= norm.size()) {
      size_t dot = norm.find('.', start);
      if (dot == std::string::npos) dot = norm.size();
      out->soa_names.push_back(static_cast<uint8_t>(dot - start));
      out->soa_names.insert(out->soa_names.end(), norm.begin() + long(start), norm.begin() + long(dot));
      start = dot + 1;
    }
    out->soa_names.push_back(0);
  }
  out->soa_serial = model.soa.serial;
  out->soa_refresh = model.soa.refresh;
  out->soa_retry = model.soa.retry;
  out->soa_expire = model.soa.expire;
  out->soa_minimum = model.soa.minimum;
  // Counter slots: a list keeps its name's slot; a new name takes the next never-used slot,
  // or (all used once) the lowest slot no current list holds (its counts start from what
  // the slot's previous list left: counters read by slot are cumulative).
  out->next_slot = previous ? previous->next_slot : 0;
  std::vector<bool> slot_used(kDnsCounterSlots, false);
  for (const DnsListModel& m : model.lists) {
    auto it = prev_by_name.find(m.name);
    if (it != prev_by_name.end()) slot_used[it->second->slot] = true;
  }
  auto slotFor = [&](const std::string& name) -> uint16_t {
    auto it = prev_by_name.find(name);
    if (it != prev_by_name.end()) return it->second->slot;
    if (out->next_slot < kDnsCounterSlots) {
      slot_used[out->next_slot] = true;
      return out->next_slot++;
    }
    for (uint16_t s = 0; s < kDnsCounterSlots; ++s) {
      if (!slot_used[s]) {
        slot_used[s] = true;
        return s;
      }
    }
    return 0;
  };
  std::set<std::string> names;
  for (size_t i = 0; i < model.lists.size() && i < kMaxLists; ++i) {
    const DnsListModel& m = model.lists[i];
    std::string base = absl::StrCat("dns.lists[", i, "]");
    size_t errs_before = errs.size();
    if (!validListName(m.name)) {
      errs.push_back(dnsError(m.name, base + ".name",
                              "a list name is 1..64 letters, digits, '_', '-' or '.'"));
    } else if (!names.insert(m.name).second) {
      errs.push_back(dnsError(m.name, base + ".name", "list name used twice"));
    }
    if (m.ttl > kMaxTtl) {
      errs.push_back(dnsError(m.name, base + ".ttl", absl::StrCat(m.ttl, " is out of range [0, ", kMaxTtl, "]")));
    }
    if (m.files.empty() && m.names.empty()) {
      errs.push_back(dnsError(m.name, base, "a list needs names or files"));
    }
    if (m.file_stamps.size() != m.files.size() && !m.file_stamps.empty()) {
      errs.push_back(dnsError(m.name, base + ".files", "internal: file stamps do not match the files"));
    }
    if (errs.size() != errs_before) continue;
    auto it = prev_by_name.find(m.name);
    const CompiledDnsList* prev = it == prev_by_name.end() ? nullptr : it->second;
    if (prev && prev->model == m) {
      // Unchanged: share the compiled list (not re-read, not re-hashed).
      for (const auto& l : previous->lists) {
        if (l.get() == prev) out->lists.push_back(l);
      }
      continue;
    }
    auto built = buildList(m, static_cast<int>(i), prev, errs);
    if (built) {
      built->slot = slotFor(m.name);
      out->lists.push_back(std::move(built));
    }
  }
  if (errs.size() != before) {
    return errorsToStatus(ConfigErrorList(errs.begin() + before, errs.end()));
  }
  return std::shared_ptr<const CompiledDns>(std::move(out));
}

}  // namespace dpu::rules
