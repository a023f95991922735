// SPDX-License-Identifier: MIT
// `uraid create`: writes md v1.2 superblocks to new members (mdadm --create).
//
// mdadm's safety rails, refused without --force and before anything is
// written: a member holding a filesystem, a partition table or another
// RAID signature (libblkid), and members whose sizes differ by more than
// 1% (the array uses the smallest). An md v1.2 superblock is the
// library's check (Array::Create, CreateOptions::force).
//
// Ctrl-C (SIGINT, SIGTERM): before the superblocks are written nothing is;
// during the initial parity computation the array is closed at its next
// stripe and left needing a resync, which resumes when it is next
// assembled writable. Either way create says which state it left.

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "commands.h"
#include "common.h"
#include "interrupt.h"
#include "job_progress.h"
#include "signature_probe.h"
#include "size_parse.h"
#include "uraid/array.h"
#include "uraid/events.h"
#include "uraid/geometry.h"
#include "uraid/member.h"
#include "uraid/superblock.h"

namespace uraid::tool {
namespace {

// The word md uses for an empty slot on the command line.
constexpr char kMissing[] = "missing";

struct CreateArgs {
  std::string level = "5";
  std::string layout;  // empty: the level's default
  std::string chunk = "512K";
  std::string bitmap = "internal";
  bool bitmap_given = false;       // --bitmap on the command line
  std::string consistency_policy;  // empty: from --bitmap
  std::string bitmap_chunk;
  std::string name = "uraid";
  std::string size;         // empty: the most every member allows
  std::string data_offset;  // empty: mdadm's rule
  bool assume_clean = false;
  bool force = false;
  bool direct = false;
  bool no_bbl = false;  // no bad-block log (mdadm.conf's CREATE bbl=no)
  std::vector<std::string> members;
};

absl::StatusOr<int> ParseLevel(const std::string& text) {
  // mdadm accepts "5", "raid5" and "r5"; so do we.
  if (text == "5" || text == "raid5" || text == "r5") return 5;
  if (text == "6" || text == "raid6" || text == "r6") return 6;
  if (text == "4" || text == "raid4" || text == "r4") return 4;
  return absl::InvalidArgumentError(absl::StrFormat(
      "--level %s is not supported: uraid does raid4, raid5 and raid6", text));
}

absl::StatusOr<CreateOptions> BuildOptions(const CreateArgs& args) {
  CreateOptions options;
  absl::StatusOr<int> level = ParseLevel(args.level);
  if (!level.ok()) return level.status();
  options.level = *level;

  if (options.level == 4) {
    // RAID4 is RAID5 with parity fixed on the last disk; md stores it as
    // level 4 with the parity-last layout.
    options.layout = Layout::kParityLast;
    if (!args.layout.empty()) {
      absl::StatusOr<Layout> layout = ParseLayout(args.layout);
      if (!layout.ok()) return layout.status();
      if (*layout != Layout::kParityLast) {
        return absl::InvalidArgumentError(
            absl::StrFormat("--level 4 always uses layout parity-last, not %s",
                            std::string(LayoutName(*layout))));
      }
    }
  } else if (!args.layout.empty()) {
    // mdadm's names for the level: RAID6 adds the ddf and -6 layouts.
    absl::StatusOr<Layout> layout = ParseLayout(args.layout, options.level);
    if (!layout.ok()) return layout.status();
    options.layout = *layout;
  }

  absl::StatusOr<uint64_t> chunk = ParseUnitSizeOption("--chunk", args.chunk);
  if (!chunk.ok()) return chunk.status();
  options.chunk_bytes = *chunk;

  if (args.bitmap == "internal") {
    options.bitmap = BitmapMode::kInternal;
  } else if (args.bitmap == "none") {
    options.bitmap = BitmapMode::kNone;
    if (!args.bitmap_chunk.empty()) {
      return absl::InvalidArgumentError(
          "--bitmap-chunk makes no sense with --bitmap none");
    }
  } else if (args.bitmap.empty()) {
    return absl::InvalidArgumentError(
        "--bitmap needs internal, none or a file name");
  } else {
    // Anything else names an external bitmap file, as in mdadm (write
    // ./internal for a file called "internal"). Serve and assemble the
    // array with the same --bitmap FILE.
    options.bitmap = BitmapMode::kFile;
    options.bitmap_file = args.bitmap;
  }
  // md's --consistency-policy: bitmap (uraid's default), resync (no
  // bitmap) or ppl (a partial parity log instead of a bitmap).
  if (!args.consistency_policy.empty()) {
    const std::string& policy = args.consistency_policy;
    if (policy != "bitmap" && policy != "resync" && policy != "ppl") {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--consistency-policy %s is not one of bitmap, resync, ppl", policy));
    }
    const bool with_bitmap = options.bitmap != BitmapMode::kNone;
    if (policy == "bitmap" && !with_bitmap) {
      return absl::InvalidArgumentError(
          "--consistency-policy bitmap needs a bitmap, not --bitmap none");
    }
    if (policy != "bitmap" && args.bitmap_given && with_bitmap) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--bitmap %s is not compatible with --consistency-policy %s",
          args.bitmap, policy));
    }
    if (policy != "bitmap") {
      if (!args.bitmap_chunk.empty()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "--bitmap-chunk makes no sense with --consistency-policy %s",
            policy));
      }
      options.bitmap = BitmapMode::kNone;
      options.bitmap_file.clear();
      options.ppl = policy == "ppl";
    }
  }
  if (!args.bitmap_chunk.empty()) {
    absl::StatusOr<uint64_t> bc =
        ParseUnitSizeOption("--bitmap-chunk", args.bitmap_chunk);
    if (!bc.ok()) return bc.status();
    options.bitmap_chunk_bytes = *bc;
  }

  if (args.name.size() > 32) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--name '%s' is %d bytes; md's set_name holds at most 32", args.name,
        args.name.size()));
  }
  options.name = args.name;

  if (!args.size.empty()) {
    absl::StatusOr<uint64_t> size = ParseUnitSizeOption("--size", args.size);
    if (!size.ok()) return size.status();
    if (*size == 0) {
      return absl::InvalidArgumentError("--size must be more than 0");
    }
    options.member_bytes = *size;
  }
  if (!args.data_offset.empty()) {
    // mdadm's --data-offset: where data starts on every member. 0 keeps
    // mdadm's rule; the library checks alignment and the room the
    // metadata needs.
    absl::StatusOr<uint64_t> offset =
        ParseUnitSizeOption("--data-offset", args.data_offset);
    if (!offset.ok()) return offset.status();
    options.data_offset_bytes = *offset;
  }
  options.assume_clean = args.assume_clean;
  options.force = args.force;
  options.bad_block_log = !args.no_bbl;
  return options;
}

