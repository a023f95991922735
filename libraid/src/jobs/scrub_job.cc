// SPDX-License-Identifier: MIT
// The check/repair job's windows (ScrubJob::Run) and the offline parity
// check, over the jobs' parity scan (stripe_scanner.h).

#include "jobs/scrub_job.h"

#include "base/status_macros.h"

namespace uraid {

absl::StatusOr<uint64_t> ScrubJob::CheckParity(
    const Shape& sh, std::vector<uint64_t>* first_bad) {
  absl::StatusOr<JobInfo> r = CheckParityReport(sh);
  if (!r.ok()) return r.status();
  if (first_bad != nullptr) *first_bad = r->first_mismatches;
  return r->mismatches;
}

absl::StatusOr<JobInfo> ScrubJob::CheckParityReport(const Shape& sh) {
  JobInfo out;
  out.kind = JobKind::kCheck;
  for (uint64_t s = 0; s < sh.geo.stripe_count(); ++s) {
    bool mismatch;
    int slot = -1;
    RETURN_IF_ERROR(scanner_.ScanStripe(sh, s, /*repair=*/false, &mismatch,
                                        /*skipped=*/nullptr, &slot));
    if (!mismatch) continue;
    ++out.mismatches;
    if (out.first_mismatches.size() < kMaxListedMismatches) {
      out.first_mismatches.push_back(s);
    }
    if (slot < 0) continue;
    ++out.located_mismatches;
    if (out.first_located.size() < kMaxListedMismatches) {
      out.first_located.push_back(s);
      out.first_located_slots.push_back(static_cast<uint64_t>(slot));
    }
  }
  out.result = "completed";
  return out;
}

absl::Status ScrubJob::Run(const Shape& sh, bool repair) {
  const uint64_t C = sh.geo.chunk_bytes();
  StripePass pass;
  pass.stripe_work = C;  // the limits count stripes scanned, not skipped
  pass.max_window = kScanWindowStripes;
  // Stripes that are holes on every member are zeros with zero parity.
  pass.skip = [&](uint64_t at) { return scanner_.SkipHoles(sh, at); };
  pass.work = [&](uint64_t at, uint64_t count, absl::Status* error) {
    std::vector<uint64_t> mismatched;
    std::vector<int> located;  // RAID6: the bad slot P and Q name, or -1
    std::vector<uint64_t> skipped;
    uint64_t skipped_bytes = 0;
    const uint64_t done =
        scanner_.ScanWindow(sh, at, count, repair, &mismatched, error, &skipped,
                            &skipped_bytes, &located);
    counters_.scrubbed_stripes.fetch_add(done, std::memory_order_relaxed);
    if (!mismatched.empty()) runner_.AddMismatches(mismatched, located);
    if (skipped_bytes > 0) runner_.AddUnchecked(skipped_bytes, skipped);
    return done;
  };
  pass.moved = [&](uint64_t at) {
    runner_.Progress(at * C);
    return absl::OkStatus();
  };
  uint64_t stripe = 0;
  return runner_.RunStripePass(pass, sh.geo.stripe_count(), &stripe);
}

}  // namespace uraid
