#include "dataplane/stages/dpi/dpi_runtime.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace dpu::dp {

using rules::CompiledDpi;

absl::StatusOr<std::shared_ptr<DpiRuntime>> DpiRuntime::create(
    std::shared_ptr<const CompiledDpi> dpi, const DpiSettings& settings, uint32_t workers) {
  static std::atomic<uint32_t> next_id{1};
  std::shared_ptr<DpiRuntime> rt(new DpiRuntime());
  rt->dpi_ = std::move(dpi);
  rt->s_ = settings;
  rt->id_ = next_id.fetch_add(1);
  if (rt->id_ == 0) rt->id_ = next_id.fetch_add(1);  // 0 = "no runtime" in DpiDir
  const CompiledDpi& d = *rt->dpi_;
  // Compressed slots hold one compressed stream per shard (each ~130-200 B more on the
  // Yara-Rules set, bench/RESULTS.md "Incremental DPI compiles").
  if (rt->s_.compressed_slot_bytes == 0)
    rt->s_.compressed_slot_bytes = 512 + 192 * (d.shards.size() > 1 ? uint32_t(d.shards.size()) - 1 : 0);
  const DpiSettings& s = rt->s_;
  // Match state, then one "fired" bit per rule, rounded to 8 bytes.
  rt->ms_stride_ = (d.matchStateBytes() + (d.rules.size() + 7) / 8 + 7) & ~size_t(7);
  rt->workers_.resize(workers);
  const bool comp = s.stream_mode == rules::DpiStreamMode::kCompressed ||
                    (s.stream_mode == rules::DpiStreamMode::kAuto && rt->ms_stride_ <= 65535 &&
                     d.streamStateBytes() + rt->ms_stride_ > s.compressed_slot_bytes);
  rt->compressed_ = comp;
  // The slot header holds u16 lengths, match-state runs u16 offsets.
  if (comp && (s.compressed_slot_bytes < 8 || s.compressed_slot_bytes > 65536 || rt->ms_stride_ > 65535))
    return absl::InvalidArgumentError(absl::StrCat(
        "dpi: compressed streams need 8..65536-byte slots and a match state below 64 KiB (slot ",
        s.compressed_slot_bytes, " B, match state ", rt->ms_stride_, " B)"));
  const uint32_t nfull = comp ? s.full_streams_per_worker : s.streams_per_worker;
  const uint32_t K = uint32_t(d.shards.size());
  if (comp && s.compressed_slot_bytes < 2 + 2 * K + 4)
    return absl::InvalidArgumentError(absl::StrCat(
        "dpi: compressed slots of ", s.compressed_slot_bytes, " bytes cannot hold ", K,
        " shard streams"));
  for (PerWorker& w : rt->workers_) {
    if (K != 0) {
      if (hs_clone_scratch(d.scratch_proto, &w.scratch) != HS_SUCCESS)
        return absl::ResourceExhaustedError("dpi: cannot allocate Hyperscan scratch");
      w.streams.resize(size_t(nfull) * K, nullptr);
      for (uint32_t i = 0; i < nfull * K; ++i) {
        if (hs_open_stream(d.shards[i % K].db->db, 0, &w.streams[i]) != HS_SUCCESS)
          return absl::ResourceExhaustedError(absl::StrCat(
              "dpi: cannot allocate ", nfull, " Hyperscan streams of ",
              d.streamStateBytes(), " bytes"));
      }
      w.block_streams.resize(K, nullptr);
      if (comp) w.work.resize(K, nullptr);
      for (uint32_t k = 0; k < K; ++k)
        if (hs_open_stream(d.shards[k].db->db, 0, &w.block_streams[k]) != HS_SUCCESS ||
            (comp && hs_open_stream(d.shards[k].db->db, 0, &w.work[k]) != HS_SUCCESS))
          return absl::ResourceExhaustedError("dpi: cannot allocate a Hyperscan stream");
    }
    w.free_streams.reserve(nfull);
    for (uint32_t i = nfull; i > 0; --i) w.free_streams.push_back(i - 1);
    w.ms.reset(new uint8_t[size_t(nfull) * rt->ms_stride_]());
    if (comp) {
      w.compact_slots = s.streams_per_worker;
      w.cdata.reset(new uint8_t[size_t(w.compact_slots) * s.compressed_slot_bytes]());
      w.work_ms.reset(new uint8_t[rt->ms_stride_]());
      w.free_compact.reserve(w.compact_slots);
      for (uint32_t i = w.compact_slots; i > 0; --i) w.free_compact.push_back(i - 1);
    }
    if (d.sigs) {  // --- signatures ---
      auto sc = d.sigs->makeScratch();
      if (!sc.ok()) return sc.status();
      w.sig = std::move(*sc);
    }
    w.block_ms.reset(new uint8_t[rt->ms_stride_]());
    w.fired.reset(new uint32_t[d.rules.empty() ? 1 : d.rules.size()]);
    w.dirty.reset(new uint64_t[d.dirtyWords() + 1]());
    w.mask_tmp.reset(new uint8_t[(d.rules.size() + 7) / 8 + 1]());
    const size_t ob = s.ooo_buffer_bytes;
    w.ooo_data.reset(new uint8_t[size_t(s.ooo_slots_per_worker) * ob]);
    w.ooo_bits.reset(new uint8_t[size_t(s.ooo_slots_per_worker) * ((ob + 7) / 8)]());
    for (uint32_t i = s.ooo_slots_per_worker; i > 0; --i) w.free_ooo.push_back(i - 1);
    if (d.prefilter_window != 0) {
      const size_t W = d.prefilter_window;
      w.window_slots = s.prefilter_windows_per_worker;
      w.windows.reset(new uint8_t[size_t(w.window_slots) * W]);
      w.free_windows.reserve(w.window_slots);
      for (uint32_t i = w.window_slots; i > 0; --i) w.free_windows.push_back(i - 1);
      w.confirm = std::make_unique<rules::DpiConfirmScratch>(d.prefilter_window,
                                                             CompiledDpi::kConfirmMatchLimit);
      if (!w.confirm->ok()) return absl::ResourceExhaustedError("dpi: cannot allocate PCRE2 match data");
    }
  }
  return rt;
}

