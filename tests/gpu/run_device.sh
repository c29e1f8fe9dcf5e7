#!/usr/bin/env bash
# run_device.sh: the ops' GPU checks in one run on the GPU machine: configure, build, the GPU tests
# (ctest -L gpu), `pipectl doctor`, the hand-written baseline at a few sizes and buffer counts,
# and compute-sanitizer (memcheck, racecheck) on test_ops_gpu. Logs go under $OUT; a short table
# is printed last. Run from the repository root on the device machine:
#   source .gpu/setup.sh && bash tests/gpu/run_device.sh
# Environment: OUT (default ./out/device), BUILD (default build-dev), JOBS (default 16).
set -u
OUT=${OUT:-out/device}
BUILD=${BUILD:-build-dev}
JOBS=${JOBS:-16}
mkdir -p "$OUT"
declare -a rows=()
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" # step, machine_log
STEP_WIDTH=28
DEADLINE= # every step runs

{
    date -u
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
        --format=csv 2>&1
    git log --oneline -1 2>/dev/null
} >"$OUT/build.log" 2>&1

step configure 120 build.log cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release &&
    step build 300 build.log cmake --build "$BUILD" -j"$JOBS"
built=$?

if [ $built -eq 0 ]; then
    step test_ops_gpu 120 tests.log "$BUILD/tests/gpu/test_ops_gpu"
    step "ctest -L gpu (others)" 240 tests.log ctest --test-dir "$BUILD" -L gpu -E "^test_ops_gpu$" --timeout 90 --output-on-failure
    step doctor 60 doctor.log "$BUILD/pipectl" doctor
    : >"$OUT/baseline.log"
    # Balanced batches: busy time ~ the measured pinned upload time of one batch (55 GB/s).
    for nbuf in 1 2 3 4; do
        step "baseline 64MiB N=$nbuf" 60 baseline.log "$BUILD/bench_baseline" 67108864 32 $nbuf 1220
    done
    for nbuf in 1 2 3 4; do
        step "baseline 4MiB N=$nbuf" 60 baseline.log "$BUILD/bench_baseline" 4194304 64 $nbuf 76
    done
    if command -v compute-sanitizer >/dev/null; then
        step "memcheck test_ops_gpu" 240 sanitizer.log compute-sanitizer --tool memcheck \
            --error-exitcode 9 "$BUILD/tests/gpu/test_ops_gpu"
        step "racecheck test_ops_gpu" 150 sanitizer.log compute-sanitizer --tool racecheck \
            --racecheck-report hazard --error-exitcode 9 "$BUILD/tests/gpu/test_ops_gpu"
    else
        rows+=("compute-sanitizer            not found")
    fi
fi

{
    echo "== steps (rc 0 = ok, 124 = timed out; logs under \$OUT)"
    printf '%s\n' "${rows[@]}"
    echo "== test_ops_gpu"
    grep -E '^(elementwise|sum|checksum|argmax|gemm|busy):|check\(s\) failed|CHECK failed' \
        "$OUT/tests.log" 2>/dev/null | head -20
    grep -E 'tests passed|tests failed|\*\*\*|Failed|Passed|Skipped' "$OUT/tests.log" 2>/dev/null | tail -15
    echo "== doctor"
    cat "$OUT/doctor.log" 2>/dev/null
    echo "== baseline"
    cat "$OUT/baseline.log" 2>/dev/null
    echo "== sanitizer"
    grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|Error|error' "$OUT/sanitizer.log" 2>/dev/null | head -10
} | tee "$OUT/summary.txt"
[ $built -eq 0 ] || { echo "build failed: tail of build.log:"; tail -40 "$OUT/build.log"; }
