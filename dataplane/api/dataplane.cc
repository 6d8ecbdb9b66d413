#include "dataplane/api/dataplane.h"

#include <algorithm>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_mempool.h>
#include <rte_pause.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include "absl/strings/str_cat.h"
#include "dataplane/pipeline/distributor.h"
#include "dataplane/port/eal.h"
#include "dataplane/port/ports.h"
#include "dataplane/stages/lb/lb_stage.h"

namespace dpu::dp {

const char* eventTypeName(EventType t) {
  switch (t) {
    case EventType::kDrop: return "drop";
    case EventType::kFlowEnd: return "flow";
    case EventType::kDpiAlert: return "alert";
    case EventType::kDns: return "dns";
    case EventType::kUninspected: return "uninspected";
    case EventType::kFileInfo: return "fileinfo";
    case EventType::kHttp: return "http";
  }
  return "unknown";
}

const char* flowEndReasonName(FlowEndReason r) {
  switch (r) {
    case FlowEndReason::kTimeout: return "timeout";
    case FlowEndReason::kShutdown: return "shutdown";
    case FlowEndReason::kReused: return "reused";
  }
  return "unknown";
}

namespace {

int registerSeqField() {
  static const rte_mbuf_dynfield kSeq = {"dpu_packet_seq", sizeof(uint64_t), alignof(uint64_t),
                                         0};
  return rte_mbuf_dynfield_register(&kSeq);
}

int workerMain(void* arg) { return static_cast<Worker*>(arg)->run(); }

}  // namespace

absl::StatusOr<std::unique_ptr<Dataplane>> Dataplane::create(
    const DataplaneOptions& opts, std::unique_ptr<rules::Snapshot> initial) {
  if (opts.workers == 0) return absl::InvalidArgumentError("at least one worker is needed");
  if (opts.port_a == opts.port_b) {
    return absl::InvalidArgumentError("side A and side B must be different ports");
  }
  uint16_t nports = rte_eth_dev_count_avail();
  if (nports < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the appliance needs two ports (side A = port 0, side B = port 1) but EAL found ",
        nports, "; give two devices, e.g. --vdev net_pcap0,iface=eth0 --vdev "
                "net_pcap1,iface=eth1, or two NICs"));
  }
  std::unique_ptr<Dataplane> dp(new Dataplane());
  dp->opts_ = opts;
  int socket = static_cast<int>(rte_socket_id());

  uint16_t room = opts.mbuf_data_room ? opts.mbuf_data_room : RTE_MBUF_DEFAULT_BUF_SIZE;
  uint32_t nmbufs = opts.mbufs;
  if (nmbufs == 0) {
    nmbufs = opts.workers * 2u * (opts.rx_desc + opts.tx_desc + 4 * kBurst) + 4096;
    // TCP hold mode keeps up to that many received packets per worker.
    if (initial != nullptr && initial->dataplane.tcp_hold_out_of_order)
      nmbufs += opts.workers * initial->dataplane.tcp_hold_packets_per_worker;
  }
  std::string pool_name = absl::StrCat("dpu_mbufs_", getpid());
  dp->pool_ = rte_pktmbuf_pool_create(pool_name.c_str(), nmbufs, 256, 0, room, socket);
  if (!dp->pool_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot allocate ", nmbufs, " mbufs of ", room, " bytes: ", rte_strerror(rte_errno),
        " (raise EAL memory with -m)"));
  }
  std::string ev_name = absl::StrCat("dpu_events_", getpid());
  dp->event_pool_ = rte_mempool_create(ev_name.c_str(), 65535, sizeof(Event), 256, 0, nullptr,
                                       nullptr, nullptr, nullptr, socket, 0);
  if (!dp->event_pool_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate the event pool: ", rte_strerror(rte_errno)));
  }

  size_t qsz = rte_rcu_qsbr_get_memsize(opts.workers);
  dp->qsbr_ = static_cast<rte_rcu_qsbr*>(rte_zmalloc("dpu_qsbr", qsz, RTE_CACHE_LINE_SIZE));
  if (!dp->qsbr_ || rte_rcu_qsbr_init(dp->qsbr_, opts.workers) != 0) {
    return absl::ResourceExhaustedError("cannot set up RCU (rte_rcu_qsbr)");
  }

  if (!initial) return absl::InvalidArgumentError("no initial snapshot");
  rules::DataplaneSettings settings = initial->dataplane;
  // Many workers: RSS (the ports hash), or software distribution (the workers hash;
  // distribute.h). AUTO takes RSS when both ports offer it.
  const uint16_t ports[2] = {opts.port_a, opts.port_b};
  bool software = false;
  if (opts.workers > 1) {
    switch (settings.distribution) {
      case rules::Distribution::kRss: software = false; break;
      case rules::Distribution::kSoftware: software = true; break;
      case rules::Distribution::kAuto:
        software = !portHasRss(ports[0], opts.workers) || !portHasRss(ports[1], opts.workers);
        break;
    }
    if (software && opts.workers > kMaxDistributionWorkers) {
      return absl::InvalidArgumentError(absl::StrCat(
          "software distribution serves at most ", kMaxDistributionWorkers, " workers, not ",
          opts.workers));
    }
  }
  dp->software_ = software;
  uint16_t rxq[2] = {opts.workers, opts.workers}, txq[2] = {opts.workers, opts.workers};
  for (int s = 0; s < 2; ++s) {
    PortOptions po;
    po.rx_desc = opts.rx_desc;
    po.tx_desc = opts.tx_desc;
    po.queues = opts.workers;
    if (software) {
      // As many queues as the port has, up to one per worker: the workers with an rx queue
      // distribute what they receive; those without a tx queue send through a ring.
      rxq[s] = std::max<uint16_t>(1, std::min(opts.workers, portMaxRxQueues(ports[s])));
      txq[s] = std::max<uint16_t>(1, std::min(opts.workers, portMaxTxQueues(ports[s])));
      po.queues = rxq[s];
      po.tx_queues = txq[s];
      po.rss = false;
    }
    absl::Status st = setupPort(ports[s], po, dp->pool_);
    if (!st.ok()) return st;
    dp->rx_queues_[s] = rxq[s];
    dp->tx_queues_[s] = txq[s];
  }
  dp->ports_started_ = true;

  {
    std::lock_guard<std::mutex> lock(dp->change_mu_);
    auto st = dp->prepareLocked(std::move(initial), nullptr);
    if (!st.ok()) return st.status();
    (*st)->snap->generation = 1;
    (*st)->fw_since = 1;
    dp->adoptUids(**st);
    dp->rememberNames(*(*st)->snap);
    dp->current_.store(st->release(), std::memory_order_release);
    dp->generation_.store(1, std::memory_order_release);
  }

  WorkerShared shared;
  shared.state = &dp->current_;
  shared.qsbr = dp->qsbr_;
  shared.event_pool = dp->event_pool_;
  shared.pkt_pool = dp->pool_;
  shared.seq_dynfield = registerSeqField();
  if (shared.seq_dynfield < 0) {
    return absl::InternalError(absl::StrCat("cannot register the packet sequence mbuf field: ",
                                            rte_strerror(rte_errno)));
  }
  shared.ts_dynfield = rte_mbuf_dynfield_lookup(RTE_MBUF_DYNFIELD_TIMESTAMP_NAME, nullptr);
  int flag = rte_mbuf_dynflag_lookup(RTE_MBUF_DYNFLAG_RX_TIMESTAMP_NAME, nullptr);
  shared.ts_dynflag = flag >= 0 ? (1ull << flag) : 0;
  if (opts.clock == ClockMode::kPacketTimestamp && (shared.ts_dynfield < 0 || flag < 0)) {
    return absl::FailedPreconditionError(
        "packet-timestamp clock needs ports that stamp packets (net_pcap rx_pcap)");
  }
  shared.stop = &dp->stop_;
  if (software) {
    // Inbound rings: a burst from every other worker fits many times over; replay (lossless)
    // keeps them short, since what sits in a ring holds mbufs of the small replay pool.
    const unsigned inbound_size = opts.lossless_distribution ? 256 : 4096;
    for (uint16_t w = 0; w < opts.workers; ++w) {
      std::string rname = absl::StrCat("dpu_in_", getpid(), "_", w);
      rte_ring* r = rte_ring_create(rname.c_str(), inbound_size, socket, RING_F_SC_DEQ);
      if (!r) {
        return absl::ResourceExhaustedError(
            absl::StrCat("cannot create the inbound ring of worker ", w, ": ",
                         rte_strerror(rte_errno)));
      }
      dp->inbound_.push_back(r);
    }
    shared.inbound = dp->inbound_.data();
    for (int s = 0; s < 2; ++s) {
      if (txq[s] >= opts.workers) continue;
      std::string rname = absl::StrCat("dpu_tx_", getpid(), "_", s);
      dp->tx_rings_[s] = rte_ring_create(rname.c_str(), 4096, socket, RING_F_SC_DEQ);
      if (!dp->tx_rings_[s]) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "cannot create the tx ring of side ", sideName(s), ": ", rte_strerror(rte_errno)));
      }
      shared.tx_ring[s] = dp->tx_rings_[s];
    }
  }
  shared.extract = opts.extract;

  dp->counters_.reset(new WorkerCounters[opts.workers]);
  dp->mail_.reset(new WorkerMailbox[opts.workers]);
  dp->capture_slots_.resize(opts.workers);
  for (uint16_t w = 0; w < opts.workers; ++w) {
    dp->capture_slots_[w].reset(new CaptureSlot[kCaptureSlots]);
    dp->mail_[w].capture.slots = dp->capture_slots_[w].get();
  }
  for (uint16_t w = 0; w < opts.workers; ++w) {
    std::string rname = absl::StrCat("dpu_ev_", getpid(), "_", w);
    rte_ring* r = rte_ring_create(rname.c_str(), opts.event_ring_size, socket,
                                  RING_F_SP_ENQ | RING_F_SC_DEQ);
    if (!r) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot create event ring: ", rte_strerror(rte_errno)));
    }
    dp->rings_.push_back(r);
    WorkerOptions wo;
    wo.id = w;
    wo.port[kSideA] = opts.port_a;
    wo.port[kSideB] = opts.port_b;
    wo.queue = w;
    wo.clock = opts.clock;
    wo.merge_by_timestamp = opts.merge_by_timestamp;
    wo.idle_sleep_max_us = opts.idle_sleep_max_us;
    if (software) {
      wo.nworkers = opts.workers;
      wo.software_distribution = true;
      wo.lossless = opts.lossless_distribution;
      for (int s = 0; s < 2; ++s) {
        wo.poll_rx[s] = w < rxq[s];
        wo.tx_direct[s] = w < txq[s];
      }
      // Replay: worker 0 reads (and merges) both inputs; the others only their ring.
      wo.merge_by_timestamp = opts.merge_by_timestamp && w == 0;
    }
    auto worker = Worker::create(wo, shared, settings, &dp->counters_[w], r, &opts.extra_stages);
    if (!worker.ok()) return worker.status();
    (*worker)->attachMailbox(&dp->mail_[w]);
    dp->workers_.push_back(std::move(*worker));
  }
  return dp;
}

