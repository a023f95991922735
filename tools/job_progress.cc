// SPDX-License-Identifier: MIT
#include "job_progress.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "event_stream.h"

namespace uraid::tool {

double JobPercent(const JobInfo& job) {
  if (job.total_bytes == 0) return 0;
  const double pct = 100.0 * static_cast<double>(job.done_bytes) /
                     static_cast<double>(job.total_bytes);
  return std::clamp(pct, 0.0, 100.0);
}

int64_t JobEtaSeconds(const JobInfo& job) {
  if (!(job.bytes_per_s > 0) || !std::isfinite(job.bytes_per_s)) return -1;
  if (job.done_bytes >= job.total_bytes) return 0;
  const double left =
      static_cast<double>(job.total_bytes - job.done_bytes) / job.bytes_per_s;
  if (left > 1e9) return -1;
  return static_cast<int64_t>(std::ceil(left));
}

std::string FormatEta(int64_t seconds) {
  if (seconds < 0) return "-";
  return absl::StrFormat("%d:%02d:%02d", seconds / 3600, seconds / 60 % 60,
                         seconds % 60);
}

std::string FormatRate(double bytes_per_s) {
  if (!std::isfinite(bytes_per_s) || bytes_per_s < 0) bytes_per_s = 0;
  return absl::StrFormat("%.1f MB/s", bytes_per_s / 1e6);
}

const char* JobStatusLabel(JobKind kind) {
  switch (kind) {
    case JobKind::kResync:
      return "Resync";
    case JobKind::kRecover:
    case JobKind::kReplace:
      return "Rebuild";
    case JobKind::kCheck:
      return "Check";
    case JobKind::kRepair:
      return "Repair";
    case JobKind::kReshape:
      return "Reshape";
    case JobKind::kNone:
      break;
  }
  return "Job";
}

std::string JobOutcome(const JobInfo& last) {
  if (last.kind == JobKind::kNone) return "no job has run";
  std::string out = absl::StrCat(JobKindName(last.kind), " ",
                                 last.result.empty() ? "ended" : last.result);
  if (last.kind == JobKind::kCheck || last.kind == JobKind::kRepair) {
    absl::StrAppendFormat(&out, ", %d mismatched stripe%s", last.mismatches,
                          last.mismatches == 1 ? "" : "s");
    const uint64_t others = last.mismatches - last.located_mismatches;
    if (last.kind == JobKind::kRepair && others > 0) {
      out += " (parity rewritten)";
    }
    if (last.located_mismatches > 0) {
      // RAID6: the stripes whose one bad chunk P and Q named.
      std::vector<std::string> named;
      for (size_t i = 0;
           i < last.first_located.size() && i < last.first_located_slots.size();
           ++i) {
        named.push_back(absl::StrFormat("stripe %d slot %d",
                                        last.first_located[i],
                                        last.first_located_slots[i]));
      }
      absl::StrAppendFormat(
          &out, "; P and Q name the bad chunk in %d: %s%s%s",
          last.located_mismatches, absl::StrJoin(named, ", "),
          last.located_mismatches > named.size() ? ", ..." : "",
          last.kind == JobKind::kRepair ? " (that chunk rewritten)" : "");
    }
  }
  if (!last.target.empty()) {
    absl::StrAppendFormat(&out, " (%s, slot %d)", last.target, last.slot);
  }
  if (last.unchecked_bytes > 0) {
    // Rows a member's bad-block log lists: its bytes there are not trusted.
    absl::StrAppendFormat(&out,
                          "; %d bytes per member not checked: rows listed in "
                          "bad-block logs (stripes %s)",
                          last.unchecked_bytes,
                          absl::StrJoin(last.first_unchecked, ", "));
  }
  if (last.unrecovered_bytes > 0) {
    // Rows no survivor could give: recorded bad on the target.
    absl::StrAppendFormat(&out,
                          "; %d bytes could not be rebuilt (array "
                          "offsets %s), listed in the target's bad-block log",
                          last.unrecovered_bytes,
                          last.first_unrecovered.empty()
                              ? "parity only"
                              : absl::StrJoin(last.first_unrecovered, ", "));
  }
  return out;
}

bool JobSucceeded(const JobInfo& last) {
  return last.kind == JobKind::kNone || last.result == "completed";
}

std::string ProgressLine(const JobInfo& job) {
  constexpr int kWidth = 30;
  const double pct = JobPercent(job);
  const int filled = static_cast<int>(pct / 100.0 * kWidth);
  std::string bar(kWidth, ' ');
  for (int i = 0; i < filled && i < kWidth; ++i) bar[i] = '=';
  if (filled < kWidth) bar[filled] = '>';
  return absl::StrFormat("[%s] %5.1f%% %s  %s  ETA %s", bar, pct,
                         JobKindName(job.kind), FormatRate(job.bytes_per_s),
                         FormatEta(JobEtaSeconds(job)));
}

namespace {

bool SameJob(const JobInfo& a, const JobInfo& b) {
  return a.kind == b.kind && a.result == b.result &&
         a.done_bytes == b.done_bytes && a.total_bytes == b.total_bytes &&
         a.mismatches == b.mismatches && a.target == b.target &&
         a.slot == b.slot;
}

}  // namespace

ProgressDrawer::ProgressDrawer(FILE* out)
    : out_(out), tty_(isatty(fileno(out)) == 1) {}

void ProgressDrawer::Draw(const JobInfo& job) {
  const std::string line = ProgressLine(job);
  const int pct = static_cast<int>(JobPercent(job));
  if (tty_) {
    std::fprintf(out_, "\r%s\033[K", line.c_str());
    drew_ = true;
  } else if (pct != last_pct_ || job.kind != last_kind_) {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  last_pct_ = pct;
  last_kind_ = job.kind;
  std::fflush(out_);
}

void ProgressDrawer::Finish() {
  if (drew_) std::fprintf(out_, "\n");
  drew_ = false;
}

absl::StatusOr<ArrayInfo> WaitForJobs(ControlClient& client, bool watch,
                                      const JobInfo* started_after) {
  const auto pickup_deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(5);
  ProgressDrawer drawer(stdout);
  // Wakes the poll below when something happens. Opened before the first
  // poll, so a job ending between that poll and the wait still wakes it.
  absl::StatusOr<std::unique_ptr<EventStream>> events =
      EventStream::Open(client.path(), /*cancel_fd=*/-1);
  if (events.ok()) {
    // The current state's lines come first: not news.
    for (int i = 0; i < (*events)->initial(); ++i) {
      if (!(*events)->Next(1000).ok()) break;
    }
  }
  // Waits up to `ms` for an event, or sleeps `ms` without a stream (or
  // once it broke: a server going away is for Detail to report).
  const auto wait = [&](int ms) {
    if (events.ok()) {
      absl::StatusOr<EventJson> e = (*events)->Next(ms);
      if (e.ok() || e.status().code() == absl::StatusCode::kDeadlineExceeded ||
          e.status().code() == absl::StatusCode::kInvalidArgument) {
        return;
      }
      events = e.status();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  };
  while (true) {
    absl::StatusOr<ArrayInfo> info = client.Detail();
    if (!info.ok()) {
      drawer.Finish();
      return info.status();
    }
    if (info->job.kind == JobKind::kNone && started_after != nullptr &&
        SameJob(info->last_job, *started_after) &&
        std::chrono::steady_clock::now() < pickup_deadline) {
      wait(50);
      continue;  // not picked up yet
    }
    started_after = nullptr;  // seen running or finished
    if (info->job.kind == JobKind::kNone) {
      drawer.Finish();
      if (watch) std::printf("%s\n", JobOutcome(info->last_job).c_str());
      std::fflush(stdout);
      return info;
    }
    if (watch) drawer.Draw(info->job);
    wait(500);
  }
}

}  // namespace uraid::tool
