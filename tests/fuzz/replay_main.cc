// Non-fuzzing driver for a fuzz target: runs LLVMFuzzerTestOneInput once on every file named
// on the command line (directories are walked, files in sorted order), each input in a heap
// buffer of exactly its size. Built with the normal compiler in every build so ctest replays
// the committed seeds and crash regressions (tests/fuzz/regressions/) without libFuzzer; an
// invariant violation aborts, a sanitizer build reports memory errors. Exits 1 when no input
// was found, so a test pointed at an empty or missing folder cannot pass.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

bool readFile(const std::filesystem::path& p, std::vector<char>& out) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return false;
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg(argv[i]);
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      for (const auto& e : fs::recursive_directory_iterator(arg)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
    } else if (fs::is_regular_file(arg, ec)) {
      files.push_back(arg);
    } else {
      std::fprintf(stderr, "%s: not a file or directory (skipped)\n", argv[i]);
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "no inputs found in the given paths\n");
    return 1;
  }
  for (const fs::path& p : files) {
    std::vector<char> bytes;
    if (!readFile(p, bytes)) {
      std::fprintf(stderr, "%s: cannot read\n", p.c_str());
      return 1;
    }
    std::fprintf(stderr, "Running: %s (%zu bytes)\n", p.c_str(), bytes.size());
    std::unique_ptr<uint8_t[]> buf(new uint8_t[bytes.size()]);  // new[0] is valid
    std::copy(bytes.begin(), bytes.end(), buf.get());
    LLVMFuzzerTestOneInput(buf.get(), bytes.size());
  }
  std::printf("ran %zu inputs\n", files.size());
  return 0;
}
