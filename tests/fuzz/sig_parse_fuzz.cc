// Fuzz target: the Suricata-format rule parser and the signature engine (--- signatures ---).
// The input is rule text, optionally followed by "\n\0\n" and bytes to inspect. It must never
// crash, and:
// - every rule line is either accepted or refused with a reason (never both, never neither);
// - accepted rules compile (Hyperscan prefilter included) and evaluate the bytes, as one
//   packet in each direction, within the per-packet hit bound; flowbits stay within room.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "rules/compiled/signatures.h"
#include "tests/fuzz/fuzz_util.h"

using namespace dpu::rules;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 8192) return 0;
  std::string text, bytes;
  dpu::fuzz::splitRulesAndBytes(data, size, text, bytes);
  SigParseResult pr;
  parseSignatures(text, "f", sigDefaultVars(), nullptr, pr);
  for (const SigRefusal& r : pr.refused)
    FUZZ_CHECK(!r.reason.empty() && r.line != 0);
  auto c = compileSignatures({{"f", text}}, {});
  if (!c.ok()) return 0;  // Hyperscan refused a literal set: reported as an error, not a crash
  FUZZ_CHECK((*c)->rules.size() + (*c)->refused.size() >= pr.rules.size());
  auto sc = (*c)->makeScratch();
  FUZZ_CHECK(sc.ok());
  SigFlowState fs;
  SigHit hits[64];
  for (int dir = 0; dir < 2; ++dir) {
    SigInput si;
    si.set(SigBuffer::kPayload, reinterpret_cast<const uint8_t*>(bytes.data()), uint32_t(bytes.size()));
    si.ip_proto = dir ? 17 : 6;
    si.sport = 1234;
    si.dport = 80;
    si.to_server = dir == 0;
    si.established = true;
    si.dsize = uint32_t(bytes.size());
    uint32_t n = (*c)->evaluate(si, &fs, **sc, hits, 64);
    FUZZ_CHECK(n <= 64);
    for (uint32_t k = 0; k < n; ++k) FUZZ_CHECK(hits[k].rule < (*c)->rules.size());
    FUZZ_CHECK(fs.n <= SigFlowState::kMaxBits);
  }
  return 0;
}
