// SPDX-License-Identifier: MIT
// NBD members against real nbdkit servers on unix sockets: round trips at
// any alignment (with the server enforcing its minimum block size), size,
// flush reaching the server, write-zeroes as discard, many threads at once
// over one connection and over multi-conn, read-only exports, errors naming
// the URI, timeouts and killed servers ending in errors rather than hangs,
// reconnection, fork, TLS, and an Array over four NBD members that carries
// on degraded when a member server dies or stops answering.

#include <fcntl.h>
#include <libnbd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "uraid/array.h"
#include "uraid/member.h"

namespace uraid {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string ReadFileText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

size_t CountOf(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos;
       pos = text.find(needle, pos + 1)) {
    ++n;
  }
  return n;
}

void MakeFile(const std::string& path, uint64_t size) {
  int fd = open(path.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
  close(fd);
}

// `nbdkit -U SOCK -P PIDFILE -f --exit-with-parent ARGS...`, stderr to a
// log file beside the socket. Killed (and reaped) when destroyed.
class Nbdkit {
 public:
  // `args` follow the fixed options: filters, the plugin, its parameters.
  static std::unique_ptr<Nbdkit> Start(const std::string& dir,
                                       const std::string& name,
                                       const std::vector<std::string>& args) {
    auto s = std::unique_ptr<Nbdkit>(new Nbdkit);
    s->sock_ = dir + "/" + name + ".sock";
    s->pidfile_ = dir + "/" + name + ".pid";
    s->log_ = dir + "/" + name + ".log";
    // nbdkit never removes either; a stale pid file would let us connect
    // before the server listens.
    unlink(s->sock_.c_str());
    unlink(s->pidfile_.c_str());
    std::vector<std::string> argv = {"nbdkit",
                                     "-U",
                                     s->sock_,
                                     "-P",
                                     s->pidfile_,
                                     "-f",
                                     "--exit-with-parent"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    int logfd =
        open(s->log_.c_str(), O_CREAT | O_WRONLY | O_APPEND | O_CLOEXEC, 0600);
    if (logfd < 0) return nullptr;
    pid_t pid = fork();
    if (pid == 0) {
      dup2(logfd, 1);
      dup2(logfd, 2);
      execvp("nbdkit", cargv.data());
      _exit(127);
    }
    close(logfd);
    if (pid < 0) return nullptr;
    s->pid_ = pid;
    // Bounded wait for the pid file (written once nbdkit listens).
    for (int i = 0; i < 1000; ++i) {
      struct stat st;
      if (stat(s->pidfile_.c_str(), &st) == 0 && st.st_size > 0) return s;
      int status;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        s->pid_ = -1;
        ADD_FAILURE() << "nbdkit exited: " << ReadFileText(s->log_);
        return nullptr;
      }
      usleep(10000);
    }
    ADD_FAILURE() << "nbdkit did not start: " << ReadFileText(s->log_);
    return nullptr;
  }

  ~Nbdkit() { Kill(SIGKILL); }

  // Sends `sig`; for SIGKILL/SIGTERM also waits for the process to go.
  void Kill(int sig = SIGKILL) {
    if (pid_ <= 0) return;
    if (sig == SIGSTOP || sig == SIGCONT) {
      kill(pid_, sig);
      if (sig == SIGSTOP) WaitStopped();
      return;
    }
    kill(pid_, SIGCONT);  // a stopped process would not act on SIGTERM
    kill(pid_, sig);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  std::string uri() const { return "nbd+unix:///?socket=" + sock_; }
  const std::string& sock() const { return sock_; }
  std::string log() const { return ReadFileText(log_); }

 private:
  Nbdkit() = default;

  // SIGSTOP takes effect asynchronously: a worker thread could still
  // answer one more request. Waits (bounded) until every thread is in
  // state T.
  void WaitStopped() {
    const std::string dir = absl::StrCat("/proc/", pid_, "/task");
    for (int i = 0; i < 200; ++i) {
      bool all = true;
      for (const auto& task : std::filesystem::directory_iterator(dir)) {
        const std::string stat = ReadFileText(task.path().string() + "/stat");
        const size_t paren = stat.rfind(')');
        if (paren == std::string::npos || paren + 2 >= stat.size() ||
            stat[paren + 2] != 'T') {
          all = false;
        }
      }
      if (all) return;
      usleep(10000);
    }
    ADD_FAILURE() << "nbdkit " << pid_ << " did not stop";
  }

  std::string sock_, pidfile_, log_;
  pid_t pid_ = -1;
};

class NbdMemberTest : public testing::Test {
 protected:
  void SetUp() override {
    // Short, absolute paths: unix socket names are limited to 108 bytes.
    char tmpl[] = "/tmp/uraid-nbd-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    servers_.clear();  // kill before removing their files
    std::string cmd = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(system(cmd.c_str()), 0);
  }

  // Serves a new file of `size` bytes (or an existing one) with nbdkit's
  // file plugin behind `filters`, plus `params` after the plugin.
  Nbdkit* Serve(const std::string& name, uint64_t size,
                const std::vector<std::string>& filters = {},
                const std::vector<std::string>& params = {},
                bool create = true) {
    const std::string file = dir_ + "/" + name + ".img";
    if (create) MakeFile(file, size);
    std::vector<std::string> args = filters;
    args.push_back("file");
    args.push_back(file);
    args.insert(args.end(), params.begin(), params.end());
    auto s = Nbdkit::Start(dir_, name, args);
    if (s == nullptr) return nullptr;
    servers_.push_back(std::move(s));
    return servers_.back().get();
  }
  // A member on a 1 MiB export behind nbdkit's log filter (outermost, so
  // it records what the member sent, before `filters`), logging to `*log`.
  std::unique_ptr<Member> LoggedMember(std::string* log,
                                       std::vector<std::string> filters = {});
  // A member on a 1 MiB export that does not advertise multi-conn (so a
  // flush on a new connection cannot vouch for an old one's writes), and
  // that export's server stopped (SIGKILL with `kill`, else as servers_
  // are dropped) and started again on the same file.
  std::unique_ptr<Member> SingleConnMember();
  bool RestartSingleConnServer(bool kill);

  std::string FilePath(const std::string& name) const {
    return dir_ + "/" + name + ".img";
  }

  std::string dir_;
  std::vector<std::unique_ptr<Nbdkit>> servers_;
};

MemberOptions Fast(int timeout_ms = 5000, int reconnects = 2) {
  MemberOptions o;
  o.nbd_timeout_ms = timeout_ms;
  o.nbd_reconnects = reconnects;
  return o;
}

const std::vector<std::string> kNoMultiConn = {"--filter=multi-conn"};
const std::vector<std::string> kNoMultiConnParams = {"multi-conn-mode=disable"};

std::unique_ptr<Member> NbdMemberTest::SingleConnMember() {
  Nbdkit* srv = Serve("m", 1 << 20, kNoMultiConn, kNoMultiConnParams);
  if (srv == nullptr) return nullptr;
  absl::StatusOr<std::unique_ptr<Member>> m =
      OpenMember(srv->uri(), Fast(10000, 3));
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

bool NbdMemberTest::RestartSingleConnServer(bool kill) {
  if (kill && !servers_.empty()) servers_.back()->Kill(SIGKILL);
  servers_.clear();
  return Serve("m", 0, kNoMultiConn, kNoMultiConnParams, false) != nullptr;
}

std::unique_ptr<Member> NbdMemberTest::LoggedMember(
    std::string* log, std::vector<std::string> filters) {
  *log = dir_ + "/requests.log";
  filters.insert(filters.begin(), "--filter=log");
  Nbdkit* srv = Serve("m", 1 << 20, filters, {"logfile=" + *log});
  if (srv == nullptr) return nullptr;
  absl::StatusOr<std::unique_ptr<Member>> m = OpenMember(srv->uri(), Fast());
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

// ------------------------------------------------------------ alignment

// 0: no minimum advertised; otherwise the server advertises that minimum
// block size and rejects (EINVAL) any request that breaks it, so every
// unaligned member call must go through our read-modify-write.
class NbdAlignmentTest : public NbdMemberTest,
                         public testing::WithParamInterface<int> {};

TEST_P(NbdAlignmentTest, RoundTripsAtAnyAlignment) {
  constexpr uint64_t kSize = 4 << 20;
  const int min_block = GetParam();
  std::vector<std::string> filters, params;
  if (min_block > 0) {
    filters = {"--filter=blocksize-policy"};
    params = {absl::StrCat("blocksize-minimum=", min_block),
              absl::StrCat("blocksize-preferred=", std::max(min_block, 4096)),
              "blocksize-error-policy=error"};
  }
  Nbdkit* srv = Serve("m", kSize, filters, params);
  ASSERT_NE(srv, nullptr);

  if (min_block > 1) {
    // The server really refuses unaligned requests (libnbd's own check
    // off), so passing below proves the member aligned them.
    nbd_handle* h = nbd_create();
    ASSERT_NE(h, nullptr);
    ASSERT_EQ(nbd_connect_uri(h, srv->uri().c_str()), 0) << nbd_get_error();
    EXPECT_EQ(nbd_get_block_size(h, LIBNBD_SIZE_MINIMUM), min_block);
    nbd_set_strict_mode(h, 0);
    char small[512];
    EXPECT_EQ(nbd_pread(h, small, 100, 100, 0), -1);
    nbd_close(h);
  }

  auto m = OpenMember(srv->uri(), Fast());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->Size(), kSize);
  EXPECT_EQ((*m)->Name(), srv->uri());

  std::vector<uint8_t> ref(kSize, 0);
  std::mt19937 rng(GetParam() + 1);
  for (int i = 0; i < 200; ++i) {
    const size_t len = 1 + rng() % 150000;
    const uint64_t off = rng() % (kSize - len);
    std::vector<uint8_t> buf(len + 1);
    uint8_t* p = buf.data() + (rng() % 2);  // misaligned buffers too
    for (size_t j = 0; j < len; ++j) p[j] = static_cast<uint8_t>(rng());
    ASSERT_TRUE((*m)->Write(p, len, off).ok()) << "write " << len << "@" << off;
    std::copy(p, p + len, ref.begin() + off);

    const size_t rlen = 1 + rng() % 150000;
    const uint64_t roff = rng() % (kSize - rlen);
    std::vector<uint8_t> got(rlen);
    absl::Status s = (*m)->Read(got.data(), rlen, roff);
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_TRUE(std::equal(got.begin(), got.end(), ref.begin() + roff))
        << "read " << rlen << "@" << roff;

    // A vectored read of 1-4 buffers from consecutive bytes: every
    // command at once where aligned, else a bounced Read per buffer.
    std::vector<std::vector<uint8_t>> parts(1 + rng() % 4);
    size_t vlen = 0;
    for (auto& part : parts) {
      part.resize(1 + rng() % 40000);
      vlen += part.size();
    }
    const uint64_t voff = rng() % (kSize - vlen);
    std::vector<iovec> iov;
    for (auto& part : parts) iov.push_back(iovec{part.data(), part.size()});
    s = (*m)->ReadVector(iov, voff);
    ASSERT_TRUE(s.ok()) << s;
    uint64_t at = voff;
    for (const auto& part : parts) {
      ASSERT_TRUE(std::equal(part.begin(), part.end(), ref.begin() + at))
          << "vectored read of " << parts.size() << " at " << voff;
      at += part.size();
    }
  }
  EXPECT_TRUE((*m)->ReadVectorIsOneCall());
  ASSERT_TRUE((*m)->Flush().ok());
  // The bytes landed where they belong on the server's file.
  std::string file = ReadFileText(FilePath("m"));
  ASSERT_EQ(file.size(), kSize);
  EXPECT_TRUE(std::equal(ref.begin(), ref.end(),
                         reinterpret_cast<const uint8_t*>(file.data())));
  // Past the end: OutOfRange naming the URI, nothing sent.
  uint8_t b[2];
  absl::Status s = (*m)->Read(b, 2, kSize - 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(s.message(), HasSubstr(srv->uri()));
}

INSTANTIATE_TEST_SUITE_P(MinBlock, NbdAlignmentTest,
                         testing::Values(0, 512, 4096, 65536));

// ------------------------------------------------------- flush and zero

TEST_F(NbdMemberTest, FlushReachesTheServer) {
  std::string log;
  std::unique_ptr<Member> m = LoggedMember(&log);
  ASSERT_NE(m, nullptr);
  std::vector<uint8_t> data(8192, 0x5a);
  ASSERT_TRUE(m->Write(data.data(), data.size(), 4096).ok());
  EXPECT_EQ(CountOf(ReadFileText(log), " Flush "), 0u);
  ASSERT_TRUE(m->Flush().ok());
  EXPECT_EQ(CountOf(ReadFileText(log), " Flush "), 1u) << ReadFileText(log);
}

// A FUA write is one NBD write with the FUA flag where the export offers
// it (one round trip), and a write then a flush where it does not.
TEST_F(NbdMemberTest, WriteFuaIsOneFuaWriteWhereTheServerOffersIt) {
  std::string log;
  std::unique_ptr<Member> m = LoggedMember(&log);
  ASSERT_NE(m, nullptr);
  std::vector<uint8_t> data(8192, 0x5b);
  ASSERT_TRUE(m->WriteFua(data.data(), data.size(), 4096).ok());
  const std::string requests = ReadFileText(log);
  EXPECT_EQ(CountOf(requests, " Write "), 1u) << requests;
  EXPECT_EQ(CountOf(requests, "fua=1"), 1u) << requests;
  EXPECT_EQ(CountOf(requests, " Flush "), 0u) << requests;
  std::vector<uint8_t> got(data.size());
  ASSERT_TRUE(m->Read(got.data(), got.size(), 4096).ok());
  EXPECT_EQ(got, data);
}

TEST_F(NbdMemberTest, WriteFuaWithoutServerFuaWritesThenFlushes) {
  std::string log;
  // The fua filter's default mode hides FUA from the client.
  std::unique_ptr<Member> m = LoggedMember(&log, {"--filter=fua"});
  ASSERT_NE(m, nullptr);
  std::vector<uint8_t> data(4096, 0x5c);
  ASSERT_TRUE(m->WriteFua(data.data(), data.size(), 0).ok());
  const std::string requests = ReadFileText(log);
  EXPECT_EQ(CountOf(requests, "fua=1"), 0u) << requests;
  EXPECT_EQ(CountOf(requests, " Write "), 1u) << requests;
  EXPECT_EQ(CountOf(requests, " Flush "), 1u) << requests;
}

TEST_F(NbdMemberTest, DiscardReadsBackZerosAtAnyAlignment) {
  constexpr uint64_t kSize = 1 << 20;
  Nbdkit* srv =
      Serve("m", kSize, {"--filter=blocksize-policy"},
            {"blocksize-minimum=4096", "blocksize-error-policy=error"});
  ASSERT_NE(srv, nullptr);
  auto m = OpenMember(srv->uri(), Fast());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE((*m)->DiscardZeroes());
  std::vector<uint8_t> ones(kSize, 0xab);
  ASSERT_TRUE((*m)->Write(ones.data(), kSize, 0).ok());
  struct Range {
    uint64_t off, len;
  };
  // Aligned, unaligned at both ends, inside one block.
  for (Range r :
       {Range{65536, 131072}, Range{300001, 50000}, Range{500100, 100}}) {
    ASSERT_TRUE((*m)->Discard(r.len, r.off).ok()) << r.off;
    std::fill(ones.begin() + r.off, ones.begin() + r.off + r.len, 0);
  }
  std::vector<uint8_t> got(kSize);
  ASSERT_TRUE((*m)->Read(got.data(), kSize, 0).ok());
  EXPECT_EQ(got, ones);
}

TEST_F(NbdMemberTest, NoWriteZeroesMeansNoDiscard) {
  Nbdkit* srv = Serve("m", 1 << 20, {"--filter=nozero"});
  ASSERT_NE(srv, nullptr);
  auto m = OpenMember(srv->uri(), Fast());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE((*m)->DiscardZeroes());
  absl::Status s = (*m)->Discard(4096, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr(srv->uri()));
}

TEST_F(NbdMemberTest, NextDataOffsetSkipsHoles) {
  constexpr uint64_t kSize = 8 << 20;
  Nbdkit* srv = Serve("m", kSize);
  ASSERT_NE(srv, nullptr);
  auto m = OpenMember(srv->uri(), Fast());
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<uint8_t> data(4096, 1);
  ASSERT_TRUE((*m)->Write(data.data(), data.size(), 3 << 20).ok());
  auto next = (*m)->NextDataOffset(0);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, 3u << 20);
  next = (*m)->NextDataOffset((3 << 20) + 4096);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, kSize);
}

// ------------------------------------------------------------ threads

// true: the server advertises multi-conn (the member opens up to 4
// connections); false: multi-conn disabled, one shared connection.
class NbdThreadsTest : public NbdMemberTest,
                       public testing::WithParamInterface<bool> {};

TEST_P(NbdThreadsTest, ManyThreadsAtOnce) {
  constexpr int kThreads = 16;
  constexpr uint64_t kRegion = 256 << 10;
  const bool multi_conn = GetParam();
  const std::string log = dir_ + "/requests.log";
  std::vector<std::string> filters = {"--filter=log", "--filter=delay"};
  std::vector<std::string> params = {"logfile=" + log, "rdelay=2ms",
                                     "wdelay=2ms"};
  if (!multi_conn) {
    filters.push_back("--filter=multi-conn");
    params.push_back("multi-conn-mode=disable");
  }
  Nbdkit* srv = Serve("m", kThreads * kRegion, filters, params);
  ASSERT_NE(srv, nullptr);
  auto m = OpenMember(srv->uri(), Fast(20000));
  ASSERT_TRUE(m.ok()) << m.status();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<uint8_t> ref(kRegion, 0);
      const uint64_t base = t * kRegion;
      for (int i = 0; i < 40; ++i) {
        const size_t len = 1 + rng() % 40000;
        const uint64_t off = rng() % (kRegion - len);
        std::vector<uint8_t> buf(len);
        for (auto& b : buf) b = static_cast<uint8_t>(rng());
        if (!(*m)->Write(buf.data(), len, base + off).ok()) ++failures;
        std::copy(buf.begin(), buf.end(), ref.begin() + off);
        std::vector<uint8_t> got(kRegion);
        if (!(*m)->Read(got.data(), kRegion, base).ok() || got != ref) {
          ++failures;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  ASSERT_TRUE((*m)->Flush().ok());
  const std::string text = ReadFileText(log);
  const size_t connects = CountOf(text, " Connect ");
  if (multi_conn) {
    EXPECT_GE(connects, 2u) << "multi-conn offered but one connection used";
    EXPECT_LE(connects, 4u);
  } else {
    EXPECT_EQ(connects, 1u) << "no multi-conn, yet several connections";
  }
}

INSTANTIATE_TEST_SUITE_P(MultiConn, NbdThreadsTest, testing::Bool());

// ------------------------------------------------------ read-only, errors

TEST_F(NbdMemberTest, ReadOnlyExportRefusesWrites) {
  const std::string file = dir_ + "/ro.img";
  MakeFile(file, 1 << 20);
  auto srv = Nbdkit::Start(dir_, "ro", {"-r", "file", file});
  ASSERT_NE(srv, nullptr);
  auto m = OpenMember(srv->uri(), Fast());
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<uint8_t> buf(4096, 7);
  absl::Status s = (*m)->Write(buf.data(), buf.size(), 8192);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr(srv->uri()));
  EXPECT_THAT(s.message(), HasSubstr("read-only"));
  EXPECT_FALSE((*m)->DiscardZeroes());
  EXPECT_TRUE((*m)->Read(buf.data(), buf.size(), 8192).ok());
  EXPECT_EQ(buf[0], 0);
  EXPECT_TRUE((*m)->Flush().ok());
}

TEST_F(NbdMemberTest, ReadOnlyOptionRefusesWrites) {
  Nbdkit* srv = Serve("m", 1 << 20);
  ASSERT_NE(srv, nullptr);
  MemberOptions o = Fast();
  o.read_only = true;
  auto m = OpenMember(srv->uri(), o);
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<uint8_t> buf(4096, 7);
  absl::Status s = (*m)->Write(buf.data(), buf.size(), 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr(srv->uri()));
  EXPECT_FALSE((*m)->DiscardZeroes());
}

TEST_F(NbdMemberTest, ErrorsNameTheUri) {
  // Nobody listening.
  const std::string nobody = "nbd+unix:///?socket=" + dir_ + "/none.sock";
  auto m = OpenMember(nobody, Fast());
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr(nobody));
  // Not a URI libnbd knows.
  m = OpenMember("bogus://host/x", Fast());
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("bogus://host/x"));
  // Bad options.
  MemberOptions o = Fast();
  o.nbd_connections = 0;
  EXPECT_EQ(OpenMember(nobody, o).status().code(),
            absl::StatusCode::kInvalidArgument);

  // The server answers reads with EIO: an error naming URI and offset,
  // returned at once (a server error is not retried like a lost link).
  const std::string log = dir_ + "/requests.log";
  Nbdkit* srv =
      Serve("m", 1 << 20, {"--filter=log", "--filter=error"},
            {"logfile=" + log, "error-pread=EIO", "error-pread-rate=100%"});
  ASSERT_NE(srv, nullptr);
  m = OpenMember(srv->uri(), Fast(5000, 3));
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<uint8_t> buf(4096);
  absl::Status s = (*m)->Read(buf.data(), buf.size(), 12288);
  EXPECT_EQ(CountOf(ReadFileText(log), " Read "), 1u) << ReadFileText(log);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(srv->uri()));
  EXPECT_THAT(s.message(), HasSubstr("pread at 12288"));
  EXPECT_THAT(s.message(), HasSubstr("Input/output error"));
  // Writes still work on the same member.
  EXPECT_TRUE((*m)->Write(buf.data(), buf.size(), 12288).ok());
}

