#include "dataplane/port/ports.h"

#include <rte_ethdev.h>
#include <rte_mempool.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace dpu::dp {

const uint8_t kSymmetricRssKey[40] = {
    0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a,
    0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a,
    0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a};

std::string describePort(uint16_t port_id) {
  char name[RTE_ETH_NAME_MAX_LEN] = {0};
  rte_eth_dev_get_name_by_port(port_id, name);
  rte_eth_dev_info info;
  std::memset(&info, 0, sizeof(info));
  const char* drv = "?";
  if (rte_eth_dev_info_get(port_id, &info) == 0 && info.driver_name) drv = info.driver_name;
  return absl::StrCat("port ", port_id, " (", name, ", driver ", drv, ")");
}

bool portHasRss(uint16_t port_id, uint16_t queues) {
  rte_eth_dev_info info;
  std::memset(&info, 0, sizeof(info));
  if (rte_eth_dev_info_get(port_id, &info) != 0) return false;
  if (info.driver_name != nullptr && std::strcmp(info.driver_name, "net_tap") == 0) return false;
  const uint64_t want = RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP;
  return (want & info.flow_type_rss_offloads) != 0 && info.max_rx_queues >= queues &&
         info.max_tx_queues >= queues &&
         (info.hash_key_size == 0 || info.hash_key_size == sizeof(kSymmetricRssKey));
}

uint16_t portMaxRxQueues(uint16_t port_id) {
  rte_eth_dev_info info;
  std::memset(&info, 0, sizeof(info));
  return rte_eth_dev_info_get(port_id, &info) == 0 ? info.max_rx_queues : 0;
}

uint16_t portMaxTxQueues(uint16_t port_id) {
  rte_eth_dev_info info;
  std::memset(&info, 0, sizeof(info));
  return rte_eth_dev_info_get(port_id, &info) == 0 ? info.max_tx_queues : 0;
}

absl::Status setupPort(uint16_t port_id, const PortOptions& opts, rte_mempool* pool) {
  if (!rte_eth_dev_is_valid_port(port_id)) {
    return absl::InvalidArgumentError(absl::StrCat("port ", port_id, " does not exist"));
  }
  rte_eth_dev_info info;
  int rc = rte_eth_dev_info_get(port_id, &info);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat(describePort(port_id), ": cannot read device info: ",
                                            rte_strerror(-rc)));
  }
  const uint16_t txq = opts.tx_queues ? opts.tx_queues : opts.queues;
  if (opts.queues > info.max_rx_queues || txq > info.max_tx_queues) {
    return absl::InvalidArgumentError(absl::StrCat(
        describePort(port_id), " supports at most ", info.max_rx_queues, " rx / ",
        info.max_tx_queues, " tx queues; ", opts.queues, " workers need ", opts.queues,
        " of each (use fewer workers, dataplane.distribution SOFTWARE, or give the PMD more "
        "queues, e.g. net_pcap with one rx_pcap per queue, net_af_packet qpairs=N)"));
  }
  rte_eth_conf conf;
  std::memset(&conf, 0, sizeof(conf));
  if (opts.queues > 1 && opts.rss) {
    uint64_t want = RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP;
    uint64_t hf = want & info.flow_type_rss_offloads;
    if (hf == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          describePort(port_id), " has no RSS, so ", opts.queues,
          " workers cannot be given both directions of each flow by RSS; set "
          "dataplane.distribution to SOFTWARE (or AUTO), or run with one worker"));
    }
    conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
    conf.rx_adv_conf.rss_conf.rss_key = const_cast<uint8_t*>(kSymmetricRssKey);
    conf.rx_adv_conf.rss_conf.rss_key_len = sizeof(kSymmetricRssKey);
    conf.rx_adv_conf.rss_conf.rss_hf = hf;
    if (info.hash_key_size != 0 && info.hash_key_size != sizeof(kSymmetricRssKey)) {
      return absl::InvalidArgumentError(absl::StrCat(describePort(port_id), " wants a ",
                                                     info.hash_key_size,
                                                     "-byte RSS key; only 40 is supported"));
    }
  }
  rc = rte_eth_dev_configure(port_id, opts.queues, txq, &conf);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat(describePort(port_id),
                                            ": configure failed: ", rte_strerror(-rc)));
  }
  uint16_t rxd = opts.rx_desc, txd = opts.tx_desc;
  rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &rxd, &txd);
  int socket = rte_eth_dev_socket_id(port_id);
  if (socket < 0) socket = 0;
  for (uint16_t q = 0; q < opts.queues; ++q) {
    rc = rte_eth_rx_queue_setup(port_id, q, rxd, socket, nullptr, pool);
    if (rc != 0) {
      return absl::InternalError(absl::StrCat(describePort(port_id), ": rx queue ", q,
                                              " setup failed: ", rte_strerror(-rc)));
    }
  }
  for (uint16_t q = 0; q < txq; ++q) {
    rc = rte_eth_tx_queue_setup(port_id, q, txd, socket, nullptr);
    if (rc != 0) {
      return absl::InternalError(absl::StrCat(describePort(port_id), ": tx queue ", q,
                                              " setup failed: ", rte_strerror(-rc)));
    }
  }
  rc = rte_eth_dev_start(port_id);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat(describePort(port_id),
                                            ": start failed: ", rte_strerror(-rc)));
  }
  if (opts.promiscuous) rte_eth_promiscuous_enable(port_id);  // not every PMD supports it
  return absl::OkStatus();
}

}  // namespace dpu::dp
