// Suricata-format signatures (docs/signatures.md): one parsed rule, as rules/compile/sig_parse
// produces it from a `.rules` line and rules/compiled/signatures compiles it. Plain data.
//
//   alert http $HOME_NET any -> $EXTERNAL_NET any (msg:"..."; flow:established,to_server;
//       http.method; content:"POST"; http.uri; content:"/x.php"; startswith; sid:1; rev:2;)
//
// Header addresses and ports are resolved here (variables expanded, lists, ranges and
// negation flattened into sorted ranges); options become, per buffer, the ordered list of
// match items that the engine confirms after the fast pattern prefilter.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dpu::rules {

enum class SigAction : uint8_t { kAlert = 0, kDrop = 1, kReject = 2, kPass = 3 };

// The header's protocol. kHttp / kDns / kTls: the flow's application protocol as the
// appliance detects it; kTcpPkt: TCP packets only (no stream); kTcpStream: the stream only.
enum class SigProto : uint8_t {
  kIp = 0, kTcp, kUdp, kIcmp, kTcpPkt, kTcpStream, kHttp, kDns, kTls,
};

// Where a match item looks (Suricata's sticky buffers and their legacy content modifiers).
// kPayload: the packet payload / reassembled stream (no buffer named).
enum class SigBuffer : uint8_t {
  kPayload = 0,
  kHttpUri, kHttpUriRaw, kHttpMethod, kHttpHost, kHttpHostRaw, kHttpHeader, kHttpHeaderRaw,
  kHttpHeaderNames, kHttpCookie, kHttpUserAgent, kHttpRequestBody, kHttpResponseBody,
  kHttpStatCode, kHttpStatMsg, kHttpRequestLine, kHttpResponseLine, kHttpProtocol,
  kHttpContentType, kHttpContentLen, kHttpReferer, kHttpAccept, kHttpAcceptLang,
  kHttpAcceptEnc, kHttpConnection, kHttpLocation, kHttpServer, kHttpStart,
  kFileData, kDnsQuery, kTlsSni,
  kCount
};
constexpr int kSigBufferCount = int(SigBuffer::kCount);
const char* sigBufferName(SigBuffer b);  // "http.uri", "payload", ...

// A set of addresses: sorted, disjoint, inclusive ranges of 128-bit addresses (IPv4 as
// ::ffff:a.b.c.d). `any` is the whole space.
struct SigAddrSet {
  struct Range {
    std::array<uint8_t, 16> lo{}, hi{};
    bool operator==(const Range&) const = default;
  };
  std::vector<Range> ranges;
  bool any = false;
  bool contains(const std::array<uint8_t, 16>& a) const;
  bool operator==(const SigAddrSet&) const = default;
};
struct SigPortSet {
  std::vector<std::pair<uint16_t, uint16_t>> ranges;  // sorted, disjoint, inclusive
  bool any = false;
  bool contains(uint16_t p) const;
  bool operator==(const SigPortSet&) const = default;
};

// Byte reads (byte_test, byte_jump, byte_extract): how the bytes are read.
struct SigByteRead {
  uint8_t nbytes = 0;
  bool relative = false, big_endian = true, string = false, dce = false;
  uint8_t base = 10;          // string: 8, 10, 16
  int32_t offset = 0;
  int8_t offset_var = -1;     // byte_extract variable as offset
  uint32_t bitmask = 0;       // 0: none
  bool operator==(const SigByteRead&) const = default;
};

// One step of a buffer's match list, evaluated in order (relative items from the previous
// match's end).
struct SigItem {
  enum Kind : uint8_t { kContent, kPcre, kIsDataAt, kByteTest, kByteJump, kByteExtract, kBsize };
  Kind kind = kContent;
  // content
  std::string bytes;          // the pattern (hex decoded, escapes resolved)
  bool negated = false, nocase = false, fast_pattern = false;
  bool startswith = false, endswith = false;
  // offset / depth: from the buffer start; distance / within: from the previous match's end.
  // `has_*`: present. A *_var >= 0 names a byte_extract variable instead of the constant.
  bool has_offset = false, has_depth = false, has_distance = false, has_within = false;
  int32_t offset = 0, depth = 0, distance = 0, within = 0;
  int8_t offset_var = -1, depth_var = -1, distance_var = -1, within_var = -1;
  // pcre: the expression and its PCRE2 options (bits of PCRE2_*), relative (R), and
  // whether it is anchored at the previous match (Suricata's R semantics: searched from the
  // previous match's end).
  std::string pcre;
  uint32_t pcre_opts = 0;
  bool relative = false;
  // isdataat: N [,relative], negated (!N); bsize / dsize / urilen: [lo, hi] with op.
  int32_t value = 0;
  uint32_t lo = 0, hi = 0;
  // byte_test / byte_jump / byte_extract
  SigByteRead read;
  char op = '=';              // byte_test: < > = ! & ^ plus 'l' (<=) 'g' (>=)
  bool op_negated = false;
  uint64_t cmp = 0;
  int8_t cmp_var = -1;
  int8_t var = -1;            // byte_extract: the variable it sets
  int32_t multiplier = 1;     // byte_jump / byte_extract
  int32_t post_offset = 0;    // byte_jump
  bool from_beginning = false, from_end = false, align = false;
  bool operator==(const SigItem&) const = default;
};