// ---------------------------------------------- timeouts and dead servers

TEST_F(NbdMemberTest, SlowServerTimesOutThenMemberReconnects) {
  Nbdkit* srv = Serve("m", 1 << 20, {"--filter=delay"}, {"rdelay=20"});
  ASSERT_NE(srv, nullptr);
  auto m = OpenMember(srv->uri(), Fast(500));
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<uint8_t> buf(4096, 3);
  const auto start = Clock::now();
  absl::Status s = (*m)->Read(buf.data(), buf.size(), 0);
  const double took = SecondsSince(start);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(s.message(), HasSubstr(srv->uri()));
  EXPECT_THAT(s.message(), HasSubstr("no reply within 500 ms"));
  EXPECT_GE(took, 0.45);
  EXPECT_LT(took, 3.0);
  // For one more timeout, calls fail at once instead of waiting again.
  const auto fast = Clock::now();
  s = (*m)->Write(buf.data(), buf.size(), 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("not answering"));
  EXPECT_LT(SecondsSince(fast), 0.3);
  // Then the member reconnects; writes are not delayed and succeed.
  usleep(600000);
  s = (*m)->Write(buf.data(), buf.size(), 0);
  EXPECT_TRUE(s.ok()) << s;
}

TEST_F(NbdMemberTest, StoppedServerTimesOutEveryCall) {
  Nbdkit* srv = Serve("m", 1 << 20);
  ASSERT_NE(srv, nullptr);
  MemberOptions o = Fast(600);
  o.nbd_connections = 1;  // the next read uses the connection just tested
  auto m = OpenMember(srv->uri(), o);
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<uint8_t> buf(4096);
  ASSERT_TRUE((*m)->Read(buf.data(), buf.size(), 0).ok());
  srv->Kill(SIGSTOP);
  // First a request that gets no reply, then (after the fail-fast window)
  // a reconnection whose handshake gets none.
  for (const char* what : {"no reply within 600 ms", "connect"}) {
    const auto start = Clock::now();
    absl::Status s = (*m)->Read(buf.data(), buf.size(), 0);
    const double took = SecondsSince(start);
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    EXPECT_THAT(s.message(), HasSubstr(srv->uri()));
    EXPECT_THAT(std::string(s.message()), HasSubstr(what));
    EXPECT_GE(took, 0.55);
    EXPECT_LT(took, 3.0);
    usleep(650000);  // past the fail-fast window
  }
  srv->Kill(SIGCONT);
  absl::Status s = (*m)->Read(buf.data(), buf.size(), 0);
  EXPECT_TRUE(s.ok()) << s;
}

