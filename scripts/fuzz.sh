#!/bin/bash
# SPDX-License-Identifier: MIT
# Builds the libFuzzer targets with clang (in build-fuzz/) and runs each for
# FUZZ_SECONDS (default 10) from its committed seed corpus. Crashes are
# written to build-fuzz/ as crash-* and fail the script.
#
#   FUZZ_SECONDS=600 ./scripts/fuzz.sh                 # every target, 10 min each
#   FUZZ_TARGETS="io_sequence" FUZZ_SECONDS=3600 ./scripts/fuzz.sh
#
# Targets (fuzz/<name>_fuzz.cc, seeds in fuzz/corpus/<name>/):
#   superblock   md v1.2 superblock decoder: no crash, re-encodes exactly
#   bitmap       md bitmap superblock decoder (round trip) and the
#                write-intent protocol under a decoded op sequence
#   control      control-channel request parser (hostile lines), reply
#                lines and the ArrayInfo JSON the tool decodes
#   geometry     Geometry::Make validation, Map/Unmap round trip, md's tables
#   ppl          md's PPL header codec: decode never crashes, an accepted
#                header re-encodes to its bytes; MULTIPLE_PPLS search
#   io_sequence  an in-memory array under a decoded op sequence (writes,
#                reads, trims, member failures, restarts, crashes) against a
#                reference buffer
# New inputs found during a run go to a temporary directory and are thrown
# away; to grow a committed corpus, merge them in by hand:
#   build-fuzz/fuzz/NAME_fuzz -merge=1 fuzz/corpus/NAME NEW_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-10}
read -r -a targets <<<"${FUZZ_TARGETS:-superblock bitmap control geometry ppl io_sequence}"

CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  ${URAID_LINE_TABLES_ONLY:+-DURAID_LINE_TABLES_ONLY=$URAID_LINE_TABLES_ONLY} \
  >/dev/null
cmake --build build-fuzz --target "${targets[@]/%/_fuzz}"
for target in "${targets[@]}"; do
  work=$(mktemp -d)
  log=$(mktemp)
  echo "fuzz: ${target}_fuzz for ${seconds}s"
  if ! build-fuzz/fuzz/${target}_fuzz -max_total_time="$seconds" \
      -artifact_prefix=build-fuzz/ "$work" "fuzz/corpus/$target" \
      >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz: ${target}_fuzz FAILED; the input is build-fuzz/crash-* (or" \
      "leak-*, timeout-*); replay: build-fuzz/fuzz/${target}_fuzz FILE" >&2
    rm -rf "$work" "$log"
    exit 1
  fi
  grep -E '^(#[0-9]+ +DONE|Done [0-9]+ runs)' "$log" | tail -n 2
  rm -rf "$work" "$log"
done
echo "fuzz: all targets ran clean"
