// The control side of the flows view and of packet capture (Dataplane): posts requests in
// the worker mailboxes (dataplane/pipeline/mailbox.h) and collects what the workers copied.
#include <rte_rcu_qsbr.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "dataplane/api/dataplane.h"
#include "dataplane/pipeline/published_state.h"

namespace dpu::dp {

namespace {

// Slack for flows created while a worker walks its table.
uint32_t dumpCapacity(uint64_t active, uint32_t table_capacity) {
  const uint64_t want = active + active / 4 + 1024;
  return static_cast<uint32_t>(std::min<uint64_t>(want, table_capacity));
}

// Withdraws a request the worker has not finished: false while the worker is inside a slice
// (the caller retries).
bool cancelDump(FlowDumpRequest& r) {
  uint32_t expect = kDumpPending;
  if (r.state.compare_exchange_strong(expect, kDumpIdle, std::memory_order_acq_rel)) return true;
  if (expect == kDumpDone || expect == kDumpIdle) {
    r.state.store(kDumpIdle, std::memory_order_relaxed);
    return true;
  }
  return false;  // kDumpActive
}

}  // namespace

absl::StatusOr<FlowListing> Dataplane::listFlows(uint32_t timeout_ms) {
  std::lock_guard<std::mutex> lock(flows_mu_);
  const size_t nw = workers_.size();
  // The buffers of the previous listing are reused (grown when too small, shrunk when much
  // too large): a listing does not fault in tens of megabytes of fresh pages each time.
  dump_bufs_.resize(nw);
  dump_caps_.resize(nw, 0);
  for (size_t w = 0; w < nw; ++w) {
    FlowDumpRequest& r = mail_[w].dump;
    r.cap = dumpCapacity(counters_[w].flows_active.load(), workers_[w]->flows().capacity());
    if (dump_caps_[w] < r.cap || dump_caps_[w] / 4 > r.cap + 65536) {
      dump_bufs_[w].reset(new FlowDumpRecord[r.cap]);
      dump_caps_[w] = r.cap;
    }
    r.out = dump_bufs_[w].get();
    r.cursor = r.n = r.missed = 0;
    r.now_ns = 0;
    r.state.store(kDumpPending, std::memory_order_release);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    size_t done = 0;
    for (size_t w = 0; w < nw; ++w) {
      done += mail_[w].dump.state.load(std::memory_order_acquire) == kDumpDone;
    }
    if (done == nw) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      size_t late = nw;
      for (size_t w = 0; w < nw; ++w) {
        if (mail_[w].dump.state.load(std::memory_order_acquire) != kDumpDone) late = w;
        while (!cancelDump(mail_[w].dump)) std::this_thread::yield();
      }
      return absl::DeadlineExceededError(
          absl::StrCat("worker ", late, " did not finish its flow walk within ", timeout_ms,
                       " ms (is it running?)"));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }

  FlowListing out;
  out.now_ns.resize(nw);
  std::lock_guard<std::mutex> names_lock(publish_mu_);
  // Backend and service ids by identity, from the running snapshot.
  std::unordered_map<uint64_t, std::string> svc_ids, be_ids;
  if (const auto& lb = current_.load(std::memory_order_acquire)->snap->lb) {
    for (const auto& svc : lb->services) {
      svc_ids.emplace(svc->identity, svc->model.id);
      for (const auto& b : svc->backends) be_ids.emplace(b.identity, b.id);
    }
  }
  for (size_t w = 0; w < nw; ++w) {
    FlowDumpRequest& r = mail_[w].dump;
    out.now_ns[w] = r.now_ns;
    out.missed += r.missed;
    for (uint32_t i = 0; i < r.n; ++i) {
      const FlowDumpRecord& d = r.out[i];
      FlowInfo f;
      f.worker = static_cast<uint16_t>(w);
      f.flow_id = (static_cast<uint64_t>(w + 1) << 32) | d.flow_seq;
      f.ip_ver = d.key.ip_ver;
      f.proto = d.key.proto;
      const bool init_hi = d.flags & kFlowInitiatorIsHi;
      f.src = init_hi ? d.key.hi_addr : d.key.lo_addr;
      f.dst = init_hi ? d.key.lo_addr : d.key.hi_addr;
      f.sport = init_hi ? d.key.hi_port : d.key.lo_port;
      f.dport = init_hi ? d.key.lo_port : d.key.hi_port;
      f.vlan = d.key.vlan;
      f.vlan_inner = d.key.vlan_inner;
      f.tunnel_id = d.key.tunnel_id;
      f.in_side = (d.flags & kFlowInitiatorSideB) ? kSideB : kSideA;
      f.tcp_state = static_cast<TcpState>(d.tcp_state);
      f.midstream = d.flags & kFlowMidstream;
      f.verdict = static_cast<Verdict>(d.verdict);
      f.stage = static_cast<Stage>(d.stage);
      if (d.rule != kNoRule) {
        // The rule's id; its index when the generation is older than the names remembered.
        f.rule = ruleNameLocked(d.generation, f.stage, d.rule);
        if (f.rule.empty()) f.rule = absl::StrCat(d.rule);
      }
      if (d.lb_backend != 0) {
        if (auto it = svc_ids.find(d.lb_service); it != svc_ids.end()) f.lb_service = it->second;
        if (auto it = be_ids.find(d.lb_backend); it != be_ids.end()) f.lb_backend = it->second;
      }
      for (int k = 0; k < 2; ++k) {
        f.packets[k] = d.packets[k];
        f.bytes[k] = d.bytes[k];
      }
      f.first_seen_ns = d.first_seen_ns;
      f.last_seen_ns = d.last_seen_ns;
      out.flows.push_back(std::move(f));
    }
    r.state.store(kDumpIdle, std::memory_order_relaxed);
    r.out = nullptr;
  }
  return out;
}

absl::Status Dataplane::armCapture(const CaptureSpec& spec) {
  std::lock_guard<std::mutex> lock(capture_mu_);
  if (capture_armed_) {
    return absl::FailedPreconditionError("a capture is already running (one at a time)");
  }
  if (spec.drops == !spec.rule.empty()) {
    return absl::InvalidArgumentError("a capture selects either drops or one rule");
  }
  uint32_t uid = 0;
  if (!spec.rule.empty()) {
    std::lock_guard<std::mutex> names_lock(publish_mu_);
    const PublishedState* st = current_.load(std::memory_order_acquire);
    for (uint32_t r = 0; r < st->nrules; ++r) {
      if (st->base[r].id == spec.rule) uid = st->rule_uid[r];
    }
    if (uid == 0) {
      return absl::NotFoundError(
          absl::StrCat("rule: no firewall rule '", spec.rule, "' in the running rule set"));
    }
  }
  capture_lost_seen_.assign(workers_.size(), 0);
  for (size_t w = 0; w < workers_.size(); ++w) {
    CaptureRing& c = mail_[w].capture;
    c.drops = spec.drops;
    c.any_reason = spec.any_reason;
    c.reason = static_cast<uint8_t>(spec.reason);
    c.rule_uid = uid;
    // Whatever a previous capture left behind is skipped (the worker is not writing: unarmed
    // and past a grace period since disarmCapture).
    c.tail.store(c.head.load(std::memory_order_acquire), std::memory_order_release);
    capture_lost_seen_[w] = c.lost.load(std::memory_order_relaxed);
    c.armed.store(true, std::memory_order_release);
  }
  capture_armed_ = true;
  return absl::OkStatus();
}

uint32_t Dataplane::readCapture(std::vector<CapturedPacket>* out, uint32_t max, uint64_t* lost) {
  std::lock_guard<std::mutex> lock(capture_mu_);
  uint32_t n = 0;
  if (capture_lost_seen_.size() != workers_.size()) capture_lost_seen_.assign(workers_.size(), 0);
  for (size_t w = 0; w < workers_.size(); ++w) {
    CaptureRing& c = mail_[w].capture;
    const uint64_t l = c.lost.load(std::memory_order_relaxed);
    if (lost) *lost += l - capture_lost_seen_[w];
    capture_lost_seen_[w] = l;
    uint32_t tail = c.tail.load(std::memory_order_relaxed);
    const uint32_t head = c.head.load(std::memory_order_acquire);
    while (tail != head && n < max) {
      const CaptureSlot& s = c.slots[tail & (kCaptureSlots - 1)];
      CapturedPacket p;
      p.ts_ns = s.ts_ns;
      p.orig_len = s.orig_len;
      p.worker = static_cast<uint16_t>(w);
      p.in_side = s.in_side;
      p.verdict = static_cast<Verdict>(s.verdict);
      p.stage = static_cast<Stage>(s.stage);
      p.reason = static_cast<DropReason>(s.reason);
      p.data.assign(s.data, s.data + s.cap_len);
      out->push_back(std::move(p));
      ++tail;
      ++n;
    }
    c.tail.store(tail, std::memory_order_release);
  }
  return n;
}

void Dataplane::disarmCapture() {
  std::lock_guard<std::mutex> lock(capture_mu_);
  if (!capture_armed_) return;
  for (size_t w = 0; w < workers_.size(); ++w) {
    mail_[w].capture.armed.store(false, std::memory_order_release);
  }
  // Every worker passes a quiescent state at the end of a loop: after that none still holds
  // the armed flag it read at the loop's start. Offline (no launched workers) nobody writes.
  if (launched_) rte_rcu_qsbr_synchronize(qsbr_, RTE_QSBR_THRID_INVALID);
  capture_armed_ = false;
}

}  // namespace dpu::dp
