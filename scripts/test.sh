#!/bin/bash
# SPDX-License-Identifier: MIT
# Installs what is missing, builds, and runs every test (unit and
# integration) with ctest (kernel_md in the background, beside everything
# that follows), then the unit tests again under ASan+UBSan, then the
# multi-threaded tests under ThreadSanitizer. .ci/run calls this.
#
#   URAID_ASAN=0 ./scripts/test.sh    # skip the ASan+UBSan pass (local use)
#   URAID_TSAN=0 ...                  # skip the TSan pass
#   FUZZ_SECONDS=0 ...                # fuzz targets built and run for 0 s
set -euo pipefail
cd "$(dirname "$0")/.."

# Line tables only in every build here (build.sh and fuzz.sh read it too):
# backtraces keep file:line, and builds are most of the time this takes.
export URAID_LINE_TABLES_ONLY=${URAID_LINE_TABLES_ONLY:-ON}

# Files on /dev/shm are memory. Runs of ours stopped by SIGKILL (a bench
# or a kernel test cut off when a session ended) leave their members there,
# each directory with an owner.pid: remove those whose owner is gone. A CI
# run on a machine whose /dev/shm held 22 GiB of such members had the
# compiler OOM-killed. Then say how much memory there is to work with.
for d in /dev/shm/uraid-*; do
  [[ -f "$d/owner.pid" ]] || continue
  if ! kill -0 "$(cat "$d/owner.pid")" 2>/dev/null; then
    echo "test.sh: removing $d (its owner, pid $(cat "$d/owner.pid"), is gone)"
    rm -rf "$d"
  fi
done
avail_mib=$(awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo)
echo "test.sh: ${avail_mib} MiB of memory available;" \
  "/dev/shm holds $(du -sh /dev/shm 2>/dev/null | cut -f1)"
