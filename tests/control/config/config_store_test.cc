#include "control/config/config_store.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "control/config/config_loader.h"

namespace dpu::ctl {
namespace {

namespace fs = std::filesystem;

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void writeFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

v1::ApplianceConfig withUdpTimeout(uint32_t s) {
  v1::ApplianceConfig c;
  c.mutable_dataplane()->mutable_timeouts()->set_udp_s(s);
  return c;
}

// A fresh directory per test; mounts made by the test are detached and everything is removed
// at the end.
class ConfigStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = fs::temp_directory_path().string() + "/config_store_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr) << std::strerror(errno);
    root_ = tmpl;
    state_ = root_ + "/state";
  }
  void TearDown() override {
    for (auto it = mounts_.rbegin(); it != mounts_.rend(); ++it) ::umount2(it->c_str(), MNT_DETACH);
    std::error_code ec;
    for (auto& e : fs::recursive_directory_iterator(root_, ec)) {
      if (e.is_directory()) fs::permissions(e.path(), fs::perms::owner_all, ec);
    }
    fs::remove_all(root_, ec);
  }

  // Mounts a tmpfs of `size` on `dir` (created). Returns "" or why it could not.
  std::string mountTmpfs(const std::string& dir, const std::string& size) {
    ::mkdir(dir.c_str(), 0700);
    std::string opts = "size=" + size + ",mode=0700";
    if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, opts.c_str()) != 0) {
      return std::string("mount -t tmpfs on ") + dir + " failed: " + std::strerror(errno);
    }
    mounts_.push_back(dir);
    return "";
  }
  std::string remountReadOnly(const std::string& dir) {
    if (::mount(nullptr, dir.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr) != 0) {
      return std::string("remount,ro of ") + dir + " failed: " + std::strerror(errno);
    }
    return "";
  }

  // The committed file as a fresh process would read it.
  v1::ApplianceConfig onDisk() {
    auto c = loadConfigFile(state_ + "/config.json");
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : v1::ApplianceConfig();
  }

  std::string root_, state_;
  std::vector<std::string> mounts_;
};

TEST_F(ConfigStoreTest, NewDirectoryIsCreatedAndSeededAsVersion1) {
  const std::string nested = root_ + "/a/b";
  v1::ApplianceConfig seed = withUdpTimeout(30);
  seed.mutable_dataplane()->mutable_flow_table()->set_capacity_per_worker(2048);
  seed.set_version(99);  // a --config file's version is ignored
  auto store = ConfigStore::open(nested, &seed);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->version(), 1u);
  EXPECT_EQ((*store)->current().dataplane().timeouts().udp_s(), 30u);
  EXPECT_EQ((*store)->path(), nested + "/config.json");
  for (const std::string& d : {root_ + "/a", nested}) {
    struct stat st;
    ASSERT_EQ(::stat(d.c_str(), &st), 0) << d;
    EXPECT_EQ(st.st_mode & 0777, 0700u) << d;
  }
  std::string text = readFile(nested + "/config.json");
  EXPECT_NE(text.find("\"version\": \"1\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"capacity_per_worker\": 2048"), std::string::npos) << text;
  EXPECT_NE(text.find("\"udp_s\": 30"), std::string::npos) << text;
  EXPECT_FALSE(exists(nested + "/config.json.tmp"));
}

TEST_F(ConfigStoreTest, NoSeedCommitsTheEmptyDocument) {
  auto store = ConfigStore::open(state_, nullptr);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->version(), 1u);
  v1::ApplianceConfig expected;
  expected.set_version(1);
  EXPECT_EQ((*store)->current().SerializeAsString(), expected.SerializeAsString());
  EXPECT_EQ(onDisk().SerializeAsString(), expected.SerializeAsString());
}

TEST_F(ConfigStoreTest, CommitIncrementsTheVersionAndReplacesTheFile) {
  auto store = ConfigStore::open(state_, nullptr);
  ASSERT_TRUE(store.ok()) << store.status();
  v1::ApplianceConfig next = withUdpTimeout(45);
  next.set_version(1000);  // ignored: the store numbers commits
  ASSERT_TRUE((*store)->commit(next).ok());
  EXPECT_EQ((*store)->version(), 2u);
  EXPECT_EQ(onDisk().version(), 2u);
  EXPECT_EQ(onDisk().dataplane().timeouts().udp_s(), 45u);
  ASSERT_TRUE((*store)->commit(withUdpTimeout(46)).ok());
  EXPECT_EQ((*store)->version(), 3u);
  EXPECT_EQ((*store)->current().dataplane().timeouts().udp_s(), 46u);
  EXPECT_EQ(onDisk().version(), 3u);
  EXPECT_EQ(onDisk().dataplane().timeouts().udp_s(), 46u);
  EXPECT_FALSE(exists(state_ + "/config.json.tmp"));
}

