// Hostile gRPC clients for tests/control/integration/api_faults_test.sh. Each mode checks what
// the server answered and exits 0 when every answer was acceptable, 1 (with the reason on
// stderr) otherwise. The server must survive all of them; the shell test checks that too.
//
//   api_abuse ADDR oversized MAX_BYTES   requests past the limit: RESOURCE_EXHAUSTED; a valid
//                                        request just under it with absurd strings: a clear,
//                                        bounded INVALID_ARGUMENT
//   api_abuse ADDR malformed             undecodable request bytes to every method, and raw
//                                        garbage (not HTTP/2) on a fresh connection
//   api_abuse ADDR concurrent N SECONDS  N clients, one connection each, reading and applying
//                                        at once: only OK or ABORTED, versions consistent
//   api_abuse ADDR stall SECONDS         a WatchEvents subscriber that never reads; other
//                                        clients keep their deadlines meanwhile
//   api_abuse ADDR rawsock PATH          (used by malformed) garbage on the unix socket PATH
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <iterator>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "proto/appliance_api.grpc.pb.h"

namespace {

using namespace std::chrono_literals;
using dpu::v1::Appliance;

int g_failures = 0;
std::mutex g_mu;

void failf(const std::string& what) {
  std::lock_guard<std::mutex> l(g_mu);
  std::cerr << "api_abuse: FAIL: " << what << "\n";
  ++g_failures;
}

std::shared_ptr<grpc::Channel> channel(const std::string& addr, int id = 0) {
  grpc::ChannelArguments args;
  args.SetInt("dpu.test.client", id);  // distinct args: a connection of its own
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(256 << 20);
  return grpc::CreateCustomChannel(addr, grpc::InsecureChannelCredentials(), args);
}

void setDeadline(grpc::ClientContext& c, std::chrono::milliseconds d) {
  c.set_deadline(std::chrono::system_clock::now() + d);
}

std::string codeName(grpc::StatusCode c) {
  static const char* n[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
                            "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED",
                            "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
                            "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE",
                            "DATA_LOSS", "UNAUTHENTICATED"};
  return (c >= 0 && c <= 16) ? n[c] : std::to_string(c);
}

// The server is up and answers a plain request.
bool alive(const std::string& addr, uint64_t* version = nullptr) {
  auto stub = Appliance::NewStub(channel(addr, 999));
  grpc::ClientContext ctx;
  setDeadline(ctx, 10s);
  dpu::v1::GetStatusRequest req;
  dpu::v1::StatusResponse resp;
  grpc::Status st = stub->GetStatus(&ctx, req, &resp);
  if (!st.ok()) {
    failf("server does not answer GetStatus: " + codeName(st.error_code()) + " " +
          st.error_message());
    return false;
  }
  if (version) *version = resp.config_version();
  return true;
}

grpc::Status rawUnary(grpc::GenericStub& stub, const std::string& method, const std::string& bytes,
                      std::chrono::milliseconds deadline, std::string* reply = nullptr) {
  grpc::ClientContext ctx;
  setDeadline(ctx, deadline);
  grpc::Slice s(bytes.data(), bytes.size());
  grpc::ByteBuffer req(&s, 1);
  grpc::ByteBuffer resp;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status result;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &req, &resp, [&](grpc::Status st) {
    std::lock_guard<std::mutex> l(mu);
    result = std::move(st);
    done = true;
    cv.notify_one();
  });
  std::unique_lock<std::mutex> l(mu);
  cv.wait(l, [&] { return done; });
  if (reply && result.ok()) {
    std::vector<grpc::Slice> slices;
    (void)resp.Dump(&slices);
    reply->clear();
    for (auto& sl : slices) reply->append(reinterpret_cast<const char*>(sl.begin()), sl.size());
  }
  return result;
}