void PrintSummary(const ArrayInfo& info, const CreateOptions& options) {
  const Geometry& g = info.geometry;
  int missing = 0;
  for (const SlotInfo& slot : info.slots) {
    if (slot.state != SlotState::kActive) ++missing;
  }
  std::printf("Created array:\n");
  std::printf("           UUID : %s\n", FormatUuid(info.uuid).c_str());
  std::printf("           Name : %s\n", info.name.c_str());
  std::printf("     Raid Level : %s\n", LevelName(g.level()).c_str());
  std::printf("         Layout : %s\n",
              std::string(LayoutName(g.layout())).c_str());
  std::printf("     Chunk Size : %s\n", FormatSize(g.chunk_bytes()).c_str());
  std::printf("   Raid Devices : %d%s\n", g.raid_disks(),
              missing > 0
                  ? absl::StrFormat(" (%d missing: degraded)", missing).c_str()
                  : "");
  std::printf("     Array Size : %llu bytes%s\n",
              static_cast<unsigned long long>(g.array_bytes()),
              MdHumanSize(g.array_bytes()).c_str());
  std::printf("  Used Dev Size : %llu bytes%s\n",
              static_cast<unsigned long long>(g.member_bytes()),
              MdHumanSize(g.member_bytes()).c_str());
  std::printf("    Data Offset : %llu sectors (%s)\n",
              static_cast<unsigned long long>(info.data_offset_bytes / 512),
              FormatSize(info.data_offset_bytes).c_str());
  std::printf("          State : %s\n", info.clean ? "clean" : "active");
  if (info.bitmap.present) {
    // mdadm --detail names an external bitmap by its path.
    std::printf("  Intent Bitmap : %s, %s chunks (%llu bits)\n",
                options.bitmap == BitmapMode::kFile
                    ? options.bitmap_file.c_str()
                    : "Internal",
                FormatSize(info.bitmap.chunk_bytes).c_str(),
                static_cast<unsigned long long>(info.bitmap.chunks));
    if (options.bitmap == BitmapMode::kFile) {
      std::printf(
          "                 (give --bitmap %s to serve and detail: the "
          "superblocks do not name it)\n",
          options.bitmap_file.c_str());
    }
  } else {
    std::printf("  Intent Bitmap : none\n");
  }
  std::printf("Consistency Policy : %s\n", info.ppl              ? "ppl"
                                           : info.bitmap.present ? "bitmap"
                                                                 : "resync");
}

