// SPDX-License-Identifier: MIT
// The control channel's server (uraid/control.h): a thread accepting on a
// unix socket, and one thread per connection reading request lines with
// poll() and a deadline, or, for an events subscription, writing the
// array's events from a bounded queue. Stop() wakes every thread through
// one eventfd (it stays readable), then joins them.

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <exception>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/sync.h"
#include "control/control_protocol.h"
#include "control/event_json.h"
#include "control/info_json.h"
#include "control/unix_socket.h"
#include "uraid/control.h"
#include "uraid/geometry.h"

namespace uraid {
namespace {

using Steady = std::chrono::steady_clock;

}  // namespace

class ControlServer::Impl {
 public:
  Impl(std::string path, Array* array, ControlServerOptions options)
      : path_(std::move(path)), array_(array), options_(std::move(options)) {
    if (!options_.open_member) {
      options_.open_member = [](const std::string& spec) {
        return OpenMember(spec);
      };
    }
    options_.idle_timeout_ms = std::max(options_.idle_timeout_ms, 1);
    options_.write_timeout_ms = std::max(options_.write_timeout_ms, 1);
    options_.max_connections = std::max(options_.max_connections, 1);
  }

  ~Impl() { Stop(); }

  absl::Status Listen();
  void Stop();
  const std::string& path() const { return path_; }

 private:
  struct Conn {
    int fd = -1;
    std::thread thread;
    std::atomic<bool> done{false};
  };

  // One events subscriber's queue, filled by the array's listener.
  struct Subscriber {
    Mutex mu;
    std::deque<std::string> lines ABSL_GUARDED_BY(mu);
    uint64_t lost ABSL_GUARDED_BY(mu) = 0;  // dropped since the last catch-up
    int wake_fd = -1;                       // an eventfd the listener signals
  };

  void AcceptLoop();
  void Reap(bool all);
  void Serve(Conn* conn);
  // Answers one request line; sets *subscribe for an allowed "events".
  std::string Handle(std::string_view line, const Peer& peer, bool* subscribe);
  std::string Execute(const control::Request& request);
  // Streams events on `fd` until the client goes, the socket stalls or the
  // server stops.
  void ServeEvents(int fd);
  std::string Resolve(const std::string& name) const;
  // FailedPrecondition when `spec` (to be opened by add, replace or grow)
  // is already a member of this array, naming its slot: opening it again
  // would only meet this server's own lock ("in use by another uraid
  // process", which it is not).
  absl::Status NotOwnMember(const std::string& spec) const;
  void Log(LogLevel level, const std::string& line) const {
    if (options_.logger) options_.logger(level, line);
  }

  const std::string path_;
  Array* const array_;
  ControlServerOptions options_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // an eventfd, readable once stopping
  dev_t dev_ = 0;     // the socket file we created, to remove only it
  ino_t ino_ = 0;
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};
  std::list<std::unique_ptr<Conn>> conns_;  // the accept thread's only
  Mutex stop_mu_;
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;
  Mutex set_mu_;  // serializes "set" (read-modify-write of limits)
};

