#include "control/config/config_manager.h"

#include <cstdio>
#include "rules/compile/lb_compiler.h"
#include "rules/compile/yara_translate.h"  // --- dpi ---

#include <chrono>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "control/config/config_loader.h"
#include "control/progress/progress_registry.h"
#include "rules/compile/progress.h"
#include "rules/compile/firewall_compiler.h"
#include "rules/compiled/snapshot.h"

namespace dpu::ctl {
namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

absl::Status fail(ApplyError* error, absl::Status st, rules::ConfigErrorList errors = {}) {
  if (error) {
    error->status = st;
    error->errors = std::move(errors);
  }
  return st;
}

// Settings the dataplane sizes once at start: a change is committed (and used at the next
// start) but the running tables keep their size.
void startOnlyWarnings(const rules::DataplaneSettings& was, const rules::DataplaneSettings& now,
                       std::vector<std::string>& out) {
  struct F { const char* field; uint32_t was, now; };
  const F fields[] = {
      {"dataplane.flow_table.capacity_per_worker", was.flow_capacity, now.flow_capacity},
      {"dataplane.fragments.max_datagrams", was.frag_max_datagrams, now.frag_max_datagrams},
      {"dataplane.fragments.max_fragments", was.frag_max_fragments, now.frag_max_fragments},
      {"dataplane.fragments.reassembly_buffers", was.frag_reassembly_buffers,
       now.frag_reassembly_buffers},
      {"dataplane.fragments.max_datagram_bytes", was.frag_max_datagram_bytes,
       now.frag_max_datagram_bytes},
      {"dataplane.fragments.max_held_fragments", was.frag_max_held, now.frag_max_held},
      {"dataplane.tcp.overlap_window_bytes", was.tcp_window_bytes, now.tcp_window_bytes},
      {"dataplane.tcp.overlap_windows_per_worker", was.tcp_windows_per_worker,
       now.tcp_windows_per_worker},
      {"dataplane.tcp.reorder_bytes", was.tcp_reorder_bytes, now.tcp_reorder_bytes},
      {"dataplane.tcp.reorder_buffers_per_worker", was.tcp_reorder_buffers_per_worker,
       now.tcp_reorder_buffers_per_worker},
      {"dataplane.tcp.hold_out_of_order", was.tcp_hold_out_of_order, now.tcp_hold_out_of_order},
      {"dataplane.tcp.hold_packets_per_worker", was.tcp_hold_packets_per_worker,
       now.tcp_hold_packets_per_worker},
      {"dataplane.tcp.hold_timeout_ms", was.tcp_hold_timeout_ms, now.tcp_hold_timeout_ms},
  };
  for (const F& f : fields) {
    if (f.was == f.now) continue;
    out.push_back(absl::StrCat(f.field, ": ", f.was, " -> ", f.now,
                               " is committed but takes effect at the next start (the table is "
                               "sized once)"));
  }
  if (was.distribution != now.distribution) {
    static const char* const kNames[] = {"AUTO", "RSS", "SOFTWARE"};
    out.push_back(absl::StrCat("dataplane.distribution: ", kNames[int(was.distribution)], " -> ",
                               kNames[int(now.distribution)],
                               " is committed but takes effect at the next start (the ports "
                               "are set up once)"));
  }
}

}  // namespace

ConfigManager::ConfigManager(ConfigStore* store, dp::DataplaneControl* plane)
    : committed_version_(store->version()), store_(store), plane_(plane) {}

ConfigManager::~ConfigManager() {
  if (merge_guard_) {
    std::lock_guard<std::mutex> lock(merge_guard_->mu);  // waits for a republish under way
    merge_guard_->self = nullptr;
    rules::setDpiMergeListener(nullptr);
  }
}

void ConfigManager::followDpiMerges() {
  merge_guard_ = std::make_shared<MergeGuard>();
  merge_guard_->self = this;
  std::shared_ptr<MergeGuard> g = merge_guard_;
  rules::setDpiMergeListener([g] {
    std::lock_guard<std::mutex> lock(g->mu);
    if (g->self == nullptr) return;
    absl::Status st = g->self->republishDpi();
    if (!st.ok())
      std::fprintf(stderr, "dpu-appliance: dpi: merged rule databases not published: %s\n",
                   std::string(st.message()).c_str());
  });
}