int oversized(const std::string& addr, size_t max_bytes) {
  grpc::GenericStub stub(channel(addr));
  // 1. A request past the limit, to a unary and to a streaming method.
  for (const char* m : {"/dpu.v1.Appliance/ApplyConfig", "/dpu.v1.Appliance/ValidateConfig",
                        "/dpu.v1.Appliance/WatchEvents"}) {
    std::string big;
    dpu::v1::ApplyConfigRequest req;
    auto* rule = req.mutable_config()->mutable_firewall()->add_rules();
    rule->set_id(std::string(max_bytes + 4096, 'x'));
    req.SerializeToString(&big);
    grpc::Status st = rawUnary(stub, m, big, 30s);
    if (st.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) {
      failf(std::string(m) + " with " + std::to_string(big.size()) + " bytes: expected " +
            "RESOURCE_EXHAUSTED, got " + codeName(st.error_code()) + " " + st.error_message());
    } else {
      std::cout << "ok   oversized " << m << " (" << big.size()
                << " bytes): RESOURCE_EXHAUSTED: " << st.error_message() << "\n";
    }
  }
  // 2. Just under the limit, well-formed, absurd: a rule id of most of the limit, and many
  // rules. The answer names the field and stays small (not the whole input echoed back).
  auto stub2 = Appliance::NewStub(channel(addr));
  uint64_t v0 = 0;
  if (!alive(addr, &v0)) return 1;
  {
    dpu::v1::ApplyConfigRequest req;
    req.set_expected_version(v0);
    auto* rule = req.mutable_config()->mutable_firewall()->add_rules();
    rule->set_id(std::string(max_bytes - 4096, 'y'));
    rule->set_action(dpu::v1::FirewallAction::DENY);
    grpc::ClientContext ctx;
    setDeadline(ctx, 60s);
    dpu::v1::ApplyConfigResponse resp;
    grpc::Status st = stub2->ApplyConfig(&ctx, req, &resp);
    if (st.error_code() != grpc::StatusCode::INVALID_ARGUMENT) {
      failf("rule id of " + std::to_string(max_bytes - 4096) + " bytes: expected INVALID_ARGUMENT, got " +
            codeName(st.error_code()));
    } else if (st.error_message().size() > 4096 || st.error_details().size() > 16384) {
      failf("rule id of " + std::to_string(max_bytes - 4096) + " bytes: the error is " +
            std::to_string(st.error_message().size()) + " + " +
            std::to_string(st.error_details().size()) + " bytes (echoes the input?)");
    } else if (st.error_message().find("firewall.rules") == std::string::npos) {
      failf("huge rule id: the error does not name the field: " + st.error_message());
    } else {
      std::cout << "ok   huge rule id refused: " << st.error_message().substr(0, 200) << "\n";
    }
  }
  {
    dpu::v1::ValidateConfigRequest req;
    const int n = static_cast<int>(std::min<size_t>(max_bytes / 64, 100000));
    for (int i = 0; i < n; ++i) {
      auto* rule = req.mutable_config()->mutable_firewall()->add_rules();
      rule->set_id("r" + std::to_string(i));
      rule->add_protocols("nonsense");
    }
    grpc::ClientContext ctx;
    setDeadline(ctx, 120s);
    dpu::v1::ValidateConfigResponse resp;
    grpc::Status st = stub2->ValidateConfig(&ctx, req, &resp);
    if (!st.ok() && st.error_code() != grpc::StatusCode::INVALID_ARGUMENT &&
        st.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) {
      failf(std::to_string(n) + " bad rules: " + codeName(st.error_code()) + " " +
            st.error_message());
    } else {
      std::cout << "ok   " << n << " invalid rules: " << codeName(st.error_code()) << ", "
                << resp.errors_size() << " errors listed, " << resp.ByteSizeLong()
                << " response bytes\n";
    }
  }
  {
    // The same through ApplyConfig: the errors come back in the status (trailers), which the
    // client caps at 8 KiB: they must arrive as INVALID_ARGUMENT, bounded, not be lost.
    dpu::v1::ApplyConfigRequest req;
    req.set_expected_version(v0);
    const int n = static_cast<int>(std::min<size_t>(max_bytes / 64, 100000));
    for (int i = 0; i < n; ++i) {
      auto* rule = req.mutable_config()->mutable_firewall()->add_rules();
      rule->set_id("r" + std::to_string(i));
      rule->set_action(dpu::v1::FirewallAction::DENY);
      rule->add_protocols("nonsense");
    }
    grpc::ClientContext ctx;  // default client limits, like dpuctl
    setDeadline(ctx, 120s);
    dpu::v1::ApplyConfigResponse resp;
    auto plain = Appliance::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
    grpc::Status st = plain->ApplyConfig(&ctx, req, &resp);
    dpu::v1::RpcStatus rs;
    dpu::v1::ConfigErrors list;
    if (st.error_code() != grpc::StatusCode::INVALID_ARGUMENT) {
      failf("ApplyConfig with " + std::to_string(n) + " bad rules: expected INVALID_ARGUMENT, got " +
            codeName(st.error_code()) + " " + st.error_message().substr(0, 300));
    } else if (!rs.ParseFromString(st.error_details()) || rs.details_size() != 1 ||
               !rs.details(0).UnpackTo(&list) || list.errors_size() < 2) {
      failf("ApplyConfig with many bad rules: no error list in the status details");
    } else {
      std::cout << "ok   ApplyConfig with " << n << " bad rules: INVALID_ARGUMENT, message "
                << st.error_message().size() << " bytes, " << list.errors_size()
                << " errors in the details, the last: "
                << list.errors(list.errors_size() - 1).reason() << "\n";
    }
  }
  uint64_t v1 = 0;
  if (!alive(addr, &v1)) return 1;
  if (v1 != v0) failf("the committed version moved from " + std::to_string(v0) + " to " +
                      std::to_string(v1) + " although every apply was refused");
  return g_failures ? 1 : 0;
}