// A big write to a server that stopped reading fills the socket: libnbd
// then waits to send, not to receive, and the timeout must still end it.
TEST_F(NbdMemberTest, StoppedServerDuringALargeWriteTimesOut) {
  constexpr uint64_t kBig = 32 << 20;
  Nbdkit* srv = Serve("m", kBig);
  ASSERT_NE(srv, nullptr);
  MemberOptions o = Fast(700);
  o.nbd_connections = 1;
  auto m = OpenMember(srv->uri(), o);
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<uint8_t> data(kBig, 0x31);
  srv->Kill(SIGSTOP);
  const auto start = Clock::now();
  absl::Status s = (*m)->Write(data.data(), data.size(), 0);
  const double took = SecondsSince(start);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(s.message(), HasSubstr("pwrite at 0"));
  EXPECT_LT(took, 3.0);
  srv->Kill(SIGCONT);
}

TEST_F(NbdMemberTest, KilledServerGivesAnErrorNotAHang) {
  Nbdkit* srv = Serve("m", 1 << 20);
  ASSERT_NE(srv, nullptr);
  auto m = OpenMember(srv->uri(), Fast(10000, 2));
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<uint8_t> buf(4096, 1);
  ASSERT_TRUE((*m)->Write(buf.data(), buf.size(), 0).ok());
  srv->Kill(SIGKILL);
  const auto start = Clock::now();
  absl::Status s = (*m)->Read(buf.data(), buf.size(), 0);
  EXPECT_LT(SecondsSince(start), 3.0);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(srv->uri()));
  EXPECT_THAT(s.message(), HasSubstr("gave up after 2 reconnect attempts"));
}

