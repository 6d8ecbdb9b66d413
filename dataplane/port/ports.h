// Port set-up. RSS distribution: one rx and one tx queue per worker on every port, symmetric
// RSS, so both directions of a flow reach the same worker. Software distribution
// (dataplane/pipeline/distribute.h): as many queues as the port has, up to one per worker,
// no RSS; the workers hash in software.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

struct rte_mempool;

namespace dpu::dp {

struct PortOptions {
  uint16_t queues = 1;          // rx queues (RSS: = workers)
  uint16_t tx_queues = 0;       // 0 = queues
  bool rss = true;              // queues > 1: symmetric RSS (false: software distribution)
  uint16_t rx_desc = 1024;
  uint16_t tx_desc = 1024;
  bool promiscuous = true;      // bump-in-the-wire: accept every frame
};

// Configures and starts `port_id`. Fails with a message naming the port and driver when
// the device cannot provide the queues or (rss, queues > 1) RSS.
absl::Status setupPort(uint16_t port_id, const PortOptions& opts, rte_mempool* pool);

// Whether the port hashes packets to its rx queues with a key the appliance programs (RSS
// for IP/TCP/UDP and at least `queues` queues each way). net_tap reports RSS but its queues
// are chosen by the kernel's tun queue selection (docs/operations.md "Many workers"), so it
// does not count.
bool portHasRss(uint16_t port_id, uint16_t queues);

// The most rx / tx queues the port offers (0 when it cannot be read).
uint16_t portMaxRxQueues(uint16_t port_id);
uint16_t portMaxTxQueues(uint16_t port_id);

// "port 0 (net_pcap0, driver net_pcap)".
std::string describePort(uint16_t port_id);

// The 40-byte symmetric Toeplitz key (0x6d5a repeated): hash(a,b) == hash(b,a).
extern const uint8_t kSymmetricRssKey[40];

}  // namespace dpu::dp
