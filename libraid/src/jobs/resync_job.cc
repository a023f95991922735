// SPDX-License-Identifier: MIT
// Resync after an unclean shutdown (and a new array's initial parity)
// (ResyncJob): recomputes the parity of every stripe from the resync front
// on, or, with a write-intent bitmap, of those under set bits, releasing
// each bit once its region is in sync. In the background it is a job of
// the runner (StartBackground queues it first), but StopJob does not stop
// it, because parity must become trustworthy; closing the array does, and
// a restart resumes it. create and Array::Resync run it in their own
// thread.

#include "jobs/resync_job.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "report/array_reporter.h"

namespace uraid {
namespace {

// A resync without a bitmap records its front this often (md checkpoints
// recovery_cp as it goes), so a crash or a stop costs at most this much
// of the pass again instead of all of it. On the job runner's clock.
constexpr int64_t kResyncCheckpointNs = 1'000'000'000;

}  // namespace

absl::Status ResyncJob::Run(const Shape& sh, bool as_job) {
  const uint64_t stripes = sh.geo.stripe_count();
  bool expected = false;
  if (!running_.compare_exchange_strong(expected, true)) {
    return absl::OkStatus();  // another thread is already on it
  }
  uint64_t start = host_.ResyncFront();
  const uint64_t C = sh.geo.chunk_bytes();
  const uint64_t B =
      bitmap_.intent() != nullptr ? bitmap_.intent()->chunk_bytes() : 0;
  {
    Event e = MakeEvent("ResyncStarted");
    e.details.emplace_back("from_stripe", static_cast<int64_t>(start));
    if (B) {
      e.details.emplace_back(
          "dirty_regions",
          static_cast<int64_t>(bitmap_.intent()->DirtyChunks()));
    }
    host_.Report(LogLevel::kNotice, std::move(e),
                 absl::StrFormat(
                     "resync: recomputing parity of stripes %d..%d%s", start,
                     stripes - 1,
                     B ? absl::StrFormat(" where the bitmap has bits set (%d "
                                         "of %d regions)",
                                         bitmap_.intent()->DirtyChunks(),
                                         bitmap_.intent()->chunks())
                       : ""));
  }
  absl::Status st;
  uint64_t repaired = 0, read = 0, regions = 0;
  // With a bitmap only regions whose bit is set can be inconsistent; each
  // is released (ClearChunk) once every stripe in it has been resynced, so
  // progress survives a crash through the bits.
  uint64_t next_region = B ? start * C / B : 0;
  auto release_through = [&](uint64_t end_bytes) {
    for (; B && next_region < bitmap_.intent()->chunks() &&
           (next_region + 1) * B <= end_bytes;
         ++next_region) {
      if (bitmap_.intent()->IsChunkDirty(next_region)) {
        ++regions;
        counters_.resync_bitmap_chunks.fetch_add(1);
      }
      bitmap_.intent()->ClearChunk(next_region);
    }
  };
  auto stripe_dirty = [&](uint64_t s) {
    for (uint64_t k = s * C / B; k <= ((s + 1) * C - 1) / B; ++k) {
      if (bitmap_.intent()->IsChunkDirty(k)) return true;
    }
    return false;
  };
  // Marks the stripes below `end` in sync.
  auto done_through = [&](uint64_t end) {
    host_.SetResyncFront(end);
    release_through(end * C);
  };
  StripePass pass;
  // md's speed limits hold for resync too (StopJob does not stop it:
  // parity must become trustworthy; a restart resumes it). They count
  // stripes actually read: skipped holes and clean regions cost nothing.
  pass.stripe_work = C;
  pass.max_window = kScanWindowStripes;
  pass.honour_cancel = false;
  pass.stopped = [&] { return host_.Closing(); };
  // Stripes that are holes on every member are zeros with zero parity:
  // consistent without reading them (a new array on sparse files).
  pass.skip = [&](uint64_t s) {
    uint64_t skip_to = scanner_.SkipHoles(sh, s);
    if (skip_to == s && (!B || stripe_dirty(s))) return s;
    skip_to = std::max(skip_to, s + 1);
    done_through(skip_to);
    return skip_to;
  };
  // A window of the stripes that need it, scanned at once (each under its
  // own lock). A write to one already scanned but not yet below the resync
  // front still treats its parity as untrusted, which is safe.
  pass.cap = [&](uint64_t s, uint64_t max) {
    uint64_t count = 1;
    while (count < max && (!B || stripe_dirty(s + count)) &&
           scanner_.SkipHoles(sh, s + count) == s + count) {
      ++count;
    }
    return count;
  };
  pass.work = [&](uint64_t s, uint64_t count, absl::Status* error) {
    std::vector<uint64_t> mismatched;
    const uint64_t done =
        scanner_.ScanWindow(sh, s, count, /*repair=*/true, &mismatched, error);
    counters_.resynced_stripes.fetch_add(done, std::memory_order_relaxed);
    counters_.resync_bytes.fetch_add(done * C, std::memory_order_relaxed);
    counters_.resync_repairs.fetch_add(mismatched.size(),
                                       std::memory_order_relaxed);
    read += done;
    repaired += mismatched.size();
    done_through(s + done);
    return done;
  };
  // With a bitmap the cleared bits keep the progress; without one the
  // superblocks' resync_offset does, written every kResyncCheckpointNs
  // and when the pass stops short.
  int64_t last_checkpoint = runner_.NowNs();
  pass.moved = [&](uint64_t s) -> absl::Status {
    if (as_job) runner_.Progress(s * C);
    if (!B && runner_.NowNs() - last_checkpoint > kResyncCheckpointNs) {
      RETURN_IF_ERROR(host_.CheckpointResync());
      last_checkpoint = runner_.NowNs();
    }
    return absl::OkStatus();
  };
  if (as_job) runner_.Progress(start * C);
  uint64_t at = start;
  st = runner_.RunStripePass(pass, stripes, &at);
  if (!B && host_.ResyncFront() < stripes && host_.ResyncFront() > start) {
    // Stopped short (the array closing, an error): keep what was done.
    absl::Status cp = host_.CheckpointResync();
    if (st.ok()) st = cp;
  }
  if (B && host_.ResyncFront() >= stripes) {
    release_through(bitmap_.intent()->chunks() *
                    B);  // the last, partial region
  }
  running_.store(false);
  const auto finished = [&](LogLevel level, const std::string& result,
                            const std::string& line) {
    Event e = MakeEvent("ResyncFinished");
    e.details.emplace_back("result", result);
    e.details.emplace_back("stripe", static_cast<int64_t>(host_.ResyncFront()));
    e.details.emplace_back("repaired", static_cast<int64_t>(repaired));
    host_.Report(level, std::move(e), line);
  };
  if (!st.ok()) {
    finished(LogLevel::kError, std::string(st.message()),
             absl::StrFormat("resync stopped at stripe %d: %s",
                             host_.ResyncFront(), st.message()));
    return st;
  }
  if (host_.ResyncFront() < stripes) {
    finished(LogLevel::kNotice, "interrupted",
             absl::StrFormat("resync interrupted at stripe %d; it resumes "
                             "there at the next start",
                             host_.ResyncFront()));
    return absl::OkStatus();
  }
  finished(LogLevel::kNotice, "completed",
           absl::StrFormat(
               "resync: done: %d stripes read (%d bytes per member%s), %d "
               "skipped, %d repaired",
               read, read * C,
               B ? absl::StrFormat(", %d bitmap regions", regions) : "",
               stripes - start - read, repaired));
  return host_.ResyncDone();
}

}  // namespace uraid
