#!/bin/bash
# SPDX-License-Identifier: MIT
# Prints, for each test the last ctest run in BUILD_DIR failed, the tail of
# its output (from Testing/Temporary/LastTest.log). test.sh calls it at its
# very end, so that a CI log cut to its last lines still says why a test
# failed; ctest's --output-on-failure prints the same text, but in the
# middle of everything that runs after ctest.
#
#   scripts/ctest_failures.sh BUILD_DIR [LINES]   # LINES: default 60
set -uo pipefail
dir=$1
lines=${2:-60}
failed="$dir/Testing/Temporary/LastTestsFailed.log"
log="$dir/Testing/Temporary/LastTest.log"
[[ -s "$failed" && -f "$log" ]] || exit 0
while IFS=: read -r _ name; do
  [[ -n "$name" ]] || continue
  echo "---- $dir: $name failed; the last $lines lines of its output" \
    "(whole: $log) ----"
  # A test's section runs from "NNN/MMM Test: NAME" to "<end of output>".
  awk -v name="$name" '
    $0 ~ "^[0-9]+/[0-9]+ Test: " && $3 == name { on = 1; next }
    on && /^<end of output>/ { on = 0 }
    on { print }
  ' "$log" | tail -n "$lines"
done <"$failed"
