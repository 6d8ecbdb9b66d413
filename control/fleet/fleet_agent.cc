#include "control/fleet/fleet_agent.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "control/config/config_loader.h"

namespace dpu::fleet {
namespace {

namespace fs = std::filesystem;

// Writes `data` to `path` atomically (tmp, fsync, rename, fsync of the directory).
absl::Status writeAtomically(const std::string& path, std::string_view data) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot write ", tmp, ": ", std::strerror(errno)));
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return absl::InternalError(absl::StrCat("cannot write ", tmp, ": ", std::strerror(e)));
    }
    off += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot sync ", tmp, ": ", std::strerror(errno)));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, ": ", std::strerror(e)));
  }
  const std::string dir = fs::path(path).parent_path().string();
  if (int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); d >= 0) {
    ::fsync(d);
    ::close(d);
  }
  return absl::OkStatus();
}

bool transient(const absl::Status& st) {
  switch (st.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kResourceExhausted:
      return true;
    default:
      return false;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<FleetAgent>> FleetAgent::create(AgentOptions opts,
                                                               AgentHooks hooks) {
  if (absl::Status st = checkName("--fleet", opts.fleet); !st.ok()) return st;
  if (opts.node.empty()) {
    char host[256] = {};
    if (gethostname(host, sizeof(host) - 1) == 0) opts.node = host;
  }
  if (absl::Status st = checkName("--node", opts.node); !st.ok()) return st;
  if (absl::Status st = checkName("--group", opts.group); !st.ok()) return st;
  if (opts.state_dir.empty()) return absl::InvalidArgumentError("fleet agent: no state directory");
  if (!hooks.apply) return absl::InvalidArgumentError("fleet agent: no apply hook");
  if (opts.lease_ttl_s < 2) return absl::InvalidArgumentError("--fleet-lease-ttl: at least 2 s");
  std::unique_ptr<FleetAgent> a(new FleetAgent(std::move(opts), std::move(hooks)));
  std::error_code ec;
  fs::create_directories(a->dir_ + "/blobs", ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("cannot create ", a->dir_, "/blobs: ", ec.message()));
  }
  fs::permissions(a->dir_, fs::perms::owner_all, fs::perm_options::replace, ec);
  // What this node applied last, when it was this fleet's.
  std::ifstream in(a->dir_ + "/state.json");
  if (in) {
    std::stringstream ss;
    ss << in.rdbuf();
    v1::FleetLocalState ls;
    if (absl::Status st = fromJson(ss.str(), &ls, a->dir_ + "/state.json"); !st.ok()) {
      a->log(absl::StrCat("fleet: ignoring ", st.message()));
    } else if (ls.fleet() == a->opts_.fleet) {
      a->snap_.applied_version = ls.applied_version();
      a->snap_.applied_revision = ls.applied_revision();
      a->snap_.last_error = ls.last_error();
    } else {
      a->log(absl::StrCat("fleet: ", a->dir_, "/state.json is fleet \"", ls.fleet(),
                          "\"'s; this node now follows \"", a->opts_.fleet, "\""));
    }
  }
  auto client = EtcdClient::create(a->opts_.etcd);
  if (!client.ok()) return client.status();
  a->etcd_ = std::move(*client);
  return a;
}

FleetAgent::FleetAgent(AgentOptions opts, AgentHooks hooks)
    : opts_(std::move(opts)),
      hooks_(std::move(hooks)),
      keys_(opts_.fleet),
      dir_(opts_.state_dir + "/fleet"),
      rng_(std::random_device{}()) {
  snap_.fleet = opts_.fleet;
  snap_.node = opts_.node;
  snap_.group = opts_.group;
  snap_.state = "starting";
  started_unix_ns_ = unixNowNs();
}

FleetAgent::~FleetAgent() { stop(); }

void FleetAgent::start() {
  if (started_) return;
  started_ = true;
  follow_ = std::thread([this] { followLoop(); });
  status_ = std::thread([this] { statusLoop(); });
}

void FleetAgent::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    if (current_watch_ && *current_watch_) (*current_watch_)->cancel();
  }
  cv_.notify_all();
  if (follow_.joinable()) follow_.join();
  if (status_.joinable()) status_.join();
}

