// SPDX-License-Identifier: MIT
// Tests for `uraid metrics`'s text (tools/prom_metrics.h): node_exporter's
// md series with its names, help and labels, every family once with its
// samples together, label escaping, and what an array nobody serves and
// one that does not answer give.

#include "prom_metrics.h"

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace uraid::tool {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kMiB = 1 << 20;

ServedArray Served(const std::string& name) {
  ServedArray a;
  a.name = name;
  a.control = "/run/uraid/" + name + ".ctl";
  a.presence = Presence::kServed;
  a.info = ArrayInfo{.geometry = *Geometry::Make(5, Layout::kLeftSymmetric,
                                                 64 << 10, 3, 16 * kMiB)};
  for (int i = 0; i < 3; ++i) {
    SlotInfo s;
    s.slot = i;
    s.state = SlotState::kActive;
    s.name = "/m" + std::to_string(i);
    a.info->slots.push_back(s);
  }
  return a;
}

TEST(PrometheusText, NodeExporterSeries) {
  ServedArray a = Served("home");
  a.info->slots[2].state = SlotState::kRebuilding;
  a.info->degraded = true;
  a.info->job.kind = JobKind::kRecover;
  a.info->job.total_bytes = 16 * kMiB;
  a.info->job.done_bytes = 4 * kMiB;
  const std::string text = PrometheusText({a});
  EXPECT_THAT(text, HasSubstr("# HELP node_md_state Indicates the state of "
                              "md-device.\n# TYPE node_md_state gauge\n"));
  for (const char* line :
       {"node_md_state{device=\"home\",state=\"active\"} 0\n",
        "node_md_state{device=\"home\",state=\"inactive\"} 0\n",
        "node_md_state{device=\"home\",state=\"recovering\"} 1\n",
        "node_md_state{device=\"home\",state=\"resync\"} 0\n",
        "node_md_state{device=\"home\",state=\"check\"} 0\n",
        "# HELP node_md_disks Number of active/failed/spare disks of "
        "device.\n",
        "node_md_disks{device=\"home\",state=\"active\"} 2\n",
        "node_md_disks{device=\"home\",state=\"failed\"} 0\n",
        "node_md_disks{device=\"home\",state=\"spare\"} 0\n",
        "# HELP node_md_disks_required Total number of disks of device.\n",
        "node_md_disks_required{device=\"home\"} 3\n",
        "# HELP node_md_blocks Total number of blocks on device.\n",
        "node_md_blocks{device=\"home\"} 32768\n",
        "# HELP node_md_blocks_synced Number of blocks synced on device.\n",
        "node_md_blocks_synced{device=\"home\"} 8192\n",
        "uraid_job_running{device=\"home\",job=\"recover\"} 1\n",
        "uraid_job_progress_ratio{device=\"home\",job=\"recover\"} 0.25\n",
        "uraid_array_health{device=\"home\"} 1\n",
        "uraid_member_state{device=\"home\",member=\"/m2\",slot=\"2\","
        "state=\"rebuilding\"} 1\n",
        "# TYPE uraid_member_writes_total counter\n"}) {
    EXPECT_THAT(text, HasSubstr(line));
  }
}

// Every family's HELP and TYPE once, and its samples right after them:
// a second family of the same name is what promtool refuses.
TEST(PrometheusText, FamiliesAreContiguous) {
  const std::string text = PrometheusText({Served("a"), Served("b")});
  std::map<std::string, int> types;
  std::string current;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      current = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_EQ(++types[current], 1) << current;
      continue;
    }
    if (line.rfind("#", 0) == 0) continue;
    const std::string name = line.substr(0, line.find_first_of("{ "));
    EXPECT_EQ(name, current) << line;
  }
  EXPECT_GT(types.size(), 20u);
}