// Transforms applied to a sticky buffer before its items (in the order written).
enum class SigTransform : uint8_t { kToLowercase = 0, kDotPrefix, kStripWhitespace, kCompressWhitespace, kUrlDecode };

struct SigBufferMatch {
  SigBuffer buffer = SigBuffer::kPayload;
  std::vector<SigTransform> transforms;
  std::vector<SigItem> items;
  bool operator==(const SigBufferMatch&) const = default;
};

struct SigFlowbit {
  enum Op : uint8_t { kSet, kIsSet, kIsNotSet, kUnset, kToggle, kNoAlert };
  Op op = kSet;
  std::vector<std::string> names;  // isset a|b (any), isset a&b (all): `all`
  bool all = false;
  bool operator==(const SigFlowbit&) const = default;
};

struct SigThreshold {
  enum Type : uint8_t { kNone, kLimit, kThreshold, kBoth, kDetectionFilter };
  Type type = kNone;
  bool by_dst = false;        // by_src otherwise (by_rule / by_both: refused)
  uint32_t count = 0, seconds = 0;
  bool operator==(const SigThreshold&) const = default;
};

struct Signature {
  // identity and meta
  uint32_t sid = 0, gid = 1, rev = 0;
  std::string msg, classtype, source;  // source: the file or rule set it came from
  uint32_t line = 0;                   // its first line there
  int priority = 0;                    // 0: from classtype (classification.config), else 3
  std::vector<std::string> references, metadata;
  std::string target;                  // "src_ip" / "dest_ip" / ""
  // header
  SigAction action = SigAction::kAlert;
  SigProto proto = SigProto::kIp;
  SigAddrSet src, dst;
  SigPortSet sport, dport;
  bool bidirectional = false;          // <>
  // flow:
  bool to_server = false, to_client = false, established = false, not_established = false;
  bool stateless = false, only_stream = false, no_stream = false;
  // packet conditions
  bool has_dsize = false;
  char dsize_op = '=';                 // '=' (lo..hi inclusive), '<', '>', '!'
  uint32_t dsize_lo = 0, dsize_hi = 0;
  std::vector<SigBufferMatch> buffers;  // in rule order; one entry per buffer switch
  std::vector<SigFlowbit> flowbits;
  SigThreshold threshold;
  bool noalert = false;
  uint8_t nvars = 0;                   // byte_extract variables
  std::string text;                    // the rule as written (one line)
  bool operator==(const Signature&) const = default;
};

// A rule that was not accepted: where and why.
struct SigRefusal {
  uint32_t sid = 0;   // 0 when the sid itself could not be read
  std::string source;
  uint32_t line = 0;
  std::string reason;
};

// Address and port variables ($HOME_NET, $HTTP_PORTS, ...): name without '$' -> value.
// Missing ones take Suricata's defaults (suricata.yaml), see sigDefaultVars().
struct SigVars {
  std::vector<std::pair<std::string, std::string>> addresses, ports;
  bool operator==(const SigVars&) const = default;
};

// A rule file or inline rule set: its name (in refusals and events) and text.
struct SigSource {
  std::string name, text;
  bool operator==(const SigSource&) const = default;
};

// dpi.signatures of the configuration.
struct SigModel {
  std::vector<SigSource> sources;
  SigVars vars;                        // over Suricata's defaults
  std::string classification_name, classification_text;  // empty: none
  // HTTP bodies (http.request_body, http.response_body, file.data): the first
  // body_limit_bytes of each body (decoded), in a pool of body_buffers_per_worker buffers.
  uint32_t body_limit_bytes = 65536;
  uint32_t body_buffers_per_worker = 256;
  bool operator==(const SigModel&) const = default;
};

}  // namespace dpu::rules
