// DNS block / allow list formats and their parser. Pure C++ (no DPDK, no proto).
//
// Every format: blank lines are ignored; comments are ignored ('#' lines and "name # text"
// tails in plain / hosts / wildcard, '!' and '#' lines and "[Adblock ...]" headers in Adblock,
// ';' lines and tails in RPZ). Names are normalized: lower case, one trailing dot removed;
// labels 1..63 characters of a-z 0-9 '-' '_', at most 253 characters and 127 labels.
//
//   plain     "ads.example.com"            the name (or the name and its subdomains when the
//                                          list's match is subtree)
//   hosts     "0.0.0.0 ads.example.com [more names]", "127.0.0.1 x", "::1 x"; the address must
//             be an IPv4/IPv6 address; localhost-style names (localhost, local, broadcasthost,
//             ip6-*) are ignored, not entries
//   adblock   "||example.com^"   example.com and every subdomain
//             "@@||example.com^" an allow entry (wins over every block, in any list)
//             modifiers ("$third-party"), paths and cosmetic rules are bad lines
//   wildcard  "*.example.com"    the strict subdomains of example.com (not the name itself);
//             a bare name is a plain entry
//   rpz       "name [ttl] [IN] CNAME target", target: "." NXDOMAIN, "*." NODATA,
//             "rpz-passthru." allow, "rpz-drop." drop; "*.name" owners match the strict
//             subdomains. Owners are zone-file names: relative to the current $ORIGIN ("@"
//             is the origin, a name ending in '.' is fully qualified), and the policy's name
//             is the owner without the zone's name (its apex: the first $ORIGIN, else the
//             owner of a fully written SOA record, which is then the origin too); an owner
//             or $ORIGIN outside the zone is a bad line. Without either, owners are the
//             names themselves. $TTL, the apex SOA and NS records (owner "@", the apex, or a
//             line starting with blanks, parentheses spanning lines) are ignored; other
//             record types and targets (local data, rpz-tcp-only.), and rpz-ip / rpz-nsip /
//             rpz-nsdname / rpz-client-ip triggers are bad lines
//   dnsmasq   "address=/example.com/0.0.0.0" or "server=/example.com/" (name and subdomains)
//   auto      per line: Adblock when it starts with "||" or "@@||", hosts when the first word
//             is an address, dnsmasq for "address=/" / "server=/", wildcard for "*.", plain
//             otherwise
//
// A bad line is a ConfigError: section "dns", rule = the list's name, file and line (or the
// inline entry's field), and why. With DnsBadLines::kSkip the caller counts them instead.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "rules/compile/config_errors.h"
#include "rules/model/dns.h"

namespace dpu::rules {

// Normalizes one name (see above) into `out`. On failure returns false and sets `why`.
bool normalizeDnsName(std::string_view in, std::string& out, std::string* why);

// "nxdomain", "nodata", "sinkhole", "refuse" / "refused", "drop", "allow" (case-insensitive).
absl::StatusOr<DnsAction> parseDnsAction(std::string_view text);
const char* dnsActionName(DnsAction a);
// "auto", "plain" / "domains", "hosts", "adblock", "wildcard", "rpz", "dnsmasq".
absl::StatusOr<DnsListFormat> parseDnsListFormat(std::string_view text);
const char* dnsListFormatName(DnsListFormat f);

// Receives each entry: the normalized name and its DnsEntryBits (rules/compiled/dns_name_set.h).
using DnsEntrySink = std::function<void(std::string_view name, uint8_t bits)>;

// Where the text came from, for errors.
struct DnsSource {
  std::string list;    // the list's name (ConfigError.rule)
  std::string file;    // file path, "" for inline entries
  std::string field;   // "dns.lists[0].files[1]" / "dns.lists[0].names[3]"
  int first_line = 1;  // line number of the text's first line (0 = no line numbers)
};

struct DnsParseCounts {
  uint64_t entries = 0;    // entries passed to the sink (a hosts line can give several)
  uint64_t bad_lines = 0;  // every bad line (errors get the first kMaxDnsLineErrors)
  uint64_t ignored = 0;    // comments, blank lines, directives, localhost names
};

inline constexpr size_t kMaxDnsLineErrors = 100;  // ConfigErrors per source at most

// Parses a whole list text line by line. Bad lines are appended to `errors` (at most
// kMaxDnsLineErrors per call) and counted; the good lines' entries go to `sink` either way
// (the caller decides from counts.bad_lines and its DnsBadLines policy).
DnsParseCounts parseDnsListText(std::string_view text, DnsListFormat format, DnsMatch plain,
                                const DnsSource& source, const DnsEntrySink& sink,
                                ConfigErrorList* errors);

// Reads a list file whole (NotFound / InvalidArgument naming it when it cannot be read or is
// larger than 1 GiB).
absl::StatusOr<std::string> readDnsListFile(const std::string& path);

}  // namespace dpu::rules