Dataplane::~Dataplane() {
  stop();
  workers_.clear();
  if (ports_started_) {
    for (uint16_t port : {opts_.port_a, opts_.port_b}) {
      rte_eth_dev_stop(port);
      rte_eth_dev_close(port);
    }
  }
  // A process about to exit leaves the DPDK heap (rings, pools, the QSBR variable) to the
  // exit (eal.h, leaveDpdkHeapToExit); ports are closed above either way.
  if (dpdkHeapLeftToExit()) {
    delete current_.load();
    return;
  }
  for (rte_ring* r : rings_) {
    void* obj;
    while (rte_ring_sc_dequeue(r, &obj) == 0) rte_mempool_put(event_pool_, obj);
    rte_ring_free(r);
  }
  for (rte_ring* r : inbound_) {
    void* obj;
    while (rte_ring_sc_dequeue(r, &obj) == 0) {
      if (!isClockTick(obj)) rte_pktmbuf_free(static_cast<rte_mbuf*>(obj));
    }
    rte_ring_free(r);
  }
  for (rte_ring* r : tx_rings_) {
    if (r == nullptr) continue;
    void* obj;
    while (rte_ring_sc_dequeue(r, &obj) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(obj));
    rte_ring_free(r);
  }
  delete current_.load();
  rte_free(qsbr_);
  if (event_pool_) rte_mempool_free(event_pool_);
  if (pool_) rte_mempool_free(pool_);
}

