// The load balancer's part of explain (explain.h): service, key, table slot, backend.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dataplane/packet/parser.h"
#include "dataplane/pipeline/explain.h"
#include "dataplane/stages/lb/lb_stage.h"
#include "dataplane/stages/lb/lb_view.h"

namespace dpu::dp {
namespace {

std::string hexBytes(const uint8_t* b, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) absl::StrAppend(&s, absl::Hex(b[i], absl::kZeroPad2));
  return s;
}

// Load balancer (lb_stage.cc), a new flow's first packet: the first
// service matching, its key fields (lbExtractField), the key hash (keyHash), the Maglev
// table slot and backend (pick), and the rewrite of the service's mode.
bool explainLb(const rules::Snapshot& snap, const uint8_t* frame, uint32_t len,
               const PacketMeta& m, ExplainResult& r) {
  const rules::CompiledLb* lb = snap.lb.get();
  if (lb == nullptr || lb->services.empty() || m.l3 == L3Type::kNone) return false;
  rules::LbPacket p;
  lbView(m, frame, len, p);
  uint32_t si = 0;
  const rules::CompiledLbService* svc = lb->match(p, &si);
  if (svc == nullptr) {
    explainStep(r, Stage::kLb, "pass", absl::StrCat("no service matches (", lb->services.size(),
                                                 " services): forwarded unchanged"));
    return false;
  }
  std::string key;
  if (svc->fields.empty()) {
    key = "5-tuple";
  } else {
    for (const rules::CompiledLbField& f : svc->fields) {
      uint8_t buf[rules::kLbMaxKeyBytes];
      int w = rules::lbExtractField(f, p, buf);
      std::string name = f.kind == rules::LbFieldKind::kRaw
                             ? absl::StrCat("raw ", rules::lbAnchorName(f.anchor), "+", f.offset,
                                            "/", f.length)
                             : rules::lbFieldName(f.kind);
      absl::StrAppend(&key, key.empty() ? "" : ", ", name, " = ",
                      w < 0 ? std::string("missing") : hexBytes(buf, w));
    }
  }
  bool missing = false;
  const uint64_t h = svc->keyHash(p, &missing);
  std::string detail = absl::StrCat("service '", svc->model.id, "' (", rules::lbModeName(svc->mode),
                                    "); key: ", key);
  if (missing) {
    if (svc->fallback == rules::LbFallback::kDrop) {
      explainDrop(r, Stage::kLb, Verdict::kDrop, DropReason::kLbKeyMissing, kNoRule, "drop",
               absl::StrCat(detail, "; a key field is missing and the fallback is drop"));
      return true;
    }
    absl::StrAppend(&detail, "; a key field is missing: the 5-tuple is hashed (fallback)");
  }
  absl::StrAppend(&detail, absl::StrFormat("; hash 0x%016x", h));
  const uint16_t be = svc->pick(h);
  if (be == rules::kLbNoBackend) {
    explainDrop(r, Stage::kLb, Verdict::kDrop, DropReason::kLbNoBackend, kNoRule, "drop",
             absl::StrCat(detail, "; no backend in the table (all down, draining or weight 0)"));
    return true;
  }
  const rules::CompiledLbBackend& b = svc->backends[be];
  absl::StrAppend(&detail, ", table slot ", rules::lbReduce(h, svc->table_size), " of ",
                  svc->table_size, " -> backend '", b.id, "'");
  const bool v4 = m.l3 == L3Type::kIpv4;
  IpAddr a{};
  switch (svc->mode) {
    case rules::LbMode::kL2:
      absl::StrAppend(&detail, "; destination MAC := ", absl::StrFormat("%02x:%02x:%02x:%02x:%02x:%02x",
                      b.mac[0], b.mac[1], b.mac[2], b.mac[3], b.mac[4], b.mac[5]));
      break;
    case rules::LbMode::kNat:
    case rules::LbMode::kIpip: {
      const bool has = v4 ? b.has_v4 : b.has_v6;
      const bool tun = svc->mode == rules::LbMode::kNat || (v4 ? svc->has_tun_v4 : svc->has_tun_v6);
      if (!has || !tun) {
        explainDrop(r, Stage::kLb, Verdict::kDrop, DropReason::kLbNoAddress, kNoRule, "drop",
                 absl::StrCat(detail, "; the backend (or the service's tunnel source) has no ",
                              v4 ? "IPv4" : "IPv6", " address"));
        return true;
      }
      std::memcpy(a.b, v4 ? b.v4 : b.v6, v4 ? 4 : 16);
      if (svc->mode == rules::LbMode::kNat) {
        absl::StrAppend(&detail, "; destination := ", explainAddr(a, m.l3),
                        b.port ? absl::StrCat(" port ", b.port) : std::string(),
                        " (NAT; answers get the service address back)");
      } else {
        absl::StrAppend(&detail, "; encapsulated (IP-in-IP) to ", explainAddr(a, m.l3));
      }
      break;
    }
  }
  r.verdict.backend = be;
  r.verdict.lb_service = uint16_t(si);
  r.backend = b.id;
  explainStep(r, Stage::kLb, "balance", detail);
  return false;
}

}  // namespace

bool LbStage::explain(const ExplainInput& in, ExplainResult& r) {
  return explainLb(in.snap, in.frame, in.len, in.meta, r);
}

}  // namespace dpu::dp
