// SPDX-License-Identifier: MIT
#include "prom_metrics.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "array_health.h"
#include "job_progress.h"
#include "uraid/geometry.h"
#include "uraid/info_json.h"
#include "uraid/superblock.h"

namespace uraid::tool {
namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

// The families in order of first use, each with its samples: the format
// wants every sample of a family after its one HELP and TYPE.
class Exposition {
 public:
  void Add(const std::string& name, const char* type, const char* help,
           const Labels& labels, double value) {
    auto [it, fresh] = index_.try_emplace(name, families_.size());
    if (fresh) families_.push_back({name, type, help, {}});
    std::string line = name;
    if (!labels.empty()) {
      line += "{";
      for (size_t i = 0; i < labels.size(); ++i) {
        absl::StrAppend(&line, i ? "," : "", labels[i].first, "=\"",
                        EscapeLabelValue(labels[i].second), "\"");
      }
      line += "}";
    }
    absl::StrAppend(&line, " ", FormatValue(value), "\n");
    families_[it->second].samples += line;
  }

  std::string Text() const {
    std::string out;
    for (const Family& f : families_) {
      absl::StrAppend(&out, "# HELP ", f.name, " ", f.help, "\n# TYPE ", f.name,
                      " ", f.type, "\n", f.samples);
    }
    return out;
  }

 private:
  static std::string FormatValue(double v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    if (v == std::floor(v) && std::fabs(v) < 1e15) {
      return absl::StrFormat("%d", static_cast<int64_t>(v));
    }
    return absl::StrFormat("%.6g", v);
  }

