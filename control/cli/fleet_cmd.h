// dpuctl fleet ...: the fleet's policy in etcd (docs/fleet.md): apply a version, watch the
// nodes' status, roll a version out group by group, roll back, history and diff. Talks to etcd
// only (no appliance API).
#pragma once

#include <string>
#include <vector>

namespace dpu::cli {

extern const char* const kFleetHelp;

// Returns dpuctl's exit code (0 ok, 1 failed / rollout halted, 2 usage, 3 conflict, 4 invalid).
int cmdFleet(const std::vector<std::string>& args, bool json);

}  // namespace dpu::cli
