// Port set-up: one rx and one tx queue per worker on every port; symmetric RSS when more
// than one worker shares a port, so both directions of a flow reach the same worker.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

struct rte_mempool;

namespace dpu::dp {

struct PortOptions {
  uint16_t queues = 1;          // = workers
  uint16_t rx_desc = 1024;
  uint16_t tx_desc = 1024;
  bool promiscuous = true;      // bump-in-the-wire: accept every frame
};

// Configures and starts `port_id`. Fails with a message naming the port and driver when
// the device cannot provide `queues` queues or (queues > 1) RSS.
absl::Status setupPort(uint16_t port_id, const PortOptions& opts, rte_mempool* pool);

// "port 0 (net_pcap0, driver net_pcap)".
std::string describePort(uint16_t port_id);

// The 40-byte symmetric Toeplitz key (0x6d5a repeated): hash(a,b) == hash(b,a).
extern const uint8_t kSymmetricRssKey[40];

}  // namespace dpu::dp
