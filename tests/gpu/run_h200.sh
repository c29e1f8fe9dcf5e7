#!/usr/bin/env bash
# run_h200.sh: the GPU checks and benchmarks of generation, loops, streaming, MPI, Python, the
# host stages in parallel and 70,000-stage pipelines, in phases that each fit one command of the
# lent H200 (under 570 s). Every invocation first configures and builds the Release tree in $BUILD
# (about 30 s from scratch on 16 cores: the kernels compile at run time, through NVRTC). Several
# phases may share one command, in the order given, under one deadline; most important first in
# each phase; a step that would start after the deadline is skipped with a row saying so. Logs
# under $OUT, a table last. From the repository root on the GPU machine:
#   source .gpu/setup.sh && bash tests/gpu/run_h200.sh build      # ctest -L gpu
#   source .gpu/setup.sh && bash tests/gpu/run_h200.sh check      # HF comparisons, then memcheck
#   source .gpu/setup.sh && bash tests/gpu/run_h200.sh memcheck   # compute-sanitizer on the loop,
#                                                                   # stream, generation tests
#   source .gpu/setup.sh && bash tests/gpu/run_h200.sh generate   # loop and generation benchmarks
#   source .gpu/setup.sh && bash tests/gpu/run_h200.sh scale      # many stages, MPI, Python, lua
#   source .gpu/setup.sh && bash tests/gpu/run_h200.sh sanitize   # memcheck, racecheck: GPU tests
#   source .gpu/setup.sh && bash tests/gpu/run_h200.sh profile    # a decode step, kernel by kernel
#   source .gpu/setup.sh && bash tests/gpu/run_h200.sh build check
# Environment: BUILD (default build-rel), OUT (default out/h200), JOBS (default 16), DEADLINE
# (seconds; default 540), MEMCHECK (the tests memcheck runs), MPI_STEPS (run_mpi.sh's STEPS),
# RERUN (generate: a ctest -R pattern run first), TOOLS and SANITIZE (sanitize: the tools, the
# tests), TAR (when set: every log is also packed into this .tgz at the end, for a caller that
# can take back only a few files; large outputs, .npy and .bin, are left out).
set -u
[ $# -ge 1 ] || {
    echo "usage: run_h200.sh PHASE... (build check memcheck generate scale sanitize profile)" >&2
    exit 2
}
BUILD=${BUILD:-build-rel}
OUT=${OUT:-out/h200}
JOBS=${JOBS:-16}
DEADLINE=${DEADLINE:-540}
STEP_SLACK=20
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
declare -a rows=()
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" # step, machine_log
phases=("$@")
P=$(realpath -m "$BUILD/pipectl") # absolute: some steps run elsewhere
# ctest's summary line and the failed tests' names, for the table
ctest_rows() {
    local log=$OUT/$1
    rows+=("  $(grep -E 'tests passed|tests failed' "$log" | tail -1)")
    while read -r t; do rows+=("    failed: $t"); done < <(grep -E '^\s+[0-9]+ - ' "$log" | sed 's/^ *//')
}

# compute-sanitizer memcheck on $MEMCHECK: it follows the scripts' pipectl processes (the tiny
# model: loops, streams, generation); the third argument is the scratch folder each test makes.
memcheck_tests() {
    for t in ${MEMCHECK:-test_loop_gpu test_stream_gpu test_generate_gpu}; do
        step "memcheck $t" 150 "memcheck-$t.log" compute-sanitizer --tool memcheck \
            --target-processes all --error-exitcode 9 bash "tests/gpu/$t.sh" "$P" . \
            "$OUT/memcheck-$t"
    done
}

machine_log "$OUT/machine.log"
step configure 120 build.log cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=90 &&
    step build 360 build.log cmake --build "$BUILD" -j"$JOBS" || phases=()

for phase in "${phases[@]}"; do
case $phase in
build)
    step "ctest -L gpu" 400 ctest-gpu.log ctest --test-dir "$BUILD" -L gpu --output-on-failure \
        -E '_hf$' --timeout 300
    ctest_rows ctest-gpu.log
    ;;
check)
    # GPT-2 124M against Hugging Face transformers (random weights saved with save_pretrained).
    PIPECTL_TEST_HF=1 step "ctest hf" 300 ctest-hf.log ctest --test-dir "$BUILD" -R '_hf$' \
        --output-on-failure --timeout 280
    ctest_rows ctest-hf.log
    memcheck_tests
    ;;
memcheck)
    memcheck_tests
    ;;
sanitize)
    # compute-sanitizer on every GPU test ctest runs, one step per tool and test (it follows the
    # processes a test starts). Left out by default: test_exec_gpu_fault plants the faults a
    # memory checker reports, and the signal tests time their signals against a run's progress.
    for tool in ${TOOLS:-memcheck racecheck}; do
        for t in ${SANITIZE:-test_exec_gpu test_ops_gpu test_ukern_gpu test_drain_gpu \
            test_bundle_gpu test_gpt2_gpu test_loop_gpu test_generate_gpu test_stream_gpu \
            test_python_gpu}; do
            step "$tool $t" 200 "$tool-$t.log" compute-sanitizer --tool "$tool" \
                --target-processes all --error-exitcode 9 ctest --test-dir "$BUILD" -R "^$t\$" \
                --output-on-failure --timeout 190
        done
    done
    ;;
profile)
    # a decode step's device time kernel by kernel at batch 1 and 64 (Nsight Compute)
    step "profile_decode.sh 1 64" 240 profile.log env OUT="$OUT/profile" \
        bash tests/bench/profile_decode.sh "$P" 1 64
    rows+=("  $(grep -c . "$OUT/profile.log") lines of kernel tables in profile.log")
    ;;
