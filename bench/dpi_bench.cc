// dpi_bench: our DPI engine (YARA -> Hyperscan streaming + condition evaluation) against
// libyara's yr_rules_scan_mem, same rules, same payloads, same run.
//
//   dpi_bench [--min-time S] FILE_OR_DIR...
//
// The rules are the ones our engine accepts from the given files: their source text is cut
// out of the files (no imports, no unsupported rules) and compiled by libyara too, so both
// engines run exactly the same rule set. Payloads of 64 B, 512 B, 1460 B and 64 KiB are built
// from a fixed seed (printable text with some of the rules' strings planted), and both
// engines must report the same matching rules on every payload before anything is timed.
// Printed per size: Gbit/s and ns per scan of each engine and the ratio; then compile time
// and stream state per flow direction (Hyperscan stream + match state).
#include <hs/hs.h>
#include <yara.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "rules/compile/yara_translate.h"
#include "rules/compile/yara_validate.h"
#include "dataplane/stages/dpi_stage.h"

namespace fs = std::filesystem;
using namespace dpu::rules;
using Clock = std::chrono::steady_clock;

static double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// The accepted rules' text: from each rule's first line to the line before the next rule of
// the file (accepted or not).
static std::string acceptedText(const std::string& text, const CompiledDpi& d) {
  std::set<int> starts;
  for (const DpiRule& r : d.rules) starts.insert(r.line);
  for (const DpiUnsupported& u : d.unsupported) starts.insert(u.line);
  std::vector<std::string> lines;
  std::stringstream ss(text);
  for (std::string l; std::getline(ss, l);) lines.push_back(l);
  std::string out;
  for (const DpiRule& r : d.rules) {
    auto next = starts.upper_bound(r.line);
    int end = next == starts.end() ? int(lines.size()) + 1 : *next;
    for (int i = r.line; i < end && i <= int(lines.size()); ++i) {
      const std::string& l = lines[size_t(i - 1)];
      if (l.rfind("import", 0) == 0 || l.rfind("include", 0) == 0) continue;
      out += l + "\n";
    }
  }
  return out;
}

