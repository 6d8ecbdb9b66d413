#include "dataplane/normalize/http.h"

#include <htp/htp.h>
#include <openssl/evp.h>

#include <algorithm>
#include <atomic>
#include <strings.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace dpu::dp {

const char* httpCounterName(int c) {
  switch (c) {
    case kHttpFlows: return "flows";
    case kHttpTransactions: return "transactions";
    case kHttpFiles: return "files";
    case kHttpFileBytes: return "file_bytes";
    case kHttpFilesTruncated: return "files_truncated";
    case kHttpDecodeErrors: return "decode_errors";
    case kHttpBombs: return "bombs_stopped";
    case kHttpLayerLimit: return "layer_limit";
    case kHttpNoSlot: return "no_slot";
    case kHttpNotHttp: return "not_http";
    case kHttpHeld: return "held";
    case kHttpHoldReleased: return "hold_released";
    case kHttpHoldDropped: return "hold_dropped";
    case kHttpHoldTimeouts: return "hold_timeouts";
    case kHttpHoldExhausted: return "hold_exhausted";
    case kHttpHoldDuplicates: return "hold_duplicates";
    case kHttpSigBodies: return "sig_bodies";
    case kHttpSigNoBodyBuffer: return "sig_no_body_buffer";
    case kHttpSigBodyCut: return "sig_body_cut";
    default: return "unknown";
  }
}

