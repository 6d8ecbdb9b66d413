// The events file: appends whole lines, rotates by size (FILE -> FILE.1 -> FILE.2, the
// oldest removed), never splits a line, counts what it wrote, reopens after logrotate, and
// reports a file it cannot open. Also the event hub writing through it.
#include "control/events/event_log.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace dpu::ctl {
namespace {

namespace fs = std::filesystem;

class EventLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "dpu_evlog.XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/eve.json";
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::vector<std::string> lines(const std::string& p) {
    std::vector<std::string> out;
    std::ifstream in(p);
    std::string l;
    while (std::getline(in, l)) out.push_back(l);
    return out;
  }
  static std::string line(int i) {
    // 50 bytes + newline, distinct per i.
    std::string s = absl::StrCat("{\"event_type\":\"drop\",\"n\":", i, ",\"pad\":\"");
    s.append(48 - s.size(), 'x');
    return s + "\"}";
  }

  std::string dir_, path_;
};

TEST_F(EventLogTest, RotatesBySizeKeepingWholeLines) {
  // 51-byte lines, 200-byte files: 3 lines per file.
  auto log = EventLog::open(EventLogOptions{path_, 200, 2});
  ASSERT_TRUE(log.ok()) << log.status();
  for (int i = 0; i < 10; ++i) {
    (*log)->append(line(i));
    if (i % 2) (*log)->flush();
  }
  (*log)->flush();
  // 10 lines: [0 1 2] [3 4 5] [6 7 8] [9]; keep 2 -> the first file was removed.
  EXPECT_EQ(lines(path_), std::vector<std::string>({line(9)}));
  EXPECT_EQ(lines(path_ + ".1"), std::vector<std::string>({line(6), line(7), line(8)}));
  EXPECT_EQ(lines(path_ + ".2"), std::vector<std::string>({line(3), line(4), line(5)}));
  EXPECT_FALSE(fs::exists(path_ + ".3"));
  for (const char* suffix : {"", ".1", ".2"}) {
    EXPECT_LE(fs::file_size(path_ + suffix), 200u) << suffix;
  }
  EventLogStats s = (*log)->stats();
  EXPECT_EQ(s.lines, 10u);
  EXPECT_EQ(s.bytes, 10u * 51);
  EXPECT_EQ(s.rotations, 3u);
  EXPECT_EQ(s.errors, 0u);
  struct stat st {};
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
}

TEST_F(EventLogTest, AppendsToAnExistingFileAndCountsItsSize) {
  std::ofstream(path_) << line(100) << "\n" << line(101) << "\n";  // 102 bytes
  auto log = EventLog::open(EventLogOptions{path_, 160, 1});
  ASSERT_TRUE(log.ok());
  (*log)->append(line(0));  // 153: fits
  (*log)->append(line(1));  // 204: rotates first
  (*log)->flush();
  EXPECT_EQ(lines(path_ + ".1"), std::vector<std::string>({line(100), line(101), line(0)}));
  EXPECT_EQ(lines(path_), std::vector<std::string>({line(1)}));
}

TEST_F(EventLogTest, ALineLargerThanTheLimitStillGetsWritten) {
  auto log = EventLog::open(EventLogOptions{path_, 20, 1});
  ASSERT_TRUE(log.ok());
  (*log)->append(line(0));
  (*log)->append(line(1));
  (*log)->flush();
  EXPECT_EQ(lines(path_), std::vector<std::string>({line(1)}));
  EXPECT_EQ(lines(path_ + ".1"), std::vector<std::string>({line(0)}));
}

TEST_F(EventLogTest, NoRotationWhenMaxBytesIsZeroAndKeepZeroDeletes) {
  {
    auto log = EventLog::open(EventLogOptions{path_, 0, 3});
    ASSERT_TRUE(log.ok());
    for (int i = 0; i < 50; ++i) (*log)->append(line(i));
  }  // destructor flushes
  EXPECT_EQ(lines(path_).size(), 50u);
  EXPECT_FALSE(fs::exists(path_ + ".1"));
  auto log = EventLog::open(EventLogOptions{path_, 100, 0});
  ASSERT_TRUE(log.ok());
  (*log)->append(line(0));
  (*log)->flush();
  EXPECT_EQ(lines(path_), std::vector<std::string>({line(0)}));
  EXPECT_FALSE(fs::exists(path_ + ".1"));
}

TEST_F(EventLogTest, ReopenFollowsLogrotate) {
  auto log = EventLog::open(EventLogOptions{path_, 0, 1});
  ASSERT_TRUE(log.ok());
  (*log)->append(line(0));
  (*log)->flush();
  fs::rename(path_, path_ + ".old");  // what logrotate does
  (*log)->append(line(1));
  (*log)->flush();  // still the moved file
  (*log)->reopen();
  (*log)->append(line(2));
  (*log)->flush();
  EXPECT_EQ(lines(path_ + ".old"), std::vector<std::string>({line(0), line(1)}));
  EXPECT_EQ(lines(path_), std::vector<std::string>({line(2)}));
}

TEST_F(EventLogTest, UnwritablePathIsAClearError) {
  auto log = EventLog::open(EventLogOptions{dir_ + "/no/such/dir/eve.json", 0, 1});
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.status().message().find("no/such/dir/eve.json: cannot open"), std::string::npos)
      << log.status();
}

}  // namespace
}  // namespace dpu::ctl
