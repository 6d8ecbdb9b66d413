// dpuctl dns end to end (DNS filtering): the real dpuctl binary against the real gRPC service
// (in this process, on a unix socket in a temporary state directory) over a fake dataplane
// that reports the published snapshot's DNS lists. Checks add / remove through the config
// document (persisted, only the named list changes, applied as a delta), list output, and
// errors with exit codes.
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
#include <vector>
#include <sstream>

#include "control/api/appliance_service.h"
#include "control/api/event_hub.h"
#include "control/api/server.h"
#include "control/config/config_manager.h"
#include "control/config/config_store.h"
#include "tests/control/cli/dpuctl_fixture.h"

namespace dpu::ctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;


using DpuctlDns = DpuctlFixture;

TEST_F(DpuctlDns, AddRemoveList) {
  std::string list = write("ads.txt", "# ads\nads.example\ntracker.example\n");
  std::string cfg = write("config.json", R"({"dns": {"lists": [
      {"name": "ads", "action": "DNS_NXDOMAIN", "format": "DNS_FORMAT_PLAIN",
       "match_subdomains": true, "files": [")" + list + R"("]},
      {"name": "ok", "action": "DNS_ALLOW", "names": ["good.ads.example"]}]}})");
  CliRun r = dpuctl({"config", "apply", cfg});
  ASSERT_EQ(r.rc, 0) << r.err;
  const rules::CompiledDnsList* ok_before = plane_.dnsList(1);
  ASSERT_NE(ok_before, nullptr);

  r = dpuctl({"dns", "add", "ads", "new.example", "other.example"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("committed version 3"));
  EXPECT_EQ(plane_.dnsList(1), ok_before);         // the other list is shared
  ASSERT_NE(plane_.dnsList(0), nullptr);
  EXPECT_TRUE(plane_.dnsList(0)->incremental);     // patched, not re-read
  EXPECT_EQ(plane_.dnsList(0)->set.size(), 4u);
  v1::ApplianceConfig cur = manager_->current();
  ASSERT_EQ(cur.dns().lists(0).names_size(), 2);
  EXPECT_EQ(cur.dns().lists(0).names(1), "other.example");

  std::string more = write("more.txt", "# two more\nthird.example\n\nfourth.example\n");
  r = dpuctl({"dns", "add", "ads", "--file", more});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(plane_.dnsList(0)->set.size(), 6u);

  r = dpuctl({"dns", "remove", "ads", "tracker.example"});  // a name from the file
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(plane_.dnsList(0)->set.size(), 5u);
  cur = manager_->current();
  ASSERT_EQ(cur.dns().lists(0).removed_size(), 1);

  r = dpuctl({"dns", "list"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("2 DNS list(s)"));
  EXPECT_THAT(r.out, HasSubstr("ads"));
  EXPECT_THAT(r.out, HasSubstr("delta"));
  r = dpuctl({"--json", "dns", "list"});
  ASSERT_EQ(r.rc, 0) << r.err;
  v1::ListDnsListsResponse l;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(r.out, &l).ok()) << r.out;
  ASSERT_EQ(l.lists_size(), 2);
  EXPECT_EQ(l.lists(0).name(), "ads");
  EXPECT_EQ(l.lists(0).names(), 5u);
  EXPECT_EQ(l.lists(0).action(), "nxdomain");
  EXPECT_EQ(l.lists(1).action(), "allow");
}

// --timeout 0 (and DPUCTL_TIMEOUT=0) mean no deadline: a change on a busy appliance is
// waited for (before, 0 was a usage error and the default 30 s deadline reported a change
// the server went on to commit as DEADLINE_EXCEEDED). A bad DPUCTL_TIMEOUT is a usage error.
TEST_F(DpuctlDns, TimeoutZeroMeansNoDeadline) {
  auto r = dpuctl({"--timeout", "0", "config", "set", "dataplane.timeouts.udp_s=31"});
  EXPECT_EQ(r.rc, 0) << r.err;
  ::setenv("DPUCTL_TIMEOUT", "0", 1);
  r = dpuctl({"dns", "list"});
  EXPECT_EQ(r.rc, 0) << r.err;
  ::setenv("DPUCTL_TIMEOUT", "soon", 1);
  r = dpuctl({"dns", "list"});
  ::unsetenv("DPUCTL_TIMEOUT");
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.err, HasSubstr("DPUCTL_TIMEOUT needs a number of seconds"));
  r = dpuctl({"--timeout", "-1", "dns", "list"});
  EXPECT_EQ(r.rc, 2);
}

