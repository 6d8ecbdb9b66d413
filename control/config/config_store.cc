#include "control/config/config_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <google/protobuf/util/json_util.h>

#include <cerrno>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "control/config/config_loader.h"

namespace dpu::ctl {
namespace {

constexpr char kFileName[] = "config.json";
constexpr char kTmpSuffix[] = ".tmp";

std::string errnoText(int err) { return std::generic_category().message(err); }

absl::Status errnoStatus(int err, const std::string& message) {
  return absl::Status(absl::ErrnoToStatusCode(err), absl::StrCat(message, ": ", errnoText(err)));
}

// mkdir -p; directories it creates get mode 0700, existing ones are left as they are.
absl::Status makeDirs(const std::string& dir) {
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    std::string prefix = dir.substr(0, pos);
    struct stat st;
    if (::stat(prefix.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "cannot create state directory ", dir, ": ", prefix, " exists and is not a directory"));
      }
      continue;
    }
    if (errno != ENOENT) {
      return errnoStatus(errno, absl::StrCat("cannot create state directory ", dir, ": stat ", prefix));
    }
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      return errnoStatus(errno, absl::StrCat("cannot create state directory ", dir, ": mkdir ", prefix));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> toJson(const v1::ApplianceConfig& cfg) {
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  opts.add_whitespace = true;
  std::string out;
  auto st = google::protobuf::util::MessageToJsonString(cfg, &out, opts);
  if (!st.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot serialize config version ", cfg.version(), ": ",
                     std::string(st.message())));
  }
  return out;
}

// Closes a descriptor on scope exit unless released.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

// Replaces <dir>/config.json with `content`: write config.json.tmp (created or truncated),
// fsync, close, rename over config.json, fsync the directory. On failure the tmp file is
// removed; `replaced` tells whether the rename happened (only the directory fsync failed).
absl::Status replaceFile(const std::string& dir, const std::string& content, bool* replaced) {
  *replaced = false;
  const std::string path = absl::StrCat(dir, "/", kFileName);
  const std::string tmp = absl::StrCat(path, kTmpSuffix);
  const std::string what = absl::StrCat("cannot persist config to ", tmp);

  Fd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd.get() < 0) {
    return errnoStatus(errno, absl::StrCat("cannot persist config to ", dir, ": open directory"));
  }
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (fd.get() < 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return errnoStatus(err, absl::StrCat(what, ": open"));
  }
  auto failWith = [&](int err, const char* step) {
    int f = fd.release();
    if (f >= 0) ::close(f);
    ::unlink(tmp.c_str());
    return errnoStatus(err, absl::StrCat(what, ": ", step));
  };
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd.get(), content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return failWith(errno, "write");
    }
    if (n == 0) return failWith(EIO, "write");
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) return failWith(errno, "fsync");
  if (::close(fd.release()) != 0) return failWith(errno, "close");
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return errnoStatus(err, absl::StrCat("cannot persist config: rename ", tmp, " to ", path));
  }
  *replaced = true;
  if (::fsync(dfd.get()) != 0) {
    return errnoStatus(errno, absl::StrCat("cannot persist config to ", path, ": fsync directory ", dir));
  }
  return absl::OkStatus();
}

}  // namespace

std::string ConfigStore::path() const { return absl::StrCat(dir_, "/", kFileName); }

absl::StatusOr<std::unique_ptr<ConfigStore>> ConfigStore::open(const std::string& state_dir,
                                                               const v1::ApplianceConfig* seed) {
  if (state_dir.empty()) return absl::InvalidArgumentError("state directory: empty path");
  std::string dir = state_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (absl::Status st = makeDirs(dir); !st.ok()) return st;

  std::unique_ptr<ConfigStore> store(new ConfigStore());
  store->dir_ = dir;
  const std::string path = store->path();
  // A tmp file is a commit that never reached its rename (crash): it was never committed.
  ::unlink(absl::StrCat(path, kTmpSuffix).c_str());

  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno != ENOENT) return errnoStatus(errno, absl::StrCat("cannot read committed config ", path));
    if (absl::Status st = store->commit(seed ? *seed : v1::ApplianceConfig()); !st.ok()) return st;
    return store;
  }
  std::string text;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errnoStatus(errno, absl::StrCat("cannot read committed config ", path));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  const std::string keep =
      "; the file is left as it is: repair or remove it (a state directory without config.json "
      "starts from --config)";
  if (absl::StripAsciiWhitespace(text).empty()) {
    return absl::DataLossError(absl::StrCat(path, ": committed config is empty", keep));
  }
  auto parsed = parseConfig(text, ConfigFormat::kJson, path);
  if (!parsed.ok()) {
    return absl::DataLossError(absl::StrCat(parsed.status().message(), keep));
  }
  if (parsed->version() == 0) {
    return absl::DataLossError(
        absl::StrCat(path, ": committed config has no version (not written by a commit)", keep));
  }
  store->current_ = std::move(*parsed);
  return store;
}

absl::Status ConfigStore::commit(const v1::ApplianceConfig& next) {
  v1::ApplianceConfig copy = next;
  copy.set_version(version() + 1);
  auto json = toJson(copy);
  if (!json.ok()) return json.status();
  const std::string unchanged =
      version() == 0 ? std::string("; no config is committed yet")
                     : absl::StrCat("; the committed config (version ", version(), ") is unchanged");
  bool replaced = false;
  absl::Status st = replaceFile(dir_, *json, &replaced);
  if (st.ok()) {
    current_ = std::move(copy);
    return st;
  }
  if (!replaced) return absl::Status(st.code(), absl::StrCat(st.message(), unchanged));
  // The rename happened but the directory entry may not be durable: put the previous
  // document back so that file and memory keep agreeing on the committed version.
  std::string restore;
  if (version() == 0) {
    if (::unlink(path().c_str()) != 0 && errno != ENOENT) {
      restore = absl::StrCat("; removing ", path(), " also failed: ", errnoText(errno));
    }
  } else {
    auto old = toJson(current_);
    bool again = false;
    absl::Status back = old.ok() ? replaceFile(dir_, *old, &again) : old.status();
    if (!back.ok() && !again) {
      restore = absl::StrCat("; restoring version ", version(), " also failed (", back.message(),
                             "), so ", path(), " may hold version ", copy.version());
    }
  }
  return absl::Status(st.code(), absl::StrCat(st.message(), unchanged, restore));
}

}  // namespace dpu::ctl
