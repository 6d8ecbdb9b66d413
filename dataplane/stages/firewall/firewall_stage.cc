// The firewall stage (firewall_stage.h).
#include "dataplane/stages/firewall/firewall_stage.h"

#include <rte_mbuf.h>

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "rules/compiled/firewall.h"

namespace dpu::dp {

FirewallStage::FirewallStage(PathContext& cx, uint32_t flow_capacity)
    : PathStage(cx, "firewall", kCyFirewall, /*per_segment=*/false), c_(cx.c), flows_(cx.flows) {
  flow_uid_.reset(new uint32_t[flow_capacity]());
}

absl::StatusOr<std::unique_ptr<PathStage>> FirewallStage::make(PathContext& cx,
                                                               const rules::DataplaneSettings&) {
  return std::make_unique<FirewallStage>(cx, cx.flows->capacity());
}

bool FirewallStage::refresh() {
  const PublishedState* st = cx_.state;
  fw_ = st->fw.get();
  fwc_ = fw_ ? &fw_->compiled() : nullptr;
  geo_ = st->geoip.get();
  active_ = st->fw_active && fw_ != nullptr;
  since_ = st->fw_since;
  reevaluate_ = fwc_ ? fwc_->reevaluate_on_change : true;
  countries_ = fwc_ ? fwc_->uses_countries : false;
  nrules_ = st->nrules;
  hits_ = st->hitsOf(cx_.opts.id);
  return active_;
}

void FirewallStage::lookupCountries(const rules::FwQuery& q, char src[2], char dst[2]) {
  src[0] = src[1] = dst[0] = dst[1] = 0;
  if (geo_ == nullptr) return;
  IpAddr a;
  std::memcpy(a.b, q.src.data(), 16);
  geo_->country(a, q.v6, src);
  std::memcpy(a.b, q.dst.data(), 16);
  geo_->country(a, q.v6, dst);
  c_->geoip_lookups.add(2);
}

void FirewallStage::queueFlow(uint8_t i, int32_t pos, const FlowEntry& e) {
  const Burst& b = *cx_.burst;
  uint32_t k = 0;
  while (k < q_.n && q_.pos[k] != pos) ++k;  // a second packet of a queued flow
  if (k == q_.n) {
    rules::FwQuery& q = q_.q[k];
    fwQueryForFlow(b.keys[i], e.flags, q);
    if (countries_) {
      FlowCold& c = flows_->cold(pos);
      if (!c.countries_known) {
        lookupCountries(q, c.src_country, c.dst_country);
        // Without a database nothing is known yet: look again once there is one.
        c.countries_known = geo_ != nullptr;
      }
      q.src_cc = fwc_->countryIndex(c.src_country);
      q.dst_cc = fwc_->countryIndex(c.dst_country);
    }
    q_.qp[k] = &q;
    q_.pos[k] = pos;
    q_.is_flow[k] = true;
    ++q_.n;
  }
  q_.pkt[q_.npkt] = i;
  q_.pkt_q[q_.npkt++] = static_cast<uint8_t>(k);
}

void FirewallStage::queueUntracked(uint8_t i) {
  const Burst& b = *cx_.burst;
  uint32_t k = q_.n++;
  rules::FwQuery& q = q_.q[k];
  fwQueryForPacket(b.meta[i], b.v[i].in_side, q);
  if (countries_) {
    char src[2], dst[2];
    lookupCountries(q, src, dst);
    q.src_cc = fwc_->countryIndex(src);
    q.dst_cc = fwc_->countryIndex(dst);
  }
  q_.qp[k] = &q;
  q_.pos[k] = -1;
  q_.is_flow[k] = false;
  q_.pkt[q_.npkt] = i;
  q_.pkt_q[q_.npkt++] = static_cast<uint8_t>(k);
}

void FirewallStage::restamp(int32_t pos, FlowEntry& e) {
  if (e.generation < since_ && e.stage == static_cast<uint8_t>(Stage::kFirewall) &&
      e.rule != kNoRule) {
    // Kept across a change of the rules: the rule is found again by its identity.
    e.rule = cx_.state->indexOfUid(flow_uid_[pos]);
  }
  e.generation = cx_.generation;
}

void FirewallStage::run(uint16_t, uint16_t) {
  Burst& b = *cx_.burst;
  rte_mbuf** pkts = b.work;
  fw_->classifyBurst(q_.qp, q_.n, q_.rule);
  for (uint32_t k = 0; k < q_.n; ++k) {
    int64_t r = q_.rule[k];
    rules::FwAction a = r >= 0 ? fwc_->rules[r].action
                               : fwc_->default_action[q_.q[k].dir == 2 ? 1 : 0];
    Verdict vd = a == rules::FwAction::kAllow  ? Verdict::kForward
                 : a == rules::FwAction::kDeny ? Verdict::kDrop
                                               : Verdict::kReject;
    switch (vd) {
      case Verdict::kForward: c_->fw_allowed.add(); break;
      case Verdict::kDrop: c_->fw_denied.add(); break;
      default: c_->fw_rejected.add(); break;
    }
    if (r >= 0 && q_.is_flow[k] && static_cast<uint32_t>(r) < nrules_) {
      hits_[r].flows.add();
    }
    int32_t pos = q_.pos[k];
    if (pos >= 0) {
      FlowEntry& e = flows_->entry(pos);
      e.verdict = static_cast<uint8_t>(vd);
      e.stage = static_cast<uint8_t>(r >= 0 || vd != Verdict::kForward ? Stage::kFirewall
                                                                        : Stage::kNone);
      e.rule = r >= 0 ? static_cast<uint32_t>(r) : kNoRule;
      e.generation = cx_.generation;
      flow_uid_[pos] = r >= 0 ? cx_.state->rule_uid[r] : 0;
    }
  }
  for (uint32_t n = 0; n < q_.npkt; ++n) {
    uint8_t i = q_.pkt[n];
    uint32_t k = q_.pkt_q[n];
    int64_t r = q_.rule[k];
    rules::FwAction a = r >= 0 ? fwc_->rules[r].action
                               : fwc_->default_action[q_.q[k].dir == 2 ? 1 : 0];
    PacketVerdict& v = b.v[i];
    c_->stage_packets[static_cast<int>(Stage::kFirewall)].add();
    v.rule = r >= 0 ? static_cast<uint32_t>(r) : kNoRule;
    if (a == rules::FwAction::kAllow) {
      v.verdict = Verdict::kForward;
      v.stage = r >= 0 ? Stage::kFirewall : Stage::kNone;
      if (!q_.is_flow[k]) c_->untracked_forwarded.add();
    } else {
      v.verdict = a == rules::FwAction::kDeny ? Verdict::kDrop : Verdict::kReject;
      v.stage = Stage::kFirewall;
      v.reason = a == rules::FwAction::kDeny ? DropReason::kFirewallDeny
                                             : DropReason::kFirewallReject;
    }
    if (r >= 0) countRuleHit(static_cast<uint32_t>(r), static_cast<uint8_t>(Stage::kFirewall),
                             pkts[i]->pkt_len, b.ts[i]);
  }
}


namespace {

const char* actionName(rules::FwAction a) {
  switch (a) {
    case rules::FwAction::kAllow: return "allow";
    case rules::FwAction::kDeny: return "deny";
    case rules::FwAction::kReject: return "reject";
  }
  return "unknown";
}

std::string countryText(const char cc[2]) {
  return cc[0] ? std::string(cc, 2) : std::string("unknown");
}

}  // namespace

// Explain: the rule the flow's first packet matches (rules::referenceMatch on the compiled
// rules), with the countries when rules name some.
bool FirewallStage::explain(const ExplainInput& in, ExplainResult& r) {
  const rules::CompiledFirewall* fw = in.snap.firewall.get();
  if (fw == nullptr || !fw->judges()) return false;
  const PacketMeta& m = in.meta;
  const uint8_t side = in.side;
  const CountryLookup* countries = in.countries;
  const bool is_tcp = m.l4_proto == 6 && m.has_l4;
  PacketVerdict& v = r.verdict;
  // The packet is the flow's first: the initiator is its source, the side its side.
  rules::FwQuery q;
  fwQueryForPacket(m, side, q);
  std::string where;
  if (fw->uses_countries) {
    char scc[2] = {0, 0}, dcc[2] = {0, 0};
    if (countries) {
      countries->country(m.src, m.l3 == L3Type::kIpv6, scc);
      countries->country(m.dst, m.l3 == L3Type::kIpv6, dcc);
    }
    q.src_cc = fw->countryIndex(scc);
    q.dst_cc = fw->countryIndex(dcc);
    where = absl::StrCat(" (source country ", countryText(scc), ", destination country ",
                         countryText(dcc), countries ? "" : ": no GeoIP database here", ")");
  }
  int64_t rule = rules::referenceMatch(*fw, q);
  rules::FwAction a;
  std::string detail;
  if (rule >= 0) {
    const rules::FwRuleInfo& ri = fw->rules[rule];
    a = ri.action;
    detail = absl::StrCat("rule '", ri.id, "' (priority ", ri.priority, ", #", rule, "): ",
                          actionName(a), where);
    v.rule = static_cast<uint32_t>(rule);
  } else {
    a = fw->default_action[side == kSideB ? 1 : 0];
    detail = absl::StrCat("no rule matches: default action for flows from side ",
                          sideName(side), ": ", actionName(a), where);
  }
  if (a == rules::FwAction::kAllow) {
    if (rule >= 0) v.stage = Stage::kFirewall;
    explainStep(r, Stage::kFirewall, "allow", detail);
  } else {
    v.verdict = a == rules::FwAction::kDeny ? Verdict::kDrop : Verdict::kReject;
    v.stage = Stage::kFirewall;
    v.reason = a == rules::FwAction::kDeny ? DropReason::kFirewallDeny
                                           : DropReason::kFirewallReject;
    if (a == rules::FwAction::kDeny) {
      absl::StrAppend(&detail, "; dropped");
    } else if (is_tcp) {
      absl::StrAppend(&detail, (m.tcp_flags & kTcpRst) ? "; dropped (a reset is not answered)"
                                                       : "; dropped, TCP RST sent back out of side ",
                      (m.tcp_flags & kTcpRst) ? "" : sideName(side));
    } else {
      absl::StrAppend(&detail, "; dropped, ICMP", m.l3 == L3Type::kIpv6 ? "v6" : "",
                      " destination unreachable (administratively prohibited) sent back out "
                      "of side ", sideName(side));
    }
    explainStep(r, Stage::kFirewall, a == rules::FwAction::kDeny ? "deny" : "reject", detail);
    return true;
  }
  return false;
}

}  // namespace dpu::dp
