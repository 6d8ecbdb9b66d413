// Compiled Suricata-format signatures (docs/signatures.md): the engine the DPI stage runs
// them with. No DPDK here (unit-tested without EAL).
//
// Per inspection stage (a packet's payload; an HTTP request's line and headers, its body; the
// response's line and headers, its body; a DNS query; a TLS ClientHello) and per buffer of
// that stage, one Hyperscan block-mode database of the rules' fast patterns (the content the
// rule names with `fast_pattern`, else its longest positive content, in any buffer of the
// stage). A buffer scanned with it yields candidate rules; rules without a positive content
// are candidates at every inspection of their stage. Candidates are confirmed in rule order
// (flowbit setters first, then priority, then load order) on the buffers as written: content
// chains with offset / depth / distance / within and Suricata's re-search of earlier
// contents when a relative one fails, PCRE2 (JIT), isdataat, bsize / urilen, byte_test /
// byte_jump / byte_extract, dsize, flow, flowbits, thresholds.
//
// A rule is evaluated at the one stage where every buffer it names is available (the latest
// of them), so an HTTP rule fires at most once per transaction; payload rules fire on every
// packet that matches, as in Suricata.
//
// Memory: everything is built here off the packet path; evaluate() uses the caller's
// SigScratch (made once per worker by makeScratch) and SigFlowState (per flow), and
// allocates nothing.
#pragma once

#include <hs/hs.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rules/compile/sig_parse.h"
#include "rules/model/signature.h"

struct pcre2_real_code_8;
struct pcre2_real_match_data_8;
struct pcre2_real_jit_stack_8;
struct pcre2_real_match_context_8;

namespace dpu::rules {

// A signature's index in CompiledSignatures::rules as the DPI stage reports it (events,
// verdicts), beside the YARA rules' plain indexes.
constexpr uint32_t kSigRuleBit = 0x40000000u;

// Inspection stages: when buffers are available together.
enum class SigStage : uint8_t {
  kPacket = 0,    // payload of one packet (TCP: its new in-order stream bytes)
  kRequest,       // HTTP request line + headers
  kRequestBody,   // + the request body
  kResponse,      // + the response line + headers
  kResponseBody,  // + the response body
  kDns,           // a DNS query
  kTls,           // a TLS ClientHello
  kCount
};
constexpr int kSigStageCount = int(SigStage::kCount);

// What one inspection sees.
struct SigInput {
  SigStage stage = SigStage::kPacket;
  const uint8_t* buf[kSigBufferCount] = {};
  uint32_t len[kSigBufferCount] = {};
  uint64_t present = 0;  // bit per SigBuffer available
  std::array<uint8_t, 16> src{}, dst{};  // this packet's (IPv4 as ::ffff:a.b.c.d)
  uint16_t sport = 0, dport = 0;
  uint8_t ip_proto = 0;  // 6, 17, 1, 58, ...
  bool to_server = true;  // direction: the flow's initiator -> responder
  bool established = false;
  bool has_flow = true;   // false: a packet not tracked as a flow (stateless)
  bool stream = false;    // the payload is stream bytes (TCP reassembled), not one packet's
  uint8_t app = 0;        // kAppNone / kAppHttp / kAppDns / kAppTls
  uint32_t dsize = 0;     // the packet's payload size
  uint64_t now_ns = 0;    // packet time (thresholds)
  static constexpr uint8_t kAppNone = 0, kAppHttp = 1, kAppDns = 2, kAppTls = 3;
  void set(SigBuffer b, const uint8_t* p, uint32_t n) {
    buf[int(b)] = p;
    len[int(b)] = n;
    present |= uint64_t(1) << int(b);
  }
};

// Per flow: the flowbits that are set (ids into CompiledSignatures::flowbit_names).
struct SigFlowState {
  static constexpr int kMaxBits = 15;
  uint16_t bits[kMaxBits];
  uint8_t n = 0;
  bool full = false;  // a set found no room (counted: SigScratch::flowbits_full)
  int find(uint16_t b) const {  // index in bits, -1 when not set
    for (uint8_t i = 0; i < n; ++i)
      if (bits[i] == b) return i;
    return -1;
  }
  bool has(uint16_t b) const { return find(b) >= 0; }
};

struct SigHit {
  uint32_t rule;      // index in CompiledSignatures::rules
  bool alert;         // false: matched but not alerted (noalert, threshold)
};

struct SigScratch;
struct SigScratchDeleter {
  void operator()(SigScratch* s) const;
};
using SigScratchPtr = std::unique_ptr<SigScratch, SigScratchDeleter>;

class CompiledSignatures {
 public:
  struct Rule {
    Signature sig;
    SigStage stage = SigStage::kPacket;
    std::vector<pcre2_real_code_8*> re;  // per buffer item (null unless pcre), flattened
    std::vector<uint32_t> re_at;         // buffers[i]'s first item's index in `re`
    struct Bit {
      uint8_t op;
      bool all;
      std::vector<uint16_t> ids;
    };
    std::vector<Bit> bits;
    bool sets_bits = false;
    int fp_buffer = -1;                  // the fast pattern's buffer (-1: none)
    std::string fp;                      // its bytes
    bool fp_nocase = false;
    std::string category;                // classification description ("" when unknown)
    int severity = 3;                    // priority (1 highest)
  };
  ~CompiledSignatures();

