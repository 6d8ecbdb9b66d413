// The fleet's key layout (control/fleet/fleet_store.h) against a real etcd: blobs larger than
// etcd's 1.5 MiB request limit go in 512 KiB chunks and come back verified; a damaged or missing
// chunk is an error naming the file; content addressing writes a blob once; the control view
// (target, group pins) follows puts and deletes and skips a key that does not parse.
#include "control/fleet/fleet_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "tests/util/etcd_process.h"

namespace dpu::fleet {
namespace {

using ::testing::HasSubstr;
using test::EtcdProcess;

#define REQUIRE_ETCD()                                                                        \
  if (!EtcdProcess::available()) {                                                            \
    std::fprintf(stderr, "SKIPPED: etcd is not installed (apt-get install etcd-server)\n"); \
    GTEST_SKIP() << "etcd is not installed (apt-get install etcd-server)";                     \
  }

class FleetStore : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!EtcdProcess::available()) return;
    etcd_.start();
    EtcdOptions o;
    o.endpoints = etcd_.endpoint();
    auto c = EtcdClient::create(o);
    ASSERT_TRUE(c.ok()) << c.status();
    etcd = std::move(*c);
    while (!etcd->status().ok()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EtcdProcess etcd_;
  std::unique_ptr<EtcdClient> etcd;
  FleetKeys keys{"t"};
};

TEST(FleetNames, AreChecked) {
  EXPECT_TRUE(checkName("--fleet", "edge-eu.1_a").ok());
  for (const char* bad : {"", "a/b", "..", ".", "a b", "é"}) {
    auto st = checkName("--node", bad);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(st.message()), HasSubstr("--node")) << bad;
  }
  EXPECT_FALSE(checkName("--group", std::string(65, 'a')).ok());
  FleetKeys k("f");
  EXPECT_EQ(k.version(7), "/dpu/fleet/f/versions/00000000000000000007");
  EXPECT_EQ(k.chunk("ab", 3), "/dpu/fleet/f/blobs/ab/000003");
  EXPECT_EQ(k.group("canary"), "/dpu/fleet/f/ctl/groups/canary");
  EXPECT_EQ(sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(FleetJson, IgnoresUnknownFieldsAndNamesWhatFailed) {
  v1::FleetTarget t;
  ASSERT_TRUE(fromJson(R"({"version": "4", "by": "x", "field_of_a_newer_writer": 1})", &t, "k").ok());
  EXPECT_EQ(t.version(), 4u);
  auto st = fromJson("{not json", &t, "/dpu/fleet/t/ctl/target");
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(st.message()), HasSubstr("/dpu/fleet/t/ctl/target"));
  v1::FleetTarget back;
  ASSERT_TRUE(fromJson(toJson(t), &back, "k").ok());
  EXPECT_EQ(back.version(), 4u);
}

TEST_F(FleetStore, LargeBlobsGoInChunksAndComeBackVerified) {
  REQUIRE_ETCD();
  // 3.3 MiB: more than twice etcd's request limit, and more than one read (4 chunks each).
  std::string data(3 * 1024 * 1024 + 300 * 1024, '\0');
  std::mt19937 rng(7);
  for (char& c : data) c = static_cast<char>(rng());
  v1::FleetFile f;
  f.set_path("/etc/dpu/big.rules");
  uint64_t written = 0;
  ASSERT_TRUE(putBlob(*etcd, keys, data, &f, &written).ok());
  EXPECT_EQ(f.chunks(), 7u);
  EXPECT_EQ(f.size(), data.size());
  EXPECT_EQ(written, data.size());
  EXPECT_EQ(f.path(), "/etc/dpu/big.rules");
  auto back = getBlob(*etcd, keys, f);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == data);

  // Content-addressed: the same bytes again write nothing.
  v1::FleetFile again;
  ASSERT_TRUE(putBlob(*etcd, keys, data, &again, &written).ok());
  EXPECT_EQ(written, 0u);
  EXPECT_EQ(again.sha256(), f.sha256());

  // An empty file is one empty chunk.
  v1::FleetFile empty;
  ASSERT_TRUE(putBlob(*etcd, keys, "", &empty).ok());
  EXPECT_EQ(empty.chunks(), 1u);
  auto e = getBlob(*etcd, keys, empty);
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->empty());

  // A damaged chunk: the sha256 check refuses it, naming the file.
  ASSERT_TRUE(etcd->put(keys.chunk(f.sha256(), 3), std::string(kChunkBytes, 'x')).ok());
  auto bad = getBlob(*etcd, keys, f);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("big.rules"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("do not match its sha256"));
  // A missing chunk: named.
  ASSERT_TRUE(etcd->del(keys.chunk(f.sha256(), 2)).ok());
  auto gap = getBlob(*etcd, keys, f);
  EXPECT_EQ(gap.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(gap.status().message()), HasSubstr("chunk 2 missing"));
  // The last chunk missing (a writer cut off): the blob is written again in full.
  ASSERT_TRUE(etcd->del(keys.chunk(f.sha256(), 6)).ok());
  ASSERT_TRUE(putBlob(*etcd, keys, data, &again, &written).ok());
  EXPECT_EQ(written, data.size());
  back = getBlob(*etcd, keys, f);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == data);
}

