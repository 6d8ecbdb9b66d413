// The dns section of ApplianceConfig (proto/appliance.proto) into the rules model
// (rules/model/dns.h): defaults, enum and address checks with field paths. List files are not
// read here (compileDns reads them); each file's stamp (device, inode, size, mtime) is taken
// so a replaced file changes the model and is read again, an unchanged one is not.
#pragma once

#include "proto/appliance.pb.h"
#include "rules/compile/config_errors.h"
#include "rules/model/dns.h"

namespace dpu::ctl {

void dnsToModel(const v1::ApplianceConfig& cfg, rules::DnsModel* m, rules::ConfigErrorList& errors);

// Makes dns.lists[].files absolute against `base` (see resolveRelativePaths).
template <class Fix>
void fixDnsPaths(v1::ApplianceConfig* cfg, Fix&& fix) {
  if (!cfg->has_dns()) return;
  for (v1::DnsList& l : *cfg->mutable_dns()->mutable_lists()) {
    for (std::string& f : *l.mutable_files()) fix(&f);
  }
}

}  // namespace dpu::ctl