TEST_F(ConfigStoreTest, ReopenLoadsTheCommittedVersionAndIgnoresTheSeed) {
  {
    auto store = ConfigStore::open(state_, nullptr);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->commit(withUdpTimeout(10)).ok());
    v1::ApplianceConfig last = withUdpTimeout(20);
    last.mutable_dataplane()->set_non_ip(v1::DROP);
    ASSERT_TRUE((*store)->commit(last).ok());
  }
  v1::ApplianceConfig seed = withUdpTimeout(999);
  auto store = ConfigStore::open(state_ + "/", &seed);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->version(), 3u);
  EXPECT_EQ((*store)->stateDir(), state_);
  EXPECT_EQ((*store)->current().dataplane().timeouts().udp_s(), 20u);
  EXPECT_EQ((*store)->current().dataplane().non_ip(), v1::DROP);
  ASSERT_TRUE((*store)->commit(withUdpTimeout(21)).ok());
  EXPECT_EQ((*store)->version(), 4u);
}

TEST_F(ConfigStoreTest, UnparsableCommittedFileIsAnErrorNamingItAndIsKept) {
  ASSERT_EQ(::mkdir(state_.c_str(), 0700), 0);
  const std::string path = state_ + "/config.json";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"torn", "{\n  \"version\": \"4\",\n  \"dataplane\": {\n    \"flow_ta"},
      {"garbage", "\x7f" "ELF\x01\x02garbage"},
      {"empty", ""},
      {"unknown field", R"({"version": "4", "dataplane": {"flow_table": {"capacity": 1}}})"},
      {"no version", R"({"dataplane": {"non_ip": "DROP"}})"},
  };
  for (const auto& [name, content] : cases) {
    SCOPED_TRACE(name);
    writeFile(path, content);
    v1::ApplianceConfig seed = withUdpTimeout(30);
    auto store = ConfigStore::open(state_, &seed);
    ASSERT_FALSE(store.ok());
    EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss) << store.status();
    EXPECT_NE(store.status().message().find(path), std::string::npos) << store.status();
    EXPECT_NE(store.status().message().find("repair or remove"), std::string::npos)
        << store.status();
    EXPECT_EQ(readFile(path), content) << "the operator's file must not be overwritten";
  }
  writeFile(path, R"({"version": "4", "dataplane": {"flow_table": {"capacity": 1}}})");
  auto store = ConfigStore::open(state_, nullptr);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("capacity"), std::string::npos) << store.status();
}

TEST_F(ConfigStoreTest, LeftoverTmpFileIsIgnoredAndRemoved) {
  {
    auto store = ConfigStore::open(state_, nullptr);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->commit(withUdpTimeout(77)).ok());
  }
  const std::string tmp = state_ + "/config.json.tmp";
  writeFile(tmp, "{\"version\": \"3\", \"dataplane\": {\"timeouts\": {\"udp_s\": 5");  // crashed
  auto store = ConfigStore::open(state_, nullptr);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->version(), 2u);
  EXPECT_EQ((*store)->current().dataplane().timeouts().udp_s(), 77u);
  EXPECT_FALSE(exists(tmp));

  // A crash during the very first commit: only the tmp file exists, the seed is committed.
  const std::string fresh = root_ + "/fresh";
  ASSERT_EQ(::mkdir(fresh.c_str(), 0700), 0);
  writeFile(fresh + "/config.json.tmp", "{\"vers");
  v1::ApplianceConfig seed = withUdpTimeout(12);
  auto seeded = ConfigStore::open(fresh, &seed);
  ASSERT_TRUE(seeded.ok()) << seeded.status();
  EXPECT_EQ((*seeded)->version(), 1u);
  EXPECT_EQ((*seeded)->current().dataplane().timeouts().udp_s(), 12u);
  EXPECT_FALSE(exists(fresh + "/config.json.tmp"));
}

TEST_F(ConfigStoreTest, StateDirectoryThatIsAFileIsAnError) {
  const std::string file = root_ + "/plain";
  writeFile(file, "x");
  auto store = ConfigStore::open(file + "/state", nullptr);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find(file + " exists and is not a directory"),
            std::string::npos)
      << store.status();
}