absl::StatusOr<std::unique_ptr<PublishedState>> Dataplane::prepareLocked(
    std::unique_ptr<rules::Snapshot> next, const PublishedState* cur) {
  if (!next) return absl::InvalidArgumentError("no snapshot to prepare");
  auto st = std::make_unique<PublishedState>();
  const std::shared_ptr<const rules::CompiledFirewall>& fw = next->firewall;
  st->nworkers = opts_.workers;
  if (fw) {
    if (cur && cur->fw && cur->fw->compiledPtr().get() == fw.get()) {
      st->fw = cur->fw;  // same compiled firewall: same tables
    } else {
      // A small change to the rules in force builds only a delta on their tables.
      auto t = FirewallTables::build(fw, SOCKET_ID_ANY, 0, cur ? cur->fw : nullptr);
      if (!t.ok()) return t.status();
      st->fw = std::move(*t);
    }
    if (!fw->geoip_database.empty()) {
      if (cur && cur->geoip && cur->geoip->sameFile(fw->geoip_database)) {
        st->geoip = cur->geoip;
      } else {
        auto g = GeoIpDb::open(fw->geoip_database);
        if (!g.ok()) return g.status();
        st->geoip = std::move(*g);
      }
    }
    st->fw_active = fw->judges();
    st->nrules = static_cast<uint32_t>(fw->rules.size());
    st->rule_uid.resize(st->nrules);
    st->uid_index.resize(st->nrules);
    st->base.resize(st->nrules);
    for (uint32_t r = 0; r < st->nrules; ++r) {
      const std::string& id = fw->rules[r].id;
      auto it = uid_by_id_.find(id);
      if (it == uid_by_id_.end()) it = uid_by_id_.emplace(id, next_uid_++).first;
      st->rule_uid[r] = it->second;
      st->uid_index[r] = {it->second, r};
      st->base[r].id = id;
    }
    std::sort(st->uid_index.begin(), st->uid_index.end());
    if (st->nrules) {
      st->hit_pairs = (st->nrules + 1) / 2;
      st->hits.reset(new RuleHitPair[static_cast<size_t>(st->nworkers) * st->hit_pairs]);
    }
  }
  // same compiled rules and settings: same runtime (streams of running flows
  // stay valid); else a new runtime (scratch and stream pools allocated here, off the path).
  if (next->dpi) {
    DpiSettings ds;
    const rules::DpiModel& m = next->dpi_settings;
    ds.streams_per_worker = m.streams_per_worker;
    ds.ooo_slots_per_worker = m.ooo_slots_per_worker;
    ds.ooo_buffer_bytes = m.ooo_buffer_bytes;
    ds.depth_bytes = m.depth_bytes;
    ds.gap_policy = m.gap_policy;
    ds.udp_stream = m.udp_stream;
    ds.stream_mode = m.stream_mode;
    ds.compressed_slot_bytes = m.compressed_slot_bytes;
    ds.full_streams_per_worker = m.full_streams_per_worker;
    ds.prefilter_windows_per_worker = m.prefilter_windows_per_worker;
    // HTTP settings and rule scopes: the runtime built with the DPI runtime
    // (its files use the DPI runtime's stream pools and report masks).
    const rules::DpiHttpModel& hm = m.http;
    const HttpSettings hs = httpSettingsOf(hm, next->dataplane.tcp_dpi_fail == rules::Policy::kDrop);
    const std::vector<HttpScope> scope_of_ns = httpScopesOf(*next->dpi, m.scopes);
    const bool same_http = cur && (cur->http ? hm.enabled && cur->http->settings() == hs &&
                                                   cur->http->scopes() == scope_of_ns
                                             : !hm.enabled);
    const DpiSettings* cs = cur && cur->dpi ? &cur->dpi->settings() : nullptr;
    if (cs && same_http && cur->dpi->dpiPtr().get() == next->dpi.get() &&
        cs->streams_per_worker == ds.streams_per_worker &&
        cs->ooo_slots_per_worker == ds.ooo_slots_per_worker &&
        cs->ooo_buffer_bytes == ds.ooo_buffer_bytes && cs->depth_bytes == ds.depth_bytes &&
        cs->gap_policy == ds.gap_policy && cs->udp_stream == ds.udp_stream &&
        cs->stream_mode == ds.stream_mode && cs->compressed_slot_bytes == ds.compressed_slot_bytes &&
        cs->full_streams_per_worker == ds.full_streams_per_worker &&
        cs->prefilter_windows_per_worker == ds.prefilter_windows_per_worker) {
      st->dpi = cur->dpi;
      st->dpi_hits = cur->dpi_hits;  // the counters go with the runtime
      st->http = cur->http;
    } else {
      auto rt = DpiRuntime::create(next->dpi, ds, st->nworkers);
      if (!rt.ok()) return rt.status();
      if (hm.enabled) {
        auto h = HttpRuntime::create(hs, *rt, st->nworkers, scope_of_ns);
        if (!h.ok()) return h.status();
        st->http = std::move(*h);
      }
      st->dpi = std::move(*rt);
    }
    if (!st->dpi_hits) {
      st->dpi_hits = std::make_shared<DpiRuleHits>(uint32_t(next->dpi->rules.size()), st->nworkers);
    }
  }
  if (next->lb && opts_.workers > 1) st->dist_canon = buildDistributionCanon(*next->lb);
  st->snap = std::move(next);
  return st;
}

