// Test-only helper of the DPI tests (tests/dataplane/stages/dpi_stage_test.cc,
// tests/dataplane/normalize/http_test.cc): YARA source text compiled as one rule source "t"
// by the real compiler (rules::compileDpi); a compile error fails the calling test.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "rules/compile/yara_translate.h"

namespace dpu::test {

inline std::shared_ptr<const rules::CompiledDpi> compileDpiText(const std::string& text) {
  rules::DpiModel m;
  m.sources.push_back({"t", text});
  rules::ConfigErrorList errs;
  auto c = rules::compileDpi(m, errs);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : nullptr;
}

}  // namespace dpu::test
