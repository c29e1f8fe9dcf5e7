#!/usr/bin/env bash
# run_mpi.sh: `pipectl run --mpi` on the GPU machine, on a tree the caller built (with Open MPI):
# 2 ranks sharing its one GPU give the files one process writes, byte for byte (quickstart,
# overlap, rag, rag_gpt2, gpt2_greedy); then rag.yaml's search-bound throughput with 1 and 2 ranks
# (does a host-bound pipeline gain from a second rank on one GPU?); then pipelines/gpt2.yaml with
# its 3.3 GB of logits written to disk, one process against 2 ranks writing parts that rank 0
# merges and against 2 ranks sending rank 0 their batches (--mpi-write gather). A table last; logs
# under $OUT. From the repository root:
#   source .gpu/setup.sh && BUILD=build-rel bash tests/gpu/run_mpi.sh
# Environment: BUILD (default build-rel), OUT (default out/mpi), RUNS (default 3), STEPS (default
# "same rag logits"), PIPES (the pipelines of "same"), EXEC (gpu; host: a dry run without a GPU).
set -u
BUILD=${BUILD:-build-rel}
OUT=${OUT:-out/mpi}
RUNS=${RUNS:-3}
STEPS=${STEPS:-same rag logits}
EXEC=${EXEC:-gpu}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
P=$(realpath "$BUILD/pipectl")
SRC=$(pwd)
want() { [[ " $STEPS " == *" $1 "* ]]; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
mpi() { timeout -s KILL 300 mpirun --oversubscribe --allow-run-as-root --bind-to none -n "$@"; }
declare -a rows=()
row() { rows+=("$(printf '%-58s %s' "$1" "$2")"); }
"$P" version | grep -q "^mpi: not built" && { echo "pipectl built without MPI"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$SRC/pipelines" "$work/p"
cd "$work/p" || exit 1

since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }'; }
# wall seconds of the run --json printed in $1
wall() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['wall_s'])" "$1" 2>/dev/null; }
same() {
    local a b f
    a=$(cd "$1" && find . -type f | sort)
    b=$(cd "$2" && find . -type f | sort)
    [ "$a" = "$b" ] || { echo "files differ: [$a] [$b]"; return 1; }
    for f in $a; do cmp -s "$1/$f" "$2/$f" || { echo "$f differs"; return 1; }; done
}

if want same; then
    for f in ${PIPES:-quickstart.yaml overlap.yaml rag.yaml rag_gpt2.yaml gpt2_greedy.yaml}; do
        rm -rf out ref
        "$P" run -q -e $EXEC --batches 8 "$f" >"$OUT/same_1_$f.log" 2>&1 || { row "2 ranks, one GPU: $f" "FAIL (one process: $(tail -1 "$OUT/same_1_$f.log"))"; continue; }
        mv out ref
        if mpi 2 "$P" run -e $EXEC --batches 8 --mpi "$f" >"$OUT/same_2_$f.log" 2>&1; then
            if why=$(same ref out); then row "2 ranks, one GPU: $f" "identical"; else row "2 ranks, one GPU: $f" "DIFFER: $why"; fi
        else
            row "2 ranks, one GPU: $f" "FAIL: $(tail -2 "$OUT/same_2_$f.log" | tr '\n' ' ')"
        fi
    done
fi

if want rag; then
    # search-heavy: the corpus 16x, 64 batches
    sed -e 's/shape: \[4096, 64\]/shape: [65536, 64]/' -e 's/shape: \[4096, 16\]/shape: [65536, 16]/' \
        rag.yaml >rag_big.yaml
    for r in $(seq 1 "$RUNS"); do
        rm -rf out
        s=$(date +%s.%N)
        "$P" run -e $EXEC --batches 256 --json rag_big.yaml >"$OUT/rag1_$r.json" 2>"$OUT/rag1_$r.err"
        t1=$(since "$s")
        rm -rf out
        s=$(date +%s.%N)
        mpi 2 "$P" run -e $EXEC -q --batches 256 --mpi rag_big.yaml >"$OUT/rag2_$r.log" 2>&1
        t2=$(since "$s")
        row "rag (65536 docs, 256 batches) run $r: 1 rank / 2 ranks" "$t1 s / $t2 s wall (run itself, 1 rank: $(wall "$OUT/rag1_$r.json") s)"
    done
fi

if want logits; then
    cp gpt2.yaml g.yaml
    printf '  - {name: save_logits, kind: sink, from: logits, to: out/logits.npy}\n' >>g.yaml
    df -h . >"$OUT/disk.txt"
    for r in $(seq 1 2); do
        rm -rf out
        s=$(date +%s.%N)
        "$P" run -e $EXEC -q g.yaml >"$OUT/logits1_$r.log" 2>&1
        t1=$(since "$s")
        sz=$(stat -c %s out/logits.npy 2>/dev/null)
        mv out ref
        s=$(date +%s.%N)
        mpi 2 "$P" run -e $EXEC --mpi g.yaml >"$OUT/logits2_$r.log" 2>&1
        t2=$(since "$s")
        same ref out >/dev/null && ok=identical || ok=DIFFER
        rm -rf out
        s=$(date +%s.%N)
        mpi 2 "$P" run -e $EXEC --mpi --mpi-write gather g.yaml >"$OUT/logits2g_$r.log" 2>&1
        t3=$(since "$s")
        same ref out >/dev/null && okg=identical || okg=DIFFER
        rm -rf ref
        row "gpt2 logits to disk ($sz B) run $r: 1 process / 2 ranks parts / 2 ranks gather" "$t1 s / $t2 s ($ok) / $t3 s ($okg)"
    done
fi
printf '%s\n' "${rows[@]}" | tee "$OUT/table.txt"