  struct Family {
    std::string name;
    const char* type;
    const char* help;
    std::string samples;
  };
  std::vector<Family> families_;
  std::map<std::string, size_t> index_;
};

constexpr const char* kGauge = "gauge";
constexpr const char* kCounter = "counter";
constexpr const char* kMdStateHelp = "Indicates the state of md-device.";

// node_exporter's state word for the array (see the header).
const char* MdState(const ArrayInfo& info) {
  switch (info.job.kind) {
    case JobKind::kRecover:
    case JobKind::kReplace:
      return "recovering";
    case JobKind::kResync:
    case JobKind::kRepair:
      return "resync";
    case JobKind::kCheck:
      return "check";
    case JobKind::kReshape:
      return "reshape";
    case JobKind::kNone:
      break;
  }
  return "active";
}

void AddMdState(Exposition& e, const std::string& device, const char* state) {
  for (const char* s :
       {"active", "inactive", "recovering", "resync", "check"}) {
    e.Add("node_md_state", kGauge, kMdStateHelp,
          {{"device", device}, {"state", s}}, std::string(state) == s ? 1 : 0);
  }
}

void AddServed(Exposition& e, const ServedArray& a) {
  const ArrayInfo& info = *a.info;
  const Geometry& g = info.geometry;
  const std::string& dev = a.name;
  const Labels d = {{"device", dev}};
  AddMdState(e, dev, MdState(info));
  int active = 0;
  int failed = 0;
  for (const SlotInfo& s : info.slots) {
    active += s.state == SlotState::kActive ? 1 : 0;
    failed += s.state == SlotState::kFaulty ? 1 : 0;
  }
  const char* disks_help = "Number of active/failed/spare disks of device.";
  e.Add("node_md_disks", kGauge, disks_help,
        {{"device", dev}, {"state", "active"}}, active);
  e.Add("node_md_disks", kGauge, disks_help,
        {{"device", dev}, {"state", "failed"}}, failed);
  e.Add("node_md_disks", kGauge, disks_help,
        {{"device", dev}, {"state", "spare"}},
        static_cast<double>(info.spares.size()));
  e.Add("node_md_disks_required", kGauge, "Total number of disks of device.", d,
        g.raid_disks());
  const double blocks = static_cast<double>(g.array_bytes() >> 10);
  e.Add("node_md_blocks", kGauge, "Total number of blocks on device.", d,
        blocks);
  const bool syncing =
      info.job.kind == JobKind::kResync || info.job.kind == JobKind::kRecover ||
      info.job.kind == JobKind::kReplace || info.job.kind == JobKind::kRepair;
  e.Add("node_md_blocks_synced", kGauge, "Number of blocks synced on device.",
        d, syncing ? std::floor(blocks * JobPercent(info.job) / 100) : blocks);

  // uraid's own.
  e.Add("uraid_array_info", kGauge,
        "The served array's identity and shape (value 1).",
        {{"device", dev},
         {"uuid", FormatUuid(info.uuid)},
         {"md_name", info.name},
         {"level", absl::StrCat("raid", g.level())},
         {"layout", std::string(LayoutName(g.layout()))},
         {"chunk_bytes", absl::StrCat(g.chunk_bytes())},
         {"consistency_policy", info.ppl              ? "ppl"
                                : info.bitmap.present ? "bitmap"
                                                      : "resync"},
         {"control", a.control}},
        1);
  e.Add("uraid_array_health", kGauge,
        "mdadm --detail --test's code: 0 healthy, 1 degraded, 2 failed, 4 "
        "unreadable.",
        d, static_cast<int>(HealthOf(info)));
  e.Add("uraid_array_degraded", kGauge, "1 when one slot is missing or faulty.",
        d, info.degraded ? 1 : 0);
  e.Add("uraid_array_failed", kGauge, "1 when more than one slot is gone.", d,
        info.failed ? 1 : 0);
  e.Add("uraid_array_clean", kGauge,
        "1 when the superblocks say clean (md's clean flag).", d,
        info.clean ? 1 : 0);
  e.Add("uraid_array_read_only", kGauge,
        "1 when read-only: served so, or switched by uraid readonly.", d,
        info.read_only ? 1 : 0);
  e.Add("uraid_array_size_bytes", kGauge, "Bytes the array exports.", d,
        static_cast<double>(g.array_bytes()));
  e.Add("uraid_array_events", kGauge, "md's event count of the superblocks.", d,
        static_cast<double>(info.events));

  if (info.job.kind != JobKind::kNone) {
    const JobInfo& job = info.job;
    const Labels dj = {{"device", dev}, {"job", JobKindName(job.kind)}};
    e.Add("uraid_job_running", kGauge,
          "1 for the background job running (md's sync_action).", dj, 1);
    e.Add("uraid_job_progress_ratio", kGauge,
          "Fraction of the running job done, 0 to 1.", dj,
          JobPercent(job) / 100);
    e.Add("uraid_job_done_bytes", kGauge,
          "Bytes of each member the running job has done.", dj,
          static_cast<double>(job.done_bytes));
    e.Add("uraid_job_total_bytes", kGauge,
          "Bytes of each member the running job goes over.", dj,
          static_cast<double>(job.total_bytes));
    e.Add("uraid_job_speed_bytes_per_second", kGauge,
          "Recent rate of the running job, bytes of each member per second.",
          dj, job.bytes_per_s);
    const int64_t eta = JobEtaSeconds(job);
    if (eta >= 0) {
      e.Add("uraid_job_eta_seconds", kGauge,
            "Seconds the running job has left at its recent rate.", dj,
            static_cast<double>(eta));
    }
    if (job.kind == JobKind::kCheck || job.kind == JobKind::kRepair) {
      e.Add("uraid_job_mismatches", kGauge,
            "Stripes whose parity did not match so far (check, repair).", dj,
            static_cast<double>(job.mismatches));
    }
  }
  if (info.last_job.kind != JobKind::kNone) {
    const JobInfo& last = info.last_job;
    const Labels dj = {{"device", dev},
                       {"job", JobKindName(last.kind)},
                       {"result", last.result}};
    e.Add("uraid_last_job_completed", kGauge,
          "1 when the last finished job completed, 0 when it was "
          "interrupted or failed.",
          dj, last.result == "completed" ? 1 : 0);
    e.Add("uraid_last_job_mismatches", kGauge,
          "Stripes whose parity did not match in the last check or repair.", dj,
          static_cast<double>(last.mismatches));
    e.Add("uraid_last_job_unrecovered_bytes", kGauge,
          "Bytes the last rebuild could not rebuild (recorded bad).", dj,
          static_cast<double>(last.unrecovered_bytes));
  }

  auto member = [&](const SlotInfo& s) {
    const Labels dm = {{"device", dev},
                       {"member", s.name.empty() ? "-" : s.name},
                       {"slot", absl::StrCat(s.slot)}};
    Labels with_state = dm;
    with_state.emplace_back("state", SlotStateName(s.state));
    e.Add("uraid_member_state", kGauge,
          "1 for each member (or empty slot) with its state: active, faulty, "
          "missing, rebuilding, spare.",
          with_state, 1);
    if (s.name.empty()) return;
    e.Add("uraid_member_faulty", kGauge,
          "1 when the member has failed (md's faulty).", dm,
          s.state == SlotState::kFaulty ? 1 : 0);
    e.Add("uraid_member_bad_blocks", kGauge,
          "Ranges listed in the member's bad-block log.", dm,
          static_cast<double>(s.bad_blocks));
    e.Add("uraid_member_bad_sectors", kGauge,
          "Sectors the member's bad-block log covers.", dm,
          static_cast<double>(s.bad_sectors));
    e.Add("uraid_member_want_replacement", kGauge,
          "1 when a write error was recorded instead of failing the member: "
          "replace it.",
          dm, s.want_replacement ? 1 : 0);
    if (s.slot < 0) return;  // a spare does no I/O
    const struct {
      const char* name;
      const char* help;
      uint64_t value;
    } counts[] = {
        {"uraid_member_read_errors_total",
         "Reads of the member that failed after the engine's retry, since "
         "it took the slot.",
         s.read_errors},
        {"uraid_member_write_errors_total",
         "Writes, flushes and discards of the member that failed after the "
         "engine's retry, since it took the slot.",
         s.write_errors},
        {"uraid_member_corrected_read_errors_total",
         "Read errors corrected by rewriting from parity (md's per-device "
         "errors), since the member took the slot.",
         s.corrected_read_errors},
        {"uraid_member_bad_block_records_total",
         "Ranges recorded in the member's bad-block log since it took the "
         "slot.",
         s.bad_block_records},
        {"uraid_member_ios_total",
         "Data reads and writes of the member that succeeded, since it took "
         "the slot.",
         s.ios},
    };
    for (const auto& c : counts) {
      e.Add(c.name, kCounter, c.help, dm, static_cast<double>(c.value));
    }
    e.Add("uraid_member_io_seconds_total", kCounter,
          "Time the member's successful data reads and writes took; over "
          "uraid_member_ios_total, their mean latency.",
          dm, static_cast<double>(s.io_ns) / 1e9);
    e.Add("uraid_member_latency_seconds", kGauge,
          "Moving average of the member's data I/O time (the last few "
          "dozen I/Os).",
          dm, static_cast<double>(s.latency_ns) / 1e9);
  };
  for (const SlotInfo& s : info.slots) member(s);
  for (const SlotInfo& s : info.spares) member(s);

  if (info.bitmap.present) {
    e.Add("uraid_bitmap_chunks", kGauge, "Chunks of the write-intent bitmap.",
          d, static_cast<double>(info.bitmap.chunks));
    e.Add("uraid_bitmap_dirty_chunks", kGauge,
          "Bits set in the write-intent bitmap.", d,
          static_cast<double>(info.bitmap.dirty_chunks));
  }
  e.Add("uraid_speed_limit_min_kib_per_second", kGauge,
        "md's sync_speed_min, per member.", d,
        static_cast<double>(info.speed.min_kib_s));
  e.Add("uraid_speed_limit_max_kib_per_second", kGauge,
        "md's sync_speed_max, per member.", d,
        static_cast<double>(info.speed.max_kib_s));
  for (const auto& [name, field] : CounterFields()) {
    e.Add(absl::StrCat("uraid_", name, "_total"), kCounter,
          "Engine counter since the server opened the array (uraid detail "
          "lists them).",
          d, static_cast<double>(info.counters.*field));
  }
}

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string PrometheusText(const std::vector<ServedArray>& arrays) {
  Exposition e;
  for (const ServedArray& a : arrays) {
    e.Add("uraid_array_up", kGauge,
          "1 when the array's server answered on its control socket.",
          {{"device", a.name}, {"control", a.control}},
          a.presence == Presence::kServed ? 1 : 0);
  }
  for (const ServedArray& a : arrays) {
    if (a.presence == Presence::kServed) {
      AddServed(e, a);
    } else if (a.configured && a.presence == Presence::kNotServed) {
      AddMdState(e, a.name, "inactive");
    }
  }
  return e.Text();
}

}  // namespace uraid::tool
