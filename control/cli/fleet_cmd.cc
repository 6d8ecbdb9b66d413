#include "control/cli/fleet_cmd.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "control/cli/cli_format.h"
#include "control/config/config_loader.h"
#include "control/fleet/etcd_client.h"
#include "control/fleet/fleet_store.h"
#include "google/protobuf/util/message_differencer.h"
#include "rules/compile/config_errors.h"

namespace dpu::cli {

const char* const kFleetHelp = R"(usage:
  dpuctl fleet apply FILE [--expect-version N] [--comment TEXT] [--stage] [--no-validate]
  dpuctl fleet status [--json]
  dpuctl fleet rollout [VERSION] [--groups G1,G2,...] [--group-timeout S]
  dpuctl fleet rollback [--to VERSION]
  dpuctl fleet history [--json]
  dpuctl fleet diff A B
  dpuctl fleet show [VERSION]
  (each with the fleet options [--fleet NAME] [--etcd URLS] [--etcd-ca F] [--etcd-cert F]
   [--etcd-key F], anywhere after `fleet`)

The fleet's policy lives in etcd (docs/fleet.md); nodes run
`dpu-appliance run --fleet NAME --etcd URLS --node ID [--group G]` and follow it.

fleet options:
  --fleet NAME       the fleet (default $DPUCTL_FLEET, else "default")
  --etcd URLS        etcd endpoints, comma separated (default $DPUCTL_ETCD, else 127.0.0.1:2379)
  --etcd-ca FILE     verify etcd's certificate with this CA (PEM): TLS
  --etcd-cert FILE   client certificate (PEM) for etcd's client-cert-auth; with --etcd-key
  --etcd-key FILE

commands:
  apply FILE     validates FILE (every error, as `dpuctl config apply` would show them; nothing is
                 written when it is invalid), stores its files by content hash and the document
                 as the next version, and makes it every node's version (group pins of an earlier
                 rollout are lifted). Compare-and-swap on the fleet's latest version: when another
                 apply came first it fails (exit 3) and writes no version. A dns or dpi
                 section that is the same as in the latest version (same dataplane section,
                 every file the same by sha256) is not validated again when dpuctl validated
                 that version (a 1M-name list or a YARA set takes seconds); the nodes always
                 validate and compile the whole document.
                 --expect-version N: fail unless the latest version is N.
                 --stage: store the version only; `rollout` makes nodes run it.
                 --no-validate: skip the local validation (the nodes still validate).
  status         one line per live node: group, state, applied / desired version, health,
                 last seen, error. A node whose lease expired is not listed.
  rollout        group by group (default order: "canary" first, then the other groups of live
                 nodes by name; --groups sets it): pins the groups not yet reached to the running
                 version, moves one group, waits until every live member runs the version and is
                 healthy, then the next. Halts (exit 1) at the first node that refuses the
                 version or is unhealthy, saying which; the groups not reached keep the old
                 version. At the end every node follows the version and the pins are lifted.
                 VERSION defaults to the latest stored. --group-timeout S: per group (default 300).
  rollback       every node back to the version before the current one (or --to VERSION);
                 during or after a halted rollout: back to the version the fleet ran before it
                 (the group pins lifted).
  history        every stored version: when, who, size, files, comment; the target marked.
  diff A B       versions A and B field by field, and the files that differ.
  show [VERSION] the document of a version (default: the target) as stored.

examples:
  dpuctl fleet --etcd 127.0.0.1:2379 apply site.json --comment "block 203.0.113.0/24"
  dpuctl fleet apply site.json --stage
  dpuctl fleet rollout --groups canary,east,west
  dpuctl fleet status
  dpuctl fleet rollback
  dpuctl fleet history
  dpuctl fleet diff 6 7
  dpuctl fleet show 7
)";