TEST_F(DpuctlDns, Errors) {
  std::string cfg = write("config.json", R"({"dns": {"lists": [
      {"name": "ads", "format": "DNS_FORMAT_ADBLOCK", "names": ["||ads.example^"]}]}})");
  ASSERT_EQ(dpuctl({"config", "apply", cfg}).rc, 0);
  CliRun r = dpuctl({"dns", "add", "nope", "x.example"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("NOT_FOUND: no DNS list named 'nope'"));
  r = dpuctl({"dns", "add", "ads", "plain.example"});  // not Adblock syntax
  EXPECT_EQ(r.rc, 4);
  EXPECT_THAT(r.err, HasSubstr("entries[0]"));
  EXPECT_THAT(r.err, HasSubstr("Adblock rule expected"));
  // Every refused entry is reported with its error (the response's error list, printed one
  // per line; the refused apply's event counts them), and nothing is applied.
  std::vector<RefusedApply> refused;
  std::mutex mu;
  manager_->setOnRefused([&](const RefusedApply& a) {
    std::lock_guard<std::mutex> lock(mu);
    refused.push_back(a);
  });
  r = dpuctl({"dns", "add", "ads", "plain.example", "||fine.example^", "||bad..example^"});
  EXPECT_EQ(r.rc, 4);
  EXPECT_THAT(r.err, HasSubstr("INVALID_ARGUMENT: 2 errors"));
  EXPECT_THAT(r.err, HasSubstr("  error: list 'ads': entries["));
  EXPECT_THAT(r.err, HasSubstr("entries[0]"));
  EXPECT_THAT(r.err, HasSubstr("entries[2]"));
  EXPECT_THAT(r.err, Not(HasSubstr("entries[1]")));
  EXPECT_EQ(manager_->current().dns().lists(0).names_size(), 1);
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(refused.size(), 1u);
    const RefusedApply& a = refused.back();
    EXPECT_EQ(a.phase, "edit");
    ASSERT_EQ(a.errors.size(), 2u);
    EXPECT_EQ(a.errors[0].section, "dns");
    EXPECT_EQ(a.errors[0].rule, "ads");
    EXPECT_EQ(a.errors[0].index, 0);
    EXPECT_EQ(a.errors[1].index, 2);
    v1::Event ev = refusedConfigEvent(a, 0);
    EXPECT_EQ(ev.config().error_count(), 2u);
    EXPECT_EQ(ev.config().errors(1).field(), "entries[2]");
    EXPECT_THAT(ev.json(), HasSubstr(R"("error_count":2,"errors":[{"section":"dns","rule":"ads","index":0)"));
  }
  r = dpuctl({"dns", "remove", "ads", "no-rule-here"});  // one bad entry: one error
  EXPECT_EQ(r.rc, 4);
  EXPECT_THAT(r.err, HasSubstr("  error: list 'ads': entries["));
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(refused.size(), 2u);
    EXPECT_EQ(refusedConfigEvent(refused[1], 0).config().error_count(), 1u);
  }
  manager_->setOnRefused(nullptr);
  r = dpuctl({"dns", "add", "ads"});
  EXPECT_EQ(r.rc, 2);
  r = dpuctl({"dns", "frobnicate"});
  EXPECT_EQ(r.rc, 2);
  r = dpuctl({"dns", "add", "ads", "||b.example^", "--expected-version", "1"});
  EXPECT_EQ(r.rc, 3);  // the committed version is 2
  EXPECT_EQ(manager_->current().dns().lists(0).names_size(), 1);
  // A config with a bad list line is refused with the file and line.
  std::string bad = write("bad.txt", "ok.example\nbad..example\n");
  std::string cfg2 = write("config2.json", R"({"dns": {"lists": [
      {"name": "f", "format": "DNS_FORMAT_PLAIN", "files": [")" + bad + R"("]}]}})");
  r = dpuctl({"config", "apply", cfg2});
  EXPECT_EQ(r.rc, 4);
  EXPECT_THAT(r.err, HasSubstr(bad + ":2"));
  EXPECT_THAT(r.err, HasSubstr("empty label"));
}

}  // namespace
}  // namespace dpu::ctl
