#!/usr/bin/env bash
# run_gpu_checks.sh: the GPU checks and the GPT-2 measurements, in one run of about 8 minutes
# on the GPU machine, most important first: build (Release); ctest -L gpu (the default graph
# mode under every GPU test; transformers 124M included); tests/bench/run_copyq.sh (gpt2.yaml
# under --graphs stage, segment and none, with timelines); the PyTorch 3-stream + graph baseline
# on a random GPT-2 124M snapshot in the same run; the graph modes side by side on the overlap
# example, three concurrent busy kernels, the greedy forward and the RAG pipeline;
# tests/gpu/run_cli.sh (depth: auto on the GPU, test_depth_auto in the CUDA build); the greedy
# forward at T 512 / 1024 in f16 / bf16; bench_gpt2 per op at T 512 / 1024; torch.compile's
# forward on the same snapshot, last (it takes minutes). Each step's log is under $OUT, also
# packed into $OUT/logs.tgz (one file to copy back); a table is printed last. From the
# repository root on the GPU machine:
#   source .gpu/setup.sh && bash tests/gpu/run_gpu_checks.sh
# Environment: OUT (default out/gpu_checks), BUILD (build-rel), DEADLINE (seconds after which steps
# are skipped; default 480), STEPS (default "build gpu blas copyq torch modes cli greedy next
# compile"; also chunks: gpt2.yaml's forward and download in CHUNK_SET's chunks (default
# "1 2 4 8"; an entry with commas is a list of block rows, e.g. CHUNK_SET="4 1,1,2,4 1,1,1,1,2,2":
# tests/bench/run_copyq.sh's CHUNKS), then 8 under segment and none; headpad:
# bench_gpt2's full-logits forward with and without the padded LM head rows; dchunks: CHUNK_SET
# at depth CHUNK_DEPTH (default 2), stage graphs; d2h: bench_d2h, one 412 MB download alone and
# under load; chunkslow: tests/bench/run_chunk_slow.sh, gpt2.yaml's variants around its slow
# first chunked downloads), COPYQ_MODES and COPYQ_CHUNKS (the copyq step's graph modes and
# chunks, default all three and the file's),
# PYTHON.
set -u
OUT=${OUT:-out/gpu_checks}
BUILD=${BUILD:-build-rel}
DEADLINE=${DEADLINE:-480}
STEPS=${STEPS:-build gpu blas copyq torch modes cli greedy next compile}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
declare -a rows=()
want() { [[ " $STEPS " == *" $1 "* ]]; }
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" # step, machine_log
STEP_WIDTH=40 STEP_SLACK=60
if want build; then
    step configure 120 build.log cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release &&
        step build 300 build.log cmake --build "$BUILD" -j16 ||
        { printf '%s\n' "${rows[@]}"; tail -30 "$OUT/build.log"; exit 1; }
fi
P=$(pwd)/$BUILD/pipectl
want gpu && step "ctest -L gpu (HF 124M included)" 240 ctest_gpu.log \
    env PIPECTL_TEST_HF=1 ctest --test-dir "$BUILD" -L gpu --output-on-failure -j4
if want blas; then # the OpenBLAS kernels pipectl runs with here, and what they do to the RAG step
    step "pipectl version (blas kernels)" 20 blas.log "$P" version
    step "pipectl version, OPENBLAS_CORETYPE=Prescott" 20 blas.log env OPENBLAS_CORETYPE=Prescott "$P" version
    for ct in auto Prescott; do
        for r in 1 2; do
            if [ $ct = auto ]; then
                "$P" run --executor gpu --json pipelines/rag_gpt2.yaml >>"$OUT/blas_rag.log" 2>&1
            else
                OPENBLAS_CORETYPE=$ct "$P" run --executor gpu --json pipelines/rag_gpt2.yaml >>"$OUT/blas_rag.log" 2>&1
            fi
            echo "coretype=$ct" >>"$OUT/blas_rag.log"
        done
    done
    rows+=("rag_gpt2 by OpenBLAS kernels: $OUT/blas_rag.log")
fi
want copyq && step "run_copyq.sh (gpt2.yaml, graph modes)" 120 copyq.log \
    env OUT="$OUT/copyq" MODES="${COPYQ_MODES:-stage segment none}" CHUNKS="${COPYQ_CHUNKS:-0}" \
    bash tests/bench/run_copyq.sh "$P"