absl::Status ConfigManager::republishDpi() {
  std::lock_guard<std::mutex> lock(mu_);
  const std::shared_ptr<const rules::CompiledDpi>& cur = published_dpi_.compiled;
  if (!cur || !published_snap_ || published_snap_->dpi != cur) return absl::OkStatus();
  bool partial = false;
  for (const rules::DpiShard& sh : cur->shards) partial |= sh.delta || sh.live != sh.ids.size();
  if (!partial) return absl::OkStatus();
  // The published model (not the files again: what was committed stays what runs).
  rules::ConfigErrorList errors;
  auto t = Clock::now();
  auto dpi = rules::compileDpi(published_dpi_.model, errors);
  if (!dpi.ok()) return dpi.status();
  auto next = std::make_unique<rules::Snapshot>(*published_snap_);
  next->dpi = *dpi;
  auto copy = std::make_unique<rules::Snapshot>(*next);
  uint32_t generation = 0;
  if (plane_ != nullptr) {
    auto p = plane_->prepare(std::move(next));
    if (!p.ok()) return p.status();
    generation = plane_->publish(std::move(*p));
  }
  published_dpi_.compiled = *dpi;
  published_snap_ = std::move(copy);
  dpi_republishes_.fetch_add(1, std::memory_order_relaxed);
  std::fprintf(stderr,
               "dpu-appliance: dpi: background merge done: config version %lu republished "
               "(generation %u, %zu databases, delta %u patterns, %.1f ms)\n",
               static_cast<unsigned long>(published_snap_->config_version), generation,
               (*dpi)->shards.size(), (*dpi)->delta_patterns, msSince(t));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<rules::Snapshot>> ConfigManager::compileCurrent() const {
  std::lock_guard<std::mutex> lock(mu_);
  const v1::ApplianceConfig& cfg = store_->current();
  rules::ConfigErrorList errors;
  ModelDetails details;
  auto model = toModel(cfg, &errors, &details);
  absl::Status st = model.status();
  if (model.ok()) {
    model->version = cfg.version();
    auto snap = rules::compileSnapshot(*model, 0, &errors, &published_fw_, &published_lb_,
                                       &published_dpi_, &published_dns_);
    if (snap.ok()) {
      published_fw_ = rules::FirewallReuse{model->firewall, (*snap)->firewall};
      published_lb_ = rules::LbReuse{(*snap)->lb};
      published_dpi_ = rules::DpiReuse{model->dpi, (*snap)->dpi};  // --- dpi ---
      published_dns_ = rules::DnsReuse{(*snap)->dns};
      view_ = FirewallView{cfg.version(), std::move(details.firewall_rules), (*snap)->firewall};
      published_snap_ = std::make_unique<rules::Snapshot>(**snap);
      return snap;
    }
    st = snap.status();
  }
  return absl::Status(st.code(), absl::StrCat("committed config ", store_->path(), " (version ",
                                              cfg.version(), "): ", st.message()));
}

v1::ApplianceConfig ConfigManager::current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return store_->current();
}

uint64_t ConfigManager::version() const {
  // Not under mu_: status and stats must not wait for a long apply.
  return committed_version_.load(std::memory_order_acquire);
}

absl::StatusOr<ApplyResult> ConfigManager::apply(const v1::ApplianceConfig& next,
                                                 uint64_t expected_version, bool force,
                                                 ApplyError* error) {
  return update([&](v1::ApplianceConfig& doc) {
                  doc = next;
                  return absl::OkStatus();
                },
                expected_version, force, error);
}

absl::StatusOr<ApplyResult> ConfigManager::update(
    const std::function<absl::Status(v1::ApplianceConfig&)>& mutate, uint64_t expected_version,
    bool force, ApplyError* error) {
  return update(
      std::function<absl::Status(v1::ApplianceConfig&, rules::ConfigErrorList&)>(
          [&](v1::ApplianceConfig& doc, rules::ConfigErrorList&) { return mutate(doc); }),
      expected_version, force, error);
}

