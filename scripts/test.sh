#!/bin/bash
# Installs what is missing, builds, and runs every test (unit and
# integration) with ctest. .ci/run calls this.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
./scripts/build.sh

start=$SECONDS
# The libFuzzer targets need clang; a short run catches decoder regressions.
FUZZ_SECONDS=${FUZZ_SECONDS:-10} ./scripts/fuzz.sh

if ctest --test-dir build --output-on-failure -j2; then
  echo "test.sh: PASS: all tests passed in $((SECONDS - start))s"
else
  rc=$?
  echo "test.sh: FAIL: ctest exited $rc after $((SECONDS - start))s (see above)"
  exit "$rc"
fi
