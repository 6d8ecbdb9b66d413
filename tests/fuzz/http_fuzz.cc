// Fuzz target (--- http ---): the HTTP layer as the packet path drives it: TCP segments of one
// connection through the stream normalizer (dataplane/normalize/tcp_stream.h), the new
// in-order bytes of each direction to libhtp (HttpInspector, dataplane/normalize/http.h),
// bodies de-chunked / decompressed and scanned as files by the DPI engine.
//
// Input: byte 0 picks the settings (bits 0-2: libhtp personality; bits 3-4: content-encoding
// layers decoded, 1..4; bit 5: a tiny compression bomb limit; bit 6: TCP windows of 16 bytes
// instead of 4 KiB). Then records until the input ends; record byte c: bit 0 the direction
// (0: client -> server, 1: server -> client), bits 1-2 the operation:
//   0  in-order data: length = next byte + 1, then that many payload bytes (fewer at the end)
//   1  retransmission: back = next byte, length = next byte + 1: the direction's last `back`
//      sent bytes again (or bit 3 of c set: each of them + 1, different bytes) followed by
//      `length` new bytes from the input (overlap: compared by the normalizer)
//   2  a segment beyond a gap: skip = next byte + 1, length = next byte + 1, bytes (dropped
//      out of order; its bytes never reach libhtp)
//   3  the connection ends (HttpInspector::end: open files close truncated unless complete),
//      and a new one starts (a new slot, new TCP streams)
//
// Invariants, beyond no crash / leak / UB:
// - a file's bytes (the fileBytes hook, what the DPI scanned) are exactly its fileinfo size,
//   its sha256 is OpenSSL's one-shot digest of them, its state CLOSED or TRUNCATED;
// - the rules that fired on a file are libyara's matches on its bytes (one buffer), each rule
//   once per file; rule indexes valid; strings of events NUL-terminated;
// - every file opened (counter `files`) is closed exactly once; slots all free at the end;
// - libhtp never gets bytes the normalizer did not accept as new in-order stream bytes.
#include <openssl/evp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "dataplane/normalize/http.h"
#include "dataplane/normalize/tcp_stream.h"
#include "rules/compile/yara_translate.h"
#include "rules/compile/yara_validate.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using namespace dpu;
using namespace dpu::dp;

const char* kRules = R"(
rule pe_header { condition: uint16(0) == 0x5A4D }
rule mz_at_0 { strings: $mz = "MZ" condition: $mz at 0 }
rule small_pe { condition: uint16(0) == 0x5A4D and filesize < 64 }
rule eicar { strings: $e = "EICAR-TEST" condition: $e }
rule head { strings: $h = "<html" nocase condition: $h in (0..32) }
rule gz_in_file { condition: uint16(0) == 0x8B1F }
rule tiny { condition: filesize < 4 }
rule two_ab { strings: $a = "ab" condition: #a == 2 }
rule not_x { strings: $x = "xyz" condition: not $x and filesize > 8 }
rule hexy { strings: $h = { 4D 5A ?? 00 } condition: $h }
)";

struct Rules {
  std::shared_ptr<const rules::CompiledDpi> dpi;
  rules::YaraRulesPtr yara;
  std::vector<std::string> accepted;
};

const Rules& theRules() {
  static Rules* r = [] {
    auto* x = new Rules;
    rules::DpiModel m;
    m.sources.push_back({"f", kRules});
    rules::ConfigErrorList errs;
    auto c = rules::compileDpi(m, errs);
    FUZZ_CHECK(c.ok());
    x->dpi = *c;
    x->yara = rules::yaraCompile(m.sources, errs);
    FUZZ_CHECK(x->yara != nullptr);
    for (const rules::DpiRule& d : x->dpi->rules)
      if (!d.is_private) x->accepted.push_back(d.id());
    std::sort(x->accepted.begin(), x->accepted.end());
    return x;
  }();
  return *r;
}

struct Runtime {
  std::shared_ptr<DpiRuntime> dpi;
  std::shared_ptr<HttpRuntime> http;
};