void Dataplane::adoptUids(const PublishedState& st) {
  uid_by_id_.clear();
  for (uint32_t r = 0; r < st.nrules; ++r) uid_by_id_[st.base[r].id] = st.rule_uid[r];
}

absl::StatusOr<std::unique_ptr<PreparedSnapshot>> Dataplane::prepare(
    std::unique_ptr<rules::Snapshot> next) {
  std::lock_guard<std::mutex> lock(change_mu_);
  auto st = prepareLocked(std::move(next), current_.load(std::memory_order_acquire));
  if (!st.ok()) return st.status();
  return std::unique_ptr<PreparedSnapshot>(std::move(*st));
}

uint32_t Dataplane::publish(std::unique_ptr<PreparedSnapshot> next) {
  std::lock_guard<std::mutex> lock(change_mu_);
  // Only prepare() makes PreparedSnapshots for this class: the cast is exact.
  return publishLocked(std::unique_ptr<PublishedState>(static_cast<PublishedState*>(next.release())));
}

absl::StatusOr<uint32_t> Dataplane::prepareAndPublish(std::unique_ptr<rules::Snapshot> next) {
  std::lock_guard<std::mutex> lock(change_mu_);
  auto st = prepareLocked(std::move(next), current_.load(std::memory_order_acquire));
  if (!st.ok()) return st.status();
  return publishLocked(std::move(*st));
}

