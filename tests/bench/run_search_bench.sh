#!/usr/bin/env bash
# run_search_bench.sh: the search benchmarks in one run on the GPU machine (16 host cores):
# pipectl's exact search (bench_search) beside torch on the CPU (matmul + topk) and numpy (matmul +
# argpartition) on the same .npy data, at 100k x 384 and 1M x 768 f32, 64 queries, k = 10, 1 and 16
# threads, with the gemm rate of the same BLAS; FAISS IVF recall@10 and throughput against exact on
# 1M x 384 (clustered data); and the RAG pipeline with search hidden behind a GPU part
# (tests/bench/rag_search.yaml). Prints a short table at the end; logs and data under $OUT. From the
# repo root:
#   source .gpu/setup.sh && bash tests/bench/run_search_bench.sh
# .gpu/ must hold OpenBLAS and FAISS (prepare them on the CPU machine with
#   ../shared/device/prepare libopenblas0-pthread libopenblas-pthread-dev libopenblas-dev \
#       libgfortran5 libfaiss-dev
# ); python3 there needs numpy and torch.
# Environment: OUT (default out/search_bench), BUILD (default build-search), JOBS (16),
# THREADS ("1 16"), SIZES ("100000x384 1000000x768"), FAISS_N (1000000), FACTORY
# ("IVF4096,Flat"), CLUSTERS (FAISS_N / 50: the data's clusters), NPROBES ("8 16 32 64"), REPS (5), STEPS ("build exact faiss rag": any subset,
# and "scale"), DEADLINE (seconds after which remaining steps are skipped; default 560).
# The "scale" step (not in the default STEPS; about 3 minutes on 16 cores after the build):
# the thread sweep SCALE_THREADS ("1 2 4 8 16") at SCALE_SIZES (SIZES) in one bench_search
# process per size and OpenBLAS core type (CORETYPES: "default SkylakeX"; OPENBLAS_CORETYPE is
# read when OpenBLAS loads, so each is its own process), with the profile of the exact search
# (sgemm, selection, merge, idle time per slot) and the same tiles through sgemm alone, and
# torch (matmul + topk) at the same thread counts in one process; SCALE_BUDGET (4) seconds of
# measured reps at most per thread count (one at least). Its table is printed last.
set -euo pipefail
OUT=${OUT:-out/search_bench}
BUILD=${BUILD:-build-search}
JOBS=${JOBS:-16}
THREADS=${THREADS:-1 16}
SIZES=${SIZES:-100000x384 1000000x768}
FAISS_N=${FAISS_N:-1000000}
FACTORY=${FACTORY:-IVF4096,Flat}
CLUSTERS=${CLUSTERS:-$((FAISS_N / 50))}
NPROBES=${NPROBES:-8 16 32 64}
REPS=${REPS:-5}
STEPS=${STEPS:-build exact faiss rag}
SCALE_THREADS=${SCALE_THREADS:-1 2 4 8 16}
SCALE_SIZES=${SCALE_SIZES:-$SIZES}
CORETYPES=${CORETYPES:-default SkylakeX}
SCALE_BUDGET=${SCALE_BUDGET:-4}
DEADLINE=${DEADLINE:-560}
PY=${PY:-python3}
FT=${FTHREADS:-$(nproc)} # threads for the FAISS part
mkdir -p "$OUT/data"
LOG="$OUT/search_bench.log"
: >"$LOG"
want() { [[ " $STEPS " == *" $1 "* ]]; }
late() { [ "$SECONDS" -ge "$DEADLINE" ]; }
declare -a rows=()
row() { rows+=("$(printf "$@")"); }
# kv KEY LINE: the value of KEY=... in a bench line.
kv() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<<"$2" | head -n 1; }
run() { # run LIMIT CMD...: logs the command and its output; prints the output
    local limit=$1
    shift
    echo "### $*" >>"$LOG"
    local o rc=0
    o=$(timeout "$limit" "$@" 2>>"$LOG") || rc=$?
    echo "$o" >>"$LOG"
    [ $rc -eq 0 ] || echo "### rc=$rc" >>"$LOG"
    echo "$o"
    return $rc
}

{
    date -u
    nproc
    lscpu 2>/dev/null | grep -E "Model name|Socket|Core|Thread|L2|L3" || true
    env | grep -E "^(OPENBLAS|OMP|MKL)_" || true
    git log --oneline -1 2>/dev/null || true
    $PY -c "import torch, numpy; print('torch', torch.__version__, 'numpy', numpy.__version__); print(torch.__config__.show())" 2>&1 | head -20 || true
} >"$OUT/machine.log" 2>&1

if want build; then
    echo "### build" >>"$LOG"
    cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPL_WITH_FAISS=AUTO >>"$LOG" 2>&1
    cmake --build "$BUILD" -j"$JOBS" --target pipectl bench_search >>"$LOG" 2>&1
