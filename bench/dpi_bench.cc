// dpi_bench: our DPI engine (YARA -> Hyperscan streaming + condition evaluation) against
// libyara's yr_rules_scan_mem, same rules, same payloads, same run.
//
//   dpi_bench [--min-time S] [--flows N] [--packets P] [--slot-bytes K] [--shards K] FILE_OR_DIR...
//
// The rules are the ones our engine accepts from the given files: their source text is cut
// out of the files (no imports, no unsupported rules) and compiled by libyara too, so both
// engines run exactly the same rule set. Payloads of 64 B, 512 B, 1460 B and 64 KiB are built
// from a fixed seed (printable text with some of the rules' strings planted), and both
// engines must report the same matching rules on every payload before anything is timed.
// Printed per size: Gbit/s and ns per scan of each engine and the ratio; then compile time
// and stream state per flow direction (Hyperscan stream + match state).
//
// Then the dataplane's two stream modes on N flow directions (default 1024) fed P packets
// each (default 8) of 64 / 512 / 1460 B, round-robin over the flows (so every packet of the
// compressed mode expands its direction's slot and compresses it back), through
// DpiInspector::tcp: full streams vs compressed slots of K bytes (default: DpiSettings),
// ns per packet and the ratio, the rules fired (must be equal in both modes), the size of the
// compact state after each packet (compressed stream, packed match state, total:
// median / p99 / max) and how many directions did not fit K; the expand + compress pair
// alone (hs_reset_and_expand_stream + hs_compress_stream on the flows' compressed streams);
// and libyara's yr_rules_scan_mem on each packet alone as the reference.
// Each stream-mode row also gives the engine's limit, timed in the same run: Hyperscan's own
// hs_scan_stream in a tight loop over the same packets, one stream per flow direction, same
// database, a match callback that only counts (as hsbench does), and the DPI stage's
// throughput as a fraction of it (limit ns / stage ns); and the directions left uninspected
// (DpiOutcome::no_stream: must be 0). Rows: 64 / 512 / 1460 B payloads and "imix", the
// payloads of IMIX 7:4:1 frames (60 / 590 / 1514 B frames of TCP over IPv4: 6 / 536 /
// 1460 B). The stream modes run twice: on the mostly clean payloads above and on a
// match-dense mix, every payload made of the rules' strings back to back, where condition
// evaluation, not Hyperscan, can dominate. --streams-only: the stream modes of the exact
// build only (no block-scan table, no prefiltered build); --mix clean|dense: only that
// payload mix in the stream modes (default both); --no-yara: the stream-mode rows leave out
// libyara's per-packet reference (a profile of the stage then holds our code and Hyperscan).
// Our build spreads the rules over dpi.shards databases (--shards K, default the product's);
// each stream-mode row also runs the stage on the same rules compiled into one database
// ("1db": dpi.shards 1) and gives its time over ours (1db/f, 1db/c: >= 0.8 is the target
// of the sharded layout), and hs_scan_stream is timed on that one database.
#include <hs/hs.h>
#include <yara.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_rules.h"
#include "rules/compile/yara_translate.h"
#include "rules/compile/yara_validate.h"
#include "dataplane/stages/dpi/dpi_runtime.h"

namespace fs = std::filesystem;
using namespace dpu::rules;
using Clock = std::chrono::steady_clock;

static double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// Percentile of a sorted vector.
static size_t pct(const std::vector<size_t>& v, double p) {
  if (v.empty()) return 0;
  return v[std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5))];
}

