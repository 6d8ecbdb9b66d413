// The etcd v3 client (control/fleet/etcd_client.h) against a real etcd process
// (tests/util/etcd_process.h): KV, Txn, Watch (events, progress notify, compaction, cancel, a
// broken stream), leases (keepalive, expiry, revoke), endpoint failover, and TLS with client
// certificates (a test CA made with openssl). No timing thresholds: waits poll for what must
// happen, however long a busy machine takes.
#include "control/fleet/etcd_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

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

std::unique_ptr<EtcdClient> connect(const std::string& endpoints, EtcdOptions o = {}) {
  o.endpoints = endpoints;
  auto c = EtcdClient::create(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

// Polls until pred() holds (a busy machine may take long; the ctest timeout bounds it).
template <typename Pred>
void waitFor(Pred pred) {
  while (!pred()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

// Until etcd answers (it has just started).
void waitReady(EtcdClient& c) {
  waitFor([&] { return c.status().ok(); });
}

TEST(EtcdClient, OptionsAreChecked) {
  for (const char* bad : {"", "localhost", ":2379", "127.0.0.1:", "http://127.0.0.1:1,https://127.0.0.1:2"}) {
    EtcdOptions o;
    o.endpoints = bad;
    auto c = EtcdClient::create(o);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EtcdOptions o;
  o.endpoints = "127.0.0.1:2379";
  o.cert_file = "/nonexistent/cert.pem";
  EXPECT_THAT(std::string(EtcdClient::create(o).status().message()), HasSubstr("--etcd-key"));
  o.key_file = "/nonexistent/key.pem";
  EXPECT_THAT(std::string(EtcdClient::create(o).status().message()),
              HasSubstr("/nonexistent/cert.pem: cannot be read"));
  EXPECT_EQ(prefixEnd("/a/"), "/a0");
  EXPECT_EQ(prefixEnd("a\xff"), "b");
  EXPECT_EQ(prefixEnd(""), std::string(1, '\0'));
}

TEST(EtcdClient, KeyValueAndTxn) {
  REQUIRE_ETCD();
  EtcdProcess etcd;
  etcd.start();
  auto c = connect(etcd.endpoint());
  ASSERT_NE(c, nullptr);
  waitReady(*c);

  auto r1 = c->put("/t/a", "1");
  ASSERT_TRUE(r1.ok()) << r1.status();
  auto r2 = c->put("/t/b", std::string("two\0bytes", 9));
  ASSERT_TRUE(r2.ok());
  EXPECT_GT(*r2, *r1);
  ASSERT_TRUE(c->put("/u/c", "3").ok());

  auto one = c->range("/t/a");
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->kvs.size(), 1u);
  EXPECT_EQ(one->kvs[0].value, "1");
  EXPECT_EQ(one->kvs[0].mod_revision, *r1);
  EXPECT_EQ(one->kvs[0].version, 1);
  EXPECT_EQ(one->revision, *r2 + 1);

  auto pre = c->range("/t/", prefixEnd("/t/"));
  ASSERT_TRUE(pre.ok());
  ASSERT_EQ(pre->kvs.size(), 2u);
  EXPECT_EQ(pre->kvs[1].value, std::string("two\0bytes", 9));
  auto limited = c->range("/t/", prefixEnd("/t/"), 0, 1, /*keys_only=*/true);
  ASSERT_TRUE(limited.ok());
  ASSERT_EQ(limited->kvs.size(), 1u);
  EXPECT_TRUE(limited->more);
  EXPECT_EQ(limited->count, 2);
  EXPECT_TRUE(limited->kvs[0].value.empty());
  // An older revision of the store.
  auto old = c->range("/t/", prefixEnd("/t/"), *r1);
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->kvs.size(), 1u);

  // Compare-and-swap: create only if absent; update only at the revision read.
  auto created = c->txn({Compare::absent("/t/new")}, {TxnOp::put("/t/new", "x")}, {TxnOp::get("/t/new")});
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_TRUE(created->succeeded);
  auto again = c->txn({Compare::absent("/t/new")}, {TxnOp::put("/t/new", "y")}, {TxnOp::get("/t/new")});
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->succeeded);
  ASSERT_EQ(again->ranges.size(), 1u);
  ASSERT_EQ(again->ranges[0].size(), 1u);
  EXPECT_EQ(again->ranges[0][0].value, "x");
  const int64_t at = again->ranges[0][0].mod_revision;
  auto stale = c->txn({Compare::modRevision("/t/new", at - 1)}, {TxnOp::put("/t/new", "z")});
  ASSERT_TRUE(stale.ok());
  EXPECT_FALSE(stale->succeeded);
  auto fresh = c->txn({Compare::modRevision("/t/new", at)},
                      {TxnOp::put("/t/new", "z"), TxnOp::del("/u/", prefixEnd("/u/")), TxnOp::get("/t/new")});
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE(fresh->succeeded);
  ASSERT_EQ(fresh->ranges.size(), 3u);
  EXPECT_TRUE(fresh->ranges[0].empty());
  ASSERT_EQ(fresh->ranges[2].size(), 1u);
  EXPECT_EQ(fresh->ranges[2][0].value, "z");
  auto gone = c->range("/u/c");
  ASSERT_TRUE(gone.ok());
  EXPECT_TRUE(gone->kvs.empty());

  auto deleted = c->del("/t/", prefixEnd("/t/"));
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(*deleted, 3);

  // Compaction: an older revision is gone, and the message says so.
  auto now = c->range("/t/a");
  ASSERT_TRUE(now.ok());
  ASSERT_TRUE(c->compact(now->revision).ok());
  auto compacted = c->range("/t/", prefixEnd("/t/"), *r1);
  EXPECT_EQ(compacted.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(compacted.status().message()), HasSubstr("compacted"));
  EXPECT_THAT(std::string(compacted.status().message()), HasSubstr(etcd.endpoint()));
  EXPECT_THAT(std::string(compacted.status().message()), HasSubstr("Range /t/"));
}

TEST(EtcdClient, WatchEventsProgressCompactionAndCancel) {
  REQUIRE_ETCD();
  EtcdProcess etcd;
  etcd.start();
  auto c = connect(etcd.endpoint());
  ASSERT_NE(c, nullptr);
  waitReady(*c);
  auto base = c->put("/w/a", "0");
  ASSERT_TRUE(base.ok());

  // From an earlier revision: the history since then, in order, then what comes.
  EtcdClient::WatchSpec spec;
  spec.key = "/w/";
  spec.range_end = prefixEnd("/w/");
  spec.start_revision = *base;
  auto w = c->watch(spec);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE(c->put("/w/b", "1").ok());
  ASSERT_TRUE(c->del("/w/a").ok());
  ASSERT_TRUE(c->put("/other", "not watched").ok());
  std::vector<WatchEvent> seen;
  while (seen.size() < 3) {
    WatchBatch b = (*w)->next();
    ASSERT_FALSE(b.ended) << b.status;
    for (auto& e : b.events) seen.push_back(e);
  }
  EXPECT_EQ(seen[0].kv.key, "/w/a");
  EXPECT_EQ(seen[0].kv.mod_revision, *base);
  EXPECT_EQ(seen[1].kv.key, "/w/b");
  EXPECT_EQ(seen[1].type, WatchEvent::Type::kPut);
  EXPECT_EQ(seen[2].kv.key, "/w/a");
  EXPECT_EQ(seen[2].type, WatchEvent::Type::kDelete);

  // Progress notifications (etcd here sends them every second): no events, a revision.
  WatchBatch p;
  do {
    p = (*w)->next();
    ASSERT_FALSE(p.ended) << p.status;
  } while (!p.progress);
  EXPECT_TRUE(p.events.empty());
  EXPECT_GE(p.revision, seen[2].kv.mod_revision + 1);

  // cancel() from another thread ends a blocked next().
  spec.progress_notify = false;
  spec.start_revision = 0;
  auto quiet = c->watch(spec);
  ASSERT_TRUE(quiet.ok());
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    (*quiet)->cancel();
  });
  WatchBatch cb = (*quiet)->next();
  canceller.join();
  EXPECT_TRUE(cb.ended);
  EXPECT_EQ(cb.status.code(), absl::StatusCode::kCancelled);

  // A watch from a compacted revision ends at once and says where history starts now.
  auto head = c->put("/w/c", "2");
  ASSERT_TRUE(head.ok());
  ASSERT_TRUE(c->compact(*head).ok());
  spec.start_revision = *base;
  auto old = c->watch(spec);
  ASSERT_TRUE(old.ok()) << old.status();
  WatchBatch ob = (*old)->next();
  EXPECT_TRUE(ob.ended);
  EXPECT_EQ(ob.compact_revision, *head);
  EXPECT_TRUE(ob.status.ok()) << ob.status;
}

