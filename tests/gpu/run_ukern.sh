#!/usr/bin/env bash
# run_ukern.sh: the user kernels' GPU checks in one run on the GPU machine: configure and build
# (Release), the user-kernel GPU test (tests/gpu/test_ukern_gpu.sh through ctest), the examples
# on the GPU with -v (the second run compiles nothing), compute-sanitizer memcheck on the user
# kernel example, and tests/bench/bench_ukern.sh (user kernel vs built-in op, compile times).
# From the repository root on the device machine:
#   source .gpu/setup.sh 2>/dev/null; bash tests/gpu/run_ukern.sh
# Environment: OUT (default ./out/ukern), BUILD (default build-dev), JOBS (default 16).
set -u
OUT=${OUT:-out/ukern}
BUILD=${BUILD:-build-dev}
JOBS=${JOBS:-16}
mkdir -p "$OUT"
export XDG_CACHE_HOME=$PWD/$OUT/cache
rm -rf "$XDG_CACHE_HOME"
declare -a rows=()
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" # step, machine_log
STEP_WIDTH=36 STEP_HEADER=1
DEADLINE= # every step runs
machine_log "$OUT/build.log"
step configure 120 build.log cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release &&
    step build 400 build.log cmake --build "$BUILD" -j"$JOBS"
built=$?
if [ $built -eq 0 ]; then
    step test_ukern_gpu 300 tests.log ctest --test-dir "$BUILD" -R '^test_ukern' --output-on-failure
    step "ctest -L gpu" 300 tests.log ctest --test-dir "$BUILD" -L gpu --timeout 120 --output-on-failure
    for f in user_kernel user_kernel_ptx; do
        step "run $f (1st)" 60 run.log "$BUILD/pipectl" run -v --executor gpu "pipelines/$f.yaml"
        step "run $f (2nd, cached)" 60 run.log "$BUILD/pipectl" run -v --executor gpu "pipelines/$f.yaml"
        step "run $f --no-graph" 60 run.log "$BUILD/pipectl" run --executor gpu --no-graph "pipelines/$f.yaml"
        step "run $f host" 60 run.log "$BUILD/pipectl" run --executor host "pipelines/$f.yaml"
    done
    if command -v compute-sanitizer >/dev/null; then
        step "memcheck user_kernel" 240 sanitizer.log compute-sanitizer --tool memcheck --error-exitcode 9 \
            "$BUILD/pipectl" run --executor gpu -q pipelines/user_kernel.yaml
    fi
    step bench_ukern 400 bench.log bash tests/bench/bench_ukern.sh "$BUILD/pipectl"
fi
{
    echo "== steps (rc 0 = ok; logs under $OUT)"
    printf '%s\n' "${rows[@]}"
    echo "== tests"
    grep -E '^(FAIL|user_kernel|template|cubin|fatbin|fault)|tests passed|Passed|Failed|\*\*\*' "$OUT/tests.log" | head -40
    echo "== runs (compile/cache lines and checksums)"
    grep -E "pipectl: stage|checksum|error" "$OUT/run.log" | head -20
    echo "== sanitizer"
    grep -E "ERROR SUMMARY" "$OUT/sanitizer.log" 2>/dev/null
    echo "== bench"
    cat "$OUT/bench.log" 2>/dev/null
} | tee "$OUT/summary.txt"
[ $built -eq 0 ] || { echo "build failed:"; tail -40 "$OUT/build.log"; }
