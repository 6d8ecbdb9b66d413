# Finds every external library with pkg-config. A missing one stops configure
# with the Debian package that provides it (scripts/install-deps.sh installs them all).
find_package(PkgConfig)
if(NOT PKG_CONFIG_FOUND)
  message(FATAL_ERROR "pkg-config not found: apt-get install pkg-config (or run scripts/install-deps.sh)")
endif()

function(dpu_require_pkg target module debian_pkg)
  pkg_check_modules(${target} QUIET IMPORTED_TARGET GLOBAL ${module})
  if(NOT ${target}_FOUND)
    message(FATAL_ERROR
      "Missing dependency: pkg-config module '${module}' not found.\n"
      "Install it with: apt-get install ${debian_pkg}   (or run scripts/install-deps.sh)")
  endif()
  message(STATUS "Found ${module} ${${target}_VERSION}")
endfunction()

dpu_require_pkg(DPDK libdpdk libdpdk-dev)
dpu_require_pkg(HS libhs libhyperscan-dev)
dpu_require_pkg(YARA yara libyara-dev)
dpu_require_pkg(PCRE2 libpcre2-8 libpcre2-dev)  # DPI: confirms HS_FLAG_PREFILTER candidates
dpu_require_pkg(MMDB libmaxminddb libmaxminddb-dev)
dpu_require_pkg(HTP htp libhtp-dev)  # --- http --- HTTP normalizer (docs/http.md)
# Debian's htp.pc also names ${libdir}/htp/include, which the package does not ship (CMake
# refuses an imported target with a missing include directory): keep the existing ones.
get_target_property(_htp_inc PkgConfig::HTP INTERFACE_INCLUDE_DIRECTORIES)
set(_htp_keep "")
foreach(_d IN LISTS _htp_inc)
  if(EXISTS "${_d}")
    list(APPEND _htp_keep "${_d}")
  endif()
endforeach()
set_property(TARGET PkgConfig::HTP PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${_htp_keep}")
dpu_require_pkg(ZLIB zlib zlib1g-dev)  # libhtp's decompressors
dpu_require_pkg(CRYPTO libcrypto libssl-dev)  # sha256 of HTTP files (EVP)
dpu_require_pkg(NLOHMANN_JSON nlohmann_json nlohmann-json3-dev)
dpu_require_pkg(GRPCPP grpc++ libgrpc++-dev)
dpu_require_pkg(PROTOBUF protobuf libprotobuf-dev)
dpu_require_pkg(PCAP libpcap libpcap-dev)
dpu_require_pkg(PROMETHEUS_PULL prometheus-cpp-pull prometheus-cpp-dev)  # metrics serializer
dpu_require_pkg(SYSTEMD libsystemd libsystemd-dev)  # sd_notify (Type=notify unit)
# The metrics endpoint's HTTP server (/metrics and its index page): civetweb's C++ API.
find_package(civetweb CONFIG QUIET)
if(NOT TARGET civetweb::civetweb-cpp)
  message(FATAL_ERROR "Missing dependency: civetweb. Install it with: apt-get install libcivetweb-dev")
endif()

find_program(PROTOC protoc)
if(NOT PROTOC)
  message(FATAL_ERROR "Missing tool: protoc. Install it with: apt-get install protobuf-compiler")
endif()
find_program(GRPC_CPP_PLUGIN grpc_cpp_plugin)
if(NOT GRPC_CPP_PLUGIN)
  message(FATAL_ERROR "Missing tool: grpc_cpp_plugin. Install it with: apt-get install protobuf-compiler-grpc")
endif()

if(DPU_BUILD_TESTS)
  find_package(GTest)
  if(NOT GTest_FOUND)
    message(FATAL_ERROR "Missing dependency: GoogleTest. Install it with: apt-get install libgtest-dev libgmock-dev")
  endif()
  find_package(benchmark QUIET)
  if(NOT benchmark_FOUND)
    message(FATAL_ERROR "Missing dependency: Google Benchmark. Install it with: apt-get install libbenchmark-dev")
  endif()
endif()