namespace {

constexpr int kOk = 0, kFailed = 1, kUsage = 2, kConflict = 3, kInvalid = 4;

int usage(const std::string& msg) {
  std::fprintf(stderr, "dpuctl: fleet: %s\n\n%s", msg.c_str(), kFleetHelp);
  return kUsage;
}

int fail(const std::string& what, const absl::Status& st) {
  std::fprintf(stderr, "dpuctl: fleet %s: %s\n", what.c_str(), std::string(st.message()).c_str());
  return kFailed;
}

std::string ago(int64_t unix_ns) {
  if (unix_ns <= 0) return "-";
  const double s = (fleet::unixNowNs() - unix_ns) / 1e9;
  if (s < 0) return "now";
  if (s < 120) return absl::StrFormat("%.0fs ago", s);
  if (s < 7200) return absl::StrFormat("%.0fm ago", s / 60);
  return absl::StrFormat("%.1fh ago", s / 3600);
}

std::string humanBytes(uint64_t b) {
  if (b < 10 * 1024) return absl::StrCat(b, " B");
  if (b < 10ull * 1024 * 1024) return absl::StrFormat("%.1f KiB", b / 1024.0);
  return absl::StrFormat("%.1f MiB", b / (1024.0 * 1024));
}

struct Session {
  fleet::EtcdOptions etcd;
  std::string fleet = "default";
  bool json = false;
  std::unique_ptr<fleet::EtcdClient> client;
  std::unique_ptr<fleet::FleetKeys> keys;
};

std::string versionLabel(uint64_t v) { return v == 0 ? "-" : absl::StrCat(v); }

// The document of a version, with its files.
absl::StatusOr<v1::ApplianceConfig> readDocument(Session& s, const v1::FleetVersion& v) {
  auto text = fleet::getBlob(*s.client, *s.keys, v.config());
  if (!text.ok()) return text.status();
  return ctl::parseConfig(*text, ctl::ConfigFormat::kJson,
                          absl::StrCat("fleet ", s.fleet, " version ", v.version()));
}

// The sections of `doc` (dns, dpi: those whose compile is long) that are the same as in
// version `prev` of the fleet, with the same dataplane section and every file they name the
// same by sha256, when dpuctl validated that version: they are removed from `to_check` (the
// copy that is validated) and named in the result. Anything unreadable: nothing is reused.
std::vector<std::string> sameSections(Session& s, uint64_t prev, const v1::ApplianceConfig& doc,
                                      const std::map<std::string, std::string>& sha_by_path,
                                      v1::ApplianceConfig* to_check) {
  auto pv = fleet::readVersion(*s.client, *s.keys, prev);
  if (!pv.ok() || !pv->validated()) return {};
  auto pdoc = readDocument(s, *pv);
  if (!pdoc.ok()) return {};
  std::map<std::string, std::string> prev_sha;
  for (const v1::FleetFile& f : pv->files()) prev_sha[f.path()] = f.sha256();
  using google::protobuf::util::MessageDifferencer;
  if (!MessageDifferencer::Equals(pdoc->dataplane(), doc.dataplane())) return {};
  auto filesSame = [&](const v1::ApplianceConfig& only) {
    v1::ApplianceConfig c = only;
    bool same = true;
    ctl::forEachConfigFile(&c, [&](std::string* p) {
      auto a = sha_by_path.find(*p);
      auto b = prev_sha.find(*p);
      if (a == sha_by_path.end() || b == prev_sha.end() || a->second != b->second) same = false;
    });
    return same;
  };
  std::vector<std::string> out;
  if (doc.has_dns() && pdoc->has_dns() && MessageDifferencer::Equals(pdoc->dns(), doc.dns())) {
    v1::ApplianceConfig only;
    *only.mutable_dns() = doc.dns();
    if (filesSame(only)) {
      to_check->clear_dns();
      out.push_back("dns");
    }
  }
  if (doc.has_dpi() && pdoc->has_dpi() && MessageDifferencer::Equals(pdoc->dpi(), doc.dpi())) {
    v1::ApplianceConfig only;
    *only.mutable_dpi() = doc.dpi();
    if (filesSame(only)) {
      to_check->clear_dpi();
      out.push_back("dpi");
    }
  }
  return out;
}

int cmdApply(Session& s, const std::vector<std::string>& a) {
  std::string file, comment;
  bool stage = false, no_validate = false, have_expect = false;
  uint64_t expect = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == "--stage") {
      stage = true;
    } else if (a[i] == "--no-validate") {
      no_validate = true;
    } else if (a[i] == "--comment" || a[i] == "--expect-version") {
      if (i + 1 >= a.size()) return usage(absl::StrCat("apply: ", a[i], " needs a value"));
      if (a[i] == "--comment") {
        comment = a[++i];
      } else if (!absl::SimpleAtoi(a[++i], &expect)) {
        return usage("apply: --expect-version needs a version number");
      } else {
        have_expect = true;
      }
    } else if (!a[i].empty() && a[i][0] == '-') {
      return usage(absl::StrCat("apply: unknown option '", a[i], "'"));
    } else if (file.empty()) {
      file = a[i];
    } else {
      return usage("apply: give exactly one FILE");
    }
  }
  if (file.empty()) return usage("apply: give the configuration FILE");
  auto parsed = ctl::loadConfigFileAll(file);
  if (!parsed.ok()) {
    std::fprintf(stderr, "dpuctl: fleet apply: %s\n", std::string(parsed.status().message()).c_str());
    return parsed.status().code() == absl::StatusCode::kNotFound ? kFailed : kInvalid;
  }
  v1::ApplianceConfig doc = parsed->config;
  doc.clear_version();
  // The files it names, read and hashed once (validation reads them by path itself; a file
  // that cannot be read is reported by the validation, naming the field, or below).
  std::vector<std::string> paths;
  ctl::forEachConfigFile(&doc, [&](std::string* p) { paths.push_back(*p); });
  std::sort(paths.begin(), paths.end());
  paths.erase(std::unique(paths.begin(), paths.end()), paths.end());
  std::map<std::string, std::string> data_by_path, sha_by_path, read_errors;
  for (const std::string& p : paths) {
    std::string data, err;
    if (!readFile(p, &data, &err)) {
      read_errors[p] = std::move(err);
      continue;
    }
    sha_by_path[p] = fleet::sha256Hex(data);
    data_by_path[p] = std::move(data);
  }
  auto head = fleet::readHead(*s.client, *s.keys);
  if (!head.ok()) return fail("apply", head.status());
  // 1. The document, every error of it, before anything is written. Sections that are the
  // same as in the latest version, files included, are not validated again when that version
  // was (their result cannot differ).
  std::vector<std::string> reused;
  rules::ConfigErrorList errors;
  if (no_validate) {
    errors = parsed->errors;
  } else {
    ctl::ParsedConfig to_check = *parsed;
    if (parsed->errors.empty() && head->version > 0) {
      reused = sameSections(s, head->version, doc, sha_by_path, &to_check.config);
    }
    errors = ctl::allErrors(to_check);
  }
  if (!errors.empty()) {
    std::fprintf(stderr, "dpuctl: fleet apply: %s: invalid, %zu error(s); nothing written\n",
                 file.c_str(), errors.size());
    for (const auto& e : errors) {
      std::fprintf(stderr, "  error: %s\n", rules::formatError(e).c_str());
    }
    return kInvalid;
  }
  // 2. The files, by content.
  if (have_expect && head->version != expect) {
    std::fprintf(stderr,
                 "dpuctl: fleet apply: the fleet's latest version is %lu, not %lu; nothing "
                 "written\n",
                 static_cast<unsigned long>(head->version), static_cast<unsigned long>(expect));
    return kConflict;
  }
  auto ctl_view = fleet::readCtl(*s.client, *s.keys);
  if (!ctl_view.ok()) return fail("apply", ctl_view.status());
  v1::FleetVersion ver;
  ver.set_version(head->version + 1);
  ver.set_based_on(head->version);
  ver.set_created_unix_ns(fleet::unixNowNs());
  ver.set_author(fleet::whoAmI());
  ver.set_comment(comment);
  ver.set_validated(!no_validate);
  uint64_t uploaded = 0, total = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const std::string& p : paths) {
    auto it = data_by_path.find(p);
    if (it == data_by_path.end()) {
      std::fprintf(stderr, "dpuctl: fleet apply: %s (named by %s); nothing written\n",
                   read_errors[p].c_str(), file.c_str());
      return kFailed;
    }
    v1::FleetFile* f = ver.add_files();
    f->set_path(p);
    uint64_t w = 0;
    if (absl::Status st = fleet::putBlob(*s.client, *s.keys, it->second, f, &w, sha_by_path[p]);
        !st.ok()) {
      return fail("apply", st);
    }
    uploaded += w;
    total += it->second.size();
  }
  std::string text = fleet::toJson(doc);
  ver.mutable_config()->set_path(file);
  uint64_t w = 0;
  if (absl::Status st = fleet::putBlob(*s.client, *s.keys, text, ver.mutable_config(), &w);
      !st.ok()) {
    return fail("apply", st);
  }
  uploaded += w;
  total += text.size();
  // 3. The version, the head and (unless staged) the target, in one transaction that holds
  // only if nobody wrote a version since we read the head.
  std::vector<fleet::Compare> cmp = {
      head->mod_revision == 0 ? fleet::Compare::absent(s.keys->head())
                              : fleet::Compare::modRevision(s.keys->head(), head->mod_revision)};
  v1::FleetHead nh;
  nh.set_version(ver.version());
  std::vector<fleet::TxnOp> ops = {
      fleet::TxnOp::put(s.keys->version(ver.version()), fleet::toJson(ver)),
      fleet::TxnOp::put(s.keys->head(), fleet::toJson(nh))};
  const uint64_t previous = ctl_view->target ? ctl_view->target->version() : 0;
  if (!stage) {
    v1::FleetTarget t;
    t.set_version(ver.version());
    t.set_previous(previous);
    t.set_updated_unix_ns(fleet::unixNowNs());
    t.set_by(ver.author());
    t.set_reason("apply");
    ops.push_back(fleet::TxnOp::put(s.keys->target(), fleet::toJson(t)));
    ops.push_back(fleet::TxnOp::del(s.keys->groupsPrefix(), fleet::prefixEnd(s.keys->groupsPrefix())));
  }
  auto r = s.client->txn(cmp, ops);
  if (!r.ok()) return fail("apply", r.status());
  if (!r->succeeded) {
    auto now = fleet::readHead(*s.client, *s.keys);
    std::fprintf(stderr,
                 "dpuctl: fleet apply: another apply wrote version %s while this one was being "
                 "prepared (it was based on %lu); nothing written: check `dpuctl fleet diff` and "
                 "apply again\n",
                 now.ok() ? versionLabel(now->version).c_str() : "?",
                 static_cast<unsigned long>(head->version));
    return kConflict;
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (s.json) {
    std::printf("%s\n", fleet::toJson(ver).c_str());
    return kOk;
  }
  std::printf("fleet %s: version %lu %s (etcd revision %ld): %zu file(s), %s, %s uploaded in %.0f ms\n",
              s.fleet.c_str(), static_cast<unsigned long>(ver.version()),
              stage ? "stored (staged: `dpuctl fleet rollout` runs it)" : "applied to every node",
              static_cast<long>(r->revision), paths.size(), humanBytes(total).c_str(),
              humanBytes(uploaded).c_str(), ms);
  if (!reused.empty()) {
    std::printf("(not validated again, the same as in version %lu, files included: %s)\n",
                static_cast<unsigned long>(head->version), absl::StrJoin(reused, ", ").c_str());
  }
  if (!stage) std::printf("follow it with: dpuctl fleet status\n");
  return kOk;
}