namespace {

using Slot = HttpRuntime::Slot;

// The slot whose bytes libhtp is parsing on this thread (multipart file data reaches a hook
// that is not told its transaction).
thread_local Slot* g_feeding = nullptr;

Slot* slotOf(const htp_tx_t* tx) {
  return tx == nullptr || tx->connp == nullptr
             ? nullptr
             : static_cast<Slot*>(htp_connp_get_user_data(tx->connp));
}

void copyStr(char* dst, size_t cap, const bstr* b) {
  dst[0] = 0;
  if (b == nullptr) return;
  size_t n = bstr_len(b);
  if (n >= cap) n = cap - 1;
  std::memcpy(dst, bstr_ptr(b), n);
  dst[n] = 0;
}

void copyMem(char* dst, size_t cap, const unsigned char* p, size_t n) {
  if (n >= cap) n = cap - 1;
  std::memcpy(dst, p, n);
  dst[n] = 0;
}

// The file name a body carries: Content-Disposition's filename= (of the response for
// downloads, of the request for uploads), else the last segment of the URL path.
void fileName(const htp_tx_t* tx, int dir, char* out, size_t cap) {
  out[0] = 0;
  htp_table_t* h = dir == 1 ? tx->response_headers : tx->request_headers;
  const htp_header_t* cd = h != nullptr ? static_cast<const htp_header_t*>(
                                              htp_table_get_c(h, "content-disposition"))
                                        : nullptr;
  if (cd != nullptr && cd->value != nullptr) {
    const unsigned char* v = bstr_ptr(cd->value);
    const size_t n = bstr_len(cd->value);
    for (size_t k = 0; k + 9 <= n; ++k) {
      if (strncasecmp(reinterpret_cast<const char*>(v + k), "filename=", 9) != 0) continue;
      size_t b = k + 9, e = b;
      if (b < n && v[b] == '"') {
        e = ++b;
        while (e < n && v[e] != '"') ++e;
      } else {
        while (e < n && v[e] != ';' && v[e] != ' ') ++e;
      }
      copyMem(out, cap, v + b, e - b);
      return;
    }
  }
  const bstr* path = tx->parsed_uri != nullptr ? tx->parsed_uri->path : nullptr;
  if (path == nullptr) return;
  const unsigned char* p = bstr_ptr(path);
  size_t n = bstr_len(path), s = n;
  while (s > 0 && p[s - 1] != '/') --s;
  copyMem(out, cap, p + s, n - s);
}

// Transaction fields (what http / fileinfo events and alerts carry).
void fillTx(const Slot& s, const htp_tx_t* tx, HttpEventInfo& i) {
  i.present = true;
  i.tx_id = uint32_t(tx->index);
  i.status = tx->response_status_number > 0 ? uint16_t(tx->response_status_number) : 0;
  copyStr(i.method, sizeof(i.method), tx->request_method);
  copyStr(i.host, sizeof(i.host), tx->request_hostname);
  copyStr(i.url, sizeof(i.url), tx->request_uri);
  (void)s;
}

void openFile(Slot& s, htp_tx_t* tx, int dir) {
  HttpFile& f = s.file[dir];
  const DpiRuntime& dpi = s.rt->dpi();
  f.dir = DpiDir{};
  f.dir.rt_id = dpi.id();
  f.dir.next_seq = 0;
  // Offset 0 is the file's first byte; rules reading filesize wait for the final size.
  f.dir.flags = DpiDir::kSeqKnown | DpiDir::kMaskFile | DpiDir::kMaskSizePending;
  EVP_DigestInit_ex(f.md, EVP_sha256(), nullptr);
  f.info = HttpEventInfo{};
  fillTx(s, tx, f.info);
  f.info.has_file = true;
  f.info.file_dir = uint8_t(dir);
  copyStr(f.info.content_type, sizeof(f.info.content_type),
          dir == 1 ? tx->response_content_type : tx->request_content_type);
  fileName(tx, dir, f.info.filename, sizeof(f.info.filename));
  f.part = nullptr;
  f.cut = false;
  f.until_close = dir == 1 && tx->response_transfer_coding == HTP_CODING_IDENTITY &&
                  tx->response_content_length < 0;
  f.open = true;
  s.counters[kHttpFiles]++;
}

void fileData(Slot& s, int dir, const unsigned char* p, size_t n) {
  HttpFile& f = s.file[dir];
  EVP_DigestUpdate(f.md, p, n);
  s.sink->fileBytes(f.info, p, n);
  DpiOutcome o;
  if (!(f.dir.flags & DpiDir::kDone))
    DpiInspector::tcp(s.rt->dpi(), s.worker, f.dir, p, uint32_t(n), uint32_t(f.info.size), 0, o);
  f.info.size += n;
  s.counters[kHttpFileBytes] += n;
  s.sink->fileScanned(o, f.info);
}

// The file's end: its final size known, the rules reading filesize and the end-of-data
// matches evaluated, then the fileinfo.
void closeFile(Slot& s, int dir, bool truncated) {
  HttpFile& f = s.file[dir];
  if (!f.open) return;
  f.open = false;
  f.dir.flags &= uint8_t(~DpiDir::kMaskSizePending);
  DpiOutcome o;
  DpiInspector::end(s.rt->dpi(), s.worker, f.dir, o);
  unsigned len = 0;
  EVP_DigestFinal_ex(f.md, f.info.sha256, &len);
  f.info.sha256_valid = len == 32;
  truncated = truncated || f.cut;
  f.info.state = truncated ? HttpFileState::kTruncated : HttpFileState::kClosed;
  if (truncated) s.counters[kHttpFilesTruncated]++;
  if (o.nfired) s.sink->fileScanned(o, f.info);
  s.sink->fileClosed(f.info);
}

void sigBody(Slot& s, htp_tx_t* tx, int dir, const uint8_t* p, size_t n);
int bodyData(htp_tx_data_t* d, int dir) {
  Slot* s = slotOf(d->tx);
  if (s == nullptr || s->sink == nullptr || d->data == nullptr || d->len == 0) return HTP_OK;
  sigBody(*s, d->tx, dir, d->data, d->len);  // --- signatures --- (multipart: the raw body)
  // A multipart upload's files come through the file data hook instead.
  if (dir == 0 && d->tx->request_mpartp != nullptr) return HTP_OK;
  if (!s->file[dir].open) openFile(*s, d->tx, dir);
  fileData(*s, dir, d->data, d->len);
  return HTP_OK;
}
int cbRequestBody(htp_tx_data_t* d) { return bodyData(d, 0); }
int cbResponseBody(htp_tx_data_t* d) { return bodyData(d, 1); }

// multipart/form-data parts with a file name (libhtp's multipart parser): each its own file.
int cbRequestFile(htp_file_data_t* fd) {
  // PUT bodies reach this hook too: they are files through the body data hook already.
  if (fd->file == nullptr || fd->file->source != HTP_FILE_MULTIPART) return HTP_OK;
  // The part's transaction: the connection parser's current inbound one.
  htp_tx_t* tx = nullptr;
  Slot* s = nullptr;
  // htp_file_t does not point to its transaction: the slot being fed, its current request.
  s = g_feeding;
  if (s == nullptr || s->sink == nullptr) return HTP_OK;
  tx = htp_connp_get_in_tx(s->connp);
  if (tx == nullptr) return HTP_OK;
  HttpFile& f = s->file[0];
  if (fd->data == nullptr || fd->len == 0) {  // the part's end
    if (f.open && fd->data == nullptr && f.part == fd->file) closeFile(*s, 0, false);
    return HTP_OK;
  }
  if (f.open && f.part != fd->file) closeFile(*s, 0, false);  // the next file part
  if (!f.open) {
    openFile(*s, tx, 0);
    f.part = fd->file;
    if (fd->file->filename != nullptr)
      copyStr(f.info.filename, sizeof(f.info.filename), fd->file->filename);
  }
  fileData(*s, 0, fd->data, fd->len);
  return HTP_OK;
}

int cbRequestLine(htp_tx_t* tx) {
  if (Slot* s = slotOf(tx); s != nullptr && s->counters != nullptr) {
    s->counters[kHttpTransactions]++;
    s->txs++;
  }
  return HTP_OK;
}
void sigBodyEnd(Slot& s, htp_tx_t* tx, int dir);
int cbRequestComplete(htp_tx_t* tx) {
  if (Slot* s = slotOf(tx); s != nullptr && s->sink != nullptr) {
    closeFile(*s, 0, s->closing);
    sigBodyEnd(*s, tx, 0);
  }
  return HTP_OK;
}
int cbResponseComplete(htp_tx_t* tx) {
  if (Slot* s = slotOf(tx); s != nullptr && s->sink != nullptr) {
    closeFile(*s, 1, s->closing && !s->file[1].until_close);
    sigBodyEnd(*s, tx, 1);
  }
  return HTP_OK;
}
// --- signatures --- the header-level buffers of one side of `tx` into `in`: single
// fields point into libhtp's strings, the assembled ones (normalized URI, headers as
// "Name: value\r\n", header names, start line + headers) into the worker's buffers (cut at
// their size).
struct SigAsm {
  std::vector<uint8_t>& b;
  size_t n = 0;
  void add(const void* p, size_t len) {
    len = std::min(len, b.size() - n);
    std::memcpy(b.data() + n, p, len);
    n += len;
  }
  void add(const bstr* x) {
    if (x != nullptr) add(bstr_ptr(x), bstr_len(x));
  }
  void add(const char* z) { add(z, std::strlen(z)); }
};
void sigField(rules::SigInput& in, rules::SigBuffer b, const bstr* x) {
  if (x != nullptr) in.set(b, bstr_ptr(x), uint32_t(bstr_len(x)));
}
const bstr* headerValue(htp_table_t* t, const char* name) {
  if (t == nullptr) return nullptr;
  htp_header_t* h = static_cast<htp_header_t*>(htp_table_get_c(t, name));
  return h != nullptr ? h->value : nullptr;
}
void sigHeaders(htp_table_t* t, const bstr* line, rules::SigInput& in, std::vector<uint8_t>& hb,
                std::vector<uint8_t>& nb, std::vector<uint8_t>& sb) {
  SigAsm h{hb}, n{nb}, st{sb};
  st.add(line);
  st.add("\r\n");
  n.add("\r\n");
  const size_t count = t != nullptr ? htp_table_size(t) : 0;
  for (size_t k = 0; k < count; ++k) {
    bstr* key = nullptr;
    htp_header_t* hd = static_cast<htp_header_t*>(htp_table_get_index(t, k, &key));
    if (hd == nullptr) continue;
    for (SigAsm* a : {&h, &st}) {
      a->add(hd->name);
      a->add(": ");
      a->add(hd->value);
      a->add("\r\n");
    }
    n.add(hd->name);
    n.add("\r\n");
  }
  st.add("\r\n");
  n.add("\r\n");
  in.set(rules::SigBuffer::kHttpHeader, hb.data(), uint32_t(h.n));
  in.set(rules::SigBuffer::kHttpHeaderRaw, hb.data(), uint32_t(h.n));
  in.set(rules::SigBuffer::kHttpHeaderNames, nb.data(), uint32_t(n.n));
  in.set(rules::SigBuffer::kHttpStart, sb.data(), uint32_t(st.n));
}
// `body`: a body stage (the body's first bytes in body[0, body_len)), else the headers'.
int sigTx(htp_tx_t* tx, int dir, const uint8_t* body = nullptr, uint32_t body_len = 0) {
  Slot* s = slotOf(tx);
  if (s == nullptr || s->sink == nullptr || !s->sink->wantsHeaders()) return HTP_OK;
  auto& buf = s->rt->worker(s->worker).sig_buf;
  rules::SigInput in;
  if (body != nullptr) {
    in.stage = dir == 0 ? rules::SigStage::kRequestBody : rules::SigStage::kResponseBody;
    in.set(dir == 0 ? rules::SigBuffer::kHttpRequestBody : rules::SigBuffer::kHttpResponseBody, body, body_len);
    in.set(rules::SigBuffer::kFileData, body, body_len);
  } else {
    in.stage = dir == 0 ? rules::SigStage::kRequest : rules::SigStage::kResponse;
  }
  in.app = rules::SigInput::kAppHttp;
  // The request's own buffers (a response rule may name them: the same transaction).
  sigField(in, rules::SigBuffer::kHttpMethod, tx->request_method);
  sigField(in, rules::SigBuffer::kHttpUriRaw, tx->request_uri);
  sigField(in, rules::SigBuffer::kHttpRequestLine, tx->request_line);
  sigField(in, rules::SigBuffer::kHttpHost, tx->request_hostname);
  sigField(in, rules::SigBuffer::kHttpHostRaw, headerValue(tx->request_headers, "host"));
  sigField(in, rules::SigBuffer::kHttpUserAgent, headerValue(tx->request_headers, "user-agent"));
  sigField(in, rules::SigBuffer::kHttpReferer, headerValue(tx->request_headers, "referer"));
  sigField(in, rules::SigBuffer::kHttpAccept, headerValue(tx->request_headers, "accept"));
  sigField(in, rules::SigBuffer::kHttpAcceptLang, headerValue(tx->request_headers, "accept-language"));
  sigField(in, rules::SigBuffer::kHttpAcceptEnc, headerValue(tx->request_headers, "accept-encoding"));
  {
    // http.uri: the normalized path (libhtp's decoding for the personality) and query.
    SigAsm u{buf[0]};
    if (tx->parsed_uri != nullptr && tx->parsed_uri->path != nullptr) {
      u.add(tx->parsed_uri->path);
      if (tx->parsed_uri->query != nullptr) {
        u.add("?");
        u.add(tx->parsed_uri->query);
      }
      in.set(rules::SigBuffer::kHttpUri, buf[0].data(), uint32_t(u.n));
    } else {
      sigField(in, rules::SigBuffer::kHttpUri, tx->request_uri);
    }
  }
  htp_table_t* t = dir == 0 ? tx->request_headers : tx->response_headers;
  sigHeaders(t, dir == 0 ? tx->request_line : tx->response_line, in, buf[1], buf[2], buf[3]);
  sigField(in, rules::SigBuffer::kHttpProtocol, dir == 0 ? tx->request_protocol : tx->response_protocol);
  sigField(in, rules::SigBuffer::kHttpCookie, headerValue(t, dir == 0 ? "cookie" : "set-cookie"));
  sigField(in, rules::SigBuffer::kHttpContentType, headerValue(t, "content-type"));
  sigField(in, rules::SigBuffer::kHttpContentLen, headerValue(t, "content-length"));
  sigField(in, rules::SigBuffer::kHttpConnection, headerValue(t, "connection"));
  if (dir == 1) {
    sigField(in, rules::SigBuffer::kHttpStatCode, tx->response_status);
    sigField(in, rules::SigBuffer::kHttpStatMsg, tx->response_message);
    sigField(in, rules::SigBuffer::kHttpResponseLine, tx->response_line);
    sigField(in, rules::SigBuffer::kHttpLocation, headerValue(t, "location"));
    sigField(in, rules::SigBuffer::kHttpServer, headerValue(t, "server"));
  }
  s->sink->headers(in);
  return HTP_OK;
}
int cbRequestHeaders(htp_tx_t* tx) { return sigTx(tx, 0); }
int cbResponseHeaders(htp_tx_t* tx) { return sigTx(tx, 1); }

// --- signatures --- bodies: the first body_limit bytes of each decoded body in a pool
// buffer, evaluated when the limit is reached or the body completes (sigBodyEnd).
const rules::CompiledSignatures* sigsOf(const Slot& s) {
  const auto& d = s.rt->dpi().dpi();
  return d.sigs.get();
}
void sigBodyRelease(Slot& s, int dir) {
  if (s.sig_body[dir] != Slot::kNoBody) s.rt->worker(s.worker).sig_body_free.push_back(s.sig_body[dir]);
  s.sig_body[dir] = Slot::kNoBody;
  s.sig_body_len[dir] = 0;
}
void sigBody(Slot& s, htp_tx_t* tx, int dir, const uint8_t* p, size_t n) {
  const rules::CompiledSignatures* sg = sigsOf(s);
  if (sg == nullptr || !sg->wantsBodies(dir) || s.sig_body_done[dir] || !s.sink->wantsHeaders()) return;
  HttpRuntime::PerWorker& w = s.rt->worker(s.worker);
  if (s.sig_body[dir] == Slot::kNoBody) {
    if (w.sig_body_free.empty()) {
      s.sig_body_done[dir] = true;  // not inspected: the fail policy decides
      if (s.counters != nullptr) s.counters[kHttpSigNoBodyBuffer]++;
      s.sink->noBodyBuffer();
      return;
    }
    s.sig_body[dir] = w.sig_body_free.back();
    w.sig_body_free.pop_back();
    if (s.counters != nullptr) s.counters[kHttpSigBodies]++;
  }
  uint8_t* b = w.sig_bodies.get() + size_t(s.sig_body[dir]) * sg->body_limit;
  const size_t room = sg->body_limit - s.sig_body_len[dir];
  const size_t take = std::min(room, n);
  std::memcpy(b + s.sig_body_len[dir], p, take);
  s.sig_body_len[dir] += uint32_t(take);
  if (s.sig_body_len[dir] == sg->body_limit) {  // the limit: inspected on these bytes
    if (take < n && s.counters != nullptr) s.counters[kHttpSigBodyCut]++;
    sigTx(tx, dir, b, s.sig_body_len[dir]);
    s.sig_body_done[dir] = true;
    sigBodyRelease(s, dir);
  }
}
// The body's end (its transaction side completed): evaluated on what was kept; ready for the
// next transaction's body.
void sigBodyEnd(Slot& s, htp_tx_t* tx, int dir) {
  if (s.sig_body[dir] != Slot::kNoBody && s.sink != nullptr) {
    const rules::CompiledSignatures* sg = sigsOf(s);
    uint8_t* b = s.rt->worker(s.worker).sig_bodies.get() + size_t(s.sig_body[dir]) * sg->body_limit;
    sigTx(tx, dir, b, s.sig_body_len[dir]);
  }
  sigBodyRelease(s, dir);
  s.sig_body_done[dir] = false;
}

int cbTxComplete(htp_tx_t* tx) {
  Slot* s = slotOf(tx);
  if (s == nullptr || s->sink == nullptr || !s->rt->settings().http_events) return HTP_OK;
  HttpEventInfo i{};
  fillTx(*s, tx, i);
  copyStr(i.content_type, sizeof(i.content_type), tx->response_content_type);
  s->sink->transaction(i);
  return HTP_OK;
}
int cbLog(htp_log_t* l) {
  Slot* s = l->connp != nullptr ? static_cast<Slot*>(htp_connp_get_user_data(l->connp)) : nullptr;
  if (s == nullptr || s->counters == nullptr || l->msg == nullptr) return HTP_OK;
  if (strcasestr(l->msg, "bomb") != nullptr) {
    s->counters[kHttpBombs]++;
    for (HttpFile& f : s->file)  // the body being decoded stops here: not the whole file
      if (f.open) f.cut = true;
  }
  else if (strcasestr(l->msg, "layer") != nullptr) s->counters[kHttpLayerLimit]++;
  else if (l->level <= HTP_LOG_ERROR) s->counters[kHttpDecodeErrors]++;
  return HTP_OK;
}

}  // namespace

