// Test-only helpers of the DNS pipeline tests (tests/dataplane/pipeline): a snapshot holding a
// compiled DNS model (by default the one-list model: list "ads", NXDOMAIN, "||ads.example^"),
// and a frame parsed with the dataplane's parser (expected to parse).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <utility>

#include "dataplane/packet/parser.h"
#include "rules/compiled/dns.h"
#include "rules/compiled/snapshot.h"
#include "tests/util/packet_builder.h"

namespace dpu::test {

// The one-list model: blocks ads.example and its subdomains with NXDOMAIN.
inline rules::DnsModel adsDnsModel() {
  rules::DnsModel m;
  rules::DnsListModel l;
  l.name = "ads";
  l.action = rules::DnsAction::kNxdomain;
  l.names = {"||ads.example^"};
  m.lists.push_back(std::move(l));
  return m;
}

// A snapshot with `ds` and `model` compiled (`prev`: the running lists, as a reload has them).
inline std::unique_ptr<rules::Snapshot> dnsSnapshot(const rules::DataplaneSettings& ds,
                                                    const rules::DnsModel& model = adsDnsModel(),
                                                    const rules::CompiledDns* prev = nullptr) {
  auto s = std::make_unique<rules::Snapshot>();
  s->dataplane = ds;
  auto d = rules::compileDns(model, prev);
  EXPECT_TRUE(d.ok()) << d.status();
  if (d.ok()) s->dns = *d;
  return s;
}

// `f` parsed (a failure to parse fails the test).
inline dp::PacketMeta parseFrame(const Frame& f) {
  dp::PacketMeta m;
  EXPECT_EQ(dp::parsePacket(f.data(), static_cast<uint32_t>(f.size()), m), dp::ParseStatus::kOk);
  return m;
}

}  // namespace dpu::test