// The engine's counters as uraid_<name>_total, one family each, with the
// HELP that points at `uraid detail` (dashboards query these names).
TEST(PrometheusText, EngineCounters) {
  ServedArray a = Served("home");
  a.info->counters.rmw_writes = 7;
  a.info->counters.cache_full_writes = 2;
  const std::string text = PrometheusText({a});
  for (const std::string line :
       {"# HELP uraid_member_reads_total Engine counter since the server "
        "opened the array (uraid detail lists them).\n",
        "# TYPE uraid_member_reads_total counter\n"
        "uraid_member_reads_total{device=\"home\"} 0\n",
        "uraid_rmw_writes_total{device=\"home\"} 7\n",
        "uraid_cache_full_writes_total{device=\"home\"} 2\n"}) {
    EXPECT_THAT(text, HasSubstr(line));
  }
}

// Per-member errors and latency: a counter family each (samples labelled
// by device, member and slot), the time in seconds; spares have none.
TEST(PrometheusText, MemberErrorsAndLatency) {
  ServedArray a = Served("home");
  SlotInfo& m1 = a.info->slots[1];
  m1.read_errors = 3;
  m1.write_errors = 2;
  m1.corrected_read_errors = 1;
  m1.bad_block_records = 4;
  m1.ios = 1000;
  m1.io_ns = 2'500'000'000;  // 2.5 s over 1000 I/Os
  m1.latency_ns = 1'500'000;
  SlotInfo spare;
  spare.slot = -1;
  spare.state = SlotState::kSpare;
  spare.name = "/s";
  a.info->spares.push_back(spare);
  const std::string text = PrometheusText({a});
  const std::string m = "{device=\"home\",member=\"/m1\",slot=\"1\"} ";
  const std::vector<std::string> lines = {
      "# TYPE uraid_member_read_errors_total counter\n",
      "uraid_member_read_errors_total" + m + "3\n",
      "# TYPE uraid_member_write_errors_total counter\n",
      "uraid_member_write_errors_total" + m + "2\n",
      "# TYPE uraid_member_corrected_read_errors_total counter\n",
      "uraid_member_corrected_read_errors_total" + m + "1\n",
      "# TYPE uraid_member_bad_block_records_total counter\n",
      "uraid_member_bad_block_records_total" + m + "4\n",
      "# TYPE uraid_member_ios_total counter\n",
      "uraid_member_ios_total" + m + "1000\n",
      "# TYPE uraid_member_io_seconds_total counter\n",
      "uraid_member_io_seconds_total" + m + "2.5\n",
      "# TYPE uraid_member_latency_seconds gauge\n",
      "uraid_member_latency_seconds" + m + "0.0015\n",
      std::string("uraid_member_read_errors_total{device=\"home\","
                  "member=\"/m0\",slot=\"0\"} 0\n")};
  for (const std::string& line : lines) EXPECT_THAT(text, HasSubstr(line));
  EXPECT_THAT(text, Not(HasSubstr("uraid_member_ios_total{device=\"home\","
                                  "member=\"/s\"")));
}

TEST(PrometheusText, NotServedAndUnreadable) {
  ServedArray ghost;
  ghost.name = "ghost";
  ghost.control = "/run/uraid/ghost.ctl";
  ghost.configured = true;
  ServedArray odd = ghost;
  odd.name = "odd";
  odd.presence = Presence::kUnreadable;
  const std::string text = PrometheusText({ghost, odd});
  EXPECT_THAT(text, HasSubstr("uraid_array_up{device=\"ghost\",control="
                              "\"/run/uraid/ghost.ctl\"} 0\n"));
  EXPECT_THAT(text,
              HasSubstr("node_md_state{device=\"ghost\",state=\"inactive\"} "
                        "1\n"));
  EXPECT_THAT(text, Not(HasSubstr("node_md_state{device=\"odd\"")));
  EXPECT_THAT(text, Not(HasSubstr("node_md_disks{")));
}

TEST(EscapeLabelValue, BackslashQuoteNewline) {
  EXPECT_EQ(EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
}

}  // namespace
}  // namespace uraid::tool