AgentSnapshot FleetAgent::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  AgentSnapshot s = snap_;
  if (etcd_) s.endpoint = etcd_->currentEndpoint();
  return s;
}

bool FleetAgent::waitApplied(uint64_t version, double timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] {
    return stopping_ || snap_.applied_version == version ||
           (snap_.last_error.version() == version && snap_.state == "refused");
  });
}

void FleetAgent::log(const std::string& line) {
  const std::string full = absl::StrCat("fleet ", opts_.fleet, " node ", opts_.node, ": ", line);
  if (hooks_.log) {
    hooks_.log(full);
  } else {
    std::fprintf(stderr, "dpu-appliance: %s\n", full.c_str());
  }
}

bool FleetAgent::sleepFor(double s) {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, std::chrono::duration<double>(s), [&] { return stopping_; });
}

double FleetAgent::nextBackoff() {
  backoff_s_ = backoff_s_ == 0 ? opts_.backoff_min_s : std::min(opts_.backoff_max_s, backoff_s_ * 2);
  // Full jitter: uniform in [0, backoff], at least a tenth of the minimum.
  std::uniform_real_distribution<double> d(opts_.backoff_min_s / 10, backoff_s_);
  return d(rng_);
}

void FleetAgent::markDirty() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    dirty_ = true;
  }
  cv_.notify_all();
}

void FleetAgent::setConnected(bool ok, const absl::Status& why) {
  bool changed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    changed = snap_.connected != ok;
    snap_.connected = ok;
    if (ok) {
      snap_.last_contact_unix_ns = unixNowNs();
      snap_.last_etcd_error.clear();
    } else {
      snap_.last_etcd_error = std::string(why.message());
    }
  }
  if (changed) {
    log(ok ? absl::StrCat("etcd reachable (", etcd_->currentEndpoint(), ")")
           : absl::StrCat("etcd unreachable, enforcing applied version ", snapshot().applied_version,
                          ": ", why.message()));
  }
  if (changed) markDirty();
}

void FleetAgent::followLoop() {
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    absl::Status st = followOnce();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    if (st.code() == absl::StatusCode::kOutOfRange) {
      need_relist_ = true;  // compacted past what we saw: only a full relist is exact
    } else if (!st.ok()) {
      setConnected(false, st);
    }
    const double wait = nextBackoff();
    log(absl::StrCat(need_relist_ ? "relisting" : "resuming the watch", " in ",
                     absl::StrFormat("%.2f", wait), " s: ", st.message()));
    if (!sleepFor(wait)) return;
  }
}

