// Writes what a port transmits to a pcap file (libpcap), stamping each packet with the
// time it was received (the rx timestamp carried in the mbuf), so an offline replay's
// output is byte-for-byte reproducible. Hooked in as an ethdev tx callback: the worker's
// code path is the same as with a real port.
#pragma once

#include <pcap/pcap.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

struct rte_eth_rxtx_callback;
struct rte_mbuf;

namespace dpu::ctl {

class PcapCapture {
 public:
  static absl::StatusOr<std::unique_ptr<PcapCapture>> create(const std::string& path);
  ~PcapCapture();
  // Captures everything sent on (port, queue) from now on.
  absl::Status attachTx(uint16_t port, uint16_t queue);
  uint64_t packets() const { return packets_; }

 private:
  static uint16_t onTx(uint16_t port, uint16_t queue, rte_mbuf** pkts, uint16_t n,
                       void* self);
  PcapCapture() = default;
  pcap_t* dead_ = nullptr;
  pcap_dumper_t* dumper_ = nullptr;
  int ts_field_ = -1;
  uint64_t ts_flag_ = 0;
  uint64_t packets_ = 0;
  struct Hook { uint16_t port, queue; const rte_eth_rxtx_callback* cb; };
  std::vector<Hook> hooks_;
  std::vector<uint8_t> scratch_;
};

// Checks that `path` is a readable pcap with Ethernet link type; the error says why not.
absl::Status checkEthernetPcap(const std::string& path);

// An empty Ethernet pcap (a port with nothing to receive) that has no name on disk: an
// anonymous memory file (memfd), readable by path through /proc/self/fd while this object
// lives. Nothing remains after any exit, a crash included.
class EmptyPcap {
 public:
  static absl::StatusOr<std::unique_ptr<EmptyPcap>> create();
  ~EmptyPcap();
  EmptyPcap(const EmptyPcap&) = delete;
  EmptyPcap& operator=(const EmptyPcap&) = delete;
  const std::string& path() const { return path_; }

 private:
  EmptyPcap() = default;
  int fd_ = -1;
  std::string path_;
};

}  // namespace dpu::ctl
