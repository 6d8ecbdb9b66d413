// A small etcd v3 client over gRPC (etcd's own API: KV, Watch, Lease, Maintenance), for the
// fleet (docs/fleet.md). proto/etcd/ holds a reduced copy of etcd 3.4's rpc.proto and kv.proto:
// the messages used, with etcd's package names and field numbers.
//
// Endpoints: "host:port" or "http://host:port" / "https://host:port", several separated by
// commas; a call that fails with UNAVAILABLE (or DEADLINE_EXCEEDED on connect) moves to the next
// endpoint and is retried there once per endpoint. TLS (https or any tls option set): server
// verified against ca_file; cert_file + key_file present a client certificate (mTLS).
//
// Every call has a deadline (options.call_timeout_s); errors are absl::Status with the endpoint
// and the operation in the message ("etcd 127.0.0.1:2379: Range /dpu/...: UNAVAILABLE: ...").
// Thread-safe: calls may come from several threads; a Watch or a KeepAlive stream is owned by
// one thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dpu::fleet {

struct EtcdOptions {
  std::string endpoints;  // "127.0.0.1:2379,127.0.0.1:22379" (http:// or https:// optional)
  std::string ca_file;    // PEM; set (or an https:// endpoint) = TLS
  std::string cert_file;  // PEM client certificate (mTLS), with key_file
  std::string key_file;
  double call_timeout_s = 5;      // deadline of one unary call
  double connect_timeout_s = 2;   // waiting for a channel to connect before trying the next
};

struct KeyValue {
  std::string key, value;
  int64_t create_revision = 0, mod_revision = 0, version = 0, lease = 0;
};

struct RangeResult {
  std::vector<KeyValue> kvs;
  int64_t revision = 0;  // the store's revision when the range was served (header)
  bool more = false;     // limit cut the result
  int64_t count = 0;
};

// One comparison of a Txn (etcd's Compare): target VERSION / CREATE / MOD / VALUE, result EQUAL /
// GREATER / LESS / NOT_EQUAL, on `key` (range_end empty: one key).
struct Compare {
  enum class Target { kVersion, kCreate, kMod, kValue };
  enum class Result { kEqual, kGreater, kLess, kNotEqual };
  std::string key;
  Target target = Target::kMod;
  Result result = Result::kEqual;
  int64_t number = 0;   // version / create_revision / mod_revision
  std::string value;    // Target::kValue
  // Helpers: the key does not exist (version == 0), its mod_revision equals `rev`.
  static Compare absent(std::string key);
  static Compare modRevision(std::string key, int64_t rev);
};

// One operation of a Txn: put (with optional lease), delete (key or range), or range (get).
struct TxnOp {
  enum class Kind { kPut, kDelete, kRange };
  Kind kind = Kind::kPut;
  std::string key, value, range_end;  // range_end: as etcd's (prefixEnd(key) for a prefix)
  int64_t lease = 0;
  static TxnOp put(std::string key, std::string value, int64_t lease = 0);
  static TxnOp del(std::string key, std::string range_end = "");
  static TxnOp get(std::string key, std::string range_end = "");
};

struct TxnResult {
  bool succeeded = false;  // the compares held: the success ops ran (else the failure ops)
  int64_t revision = 0;
  // Per op, in order, for kRange ops: the keys read (empty for puts and deletes).
  std::vector<std::vector<KeyValue>> ranges;
};

// One event of a watch.
struct WatchEvent {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  KeyValue kv;  // for a delete: key and mod_revision (the deletion's revision)
};

// One message of a watch stream.
struct WatchBatch {
  std::vector<WatchEvent> events;
  int64_t revision = 0;  // header revision (a progress notify has no events)
  bool progress = false; // a progress notification (no events)
  // The watch ended: canceled by the server (e.g. compacted; compact_revision > 0 then says
  // the oldest revision still available), or the stream broke (status says why).
  bool ended = false;
  int64_t compact_revision = 0;
  absl::Status status;  // ok unless the stream broke / the watch was refused
};

// "the key's prefix end": the smallest key greater than every key starting with `prefix`
// (etcd's clientv3.GetPrefixRangeEnd).
std::string prefixEnd(const std::string& prefix);

class EtcdWatch;
class EtcdLeaseKeeper;

class EtcdClient {
 public:
  static absl::StatusOr<std::unique_ptr<EtcdClient>> create(const EtcdOptions& opts);
  ~EtcdClient();

  // range_end empty: the one key; prefixEnd(key): every key with that prefix. revision 0 =
  // latest; limit 0 = no limit. keys_only leaves values empty. A compacted revision is
  // OUT_OF_RANGE ("required revision has been compacted").
  absl::StatusOr<RangeResult> range(const std::string& key, const std::string& range_end = "",
                                    int64_t revision = 0, int64_t limit = 0,
                                    bool keys_only = false);
  // Returns the revision of the put.
  absl::StatusOr<int64_t> put(const std::string& key, const std::string& value,
                              int64_t lease = 0);
  // Returns the number of keys deleted.
  absl::StatusOr<int64_t> del(const std::string& key, const std::string& range_end = "");
  absl::StatusOr<TxnResult> txn(const std::vector<Compare>& compares,
                                const std::vector<TxnOp>& success,
                                const std::vector<TxnOp>& failure = {});
  // Compacts the store up to `revision` (tests: compaction while nodes watch).
  absl::Status compact(int64_t revision, bool physical = true);

  // Lease: grant (ttl seconds; returns the lease id and the TTL etcd granted), revoke.
  struct Lease {
    int64_t id = 0;
    int64_t ttl_s = 0;
  };
  absl::StatusOr<Lease> leaseGrant(int64_t ttl_s);
  absl::Status leaseRevoke(int64_t id);
  // Keeps `lease` alive from a background thread (a LeaseKeepAlive stream, one refresh every
  // ttl/3) until the keeper is destroyed. alive() turns false when etcd says the lease is gone
  // (TTL <= 0) or no refresh succeeded within the TTL; the keeper then stops (the caller
  // grants a new lease).
  std::unique_ptr<EtcdLeaseKeeper> keepAlive(Lease lease);

  // Opens a watch on [key, range_end) from start_revision (0 = now), with progress_notify and
  // prev_kv as asked. The stream is created with etcd's require-leader metadata
  // ("hasleader: true"), so a member cut off from its cluster's leader ends the watch instead
  // of going silent. Failing to open it is an error; later failures come as an ended batch.
  struct WatchSpec {
    std::string key, range_end;
    int64_t start_revision = 0;
    bool progress_notify = true;
    bool prev_kv = false;
  };
  absl::StatusOr<std::unique_ptr<EtcdWatch>> watch(const WatchSpec& spec);

  // The endpoint calls go to now (after failovers).
  std::string currentEndpoint() const;
  // Maintenance.Status of the current endpoint: the cluster's revision-independent health check
  // ("is etcd there"). Returns the member's raft index on success.
  absl::StatusOr<int64_t> status();

  struct Impl;

 private:
  explicit EtcdClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class EtcdWatch {
 public:
  virtual ~EtcdWatch() = default;
  // Blocks until the next batch, an ended batch, or cancel() (then an ended batch with status
  // CANCELLED). After an ended batch the watch is done.
  virtual WatchBatch next() = 0;
  // From any thread: makes a blocked next() return.
  virtual void cancel() = 0;
};

class EtcdLeaseKeeper {
 public:
  virtual ~EtcdLeaseKeeper() = default;
  virtual bool alive() const = 0;
  virtual int64_t id() const = 0;
};

}  // namespace dpu::fleet
