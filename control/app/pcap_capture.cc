#include "control/app/pcap_capture.h"

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace dpu::ctl {

absl::StatusOr<std::unique_ptr<PcapCapture>> PcapCapture::create(const std::string& path) {
  std::unique_ptr<PcapCapture> c(new PcapCapture());
  c->dead_ = pcap_open_dead(DLT_EN10MB, 65535);
  if (!c->dead_) return absl::InternalError("pcap_open_dead failed");
  c->dumper_ = pcap_dump_open(c->dead_, path.c_str());
  if (!c->dumper_) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cannot write pcap: ", pcap_geterr(c->dead_)));
  }
  c->ts_field_ = rte_mbuf_dynfield_lookup(RTE_MBUF_DYNFIELD_TIMESTAMP_NAME, nullptr);
  int flag = rte_mbuf_dynflag_lookup(RTE_MBUF_DYNFLAG_RX_TIMESTAMP_NAME, nullptr);
  c->ts_flag_ = flag >= 0 ? (1ull << flag) : 0;
  c->scratch_.resize(65536);
  return c;
}

PcapCapture::~PcapCapture() {
  for (const Hook& h : hooks_) rte_eth_remove_tx_callback(h.port, h.queue, h.cb);
  if (dumper_) pcap_dump_close(dumper_);
  if (dead_) pcap_close(dead_);
}

absl::Status PcapCapture::attachTx(uint16_t port, uint16_t queue) {
  const rte_eth_rxtx_callback* cb = rte_eth_add_tx_callback(port, queue, &PcapCapture::onTx, this);
  if (!cb) {
    return absl::InternalError(absl::StrCat("cannot hook tx of port ", port,
                                            " (DPDK built without rx/tx callbacks?)"));
  }
  hooks_.push_back({port, queue, cb});
  return absl::OkStatus();
}

uint16_t PcapCapture::onTx(uint16_t, uint16_t, rte_mbuf** pkts, uint16_t n, void* self) {
  auto* c = static_cast<PcapCapture*>(self);
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = pkts[i];
    pcap_pkthdr h{};
    uint64_t us = 0;
    if (c->ts_field_ >= 0 && (m->ol_flags & c->ts_flag_)) {
      us = *RTE_MBUF_DYNFIELD(m, c->ts_field_, uint64_t*);
    }
    h.ts.tv_sec = static_cast<time_t>(us / 1000000);
    h.ts.tv_usec = static_cast<suseconds_t>(us % 1000000);
    uint32_t len = m->pkt_len;
    uint32_t cap = len < c->scratch_.size() ? len : static_cast<uint32_t>(c->scratch_.size());
    h.len = len;
    h.caplen = cap;
    const void* data = rte_pktmbuf_read(m, 0, cap, c->scratch_.data());
    pcap_dump(reinterpret_cast<u_char*>(c->dumper_), &h, static_cast<const u_char*>(data));
    ++c->packets_;
  }
  pcap_dump_flush(c->dumper_);
  return n;
}

absl::Status checkEthernetPcap(const std::string& path) {
  char err[PCAP_ERRBUF_SIZE] = {0};
  pcap_t* p = pcap_open_offline(path.c_str(), err);
  if (!p) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read pcap: ", err));
  int dlt = pcap_datalink(p);
  pcap_close(p);
  if (dlt != DLT_EN10MB) {
    const char* name = pcap_datalink_val_to_name(dlt);
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": link type ", name ? name : "?", " (", dlt,
        ") is not Ethernet (EN10MB); the appliance sits on Ethernet ports and replays "
        "Ethernet captures only"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<EmptyPcap>> EmptyPcap::create() {
  std::unique_ptr<EmptyPcap> e(new EmptyPcap());
  e->fd_ = memfd_create("dpu-replay-empty.pcap", MFD_CLOEXEC);
  if (e->fd_ < 0) {
    return absl::InternalError(absl::StrCat("memfd_create: ", std::strerror(errno)));
  }
  // The file header only: libpcap writes it (magic, version, snaplen, link type).
  pcap_t* dead = pcap_open_dead(DLT_EN10MB, 65535);
  if (!dead) return absl::InternalError("pcap_open_dead failed");
  int dup_fd = dup(e->fd_);
  FILE* f = dup_fd < 0 ? nullptr : fdopen(dup_fd, "wb");
  if (!f) {
    if (dup_fd >= 0) close(dup_fd);
    pcap_close(dead);
    return absl::InternalError(absl::StrCat("empty pcap: ", std::strerror(errno)));
  }
  pcap_dumper_t* d = pcap_dump_fopen(dead, f);
  if (!d) {
    std::string err = pcap_geterr(dead);
    std::fclose(f);
    pcap_close(dead);
    return absl::InternalError(absl::StrCat("empty pcap: ", err));
  }
  pcap_dump_close(d);  // closes f
  pcap_close(dead);
  e->path_ = absl::StrCat("/proc/self/fd/", e->fd_);
  return e;
}

EmptyPcap::~EmptyPcap() {
  if (fd_ >= 0) close(fd_);
}

}  // namespace dpu::ctl
