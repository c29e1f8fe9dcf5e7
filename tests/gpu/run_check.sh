#!/usr/bin/env bash
# run_check.sh: one run on the GPU machine that validates the executor: build (Release), the GPU
# tests (ctest -L gpu), a segmented pipeline (host stage between device segments) on the GPU against
# the host executor at several depths and modes, a fault injected into segment 1, compute-sanitizer
# memcheck on the segmented run, and a quick `pipectl bench`. Logs under $OUT; table last.
#   source .gpu/setup.sh && bash tests/gpu/run_check.sh
set -u
OUT=${OUT:-out/device}
BUILD=${BUILD:-build-dev}
JOBS=${JOBS:-16}
mkdir -p "$OUT"
declare -a rows=()
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" # step, machine_log
STEP_WIDTH=34
DEADLINE= # every step runs
machine_log "$OUT/build.log"
step configure 120 build.log cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release &&
    step build 300 build.log cmake --build "$BUILD" -j"$JOBS"
built=$?
P="$BUILD/pipectl"
seg=tests/gpu/data/segments.yaml
cmpout() { # cmpout NAME ARGS...: GPU run vs the host reference
    local name=$1; shift
    rm -f tests/gpu/data/out/segments_z.npy
    if step "seg $name" 60 seg.log "$P" run --quiet "$@" "$seg"; then
        if cmp -s tests/gpu/data/out/segments_z.npy "$OUT/ref.npy"; then rows+=("   $name: identical to host"); else rows+=("   $name: DIFFERS from host"); fi
    fi
}
if [ $built -eq 0 ]; then
    mkdir -p out
    step "seg host reference" 60 seg.log "$P" run --quiet --executor host "$seg" && cp tests/gpu/data/out/segments_z.npy "$OUT/ref.npy"
    "$P" plan "$seg" >>"$OUT/seg.log" 2>&1
    cmpout "gpu graphs d4" --executor gpu
    cmpout "gpu graphs d1" --executor gpu --depth 1
    cmpout "gpu graphs d3" --executor gpu --depth 3
    cmpout "gpu no-graph d3" --executor gpu --no-graph --depth 3
    cmpout "gpu timing all" --executor gpu --timing all
    step "seg fault k2:5" 60 seg.log "$P" run --quiet --executor gpu --fail-at k2:5 "$seg"
    tail -3 "$OUT/seg.log" | sed 's/^/   /' >>"$OUT/seg_fault.txt"
    step "seg timed summary" 60 seg.log "$P" run --executor gpu --batches 64 "$seg"
    step "ctest -L gpu" 300 tests.log ctest --test-dir "$BUILD" -L gpu --timeout 120 --output-on-failure
    if command -v compute-sanitizer >/dev/null; then
        step "memcheck seg" 120 sanitizer.log compute-sanitizer --tool memcheck --error-exitcode 9 "$P" run --quiet --executor gpu --batches 8 "$seg"
    fi
    step "bench --quick" 240 bench.log "$P" bench --quick
fi
{
    echo "== steps"
    printf '%s\n' "${rows[@]}"
    echo "== fault"; cat "$OUT/seg_fault.txt" 2>/dev/null
    echo "== tests"; grep -E 'tests passed|tests failed|\*\*\*|Failed' "$OUT/tests.log" 2>/dev/null | tail -12
    echo "== seg summary"; grep -E "per batch|pipeline|^  [a-z0-9_]+ +(h2d|d2h|kernel|lua|sink|source)" "$OUT/seg.log" | tail -14
    echo "== sanitizer"; grep -E 'ERROR SUMMARY' "$OUT/sanitizer.log" 2>/dev/null | head -3
    echo "== bench"; tail -25 "$OUT/bench.log" 2>/dev/null
} | tee "$OUT/summary.txt"
[ $built -eq 0 ] || { echo "build failed:"; tail -40 "$OUT/build.log"; }
