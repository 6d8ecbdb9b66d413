// --- http --- http_bench: DPI per core on HTTP downloads (docs/http.md, bench/RESULTS.md),
// three ways on the same connections in the same run:
//   raw stream   DpiInspector::tcp on each direction's in-order bytes (as without dpi.http)
//   http         the packet path with dpi.http: libhtp fed the in-order bytes, bodies
//                de-chunked / decompressed and scanned as files (DPI + SHA-256), the raw
//                stream still scanned with the HTTP report mask
//   files only   the same without the raw-stream scan (what skipping it would save when no
//                rule set is scoped to the stream; the packet path does not do that)
//   libyara      yr_rules_scan_mem on each decoded file (the files the http mode produced)
//
//   http_bench [--pcap FILE_OR_DIR]... [--sessions N] [--body BYTES] [--min-time S]
//              [--mode raw|http|files|yara|all] [--cache DIR] [RULE_FILE_OR_DIR...]
//
// Connections: the TCP connections of the given captures (Ethernet; every TCP packet, both
// directions, in capture order), else N synthetic HTTP/1.1 sessions (default 256) of one GET
// and a response whose body (default 64 KiB of printable text with a PE header) is sent as
// Content-Length, chunked, gzip, and gzip inside chunked (a quarter each), 1460-byte segments.
// Every packet goes through the TCP stream normalizer (tcpStreamSegment) as in the packet
// path; its new in-order bytes are what the modes scan. Rules: the rules our engine accepts
// from the given YARA files (cut out of the files as dpi_bench does, so libyara runs the same
// set), else a PE-header rule and an EICAR rule. One thread, one core.
// Printed per mode: wire MB/s (TCP payload), decoded file MB/s, packets/s, matches; then the
// ratios http / raw (packets/s) and http / libyara (decoded MB/s). --mode: only one of them;
// --cache DIR: the Hyperscan database cache (dpi.cache_dir), for repeated runs (perf).
#include <pcap/pcap.h>
#include <yara.h>
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_rules.h"
#include "dataplane/normalize/http.h"
#include "dataplane/normalize/tcp_stream.h"
#include "dataplane/packet/parser.h"
#include "rules/compile/yara_translate.h"
#include "rules/compile/yara_validate.h"

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

// One TCP packet of a connection: direction 0 = the client's.
struct Pkt {
  uint8_t dir = 0;
  uint8_t flags = 0;
  uint32_t seq = 0, ack = 0;
  std::string payload;
};
struct Conn {
  std::vector<Pkt> pkts;
  size_t wire = 0;  // TCP payload bytes
};

std::vector<Conn> syntheticSessions(uint32_t sessions, size_t body_bytes) {
  std::vector<Conn> out(sessions);
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
    Conn& c = out[s];
    const std::string req = "GET /f" + std::to_string(s) + ".bin HTTP/1.1\r\nHost: bench.test\r\n\r\n";
    uint32_t cs = 1000, ss = 5000;
    c.pkts.push_back({0, 0x02, cs - 1, 0, ""});
    c.pkts.push_back({1, 0x12, ss - 1, cs, ""});
    c.pkts.push_back({0, 0x18, cs, ss, req});
    cs += uint32_t(req.size());
    for (size_t k = 0; k < wire.size(); k += 1460) {
      c.pkts.push_back({1, 0x18, ss, cs, wire.substr(k, 1460)});
      ss += uint32_t(std::min<size_t>(1460, wire.size() - k));
    }
    c.pkts.push_back({0, 0x10, cs, ss, ""});
    c.wire = req.size() + wire.size();
  }
  return out;
}

