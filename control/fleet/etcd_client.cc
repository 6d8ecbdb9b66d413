#include "control/fleet/etcd_client.h"

#include <grpcpp/grpcpp.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "proto/etcd/rpc.grpc.pb.h"

namespace dpu::fleet {

namespace pb = etcdserverpb;
using Clock = std::chrono::system_clock;

Compare Compare::absent(std::string key) {
  Compare c;
  c.key = std::move(key);
  c.target = Target::kVersion;
  c.result = Result::kEqual;
  c.number = 0;
  return c;
}

Compare Compare::modRevision(std::string key, int64_t rev) {
  Compare c;
  c.key = std::move(key);
  c.target = Target::kMod;
  c.result = Result::kEqual;
  c.number = rev;
  return c;
}

TxnOp TxnOp::put(std::string key, std::string value, int64_t lease) {
  TxnOp op;
  op.kind = Kind::kPut;
  op.key = std::move(key);
  op.value = std::move(value);
  op.lease = lease;
  return op;
}

TxnOp TxnOp::del(std::string key, std::string range_end) {
  TxnOp op;
  op.kind = Kind::kDelete;
  op.key = std::move(key);
  op.range_end = std::move(range_end);
  return op;
}

TxnOp TxnOp::get(std::string key, std::string range_end) {
  TxnOp op;
  op.kind = Kind::kRange;
  op.key = std::move(key);
  op.range_end = std::move(range_end);
  return op;
}

std::string prefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    auto& c = reinterpret_cast<unsigned char&>(end.back());
    if (c < 0xff) {
      ++c;
      return end;
    }
    end.pop_back();
  }
  // Every byte was 0xff (or the prefix was empty): etcd's "\0" means "to the end of the keys".
  return std::string(1, '\0');
}

namespace {

absl::Status toStatus(const grpc::Status& s, absl::string_view endpoint, absl::string_view op) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat("etcd ", endpoint, ": ", op, ": ", s.error_message()));
}

KeyValue fromPb(const mvccpb::KeyValue& kv) {
  KeyValue out;
  out.key = kv.key();
  out.value = kv.value();
  out.create_revision = kv.create_revision();
  out.mod_revision = kv.mod_revision();
  out.version = kv.version();
  out.lease = kv.lease();
  return out;
}

absl::StatusOr<std::string> readFile(const std::string& path, absl::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("etcd ", what, " ", path, ": cannot be read"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The client certificate and key parse as PEM and belong together (gRPC would only say
// "Handshaker factory creation failed" and never connect).
absl::Status checkClientPair(const EtcdOptions& o, const std::string& cert_pem,
                             const std::string& key_pem) {
  auto sslWhy = [] {
    char buf[256] = "";
    ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
    ERR_clear_error();
    return std::string(buf);
  };
  BIO* cb = BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size()));
  X509* cert = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
  BIO_free(cb);
  if (!cert) {
    return absl::InvalidArgumentError(absl::StrCat("etcd client certificate ", o.cert_file,
                                                   ": not a PEM certificate (", sslWhy(), ")"));
  }
  BIO* kb = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr);
  BIO_free(kb);
  absl::Status st;
  if (!key) {
    st = absl::InvalidArgumentError(absl::StrCat("etcd client key ", o.key_file,
                                                 ": not a PEM private key without a passphrase (",
                                                 sslWhy(), ")"));
  } else if (X509_check_private_key(cert, key) != 1) {
    ERR_clear_error();
    st = absl::InvalidArgumentError(absl::StrCat("etcd client key ", o.key_file,
                                                 " does not belong to the certificate ",
                                                 o.cert_file));
  }
  EVP_PKEY_free(key);
  X509_free(cert);
  return st;
}

// Printable key for messages (fleet keys are text; anything else is cut).
std::string shownKey(absl::string_view key) {
  std::string out;
  for (char c : key.substr(0, 120)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  if (key.size() > 120) out += "...";
  return out;
}

}  // namespace

struct EtcdClient::Impl {
  EtcdOptions opts;
  std::vector<std::string> endpoints;  // host:port
  std::shared_ptr<grpc::ChannelCredentials> creds;
  bool creds_tls = false;

  mutable std::mutex mu;
  size_t current = 0;
  std::vector<std::shared_ptr<grpc::Channel>> channels;  // per endpoint, created on first use