absl::StatusOr<ApplyResult> ConfigManager::update(
    const std::function<absl::Status(v1::ApplianceConfig&, rules::ConfigErrorList&)>& mutate,
    uint64_t expected_version, bool force, ApplyError* error) {
  return updateImpl(mutate, expected_version, force, error, /*from_owner=*/false);
}

absl::StatusOr<ApplyResult> ConfigManager::applyAsFollower(const v1::ApplianceConfig& next,
                                                           ApplyError* error) {
  return updateImpl(
      [&](v1::ApplianceConfig& doc, rules::ConfigErrorList&) {
        doc = next;
        return absl::OkStatus();
      },
      0, /*force=*/true, error, /*from_owner=*/true);
}

void ConfigManager::setFollower(std::string why) {
  std::lock_guard<std::mutex> lock(mu_);
  follower_ = std::move(why);
}

absl::StatusOr<ApplyResult> ConfigManager::updateImpl(
    const std::function<absl::Status(v1::ApplianceConfig&, rules::ConfigErrorList&)>& mutate,
    uint64_t expected_version, bool force, ApplyError* error, bool from_owner) {
  std::unique_ptr<ProgressRegistry::Task> task;
  if (progress_) task = progress_->begin("config apply");
  rules::ProgressScope scope(task.get());
  ApplyError local_error;  // --- ops --- the errors of a refusal, for its event
  if (error == nullptr) error = &local_error;
  const char* phase = "";
  absl::StatusOr<ApplyResult> r = [&]() -> absl::StatusOr<ApplyResult> {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t based_on = force ? store_->version() : expected_version;
    absl::StatusOr<ApplyResult> out = [&]() -> absl::StatusOr<ApplyResult> {
      // --- fleet --- A node that follows a fleet takes its policy from the fleet only.
      phase_ = "follower";
      if (!from_owner && !follower_.empty()) {
        return fail(error, absl::FailedPreconditionError(follower_));
      }
      phase_ = "version";
      if (!force && expected_version != store_->version()) {
        return fail(error, absl::AbortedError(absl::StrCat("config version moved: expected ",
                                                           expected_version, ", committed ",
                                                           store_->version())));
      }
      phase_ = "edit";
      v1::ApplianceConfig next = store_->current();
      rules::ConfigErrorList edit_errors;
      if (absl::Status st = mutate(next, edit_errors); !st.ok()) {
        return fail(error, std::move(st), std::move(edit_errors));
      }
      return applyLocked(std::move(next), error);
    }();
    phase = phase_;
    if (!out.ok()) error->phase = phase;
    if (!out.ok() && on_refused_) {
      on_refused_(RefusedApply{based_on, store_->version(), phase, out.status(), error->errors});
    }
    return out;
  }();
  record(r, phase);
  return r;
}

void ConfigManager::record(const absl::StatusOr<ApplyResult>& r, const char* phase) {
  std::lock_guard<std::mutex> lock(stats_mu_);
  if (!r.ok()) {
    ++stats_.refused_by_phase[phase];
    switch (r.status().code()) {
      case absl::StatusCode::kInvalidArgument: ++stats_.invalid; break;
      case absl::StatusCode::kAborted: ++stats_.conflicts; break;
      default: ++stats_.failed; break;
    }
    return;
  }
  ++stats_.applied;
  double s = (r->validate_ms + r->compile_ms + r->prepare_ms + r->persist_ms + r->publish_ms) /
             1000.0;
  ++stats_.duration_count;
  stats_.duration_sum_s += s;
  for (size_t i = 0; i < ApplyStats::kBuckets; ++i) {
    if (s <= ApplyStats::kBucketsS[i]) ++stats_.duration_le[i];
  }
  stats_.last = *r;
  stats_.last_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
}

ApplyStats ConfigManager::applyStats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

rules::ConfigErrorList ConfigManager::validate(const v1::ApplianceConfig& cfg) const {
  return validateConfig(cfg);
}

void ConfigManager::setOnApplied(std::function<void(const ApplyResult&)> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  on_applied_ = std::move(fn);
}