// One runtime per settings byte (built once: Hyperscan scratch, libhtp configuration).
const Runtime& runtimeFor(uint8_t opt) {
  static Runtime* rts[128] = {};
  uint8_t k = opt & 0x3f;
  if (rts[k] == nullptr) {
    auto* r = new Runtime;
    DpiSettings ds;
    ds.streams_per_worker = 64;
    ds.depth_bytes = 0;
    auto d = DpiRuntime::create(theRules().dpi, ds, 1);
    FUZZ_CHECK(d.ok());
    r->dpi = *d;
    // htp_server_personality_t values libhtp 0.5 implements (not IIS_4_0 = 3, IIS_5_0 = 4:
    // validation refuses those, see DpiConfig.HttpPersonalityLibhtpDoesNotImplementIsRefused).
    static const int kPersonalities[8] = {0, 1, 2, 5, 6, 7, 8, 9};
    HttpSettings hs;
    hs.personality = kPersonalities[k & 7];
    hs.decompress_layers = 1 + ((k >> 3) & 3);
    if (k & 0x20) hs.bomb_limit_bytes = 16;
    hs.flow_slots_per_worker = 2;
    hs.http_events = true;
    auto h = HttpRuntime::create(hs, r->dpi, 1, {});
    if (!h.ok()) std::fprintf(stderr, "http_fuzz: %s\n", std::string(h.status().message()).c_str());
    FUZZ_CHECK(h.ok());
    r->http = *h;
    rts[k] = r;
  }
  return *rts[k];
}

bool terminated(const char* s, size_t cap) { return std::memchr(s, 0, cap) != nullptr; }

void checkInfo(const HttpEventInfo& i) {
  FUZZ_CHECK(i.present);
  FUZZ_CHECK(terminated(i.method, sizeof(i.method)) && terminated(i.host, sizeof(i.host)) &&
             terminated(i.url, sizeof(i.url)) && terminated(i.content_type, sizeof(i.content_type)) &&
             terminated(i.filename, sizeof(i.filename)));
}

struct Sink final : HttpSink {
  std::string bytes[2];          // the open file's bytes per direction
  std::set<uint32_t> fired[2];   // rules fired on it
  bool open[2] = {false, false};
  uint64_t closed = 0;
  void fileBytes(const HttpEventInfo& f, const uint8_t* p, size_t n) override {
    checkInfo(f);
    FUZZ_CHECK(f.has_file && f.file_dir < 2);
    FUZZ_CHECK(f.size == bytes[f.file_dir].size());  // size so far, before these bytes
    open[f.file_dir] = true;
    bytes[f.file_dir].append(reinterpret_cast<const char*>(p), n);
  }
  void fileScanned(const DpiOutcome& o, const HttpEventInfo& f) override {
    checkInfo(f);
    FUZZ_CHECK(f.has_file && f.file_dir < 2);
    for (uint32_t k = 0; k < o.nfired; ++k) {
      FUZZ_CHECK(o.fired[k] < theRules().dpi->rules.size());
      FUZZ_CHECK(fired[f.file_dir].insert(o.fired[k]).second);  // once per file
    }
  }
  void fileClosed(const HttpEventInfo& f) override {
    checkInfo(f);
    FUZZ_CHECK(f.has_file && f.file_dir < 2);
    const int d = f.file_dir;
    const std::string& b = bytes[d];
    FUZZ_CHECK(f.size == b.size());
    FUZZ_CHECK(f.state == HttpFileState::kClosed || f.state == HttpFileState::kTruncated);
    FUZZ_CHECK(f.sha256_valid);
    unsigned char md[32];
    unsigned len = 0;
    EVP_Digest(b.data(), b.size(), md, &len, EVP_sha256(), nullptr);
    FUZZ_CHECK(len == 32 && std::memcmp(md, f.sha256, 32) == 0);
    // The appliance's matches on the file = libyara's on the same bytes.
    const Rules& r = theRules();
    std::vector<std::string> want;
    for (const std::string& id : rules::yaraScan(r.yara.get(), reinterpret_cast<const uint8_t*>(b.data()), b.size()))
      if (std::binary_search(r.accepted.begin(), r.accepted.end(), id)) want.push_back(id);
    std::vector<std::string> got;
    for (uint32_t k : fired[d]) got.push_back(r.dpi->rules[k].id());
    std::sort(got.begin(), got.end());
    if (got != want) {
      std::fprintf(stderr, "http_fuzz: file of %zu bytes (%s): ours {", b.size(),
                   f.state == HttpFileState::kClosed ? "closed" : "truncated");
      for (const auto& g : got) std::fprintf(stderr, " %s", g.c_str());
      std::fprintf(stderr, " }, libyara {");
      for (const auto& w : want) std::fprintf(stderr, " %s", w.c_str());
      std::fprintf(stderr, " }\n");
      FUZZ_CHECK(got == want);
    }
    bytes[d].clear();
    fired[d].clear();
    open[d] = false;
    ++closed;
  }
  void transaction(const HttpEventInfo& t) override { checkInfo(t); }
};