  std::shared_ptr<grpc::Channel> channel(size_t i) {
    std::lock_guard<std::mutex> lock(mu);
    if (!channels[i]) {
      grpc::ChannelArguments args;
      // etcd restarts and partitions heal in seconds: reconnect within ~2 s, not gRPC's
      // default of up to 120 s of backoff.
      args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
      args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
      args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
      // A dead path under a long-lived watch shows as a failed keepalive (etcd permits pings
      // every 5 s while streams are open: --grpc-keepalive-min-time).
      args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
      args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
      args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
      args.SetMaxReceiveMessageSize(64 << 20);
      // Each client its own connection: two clients in a process (tests, the bench's agents)
      // must not share one subchannel, so one's failover does not move the other's.
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      channels[i] = grpc::CreateCustomChannel(endpoints[i], creds, args);
    }
    return channels[i];
  }

  size_t cur() const {
    std::lock_guard<std::mutex> lock(mu);
    return current;
  }

  void failedOver(size_t from) {
    std::lock_guard<std::mutex> lock(mu);
    if (current == from) current = (from + 1) % endpoints.size();
  }

  // Waits up to connect_timeout for endpoint i's channel; false if it did not connect.
  bool connected(size_t i) {
    auto ch = channel(i);
    auto state = ch->GetState(/*try_to_connect=*/true);
    if (state == GRPC_CHANNEL_READY) return true;
    return ch->WaitForConnected(Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(
                                                   opts.connect_timeout_s * 1000)));
  }

  // Why endpoint i does not connect, in gRPC's words (one call that does not wait for the
  // connection: its status carries the last connection error, e.g. a refused TLS handshake),
  // with what to check.
  std::string notConnected(size_t i, absl::string_view op) {
    grpc::ClientContext ctx;
    ctx.set_deadline(Clock::now() + std::chrono::milliseconds(500));
    pb::StatusRequest req;
    pb::StatusResponse resp;
    grpc::Status g = pb::Maintenance::NewStub(channel(i))->Status(&ctx, req, &resp);
    std::string why = g.ok() ? "" : g.error_message();
    const bool tls = creds_tls;
    std::string out = absl::StrCat("etcd ", endpoints[i], ": ", op, ": not connected within ",
                                   opts.connect_timeout_s, " s");
    if (!why.empty()) absl::StrAppend(&out, ": ", why);
    if (tls && (absl::StrContains(why, "ssl") || absl::StrContains(why, "SSL") ||
                absl::StrContains(why, "handshake") || absl::StrContains(why, "certificate"))) {
      absl::StrAppend(&out, " (TLS refused: check --etcd-ca against etcd's server certificate "
                            "and that etcd trusts --etcd-cert)");
    } else {
      absl::StrAppend(&out, " (is etcd running there? is the address right?",
                      !tls                    ? ""
                      : opts.cert_file.empty() ? " does it speak TLS? with --client-cert-auth "
                                                 "it needs --etcd-cert and --etcd-key"
                                               : " does it speak TLS, and trust --etcd-cert?",
                      ")");
    }
    return out;
  }

  // Runs fn(channel, context) on the current endpoint; on UNAVAILABLE (or no connection within
  // connect_timeout) moves to the next and tries again, once per endpoint.
  template <typename Fn>
  absl::Status call(absl::string_view op, Fn&& fn) {
    absl::Status last;
    const size_t n = endpoints.size();
    for (size_t attempt = 0; attempt < n; ++attempt) {
      const size_t i = cur();
      if (!connected(i)) {
        last = absl::UnavailableError(notConnected(i, op));
        failedOver(i);
        continue;
      }
      grpc::ClientContext ctx;
      ctx.set_deadline(Clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(opts.call_timeout_s * 1000)));
      grpc::Status s = fn(channel(i), &ctx);
      if (s.ok()) return absl::OkStatus();
      last = toStatus(s, endpoints[i], op);
      if (s.error_code() != grpc::StatusCode::UNAVAILABLE) return last;
      failedOver(i);
    }
    return last;
  }
};

