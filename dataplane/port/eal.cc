#include "dataplane/port/eal.h"

#include <atomic>

#include <dirent.h>
#include <fcntl.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_log.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <syslog.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace dpu::dp {

namespace {

char g_runtime_dir[4096];

void removeRuntimeDir() {
  if (g_runtime_dir[0] != 0) rmdir(g_runtime_dir);
}

// EAL's log, as DPDK 22.11 writes it (stderr and syslog), less the lines of PMDs that say
// nothing is wrong (see initEal). Line by line: rte_vlog flushes after every message.
struct LogFilter {
  std::mutex mu;
  std::string line;
  std::string held;        // a net_tap netlink line, kept until the next says what it was about
  bool multiq_told = false;
  bool no_shconf = false;  // --no-shconf: EAL's multi-process channel is off
};
LogFilter& g_log = *new LogFilter;  // never destroyed: EAL may log from exit handlers

void logOut(const std::string& l) {
  std::fwrite(l.data(), 1, l.size(), stderr);
  std::fflush(stderr);
  syslog(std::max(0, rte_log_cur_msg_loglevel() - 1), "%s", l.c_str());
}

void logLine(const std::string& l) {
  const bool multiq = l.find("multiq qdisc") != std::string::npos ||
                      l.find("Disabling rte flow support") != std::string::npos;
  if (!g_log.held.empty()) {
    // "Specified qdisc kind is unknown" before a multiq line is part of that story.
    if (!multiq) logOut(g_log.held);
    g_log.held.clear();
  }
  if (l.find("tap_nl_dump_ext_ack()") != std::string::npos) {
    g_log.held = l;
    return;
  }
  if (multiq) {
    // net_tap asks for a multiq qdisc for its rte_flow support; a kernel without sch_multiq
    // (containers, many distributions) refuses it: rte_flow on the tap is off, which the
    // appliance does not use. Said once, as what it means.
    if (!g_log.multiq_told) {
      g_log.multiq_told = true;
      logOut("net_tap: this kernel has no multiq qdisc (sch_multiq): the TAP PMD's rte_flow "
             "support is off, which the appliance does not use (nothing is missing)\n");
    }
    return;
  }
  // net_tap tells secondary processes about a started port over EAL's multi-process channel;
  // with --no-shconf there is no channel and no secondary (ENOTSUP, 95).
  if (g_log.no_shconf && l.find("Failed to send start req to secondary 95") != std::string::npos) {
    return;
  }
  logOut(l);
}

ssize_t logWrite(void*, const char* buf, size_t size) {
  std::lock_guard<std::mutex> lock(g_log.mu);
  for (size_t i = 0; i < size; ++i) {
    g_log.line.push_back(buf[i]);
    if (buf[i] == '\n') {
      logLine(g_log.line);
      g_log.line.clear();
    }
  }
  return static_cast<ssize_t>(size);
}

// Is a process using the unix socket at `path`? (DPDK's telemetry socket is SOCK_SEQPACKET,
// its multi-process socket SOCK_DGRAM: a socket of another type answers EPROTOTYPE.)
bool socketAnswers(const std::string& path) {
  sockaddr_un sun{};
  sun.sun_family = AF_UNIX;
  if (path.size() >= sizeof(sun.sun_path)) return true;  // cannot tell: assume so
  std::memcpy(sun.sun_path, path.c_str(), path.size() + 1);
  for (int type : {SOCK_SEQPACKET, SOCK_STREAM, SOCK_DGRAM}) {
    int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
    if (fd < 0) return true;
    int rc = connect(fd, reinterpret_cast<const sockaddr*>(&sun), sizeof(sun));
    int err = errno;
    close(fd);
    if (rc == 0) return true;
    if (err != EPROTOTYPE) return err != ECONNREFUSED && err != ENOENT;
  }
  return false;
}

// Does a process hold a lock on the file at `path`? DPDK's primary holds an fcntl write lock
// on `config` and every process using the memory flock()s the fbarray files.
bool fileLocked(const std::string& path) {
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return errno != ENOENT;
  struct flock fl{};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;  // l_start 0, l_len 0: the whole file
  bool locked = fcntl(fd, F_GETLK, &fl) != 0 || fl.l_type != F_UNLCK;
  if (!locked) {
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      locked = true;
    } else {
      flock(fd, LOCK_UN);
    }
  }
  close(fd);
  return locked;
}

}  // namespace

std::string ealRuntimeDir(const std::vector<std::string>& args) {
  std::string prefix = "rte";  // DPDK's default --file-prefix
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--") break;
    if (absl::StartsWith(args[i], "--file-prefix=")) {
      prefix = args[i].substr(std::strlen("--file-prefix="));
    } else if (args[i] == "--file-prefix" && i + 1 < args.size()) {
      prefix = args[++i];
    }
  }
  // As eal_create_runtime_dir (DPDK 22.11): /var/run for root, else $XDG_RUNTIME_DIR or /tmp.
  std::string base = "/var/run";
  if (getuid() != 0) {
    const char* xdg = std::getenv("XDG_RUNTIME_DIR");
    base = xdg != nullptr ? xdg : "/tmp";
  }
  return absl::StrCat(base, "/dpdk/", prefix);
}

