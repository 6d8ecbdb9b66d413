#include "control/api/server.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <sstream>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "control/api/appliance_service.h"
#include "control/api/reflection_v1.h"

namespace dpu::ctl {
namespace {

constexpr const char* kServiceName = "dpu.v1.Appliance";

absl::StatusOr<std::string> readPem(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat(what, " ", path, ": cannot open: ", std::strerror(errno)));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  if (s.find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, ": not a PEM file"));
  }
  return s;
}

std::string unixPath(const std::string& addr) {
  if (absl::StartsWith(addr, "unix://")) return addr.substr(7);
  return addr.substr(5);
}

// Something already accepting on `path`? (Another appliance on the same state directory.)
bool socketAlive(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path, path.c_str(), sizeof(sa.sun_path) - 1);
  bool alive = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0;
  ::close(fd);
  return alive;
}

absl::Status prepareUnixPath(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("listen: empty unix socket path");
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("listen: unix socket path '", path, "' is ",
                                                   path.size(), " bytes; the limit is ",
                                                   sizeof(sockaddr_un::sun_path) - 1));
  }
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("listen: ", path, ": ", std::strerror(errno)));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("listen: ", path, " exists and is not a socket; remove it or choose "
                                       "another address"));
  }
  if (socketAlive(path)) {
    return absl::FailedPreconditionError(
        absl::StrCat("listen: another process is serving on ", path,
                     " (is another dpu-appliance running on this state directory?)"));
  }
  if (::unlink(path.c_str()) != 0) {  // stale socket of a previous run
    return absl::FailedPreconditionError(
        absl::StrCat("listen: cannot remove stale socket ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status splitHostPort(const std::string& addr, std::string* host, std::string* port) {
  if (!addr.empty() && addr[0] == '[') {
    size_t close = addr.find(']');
    if (close == std::string::npos || close + 1 >= addr.size() || addr[close + 1] != ':') {
      return absl::InvalidArgumentError(
          absl::StrCat("listen: '", addr, "' is not [IPV6]:PORT"));
    }
    *host = addr.substr(1, close - 1);
    *port = addr.substr(close + 2);
  } else {
    size_t colon = addr.rfind(':');
    if (colon == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "listen: '", addr, "' has no port; use HOST:PORT, [IPV6]:PORT or unix:PATH"));
    }
    *host = addr.substr(0, colon);
    *port = addr.substr(colon + 1);
    if (host->find(':') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("listen: '", addr, "': write IPv6 addresses as [IPV6]:PORT"));
    }
  }
  uint32_t p = 0;
  if (!absl::SimpleAtoi(*port, &p) || p > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen: '", addr, "': port '", *port, "' is not a number 0..65535"));
  }
  return absl::OkStatus();
}

bool isLoopbackHost(const std::string& host) {
  if (absl::AsciiStrToLower(host) == "localhost") return true;
  in_addr a4{};
  if (inet_pton(AF_INET, host.c_str(), &a4) == 1) {
    return (ntohl(a4.s_addr) >> 24) == 127;
  }
  in6_addr a6{};
  if (inet_pton(AF_INET6, host.c_str(), &a6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&a6)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&a6)) return a6.s6_addr[12] == 127;
  }
  return false;
}

absl::StatusOr<std::string> resolveListenAddress(const ApiServerOptions& o) {
  if (o.listen.empty()) {
    if (o.state_dir.empty()) {
      return absl::InvalidArgumentError("listen: no address and no state directory");
    }
    return absl::StrCat("unix:", o.state_dir, "/api.sock");
  }
  if (absl::StartsWith(o.listen, "unix:")) return o.listen;
  if (absl::StartsWith(o.listen, "unix-abstract:") || absl::StartsWith(o.listen, "vsock:")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "listen: '", o.listen, "' is not supported; use unix:PATH (file permissions protect "
        "it) or HOST:PORT"));
  }
  std::string host, port;
  absl::Status st = splitHostPort(o.listen, &host, &port);
  if (!st.ok()) return st;
  if (!isLoopbackHost(host) && !o.listen_any) {
    return absl::PermissionDeniedError(absl::StrCat(
        "listen: refusing '", o.listen, "': ",
        host.empty() ? "an empty host means every interface" : "not a loopback address",
        "; the API has full control of the appliance. Add --listen-any to accept it (and "
        "protect it with --tls-cert/--tls-key/--tls-client-ca)"));
  }
  return o.listen;
}

