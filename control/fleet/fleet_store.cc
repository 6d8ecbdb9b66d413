#include "control/fleet/fleet_store.h"

#include <openssl/evp.h>
#include <pwd.h>
#include <unistd.h>

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/util/json_util.h"

namespace dpu::fleet {

absl::Status checkName(absl::string_view what, absl::string_view name) {
  if (name.empty() || name.size() > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " \"", name, "\": 1 to 64 characters of [A-Za-z0-9_.-]"));
  }
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " \"", name, "\": character '", std::string(1, c),
          "' is not allowed (1 to 64 characters of [A-Za-z0-9_.-])"));
    }
  }
  if (name == "." || name == "..") {
    return absl::InvalidArgumentError(absl::StrCat(what, " \"", name, "\" is not a name"));
  }
  return absl::OkStatus();
}

FleetKeys::FleetKeys(std::string fleet)
    : fleet_(std::move(fleet)), root_(absl::StrCat(kRootPrefix, fleet_, "/")) {}

std::string FleetKeys::version(uint64_t v) const {
  return absl::StrFormat("%sversions/%020u", root_, v);
}
std::string FleetKeys::blobPrefix(absl::string_view sha256) const {
  return absl::StrCat(root_, "blobs/", sha256, "/");
}
std::string FleetKeys::chunk(absl::string_view sha256, uint32_t i) const {
  return absl::StrFormat("%sblobs/%s/%06u", root_, sha256, i);
}
std::string FleetKeys::group(absl::string_view g) const { return absl::StrCat(groupsPrefix(), g); }
std::string FleetKeys::node(absl::string_view n) const { return absl::StrCat(nodesPrefix(), n); }

std::string sha256Hex(absl::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 15]);
  }
  return out;
}

std::string toJson(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, o);
  return out;
}

absl::Status fromJson(absl::string_view json, google::protobuf::Message* m, absl::string_view what) {
  google::protobuf::util::JsonParseOptions o;
  o.ignore_unknown_fields = true;  // a newer writer's fields do not break an older reader
  auto st = google::protobuf::util::JsonStringToMessage(std::string(json), m, o);
  if (!st.ok()) {
    return absl::DataLossError(absl::StrCat(what, ": not a valid ", m->GetTypeName(), ": ",
                                            std::string(st.message())));
  }
  return absl::OkStatus();
}

