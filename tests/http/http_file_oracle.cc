// --- http --- libyara's side of the HTTP file differential (tests/http/
// http_file_differential.py, docs/http.md).
//
//   http_file_oracle CONFIG DIR
//
// Loads CONFIG as dpu-appliance does (its DPI rule files, named as the appliance names them:
// rule ids "<file>:<rule>"), compiles it with our engine (the public rules it accepts) and
// with libyara (linked in-process, each source its own namespace), then scans every file of
// DIR whose name does not start with '.' with libyara, one buffer per file (offset 0 = the
// file's first byte, filesize = its size). Prints
//   accepted<TAB>ID        for every public rule our engine accepts
//   match<TAB>FILE<TAB>ID  for every rule libyara matches on FILE that our engine accepts
// (libyara's verdict restricted to the rules the appliance runs). Exit 1 on any error.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "control/config/config_loader.h"
#include "rules/compile/yara_translate.h"
#include "rules/compile/yara_validate.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: http_file_oracle CONFIG DIR\n");
    return 2;
  }
  auto cfg = dpu::ctl::loadConfigFile(argv[1]);
  if (!cfg.ok()) {
    std::fprintf(stderr, "http_file_oracle: %s\n", std::string(cfg.status().message()).c_str());
    return 1;
  }
  auto m = dpu::ctl::toModel(*cfg);
  if (!m.ok()) {
    std::fprintf(stderr, "http_file_oracle: %s\n", std::string(m.status().message()).c_str());
    return 1;
  }
  dpu::rules::ConfigErrorList errs;
  auto ours = dpu::rules::compileDpi(m->dpi, errs);  // the Hyperscan database from the cache_dir
  if (!ours.ok()) {
    std::fprintf(stderr, "http_file_oracle: our compile: %s\n", std::string(ours.status().message()).c_str());
    return 1;
  }
  dpu::rules::ConfigErrorList yerrs;
  dpu::rules::YaraRulesPtr yara = dpu::rules::yaraCompile(m->dpi.sources, yerrs);
  if (!yara) {
    std::fprintf(stderr, "http_file_oracle: libyara refused the rules (%zu errors)\n", yerrs.size());
    return 1;
  }
  std::vector<std::string> accepted;
  for (const dpu::rules::DpiRule& r : (*ours)->rules)
    if (!r.is_private) accepted.push_back(r.id());
  std::sort(accepted.begin(), accepted.end());
  for (const std::string& id : accepted) std::printf("accepted\t%s\n", id.c_str());
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(argv[2]))
    if (e.is_regular_file() && e.path().filename().string()[0] != '.') files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& p : files) {
    const std::string data = dpu::rules::readFileBytes(p.string());
    for (const std::string& id :
         dpu::rules::yaraScan(yara.get(), reinterpret_cast<const uint8_t*>(data.data()), data.size())) {
      if (std::binary_search(accepted.begin(), accepted.end(), id))
        std::printf("match\t%s\t%s\n", p.filename().c_str(), id.c_str());
    }
  }
  return 0;
}
