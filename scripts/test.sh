#!/bin/bash
# Installs what is missing, builds, and runs every test (unit and
# integration) with ctest, then the unit tests again under ASan+UBSan.
# .ci/run calls this.
#
#   URAID_ASAN=0 ./scripts/test.sh    # skip the ASan+UBSan pass (local use)
#   FUZZ_SECONDS=0 ...                # fuzz targets built and run for 0 s
set -euo pipefail
cd "$(dirname "$0")/.."

t0=$SECONDS
./scripts/setup.sh
./scripts/build.sh
echo "test.sh: build took $((SECONDS - t0))s"

start=$SECONDS
# The libFuzzer targets need clang; a short run catches decoder regressions.
FUZZ_SECONDS=${FUZZ_SECONDS:-10} ./scripts/fuzz.sh
echo "test.sh: fuzz (build + runs) took $((SECONDS - start))s"

failed=()
t=$SECONDS
ctest --test-dir build --output-on-failure -j2 || failed+=("ctest (build/)")
echo "test.sh: ctest took $((SECONDS - t))s"

# ASan+UBSan: a separate build of the unit tests only (RelWithDebInfo: the
# model test is too slow at -O0 under ASan). UBSan's checks are made fatal
# here at run time, so a report fails the test instead of only printing.
if [[ "${URAID_ASAN:-1}" != 0 ]]; then
  t=$SECONDS
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DURAID_SANITIZE=ON >/dev/null
  cmake --build build-asan --target unit_tests
  echo "test.sh: ASan build took $((SECONDS - t))s"
  t=$SECONDS
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    ctest --test-dir build-asan -L unit --output-on-failure -j2 ||
    failed+=("ctest -L unit (build-asan/, ASan+UBSan)")
  echo "test.sh: ASan+UBSan unit tests took $((SECONDS - t))s"
fi

if [[ ${#failed[@]} -eq 0 ]]; then
  echo "test.sh: PASS: all tests passed in $((SECONDS - start))s" \
    "($((SECONDS - t0))s with setup and build)"
else
  failures=$(IFS=';'; echo "${failed[*]}")
  echo "test.sh: FAIL: $failures failed after $((SECONDS - start))s" \
    "(see above)"
  exit 1
fi