absl::Status putBlob(EtcdClient& etcd, const FleetKeys& keys, absl::string_view data,
                     v1::FleetFile* out, uint64_t* written, absl::string_view sha256) {
  out->set_sha256(sha256.empty() ? sha256Hex(data) : std::string(sha256));
  out->set_size(data.size());
  const uint32_t chunks = data.empty() ? 1 : static_cast<uint32_t>((data.size() + kChunkBytes - 1) / kChunkBytes);
  out->set_chunks(chunks);
  if (written) *written = 0;
  auto last = etcd.range(keys.chunk(out->sha256(), chunks - 1), "", 0, 0, /*keys_only=*/true);
  if (!last.ok()) return last.status();
  if (!last->kvs.empty()) return absl::OkStatus();  // stored before
  for (uint32_t i = 0; i < chunks; ++i) {
    absl::string_view part = data.substr(std::min(data.size(), size_t{i} * kChunkBytes), kChunkBytes);
    auto r = etcd.put(keys.chunk(out->sha256(), i), std::string(part));
    if (!r.ok()) return r.status();
    if (written) *written += part.size();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> getBlob(EtcdClient& etcd, const FleetKeys& keys,
                                    const v1::FleetFile& f) {
  std::string data;
  data.reserve(f.size());
  const std::string prefix = keys.blobPrefix(f.sha256());
  const std::string end = prefixEnd(prefix);
  std::string from = prefix;
  uint32_t got = 0;
  while (got < f.chunks()) {
    // Four chunks (2 MiB) per response: under gRPC's default 4 MiB message limit.
    auto r = etcd.range(from, end, 0, 4);
    if (!r.ok()) return r.status();
    if (r->kvs.empty()) break;
    for (const KeyValue& kv : r->kvs) {
      if (kv.key != keys.chunk(f.sha256(), got)) {
        return absl::DataLossError(absl::StrCat("file ", f.path(), " (sha256 ", f.sha256(),
                                                "): chunk ", got, " missing in etcd (found ",
                                                kv.key, ")"));
      }
      data += kv.value;
      ++got;
    }
    if (!r->more) break;
    from = r->kvs.back().key + '\0';
  }
  if (got != f.chunks()) {
    return absl::DataLossError(absl::StrCat("file ", f.path(), " (sha256 ", f.sha256(),
                                            "): ", got, " of ", f.chunks(),
                                            " chunks in etcd"));
  }
  if (data.size() != f.size() || sha256Hex(data) != f.sha256()) {
    return absl::DataLossError(absl::StrCat("file ", f.path(), ": the bytes in etcd (",
                                            data.size(), " bytes) do not match its sha256 ",
                                            f.sha256(), " (", f.size(), " bytes)"));
  }
  return data;
}

absl::Status CtlView::update(const FleetKeys& keys, const std::string& key,
                             const std::string* value, int64_t mod_revision) {
  if (key == keys.target()) {
    if (value == nullptr) {
      target.reset();
      target_revision = mod_revision;
      return absl::OkStatus();
    }
    v1::FleetTarget t;
    if (absl::Status st = fromJson(*value, &t, key); !st.ok()) return st;
    target = t;
    target_revision = mod_revision;
    return absl::OkStatus();
  }
  if (absl::StartsWith(key, keys.groupsPrefix())) {
    const std::string g = key.substr(keys.groupsPrefix().size());
    if (value == nullptr) {
      groups.erase(g);
      group_revisions.erase(g);
      return absl::OkStatus();
    }
    v1::FleetTarget t;
    if (absl::Status st = fromJson(*value, &t, key); !st.ok()) return st;
    groups[g] = t;
    group_revisions[g] = mod_revision;
  }
  return absl::OkStatus();
}

uint64_t CtlView::desiredFor(const std::string& group, int64_t* set_at) const {
  if (auto it = groups.find(group); it != groups.end()) {
    if (set_at) *set_at = group_revisions.at(group);
    return it->second.version();
  }
  if (set_at) *set_at = target ? target_revision : 0;
  return target ? target->version() : 0;
}

absl::StatusOr<CtlView> readCtl(EtcdClient& etcd, const FleetKeys& keys,
                                std::vector<std::string>* ignored) {
  auto r = etcd.range(keys.ctlPrefix(), prefixEnd(keys.ctlPrefix()));
  if (!r.ok()) return r.status();
  CtlView v;
  v.revision = r->revision;
  for (const KeyValue& kv : r->kvs) {
    if (absl::Status st = v.update(keys, kv.key, &kv.value, kv.mod_revision); !st.ok()) {
      if (ignored) ignored->push_back(std::string(st.message()));
    }
  }
  return v;
}

absl::StatusOr<v1::FleetVersion> readVersion(EtcdClient& etcd, const FleetKeys& keys,
                                             uint64_t version) {
  auto r = etcd.range(keys.version(version));
  if (!r.ok()) return r.status();
  if (r->kvs.empty()) {
    return absl::NotFoundError(
        absl::StrCat("fleet ", keys.fleet(), " has no version ", version));
  }
  v1::FleetVersion v;
  if (absl::Status st = fromJson(r->kvs[0].value, &v, r->kvs[0].key); !st.ok()) return st;
  return v;
}

absl::StatusOr<std::vector<v1::FleetVersion>> readVersions(EtcdClient& etcd,
                                                           const FleetKeys& keys) {
  auto r = etcd.range(keys.versionsPrefix(), prefixEnd(keys.versionsPrefix()));
  if (!r.ok()) return r.status();
  std::vector<v1::FleetVersion> out;
  for (const KeyValue& kv : r->kvs) {
    v1::FleetVersion v;
    if (absl::Status st = fromJson(kv.value, &v, kv.key); !st.ok()) return st;
    out.push_back(std::move(v));
  }
  return out;
}

absl::StatusOr<Head> readHead(EtcdClient& etcd, const FleetKeys& keys) {
  auto r = etcd.range(keys.head());
  if (!r.ok()) return r.status();
  Head h;
  if (r->kvs.empty()) return h;
  v1::FleetHead fh;
  if (absl::Status st = fromJson(r->kvs[0].value, &fh, r->kvs[0].key); !st.ok()) return st;
  h.version = fh.version();
  h.mod_revision = r->kvs[0].mod_revision;
  return h;
}

absl::StatusOr<std::vector<NodeEntry>> readNodes(EtcdClient& etcd, const FleetKeys& keys) {
  auto r = etcd.range(keys.nodesPrefix(), prefixEnd(keys.nodesPrefix()));
  if (!r.ok()) return r.status();
  std::vector<NodeEntry> out;
  for (const KeyValue& kv : r->kvs) {
    NodeEntry e;
    if (absl::Status st = fromJson(kv.value, &e.status, kv.key); !st.ok()) return st;
    e.lease = kv.lease;
    e.mod_revision = kv.mod_revision;
    out.push_back(std::move(e));
  }
  return out;
}

std::string whoAmI() {
  std::string user = "?";
  if (const passwd* pw = getpwuid(geteuid()); pw != nullptr && pw->pw_name) user = pw->pw_name;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return absl::StrCat(user, "@", host[0] ? host : "?");
}

int64_t unixNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace dpu::fleet