absl::StatusOr<std::unique_ptr<ApiServer>> ApiServer::start(const ApiServerOptions& o,
                                                            ApplianceService* service) {
  auto addr = resolveListenAddress(o);
  if (!addr.ok()) return addr.status();
  if (o.max_request_bytes < 1024 || o.max_request_bytes > static_cast<uint64_t>(INT_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat("max-request-bytes: ", o.max_request_bytes,
                                                   " is out of range [1024, ", INT_MAX, "]"));
  }
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return absl::InvalidArgumentError("TLS needs both --tls-cert and --tls-key");
  }
  if (!o.tls_client_ca.empty() && o.tls_cert.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-ca (mTLS) needs the server's own --tls-cert and --tls-key");
  }
  std::shared_ptr<grpc::ServerCredentials> creds;
  if (!o.tls_cert.empty()) {
    grpc::SslServerCredentialsOptions ssl;
    auto cert = readPem(o.tls_cert, "--tls-cert");
    if (!cert.ok()) return cert.status();
    auto key = readPem(o.tls_key, "--tls-key");
    if (!key.ok()) return key.status();
    ssl.pem_key_cert_pairs.push_back({*key, *cert});
    if (!o.tls_client_ca.empty()) {
      auto ca = readPem(o.tls_client_ca, "--tls-client-ca");
      if (!ca.ok()) return ca.status();
      ssl.pem_root_certs = *ca;
      ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
    } else {
      ssl.client_certificate_request = GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
    }
    creds = grpc::SslServerCredentials(ssl);
  } else {
    creds = grpc::InsecureServerCredentials();
  }

  std::unique_ptr<ApiServer> s(new ApiServer());
  s->service_ = service;
  const bool is_unix = absl::StartsWith(*addr, "unix:");
  if (is_unix) {
    s->socket_path_ = unixPath(*addr);
    absl::Status st = prepareUnixPath(s->socket_path_);
    if (!st.ok()) return st;
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(*addr, creds, &port);
  builder.RegisterService(service);
  // Reflection v1 beside gRPC's v1alpha plugin (control/api/reflection_v1.h).
  s->reflection_v1_ = std::make_unique<ReflectionV1Service>(std::vector<std::string>{
      v1::Appliance::service_full_name(), "grpc.health.v1.Health",
      "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"});
  builder.RegisterService(s->reflection_v1_.get());
  builder.SetMaxReceiveMessageSize(static_cast<int>(o.max_request_bytes));
  // The socket is created by BuildAndStart: create it 0600 (no window where others could
  // connect), then chmod to be sure whatever the umask did.
  mode_t old_mask = is_unix ? ::umask(0177) : 0;
  s->server_ = builder.BuildAndStart();
  if (is_unix) ::umask(old_mask);
  if (!s->server_ || (!is_unix && port == 0)) {
    s->server_.reset();
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", *addr,
        ": address in use, not available on this host, or not permitted (gRPC's log above "
        "has the details)"));
  }
  if (is_unix) {
    if (::chmod(s->socket_path_.c_str(), 0600) != 0) {
      std::string err = std::strerror(errno);
      s->shutdown(std::chrono::milliseconds(0));
      return absl::PermissionDeniedError(
          absl::StrCat("cannot chmod 0600 ", s->socket_path_, ": ", err));
    }
    s->address_ = *addr;
  } else {
    std::string host, unused;
    (void)splitHostPort(*addr, &host, &unused);
    s->address_ = host.find(':') != std::string::npos ? absl::StrCat("[", host, "]:", port)
                                                      : absl::StrCat(host, ":", port);
  }
  if (auto* health = s->server_->GetHealthCheckService()) {
    health->SetServingStatus(kServiceName, true);
    health->SetServingStatus(true);
  }
  return s;
}

ApiServer::~ApiServer() { shutdown(std::chrono::milliseconds(0)); }

void ApiServer::shutdown(std::chrono::milliseconds grace) {
  if (down_ || !server_) return;
  down_ = true;
  if (auto* health = server_->GetHealthCheckService()) health->SetServingStatus(false);
  if (service_) service_->beginShutdown();
  server_->Shutdown(std::chrono::system_clock::now() + grace);
  server_->Wait();
  if (!socket_path_.empty()) ::unlink(socket_path_.c_str());
}

}  // namespace dpu::ctl