// Full vs compressed streams in DpiInspector::tcp (see the header comment).
template <typename MakePayload>
static void streamModes(std::shared_ptr<const CompiledDpi> dp, YR_RULES* yr, MakePayload& makePayload,
                        uint32_t nflows, uint32_t npackets, uint32_t slot_bytes, double min_time,
                        bool with_yara = true, std::shared_ptr<const CompiledDpi> single = nullptr) {
  using namespace dpu::dp;
  const CompiledDpi& d = *dp;
  DpiSettings full;
  full.stream_mode = DpiStreamMode::kFull;
  full.streams_per_worker = nflows;
  full.ooo_slots_per_worker = 1;
  full.prefilter_windows_per_worker = nflows;  // (prefiltered builds: a window per direction)
  full.depth_bytes = 0;
  DpiSettings comp = full;
  comp.stream_mode = DpiStreamMode::kCompressed;
  comp.compressed_slot_bytes = slot_bytes;
  comp.full_streams_per_worker = nflows;  // every direction that does not fit gets one
  auto rf = DpiRuntime::create(dp, full, 1);
  auto rc = DpiRuntime::create(dp, comp, 1);
  if (!rf.ok() || !rc.ok()) {
    std::fprintf(stderr, "runtime: %s\n", std::string((rf.ok() ? rc : rf).status().message()).c_str());
    return;
  }
  // The same rules in one database (dpi.shards 1): the stage with it, and Hyperscan's own
  // scan of it (the limit).
  if (!single) single = dp;
  const CompiledDpi& sd = *single;
  auto sf = DpiRuntime::create(single, full, 1);
  auto sc = DpiRuntime::create(single, comp, 1);
  if (!sf.ok() || !sc.ok()) {
    std::fprintf(stderr, "runtime: %s\n", std::string((sf.ok() ? sc : sf).status().message()).c_str());
    return;
  }
  std::printf("\nstream modes: %u flow directions x %u packets, round-robin; full = one "
              "Hyperscan stream per shard each (%zu shards: %zu B + %zu B match state; one "
              "database: %zu B), compressed = a %u B slot each (one database: as many B as its own default); 1db = the same rules in one "
              "database, hs = hs_scan_stream of that database\n",
              nflows, npackets, d.shards.size(), d.streamStateBytes(), (*rf)->msStride(),
              sd.streamStateBytes(), (*rc)->settings().compressed_slot_bytes);
  std::printf("%-8s | %10s %10s %7s | %9s %9s %6s %6s | %9s | %9s %9s %9s | %-34s | %8s | %7s | %s\n", "packet",
              "full ns/p", "comp ns/p", "comp/full", "1db full", "1db comp", "1db/f", "1db/c", "yara ns/p",
              "hs ns/p", "full/hs", "comp/hs",
              "compact state B med/p99/max (hs+ms)", "overflow", "uninsp.", "rules fired (equal)");
  // Payload sizes of a row; 0 = IMIX 7:4:1 of TCP payloads 6 / 536 / 1460 B.
  for (size_t size : {size_t(64), size_t(512), size_t(1460), size_t(0)}) {
    std::vector<std::string> pk(size_t(nflows) * npackets);
    std::mt19937 imix_rng(11);
    for (std::string& p : pk) {
      size_t n = size;
      if (n == 0) {
        const uint32_t r = imix_rng() % 12;
        n = r < 7 ? 6 : r < 11 ? 536 : 1460;
      }
      p = makePayload(n);
    }
    size_t pk_bytes = 0;
    for (const std::string& p : pk) pk_bytes += p.size();
    struct Mode { const DpiRuntime* rt; std::vector<DpiDir> dirs; std::vector<uint32_t> seq; uint64_t fired = 0, overflow = 0, no_stream = 0; };
    auto runOnce = [&](Mode& m, std::vector<size_t>* hs_sz, std::vector<size_t>* ms_sz,
                       std::vector<size_t>* tot_sz) {
      m.dirs.assign(nflows, DpiDir{});
      m.seq.assign(nflows, 1000);
      for (uint32_t k = 0; k < npackets; ++k) {
        for (uint32_t f = 0; f < nflows; ++f) {
          const std::string& p = pk[size_t(k) * nflows + f];
          DpiOutcome o;
          DpiInspector::tcp(*m.rt, 0, m.dirs[f], reinterpret_cast<const uint8_t*>(p.data()),
                            uint32_t(p.size()), m.seq[f], 0x10, o);
          m.seq[f] += uint32_t(p.size());
          m.fired += o.nfired;
          m.overflow += o.overflow;
          m.no_stream += o.no_stream;
          if (hs_sz != nullptr && !(m.dirs[f].flags & DpiDir::kFull) && m.dirs[f].slot != DpiDir::kNoSlot) {
            const uint8_t* s = m.rt->worker(0).cdata.get() +
                               size_t(m.dirs[f].slot) * m.rt->settings().compressed_slot_bytes;
            // (layout: u16 match-state bytes, u16 per shard stream bytes, see dpi_runtime.cc)
            uint16_t ml, one;
            size_t hl = 0;
            std::memcpy(&ml, s, 2);
            for (size_t k = 0; k < m.rt->shards(); ++k) {
              std::memcpy(&one, s + 2 + 2 * k, 2);
              hl += one;
            }
            hs_sz->push_back(hl);
            ms_sz->push_back(ml);
            tot_sz->push_back(hl + ml + 2 + 2 * m.rt->shards());
          }
        }
      }
      for (uint32_t f = 0; f < nflows; ++f) {
        DpiOutcome o;
        DpiInspector::end(*m.rt, 0, m.dirs[f], o);
        m.fired += o.nfired;
      }
    };
    Mode mf{rf->get(), {}, {}}, mc{rc->get(), {}, {}}, msf{sf->get(), {}, {}}, msc{sc->get(), {}, {}};
    std::vector<size_t> hs_sz, ms_sz, tot_sz;
    runOnce(mf, nullptr, nullptr, nullptr);
    runOnce(mc, &hs_sz, &ms_sz, &tot_sz);
    runOnce(msf, nullptr, nullptr, nullptr);
    runOnce(msc, nullptr, nullptr, nullptr);
    const uint64_t fired_full = mf.fired, fired_comp = mc.fired, overflow = mc.overflow;
    const bool fired_equal = fired_full == fired_comp && msf.fired == fired_full && msc.fired == fired_full;
    const uint64_t uninspected = mf.no_stream + mc.no_stream + msf.no_stream + msc.no_stream;
    // The engine's limit: hs_scan_stream alone over the same packets, a stream per
    // direction, round-robin like the stage, a callback that counts.
    std::vector<hs_stream_t*> hs_streams(nflows, nullptr);
    hs_scratch_t* hs_scratch = (*sf)->worker(0).scratch;
    uint64_t hs_matches = 0;
    auto hsCount = [](unsigned, unsigned long long, unsigned long long, unsigned, void* c) -> int {
      ++*static_cast<uint64_t*>(c);
      return 0;
    };
    auto hsOnce = [&]() {
      if (sd.db == nullptr) return;
      for (uint32_t f = 0; f < nflows; ++f) hs_open_stream(sd.db, 0, &hs_streams[f]);
      for (uint32_t k = 0; k < npackets; ++k) {
        for (uint32_t f = 0; f < nflows; ++f) {
          const std::string& p = pk[size_t(k) * nflows + f];
          hs_scan_stream(hs_streams[f], p.data(), unsigned(p.size()), 0, hs_scratch, hsCount, &hs_matches);
        }
      }
      for (uint32_t f = 0; f < nflows; ++f) hs_close_stream(hs_streams[f], hs_scratch, hsCount, &hs_matches);
    };
    std::sort(hs_sz.begin(), hs_sz.end());
    std::sort(ms_sz.begin(), ms_sz.end());
    std::sort(tot_sz.begin(), tot_sz.end());
    // Timed: interleaved rounds, medians.
    std::vector<double> tf, tc, ty, th, tsf, tsc;
    auto t_end = Clock::now() + std::chrono::duration<double>(min_time * 2);
    const double per = double(nflows) * npackets;
    // ns per packet of one pass of `fn`, appended to `into`
    auto timed = [&](std::vector<double>& into, auto&& fn) {
      const auto t0 = Clock::now();
      fn();
      into.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / per);
    };
    do {
      timed(tf, [&] { runOnce(mf, nullptr, nullptr, nullptr); });
      timed(tc, [&] { runOnce(mc, nullptr, nullptr, nullptr); });
      timed(tsf, [&] { runOnce(msf, nullptr, nullptr, nullptr); });
      timed(tsc, [&] { runOnce(msc, nullptr, nullptr, nullptr); });
      timed(th, hsOnce);
      if (!with_yara) continue;
      const auto t0 = Clock::now();
      const size_t ny = std::min<size_t>(pk.size(), 64);
      for (size_t i = 0; i < ny; ++i)
        yr_rules_scan_mem(yr, reinterpret_cast<const uint8_t*>(pk[i].data()), pk[i].size(), SCAN_FLAGS_NO_TRYCATCH,
                          [](YR_SCAN_CONTEXT*, int, void*, void*) { return CALLBACK_CONTINUE; }, nullptr, 0);
      ty.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / double(ny));
    } while (Clock::now() < t_end || tf.size() < 3);
    auto med = [](std::vector<double> v) {
      if (v.empty()) return 0.0;
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    char sizes[96];
    std::snprintf(sizes, sizeof sizes, "%zu/%zu/%zu (%zu+%zu)", pct(tot_sz, 0.5), pct(tot_sz, 0.99),
                  tot_sz.empty() ? 0 : tot_sz.back(), pct(hs_sz, 0.5), pct(ms_sz, 0.5));
    const std::string label = size == 0 ? "imix" : std::to_string(size);
    std::printf("%-8s | %10.0f %10.0f %6.2fx | %9.0f %9.0f %5.2fx %5.2fx | %9.0f | %9.0f %8.2fx %8.2fx | %-34s | %8llu | %7llu | "
                "%llu vs %llu (%s)\n", label.c_str(),
                med(tf), med(tc), med(tc) / med(tf), med(tsf), med(tsc), med(tsf) / med(tf),
                med(tsc) / med(tc), med(ty), med(th), med(th) / med(tf),
                med(th) / med(tc), sizes, (unsigned long long)overflow,
                (unsigned long long)uninspected, (unsigned long long)fired_full,
                (unsigned long long)fired_comp, fired_equal ? "equal" : "DIFFERENT");
    const double gbit = 8.0 * double(pk_bytes) / per;  // bits per packet
    std::printf("%-8s   payload %.0f B/packet: full %.2f Gbit/s, compressed %.2f Gbit/s, "
                "hs_scan_stream %.2f Gbit/s\n", "", double(pk_bytes) / per, gbit / med(tf),
                gbit / med(tc), gbit / med(th));
  }
  // The expand + compress pair alone, on compressed streams of flows that saw 8 x 1460 B.
  if (sd.db != nullptr) {
    const CompiledDpi& d = sd;
    hs_scratch_t* scratch = (*sf)->worker(0).scratch;
    std::vector<std::string> blobs;
    for (uint32_t f = 0; f < std::min<uint32_t>(nflows, 256); ++f) {
      hs_stream_t* st = nullptr;
      hs_open_stream(d.db, 0, &st);
      std::vector<uint8_t> ms(d.matchStateBytes());
      DpiMatchCtx ctx{&d, ms.data(), 0, false};
      for (int k = 0; k < 8; ++k) {
        std::string p = makePayload(1460);
        hs_scan_stream(st, p.data(), unsigned(p.size()), 0, scratch, dpiMatchCallback, &ctx);
      }
      size_t need = 0;
      hs_compress_stream(st, nullptr, 0, &need);
      std::string b(need, '\0');
      hs_compress_stream(st, b.data(), b.size(), &need);
      blobs.push_back(b);
      hs_close_stream(st, nullptr, nullptr, nullptr);
    }
    hs_stream_t* work = nullptr;
    hs_open_stream(d.db, 0, &work);
    std::vector<char> out(1 << 16);
    size_t iters = 0;
    auto t0 = Clock::now();
    double el = 0;
    do {
      for (const std::string& b : blobs) {
        size_t used = 0;
        hs_reset_and_expand_stream(work, b.data(), b.size(), nullptr, nullptr, nullptr);
        hs_compress_stream(work, out.data(), out.size(), &used);
      }
      iters += blobs.size();
      el = std::chrono::duration<double>(Clock::now() - t0).count();
    } while (el < min_time);
    std::vector<size_t> bs;
    for (auto& b : blobs) bs.push_back(b.size());
    std::sort(bs.begin(), bs.end());
    std::printf("expand + compress alone: %.0f ns per pair (compressed streams after 8 x 1460 B: "
                "median %zu B, max %zu B)\n", el * 1e9 / double(iters), pct(bs, 0.5), bs.back());
    hs_close_stream(work, nullptr, nullptr, nullptr);
  }
}