uint32_t Dataplane::publishLocked(std::unique_ptr<PublishedState> next) {
  std::lock_guard<std::mutex> lock(publish_mu_);
  const PublishedState* old = current_.load(std::memory_order_acquire);
  uint32_t gen = old->snap->generation + 1;
  next->snap->generation = gen;
  // Flow verdicts cached under the same firewall object stay valid (the worker re-stamps
  // them instead of classifying again).
  next->fw_since = old->snap->firewall.get() == next->snap->firewall.get() ? old->fw_since : gen;
  PublishedState* now = next.release();
  current_.store(now, std::memory_order_release);
  generation_.store(gen, std::memory_order_release);
  // Wait until every worker has passed a quiescent state after the store: none can still
  // hold `old`. In offline mode the caller is itself the worker, between two bursts.
  rte_rcu_qsbr_synchronize(qsbr_, attached_caller_ >= 0
                                      ? static_cast<unsigned>(attached_caller_)
                                      : RTE_QSBR_THRID_INVALID);
  // The old counters are final now: carry them over to the rules that keep their id.
  for (uint32_t r = 0; r < now->nrules; ++r) {
    uint32_t o = old->indexOfUid(now->rule_uid[r]);
    if (o == kNoRule) continue;
    RuleCounters& b = now->base[r];
    const RuleCounters& ob = old->base[o];
    b.packets = ob.packets;
    b.bytes = ob.bytes;
    b.flows = ob.flows;
    b.last_hit_ns = ob.last_hit_ns;
    for (uint32_t w = 0; w < old->nworkers; ++w) {
      const RuleHit& h = old->hitsOf(w)[o];
      b.packets += h.packets.load();
      b.bytes += h.bytes.load();
      b.flows += h.flows.load();
      b.last_hit_ns = std::max(b.last_hit_ns, h.last_hit_ns.load());
    }
  }
  // counters of a DPI rule set being replaced are final too: kept by rule id for
  // the rules of the new set.
  if (old->dpi_hits && old->dpi_hits != now->dpi_hits) {
    std::unordered_map<std::string, DpiRuleCounters> kept;
    const rules::CompiledDpi* od = old->snap->dpi.get();
    if (now->snap->dpi && od != nullptr) {
      std::unordered_map<std::string, DpiRuleCounters> was;
      for (DpiRuleCounters& c : dpiTotals(*old)) was.emplace(c.id, std::move(c));
      for (const rules::DpiRule& r : now->snap->dpi->rules) {
        if (auto it = was.find(r.id()); it != was.end()) kept.insert(*it);
      }
    }
    dpi_base_ = std::move(kept);
  }
  adoptUids(*now);
  rememberNames(*now->snap);
  delete old;
  return gen;
}

std::vector<RuleCounters> Dataplane::ruleCounters() const {
  std::lock_guard<std::mutex> lock(publish_mu_);
  const PublishedState* st = current_.load(std::memory_order_acquire);
  std::vector<RuleCounters> out(st->base.begin(), st->base.end());
  for (uint32_t w = 0; w < st->nworkers && st->nrules; ++w) {
    const RuleHit* h = st->hitsOf(w);
    for (uint32_t r = 0; r < st->nrules; ++r) {
      out[r].packets += h[r].packets.load();
      out[r].bytes += h[r].bytes.load();
      out[r].flows += h[r].flows.load();
      out[r].last_hit_ns = std::max(out[r].last_hit_ns, h[r].last_hit_ns.load());
    }
  }
  return out;
}