EtcdClient::EtcdClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EtcdClient::~EtcdClient() = default;

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::create(const EtcdOptions& opts) {
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  bool tls = !opts.ca_file.empty() || !opts.cert_file.empty() || !opts.key_file.empty();
  bool plain = false;
  for (absl::string_view part : absl::StrSplit(opts.endpoints, ',', absl::SkipWhitespace())) {
    std::string ep(absl::StripAsciiWhitespace(part));
    if (absl::StartsWith(ep, "https://")) {
      tls = true;
      ep = ep.substr(8);
    } else if (absl::StartsWith(ep, "http://")) {
      plain = true;
      ep = ep.substr(7);
    }
    while (!ep.empty() && ep.back() == '/') ep.pop_back();
    const size_t colon = ep.rfind(':');
    if (ep.empty() || colon == std::string::npos || colon == 0 || colon + 1 == ep.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "etcd endpoint \"", part, "\": expected host:port (http:// or https:// optional)"));
    }
    impl->endpoints.push_back(ep);
  }
  if (impl->endpoints.empty()) {
    return absl::InvalidArgumentError(
        "etcd endpoints: none given (host:port, several separated by commas)");
  }
  if (tls && plain) {
    return absl::InvalidArgumentError(absl::StrCat(
        "etcd endpoints \"", opts.endpoints,
        "\": http:// endpoints with TLS options or https:// endpoints; one client speaks one"));
  }
  if (opts.cert_file.empty() != opts.key_file.empty()) {
    return absl::InvalidArgumentError(
        "etcd TLS: a client certificate needs both --etcd-cert and --etcd-key");
  }
  if (opts.call_timeout_s <= 0 || opts.connect_timeout_s <= 0) {
    return absl::InvalidArgumentError("etcd timeouts must be positive");
  }
  if (tls) {
    grpc::SslCredentialsOptions ssl;
    if (!opts.ca_file.empty()) {
      auto ca = readFile(opts.ca_file, "CA file");
      if (!ca.ok()) return ca.status();
      ssl.pem_root_certs = *ca;
    }
    if (!opts.cert_file.empty()) {
      auto cert = readFile(opts.cert_file, "client certificate");
      if (!cert.ok()) return cert.status();
      auto key = readFile(opts.key_file, "client key");
      if (!key.ok()) return key.status();
      if (absl::Status st = checkClientPair(opts, *cert, *key); !st.ok()) return st;
      ssl.pem_cert_chain = *cert;
      ssl.pem_private_key = *key;
    }
    impl->creds = grpc::SslCredentials(ssl);
    impl->creds_tls = true;
  } else {
    impl->creds = grpc::InsecureChannelCredentials();
  }
  impl->channels.resize(impl->endpoints.size());
  return std::unique_ptr<EtcdClient>(new EtcdClient(std::move(impl)));
}

std::string EtcdClient::currentEndpoint() const { return impl_->endpoints[impl_->cur()]; }

absl::StatusOr<RangeResult> EtcdClient::range(const std::string& key, const std::string& range_end,
                                              int64_t revision, int64_t limit, bool keys_only) {
  pb::RangeRequest req;
  req.set_key(key);
  req.set_range_end(range_end);
  req.set_revision(revision);
  req.set_limit(limit);
  req.set_keys_only(keys_only);
  pb::RangeResponse resp;
  absl::Status st = impl_->call(absl::StrCat("Range ", shownKey(key)),
                                [&](const std::shared_ptr<grpc::Channel>& ch, grpc::ClientContext* ctx) {
                                  resp.Clear();
                                  return pb::KV::NewStub(ch)->Range(ctx, req, &resp);
                                });
  if (!st.ok()) return st;
  RangeResult out;
  out.revision = resp.header().revision();
  out.more = resp.more();
  out.count = resp.count();
  out.kvs.reserve(resp.kvs_size());
  for (const auto& kv : resp.kvs()) out.kvs.push_back(fromPb(kv));
  return out;
}

absl::StatusOr<int64_t> EtcdClient::put(const std::string& key, const std::string& value,
                                        int64_t lease) {
  pb::PutRequest req;
  req.set_key(key);
  req.set_value(value);
  req.set_lease(lease);
  pb::PutResponse resp;
  absl::Status st = impl_->call(absl::StrCat("Put ", shownKey(key)),
                                [&](const std::shared_ptr<grpc::Channel>& ch, grpc::ClientContext* ctx) {
                                  return pb::KV::NewStub(ch)->Put(ctx, req, &resp);
                                });
  if (!st.ok()) return st;
  return resp.header().revision();
}

absl::StatusOr<int64_t> EtcdClient::del(const std::string& key, const std::string& range_end) {
  pb::DeleteRangeRequest req;
  req.set_key(key);
  req.set_range_end(range_end);
  pb::DeleteRangeResponse resp;
  absl::Status st = impl_->call(absl::StrCat("DeleteRange ", shownKey(key)),
                                [&](const std::shared_ptr<grpc::Channel>& ch, grpc::ClientContext* ctx) {
                                  return pb::KV::NewStub(ch)->DeleteRange(ctx, req, &resp);
                                });
  if (!st.ok()) return st;
  return resp.deleted();
}

