#include "rules/compile/geoip_db.h"

#include <arpa/inet.h>
#include <maxminddb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <unordered_set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rules/compile/firewall_parsers.h"

namespace dpu::rules {
namespace {

std::string entryString(MMDB_entry_s entry, const char* a, const char* b) {
  MMDB_entry_data_s data;
  if (MMDB_get_value(&entry, &data, a, b, nullptr) != MMDB_SUCCESS || !data.has_data ||
      data.type != MMDB_DATA_TYPE_UTF8_STRING) {
    return "";
  }
  return std::string(data.utf8_string, data.data_size);
}

}  // namespace

GeoipDb::~GeoipDb() {
  if (db_) MMDB_close(db_.get());
}

absl::StatusOr<std::unique_ptr<GeoipDb>> GeoipDb::open(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("no GeoIP database path given");
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    int e = errno;
    std::string msg = absl::StrCat(path, ": cannot open: ", std::strerror(e));
    return e == ENOENT ? absl::NotFoundError(msg) : absl::InvalidArgumentError(msg);
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  std::unique_ptr<GeoipDb> db(new GeoipDb());
  db->path_ = path;
  auto mmdb = std::make_unique<MMDB_s>();
  int rc = MMDB_open(path.c_str(), MMDB_MODE_MMAP, mmdb.get());
  if (rc != MMDB_SUCCESS) {
    std::string why = MMDB_strerror(rc);
    if (rc == MMDB_IO_ERROR) absl::StrAppend(&why, " (", std::strerror(errno), ")");
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a usable MaxMind DB: ", why));
  }
  db->db_ = std::move(mmdb);
  return db;
}

std::string GeoipDb::databaseType() const {
  const char* t = db_->metadata.database_type;
  return t ? t : "";
}
uint64_t GeoipDb::buildEpoch() const { return db_->metadata.build_epoch; }
int GeoipDb::ipVersion() const { return db_->metadata.ip_version; }
uint32_t GeoipDb::nodeCount() const { return db_->metadata.node_count; }

absl::StatusOr<GeoipLookup> GeoipDb::lookup(std::string_view ip) const {
  auto a = parseAddress(ip);
  if (!a.ok()) return a.status();
  return lookup(*a);
}

absl::StatusOr<GeoipLookup> GeoipDb::lookup(const IpPrefix& addr) const {
  sockaddr_storage ss{};
  if (addr.v6) {
    auto* s6 = reinterpret_cast<sockaddr_in6*>(&ss);
    s6->sin6_family = AF_INET6;
    std::memcpy(&s6->sin6_addr, addr.addr.data(), 16);
  } else {
    auto* s4 = reinterpret_cast<sockaddr_in*>(&ss);
    s4->sin_family = AF_INET;
    std::memcpy(&s4->sin_addr, addr.addr.data(), 4);
  }
  int err = MMDB_SUCCESS;
  MMDB_lookup_result_s r =
      MMDB_lookup_sockaddr(db_.get(), reinterpret_cast<const sockaddr*>(&ss), &err);
  if (err == MMDB_IPV6_LOOKUP_IN_IPV4_DATABASE_ERROR) {
    return absl::InvalidArgumentError(
        absl::StrCat(formatPrefix(addr, true), ": an IPv6 address in an IPv4-only database (",
                     path_, ")"));
  }
  if (err != MMDB_SUCCESS) {
    return absl::InternalError(absl::StrCat(path_, ": lookup of ", formatPrefix(addr, true),
                                            " failed: ", MMDB_strerror(err)));
  }
  GeoipLookup out;
  out.found = r.found_entry;
  if (!r.found_entry) return out;
  out.country = entryString(r.entry, "country", "iso_code");
  out.registered_country = entryString(r.entry, "registered_country", "iso_code");
  IpPrefix net = addr;
  int len = r.netmask;
  // An IPv4 address in an IPv6 tree: the netmask counts the 96 bits of the IPv4 subtree.
  if (!addr.v6 && db_->metadata.ip_version == 6) len -= 96;
  if (len < 0) len = 0;
  net.len = static_cast<uint8_t>(std::min(len, addr.v6 ? 128 : 32));
  out.network = maskPrefix(net);
  return out;
}

namespace {

// Visits each distinct data record of the search tree once (depth first, right before
// left), at most max_records of them, until fn returns true. *visited: records seen.
absl::Status walkRecords(MMDB_s* db, const std::string& path, size_t max_records,
                         size_t* visited, const std::function<bool(const MMDB_entry_s&)>& fn) {
  const uint32_t nodes = db->metadata.node_count;
  std::vector<bool> seen(nodes, false);
  std::unordered_set<uint32_t> records;
  std::vector<uint32_t> stack = {0};
  *visited = 0;
  while (!stack.empty() && records.size() < max_records) {
    uint32_t n = stack.back();
    stack.pop_back();
    if (n >= nodes || seen[n]) continue;
    seen[n] = true;
    MMDB_search_node_s node;
    if (MMDB_read_node(db, n, &node) != MMDB_SUCCESS) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": corrupt search tree (node ", n, ")"));
    }
    struct Rec { uint8_t type; uint64_t value; MMDB_entry_s entry; };
    for (const Rec& rec : {Rec{node.right_record_type, node.right_record, node.right_record_entry},
                           Rec{node.left_record_type, node.left_record, node.left_record_entry}}) {
      if (rec.type == MMDB_RECORD_TYPE_SEARCH_NODE) {
        stack.push_back(static_cast<uint32_t>(rec.value));
      } else if (rec.type == MMDB_RECORD_TYPE_DATA) {
        if (!records.insert(rec.entry.offset).second) continue;
        *visited = records.size();
        if (fn(rec.entry)) return absl::OkStatus();
      } else if (rec.type == MMDB_RECORD_TYPE_INVALID) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": corrupt search tree (invalid record in node ", n, ")"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status GeoipDb::checkCountryData(size_t max_records) const {
  bool found = false;
  size_t visited = 0;
  absl::Status st = walkRecords(db_.get(), path_, max_records, &visited,
                                [&](const MMDB_entry_s& e) {
                                  found = !entryString(e, "country", "iso_code").empty();
                                  return found;
                                });
  if (!st.ok() || found) return st;
  return absl::FailedPreconditionError(absl::StrCat(
      path_, ": no country data (no record with country.iso_code among the first ",
      visited, "; database type '", databaseType(),
      "'): use a country database such as GeoLite2-Country or GeoIP2-City"));
}

absl::StatusOr<std::vector<std::string>> GeoipDb::countryCodes() const {
  std::set<std::string> codes;
  size_t visited = 0;
  absl::Status st = walkRecords(db_.get(), path_, std::numeric_limits<size_t>::max(), &visited,
                                [&](const MMDB_entry_s& e) {
                                  std::string cc = entryString(e, "country", "iso_code");
                                  if (!cc.empty()) codes.insert(std::move(cc));
                                  return false;
                                });
  if (!st.ok()) return st;
  return std::vector<std::string>(codes.begin(), codes.end());
}

absl::Status checkGeoipDatabase(const std::string& path) {
  auto db = GeoipDb::open(path);
  if (!db.ok()) return db.status();
  return (*db)->checkCountryData();
}

uint64_t geoipDatabaseStamp(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 0;
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the identifying fields
  for (uint64_t v : {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                     static_cast<uint64_t>(st.st_size), static_cast<uint64_t>(st.st_mtim.tv_sec),
                     static_cast<uint64_t>(st.st_mtim.tv_nsec)}) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  return h == 0 ? 1 : h;
}

}  // namespace dpu::rules