int removeStaleEalRuntimeDir(const std::string& dir, std::string* why_kept) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return 0;
  std::vector<std::string> files;
  std::string busy;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    std::string path = absl::StrCat(dir, "/", name);
    struct stat st{};
    if (lstat(path.c_str(), &st) != 0) continue;
    if (S_ISSOCK(st.st_mode)) {
      if (socketAnswers(path)) busy = absl::StrCat(name, " (a process listens on it)");
    } else if (S_ISREG(st.st_mode)) {
      if (fileLocked(path)) busy = absl::StrCat(name, " (a process holds a lock on it)");
    } else {
      busy = absl::StrCat(name, " (not a file DPDK makes)");
    }
    if (!busy.empty()) break;
    files.push_back(path);
  }
  closedir(d);
  if (!busy.empty()) {
    if (why_kept) *why_kept = busy;
    return -1;
  }
  for (const std::string& f : files) unlink(f.c_str());
  return rmdir(dir.c_str()) == 0 ? static_cast<int>(files.size()) + 1 : -1;
}

void removeEmptyEalRuntimeDir() {
  const char* dir = rte_eal_get_runtime_dir();
  if (dir == nullptr || dir[0] == 0) return;
  std::snprintf(g_runtime_dir, sizeof(g_runtime_dir), "%s", dir);
  removeRuntimeDir();
}

absl::Status initEal(const std::vector<std::string>& args) {
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Registered before rte_eal_init, so it runs after the exit handlers EAL registers (the
  // telemetry socket's unlink): the directory is empty by then.
  static const bool registered = std::atexit(removeRuntimeDir) == 0;
  (void)registered;
  // A runtime directory of this file prefix that no live process uses was left by one that
  // did not exit (kill -9, a crash): remove it before EAL starts over in it.
  const std::string dir = ealRuntimeDir(copy);
  std::string why_kept;
  if (removeStaleEalRuntimeDir(dir, &why_kept) > 0) {
    std::fprintf(stderr,
                 "%s: removed the stale DPDK runtime directory %s (left by a process that is "
                 "gone)\n",
                 copy.empty() ? "dpdk" : copy[0].c_str(), dir.c_str());
  }
  // EAL's log through the filter above (a stream set before rte_eal_init is kept by EAL).
  for (const std::string& a : copy) {
    if (a == "--") break;
    g_log.no_shconf = g_log.no_shconf || a == "--no-shconf";
  }
  static FILE* log_stream = [] {
    cookie_io_functions_t io{};
    io.write = logWrite;
    return fopencookie(nullptr, "w", io);
  }();
  if (log_stream != nullptr) rte_openlog_stream(log_stream);
  int rc = rte_eal_init(static_cast<int>(copy.size()), argv.data());
  if (rc < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("DPDK EAL initialization failed: ", rte_strerror(rte_errno),
                     " (check the EAL arguments; without hugepages use --no-huge -m <MB>)"));
  }
  removeEmptyEalRuntimeDir();
  return absl::OkStatus();
}

std::vector<std::string> offlineEalArgs(const std::vector<std::string>& vdevs, int mem_mb,
                                        unsigned lcores) {
  std::vector<std::string> a = {"dpu-appliance", "--no-huge", "--no-pci", "--no-shconf",
                                absl::StrCat("--file-prefix=dpu", getpid()),
                                "-m", std::to_string(mem_mb), "-l", "0",
                                "--no-telemetry", "--log-level=*:warning", "--log-level=pmd.net.pcap:error"};
  if (lcores > 1) {
    // lcores 0 .. N-1 as threads that may run on any CPU this process may use: N can be
    // more than the CPUs (a 2-CPU machine replays with 3 workers, overcommitted).
    cpu_set_t set;
    CPU_ZERO(&set);
    std::string cpus;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
      for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &set)) absl::StrAppend(&cpus, cpus.empty() ? "" : ",", c);
      }
    }
    if (cpus.empty()) cpus = "0";
    a[7] = "--lcores";
    a[8] = absl::StrCat("(0-", lcores - 1, ")@(", cpus, ")");
  }
  for (const auto& v : vdevs) {
    a.push_back("--vdev");
    a.push_back(v);
  }
  return a;
}

namespace {
std::atomic<bool> g_heap_left_to_exit{false};
}  // namespace

void leaveDpdkHeapToExit() { g_heap_left_to_exit.store(true, std::memory_order_relaxed); }

bool dpdkHeapLeftToExit() { return g_heap_left_to_exit.load(std::memory_order_relaxed); }

}  // namespace dpu::dp