// Refuses members holding something libblkid recognises (mdadm's and
// wipefs's probe). A member with our own md v1.2 superblock is left to
// Array::Create, whose message names the array. NBD URIs are not probed
// (libblkid reads local files and devices only).
absl::Status CheckSignatures(
    const std::vector<std::string>& paths,
    const std::vector<std::unique_ptr<Member>>& members) {
  for (size_t i = 0; i < paths.size(); ++i) {
    if (members[i] == nullptr || IsMemberUri(paths[i])) continue;
    absl::StatusOr<std::optional<Signature>> sig = ProbeSignature(paths[i]);
    if (!sig.ok()) return sig.status();
    if (!sig->has_value()) continue;
    if ((*sig)->type == "linux_raid_member" && (*sig)->version == "1.2") {
      continue;  // Array::Create's "already holds an md superblock"
    }
    return absl::FailedPreconditionError(
        absl::StrFormat("%s holds %s; use --force to overwrite it", paths[i],
                        DescribeSignature(**sig)));
  }
  return absl::OkStatus();
}

// mdadm's 1% rule: the array uses as much of each member as the smallest
// has, so a much larger member wastes the difference. Refused unless
// --force or an explicit --size says how much of each to use.
absl::Status CheckSizes(const std::vector<std::unique_ptr<Member>>& members) {
  const Member* smallest = nullptr;
  const Member* largest = nullptr;
  for (const auto& m : members) {
    if (m == nullptr) continue;
    if (smallest == nullptr || m->Size() < smallest->Size()) smallest = m.get();
    if (largest == nullptr || m->Size() > largest->Size()) largest = m.get();
  }
  if (smallest == nullptr) return absl::OkStatus();
  // largest > smallest * 1.01, in integers.
  if (static_cast<unsigned __int128>(largest->Size()) * 100 <=
      static_cast<unsigned __int128>(smallest->Size()) * 101) {
    return absl::OkStatus();
  }
  std::vector<std::string> losses;
  for (const auto& m : members) {
    if (m == nullptr || m->Size() == smallest->Size()) continue;
    losses.push_back(absl::StrFormat("%s %s of %s", m->Name(),
                                     HumanBytes(m->Size() - smallest->Size()),
                                     HumanBytes(m->Size())));
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "member sizes differ by more than 1%%: the array uses only as much of "
      "each as the smallest, %s, has (%s), so the others would leave unused "
      "%s; use members of one size, --size to say how much of each to use, "
      "or --force",
      smallest->Name(), HumanBytes(smallest->Size()),
      absl::StrJoin(losses, ", ")));
}

