// The fleet's key layout in etcd (docs/fleet.md "Key layout") and the reads and writes both
// sides use: `dpuctl fleet` (writes versions, targets; reads statuses) and the node agent (reads
// the target of its group and the version's files; writes its status).
//
//   /dpu/fleet/<fleet>/head                      FleetHead: latest version written (CAS point)
//   /dpu/fleet/<fleet>/versions/<v, 20 digits>   FleetVersion: document + files, by hash
//   /dpu/fleet/<fleet>/blobs/<sha256>/<6 digits> a file's bytes, chunks of <= 512 KiB
//   /dpu/fleet/<fleet>/ctl/target                FleetTarget: the version nodes run
//   /dpu/fleet/<fleet>/ctl/groups/<group>        FleetTarget: a group pinned (rollout)
//   /dpu/fleet/<fleet>/nodes/<node>              FleetNodeStatus, bound to the node's lease
//
// Nodes watch ctl/ only: node statuses (heartbeats) and blob writes never wake them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "control/fleet/etcd_client.h"
#include "google/protobuf/message.h"
#include "proto/fleet.pb.h"

namespace dpu::fleet {

constexpr size_t kChunkBytes = 512 * 1024;
constexpr const char* kRootPrefix = "/dpu/fleet/";

// Fleet, group and node names: 1..64 of [A-Za-z0-9_.-]. The error names `what`.
absl::Status checkName(absl::string_view what, absl::string_view name);

class FleetKeys {
 public:
  explicit FleetKeys(std::string fleet);
  const std::string& fleet() const { return fleet_; }
  const std::string& root() const { return root_; }
  std::string head() const { return root_ + "head"; }
  std::string versionsPrefix() const { return root_ + "versions/"; }
  std::string version(uint64_t v) const;
  std::string blobPrefix(absl::string_view sha256) const;
  std::string chunk(absl::string_view sha256, uint32_t i) const;
  std::string ctlPrefix() const { return root_ + "ctl/"; }
  std::string target() const { return root_ + "ctl/target"; }
  std::string groupsPrefix() const { return root_ + "ctl/groups/"; }
  std::string group(absl::string_view g) const;
  std::string nodesPrefix() const { return root_ + "nodes/"; }
  std::string node(absl::string_view n) const;

 private:
  std::string fleet_, root_;
};

std::string sha256Hex(absl::string_view data);

// Protobuf JSON (the values are readable with etcdctl); parse errors name `what`.
std::string toJson(const google::protobuf::Message& m);
absl::Status fromJson(absl::string_view json, google::protobuf::Message* m, absl::string_view what);

// Stores `data` as a blob (content-addressed: an existing blob is not written again; chunks are
// written in order, so the last chunk's presence means the whole blob is there). Fills sha256,
// size and chunks of `out` (path untouched). `written` (optional): bytes actually written.
// `sha256`: the data's sha256Hex when the caller has it already (not computed again).
absl::Status putBlob(EtcdClient& etcd, const FleetKeys& keys, absl::string_view data,
                     v1::FleetFile* out, uint64_t* written = nullptr,
                     absl::string_view sha256 = {});
// Reads a blob back, a few chunks per request, and checks its size and sha256.
absl::StatusOr<std::string> getBlob(EtcdClient& etcd, const FleetKeys& keys,
                                    const v1::FleetFile& f);

// The control keys (ctl/): the target and the pinned groups, at `revision`.
struct CtlView {
  std::optional<v1::FleetTarget> target;
  int64_t target_revision = 0;  // mod_revision of ctl/target
  std::map<std::string, v1::FleetTarget> groups;
  std::map<std::string, int64_t> group_revisions;
  int64_t revision = 0;
  // Applies one key of ctl/ (a put with its value, or a delete: value null). Unknown keys are
  // ignored; a value that does not parse is an error naming the key (the view is unchanged).
  absl::Status update(const FleetKeys& keys, const std::string& key, const std::string* value,
                      int64_t mod_revision);
  // The version a node of `group` should run (0: none yet), and the revision that set it.
  uint64_t desiredFor(const std::string& group, int64_t* set_at = nullptr) const;
};
// A key whose value does not parse is left out of the view (as the watch does), its error in
// `ignored` when given: one bad write must not stop every node from following the rest.
absl::StatusOr<CtlView> readCtl(EtcdClient& etcd, const FleetKeys& keys,
                                std::vector<std::string>* ignored = nullptr);

absl::StatusOr<v1::FleetVersion> readVersion(EtcdClient& etcd, const FleetKeys& keys,
                                             uint64_t version);
// Every version (oldest first).
absl::StatusOr<std::vector<v1::FleetVersion>> readVersions(EtcdClient& etcd,
                                                           const FleetKeys& keys);
// The head: the latest version (0: none) and the key's mod_revision (0: absent).
struct Head {
  uint64_t version = 0;
  int64_t mod_revision = 0;
};
absl::StatusOr<Head> readHead(EtcdClient& etcd, const FleetKeys& keys);

struct NodeEntry {
  v1::FleetNodeStatus status;
  int64_t lease = 0;
  int64_t mod_revision = 0;
};
absl::StatusOr<std::vector<NodeEntry>> readNodes(EtcdClient& etcd, const FleetKeys& keys);

// "user@host" of this process (FleetVersion.author, FleetTarget.by).
std::string whoAmI();
int64_t unixNowNs();

}  // namespace dpu::fleet
