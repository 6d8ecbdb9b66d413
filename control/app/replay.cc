#include "control/app/replay.h"

#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "control/app/pcap_capture.h"
#include "control/app/summary.h"
#include "control/config/config_loader.h"
#include "dataplane/api/dataplane.h"
#include "dataplane/stages/dpi/file_extract.h"  // --- http ---
#include "absl/cleanup/cleanup.h"
#include "dataplane/port/eal.h"
#include "dataplane/port/ports.h"

namespace dpu::ctl {
namespace {

// Verdicts arrive mostly in order; fragments held for their first fragment arrive late, and
// with several workers each judges its own packets. Records are buffered until every lower
// index has been written. Workers call it from their lcores (--workers): one at a time.
class VerdictWriter : public dp::VerdictSink {
 public:
  VerdictWriter(std::ofstream* out, const dp::DataplaneControl* names)
      : out_(out), names_(names) {}
  void onVerdict(const dp::PacketVerdict& v) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (out_ == nullptr) {
      ++next_;
      return;
    }
    pending_.emplace(v.seq, verdictJson(v, names_));
    while (!pending_.empty() && pending_.begin()->first == next_) {
      if (out_) *out_ << pending_.begin()->second << '\n';
      pending_.erase(pending_.begin());
      ++next_;
    }
  }
  // Anything left means a packet got no verdict: a bug worth failing loudly on.
  size_t unresolved() const {
    std::lock_guard<std::mutex> lock(mu_);
    return pending_.size();
  }
  uint64_t written() const {
    std::lock_guard<std::mutex> lock(mu_);
    return next_;
  }

 private:
  mutable std::mutex mu_;
  std::ofstream* out_;
  const dp::DataplaneControl* names_;
  std::map<uint64_t, std::string> pending_;
  uint64_t next_ = 0;
};

// DPDK memory (MB) a replay of this snapshot needs: the mbuf pool (2047 buffers of 64 KiB,
// 130 MB) and the other pools with headroom (512 MB in all), the flow and fragment tables
// (reassembly buffers included), and the firewall's rte_acl tables. An rte_acl table's size
// is only known once it is built; kAclBytesPerEntry covers the rule sets we measured with margin (ClassBench-like:
// 4.2 MiB for 1k entries, 24 MiB for 10k, 107 MiB for 100k; docs/firewall.md "Size and
// memory"). Without hugepages the EAL only reserves address space: pages the tables do
// not touch cost nothing.
constexpr uint64_t kAclBytesPerEntry = 4096;

uint64_t replayMemoryMb(const rules::Snapshot& s) {
  const auto& d = s.dataplane;
  uint64_t table_mb = (static_cast<uint64_t>(d.flow_capacity) * 200 +
                       static_cast<uint64_t>(d.frag_max_datagrams) * (256 + 4 * d.frag_max_fragments) +
                       static_cast<uint64_t>(d.frag_reassembly_buffers) *
                           (d.frag_max_datagram_bytes + 1024)) >> 20;
  uint64_t acl_mb = 0;
  if (s.firewall) {
    acl_mb = ((s.firewall->v4.size() + s.firewall->v6.size()) * kAclBytesPerEntry) >> 20;
  }
  return 512 + table_mb + acl_mb;
}

}  // namespace