std::vector<DpiRuleCounters> Dataplane::dpiTotals(const PublishedState& st) const {
  std::vector<DpiRuleCounters> out;
  if (!st.snap->dpi || !st.dpi_hits) return out;
  const rules::CompiledDpi& d = *st.snap->dpi;
  out.resize(d.rules.size());
  for (size_t r = 0; r < d.rules.size(); ++r) {
    out[r].id = d.rules[r].id();
    if (auto it = dpi_base_.find(out[r].id); it != dpi_base_.end()) {
      out[r].matches = it->second.matches;
      out[r].last_hit_ns = it->second.last_hit_ns;
    }
  }
  const DpiRuleHits& h = *st.dpi_hits;
  for (uint32_t w = 0; w < h.nworkers; ++w) {
    const DpiRuleHit* wh = h.of(w);
    for (uint32_t r = 0; r < h.nrules && r < out.size(); ++r) {
      out[r].matches += wh[r].matches.load();
      out[r].last_hit_ns = std::max(out[r].last_hit_ns, wh[r].last_hit_ns.load());
    }
  }
  return out;
}

std::vector<DpiRuleCounters> Dataplane::dpiRuleCounters() const {
  std::lock_guard<std::mutex> lock(publish_mu_);
  return dpiTotals(*current_.load(std::memory_order_acquire));
}

std::shared_ptr<const rules::CompiledDpi> Dataplane::dpiRules(uint32_t generation) const {
  std::lock_guard<std::mutex> lock(publish_mu_);
  for (auto it = names_.rbegin(); it != names_.rend(); ++it) {
    if (it->generation == generation) return it->dpi;
  }
  return nullptr;
}

void Dataplane::rememberNames(const rules::Snapshot& s) {
  std::shared_ptr<const rules::CompiledDpi> dpi_names;
  if (s.dpi) {
    if (!names_.empty() && names_.back().dpi_src.lock() == s.dpi) {
      dpi_names = names_.back().dpi;
    } else {
      auto n = std::make_shared<rules::CompiledDpi>();
      n->rules = s.dpi->rules;
      n->unsupported = s.dpi->unsupported;
      n->num_namespaces = s.dpi->num_namespaces;
      n->sigs = s.dpi->sigs;  // --- signatures --- (shared while the signatures are unchanged)
      dpi_names = std::move(n);
    }
  }
  names_.push_back(NamesAt{s.generation, s.firewall, std::move(dpi_names), s.dpi, s.dns, s.lb});
  if (names_.size() > kNamesKept) names_.pop_front();
}

std::string Dataplane::ruleName(uint32_t generation, Stage stage, uint32_t rule) const {
  std::lock_guard<std::mutex> lock(publish_mu_);
  return ruleNameLocked(generation, stage, rule);
}

std::string Dataplane::ruleNameLocked(uint32_t generation, Stage stage, uint32_t rule) const {
  for (auto it = names_.rbegin(); it != names_.rend(); ++it) {
    if (it->generation != generation) continue;
    if (stage == Stage::kFirewall && it->fw && rule < it->fw->rules.size()) {
      return it->fw->rules[rule].id;
    }
    if (stage == Stage::kDpi && it->dpi && (rule & rules::kSigRuleBit) && it->dpi->sigs &&
        (rule & ~rules::kSigRuleBit) < it->dpi->sigs->rules.size()) {  // --- signatures ---
      const rules::Signature& g = it->dpi->sigs->rules[rule & ~rules::kSigRuleBit].sig;
      return absl::StrCat(g.gid, ":", g.sid);
    }
    if (stage == Stage::kDpi && it->dpi && rule < it->dpi->rules.size()) {
      return it->dpi->rules[rule].id();
    }
    if (stage == Stage::kDns && it->dns && rule < it->dns->lists.size()) {
      return it->dns->lists[rule]->name;  // DNS filtering: the list
    }
    return "";
  }
  return "";
}

std::string Dataplane::backendName(uint32_t generation, uint16_t service,
                                   uint16_t backend) const {
  std::lock_guard<std::mutex> lock(publish_mu_);
  for (auto it = names_.rbegin(); it != names_.rend(); ++it) {
    if (it->generation != generation) continue;
    if (!it->lb || service >= it->lb->services.size()) return "";
    const auto& svc = *it->lb->services[service];
    return backend < svc.backends.size() ? svc.backends[backend].id : "";
  }
  return "";
}