absl::Status ControlServer::Impl::Listen() {
  if (path_.empty()) {
    return absl::InvalidArgumentError("control socket path is empty");
  }
  if (path_.size() >= sizeof(sockaddr_un::sun_path)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "control socket path %s is %d bytes long; a unix socket path holds "
        "at most %d",
        path_, path_.size(), sizeof(sockaddr_un::sun_path) - 1));
  }
  if (path_.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError("control socket path contains a NUL");
  }
  const sockaddr_un addr = UnixAddress(path_);

  struct stat st;
  if (lstat(path_.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "control socket %s: a file that is not a socket is in the way; "
          "refusing to replace it (remove it or choose another path)",
          path_));
    }
    // A socket: in use when something accepts on it, else stale.
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe < 0) {
      return absl::ErrnoToStatus(errno, "control socket: socket()");
    }
    const int rc =
        connect(probe, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
    const int err = errno;
    close(probe);
    if (rc == 0) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "control socket %s is in use by a running server", path_));
    }
    if (err != ECONNREFUSED && err != ENOENT) {
      return absl::ErrnoToStatus(err,
                                 absl::StrCat("control socket ", path_,
                                              ": cannot tell whether it is in "
                                              "use"));
    }
    if (unlink(path_.c_str()) != 0 && errno != ENOENT) {
      return absl::ErrnoToStatus(errno,
                                 absl::StrCat("control socket ", path_,
                                              ": cannot remove the stale "
                                              "socket"));
    }
  } else if (errno != ENOENT) {
    return absl::ErrnoToStatus(errno, absl::StrCat("control socket ", path_));
  }

  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) {
    return absl::ErrnoToStatus(errno, "control socket: socket()");
  }
  // Linux gives the socket file the socket inode's mode (less the umask) at
  // bind, so it is never reachable by others, and nothing can connect
  // before listen() anyway; the mode is checked again below.
  fchmod(listen_fd_, 0600);
  if (bind(listen_fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) !=
      0) {
    const int err = errno;
    close(listen_fd_);
    listen_fd_ = -1;
    return absl::ErrnoToStatus(
        err, absl::StrCat("control socket ", path_, ": bind"));
  }
  // Mode 0600, or 0660 and the read group (group first, so the socket is
  // never open to the file's previous group).
  const mode_t want = options_.read_group.has_value() ? 0660 : 0600;
  int err = 0;
  if (lstat(path_.c_str(), &st) != 0) {
    err = errno;
  } else if (!S_ISSOCK(st.st_mode)) {
    err = EEXIST;  // replaced under our feet
  } else if (options_.read_group.has_value() &&
             lchown(path_.c_str(), static_cast<uid_t>(-1),
                    static_cast<gid_t>(*options_.read_group)) != 0) {
    err = errno;
  } else if (chmod(path_.c_str(), want) != 0 ||
             lstat(path_.c_str(), &st) != 0) {
    err = errno;
  } else if ((st.st_mode & 07777) != want ||
             (options_.read_group.has_value() &&
              st.st_gid != *options_.read_group)) {
    err = EPERM;
  }
  if (err != 0) {
    unlink(path_.c_str());
    close(listen_fd_);
    listen_fd_ = -1;
    return absl::ErrnoToStatus(
        err, options_.read_group.has_value()
                 ? absl::StrFormat("control socket %s: cannot make it mode "
                                   "0660 with group %s",
                                   path_, options_.read_group_name)
                 : absl::StrCat("control socket ", path_,
                                ": cannot make it mode 0600"));
  }
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0 || listen(listen_fd_, 64) != 0) {
    const int err = errno;
    unlink(path_.c_str());
    close(listen_fd_);
    listen_fd_ = -1;
    if (wake_fd_ >= 0) close(wake_fd_);
    wake_fd_ = -1;
    return absl::ErrnoToStatus(
        err, absl::StrCat("control socket ", path_, ": listen"));
  }
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  return absl::OkStatus();
}

void ControlServer::Impl::Stop() {
  MutexLock lock(&stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  if (listen_fd_ < 0) return;  // never listened
  stopping_ = true;
  const uint64_t one = 1;
  while (write(wake_fd_, &one, sizeof one) < 0 && errno == EINTR) {
  }
  accept_thread_.join();  // it joins the connections
  close(listen_fd_);
  listen_fd_ = -1;
  struct stat st;
  if (lstat(path_.c_str(), &st) == 0 && st.st_dev == dev_ &&
      st.st_ino == ino_) {
    unlink(path_.c_str());
  }
  close(wake_fd_);
  wake_fd_ = -1;
}

void ControlServer::Impl::Reap(bool all) {
  for (auto it = conns_.begin(); it != conns_.end();) {
    if (all || (*it)->done.load()) {
      (*it)->thread.join();
      it = conns_.erase(it);
    } else {
      ++it;
    }
  }
}

void ControlServer::Impl::AcceptLoop() {
  while (!stopping_.load()) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    const int n = poll(fds, 2, 1000);
    Reap(false);
    if (stopping_.load()) break;
    if (n <= 0 || !(fds[0].revents & POLLIN)) continue;
    const int fd =
        accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
          errno == ENOMEM) {
        Log(LogLevel::kError,
            absl::StrCat("control: accept on ", path_, ": ", strerror(errno)));
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      continue;  // EAGAIN, ECONNABORTED, EINTR: nothing to do
    }
    if (conns_.size() >= static_cast<size_t>(options_.max_connections)) {
      WriteAll(fd,
               control::ErrorReply(absl::ResourceExhaustedError(
                   absl::StrFormat("too many control connections (%d open); "
                                   "try again",
                                   conns_.size()))),
               100);
      close(fd);
      continue;
    }
    auto conn = std::make_unique<Conn>();
    conn->fd = fd;
    Conn* c = conn.get();
    try {
      conn->thread = std::thread([this, c] {
        Serve(c);
        c->done = true;
      });
    } catch (const std::exception& e) {  // std::system_error: no threads
      Log(LogLevel::kError,
          absl::StrCat("control: cannot start a connection thread: ",
                       e.what()));
      close(fd);
      continue;
    }
    conns_.push_back(std::move(conn));
  }
  Reap(true);
}