TEST(EtcdClient, WatchEndsWhenEtcdDiesAndCallsRecoverWhenItReturns) {
  REQUIRE_ETCD();
  EtcdProcess etcd;
  etcd.start();
  auto c = connect(etcd.endpoint());
  ASSERT_NE(c, nullptr);
  waitReady(*c);
  ASSERT_TRUE(c->put("/d/a", "1").ok());
  EtcdClient::WatchSpec spec;
  spec.key = "/d/";
  spec.range_end = prefixEnd("/d/");
  auto w = c->watch(spec);
  ASSERT_TRUE(w.ok());
  etcd.kill(SIGKILL);
  WatchBatch b;
  do {
    b = (*w)->next();
  } while (!b.ended);
  EXPECT_FALSE(b.status.ok());
  EXPECT_EQ(b.status.code(), absl::StatusCode::kUnavailable) << b.status;
  // While it is down: a clear error naming the endpoint and the operation.
  auto down = c->range("/d/a");
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(down.status().message()), HasSubstr(etcd.endpoint()));
  EXPECT_THAT(std::string(down.status().message()), HasSubstr("Range /d/a"));
  // Back (same data dir): the same client reconnects.
  etcd.start();
  waitFor([&] {
    auto r = c->range("/d/a");
    return r.ok() && r->kvs.size() == 1 && r->kvs[0].value == "1";
  });
}

