// SPDX-License-Identifier: MIT
// The jobs' parity scan (stripe_scanner.h).
#include "jobs/stripe_scanner.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "absl/strings/str_format.h"
#include "base/aligned_buffer.h"
#include "base/status_macros.h"
#include "parity/parity.h"
#include "parity/raid6.h"

namespace uraid {
namespace {

// Resync and parity check work on row windows of at most this many bytes
// per member, so memory stays bounded for any chunk size.
constexpr uint64_t kScanWindow = 1 << 20;

}  // namespace

StripeScanner::StripeScanner(const EngineContext& ctx, StripeWriter& writer,
                             TaskPool& pool)
    : EnginePart(ctx), writer_(writer), pool_(pool) {}

absl::Status StripeScanner::ScanStripe(const Shape& sh, uint64_t stripe,
                                       bool repair, bool* mismatch,
                                       uint64_t* skipped, int* bad_slot) {
  *mismatch = false;
  if (skipped != nullptr) *skipped = 0;
  if (bad_slot != nullptr) *bad_slot = -1;
  const int n = sh.geo.raid_disks();
  const uint64_t C = sh.geo.chunk_bytes();
  const uint64_t win = std::min(C, kScanWindow);
  const int pd = sh.geo.ParityDisk(stripe);
  const int qd = sh.geo.QDisk(stripe);  // -1 below RAID6
  // Two more rows at the end: the P and Q computed (RAID6).
  ScratchOrOwned bufs(ScratchUser::kScan, win * (n + 2));
  auto buf = [&](int i) { return bufs.data() + win * i; };
  StripeLock lock(&locks_, LockKey(sh, stripe));
  RETURN_IF_ERROR(host_.CheckUsable(false));
  int missing, second;
  // RAID6 is checked (and resynced) beside one lost member: its P and Q
  // still have to agree. RAID5's parity then has nothing to agree with.
  if (slots_.MissingAt(n, stripe, &missing, &second) >
      sh.geo.parity_disks() - 1) {
    return absl::FailedPreconditionError(
        "array is degraded: parity cannot be checked");
  }
  const bool any_bad = slots_.AnyBad();
  // Reads the rows at `w` into bufs: false (and the bytes counted as
  // skipped) when a member lists them bad or they turn out unreadable.
  uint64_t in_bufs = ~uint64_t{0};  // the rows the buffers hold
  auto read_rows = [&](uint64_t w, bool* usable) -> absl::Status {
    *usable = false;
    in_bufs = ~uint64_t{0};
    // Rows with a recorded bad block hold no trustworthy copy on that
    // member: neither checked nor rewritten from it (a repair or resync
    // would carry its stale bytes into parity).
    bool bad = false;
    for (int i = 0; any_bad && i < n && !bad; ++i) {
      bad = slots_.BadAt(i, sh.data_offset + stripe * C + w, win);
    }
    if (bad) {
      if (skipped != nullptr) *skipped += win;
      return absl::OkStatus();
    }
    std::vector<MemberIo> ios;
    for (int i = 0; i < n; ++i) {
      if (i == missing) continue;
      ios.push_back(
          MemberIo{MemberIo::kRead, i, buf(i), win, stripe * C + w, {}});
    }
    const SlotGens gens = slots_.CaptureGens();
    io_.Submit(sh, ios, &gens);
    // A read error met by the scrub is corrected like any other (md does
    // the same); only an uncorrectable one stops it.
    bool now_bad = false;
    absl::Status cs = writer_.CorrectPreReads(sh, stripe, ios, &now_bad);
    if (now_bad) {  // blocks lost and listed: skipped, as above
      if (skipped != nullptr) *skipped += win;
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(cs);
    bool slot_failed;
    RETURN_IF_ERROR(host_.AbsorbFailures(ios, &slot_failed));
    *usable = true;
    in_bufs = w;
    return absl::OkStatus();
  };
  // RAID6 locating (bad_slot): the windows that mismatched and what they
  // named; the chunk's verdict is one slot only if every such window
  // named that same slot.
  const bool locate = qd >= 0 && bad_slot != nullptr && missing < 0;
  std::vector<uint64_t> bad_windows;
  bool named_none = false;
  int named = -1;
  for (uint64_t w = 0; w < C; w += win) {
    bool usable;
    RETURN_IF_ERROR(read_rows(w, &usable));
    if (!usable) continue;
    if (locate) {
      bool mism = false;
      int slot = -1;
      RETURN_IF_ERROR(ScanRows6(sh, stripe, stripe * C + w, win, missing,
                                bufs.data(), repair, &mism, &slot));
      if (!mism) continue;
      *mismatch = true;
      bad_windows.push_back(w);
      if (slot < 0 || (named >= 0 && named != slot)) named_none = true;
      named = slot;
      continue;
    }
    if (qd >= 0) {
      RETURN_IF_ERROR(ScanRows6(sh, stripe, stripe * C + w, win, missing,
                                bufs.data(), repair, mismatch));
      if (*mismatch && !repair) return absl::OkStatus();
      continue;
    }
    std::vector<const void*> all;
    for (int i = 0; i < n; ++i) all.push_back(bufs.data() + win * i);
    if (XorIsZero(all, win)) continue;
    *mismatch = true;
    if (!repair) return absl::OkStatus();
    std::vector<const void*> data;
    for (int i = 0; i < n; ++i) {
      if (i != pd) data.push_back(bufs.data() + win * i);
    }
    uint8_t* p = bufs.data() + win * pd;
    Xor(p, data, win);
    std::vector<MemberIo> w_io{
        MemberIo{MemberIo::kWrite, pd, p, win, stripe * C + w, {}}};
    io_.Submit(sh, w_io);
    bool slot_failed;
    RETURN_IF_ERROR(host_.AbsorbFailures(w_io, &slot_failed));
  }
  if (!locate || !*mismatch) return absl::OkStatus();
  const int verdict = named_none ? -1 : named;
  *bad_slot = verdict;
  if (!repair) return absl::OkStatus();
  // The chunk has been seen whole: repair each window that mismatched by
  // the verdict. The last one read is still in the buffers; others are
  // read again (under the same lock, so unchanged).
  for (uint64_t w : bad_windows) {
    if (w != in_bufs) {
      bool usable;
      RETURN_IF_ERROR(read_rows(w, &usable));
      if (!usable) continue;
    }
    RETURN_IF_ERROR(
        RepairRows6(sh, stripe, stripe * C + w, win, verdict, bufs.data()));
  }
  return absl::OkStatus();
}

absl::Status StripeScanner::ScanRows6(const Shape& sh, uint64_t stripe,
                                      uint64_t member_offset, uint64_t win,
                                      int missing, uint8_t* rows, bool repair,
                                      bool* mismatch, int* located) {
  const int n = sh.geo.raid_disks();
  const int pd = sh.geo.ParityDisk(stripe), qd = sh.geo.QDisk(stripe);
  auto row = [&](int i) { return rows + win * i; };
  uint8_t* p = row(n);
  uint8_t* q = row(n + 1);
  std::vector<void*> slots(sh.geo.SyndromeSlots(), nullptr);
  std::vector<int> disk_of(slots.size(), -1);
  for (int i = 0; i < n; ++i) {
    if (i == pd || i == qd) continue;
    const int z = sh.geo.QSlot(stripe, i);
    slots[z] = row(i);
    disk_of[z] = i;
  }
  if (located != nullptr && missing < 0) {
    // mdadm's raid6check: which one chunk P and Q say is bad, if any.
    const std::vector<const void*> data(slots.begin(), slots.end());
    const PQFault f = LocatePQFault(data, row(pd), row(qd), p, q, win);
    *mismatch = f.kind != PQFault::kNone;
    *located = f.kind == PQFault::kP      ? pd
               : f.kind == PQFault::kQ    ? qd
               : f.kind == PQFault::kData ? disk_of[f.slot]
                                          : -1;
    return absl::OkStatus();
  }
  bool p_ok = true, q_ok = true;
  if (missing >= 0 && missing != pd && missing != qd) {
    // A lost data slot holds what P implies: its rows from P, then Q from
    // all the data must match the Q read.
    const int lost[2] = {sh.geo.QSlot(stripe, missing), kLostQ};
    RETURN_IF_ERROR(RecoverPQ(slots, row(pd), q, win, lost));
    q_ok = std::memcmp(q, row(qd), win) == 0;
  } else {
    const std::vector<const void*> data(slots.begin(), slots.end());
    ComputePQ(data, missing == pd ? nullptr : p, missing == qd ? nullptr : q,
              win);
    p_ok = missing == pd || std::memcmp(p, row(pd), win) == 0;
    q_ok = missing == qd || std::memcmp(q, row(qd), win) == 0;
  }
  if (p_ok && q_ok) return absl::OkStatus();
  *mismatch = true;
  if (!repair) return absl::OkStatus();
  // md's repair: P and Q recomputed from the data, whichever differs.
  std::vector<MemberIo> w_io;
  if (!p_ok) {
    w_io.push_back(MemberIo{MemberIo::kWrite, pd, p, win, member_offset, {}});
  }
  if (!q_ok) {
    w_io.push_back(MemberIo{MemberIo::kWrite, qd, q, win, member_offset, {}});
  }
  io_.Submit(sh, w_io);
  bool slot_failed;
  return host_.AbsorbFailures(w_io, &slot_failed);
}

absl::Status StripeScanner::RepairRows6(const Shape& sh, uint64_t stripe,
                                        uint64_t member_offset, uint64_t win,
                                        int bad, uint8_t* rows) {
  const int n = sh.geo.raid_disks();
  const int pd = sh.geo.ParityDisk(stripe), qd = sh.geo.QDisk(stripe);
  if (bad < 0) {  // not located: md's repair
    bool mismatch = false;
    return ScanRows6(sh, stripe, member_offset, win, /*missing=*/-1, rows,
                     /*repair=*/true, &mismatch);
  }
  auto row = [&](int i) { return rows + win * i; };
  std::vector<void*> slots(sh.geo.SyndromeSlots(), nullptr);
  for (int i = 0; i < n; ++i) {
    if (i != pd && i != qd) slots[sh.geo.QSlot(stripe, i)] = row(i);
  }
  // The named chunk rebuilt from the others, as if its member were lost.
  uint8_t* out = row(bad);
  if (bad == pd || bad == qd) {
    const std::vector<const void*> data(slots.begin(), slots.end());
    ComputePQ(data, bad == pd ? out : nullptr, bad == qd ? out : nullptr, win);
  } else {
    const int lost[1] = {sh.geo.QSlot(stripe, bad)};
    RETURN_IF_ERROR(RecoverPQ(slots, row(pd), row(qd), win, lost));
  }
  std::vector<MemberIo> w_io{
      MemberIo{MemberIo::kWrite, bad, out, win, member_offset, {}}};
  io_.Submit(sh, w_io);
  bool slot_failed;
  return host_.AbsorbFailures(w_io, &slot_failed);
}

uint64_t StripeScanner::SkipHoles(const Shape& sh, uint64_t stripe) {
  const uint64_t C = sh.geo.chunk_bytes();
  const uint64_t base = sh.data_offset;
  uint64_t next = sh.geo.member_bytes();
  for (int i = 0; i < sh.geo.raid_disks(); ++i) {
    if (!slots_.Usable(i)) return stripe;
    absl::StatusOr<uint64_t> d =
        slots_[i]->member.load()->NextDataOffset(base + stripe * C);
    if (!d.ok() || *d < base) return stripe;
    next = std::min(next, *d - base);
  }
  return std::max(stripe, std::min(next / C, sh.geo.stripe_count()));
}

uint64_t StripeScanner::ScanWindow(const Shape& sh, uint64_t from,
                                   uint64_t count, bool repair,
                                   std::vector<uint64_t>* mismatched,
                                   absl::Status* error,
                                   std::vector<uint64_t>* skipped_stripes,
                                   uint64_t* skipped_bytes,
                                   std::vector<int>* mismatched_slots) {
  *error = absl::OkStatus();
  std::vector<absl::Status> status(count);
  std::unique_ptr<bool[]> mismatch(new bool[count]());
  std::vector<uint64_t> skipped(count, 0);
  std::vector<int> slot(count, -1);
  pool_.RunEach(count, [&](uint64_t i) {
    status[i] = ScanStripe(sh, from + i, repair, &mismatch[i], &skipped[i],
                           mismatched_slots != nullptr ? &slot[i] : nullptr);
  });
  uint64_t done = 0;
  for (; done < count && status[done].ok(); ++done) {
    if (mismatch[done]) {
      mismatched->push_back(from + done);
      if (mismatched_slots != nullptr) mismatched_slots->push_back(slot[done]);
    }
    if (skipped[done] == 0) continue;
    if (skipped_stripes != nullptr) skipped_stripes->push_back(from + done);
    if (skipped_bytes != nullptr) *skipped_bytes += skipped[done];
  }
  if (done < count) *error = status[done];
  return done;
}

}  // namespace uraid
