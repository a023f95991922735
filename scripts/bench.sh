#!/bin/bash
# Benchmarks uraid against nbdkit's file plugin in the same run and prints
# one table of ratios (see tools/bench.py for what is measured and how).
#   scripts/bench.sh [--dir DIR] [--runtime S] [--repeat N] [--only TEXT]
# Members live on /dev/shm unless --dir names a disk directory.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-release --target nbdkit-uraid-plugin uraid
if [[ -x build-release/tools/bench/uraid_microbench ]] ||
   cmake --build build-release --target uraid_microbench >/dev/null 2>&1; then
  echo "== in-process (Google Benchmark, memory members)"
  build-release/tools/bench/uraid_microbench --benchmark_min_time=0.2
fi
exec /usr/bin/python3 tools/bench.py --build build-release "$@"
