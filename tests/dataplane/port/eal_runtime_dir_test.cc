// Stale DPDK runtime directories (dataplane/port/eal.h): which directory EAL uses for a file
// prefix, and removeStaleEalRuntimeDir, which removes one only when no live process uses
// anything in it: a telemetry (SOCK_SEQPACKET) or multi-process (SOCK_DGRAM) socket that
// answers, a file under DPDK's fcntl lock (held by another process, as the primary holds
// `config`) or under a flock (as every process holds the fbarray files), or an entry DPDK
// does not make keep it. Runs in a temporary directory, without EAL.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "dataplane/port/eal.h"

namespace dpu::dp {
namespace {

namespace fs = std::filesystem;

class StaleDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dpu_eal_dir_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ / "dpdk" / "prefix1";
    fs::create_directories(dir_);
    // What a --no-huge primary with a shared config leaves after kill -9.
    for (const char* f : {"config", "fbarray_memzone", "fbarray_memseg-2048k-0-0"}) {
      std::ofstream(dir_ / f) << "x";
    }
    deadSocket("mp_socket", SOCK_DGRAM);
    deadSocket("dpdk_telemetry.v2", SOCK_SEQPACKET);
  }
  void TearDown() override {
    for (int fd : fds_) close(fd);
    if (child_ > 0) {
      kill(child_, SIGKILL);
      waitpid(child_, nullptr, 0);
    }
    fs::remove_all(root_);
  }
  // A socket file nobody listens on any more (its process is gone).
  void deadSocket(const char* name, int type) {
    int fd = bound(name, type);
    close(fd);
  }
  int bound(const char* name, int type) {
    int fd = socket(AF_UNIX, type, 0);
    EXPECT_GE(fd, 0);
    sockaddr_un sun{};
    sun.sun_family = AF_UNIX;
    std::string p = (dir_ / name).string();
    unlink(p.c_str());
    std::strncpy(sun.sun_path, p.c_str(), sizeof(sun.sun_path) - 1);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sun), sizeof(sun)), 0) << std::strerror(errno);
    return fd;
  }
  int remove(std::string* why = nullptr) {
    std::string w;
    int n = removeStaleEalRuntimeDir(dir_.string(), &w);
    if (why) *why = w;
    return n;
  }

  fs::path root_, dir_;
  std::vector<int> fds_;
  pid_t child_ = -1;
};

TEST_F(StaleDirTest, ADirectoryNoLiveProcessUsesIsRemoved) {
  EXPECT_EQ(remove(), 6);  // five files and the directory
  EXPECT_FALSE(fs::exists(dir_));
  EXPECT_EQ(remove(), 0) << "no directory: nothing to do";
}

TEST_F(StaleDirTest, ALiveTelemetrySocketKeepsIt) {
  int fd = bound("dpdk_telemetry.v2", SOCK_SEQPACKET);
  fds_.push_back(fd);
  ASSERT_EQ(listen(fd, 1), 0);
  std::string why;
  EXPECT_EQ(remove(&why), -1);
  EXPECT_NE(why.find("dpdk_telemetry.v2"), std::string::npos) << why;
  EXPECT_TRUE(fs::exists(dir_ / "config"));
  EXPECT_TRUE(fs::exists(dir_ / "dpdk_telemetry.v2"));
}

TEST_F(StaleDirTest, ALiveMultiProcessSocketKeepsIt) {
  fds_.push_back(bound("mp_socket", SOCK_DGRAM));
  std::string why;
  EXPECT_EQ(remove(&why), -1);
  EXPECT_NE(why.find("mp_socket"), std::string::npos) << why;
  EXPECT_TRUE(fs::exists(dir_ / "mp_socket"));
}

TEST_F(StaleDirTest, AFlockedFbarrayKeepsIt) {
  int fd = open((dir_ / "fbarray_memzone").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  fds_.push_back(fd);
  ASSERT_EQ(flock(fd, LOCK_SH), 0);  // as a DPDK process using the memory
  std::string why;
  EXPECT_EQ(remove(&why), -1);
  EXPECT_NE(why.find("fbarray_memzone"), std::string::npos) << why;
  EXPECT_TRUE(fs::exists(dir_ / "fbarray_memzone"));
}

TEST_F(StaleDirTest, AConfigUnderTheLockOfALivePrimaryKeepsIt) {
  // fcntl locks are per process: the primary is another process here.
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  child_ = fork();
  ASSERT_GE(child_, 0);
  if (child_ == 0) {
    int fd = open((dir_ / "config").c_str(), O_RDWR);
    struct flock fl{};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = 0;
    fl.l_len = 1;  // DPDK locks a range of the file, not all of it
    char ok = (fd >= 0 && fcntl(fd, F_SETLK, &fl) == 0) ? 'y' : 'n';
    (void)!write(ready[1], &ok, 1);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char ok = 0;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  close(ready[0]);
  ASSERT_EQ(ok, 'y');
  std::string why;
  EXPECT_EQ(remove(&why), -1);
  EXPECT_NE(why.find("config"), std::string::npos) << why;
  EXPECT_TRUE(fs::exists(dir_ / "config"));
  // The primary dies (kill -9): the same directory is now stale.
  kill(child_, SIGKILL);
  waitpid(child_, nullptr, 0);
  child_ = -1;
  EXPECT_EQ(remove(), 6);
  EXPECT_FALSE(fs::exists(dir_));
}

TEST_F(StaleDirTest, AnEntryDpdkDoesNotMakeKeepsIt) {
  fs::create_directories(dir_ / "mine");
  std::string why;
  EXPECT_EQ(remove(&why), -1);
  EXPECT_NE(why.find("mine"), std::string::npos) << why;
  EXPECT_TRUE(fs::exists(dir_ / "config"));
}

TEST(EalRuntimeDir, FollowsTheFilePrefixLikeEal) {
  const std::string base = getuid() == 0 ? "/var/run" : "";
  if (getuid() != 0) GTEST_SKIP() << "checks root's /var/run/dpdk";
  EXPECT_EQ(ealRuntimeDir({"x", "-l", "0"}), base + "/dpdk/rte");
  EXPECT_EQ(ealRuntimeDir({"x", "--file-prefix=abc"}), base + "/dpdk/abc");
  EXPECT_EQ(ealRuntimeDir({"x", "--file-prefix", "abc", "--no-shconf"}), base + "/dpdk/abc");
  EXPECT_EQ(ealRuntimeDir({"x", "--file-prefix=a", "--file-prefix=b"}), base + "/dpdk/b");
  EXPECT_EQ(ealRuntimeDir({"x", "--", "--file-prefix=app"}), base + "/dpdk/rte")
      << "after --: the application's arguments";
}

}  // namespace
}  // namespace dpu::dp