HttpSettings httpSettingsOf(const rules::DpiHttpModel& hm, bool fail_closed) {
  HttpSettings hs;
  hs.ports = hm.ports;
  hs.detect_on_other_ports = hm.detect_on_other_ports;
  hs.personality = hm.personality;
  hs.flow_slots_per_worker = hm.flow_slots_per_worker;
  hs.decompress_layers = hm.decompress_layers;
  hs.bomb_limit_bytes = hm.bomb_limit_bytes;
  hs.bomb_time_limit_us = hm.bomb_time_limit_us;
  hs.http_events = hm.http_events;
  hs.fileinfo_events = hm.fileinfo_events;
  hs.fail_closed = fail_closed;
  hs.hold = hm.hold_last_packet;
  hs.hold_timeout_ms = hm.hold_timeout_ms;
  return hs;
}

std::vector<HttpScope> httpScopesOf(const rules::CompiledDpi& dpi,
                                    const std::vector<rules::DpiScope>& scopes) {
  std::vector<HttpScope> scope_of_ns;
  for (const rules::DpiRule& r : dpi.rules) {
    if (r.ns >= scope_of_ns.size()) scope_of_ns.resize(r.ns + 1, HttpScope::kDefault);
    for (const rules::DpiScope& sc : scopes)
      if (sc.source == r.source) scope_of_ns[r.ns] = static_cast<HttpScope>(sc.inspect);
  }
  return scope_of_ns;
}