const uint8_t* DpiRuntime::reportMask(uint8_t flags) const {
  const std::vector<uint8_t>* m = nullptr;
  if (flags & DpiDir::kMaskSizePending) m = &masks_[2];
  else if (flags & DpiDir::kMaskFile) m = &masks_[1];
  else if (flags & DpiDir::kMaskHttpStream) m = &masks_[0];
  return m != nullptr && !m->empty() ? m->data() : nullptr;
}

DpiRuntime::~DpiRuntime() {
  for (PerWorker& w : workers_) {
    for (auto* v : {&w.streams, &w.block_streams, &w.work})
      for (hs_stream_t* st : *v)
        if (st != nullptr) hs_close_stream(st, nullptr, nullptr, nullptr);
    if (w.scratch != nullptr) hs_free_scratch(w.scratch);
  }
}

namespace {

struct Ctx {
  const DpiRuntime& rt;
  DpiRuntime::PerWorker& w;
  DpiDir& d;
  uint8_t* ms;
  DpiOutcome& out;
};

// Evaluates the rules and records every one that newly matches (its "fired" bit was clear):
// the bit is set and the rule appended to the call's outcome. The outcome's array has a
// place per rule and a rule fires once per direction (once per datagram in a block scan), so
// it never runs out. `since`: the stream was evaluated before at filesize *since, and the
// worker's dirty bits hold the rules whose strings changed after that: only the rules whose
// result can differ are evaluated (CompiledDpi::evaluateChanged); null: every rule.
// `first`: the stream's first evaluation (its state was empty before this scan): against
// the compiled table of what the empty state reports, only the owners of the strings found
// and their dependents are evaluated (CompiledDpi::evaluateFirst).
void evaluateFire(const Ctx& c, const uint64_t* since = nullptr, bool first = false) {
  const CompiledDpi& dpi = c.rt.dpi();
  uint32_t* hit = c.w.fired.get() + c.out.nfired;
  const uint32_t room = uint32_t(dpi.rules.size()) - c.out.nfired;
  uint8_t* fired = c.ms + dpi.matchStateBytes();
  const uint8_t* skip = fired;
  if (const uint8_t* mask = c.rt.reportMask(c.d.flags)) {  // rules not reported here
    uint8_t* t = c.w.mask_tmp.get();
    for (size_t k = 0, nb = (dpi.rules.size() + 7) / 8; k < nb; ++k) t[k] = fired[k] | mask[k];
    skip = t;
  }
  uint64_t* dirty = c.w.dirty.get();
  uint32_t n;
  if (since != nullptr) {
    n = dpi.evaluateChanged(c.ms, hit, room, skip, dirty, *since);
  } else if (first) {
    n = dpi.evaluateFirst(c.ms, hit, room, skip, dirty);
  } else {
    std::memset(dirty, 0, dpi.dirtyWords() * 8);
    n = dpi.evaluate(c.ms, hit, room, skip);
  }
  // n <= room: the rules counted in out.nfired have their fired bit set, evaluate() skips them.
  const uint32_t k = n < room ? n : room;
  for (uint32_t i = 0; i < k; ++i) {
    const uint32_t r = hit[i];
    fired[r >> 3] |= uint8_t(1u << (r & 7));
  }
  c.out.nfired += k;
}

// Every inspector call starts its outcome's rule list in the worker's array.
void beginOutcome(DpiRuntime::PerWorker& w, DpiOutcome& out) {
  out.fired = w.fired.get();
  out.nfired = 0;
}

uint8_t* windowOf(const DpiRuntime& rt, DpiRuntime::PerWorker& w, uint32_t win) {
  return w.windows.get() + size_t(win) * rt.windowBytes();
}

// Prefilter: the bytes a candidate can be confirmed on while `n` bytes at stream offset
// `seen` are scanned (the packet, and before it the direction's history window if it has
// one), or at the stream's end (`p` null).
void setWindow(const Ctx& c, rules::DpiWindow& win, const uint8_t* p, uint32_t n, uint64_t seen,
               bool at_end) {
  const uint32_t W = c.rt.windowBytes();
  win.cur = p;
  win.cur_off = seen;
  win.cur_len = n;
  win.at_end = at_end;
  win.scratch = c.w.confirm.get();
  if (c.d.win != DpiDir::kNoSlot) {
    win.ring = windowOf(c.rt, c.w, c.d.win);
    win.ring_size = W;
    win.ring_from = seen > W ? seen - W : 0;
  }
}

void countWindow(const rules::DpiWindow& win, DpiOutcome& out) {
  out.pf_confirmed += win.confirmed;
  out.pf_rejected += win.rejected;
  out.pf_errors += win.errors;
}

// The scanned bytes [seen, seen + n) into the direction's history ring (offset % W).
void keepHistory(const Ctx& c, const uint8_t* p, uint32_t n, uint64_t seen) {
  const uint32_t W = c.rt.windowBytes();
  if (c.d.win == DpiDir::kNoSlot || W == 0) return;
  uint8_t* ring = windowOf(c.rt, c.w, c.d.win);
  if (n > W) {
    p += n - W;
    seen += n - W;
    n = W;
  }
  const uint32_t at = uint32_t(seen % W);
  const uint32_t first = std::min(n, W - at);
  std::memcpy(ring + at, p, first);
  std::memcpy(ring, p + first, n - first);
}

// `st`: the direction's stream of each shard (CompiledDpi::shards), null without patterns.
void scan(const Ctx& c, hs_stream_t* const* st, const uint8_t* p, uint32_t n) {
  const CompiledDpi& dpi = c.rt.dpi();
  const uint64_t seen = CompiledDpi::filesize(c.ms);
  const uint64_t depth = c.rt.settings().depth_bytes;
  if (depth != 0 && seen + n > depth) {
    n = seen >= depth ? 0 : uint32_t(depth - seen);
    c.out.depth_reached = true;
    c.d.flags |= DpiDir::kDone;
  }
  if (n == 0) return;
  CompiledDpi::setFilesize(c.ms, seen + n);
  rules::DpiMatchCtx mc{&dpi, c.ms, 0, false};
  mc.dirty = c.w.dirty.get();
  rules::DpiWindow win;
  if (c.rt.windowBytes() != 0) {
    setWindow(c, win, p, n, seen, false);
    mc.win = &win;
  }
  if (st != nullptr) {
    const uint32_t K = c.rt.shards();
    for (uint32_t k = 0; k < K; ++k) {
      mc.ids = dpi.shards[k].ids.data();
      hs_scan_stream(st[k], reinterpret_cast<const char*>(p), n, 0, c.w.scratch,
                     rules::dpiMatchCallback, &mc);
    }
  }
  if (mc.win != nullptr) {
    countWindow(win, c.out);
    keepHistory(c, p, n, seen);
  }
  c.out.scanned += n;
  // The stream's first bytes: a full evaluation (rules true without any match, `not $a`,
  // fire too). Later, when a match changed the state or conditions read filesize: the rules
  // whose strings changed, whose filesize thresholds were crossed, and the rules that
  // reference them (evaluated at `seen` before; without filesize in any condition a scan that
  // changed nothing leaves every result as it was).
  if (seen == 0) {
    if (dpi.empty_table) evaluateFire(c, nullptr, true);
    else if (mc.changed || dpi.uses_filesize || !dpi.empty_hits.empty()) evaluateFire(c);
  } else if (mc.changed || dpi.uses_filesize) {
    evaluateFire(c, &seen);
  }
}

// Match state of a bound direction: its full slot's, or the working one (compact slots).
uint8_t* msOf(const DpiRuntime& rt, DpiRuntime::PerWorker& w, const DpiDir& d) {
  if (!(d.flags & DpiDir::kFull)) return w.work_ms.get();
  return w.ms.get() + size_t(d.slot) * rt.msStride();
}

// Compact slot layout: per shard u16 compressed stream bytes (0 = fresh stream), u16
// match-state bytes, the compressed streams (hs_compress_stream, shard by shard), then the
// match state as runs of nonzero bytes:
// u16 offset, u8 length, the bytes (a match state is mostly zero: presence bits of the few
// strings seen, the byte count).
uint8_t* slotOf(const DpiRuntime& rt, DpiRuntime::PerWorker& w, uint32_t slot) {
  return w.cdata.get() + size_t(slot) * rt.settings().compressed_slot_bytes;
}
uint16_t get16(const uint8_t* p) { uint16_t v; std::memcpy(&v, p, 2); return v; }
void put16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
size_t slotHeader(const DpiRuntime& rt) { return 2 + 2 * size_t(rt.shards()); }

// Encodes `ms` (n bytes, a multiple of 8) as nonzero runs into [out, out + cap); returns the
// bytes used, or cap + 1 when it does not fit.
size_t packMatchState(const uint8_t* ms, size_t n, uint8_t* out, size_t cap) {
  size_t used = 0, i = 0;
  while (i < n) {
    // Whole zero words are skipped 8 bytes at a time, but only from a word boundary: a run
    // can end anywhere, and an 8-byte read from there would pass the end of `ms`.
    if ((i & 7) == 0) {
      uint64_t word;
      std::memcpy(&word, ms + i, 8);
      if (word == 0) { i += 8; continue; }
    }
    if (ms[i] == 0) { ++i; continue; }
    size_t e = i;
    while (e < n && e - i < 255 && ms[e] != 0) ++e;
    if (used + 3 + (e - i) > cap) return cap + 1;
    put16(out + used, uint16_t(i));
    out[used + 2] = uint8_t(e - i);
    std::memcpy(out + used + 3, ms + i, e - i);
    used += 3 + (e - i);
    i = e;
  }
  return used;
}

void unpackMatchState(const uint8_t* in, size_t len, uint8_t* ms, size_t n) {
  std::memset(ms, 0, n);
  for (size_t k = 0; k + 3 <= len;) {
    const size_t off = get16(in + k), cnt = in[k + 2];
    if (off + cnt <= n) std::memcpy(ms + off, in + k + 3, cnt);
    k += 3 + cnt;
  }
}

// A free compact slot (kCompressed), else a full stream; none: the direction is not inspected.
bool openStream(const DpiRuntime& rt, DpiRuntime::PerWorker& w, DpiDir& d, DpiOutcome& out) {
  if (d.slot != DpiDir::kNoSlot) return true;
  if (!w.free_compact.empty()) {
    d.slot = w.free_compact.back();
    w.free_compact.pop_back();
    d.flags &= uint8_t(~DpiDir::kFull);
    std::memset(slotOf(rt, w, d.slot), 0, slotHeader(rt));
    if (w.work_slot == d.slot) w.work_slot = DpiDir::kNoSlot;
  } else if (!w.free_streams.empty()) {
    d.slot = w.free_streams.back();
    w.free_streams.pop_back();
    d.flags |= DpiDir::kFull;
    std::memset(msOf(rt, w, d), 0, rt.msStride());
  } else {
    out.no_stream = true;
    d.flags |= DpiDir::kDone;
    return false;
  }
  // Prefilter history window, taken with the stream (none free: counted, see DpiOutcome).
  if (rt.windowBytes() != 0 && d.win == DpiDir::kNoSlot) {
    if (!w.free_windows.empty()) {
      d.win = w.free_windows.back();
      w.free_windows.pop_back();
    } else {
      out.no_window = true;
    }
  }
  return true;
}

void releaseWindow(DpiRuntime::PerWorker& w, DpiDir& d) {
  if (d.win == DpiDir::kNoSlot) return;
  w.free_windows.push_back(d.win);
  d.win = DpiDir::kNoSlot;
}

// The Hyperscan stream to scan the direction with: its full stream, or the worker's working
// stream and match state holding the direction's compact slot (expanded unless they hold it
// already). msOf() is valid after this.
hs_stream_t* const* bindStream(const DpiRuntime& rt, DpiRuntime::PerWorker& w, const DpiDir& d) {
  const uint32_t K = rt.shards();
  if (d.flags & DpiDir::kFull) return w.streams.empty() ? nullptr : &w.streams[size_t(d.slot) * K];
  if (w.work_slot != d.slot) {
    const uint8_t* p = slotOf(rt, w, d.slot);
    const size_t H = slotHeader(rt);
    size_t at = H;
    for (uint32_t k = 0; k < K; ++k) {
      const uint16_t hl = get16(p + 2 + 2 * k);
      if (hl == 0) hs_reset_stream(w.work[k], 0, nullptr, nullptr, nullptr);
      else hs_reset_and_expand_stream(w.work[k], reinterpret_cast<const char*>(p + at), hl,
                                      nullptr, nullptr, nullptr);
      at += hl;
    }
    unpackMatchState(p + at, get16(p), w.work_ms.get(), rt.msStride());
    w.work_slot = d.slot;
  }
  return w.work.empty() ? nullptr : w.work.data();
}

// After a compact direction was scanned: its stream and match state packed back into the
// slot. When they do not fit, the direction moves to a full stream (counted: overflow); with
// none free it is not inspected any more (no_stream).
void storeStream(const DpiRuntime& rt, DpiRuntime::PerWorker& w, DpiDir& d, DpiOutcome& out) {
  if ((d.flags & DpiDir::kFull) || d.slot == DpiDir::kNoSlot) return;
  const size_t B = rt.settings().compressed_slot_bytes;
  uint8_t* p = slotOf(rt, w, d.slot);
  size_t at = slotHeader(rt);
  bool fits = true;
  for (size_t k = 0; k < w.work.size() && fits; ++k) {
    size_t hl = 0;
    fits = hs_compress_stream(w.work[k], reinterpret_cast<char*>(p + at), B - at, &hl) == HS_SUCCESS;
    put16(p + 2 + 2 * k, uint16_t(hl));
    at += hl;
  }
  if (fits) {
    const size_t ml = packMatchState(w.work_ms.get(), rt.msStride(), p + at, B - at);
    fits = ml <= B - at;
    if (fits) {
      put16(p, uint16_t(ml));
      return;
    }
  }
  out.overflow = true;
  const uint32_t c = d.slot;
  w.work_slot = DpiDir::kNoSlot;  // the slot's bytes are no longer its state
  w.free_compact.push_back(c);
  d.slot = DpiDir::kNoSlot;
  if (w.free_streams.empty()) {
    out.no_stream = true;
    d.flags |= DpiDir::kDone;
    return;
  }
  const uint32_t f = w.free_streams.back();
  w.free_streams.pop_back();
  for (size_t k = 0; k < w.work.size(); ++k)
    hs_reset_and_copy_stream(w.streams[size_t(f) * w.work.size() + k], w.work[k], nullptr, nullptr, nullptr);
  std::memcpy(w.ms.get() + size_t(f) * rt.msStride(), w.work_ms.get(), rt.msStride());
  d.slot = f;
  d.flags |= DpiDir::kFull;
}

void releaseOoo(DpiRuntime::PerWorker& w, const DpiRuntime& rt, DpiDir& d) {
  if (d.ooo == DpiDir::kNoSlot) return;
  const size_t nb = (rt.settings().ooo_buffer_bytes + 7) / 8;
  std::memset(w.ooo_bits.get() + size_t(d.ooo) * nb, 0, nb);
  w.free_ooo.push_back(d.ooo);
  d.ooo = DpiDir::kNoSlot;
}

// The direction's stream back to its pool; with `flush`, end-of-data matches are reported
// and evaluated first.
void releaseStream(const DpiRuntime& rt, DpiRuntime::PerWorker& w, DpiDir& d, const Ctx* flush,
                   uint8_t* final_ms = nullptr) {
  if (d.slot == DpiDir::kNoSlot) return;
  const uint32_t K = rt.shards();
  hs_stream_t* const* st =
      flush != nullptr ? bindStream(rt, w, d)
      : (d.flags & DpiDir::kFull) && !w.streams.empty() ? &w.streams[size_t(d.slot) * K] : nullptr;
  if (st != nullptr && flush != nullptr) {
    rules::DpiMatchCtx mc{&rt.dpi(), flush->ms, 0, false};
    rules::DpiWindow win;
    if (rt.windowBytes() != 0) {
      setWindow(*flush, win, nullptr, 0, CompiledDpi::filesize(flush->ms), true);
      mc.win = &win;
    }
    for (uint32_t k = 0; k < K; ++k) {
      mc.ids = rt.dpi().shards[k].ids.data();
      hs_reset_stream(st[k], 0, w.scratch, rules::dpiMatchCallback, &mc);
    }
    if (mc.win != nullptr) countWindow(win, flush->out);
    evaluateFire(*flush);
  }
  if (flush != nullptr && final_ms != nullptr)
    std::memcpy(final_ms, flush->ms, rt.dpi().matchStateBytes());
  if (st != nullptr && flush == nullptr)
    for (uint32_t k = 0; k < K; ++k) hs_reset_stream(st[k], 0, nullptr, nullptr, nullptr);
  if (d.flags & DpiDir::kFull) {
    w.free_streams.push_back(d.slot);
  } else {
    if (w.work_slot == d.slot) w.work_slot = DpiDir::kNoSlot;
    w.free_compact.push_back(d.slot);
  }
  d.slot = DpiDir::kNoSlot;
  d.flags &= uint8_t(~DpiDir::kFull);
}

inline bool bitAt(const uint8_t* bits, uint32_t i) { return (bits[i >> 3] >> (i & 7)) & 1u; }

// Scans the buffered bytes that now continue the stream.
void drainOoo(const Ctx& c, hs_stream_t* const* st) {
  if (c.d.ooo == DpiDir::kNoSlot) return;
  const uint32_t B = c.rt.settings().ooo_buffer_bytes;
  uint8_t* data = c.w.ooo_data.get() + size_t(c.d.ooo) * B;
  uint8_t* bits = c.w.ooo_bits.get() + size_t(c.d.ooo) * ((B + 7) / 8);
  while (!(c.d.flags & DpiDir::kDone)) {
    uint32_t idx = c.d.next_seq % B;
    uint32_t run = 0;
    while (idx + run < B && bitAt(bits, idx + run)) {
      bits[(idx + run) >> 3] &= uint8_t(~(1u << ((idx + run) & 7)));
      ++run;
    }
    if (run == 0) break;
    scan(c, st, data + idx, run);
    c.d.next_seq += run;
  }
  bool any = false;
  for (uint32_t i = 0; i < (B + 7) / 8 && !any; ++i) any = bits[i] != 0;
  if (!any) releaseOoo(c.w, c.rt, c.d);
}

// Drops buffered bytes that sequence range [from, to) made obsolete (already scanned).
void clearOoo(const Ctx& c, uint32_t from, uint32_t to) {
  if (c.d.ooo == DpiDir::kNoSlot) return;
  const uint32_t B = c.rt.settings().ooo_buffer_bytes;
  uint8_t* bits = c.w.ooo_bits.get() + size_t(c.d.ooo) * ((B + 7) / 8);
  uint32_t n = to - from;
  if (n >= B) {
    std::memset(bits, 0, (B + 7) / 8);
    return;
  }
  for (uint32_t k = 0; k < n; ++k) {
    uint32_t i = (from + k) % B;
    bits[i >> 3] &= uint8_t(~(1u << (i & 7)));
  }
}

bool bufferOoo(const Ctx& c, uint32_t seq, const uint8_t* p, uint32_t n) {
  const uint32_t B = c.rt.settings().ooo_buffer_bytes;
  const uint32_t delta = seq - c.d.next_seq;
  if (uint64_t(delta) + n > B) return false;
  if (c.d.ooo == DpiDir::kNoSlot) {
    if (c.w.free_ooo.empty()) return false;
    c.d.ooo = c.w.free_ooo.back();
    c.w.free_ooo.pop_back();
  }
  uint8_t* data = c.w.ooo_data.get() + size_t(c.d.ooo) * B;
  uint8_t* bits = c.w.ooo_bits.get() + size_t(c.d.ooo) * ((B + 7) / 8);
  for (uint32_t k = 0; k < n; ++k) {
    uint32_t i = (seq + k) % B;
    if (bitAt(bits, i)) continue;  // first copy wins
    data[i] = p[k];
    bits[i >> 3] |= uint8_t(1u << (i & 7));
  }
  return true;
}

}  // namespace

