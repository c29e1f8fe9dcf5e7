#!/usr/bin/env bash
# run_bench.sh: the GPU executor's checks and benchmarks in one run on the GPU machine: configure
# and build (Release), the GPU tests (ctest -L gpu), `pipectl bench` (which runs bench_baseline
# beside it), examples through `pipectl run --executor gpu` in each timing mode, a small-batch bench
# at depth 6, the host-step row (tests/bench/run_host_step.sh: pipelines/host_step.yaml's bench
# version beside the hand-written bench_host_step), and compute-sanitizer memcheck on `pipectl run`
# (lean and timed graphs, plain launches). Logs under $OUT; a short table and the bench tables are
# printed last. From the repo root:
#   source .gpu/setup.sh && bash tests/bench/run_bench.sh
# Environment: OUT (default ./out/bench), BUILD (default build-dev), JOBS (default 16), REPS
# (bench runs per configuration, default 3), DEADLINE (seconds from the start after which the
# remaining steps are skipped, default none), STEPS (default "build tests bench run small6
# hoststep sanitizer"; any subset, in that order).
# hoststep takes BYTES, BATCHES, DEPTH, KERNEL from the environment (run_host_step.sh says how);
# its rc is 3 if pipectl refuses the pipeline (exit 2), with the baseline's figures still shown.
set -u
OUT=${OUT:-out/bench}
BUILD=${BUILD:-build-dev}
JOBS=${JOBS:-16}
REPS=${REPS:-3}
DEADLINE=${DEADLINE:-1000000}
STEPS=${STEPS:-build tests bench run small6 hoststep sanitizer}
mkdir -p "$OUT"
declare -a rows=()
want() { [[ " $STEPS " == *" $1 "* ]]; }
. "$(dirname "${BASH_SOURCE[0]}")/../gpu/lib.sh" # step, machine_log
STEP_WIDTH=40 STEP_HEADER=1

{
    date -u
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
        --format=csv 2>&1
    nproc
    git log --oneline -1 2>/dev/null
    git status --short 2>/dev/null | head -20
} >"$OUT/machine.log" 2>&1

built=0
if want build; then
    step configure 120 build.log cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release &&
        step build 400 build.log cmake --build "$BUILD" -j"$JOBS"
    built=$?
fi

P="$BUILD/pipectl"
if [ $built -eq 0 ]; then
    if want tests; then
        step "ctest -L gpu" 150 tests.log ctest --test-dir "$BUILD" -L gpu --output-on-failure -V
    fi
    if want bench; then
        step "pipectl bench --reps $REPS" 200 bench.log "$P" bench --reps "$REPS"
    fi
    if want run; then
        for p in quickstart overlap host_step; do
            [ -f "pipelines/$p.yaml" ] || continue
            step "run $p (gpu)" 60 run.log "$P" run --executor gpu "pipelines/$p.yaml"
            step "run $p (gpu, --timing all)" 60 run.log "$P" run --executor gpu --timing all "pipelines/$p.yaml"
            step "run $p (gpu, --timing off)" 60 run.log "$P" run --executor gpu --timing off "pipelines/$p.yaml"
            step "run $p (gpu, --no-graph)" 60 run.log "$P" run --executor gpu --no-graph "pipelines/$p.yaml"
        done
    fi
    if want small6; then
        step "bench --small-only --small-depth 6" 120 bench6.log "$P" bench --small-only --small-depth 6 --reps 2
    fi
    if want hoststep; then
        step "host step row (run_host_step.sh)" 300 hoststep.log \
            env BUILD="$BUILD" OUT="$OUT" REPS="$REPS" bash tests/bench/run_host_step.sh
    fi
    if want sanitizer; then
        if command -v compute-sanitizer >/dev/null; then
            for a in "" "--timing all" "--no-graph"; do
                # shellcheck disable=SC2086
                step "memcheck run overlap $a" 120 sanitizer.log compute-sanitizer --tool memcheck \
                    --error-exitcode 9 "$P" run --executor gpu $a --batches 40 pipelines/overlap.yaml
            done
        else
            rows+=("compute-sanitizer                        not found")
        fi
    fi
fi

{
    echo "== steps (rc 0 = ok, 124 = timed out; logs under \$OUT)"
    printf '%s\n' "${rows[@]}"
    if [ -f "$OUT/tests.log" ]; then
        echo "== tests (failures and summaries)"
        grep -E "CHECK failed|differs|not supported|compared|status|SKIP|host stage between|spans \[|tests passed|Failed|\*\*\*" "$OUT/tests.log" | head -40
    fi
    if [ -f "$OUT/sanitizer.log" ]; then
        echo "== sanitizer"
        grep -E "ERROR SUMMARY|Invalid|Program hit" "$OUT/sanitizer.log" | head -10
    fi
    if [ -f "$OUT/run.log" ]; then
        echo "== run (errors, achieved, sampling)"
        grep -iE "^###|error|achieved|sampled|not measured" "$OUT/run.log" | head -40
    fi
    if [ -f "$OUT/bench6.log" ]; then
        echo "== bench, small batches at depth 6"
        sed -n '/small batches/,$p' "$OUT/bench6.log"
    fi
    if [ -f "$OUT/hoststep.log" ]; then
        echo "== host step between device steps (details: \$OUT/hoststep/run.log)"
        grep -vE '^###' "$OUT/hoststep.log" | tail -8
    fi
    if [ -f "$OUT/bench.log" ]; then
        echo "== bench"
        cat "$OUT/bench.log"
    fi
} | tee "$OUT/summary.txt"