int main(int argc, char** argv) {
  double min_time = 0.5;
  uint32_t nflows = 1024, npackets = 8, slot_bytes = dpu::dp::DpiSettings{}.compressed_slot_bytes;
  bool streams_only = false, with_yara = true;
  uint32_t shards = 0;  // dpi.shards of our build (0: the default)
  std::string mix = "both";
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--min-time" && i + 1 < argc) min_time = std::stod(argv[++i]);
    else if (a == "--flows" && i + 1 < argc) nflows = uint32_t(std::stoul(argv[++i]));
    else if (a == "--packets" && i + 1 < argc) npackets = uint32_t(std::stoul(argv[++i]));
    else if (a == "--slot-bytes" && i + 1 < argc) slot_bytes = uint32_t(std::stoul(argv[++i]));
    else if (a == "--streams-only") streams_only = true;
    else if (a == "--no-yara") with_yara = false;
    else if (a == "--mix" && i + 1 < argc) mix = argv[++i];
    else if (a == "--shards" && i + 1 < argc) shards = uint32_t(std::stoul(argv[++i]));
    else args.push_back(a);
  }
  const std::vector<std::string> files = yaraFiles(args);
  if (files.empty() || (mix != "both" && mix != "clean" && mix != "dense")) {
    std::fprintf(stderr, "usage: dpi_bench [--min-time S] [--flows N] [--packets P] [--slot-bytes K] "
                         "[--streams-only] [--shards K] [--mix clean|dense|both] [--no-yara] FILE_OR_DIR...\n");
    return 2;
  }
  // 1. Cut the accepted rules out of every file (one namespace per file, as in production).
  DpiModel model;
  size_t total_rules = 0;
  for (const std::string& f : files) {
    std::string t = dpu::bench::acceptedRulesText(fs::path(f).filename().string(), readFileBytes(f), &total_rules);
    if (!t.empty()) model.sources.push_back({fs::path(f).filename().string(), t});
  }
  // 2. Compile both (ours without the disk cache: Hyperscan compile time included).
  // Cold compiles: the process's compile cache emptied before each.
  ConfigErrorList errs;
  model.shards = shards;
  clearDpiCompileCache();
  auto t0 = Clock::now();
  auto ours = compileDpi(model, errs);
  double ours_ms = msSince(t0);
  DpiModel one = model;
  one.shards = 1;
  one.full_recompile = true;
  ConfigErrorList one_errs;
  clearDpiCompileCache();
  auto t_one = Clock::now();
  auto single = compileDpi(one, one_errs);
  const double single_ms = msSince(t_one);
  if (!single.ok()) {
    std::fprintf(stderr, "single-database compile failed: %s\n", std::string(single.status().message()).c_str());
    return 1;
  }
  std::printf("cold compile: %zu shards %.0f ms (Hyperscan %.0f ms), one database %.0f ms "
              "(Hyperscan %.0f ms); %zu rules, %zu patterns\n",
              (*ours)->shards.size(), ours_ms, (*ours)->compile_ms, single_ms, (*single)->compile_ms,
              (*ours)->rules.size(), (*ours)->patterns.size());
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
  std::set<uint32_t> fs_rules;
  for (const auto& b : d.fs_breaks) fs_rules.insert(b.second);
  size_t capped = 0;
  for (uint32_t c : d.count_cap) capped += c != 0xffffffffu;
  std::printf("rules that can only match with one of their strings present: %zu; conditions "
              "read filesize: %s; rules with filesize thresholds: %zu (%zu thresholds), read "
              "otherwise (evaluated whenever filesize grows): %zu; counters capped: %zu of %u\n",
              need, d.uses_filesize ? "yes" : "no", fs_rules.size(), d.fs_breaks.size(),
              d.fs_every.size(), capped, d.num_counts);
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
  // Match-dense: the rules' strings back to back (the last one cut to fit).
  std::mt19937 dense_rng(13);
  auto makeDense = [&](size_t n) {
    std::string p;
    while (p.size() < n && !samples.empty()) p += samples[dense_rng() % samples.size()];
    p.resize(n, 'x');
    return p;
  };
  if (streams_only) {
    if (mix != "dense") {
      std::printf("\nmostly clean payloads (one in four carries a rule string):");
      streamModes(*ours, yr.get(), makePayload, nflows, npackets, slot_bytes, min_time, with_yara, *single);
    }
    if (mix != "clean") {
      std::printf("\nmatch-dense payloads (the rules' strings back to back):");
      streamModes(*ours, yr.get(), makeDense, nflows, npackets, slot_bytes, min_time, with_yara, *single);
    }
    return 0;
  }
  const size_t sizes[] = {64, 512, 1460, 65536};
  dpu::dp::DpiSettings ds;
  ds.streams_per_worker = 1;
  ds.ooo_slots_per_worker = 1;
  ds.prefilter_windows_per_worker = 1;
  auto rt = dpu::dp::DpiRuntime::create(*ours, ds, 1);
  if (!rt.ok()) {
    std::fprintf(stderr, "%s\n", std::string(rt.status().message()).c_str());
    return 1;
  }
  // The same rules with every regex and hex string of bounded width prefiltered
  // (HS_FLAG_PREFILTER + PCRE2 confirmation of each candidate): what the path Hyperscan-
  // refused expressions take costs.
  DpiCompileOptions pf_opt;
  pf_opt.prefilter_all = true;
  ConfigErrorList pf_errs;
  auto t_pf = Clock::now();
  auto pf = compileDpi(model, pf_errs, pf_opt);
  const double pf_ms = msSince(t_pf);
  if (!pf.ok()) {
    std::fprintf(stderr, "prefilter compile failed: %s\n", std::string(pf.status().message()).c_str());
    return 1;
  }
  auto pf_rt = dpu::dp::DpiRuntime::create(*pf, ds, 1);
  if (!pf_rt.ok()) {
    std::fprintf(stderr, "%s\n", std::string(pf_rt.status().message()).c_str());
    return 1;
  }
  std::vector<uint8_t> ms(std::max(d.matchStateBytes(), (*pf)->matchStateBytes()));
  // One payload as a block scan (stream opened, scanned, closed) + evaluation; prefilter
  // candidates confirmed on the payload itself (as DpiInspector::block does).
  auto scanWith = [&](const CompiledDpi& dd, dpu::dp::DpiRuntime::PerWorker& w, const std::string& p,
                      std::vector<std::string>* names, DpiWindow* stats) {
    dd.resetMatchState(ms.data());
    CompiledDpi::setFilesize(ms.data(), p.size());
    DpiWindow win;
    win.cur = reinterpret_cast<const uint8_t*>(p.data());
    win.cur_len = uint32_t(p.size());
    win.scratch = w.confirm.get();
    DpiMatchCtx ctx{&dd, ms.data(), 0, false, &win};
    for (size_t k = 0; k < w.block_streams.size(); ++k) {
      hs_stream_t* st = w.block_streams[k];
      ctx.ids = dd.shards[k].ids.data();
      win.at_end = false;
      hs_scan_stream(st, p.data(), unsigned(p.size()), 0, w.scratch, dpiMatchCallback, &ctx);
      win.at_end = true;
      hs_reset_stream(st, 0, w.scratch, dpiMatchCallback, &ctx);  // end of data, ready again
    }
    if (stats != nullptr) {
      stats->confirmed += win.confirmed;
      stats->rejected += win.rejected;
      stats->errors += win.errors;
    }
    uint32_t hit[256];
    uint32_t n = 0;
    if (dd.needsEvaluation(ctx.changed)) {
      n = dd.evaluate(ms.data(), hit, 256);
    } else {
      n = uint32_t(std::min<size_t>(dd.empty_hits.size(), 256));
      std::copy(dd.empty_hits.begin(), dd.empty_hits.begin() + n, hit);
    }
    if (names != nullptr) {
      for (uint32_t i = 0; i < std::min<uint32_t>(n, 256); ++i) names->push_back(dd.rules[hit[i]].id());
      std::sort(names->begin(), names->end());
    }
    return n;
  };
  auto& w = (*rt)->worker(0);
  auto& pf_w = (*pf_rt)->worker(0);
  auto oursScan = [&](const std::string& p, std::vector<std::string>* names) {
    return scanWith(d, w, p, names, nullptr);
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
    // The prefiltered build of the same rules: equal to libyara on every payload, then timed.
    DpiWindow pf_stats;
    for (const std::string& p : payloads) {
      std::vector<std::string> a;
      scanWith(**pf, pf_w, p, &a, &pf_stats);
      std::vector<std::string> b = yaraScan(yr.get(), reinterpret_cast<const uint8_t*>(p.data()), p.size());
      if (a != b) {
        std::fprintf(stderr, "PREFILTER MISMATCH on a %zu-byte payload: ours %zu rules, libyara %zu\n",
                     n, a.size(), b.size());
        return 1;
      }
    }
    double pf_s = timeIt([&](const std::string& p) { scanWith(**pf, pf_w, p, nullptr, nullptr); });
    std::printf("%-8s %8s | %12.3f %12.0f | prefiltered: %.1fx libyara, %.2fx the exact build's "
                "ns/scan; candidates per scan: %.2f confirmed, %.2f rejected, %.2f undecided\n",
                "  prefilt", "", 8.0 * double(n) / pf_s / 1e9, pf_s * 1e9, yara_s / pf_s, pf_s / ours_s,
                double(pf_stats.confirmed) / double(count), double(pf_stats.rejected) / double(count),
                double(pf_stats.errors) / double(count));
  }
  streamModes(*ours, yr.get(), makePayload, nflows, npackets, slot_bytes, min_time, true, *single);
  std::printf("\nmatch-dense payloads (the rules' strings back to back):");
  streamModes(*ours, yr.get(), makeDense, nflows, npackets, slot_bytes, min_time, true, *single);
  // The same per-packet path with the prefiltered build: every direction keeps a history
  // window (copied into after each packet) and candidates are confirmed on window + packet.
  std::printf("\nprefiltered build (history window %u B per direction):", (*pf)->prefilter_window);
  streamModes(*pf, yr.get(), makePayload, nflows, npackets, slot_bytes, min_time);
  std::printf("\ncompile: ours %.0f ms (libyara validation + translation + Hyperscan %.0f ms), "
              "libyara %.0f ms\n", ours_ms, d.compile_ms, yara_ms);
  std::printf("prefiltered build: %zu of %zu Hyperscan expressions prefiltered (%zu in the exact "
              "build), compile %.0f ms (Hyperscan %.0f ms); history window %u B per flow direction "
              "(%u B in the exact build); Hyperscan stream %zu B (exact build %zu B)\n",
              (*pf)->confirms.size(), (*pf)->patterns.size(), d.confirms.size(), pf_ms,
              (*pf)->compile_ms, (*pf)->prefilter_window, d.prefilter_window,
              (*pf)->streamStateBytes(), d.streamStateBytes());
  std::printf("state per flow direction: full streams: Hyperscan stream %zu B + match state %zu B "
              "(+ %zu B fired bits) = %zu B; compressed streams: a slot of %u B (see above for "
              "what the flows needed)\n",
              d.streamStateBytes(), d.matchStateBytes(), (*rt)->msStride() - d.matchStateBytes(),
              d.streamStateBytes() + (*rt)->msStride(), slot_bytes);
  return 0;
}
