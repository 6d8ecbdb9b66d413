#include "control/cli/dns_cmd.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "control/cli/cli_format.h"

namespace dpu::cli {

const char* const kDnsHelp = R"(usage:
  dpuctl dns list
      The running DNS lists: action, distinct names, bad lines skipped, last build (or
      delta) time, and per-list counters (queries blocked, messages allowed).
  dpuctl dns add LIST ENTRY... [--file FILE] [--expected-version N | --force]
  dpuctl dns remove LIST ENTRY... [--file FILE] [--expected-version N | --force]
      Adds entries to (or takes them out of) the list LIST, in the list's format
      ("ads.example", "||ads.example^", "*.ads.example", "x CNAME ." ...); --file reads
      one entry per line ('#' comments and blank lines skipped). Applied like
      `config set`: validated, persisted, published hitlessly; only LIST changes (its
      compiled table is copied and patched, no list file is read again).
  dpuctl dns create LIST [ENTRY...] [--action ACTION] [--format FORMAT] [--file FILE]
                  [--list-file PATH]... [--match-subdomains] [--skip-bad-lines]
                  [--sinkhole-v4 A]... [--sinkhole-v6 A]... [--ttl N] [--index N]
                  [--expected-version N | --force]
      Creates the list LIST (dns.lists[]) with the ENTRY arguments and the lines of --file
      (read here) as inline entries, and --list-file PATH as list files the appliance reads
      (a relative PATH is made absolute here; the file must be on the appliance's host); at
      least one of them (a list without names is refused).
      ACTION nxdomain (default), nodata, sinkhole, refuse, drop or allow; FORMAT auto
      (default), plain, hosts, adblock, wildcard, rpz or dnsmasq. The list goes last (on a
      tie the list listed first wins) unless --index N (0 = first). A list of that name
      already: exit 1; an invalid list: exit 4 with every error.
  dpuctl dns delete LIST [--expected-version N | --force]
      Deletes the list LIST (its entries and files with it).
  dpuctl dns show LIST
      The list as configured (action, format, files, inline and removed entries, options)
      and its running stats.

examples:
  dpuctl dns create blocked evil.example "*.tracker.example" --format wildcard
  dpuctl dns add blocked other.example
  dpuctl dns create ads --format adblock --list-file /etc/dpu/lists/ads.txt --action nxdomain
  dpuctl dns create corp-allow --action allow intranet.example --index 0
  dpuctl dns show blocked
  dpuctl dns delete blocked
  dpuctl dns add ads "||tracker.example^" "||metrics.example^"
  dpuctl dns remove ads "||metrics.example^"
  dpuctl dns list
  dpuctl --json dns list
)";

namespace {

constexpr int kOk = 0, kFailed = 1, kUsage = 2;

int usage(const std::string& msg) {
  std::fprintf(stderr, "dpuctl: %s\n\n%s", msg.c_str(), kDnsHelp);
  return kUsage;
}

constexpr std::pair<const char*, dpu::v1::DnsAction> kActions[] = {
    {"nxdomain", dpu::v1::DNS_NXDOMAIN}, {"nodata", dpu::v1::DNS_NODATA},
    {"sinkhole", dpu::v1::DNS_SINKHOLE}, {"refuse", dpu::v1::DNS_REFUSE},
    {"drop", dpu::v1::DNS_DROP},         {"allow", dpu::v1::DNS_ALLOW}};
constexpr std::pair<const char*, dpu::v1::DnsListFormat> kFormats[] = {
    {"auto", dpu::v1::DNS_FORMAT_AUTO},         {"plain", dpu::v1::DNS_FORMAT_PLAIN},
    {"hosts", dpu::v1::DNS_FORMAT_HOSTS},       {"adblock", dpu::v1::DNS_FORMAT_ADBLOCK},
    {"wildcard", dpu::v1::DNS_FORMAT_WILDCARD}, {"rpz", dpu::v1::DNS_FORMAT_RPZ},
    {"dnsmasq", dpu::v1::DNS_FORMAT_DNSMASQ}};

template <class T, size_t N>
bool lookupWord(const std::pair<const char*, T> (&table)[N], const std::string& word, T* out) {
  for (const auto& [name, v] : table) {
    if (word == name) {
      *out = v;
      return true;
    }
  }
  return false;
}

template <class T, size_t N>
const char* wordOf(const std::pair<const char*, T> (&table)[N], T v, const char* dflt) {
  for (const auto& [name, x] : table) {
    if (x == v) return name;
  }
  return dflt;
}

// Entries of FILE (one a line; '#' comments and blank lines skipped) appended to `out`.
bool readEntries(const std::string& path, google::protobuf::RepeatedPtrField<std::string>* out) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "dpuctl: %s: cannot open\n", path.c_str());
    return false;
  }
  std::string line;
  while (std::getline(in, line)) {
    size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos || line[b] == '#') continue;
    size_t e = line.find_last_not_of(" \t\r");
    out->Add(line.substr(b, e - b + 1));
  }
  return true;
}

