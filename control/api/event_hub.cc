#include "control/api/event_hub.h"

#include <algorithm>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "control/app/summary.h"
#include "dataplane/flow/tcp_state.h"

namespace dpu::ctl {

v1::Event toApiEvent(const dp::Event& e, int64_t wall_offset_ns,
                     const dp::DataplaneControl* names) {
  v1::Event ev;
  ev.set_timestamp_unix_ns(static_cast<int64_t>(e.ts_ns) + wall_offset_ns);
  ev.set_type(dp::eventTypeName(e.type));
  ev.set_flow_id(e.flow_id);
  ev.set_in_iface(dp::sideName(e.in_side));
  if (e.ip_ver) {
    ev.set_src_ip(ipToString(e.src, e.ip_ver));
    ev.set_src_port(e.sport);
    ev.set_dest_ip(ipToString(e.dst, e.ip_ver));
    ev.set_dest_port(e.dport);
    ev.set_proto(protoName(e.proto));
  }
  ev.set_vlan(e.vlan);
  ev.set_verdict(dp::verdictName(e.verdict));
  if (e.stage != dp::Stage::kNone) ev.set_stage(dp::stageName(e.stage));
  if (e.reason != dp::DropReason::kNone) ev.set_reason(dp::dropReasonName(e.reason));
  if (e.rule != dp::kNoRule) ev.set_rule(ruleLabel(names, e.generation, e.stage, e.rule));
  if (e.type == dp::EventType::kDns) {  // DNS filtering: the list's name, the blocked name
    ev.set_rule(e.dns_list);
    ev.set_dns_name(e.dns_name);
  }
  if (e.type == dp::EventType::kDpiAlert && e.rule != dp::kNoRule && names != nullptr) {
    // --- dpi --- the rule's tags, metadata and action.
    if (auto d = names->dpiRules(e.generation); d && e.rule < d->rules.size()) {
      const rules::DpiRule& r = d->rules[e.rule];
      for (const std::string& t : r.tags) ev.add_tags(utf8Safe(t));
      for (const auto& [k, v] : r.meta) {
        v1::DpiMeta* m = ev.add_meta();
        m->set_key(utf8Safe(k));
        m->set_value(utf8Safe(v));
      }
      ev.set_dpi_action(rules::dpiActionName(r.action));
    }
  }
  if (e.type == dp::EventType::kFlowEnd) {
    v1::FlowSummary* f = ev.mutable_flow();
    f->set_pkts_toserver(e.packets[0]);
    f->set_pkts_toclient(e.packets[1]);
    f->set_bytes_toserver(e.bytes[0]);
    f->set_bytes_toclient(e.bytes[1]);
    f->set_start_unix_ns(static_cast<int64_t>(e.first_seen_ns) + wall_offset_ns);
    if (e.proto == 6) f->set_state(dp::tcpStateName(static_cast<dp::TcpState>(e.tcp_state)));
    f->set_end_reason(dp::flowEndReasonName(e.end_reason));
  }
  ev.set_json(eventJson(e, wall_offset_ns, names));
  return ev;
}

v1::Event configEvent(uint64_t version, uint32_t generation, int64_t now_unix_ns) {
  v1::Event ev;
  ev.set_timestamp_unix_ns(now_unix_ns);
  ev.set_type("config");
  ev.set_config_version(version);
  ev.set_json(absl::StrCat("{\"timestamp\":\"", isoTime(static_cast<uint64_t>(now_unix_ns)),
                           "\",\"event_type\":\"config\",\"config\":{\"version\":", version,
                           ",\"generation\":", generation, "}}"));
  return ev;
}

v1::Event configEvent(const ApplyResult& r, int64_t now_unix_ns) {
  v1::Event ev = configEvent(r.version, r.generation, now_unix_ns);
  const double total = r.validate_ms + r.compile_ms + r.prepare_ms + r.persist_ms + r.publish_ms;
  ev.set_json(absl::StrCat(
      "{\"timestamp\":\"", isoTime(static_cast<uint64_t>(now_unix_ns)),
      "\",\"event_type\":\"config\",\"config\":{\"version\":", r.version,
      ",\"generation\":", r.generation, ",\"duration_ms\":", absl::StrFormat("%.3f", total),
      ",\"validate_ms\":", absl::StrFormat("%.3f", r.validate_ms),
      ",\"compile_ms\":", absl::StrFormat("%.3f", r.compile_ms),
      ",\"prepare_ms\":", absl::StrFormat("%.3f", r.prepare_ms),
      ",\"persist_ms\":", absl::StrFormat("%.3f", r.persist_ms),
      ",\"publish_ms\":", absl::StrFormat("%.3f", r.publish_ms),
      ",\"warnings\":", r.warnings.size(), ",\"result\":\"applied\"}}"));
  v1::ConfigEventDetail* d = ev.mutable_config();  // --- ops ---
  d->set_result("applied");
  d->set_based_on_version(r.version - 1);
  d->set_generation(r.generation);
  d->set_duration_ms(total);
  d->set_warnings(static_cast<uint32_t>(r.warnings.size()));
  return ev;
}

// --- ops --- refused applies -------------------------------------------------------------
namespace {

// A JSON string: quotes, backslashes and control characters escaped (error reasons may
// quote anything, e.g. a YARA compiler message with a newline).
std::string jsonQuote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      absl::StrAppend(&out, absl::StrFormat("\\u%04x", c));
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
  return out;
}

}  // namespace