// A direction's state as of runtime `rt` (state of an older runtime forgotten), the outcome
// begun: the worker's part of the runtime.
DpiRuntime::PerWorker& DpiInspector::enter(const DpiRuntime& rt, uint32_t worker, DpiDir& d,
                                           DpiOutcome& out) {
  if (d.rt_id != rt.id()) {
    forget(d);
    d.rt_id = rt.id();
  }
  DpiRuntime::PerWorker& w = rt.worker(worker);
  beginOutcome(w, out);
  return w;
}

void DpiInspector::tcp(const DpiRuntime& rt, uint32_t worker, DpiDir& d, const uint8_t* payload,
                       uint32_t len, uint32_t seq, uint8_t tcp_flags, DpiOutcome& out) {
  DpiRuntime::PerWorker& w = enter(rt, worker, d, out);
  if (d.flags & DpiDir::kDone) return;
  if (tcp_flags & 0x02) {  // SYN: the sequence number of the first payload byte is seq + 1
    if (!(d.flags & DpiDir::kSeqKnown)) {
      d.next_seq = seq + 1;
      d.flags |= DpiDir::kSeqKnown;
    }
    seq += 1;
  }
  if (len == 0) return;
  if (!(d.flags & DpiDir::kSeqKnown)) {  // joined mid-stream: start at the first payload seen
    d.next_seq = seq;
    d.flags |= DpiDir::kSeqKnown;
  }
  if (!openStream(rt, w, d, out)) return;
  Ctx c{rt, w, d, msOf(rt, w, d), out};
  int32_t delta = int32_t(seq - d.next_seq);
  if (delta < 0) {  // retransmission (or overlap): only the new tail is scanned
    uint32_t skip = uint32_t(-int64_t(delta));
    if (skip >= len) return;
    payload += skip;
    len -= skip;
    seq = d.next_seq;
    delta = 0;
  }
  if (delta == 0) {
    const uint32_t from = d.next_seq;
    hs_stream_t* const* st = bindStream(rt, w, d);
    scan(c, st, payload, len);
    d.next_seq += len;
    clearOoo(c, from, d.next_seq);
    drainOoo(c, st);
    if (!(d.flags & DpiDir::kDone)) storeStream(rt, w, d, out);
  } else if (!bufferOoo(c, seq, payload, len)) {
    out.gap = true;
    d.flags |= DpiDir::kGap | DpiDir::kDone;
  }
  if (d.flags & DpiDir::kDone) {  // depth or gap: nothing more to scan in this direction
    releaseOoo(w, rt, d);
    releaseStream(rt, w, d, nullptr);
    releaseWindow(w, d);
  }
}

