#!/usr/bin/env bash
# Installs the Debian 12 packages the appliance needs.
#   scripts/install-deps.sh          everything: build, test, fuzz and benchmark (scripts/test.sh)
#   scripts/install-deps.sh --demo   only what building and running dpu-appliance needs
#                                    (scripts/demo.sh): no test, fuzz or benchmark tools
set -euo pipefail
# Build and run dpu-appliance (DPU_BUILD_TESTS=OFF configures with these alone).
DEMO_PKGS=(
  build-essential cmake ninja-build pkg-config git
  libdpdk-dev dpdk                     # DPDK 22.11: libraries, PMDs (net_pcap for replay)
  libhyperscan-dev libyara-dev libmaxminddb-dev nlohmann-json3-dev
  libpcre2-dev                         # DPI: PCRE2 confirms HS_FLAG_PREFILTER candidates
  libhtp-dev zlib1g-dev libssl-dev     # HTTP files (docs/http.md): libhtp, its zlib, sha256 (libcrypto EVP)
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc libabsl-dev
  libpcap-dev
  prometheus-cpp-dev libcivetweb-dev   # /metrics endpoint (prometheus-cpp serializer, civetweb)
  libsystemd-dev                       # sd_notify: Type=notify readiness for the systemd unit
  lld                                  # the linker CMakeLists.txt picks when present (faster links)
)
PKGS=(
  "${DEMO_PKGS[@]}"
  dpdk-dev                             # dpdk-testpmd, dpdk-test-acl (benchmarks)
  dpdk-doc                             # example sources: bench/fwd_bench.sh builds l3fwd from them
  mmdb-bin openssl
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-grpcio python3-protobuf python3-grpc-tools  # the Python client and its test
  curl                                 # tests: scrape /metrics
  etcd-server etcd-client              # the fleet's tests and scripts/fleet-lab.sh: a real etcd
  bind9-dnsutils                       # dig: scripts/lab.sh and its test
  python3 python3-scapy python3-matplotlib tcpdump iproute2 ethtool
  tshark                               # DNS filtering: pcap cases check the answers decode as DNS
  clang libclang-rt-14-dev             # sanitizer build and scripts/fuzz: clang 14, libFuzzer + ASan/UBSan runtimes
)
if [[ ${1:-} == --demo ]]; then
  PKGS=("${DEMO_PKGS[@]}")
elif [[ $# -gt 0 ]]; then
  echo "usage: scripts/install-deps.sh [--demo]" >&2
  exit 2
fi
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
