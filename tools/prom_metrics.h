// SPDX-License-Identifier: MIT
// `uraid metrics`: the served arrays (served_arrays.h) in Prometheus's
// text exposition format (version 0.0.4), for node_exporter's textfile
// collector or any scraper.
//
// node_exporter's md collector's series, with its names, labels and help
// text, so that dashboards and alert rules written for md work unchanged
// (label device = the array's name):
//   node_md_state{device,state="active|inactive|recovering|resync|check"}
//       1 for the array's state, 0 for the four others (as node_exporter
//       reads /proc/mdstat: a recover or replace is "recovering", a resync
//       or repair "resync", a check "check", a reshape none of them, no job
//       "active"; an ARRAY of the config that nobody serves is "inactive")
//   node_md_disks{device,state="active|failed|spare"}
//   node_md_disks_required{device}   raid devices
//   node_md_blocks{device}           KiB of the array
//   node_md_blocks_synced{device}    KiB done of the running resync or
//       recovery, in the array's KiB (blocks x fraction done, so that
//       blocks_synced / blocks is the progress; /proc/mdstat counts a
//       RAID5 recovery in KiB of one member), else blocks
// and uraid's own, uraid_*: whether the server answered, md's health
// code, the running job (progress, speed, ETA, mismatches), the last job,
// each member's state, bad blocks and replacement wish, the bitmap, and
// every counter of the engine (uraid_<counter>_total).
// Pure: no I/O.

#ifndef URAID_TOOLS_PROM_METRICS_H_
#define URAID_TOOLS_PROM_METRICS_H_

#include <string>
#include <vector>

#include "served_arrays.h"

namespace uraid::tool {

// The exposition text for `arrays`: each metric family once (HELP, TYPE,
// then its samples, arrays in the given order), ending in a newline.
std::string PrometheusText(const std::vector<ServedArray>& arrays);

// A label value escaped as the format wants it (\\, \", \n).
std::string EscapeLabelValue(const std::string& value);

}  // namespace uraid::tool

#endif  // URAID_TOOLS_PROM_METRICS_H_
