// Datagram reassembly for inspection. See datagram.h.
#include "dataplane/normalize/datagram.h"

#include <rte_errno.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dataplane/port/eal.h"

namespace dpu::dp {
namespace {

// Per-buffer state, in the mbuf's private area.
struct BufInfo {
  void* first_pkt;     // held packet of the offset-0 fragment
  uint16_t hdr_len;    // bytes before the fragmentable part in the first fragment
  uint16_t l3_off;
  uint8_t ip_ver;
  bool have_hdr;
  bool tiny;
};

constexpr uint16_t kPrivSize = (sizeof(BufInfo) + RTE_MBUF_PRIV_ALIGN - 1) & ~(RTE_MBUF_PRIV_ALIGN - 1);

inline BufInfo& info(rte_mbuf* b) { return *static_cast<BufInfo*>(rte_mbuf_to_priv(b)); }
inline const BufInfo& info(const rte_mbuf* b) {
  return *static_cast<const BufInfo*>(rte_mbuf_to_priv(const_cast<rte_mbuf*>(b)));
}
inline uint8_t* payloadBase(rte_mbuf* b) {
  return static_cast<uint8_t*>(b->buf_addr) + DatagramReassembler::kHeaderRoom;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DatagramReassembler>> DatagramReassembler::create(
    const DatagramOptions& o) {
  if (o.max_bytes < 8 || o.max_bytes > kMaxBytes) {
    return absl::InvalidArgumentError(absl::StrCat("reassembly '", o.name, "': max_bytes ",
                                                   o.max_bytes, " out of range [8, ",
                                                   kMaxBytes, "]"));
  }
  std::unique_ptr<DatagramReassembler> r(new DatagramReassembler());
  r->opts_ = o;
  if (o.buffers == 0) return r;
  const uint32_t room = kHeaderRoom + o.max_bytes;
  r->pool_ = rte_pktmbuf_pool_create(o.name.c_str(), o.buffers, 0, kPrivSize,
                                     static_cast<uint16_t>(room),
                                     o.socket_id < 0 ? SOCKET_ID_ANY : o.socket_id);
  if (r->pool_ == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "reassembly '", o.name, "': cannot allocate ", o.buffers, " buffers of ", room,
        " bytes: ", rte_strerror(rte_errno), " (lower dataplane.fragments.reassembly_buffers"
        " or max_datagram_bytes, or raise EAL memory)"));
  }
  return r;
}

DatagramReassembler::~DatagramReassembler() {
  if (pool_ != nullptr && !dpdkHeapLeftToExit()) rte_mempool_free(pool_);  // eal.h
}

void DatagramReassembler::releaseBuffer(void* buf) {
  rte_pktmbuf_free(static_cast<rte_mbuf*>(buf));
}

uint32_t DatagramReassembler::buffersInUse() const {
  return pool_ != nullptr ? rte_mempool_in_use_count(pool_) : 0;
}

DatagramStep DatagramReassembler::add(FragTracker& t, int32_t slot, const PacketMeta& m,
                                      const uint8_t* frame, void* pkt, uint64_t now_ns,
                                      bool keep_first, DatagramAddInfo* out) {
  DatagramAddInfo local;
  DatagramAddInfo& ai = out != nullptr ? *out : local;
  ai = DatagramAddInfo{};
  const uint32_t begin = m.frag_offset;
  const uint32_t len = m.frag_payload_len;
  const uint32_t end = begin + len;
  const FragProgress pg = t.progress(slot);
  if (pg.nfrags >= opts_.max_fragments) return DatagramStep::kTooMany;
  // Structure first: the datagram's end is fixed by its last fragment.
  if (!m.more_fragments) {
    if ((pg.last_seen && end != pg.total_len) || end < pg.max_end) return DatagramStep::kConflict;
  } else if (pg.last_seen && end > pg.total_len) {
    return DatagramStep::kConflict;
  }
  if (end > opts_.max_bytes) return DatagramStep::kTooBig;
  // The fragmentable part starts where the fragment's payload does (IPv4: after the IP
  // header; IPv6: after the fragment header).
  const uint32_t frag_start = uint32_t(m.l3_offset) + m.l3_len - len;
  if (begin == 0 && frag_start > kHeaderRoom) return DatagramStep::kTooBig;
  rte_mbuf* b = static_cast<rte_mbuf*>(t.buffer(slot));
  if (b == nullptr) {
    if (pool_ == nullptr) return DatagramStep::kNoBuffer;
    b = rte_pktmbuf_alloc(pool_);
    if (b == nullptr) return DatagramStep::kNoBuffer;
    info(b) = BufInfo{};
    t.setBuffer(slot, b);
  }
  if (t.heldFree() == 0) return DatagramStep::kHoldFull;
  const uint8_t* src = frame + frag_start;
  uint8_t* dst = payloadBase(b);
  // Overlaps: compared byte for byte with what was copied.
  t.overlapping(slot, begin, end, [&](uint32_t lo, uint32_t hi) {
    ai.overlap = true;
    if (std::memcmp(dst + lo, src + (lo - begin), hi - lo) != 0) ai.conflict = true;
  });
  if (ai.conflict && !keep_first) return DatagramStep::kConflict;
  if (!ai.overlap) {
    std::memcpy(dst + begin, src, len);
  } else {
    // Only the bytes not there yet (identical overlaps change nothing; different ones
    // keep the first copy).
    uint32_t at = begin;
    t.overlapping(slot, begin, end, [&](uint32_t lo, uint32_t hi) {
      if (lo > at) std::memcpy(dst + at, src + (at - begin), lo - at);
      at = hi;
    });
    if (end > at) std::memcpy(dst + at, src + (at - begin), end - at);
  }
  BufInfo& bi = info(b);
  if (begin == 0 && !bi.have_hdr) {
    std::memcpy(static_cast<uint8_t*>(b->buf_addr) + kHeaderRoom - frag_start, frame, frag_start);
    bi.have_hdr = true;
    bi.hdr_len = static_cast<uint16_t>(frag_start);
    bi.l3_off = m.l3_offset;
    bi.ip_ver = static_cast<uint8_t>(m.l3);
    bi.tiny = fragmentIsTiny(m);
    bi.first_pkt = pkt;
  }
  if (t.record(slot, m, now_ns)) return DatagramStep::kComplete;
  t.hold(slot, pkt);  // cannot fail: heldFree() checked above
  return DatagramStep::kHeld;
}

void* DatagramReassembler::firstFragment(const FragTracker& t, int32_t slot) const {
  const rte_mbuf* b = static_cast<const rte_mbuf*>(t.buffer(slot));
  return b != nullptr && info(b).have_hdr ? info(b).first_pkt : nullptr;
}

bool DatagramReassembler::firstWasTiny(const FragTracker& t, int32_t slot) const {
  const rte_mbuf* b = static_cast<const rte_mbuf*>(t.buffer(slot));
  return b != nullptr && info(b).tiny;
}

rte_mbuf* DatagramReassembler::build(FragTracker& t, int32_t slot) {
  const FragProgress pg = t.progress(slot);
  rte_mbuf* b = static_cast<rte_mbuf*>(t.takeBuffer(slot));
  if (b == nullptr) return nullptr;
  const BufInfo bi = info(b);
  uint8_t* base = static_cast<uint8_t*>(b->buf_addr) + kHeaderRoom - bi.hdr_len;
  uint8_t* ip = base + bi.l3_off;
  const uint32_t l3_hdr = bi.hdr_len - bi.l3_off;  // IP header (+ IPv6 ext headers)
  if (!bi.have_hdr || l3_hdr + pg.total_len > 65535) {
    rte_pktmbuf_free(b);
    return nullptr;
  }
  if (bi.ip_ver == 4) {
    auto* h = reinterpret_cast<rte_ipv4_hdr*>(ip);
    h->total_length = rte_cpu_to_be_16(static_cast<uint16_t>(l3_hdr + pg.total_len));
    h->fragment_offset &= rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
    h->hdr_checksum = 0;
    h->hdr_checksum = rte_ipv4_cksum(h);
  } else {
    // The fragment header (the last 8 bytes before the payload) becomes an atomic one.
    uint8_t* fh = base + bi.hdr_len - 8;
    fh[2] = 0;
    fh[3] = 0;
    const uint32_t plen = l3_hdr - 40 + pg.total_len;
    ip[4] = static_cast<uint8_t>(plen >> 8);
    ip[5] = static_cast<uint8_t>(plen);
  }
  b->data_off = static_cast<uint16_t>(base - static_cast<uint8_t*>(b->buf_addr));
  b->data_len = static_cast<uint16_t>(bi.hdr_len + pg.total_len);
  b->pkt_len = b->data_len;
  b->nb_segs = 1;
  b->next = nullptr;
  b->ol_flags = 0;
  return b;
}

}  // namespace dpu::dp