absl::Status FleetAgent::followOnce() {
  // A full relist at start and after a compaction; after a broken stream (etcd restarted, the
  // network) the watch resumes from the last revision seen, which costs etcd nothing more than
  // the events missed. A resume from a compacted revision ends at once with compact_revision:
  // then the relist.
  if (need_relist_) {
    std::vector<std::string> ignored;
    auto ctl = readCtl(*etcd_, keys_, &ignored);
    if (!ctl.ok()) return ctl.status();
    for (const std::string& why : ignored) log(absl::StrCat("ignoring a bad control key: ", why));
    if (view_.revision != 0) {
      std::lock_guard<std::mutex> lock(mu_);
      ++snap_.relists;
    }
    view_ = std::move(*ctl);  // the whole view replaced: keys deleted meanwhile are gone
    need_relist_ = false;
    setConnected(true);
  }
  if (absl::Status st = reconcile(); !st.ok()) return st;
  EtcdClient::WatchSpec spec;
  spec.key = keys_.ctlPrefix();
  spec.range_end = prefixEnd(spec.key);
  spec.start_revision = view_.revision + 1;
  spec.progress_notify = true;
  auto w = etcd_->watch(spec);
  if (!w.ok()) return w.status();
  std::unique_ptr<EtcdWatch> watch = std::move(*w);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return absl::CancelledError("stopping");
    current_watch_ = &watch;
  }
  absl::Status why;
  while (true) {
    WatchBatch b = watch->next();
    if (b.ended) {
      if (b.compact_revision > 0) {
        why = absl::OutOfRangeError(absl::StrCat("watch compacted (oldest revision ",
                                                 b.compact_revision, ")"));
      } else if (!b.status.ok()) {
        why = b.status;
      } else {
        why = absl::AbortedError("watch cancelled by etcd");
      }
      break;
    }
    backoff_s_ = 0;  // a working watch: the next failure starts the backoff again
    setConnected(true);
    bool bad = false;
    for (const WatchEvent& e : b.events) {
      absl::Status st = view_.update(keys_, e.kv.key,
                                     e.type == WatchEvent::Type::kPut ? &e.kv.value : nullptr,
                                     e.kv.mod_revision);
      if (!st.ok()) {
        log(absl::StrCat("ignoring a bad control key: ", st.message()));
        bad = true;
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      snap_.watch_events += b.events.size();
    }
    (void)bad;
    if (b.revision > view_.revision) view_.revision = b.revision;
    if (!b.events.empty()) {
      if (absl::Status st = reconcile(); !st.ok()) {
        why = st;
        break;
      }
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    current_watch_ = nullptr;
  }
  return why;
}

absl::Status FleetAgent::reconcile() {
  int64_t set_at = 0;
  const uint64_t desired = view_.desiredFor(opts_.group, &set_at);
  uint64_t applied;
  {
    std::lock_guard<std::mutex> lock(mu_);
    snap_.desired_version = desired;
    applied = snap_.applied_version;
    if (desired == 0) {
      snap_.state = "idle";
    } else if (desired == applied) {
      snap_.state = "synced";
    } else if (desired == refused_version_) {
      snap_.state = "refused";
    }
  }
  markDirty();
  if (desired == 0 || desired == applied || desired == refused_version_) return absl::OkStatus();
  return fetchAndApply(desired, set_at);
}

absl::StatusOr<std::string> FleetAgent::localFile(const v1::FleetFile& f) {
  std::string name = fs::path(f.path()).filename().string();
  if (name.empty() || name == "." || name == "..") name = "file";
  const std::string dir = absl::StrCat(dir_, "/blobs/", f.sha256());
  const std::string path = absl::StrCat(dir, "/", name);
  std::error_code ec;
  if (fs::exists(path, ec) && fs::file_size(path, ec) == f.size()) return path;  // verified when written
  auto data = getBlob(*etcd_, keys_, f);
  if (!data.ok()) return data.status();
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  if (absl::Status st = writeAtomically(path, *data); !st.ok()) return st;
  return path;
}

absl::Status FleetAgent::fetchAndApply(uint64_t version, int64_t set_at) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    snap_.state = "fetching";
  }
  markDirty();
  auto refuse = [&](const std::string& phase, const absl::Status& st, v1::FleetNodeError err) {
    err.set_version(version);
    if (err.phase().empty()) err.set_phase(phase);
    if (err.message().empty()) err.set_message(std::string(st.message()));
    err.set_unix_ns(unixNowNs());
    {
      std::lock_guard<std::mutex> lock(mu_);
      refused_version_ = version;
      snap_.last_error = err;
      snap_.state = "refused";
      ++snap_.refusals;
    }
    log(absl::StrCat("version ", version, " refused (", err.phase(), "), still running version ",
                     snapshot().applied_version, ": ", err.message()));
    persistState();
    markDirty();
    cv_.notify_all();
    return absl::OkStatus();
  };
  auto manifest = readVersion(*etcd_, keys_, version);
  if (!manifest.ok()) {
    if (transient(manifest.status())) return manifest.status();
    return refuse("fetch", manifest.status(), {});
  }
  std::map<std::string, std::string> local;  // document path -> local path
  for (const v1::FleetFile& f : manifest->files()) {
    auto p = localFile(f);
    if (!p.ok()) {
      if (transient(p.status())) return p.status();
      return refuse("fetch", p.status(), {});
    }
    local[f.path()] = *p;
  }
  auto text = getBlob(*etcd_, keys_, manifest->config());
  if (!text.ok()) {
    if (transient(text.status())) return text.status();
    return refuse("fetch", text.status(), {});
  }
  auto doc = ctl::parseConfig(*text, ctl::ConfigFormat::kJson,
                              absl::StrCat("fleet ", opts_.fleet, " version ", version));
  if (!doc.ok()) return refuse("load", doc.status(), {});
  ctl::forEachConfigFile(&*doc, [&](std::string* p) {
    if (auto it = local.find(*p); it != local.end()) *p = it->second;
  });
  {
    std::lock_guard<std::mutex> lock(mu_);
    snap_.state = "applying";
  }
  markDirty();
  v1::FleetNodeError err;
  uint64_t config_version = 0;
  absl::Status st = hooks_.apply(*doc, &err, &config_version);
  if (!st.ok()) return refuse("apply", st, err);
  {
    std::lock_guard<std::mutex> lock(mu_);
    snap_.applied_version = version;
    snap_.applied_revision = set_at;
    snap_.state = snap_.desired_version == version ? "synced" : "applying";
    ++snap_.applies;
    refused_version_ = 0;
    previous_manifest_ = applied_manifest_;
    applied_manifest_ = *manifest;
  }
  log(absl::StrCat("applied version ", version, " as config version ", config_version));
  persistState();
  gcBlobs(applied_manifest_, previous_manifest_.version() ? &previous_manifest_ : nullptr);
  markDirty();
  cv_.notify_all();
  return absl::OkStatus();
}