int cmdStatus(Session& s, const std::vector<std::string>& a) {
  for (const auto& x : a) {
    if (x == "--json") {
      s.json = true;
    } else {
      return usage(absl::StrCat("status: unexpected argument '", x, "'"));
    }
  }
  auto nodes = fleet::readNodes(*s.client, *s.keys);
  if (!nodes.ok()) return fail("status", nodes.status());
  auto ctl_view = fleet::readCtl(*s.client, *s.keys);
  if (!ctl_view.ok()) return fail("status", ctl_view.status());
  if (s.json) {
    std::string out = "{\"fleet\":\"" + s.fleet + "\",\"target\":" +
                      (ctl_view->target ? fleet::toJson(*ctl_view->target) : "null") +
                      ",\"nodes\":[";
    for (size_t i = 0; i < nodes->size(); ++i) {
      absl::StrAppend(&out, i ? "," : "", fleet::toJson((*nodes)[i].status));
    }
    std::printf("%s]}\n", out.c_str());
    return kOk;
  }
  std::printf("fleet %s: target version %s", s.fleet.c_str(),
              ctl_view->target ? versionLabel(ctl_view->target->version()).c_str() : "- (none yet)");
  for (const auto& [g, t] : ctl_view->groups) {
    std::printf(", group %s pinned to %s", g.c_str(), versionLabel(t.version()).c_str());
  }
  std::printf("; %zu live node(s)\n", nodes->size());
  if (nodes->empty()) return kOk;
  std::printf("%-16s %-10s %-9s %-8s %-8s %-8s %-10s %s\n", "NODE", "GROUP", "STATE", "APPLIED",
              "DESIRED", "HEALTH", "SEEN", "ERROR");
  for (const auto& n : *nodes) {
    const auto& st = n.status;
    std::string err;
    if (st.last_error().version() != 0 && st.state() == "refused") {
      err = absl::StrCat("version ", st.last_error().version(), " refused (",
                         st.last_error().phase(), "): ", st.last_error().message());
      if (st.last_error().errors_size() > 0) {
        err += absl::StrCat("; ", formatConfigError(st.last_error().errors(0)));
        if (st.last_error().errors_size() > 1) {
          absl::StrAppend(&err, " (+", st.last_error().errors_size() - 1, " more: --json)");
        }
      }
    }
    std::printf("%-16s %-10s %-9s %-8s %-8s %-8s %-10s %s\n", st.node().c_str(),
                st.group().c_str(), st.state().c_str(),
                versionLabel(st.applied_version()).c_str(),
                versionLabel(st.desired_version()).c_str(),
                st.health().substr(0, st.health().find(':')).c_str(),
                ago(st.last_seen_unix_ns()).c_str(), err.c_str());
  }
  return kOk;
}