TEST(EtcdClient, FailsOverToTheNextEndpoint) {
  REQUIRE_ETCD();
  EtcdProcess etcd;
  etcd.start();
  const int dead = test::freeLoopbackPort();  // nothing listens there
  EtcdOptions o;
  o.connect_timeout_s = 1;
  auto c = connect("127.0.0.1:" + std::to_string(dead) + ", http://" + etcd.endpoint(), o);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->currentEndpoint(), "127.0.0.1:" + std::to_string(dead));
  waitFor([&] { return c->put("/f/a", "1").ok(); });
  EXPECT_EQ(c->currentEndpoint(), etcd.endpoint());
  EtcdClient::WatchSpec spec;
  spec.key = "/f/a";
  EXPECT_TRUE(c->watch(spec).ok());
  // Only dead endpoints: UNAVAILABLE, naming the last one tried.
  auto none = connect("127.0.0.1:" + std::to_string(dead), o);
  auto st = none->range("/f/a").status();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(st.message()), HasSubstr(std::to_string(dead)));
}

TEST(EtcdClient, LeasesKeepAliveExpireAndRevoke) {
  REQUIRE_ETCD();
  EtcdProcess etcd;
  etcd.start();
  auto c = connect(etcd.endpoint());
  ASSERT_NE(c, nullptr);
  waitReady(*c);

  // Kept alive: outlives several TTLs.
  auto kept = c->leaseGrant(2);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->ttl_s, 2);
  ASSERT_TRUE(c->put("/l/kept", "1", kept->id).ok());
  auto keeper = c->keepAlive(*kept);
  EXPECT_EQ(keeper->id(), kept->id);
  // Not kept alive: etcd deletes its key once the TTL runs out.
  auto lapsing = c->leaseGrant(2);
  ASSERT_TRUE(lapsing.ok());
  ASSERT_TRUE(c->put("/l/lapsing", "1", lapsing->id).ok());
  auto r = c->range("/l/kept");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].lease, kept->id);
  waitFor([&] {
    auto g = c->range("/l/lapsing");
    return g.ok() && g->kvs.empty();
  });
  std::this_thread::sleep_for(std::chrono::seconds(5));  // > 2 TTLs of the kept lease
  EXPECT_TRUE(keeper->alive());
  r = c->range("/l/kept");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kvs.size(), 1u);

  // Revoked: the key goes at once, and the keeper learns the lease is gone.
  ASSERT_TRUE(c->leaseRevoke(kept->id).ok());
  r = c->range("/l/kept");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->kvs.empty());
  waitFor([&] { return !keeper->alive(); });
  keeper.reset();

  // A keeper whose etcd is gone turns not-alive once the TTL passes without a refresh, and its
  // destruction does not hang.
  auto l3 = c->leaseGrant(2);
  ASSERT_TRUE(l3.ok());
  auto k3 = c->keepAlive(*l3);
  etcd.kill(SIGKILL);
  waitFor([&] { return !k3->alive(); });
  k3.reset();
}