// The TCP connections of Ethernet captures, parsed by the dataplane's parser; a connection
// is its 5-tuple (the client: the SYN's sender, else the side on the lower port's peer).
std::vector<Conn> captureConns(const std::vector<std::string>& paths, size_t& skipped) {
  std::vector<Conn> out;
  for (const std::string& p : paths) {
    char err[PCAP_ERRBUF_SIZE];
    pcap_t* pc = pcap_open_offline(p.c_str(), err);
    if (pc == nullptr) {
      std::fprintf(stderr, "http_bench: %s: %s\n", p.c_str(), err);
      continue;
    }
    if (pcap_datalink(pc) != DLT_EN10MB) {
      pcap_close(pc);
      ++skipped;
      continue;
    }
    std::map<std::string, std::pair<size_t, std::string>> idx;  // key -> (conn, client side)
    pcap_pkthdr* h;
    const u_char* d;
    while (pcap_next_ex(pc, &h, &d) == 1) {
      dp::PacketMeta m;
      if (dp::parsePacket(d, h->caplen, m) != dp::ParseStatus::kOk || !m.has_l4 || m.l4_proto != 6 ||
          m.is_fragment || uint32_t(m.payload_offset) + m.payload_len > h->caplen)
        continue;
      std::string a(reinterpret_cast<const char*>(m.src.b), 16), b(reinterpret_cast<const char*>(m.dst.b), 16);
      a += std::to_string(m.sport);
      b += std::to_string(m.dport);
      const std::string key = a < b ? a + "|" + b : b + "|" + a;
      auto it = idx.find(key);
      const bool syn = (m.tcp_flags & 0x12) == 0x02;
      if (it == idx.end() || (syn && !out[it->second.first].pkts.empty() &&
                              out[it->second.first].pkts.back().flags & 0x01)) {
        const std::string client = syn || m.dport < m.sport ? a : b;
        it = idx.insert_or_assign(key, std::make_pair(out.size(), client)).first;
        out.emplace_back();
      }
      Conn& c = out[it->second.first];
      Pkt k;
      k.dir = a == it->second.second ? 0 : 1;
      k.flags = m.tcp_flags;
      k.seq = m.tcp_seq;
      k.ack = m.tcp_ack;
      k.payload.assign(reinterpret_cast<const char*>(d) + m.payload_offset, m.payload_len);
      c.wire += k.payload.size();
      c.pkts.push_back(std::move(k));
    }
    pcap_close(pc);
  }
  return out;
}

struct FileSink : dp::HttpSink {
  uint64_t fired = 0;
  bool keep = false;                 // collect the decoded files (first pass)
  std::vector<std::string> files;    // closed files' bytes
  std::string cur[2];
  void fileScanned(const dp::DpiOutcome& o, const dp::HttpEventInfo&) override { fired += o.nfired; }
  void fileBytes(const dp::HttpEventInfo& f, const uint8_t* p, size_t n) override {
    if (keep) cur[f.file_dir & 1].append(reinterpret_cast<const char*>(p), n);
  }
  void fileClosed(const dp::HttpEventInfo& f) override {
    if (!keep) return;
    files.push_back(std::move(cur[f.file_dir & 1]));
    cur[f.file_dir & 1].clear();
  }
  void transaction(const dp::HttpEventInfo&) override {}
};

