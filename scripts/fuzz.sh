#!/bin/bash
# Builds the libFuzzer targets with clang (in build-fuzz/) and runs each for
# FUZZ_SECONDS (default 10) from its committed seed corpus. Crashes are
# written to build-fuzz/ as crash-* and fail the script.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-10}
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz --target superblock_fuzz
for target in superblock; do
  work=$(mktemp -d)
  echo "fuzz: ${target}_fuzz for ${seconds}s"
  build-fuzz/fuzz/${target}_fuzz -max_total_time="$seconds" \
    -artifact_prefix=build-fuzz/ "$work" "fuzz/corpus/$target" 2>&1 |
    tail -n 3
  rm -rf "$work"
done
echo "fuzz: all targets ran clean"