bool healthy(const v1::FleetNodeStatus& st) { return st.health() == "ok"; }

int cmdRollout(Session& s, const std::vector<std::string>& a) {
  uint64_t version = 0;
  std::vector<std::string> order;
  double timeout_s = 300;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == "--groups" || a[i] == "--group-timeout") {
      if (i + 1 >= a.size()) return usage(absl::StrCat("rollout: ", a[i], " needs a value"));
      if (a[i] == "--groups") {
        order = absl::StrSplit(a[++i], ',', absl::SkipEmpty());
        for (const auto& g : order) {
          if (absl::Status st = fleet::checkName("--groups", g); !st.ok()) {
            return usage(absl::StrCat("rollout: ", st.message()));
          }
        }
      } else if (!absl::SimpleAtod(a[++i], &timeout_s) || timeout_s <= 0) {
        return usage("rollout: --group-timeout needs a number of seconds");
      }
    } else if (!a[i].empty() && a[i][0] == '-') {
      return usage(absl::StrCat("rollout: unknown option '", a[i], "'"));
    } else if (version != 0 || !absl::SimpleAtoi(a[i], &version) || version == 0) {
      return usage(absl::StrCat("rollout: bad VERSION '", a[i], "'"));
    }
  }
  if (version == 0) {
    auto head = fleet::readHead(*s.client, *s.keys);
    if (!head.ok()) return fail("rollout", head.status());
    if (head->version == 0) return fail("rollout", absl::NotFoundError("the fleet has no version yet"));
    version = head->version;
  }
  if (auto v = fleet::readVersion(*s.client, *s.keys, version); !v.ok()) return fail("rollout", v.status());
  auto ctl_view = fleet::readCtl(*s.client, *s.keys);
  if (!ctl_view.ok()) return fail("rollout", ctl_view.status());
  const uint64_t old = ctl_view->target ? ctl_view->target->version() : 0;
  auto nodes = fleet::readNodes(*s.client, *s.keys);
  if (!nodes.ok()) return fail("rollout", nodes.status());
  std::set<std::string> live_groups;
  for (const auto& n : *nodes) live_groups.insert(n.status.group());
  if (order.empty()) {
    if (live_groups.count("canary")) order.push_back("canary");
  }
  for (const auto& g : live_groups) {
    if (std::find(order.begin(), order.end(), g) == order.end()) order.push_back(g);
  }
  if (order.empty()) return fail("rollout", absl::FailedPreconditionError("no live node and no --groups: nothing to roll out to"));
  const std::string by = fleet::whoAmI();
  auto target = [&](uint64_t v, const char* reason, uint64_t prev) {
    v1::FleetTarget t;
    t.set_version(v);
    t.set_previous(prev);
    t.set_updated_unix_ns(fleet::unixNowNs());
    t.set_by(by);
    t.set_reason(reason);
    return fleet::toJson(t);
  };
  std::printf("fleet %s: rolling out version %lu (running: %s) to %zu group(s): %s\n",
              s.fleet.c_str(), static_cast<unsigned long>(version), versionLabel(old).c_str(),
              order.size(), absl::StrJoin(order, ", ").c_str());
  // Pin every group to what it runs now, so moving one group moves only that one. Holds only
  // if the target did not move since it was read.
  {
    std::vector<fleet::TxnOp> ops;
    for (const auto& g : order) {
      if (ctl_view->groups.count(g)) continue;  // already pinned (a halted rollout)
      ops.push_back(fleet::TxnOp::put(s.keys->group(g), target(old, "pin", 0)));
    }
    std::vector<fleet::Compare> cmp;
    cmp.push_back(ctl_view->target ? fleet::Compare::modRevision(s.keys->target(), ctl_view->target_revision)
                                   : fleet::Compare::absent(s.keys->target()));
    if (!ops.empty()) {
      auto r = s.client->txn(cmp, ops);
      if (!r.ok()) return fail("rollout", r.status());
      if (!r->succeeded) {
        std::fprintf(stderr, "dpuctl: fleet rollout: the target changed meanwhile; nothing done\n");
        return kConflict;
      }
    }
  }
  std::fflush(stdout);
  for (size_t gi = 0; gi < order.size(); ++gi) {
    const std::string& g = order[gi];
    auto put = s.client->put(s.keys->group(g), target(version, "rollout", old));
    if (!put.ok()) return fail("rollout", put.status());
    const auto t0 = std::chrono::steady_clock::now();
    std::string last_line;
    while (true) {
      auto ns = fleet::readNodes(*s.client, *s.keys);
      if (!ns.ok()) return fail("rollout", ns.status());
      size_t members = 0, done = 0;
      std::vector<std::string> waiting;
      for (const auto& n : *ns) {
        const auto& st = n.status;
        if (st.group() != g) continue;
        ++members;
        if (st.state() == "refused" && st.last_error().version() == version) {
          std::printf("\n");
          std::fprintf(stderr,
                       "dpuctl: fleet rollout: halted at group %s: node %s refused version %lu "
                       "(%s): %s\n",
                       g.c_str(), st.node().c_str(), static_cast<unsigned long>(version),
                       st.last_error().phase().c_str(), st.last_error().message().c_str());
          for (const auto& e : st.last_error().errors()) {
            std::fprintf(stderr, "  error: %s\n", formatConfigError(e).c_str());
          }
          std::fprintf(stderr,
                       "  groups %s keep version %s; group %s stays pinned to %lu (its nodes "
                       "that refused run %s): `dpuctl fleet rollback` returns everyone to %s\n",
                       gi + 1 < order.size()
                           ? absl::StrJoin(order.begin() + gi + 1, order.end(), ", ").c_str()
                           : "(none)",
                       versionLabel(old).c_str(), g.c_str(), static_cast<unsigned long>(version),
                       versionLabel(st.applied_version()).c_str(), versionLabel(old).c_str());
          return kFailed;
        }
        if (st.applied_version() == version && st.state() == "synced") {
          if (!healthy(st)) {
            std::printf("\n");
            std::fprintf(stderr,
                         "dpuctl: fleet rollout: halted at group %s: node %s runs version %lu "
                         "but is not healthy: %s\n",
                         g.c_str(), st.node().c_str(), static_cast<unsigned long>(version),
                         st.health().c_str());
            return kFailed;
          }
          ++done;
        } else {
          waiting.push_back(absl::StrCat(st.node(), " (", st.state(), ", running ",
                                         versionLabel(st.applied_version()), ")"));
        }
      }
      const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::string line = absl::StrFormat("  group %s: %zu/%zu node(s) on version %lu", g, done,
                                         members, version);
      if (line != last_line) {
        std::printf("%s%s", last_line.empty() ? "" : "\n", line.c_str());
        std::fflush(stdout);
        last_line = line;
      }
      if (members == 0) {
        std::printf(" (no live node in this group)\n");
        break;
      }
      if (done == members) {
        std::printf(" after %.1f s\n", el);
        break;
      }
      if (el > timeout_s) {
        std::printf("\n");
        std::fprintf(stderr,
                     "dpuctl: fleet rollout: halted at group %s: not converged after %.0f s: "
                     "%s\n",
                     g.c_str(), timeout_s, absl::StrJoin(waiting, ", ").c_str());
        return kFailed;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  std::vector<fleet::TxnOp> ops = {
      fleet::TxnOp::put(s.keys->target(), target(version, "rollout", old)),
      fleet::TxnOp::del(s.keys->groupsPrefix(), fleet::prefixEnd(s.keys->groupsPrefix()))};
  auto r = s.client->txn({}, ops);
  if (!r.ok()) return fail("rollout", r.status());
  std::printf("fleet %s: version %lu rolled out; every node follows it\n", s.fleet.c_str(),
              static_cast<unsigned long>(version));
  return kOk;
}

int cmdRollback(Session& s, const std::vector<std::string>& a) {
  uint64_t to = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == "--to" && i + 1 < a.size()) {
      if (!absl::SimpleAtoi(a[++i], &to) || to == 0) return usage("rollback: --to needs a version");
    } else {
      return usage(absl::StrCat("rollback: unexpected argument '", a[i], "'"));
    }
  }
  auto ctl_view = fleet::readCtl(*s.client, *s.keys);
  if (!ctl_view.ok()) return fail("rollback", ctl_view.status());
  if (!ctl_view->target) return fail("rollback", absl::FailedPreconditionError("the fleet has no target version yet"));
  const uint64_t cur = ctl_view->target->version();
  if (to == 0 && !ctl_view->groups.empty()) {
    // A rollout in progress or halted: back to what the fleet ran before it (the target),
    // the pins lifted.
    std::vector<std::string> pinned;
    for (const auto& [g, t] : ctl_view->groups) {
      if (t.version() != cur) pinned.push_back(absl::StrCat(g, " (", t.version(), ")"));
    }
    auto r = s.client->txn(
        {fleet::Compare::modRevision(s.keys->target(), ctl_view->target_revision)},
        {fleet::TxnOp::del(s.keys->groupsPrefix(), fleet::prefixEnd(s.keys->groupsPrefix()))});
    if (!r.ok()) return fail("rollback", r.status());
    if (!r->succeeded) {
      std::fprintf(stderr, "dpuctl: fleet rollback: the target changed meanwhile; nothing done\n");
      return kConflict;
    }
    std::printf("fleet %s: rollout stopped; every node back to version %lu%s%s\n", s.fleet.c_str(),
                static_cast<unsigned long>(cur), pinned.empty() ? "" : "; groups moved back: ",
                absl::StrJoin(pinned, ", ").c_str());
    return kOk;
  }
  if (to == 0) to = ctl_view->target->previous();
  if (to == 0) {
    return fail("rollback", absl::FailedPreconditionError(absl::StrCat(
                                "version ", cur, " has no previous version to go back to (--to N)")));
  }
  if (auto v = fleet::readVersion(*s.client, *s.keys, to); !v.ok()) return fail("rollback", v.status());
  v1::FleetTarget t;
  t.set_version(to);
  t.set_previous(cur);
  t.set_updated_unix_ns(fleet::unixNowNs());
  t.set_by(fleet::whoAmI());
  t.set_reason("rollback");
  auto r = s.client->txn(
      {fleet::Compare::modRevision(s.keys->target(), ctl_view->target_revision)},
      {fleet::TxnOp::put(s.keys->target(), fleet::toJson(t)),
       fleet::TxnOp::del(s.keys->groupsPrefix(), fleet::prefixEnd(s.keys->groupsPrefix()))});
  if (!r.ok()) return fail("rollback", r.status());
  if (!r->succeeded) {
    std::fprintf(stderr, "dpuctl: fleet rollback: the target changed meanwhile; nothing done\n");
    return kConflict;
  }
  std::printf("fleet %s: every node back to version %lu (was %lu)\n", s.fleet.c_str(),
              static_cast<unsigned long>(to), static_cast<unsigned long>(cur));
  return kOk;
}

