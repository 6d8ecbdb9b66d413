// dpuctl fw / geo end to end: the real dpuctl binary against the real gRPC service (in this
// process, on a unix socket in a temporary state directory) over a fake dataplane. Checks
// exit codes, tables, --json output, errors naming fields and rule-file lines.
#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "control/api/appliance_service.h"
#include "control/api/server.h"
#include "control/config/config_manager.h"
#include "control/config/config_store.h"
#include "tests/control/cli/dpuctl_fixture.h"

namespace dpu::ctl {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

const std::string kCountryDb =
    std::filesystem::path(std::string(DPU_MMDB_DIR) +
                          "/maxmind+MaxMind-DB/test-data/GeoLite2-Country-Test.mmdb")
        .lexically_normal()
        .string();
const std::string kAsnDb =
    std::filesystem::path(std::string(DPU_MMDB_DIR) +
                          "/maxmind+MaxMind-DB/test-data/GeoLite2-ASN-Test.mmdb")
        .lexically_normal()
        .string();

class DpuctlFw : public DpuctlFixture {
 protected:
  std::vector<std::string> inlineIds() {
    std::vector<std::string> ids;
    const v1::ApplianceConfig cur = manager_->current();
    for (const auto& r : cur.firewall().rules()) ids.push_back(r.id());
    return ids;
  }

};

TEST_F(DpuctlFw, AddListRemove) {
  CliRun r = dpuctl({"fw", "add", "deny tcp any any -> 192.0.2.0/24 22 prio 10 id ssh-block"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("committed version 2"));
  // The rule may also come as separate words; positions by id.
  r = dpuctl({"fw", "add", "allow", "udp", "10.0.0.0/8", "any", "->", "any", "53", "id", "dns",
              "--before", "ssh-block"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(inlineIds(), ::testing::ElementsAre("dns", "ssh-block"));

  r = dpuctl({"fw", "list"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("firewall (config version 3): 2 rule(s)"));
  EXPECT_THAT(r.out, HasSubstr("RANK  ID"));
  EXPECT_THAT(r.out, HasSubstr("tcp any any -> 192.0.2.0/24 22"));
  EXPECT_THAT(r.out, HasSubstr("udp 10.0.0.0/8 any -> any 53"));

  r = dpuctl({"--json", "fw", "list"});
  ASSERT_EQ(r.rc, 0) << r.err;
  v1::ListFirewallRulesResponse l;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(r.out, &l).ok()) << r.out;
  ASSERT_EQ(l.rules_size(), 2);
  EXPECT_EQ(l.rules(0).rule().id(), "dns");       // priority 0 first
  EXPECT_EQ(l.rules(1).rule().id(), "ssh-block");
  EXPECT_EQ(l.rules(1).packets(), 2000u);          // the fake plane's counters, by id
  EXPECT_EQ(l.rules(0).source(), "config");

  r = dpuctl({"fw", "remove", "dns"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(inlineIds(), ::testing::ElementsAre("ssh-block"));
  r = dpuctl({"fw", "remove", "dns"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("NOT_FOUND: no rule with id 'dns'"));
}

TEST_F(DpuctlFw, ErrorsAndExitCodes) {
  // Checked before anything is sent: exit 4 with the field.
  CliRun r = dpuctl({"fw", "add", "deny tcp any any -> 10.0.0.1/8 22 id a"});
  EXPECT_EQ(r.rc, 4);
  EXPECT_THAT(r.err, HasSubstr("dst: 10.0.0.1/8 has host bits set (did you mean 10.0.0.0/8?)"));
  // Checked by the server (it knows the sets): exit 4, every error listed.
  r = dpuctl({"fw", "add", "deny tcp @nope any -> any 22 id a"});
  EXPECT_EQ(r.rc, 4);
  EXPECT_THAT(r.err, HasSubstr("error: rule 'a': firewall.rules[0].src: unknown IP set '@nope'"));
  // Duplicate id, bad position, version conflict, usage.
  ASSERT_EQ(dpuctl({"fw", "add", "deny tcp any any -> any 22 id a"}).rc, 0);
  r = dpuctl({"fw", "add", "deny tcp any any -> any 23 id a"});
  EXPECT_EQ(r.rc, 4);
  EXPECT_THAT(r.err, HasSubstr("ALREADY_EXISTS"));
  r = dpuctl({"fw", "add", "deny tcp any any -> any 23 id b", "--after", "zz"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("after_id: no rule with id 'zz'"));
  r = dpuctl({"fw", "add", "deny tcp any any -> any 23 id b", "--expected-version", "1"});
  EXPECT_EQ(r.rc, 3);
  EXPECT_THAT(r.err, HasSubstr("ABORTED"));
  EXPECT_EQ(dpuctl({"fw", "add"}).rc, 2);
  EXPECT_EQ(dpuctl({"fw", "frob"}).rc, 2);
  EXPECT_EQ(dpuctl({"fw", "remove", "a", "--force", "--expected-version", "2"}).rc, 2);
  r = dpuctl({"fw", "--help"});
  EXPECT_EQ(r.rc, 0);
  EXPECT_THAT(r.out, HasSubstr("dpuctl fw add"));
  EXPECT_EQ(manager_->version(), 2u);
}

TEST_F(DpuctlFw, LoadReplacesTheRuleSet) {
  ASSERT_EQ(dpuctl({"fw", "add", "deny tcp any any -> any 22 id old"}).rc, 0);
  std::string file = write("site.rules",
                           "# site policy\n"
                           "deny tcp any any -> any 23 prio 5 id telnet\n"
                           "\n"
                           "allow udp any any -> any 53\n");
  CliRun r = dpuctl({"fw", "load", file});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("2 rule(s) loaded"));
  EXPECT_THAT(inlineIds(), ::testing::ElementsAre("telnet", "site.rules:4"));
  // A JSON file.
  std::string json = write("doca.json", R"({"rules": [
    {"id": "doca-1", "src_ip": "10.0.0.0/8", "dst_port": 80, "protocol": "tcp"}]})");
  r = dpuctl({"fw", "load", json});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(inlineIds(), ::testing::ElementsAre("doca-1"));
  EXPECT_EQ(manager_->current().firewall().rules(0).action(), v1::DENY);
  // Syntax errors: named by file and line, nothing sent.
  std::string bad = write("bad.rules", "deny tcp any any -> any 23 id ok\nfrobnicate\n");
  r = dpuctl({"fw", "load", bad});
  EXPECT_EQ(r.rc, 4);
  EXPECT_THAT(r.err, HasSubstr(bad + ":2"));
  // Errors the server finds name the file's line too.
  std::string unknown_set = write("set.rules", "\n\ndeny tcp @corp any -> any 22 id s\n");
  r = dpuctl({"fw", "load", unknown_set});
  EXPECT_EQ(r.rc, 4);
  EXPECT_THAT(r.err, HasSubstr("firewall.rules[0].src: unknown IP set '@corp'"));
  EXPECT_THAT(r.err, HasSubstr("(" + unknown_set + ":3)"));
  r = dpuctl({"fw", "load", dir_ + "/missing.rules"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(inlineIds(), ::testing::ElementsAre("doca-1"));
}

TEST_F(DpuctlFw, GeoSetAndLookup) {
  if (!std::filesystem::exists(kCountryDb) || !std::filesystem::exists(kAsnDb)) {
    GTEST_SKIP() << "MaxMind test databases absent (" << DPU_MMDB_DIR << ")";
  }
  CliRun r = dpuctl({"geo", "lookup", "81.2.69.142"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("FAILED_PRECONDITION: no GeoIP database is configured"));
  r = dpuctl({"geo", "set", kAsnDb});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("no country data"));
  EXPECT_EQ(manager_->version(), 1u);
  r = dpuctl({"geo", "set", kCountryDb});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(manager_->current().geoip().database(), kCountryDb);
  ASSERT_EQ(dpuctl({"fw", "add", "reject tcp any any -> any any src-country GB id no-gb"}).rc, 0);
  r = dpuctl({"geo", "lookup", "81.2.69.142"});
  ASSERT_EQ(r.rc, 0) << r.err;
  // (In MaxMind's test data this network is registered to the US.)
  EXPECT_THAT(r.out, HasSubstr("81.2.69.142: country GB, registered country US, network "
                               "81.2.69.142/31\n"));
  EXPECT_THAT(r.out, HasSubstr("firewall country index 1 (named by the rules)"));
  r = dpuctl({"--json", "geo", "lookup", "2a02:d500::1"});
  ASSERT_EQ(r.rc, 0) << r.err;
  v1::LookupCountryResponse l;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(r.out, &l).ok()) << r.out;
  EXPECT_TRUE(l.found());
  EXPECT_EQ(l.country(), "");
  r = dpuctl({"fw", "list"});
  EXPECT_THAT(r.out, HasSubstr("GeoIP database: " + kCountryDb + " (countries GB)"));
  // The country rule needs the database: clearing it is refused.
  r = dpuctl({"geo", "clear"});
  EXPECT_EQ(r.rc, 4);
  EXPECT_THAT(r.err, HasSubstr("no GeoIP database"));
  EXPECT_EQ(dpuctl({"geo", "lookup"}).rc, 2);
}

}  // namespace
}  // namespace dpu::ctl
