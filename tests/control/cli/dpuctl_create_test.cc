// dpuctl creates what it edits (issue 19.3), reports every error of a config file in one
// answer (19.4) and explains a DNS query by name (19.6): the real dpuctl (and dpu-appliance
// validate) against the real service in this process over a fake dataplane whose explain is
// the dataplane's own explain logic on the published snapshot.
#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "tests/control/cli/dpuctl_fixture.h"

namespace dpu::ctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using DpuctlCreate = DpuctlFixture;

// The issue's first steps: `dns add blocked evil.example` needs a list named blocked.
TEST_F(DpuctlCreate, DnsListCreateAddShowExplainDelete) {
  CliRun r = dpuctl({"dns", "add", "blocked", "evil.example"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("NOT_FOUND: no DNS list named 'blocked'"));

  // A list is created with its first entries (an empty list is refused: it would block
  // nothing), then edited.
  r = dpuctl({"dns", "create", "blocked", "--format", "plain"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.err, HasSubstr("at least one ENTRY"));
  r = dpuctl({"dns", "create", "blocked", "evil.example", "--format", "plain", "--match-subdomains"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("committed version 2"));
  r = dpuctl({"dns", "add", "blocked", "more.example"});
  ASSERT_EQ(r.rc, 0) << r.err;
  std::string entries = write("more.txt", "# corp\nintranet.example\n");
  r = dpuctl({"dns", "create", "corp", "--action", "allow", "--file", entries, "--index", "0"});
  ASSERT_EQ(r.rc, 0) << r.err;
  v1::ApplianceConfig cur = manager_->current();
  ASSERT_EQ(cur.dns().lists_size(), 2);
  EXPECT_EQ(cur.dns().lists(0).name(), "corp");
  EXPECT_EQ(cur.dns().lists(0).action(), v1::DNS_ALLOW);
  ASSERT_EQ(cur.dns().lists(0).names_size(), 1);
  EXPECT_EQ(cur.dns().lists(1).name(), "blocked");
  EXPECT_EQ(cur.dns().lists(1).format(), v1::DNS_FORMAT_PLAIN);
  ASSERT_EQ(cur.dns().lists(1).names_size(), 2);

  r = dpuctl({"dns", "show", "blocked"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("DNS list blocked"));
  EXPECT_THAT(r.out, HasSubstr("format          plain"));
  EXPECT_THAT(r.out, HasSubstr("evil.example"));
  EXPECT_THAT(r.out, HasSubstr("running         2 distinct names"));
  r = dpuctl({"--json", "dns", "show", "corp"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"action\": \"DNS_ALLOW\""));
  EXPECT_EQ(dpuctl({"dns", "show", "nope"}).rc, 1);

  // explain by name: the server builds the query; the list blocks it (and its subdomains).
  r = dpuctl({"explain", "--dns-query", "www.evil.example"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("verdict    drop at stage dns, reason dns_answered"));
  EXPECT_THAT(r.out, HasSubstr("192.0.2.1:53000 -> 192.0.2.53:53"));
  EXPECT_THAT(r.out, HasSubstr("query for 'www.evil.example'"));
  EXPECT_THAT(r.out, HasSubstr("list 'blocked'"));
  r = dpuctl({"explain", "--dns-query", "evil.example.", "--qtype", "AAAA", "--proto", "tcp",
              "--src", "2001:db8::7"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("drop at stage dns"));
  EXPECT_THAT(r.out, HasSubstr("TCP message"));
  r = dpuctl({"explain", "--dns-query", "intranet.example"});  // the allow list
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("verdict    forward"));
  r = dpuctl({"explain", "--dns-query", "good.example"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("verdict    forward"));
  r = dpuctl({"explain", "--dns-query", "bad..example"});
  EXPECT_EQ(r.rc, 4);
  EXPECT_THAT(r.err, HasSubstr("dns_query.name"));
  r = dpuctl({"explain", "--dns-query", "x.example", "--qtype", "BOGUS"});
  EXPECT_EQ(r.rc, 4);
  EXPECT_THAT(r.err, HasSubstr("AAAA"));  // the valid types are listed
  EXPECT_EQ(dpuctl({"explain", "--dns-query", "x.example", "--payload", "x"}).rc, 2);
  EXPECT_EQ(dpuctl({"explain", "--qtype", "A"}).rc, 2);

  // Errors: exists already (1), invalid list (4, every error), bad option value (2).
  r = dpuctl({"dns", "create", "blocked", "x.example"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("ALREADY_EXISTS"));
  r = dpuctl({"dns", "create", "bad", "--format", "adblock", "plain.example", "||x..example^",
              "--ttl", "9999999"});
  EXPECT_EQ(r.rc, 4);
  EXPECT_THAT(r.err, HasSubstr("dns.lists[2].ttl"));
  EXPECT_THAT(r.err, HasSubstr("Adblock rule expected"));
  EXPECT_EQ(dpuctl({"dns", "create", "x", "y.example", "--action", "block"}).rc, 2);
  EXPECT_EQ(manager_->current().dns().lists_size(), 2);

  r = dpuctl({"dns", "delete", "corp"});
  ASSERT_EQ(r.rc, 0) << r.err;
  ASSERT_EQ(manager_->current().dns().lists_size(), 1);
  r = dpuctl({"explain", "--dns-query", "intranet.example"});
  EXPECT_THAT(r.out, HasSubstr("verdict    forward"));
  r = dpuctl({"dns", "delete", "corp"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("NOT_FOUND"));
  EXPECT_EQ(dpuctl({"dns", "delete", "blocked", "--expected-version", "1"}).rc, 3);
}

TEST_F(DpuctlCreate, LbServiceCreateShowDelete) {
  CliRun r = dpuctl({"lb", "add", "web", "be1", "--ipv4", "10.1.0.1", "--mac", "02:00:00:00:01:01"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("no lb service with id 'web'"));
  r = dpuctl({"lb", "create", "web", "--dst", "192.0.2.10", "--proto", "tcp", "--ports", "80",
              "--key", "ip.src,ip.dst", "--orphans", "reset"});
  ASSERT_EQ(r.rc, 0) << r.err;
  r = dpuctl({"lb", "add", "web", "be1", "--ipv4", "10.1.0.1", "--mac", "02:00:00:00:01:01"});
  ASSERT_EQ(r.rc, 0) << r.err;
  std::string file = write("api.json", R"({"dst": ["192.0.2.80"], "protocol": "udp",
      "mode": "LB_MODE_NAT", "backends": [{"id": "a1", "ipv4": "10.2.0.1"}]})");
  r = dpuctl({"lb", "create", "api", "--file", file, "--proto", "tcp", "--before", "web"});
  ASSERT_EQ(r.rc, 0) << r.err;
  v1::ApplianceConfig cur = manager_->current();
  ASSERT_EQ(cur.lb().services_size(), 2);
  EXPECT_EQ(cur.lb().services(0).id(), "api");
  EXPECT_EQ(cur.lb().services(0).protocol(), "tcp");  // the option overrides the file
  EXPECT_EQ(cur.lb().services(0).mode(), v1::LB_MODE_NAT);
  EXPECT_EQ(cur.lb().services(0).backends_size(), 1);
  EXPECT_EQ(cur.lb().services(1).key_size(), 2);
  EXPECT_EQ(cur.lb().services(1).orphans(), v1::LB_ORPHANS_RESET);

  r = dpuctl({"lb", "show", "web"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("service web"));
  EXPECT_THAT(r.out, HasSubstr("be1"));
  EXPECT_THAT(r.out, HasSubstr("key ip.src,ip.dst"));
  EXPECT_THAT(r.out, HasSubstr("orphans reset"));
  EXPECT_THAT(r.out, Not(HasSubstr("service api")));
  EXPECT_EQ(dpuctl({"lb", "show", "nope"}).rc, 1);

  r = dpuctl({"lb", "create", "web", "--dst", "192.0.2.11"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("ALREADY_EXISTS"));
  r = dpuctl({"lb", "create", "bad", "--dst", "nonsense", "--table-size", "100"});
  EXPECT_EQ(r.rc, 4);
  EXPECT_THAT(r.err, HasSubstr("lb.services[2]"));
  EXPECT_EQ(dpuctl({"lb", "create", "x"}).rc, 2);  // no --dst
  EXPECT_EQ(dpuctl({"lb", "create", "x", "--dst", "192.0.2.1", "--mode", "dsr"}).rc, 2);
  EXPECT_EQ(dpuctl({"lb", "create", "x", "--dst", "192.0.2.1", "--index", "0", "--after", "web"}).rc, 2);

  r = dpuctl({"lb", "delete", "api"});
  ASSERT_EQ(r.rc, 0) << r.err;
  ASSERT_EQ(manager_->current().lb().services_size(), 1);
  EXPECT_EQ(dpuctl({"lb", "delete", "api"}).rc, 1);
}

TEST_F(DpuctlCreate, DpiRuleSetCreateActionShowDelete) {
  std::string yar = write("exfil.yar",
                          "rule exfil_dns { strings: $a = \"EXFIL\" condition: $a }\n"
                          "rule beacon { strings: $b = \"BEACON\" condition: $b }\n");
  CliRun r = dpuctl({"dpi", "create", "incident-42", yar});
  ASSERT_EQ(r.rc, 0) << r.err;
  r = dpuctl({"dpi", "action", "incident-42:exfil_dns", "drop"});
  ASSERT_EQ(r.rc, 0) << r.err;
  r = dpuctl({"dpi", "show", "incident-42"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("rule set incident-42"));
  EXPECT_THAT(r.out, testing::ContainsRegex("incident-42:exfil_dns +1 drop"));
  EXPECT_THAT(r.out, testing::ContainsRegex("incident-42:beacon +2 alert"));
  r = dpuctl({"dpi", "action", "incident-42:exfil_dns", "default"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(manager_->current().dpi().actions_size(), 0);
  r = dpuctl({"dpi", "action", "nope", "drop"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("NOT_FOUND"));
  EXPECT_EQ(dpuctl({"dpi", "action", "beacon", "block"}).rc, 2);
  r = dpuctl({"dpi", "create", "incident-42", yar});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("ALREADY_EXISTS"));
  std::string bad = write("bad.yar", "rule broken { condition: $x }\n");
  r = dpuctl({"dpi", "create", "other", bad});
  EXPECT_EQ(r.rc, 4);
  EXPECT_THAT(r.err, HasSubstr("rule 'broken'"));
  EXPECT_EQ(dpuctl({"dpi", "show", "other"}).rc, 1);
  r = dpuctl({"dpi", "delete", "incident-42"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(manager_->current().dpi().rule_sets_size(), 0);
  EXPECT_EQ(dpuctl({"dpi", "delete", "incident-42"}).rc, 1);
}

// Issue 19.4: a file with five problems (an enum, an unknown field, a type error, a bad port,
// a bad DNS entry) gives all five in one answer, enums with their valid values: from
// `dpuctl config validate`, `dpuctl config apply` (nothing applied) and `dpu-appliance
// validate` (exit 4 like dpuctl, one error per line).
TEST_F(DpuctlCreate, FiveProblemsInOneAnswer) {
  std::string cfg = write("five.json", R"({
  "dataplane": {"flowTable": {"capacity": 4096}, "timeouts": {"udpS": "thirty"}},
  "firewall": {"rules": [
    {"id": "ssh", "action": "DENNY", "protocols": ["tcp"], "dstPorts": ["22"]},
    {"id": "web", "action": "ALLOW", "protocols": ["tcp"], "dstPorts": ["99999"]}]},
  "dns": {"lists": [{"name": "ads", "format": "DNS_FORMAT_PLAIN", "names": ["bad..example"]}]}
})");
  auto check = [](const std::string& out, const char* what) {
    SCOPED_TRACE(what);
    EXPECT_THAT(out, HasSubstr("dataplane.flow_table.capacity: unknown field \"capacity\" in "
                               "FlowTableConfig (did you mean capacity_per_worker?)"));
    EXPECT_THAT(out, HasSubstr("dataplane.timeouts.udp_s: expected an integer (uint32), got "
                               "string \"thirty\""));
    EXPECT_THAT(out, HasSubstr("rule 'ssh': firewall.rules[0].action: \"DENNY\" is not one of "
                               "ACTION_DEFAULT, ALLOW, DENY, REJECT (did you mean DENY?)"));
    EXPECT_THAT(out, HasSubstr("firewall.rules[1].dst_ports"));
    EXPECT_THAT(out, HasSubstr("99999"));
    EXPECT_THAT(out, HasSubstr("list 'ads'"));
    EXPECT_THAT(out, HasSubstr("empty label"));
    // Nothing repeats what a parse error said (the action left out is not "required").
    EXPECT_THAT(out, Not(HasSubstr("required: allow, deny or reject")));
    EXPECT_THAT(out, HasSubstr("5 error(s)"));
  };
  CliRun r = dpuctl({"config", "validate", cfg});
  EXPECT_EQ(r.rc, 4);
  check(r.err, "dpuctl config validate");
  const uint64_t before = manager_->version();
  r = dpuctl({"config", "apply", cfg});
  EXPECT_EQ(r.rc, 4);
  check(r.err, "dpuctl config apply");
  EXPECT_EQ(manager_->version(), before) << "nothing applied";

  std::string cmd = shellQuote(DPU_APPLIANCE_BIN) + " validate --config " + shellQuote(cfg) +
                    " >" + dir_ + "/out 2>" + dir_ + "/err";
  int st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 4);
  std::string err = slurp(dir_ + "/err");
  check(err, "dpu-appliance validate");
  // One error per line.
  int lines = 0;
  for (size_t p = 0; (p = err.find("\n  error: ", p)) != std::string::npos; ++p) ++lines;
  EXPECT_EQ(lines, 5) << err;

  // A syntax error: one error with its line.
  std::string broken = write("broken.json", "{\n  \"dataplane\": {\n    \"nonIp\" \"DROP\"\n}\n");
  r = dpuctl({"config", "validate", broken});
  EXPECT_EQ(r.rc, 4);
  EXPECT_THAT(r.err, HasSubstr(broken + ":3: not JSON"));
}

}  // namespace
}  // namespace dpu::ctl