// The initial parity computation of a new array (superblocks written,
// resync from stripe 0), followed on stderr until it ends or a signal
// stops it. Exit code: 0 when it completed.
int RunInitialResync(Array& array, const std::vector<std::string>& paths) {
  std::atomic<bool> finished = false;
  const uint64_t listener = array.AddEventListener([&](const Event& e) {
    if (e.name == "ResyncFinished") finished.store(true);
  });
  array.StartBackground();
  ProgressDrawer drawer(stderr);
  while (!finished.load() && !Interrupted()) {
    const ArrayInfo info = array.Info();
    if (!info.resyncing || info.failed) break;
    if (info.job.kind != JobKind::kNone) drawer.Draw(info.job);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  drawer.Finish();
  array.RemoveEventListener(listener);
  const ArrayInfo info = array.Info();
  if (!info.resyncing) return 0;
  const std::string member_list =
      paths.size() <= 4 ? absl::StrJoin(paths, " ") : "MEMBER...";
  const std::string state = absl::StrFormat(
      "the array exists (superblocks written) but its parity is computed "
      "only up to %d of %d bytes per member (%.1f%%): it needs a resync, "
      "which resumes there when it is next served (uraid serve %s) or "
      "repaired (uraid repair %s)",
      info.resync_bytes, info.geometry.member_bytes(),
      info.geometry.member_bytes()
          ? 100.0 * static_cast<double>(info.resync_bytes) /
                static_cast<double>(info.geometry.member_bytes())
          : 0.0,
      member_list, member_list);
  if (Interrupted()) {
    return Fail(
        absl::StrCat("interrupted during the initial parity "
                     "computation; ",
                     state));
  }
  return Fail(absl::StrCat("the initial parity computation stopped; ", state));
}

int RunCreate(const CreateArgs& args) {
  absl::StatusOr<CreateOptions> options = BuildOptions(args);
  if (!options.ok()) return Fail(options.status());

  const int min_disks = options->level == 6 ? kMinRaid6Disks : kMinDisks;
  if (args.members.size() < static_cast<size_t>(min_disks)) {
    return Fail(absl::StrFormat(
        "raid%d needs at least %d members (count 'missing' slots too); got %d",
        options->level, min_disks, args.members.size()));
  }

  // The same file or device twice (by any name) would be opened twice.
  std::vector<std::pair<std::string, struct stat>> seen;
  for (const std::string& path : args.members) {
    struct stat st;
    if (path == kMissing || IsMemberUri(path) || stat(path.c_str(), &st)) {
      continue;
    }
    for (const auto& [other, ost] : seen) {
      if (ost.st_dev == st.st_dev && ost.st_ino == st.st_ino) {
        return Fail(absl::InvalidArgumentError(absl::StrFormat(
            "%s and %s are the same device: give each member once", other,
            path)));
      }
    }
    seen.emplace_back(path, st);
  }

  MemberOptions member_options;
  member_options.direct = args.direct;
  std::vector<std::unique_ptr<Member>> members;
  members.reserve(args.members.size());
  for (const std::string& path : args.members) {
    if (path == kMissing) {
      members.push_back(nullptr);
      continue;
    }
    absl::StatusOr<std::unique_ptr<Member>> member =
        OpenMember(path, member_options);
    if (!member.ok()) return Fail(member.status());
    members.push_back(*std::move(member));
  }

  if (!args.force) {
    if (absl::Status s = CheckSignatures(args.members, members); !s.ok()) {
      return Fail(s);
    }
    if (args.size.empty()) {
      if (absl::Status s = CheckSizes(members); !s.ok()) return Fail(s);
    }
  }

  CatchInterrupts();
  if (Interrupted()) {
    return Fail(
        "interrupted before anything was written: the members are "
        "as they were");
  }
  options->defer_resync = true;  // below, where Ctrl-C can stop it
  const bool tty = isatty(STDERR_FILENO) == 1;
  absl::StatusOr<std::unique_ptr<Array>> array = Array::Create(
      std::move(members), *options, [tty](const std::string& line) {
        std::fprintf(stderr, "%suraid: %s\n", tty ? "\r\033[K" : "",
                     line.c_str());
      });
  if (!array.ok()) return Fail(array.status());
  if (const ArrayInfo info = (*array)->Info(); info.resyncing) {
    if (int rc = RunInitialResync(**array, args.members)) return rc;
  }
  PrintSummary((*array)->Info(), *options);
  return 0;
}

}  // namespace

