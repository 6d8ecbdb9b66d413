// --- lb --- `dpuctl lb ...`: service create / delete / show, backend add / remove (drain or
// flush) / set, and the service listing with table shares and counters. dpuctl.cc only
// dispatches here; what the command needs from dpuctl's client comes in LbCmdContext.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "proto/appliance_api.grpc.pb.h"

namespace dpu::cli {

struct LbCmdContext {
  v1::Appliance::Stub* stub = nullptr;
  std::function<void(grpc::ClientContext*)> unary;  // sets the call deadline
  // Prints a failed call and returns dpuctl's exit code for it.
  std::function<int(const std::string& what, const grpc::Status& st)> fail;
  // Prints a usage error (with the help text) and returns the usage exit code.
  std::function<int(const std::string& msg, const char* help)> usage;
  // The committed version (for the default --expected-version); false: *rc is set.
  std::function<bool(uint64_t* version, int* rc)> committed_version;
  bool json = false;
};

extern const char* const kLbHelp;

int runLbCommand(LbCmdContext& c, const std::vector<std::string>& args);

// The text table of `dpuctl lb list`.
std::string formatLbServices(const v1::ListLbServicesResponse& r);
// `dpuctl lb show`: the table plus each service's key, policies and options.
std::string formatLbService(const v1::ListLbServicesResponse& r);

}  // namespace dpu::cli