int cmdHistory(Session& s, const std::vector<std::string>& a) {
  for (const auto& x : a) {
    if (x == "--json") {
      s.json = true;
    } else {
      return usage(absl::StrCat("history: unexpected argument '", x, "'"));
    }
  }
  auto vs = fleet::readVersions(*s.client, *s.keys);
  if (!vs.ok()) return fail("history", vs.status());
  auto ctl_view = fleet::readCtl(*s.client, *s.keys);
  if (!ctl_view.ok()) return fail("history", ctl_view.status());
  if (s.json) {
    std::string out = "[";
    for (size_t i = 0; i < vs->size(); ++i) absl::StrAppend(&out, i ? "," : "", fleet::toJson((*vs)[i]));
    std::printf("%s]\n", out.c_str());
    return kOk;
  }
  std::printf("%-8s %-24s %-20s %-6s %-10s %-12s %s\n", "VERSION", "CREATED", "AUTHOR", "FILES",
              "SIZE", "RUNS", "COMMENT");
  for (const auto& v : *vs) {
    uint64_t size = v.config().size();
    for (const auto& f : v.files()) size += f.size();
    std::string runs;
    if (ctl_view->target && ctl_view->target->version() == v.version()) runs = "target";
    for (const auto& [g, t] : ctl_view->groups) {
      if (t.version() == v.version()) runs += (runs.empty() ? "" : ",") + g;
    }
    std::printf("%-8lu %-24s %-20s %-6d %-10s %-12s %s\n", static_cast<unsigned long>(v.version()),
                formatTime(v.created_unix_ns()).c_str(), v.author().c_str(), v.files_size(),
                humanBytes(size).c_str(), runs.empty() ? "-" : runs.c_str(), v.comment().c_str());
  }
  return kOk;
}