// A test CA, a server certificate for 127.0.0.1 and a client certificate, with openssl.
struct TestPki {
  std::string dir;
  bool ok = false;
  TestPki() {
    char tmpl[] = "/tmp/dpu-etcd-pki.XXXXXX";
    dir = ::mkdtemp(tmpl);
    const std::string script =
        "set -e; cd '" + dir + "'; "
        "ec='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes'; "
        "openssl req -x509 $ec -keyout ca.key -out ca.pem -days 2 -subj /CN=dpu-test-ca; "
        "openssl req $ec -keyout server.key -out server.csr -subj /CN=etcd; "
        "printf 'subjectAltName=IP:127.0.0.1\\nextendedKeyUsage=serverAuth,clientAuth\\n' > s.ext; "
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
        "  -extfile s.ext -out server.pem; "
        "openssl req $ec -keyout client.key -out client.csr -subj /CN=dpu-node; "
        "printf 'extendedKeyUsage=clientAuth\\n' > c.ext; "
        "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
        "  -extfile c.ext -out client.pem";
    {
      std::ofstream sh(dir + "/make.sh");
      sh << script << "\n";
    }
    ok = std::system(("bash '" + dir + "/make.sh' >'" + dir + "/make.log' 2>&1").c_str()) == 0;
  }
  ~TestPki() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::string f(const char* name) const { return dir + "/" + name; }
};

TEST(EtcdClient, MutualTls) {
  REQUIRE_ETCD();
  TestPki pki;
  ASSERT_TRUE(pki.ok) << "openssl could not make the test certificates in " << pki.dir;
  EtcdProcess etcd({pki.f("server.pem"), pki.f("server.key"), pki.f("ca.pem")});
  etcd.start();

  EtcdOptions o;
  o.ca_file = pki.f("ca.pem");
  o.cert_file = pki.f("client.pem");
  o.key_file = pki.f("client.key");
  auto c = connect(etcd.endpoint(), o);
  ASSERT_NE(c, nullptr);
  waitReady(*c);
  ASSERT_TRUE(c->put("/tls/a", "1").ok());
  auto r = c->range("/tls/a");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kvs.size(), 1u);
  EtcdClient::WatchSpec spec;
  spec.key = "/tls/a";
  EXPECT_TRUE(c->watch(spec).ok());

  // Without a client certificate, or without TLS: refused.
  EtcdOptions no_cert;
  no_cert.ca_file = pki.f("ca.pem");
  no_cert.connect_timeout_s = 1;
  no_cert.call_timeout_s = 2;
  auto anon = connect("https://" + etcd.endpoint(), no_cert);
  auto refused = anon->range("/tls/a");
  EXPECT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("--etcd-cert"));
  EtcdOptions plain;
  plain.connect_timeout_s = 1;
  plain.call_timeout_s = 2;
  auto clear = connect(etcd.endpoint(), plain);
  EXPECT_FALSE(clear->range("/tls/a").ok());
  // A CA that did not sign the server's certificate: refused.
  TestPki other;
  ASSERT_TRUE(other.ok);
  EtcdOptions wrong = o;
  wrong.ca_file = other.f("ca.pem");
  wrong.connect_timeout_s = 1;
  wrong.call_timeout_s = 2;
  auto mitm = connect(etcd.endpoint(), wrong);
  auto unverified = mitm->range("/tls/a");
  EXPECT_FALSE(unverified.ok());
  // gRPC's own reason comes with it, and what to check.
  EXPECT_THAT(std::string(unverified.status().message()), HasSubstr("certificate verify failed"));
  EXPECT_THAT(std::string(unverified.status().message()), HasSubstr("TLS refused"));

  // A key that is not one, or another certificate's: refused at once, naming the files.
  EtcdOptions bad_key = o;
  bad_key.endpoints = etcd.endpoint();
  bad_key.key_file = pki.f("ca.pem");
  auto k1 = EtcdClient::create(bad_key);
  ASSERT_FALSE(k1.ok());
  EXPECT_THAT(std::string(k1.status().message()), HasSubstr("not a PEM private key"));
  EXPECT_THAT(std::string(k1.status().message()), HasSubstr(pki.f("ca.pem")));
  EtcdOptions foreign = o;
  foreign.endpoints = etcd.endpoint();
  foreign.key_file = other.f("client.key");
  auto k2 = EtcdClient::create(foreign);
  ASSERT_FALSE(k2.ok());
  EXPECT_THAT(std::string(k2.status().message()), HasSubstr("does not belong to the certificate"));
  EtcdOptions not_cert = o;
  not_cert.endpoints = etcd.endpoint();
  not_cert.cert_file = pki.f("client.key");
  auto k3 = EtcdClient::create(not_cert);
  ASSERT_FALSE(k3.ok());
  EXPECT_THAT(std::string(k3.status().message()), HasSubstr("not a PEM certificate"));
}

}  // namespace
}  // namespace dpu::fleet