# gpt2.yaml's forward and download in each of CHUNK_SET's chunks under stage graphs, and 8 under
# the other modes (with timelines).
CHUNK_SET=${CHUNK_SET:-1 2 4 8}
want chunks && step "run_copyq.sh (gpt2.yaml, chunks $CHUNK_SET)" 200 chunks.log \
    env OUT="$OUT/chunks" CHUNKS="$CHUNK_SET" MODES=stage bash tests/bench/run_copyq.sh "$P" &&
    step "run_copyq.sh (chunks 8, segment and none)" 100 chunks.log \
        env OUT="$OUT/chunks8" CHUNKS=8 MODES="segment none" bash tests/bench/run_copyq.sh "$P"
# dchunks: CHUNK_SET at CHUNK_DEPTH slots (default 2), stage graphs only.
want dchunks && step "run_copyq.sh (chunks $CHUNK_SET, depth ${CHUNK_DEPTH:-2})" 200 dchunks.log \
    env OUT="$OUT/dchunks" CHUNKS="$CHUNK_SET" DEPTH="${CHUNK_DEPTH:-2}" MODES=stage \
    bash tests/bench/run_copyq.sh "$P"
# Why gpt2.yaml's first two chunked downloads run slower at depth 3 and 4 (not in the default
# STEPS): one download alone and beside load (bench_d2h), and gpt2.yaml's variants.
want d2h && step "bench_d2h (one download, loaded)" 60 d2h.log "$(pwd)/$BUILD/bench_d2h"
want chunkslow && step "run_chunk_slow.sh (gpt2.yaml variants)" 240 chunkslow.log \
    env OUT="$OUT/chunkslow" bash tests/bench/run_chunk_slow.sh "$P"
SNAP=/tmp/pl_gpt2_snap
if want torch; then
    step "snapshot: random GPT-2 124M" 120 torch.log $PY -c "
import torch, transformers
torch.manual_seed(0)
transformers.GPT2LMHeadModel(transformers.GPT2Config()).save_pretrained('$SNAP')" &&
        step "torch pipeline (3 streams + graph)" 150 torch.log $PY tests/bench/gpt2_torch.py "$SNAP" pipeline
fi
if want modes; then
    mkdir -p "$OUT/modes"
    sed -e 's/batches: 32/batches: 64/' pipelines/gpt2_greedy.yaml >"$OUT/modes/gpt2_greedy.yaml"
    for p in pipelines/overlap.yaml tests/gpu/data/concurrent_busy.yaml "$OUT/modes/gpt2_greedy.yaml" pipelines/rag_gpt2.yaml; do
        for mode in stage segment none; do
            for r in 1 2; do
                step "$(basename "$p" .yaml) --graphs $mode" 60 modes.log \
                    "$P" run --executor gpu --graphs $mode --json "$p"
            done
        done
    done
fi
want cli && step "run_cli.sh (depth auto, test_depth_auto)" 180 cli.log \
    env OUT="$OUT/cli" BUILD="$BUILD" bash tests/gpu/run_cli.sh
if want greedy; then
    mkdir -p "$OUT/greedy"
    for dt in f16 bf16; do
        for T in 512 1024; do
            # As written (ordered: false: the forwards in flight at once), and ordered.
            for ord in false true; do
                g=$OUT/greedy/greedy-$dt-$T-$ord.yaml
                sed -e "s/dtype: f16/dtype: $dt/" -e "s/\[8, 512\]/[8, $T]/g" -e "s/batches: 32/batches: 64/" \
                    -e "s/ordered: false/ordered: $ord/" pipelines/gpt2_greedy.yaml >"$g"
                for r in 1 2; do
                    "$P" run --executor gpu --json "$g" 2>/dev/null | python3 -c 'import json, sys
j = json.loads([l for l in sys.stdin if l.startswith("{")][-1])
print("pipectl greedy %s T=%s ordered=%s: %.3f M tok/s (%s)" % (sys.argv[1], sys.argv[2], sys.argv[3], j["batches_done"] * 8 * int(sys.argv[2]) / j["wall_s"] / 1e6, j["graph_mode"]))' $dt $T $ord >>"$OUT/greedy.log" 2>&1
                done
            done
        done
    done
    rows+=("greedy: $OUT/greedy.log")