uint32_t Dataplane::currentGeneration() const {
  // Not current_->snap->generation: an API thread is no RCU reader, and a publish on another
  // thread may free that state between the load and the read (found by ASan in
  // integration_api_faults: GetStatus/GetStats racing 32 clients' applies).
  return generation_.load(std::memory_order_acquire);
}

ExplainResult Dataplane::explain(const uint8_t* frame, uint32_t len, uint8_t side) const {
  std::lock_guard<std::mutex> lock(publish_mu_);
  const PublishedState* st = current_.load(std::memory_order_acquire);
  return explainPacket(*st->snap, frame, len, side, st->geoip.get(), &opts_.extra_stages);
}

std::vector<WorkerInfo> Dataplane::workers() const {
  std::vector<WorkerInfo> out;
  for (size_t w = 0; w < workers_.size(); ++w) {
    WorkerInfo i;
    i.id = static_cast<uint16_t>(w);
    i.lcore = w < opts_.worker_lcores.size() ? opts_.worker_lcores[w] : rte_get_main_lcore();
    i.generation = static_cast<uint32_t>(counters_[w].generation.load());
    out.push_back(i);
  }
  return out;
}

std::vector<PortInfo> Dataplane::ports() const {
  std::vector<PortInfo> out;
  for (uint8_t side : {kSideA, kSideB}) {
    PortInfo p;
    p.side = side;
    p.port_id = side == kSideA ? opts_.port_a : opts_.port_b;
    char name[RTE_ETH_NAME_MAX_LEN] = {0};
    rte_eth_dev_get_name_by_port(p.port_id, name);
    p.name = name;
    rte_eth_dev_info info{};
    if (rte_eth_dev_info_get(p.port_id, &info) == 0 && info.driver_name) p.driver = info.driver_name;
    rte_eth_stats st{};
    if (rte_eth_stats_get(p.port_id, &st) == 0) {
      p.rx_packets = st.ipackets;
      p.rx_bytes = st.ibytes;
      p.tx_packets = st.opackets;
      p.tx_bytes = st.obytes;
      p.rx_missed = st.imissed;
      p.rx_errors = st.ierrors;
      p.rx_nombuf = st.rx_nombuf;
      p.tx_errors = st.oerrors;
    }
    out.push_back(std::move(p));
  }
  return out;
}

absl::Status Dataplane::launch() {
  if (opts_.worker_lcores.size() != workers_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(workers_.size(), " workers need as many "
                                                   "worker lcores; EAL gave ",
                                                   opts_.worker_lcores.size()));
  }
  stop_.store(false);
  launched_lcores_.clear();
  for (size_t i = 0; i < workers_.size(); ++i) {
    // A worker given the main lcore is run by the caller itself (replay: attachCaller).
    if (opts_.worker_lcores[i] == rte_get_main_lcore()) continue;
    int rc = rte_eal_remote_launch(workerMain, workers_[i].get(), opts_.worker_lcores[i]);
    if (rc != 0) {
      stop();
      return absl::InternalError(absl::StrCat("cannot launch worker ", i, " on lcore ",
                                              opts_.worker_lcores[i]));
    }
    launched_lcores_.push_back(opts_.worker_lcores[i]);
  }
  launched_ = true;
  return absl::OkStatus();
}

void Dataplane::stop() {
  stop_.store(true);
  if (!launched_) return;
  for (unsigned lc : launched_lcores_) rte_eal_wait_lcore(lc);
  launched_lcores_.clear();
  launched_ = false;
}

std::string Dataplane::distributionSummary() const {
  if (workers_.size() <= 1) return "one worker";
  if (!software_) return "RSS (symmetric key) to one rx queue per worker";
  std::string out = "software distribution";
  for (int s = 0; s < 2; ++s) {
    absl::StrAppend(&out, s ? "; " : " (", "side ", sideName(s), ": ", rx_queues_[s],
                    " rx queue(s) polled by worker(s) 0", rx_queues_[s] > 1 ? absl::StrCat("-", rx_queues_[s] - 1) : "",
                    ", ", tx_queues_[s] >= workers_.size() ? "a tx queue per worker"
                                                           : absl::StrCat(tx_queues_[s], " tx queue(s), the other workers send through a ring to worker 0"));
  }
  out += ")";
  return out;
}

