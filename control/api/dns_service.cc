// DNS filtering RPCs of dpu.v1.Appliance: incremental add / remove of list entries (through
// the config document, so they persist and apply hitlessly), list stats.
#include "absl/strings/str_cat.h"
#include "control/api/appliance_service.h"
#include "rules/compile/dns_parsers.h"

namespace dpu::ctl {
namespace {

constexpr int kMaxEntriesPerCall = 1000000;

v1::DnsList* findList(v1::ApplianceConfig& doc, const std::string& name) {
  if (!doc.has_dns()) return nullptr;
  for (v1::DnsList& l : *doc.mutable_dns()->mutable_lists()) {
    if (l.name() == name) return &l;
  }
  return nullptr;
}

// Every entry must parse in the list's format (the apply would refuse the document anyway;
// checked here to name each bad entry: section "dns", the list, entries[i], the reason).
absl::Status checkEntries(const v1::DnsList& l, const v1::DnsNamesRequest& req,
                          rules::ConfigErrorList& errs) {
  auto format = static_cast<rules::DnsListFormat>(l.format());
  auto match = l.match_subdomains() ? rules::DnsMatch::kSubtree : rules::DnsMatch::kExact;
  for (int i = 0; i < req.entries_size(); ++i) {
    rules::DnsSource src{l.name(), "", absl::StrCat("entries[", i, "]"), 0};
    const size_t before = errs.size();
    rules::DnsParseCounts c = rules::parseDnsListText(
        req.entries(i), format, match, src, [](std::string_view, uint8_t) {}, &errs);
    if (c.bad_lines == 0 && c.entries == 0 && errs.size() == before) {
      rules::ConfigError e;
      e.section = "dns";
      e.rule = l.name();
      e.field = src.field;
      e.reason = absl::StrCat("no name in '", req.entries(i), "'");
      errs.push_back(std::move(e));
    }
    for (size_t k = before; k < errs.size(); ++k) errs[k].index = i;
  }
  return rules::errorsToStatus(errs);
}

}  // namespace

void fillDnsCounters(const dp::CountersSnapshot::Flat& f, v1::CounterSet* out) {
  for (int i = 0; i < dp::kDnsCounterCount; ++i) {
    if (f.dns[i]) (*out->mutable_dns())[dp::dnsCounterName(i)] = f.dns[i];
  }
  for (int a = 1; a < dp::kDnsActions; ++a) {
    if (!f.dns_action[a] || a > static_cast<int>(rules::DnsAction::kRefuse)) continue;
    (*out->mutable_dns_blocks_by_action())[rules::dnsActionName(static_cast<rules::DnsAction>(a))] =
        f.dns_action[a];
  }
}

void fillDnsListStats(const dp::DnsListCounters& c, v1::DnsListStats* out) {
  out->set_name(c.name);
  out->set_action(c.action);
  out->set_names(c.names);
  out->set_skipped_lines(c.skipped_lines);
  out->set_load_ms(c.load_ms);
  out->set_incremental(c.incremental);
  out->set_blocked(c.blocked);
  out->set_allowed(c.allowed);
}

grpc::Status ApplianceService::AddDnsNames(grpc::ServerContext*, const v1::DnsNamesRequest* req,
                                           v1::ApplyConfigResponse* resp) {
  return editDnsList(*req, resp, [&](v1::DnsList& l) {
    // An entry taken out earlier and added again leaves `removed` (the list is then built
    // anew instead of patched).
    for (const std::string& e : req->entries()) {
      auto* rm = l.mutable_removed();
      for (int k = rm->size() - 1; k >= 0; --k) {
        if (rm->Get(k) == e) rm->DeleteSubrange(k, 1);
      }
      l.add_names(e);
    }
  });
}

grpc::Status ApplianceService::RemoveDnsNames(grpc::ServerContext*, const v1::DnsNamesRequest* req,
                                              v1::ApplyConfigResponse* resp) {
  return editDnsList(*req, resp, [&](v1::DnsList& l) {
    for (const std::string& e : req->entries()) l.add_removed(e);
  });
}

grpc::Status ApplianceService::editDnsList(const v1::DnsNamesRequest& req,
                                           v1::ApplyConfigResponse* resp,
                                           const std::function<void(v1::DnsList&)>& edit) {
  if (req.list().empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "list: required");
  if (req.entries_size() == 0 || req.entries_size() > kMaxEntriesPerCall) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("entries: 1..", kMaxEntriesPerCall, " per call"));
  }
  auto mutate = [&](v1::ApplianceConfig& doc, rules::ConfigErrorList& errs) -> absl::Status {
    v1::DnsList* l = findList(doc, req.list());
    if (!l) return absl::NotFoundError(absl::StrCat("no DNS list named '", req.list(), "'"));
    if (absl::Status st = checkEntries(*l, req, errs); !st.ok()) return st;
    edit(*l);
    return absl::OkStatus();
  };
  return updateWith(
      std::function<absl::Status(v1::ApplianceConfig&, rules::ConfigErrorList&)>(mutate),
      req.expected_version(), req.force(), resp);
}

grpc::Status ApplianceService::CreateDnsList(grpc::ServerContext*,
                                             const v1::CreateDnsListRequest* req,
                                             v1::ApplyConfigResponse* resp) {
  if (req->list().name().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "list.name: required");
  }
  auto mutate = [&](v1::ApplianceConfig& doc) -> absl::Status {
    if (findList(doc, req->list().name()) != nullptr) {
      return absl::AlreadyExistsError(
          absl::StrCat("a DNS list named '", req->list().name(), "' exists already"));
    }
    auto* lists = doc.mutable_dns()->mutable_lists();
    const int n = lists->size();
    int at = n;
    if (req->position_case() == v1::CreateDnsListRequest::kIndex) {
      if (req->index() > uint32_t(n)) {
        return absl::InvalidArgumentError(
            absl::StrCat("index: ", req->index(), " is past the end (", n, " list(s))"));
      }
      at = int(req->index());
    }
    *lists->Add() = req->list();
    for (int k = n; k > at; --k) lists->SwapElements(k, k - 1);
    return absl::OkStatus();
  };
  return updateWith(mutate, req->expected_version(), req->force(), resp);
}

grpc::Status ApplianceService::DeleteDnsList(grpc::ServerContext*,
                                             const v1::DeleteDnsListRequest* req,
                                             v1::ApplyConfigResponse* resp) {
  if (req->name().empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "name: required");
  auto mutate = [&](v1::ApplianceConfig& doc) -> absl::Status {
    auto* lists = doc.mutable_dns()->mutable_lists();
    for (int k = 0; k < lists->size(); ++k) {
      if (lists->Get(k).name() == req->name()) {
        lists->DeleteSubrange(k, 1);
        return absl::OkStatus();
      }
    }
    return absl::NotFoundError(absl::StrCat("no DNS list named '", req->name(), "'"));
  };
  return updateWith(mutate, req->expected_version(), req->force(), resp);
}

grpc::Status ApplianceService::ListDnsLists(grpc::ServerContext*, const v1::ListDnsListsRequest*,
                                            v1::ListDnsListsResponse* resp) {
  resp->set_config_version(config_->version());
  for (const auto& l : plane_->dnsLists()) fillDnsListStats(l, resp->add_lists());
  return grpc::Status::OK;
}

}  // namespace dpu::ctl
