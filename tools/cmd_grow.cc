// SPDX-License-Identifier: MIT
// `uraid grow`: reshape an array (md's --grow): more members, or another
// layout, chunk size or level (RAID4 <-> RAID5 <-> RAID6), restriped in place
// with Array::Grow. On a served array (--control SOCKET) the server runs the
// reshape while it keeps serving; --wait / --watch follow it. Offline
// (MEMBER...) this process assembles the array writable, runs the reshape
// to its end with a progress line on stderr and closes the array clean.
// The reshape is crash-safe either way: one interrupted (Ctrl-C, kill,
// power cut) resumes where it stopped at the next writable assembly
// (served, or `uraid grow --continue MEMBER...`).
//
// `--consistency-policy resync|ppl` (md's -k) is no reshape: it switches
// the policy with Array::SetConsistencyPolicy (online, or offline on
// MEMBER...) and returns; it takes no other change.

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bad_block_update.h"
#include "commands.h"
#include "common.h"
#include "control_client.h"
#include "interrupt.h"
#include "job_progress.h"
#include "nlohmann/json.hpp"
#include "size_parse.h"
#include "uraid/array.h"
#include "uraid/control_protocol.h"
#include "uraid/geometry.h"

namespace uraid::tool {
namespace {

using json = nlohmann::ordered_json;

struct GrowArgs {
  int raid_devices = 0;  // 0: unchanged
  std::vector<std::string> add;
  std::string layout;  // empty: unchanged
  std::string chunk;   // empty: unchanged
  int level = 0;       // 0: unchanged
  std::string control;
  bool wait = false;
  bool watch = false;
  bool resume = false;             // --continue
  bool run = false;                // md's --run
  std::string consistency_policy;  // empty: unchanged
  std::string update;              // --update: bbl, no-bbl, force-no-bbl
  std::vector<std::string> members;
};

// The requested shape, parsed (the validators already vetted the text).
struct Change {
  std::optional<int> raid_devices;
  std::optional<Layout> layout;
  std::optional<uint64_t> chunk_bytes;
  std::optional<int> level;
  bool any() const { return raid_devices || layout || chunk_bytes || level; }
};

// A usage error found after parsing: "uraid: message", exit 2.
int Usage(const std::string& message) {
  std::fprintf(stderr, "uraid: %s\nRun with --help for more information.\n",
               message.c_str());
  return 2;
}

// md's chunk sizes: a power of two in [4K, 16M].
absl::StatusOr<uint64_t> ParseChunk(const std::string& text) {
  absl::StatusOr<uint64_t> bytes = ParseUnitSizeOption("--chunk", text);
  if (!bytes.ok()) return bytes.status();
  if (*bytes < kMinChunkBytes || *bytes > kMaxChunkBytes ||
      (*bytes & (*bytes - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "chunk \"%s\" must be a power of two from 4K to 16M", text));
  }
  return *bytes;
}

// --layout as mdadm reads it at `level` (at level 6 it takes RAID6's names
// too, and "ddf-N-restart" is not left-asymmetric as it is at level 5).
absl::StatusOr<Layout> LayoutAt(const std::string& text, int level) {
  return ParseLayout(text, level == 6 ? 6 : 5);
}

// The validator's: a layout name valid at some level (the level is known
// once the array is open).
absl::StatusOr<Layout> ParseAnyLayout(std::string_view text) {
  absl::StatusOr<Layout> l = ParseLayout(text, 6);
  return l.ok() ? l : ParseLayout(text);
}

Change ChangeOf(const GrowArgs& args) {
  Change c;
  if (args.raid_devices != 0) c.raid_devices = args.raid_devices;
  if (!args.layout.empty()) c.layout = *ParseAnyLayout(args.layout);
  if (!args.chunk.empty()) c.chunk_bytes = *ParseChunk(args.chunk);
  if (args.level != 0) c.level = args.level;
  return c;
}

// Checks what can be checked before anything is opened; exit code 2 with
// the message printed, or 0.
int CheckUsage(const GrowArgs& args, const Change& change) {
  if (args.control.empty() && args.members.empty()) {
    return Usage("grow needs MEMBER... (offline) or --control SOCKET");
  }
  if (!args.update.empty()) {
    if (!IsBadBlockUpdate(args.update)) {
      return Usage(absl::StrFormat(
          "grow --update=%s: unknown update (bbl, no-bbl or force-no-bbl)",
          args.update));
    }
    if (!args.control.empty() || change.any() || !args.add.empty() ||
        args.resume || !args.consistency_policy.empty()) {
      return Usage(
          "grow --update changes the members' bad-block log offline and "
          "nothing else: MEMBER... only (not a served array)");
    }
    return 0;
  }
  if (!args.consistency_policy.empty()) {
    if (args.resume || change.any() || !args.add.empty()) {
      return Usage(
          "grow --consistency-policy switches the policy and nothing else: "
          "it takes no --raid-devices, --add, --layout, --chunk, --level or "
          "--continue");
    }
    return 0;
  }
  if (args.resume) {
    if (change.any() || !args.add.empty()) {
      return Usage(
          "grow --continue resumes an interrupted reshape to the shape it "
          "started with; it takes no --raid-devices, --add, --layout, "
          "--chunk or --level");
    }
    return 0;
  }
  if (!change.any() && args.add.empty()) {
    return Usage(
        "grow: nothing to change: give --raid-devices, --layout, --chunk, "
        "--level or --consistency-policy");
  }
  if (!args.add.empty() && !change.raid_devices) {
    return Usage(absl::StrFormat(
        "grow: --add needs --raid-devices (the new member count, the %d "
        "added member%s included)",
        args.add.size(), args.add.size() == 1 ? "" : "s"));
  }
  return 0;
}

// Once the current member count is known: every added device needs its
// --add member, and no more. Exit code 2 with the message, or 0.
int CheckAddCount(const GrowArgs& args, const Change& change, int current) {
  if (!change.raid_devices || *change.raid_devices < current) return 0;
  const size_t need = static_cast<size_t>(*change.raid_devices - current);
  if (args.add.size() != need) {
    return Usage(absl::StrFormat(
        "grow: going from %d to %d raid devices needs %d --add member%s; "
        "%d given",
        current, *change.raid_devices, need, need == 1 ? "" : "s",
        args.add.size()));
  }
  return 0;
}

// "4 devices, left-symmetric, chunk 512K, raid5".
std::string ShapeText(const Geometry& g) {
  return absl::StrFormat("%d devices, %s, chunk %s, %s", g.raid_disks(),
                         std::string(LayoutName(g.layout())),
                         FormatSize(g.chunk_bytes()), LevelName(g.level()));
}

std::string Done(const Geometry& from, const Geometry& to) {
  return absl::StrFormat("reshaped to %s: array size %d bytes (was %d)",
                         ShapeText(to), to.array_bytes(), from.array_bytes());
}

// ------------------------------------------------- consistency policy

int RunPolicy(const GrowArgs& args) {
  const ConsistencyPolicy policy =
      *ParseConsistencyPolicy(args.consistency_policy);
  const std::string done = absl::StrFormat("consistency policy is now %s",
                                           ConsistencyPolicyName(policy));
  if (!args.control.empty()) {
    absl::StatusOr<std::unique_ptr<ControlClient>> client =
        ControlClient::Connect(args.control);
    if (!client.ok()) return Fail(client.status());
    control::Request r{.cmd = control::Cmd::kGrow};
    r.consistency_policy = policy;
    absl::StatusOr<json> reply = (*client)->Call(r);
    if (!reply.ok()) return Fail(reply.status());
    std::printf("%s\n", done.c_str());
    return 0;
  }
  absl::StatusOr<std::vector<std::unique_ptr<Member>>> members =
      OpenMembers(args.members, MemberOptions{});
  if (!members.ok()) return Fail(members.status());
  Logger logger = [](const std::string& line) {
    std::fprintf(stderr, "uraid: %s\n", line.c_str());
  };
  AssembleOptions options;
  options.run = args.run;
  absl::StatusOr<std::unique_ptr<Array>> array =
      Array::Assemble(*std::move(members), options, logger);
  if (!array.ok()) return Fail(array.status());
  const ArrayInfo before = (*array)->Info();
  if (policy == ConsistencyPolicy::kPpl && !before.ppl &&
      !before.bitmap.present && (!before.clean || before.resyncing)) {
    // A switch to ppl waits for consistent parity; make it here, first.
    std::fprintf(stderr,
                 "uraid: the array was not shut down cleanly: resyncing it "
                 "before switching to ppl\n");
    if (absl::Status s = (*array)->Resync(); !s.ok()) return Fail(s);
  }
  if (absl::Status s = (*array)->SetConsistencyPolicy(policy); !s.ok()) {
    return Fail(s);
  }
  std::printf("%s\n", done.c_str());
  return 0;
  // The Array closes here: flushed, and marked clean.
}

// ------------------------------------------------------------- online

// `change` with --layout read at the level the array will have.
absl::StatusOr<Change> AtLevel(const GrowArgs& args, Change change,
                               int current_level) {
  if (args.layout.empty()) return change;
  absl::StatusOr<Layout> l =
      LayoutAt(args.layout, args.level ? args.level : current_level);
  if (!l.ok()) return l.status();
  change.layout = *l;
  return change;
}

int RunRemote(const GrowArgs& args, const Change& asked) {
  absl::StatusOr<std::unique_ptr<ControlClient>> client =
      ControlClient::Connect(args.control);
  if (!client.ok()) return Fail(client.status());
  absl::StatusOr<ArrayInfo> before = (*client)->Detail();
  if (!before.ok()) return Fail(before.status());
  absl::StatusOr<Change> at = AtLevel(args, asked, before->geometry.level());
  if (!at.ok()) return Usage(std::string(at.status().message()));
  const Change& change = *at;
  if (int rc = CheckAddCount(args, change, before->geometry.raid_disks())) {
    return rc;
  }
  control::Request r{.cmd = control::Cmd::kGrow};
  r.raid_devices = change.raid_devices;
  for (const std::string& m : args.add) {
    r.add.push_back(MemberPathForServer(m));
  }
  r.layout = change.layout;
  r.chunk_bytes = change.chunk_bytes;
  r.level = change.level;
  absl::StatusOr<json> reply = (*client)->Call(r);
  if (!reply.ok()) return Fail(reply.status());

  absl::StatusOr<ArrayInfo> now = (*client)->Detail();
  if (!now.ok()) return Fail(now.status());
  if (!now->reshape.active) {
    // A takeover (RAID4 <-> RAID5 parity-last, RAID5 <-> RAID6) moves
    // nothing: done at once; to RAID6 the recovery job then rebuilds Q.
    std::printf("%s\n", Done(before->geometry, now->geometry).c_str());
    if (now->geometry.level() != 6 || before->geometry.level() == 6) return 0;
    if (!args.wait && !args.watch) {
      std::printf(
          "Q is being rebuilt onto the new member: follow it with uraid "
          "detail --control %s --watch\n",
          args.control.c_str());
      return 0;
    }
    absl::StatusOr<ArrayInfo> info =
        WaitForJobs(**client, args.watch, &before->last_job);
    if (!info.ok()) return Fail(info.status());
    if (!JobSucceeded(info->last_job) || info->degraded) {
      return Fail(absl::StrCat("rebuilding Q: ", JobOutcome(info->last_job)));
    }
    std::printf("Q rebuilt: the array has two members of redundancy\n");
    return 0;
  }
  std::printf("reshape started: %s -> %s\n",
              ShapeText(before->geometry).c_str(),
              now->reshape.to ? ShapeText(*now->reshape.to).c_str() : "?");
  std::fflush(stdout);
  if (!args.wait && !args.watch) {
    std::printf(
        "follow it with uraid detail --control %s --watch; clients see the "
        "new size when they reconnect after it ends\n",
        args.control.c_str());
    return 0;
  }
  absl::StatusOr<ArrayInfo> info =
      WaitForJobs(**client, args.watch, &before->last_job);
  if (!info.ok()) return Fail(info.status());
  if (!JobSucceeded(info->last_job) || info->reshape.active) {
    return Fail(absl::StrCat("last job: ", JobOutcome(info->last_job),
                             info->reshape.active
                                 ? " (the reshape resumes when the array is "
                                   "next started)"
                                 : ""));
  }
  std::printf("%s; clients see the new size when they reconnect\n",
              Done(before->geometry, info->geometry).c_str());
  return 0;
}

// ------------------------------------------------------------ offline

// Polls the job until it ends, drawing ProgressLine on stderr (in place on
// a terminal, a line per whole percent otherwise). Stops the job once when
// a signal arrives. Returns whether one did.
bool FollowOffline(Array& array) {
  ProgressDrawer drawer(stderr);
  bool stopping = false;
  while (true) {
    const ArrayInfo info = array.Info();
    if (info.job.kind == JobKind::kNone) break;
    if (Interrupted() && !stopping) {
      stopping = true;
      array.StopJob().IgnoreError();  // always OK
    }
    drawer.Draw(info.job);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  drawer.Finish();
  return stopping;
}

int RunOffline(const GrowArgs& args, const Change& asked) {
  // Writable and locked (flock), as any writer of the members; a served
  // array's members are locked by its server, so this refuses them.
  absl::StatusOr<std::vector<std::unique_ptr<Member>>> members =
      OpenMembers(args.members, MemberOptions{});
  if (!members.ok()) return Fail(members.status());
  absl::StatusOr<std::vector<std::unique_ptr<Member>>> added =
      OpenMembers(args.add, MemberOptions{});
  if (!added.ok()) return Fail(added.status());
  const bool tty = isatty(STDERR_FILENO) == 1;
  Logger logger = [tty](const std::string& line) {
    std::fprintf(stderr, "%suraid: %s\n", tty ? "\r\033[K" : "", line.c_str());
  };
  AssembleOptions options;
  options.run = args.run;
  absl::StatusOr<std::unique_ptr<Array>> assembled =
      Array::Assemble(*std::move(members), options, logger);
  if (!assembled.ok()) return Fail(assembled.status());
  Array& array = **assembled;
  const ArrayInfo before = array.Info();
  absl::StatusOr<Change> at = AtLevel(args, asked, before.geometry.level());
  if (!at.ok()) return Usage(std::string(at.status().message()));
  const Change& change = *at;
  const std::string resume_hint = absl::StrFormat(
      "it resumes where it stopped at the next assembly: when the array is "
      "served, or with uraid grow --continue %s",
      args.members.size() == 1 ? args.members[0] : "MEMBER...");

  if (args.resume) {
    if (!before.reshape.active) {
      return Fail(
          "grow --continue: no reshape is in progress on these members");
    }
  } else {
    if (before.reshape.active) {
      return Fail(absl::StrFormat(
          "a reshape to %s is already in progress: finish it first (uraid "
          "grow --continue MEMBER..., or serve the array)",
          before.reshape.to ? ShapeText(*before.reshape.to) : "?"));
    }
    if (int rc = CheckAddCount(args, change, before.geometry.raid_disks())) {
      return rc;
    }
    if (!before.clean || before.resyncing) {
      // Grow refuses while parity is unfinished; do it here, first.
      std::fprintf(stderr,
                   "uraid: the array was not shut down cleanly: resyncing it "
                   "before the reshape\n");
      if (absl::Status s = array.Resync(); !s.ok()) return Fail(s);
    }
  }

  CatchInterrupts();
  // Before Grow: StartBackground resumes a reshape the superblocks record,
  // and would queue a second run of one Grow had just started.
  array.StartBackground();
  const Geometry from = args.resume && before.reshape.from
                            ? *before.reshape.from
                            : before.geometry;
  if (!args.resume) {
    GrowOptions grow;
    grow.raid_devices = change.raid_devices.value_or(0);
    grow.layout = change.layout;
    grow.chunk_bytes = change.chunk_bytes.value_or(0);
    grow.level = change.level.value_or(0);
    grow.add = *std::move(added);
    if (absl::Status s = array.Grow(std::move(grow)); !s.ok()) return Fail(s);
  }
  const bool interrupted = FollowOffline(array);
  const absl::Status done = array.WaitForJob();
  const ArrayInfo after = array.Info();
  if (after.reshape.active) {
    if (interrupted) {
      const uint64_t end =
          after.reshape.to ? after.reshape.to->array_bytes() : 0;
      return Fail(absl::StrFormat(
          "interrupted at %d of %d bytes (%.1f%%) of the reshape; %s",
          after.reshape.position_bytes, end,
          end ? 100.0 * static_cast<double>(after.reshape.position_bytes) /
                    static_cast<double>(end)
              : 0.0,
          resume_hint));
    }
    return Fail(absl::StrCat(
        "reshape did not finish: ",
        done.ok() ? JobOutcome(after.last_job) : std::string(done.message()),
        "; ", resume_hint));
  }
  if (!done.ok()) return Fail(done);
  std::printf("%s\n", Done(from, after.geometry).c_str());
  return 0;
  // The Array closes here: flushed, and marked clean.
}

}  // namespace

void AddGrowCommand(CLI::App& app, Action* action) {
  auto args = std::make_shared<GrowArgs>();
  CLI::App* sub = app.add_subcommand(
      "grow",
      "Reshape an array (md's --grow): add members, or change layout, "
      "chunk or level (4 <-> 5 <-> 6). On a served array with --control (it "
      "keeps serving), or offline on MEMBER...; crash-safe, resumable");
  sub->add_option("--raid-devices,-n", args->raid_devices,
                  "The new member count (more than now: grow; each new one "
                  "needs an --add)")
      ->check(CLI::Range(kMinDisks, kMaxDisks));
  sub->add_option("--add,-a", args->add,
                  "A new member (file, device or NBD URI), once per added "
                  "device, in slot order")
      ->allow_extra_args(false);
  sub->add_option("--layout,-p", args->layout,
                  "The new layout, md's names or numbers at the array's "
                  "(new) level: left-asymmetric, right-asymmetric, "
                  "left-symmetric, right-symmetric, parity-first, "
                  "parity-last or 0-5; at level 6 also ddf-zero-restart, "
                  "ddf-N-restart, ddf-N-continue, left-asymmetric-6, "
                  "right-asymmetric-6, left-symmetric-6, right-symmetric-6, "
                  "parity-first-6 (8-10, 16-20)")
      ->check(StatusValidator(ParseAnyLayout, "LAYOUT"));
  sub->add_option("--chunk,-c", args->chunk,
                  "The new chunk size, a power of two from 4K to 16M")
      ->check(StatusValidator(ParseChunk, "SIZE"));
  sub->add_option("--level,-l", args->level,
                  "The new level: 4, 5 or 6 (RAID5 <-> RAID6 as md's "
                  "takeover: to 6 with --raid-devices N+1 --add Q-MEMBER, "
                  "to 5 from a layout with Q last)")
      ->check(CLI::IsMember({4, 5, 6}));
  sub->add_option("--consistency-policy,-k", args->consistency_policy,
                  "Switch the consistency policy (md's words; no reshape, "
                  "nothing else changes): ppl (a partial parity log, RAID5 "
                  "without a bitmap) or resync; bitmap is refused as md "
                  "refuses it here")
      ->check(StatusValidator(ParseConsistencyPolicy, "POLICY"));
  sub->add_option("--update", args->update,
                  "Offline: bbl adds a bad-block log where there is room, "
                  "no-bbl removes an empty one, force-no-bbl removes it with "
                  "its entries (after the disk was replaced or tested)");
  CLI::Option* control = sub->add_option(
      "--control,-C", args->control,
      "Reshape a served array through its control socket (the plugin's "
      "control=SOCKET)");
  CLI::Option* wait = sub->add_flag(
      "--wait,-W", args->wait,
      "With --control: wait until the reshape ends (exit 1 unless it "
      "completed)");
  CLI::Option* watch = sub->add_flag(
      "--watch,-w", args->watch,
      "With --control: draw the reshape's progress until it ends");
  wait->needs(control)->excludes(watch);
  watch->needs(control);
  CLI::Option* resume = sub->add_flag(
      "--continue", args->resume,
      "Offline: finish a reshape that was interrupted (md's --continue)");
  resume->excludes(control);
  sub->add_flag("--run,-R", args->run,
                "Offline: assemble although a member listed as active was "
                "not given (md's --run; only --continue can use it, a "
                "degraded array does not reshape)")
      ->excludes(control);
  sub->add_option("MEMBER", args->members,
                  "Offline: the array's member files, devices or NBD URIs "
                  "(not while it is served)")
      ->excludes(control);
  sub->final_callback([args, action] {
    *action = [args] {
      const Change change = ChangeOf(*args);
      if (int rc = CheckUsage(*args, change)) return rc;
      if (!args->update.empty()) {
        return RunBadBlockUpdate(args->update, args->members);
      }
      if (!args->consistency_policy.empty()) return RunPolicy(*args);
      if (!args->control.empty()) return RunRemote(*args, change);
      return RunOffline(*args, change);
    };
  });
}

}  // namespace uraid::tool