void ControlServer::Impl::Serve(Conn* conn) {
  const int fd = conn->fd;
  const Peer peer = PeerOf(fd, options_.read_group);
  std::string buf;
  size_t scanned = 0;  // bytes of buf known to hold no newline
  bool eof = false;
  Steady::time_point deadline =
      Steady::now() + std::chrono::milliseconds(options_.idle_timeout_ms);
  while (!stopping_.load()) {
    // Answer every complete line, in order.
    size_t nl = buf.find('\n', scanned);
    if (nl == std::string::npos && eof && !buf.empty()) nl = buf.size();
    const bool overlong = nl == std::string::npos
                              ? buf.size() > kControlMaxLineBytes
                              : nl > kControlMaxLineBytes;
    if (overlong) {
      WriteAll(fd,
               control::ErrorReply(absl::InvalidArgumentError(absl::StrFormat(
                   "request line longer than %d bytes; closing the "
                   "connection",
                   kControlMaxLineBytes))),
               options_.write_timeout_ms);
      break;
    }
    if (nl != std::string::npos) {
      bool subscribe = false;
      std::string reply =
          Handle(std::string_view(buf.data(), nl), peer, &subscribe);
      buf.erase(0, std::min(nl + 1, buf.size()));
      scanned = 0;
      if (subscribe) {
        ServeEvents(fd);  // the connection is a subscription from now on
        break;
      }
      if (!WriteAll(fd, reply, options_.write_timeout_ms)) break;
      deadline =
          Steady::now() + std::chrono::milliseconds(options_.idle_timeout_ms);
      continue;
    }
    scanned = buf.size();
    if (eof) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Steady::now());
    if (left.count() <= 0) {
      WriteAll(fd,
               control::ErrorReply(absl::DeadlineExceededError(
                   absl::StrFormat("no complete request within %d ms; "
                                   "closing the connection",
                                   options_.idle_timeout_ms))),
               100);
      break;
    }
    pollfd fds[2] = {{fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    const int n = poll(fds, 2, static_cast<int>(left.count()));
    if (n < 0 && errno != EINTR) break;
    if (n <= 0 || fds[1].revents) continue;  // timeout or stopping: re-check
    char chunk[16384];
    const ssize_t got = recv(fd, chunk, sizeof chunk, 0);
    if (got == 0) {
      eof = true;  // answer a last line without a newline, then close
    } else if (got > 0) {
      buf.append(chunk, static_cast<size_t>(got));
    } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
      break;
    }
  }
  close(fd);
}