absl::StatusOr<std::shared_ptr<HttpRuntime>> HttpRuntime::create(
    const HttpSettings& s, std::shared_ptr<const DpiRuntime> dpi, uint32_t workers,
    const std::vector<HttpScope>& scope_of_ns) {
  static std::atomic<uint32_t> next_id{1};
  std::shared_ptr<HttpRuntime> rt(new HttpRuntime());
  rt->s_ = s;
  rt->scopes_ = scope_of_ns;
  rt->dpi_ = std::move(dpi);
  rt->id_ = next_id.fetch_add(1);
  if (rt->id_ == 0) rt->id_ = next_id.fetch_add(1);
  rt->port_bits_.assign(65536 / 8, 0);
  for (uint16_t p : s.ports) rt->port_bits_[p >> 3] |= uint8_t(1u << (p & 7));
  // Report masks: the raw stream of an HTTP flow reports the rule sets scoped to the stream
  // (or both); a file those scoped to files (default) or both; a file whose size is not
  // final yet none reading filesize and none whose truth can still turn false as bytes are
  // appended (`not $a`, `#a == 2`: CompiledDpi::unstableRules), so that a file's report is
  // libyara's on the whole file.
  const rules::CompiledDpi& d = rt->dpi_->dpi();
  const size_t nb = (d.rules.size() + 7) / 8;
  std::vector<uint8_t> ms(nb, 0), mf(nb, 0), mp(nb, 0);
  // Rules whose condition reads filesize (directly or through a rule they reference); and
  // rules with a string (theirs or a referenced rule's) that can match at the end of the
  // data: both can become true at a file's end only (hold-back).
  std::vector<uint8_t> string_eod(d.strings.size(), 0);
  for (const rules::DpiPattern& p : d.patterns)
    if (p.eod && p.string_id < string_eod.size()) string_eod[p.string_id] = 1;
  auto rule_eod = [&](size_t r) {
    const rules::DpiRule& dr = d.rules[r];
    for (uint32_t k = dr.first_string; k < dr.first_string + dr.num_strings && k < string_eod.size(); ++k)
      if (string_eod[k]) return true;
    return false;
  };
  std::vector<uint8_t> reads(d.rules.size(), 0), at_end(d.rules.size(), 0);
  for (size_t r = 0; r < d.rules.size(); ++r) {
    std::vector<int32_t> todo{d.rules[r].cond};
    std::vector<uint8_t> seen_rule(d.rules.size(), 0);
    at_end[r] = rule_eod(r);
    while (!todo.empty() && !reads[r]) {
      const int32_t n = todo.back();
      todo.pop_back();
      if (n < 0 || size_t(n) >= d.nodes.size()) continue;
      const rules::CondNode& c = d.nodes[size_t(n)];
      // Node children as CompiledDpi's own walk (condInputs) reads them: string and
      // predicate operands are not nodes.
      switch (c.op) {
        case rules::CondOp::kFilesize: reads[r] = 1; break;
        case rules::CondOp::kRule:
          if (c.a >= 0 && size_t(c.a) < d.rules.size() && !seen_rule[size_t(c.a)]) {
            seen_rule[size_t(c.a)] = 1;
            todo.push_back(d.rules[size_t(c.a)].cond);
            if (rule_eod(size_t(c.a))) at_end[r] = 1;
          }
          break;
        case rules::CondOp::kConst:
        case rules::CondOp::kFound:
        case rules::CondOp::kCount:
        case rules::CondOp::kOffset:
        case rules::CondOp::kLength:
        case rules::CondOp::kPred:
        case rules::CondOp::kUintEq: break;
        case rules::CondOp::kOf:
        case rules::CondOp::kNot:
        case rules::CondOp::kNeg:
        case rules::CondOp::kBitNot: todo.push_back(c.a); break;
        default:  // binary operators
          todo.push_back(c.a);
          todo.push_back(c.b);
      }
    }
  }
  const std::vector<uint8_t> unstable = d.unstableRules();
  for (size_t r = 0; r < d.rules.size(); ++r) {
    const HttpScope sc = d.rules[r].ns < scope_of_ns.size() ? scope_of_ns[d.rules[r].ns]
                                                             : HttpScope::kDefault;
    const uint8_t bit = uint8_t(1u << (r & 7));
    const bool files = sc != HttpScope::kStream, stream = sc == HttpScope::kStream || sc == HttpScope::kBoth;
    if (!stream) ms[r >> 3] |= bit;
    if (!files) mf[r >> 3] |= bit;
    if (!files || reads[r] || unstable[r]) mp[r >> 3] |= bit;
    if (s.hold && files && (reads[r] || at_end[r] || unstable[r]) && d.rules[r].action != rules::DpiAction::kAlert)
      rt->holds_files_ = true;
  }
  rt->dpi_->setReportMasks(std::move(ms), std::move(mf), std::move(mp));

  rt->cfg_ = htp_config_create();
  if (rt->cfg_ == nullptr) return absl::ResourceExhaustedError("http: cannot create the libhtp configuration");
  htp_cfg_t* cfg = rt->cfg_;
  if (htp_config_set_server_personality(cfg, static_cast<htp_server_personality_t>(s.personality)) != HTP_OK)
    return absl::InvalidArgumentError(absl::StrCat("http: libhtp does not know personality ", s.personality));
  htp_config_set_log_level(cfg, HTP_LOG_WARNING);
  htp_config_set_tx_auto_destroy(cfg, 1);
  htp_config_set_response_decompression(cfg, 1);
  htp_config_set_request_decompression(cfg, 1);
  htp_config_set_response_decompression_layer_limit(cfg, int(s.decompress_layers));
  htp_config_set_lzma_layers(cfg, int(s.decompress_layers));
  htp_config_set_compression_bomb_limit(cfg, size_t(s.bomb_limit_bytes));
  htp_config_set_compression_time_limit(cfg, size_t(s.bomb_time_limit_us));
  htp_config_register_multipart_parser(cfg);
  htp_config_register_request_line(cfg, cbRequestLine);
  htp_config_register_request_headers(cfg, cbRequestHeaders);    // --- signatures ---
  htp_config_register_response_headers(cfg, cbResponseHeaders);
  htp_config_register_request_body_data(cfg, cbRequestBody);
  htp_config_register_response_body_data(cfg, cbResponseBody);
  htp_config_register_request_file_data(cfg, cbRequestFile);
  htp_config_register_request_complete(cfg, cbRequestComplete);
  htp_config_register_response_complete(cfg, cbResponseComplete);
  htp_config_register_transaction_complete(cfg, cbTxComplete);
  htp_config_register_log(cfg, cbLog);

  rt->workers_.resize(workers);
  for (PerWorker& w : rt->workers_) {
    for (auto& b : w.sig_buf) b.resize(PerWorker::kHeaderBufferBytes);
    if (const rules::CompiledSignatures* sg = rt->dpi_->dpi().sigs.get();
        sg != nullptr && (sg->wantsBodies(0) || sg->wantsBodies(1))) {
      w.sig_bodies.reset(new uint8_t[size_t(sg->body_buffers) * sg->body_limit]);
      w.sig_body_free.reserve(sg->body_buffers);
      for (uint32_t k = sg->body_buffers; k > 0; --k) w.sig_body_free.push_back(k - 1);
    }
    w.slots.resize(s.flow_slots_per_worker);
    w.free.reserve(s.flow_slots_per_worker);
    for (uint32_t k = s.flow_slots_per_worker; k > 0; --k) w.free.push_back(k - 1);
    for (Slot& sl : w.slots) {
      for (HttpFile& f : sl.file) {
        f.md = EVP_MD_CTX_new();
        if (f.md == nullptr) return absl::ResourceExhaustedError("http: cannot allocate SHA-256 contexts");
      }
    }
  }
  return rt;
}