int rawSocket(const std::string& path) {
  std::mt19937 rng(4);
  for (int round = 0; round < 20; ++round) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::strncpy(sa.sun_path, path.c_str(), sizeof(sa.sun_path) - 1);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
      failf("rawsock: cannot connect to " + path + ": " + std::strerror(errno));
      if (fd >= 0) ::close(fd);
      return 1;
    }
    std::string junk;
    // Half the rounds start with the HTTP/2 preface and then talk nonsense.
    if (round % 2) junk = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    size_t n = 1 + rng() % 65536;
    for (size_t i = 0; i < n; ++i) junk.push_back(static_cast<char>(rng()));
    (void)!::write(fd, junk.data(), junk.size());
    timeval tv{2, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char buf[4096];
    while (::read(fd, buf, sizeof(buf)) > 0) {
    }
    ::close(fd);
  }
  std::cout << "ok   20 connections of raw garbage\n";
  return 0;
}

int malformed(const std::string& addr) {
  grpc::GenericStub stub(channel(addr));
  const char* unary[] = {"GetStatus", "GetConfig", "ApplyConfig", "UpdateConfig", "ValidateConfig",
                         "GetStats", "Explain", "AddFirewallRule", "RemoveFirewallRule",
                         "ListFirewallRules", "SetGeoipDatabase", "LookupCountry"};
  const char* streaming[] = {"WatchStats", "WatchEvents"};
  std::mt19937 rng(1);
  std::map<std::string, int> codes;
  // Bytes that are never a valid protobuf: a field with wire type 7 (reserved), a truncated
  // varint, a length past the end, a group that never ends, and random bytes after each.
  const std::vector<std::string> bad_heads = {std::string("\x0f", 1), std::string("\x08\xff", 2),
                                              std::string("\x0a\x7f", 2),
                                              std::string("\x0b\x10\x01", 3),
                                              std::string("\x12\xff\xff\xff\xff\x0f", 6)};
  for (int round = 0; round < 10; ++round) {
    for (const auto& head : bad_heads) {
      std::string body = head;
      if (round) {
        size_t n = rng() % 64;
        for (size_t i = 0; i < n; ++i) body.push_back(static_cast<char>(rng()));
        // Keep it malformed: the head's damage comes last when bytes follow.
        body = body.substr(head.size()) + head;
      }
      for (const char* m : unary) {
        grpc::Status st = rawUnary(stub, std::string("/dpu.v1.Appliance/") + m, body, 10s);
        codes[codeName(st.error_code())]++;
        if (st.ok() || st.error_code() == grpc::StatusCode::UNAVAILABLE ||
            st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
          failf(std::string(m) + " with undecodable bytes: " + codeName(st.error_code()) + " " +
                st.error_message());
        }
      }
      for (const char* m : streaming) {
        grpc::Status st = rawUnary(stub, std::string("/dpu.v1.Appliance/") + m, body, 10s);
        codes[codeName(st.error_code())]++;
        if (st.ok() || st.error_code() == grpc::StatusCode::UNAVAILABLE ||
            st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
          failf(std::string(m) + " with undecodable bytes: " + codeName(st.error_code()));
        }
      }
    }
  }
  // Unknown method and unknown service.
  for (const char* m : {"/dpu.v1.Appliance/NoSuchMethod", "/no.Such/Service"}) {
    grpc::Status st = rawUnary(stub, m, "", 10s);
    if (st.error_code() != grpc::StatusCode::UNIMPLEMENTED) {
      failf(std::string(m) + ": expected UNIMPLEMENTED, got " + codeName(st.error_code()));
    }
  }
  std::cout << "ok   undecodable requests to " << (std::size(unary) + std::size(streaming))
            << " methods:";
  for (auto& [c, n] : codes) std::cout << " " << c << "=" << n;
  std::cout << "\n";
  if (addr.rfind("unix:", 0) == 0) rawSocket(addr.substr(5));
  alive(addr);
  return g_failures ? 1 : 0;
}

