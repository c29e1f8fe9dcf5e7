#!/usr/bin/env bash
# run_rag.sh: rag_gpt2 against its busiest engine, in one run on the GPU machine of under a minute,
# on a tree the caller built: pipelines/rag_gpt2.yaml three times with --json and --trace (one line
# each: per batch and the steady state against the busiest engine, retrieve mean / p50 / max, the
# first stage's start after the run clock, the first batch's completion, the largest gap between
# batches; tests/gpu/rag_summary.py), then the comparisons that say what the search's spikes are:
# the sleeping issue loop (a copy of the pipeline with `run.gpu_wait: sleep`) and the search on 15
# and 14 threads (a copy with `threads:`). The machine (cores, caches, steal time) goes into the
# log. Logs and the JSON of every run under $OUT; a summary last. From the repository root on the
# GPU machine, after building:
#   source .gpu/setup.sh && BUILD=build-rel bash tests/gpu/run_rag.sh
# Environment: BUILD (default build-rel) or P (the pipectl to run), OUT (default out/rag), RUNS
# (default 3), CTEST=1 (the GPU executor's tests first); for a dry run of the script without a GPU, EXECUTOR=host PIPE=pipelines/rag.yaml.
set -u
OUT=${OUT:-out/rag}
BUILD=${BUILD:-build-rel}
P=${P:-$BUILD/pipectl}
RUNS=${RUNS:-3}
EXECUTOR=${EXECUTOR:-gpu}
PIPE=${PIPE:-pipelines/rag_gpt2.yaml}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
declare -a rows=()
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" # step, machine_log
STEP_WIDTH=34
DEADLINE=${DEADLINE:-55}
SUM="python3 tests/gpu/rag_summary.py"
machine_log "$OUT/machine.log"
{
    echo "nproc $(nproc)"
    lscpu 2>/dev/null | grep -E "^(Model name|Socket|Core|Thread|NUMA node\(s\)|L2|L3)"
    "$P" version
} >>"$OUT/machine.log" 2>&1
# $TO FILE CMD...: CMD with its stdout in FILE (step keeps stderr in its log; timeout runs no
# shell function, so this is a command).
TO=(bash -c 'out=$1; shift; exec "$@" >"$out"' _)
rm -f "$OUT"/*.err "$OUT"/*.json
steal() { awk '/^cpu /{print $9}' /proc/stat; } # the hypervisor's steal time, in ticks
: >"$OUT/summary.txt"

# run NAME PIPELINE [ENV...]: one traced run, its line in summary.txt
run() {
    local name=$1 pipe=$2
    shift 2
    local s0
    s0=$(steal)
    step "$name" 30 "$name.err" "${TO[@]}" "$OUT/$name.json" env "$@" "$P" run --executor "$EXECUTOR" --json \
        --trace "$OUT/$name.trace.json" "$pipe"
    $SUM "$name" "$OUT/$name.json" "$OUT/$name.trace.json" >>"$OUT/summary.txt" 2>&1
    echo "  steal ticks during the run: $(($(steal) - s0))" >>"$OUT/summary.txt"
    rm -f "$OUT/$name.trace.json" # large; the summary has what it says
}

# CTEST=1: first the GPU executor's own tests (every graph mode, stop, drain, faults: what the
# issue loop's device wake-ups must keep), about a minute more.
if [ "${CTEST:-0}" = 1 ]; then
    step "ctest test_exec_gpu*" 150 ctest.log ctest --test-dir "$BUILD" -R "^test_exec_gpu" \
        --output-on-failure
    DEADLINE=$((SECONDS + DEADLINE)) # the runs still get their time
fi
for r in $(seq 1 "$RUNS"); do run "rag$r" "$PIPE"; done
sed -e 's/^run: {/run: {gpu_wait: sleep, /' "$PIPE" >"$OUT/rag_sleep.yaml"
run sleep1 "$OUT/rag_sleep.yaml"
run sleep2 "$OUT/rag_sleep.yaml"
for t in 15 14; do
    # Same pipeline, the search on t threads; outputs next to the copy.
    sed -e "s/    k: 4$/    k: 4\n    threads: $t/" "$PIPE" >"$OUT/rag_t$t.yaml"
    run "threads$t" "$OUT/rag_t$t.yaml"
done
echo
echo "== steps (logs in $OUT)"
printf '  %s\n' "${rows[@]}"
echo "== machine"
cat "$OUT/machine.log"
echo "== rag_gpt2"
cat "$OUT/summary.txt"