HttpRuntime::~HttpRuntime() {
  for (PerWorker& w : workers_) {
    for (Slot& sl : w.slots) {
      if (sl.connp != nullptr) {
        sl.sink = nullptr;  // no callback may reach a worker any more
        htp_connp_destroy_all(sl.connp);
      }
      for (HttpFile& f : sl.file)
        if (f.md != nullptr) EVP_MD_CTX_free(f.md);
    }
  }
  if (cfg_ != nullptr) htp_config_destroy(cfg_);
}

bool HttpRuntime::isHttpPort(uint16_t port) const {
  return (port_bits_[port >> 3] >> (port & 7)) & 1u;
}

bool HttpInspector::looksLikeRequest(const uint8_t* p, uint32_t n) {
  static const char* const kMethods[] = {"GET ",     "POST ",  "HEAD ",  "PUT ",     "DELETE ",
                                         "OPTIONS ", "PATCH ", "TRACE ", "CONNECT ", "PROPFIND "};
  for (const char* m : kMethods) {
    const size_t k = std::strlen(m);
    if (n >= k && std::memcmp(p, m, k) == 0) return true;
  }
  return false;
}

bool HttpInspector::open(const HttpRuntime& rt, uint32_t worker, HttpFlow& f) {
  HttpRuntime::PerWorker& w = rt.worker(worker);
  if (w.free.empty()) {
    w.counters[kHttpNoSlot]++;
    return false;
  }
  htp_connp_t* c = htp_connp_create(rt.cfg());  // flow-level allocation (libhtp)
  if (c == nullptr) {
    w.counters[kHttpNoSlot]++;
    return false;
  }
  const uint32_t k = w.free.back();
  w.free.pop_back();
  Slot& s = w.slots[k];
  s.connp = c;
  s.rt = &rt;
  s.worker = worker;
  s.counters = w.counters;
  s.txs = 0;
  for (HttpFile& fl : s.file) fl.open = false;
  htp_connp_set_user_data(c, &s);
  htp_connp_open(c, nullptr, 0, nullptr, 0, nullptr);
  f.slot = k;
  f.rt_id = rt.id();
  f.state = HttpFlow::kHttp;
  w.counters[kHttpFlows]++;
  return true;
}

