// What an event says about an HTTP transaction and the file (request or response
// body) it carries: `fileinfo` events, `http` events, and DPI alerts on a file
// (docs/http.md). Plain fixed-size data (part of the Event object); strings are cut to their
// buffer and NUL-terminated.
#pragma once

#include <cstdint>

namespace dpu::dp {

enum class HttpFileState : uint8_t { kOpen = 0, kClosed = 1, kTruncated = 2 };

// Counters (Counters::http; names: httpCounterName).
enum HttpCounter : int {
  kHttpFlows,          // flows parsed as HTTP
  kHttpTransactions,   // requests seen (request line parsed)
  kHttpFiles,          // bodies scanned as files
  kHttpFileBytes,      // decoded body bytes scanned
  kHttpFilesTruncated, // files cut by the flow's end or a parser error
  kHttpDecodeErrors,   // libhtp errors (parse, decompression)
  kHttpBombs,          // bodies stopped by libhtp's compression bomb limit
  kHttpLayerLimit,     // bodies with more content-encoding layers than decoded
  kHttpNoSlot,         // flows that found no free HTTP slot (fail policy)
  kHttpNotHttp,        // flows on other ports not detected as HTTP
  // Hold-back of a file's last packet (docs/http.md "Verdicts"). Every held packet ends
  // released, dropped or timed out: held = hold_released + hold_dropped + hold_timeouts +
  // the packets held now.
  kHttpHeld,           // packets held
  kHttpHoldReleased,   // released: the next packet of the direction, the file's end, flow end
  kHttpHoldDropped,    // dropped: the file's end (or the flow's) made a drop / reset rule true
  kHttpHoldTimeouts,   // released by hold_timeout_ms (the file's end did not come in time)
  kHttpHoldExhausted,  // packets that found no free hold slot (dpi fail policy)
  kHttpHoldDuplicates, // retransmissions of held bytes dropped while they are held
  // --- signatures --- bodies kept for body signatures; bodies that found no free buffer
  // (dpi fail policy); bodies longer than the limit (inspected on their first bytes).
  kHttpSigBodies,
  kHttpSigNoBodyBuffer,
  kHttpSigBodyCut,
  kHttpCounterCount
};
const char* httpCounterName(int c);

// Plain data (events are cleared with memset): value-initialize (HttpEventInfo{}).
struct HttpEventInfo {
  bool present;       // the event is about an HTTP transaction (and file)
  bool has_file;      // and one of its bodies
  uint8_t file_dir;       // 0: request body (upload), 1: response body (download)
  HttpFileState state;
  uint16_t status;        // response status (0: no response yet)
  uint32_t tx_id;         // transaction index in the connection (0 = first)
  uint64_t size;          // decoded bytes of the file so far (the final size once closed)
  bool sha256_valid;  // closed / truncated: sha256 of the decoded bytes
  uint8_t sha256[32];
  char method[16];
  char host[64];
  char url[192];
  char content_type[64];
  char filename[96];
};

}  // namespace dpu::dp