fi
if want next; then
    for T in 512 1024; do
        step "bench_gpt2 f16 T=$T (per op)" 60 next.log "$BUILD/bench_gpt2" --dtype f16 --T $T --output argmax
    done
fi
if want headpad; then # the full-logits forward with the LM head's rows padded (as the kind does) and packed
    for pad in 1 0; do
        step "bench_gpt2 f16 T=512 logits --pad $pad" 60 headpad.log "$BUILD/bench_gpt2" --dtype f16 --T 512 \
            --output logits --pad $pad
    done
fi
if want compile && [ -d "$SNAP" ]; then
    left=$((DEADLINE + 50 - SECONDS))
    [ $left -lt 240 ] || left=240
    [ $left -gt 30 ] && step "torch forward eager + compile (${left}s limit)" "$left" torch_compile.log \
        $PY tests/bench/gpt2_torch.py "$SNAP" forward --compile
fi
# Diagnostics (steps ragtrace, ragprof, ncu, bench; not in the default STEPS):
# rag_gpt2's timeline (where the 8% over its busiest engine goes), the attention kernel under
# Nsight Compute at T 1024, and `pipectl bench --quick` with stage and with segment graphs.
if want ragtrace; then
    "$P" run --executor gpu --timing all --trace "$OUT/rag.trace.json" pipelines/rag_gpt2.yaml >"$OUT/ragtrace.log" 2>&1
    python3 - "$OUT/rag.trace.json" >>"$OUT/ragtrace.log" 2>&1 <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
by = {}
for e in ev:
    if e.get("ph") == "X":
        by.setdefault(e["name"], {})[e["args"]["batch"]] = (e["ts"] / 1e3, e["dur"] / 1e3)
names = ["retrieve", "upload", "generate", "download", "save_next"]
print("batch " + " ".join("%18s" % n for n in names) + "   gap before generate")
prev_end = None
for b in sorted(by.get("generate", {}))[:24]:
    row = []
    for n in names:
        v = by.get(n, {}).get(b)
        row.append("%9.3f+%7.3f" % v if v else "%18s" % "-")
    g = by["generate"][b]
    gap = g[0] - prev_end if prev_end is not None else 0
    prev_end = g[0] + g[1]
    print("%5d %s   %.3f ms" % (b, " ".join(row), gap))
PY
    rows+=("rag trace: $OUT/ragtrace.log")
fi
if want ragprof; then # rag_gpt2's retrieve stage against its busiest engine, three runs
    for r in 1 2 3; do
        "$P" run --executor gpu --json pipelines/rag_gpt2.yaml >"$OUT/ragprof.$r.json" 2>"$OUT/ragprof.$r.err"
        python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
st = {s["name"]: s for s in j["stages"]}
eng = max(e["busy_per_batch_s"] for e in j["engines"])
print("rag_gpt2 run %s: per batch %.3f ms, busiest engine %.3f ms -> %.3fx; retrieve mean %.3f p50 %.3f max %.3f ms" % (
    sys.argv[2], j["per_batch_s"] * 1e3, eng * 1e3, j["per_batch_s"] / eng, st["retrieve"]["mean_s"] * 1e3,
    st["retrieve"]["p50_s"] * 1e3, st["retrieve"]["max_s"] * 1e3))' "$OUT/ragprof.$r.json" $r >>"$OUT/ragprof.log" 2>&1
    done
    rows+=("rag profile: $OUT/ragprof.log")
fi
if want ncu && command -v ncu >/dev/null; then
    # Pipe shares (tensor, MUFU for exp2, FMA/ALU), issue activity and stall reasons of the
    # attention kernel and the layernorm at T 1024: which unit bounds them.
    for k in attention_kernel layernorm_kernel; do
        step "ncu $k (f16 T1024)" 90 ncu_$k.log ncu --kernel-name regex:$k --launch-skip 2 --launch-count 1 \
            --section SpeedOfLight --section Occupancy --section WarpStateStats --section InstructionStats \
            --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section LaunchStats \
            --metrics sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum \
            "$BUILD/bench_gpt2" --dtype f16 --T 1024 --reps 1
    done
