// dpuctl flows / dpuctl capture: the flow table view (filters, sort, paging, top talkers)
// and the capture of dropped or rule-matched packets to a pcap file. The dispatch and the
// connection stay in dpuctl.cc; what the commands need from it comes in a DnsCmdEnv.
#pragma once

#include <string>
#include <vector>

#include "control/cli/dns_cmd.h"
#include "proto/appliance_api.pb.h"

namespace dpu::cli {

extern const char* const kFlowsHelp;
extern const char* const kCaptureHelp;

int cmdFlows(const DnsCmdEnv& env, const std::vector<std::string>& args);
int cmdCapture(const DnsCmdEnv& env, const std::vector<std::string>& args);

// The table of `dpuctl flows` (top talkers: with the window columns).
std::string formatFlows(const v1::ListFlowsResponse& r, bool window);

}  // namespace dpu::cli
