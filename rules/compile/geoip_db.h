// A MaxMind DB (.mmdb) opened with libmaxminddb, for the control side: checking a database
// before it is configured (it opens, and its records carry country.iso_code) and looking
// addresses up for operators (LookupCountry). The firewall's country of an address is
// country.iso_code of the record that holds it (an address without a record, or a record
// without country.iso_code, has no country: index 0 in CompiledFirewall). Read-only; a
// GeoipDb may be used from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "rules/model/firewall.h"

struct MMDB_s;

namespace dpu::rules {

struct GeoipLookup {
  bool found = false;              // the database has a record for the address
  std::string country;             // country.iso_code; "" when the record has none
  std::string registered_country;  // registered_country.iso_code; "" when none
  IpPrefix network;                // the database network holding the address (when found)
};

class GeoipDb {
 public:
  // NotFound when the file does not exist; InvalidArgument when it is not a regular file or
  // not a MaxMind DB (the libmaxminddb reason is in the message).
  static absl::StatusOr<std::unique_ptr<GeoipDb>> open(const std::string& path);
  ~GeoipDb();
  GeoipDb(const GeoipDb&) = delete;
  GeoipDb& operator=(const GeoipDb&) = delete;

  // `ip` is an IPv4 or IPv6 address ("81.2.69.142", "2001:db8::1").
  absl::StatusOr<GeoipLookup> lookup(std::string_view ip) const;
  // An address as the model holds it (v4 in bytes 0..3; the length is ignored).
  absl::StatusOr<GeoipLookup> lookup(const IpPrefix& addr) const;

  // OK when some record of the database has country.iso_code. Walks the search tree and
  // looks at up to `max_records` distinct records; FailedPrecondition naming the database
  // type otherwise (e.g. an ASN database).
  absl::Status checkCountryData(size_t max_records = 100000) const;

  // Every country.iso_code the database holds (walks the whole search tree, each record
  // once): what a country rule can match with this database. Sorted, unique.
  absl::StatusOr<std::vector<std::string>> countryCodes() const;

  const std::string& path() const { return path_; }
  std::string databaseType() const;
  uint64_t buildEpoch() const;
  int ipVersion() const;
  uint32_t nodeCount() const;

 private:
  GeoipDb() = default;
  std::string path_;
  std::unique_ptr<MMDB_s> db_;
};

// Opens `path` and checks that it has country data: what the control plane does before it
// accepts geoip.database. The status names the path.
absl::Status checkGeoipDatabase(const std::string& path);

// Identifies the file's content (device, inode, size, modification time); 0 when it cannot
// be read. Stored in FirewallModel::geoip_database_stamp.
uint64_t geoipDatabaseStamp(const std::string& path);

}  // namespace dpu::rules
