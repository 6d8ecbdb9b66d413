// A real etcd for tests (no mock etcd anywhere: docs/fleet.md): one member on free loopback
// ports with a temp data dir, started and stopped by the test; the dir is removed at the end.
// TLS: give server cert/key (+ the CA that signs client certificates for mTLS).
// available() is false when etcd is not installed: the test then says SKIPPED and why.
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace dpu::test {

inline int freeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

class EtcdProcess {
 public:
  struct Tls {
    std::string cert_file, key_file;  // the server's
    std::string client_ca_file;       // set: --client-cert-auth with this CA
  };

  static bool available() { return std::system("command -v etcd >/dev/null 2>&1") == 0; }

  explicit EtcdProcess(Tls tls = {}) : tls_(std::move(tls)) {
    char tmpl[] = "/tmp/dpu-etcd-test.XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    port_ = freeLoopbackPort();
    peer_ = freeLoopbackPort();
  }
  ~EtcdProcess() {
    kill(SIGKILL);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string url() const { return (tls_.cert_file.empty() ? "http://" : "https://") + endpoint(); }
  const std::string& dir() const { return dir_; }

  // Starts etcd (again: same ports and data). Waits until the port accepts connections;
  // the caller's client waits for readiness itself (calls retry on UNAVAILABLE).
  void start() {
    const std::string peer = "http://127.0.0.1:" + std::to_string(peer_);
    std::vector<std::string> args = {
        "etcd", "--name", "t", "--data-dir", dir_ + "/data",
        "--listen-client-urls", url(), "--advertise-client-urls", url(),
        "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
        "--initial-cluster", "t=" + peer,
        "--experimental-watch-progress-notify-interval=1s",
        "--logger=zap", "--log-level=error", "--log-outputs=" + dir_ + "/etcd.log"};
    if (!tls_.cert_file.empty()) {
      args.insert(args.end(), {"--cert-file", tls_.cert_file, "--key-file", tls_.key_file});
      if (!tls_.client_ca_file.empty()) {
        args.insert(args.end(), {"--client-cert-auth", "--trusted-ca-file", tls_.client_ca_file});
      }
    }
    pid_ = ::fork();
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execvp("etcd", argv.data());
      ::_exit(127);
    }
    // Waits for the client port (etcd binds it once it is ready to serve).
    for (int i = 0; i < 6000; ++i) {
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(port_));
      const bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
      ::close(fd);
      if (up) return;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return;  // it exited: the test's first call fails and says so
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  // Stops it (SIGTERM: a clean stop; SIGKILL: a crash) and reaps it.
  void kill(int sig = SIGTERM) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  bool running() const { return pid_ > 0; }

 private:
  Tls tls_;
  std::string dir_;
  int port_ = 0, peer_ = 0;
  pid_t pid_ = -1;
};

}  // namespace dpu::test