int main(int argc, char** argv) {
  double min_time = 0.5;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--min-time" && i + 1 < argc) min_time = std::stod(argv[++i]);
    else args.push_back(a);
  }
  const std::vector<std::string> files = yaraFiles(args);
  if (files.empty()) {
    std::fprintf(stderr, "usage: dpi_bench [--min-time S] FILE_OR_DIR...\n");
    return 2;
  }
  // 1. Cut the accepted rules out of every file (one namespace per file, as in production).
  DpiModel model;
  size_t total_rules = 0;
  for (const std::string& f : files) {
    DpiModel one;
    one.sources.push_back({fs::path(f).filename().string(), readFileBytes(f)});
    ConfigErrorList errs;
    DpiCompileOptions o;
    o.compile_hyperscan = false;
    auto c = compileDpi(one, errs, o);
    if (!c.ok()) continue;
    total_rules += (*c)->rules.size() + (*c)->unsupported.size();
    std::string t = acceptedText(one.sources[0].text, **c);
    if (!t.empty()) model.sources.push_back({fs::path(f).filename().string(), t});
  }
  // 2. Compile both (ours without the disk cache: Hyperscan compile time included).
  ConfigErrorList errs;
  auto t0 = Clock::now();
  auto ours = compileDpi(model, errs);
  double ours_ms = msSince(t0);
  if (!ours.ok()) {
    std::fprintf(stderr, "our compile failed: %s\n", std::string(ours.status().message()).c_str());
    return 1;
  }
  const CompiledDpi& d = **ours;
  ConfigErrorList yerrs;
  t0 = Clock::now();
  YaraRulesPtr yr = yaraCompile(model.sources, yerrs);
  double yara_ms = msSince(t0);
  if (!yr) {
    std::fprintf(stderr, "libyara rejected the extracted rules: %s\n",
                 yerrs.empty() ? "?" : formatError(yerrs[0]).c_str());
    return 1;
  }
  size_t public_rules = 0, need = 0;
  for (const DpiRule& r : d.rules) public_rules += !r.is_private, need += r.needs_match;
  std::printf("rules that can only match with one of their strings present: %zu; conditions "
              "read filesize: %s\n", need, d.uses_filesize ? "yes" : "no");
  std::printf("rules: %zu in %zu files, %zu accepted (%zu public) and used by both engines; "
              "%zu Hyperscan expressions\n",
              total_rules, files.size(), d.rules.size(), public_rules, d.patterns.size());

  // 3. Payloads: printable text with planted samples of the rules' strings.
  std::mt19937 rng(7);
  std::vector<std::string> samples;
  for (const DpiString& s : d.strings)
    if (!s.sample.empty() && s.sample_at < 0) samples.push_back(s.sample);
  // Mostly clean traffic: printable filler; one payload in four carries one sample string at
  // a random place (whole, when it fits).
  auto makePayload = [&](size_t n) {
    std::string p;
    while (p.size() < n) p += char(" abcdefghijklmnopqrstuvwxyz0123456789.,/=&?\r\n"[rng() % 46]);
    if (!samples.empty() && rng() % 4 == 0) {
      const std::string& s = samples[rng() % samples.size()];
      if (s.size() <= n) p.replace(rng() % (n - s.size() + 1), s.size(), s);
    }
    return p;
  };
  const size_t sizes[] = {64, 512, 1460, 65536};
  dpu::dp::DpiSettings ds;
  ds.streams_per_worker = 1;
  ds.ooo_slots_per_worker = 1;
  auto rt = dpu::dp::DpiRuntime::create(*ours, ds, 1);
  if (!rt.ok()) {
    std::fprintf(stderr, "%s\n", std::string(rt.status().message()).c_str());
    return 1;
  }
  auto& w = (*rt)->worker(0);
  std::vector<uint8_t> ms(d.matchStateBytes());
  hs_stream_t* st = w.block_stream;
  auto oursScan = [&](const std::string& p, std::vector<std::string>* names) {
    d.resetMatchState(ms.data());
    CompiledDpi::setFilesize(ms.data(), p.size());
    DpiMatchCtx ctx{&d, ms.data(), 0, false};
    if (st != nullptr) {
      hs_scan_stream(st, p.data(), unsigned(p.size()), 0, w.scratch, dpiMatchCallback, &ctx);
      hs_reset_stream(st, 0, w.scratch, dpiMatchCallback, &ctx);  // end of data, ready again
    }
    uint32_t hit[256];
    uint32_t n = 0;
    if (d.needsEvaluation(ctx.changed)) {
      n = d.evaluate(ms.data(), hit, 256);
    } else {
      n = uint32_t(std::min<size_t>(d.empty_hits.size(), 256));
      std::copy(d.empty_hits.begin(), d.empty_hits.begin() + n, hit);
    }
    if (names != nullptr) {
      for (uint32_t i = 0; i < std::min<uint32_t>(n, 256); ++i) names->push_back(d.rules[hit[i]].id());
      std::sort(names->begin(), names->end());
    }
    return n;
  };
  std::printf("\n%-8s %8s | %12s %12s | %12s %12s | %8s | %s\n", "payload", "payloads", "ours Gbit/s",
              "ours ns/scan", "yara Gbit/s", "yara ns/scan", "ratio", "matches (equal)");
  for (size_t n : sizes) {
    const size_t count = n >= 65536 ? 16 : 256;
    std::vector<std::string> payloads;
    for (size_t i = 0; i < count; ++i) payloads.push_back(makePayload(n));
    size_t matched = 0;
    for (const std::string& p : payloads) {
      std::vector<std::string> a;
      oursScan(p, &a);
      std::vector<std::string> b = yaraScan(yr.get(), reinterpret_cast<const uint8_t*>(p.data()), p.size());
      if (a != b) {
        std::fprintf(stderr, "MISMATCH on a %zu-byte payload: ours %zu rules, libyara %zu\n", n,
                     a.size(), b.size());
        return 1;
      }
      matched += !a.empty();
    }
    auto timeIt = [&](auto&& fn) {
      size_t scans = 0;
      auto s = Clock::now();
      double el = 0;
      do {
        for (const std::string& p : payloads) fn(p);
        scans += payloads.size();
        el = std::chrono::duration<double>(Clock::now() - s).count();
      } while (el < min_time);
      return el / double(scans);  // seconds per scan
    };
    double ours_s = timeIt([&](const std::string& p) { oursScan(p, nullptr); });
    // Where our time goes: the condition evaluation alone (match state of the last scan).
    uint32_t hit[256];
    double eval_s = timeIt([&](const std::string&) { d.evaluate(ms.data(), hit, 256); });
    double yara_s = timeIt([&](const std::string& p) {
      yr_rules_scan_mem(yr.get(), reinterpret_cast<const uint8_t*>(p.data()), p.size(),
                        SCAN_FLAGS_NO_TRYCATCH, [](YR_SCAN_CONTEXT*, int, void*, void*) { return CALLBACK_CONTINUE; },
                        nullptr, 0);
    });
    std::printf("%-8zu %8zu | %12.3f %12.0f | %12.3f %12.0f | %7.1fx | %zu of %zu payloads match (equal); "
                "of our ns/scan, condition evaluation %.0f\n",
                n, count, 8.0 * double(n) / ours_s / 1e9, ours_s * 1e9, 8.0 * double(n) / yara_s / 1e9,
                yara_s * 1e9, yara_s / ours_s, matched, count, eval_s * 1e9);
  }
  std::printf("\ncompile: ours %.0f ms (libyara validation + translation + Hyperscan %.0f ms), "
              "libyara %.0f ms\n", ours_ms, d.compile_ms, yara_ms);
  std::printf("state per flow direction: Hyperscan stream %zu B + match state %zu B "
              "(+ %zu B fired bits) = %zu B\n",
              d.streamStateBytes(), d.matchStateBytes(), (*rt)->msStride() - d.matchStateBytes(),
              (*rt)->bytesPerStream());
  return 0;
}
