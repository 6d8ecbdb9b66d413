// dpuctl dns ...: DNS filtering subcommands (list stats, show / create / delete a list, add /
// remove list entries). The
// dispatch and the connection stay in dpuctl.cc; what the commands need from it comes in a
// DnsCmdEnv.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "proto/appliance_api.grpc.pb.h"

namespace dpu::cli {

extern const char* const kDnsHelp;

struct DnsCmdEnv {
  dpu::v1::Appliance::Stub* stub = nullptr;
  bool json = false;
  std::function<void(grpc::ClientContext*)> unary;  // sets the deadline
  std::function<int(const std::string& what, const grpc::Status&)> rpc_fail;
  std::function<int(const dpu::v1::ApplyConfigResponse&)> print_apply;
  // Consumes --expected-version N / --force at args[i] (true when it did; err set on a bad
  // value) and, before a change, fills in the expected version (rc != 0: stop with it).
  std::function<bool(const std::vector<std::string>& args, size_t& i, std::string* err)> version_opt;
  std::function<int(uint64_t* expected, bool* force)> resolve_expected;
};

// Returns dpuctl's exit code (0 ok, 1 failed, 2 usage, 3 conflict, 4 invalid).
int cmdDns(const DnsCmdEnv& env, const std::vector<std::string>& args);

// The list table of `dpuctl dns list`.
std::string formatDnsLists(const dpu::v1::ListDnsListsResponse& r);
// `dpuctl dns show`: one list as configured and its running stats (null: not running).
std::string formatDnsList(const dpu::v1::DnsList& l, const dpu::v1::DnsListStats* running,
                          uint64_t version, bool json);

}  // namespace dpu::cli