std::string ControlServer::Impl::Handle(std::string_view line, const Peer& peer,
                                        bool* subscribe) {
  try {
    absl::StatusOr<control::Request> request = control::ParseRequest(line);
    if (!request.ok()) return control::ErrorReply(request.status());
    const bool reads_only = request->cmd == control::Cmd::kDetail ||
                            request->cmd == control::Cmd::kEvents;
    if (!peer.may_change && !(reads_only && peer.may_read)) {
      const std::string why =
          peer.may_read ? absl::StrFormat(
                              "permission denied: %s is read-only for "
                              "group %s (uid %d)",
                              control::CmdName(request->cmd),
                              options_.read_group_name, peer.uid)
                        : absl::StrFormat(
                              "permission denied: uid %d is neither the "
                              "server's user nor in its read group",
                              peer.uid);
      Log(LogLevel::kWarning,
          absl::StrFormat("control: %s refused (pid %d): %s",
                          control::CmdName(request->cmd), peer.pid, why));
      return control::ErrorReply(absl::PermissionDeniedError(why));
    }
    if (request->cmd == control::Cmd::kEvents) {
      *subscribe = true;
      return "";
    }
    return Execute(*request);
  } catch (const std::exception& e) {  // bad_alloc, or a bug
    return control::ErrorReply(
        absl::InternalError(absl::StrCat("control server: ", e.what())));
  }
}

void ControlServer::Impl::ServeEvents(int fd) {
  auto sub = std::make_shared<Subscriber>();
  sub->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (sub->wake_fd < 0) {
    WriteAll(fd,
             control::ErrorReply(absl::ErrnoToStatus(errno, "events: eventfd")),
             options_.write_timeout_ms);
    return;
  }
  const size_t max_queued = std::max<size_t>(options_.max_queued_events, 1);
  // Runs on the array's threads: queue or count, signal, never block.
  const uint64_t id =
      array_->AddEventListener([sub, max_queued](const Event& e) {
        {
          MutexLock lock(&sub->mu);
          if (sub->lost > 0 || sub->lines.size() >= max_queued) {
            ++sub->lost;
          } else {
            sub->lines.push_back(EventLine(e));
          }
        }
        const uint64_t one = 1;
        (void)!write(sub->wake_fd, &one, sizeof one);
      });
  // The state after subscribing: whatever changes from here on is queued.
  std::vector<Event> state = array_->StateEvents();
  const auto state_text = [](const std::vector<Event>& events) {
    std::string out;
    for (const Event& e : events) out += EventLine(e);
    return out;
  };
  control::Json head = control::Json::object();
  head["initial"] = state.size();
  bool ok = WriteAll(fd, control::OkReply(head) + state_text(state),
                     options_.write_timeout_ms);
  while (ok && !stopping_.load()) {
    std::deque<std::string> lines;
    uint64_t lost = 0;
    {
      MutexLock lock(&sub->mu);
      lines.swap(sub->lines);
      lost = sub->lost;
      sub->lost = 0;
    }
    for (const std::string& line : lines) {
      if (!(ok = WriteAll(fd, line, options_.write_timeout_ms))) break;
    }
    if (ok && lost > 0) {
      // Caught up after dropping some: say how many, then the state again,
      // so that the subscriber's picture is whole.
      state = array_->StateEvents();
      Event gap;
      gap.name = "EventsLost";
      gap.time = state.empty() ? 0 : state.front().time;
      if (!state.empty()) {
        gap.array = state.front().array;
        gap.array_name = state.front().array_name;
      }
      gap.details.emplace_back("count", static_cast<int64_t>(lost));
      ok = WriteAll(fd, EventLine(gap) + state_text(state),
                    options_.write_timeout_ms);
      continue;
    }
    if (!ok || !lines.empty()) continue;
    // Wait for an event, the client going away, or the server stopping.
    pollfd fds[3] = {
        {fd, POLLIN, 0}, {sub->wake_fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    const int n = poll(fds, 3, 1000);
    if (n < 0 && errno != EINTR) break;
    if (fds[1].revents & POLLIN) {
      uint64_t count;
      (void)!read(sub->wake_fd, &count, sizeof count);
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      // A subscriber sends nothing more; anything it does send is
      // ignored, and end of file ends the subscription.
      char chunk[4096];
      const ssize_t got = recv(fd, chunk, sizeof chunk, 0);
      if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN &&
                       errno != EWOULDBLOCK)) {
        break;
      }
    }
  }
  array_->RemoveEventListener(id);
  close(sub->wake_fd);
}