  std::vector<Rule> rules;                // in evaluation order
  std::vector<SigRefusal> refused;
  std::vector<std::string> flowbit_names;
  uint32_t threshold_slots = 0;           // threshold state entries per scratch
  // HTTP bodies (SigModel): bytes kept per body, buffers per worker; wantsBodies(dir):
  // some rule reads the request (0) / response (1) body.
  uint32_t body_limit = 65536, body_buffers = 256;
  bool wantsBodies(int dir) const {
    return stages_ & (1u << int(dir == 0 ? SigStage::kRequestBody : SigStage::kResponseBody));
  }
  // Buffers the appliance feeds (the rest are refused at compile, never silently unseen).
  static bool bufferInspected(SigBuffer b);

  // Candidates, then confirmation: appends to `hits` (at most `max_hits`; the rest counted
  // in SigScratch::hits_dropped) every rule that matched this inspection. `fs`: the flow's
  // state (null: no flow; flowbit conditions then see nothing set and sets are lost).
  uint32_t evaluate(const SigInput& in, SigFlowState* fs, SigScratch& scr, SigHit* hits,
                    uint32_t max_hits) const;

  // A scratch for one worker (Hyperscan scratch, PCRE2 match data and JIT stack, transform
  // buffers, candidate bitmap, threshold table).
  absl::StatusOr<SigScratchPtr> makeScratch() const;

  // Stages with at least one rule (bit per SigStage).
  uint32_t stages() const { return stages_; }
  bool empty() const { return rules.empty(); }

  struct Prefilter {
    hs_database_t* db = nullptr;
    std::vector<uint32_t> rule_of;        // pattern id -> rule
  };
  Prefilter pf[kSigStageCount][kSigBufferCount];
  std::vector<uint32_t> always[kSigStageCount];  // rules without a fast pattern, per stage
  uint32_t stages_ = 0;
  uint64_t compile_ns = 0;
  uint32_t patterns = 0;
};

// Per worker scratch.
struct SigScratch {
  hs_scratch_t* hs = nullptr;
  pcre2_real_match_data_8* md = nullptr;
  pcre2_real_match_context_8* mctx = nullptr;
  pcre2_real_jit_stack_8* jit = nullptr;
  std::vector<uint64_t> cand;           // candidate bitmap (one bit per rule)
  std::vector<uint32_t> cand_list;
  std::vector<uint8_t> tbuf[2];         // transformed buffer copies
  uint64_t vars[16] = {};
  uint32_t recursion = 0;
  struct Thresh {
    uint32_t rule = UINT32_MAX;
    std::array<uint8_t, 16> ip{};
    uint64_t window_start = 0;
    uint32_t count = 0;
    bool alerted = false;
  };
  std::vector<Thresh> thresh;
  // counters (read and cleared by the caller)
  uint64_t candidates = 0, confirmed = 0, pcre_errors = 0, flowbits_full = 0,
           threshold_full = 0, hits_dropped = 0, truncated = 0;
};

struct SigCompileOptions {
  SigVars vars;                         // over sigDefaultVars()
  const SigClassification* classification = nullptr;
  bool compile_hyperscan = true;        // false: parse and check only (fuzzing, coverage)
  uint32_t body_limit = 65536, body_buffers = 256;  // SigModel's
};
absl::StatusOr<std::shared_ptr<const CompiledSignatures>> compileSignatures(
    const std::vector<SigSource>& sources, const SigCompileOptions& opt);

}  // namespace dpu::rules