fi
P="$BUILD/pipectl"
B="$BUILD/bench_search"
[ -x "$B" ] || { echo "no $B: build first (STEPS=build)"; exit 1; }
grep -q "FAISS indexes in the search stage: ON" "$BUILD/CMakeCache.txt" "$LOG" 2>/dev/null ||
    grep -q "PL_FAISS_LIB:FILEPATH=/" "$BUILD/CMakeCache.txt" || echo "note: FAISS may be missing from this build" >>"$LOG"

if want exact; then
    for size in $SIZES; do
        late && { row "%-44s skipped (deadline)" "exact $size"; continue; }
        n=${size%x*} d=${size#*x}
        c="$OUT/data/c_${size}.npy" q="$OUT/data/q_${size}.npy"
        [ -f "$c" ] || run 300 $PY tests/bench/search_torch.py --make "$n" "$d" 64 \
            --out-corpus "$c" --out-queries "$q" --seed 1 >/dev/null
        for t in $THREADS; do
            late && break
            reps=$REPS
            [ "$n" -ge 1000000 ] && [ "$t" -eq 1 ] && reps=3
            # Python's BLAS and torch run on t threads; numpy's through OPENBLAS_NUM_THREADS.
            tl=$(OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t MKL_NUM_THREADS=$t \
                run 400 $PY tests/bench/search_torch.py --corpus "$c" --queries "$q" --k 10 \
                --threads "$t" --reps "$reps" --lib both --ids-out "$OUT/data/ids_torch_${size}_$t.npy") || true
            pl=$(run 400 "$B" --corpus "$c" --queries "$q" --k 10 --threads "$t" --reps "$reps" \
                --gemm --ref-ids "$OUT/data/ids_torch_${size}_$t.npy" \
                --ids-out "$OUT/data/ids_pl_${size}_$t.npy") || true
            ex=$(grep "what=exact" <<<"$pl" || true)
            go=$(grep "what=gemm_one" <<<"$pl" || true)
            gt=$(grep "what=gemm_tiles" <<<"$pl" || true)
            cmpl=$(grep "what=compare" <<<"$pl" || true)
            th=$(grep "what=torch" <<<"$tl" || true)
            np=$(grep "what=numpy" <<<"$tl" || true)
            row "%-12s t=%-3s pipectl %8s ms %6s GF/s | torch %8s ms | numpy %8s ms | torch/pipectl %5s | same ids %s/%s | BLAS gemm %s GF/s (tiles %s)" \
                "$size" "$t" "$(kv ms "$ex")" "$(kv gflops "$ex")" "$(kv ms "$th")" "$(kv ms "$np")" \
                "$(awk -v a="$(kv ms "$th")" -v b="$(kv ms "$ex")" 'BEGIN{if(a>0&&b>0)printf "%.2f",a/b; else print "?"}')" \
                "$(kv same_position "$cmpl")" "640 (vs the first Python library)" "$(kv gflops "$go")" "$(kv gflops "$gt")"
        done
    done
fi

if want faiss && ! late; then
    d=384
    c="$OUT/data/fc.npy" q="$OUT/data/fq.npy"
    [ -f "$c" ] || run 300 $PY tests/bench/search_torch.py --make "$FAISS_N" "$d" 64 --clusters "$CLUSTERS" \
        --out-corpus "$c" --out-queries "$q" --seed 2 >/dev/null
    ex=$(run 300 "$B" --corpus "$c" --queries "$q" --k 10 --threads "$FT" --reps "$REPS" \
        --ids-out "$OUT/data/fids_exact.npy" | grep "what=exact") || true
    row "%-44s %s ms per batch ($FT threads)" "exact ${FAISS_N} x $d (clustered)" "$(kv ms "$ex")"
    ix="$OUT/data/fc_${FACTORY//,/_}.faiss"
    if [ ! -f "$ix" ]; then
        t0=$SECONDS
        run 400 "$P" index build --corpus "$c" --factory "$FACTORY" -o "$ix" --train 262144 >/dev/null || true
        row "%-44s %ss" "index build $FACTORY" "$((SECONDS - t0))"
    fi
    for p in $NPROBES; do
        late && break
        fl=$(timeout 120 "$B" --queries "$q" --corpus "$q" --index "$ix" \
            --nprobe "$p" --k 10 --threads "$FT" --reps "$REPS" \
            --ref-ids "$OUT/data/fids_exact.npy" 2>>"$LOG") || true
        echo "### faiss nprobe $p" >>"$LOG"
        echo "$fl" >>"$LOG"
        f=$(grep "what=faiss" <<<"$fl" || true)
        cm=$(grep "what=compare" <<<"$fl" || true)
        row "%-44s %8s ms  recall@10 %s  exact/faiss %sx" "faiss $FACTORY nprobe $p" \
            "$(kv ms "$f")" "$(kv recall "$cm")" \
            "$(awk -v a="$(kv ms "$ex")" -v b="$(kv ms "$f")" 'BEGIN{if(a>0&&b>0)printf "%.1f",a/b; else print "?"}')"
    done
fi

if want rag && ! late; then
    j=$(run 200 "$P" run --executor gpu --json --quiet tests/bench/rag_search.yaml) || true
    echo "$j" >"$OUT/rag.json"
    row "%-44s %s" "rag_search (gpu): per batch / bound" "$($PY - "$OUT/rag.json" <<'PYEOF'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
    st = {s["name"]: s["mean_s"] for s in r["stages"]}
    gpu = st.get("model", 0) + st.get("digest", 0) + st.get("upload", 0) + st.get("download", 0)
    print("%.2f ms / max(search %.2f ms, gpu %.2f ms) = %.3f (target <= 1.05)" % (
        r["per_batch_s"] * 1e3, st["retrieve"] * 1e3, gpu * 1e3,
        r["per_batch_s"] / max(st["retrieve"], gpu)))
except Exception as e:
    print("no result:", e)
PYEOF
)"
fi