void AddCreateCommand(CLI::App& app, Action* action) {
  auto args = std::make_shared<CreateArgs>();
  CLI::App* sub = app.add_subcommand(
      "create", "Create an array: write md v1.2 superblocks to the members");
  sub->add_option("--level,-l", args->level, "4, 5 or 6")
      ->capture_default_str();
  sub->add_option("--layout,-p", args->layout,
                  "left-asymmetric, right-asymmetric, left-symmetric "
                  "(default), right-symmetric, parity-first, parity-last, "
                  "or 0-5");
  sub->add_option("--chunk,-c", args->chunk,
                  "Chunk size, with a unit (64K, 1M: a number without one is "
                  "refused, as mdadm would read KiB)")
      ->check(UnitSizeValidator("--chunk"))
      ->capture_default_str();
  CLI::Option* bitmap_opt =
      sub->add_option("--bitmap,-b", args->bitmap,
                      "internal (default), none, or FILE: an external bitmap "
                      "file in md's format (not on the array; an existing "
                      "non-empty file needs --force); serve it with --bitmap "
                      "FILE")
          ->capture_default_str();
  sub->add_option("--consistency-policy,-k", args->consistency_policy,
                  "bitmap (default), resync (no bitmap) or ppl (a partial "
                  "parity log in place of the bitmap; RAID5 only), as md");
  sub->add_option("--bitmap-chunk", args->bitmap_chunk,
                  "Bytes of each member per bitmap bit, with a unit (64M)")
      ->check(UnitSizeValidator("--bitmap-chunk"));
  sub->add_option("--name,-N", args->name, "Array name (md's set_name)")
      ->capture_default_str();
  sub->add_option("--size,-z", args->size,
                  "How much of each member to use, with a unit (10G; "
                  "default: all)")
      ->check(UnitSizeValidator("--size"));
  sub->add_option("--data-offset", args->data_offset,
                  "Where data starts on each member, with a unit (a multiple "
                  "of 4K; default: mdadm's rule, about 0.1% of the member "
                  "for reshape headroom, 1M-aligned). More room lets more "
                  "reshapes (grow) run without a backup file")
      ->check(UnitSizeValidator("--data-offset"));
  sub->add_flag("--assume-clean", args->assume_clean,
                "Skip the initial parity sync (members must be zeroed or "
                "already consistent)");
  sub->add_flag("--force,-f", args->force,
                "Overwrite members that already hold an md superblock, and "
                "an existing --bitmap FILE");
  sub->add_flag("--direct", args->direct, "Open members with O_DIRECT");
  sub->add_flag("--no-bbl", args->no_bbl,
                "Reserve no bad-block log (mdadm.conf's CREATE bbl=no): a "
                "later switch to ppl may then use the space up to the data");
  sub->add_option("MEMBER", args->members,
                  "Member files, devices or NBD URIs in slot order; "
                  "'missing' for an empty slot")
      ->required();
  sub->final_callback([args, action, bitmap_opt] {
    args->bitmap_given = bitmap_opt->count() > 0;
    *action = [args] { return RunCreate(*args); };
  });
}

}  // namespace uraid::tool