bool Dataplane::othersSettled(uint16_t caller, const std::function<void()>& between) {
  // Everything handed over was judged and everything queued for a ring was sent: the rings
  // are empty and every other worker finished two whole loops since they were seen empty
  // (the loop that may have dequeued the last packets included). The caller keeps running
  // its own worker meanwhile (worker 0 sends the tx rings).
  Worker& me = *workers_[caller];
  auto poll = [&] {
    me.pollOnce();
    if (between) between();
  };
  auto ringsEmpty = [&] {
    for (rte_ring* r : inbound_) if (rte_ring_count(r) != 0) return false;
    for (rte_ring* r : tx_rings_) if (r != nullptr && rte_ring_count(r) != 0) return false;
    return true;
  };
  poll();
  if (!ringsEmpty()) return false;
  std::vector<uint64_t> loops(workers_.size());
  for (size_t w = 0; w < workers_.size(); ++w) loops[w] = counters_[w].loops.load();
  for (size_t w = 0; w < workers_.size(); ++w) {
    if (w == caller) continue;
    while (counters_[w].loops.load() < loops[w] + 2) {
      poll();
      rte_pause();
    }
  }
  poll();
  return ringsEmpty();
}

void Dataplane::settleOthers(uint16_t caller, const std::function<void()>& between) {
  if (inbound_.empty()) return;
  while (!othersSettled(caller, between)) {
  }
}

void Dataplane::attachCaller(uint16_t i) {
  rte_rcu_qsbr_thread_register(qsbr_, i);
  rte_rcu_qsbr_thread_online(qsbr_, i);
  attached_caller_ = i;
}

void Dataplane::detachCaller(uint16_t i) {
  rte_rcu_qsbr_thread_offline(qsbr_, i);
  rte_rcu_qsbr_thread_unregister(qsbr_, i);
  attached_caller_ = -1;
}

CountersSnapshot Dataplane::counters() const {
  CountersSnapshot s;
  // Every worker's handed-in count is read before any handed-off count: a packet is counted
  // off before its enqueue (Distributor::distribute) and in after its dequeue with a release
  // store, read here with acquire, so what this snapshot counts in it has counted off, and
  // the fleet-wide total never shows more packets handed in than handed off. Read worker by
  // worker, worker 1 would go on receiving (and counting in) after worker 0's count was read.
  std::vector<uint64_t> handed_in(workers_.size());
  for (size_t w = 0; w < workers_.size(); ++w) {
    handed_in[w] = counters_[w].dist_handed_in.loadAcquire();
  }
  for (size_t w = 0; w < workers_.size(); ++w) {
    s.per_worker.push_back(readCounters(counters_[w]));
    s.per_worker.back().dist_handed_in = handed_in[w];
    accumulate(s.total, s.per_worker.back());
  }
  return s;
}

std::vector<LbBackendStats> Dataplane::lbBackendStats() const {
  std::vector<LbBackendStats> out;
  for (const auto& w : workers_) {
    const auto* lb = static_cast<const LbStage*>(w->stage("lb"));
    if (lb == nullptr) continue;
    const LbStage::LbBackendCounters* c = lb->counters();
    if (c == nullptr) continue;
    for (uint32_t i = 0; i < LbStage::kLbCounterSlots; ++i) {
      uint64_t id = c[i].identity.load();
      if (id == 0) continue;
      auto it = std::find_if(out.begin(), out.end(),
                             [&](const LbBackendStats& s) { return s.identity == id; });
      if (it == out.end()) {
        out.push_back(LbBackendStats{});
        it = out.end() - 1;
        it->identity = id;
      }
      it->packets += c[i].packets.load();
      it->bytes += c[i].bytes.load();
      it->flows_active += c[i].flows_active.load();
      it->flows_total += c[i].flows_total.load();
    }
  }
  return out;
}

uint32_t Dataplane::drainEvents(const std::function<void(const Event&)>& fn, uint32_t max) {
  // Round-robin over the worker rings, a burst at a time, so a busy worker cannot starve
  // the others' rings within one call.
  uint32_t n = 0;
  bool more = true;
  while (more && n < max) {
    more = false;
    for (rte_ring* r : rings_) {
      void* objs[64];
      unsigned want = std::min<uint32_t>(64, max - n);
      if (want == 0) break;
      unsigned got = rte_ring_sc_dequeue_burst(r, objs, want, nullptr);
      if (got == 0) continue;
      for (unsigned i = 0; i < got; ++i) fn(*static_cast<const Event*>(objs[i]));
      rte_mempool_put_bulk(event_pool_, objs, got);
      n += got;
      more = true;
    }
  }
  return n;
}

}  // namespace dpu::dp