int cmdDiff(Session& s, const std::vector<std::string>& a) {
  uint64_t va = 0, vb = 0;
  if (a.size() != 2 || !absl::SimpleAtoi(a[0], &va) || !absl::SimpleAtoi(a[1], &vb)) {
    return usage("diff: give two version numbers");
  }
  auto ma = fleet::readVersion(*s.client, *s.keys, va);
  if (!ma.ok()) return fail("diff", ma.status());
  auto mb = fleet::readVersion(*s.client, *s.keys, vb);
  if (!mb.ok()) return fail("diff", mb.status());
  auto da = readDocument(s, *ma);
  if (!da.ok()) return fail("diff", da.status());
  auto db = readDocument(s, *mb);
  if (!db.ok()) return fail("diff", db.status());
  auto lines = diffConfigs(*da, *db);
  if (!lines.ok()) return fail("diff", lines.status());
  std::map<std::string, std::pair<std::string, std::string>> files;  // path -> (sha A, sha B)
  for (const auto& f : ma->files()) files[f.path()].first = f.sha256();
  for (const auto& f : mb->files()) files[f.path()].second = f.sha256();
  size_t n = lines->size();
  std::printf("fleet %s: version %lu -> %lu\n", s.fleet.c_str(), static_cast<unsigned long>(va),
              static_cast<unsigned long>(vb));
  for (const auto& l : *lines) {
    switch (l.kind) {
      case DiffLine::kChanged: std::printf("~ %s: %s -> %s\n", l.path.c_str(), l.committed.c_str(), l.proposed.c_str()); break;
      case DiffLine::kAdded: std::printf("+ %s: %s\n", l.path.c_str(), l.proposed.c_str()); break;
      case DiffLine::kRemoved: std::printf("- %s: %s\n", l.path.c_str(), l.committed.c_str()); break;
    }
  }
  for (const auto& [p, sh] : files) {
    if (sh.first == sh.second) continue;
    ++n;
    if (sh.first.empty()) {
      std::printf("+ file %s (sha256 %.12s)\n", p.c_str(), sh.second.c_str());
    } else if (sh.second.empty()) {
      std::printf("- file %s\n", p.c_str());
    } else {
      std::printf("~ file %s: content changed (sha256 %.12s -> %.12s)\n", p.c_str(),
                  sh.first.c_str(), sh.second.c_str());
    }
  }
  if (n == 0) std::printf("(no difference)\n");
  return kOk;
}