TEST_F(NbdMemberTest, RequestsInFlightFailWhenTheServerDies) {
  Nbdkit* srv = Serve("m", 1 << 20, {"--filter=delay"}, {"rdelay=5"});
  ASSERT_NE(srv, nullptr);
  auto m = OpenMember(srv->uri(), Fast(20000, 1));
  ASSERT_TRUE(m.ok()) << m.status();
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint8_t> buf(4096);
      if (!(*m)->Read(buf.data(), buf.size(), t * 4096).ok()) ++errors;
    });
  }
  usleep(300000);  // all eight are waiting on the server
  srv->Kill(SIGKILL);
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 8);
  EXPECT_LT(SecondsSince(start), 4.0);  // not the 5 s delay, not the timeout
}

TEST_F(NbdMemberTest, ReconnectsToARestartedServer) {
  Nbdkit* srv = Serve("m", 1 << 20);
  ASSERT_NE(srv, nullptr);
  const std::string uri = srv->uri();
  auto m = OpenMember(uri, Fast(10000, 3));
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<uint8_t> buf(65536, 0x42);
  ASSERT_TRUE((*m)->Write(buf.data(), buf.size(), 65536).ok());
  srv->Kill(SIGKILL);
  servers_.clear();
  ASSERT_NE(Serve("m", 0, {}, {}, /*create=*/false), nullptr);
  std::vector<uint8_t> got(buf.size());
  absl::Status s = (*m)->Read(got.data(), got.size(), 65536);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(got, buf);
  // multi-conn: a flush on the new connection covers the old one's writes.
  EXPECT_TRUE((*m)->Flush().ok());
}