fi
if want bench; then
    step "pipectl bench --quick (stage graphs)" 60 bench.log "$P" bench --quick
    step "pipectl bench --quick --graphs segment" 60 bench.log "$P" bench --quick --graphs segment
fi
tar czf "$OUT/logs.tgz" -C "$OUT" --exclude logs.tgz --exclude '*.trace.json' . 2>/dev/null
echo
echo "== steps (logs in $OUT, packed in $OUT/logs.tgz)"
printf '  %s\n' "${rows[@]}"
[ -f "$OUT/ctest_gpu.log" ] && grep -E "tests passed|Failed|\*\*\*" "$OUT/ctest_gpu.log" | head
[ -f "$OUT/blas.log" ] && grep "^blas:" "$OUT/blas.log"
[ -f "$OUT/blas_rag.log" ] && python3 -c '
import json, sys
j = None
for l in open(sys.argv[1]):
    if l.startswith("{"):
        j = json.loads(l)
    elif l.startswith("coretype=") and j:
        st = {s["name"]: s["mean_s"] for s in j["stages"]}
        eng = {e["name"]: e["busy_per_batch_s"] for e in j["engines"]}
        print("  rag_gpt2 %-16s per batch %.3f ms  retrieve %.3f ms  generate %.3f ms  busiest engine %.3f ms -> %.3fx" % (
              l.strip(), j["per_batch_s"] * 1e3, st["retrieve"] * 1e3, st["generate"] * 1e3,
              max(eng.values()) * 1e3, j["per_batch_s"] / max(eng.values())))' "$OUT/blas_rag.log"
[ -f "$OUT/copyq/runs.txt" ] && { echo "== gpt2.yaml"; cat "$OUT/copyq/runs.txt"; }
[ -f "$OUT/d2h.log" ] && grep -A14 "^bench_d2h" "$OUT/d2h.log"
for d in chunks chunks8 dchunks; do
    [ -f "$OUT/$d/runs.txt" ] && { echo "== gpt2.yaml ($d)"; cat "$OUT/$d/runs.txt"; }
done
[ -f "$OUT/chunks/timelines.txt" ] && grep -A4 "trace_c8_stage" "$OUT/chunks/timelines.txt"
[ -f "$OUT/chunkslow/spans.txt" ] && { echo "== run_chunk_slow.sh"; cat "$OUT/chunkslow/spans.txt"; }
[ -f "$OUT/torch.log" ] && grep -E "^torch 3-stream" "$OUT/torch.log"
[ -f "$OUT/modes.log" ] && {
    echo "== graph modes (per batch ms, achieved share of the bound)"
    python3 -c '
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        j = json.loads(l)
        print("  %-16s %-8s %8.3f ms  %5.1f%%  %s" % (j.get("pipeline", "?"), j.get("graph_mode", "?"),
              j["per_batch_s"] * 1e3, 100 * j["achieved"], j.get("bound_stage", "")))' "$OUT/modes.log"
}
[ -f "$OUT/cli.log" ] && grep -E "FAIL|test_depth_auto|overlap --depth auto  " "$OUT/cli.log" | head -5
[ -f "$OUT/greedy.log" ] && cat "$OUT/greedy.log"
[ -f "$OUT/headpad.log" ] && grep -E "^  (gemm lm head|forward) " "$OUT/headpad.log"
[ -f "$OUT/next.log" ] && grep -E "^  (attention|forward|gemm|layernorm)|T=" "$OUT/next.log" | head -20
[ -f "$OUT/torch_compile.log" ] && grep -E "^torch forward" "$OUT/torch_compile.log"
[ -f "$OUT/ragtrace.log" ] && head -20 "$OUT/ragtrace.log"
[ -f "$OUT/ragprof.log" ] && cat "$OUT/ragprof.log"
for f in "$OUT"/ncu_*.log; do
    [ -f "$f" ] && { echo "== $(basename "$f")"; grep -E "Duration|Throughput|Achieved Occupancy|Registers Per|Theoretical Occupancy|Issue Slots Busy|Warp Cycles Per Issued|pct_of_peak|bank_conflicts|Block Limit" "$f" | head -24; }
done
[ -f "$OUT/bench.log" ] && grep -E "^pipectl bench|^graphs|^no-graph|^sequential|^== " "$OUT/bench.log" | head -40