TEST_F(FleetStore, ControlViewFollowsTargetAndPins) {
  REQUIRE_ETCD();
  auto empty = readCtl(*etcd, keys);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->desiredFor("prod"), 0u);

  v1::FleetTarget t;
  t.set_version(3);
  auto rev = etcd->put(keys.target(), toJson(t));
  ASSERT_TRUE(rev.ok());
  v1::FleetTarget pin;
  pin.set_version(4);
  auto pin_rev = etcd->put(keys.group("canary"), toJson(pin));
  ASSERT_TRUE(pin_rev.ok());
  // Another fleet's keys and keys outside ctl/ do not count.
  FleetKeys other("t2");
  ASSERT_TRUE(etcd->put(other.target(), toJson(pin)).ok());
  ASSERT_TRUE(etcd->put(keys.head(), "{}").ok());
  // A key that does not parse is left out; the rest of the view stands.
  ASSERT_TRUE(etcd->put(keys.group("broken"), "{not json").ok());

  std::vector<std::string> ignored;
  auto v = readCtl(*etcd, keys, &ignored);
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(ignored.size(), 1u);
  EXPECT_THAT(ignored[0], HasSubstr("ctl/groups/broken"));
  int64_t at = 0;
  EXPECT_EQ(v->desiredFor("prod", &at), 3u);
  EXPECT_EQ(at, *rev);
  EXPECT_EQ(v->desiredFor("canary", &at), 4u);
  EXPECT_EQ(at, *pin_rev);
  EXPECT_EQ(v->desiredFor("broken"), 3u);

  // Updates as a watch delivers them: the pin lifted, the target moved.
  ASSERT_TRUE(v->update(keys, keys.group("canary"), nullptr, *pin_rev + 10).ok());
  EXPECT_EQ(v->desiredFor("canary"), 3u);
  t.set_version(5);
  const std::string tj = toJson(t);
  ASSERT_TRUE(v->update(keys, keys.target(), &tj, *pin_rev + 11).ok());
  EXPECT_EQ(v->desiredFor("canary", &at), 5u);
  EXPECT_EQ(at, *pin_rev + 11);
  const std::string junk = "[1,2";
  EXPECT_FALSE(v->update(keys, keys.target(), &junk, *pin_rev + 12).ok());
  EXPECT_EQ(v->desiredFor("prod"), 5u);  // unchanged by the bad value
  ASSERT_TRUE(v->update(keys, keys.target(), nullptr, *pin_rev + 13).ok());
  EXPECT_EQ(v->desiredFor("prod"), 0u);
}

TEST_F(FleetStore, VersionsHeadAndNodes) {
  REQUIRE_ETCD();
  auto h = readHead(*etcd, keys);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->version, 0u);
  EXPECT_EQ(h->mod_revision, 0);
  for (uint64_t i : {1, 2, 10}) {
    v1::FleetVersion v;
    v.set_version(i);
    v.set_comment("v" + std::to_string(i));
    ASSERT_TRUE(etcd->put(keys.version(i), toJson(v)).ok());
  }
  v1::FleetHead fh;
  fh.set_version(10);
  ASSERT_TRUE(etcd->put(keys.head(), toJson(fh)).ok());
  h = readHead(*etcd, keys);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->version, 10u);
  EXPECT_GT(h->mod_revision, 0);
  auto all = readVersions(*etcd, keys);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[2].version(), 10u);  // zero-padded keys: numeric order
  auto v2 = readVersion(*etcd, keys, 2);
  ASSERT_TRUE(v2.ok());
  EXPECT_EQ(v2->comment(), "v2");
  auto v9 = readVersion(*etcd, keys, 9);
  EXPECT_EQ(v9.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(v9.status().message()), HasSubstr("no version 9"));

  auto lease = etcd->leaseGrant(30);
  ASSERT_TRUE(lease.ok());
  v1::FleetNodeStatus s;
  s.set_node("n1");
  s.set_applied_version(2);
  ASSERT_TRUE(etcd->put(keys.node("n1"), toJson(s), lease->id).ok());
  auto nodes = readNodes(*etcd, keys);
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_EQ((*nodes)[0].status.applied_version(), 2u);
  EXPECT_EQ((*nodes)[0].lease, lease->id);
  ASSERT_TRUE(etcd->leaseRevoke(lease->id).ok());
  nodes = readNodes(*etcd, keys);
  ASSERT_TRUE(nodes.ok());
  EXPECT_TRUE(nodes->empty());
}

}  // namespace
}  // namespace dpu::fleet