TEST_F(NbdMemberTest, LostUnflushedWritesWithoutMultiConnFailFlush) {
  std::unique_ptr<Member> m = SingleConnMember();
  ASSERT_NE(m, nullptr);
  std::vector<uint8_t> buf(4096, 9);
  ASSERT_TRUE(m->Write(buf.data(), buf.size(), 0).ok());
  ASSERT_TRUE(m->Flush().ok());  // flushed: losing the link is harmless
  ASSERT_TRUE(RestartSingleConnServer(/*kill=*/true));
  absl::Status s = m->Read(buf.data(), buf.size(), 0);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(m->Flush().ok());
  ASSERT_TRUE(m->Write(buf.data(), buf.size(), 0).ok());  // not flushed
  ASSERT_TRUE(RestartSingleConnServer(/*kill=*/false));
  ASSERT_TRUE(m->Write(buf.data(), buf.size(), 4096).ok());
  s = m->Flush();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("multi-conn"));
}

// A FUA write was durable when acknowledged: losing the connection after
// it loses nothing a flush must vouch for (unlike a plain write's, above).
TEST_F(NbdMemberTest, LostConnectionAfterOnlyFuaWritesLosesNothing) {
  std::unique_ptr<Member> m = SingleConnMember();
  ASSERT_NE(m, nullptr);
  std::vector<uint8_t> buf(4096, 7);
  ASSERT_TRUE(m->WriteFua(buf.data(), buf.size(), 0).ok());
  ASSERT_TRUE(RestartSingleConnServer(/*kill=*/true));
  std::vector<uint8_t> got(buf.size());
  absl::Status s = m->Read(got.data(), got.size(), 0);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(got, buf);
  EXPECT_TRUE(m->Flush().ok());
}

