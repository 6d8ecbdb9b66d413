#include "control/cli/dns_cmd.h"

#include <cstdio>
#include <fstream>

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

examples:
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
  if (a.empty()) return usage("dns: which one? list, add or remove");
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
      std::ifstream in(a[++i]);
      if (!in) {
        std::fprintf(stderr, "dpuctl: %s: cannot open\n", a[i].c_str());
        return kFailed;
      }
      std::string line;
      while (std::getline(in, line)) {
        size_t b = line.find_first_not_of(" \t\r");
        if (b == std::string::npos || line[b] == '#') continue;
        size_t e = line.find_last_not_of(" \t\r");
        req.add_entries(line.substr(b, e - b + 1));
      }
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