generate)
    # RERUN: a ctest -R pattern of GPU tests to run first (after a fix, say)
    if [ -n "${RERUN:-}" ]; then
        step "ctest $RERUN" 150 ctest-rerun.log ctest --test-dir "$BUILD" -R "$RERUN" \
            --output-on-failure --timeout 140
        ctest_rows ctest-rerun.log
    fi
    # greedy generation at B 1, 8, 64 (prompt 128, 256 new): pipectl, batch 1 with cuBLASLt's
    # GEMMs instead of the matrix-vector kernels, then the torch loops
    step "generate_pipectl.py" 180 gen-pipectl.log python3 tests/bench/generate_pipectl.py "$P" . \
        "$OUT/genbench" --reps 2
    step "generate_pipectl.py matvec: off" 60 gen-pipectl-off.log python3 \
        tests/bench/generate_pipectl.py "$P" . "$OUT/genbench" --reps 2 --batches 1 \
        --gpt2 'matvec: off'
    step "generate_torch.py --no-hf" 150 gen-torch.log python3 tests/bench/generate_torch.py \
        --no-hf --reps 2
    # generate.yaml as written (its depth, the forwards of the batches in flight sharing the SMs)
    # against depth 1, 2 and 4, and with the gpt2 stages ordered (each batch's loop after the
    # one before) at its depth and depth 1, every run's tokens compared with the first's;
    # agent_rag against its busiest engine, and at depth 1 with every device stage timed (its
    # device time per batch without overlap)
    O="--set prefill.ordered=true --set decode.ordered=true"
    for run in "generate.yaml:" "generate.yaml:--depth 1" "generate.yaml:--depth 2" \
        "generate.yaml:--depth 4" "generate.yaml:$O" "generate.yaml:$O --depth 1" \
        "agent_rag.yaml:" "agent_rag.yaml:--depth 1 --timing all"; do
        f=${run%%:*} a=${run#*:}
        tag=${f%.yaml}$(echo "$a" |
            sed 's/--set [a-z]*\.ordered=true/o/g; s/--depth /d/; s/--timing all/t/; s/ //g')
        # shellcheck disable=SC2086
        step "$f $a" 120 "gen-$tag.log" bash -c '"$@" >"$0"' "$OUT/$tag.json" "$P" run \
            --executor gpu --json --out-dir "$OUT/o-$tag" $a "pipelines/$f" &&
            python3 tests/gpu/rag_summary.py "$tag" "$OUT/$tag.json" >>"$OUT/gen-summary.txt" 2>&1
        [ "$f" = generate.yaml ] && [ "$tag" != generate ] &&
            { cmp -s "$OUT/o-generate/out/generate_tokens.npy" "$OUT/o-$tag/out/generate_tokens.npy" ||
                echo "$tag: tokens differ from generate's" >>"$OUT/gen-summary.txt"; }
    done
    [ -f "$OUT/gen-summary.txt" ] && while read -r l; do rows+=("  $l"); done <"$OUT/gen-summary.txt"
    step "run_loop.sh" 150 loop.log env BUILD="$BUILD" OUT="$OUT" REPS=2 bash tests/bench/run_loop.sh
    # what a stream costs: every step and every 16 against the same loop without one
    for e in 1 16; do
        step "generate_stream.yaml every $e" 120 gen-stream.log "$P" run --executor gpu \
            --set first.eos=-1 --set pick.eos=-1 --set generate.loop.stream.every=$e \
            pipelines/generate_stream.yaml
    done
    ;;
scale)
    # N-stage chains and fan-outs, one batch: the growth with N first (each run at most 60 s),
    # with and without the timed graph and graphs, then 7,000 and 70,000 (the goal: under 10 s,
    # memory linear)
    for a in "" "--timing off" "--no-graph"; do
        step "run_scale.sh gpu 1000-4000 $a" 150 scale.log env RUN_TIMEOUT=60 RUN_ARGS="$a" \
            bash tests/bench/run_scale.sh "$P" gpu 1000 2000 4000
    done
    step "run_scale.sh gpu 7000 70000" 200 scale.log bash tests/bench/run_scale.sh "$P" gpu 7000 70000
    step "run_mpi.sh" 300 mpi.log env BUILD="$BUILD" OUT="$OUT/mpi" STEPS="${MPI_STEPS:-same rag logits}" \
        bash tests/gpu/run_mpi.sh
    # both default pipelines (quickstart, gpt2_greedy), side by side, at their own batch counts
    # and at 256 batches: a cost paid once a run weighs 16 times less there than in quickstart's 16
    for nb in 0 256; do
        step "python_vs_cli.py --batches $nb" 150 python.log env PYTHONPATH=python \
            PIPECTL_LIBRARY="$BUILD/libpipectl.so" PIPECTL_CLI="$P" \
            python3 tests/bench/python_vs_cli.py --executor gpu --batches $nb
    done
    # (parallel 1 alone takes about 23 s a repetition there: 256 batches of 88 ms)
    step "run_lua_parallel.sh 16" 200 lua.log bash tests/bench/run_lua_parallel.sh "$P" 16 2
    ;;
*)
    echo "run_h200.sh: unknown phase '$phase': build, check, memcheck, generate, scale, sanitize" \
        "or profile" >&2
    exit 2
    ;;
esac
done

if [ -n "${TAR:-}" ]; then # packed beside, then moved: $TAR may be inside $OUT
    tgz=$(mktemp) && tar czf "$tgz" -C "$OUT" --exclude="$(basename "$TAR")" --exclude='*.npy' \
        --exclude='*.bin' . && mv "$tgz" "$TAR"
fi
echo
echo "run_h200.sh $* ($(git log --oneline -1 2>/dev/null | cut -c1-60)), logs in $OUT"
printf '%s\n' "${rows[@]}"