declare -a srows=()
if want scale; then
    for size in $SCALE_SIZES; do
        late && { srows+=("scale $size: skipped (deadline)"); continue; }
        n=${size%x*} d=${size#*x}
        c="$OUT/data/c_${size}.npy" q="$OUT/data/q_${size}.npy"
        [ -f "$c" ] || run 300 $PY tests/bench/search_torch.py --make "$n" "$d" 64 \
            --out-corpus "$c" --out-queries "$q" --seed 1 >/dev/null
        ref="$OUT/data/ids_torch_scale_${size}.npy"
        tl=$(run 300 $PY tests/bench/search_torch.py --corpus "$c" --queries "$q" --k 10 \
            --threads "$SCALE_THREADS" --reps "$REPS" --rep-budget "$SCALE_BUDGET" --lib torch \
            --ids-out "$ref") || true
        # One sgemm on OpenBLAS's own threads beside, and the exact search again right after
        # one (the order the "exact" step's figures were taken in), where quick (not at 1M rows).
        gemm=() refopt=()
        [ "$n" -lt 1000000 ] && gemm=(--gemm --after-blas)
        [ -f "$ref" ] && refopt=(--ref-ids "$ref") # torch's ids, where torch ran
        declare -A pls=()
        for ct in $CORETYPES; do
            late && break
            # OPENBLAS_CORETYPE exported in the command substitution's subshell only.
            pls[$ct]=$(if [ "$ct" != default ]; then export OPENBLAS_CORETYPE="$ct"; fi
                run 300 "$B" --corpus "$c" \
                --queries "$q" --k 10 --sweep "$SCALE_THREADS" --reps "$REPS" \
                --rep-budget "$SCALE_BUDGET" "${gemm[@]}" "${refopt[@]}") || true
            echo "${pls[$ct]}" >"$OUT/scale_${size}_${ct}.txt"
        done
        srows+=("$(printf "%-11s %3s | %-11s | %-8s %9s %7s %6s | %-32s | %s" "size" "t" "torch ms" \
            "coretype" "exact ms" "GF/s" "tor/pl" "gemm/select/merge/idle ms (tiles GF/s)" "ids")")
        for t in $SCALE_THREADS; do
            th=$(grep "what=torch threads=$t " <<<"$tl" || true)
            for ct in $CORETYPES; do
                ex=$(grep "what=exact threads=$t " <<<"${pls[$ct]:-}" || true)
                gt=$(grep "what=gemm_tiles threads=$t " <<<"${pls[$ct]:-}" || true)
                ratio=$(awk -v a="$(kv ms "$th")" -v b="$(kv ms "$ex")" \
                    'BEGIN{if(a>0&&b>0)printf "%.2f",a/b; else print "?"}')
                same=$(grep -E "^ +$t " <<<"${pls[$ct]:-}" | awk '{print $NF}')
                srows+=("$(printf "%-11s %3s | %11s | %-8s %9s %7s %6s | %-32s | %s" "$size" "$t" \
                    "$(kv ms "$th")" "$ct" "$(kv ms "$ex")" "$(kv gflops "$ex")" "$ratio" \
                    "$(kv gemm_ms "$ex")/$(kv select_ms "$ex")/$(kv merge_ms "$ex")/$(kv idle_ms "$ex") ($(kv gflops "$gt"))" \
                    "$same")")
            done
        done
        unset pls
    done
fi

echo "== search benchmarks ($(nproc) cores; logs under $OUT)"
printf '%s\n' "${rows[@]}"
if [ ${#srows[@]} -gt 0 ]; then
    echo "== scale: exact search by thread count and OpenBLAS core type (ids: same as at ${SCALE_THREADS%% *} thread(s))"
    printf '%s\n' "${srows[@]}"
    for f in "$OUT"/scale_*.txt; do
        [ -f "$f" ] || continue
        echo "-- $(basename "$f" .txt)"
        sed -n '/^exact search/,$p' "$f"
        grep "what=exact_after_blas" "$f" || true
    done
fi