void FleetAgent::gcBlobs(const v1::FleetVersion& keep_a, const v1::FleetVersion* keep_b) {
  // The files of the applied version and the one before stay (a rollback needs no fetch of
  // them); older ones go.
  std::set<std::string> keep;
  for (const auto& f : keep_a.files()) keep.insert(f.sha256());
  if (keep_b) {
    for (const auto& f : keep_b->files()) keep.insert(f.sha256());
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_ + "/blobs", ec)) {
    if (!keep.count(e.path().filename().string())) fs::remove_all(e.path(), ec);
  }
}

void FleetAgent::persistState() {
  v1::FleetLocalState ls;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ls.set_fleet(opts_.fleet);
    ls.set_applied_version(snap_.applied_version);
    ls.set_applied_revision(snap_.applied_revision);
    *ls.mutable_last_error() = snap_.last_error;
  }
  ls.set_config_sha256(applied_manifest_.config().sha256());
  if (absl::Status st = writeAtomically(dir_ + "/state.json", toJson(ls)); !st.ok()) {
    log(absl::StrCat("cannot persist the fleet state: ", st.message()));
  }
}

v1::FleetNodeStatus FleetAgent::buildStatus() {
  v1::FleetNodeStatus s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s.set_node(opts_.node);
    s.set_group(opts_.group);
    s.set_state(snap_.state);
    s.set_desired_version(snap_.desired_version);
    s.set_applied_version(snap_.applied_version);
    s.set_applied_revision(snap_.applied_revision);
    if (snap_.last_error.version() != 0) *s.mutable_last_error() = snap_.last_error;
    s.set_relists(snap_.relists);
  }
  s.set_health("ok");
  s.set_started_unix_ns(started_unix_ns_);
  s.set_software(opts_.software);
  s.set_api(opts_.api_address);
  if (hooks_.fill) hooks_.fill(&s);
  s.set_last_seen_unix_ns(unixNowNs());
  return s;
}

void FleetAgent::statusLoop() {
  std::unique_ptr<EtcdLeaseKeeper> keeper;
  double retry_s = 0;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      const double wait = retry_s > 0 ? retry_s : opts_.heartbeat_s;
      cv_.wait_for(lock, std::chrono::duration<double>(wait), [&] { return stopping_ || dirty_; });
      if (stopping_) break;
      dirty_ = false;
    }
    absl::Status st;
    if (!keeper || !keeper->alive()) {
      keeper.reset();
      auto lease = etcd_->leaseGrant(opts_.lease_ttl_s);
      if (lease.ok()) {
        keeper = etcd_->keepAlive(*lease);
        lease_id_ = lease->id;
      } else {
        st = lease.status();
      }
    }
    if (st.ok()) {
      auto r = etcd_->put(keys_.node(opts_.node), toJson(buildStatus()), lease_id_);
      st = r.status();
    }
    if (st.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      ++snap_.status_writes;
      retry_s = 0;
    } else {
      keeper.reset();  // a new lease once etcd answers again
      setConnected(false, st);
      retry_s = std::min(opts_.backoff_max_s, std::max(opts_.backoff_min_s, retry_s * 2));
    }
  }
  // Leaving: the status goes now rather than after the lease's TTL.
  keeper.reset();
  if (lease_id_ != 0) (void)etcd_->leaseRevoke(lease_id_);
}

}  // namespace dpu::fleet