void DpiInspector::gap(const DpiRuntime& rt, uint32_t worker, DpiDir& d, DpiOutcome& out) {
  DpiRuntime::PerWorker& w = enter(rt, worker, d, out);
  if (d.flags & DpiDir::kDone) return;
  out.gap = true;
  d.flags |= DpiDir::kGap | DpiDir::kDone;
  releaseOoo(w, rt, d);
  releaseStream(rt, w, d, nullptr);
  releaseWindow(w, d);
}

void DpiInspector::udp(const DpiRuntime& rt, uint32_t worker, DpiDir& d, const uint8_t* payload,
                       uint32_t len, DpiOutcome& out) {
  if (len == 0) return;
  if (rt.settings().udp_stream) {
    // One stream per flow direction, datagrams in arrival order.
    uint32_t seq = d.next_seq;
    if (!(d.flags & DpiDir::kSeqKnown) || d.rt_id != rt.id()) seq = 0;
    tcp(rt, worker, d, payload, len, seq, 0, out);
    return;
  }
  block(rt, worker, payload, len, out);
}

void DpiInspector::block(const DpiRuntime& rt, uint32_t worker, const uint8_t* payload,
                         uint32_t len, DpiOutcome& out) {
  DpiRuntime::PerWorker& w = rt.worker(worker);
  beginOutcome(w, out);
  DpiDir scratch_dir;
  std::memset(w.block_ms.get(), 0, rt.msStride());
  Ctx c{rt, w, scratch_dir, w.block_ms.get(), out};
  hs_stream_t* const* bs = w.block_streams.empty() ? nullptr : w.block_streams.data();
  scan(c, bs, payload, len);
  if (bs != nullptr) {
    rules::DpiMatchCtx mc{&rt.dpi(), w.block_ms.get(), 0, false};
    rules::DpiWindow win;  // the datagram itself: confirmed on its bytes
    if (rt.windowBytes() != 0) {
      setWindow(c, win, payload, uint32_t(CompiledDpi::filesize(w.block_ms.get())), 0, true);
      mc.win = &win;
    }
    for (uint32_t k = 0; k < rt.shards(); ++k) {
      mc.ids = rt.dpi().shards[k].ids.data();
      hs_reset_stream(bs[k], 0, w.scratch, rules::dpiMatchCallback, &mc);
    }
    if (mc.win != nullptr) countWindow(win, out);
    if (mc.changed) evaluateFire(c);
  }
}

void DpiInspector::end(const DpiRuntime& rt, uint32_t worker, DpiDir& d, DpiOutcome& out,
                       uint8_t* final_ms) {
  DpiRuntime::PerWorker& w = rt.worker(worker);
  beginOutcome(w, out);
  if (d.rt_id != rt.id()) {
    forget(d);
    return;
  }
  releaseOoo(w, rt, d);
  if (d.slot != DpiDir::kNoSlot) {
    Ctx c{rt, w, d, msOf(rt, w, d), out};
    releaseStream(rt, w, d, (d.flags & DpiDir::kDone) ? nullptr : &c, final_ms);
  }
  releaseWindow(w, d);
  forget(d);
}

}  // namespace dpu::dp
