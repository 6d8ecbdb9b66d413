// --- http --- replay --extract-files (dataplane/stages/dpi/file_extract.h) without EAL: files
// named by their sha256 with the bytes given, two workers and two directions apart, an empty
// file, the byte bound (a file that would pass it is not written at all, counted), files
// never closed removed; nothing left behind but the closed files.
#include "dataplane/stages/dpi/file_extract.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace dpu::dp {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  std::string path;
  TempDir() {
    char t[] = "/tmp/file_extract_test.XXXXXX";
    path = mkdtemp(t);
  }
  ~TempDir() { fs::remove_all(path); }
  std::set<std::string> names() const {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(path)) out.insert(e.path().filename().string());
    return out;
  }
};

std::string read(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The fileinfo of a closed file holding `bytes` (sha256 as the HTTP layer computes it).
HttpEventInfo closedInfo(const std::string& bytes, uint8_t dir, std::string* hex) {
  HttpEventInfo f{};
  f.present = f.has_file = true;
  f.file_dir = dir;
  f.state = HttpFileState::kClosed;
  f.size = bytes.size();
  unsigned len = 0;
  EVP_Digest(bytes.data(), bytes.size(), f.sha256, &len, EVP_sha256(), nullptr);
  f.sha256_valid = len == 32;
  hex->clear();
  char b[3];
  for (uint8_t x : f.sha256) {
    snprintf(b, sizeof(b), "%02x", x);
    *hex += b;
  }
  return f;
}

void feed(FileExtractor& x, uint32_t w, int32_t pos, uint8_t dir, const std::string& s, size_t piece) {
  for (size_t k = 0; k < s.size(); k += piece)
    x.data(w, pos, dir, reinterpret_cast<const uint8_t*>(s.data()) + k, std::min(piece, s.size() - k));
}

TEST(FileExtract, FilesNamedBySha256WithTheirBytes) {
  TempDir d;
  std::string a = "MZ" + std::string(5000, 'a'), b = "response of worker 1", h1, h2, h3;
  {
    FileExtractor x(d.path, 1 << 20, 2);
    feed(x, 0, 7, 1, a, 1000);   // interleaved with an upload of the same flow
    feed(x, 0, 7, 0, "up", 1);
    feed(x, 1, 7, 1, b, 3);      // same position, other worker: another flow
    x.close(0, 7, closedInfo(a, 1, &h1));
    x.close(1, 7, closedInfo(b, 1, &h2));
    x.close(0, 7, closedInfo("up", 0, &h3));
    x.close(0, 9, closedInfo("", 1, &h3));  // an empty body: no bytes ever came
    const FileExtractor::Stats st = x.stats();
    EXPECT_EQ(st.files, 4u);
    EXPECT_EQ(st.bytes, a.size() + b.size() + 2);
    EXPECT_EQ(st.skipped + st.errors, 0u);
  }
  std::string he;
  closedInfo("", 1, &he);
  std::string hu;
  closedInfo("up", 0, &hu);
  EXPECT_EQ(d.names(), (std::set<std::string>{h1, h2, hu, he}));
  EXPECT_EQ(read(d.path + "/" + h1), a);
  EXPECT_EQ(read(d.path + "/" + h2), b);
  EXPECT_EQ(read(d.path + "/" + hu), "up");
  EXPECT_EQ(read(d.path + "/" + he), "");
}

TEST(FileExtract, BoundSkipsWholeFilesAndUnclosedFilesAreRemoved) {
  TempDir d;
  std::string small(100, 's'), big(1000, 'b'), fits(480, 'f'), h, hf;
  {
    FileExtractor x(d.path, 600, 1);
    feed(x, 0, 1, 1, small, 40);
    x.close(0, 1, closedInfo(small, 1, &h));
    feed(x, 0, 2, 1, big, 300);  // passes the bound halfway: not written at all
    std::string hb;
    x.close(0, 2, closedInfo(big, 1, &hb));
    feed(x, 0, 3, 1, fits, 100);  // its bytes went back to the budget: 100 + 480 fit
    x.close(0, 3, closedInfo(fits, 1, &hf));
    feed(x, 0, 4, 1, "never closed", 4);
    EXPECT_EQ(x.stats().files, 2u);
    EXPECT_EQ(x.stats().skipped, 1u);
  }  // the unclosed file's partial bytes go with the extractor
  EXPECT_EQ(d.names(), (std::set<std::string>{h, hf}));
  EXPECT_EQ(read(d.path + "/" + h), small);
  EXPECT_EQ(read(d.path + "/" + hf), fits);
}

}  // namespace
}  // namespace dpu::dp