v1::Event refusedConfigEvent(const RefusedApply& r, int64_t now_unix_ns) {
  v1::Event ev;
  ev.set_timestamp_unix_ns(now_unix_ns);
  ev.set_type("config");
  ev.set_config_version(r.committed_version);
  v1::ConfigEventDetail* d = ev.mutable_config();
  d->set_result("refused");
  d->set_based_on_version(r.based_on_version);
  d->set_phase(r.phase);
  d->set_code(absl::StatusCodeToString(r.status.code()));
  d->set_message(rules::abbreviate(std::string(r.status.message()), kRefusedMessageMax));
  d->set_error_count(static_cast<uint32_t>(r.errors.size()));
  std::string errors_json;
  for (size_t i = 0; i < r.errors.size() && i < kRefusedErrorsShown; ++i) {
    const rules::ConfigError e = rules::abbreviated(r.errors[i]);
    v1::ConfigError* a = d->add_errors();
    a->set_section(e.section);
    a->set_rule(e.rule);
    a->set_index(e.index);
    a->set_line(e.line);
    a->set_file(e.file);
    a->set_field(e.field);
    a->set_reason(e.reason);
    absl::StrAppend(&errors_json, i ? "," : "", "{\"section\":", jsonQuote(e.section),
                    ",\"rule\":", jsonQuote(e.rule), ",\"index\":", e.index,
                    ",\"file\":", jsonQuote(e.file), ",\"line\":", e.line,
                    ",\"field\":", jsonQuote(e.field), ",\"reason\":", jsonQuote(e.reason),
                    ",\"text\":", jsonQuote(rules::formatError(e)), "}");
  }
  ev.set_json(absl::StrCat(
      "{\"timestamp\":\"", isoTime(static_cast<uint64_t>(now_unix_ns)),
      "\",\"event_type\":\"config\",\"config\":{\"result\":\"refused\",\"version\":",
      r.committed_version, ",\"based_on_version\":", r.based_on_version,
      ",\"phase\":", jsonQuote(r.phase), ",\"code\":", jsonQuote(d->code()),
      ",\"message\":", jsonQuote(d->message()), ",\"error_count\":", r.errors.size(),
      ",\"errors\":[", errors_json, "]}}"));
  return ev;
}

// ---------------------------------------------------------------------------------------

EventSubscription::EventSubscription(size_t capacity, std::vector<std::string> types)
    : capacity_(capacity), types_(std::move(types)) {}

bool EventSubscription::wants(const std::string& type) const {
  return types_.empty() || std::find(types_.begin(), types_.end(), type) != types_.end();
}

void EventSubscription::offer(const std::shared_ptr<const v1::Event>& ev) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    if (queue_.size() >= capacity_) {
      ++lost_pending_;
      ++lost_total_;
      return;
    }
    queue_.push_back({ev, lost_pending_});
    lost_pending_ = 0;
    ++queued_total_;
  }
  cv_.notify_one();
}

bool EventSubscription::next(v1::Event* out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !queue_.empty() || closed_; });
  if (queue_.empty()) return false;
  Item it = std::move(queue_.front());
  queue_.pop_front();
  lock.unlock();
  *out = *it.ev;
  if (it.lost_before) out->set_lost(it.lost_before);
  return true;
}

void EventSubscription::close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

bool EventSubscription::closed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_;
}

uint64_t EventSubscription::lostTotal() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lost_total_;
}

uint64_t EventSubscription::queuedTotal() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_total_;
}

// ---------------------------------------------------------------------------------------

