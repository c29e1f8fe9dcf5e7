#!/usr/bin/env bash
# run_session.sh: the GPU checks left open on 2026-12-01 (issues 10, 11, 13, 14), in one device call
# of about 8 minutes, most important first: build (Release), ctest -L gpu (the GPU executor after
# the teardown refactor, the gpt2 tests with the f32 last-position head, transformers 124M),
# tests/gpu/run_long_run.sh (issue 13 item 10: statistics and RSS on the GPU executor),
# tests/gpu/run_cli.sh (issue 14 item 8: depth: auto on the GPU executor), tests/bench/run_copyq.sh
# (issue 10: gpt2.yaml's copy-queue stall) and the search thread sweep (issue 11, STEPS=scale).
# Each step's log is under $OUT; the logs are also packed into $OUT/logs.tgz (one file: the device
# tool returns few); a table is printed last. From the repository root on the GPU machine:
#   source .gpu/setup.sh && bash tests/gpu/run_session.sh
# Environment: OUT (default out/session), BUILD (build-rel), DEADLINE (seconds after which steps
# are skipped; default 480), STEPS (default "build gpu long cli copyq search").
set -u
OUT=${OUT:-out/session}
BUILD=${BUILD:-build-rel}
DEADLINE=${DEADLINE:-480}
STEPS=${STEPS:-build gpu long cli copyq search}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export PATH=/usr/local/cuda/bin:$PATH
declare -a rows=()
want() { [[ " $STEPS " == *" $1 "* ]]; }
step() { # step NAME LIMIT_S LOG CMD...: runs CMD with its output in $OUT/LOG, unless past DEADLINE
    local name=$1 limit=$2 log=$3
    shift 3
    if [ "$SECONDS" -ge "$DEADLINE" ]; then
        rows+=("$(printf '%-40s skipped (deadline %ss)' "$name" "$DEADLINE")")
        return 125
    fi
    local t0=$SECONDS left=$((DEADLINE + 60 - SECONDS))
    [ "$limit" -le "$left" ] || limit=$left
    timeout "$limit" "$@" >"$OUT/$log" 2>&1
    local rc=$?
    rows+=("$(printf '%-40s rc=%-4s %4ss  %s' "$name" "$rc" "$((SECONDS - t0))" "$log")")
    return $rc
}
if want build; then
    step configure 120 build.log cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release &&
        step build 300 build2.log cmake --build "$BUILD" -j16 ||
        { printf '%s\n' "${rows[@]}"; exit 1; }
fi
P=$(pwd)/$BUILD/pipectl
want gpu && step "ctest -L gpu (HF 124M included)" 240 ctest_gpu.log \
    env PIPECTL_TEST_HF=1 ctest --test-dir "$BUILD" -L gpu --output-on-failure -j4
want long && step "run_long_run.sh (issue 13)" 150 long_run.log \
    env OUT="$OUT" bash tests/gpu/run_long_run.sh "$P"
want cli && step "run_cli.sh (issue 14: depth auto)" 180 cli.log \
    env OUT="$OUT/cli" BUILD="$BUILD" bash tests/gpu/run_cli.sh
want copyq && step "run_copyq.sh (issue 10: gpt2.yaml)" 120 copyq.log \
    env OUT="$OUT/copyq" bash tests/bench/run_copyq.sh "$P"
# The sweep's data (a 3 GB corpus) is written under /tmp, not $OUT, so the log pack stays small.
want search && step "search scale sweep (issue 11)" 240 search.log \
    env OUT=/tmp/pl_session_search BUILD="$BUILD" STEPS=scale SCALE_BUDGET=3 \
    DEADLINE=$((DEADLINE - SECONDS > 60 ? DEADLINE - SECONDS : 60)) bash tests/bench/run_search_bench.sh
[ -f /tmp/pl_session_search/search_bench.log ] && cp /tmp/pl_session_search/*.txt /tmp/pl_session_search/*.log "$OUT/" 2>/dev/null
tar czf "$OUT/logs.tgz" -C "$OUT" --exclude logs.tgz . 2>/dev/null
echo
echo "== steps (logs in $OUT, packed in $OUT/logs.tgz)"
printf '  %s\n' "${rows[@]}"
for f in ctest_gpu.log long_run.log cli.log copyq.log search.log; do
    [ -f "$OUT/$f" ] || continue
    echo "== $f (last lines)"
    tail -n 12 "$OUT/$f"
done