// nbdkit opens members, then forks into the background: the child must not
// share the parent's connection (both would read each other's replies).
TEST_F(NbdMemberTest, ForkedChildUsesItsOwnConnection) {
  constexpr uint64_t kHalf = 1 << 20;
  Nbdkit* srv = Serve("m", 2 * kHalf);
  ASSERT_NE(srv, nullptr);
  // One connection, no reconnection: a shared socket would show as errors
  // rather than be papered over by reconnecting.
  MemberOptions o = Fast(5000, 0);
  o.nbd_connections = 1;
  auto m = OpenMember(srv->uri(), o);
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<uint8_t> buf(4096);
  ASSERT_TRUE((*m)->Read(buf.data(), buf.size(), 0).ok());

  // Parent and child hammer their own halves at the same time.
  auto hammer = [&m](uint64_t base, uint8_t seed) {
    std::mt19937 rng(seed);
    for (int i = 0; i < 300; ++i) {
      std::vector<uint8_t> data(4096 + rng() % 8192);
      for (auto& b : data) b = static_cast<uint8_t>(rng());
      const uint64_t off = base + rng() % (kHalf - data.size());
      if (!(*m)->Write(data.data(), data.size(), off).ok()) return false;
      std::vector<uint8_t> got(data.size());
      if (!(*m)->Read(got.data(), got.size(), off).ok()) return false;
      if (got != data) return false;
    }
    return true;
  };
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(hammer(kHalf, 2) ? 0 : 1);
  const bool parent_ok = hammer(0, 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(parent_ok);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST_F(NbdMemberTest, TlsWithPsk) {
  const std::string psk = dir_ + "/psk.keys";
  {
    std::ofstream f(psk);
    f << "alice:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd"
         "ef\n";
  }
  chmod(psk.c_str(), 0600);
  const std::string file = dir_ + "/tls.img";
  MakeFile(file, 1 << 20);
  auto srv = Nbdkit::Start(dir_, "tls",
                           {"--tls=require", "--tls-psk=" + psk, "file", file});
  ASSERT_NE(srv, nullptr);
  const std::string uri =
      "nbds+unix://alice@/?socket=" + srv->sock() + "&tls-psk-file=" + psk;
  auto m = OpenMember(uri, Fast());
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<uint8_t> data(10000, 0x77), got(10000);
  ASSERT_TRUE((*m)->Write(data.data(), data.size(), 777).ok());
  ASSERT_TRUE((*m)->Read(got.data(), got.size(), 777).ok());
  EXPECT_EQ(got, data);
  // Without TLS the server refuses, and the error names the URI.
  auto plain = OpenMember(srv->uri(), Fast());
  ASSERT_FALSE(plain.ok());
  EXPECT_THAT(plain.status().message(), HasSubstr(srv->uri()));
  // A dead TLS server is an error too (not SIGPIPE, not a hang).
  srv->Kill(SIGKILL);
  absl::Status s = (*m)->Write(data.data(), data.size(), 777);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(uri));
}

TEST_F(NbdMemberTest, OpenMemberDispatchesPathsAndUris) {
  EXPECT_TRUE(IsMemberUri("nbd://host/x"));
  EXPECT_TRUE(IsMemberUri("nbd+unix:///?socket=/s"));
  EXPECT_FALSE(IsMemberUri("/dev/sdb"));
  EXPECT_FALSE(IsMemberUri("m0.img"));
  const std::string file = dir_ + "/plain.img";
  MakeFile(file, 1 << 20);
  auto m = OpenMember(file, {});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->Name(), file);
  EXPECT_EQ((*m)->Size(), 1u << 20);
  // The file options still apply: the lock refuses a second open.
  EXPECT_EQ(OpenMember(file, {}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// ------------------------------------------------------- array over NBD

class NbdArrayTest : public NbdMemberTest {
 protected:
  static constexpr int kMembers = 4;
  static constexpr uint64_t kMemberBytes = 8 << 20;

  void TearDown() override {
    array_.reset();  // its last superblock writes need the servers
    NbdMemberTest::TearDown();
  }

  // Four servers and an array over them, with a reference copy of the
  // data written.
  void Build(const MemberOptions& options) {
    std::vector<std::unique_ptr<Member>> members;
    for (int i = 0; i < kMembers; ++i) {
      Nbdkit* srv = Serve(absl::StrCat("m", i), kMemberBytes);
      ASSERT_NE(srv, nullptr);
      auto m = OpenMember(srv->uri(), options);
      ASSERT_TRUE(m.ok()) << m.status();
      members.push_back(*std::move(m));
    }
    CreateOptions co;
    co.chunk_bytes = 64 << 10;
    co.assume_clean = true;  // fresh zero files: parity already consistent
    auto a = Array::Create(std::move(members), co);
    ASSERT_TRUE(a.ok()) << a.status();
    array_ = *std::move(a);
    ref_.assign(array_->size(), 0);
    std::mt19937 rng(7);
    for (int i = 0; i < 60; ++i) WriteRandom(rng);
    ASSERT_TRUE(array_->Flush().ok());
    ExpectAllReadsMatch();
  }

  void WriteRandom(std::mt19937& rng) {
    const uint64_t blocks = array_->size() / 4096;
    const uint64_t len = 4096 * (1 + rng() % 96);
    const uint64_t off = 4096 * (rng() % (blocks - len / 4096));
    std::vector<uint8_t> data(len);
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    absl::Status s = array_->Write(data.data(), len, off);
    ASSERT_TRUE(s.ok()) << s;
    std::copy(data.begin(), data.end(), ref_.begin() + off);
  }

  void ExpectAllReadsMatch() {
    std::vector<uint8_t> got(ref_.size());
    absl::Status s = array_->Read(got.data(), got.size(), 0);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_TRUE(got == ref_) << "array data differs from what was written";
  }

  std::unique_ptr<Array> array_;
  std::vector<uint8_t> ref_;
};

TEST_F(NbdArrayTest, KilledMemberServerLeavesADegradedArrayWithCorrectData) {
  Build(Fast(5000, 1));
  ASSERT_FALSE(HasFailure());
  // Readers verify continuously while member 2's server dies: reads in
  // flight at that moment must complete from parity, not fail.
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, reads{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&, t] {
      std::mt19937 rng(100 + t);
      while (!stop.load()) {
        const uint64_t len = 4096 * (1 + rng() % 64);
        const uint64_t off = 4096 * (rng() % ((ref_.size() - len) / 4096));
        std::vector<uint8_t> got(len);
        if (!array_->Read(got.data(), len, off).ok() ||
            !std::equal(got.begin(), got.end(), ref_.begin() + off)) {
          ++bad;
        }
        ++reads;
      }
    });
  }
  usleep(200000);
  servers_[2]->Kill(SIGKILL);
  for (int i = 0;
       i < 300 && array_->Info().slots[2].state == SlotState::kActive; ++i) {
    usleep(10000);
  }
  usleep(200000);
  stop.store(true);
  for (auto& th : readers) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(reads.load(), 0);
  ArrayInfo info = array_->Info();
  EXPECT_TRUE(info.degraded);
  EXPECT_FALSE(info.failed);
  EXPECT_EQ(info.slots[2].state, SlotState::kFaulty);
  ExpectAllReadsMatch();
  // Writes continue degraded and read back.
  std::mt19937 rng(9);
  for (int i = 0; i < 20; ++i) WriteRandom(rng);
  ASSERT_TRUE(array_->Flush().ok());
  ExpectAllReadsMatch();
}

TEST_F(NbdArrayTest, MemberThatStopsAnsweringIsFailedAfterTheTimeout) {
  Build(Fast(800, 1));
  ASSERT_FALSE(HasFailure());
  servers_[1]->Kill(SIGSTOP);
  const auto start = Clock::now();
  ExpectAllReadsMatch();
  EXPECT_LT(SecondsSince(start), 10.0);
  EXPECT_EQ(array_->Info().slots[1].state, SlotState::kFaulty);
  std::mt19937 rng(11);
  for (int i = 0; i < 10; ++i) WriteRandom(rng);
  ExpectAllReadsMatch();
  servers_[1]->Kill(SIGCONT);
}

}  // namespace
}  // namespace uraid
