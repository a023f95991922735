// SPDX-License-Identifier: MIT
#include "served_arrays.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "control_client.h"
#include "uraid/config_file.h"

namespace uraid::tool {
namespace {

namespace fs = std::filesystem;

// Whether anything listens on `path`: OK when a connect succeeds,
// NotFound when no file is there or nobody listens (a stale socket), and
// FailedPrecondition for a file that is no socket.
absl::Status Listening(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("no control socket ", path));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not a socket"));
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": too long for a unix socket"));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, "socket");
  const int rc =
      connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  const int err = errno;
  close(fd);
  if (rc == 0) return absl::OkStatus();
  if (err == ECONNREFUSED) {
    return absl::NotFoundError(
        absl::StrCat("stale control socket ", path, ": its server is gone"));
  }
  return absl::ErrnoToStatus(err, absl::StrCat("control socket ", path));
}

// The same file reached by two names counts once.
std::string FileKey(const std::string& path) {
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(path, ec);
  return ec ? path : canonical.string();
}

}  // namespace

void ProbeServedArray(ServedArray& array, int timeout_ms) {
  if (absl::Status s = Listening(array.control); !s.ok()) {
    array.presence =
        absl::IsNotFound(s) ? Presence::kNotServed : Presence::kUnreadable;
    array.error = s;
    return;
  }
  absl::StatusOr<std::unique_ptr<ControlClient>> client =
      ControlClient::Connect(array.control, timeout_ms);
  absl::StatusOr<ArrayInfo> info =
      client.ok() ? (*client)->Detail() : client.status();
  if (!info.ok()) {
    array.presence = Presence::kUnreadable;
    array.error = info.status();
    return;
  }
  array.presence = Presence::kServed;
  array.info = *std::move(info);
}

void AddFindOptions(CLI::App* sub, FindOptions* options) {
  sub->add_option("--config,-c", options->config,
                  "The config file (default $URAID_CONFIG, else "
                  "/etc/uraid/uraid.conf; a missing default is no error)");
  sub->add_option("--control,-C", options->controls,
                  "Also this control socket (repeat for several)");
}

absl::StatusOr<std::vector<ServedArray>> FindServedArrays(
    const FindOptions& options) {
  std::vector<ServedArray> found;
  std::set<std::string> seen;
  auto add = [&](ServedArray a) {
    if (!seen.insert(FileKey(a.control)).second) return;
    found.push_back(std::move(a));
  };
  for (const std::string& c : options.controls) {
    add(ServedArray{.name = c, .control = c});
  }
  if (!options.only_given) {
    const std::string path =
        options.config.empty() ? DefaultConfigPath() : options.config;
    absl::StatusOr<ConfigFile> config = LoadConfigFile(path);
    if (config.ok()) {
      for (const ConfigArray& a : config->arrays) {
        add(ServedArray{.name = a.name,
                        .control = ConfigControlSocket(a),
                        .configured = true});
      }
    } else if (!absl::IsNotFound(config.status()) || !options.config.empty()) {
      // A config given by hand must be there; the default one need not.
      return config.status();
    }
    std::vector<std::string> sockets;
    std::error_code ec;
    for (const fs::directory_entry& e :
         fs::directory_iterator(DefaultRunDir(), ec)) {
      const std::string file = e.path().filename().string();
      if (absl::EndsWith(file, ".ctl") && e.is_socket(ec)) {
        sockets.push_back(e.path().string());
      }
    }
    std::sort(sockets.begin(), sockets.end());
    for (const std::string& s : sockets) {
      const std::string file = fs::path(s).filename().string();
      add(ServedArray{.name = file.substr(0, file.size() - 4), .control = s});
    }
  }
  for (ServedArray& a : found) ProbeServedArray(a, options.timeout_ms);
  return found;
}

}  // namespace uraid::tool