int cmdShow(Session& s, const std::vector<std::string>& a) {
  uint64_t v = 0;
  if (a.size() > 1 || (a.size() == 1 && (!absl::SimpleAtoi(a[0], &v) || v == 0))) {
    return usage("show: give at most one version number");
  }
  if (v == 0) {
    auto ctl_view = fleet::readCtl(*s.client, *s.keys);
    if (!ctl_view.ok()) return fail("show", ctl_view.status());
    if (!ctl_view->target) return fail("show", absl::NotFoundError("the fleet has no target version yet"));
    v = ctl_view->target->version();
  }
  auto m = fleet::readVersion(*s.client, *s.keys, v);
  if (!m.ok()) return fail("show", m.status());
  auto text = fleet::getBlob(*s.client, *s.keys, m->config());
  if (!text.ok()) return fail("show", text.status());
  std::printf("%s\n", text->c_str());
  return kOk;
}

}  // namespace

int cmdFleet(const std::vector<std::string>& args, bool json) {
  Session s;
  s.json = json;
  if (const char* e = std::getenv("DPUCTL_FLEET"); e && *e) s.fleet = e;
  const char* ep = std::getenv("DPUCTL_ETCD");
  s.etcd.endpoints = ep && *ep ? ep : "127.0.0.1:2379";
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& o = args[i];
    std::string* dst = nullptr;
    if (o == "--help" || o == "-h") {
      std::fputs(kFleetHelp, stdout);
      return kOk;
    }
    if (o == "--fleet") dst = &s.fleet;
    else if (o == "--etcd") dst = &s.etcd.endpoints;
    else if (o == "--etcd-ca") dst = &s.etcd.ca_file;
    else if (o == "--etcd-cert") dst = &s.etcd.cert_file;
    else if (o == "--etcd-key") dst = &s.etcd.key_file;
    if (dst == nullptr) {
      rest.push_back(o);
      continue;
    }
    if (i + 1 >= args.size()) return usage(absl::StrCat(o, " needs a value"));
    *dst = args[++i];
  }
  if (rest.empty()) return usage("which one? apply, status, rollout, rollback, history, diff or show");
  if (absl::Status st = fleet::checkName("--fleet", s.fleet); !st.ok()) return usage(std::string(st.message()));
  if (s.etcd.cert_file.empty() != s.etcd.key_file.empty()) {
    return usage("--etcd-cert and --etcd-key go together");
  }
  const std::string sub = rest[0];
  std::vector<std::string> a(rest.begin() + 1, rest.end());
  using Fn = int (*)(Session&, const std::vector<std::string>&);
  static const std::map<std::string, Fn> kCmds = {
      {"apply", cmdApply},     {"status", cmdStatus}, {"rollout", cmdRollout},
      {"rollback", cmdRollback}, {"history", cmdHistory}, {"diff", cmdDiff},
      {"show", cmdShow}};
  auto it = kCmds.find(sub);
  if (it == kCmds.end()) return usage(absl::StrCat("unknown subcommand '", sub, "'"));
  auto c = fleet::EtcdClient::create(s.etcd);
  if (!c.ok()) return fail(sub, c.status());
  s.client = std::move(*c);
  s.keys = std::make_unique<fleet::FleetKeys>(s.fleet);
  return it->second(s, a);
}

}  // namespace dpu::cli