void ConfigManager::setOnRefused(std::function<void(const RefusedApply&)> fn) {  // --- ops ---
  std::lock_guard<std::mutex> lock(mu_);
  on_refused_ = std::move(fn);
}

void ConfigManager::reportRefused(const std::string& phase, const absl::Status& status) {
  if (status.ok()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (on_refused_) {
      on_refused_(RefusedApply{store_->version(), store_->version(), phase, status, {}});
    }
  }
  absl::StatusOr<ApplyResult> r = status;
  record(r, phase.c_str());
}

absl::StatusOr<ConfigManager::FirewallView> ConfigManager::firewallView() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (view_.compiled && view_.version == store_->version()) return view_;
  // Not compiled by this manager yet (e.g. no apply since start): compile it now.
  const v1::ApplianceConfig& cfg = store_->current();
  rules::ConfigErrorList errors;
  ModelDetails details;
  auto model = toModel(cfg, &errors, &details);
  if (!model.ok()) return model.status();
  auto fw = published_fw_.compiled && published_fw_.model == model->firewall
                ? absl::StatusOr<std::shared_ptr<const rules::CompiledFirewall>>(
                      published_fw_.compiled)
                : rules::compileFirewall(model->firewall, &errors);
  if (!fw.ok()) return fw.status();
  view_ = FirewallView{cfg.version(), std::move(details.firewall_rules), *fw};
  return view_;
}

void ConfigManager::inheritCompiled(const ConfigManager& other) {
  if (&other == this) return;
  std::scoped_lock lock(mu_, other.mu_);
  published_fw_ = other.published_fw_;
  published_lb_ = other.published_lb_;  // --- lb ---
  published_dpi_ = other.published_dpi_;  // --- dpi ---
  published_dns_ = other.published_dns_;
  view_ = other.view_;
  if (other.published_snap_) published_snap_ = std::make_unique<rules::Snapshot>(*other.published_snap_);
}

// --- lb ---
absl::StatusOr<ConfigManager::LbView> ConfigManager::lbView() const {
  std::lock_guard<std::mutex> lock(mu_);
  const v1::ApplianceConfig& cfg = store_->current();
  auto model = toModel(cfg);
  if (!model.ok()) return model.status();
  // Services unchanged since the last publish are the published objects (no rebuild).
  auto lb = rules::compileLb(model->lb, nullptr, published_lb_.compiled.get());
  if (!lb.ok()) return lb.status();
  return LbView{cfg.version(), *lb};
}

// --- dpi ---
absl::StatusOr<ConfigManager::DpiView> ConfigManager::dpiView() const {
  std::lock_guard<std::mutex> lock(mu_);
  const v1::ApplianceConfig& cfg = store_->current();
  auto model = toModel(cfg);
  if (!model.ok()) return model.status();
  DpiView v{cfg.version(), std::move(model->dpi), nullptr};
  if (!v.model.enabled) return v;
  if (published_dpi_.compiled && published_dpi_.model == v.model) {
    v.compiled = published_dpi_.compiled;
    return v;
  }
  rules::ConfigErrorList errors;
  auto dpi = rules::compileDpi(v.model, errors);
  if (!dpi.ok()) return dpi.status();
  v.compiled = std::move(*dpi);
  return v;
}

