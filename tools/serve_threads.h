// SPDX-License-Identifier: MIT
// The nbdkit thread count `uraid serve` chooses when the user gives none.
//
// nbdkit runs each connection's requests on -t threads (16 by default),
// which is also how many of one client's requests are in flight at once.
// Members that answer in microseconds (memory) make every request CPU
// work, and threads beyond the CPUs only take turns on them, at the
// connection's request and reply mutexes and on the CPUs, where a
// stream's threads crowd out a small request's. uraid alone at -t 2
// against -t 16, 2 vCPUs, members on /dev/shm, four runs of alternating
// rounds (issue 35; docs/architecture.md has one run beside the file
// plugin): seq write 1M qd8 +22-48%, seq read 1M qd8 +7-16%, rand write
// 4K qd32 +0-32%, rand read 4K unchanged, and the p99 of a 4K write+flush
// beside a 1 MiB stream 108-169 us against 676-1,204 us. Members with
// latency (disks, NBD exports) need the threads to keep requests in
// flight, so they keep nbdkit's default. A degraded array's writes would
// take more (each waits for the next request to fill its stripe): -t 4
// gives them +17-32% and costs seq write 12% and rand read 10% while
// healthy (docs/architecture.md), so the rule is for the healthy array.

#ifndef URAID_TOOLS_SERVE_THREADS_H_
#define URAID_TOOLS_SERVE_THREADS_H_

#include <optional>
#include <string>
#include <vector>

namespace uraid::tool {

// Whether `member` (a path or an NBD URI) is memory: a file on tmpfs or
// ramfs, or a RAM block device (brd's ram*, zram*, pmem*). An NBD URI, a
// path that cannot be examined, and anything else are not.
bool IsMemoryMember(const std::string& member);

// The CPUs this process may run on (its affinity mask), at least 1.
int AvailableCpus();

// The -t to give nbdkit for `members` on `cpus` CPUs: the CPUs when every
// member is memory, nothing (nbdkit's default) otherwise. Never 1: a
// stream's write held in the stripe cache waits for the request that
// fills its stripe, which a lone thread cannot receive meanwhile (seq
// write 1M qd8 at -t 1: 353 MB/s against 3,215 at -t 2).
std::optional<int> DefaultThreads(const std::vector<std::string>& members,
                                  int cpus);

}  // namespace uraid::tool

#endif  // URAID_TOOLS_SERVE_THREADS_H_