absl::Status runReplay(const ReplayOptions& o) {
  if (o.config.empty() && o.rules.empty())
    return absl::InvalidArgumentError("replay needs --config FILE (or --rules FILE)");
  if (o.in_a.empty()) return absl::InvalidArgumentError("replay needs --in FILE.pcap");
  // Input paths become DPDK vdev arguments (net_pcap0,rx_pcap=PATH), which are comma-separated:
  // refused before anything is read or created.
  for (const std::string* p : {&o.in_a, &o.in_b}) {
    if (p->find(',') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          *p, ": an input pcap path cannot contain ',' (DPDK device arguments are "
              "comma-separated); rename the file or link it under a name without ','"));
    }
  }
  absl::StatusOr<v1::ApplianceConfig> cfg =
      o.config.empty() ? absl::StatusOr<v1::ApplianceConfig>(v1::ApplianceConfig())
                       : loadConfigFile(o.config);
  if (!cfg.ok()) return cfg.status();
  // --- signatures --- --rules FILE: a signature file of the DPI stage (paths as given,
  // relative to the working directory).
  for (const std::string& r : o.rules) {
    std::error_code ec;
    std::filesystem::path p = std::filesystem::absolute(r, ec);
    cfg->mutable_dpi()->mutable_signatures()->add_files(ec ? r : p.lexically_normal().string());
  }
  ModelDetails details;
  auto model = toModel(*cfg, nullptr, &details);
  if (!model.ok()) return absl::InvalidArgumentError(absl::StrCat(o.config, ": ",
                                                                  model.status().message()));
  for (const std::string& w : details.warnings) {
    std::fprintf(stderr, "dpu-appliance: warning: %s: %s\n", o.config.c_str(), w.c_str());
  }
  auto snap = rules::compileSnapshot(*model, 1);
  if (!snap.ok()) return snap.status();
  for (const std::string& w : policyWarnings(*model)) {
    std::fprintf(stderr, "dpu-appliance: warning: %s: %s\n", o.config.c_str(), w.c_str());
  }
  // Every change is checked before the first packet, so a bad file fails the run at once.
  std::vector<std::unique_ptr<rules::Snapshot>> change_snaps;
  for (const auto& [at, file] : o.changes) {
    auto c = loadConfigFile(file);
    if (!c.ok()) return c.status();
    auto m = toModel(*c);
    if (!m.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": ", m.status().message()));
    }
    auto s = rules::compileSnapshot(*m, 0);
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(file, ": ", s.status().message()));
    // Table sizes are fixed when the dataplane starts: the first config's stay in force.
    (*s)->dataplane.flow_capacity = (*snap)->dataplane.flow_capacity;
    (*s)->dataplane.frag_max_datagrams = (*snap)->dataplane.frag_max_datagrams;
    (*s)->dataplane.frag_max_fragments = (*snap)->dataplane.frag_max_fragments;
    (*s)->dataplane.frag_reassembly_buffers = (*snap)->dataplane.frag_reassembly_buffers;
    (*s)->dataplane.frag_max_datagram_bytes = (*snap)->dataplane.frag_max_datagram_bytes;
    (*s)->dataplane.frag_max_held = (*snap)->dataplane.frag_max_held;
    change_snaps.push_back(std::move(*s));
  }

  absl::Status st = checkEthernetPcap(o.in_a);
  if (!st.ok()) return st;
  std::string in_b = o.in_b;
  // Side B without an input reads an empty capture that has no name on disk.
  std::unique_ptr<EmptyPcap> empty_b;
  if (in_b.empty()) {
    auto e = EmptyPcap::create();
    if (!e.ok()) return e.status();
    empty_b = std::move(*e);
    in_b = empty_b->path();
  } else {
    st = checkEthernetPcap(in_b);
    if (!st.ok()) return st;
  }

  // Memory: given (--memory), or sized from the config and its changes.
  uint64_t need_mb = replayMemoryMb(**snap);
  for (const auto& c : change_snaps) need_mb = std::max(need_mb, replayMemoryMb(*c));
  // Each further worker: its tables and another 2047 mbufs of 64 KiB (130 MB).
  need_mb += static_cast<uint64_t>(o.workers - 1) * (need_mb - 512 + 160);
  const int mem_mb = static_cast<int>(
      o.memory_mb ? o.memory_mb : std::min<uint64_t>(need_mb, kMaxReplayMemoryMb));
  auto memoryHint = [&](const absl::Status& s) {
    if (s.code() != absl::StatusCode::kResourceExhausted) return s;
    return absl::Status(s.code(), absl::StrCat(
        s.message(), " [replay ran with ", mem_mb, " MB of DPDK memory (",
        o.memory_mb ? "--memory" : "sized from the config", "): give more with --memory MB]"));
  };
  st = dp::initEal(dp::offlineEalArgs({absl::StrCat("net_pcap0,rx_pcap=", o.in_a),
                                       absl::StrCat("net_pcap1,rx_pcap=", in_b)},
                                      mem_mb, o.workers));
  if (!st.ok()) {
    return absl::Status(st.code(), absl::StrCat(st.message(), " [replay asked for ", mem_mb,
                                                " MB of DPDK memory (",
                                                o.memory_mb ? "--memory" : "sized from the config",
                                                "): give what the machine can reserve with "
                                                "--memory MB]"));
  }

  dp::DataplaneOptions dopts;
  dopts.port_a = 0;
  dopts.port_b = 1;
  dopts.workers = o.workers;
  // This thread runs worker 0 (on the main lcore); the others run on lcores 1 .. N-1.
  unsigned lc;
  dopts.worker_lcores.push_back(rte_get_main_lcore());
  RTE_LCORE_FOREACH_WORKER(lc) { dopts.worker_lcores.push_back(lc); }
  dopts.worker_lcores.resize(o.workers);
  dopts.lossless_distribution = true;
  dopts.clock = dp::ClockMode::kPacketTimestamp;
  dopts.merge_by_timestamp = true;
  dopts.mbufs = 2047u * o.workers;
  dopts.mbuf_data_room = 65535;
  dopts.rx_desc = 64;
  dopts.tx_desc = 64;
  std::unique_ptr<dp::FileExtractor> extract;  // --- http ---
  if (!o.extract_files.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(o.extract_files, ec))
      return absl::InvalidArgumentError(
          absl::StrCat("--extract-files ", o.extract_files, ": not a directory"));
    extract = std::make_unique<dp::FileExtractor>(o.extract_files, o.extract_max_bytes, dopts.workers);
    dopts.extract = extract.get();
  }
  auto dpr = dp::Dataplane::create(dopts, std::move(*snap));
  if (!dpr.ok()) return memoryHint(dpr.status());
  std::unique_ptr<dp::Dataplane> plane = std::move(*dpr);
  // runReplay is the process's last work (main exits after it): however it returns, the
  // dataplane leaves its DPDK heap to the exit (eal.h; runs before plane's destructor).
  absl::Cleanup leave_heap = [] { dp::leaveDpdkHeapToExit(); };

  std::unique_ptr<PcapCapture> cap_b, cap_a;
  if (!o.out_b.empty()) {
    auto c = PcapCapture::create(o.out_b);
    if (!c.ok()) return c.status();
    cap_b = std::move(*c);
    st = cap_b->attachTx(plane->portB(), 0);
    if (!st.ok()) return st;
  }
  if (!o.out_a.empty()) {
    auto c = PcapCapture::create(o.out_a);
    if (!c.ok()) return c.status();
    cap_a = std::move(*c);
    st = cap_a->attachTx(plane->portA(), 0);
    if (!st.ok()) return st;
  }
  std::ofstream vout, eout;
  if (!o.verdicts.empty()) {
    vout.open(o.verdicts, std::ios::trunc);
    if (!vout) return absl::InvalidArgumentError(absl::StrCat(o.verdicts, ": cannot write"));
  }
  if (!o.events.empty()) {
    eout.open(o.events, std::ios::trunc);
    if (!eout) return absl::InvalidArgumentError(absl::StrCat(o.events, ": cannot write"));
  }
  VerdictWriter verdicts(o.verdicts.empty() ? nullptr : &vout, plane.get());
  SummaryInput sum;
  auto drain = [&]() {
    plane->drainEvents([&](const dp::Event& e) {
      noteDnsBlock(e, sum);  // the names DNS filtering blocked, for the summary's headline
      noteSigAlert(e, *plane, sum);  // --- signatures --- the signatures that alerted
      if (eout.is_open()) eout << eventJson(e, 0, plane.get(), /*replay_index=*/true) << '\n';
    });
  };

  dp::Worker& w = plane->worker(0);
  for (uint16_t k = 0; k < plane->workerCount(); ++k) plane->worker(k).setVerdictSink(&verdicts);
  plane->attachCaller(0);
  if (o.workers > 1) {
    st = plane->launch();  // workers 1 .. N-1 on their lcores
    if (!st.ok()) return st;
  }
  std::vector<std::string> applied;
  for (size_t ci = 0;; ++ci) {
    w.setInputLimit(ci < o.changes.size() ? o.changes[ci].first : UINT64_MAX);
    while (w.pollOnce() > 0) drain();
    // Every packet before the change judged (other workers included) before it is published.
    plane->settleOthers(0, drain);
    drain();
    if (ci == o.changes.size()) break;
    // Publishing waits for every worker to pass a quiescent state; this thread is the
    // worker, so it steps out of the RCU set while it publishes.
    plane->detachCaller(0);
    auto gen = plane->prepareAndPublish(std::move(change_snaps[ci]));
    plane->attachCaller(0);
    if (!gen.ok()) {
      return memoryHint(absl::Status(
          gen.status().code() == absl::StatusCode::kResourceExhausted
              ? absl::StatusCode::kResourceExhausted
              : absl::StatusCode::kInvalidArgument,
          absl::StrCat(o.changes[ci].second, ": ", gen.status().message())));
    }
    applied.push_back(absl::StrCat("config change before packet ", o.changes[ci].first, ": ",
                                   o.changes[ci].second, " (generation ", *gen, ")"));
  }
  w.setInputLimit(UINT64_MAX);
  plane->stop();  // the other workers (settled above) leave their lcores
  for (uint16_t k = 0; k < plane->workerCount(); ++k) {
    dp::Worker& wk = plane->worker(k);
    while (!wk.drainFragments(1024)) drain();
  }
  if (plane->softwareDistribution()) w.drainTxRings();
  drain();

  for (uint16_t k = 0; k < plane->workerCount(); ++k) {
    sum.flows_active_at_end += plane->worker(k).flows().size();
  }
  sum.title = absl::StrCat("dpu-appliance replay: ", o.in_a, o.in_b.empty() ? "" : " + ",
                           o.in_b, " with ",
                           o.config.empty() ? std::string("the default config") : o.config);
  for (const std::string& r : o.rules) absl::StrAppend(&sum.title, " + ", r);
  fillPorts(*plane, sum);
  for (int side = 0; side < 2; ++side) {
    if (sum.ports[side].rx_errors == 0) continue;
    // net_pcap stops reading a file at the first record it cannot read.
    std::string w = absl::StrCat("side ", dp::sideName(side), " input: unreadable record after ",
                                 sum.ports[side].rx_packets,
                                 " packet(s) (damaged capture); the rest of it was not replayed");
    std::fprintf(stderr, "dpu-appliance: warning: %s: %s\n", (side == 0 ? o.in_a : in_b).c_str(),
                 w.c_str());
    sum.warnings.push_back(std::move(w));
  }
  for (std::string& a : applied) sum.notes.push_back(std::move(a));
  sum.generation = plane->current().generation;
  sum.config_version = plane->current().config_version;

  for (uint16_t k = 0; k < plane->workerCount(); ++k) {
    while (!plane->worker(k).endFlows(4096)) drain();
  }
  drain();
  if (extract) {  // --- http --- every flow ended: every file is closed
    const dp::FileExtractor::Stats es = extract->stats();
    sum.notes.push_back(absl::StrCat("extract-files: ", es.files, " file(s), ", es.bytes,
                                     " bytes written to ", o.extract_files));
    if (es.skipped != 0 || es.errors != 0)
      sum.warnings.push_back(absl::StrCat(
          "extract-files: ", es.skipped, " file(s) not written (--extract-max-bytes ",
          o.extract_max_bytes, " reached), ", es.errors, " not written (file system errors)"));
  }
  // The counters after the flows ended: matches found at a stream's end (DPI rules that need
  // the end of the data) are counted then, and belong in the summary like any other.
  sum.counters = plane->counters();
  fillStageReports(*plane, plane->current(), sum);
  for (uint16_t k = 0; k < plane->workerCount(); ++k) plane->worker(k).setVerdictSink(nullptr);
  plane->detachCaller(0);

  uint64_t in_pkts = sum.counters.total.rx_packets[0] + sum.counters.total.rx_packets[1];
  if (verdicts.unresolved() != 0 || verdicts.written() != in_pkts) {
    return absl::InternalError(absl::StrCat("internal error: ", in_pkts, " packets in but ",
                                            verdicts.written(), " verdicts written and ",
                                            verdicts.unresolved(), " unresolved"));
  }
  cap_a.reset();
  cap_b.reset();
  if (!o.summary_json.empty()) {
    std::ofstream js(o.summary_json, std::ios::trunc);
    js << summaryJson(sum) << '\n';
    if (!js) return absl::InvalidArgumentError(absl::StrCat(o.summary_json, ": cannot write"));
  }
  if (!o.quiet) std::fputs(formatSummary(sum).c_str(), stdout);
  dp::leaveDpdkHeapToExit();
  plane.reset();
  return absl::OkStatus();
}

}  // namespace dpu::ctl