// Commit on a directory the process may not write to (permission bits). Root (with
// CAP_DAC_OVERRIDE) is not stopped by permission bits: ReadOnlyMount covers that case.
TEST_F(ConfigStoreTest, ReadOnlyDirectoryKeepsTheCommittedVersion) {
  auto store = ConfigStore::open(state_, nullptr);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->commit(withUdpTimeout(50)).ok());
  ASSERT_EQ(::chmod(state_.c_str(), 0500), 0) << std::strerror(errno);
  const std::string probe = state_ + "/probe";
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT, 0600);
  if (fd >= 0) {
    ::close(fd);
    ::unlink(probe.c_str());
    ::chmod(state_.c_str(), 0700);
    GTEST_SKIP() << "permission bits are not enforced for this user (uid " << ::geteuid()
                 << ", e.g. root with CAP_DAC_OVERRIDE); ReadOnlyMount tests a read-only "
                    "state directory instead";
  }
  absl::Status st = (*store)->commit(withUdpTimeout(51));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied) << st;
  EXPECT_NE(st.message().find(state_ + "/config.json.tmp"), std::string::npos) << st;
  EXPECT_NE(st.message().find(std::strerror(EACCES)), std::string::npos) << st;
  EXPECT_NE(st.message().find("the committed config (version 2) is unchanged"),
            std::string::npos)
      << st;
  EXPECT_EQ((*store)->version(), 2u);
  EXPECT_EQ((*store)->current().dataplane().timeouts().udp_s(), 50u);
  EXPECT_EQ(onDisk().version(), 2u);
  EXPECT_EQ(onDisk().dataplane().timeouts().udp_s(), 50u);
  ::chmod(state_.c_str(), 0700);
  ASSERT_TRUE((*store)->commit(withUdpTimeout(52)).ok());
  EXPECT_EQ((*store)->version(), 3u);
}

TEST_F(ConfigStoreTest, ReadOnlyMountKeepsTheCommittedVersion) {
  if (std::string why = mountTmpfs(state_, "1m"); !why.empty()) {
    GTEST_SKIP() << "cannot test a read-only file system: " << why;
  }
  auto store = ConfigStore::open(state_, nullptr);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->commit(withUdpTimeout(60)).ok());
  if (std::string why = remountReadOnly(state_); !why.empty()) {
    GTEST_SKIP() << "cannot test a read-only file system: " << why;
  }
  absl::Status st = (*store)->commit(withUdpTimeout(61));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(state_ + "/config.json.tmp"), std::string::npos) << st;
  EXPECT_NE(st.message().find(std::strerror(EROFS)), std::string::npos) << st;
  EXPECT_NE(st.message().find("the committed config (version 2) is unchanged"),
            std::string::npos)
      << st;
  EXPECT_EQ((*store)->version(), 2u);
  EXPECT_EQ((*store)->current().dataplane().timeouts().udp_s(), 60u);
  EXPECT_EQ(onDisk().version(), 2u);
  EXPECT_EQ(onDisk().dataplane().timeouts().udp_s(), 60u);
  // A restart on the read-only directory still loads what was committed.
  auto again = ConfigStore::open(state_, nullptr);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->version(), 2u);
  // A read-only new state directory cannot be seeded: the error says so.
  const std::string sub = state_ + "/sub";
  auto seeded = ConfigStore::open(sub, nullptr);
  ASSERT_FALSE(seeded.ok());
  EXPECT_NE(seeded.status().message().find(sub), std::string::npos) << seeded.status();
  EXPECT_NE(seeded.status().message().find(std::strerror(EROFS)), std::string::npos)
      << seeded.status();
}

TEST_F(ConfigStoreTest, DiskFullKeepsTheCommittedVersion) {
  if (std::string why = mountTmpfs(state_, "16k"); !why.empty()) {
    GTEST_SKIP() << "cannot test a full file system: " << why;
  }
  auto store = ConfigStore::open(state_, nullptr);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->commit(withUdpTimeout(70)).ok());
  // Fill the file system.
  const std::string filler = state_ + "/filler";
  int fd = ::open(filler.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  std::string block(4096, 'x');
  int err = 0;
  for (int i = 0; i < 1024 && err == 0; ++i) {
    if (::write(fd, block.data(), block.size()) < 0) err = errno;
  }
  ::close(fd);
  ASSERT_EQ(err, ENOSPC) << "the 16k tmpfs did not fill up";

  absl::Status st = (*store)->commit(withUdpTimeout(71));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_NE(st.message().find("cannot persist config to " + state_ + "/config.json.tmp"),
            std::string::npos)
      << st;
  EXPECT_NE(st.message().find(std::strerror(ENOSPC)), std::string::npos) << st;
  EXPECT_NE(st.message().find("the committed config (version 2) is unchanged"),
            std::string::npos)
      << st;
  EXPECT_EQ((*store)->version(), 2u);
  EXPECT_EQ((*store)->current().dataplane().timeouts().udp_s(), 70u);
  EXPECT_EQ(onDisk().version(), 2u);
  EXPECT_EQ(onDisk().dataplane().timeouts().udp_s(), 70u);
  EXPECT_FALSE(exists(state_ + "/config.json.tmp"));

  // Space back: the next commit goes through with the next version.
  ASSERT_EQ(::unlink(filler.c_str()), 0);
  ASSERT_TRUE((*store)->commit(withUdpTimeout(72)).ok());
  EXPECT_EQ((*store)->version(), 3u);
  EXPECT_EQ(onDisk().dataplane().timeouts().udp_s(), 72u);
}

}  // namespace
}  // namespace dpu::ctl
