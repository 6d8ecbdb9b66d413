// The committed configuration, persisted. One file per state directory
// (`<state_dir>/config.json`, protobuf JSON of ApplianceConfig with its version), replaced
// atomically on every commit: write `config.json.tmp`, fsync it, rename over config.json,
// fsync the directory. A crash leaves either the old or the new file, never a torn one.
//
// Precedence at start: a state directory that holds a committed config wins; `--config`
// only seeds an empty (or new) state directory; with neither, version 1 is the empty
// document ({} = forward everything, track flows).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "proto/appliance.pb.h"

namespace dpu::ctl {

class ConfigStore {
 public:
  // Opens (creating, mode 0700) `state_dir`. Loads the committed config if there is one; a
  // file that cannot be parsed is an error naming it (the operator decides, nothing is
  // overwritten). Otherwise commits `seed` (or {}) as version 1.
  static absl::StatusOr<std::unique_ptr<ConfigStore>> open(const std::string& state_dir,
                                                           const v1::ApplianceConfig* seed);

  // The committed document; its `version` field is the committed version.
  const v1::ApplianceConfig& current() const { return current_; }
  uint64_t version() const { return current_.version(); }
  const std::string& stateDir() const { return dir_; }
  std::string path() const;

  // Persists `next` as version() + 1 and makes it current. On any I/O failure (read-only
  // directory, disk full, ...) returns an error saying what failed, and the committed config
  // (file and memory) stays as it was. Not thread-safe: the caller serializes commits.
  absl::Status commit(const v1::ApplianceConfig& next);

 private:
  ConfigStore() = default;
  std::string dir_;
  v1::ApplianceConfig current_;
};

}  // namespace dpu::ctl