int cmdDnsShow(const DnsCmdEnv& env, const std::vector<std::string>& a) {
  if (a.size() != 2 || a[1].rfind("--", 0) == 0) return usage("dns show: give exactly one LIST");
  const std::string& name = a[1];
  dpu::v1::GetConfigResponse cfg;
  {
    grpc::ClientContext ctx;
    env.unary(&ctx);
    grpc::Status st = env.stub->GetConfig(&ctx, dpu::v1::GetConfigRequest(), &cfg);
    if (!st.ok()) return env.rpc_fail("dns show", st);
  }
  const dpu::v1::DnsList* list = nullptr;
  for (const auto& l : cfg.config().dns().lists()) {
    if (l.name() == name) list = &l;
  }
  if (list == nullptr) {
    std::fprintf(stderr, "dpuctl: dns show: no DNS list named '%s'\n", name.c_str());
    return kFailed;
  }
  dpu::v1::ListDnsListsResponse stats;
  {
    grpc::ClientContext ctx;
    env.unary(&ctx);
    grpc::Status st = env.stub->ListDnsLists(&ctx, dpu::v1::ListDnsListsRequest(), &stats);
    if (!st.ok()) return env.rpc_fail("dns show", st);
  }
  const dpu::v1::DnsListStats* running = nullptr;
  for (const auto& l : stats.lists()) {
    if (l.name() == name) running = &l;
  }
  std::fputs(formatDnsList(*list, running, cfg.config().version(), env.json).c_str(), stdout);
  return kOk;
}

}  // namespace

std::string formatDnsList(const dpu::v1::DnsList& l, const dpu::v1::DnsListStats* running,
                          uint64_t version, bool json) {
  if (json) {
    std::string out = absl::StrCat("{\n\"config_version\": \"", version, "\",\n\"list\": ",
                                   toJson(l, true));
    if (running) absl::StrAppend(&out, ",\n\"stats\": ", toJson(*running, true));
    return absl::StrCat(out, "}\n");
  }
  std::string s = absl::StrFormat("DNS list %s (config version %u)\n", l.name(), version);
  absl::StrAppend(&s, "  action          ", wordOf(kActions, l.action(), "nxdomain"), "\n");
  absl::StrAppend(&s, "  format          ", wordOf(kFormats, l.format(), "auto"), "\n");
  absl::StrAppend(&s, "  match subdomains ", l.match_subdomains() ? "yes" : "no",
                  "; skip bad lines ", l.skip_bad_lines() ? "yes" : "no", "\n");
  if (l.ttl()) absl::StrAppend(&s, "  ttl             ", l.ttl(), "\n");
  for (const auto& a : l.sinkhole_v4()) absl::StrAppend(&s, "  sinkhole v4     ", a, "\n");
  for (const auto& a : l.sinkhole_v6()) absl::StrAppend(&s, "  sinkhole v6     ", a, "\n");
  for (const auto& f : l.files()) absl::StrAppend(&s, "  file            ", f, "\n");
  absl::StrAppend(&s, "  inline entries  ", l.names_size(), "\n");
  for (const auto& n : l.names()) absl::StrAppend(&s, "    ", n, "\n");
  if (l.removed_size()) {
    absl::StrAppend(&s, "  removed entries ", l.removed_size(), "\n");
    for (const auto& n : l.removed()) absl::StrAppend(&s, "    ", n, "\n");
  }
  if (running) {
    absl::StrAppend(&s, absl::StrFormat("  running         %u distinct names, %u bad lines skipped, "
                                        "%u blocked, %u allowed, built in %.1f ms (%s)\n",
                                        running->names(), running->skipped_lines(),
                                        running->blocked(), running->allowed(), running->load_ms(),
                                        running->incremental() ? "delta" : "full"));
  } else {
    absl::StrAppend(&s, "  running         not in the running snapshot\n");
  }
  return s;
}