bool HttpInspector::data(const HttpRuntime& rt, uint32_t worker, HttpFlow& f, bool to_server,
                         const uint8_t* p, uint32_t n, uint64_t ts_ns, HttpSink& sink) {
  if (f.slot == HttpFlow::kNone || f.rt_id != rt.id()) return false;
  Slot& s = rt.worker(worker).slots[f.slot];
  htp_time_t ts;
  ts.tv_sec = long(ts_ns / 1000000000u);
  ts.tv_usec = long((ts_ns % 1000000000u) / 1000u);
  s.sink = &sink;
  g_feeding = &s;
  const int rc = to_server ? htp_connp_req_data(s.connp, &ts, p, n)
                           : htp_connp_res_data(s.connp, &ts, p, n);
  g_feeding = nullptr;
  const bool ok = rc == HTP_STREAM_DATA || rc == HTP_STREAM_OPEN || rc == HTP_STREAM_CLOSED;
  if (!ok) {
    // An error (counted through the log hook when libhtp logged it), a tunnel (CONNECT) or
    // data libhtp will not read: the connection is not parsed any more.
    if (rc == HTP_STREAM_ERROR) s.counters[kHttpDecodeErrors]++;
    end(rt, worker, f, sink);
    f.state = HttpFlow::kStopped;
    return false;
  }
  s.sink = nullptr;
  return true;
}

