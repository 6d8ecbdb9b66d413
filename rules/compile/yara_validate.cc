#include "rules/compile/yara_validate.h"
#include "rules/compile/progress.h"  // --- ops ---

#include <yara.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

namespace dpu::rules {
namespace {

void ensureInit() {
  static std::once_flag once;
  std::call_once(once, [] { yr_initialize(); });
}

struct CbState {
  ConfigErrorList* errors;
  std::string source;
  int failed = 0;
};

void onCompilerMessage(int level, const char* file, int line, const YR_RULE* /*rule*/,
                       const char* message, void* user) {
  auto* st = static_cast<CbState*>(user);
  if (level != YARA_ERROR_LEVEL_ERROR) return;  // warnings ("slowing down scanning") ignored
  ConfigError e;
  e.section = "dpi";
  e.file = file != nullptr && *file != '\0' ? file : st->source;
  e.line = line;
  e.field = "dpi.rule_files";
  e.reason = std::string("yara: ") + (message != nullptr ? message : "error");
  st->errors->push_back(std::move(e));
  ++st->failed;
}

int onScanMessage(YR_SCAN_CONTEXT* /*ctx*/, int message, void* data, void* user) {
  if (message == CALLBACK_MSG_RULE_MATCHING) {
    auto* rule = static_cast<YR_RULE*>(data);
    static_cast<std::vector<std::string>*>(user)->push_back(std::string(rule->ns->name) + ":" +
                                                             rule->identifier);
  }
  return CALLBACK_CONTINUE;
}

}  // namespace

void YaraRulesDeleter::operator()(YR_RULES* r) const {
  if (r != nullptr) yr_rules_destroy(r);
}

YaraRulesPtr yaraCompile(const std::vector<YaraSource>& sources, ConfigErrorList& errors) {
  ensureInit();
  YR_COMPILER* c = nullptr;
  if (yr_compiler_create(&c) != ERROR_SUCCESS) {
    errors.push_back({"dpi", "", -1, 0, "", "dpi", "yara: cannot create compiler", });
    return nullptr;
  }
  // The external variables file-scanning rule sets use (their rules are unsupported here: the
  // translator rejects the identifiers), defined so that libyara accepts those files.
  for (const char* ext : {"filename", "filepath", "extension", "filetype", "owner"})
    yr_compiler_define_string_variable(c, ext, "");
  int failed = 0;
  ProgressStep step("validating YARA files with libyara", sources.size(), "files", 1);  // --- ops ---
  for (const YaraSource& s : sources) {
    step.advance();
    // libyara reads a source as a C string: it would validate only the text before a NUL
    // byte while the translator compiles all of it. A YARA source is text: refuse it.
    if (size_t nul = s.text.find('\0'); nul != std::string::npos) {
      const int line = 1 + static_cast<int>(std::count(s.text.begin(), s.text.begin() + nul, '\n'));
      errors.push_back({"dpi", "", -1, line, s.name, "dpi.rule_files",
                        "yara: NUL byte in the source (a YARA rule file is text)"});
      failed = 1;
      break;
    }
    CbState st{&errors, s.name};
    yr_compiler_set_callback(c, onCompilerMessage, &st);
    // libyara stops accepting sources after the first error; one compiler per failing file
    // would be needed to report errors of later files, so errors of the first bad file win.
    int n = yr_compiler_add_string(c, s.text.c_str(), s.name.c_str());
    if (n > 0 || st.failed > 0) {
      if (st.failed == 0) errors.push_back({"dpi", "", -1, 0, s.name, "dpi.rule_files",
                                            "yara: compilation failed"});
      failed += n > 0 ? n : 1;
      break;
    }
  }
  YR_RULES* rules = nullptr;
  if (failed == 0 && yr_compiler_get_rules(c, &rules) != ERROR_SUCCESS) {
    errors.push_back({"dpi", "", -1, 0, "", "dpi", "yara: cannot build rules"});
    rules = nullptr;
  }
  yr_compiler_destroy(c);
  return YaraRulesPtr(failed == 0 ? rules : nullptr);
}

std::vector<std::string> yaraFiles(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  for (const std::string& a : paths) {
    std::error_code ec;
    if (!fs::is_directory(a, ec)) {
      out.push_back(a);
      continue;
    }
    for (auto& e : fs::recursive_directory_iterator(a, ec))
      if (e.is_regular_file() && (e.path().extension() == ".yar" || e.path().extension() == ".yara"))
        out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string readFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> yaraScan(YR_RULES* rules, const uint8_t* data, size_t len) {
  std::vector<std::string> out;
  yr_rules_scan_mem(rules, data, len, SCAN_FLAGS_NO_TRYCATCH, onScanMessage, &out, 0);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace dpu::rules
