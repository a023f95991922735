// SPDX-License-Identifier: MIT
// `uraid metrics`: every served array (served_arrays.h) in Prometheus's
// text format (prom_metrics.h), on stdout or, with --output FILE, written
// whole to FILE.tmp and renamed over FILE, as node_exporter's textfile
// collector wants (it must never read half a file). The uraid-metrics
// timer runs it every minute. An array whose server does not answer is
// reported in the text (uraid_array_up 0), not as a failure: the exit
// status is 1 only when the config cannot be read or FILE written.

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "commands.h"
#include "common.h"
#include "prom_metrics.h"
#include "served_arrays.h"

namespace uraid::tool {
namespace {

struct MetricsCmdArgs {
  FindOptions find;  // --config, --control
  std::string output;
};

// Writes `text` to `path` through a temporary file in the same directory
// and rename(2): readers see the old file or the new one, never a part.
absl::Status WriteWhole(const std::string& path, const std::string& text) {
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return absl::ErrnoToStatus(errno, "cannot write " + tmp);
  const bool wrote = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = std::fclose(f) == 0;
  if (!wrote || !closed) {
    const int err = errno;
    unlink(tmp.c_str());
    return absl::ErrnoToStatus(err, "cannot write " + tmp);
  }
  // Readable by the collector, whichever user it runs as.
  chmod(tmp.c_str(), 0644);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return absl::ErrnoToStatus(
        err, absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

int RunMetricsCommand(const MetricsCmdArgs& args) {
  absl::StatusOr<std::vector<ServedArray>> arrays = FindServedArrays(args.find);
  if (!arrays.ok()) return Fail(arrays.status());
  const std::string text = PrometheusText(*arrays);
  if (args.output.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
  }
  if (absl::Status s = WriteWhole(args.output, text); !s.ok()) return Fail(s);
  return 0;
}

}  // namespace

void AddMetricsCommand(CLI::App& app, Action* action) {
  auto args = std::make_shared<MetricsCmdArgs>();
  CLI::App* sub = app.add_subcommand(
      "metrics",
      "Every served array in Prometheus's text format: node_exporter's md "
      "collector series (node_md_*) and uraid's own (uraid_*)");
  sub->add_option("--output,-o", args->output,
                  "Write to this file (whole, through a rename: for "
                  "node_exporter's textfile collector) instead of stdout");
  AddFindOptions(sub, &args->find);
  sub->final_callback([args, action] {
    *action = [args] { return RunMetricsCommand(*args); };
  });
}

}  // namespace uraid::tool