namespace {

int cmdDnsCreateDelete(const DnsCmdEnv& env, const std::vector<std::string>& a) {
  const std::string sub = a[0];
  const bool create = sub == "create";
  dpu::v1::CreateDnsListRequest cr;
  dpu::v1::DnsList* l = cr.mutable_list();
  std::vector<std::string> pos;
  for (size_t i = 1; i < a.size(); ++i) {
    std::string err;
    if (env.version_opt(a, i, &err)) {
      if (!err.empty()) return usage("dns " + sub + ": " + err);
      continue;
    }
    const std::string& o = a[i];
    if (create && (o == "--match-subdomains" || o == "--skip-bad-lines")) {
      if (o == "--match-subdomains") l->set_match_subdomains(true);
      else l->set_skip_bad_lines(true);
      continue;
    }
    if (create && (o == "--action" || o == "--format" || o == "--file" || o == "--list-file" ||
                   o == "--sinkhole-v4" || o == "--sinkhole-v6" || o == "--ttl" || o == "--index")) {
      if (i + 1 >= a.size()) return usage("dns create: " + o + " needs a value");
      const std::string& v = a[++i];
      uint32_t n = 0;
      if (o == "--action") {
        dpu::v1::DnsAction act;
        if (!lookupWord(kActions, v, &act)) {
          return usage("dns create: --action '" + v +
                       "' is not one of nxdomain, nodata, sinkhole, refuse, drop, allow");
        }
        l->set_action(act);
      } else if (o == "--format") {
        dpu::v1::DnsListFormat f;
        if (!lookupWord(kFormats, v, &f)) {
          return usage("dns create: --format '" + v +
                       "' is not one of auto, plain, hosts, adblock, wildcard, rpz, dnsmasq");
        }
        l->set_format(f);
      } else if (o == "--file") {
        if (!readEntries(v, l->mutable_names())) return kFailed;
      } else if (o == "--list-file") {
        std::error_code ec;
        auto abs = std::filesystem::absolute(v, ec);
        l->add_files(ec ? v : abs.lexically_normal().string());
      } else if (o == "--sinkhole-v4") {
        l->add_sinkhole_v4(v);
      } else if (o == "--sinkhole-v6") {
        l->add_sinkhole_v6(v);
      } else if (!absl::SimpleAtoi(v, &n)) {
        return usage("dns create: " + o + " needs a number");
      } else if (o == "--ttl") {
        l->set_ttl(n);
      } else {
        cr.set_index(n);
      }
      continue;
    }
    if (o.rfind("--", 0) == 0) return usage("dns " + sub + ": unknown option '" + o + "'");
    pos.push_back(o);
  }
  if (pos.empty()) return usage("dns " + sub + ": give the LIST name");
  if (!create && pos.size() > 1) return usage("dns delete: unexpected argument '" + pos[1] + "'");
  l->set_name(pos[0]);
  for (size_t i = 1; i < pos.size(); ++i) l->add_names(pos[i]);
  if (create && l->names_size() == 0 && l->files_size() == 0) {
    return usage("dns create: give at least one ENTRY, --file or --list-file (a list without "
                 "names blocks nothing and is refused)");
  }
  uint64_t expected = 0;
  bool force = false;
  if (int rc = env.resolve_expected(&expected, &force); rc != kOk) return rc;
  grpc::ClientContext ctx;
  env.unary(&ctx);
  dpu::v1::ApplyConfigResponse resp;
  grpc::Status st;
  if (create) {
    cr.set_expected_version(expected);
    cr.set_force(force);
    st = env.stub->CreateDnsList(&ctx, cr, &resp);
  } else {
    dpu::v1::DeleteDnsListRequest dr;
    dr.set_name(pos[0]);
    dr.set_expected_version(expected);
    dr.set_force(force);
    st = env.stub->DeleteDnsList(&ctx, dr, &resp);
  }
  if (!st.ok()) return env.rpc_fail("dns " + sub, st);
  return env.print_apply(resp);
}

}  // namespace

