#!/usr/bin/env bash
# run_bench.sh: everything one GPU-machine call does for the GPU executor: configure and build
# (Release), the executor's GPU tests, `pipectl bench` (which runs bench_baseline beside it),
# compute-sanitizer memcheck on test_exec_gpu, and one example through `pipectl run --executor
# gpu`. Logs under $OUT; a short table and the bench tables are printed last. From the repo root:
#   source .gpu/setup.sh && bash tests/bench/run_bench.sh
# Environment: OUT (default ./out/bench), BUILD (default build-dev), JOBS (default 16),
# STEPS (default "build tests bench sanitizer run"; any subset, in that order).
set -u
OUT=${OUT:-out/bench}
BUILD=${BUILD:-build-dev}
JOBS=${JOBS:-16}
STEPS=${STEPS:-build tests bench sanitizer run}
mkdir -p "$OUT"
declare -a rows=()
want() { [[ " $STEPS " == *" $1 "* ]]; }
step() { # step NAME TIMEOUT_S LOG CMD...: runs CMD with a timeout, logs it, records rc and time
    local name=$1 limit=$2 log=$3
    shift 3
    local t0=$SECONDS
    echo "### $name: $*" >>"$OUT/$log"
    timeout "$limit" "$@" >>"$OUT/$log" 2>&1
    local rc=$?
    rows+=("$(printf '%-34s rc=%-4s %4ss  %s' "$name" "$rc" "$((SECONDS - t0))" "$log")")
    return $rc
}

{
    date -u
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
        --format=csv 2>&1
    nproc
    git log --oneline -1 2>/dev/null
} >"$OUT/machine.log" 2>&1

built=0
if want build; then
    step configure 120 build.log cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release &&
        step build 400 build.log cmake --build "$BUILD" -j"$JOBS"
    built=$?
fi

if [ $built -eq 0 ]; then
    if want tests; then
        step test_exec_gpu 240 tests.log "$BUILD/tests/gpu/test_exec_gpu"
        step test_exec_gpu_fault 120 tests.log "$BUILD/tests/gpu/test_exec_gpu_fault"
    fi
    if want bench; then
        step "pipectl bench" 420 bench.log "$BUILD/pipectl" bench
    fi
    if want sanitizer; then
        if command -v compute-sanitizer >/dev/null; then
            step "memcheck test_exec_gpu" 300 sanitizer.log compute-sanitizer --tool memcheck \
                --error-exitcode 9 "$BUILD/tests/gpu/test_exec_gpu"
        else
            rows+=("compute-sanitizer                  not found")
        fi
    fi
    if want run; then
        for p in quickstart overlap; do
            [ -f "pipelines/$p.yaml" ] &&
                step "run $p (gpu)" 120 run.log "$BUILD/pipectl" run --executor gpu "pipelines/$p.yaml"
            [ -f "pipelines/$p.yaml" ] &&
                step "run $p (gpu, --no-graph)" 120 run.log "$BUILD/pipectl" run --executor gpu --no-graph "pipelines/$p.yaml"
        done
    fi
fi

{
    echo "== steps (rc 0 = ok, 124 = timed out; logs under \$OUT)"
    printf '%s\n' "${rows[@]}"
    if [ -f "$OUT/tests.log" ]; then
        echo "== tests (failures and summaries)"
        grep -E "CHECK failed|differs|not supported|compared|status|SKIP|host stage between" "$OUT/tests.log" | head -40
    fi
    if [ -f "$OUT/sanitizer.log" ]; then
        echo "== sanitizer"
        grep -E "ERROR SUMMARY|Invalid|Program hit" "$OUT/sanitizer.log" | head -10
    fi
    if [ -f "$OUT/run.log" ]; then
        echo "== run (errors)"
        grep -iE "error|achieved|executor" "$OUT/run.log" | head -12
    fi
    if [ -f "$OUT/bench.log" ]; then
        echo "== bench"
        cat "$OUT/bench.log"
    fi
} | tee "$OUT/summary.txt"