int concurrent(const std::string& addr, int n, int seconds) {
  uint64_t v0 = 0;
  if (!alive(addr, &v0)) return 1;
  std::atomic<uint64_t> calls{0}, applied{0}, aborted{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> th;
  for (int i = 0; i < n; ++i) {
    th.emplace_back([&, i] {
      auto stub = Appliance::NewStub(channel(addr, i + 1));
      uint32_t k = 0;
      while (!stop.load()) {
        ++k;
        auto check = [&](const grpc::Status& st, const char* what) {
          calls++;
          if (!st.ok()) failf(std::string(what) + ": " + codeName(st.error_code()) + " " + st.error_message());
        };
        {
          grpc::ClientContext c;
          setDeadline(c, 30s);
          dpu::v1::StatusResponse r;
          check(stub->GetStatus(&c, dpu::v1::GetStatusRequest(), &r), "GetStatus");
        }
        {
          grpc::ClientContext c;
          setDeadline(c, 30s);
          dpu::v1::Stats r;
          check(stub->GetStats(&c, dpu::v1::GetStatsRequest(), &r), "GetStats");
        }
        dpu::v1::GetConfigResponse cfg;
        {
          grpc::ClientContext c;
          setDeadline(c, 30s);
          check(stub->GetConfig(&c, dpu::v1::GetConfigRequest(), &cfg), "GetConfig");
        }
        if (k % 3 == 0) {
          dpu::v1::ApplyConfigRequest req;
          *req.mutable_config() = cfg.config();
          req.set_expected_version(cfg.config().version());
          req.mutable_config()->mutable_dataplane()->mutable_timeouts()->set_udp_s(
              1000 + i * 1000 + k % 1000);
          grpc::ClientContext c;
          setDeadline(c, 60s);
          dpu::v1::ApplyConfigResponse r;
          grpc::Status st = stub->ApplyConfig(&c, req, &r);
          calls++;
          if (st.ok()) {
            applied++;
          } else if (st.error_code() == grpc::StatusCode::ABORTED) {
            aborted++;
          } else {
            failf("ApplyConfig: " + codeName(st.error_code()) + " " + st.error_message());
          }
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  stop = true;
  for (auto& t : th) t.join();
  uint64_t v1 = 0;
  if (!alive(addr, &v1)) return 1;
  if (v1 != v0 + applied.load()) {
    failf("version went " + std::to_string(v0) + " -> " + std::to_string(v1) + " but " +
          std::to_string(applied.load()) + " applies succeeded");
  }
  if (applied.load() == 0) failf("no apply succeeded");
  std::cout << "ok   " << n << " concurrent clients for " << seconds << " s: " << calls.load()
            << " calls, " << applied.load() << " applies committed, " << aborted.load()
            << " refused as ABORTED (version moved), version " << v0 << " -> " << v1 << "\n";
  return g_failures ? 1 : 0;
}

int stall(const std::string& addr, int seconds) {
  // The subscriber: asks for everything with a small buffer, then never reads.
  auto sub_stub = Appliance::NewStub(channel(addr, 1));
  grpc::ClientContext sub_ctx;
  dpu::v1::WatchEventsRequest wreq;
  wreq.set_buffer_size(16);
  auto reader = sub_stub->WatchEvents(&sub_ctx, wreq);
  reader->WaitForInitialMetadata();
  std::cout << "stalled subscriber open\n" << std::flush;
  auto stub = Appliance::NewStub(channel(addr, 2));
  uint64_t rx0 = 0, rx1 = 0, applies = 0;
  auto t_end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  bool first = true;
  while (std::chrono::steady_clock::now() < t_end) {
    dpu::v1::Stats st;
    grpc::ClientContext c;
    setDeadline(c, 5s);
    grpc::Status s = stub->GetStats(&c, dpu::v1::GetStatsRequest(), &st);
    if (!s.ok()) {
      failf("GetStats while a subscriber stalls: " + codeName(s.error_code()));
      break;
    }
    uint64_t rx = 0;
    for (const auto& p : st.ports()) rx += p.rx_packets();
    if (first) rx0 = rx;
    first = false;
    rx1 = rx;
    // An apply (a "config" event for every subscriber) must not wait for the stalled one.
    dpu::v1::UpdateConfigRequest u;
    u.set_force(true);
    u.mutable_config()->mutable_dataplane()->mutable_timeouts()->set_icmp_s(
        static_cast<uint32_t>(10 + applies % 50));
    u.mutable_update_mask()->add_paths("dataplane.timeouts.icmp_s");
    grpc::ClientContext c2;
    setDeadline(c2, 10s);
    dpu::v1::ApplyConfigResponse r;
    s = stub->UpdateConfig(&c2, u, &r);
    if (!s.ok()) {
      failf("UpdateConfig while a subscriber stalls: " + codeName(s.error_code()) + " " +
            s.error_message());
      break;
    }
    ++applies;
    std::this_thread::sleep_for(200ms);
  }
  if (rx1 <= rx0) failf("forwarding stopped while a subscriber stalled (rx " + std::to_string(rx0) + ")");
  std::cout << "ok   while one subscriber never read for " << seconds << " s: " << applies
            << " applies, rx packets " << rx0 << " -> " << rx1 << "\n"
            << std::flush;
  // Now read: the stream still works, and says how many events this subscriber lost.
  dpu::v1::Event ev;
  uint64_t lost = 0, got = 0;
  auto t_read = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < t_read && reader->Read(&ev)) {
    ++got;
    lost += ev.lost();
    if (lost > 0 && got > 32) break;
  }
  if (got == 0) failf("the stalled stream delivers nothing once read");
  if (lost == 0) failf("the stalled subscriber lost no event: was it really stalled?");
  std::cout << "ok   stalled subscriber then read " << got << " events, reported lost " << lost
            << "\n";
  if (getenv("API_ABUSE_KEEP_STALLED")) {
    // Stall again until killed: the caller stops the appliance meanwhile.
    std::cout << "stalling until killed\n" << std::flush;
    for (;;) std::this_thread::sleep_for(1s);
  }
  sub_ctx.TryCancel();
  reader->Finish();
  return g_failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: api_abuse ADDR oversized MAX | malformed | concurrent N SECONDS | "
                 "stall SECONDS | rawsock PATH\n";
    return 2;
  }
  std::string addr = argv[1], mode = argv[2];
  int rc = 2;
  if (mode == "oversized" && argc == 4) rc = oversized(addr, std::stoull(argv[3]));
  else if (mode == "malformed" && argc == 3) rc = malformed(addr);
  else if (mode == "concurrent" && argc == 5) rc = concurrent(addr, std::stoi(argv[3]), std::stoi(argv[4]));
  else if (mode == "stall" && argc == 4) rc = stall(addr, std::stoi(argv[3]));
  else if (mode == "rawsock" && argc == 4) rc = rawSocket(argv[3]);
  else std::cerr << "api_abuse: bad arguments\n";
  return rc;
}