absl::Status ControlServer::Impl::NotOwnMember(const std::string& spec) const {
  const std::string name = Resolve(spec);
  const ArrayInfo info = array_->Info();
  for (const SlotInfo& s : info.slots) {
    if (!s.name.empty() && s.name == name) {
      return absl::FailedPreconditionError(
          absl::StrFormat("%s is already a member of this array (slot %d, %s)",
                          spec, s.slot, SlotStateName(s.state)));
    }
  }
  for (const SlotInfo& s : info.spares) {
    if (s.name == name) {
      return absl::FailedPreconditionError(
          absl::StrCat(spec, " is already a spare of this array"));
    }
  }
  return absl::OkStatus();
}

// A member name as the array knows it: `name` itself when a member has that
// Name(), else the member whose path resolves to the same file.
std::string ControlServer::Impl::Resolve(const std::string& name) const {
  const ArrayInfo info = array_->Info();
  std::vector<std::string> names;
  for (const SlotInfo& s : info.slots) names.push_back(s.name);
  for (const SlotInfo& s : info.spares) names.push_back(s.name);
  for (const std::string& n : names) {
    if (n == name) return name;
  }
  if (IsMemberUri(name)) return name;
  char* want = realpath(name.c_str(), nullptr);
  if (want == nullptr) return name;
  std::string found = name;
  for (const std::string& n : names) {
    if (n.empty() || IsMemberUri(n)) continue;
    char* have = realpath(n.c_str(), nullptr);
    if (have != nullptr && strcmp(have, want) == 0) found = n;
    free(have);
  }
  free(want);
  return found;
}