absl::StatusOr<ApplyResult> ConfigManager::applyLocked(v1::ApplianceConfig next,
                                                       ApplyError* error) {
  ApplyResult result;
  const uint64_t new_version = store_->version() + 1;
  next.set_version(new_version);

  rules::ConfigErrorList errors;
  rules::ProgressSink* progress = rules::currentProgress();
  progress->step("validating", 0, "");
  phase_ = "validate";
  auto t = Clock::now();
  ModelDetails details;
  auto model = toModel(next, &errors, &details);
  result.validate_ms = msSince(t);
  if (!model.ok()) {
    // The sections toModel did not refuse are compiled too: every error in one answer.
    if (!errors.empty()) compileCleanSections(next, errors);
    absl::Status st = errors.empty() ? model.status() : rules::errorsToStatus(errors);
    return fail(error, std::move(st), std::move(errors));
  }
  model->version = new_version;

  progress->step("compiling", 0, "");
  phase_ = "compile";
  t = Clock::now();
  // The compiled firewall of the running snapshot is shared when the section is unchanged.
  auto snap = rules::compileSnapshot(*model, 0, &errors, &published_fw_, &published_lb_,
                                     &published_dpi_, &published_dns_);
  result.compile_ms = msSince(t);
  if (!snap.ok()) {
    if (!errors.empty()) compileCleanSections(next, errors, /*compiled_already=*/true);
    absl::Status st = errors.empty() ? snap.status() : rules::errorsToStatus(errors);
    return fail(error, std::move(st), std::move(errors));
  }
  std::shared_ptr<const rules::CompiledFirewall> compiled_fw = (*snap)->firewall;
  std::shared_ptr<const rules::CompiledLb> compiled_lb = (*snap)->lb;  // --- lb ---
  // --- dpi --- rules outside the supported subset are listed in the apply response.
  std::shared_ptr<const rules::CompiledDpi> compiled_dpi = (*snap)->dpi;
  if (compiled_dpi && compiled_dpi != published_dpi_.compiled) result.dpi_compiled = compiled_dpi;
  if (compiled_dpi) {
    for (const rules::DpiUnsupported& u : compiled_dpi->unsupported)
      result.warnings.push_back(absl::StrCat("dpi: rule ", u.source, ":", u.rule, " (line ", u.line,
                                             ") unsupported, not matched: ", u.reason));
    if (!compiled_dpi->cache_warning.empty())
      result.warnings.push_back(absl::StrCat("dpi: ", compiled_dpi->cache_warning));
  }
  std::shared_ptr<const rules::CompiledDns> compiled_dns = (*snap)->dns;
  for (const std::string& w : details.warnings) result.warnings.push_back(w);

  // The committed document is valid (it was compiled when applied); if it no longer is
  // (hand-edited state file), there is nothing to compare against.
  if (auto was = toModel(store_->current()); was.ok()) {
    startOnlyWarnings(was->dataplane, model->dataplane, result.warnings);
  }
  for (std::string& w : policyWarnings(*model)) result.warnings.push_back(std::move(w));

  // The dataplane builds what it needs for the snapshot (it may refuse it, e.g. a GeoIP
  // database that does not open): a failure here is a failed apply, nothing persisted.
  std::unique_ptr<dp::PreparedSnapshot> prepared;
  progress->step("preparing dataplane tables", 0, "");
  phase_ = "prepare";
  t = Clock::now();
  auto snap_copy = std::make_unique<rules::Snapshot>(**snap);
  if (plane_ != nullptr) {
    auto p = plane_->prepare(std::move(*snap));
    if (!p.ok()) {
      rules::ConfigError e;
      e.reason = std::string(p.status().message());
      return fail(error, p.status(), {std::move(e)});
    }
    prepared = std::move(*p);
  }
  result.prepare_ms = msSince(t);

  // Persist before publishing: the dataplane never runs a config that a restart would lose.
  progress->step("persisting", 0, "");
  phase_ = "persist";
  t = Clock::now();
  absl::Status st = store_->commit(next);
  result.persist_ms = msSince(t);
  if (!st.ok()) return fail(error, std::move(st));
  result.version = store_->version();
  committed_version_.store(result.version, std::memory_order_release);

  progress->step("publishing (RCU grace period)", 0, "");
  phase_ = "publish";
  t = Clock::now();
  if (plane_ != nullptr) result.generation = plane_->publish(std::move(prepared));
  result.publish_ms = msSince(t);
  published_fw_ = rules::FirewallReuse{std::move(model->firewall), compiled_fw};
  published_lb_ = rules::LbReuse{std::move(compiled_lb)};  // --- lb ---
  published_dpi_ = rules::DpiReuse{std::move(model->dpi), std::move(compiled_dpi)};  // --- dpi ---
  published_dns_ = rules::DnsReuse{std::move(compiled_dns)};
  view_ = FirewallView{new_version, std::move(details.firewall_rules), std::move(compiled_fw)};
  published_snap_ = std::move(snap_copy);

  if (on_applied_) on_applied_(result);
  if (error) *error = ApplyError{};
  return result;
}

}  // namespace dpu::ctl