if (( avail_mib < 6144 )); then
  echo "test.sh: WARNING: under 6 GiB available; the biggest users of" \
    "/dev/shm:" >&2
  du -sh /dev/shm/* 2>/dev/null | sort -h | tail -5 >&2 || true
fi

# CPU seconds (user + system) of this script's children it has waited for
# (/proc/PID/stat's cutime and cstime). Each stage reports its own beside
# its wall time, so that a CI log shows how much of the CPUs a stage left
# idle: the part that the background builds below can use.
child_cpu() {
  awk -v hz="$(getconf CLK_TCK)" '{print int(($16 + $17) / hz)}' /proc/$$/stat
}
stage_took() {  # $1: the stage; $2, $3: $SECONDS and child_cpu at its start
  local wall=$((SECONDS - $2)) cpu=$(($(child_cpu) - $3)) n
  n=$(nproc)
  echo "test.sh: $1 took ${wall}s (CPU ${cpu}s:" \
    "$((wall > 0 ? 100 * cpu / (wall * n) : 0))% of $n CPUs)"
}

# This script's nice value (0 on CI; 19 when a shared machine runs it at
# nice 19 in an autogroup of its own): the background builds' session goes
# back to it after ctest, and kernel_md's session gets it. Its autogroup's
# where the kernel groups CPU time by session (see below), else its own.
own_nice=$(awk '$2 == "nice" {print $3}' /proc/self/autogroup 2>/dev/null ||
           true)
own_nice=${own_nice:-$(awk '{print $19}' /proc/$$/stat)}

t0=$SECONDS c0=$(child_cpu)
# Everything the tests need, the kernel tests' guest included.
./scripts/setup.sh --tests

# The sanitizer trees are built in the background, at nice 19, while build/
# is built and ctest runs its tests: those leave a part of the CPUs idle
# (the build's single-threaded tail: the tool's one translation unit,
# links, Doxygen; tests waiting on sleeps, sockets, qemu's guest, fio), and
# the background build takes only that part, the foreground keeping the
# CPU whenever it wants it (a nice-19 task weighs 15 against a nice-0
# task's 1024; see the autogroup below). CI time: they were built one after
# another after ctest, each on both cores. Nothing they build runs before
# it is done: the fuzz runs and the ASan+UBSan pass start after ctest once
# build-fuzz/ is built (build-tsan/, built after it, goes on beside them),
# the TSan pass once build-tsan/ is, in the foreground. The build's output
# goes to build-sanitizers.log, shown when it fails.
#   build-fuzz/: clang, ASan+UBSan: the libFuzzer targets and the unit tests
#     (scripts/fuzz.sh --build-only; see the ASan+UBSan pass below);
#   build-tsan/: gcc, TSan: the multi-threaded tests (see the TSan pass).
# The fuzz runs and each pass are skipped when their build failed, which
# fails the run.
# The TSan binaries, the longest first (TSan pass below; seconds in the
# rehearsal of 2026-12-04: 127 112 101 53 48 13 11 8 4; stripe_reader_test,
# the degraded read's claims and survivor rows across requests, 14 on
# 2026-12-05).
tsan_tests=(reshape_test control_test jobs_test nbd_member_test array_bitmap_test
            stripe_reader_test job_runner_test ppl_log_test ppl_switch_test
            concurrency_test)
fuzz_extra=()
[[ "${URAID_ASAN:-1}" == 0 ]] || fuzz_extra=(unit_tests)
build_sanitizer_trees() {
  # Two compilers at a time (ninja's default is nproc + 2): a starved
  # compiler still holds its memory.
  export CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
  local s=$SECONDS c rc=0
  c=$(child_cpu)
  FUZZ_SECONDS=${FUZZ_SECONDS:-10} ./scripts/fuzz.sh --build-only \
    "${fuzz_extra[@]}" || rc=1
  stage_took "build-fuzz/ (fuzz targets${fuzz_extra:+, unit tests})" "$s" "$c"
  [[ $rc == 0 ]] || touch build-sanitizers.fuzz.failed
  touch build-sanitizers.fuzz.done  # the fuzz runs and ASan pass may start
  if [[ "${URAID_TSAN:-1}" != 0 ]]; then
    s=$SECONDS c=$(child_cpu)
    if ! { cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
             -DURAID_TSAN=ON -DURAID_FUZZ=OFF \
             -DURAID_LINE_TABLES_ONLY="$URAID_LINE_TABLES_ONLY" >/dev/null &&
           cmake --build build-tsan --target "${tsan_tests[@]}"; }; then
      touch build-sanitizers.tsan.failed
    fi
    stage_took build-tsan/ "$s" "$c"
  fi
}
rm -f build-sanitizers.log build-sanitizers.*.failed build-sanitizers.*.done
# A session of its own (setsid), so that an early exit (^C, set -e) can end
# the whole build, ninja and compilers included. Where the kernel groups
# CPU time by session (autogroup, sched(7): on in Debian's kernels and on
# CI's machines), nice alone weighs only within the session, and a new
# session would get as much CPU as ctest's: so the session's own weight is
# set to nice 19 too (/proc/self/autogroup; measured on CI's kind of
# machine: a busy loop pinned beside another got 2% of the CPU so, 58%
# with setsid and nice alone).
setsid bash -c 'echo 19 2>/dev/null >/proc/self/autogroup; exec "$@"' _ \
  nice -n 19 bash -c "set -euo pipefail; $(declare -f build_sanitizer_trees child_cpu stage_took)
  $(declare -p tsan_tests fuzz_extra); build_sanitizer_trees" \
  </dev/null >build-sanitizers.log 2>&1 &
bg_pid=$!
end_background() {  # the sanitizer builds' and the kernel test's sessions
  [[ -z ${bg_pid:-} ]] || kill -- -"$bg_pid" 2>/dev/null || true
  [[ -z ${kernel_pid:-} ]] || kill -- -"$kernel_pid" 2>/dev/null || true
}
trap end_background EXIT


./scripts/build.sh
stage_took "setup and build" "$t0" "$c0"

start=$SECONDS
failed=()

# kernel_md (tests/kernel/: Debian's kernel in qemu TCG guests) runs outside
# ctest's two slots, in the background from here to the end of this script,
# and ctest below runs every other test. CI time: it held one of the two
# slots for about 700 s of the 965 s ctest took (rehearsal of 2026-12-04)
# while the other slot ran the remaining 1211 test-seconds one at a time
# (ctest used 53% of the two CPUs); now those take both slots, about 610 s
# packed (from that run's per-test times), beside it. ctest runs
# it from its own directory (build/tests/kernel/, the test's definition,
# timeout and skip code unchanged), which keeps its own
# Testing/Temporary/ (LastTest.log, cost data) apart from build/'s, which
# the ctest below writes at the same time. Its output goes to
# build/kernel_md.log, shown whole when it fails; its result is checked at
# the end and fails the run like any other stage. A session of its own, so
# that an early exit ends it, its qemu guests included (the EXIT trap).
# Its session's autogroup gets this script's nice value (own_nice above): a
# new session's would otherwise weigh as much as a nice-0 one's.
kernel_log=build/kernel_md.log
setsid bash -c 'echo "$1" 2>/dev/null >/proc/self/autogroup
  ctest --test-dir build/tests/kernel -L "^kernel$" --output-on-failure &&
    rc=0 || rc=$?
  echo "test.sh: kernel_md took ${SECONDS}s (exit $rc)"; exit $rc' \
  _ "$own_nice" </dev/null >"$kernel_log" 2>&1 &
kernel_pid=$!

t=$SECONDS c=$(child_cpu)
ctest --test-dir build --output-on-failure -j2 -LE '^kernel$' ||
  failed+=("ctest (build/)")
stage_took "ctest (all but kernel_md)" "$t" "$c"

# ctest is done, and what follows needs the background builds: their
# processes and their session's autogroup go back to this script's nice
# value (0 on CI), so that they keep their full share of the machine
# against anything else running there (a shared machine: at nice 19 they
# got a fraction of it while this script only waited for them), and
# build-tsan/ shares the CPUs evenly with the ASan+UBSan pass below. The
# compilers ninja starts from now on inherit the session's nice value.
# Lowering a nice value needs root (CI is): otherwise they stay at 19.
renice_session() {  # $1: a session id; $2: the nice value
  local d stat fields
  for d in /proc/[0-9]*; do
    read -r stat 2>/dev/null <"$d/stat" || continue
    # After the command's ")": state ppid pgrp session ...
    read -r -a fields <<<"${stat##*) }"
    [[ ${fields[3]:-} == "$1" ]] || continue
    renice -n "$2" -p "${d#/proc/}" >/dev/null 2>&1 || true
  done
  echo "$2" 2>/dev/null >"/proc/$1/autogroup" || true
}
renice_session "$bg_pid" "$own_nice"

# The ASan+UBSan pass and the fuzz runs need build-fuzz/ only: they start
# as soon as it is built, while build-tsan/ (built after it) goes on beside
# them; the TSan pass waits for the rest below. CI time: everything after
# ctest waited for both trees, and build-tsan/'s build (about half idle:
# its links and its one big test file) ran alone.
report_sanitizer_build() {  # $1: fuzz or tsan; its log, or its stage line
  if [[ -e build-sanitizers.$1.failed ]]; then
    tail -n 100 build-sanitizers.log
    echo "test.sh: the build-$1/ build FAILED (log: build-sanitizers.log)"
  else
    grep "^test.sh: build-$1/" build-sanitizers.log || true
  fi
}
bg_running() {  # the sanitizer builds' script still runs (not a zombie)
  local stat
  read -r stat 2>/dev/null <"/proc/$bg_pid/stat" || return 1
  stat=${stat##*) }
  [[ ${stat%% *} != Z ]]
}
t=$SECONDS
while [[ ! -e build-sanitizers.fuzz.done ]] && bg_running; do sleep 1; done
[[ -e build-sanitizers.fuzz.done ]] || touch build-sanitizers.fuzz.failed
echo "test.sh: waited $((SECONDS - t))s after ctest for build-fuzz/" \
  "(started before build/, niced):"
report_sanitizer_build fuzz

# ASan+UBSan: the unit tests built in build-fuzz/, the clang tree fuzz.sh
# configured above with -DURAID_SANITIZE=ON (RelWithDebInfo: the model test
# is too slow at -O0 under ASan). They link that tree's libraid, compiled
# ASan+UBSan for the fuzz targets already (with the fuzzers' coverage too,
# whose callbacks the ASan runtime answers with no-ops). CI time: this pass
# had a gcc tree of its own (build-asan/), which compiled all of libraid a
# fourth time, close to half of its build. UBSan's checks are fatal at
# compile time (-fno-sanitize-recover) and made so at run time, so a report
# fails the test instead of only printing. URAID_RANDOM_STEPS_PERCENT=50:
# the randomized model tests (the model, RAID6 model and reshape power-cut
# and model-step tests: testutil::RandomSteps) take half their random steps
# here, every configuration and assertion kept; ctest above ran them in
# full. CI time: they were about a third of this pass's test time.
# The longest tests start first: ctest orders them by the costs in its
# tree's Testing/Temporary/CTestCostData.txt, which a fresh clone's
# build-fuzz/ does not have; build/'s, just written by the ctest run above,
# times the same tests unsanitized, in about the same order. Without it
# they started in their numbered order and the longest ran alone at the
# end (about 15 s of the 556 s this pass took in a rehearsal).
if [[ "${URAID_ASAN:-1}" != 0 && ! -e build-sanitizers.fuzz.failed ]]; then
  t=$SECONDS c=$(child_cpu)
  if [[ -f build/Testing/Temporary/CTestCostData.txt &&
        ! -f build-fuzz/Testing/Temporary/CTestCostData.txt ]]; then
    mkdir -p build-fuzz/Testing/Temporary
    cp build/Testing/Temporary/CTestCostData.txt build-fuzz/Testing/Temporary/
  fi
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  URAID_RANDOM_STEPS_PERCENT=50 \
    ctest --test-dir build-fuzz -L unit --output-on-failure -j2 ||
    failed+=("ctest -L unit (build-fuzz/, ASan+UBSan)")
  stage_took "ASan+UBSan unit tests" "$t" "$c"
fi

# The libFuzzer targets need clang; a short run catches decoder regressions.
t=$SECONDS c=$(child_cpu)
if [[ -e build-sanitizers.fuzz.failed ]]; then
  failed+=("build-fuzz/ build")
else
  # build-tsan/, if it still builds, goes back to nice 19 for the runs:
  # -max_total_time is wall time, and each target keeps a CPU of its own
  # for its FUZZ_SECONDS, as when the runs came after both builds (and
  # after the ASan+UBSan pass, kernel_md is about always done).
  renice_session "$bg_pid" 19
  FUZZ_SECONDS=${FUZZ_SECONDS:-10} ./scripts/fuzz.sh --run-only ||
    failed+=("fuzz runs")
  renice_session "$bg_pid" "$own_nice"
  stage_took "fuzz runs" "$t" "$c"
fi

# The rest of the sanitizer builds: build-tsan/ (see the wait for build-fuzz/
# above).
t=$SECONDS c=$(child_cpu)
wait "$bg_pid" || true
bg_pid=
echo "test.sh: waited $((SECONDS - t))s after the fuzz runs for" \
  "build-tsan/ (CPU of both sanitizer builds: $(($(child_cpu) - c))s)"
report_sanitizer_build tsan

# ThreadSanitizer: a separate build (build-tsan/) of only the tests that run
# threads against the library: concurrent writers, the background jobs
# (rebuild, replace, scrub) with I/O running, the control server's
# connections, the NBD member's connection pools, the bitmap under array
# writes, reshapes with clients writing during the copy, consistency
# policy switches with clients writing, the PPL log's batches. -DURAID_TSAN=ON
# switches libraid/src/base/sync.h's mutexes to std::mutex, which TSan
# sees (Debian's libabsl is not built with TSan: absl::Mutex would give
# false reports on every guarded field). halt_on_error: the first
# report fails the binary (exit code 66); tests/tsan.supp, if present, holds
# suppressions (each with its reason). Two binaries at a time, the longest
# first; each one's output is shown when it fails.
# URAID_RANDOM_STEPS_PERCENT=50, as in the ASan+UBSan pass: reshape_test's
# power-cut and model-step tests (testutil::RandomSteps; no other TSan
# binary has random steps) take half their random steps, every
# configuration, kind and assertion kept; TSan reports a race between two
# accesses that the run executes, whichever order they happened in, so the
# second half of the same steps adds little. ctest above ran them in full.
# CI time: they are most of reshape_test, the longest binary here (118 s in
# the rehearsal of 2026-12-04) on a pass that keeps both CPUs busy.
if [[ -e build-sanitizers.tsan.failed ]]; then
  failed+=("build-tsan/ build")
elif [[ "${URAID_TSAN:-1}" != 0 ]]; then
  t=$SECONDS c=$(child_cpu)
  tsan_supp="$PWD/tests/tsan.supp"
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
  if [[ -f "$tsan_supp" ]]; then
    TSAN_OPTIONS+=":suppressions=$tsan_supp"
  fi
  run_tsan() {  # runs build-tsan/tests/$1; $1.failed marks a failure
    local log="build-tsan/$1.log" s=$SECONDS
    rm -f "build-tsan/$1.failed"
    if URAID_RANDOM_STEPS_PERCENT=50 timeout 600 "build-tsan/tests/$1" \
         >"$log" 2>&1; then
      echo "test.sh: TSan $1 passed ($((SECONDS - s))s)"
    else
      cat "$log"
      echo "test.sh: TSan $1 FAILED ($((SECONDS - s))s; log: $log)"
      touch "build-tsan/$1.failed"
    fi
  }
  # A subshell: its jobs and its wait are the TSan binaries alone, not
  # kernel_md, which runs in the background of this script too.
  (
    for test in "${tsan_tests[@]}"; do
      while [[ $(jobs -rp | wc -l) -ge 2 ]]; do wait -n || true; done
      run_tsan "$test" &
    done
    wait
  )
  for test in "${tsan_tests[@]}"; do
    if [[ -e "build-tsan/$test.failed" ]]; then
      failed+=("$test (build-tsan/, TSan)")
    fi
  done
  stage_took "TSan tests" "$t" "$c"
fi

# kernel_md, started before ctest (see there).
t=$SECONDS
kernel_rc=0
wait "$kernel_pid" || kernel_rc=$?
kernel_pid=
echo "test.sh: waited $((SECONDS - t))s at the end for kernel_md"
if [[ $kernel_rc == 0 ]]; then
  grep -E '^test.sh: |Test +#|tests passed' "$kernel_log" || true
else
  cat "$kernel_log"
  echo "test.sh: kernel_md FAILED (exit $kernel_rc; log: $kernel_log)"
  failed+=("kernel_md (build/tests/kernel/)")
fi

if [[ ${#failed[@]} -eq 0 ]]; then
  echo "test.sh: PASS: all tests passed in $((SECONDS - start))s" \
    "($((SECONDS - t0))s with setup and build)"
else
  # Again at the very end, where a log cut to its tail still shows it.
  for f in "${failed[@]}"; do
    case $f in
      "ctest (build/)") ./scripts/ctest_failures.sh build ;;
      "ctest -L unit (build-fuzz/"*) ./scripts/ctest_failures.sh build-fuzz ;;
      "kernel_md (build/tests/kernel/)")
        ./scripts/ctest_failures.sh build/tests/kernel ;;
    esac
  done
  failures=$(IFS=';'; echo "${failed[*]}")
  echo "test.sh: FAIL: $failures failed after $((SECONDS - start))s" \
    "(see above)"
  exit 1
fi
