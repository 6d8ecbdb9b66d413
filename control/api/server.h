// Where and how the API listens.
//
// Default: a unix socket `unix:<state_dir>/api.sock`, mode 0600, inside the 0700 state
// directory (only the appliance's user can connect). TCP only when asked (--listen
// HOST:PORT); a TCP address that is not loopback (0.0.0.0, ::, a routable address, a host
// name other than localhost) is refused unless listen_any is set, since the API controls the
// appliance. TLS from PEM files (tls_cert + tls_key); with tls_client_ca, clients must present
// a certificate signed by that CA (mTLS). Requests larger than max_request_bytes fail with
// RESOURCE_EXHAUSTED (gRPC's "Received message larger than max" message).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dpu::ctl {

class ApplianceService;

struct ApiServerOptions {
  std::string state_dir;            // holds api.sock by default
  std::string listen;               // empty = unix:<state_dir>/api.sock
  bool listen_any = false;          // allow non-loopback TCP addresses
  std::string tls_cert, tls_key;    // PEM files; both or neither
  std::string tls_client_ca;        // PEM file; requires tls_cert/tls_key
  uint64_t max_request_bytes = 16ull << 20;
};

// The address to listen on, or why it is refused (checks only; nothing is bound).
absl::StatusOr<std::string> resolveListenAddress(const ApiServerOptions& opts);
// True for 127.0.0.0/8, ::1, ::ffff:127.x.y.z and "localhost" (host part of HOST:PORT).
bool isLoopbackHost(const std::string& host);
// Splits "HOST:PORT" / "[V6]:PORT"; an error names the address.
absl::Status splitHostPort(const std::string& addr, std::string* host, std::string* port);

class ApiServer {
 public:
  // Starts serving `service` (plus gRPC health checking and server reflection).
  static absl::StatusOr<std::unique_ptr<ApiServer>> start(const ApiServerOptions& opts,
                                                          ApplianceService* service);
  ~ApiServer();

  // The address clients use: "unix:/path/api.sock" or "HOST:PORT" with the bound port.
  const std::string& address() const { return address_; }
  // Health NOT_SERVING, ends streams, stops accepting and waits for in-flight calls (at most
  // `grace`, then cancels them). Idempotent.
  void shutdown(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));
  grpc::Server* grpcServer() { return server_.get(); }

 private:
  ApiServer() = default;
  // Declared before server_: destroyed after it (the server references the service).
  std::unique_ptr<grpc::Service> reflection_v1_;
  std::unique_ptr<grpc::Server> server_;
  ApplianceService* service_ = nullptr;
  std::string address_;
  std::string socket_path_;  // unix socket to remove at shutdown
  bool down_ = false;
};

}  // namespace dpu::ctl