namespace {

void toPb(const TxnOp& op, pb::RequestOp* out) {
  switch (op.kind) {
    case TxnOp::Kind::kPut: {
      auto* p = out->mutable_request_put();
      p->set_key(op.key);
      p->set_value(op.value);
      p->set_lease(op.lease);
      break;
    }
    case TxnOp::Kind::kDelete: {
      auto* d = out->mutable_request_delete_range();
      d->set_key(op.key);
      d->set_range_end(op.range_end);
      break;
    }
    case TxnOp::Kind::kRange: {
      auto* r = out->mutable_request_range();
      r->set_key(op.key);
      r->set_range_end(op.range_end);
      break;
    }
  }
}

}  // namespace

absl::StatusOr<TxnResult> EtcdClient::txn(const std::vector<Compare>& compares,
                                          const std::vector<TxnOp>& success,
                                          const std::vector<TxnOp>& failure) {
  pb::TxnRequest req;
  for (const Compare& c : compares) {
    auto* pc = req.add_compare();
    pc->set_key(c.key);
    switch (c.result) {
      case Compare::Result::kEqual: pc->set_result(pb::Compare::EQUAL); break;
      case Compare::Result::kGreater: pc->set_result(pb::Compare::GREATER); break;
      case Compare::Result::kLess: pc->set_result(pb::Compare::LESS); break;
      case Compare::Result::kNotEqual: pc->set_result(pb::Compare::NOT_EQUAL); break;
    }
    switch (c.target) {
      case Compare::Target::kVersion:
        pc->set_target(pb::Compare::VERSION);
        pc->set_version(c.number);
        break;
      case Compare::Target::kCreate:
        pc->set_target(pb::Compare::CREATE);
        pc->set_create_revision(c.number);
        break;
      case Compare::Target::kMod:
        pc->set_target(pb::Compare::MOD);
        pc->set_mod_revision(c.number);
        break;
      case Compare::Target::kValue:
        pc->set_target(pb::Compare::VALUE);
        pc->set_value(c.value);
        break;
    }
  }
  for (const TxnOp& op : success) toPb(op, req.add_success());
  for (const TxnOp& op : failure) toPb(op, req.add_failure());
  pb::TxnResponse resp;
  const std::string first = compares.empty() ? (success.empty() ? "" : success[0].key) : compares[0].key;
  absl::Status st = impl_->call(absl::StrCat("Txn ", shownKey(first)),
                                [&](const std::shared_ptr<grpc::Channel>& ch, grpc::ClientContext* ctx) {
                                  resp.Clear();
                                  return pb::KV::NewStub(ch)->Txn(ctx, req, &resp);
                                });
  if (!st.ok()) return st;
  TxnResult out;
  out.succeeded = resp.succeeded();
  out.revision = resp.header().revision();
  for (const auto& r : resp.responses()) {
    std::vector<KeyValue> kvs;
    if (r.has_response_range()) {
      for (const auto& kv : r.response_range().kvs()) kvs.push_back(fromPb(kv));
    }
    out.ranges.push_back(std::move(kvs));
  }
  return out;
}

absl::Status EtcdClient::compact(int64_t revision, bool physical) {
  pb::CompactionRequest req;
  req.set_revision(revision);
  req.set_physical(physical);
  pb::CompactionResponse resp;
  return impl_->call(absl::StrCat("Compact ", revision),
                     [&](const std::shared_ptr<grpc::Channel>& ch, grpc::ClientContext* ctx) {
                       return pb::KV::NewStub(ch)->Compact(ctx, req, &resp);
                     });
}

absl::StatusOr<EtcdClient::Lease> EtcdClient::leaseGrant(int64_t ttl_s) {
  pb::LeaseGrantRequest req;
  req.set_ttl(ttl_s);
  pb::LeaseGrantResponse resp;
  absl::Status st = impl_->call(absl::StrCat("LeaseGrant ttl=", ttl_s),
                                [&](const std::shared_ptr<grpc::Channel>& ch, grpc::ClientContext* ctx) {
                                  return pb::Lease::NewStub(ch)->LeaseGrant(ctx, req, &resp);
                                });
  if (!st.ok()) return st;
  if (!resp.error().empty()) {
    return absl::UnavailableError(
        absl::StrCat("etcd ", currentEndpoint(), ": LeaseGrant: ", resp.error()));
  }
  return Lease{resp.id(), resp.ttl()};
}

