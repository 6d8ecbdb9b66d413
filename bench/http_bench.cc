// --- http --- http_bench: HTTP file inspection (libhtp + bodies scanned as files, the raw
// stream still scanned with the HTTP report mask, as the packet path does) beside raw-stream
// DPI alone, on the same sessions in the same run (docs/http.md, bench/RESULTS.md).
//
//   http_bench [--sessions N] [--body BYTES] [--min-time S] [RULE_FILE_OR_DIR...]
//
// N HTTP/1.1 sessions (default 256) of one GET and a response whose body (default 64 KiB of
// printable text with a PE header) is sent as Content-Length, chunked, gzip, and gzip inside
// chunked (a quarter each), cut into 1460-byte segments. Rules: the given YARA files (the
// rules our engine accepts), else a PE-header rule and an EICAR rule. One worker, one core.
// Printed per mode: wire MB/s, decoded file MB/s, segments/s, and the ratio http / raw.
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "dataplane/normalize/http.h"
#include "rules/compile/yara_translate.h"

namespace fs = std::filesystem;
using namespace dpu;
using Clock = std::chrono::steady_clock;

namespace {

std::string gzip(const std::string& in) {
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, in.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = uInt(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string chunked(const std::string& b) {
  std::string out;
  char len[32];
  for (size_t k = 0; k < b.size(); k += 4000) {
    const size_t n = std::min<size_t>(4000, b.size() - k);
    snprintf(len, sizeof(len), "%zx\r\n", n);
    out += len + b.substr(k, n) + "\r\n";
  }
  return out + "0\r\n\r\n";
}

struct Session {
  std::string req;
  std::vector<std::string> res;  // segments
  size_t wire = 0, decoded = 0;
};

}  // namespace

int main(int argc, char** argv) {
  uint32_t sessions = 256;
  size_t body_bytes = 65536;
  double min_time = 2.0;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--sessions" && i + 1 < argc) sessions = uint32_t(std::stoul(argv[++i]));
    else if (a == "--body" && i + 1 < argc) body_bytes = std::stoul(argv[++i]);
    else if (a == "--min-time" && i + 1 < argc) min_time = std::stod(argv[++i]);
    else files.push_back(a);
  }
  rules::DpiModel m;
  for (const std::string& f : files) {
    std::vector<fs::path> paths;
    if (fs::is_directory(f)) {
      for (auto& e : fs::recursive_directory_iterator(f))
        if (e.path().extension() == ".yar" || e.path().extension() == ".yara") paths.push_back(e.path());
    } else {
      paths.push_back(f);
    }
    for (const fs::path& p : paths) {
      std::ifstream in(p);
      std::stringstream ss;
      ss << in.rdbuf();
      m.sources.push_back({p.string(), ss.str()});
    }
  }
  if (m.sources.empty())
    m.sources.push_back({"builtin", R"(
rule pe_header { condition: uint16(0) == 0x5A4D }
rule eicar { strings: $e = "X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*" condition: $e }
)"});
  rules::ConfigErrorList errs;
  auto c = rules::compileDpi(m, errs);
  if (!c.ok()) {
    fprintf(stderr, "rules: %s\n", std::string(c.status().message()).c_str());
    return 1;
  }
  std::shared_ptr<const rules::CompiledDpi> dpi = *c;
  dp::DpiSettings ds;
  ds.streams_per_worker = sessions * 4 + 16;
  ds.depth_bytes = 0;
  auto drt = dp::DpiRuntime::create(dpi, ds, 1);
  if (!drt.ok()) return 1;
  dp::HttpSettings hs;
  hs.flow_slots_per_worker = sessions + 1;
  hs.fileinfo_events = false;
  auto hrt = dp::HttpRuntime::create(hs, *drt, 1, {});
  if (!hrt.ok()) return 1;

  // Sessions.
  std::vector<Session> ss(sessions);
  for (uint32_t s = 0; s < sessions; ++s) {
    std::string body = "MZ";
    uint32_t x = 12345 + s;
    while (body.size() < body_bytes) {
      x = x * 1103515245u + 12345u;
      body += char(' ' + (x >> 16) % 90);
    }
    std::string h = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n", wire;
    switch (s % 4) {
      case 0: wire = h + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body; break;
      case 1: wire = h + "Transfer-Encoding: chunked\r\n\r\n" + chunked(body); break;
      case 2: {
        std::string g = gzip(body);
        wire = h + "Content-Encoding: gzip\r\nContent-Length: " + std::to_string(g.size()) + "\r\n\r\n" + g;
        break;
      }
      default: wire = h + "Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(gzip(body));
    }
    ss[s].req = "GET /f" + std::to_string(s) + ".bin HTTP/1.1\r\nHost: bench.test\r\n\r\n";
    for (size_t k = 0; k < wire.size(); k += 1460) ss[s].res.push_back(wire.substr(k, 1460));
    ss[s].wire = wire.size() + ss[s].req.size();
    ss[s].decoded = body.size();
  }
  struct NullSink : dp::HttpSink {
    uint64_t fired = 0;
    void fileScanned(const dp::DpiOutcome& o, const dp::HttpEventInfo&) override { fired += o.nfired; }
    void fileClosed(const dp::HttpEventInfo&) override {}
    void transaction(const dp::HttpEventInfo&) override {}
  } sink;

  std::vector<dp::DpiDir> dirs(size_t(sessions) * 2);
  std::vector<dp::HttpFlow> flows(sessions);
  auto pass = [&](bool http, uint64_t& fired) {
    for (uint32_t s = 0; s < sessions; ++s) {
      dp::DpiDir& q = dirs[size_t(s) * 2];
      dp::DpiDir& r = dirs[size_t(s) * 2 + 1];
      q = dp::DpiDir{};
      r = dp::DpiDir{};
      if (http) {
        dp::HttpInspector::open(**hrt, 0, flows[s]);
        for (dp::DpiDir* d : {&q, &r}) {
          d->rt_id = (*drt)->id();
          d->flags |= dp::DpiDir::kMaskHttpStream;
        }
      }
      uint32_t qs = 1000, rs = 5000;
      dp::DpiOutcome o;
      auto feed = [&](dp::DpiDir& d, uint32_t& seq, const std::string& p, bool to_server) {
        if (http)
          dp::HttpInspector::data(**hrt, 0, flows[s], to_server, reinterpret_cast<const uint8_t*>(p.data()),
                                  uint32_t(p.size()), 1, sink);
        dp::DpiOutcome so;
        dp::DpiInspector::tcp(**drt, 0, d, reinterpret_cast<const uint8_t*>(p.data()), uint32_t(p.size()), seq,
                              0x10, so);
        seq += uint32_t(p.size());
        fired += so.nfired;
      };
      feed(q, qs, ss[s].req, true);
      for (const std::string& seg : ss[s].res) feed(r, rs, seg, false);
      if (http) dp::HttpInspector::end(**hrt, 0, flows[s], sink);
      dp::DpiInspector::end(**drt, 0, q, o);
      dp::DpiInspector::end(**drt, 0, r, o);
      fired += o.nfired;
    }
  };
  size_t wire = 0, decoded = 0, segs = 0;
  for (const Session& s : ss) {
    wire += s.wire;
    decoded += s.decoded;
    segs += s.res.size() + 1;
  }
  double rate[2] = {0, 0};
  for (int http = 0; http < 2; ++http) {
    uint64_t fired = 0;
    pass(http, fired);  // warm up
    sink.fired = 0;
    fired = 0;
    uint32_t reps = 0;
    const auto t0 = Clock::now();
    double secs = 0;
    do {
      pass(http, fired);
      ++reps;
      secs = std::chrono::duration<double>(Clock::now() - t0).count();
    } while (secs < min_time);
    rate[http] = double(wire) * reps / secs / 1e6;
    printf("%-28s %9.1f wire MB/s %9.1f decoded MB/s %10.0f segments/s  (stream matches %llu, file matches %llu, %u reps)\n",
           http ? "http (libhtp+files+stream)" : "raw stream only", rate[http],
           http ? double(decoded) * reps / secs / 1e6 : 0.0, double(segs) * reps / secs,
           (unsigned long long)fired / reps, (unsigned long long)sink.fired / reps, reps);
  }
  printf("ratio http / raw stream: %.2f (sessions %u, body %zu B, rules %zu, wire %zu B, decoded %zu B)\n",
         rate[1] / rate[0], sessions, body_bytes, dpi->rules.size(), wire, decoded);
  return 0;
}