EventHub::EventHub(dp::DataplaneControl* plane, EventHubOptions opts)
    : plane_(plane), opts_(std::move(opts)) {}

EventHub::~EventHub() { stop(); }

absl::Status EventHub::start() {
  if (running_.load()) return absl::FailedPreconditionError("event pump already running");
  if (!opts_.events_file.empty() && !file_) {
    auto log = EventLog::open(
        EventLogOptions{opts_.events_file, opts_.events_max_bytes, opts_.events_keep});
    if (!log.ok()) return log.status();
    file_ = std::move(*log);
  }
  running_.store(true);
  thread_ = std::thread([this] { run(); });
  return absl::OkStatus();
}

void EventHub::stop() {
  bool was_running = running_.exchange(false);
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (was_running) tick();  // the workers' last events (flow ends at shutdown ...)
  std::vector<std::shared_ptr<EventSubscription>> subs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    subs.swap(subs_);
  }
  for (auto& s : subs) s->close();
  if (file_) file_->flush();
}

EventHub::Stats EventHub::stats() const {
  Stats s;
  s.dataplane_events = drained_.load(std::memory_order_relaxed);
  s.control_events = control_events_.load(std::memory_order_relaxed);
  if (file_) s.file = file_->stats();
  std::lock_guard<std::mutex> lock(mu_);
  s.subscribers = subs_.size();
  s.subscriber_lost = lost_by_gone_;
  for (const auto& sub : subs_) s.subscriber_lost += sub->lostTotal();
  return s;
}

std::shared_ptr<EventSubscription> EventHub::subscribe(size_t buffer,
                                                       std::vector<std::string> types) {
  if (buffer == 0) buffer = kDefaultBuffer;
  buffer = std::min(buffer, kMaxBuffer);
  auto sub = std::make_shared<EventSubscription>(buffer, std::move(types));
  std::lock_guard<std::mutex> lock(mu_);
  if (!running_.load()) {
    sub->close();
    return sub;
  }
  subs_.push_back(sub);
  return sub;
}

void EventHub::unsubscribe(const std::shared_ptr<EventSubscription>& sub) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::remove(subs_.begin(), subs_.end(), sub);
    if (it != subs_.end()) lost_by_gone_ += sub->lostTotal();
    subs_.erase(it, subs_.end());
  }
  sub->close();
}

size_t EventHub::subscriberCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  return subs_.size();
}

void EventHub::publish(v1::Event ev) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!running_.load()) return;
    injected_.push_back(std::move(ev));
    wake_ = true;
  }
  cv_.notify_all();
}

void EventHub::run() {
  while (running_.load()) {
    tick();
    ticks_.fetch_add(1, std::memory_order_release);
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, opts_.period, [&] { return wake_ || !running_.load(); });
    wake_ = false;
  }
}

void EventHub::deliver(const std::shared_ptr<const v1::Event>& ev,
                       const std::vector<std::shared_ptr<EventSubscription>>& subs) {
  for (const auto& s : subs) {
    if (s->wants(ev->type())) s->offer(ev);
  }
}

void EventHub::tick() {
  std::vector<std::shared_ptr<EventSubscription>> subs;
  std::vector<v1::Event> injected;
  {
    std::lock_guard<std::mutex> lock(mu_);
    subs = subs_;
    injected.swap(injected_);
  }
  const bool to_file = file_ != nullptr;
  if (to_file && reopen_.exchange(false)) file_->reopen();
  // One call per tick: Dataplane::drainEvents empties ring after ring until `max` events,
  // so a bounded call keeps a tick short; what is left waits for the next tick (20 ms).
  uint32_t n = plane_->drainEvents(
      [&](const dp::Event& e) {
        const char* type = dp::eventTypeName(e.type);
        bool wanted = false;
        for (const auto& s : subs) wanted = wanted || s->wants(type);
        if (!wanted && !to_file) return;  // drained and dropped: nobody listens
        auto ev = std::make_shared<const v1::Event>(toApiEvent(e, opts_.wall_offset_ns, plane_));
        if (to_file) file_->append(ev->json());
        if (wanted) deliver(ev, subs);
      },
      opts_.max_per_tick);
  drained_.fetch_add(n, std::memory_order_relaxed);
  for (auto& e : injected) {
    auto ev = std::make_shared<const v1::Event>(std::move(e));
    if (to_file) file_->append(ev->json());
    deliver(ev, subs);
  }
  control_events_.fetch_add(injected.size(), std::memory_order_relaxed);
  if (to_file) file_->flush();
}

}  // namespace dpu::ctl