absl::Status EtcdClient::leaseRevoke(int64_t id) {
  pb::LeaseRevokeRequest req;
  req.set_id(id);
  pb::LeaseRevokeResponse resp;
  return impl_->call(absl::StrCat("LeaseRevoke ", id),
                     [&](const std::shared_ptr<grpc::Channel>& ch, grpc::ClientContext* ctx) {
                       return pb::Lease::NewStub(ch)->LeaseRevoke(ctx, req, &resp);
                     });
}

absl::StatusOr<int64_t> EtcdClient::status() {
  pb::StatusRequest req;
  pb::StatusResponse resp;
  absl::Status st = impl_->call("Status", [&](const std::shared_ptr<grpc::Channel>& ch,
                                              grpc::ClientContext* ctx) {
    return pb::Maintenance::NewStub(ch)->Status(ctx, req, &resp);
  });
  if (!st.ok()) return st;
  if (resp.leader() == 0) {
    return absl::UnavailableError(
        absl::StrCat("etcd ", currentEndpoint(), ": Status: the member has no leader"));
  }
  return static_cast<int64_t>(resp.raftindex());
}

// ---- watch --------------------------------------------------------------------------------

namespace {

class WatchImpl final : public EtcdWatch {
 public:
  WatchImpl(std::string endpoint) : endpoint_(std::move(endpoint)) {}
  ~WatchImpl() override {
    ctx_.TryCancel();
    if (stream_ && !finished_) stream_->Finish().ok();
  }

  WatchBatch next() override {
    WatchBatch b;
    if (done_) {
      b.ended = true;
      b.status = absl::FailedPreconditionError("etcd watch: already ended");
      return b;
    }
    pb::WatchResponse resp;
    if (have_pending_) {
      resp = std::move(pending_);
      have_pending_ = false;
    } else if (!stream_->Read(&resp)) {
      done_ = true;
      finished_ = true;
      grpc::Status s = stream_->Finish();
      b.ended = true;
      if (cancelled_.load()) {
        b.status = absl::CancelledError("etcd watch: cancelled");
      } else if (s.ok()) {
        b.status = absl::UnavailableError(absl::StrCat("etcd ", endpoint_, ": Watch: stream closed"));
      } else {
        b.status = toStatus(s, endpoint_, "Watch");
      }
      return b;
    }
    b.revision = resp.header().revision();
    if (resp.canceled()) {
      done_ = true;
      b.ended = true;
      b.compact_revision = resp.compact_revision();
      if (b.compact_revision == 0) {
        b.status = absl::FailedPreconditionError(absl::StrCat(
            "etcd ", endpoint_, ": Watch canceled by the server",
            resp.cancel_reason().empty() ? "" : ": ", resp.cancel_reason()));
      }
      ctx_.TryCancel();
      return b;
    }
    for (const auto& e : resp.events()) {
      WatchEvent ev;
      ev.type = e.type() == mvccpb::Event::DELETE ? WatchEvent::Type::kDelete : WatchEvent::Type::kPut;
      ev.kv = fromPb(e.kv());
      b.events.push_back(std::move(ev));
    }
    b.progress = b.events.empty() && !resp.created();
    return b;
  }

