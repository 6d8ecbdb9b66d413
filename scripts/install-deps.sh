#!/usr/bin/env bash
# Installs every Debian 12 package the appliance needs to build, test and benchmark.
set -euo pipefail
PKGS=(
  build-essential cmake ninja-build pkg-config git
  libdpdk-dev dpdk-dev dpdk            # DPDK 22.11: libraries, PMDs, dpdk-testpmd, dpdk-test-acl
  dpdk-doc                             # example sources: bench/fwd_bench.sh builds l3fwd from them
  libhyperscan-dev libyara-dev libmaxminddb-dev mmdb-bin nlohmann-json3-dev
  libpcre2-dev                         # DPI: PCRE2 confirms HS_FLAG_PREFILTER candidates
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc libabsl-dev
  libpcap-dev libgtest-dev libgmock-dev libbenchmark-dev openssl
  prometheus-cpp-dev libcivetweb-dev   # /metrics endpoint (prometheus-cpp serializer, civetweb)
  libsystemd-dev                       # sd_notify: Type=notify readiness for the systemd unit
  python3-grpcio python3-protobuf python3-grpc-tools  # the Python client and its test
  curl                                 # tests: scrape /metrics
  bind9-dnsutils                       # dig: scripts/lab.sh and its test
  python3 python3-scapy python3-matplotlib tcpdump iproute2 ethtool
  tshark                               # DNS filtering: pcap cases check the answers decode as DNS
  clang libclang-rt-14-dev             # scripts/fuzz: libFuzzer + ASan/UBSan runtimes for clang 14
)
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
