#!/bin/bash
# SPDX-License-Identifier: MIT
# Builds the libFuzzer targets with clang (in build-fuzz/) and runs each for
# FUZZ_SECONDS (default 10) from its committed seed corpus. Crashes are
# written to build-fuzz/ as crash-* and fail the script.
#
#   FUZZ_SECONDS=600 ./scripts/fuzz.sh                 # every target, 10 min each
#   FUZZ_TARGETS="io_sequence" FUZZ_SECONDS=3600 ./scripts/fuzz.sh
#   FUZZ_JOBS=1 ./scripts/fuzz.sh                      # one target at a time
#   ./scripts/fuzz.sh --build-only [TARGET...]         # configure and build,
#                                                      # run nothing
#   ./scripts/fuzz.sh --run-only                       # run what is built
#
# --build-only builds the fuzz targets and the other TARGETs of the same
# tree (scripts/test.sh: unit_tests, for its ASan+UBSan pass) in one ninja
# run; test.sh builds so in the background while ctest runs, and runs the
# targets later with --run-only.
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
#   bad_blocks   md's bad-block log codec: decode never crashes, agrees
#                with a reference reading, and a sorted result re-encodes
#                to the same entries
#   io_sequence  an in-memory array under a decoded op sequence (writes,
#                reads, trims, member failures, restarts, crashes) against a
#                reference buffer
# New inputs found during a run go to a temporary directory and are thrown
# away; to grow a committed corpus, merge them in by hand:
#   build-fuzz/fuzz/NAME_fuzz -merge=1 fuzz/corpus/NAME NEW_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
mode=all
case ${1:-} in
  --build-only) mode=build; shift ;;
  --run-only) mode=run; shift ;;
esac
seconds=${FUZZ_SECONDS:-10}
read -r -a targets <<<"${FUZZ_TARGETS:-superblock bitmap control geometry ppl bad_blocks io_sequence}"

# URAID_UNITY_BATCH=0: every target's files in one unity unit, which checks
# that no two define the same name (see the root CMakeLists.txt).
# URAID_SANITIZE=ON: the whole tree is ASan+UBSan (UBSan fatal), and the
# fuzz targets link the tree's own `raid`, compiled once with coverage added
# (fuzz/CMakeLists.txt). scripts/test.sh builds the unit tests in this same
# tree for its ASan+UBSan pass, against that library, instead of compiling
# libraid again in a tree of its own.
if [[ $mode != run ]]; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DURAID_SANITIZE=ON -DURAID_UNITY_BATCH=0 \
    ${URAID_LINE_TABLES_ONLY:+-DURAID_LINE_TABLES_ONLY=$URAID_LINE_TABLES_ONLY} \
    >/dev/null
  cmake --build build-fuzz --target "${targets[@]/%/_fuzz}" "$@"
fi
[[ $mode != build ]] || exit 0
# The targets run FUZZ_JOBS at a time (default: the number of CPUs). A
# libFuzzer run keeps about one CPU busy and -max_total_time is wall time,
# so on an idle machine each target still gets its FUZZ_SECONDS of a CPU of
# its own, and the runs take half the wall time on CI's two cores (CI time).
parallel=${FUZZ_JOBS:-$(nproc)}
logs=$(mktemp -d)
run_target() {  # $1: target; its output goes to $logs/$1.log, $logs/$1.failed
  local work
  work=$(mktemp -d)
  if ! build-fuzz/fuzz/$1_fuzz -max_total_time="$seconds" \
      -artifact_prefix=build-fuzz/ "$work" "fuzz/corpus/$1" \
      >"$logs/$1.log" 2>&1; then
    touch "$logs/$1.failed"
  fi
  rm -rf "$work"
}
for target in "${targets[@]}"; do
  while [[ $(jobs -rp | wc -l) -ge $parallel ]]; do wait -n || true; done
  echo "fuzz: ${target}_fuzz for ${seconds}s"
  run_target "$target" &
done
wait
failed=0
for target in "${targets[@]}"; do  # each one's summary, in the same order
  if [[ -e "$logs/$target.failed" ]]; then
    tail -n 60 "$logs/$target.log"
    echo "fuzz: ${target}_fuzz FAILED; the input is build-fuzz/crash-* (or" \
      "leak-*, timeout-*); replay: build-fuzz/fuzz/${target}_fuzz FILE" >&2
    failed=1
  else
    echo "fuzz: ${target}_fuzz:"
    grep -E '^(#[0-9]+ +DONE|Done [0-9]+ runs)' "$logs/$target.log" | tail -n 2
  fi
done
rm -rf "$logs"
[[ $failed == 0 ]] || exit 1
echo "fuzz: all targets ran clean"