std::string formatDnsLists(const dpu::v1::ListDnsListsResponse& r) {
  std::string s = absl::StrFormat("config version %u, %d DNS list(s)\n", r.config_version(),
                                  r.lists_size());
  if (r.lists_size() == 0) return s;
  absl::StrAppend(&s, absl::StrFormat("%-24s %-9s %10s %8s %10s %10s %9s %s\n", "LIST", "ACTION",
                                      "NAMES", "SKIPPED", "BLOCKED", "ALLOWED", "LOAD_MS", "BUILT"));
  for (const auto& l : r.lists()) {
    absl::StrAppend(&s, absl::StrFormat("%-24s %-9s %10u %8u %10u %10u %9.1f %s\n", l.name(),
                                        l.action(), l.names(), l.skipped_lines(), l.blocked(),
                                        l.allowed(), l.load_ms(),
                                        l.incremental() ? "delta" : "full"));
  }
  return s;
}

int cmdDns(const DnsCmdEnv& env, const std::vector<std::string>& a) {
  if (a.empty()) return usage("dns: which one? list, show, create, delete, add or remove");
  for (const auto& s : a) {
    if (s == "--help" || s == "-h") return std::fputs(kDnsHelp, stdout), kOk;
  }
  const std::string sub = a[0];
  if (sub == "list") {
    if (a.size() != 1) return usage("dns list: unexpected argument '" + a[1] + "'");
    grpc::ClientContext ctx;
    env.unary(&ctx);
    dpu::v1::ListDnsListsResponse resp;
    grpc::Status st = env.stub->ListDnsLists(&ctx, dpu::v1::ListDnsListsRequest(), &resp);
    if (!st.ok()) return env.rpc_fail("dns list", st);
    std::fputs(env.json ? toJson(resp, true).c_str() : formatDnsLists(resp).c_str(), stdout);
    return kOk;
  }
  if (sub == "show") return cmdDnsShow(env, a);
  if (sub == "create" || sub == "delete") return cmdDnsCreateDelete(env, a);
  if (sub != "add" && sub != "remove") return usage("dns: unknown subcommand '" + sub + "'");
  dpu::v1::DnsNamesRequest req;
  std::vector<std::string> pos;
  for (size_t i = 1; i < a.size(); ++i) {
    std::string err;
    if (env.version_opt(a, i, &err)) {
      if (!err.empty()) return usage("dns " + sub + ": " + err);
      continue;
    }
    if (a[i] == "--file") {
      if (i + 1 >= a.size()) return usage("dns " + sub + ": --file needs a value");
      if (!readEntries(a[++i], req.mutable_entries())) return kFailed;
      continue;
    }
    if (a[i].rfind("--", 0) == 0) return usage("dns " + sub + ": unknown option '" + a[i] + "'");
    pos.push_back(a[i]);
  }
  if (pos.empty()) return usage("dns " + sub + ": give the LIST name");
  req.set_list(pos[0]);
  for (size_t i = 1; i < pos.size(); ++i) req.add_entries(pos[i]);
  if (req.entries_size() == 0) return usage("dns " + sub + ": give at least one ENTRY (or --file)");
  uint64_t expected = 0;
  bool force = false;
  if (int rc = env.resolve_expected(&expected, &force); rc != kOk) return rc;
  req.set_expected_version(expected);
  req.set_force(force);
  grpc::ClientContext ctx;
  env.unary(&ctx);
  dpu::v1::ApplyConfigResponse resp;
  grpc::Status st = sub == "add" ? env.stub->AddDnsNames(&ctx, req, &resp)
                                 : env.stub->RemoveDnsNames(&ctx, req, &resp);
  if (!st.ok()) return env.rpc_fail("dns " + sub, st);
  return env.print_apply(resp);
}

}  // namespace dpu::cli
