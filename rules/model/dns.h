// DNS filtering as the control plane fills it (from ApplianceConfig.dns). Plain data; the
// list files are read and compiled by rules/compiled/dns (compileDns), not here, so a model
// with a million-name file stays small and cheap to compare.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "rules/model/dataplane_settings.h"

namespace dpu::rules {

// What happens to a query that matches. kAllow marks allow lists (and allow entries inside a
// list: Adblock "@@||name^", RPZ "rpz-passthru."): an allow match wins over every block.
// The numeric values are stored in 3 bits of the compiled name set (0 = "the list's action").
enum class DnsAction : uint8_t {
  kAllow = 1,
  kDrop = 2,      // the query is dropped, no answer
  kNxdomain = 3,  // answered NXDOMAIN (rcode 3)
  kNodata = 4,    // answered NOERROR without answers
  kSinkhole = 5,  // answered with the list's sinkhole addresses (A / AAAA), others NODATA
  kRefuse = 6,    // answered REFUSED (rcode 5)
};

// How a list file (or the inline names) is written.
enum class DnsListFormat : uint8_t {
  kAuto = 0,      // per line: "||x^"/"@@||x^" Adblock, "<ip> x" hosts, "*.x" wildcard, else plain
  kPlain = 1,     // one name per line
  kHosts = 2,     // "0.0.0.0 name [name...]" / "127.0.0.1 name" / "::1 name"
  kAdblock = 3,   // "||name^" (name and subdomains), "@@||name^" (allow)
  kWildcard = 4,  // "*.name" (subdomains only) or "name"
  kRpz = 5,       // RPZ zone subset: "name CNAME ." NXDOMAIN, "CNAME *." NODATA,
                  // "CNAME rpz-passthru." allow, "CNAME rpz-drop." drop; "*.name" subdomains
  kDnsmasq = 6,   // "address=/name/0.0.0.0", "server=/name/": the name and its subdomains
};

// What a bad line does to its list.
enum class DnsBadLines : uint8_t {
  kReject = 0,    // the whole list (and so the config) is refused, every bad line reported
  kSkip = 1,      // bad lines are skipped and counted (DnsListStats.skipped_lines)
};

// How plain / hosts names match: the name only, or the name and all its subdomains.
enum class DnsMatch : uint8_t { kExact = 0, kSubtree = 1 };

struct DnsListModel {
  std::string name;                        // unique; names the list in counters and events
  DnsAction action = DnsAction::kNxdomain; // kAllow = an allow list
  DnsListFormat format = DnsListFormat::kAuto;
  DnsBadLines bad_lines = DnsBadLines::kReject;
  DnsMatch plain_match = DnsMatch::kExact; // for plain and hosts entries
  std::vector<std::string> names;          // inline entries, each one line of `format`
  // Entries taken out (one line of `format` each, e.g. by RemoveDnsNames): the list is
  // (files + names) minus these, part by part (a "*.x" removal leaves "x" itself).
  std::vector<std::string> removed;
  std::vector<std::string> files;          // list files (absolute paths after loading)
  // Identifies each file's content when the control side looked at it (device, inode, size,
  // mtime hash); a replaced file changes the model, so the list is read again. Same size as
  // `files` (0 = not checked).
  std::vector<uint64_t> file_stamps;
  // Sinkhole answers (action kSinkhole): empty = 0.0.0.0 / ::.
  std::vector<std::array<uint8_t, 4>> sinkhole_v4;
  std::vector<std::array<uint8_t, 16>> sinkhole_v6;
  uint32_t ttl = 300;                      // TTL of synthesized answers (and SOA-less NODATA)
  bool operator==(const DnsListModel&) const = default;
};

// The SOA record in the authority section of negative answers (NXDOMAIN, NODATA; RFC 2308),
// so that resolvers cache them: owner = the question name (the blocked name answers as its own
// zone apex), TTL = MINIMUM = the negative-caching time. Names are dotted (trailing dot
// optional); rname is the mailbox in domain form ("hostmaster.example.org").
struct DnsSoaModel {
  std::string mname = "dns-filter.invalid";
  std::string rname = "hostmaster.dns-filter.invalid";
  uint32_t serial = 1;
  uint32_t refresh = 1800;
  uint32_t retry = 900;
  uint32_t expire = 604800;
  uint32_t minimum = 0;  // 0 = the answering list's ttl
  bool operator==(const DnsSoaModel&) const = default;
};

struct DnsModel {
  std::vector<DnsListModel> lists;
  DnsSoaModel soa;
  std::vector<uint16_t> extra_ports;       // besides 53 (UDP and TCP)
  Policy malformed = Policy::kForward;     // DNS messages that do not parse
  Policy nonstandard = Policy::kForward;   // opcode != QUERY or QDCOUNT != 1 (dns.nonstandard)
  Policy tcp_midstream = Policy::kForward; // DNS over TCP picked up mid-stream (dns.tcp_midstream)
  bool cname_cloaking = true;              // inspect resolver answers for blocked CNAME targets
  bool operator==(const DnsModel&) const = default;
  bool enabled() const { return !lists.empty(); }
};

}  // namespace dpu::rules