struct Conn {
  HttpFlow flow;
  TcpStreamDir dir[2];
  uint32_t isn[2] = {1000, 0xfffffff0u};  // the server's wraps around 2^32
  std::string sent[2];                    // every byte sent per direction (stream order)
  uint32_t next[2] = {0, 0};              // next sequence offset to send
  bool stopped = false;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 8192) return 0;
  const Runtime& rt = runtimeFor(data[0]);
  HttpRuntime& http = *rt.http;
  TcpStreamPool pool((data[0] & 0x40) ? 16 : 4096, 4);
  Sink sink;
  const uint64_t files0 = http.worker(0).counters[kHttpFiles];
  const uint64_t closed0 = 0;
  Conn c;
  // A new connection: a slot, and both streams' sequence numbers known (SYN, SYN-ACK).
  auto startConn = [&]() {
    c = Conn{};
    FUZZ_CHECK(HttpInspector::open(http, 0, c.flow));
    for (int d = 0; d < 2; ++d) {
      TcpSegment s;
      s.seq = c.isn[d];
      s.ack = d ? c.isn[0] + 1 : 0;
      s.flags = d ? 0x12 : 0x02;
      tcpStreamSegment(pool, c.dir[d], c.dir[d ^ 1], s, false);
    }
  };
  size_t i = 1;
  auto byte = [&](uint8_t dflt) { return i < size ? data[i++] : dflt; };
  auto endConn = [&]() {
    HttpInspector::end(http, 0, c.flow, sink);
    FUZZ_CHECK(!sink.open[0] && !sink.open[1]);
    tcpStreamRelease(pool, c.dir[0]);
    tcpStreamRelease(pool, c.dir[1]);
  };
  // One segment of direction d: stream offset `off` (relative to the ISN + 1), bytes p[0, n).
  auto segment = [&](int d, uint32_t off, const uint8_t* p, uint32_t n) {
    TcpSegment s;
    s.seq = c.isn[d] + 1 + off;
    s.ack = c.isn[d ^ 1] + 1 + c.next[d ^ 1];
    s.flags = 0x10 | 0x08;
    s.payload = p;
    s.len = n;
    TcpSegResult r = tcpStreamSegment(pool, c.dir[d], c.dir[d ^ 1], s, false);
    if (r.verdict != TcpSegVerdict::kAccept || r.len == 0) return;
    FUZZ_CHECK(r.off + r.len <= n);
    // New in-order bytes only: they continue what libhtp was given.
    FUZZ_CHECK(r.seq - (c.isn[d] + 1) == uint32_t(c.sent[d].size()));
    c.sent[d].append(reinterpret_cast<const char*>(p + r.off), r.len);
    if (off + n > c.next[d]) c.next[d] = off + n;
    if (c.stopped) return;
    if (!HttpInspector::data(http, 0, c.flow, d == 0, p + r.off, r.len, 1, sink)) c.stopped = true;
  };
  startConn();
  std::vector<uint8_t> buf;
  while (i < size) {
    const uint8_t op = byte(0);
    const int d = op & 1;
    switch ((op >> 1) & 3) {
      case 0: {
        uint32_t n = uint32_t(byte(0)) + 1;
        n = uint32_t(std::min<size_t>(n, size - i));
        segment(d, c.next[d], data + i, n);
        i += n;
        break;
      }
      case 1: {
        uint32_t back = std::min<uint32_t>(byte(0), uint32_t(c.sent[d].size()));
        uint32_t n = uint32_t(byte(0)) + 1;
        n = uint32_t(std::min<size_t>(n, size - i));
        buf.assign(c.sent[d].end() - back, c.sent[d].end());
        if (op & 8)
          for (uint8_t& b : buf) b = uint8_t(b + 1);
        buf.insert(buf.end(), data + i, data + i + n);
        i += n;
        segment(d, uint32_t(c.sent[d].size()) - back, buf.data(), uint32_t(buf.size()));
        break;
      }
      case 2: {
        uint32_t skip = uint32_t(byte(0)) + 1;
        uint32_t n = uint32_t(byte(0)) + 1;
        n = uint32_t(std::min<size_t>(n, size - i));
        segment(d, c.next[d] + skip, data + i, n);  // out of order: dropped
        i += n;
        break;
      }
      default:
        endConn();
        startConn();
    }
  }
  endConn();
  // Every file opened was closed once; every slot is free again.
  FUZZ_CHECK(http.worker(0).counters[kHttpFiles] - files0 == sink.closed - closed0);
  FUZZ_CHECK(http.worker(0).free.size() == http.settings().flow_slots_per_worker);
  FUZZ_CHECK(pool.available() == pool.capacity());
  return 0;
}
