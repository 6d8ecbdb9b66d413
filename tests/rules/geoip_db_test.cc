// rules::GeoipDb against MaxMind's test databases (../shared/data/mmdb): the documented
// lookups of GeoLite2-Country-Test (expected/*.lookups.tsv, cross-checked with mmdblookup),
// the country-data check, and broken or unsuitable files.
#include "rules/compile/geoip_db.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "rules/compile/firewall_parsers.h"

namespace dpu::rules {
namespace {

using ::testing::HasSubstr;

const std::string kMmdbDir = DPU_MMDB_DIR;
const std::string kTestData = kMmdbDir + "/maxmind+MaxMind-DB/test-data/";

#define REQUIRE_FILE(path)                                                               \
  if (!std::filesystem::exists(path)) {                                                  \
    GTEST_SKIP() << path << " is absent (MaxMind test databases are expected in "        \
                 << kMmdbDir << ")";                                                      \
  }

TEST(GeoipDb, DocumentedCountryLookups) {
  const std::string db_path = kTestData + "GeoLite2-Country-Test.mmdb";
  const std::string tsv = kMmdbDir + "/expected/GeoLite2-Country-Test.lookups.tsv";
  REQUIRE_FILE(db_path);
  REQUIRE_FILE(tsv);
  auto db = GeoipDb::open(db_path);
  ASSERT_TRUE(db.ok()) << db.status();
  EXPECT_EQ((*db)->databaseType(), "GeoLite2-Country");
  EXPECT_EQ((*db)->ipVersion(), 6);
  EXPECT_TRUE((*db)->checkCountryData().ok());
  std::ifstream in(tsv);
  std::string line;
  int checked = 0, found = 0, with_country = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> col = absl::StrSplit(line, '\t');
    ASSERT_GE(col.size(), 5u) << line;
    auto r = (*db)->lookup(col[0]);
    ASSERT_TRUE(r.ok()) << col[0] << ": " << r.status();
    const bool want_found = col[4] == "found";
    EXPECT_EQ(r->found, want_found) << col[0];
    if (want_found) {
      ++found;
      std::string cc = col[3] == "null" ? "" : std::string(absl::StripPrefix(
                                                   absl::StripSuffix(col[3], "\""), "\""));
      EXPECT_EQ(r->country, cc) << col[0];
      if (!cc.empty()) ++with_country;
      auto net = parsePrefix(col[1]);
      ASSERT_TRUE(net.ok()) << col[1];
      EXPECT_EQ(r->network, *net) << col[0] << " in " << formatPrefix(r->network);
    }
    ++checked;
  }
  EXPECT_GT(checked, 700);
  EXPECT_GT(found, 700);
  EXPECT_GT(with_country, 600);
  // A few by hand, as operators would read them.
  auto gb = (*db)->lookup("81.2.69.142");
  ASSERT_TRUE(gb.ok());
  EXPECT_EQ(gb->country, "GB");
  EXPECT_EQ(formatPrefix(gb->network), "81.2.69.142/31");
  auto none = (*db)->lookup("10.0.0.1");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->found);
  EXPECT_FALSE((*db)->lookup("not-an-ip").ok());
}

TEST(GeoipDb, CountryDataCheck) {
  REQUIRE_FILE(kTestData + "GeoIP2-City-Test.mmdb");
  EXPECT_TRUE(checkGeoipDatabase(kTestData + "GeoIP2-City-Test.mmdb").ok());
  REQUIRE_FILE(kTestData + "GeoLite2-ASN-Test.mmdb");
  absl::Status asn = checkGeoipDatabase(kTestData + "GeoLite2-ASN-Test.mmdb");
  EXPECT_EQ(asn.code(), absl::StatusCode::kFailedPrecondition) << asn;
  EXPECT_THAT(std::string(asn.message()), HasSubstr("no country data"));
  EXPECT_THAT(std::string(asn.message()), HasSubstr("GeoLite2-ASN"));
}

TEST(GeoipDb, CountryCodesAreEveryCodeOfTheDatabase) {
  REQUIRE_FILE(kTestData + "GeoLite2-Country-Test.mmdb");
  auto db = GeoipDb::open(kTestData + "GeoLite2-Country-Test.mmdb");
  ASSERT_TRUE(db.ok()) << db.status();
  auto codes = (*db)->countryCodes();
  ASSERT_TRUE(codes.ok()) << codes.status();
  // The 46 countries of MaxMind's source-data/GeoLite2-Country-Test.json, sorted.
  EXPECT_EQ(codes->size(), 46u);
  EXPECT_TRUE(std::is_sorted(codes->begin(), codes->end()));
  for (const char* cc : {"AE", "BT", "CN", "GB", "PH", "SE", "US"}) {
    EXPECT_TRUE(std::binary_search(codes->begin(), codes->end(), cc)) << cc;
  }
  for (const char* cc : {"KP", "AD", "UK"}) {
    EXPECT_FALSE(std::binary_search(codes->begin(), codes->end(), cc)) << cc;
  }
  // A database without country data has none.
  auto asn = GeoipDb::open(kTestData + "GeoLite2-ASN-Test.mmdb");
  ASSERT_TRUE(asn.ok());
  auto none = (*asn)->countryCodes();
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(GeoipDb, BrokenAndMissingFiles) {
  absl::Status missing = checkGeoipDatabase("/nonexistent/db.mmdb");
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.message()), HasSubstr("/nonexistent/db.mmdb"));
  EXPECT_EQ(checkGeoipDatabase("/dev/null").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(checkGeoipDatabase("/tmp").code(), absl::StatusCode::kInvalidArgument);
  // Not an mmdb at all.
  std::string junk = (std::filesystem::temp_directory_path() / "dpu_geoip_junk.mmdb").string();
  std::ofstream(junk) << "this is not a MaxMind database\n";
  absl::Status st = checkGeoipDatabase(junk);
  std::filesystem::remove(junk);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("not a usable MaxMind DB"));
  const std::string broken = kTestData + "GeoIP2-City-Test-Invalid-Node-Count.mmdb";
  REQUIRE_FILE(broken);
  EXPECT_FALSE(checkGeoipDatabase(broken).ok());
}

TEST(GeoipDb, StampChangesWithTheFile) {
  std::string p = (std::filesystem::temp_directory_path() / "dpu_geoip_stamp").string();
  std::ofstream(p) << "a";
  uint64_t s1 = geoipDatabaseStamp(p);
  std::ofstream(p) << "bb";
  uint64_t s2 = geoipDatabaseStamp(p);
  std::filesystem::remove(p);
  EXPECT_NE(s1, 0u);
  EXPECT_NE(s1, s2);
  EXPECT_EQ(geoipDatabaseStamp(p), 0u);
}

}  // namespace
}  // namespace dpu::rules