bool HttpInspector::fileOpen(const HttpRuntime& rt, uint32_t worker, const HttpFlow& f,
                             bool to_server) {
  if (f.state != HttpFlow::kHttp || f.slot == HttpFlow::kNone || f.rt_id != rt.id()) return false;
  return rt.worker(worker).slots[f.slot].file[to_server ? 0 : 1].open;
}

void HttpInspector::fin(const HttpRuntime& rt, uint32_t worker, HttpFlow& f, HttpSink& sink) {
  if (f.state != HttpFlow::kHttp) return;
  end(rt, worker, f, sink);
  f.state = HttpFlow::kClosed;
}

void HttpInspector::end(const HttpRuntime& rt, uint32_t worker, HttpFlow& f, HttpSink& sink) {
  if (f.slot == HttpFlow::kNone || f.rt_id != rt.id()) {
    forget(f);
    return;
  }
  HttpRuntime::PerWorker& w = rt.worker(worker);
  Slot& s = w.slots[f.slot];
  s.sink = &sink;
  // The connection's end completes a response delimited by it (no length, not chunked);
  // bodies still open after that are truncated.
  if (f.state == HttpFlow::kHttp) {
    g_feeding = &s;
    s.closing = true;
    const htp_time_t zero{};
    htp_connp_close(s.connp, &zero);
    s.closing = false;
    g_feeding = nullptr;
  }
  for (int dir = 0; dir < 2; ++dir) {
    closeFile(s, dir, true);
    sigBodyRelease(s, dir);  // a body cut by the flow's end: not evaluated (no packet at hand)
    s.sig_body_done[dir] = false;
  }
  s.sink = nullptr;
  htp_connp_set_user_data(s.connp, nullptr);  // no hook runs into the slot from here
  htp_connp_destroy_all(s.connp);
  s.connp = nullptr;
  w.free.push_back(f.slot);
  const uint8_t keep = f.state;
  forget(f);
  f.rt_id = rt.id();
  f.state = keep == HttpFlow::kHttp ? HttpFlow::kStopped : keep;
}

}  // namespace dpu::dp