int countMatch(YR_SCAN_CONTEXT*, int msg, void*, void* user) {
  if (msg == CALLBACK_MSG_RULE_MATCHING) ++*static_cast<uint64_t*>(user);
  return CALLBACK_CONTINUE;
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t sessions = 256;
  size_t body_bytes = 65536;
  double min_time = 2.0;
  std::string mode = "all", cache;
  std::vector<std::string> files, pcaps;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--sessions" && i + 1 < argc) sessions = uint32_t(std::stoul(argv[++i]));
    else if (a == "--body" && i + 1 < argc) body_bytes = std::stoul(argv[++i]);
    else if (a == "--min-time" && i + 1 < argc) min_time = std::stod(argv[++i]);
    else if (a == "--pcap" && i + 1 < argc) pcaps.push_back(argv[++i]);
    else if (a == "--mode" && i + 1 < argc) mode = argv[++i];
    else if (a == "--cache" && i + 1 < argc) cache = argv[++i];
    else files.push_back(a);
  }
  // Rules: the accepted rules of the files (libyara runs exactly those), else the built-in.
  rules::DpiModel m;
  size_t total_rules = 0;
  for (const std::string& f : rules::yaraFiles(files)) {
    std::string t = bench::acceptedRulesText(fs::path(f).filename().string(), rules::readFileBytes(f), &total_rules);
    if (!t.empty()) m.sources.push_back({fs::path(f).filename().string(), t});
  }
  if (m.sources.empty())
    m.sources.push_back({"builtin", R"(
rule pe_header { condition: uint16(0) == 0x5A4D }
rule eicar { strings: $e = "X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*" condition: $e }
)"});
  m.cache_dir = cache;
  rules::ConfigErrorList errs;
  auto c = rules::compileDpi(m, errs);
  if (!c.ok()) {
    fprintf(stderr, "rules: %s\n", std::string(c.status().message()).c_str());
    return 1;
  }
  std::shared_ptr<const rules::CompiledDpi> dpi = *c;
  rules::YaraRulesPtr yr = rules::yaraCompile(m.sources, errs);
  if (!yr) {
    fprintf(stderr, "libyara rejected the accepted rules\n");
    return 1;
  }

  std::vector<std::string> pcap_files;
  for (const std::string& p : pcaps) {
    if (fs::is_directory(p)) {
      for (auto& e : fs::recursive_directory_iterator(p))
        if (e.path().extension() == ".pcap") pcap_files.push_back(e.path().string());
    } else {
      pcap_files.push_back(p);
    }
  }
  std::sort(pcap_files.begin(), pcap_files.end());
  size_t skipped = 0;
  std::vector<Conn> conns = pcap_files.empty() ? syntheticSessions(sessions, body_bytes)
                                                : captureConns(pcap_files, skipped);
  size_t wire = 0, pkts = 0;
  for (const Conn& k : conns) wire += k.wire, pkts += k.pkts.size();

  dp::DpiSettings ds;
  ds.streams_per_worker = uint32_t(conns.size()) * 4 + 16;
  ds.depth_bytes = 0;
  auto drt = dp::DpiRuntime::create(dpi, ds, 1);
  if (!drt.ok()) return 1;
  dp::HttpSettings hs;
  hs.flow_slots_per_worker = 4;
  hs.fileinfo_events = false;
  hs.decompress_layers = 3;
  auto hrt = dp::HttpRuntime::create(hs, *drt, 1, {});
  if (!hrt.ok()) return 1;
  dp::TcpStreamPool pool(4096, 4);
  FileSink sink;

  // One pass over every connection: packets through the normalizer, new bytes to the modes.
  // raw: the raw stream scanned too (the packet path always does: the stream-scoped rule
  // sets, and every rule once libhtp stops parsing a connection).
  auto pass = [&](bool http, bool raw, uint64_t& fired) {
    for (const Conn& k : conns) {
      dp::DpiDir dirs[2];
      dp::TcpStreamDir ts[2];
      dp::HttpFlow flow;
      bool parsing = http && dp::HttpInspector::open(**hrt, 0, flow);
      if (http)
        for (dp::DpiDir& d : dirs) {
          d.rt_id = (*drt)->id();
          d.flags |= dp::DpiDir::kMaskHttpStream;
        }
      for (const Pkt& p : k.pkts) {
        dp::TcpSegment s;
        s.seq = p.seq;
        s.ack = p.ack;
        s.flags = p.flags;
        s.payload = reinterpret_cast<const uint8_t*>(p.payload.data());
        s.len = uint32_t(p.payload.size());
        dp::TcpSegResult r = dp::tcpStreamSegment(pool, ts[p.dir], ts[p.dir ^ 1], s, false);
        if (r.verdict != dp::TcpSegVerdict::kAccept || r.len == 0) continue;
        const uint8_t* b = s.payload + r.off;
        if (parsing && !dp::HttpInspector::data(**hrt, 0, flow, p.dir == 0, b, r.len, 1, sink)) parsing = false;
        if (!raw) continue;
        dp::DpiOutcome so;
        dp::DpiInspector::tcp(**drt, 0, dirs[p.dir], b, r.len, r.seq, 0x10, so);
        fired += so.nfired;
      }
      if (http) dp::HttpInspector::end(**hrt, 0, flow, sink);
      for (dp::DpiDir& d : dirs) {
        dp::DpiOutcome o;
        dp::DpiInspector::end(**drt, 0, d, o);
        fired += o.nfired;
      }
      tcpStreamRelease(pool, ts[0]);
      tcpStreamRelease(pool, ts[1]);
    }
  };
  // The decoded files (for libyara and the decoded byte count): one http pass, kept.
  uint64_t warm = 0;
  sink.keep = true;
  pass(true, true, warm);
  sink.keep = false;
  size_t decoded = 0;
  for (const std::string& f : sink.files) decoded += f.size();

  std::printf("rules: %zu in the files, %zu accepted and run by both engines (%zu Hyperscan expressions)\n",
              total_rules ? total_rules : dpi->rules.size(), dpi->rules.size(), dpi->patterns.size());
  std::printf("connections: %zu (%s), packets %zu, TCP payload %zu B, decoded files %zu (%zu B)%s\n",
              conns.size(), pcap_files.empty() ? "synthetic" : "captures", pkts, wire, sink.files.size(),
              decoded, skipped ? " (captures not Ethernet skipped)" : "");
  auto timed = [&](auto&& once) {
    once();  // warm up
    uint32_t reps = 0;
    const auto t0 = Clock::now();
    double secs = 0;
    do {
      once();
      ++reps;
      secs = std::chrono::duration<double>(Clock::now() - t0).count();
    } while (secs < min_time);
    return std::make_pair(reps, secs);
  };
  // Rows: 0 raw stream only, 1 http (as the packet path), 2 http files without the raw stream.
  static const char* const kRow[3] = {"raw stream only", "http (libhtp+files+stream)", "http files, no raw stream"};
  static const char* const kMode[3] = {"raw", "http", "files"};
  double pps[3] = {0, 0, 0}, dec_rate[3] = {0, 0, 0}, yara_rate = 0;
  for (int row = 0; row < 3; ++row) {
    if (mode != "all" && mode != kMode[row]) continue;
    const bool http = row != 0;
    uint64_t fired = 0;
    sink.fired = 0;
    auto [reps, secs] = timed([&] { pass(http, row != 2, fired); });
    const uint32_t all = reps + 1;
    pps[row] = double(pkts) * reps / secs;
    if (http) dec_rate[row] = double(decoded) * reps / secs / 1e6;
    std::printf("%-28s %9.1f wire MB/s %9.1f decoded MB/s %10.0f packets/s  (stream matches %llu, file matches %llu per pass, %u reps)\n",
                kRow[row], double(wire) * reps / secs / 1e6, dec_rate[row], pps[row],
                (unsigned long long)(fired / all), (unsigned long long)(sink.fired / all), reps);
  }
  if (mode == "all" || mode == "yara") {
    uint64_t matches = 0;
    auto [reps, secs] = timed([&] {
      for (const std::string& f : sink.files)
        yr_rules_scan_mem(yr.get(), reinterpret_cast<const uint8_t*>(f.data()), f.size(), SCAN_FLAGS_NO_TRYCATCH,
                          countMatch, &matches, 0);
    });
    yara_rate = double(decoded) * reps / secs / 1e6;
    std::printf("%-28s %9s wire MB/s %9.1f decoded MB/s %10s packets/s  (file matches %llu per pass, %u reps)\n",
                "libyara on the decoded files", "-", yara_rate, "-",
                (unsigned long long)(matches / (reps + 1)), reps);
  }
  if (mode == "all")
    std::printf("ratios (packets/s): http / raw stream %.3f, http files without raw stream / raw stream %.3f; "
                "(decoded MB/s): http / libyara %.3f, http files without raw stream / libyara %.3f\n",
                pps[1] / pps[0], pps[2] / pps[0], dec_rate[1] / yara_rate, dec_rate[2] / yara_rate);
  return 0;
}
