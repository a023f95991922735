#!/bin/bash
# SPDX-License-Identifier: MIT
# Benchmarks uraid against nbdkit's file plugin in the same run and prints
# one table of ratios, then the write-intent bitmap's cost, the ppl
# consistency policy against the bitmap, rebuild, scrub
# and resync-after-crash rates, the degraded-read sweep over array and
# client shapes (3-8 members, chunks 64K-1M, requests 64K-4M, qd 1-32;
# tools/bench/degraded_sweep.py), then rebuild, check, resync, reshape and
# RAID6's degraded read and two-spare rebuild on members behind nbdkit's
# rate and delay filters (see tools/bench.py and the modules of
# tools/bench/ for what is measured and how).
#   scripts/bench.sh [--dir DIR] [--runtime S] [--repeat N] [--only TEXT]
#                    [--sweep CACHES]
# Members live on /dev/shm unless --dir names a disk directory. The defaults
# below (4 s runs, 4 cache sizes, 3 repeats) take about 40 minutes on a
# 2-vCPU machine (38 measured on a quiet one, 2026-12-05; the degraded
# sweep's 24 shapes take about 7 of them, the jobs on rate-limited members
# about 13); options given override them. Its members take up to about
# 16 GiB of /dev/shm at once (the rebuild part's 2 GiB members, their fio
# peer and the fill): run nothing else that big beside it (a run beside two
# other benches was OOM-killed on a 24 GiB machine).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --tests  # fio, python3-libnbd
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-release --target nbdkit-uraid-plugin uraid
if [[ -x build-release/tools/bench/uraid_microbench ]] ||
   cmake --build build-release --target uraid_microbench >/dev/null 2>&1; then
  echo "== in-process (Google Benchmark, memory members)"
  build-release/tools/bench/uraid_microbench --benchmark_min_time=0.2
fi
# The jobs table (issue 16): member files on the root filesystem (disk-like)
# and on /dev/shm, each with the rate filter alone and with 2 ms latency.
# 2 GiB rebuild members: at memory speed a rebuild beside a client must
# outlast the part's measuring window (512 MiB ends inside it).
exec /usr/bin/python3 tools/bench.py --build build-release --runtime 4 \
  --sweep 0,16M,64M,256M --job-latency-ms 0,2 --job-dirs /var/tmp,/dev/shm \
  --rebuild-member-size 2048 "$@"