std::string ControlServer::Impl::Execute(const control::Request& r) {
  using control::Cmd;
  control::Json fields = control::Json::object();
  absl::Status st;
  std::string what = control::CmdName(r.cmd);
  switch (r.cmd) {
    case Cmd::kDetail:
      fields["detail"] = InfoToJson(array_->Info());
      return control::OkReply(fields);
    case Cmd::kEvents:  // Handle streams them; never here
      return control::ErrorReply(
          absl::InternalError("events request reached Execute"));
    case Cmd::kFail: {
      const std::string name = Resolve(r.member);
      what = absl::StrCat("fail ", name);
      st = array_->FailMember(name);
      break;
    }
    case Cmd::kRemove: {
      const std::string name = Resolve(r.member);
      what = absl::StrCat("remove ", name);
      st = array_->RemoveMember(name);
      break;
    }
    case Cmd::kAdd: {
      what = absl::StrCat("add ", r.member);
      st = NotOwnMember(r.member);
      if (!st.ok()) break;
      absl::StatusOr<std::unique_ptr<Member>> m =
          options_.open_member(r.member);
      st = m.ok() ? array_->AddMember(*std::move(m)) : m.status();
      break;
    }
    case Cmd::kReplace: {
      const std::string old_name = Resolve(r.member);
      what = absl::StrCat("replace ", old_name, " with ", r.replacement);
      st = NotOwnMember(r.replacement);
      if (!st.ok()) break;
      absl::StatusOr<std::unique_ptr<Member>> m =
          options_.open_member(r.replacement);
      st = m.ok() ? array_->ReplaceMember(old_name, *std::move(m)) : m.status();
      break;
    }
    case Cmd::kGrow: {
      what = "grow";
      if (r.consistency_policy) {
        absl::StrAppend(&what, " consistency_policy=",
                        ConsistencyPolicyName(*r.consistency_policy));
        st = array_->SetConsistencyPolicy(*r.consistency_policy);
        break;
      }
      if (r.raid_devices) {
        absl::StrAppendFormat(&what, " raid_devices=%d", *r.raid_devices);
      }
      for (const std::string& m : r.add) absl::StrAppend(&what, " add=", m);
      if (r.layout) {
        absl::StrAppend(&what, " layout=", std::string(LayoutName(*r.layout)));
      }
      if (r.chunk_bytes)
        absl::StrAppendFormat(&what, " chunk=%d", *r.chunk_bytes);
      if (r.level) absl::StrAppendFormat(&what, " level=%d", *r.level);
      GrowOptions grow;
      grow.raid_devices = r.raid_devices.value_or(0);
      grow.layout = r.layout;
      grow.chunk_bytes = r.chunk_bytes.value_or(0);
      grow.level = r.level.value_or(0);
      // Every new member opens before anything changes; one that does not
      // open fails the request (the ones opened are closed again).
      for (const std::string& spec : r.add) {
        st = NotOwnMember(spec);
        if (!st.ok()) break;
        absl::StatusOr<std::unique_ptr<Member>> m = options_.open_member(spec);
        if (!m.ok()) {
          st = m.status();
          break;
        }
        grow.add.push_back(*std::move(m));
      }
      if (st.ok()) st = array_->Grow(std::move(grow));
      break;
    }
    case Cmd::kCheck:
    case Cmd::kRepair:
      st = array_->StartScrub(r.cmd == Cmd::kRepair);
      break;
    case Cmd::kStop:
      st = array_->StopJob();
      break;
    case Cmd::kReadOnly:
    case Cmd::kReadWrite: {
      const bool want = r.cmd == Cmd::kReadOnly;
      const bool was = array_->Info().read_only;
      st = array_->SetReadOnly(want);
      if (!st.ok()) break;
      const ArrayInfo after = array_->Info();
      fields["changed"] = was != want;
      fields["read_only"] = after.read_only;
      fields["clean"] = after.clean;
      if (was == want) what = absl::StrCat(what, " (already so)");
      break;
    }
    case Cmd::kSet: {
      MutexLock lock(&set_mu_);
      SpeedLimits limits = array_->Info().speed;
      if (r.speed_min_kib_s) limits.min_kib_s = *r.speed_min_kib_s;
      if (r.speed_max_kib_s) limits.max_kib_s = *r.speed_max_kib_s;
      if (r.busy_share_pct) limits.busy_share_pct = *r.busy_share_pct;
      what = "set";
      if (limits.min_kib_s > limits.max_kib_s) {
        st = absl::InvalidArgumentError(absl::StrFormat(
            "speed_min (%d KiB/s) would be above speed_max (%d KiB/s)",
            limits.min_kib_s, limits.max_kib_s));
        break;
      }
      if (r.speed_min_kib_s || r.speed_max_kib_s || r.busy_share_pct) {
        array_->SetSpeedLimits(limits);
        absl::StrAppendFormat(&what, " speed_min=%d speed_max=%d",
                              limits.min_kib_s, limits.max_kib_s);
        if (r.busy_share_pct) {
          absl::StrAppendFormat(&what, " busy_share=%d", limits.busy_share_pct);
        }
      }
      fields["speed_min"] = limits.min_kib_s;
      fields["speed_max"] = limits.max_kib_s;
      fields["busy_share"] = limits.busy_share_pct;
      if (r.cache_bytes) {
        array_->SetCacheBytes(*r.cache_bytes);
        fields["cache"] = *r.cache_bytes;
        absl::StrAppendFormat(&what, " cache=%d", *r.cache_bytes);
      }
      break;
    }
  }
  Log(st.ok() ? LogLevel::kNotice : LogLevel::kWarning,
      absl::StrCat("control: ", what, ": ",
                   st.ok() ? std::string("done") : std::string(st.message())));
  return st.ok() ? control::OkReply(fields) : control::ErrorReply(st);
}

absl::StatusOr<std::unique_ptr<ControlServer>> ControlServer::Start(
    const std::string& socket_path, Array* array,
    ControlServerOptions options) {
  if (array == nullptr) {
    return absl::InvalidArgumentError("control server: no array");
  }
  auto impl = std::make_unique<Impl>(socket_path, array, std::move(options));
  if (absl::Status s = impl->Listen(); !s.ok()) return s;
  return std::unique_ptr<ControlServer>(new ControlServer(std::move(impl)));
}

ControlServer::ControlServer(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
ControlServer::~ControlServer() { Stop(); }
void ControlServer::Stop() { impl_->Stop(); }
const std::string& ControlServer::socket_path() const { return impl_->path(); }

}  // namespace uraid
