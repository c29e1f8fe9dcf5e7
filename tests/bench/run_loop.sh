#!/usr/bin/env bash
# run_loop.sh: what one iteration of a loop costs on the GPU executor, by how the loop runs. The
# body is one tiny kernel (add on one i32); each batch runs it ITERS times (loop count: ITERS)
# and once (count: 1), at depth 1 so batches do not overlap, and the cost of an iteration is
# (per batch at ITERS - per batch at 1) / (ITERS - 1): what a batch's fixed costs are cancels.
# Rows:
#   while-node, segment graph   run.loop: device, --graphs segment: a conditional WHILE node in the
#                               slot's graph; the test kernel at the body's end sets its condition
#   while-node, stage graph     the same, the loop its own graph (--graphs stage)
#   while-node, --no-graph      the same graph, launched from the plain launch path
#   host-launched, graph        run.loop: host: a worker launches the body's graph once per
#                               iteration and waits for its test (a host round trip each)
#   host-launched, --no-graph   the same with the body's kernel and the test as plain launches
#   unrolled, segment graph     no loop: ITERS kernels one after another in the slot's graph (what
#                               a kernel node costs without the conditional node around it)
# Prints one table (also into $OUT/loop/table.txt) with per batch and per iteration, and each row's
# per-iteration cost against the WHILE node's.
#
#   BUILD=build-cuda bash tests/bench/run_loop.sh
#
# Environment: BUILD (default build-dev; pipectl is looked for there), OUT (default out/bench;
# pipelines, JSON summaries and logs go to $OUT/loop/), ITERS (default 1000), BATCHES (default 64),
# REPS (best of, default 3). Needs /usr/bin/python3 (or python3) for the JSON.
set -euo pipefail
BUILD=${BUILD:-build-dev}
OUT=${OUT:-out/bench}
ITERS=${ITERS:-1000}
BATCHES=${BATCHES:-64}
REPS=${REPS:-3}
P=${PIPECTL:-$BUILD/pipectl}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
dir=$OUT/loop
mkdir -p "$dir"
log=$dir/run.log
: >"$log"
die() {
    echo "run_loop: $*" | tee -a "$log" >&2
    exit 1
}
[ -x "$P" ] || die "no pipectl at '$P' (set BUILD or PIPECTL)"
[ "$ITERS" -ge 2 ] || die "ITERS must be >= 2, got '$ITERS'"

# loop_N.yaml: count N of one add on an i32 [1]; unrolled.yaml: ITERS adds in a row, no loop.
gen_loop() {
    cat >"$dir/loop_$1.yaml" <<EOF
pipeline: loop_bench_$1
run: {batches: $BATCHES, depth: 1}
buffers:
  x:   {where: device, dtype: i32, shape: [1]}
  one: {where: device, dtype: i32, shape: [1]}
stages:
  - {name: zero, kind: kernel, op: fill, value: 0, writes: [x]}
  - {name: set_one, kind: kernel, op: fill, value: 1, writes: [one]}
  - name: repeat
    loop: {max: $1, count: $1}
    stages:
      - {name: bump, kind: kernel, op: add, reads: [x, one], writes: [x]}
EOF
}
gen_loop 1
gen_loop "$ITERS"
{
    echo "pipeline: unrolled_bench"
    echo "run: {batches: $BATCHES, depth: 1}"
    echo "buffers:"
    echo "  x:   {where: device, dtype: i32, shape: [1]}"
    echo "  one: {where: device, dtype: i32, shape: [1]}"
    echo "stages:"
    echo "  - {name: zero, kind: kernel, op: fill, value: 0, writes: [x]}"
    echo "  - {name: set_one, kind: kernel, op: fill, value: 1, writes: [one]}"
    for i in $(seq 1 "$ITERS"); do
        if [ "$i" = 1 ]; then after=""; else after=", after: [bump$((i - 1))]"; fi
        echo "  - {name: bump$i, kind: kernel, op: add, reads: [x, one], writes: [x]$after}"
    done
} >"$dir/unrolled.yaml"
{
    echo "pipeline: unrolled_bench_1"
    echo "run: {batches: $BATCHES, depth: 1}"
    echo "buffers:"
    echo "  x:   {where: device, dtype: i32, shape: [1]}"
    echo "  one: {where: device, dtype: i32, shape: [1]}"
    echo "stages:"
    echo "  - {name: zero, kind: kernel, op: fill, value: 0, writes: [x]}"
    echo "  - {name: set_one, kind: kernel, op: fill, value: 1, writes: [one]}"
    echo "  - {name: bump1, kind: kernel, op: add, reads: [x, one], writes: [x]}"
} >"$dir/unrolled_1.yaml"

# best_per_batch FILE ARGS...: the best per_batch_s of REPS runs, in seconds.
best_per_batch() {
    local f=$1 best="" i
    shift
    for i in $(seq 1 "$REPS"); do
        local j=$dir/$(basename "$f" .yaml)-$i.json
        # shellcheck disable=SC2068 # the options as given
        "$P" run --executor gpu --quiet --json $@ "$f" >"$j" 2>>"$log" || die "pipectl run $* $f failed (see $log)"
        local v
        v=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["per_batch_s"])' "$j")
        if [ -z "$best" ] || "$PY" -c "import sys; sys.exit(0 if $v < $best else 1)"; then best=$v; fi
    done
    echo "$best"
}

rows=()
row() { # NAME FILE_N FILE_1 ARGS...
    local name=$1 fn=$2 f1=$3
    shift 3
    local tn t1
    tn=$(best_per_batch "$fn" "$@")
    t1=$(best_per_batch "$f1" "$@")
    rows+=("$name|$tn|$t1")
    echo "$name: per batch $tn s at $ITERS iterations, $t1 s at 1" >>"$log"
}
row "while-node, segment graph" "$dir/loop_$ITERS.yaml" "$dir/loop_1.yaml" --graphs segment
row "while-node, stage graph" "$dir/loop_$ITERS.yaml" "$dir/loop_1.yaml" --graphs stage
row "while-node, --no-graph" "$dir/loop_$ITERS.yaml" "$dir/loop_1.yaml" --no-graph
row "host-launched, graph" "$dir/loop_$ITERS.yaml" "$dir/loop_1.yaml" --set run.loop=host --graphs segment
row "host-launched, --no-graph" "$dir/loop_$ITERS.yaml" "$dir/loop_1.yaml" --set run.loop=host --no-graph
row "unrolled, segment graph" "$dir/unrolled.yaml" "$dir/unrolled_1.yaml" --graphs segment

"$PY" - "$ITERS" "${rows[@]}" <<'PY' | tee "$dir/table.txt"
import sys
iters = int(sys.argv[1])
rows = [r.split("|") for r in sys.argv[2:]]
def us(s):
    return f"{s * 1e6:10.1f} us"
print(f"loop of {iters} iterations of one tiny kernel, depth 1 (per iteration = "
      f"(per batch at {iters} - per batch at 1) / {iters - 1})")
print(f"{'how the loop runs':28} {'per batch':>13} {'per iteration':>16} {'vs WHILE node':>14}")
ref = None
for name, tn, t1 in rows:
    tn, t1 = float(tn), float(t1)
    it = (tn - t1) / (iters - 1)
    if ref is None:
        ref = it
    ratio = f"{it / ref:13.2f}x" if ref > 0 else "            -"
    print(f"{name:28} {us(tn):>13} {it * 1e6:13.2f} us {ratio}")
PY