  void cancel() override {
    cancelled_.store(true);
    ctx_.TryCancel();
  }

  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>> stream_;
  pb::WatchResponse pending_;
  bool have_pending_ = false;
  bool done_ = false;
  bool finished_ = false;
  std::atomic<bool> cancelled_{false};
  std::string endpoint_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdWatch>> EtcdClient::watch(const WatchSpec& spec) {
  pb::WatchRequest req;
  auto* cr = req.mutable_create_request();
  cr->set_key(spec.key);
  cr->set_range_end(spec.range_end);
  cr->set_start_revision(spec.start_revision);
  cr->set_progress_notify(spec.progress_notify);
  cr->set_prev_kv(spec.prev_kv);
  const std::string op = absl::StrCat("Watch ", shownKey(spec.key));
  absl::Status last;
  const size_t n = impl_->endpoints.size();
  for (size_t attempt = 0; attempt < n; ++attempt) {
    const size_t i = impl_->cur();
    const std::string& ep = impl_->endpoints[i];
    if (!impl_->connected(i)) {
      last = absl::UnavailableError(impl_->notConnected(i, op));
      impl_->failedOver(i);
      continue;
    }
    auto w = std::make_unique<WatchImpl>(ep);
    // etcd's clientv3.WithRequireLeader: a member without a leader ends the stream
    // ("no leader") instead of keeping a watch that would never see another event.
    w->ctx_.AddMetadata("hasleader", "true");
    w->stream_ = pb::Watch::NewStub(impl_->channel(i))->Watch(&w->ctx_);
    if (!w->stream_->Write(req)) {
      w->finished_ = true;
      last = toStatus(w->stream_->Finish(), ep, op);
      if (last.ok()) last = absl::UnavailableError(absl::StrCat("etcd ", ep, ": ", op, ": stream closed"));
      impl_->failedOver(i);
      continue;
    }
    // The first answer: created (or, for a compacted start revision, possibly canceled at
    // once; next() returns that as an ended batch).
    pb::WatchResponse first;
    if (!w->stream_->Read(&first)) {
      w->finished_ = true;
      last = toStatus(w->stream_->Finish(), ep, op);
      if (last.ok()) last = absl::UnavailableError(absl::StrCat("etcd ", ep, ": ", op, ": stream closed"));
      if (last.code() != absl::StatusCode::kUnavailable) return last;
      impl_->failedOver(i);
      continue;
    }
    if (!first.created() || first.canceled() || !first.events().empty()) {
      w->pending_ = std::move(first);
      w->have_pending_ = true;
    }
    return std::unique_ptr<EtcdWatch>(std::move(w));
  }
  return last;
}

// ---- lease keepalive ----------------------------------------------------------------------

namespace {

class LeaseKeeperImpl final : public EtcdLeaseKeeper {
 public:
  LeaseKeeperImpl(EtcdClient::Impl* client, EtcdClient::Lease lease)
      : client_(client), lease_(lease) {
    thread_ = std::thread([this] { run(); });
  }
  ~LeaseKeeperImpl() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      if (ctx_) ctx_->TryCancel();
    }
    cv_.notify_all();
    thread_.join();
  }
  bool alive() const override { return alive_.load(); }
  int64_t id() const override { return lease_.id; }

 private:
  // One refresh: a LeaseKeepAlive stream with one request and its answer, under a deadline
  // (a blocked Read cannot otherwise be bounded). Returns the TTL etcd reports, -1 on error.
  int64_t refreshOnce(std::chrono::milliseconds deadline) {
    const size_t n = client_->endpoints.size();
    for (size_t attempt = 0; attempt < n; ++attempt) {
      const size_t i = client_->cur();
      if (!client_->connected(i)) {
        client_->failedOver(i);
        continue;
      }
      grpc::ClientContext ctx;
      ctx.set_deadline(Clock::now() + deadline);
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) return -1;
        ctx_ = &ctx;
      }
      auto stream = pb::Lease::NewStub(client_->channel(i))->LeaseKeepAlive(&ctx);
      pb::LeaseKeepAliveRequest req;
      req.set_id(lease_.id);
      pb::LeaseKeepAliveResponse resp;
      const bool ok = stream->Write(req) && stream->Read(&resp);
      stream->WritesDone();
      ctx.TryCancel();
      grpc::Status s = stream->Finish();
      {
        std::lock_guard<std::mutex> lock(mu_);
        ctx_ = nullptr;
      }
      if (ok) return resp.ttl();
      if (s.error_code() == grpc::StatusCode::UNAVAILABLE) client_->failedOver(i);
    }
    return -1;
  }

  void run() {
    using namespace std::chrono;
    const milliseconds ttl(std::max<int64_t>(lease_.ttl_s, 1) * 1000);
    const milliseconds period = std::max(ttl / 3, milliseconds(300));
    auto last_ok = steady_clock::now();
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (cv_.wait_for(lock, period, [&] { return stop_; })) return;
      }
      const int64_t got = refreshOnce(std::max(period, milliseconds(500)));
      if (got > 0) {
        last_ok = steady_clock::now();
        continue;
      }
      if (got == 0 || steady_clock::now() - last_ok >= ttl) {
        // TTL 0: etcd says the lease is gone; or no refresh within the TTL: it has expired.
        alive_.store(false);
        return;
      }
    }
  }

  EtcdClient::Impl* client_;
  EtcdClient::Lease lease_;
  std::atomic<bool> alive_{true};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  grpc::ClientContext* ctx_ = nullptr;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<EtcdLeaseKeeper> EtcdClient::keepAlive(Lease lease) {
  return std::make_unique<LeaseKeeperImpl>(impl_.get(), lease);
}

}  // namespace dpu::fleet
