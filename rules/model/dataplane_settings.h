// Dataplane-wide settings as the control plane fills them (from ApplianceConfig.dataplane).
// Plain data; defaults are the documented defaults of proto/appliance.proto.
#pragma once

#include <cstdint>
#include <vector>

namespace dpu::rules {

enum class Policy : uint8_t { kForward = 1, kDrop = 2 };

// Limits of dataplane.tunnels (the parser's fixed arrays, dataplane/packet/parser.h).
constexpr uint32_t kMaxTunnelDepthSetting = 4;
constexpr uint32_t kMaxTunnelPortsSetting = 8;

// dataplane.distribution (proto Distribution): how packets reach more than one worker.
enum class Distribution : uint8_t { kAuto = 0, kRss = 1, kSoftware = 2 };

struct DataplaneSettings {
  // Flow table (capacity and fragment table sizes take effect at start only).
  uint32_t flow_capacity = 1u << 20;
  Policy flow_when_full = Policy::kForward;
  uint32_t aging_slice = 64;
  // Idle timeouts, seconds.
  uint32_t tcp_syn_s = 60;
  uint32_t tcp_established_s = 7200;
  uint32_t tcp_closing_s = 120;
  uint32_t tcp_closed_s = 10;
  uint32_t udp_s = 120;
  uint32_t icmp_s = 30;
  uint32_t other_s = 120;
  Policy non_ip = Policy::kForward;
  Policy malformed = Policy::kDrop;
  // Fragments.
  uint32_t frag_max_datagrams = 8192;
  uint32_t frag_timeout_ms = 10000;
  uint32_t frag_max_fragments = 64;
  Policy frag_overlapping = Policy::kDrop;
  Policy frag_tiny = Policy::kDrop;
  // Reassembly for inspection (dataplane/normalize/datagram.h): buffers and held fragments
  // per worker (start only), the largest datagram, and what running out of them does
  // (kForward = fail_open: judged by its first fragment alone; kDrop = fail_closed).
  uint32_t frag_reassembly_buffers = 256;
  uint32_t frag_max_datagram_bytes = 16384;
  uint32_t frag_max_held = 1024;
  Policy frag_on_exhaustion = Policy::kDrop;
  Policy tcp_midstream = Policy::kForward;
  // TCP stream normalization of inspected flows (dataplane/normalize/tcp_stream.h).
  // Overlapping bytes that differ from the inspected ones: drop the segment (default) or
  // reset the connection both ways.
  bool tcp_overlap_reset = false;
  // Comparison windows: bytes per window (power of two) and windows per worker (start only).
  uint32_t tcp_window_bytes = 4096;
  uint32_t tcp_windows_per_worker = 8192;
  // Reorder buffers (bytes beyond a hole kept until it fills): bytes per flow direction
  // (0 = none: segments beyond a hole are dropped, dataplane.tcp.drop_out_of_order) and
  // buffers per worker (start only).
  uint32_t tcp_reorder_bytes = 2097152;
  uint32_t tcp_reorder_buffers_per_worker = 128;
  // Hold mode (dataplane.tcp.hold_out_of_order): segments beyond a hole are also held, not
  // forwarded, until the hole fills; packets held per worker, the longest hold (start only).
  bool tcp_hold_out_of_order = false;
  uint32_t tcp_hold_packets_per_worker = 1024;
  uint32_t tcp_hold_timeout_ms = 1000;
  // Stream state that cannot be had (no free window, overlap beyond the window), per stage
  // reading the stream: kForward = fail open, kDrop = fail closed.
  Policy tcp_dns_fail = Policy::kDrop;
  Policy tcp_dpi_fail = Policy::kForward;
  // TCP checksums of inspected segments verified (in software unless the port offloads it).
  bool tcp_verify_checksum = true;
  // Tunnels (docs/tunnels.md): opened (inspect) or judged as the outer packet (outer only).
  bool tunnels_inspect = true;
  // A UDP datagram to a VXLAN / Geneve port that is not that tunnel: false = judged as the
  // plain datagram (counted vxlan_not_parsed / geneve_not_parsed; a GRE header that does not
  // parse: the outer packet, gre_not_parsed), true = malformed.
  bool tunnels_strict = false;
  std::vector<uint32_t> vxlan_ports = {4789};
  std::vector<uint32_t> geneve_ports = {6081};
  uint32_t tunnel_max_depth = 3;
  // Many workers (start only): RSS, software distribution, or RSS when the ports offer it.
  Distribution distribution = Distribution::kAuto;
};

}  // namespace dpu::rules
