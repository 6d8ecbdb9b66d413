// --- flows view --- ListFlows' request checks, filters, sort, paging and top-talker windows
// on flows built in code (no DPDK, no gRPC).
#include "control/api/flow_query.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dpu::ctl {
namespace {

dp::IpAddr ip(const char* s, uint8_t* ver = nullptr) {
  dp::IpAddr a{};
  if (inet_pton(AF_INET, s, a.b) == 1) {
    if (ver) *ver = 4;
  } else {
    EXPECT_EQ(inet_pton(AF_INET6, s, a.b), 1) << s;
    if (ver) *ver = 6;
  }
  return a;
}

dp::FlowInfo flow(uint16_t worker, uint32_t seq, const char* src, uint16_t sport, const char* dst,
                  uint16_t dport, uint8_t proto, uint64_t pkts, uint64_t bytes) {
  dp::FlowInfo f;
  f.worker = worker;
  f.flow_id = (uint64_t(worker + 1) << 32) | seq;
  f.src = ip(src, &f.ip_ver);
  f.dst = ip(dst);
  f.sport = sport;
  f.dport = dport;
  f.proto = proto;
  f.packets[0] = pkts;
  f.bytes[0] = bytes;
  f.first_seen_ns = 1000 + seq;
  f.last_seen_ns = 2000 + seq;
  return f;
}

// Four flows on two workers.
dp::FlowListing sample() {
  dp::FlowListing l;
  l.now_ns = {10'000'000'000ull, 10'000'000'000ull};
  auto a = flow(0, 1, "10.0.0.1", 40000, "192.0.2.10", 443, 6, 10, 1000);
  a.tcp_state = dp::TcpState::kEstablished;
  a.verdict = dp::Verdict::kForward;
  a.lb_service = "web";
  a.lb_backend = "web-2";
  auto b = flow(0, 2, "10.0.0.2", 40001, "192.0.2.22", 22, 6, 3, 180);
  b.tcp_state = dp::TcpState::kSynSent;
  b.verdict = dp::Verdict::kDrop;
  b.stage = dp::Stage::kFirewall;
  b.rule = "ssh-block";
  auto c = flow(1, 1, "172.16.5.5", 5000, "10.1.0.53", 53, 17, 50, 4000);
  c.verdict = dp::Verdict::kForward;
  c.vlan = 7;
  c.tunnel_id = 4242;  // e.g. a VXLAN VNI
  auto d = flow(1, 2, "2001:db8::1", 1234, "2001:db8:1::2", 80, 6, 7, 7000);
  d.tcp_state = dp::TcpState::kEstablished;
  l.flows = {a, b, c, d};
  return l;
}

std::vector<uint64_t> ids(const v1::ListFlowsResponse& r) {
  std::vector<uint64_t> out;
  for (const auto& f : r.flows()) out.push_back((f.flow_id() & 0xffffffffu) | (uint64_t(f.worker()) << 8));
  return out;
}

// (worker << 8) | seq, as ids() gives them.
constexpr uint64_t F(uint16_t w, uint32_t s) { return (uint64_t(w) << 8) | s; }

v1::ListFlowsResponse run(const v1::ListFlowsRequest& req, const dp::FlowListing& l = sample(),
                          const dp::FlowListing* before = nullptr) {
  auto q = parseFlowQuery(req);
  EXPECT_TRUE(q.ok()) << q.status();
  v1::ListFlowsResponse r;
  if (q.ok()) fillFlows(*q, l, before, 0, &r);
  return r;
}

TEST(FlowQueryTest, NoFilterListsAllInWorkerThenFlowOrder) {
  v1::ListFlowsResponse r = run(v1::ListFlowsRequest());
  EXPECT_EQ(ids(r), (std::vector<uint64_t>{F(0, 1), F(0, 2), F(1, 1), F(1, 2)}));
  EXPECT_EQ(r.matched(), 4u);
  EXPECT_EQ(r.scanned(), 4u);
  const v1::Flow& f = r.flows(0);
  EXPECT_EQ(f.src_ip(), "10.0.0.1");
  EXPECT_EQ(f.dest_ip(), "192.0.2.10");
  EXPECT_EQ(f.dest_port(), 443u);
  EXPECT_EQ(f.proto(), "TCP");
  EXPECT_EQ(f.state(), "established");
  EXPECT_EQ(f.backend(), "web-2");
  EXPECT_EQ(f.service(), "web");
  EXPECT_DOUBLE_EQ(f.age_seconds(), (10'000'000'000.0 - 1001) / 1e9);
  EXPECT_EQ(r.flows(2).state(), "");  // UDP: no TCP state
}

TEST(FlowQueryTest, AddressFiltersMatchCidrOnTheRightEndpoint) {
  v1::ListFlowsRequest req;
  req.mutable_filter()->set_address("10.0.0.0/8");  // either endpoint
  EXPECT_EQ(ids(run(req)), (std::vector<uint64_t>{F(0, 1), F(0, 2), F(1, 1)}));
  req.mutable_filter()->clear_address();
  req.mutable_filter()->set_src("10.0.0.0/8");  // initiator only
  EXPECT_EQ(ids(run(req)), (std::vector<uint64_t>{F(0, 1), F(0, 2)}));
  req.mutable_filter()->clear_src();
  req.mutable_filter()->set_dst("10.1.0.53");  // a bare address is a host
  EXPECT_EQ(ids(run(req)), (std::vector<uint64_t>{F(1, 1)}));
  req.mutable_filter()->set_dst("10.1.0.52");
  EXPECT_TRUE(ids(run(req)).empty());
  req.mutable_filter()->set_dst("2001:db8:1::/48");
  EXPECT_EQ(ids(run(req)), (std::vector<uint64_t>{F(1, 2)}));
  req.mutable_filter()->set_dst("0.0.0.0/0");  // v4 prefixes do not match v6 flows
  EXPECT_EQ(ids(run(req)).size(), 3u);
  req.mutable_filter()->set_dst("192.0.2.0/25");  // /25: not a byte boundary
  EXPECT_EQ(ids(run(req)), (std::vector<uint64_t>{F(0, 1), F(0, 2)}));
}

TEST(FlowQueryTest, PortProtoStateVerdictRuleBackendVlan) {
  auto only = [](auto set) {
    v1::ListFlowsRequest req;
    set(*req.mutable_filter());
    return ids(run(req));
  };
  EXPECT_EQ(only([](v1::FlowFilter& f) { f.set_port(53); }), (std::vector<uint64_t>{F(1, 1)}));
  EXPECT_EQ(only([](v1::FlowFilter& f) { f.set_port(40001); }), (std::vector<uint64_t>{F(0, 2)}));
  EXPECT_EQ(only([](v1::FlowFilter& f) { f.set_src_port(443); }), (std::vector<uint64_t>{}));
  EXPECT_EQ(only([](v1::FlowFilter& f) { f.set_dst_port(443); }), (std::vector<uint64_t>{F(0, 1)}));
  EXPECT_EQ(only([](v1::FlowFilter& f) { f.set_proto("udp"); }), (std::vector<uint64_t>{F(1, 1)}));
  EXPECT_EQ(only([](v1::FlowFilter& f) { f.set_proto("6"); }).size(), 3u);
  EXPECT_EQ(only([](v1::FlowFilter& f) { f.set_state("established"); }),
            (std::vector<uint64_t>{F(0, 1), F(1, 2)}));
  EXPECT_EQ(only([](v1::FlowFilter& f) { f.set_state("SYN_SENT"); }), (std::vector<uint64_t>{F(0, 2)}));
  EXPECT_EQ(only([](v1::FlowFilter& f) { f.set_verdict("drop"); }), (std::vector<uint64_t>{F(0, 2)}));
  EXPECT_EQ(only([](v1::FlowFilter& f) { f.set_verdict("none"); }), (std::vector<uint64_t>{F(1, 2)}));
  EXPECT_EQ(only([](v1::FlowFilter& f) { f.set_rule("ssh-block"); }), (std::vector<uint64_t>{F(0, 2)}));
  EXPECT_EQ(only([](v1::FlowFilter& f) { f.set_backend("web-2"); }), (std::vector<uint64_t>{F(0, 1)}));
  EXPECT_EQ(only([](v1::FlowFilter& f) { f.set_backend("web-1"); }), (std::vector<uint64_t>{}));
  EXPECT_EQ(only([](v1::FlowFilter& f) { f.set_service("web"); }), (std::vector<uint64_t>{F(0, 1)}));
  EXPECT_EQ(only([](v1::FlowFilter& f) { f.set_vlan(7); }), (std::vector<uint64_t>{F(1, 1)}));
  EXPECT_EQ(only([](v1::FlowFilter& f) { f.set_vlan(0); }).size(), 3u);
  EXPECT_EQ(only([](v1::FlowFilter& f) { f.set_tunnel_id(4242); }), (std::vector<uint64_t>{F(1, 1)}));
  EXPECT_EQ(only([](v1::FlowFilter& f) { f.set_tunnel_id(0); }).size(), 3u);
  EXPECT_EQ(only([](v1::FlowFilter& f) { f.set_tunnel_id(1); }), (std::vector<uint64_t>{}));
  // Several filters: all must hold.
  EXPECT_EQ(only([](v1::FlowFilter& f) {
              f.set_proto("tcp");
              f.set_address("10.0.0.0/8");
              f.set_state("established");
            }),
            (std::vector<uint64_t>{F(0, 1)}));
}

TEST(FlowQueryTest, SortAndPagingAreStable) {
  v1::ListFlowsRequest req;
  req.set_sort("packets");
  EXPECT_EQ(ids(run(req)), (std::vector<uint64_t>{F(1, 1), F(0, 1), F(1, 2), F(0, 2)}));
  req.set_ascending(true);
  EXPECT_EQ(ids(run(req)), (std::vector<uint64_t>{F(0, 2), F(1, 2), F(0, 1), F(1, 1)}));
  req.set_ascending(false);
  req.set_sort("bytes");
  EXPECT_EQ(ids(run(req)), (std::vector<uint64_t>{F(1, 2), F(1, 1), F(0, 1), F(0, 2)}));
  req.set_sort("age");  // oldest (smallest first_seen) first; ties by worker and flow
  EXPECT_EQ(ids(run(req)), (std::vector<uint64_t>{F(0, 1), F(1, 1), F(0, 2), F(1, 2)}));
  req.set_sort("last-seen");  // most recent first
  EXPECT_EQ(ids(run(req)), (std::vector<uint64_t>{F(0, 2), F(1, 2), F(0, 1), F(1, 1)}));
  // Pages of two cover the sorted list without overlap.
  req.set_sort("packets");
  req.set_limit(2);
  v1::ListFlowsResponse p1 = run(req);
  req.set_offset(2);
  v1::ListFlowsResponse p2 = run(req);
  req.set_offset(4);
  v1::ListFlowsResponse p3 = run(req);
  EXPECT_EQ(ids(p1), (std::vector<uint64_t>{F(1, 1), F(0, 1)}));
  EXPECT_EQ(ids(p2), (std::vector<uint64_t>{F(1, 2), F(0, 2)}));
  EXPECT_TRUE(ids(p3).empty());
  EXPECT_EQ(p1.matched(), 4u);
  EXPECT_EQ(p3.matched(), 4u);
}

TEST(FlowQueryTest, WindowCountsDeltasAndNewFlowsWhole) {
  dp::FlowListing before = sample();
  dp::FlowListing after = sample();
  before.now_ns = {1'000'000'000ull, 1'000'000'000ull};
  after.now_ns = {3'000'000'000ull, 3'000'000'000ull};  // a 2 s window
  after.flows[0].packets[1] = 90;       // flow (0,1): +90 packets, +0 bytes
  after.flows[2].bytes[0] += 16000;     // flow (1,1): +16000 bytes
  // Flow (1,2) ended and a new flow took its number with a new first packet time: new.
  after.flows[3].first_seen_ns += 500;
  // Flow (0,2) is unchanged.
  v1::ListFlowsRequest req;
  req.set_sort("packets");
  req.set_window_ms(2000);
  v1::ListFlowsResponse r = run(req, after, &before);
  ASSERT_EQ(r.flows_size(), 4);
  EXPECT_EQ(ids(r), (std::vector<uint64_t>{F(0, 1), F(1, 2), F(0, 2), F(1, 1)}));
  EXPECT_EQ(r.flows(0).window_packets(), 90u);
  EXPECT_DOUBLE_EQ(r.flows(0).packets_per_second(), 45.0);
  EXPECT_EQ(r.flows(1).window_packets(), 7u);  // new: all of it
  EXPECT_EQ(r.flows(1).window_bytes(), 7000u);
  EXPECT_EQ(r.flows(2).window_packets(), 0u);
  EXPECT_EQ(r.window_ms(), 2000u);
  req.set_sort("bytes");
  r = run(req, after, &before);
  EXPECT_EQ(ids(r)[0], F(1, 1));
  EXPECT_EQ(r.flows(0).window_bytes(), 16000u);
  EXPECT_DOUBLE_EQ(r.flows(0).bits_per_second(), 16000.0 * 8 / 2);
}

TEST(FlowQueryTest, BadRequestsNameTheField) {
  auto err = [](auto set) {
    v1::ListFlowsRequest req;
    set(req);
    auto q = parseFlowQuery(req);
    return q.ok() ? std::string("ok") : std::string(q.status().message());
  };
  EXPECT_NE(err([](v1::ListFlowsRequest& r) { r.mutable_filter()->set_src("10.0.0.300"); })
                .find("filter.src: '10.0.0.300'"),
            std::string::npos);
  EXPECT_NE(err([](v1::ListFlowsRequest& r) { r.mutable_filter()->set_address("10.0.0.1/8"); })
                .find("filter.address"),
            std::string::npos);
  EXPECT_NE(err([](v1::ListFlowsRequest& r) { r.mutable_filter()->set_port(70000); }).find("filter.port"),
            std::string::npos);
  EXPECT_NE(err([](v1::ListFlowsRequest& r) { r.mutable_filter()->set_proto("tcpp"); }).find("filter.proto"),
            std::string::npos);
  std::string st = err([](v1::ListFlowsRequest& r) { r.mutable_filter()->set_state("open"); });
  EXPECT_NE(st.find("filter.state"), std::string::npos);
  EXPECT_NE(st.find("established"), std::string::npos);  // lists the valid states
  EXPECT_NE(err([](v1::ListFlowsRequest& r) { r.mutable_filter()->set_verdict("allow"); }).find("filter.verdict"),
            std::string::npos);
  EXPECT_NE(err([](v1::ListFlowsRequest& r) { r.set_sort("rate"); }).find("sort"), std::string::npos);
  EXPECT_NE(err([](v1::ListFlowsRequest& r) { r.set_window_ms(50); }).find("window_ms"), std::string::npos);
  EXPECT_EQ(err([](v1::ListFlowsRequest& r) { r.set_window_ms(100); }), "ok");
}

TEST(FlowQueryTest, DropReasonsByName) {
  auto r = parseDropReason("firewall_deny");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, dp::DropReason::kFirewallDeny);
  auto bad = parseDropReason("acl_deny");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("firewall_deny"), std::string_view::npos);
}

}  // namespace
}  // namespace dpu::ctl
