# test_generate_gpu (label gpu): generation on the GPU against the host reference on a tiny model
# (2 layers, 4 heads of 16, 64 wide, vocab 500, n_ctx 256), the decode steps written out
# (tests/e2e/generate_yaml.py): right-padded prompts of different lengths, 12 greedy steps, in
# f16 and bf16 (the bf16 run reads a bf16 snapshot, as the host reference does), with an f32
# cache and one of the model's dtype, a cache of just enough positions (one split of the cached
# attention) and one of 256 (four splits and their merge), B = 1 (the matrix-vector linears, and
# `matvec: off` beside them), B = 4 (the f32 LM head kernel) and B = 20 (the head and the linears
# through cuBLASLt). For each: every sequence's tokens equal the host's up to its
# first column whose host top-2 logit margin is below 0.05, the logits within 2e-2 (relative L2)
# of the host's while the tokens before them agree, and at least half the sequences equal in all
# columns (tests/gpu/generate_compare.py); the same bytes at depth 1 and 3, with graphs and with
# --no-graph. Sampled tokens (temperature, top-k, top-p) are the same bytes run after run and at
# any depth; their agreement with the host's draws is printed. pipelines/generate.yaml's WHILE loop
# at batch 1 gives the same tokens in every graph mode. Skips (77) without a GPU or numpy.
set -u
pipectl=$1 src=$2 build=$3
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || { echo "SKIP: no GPU"; exit 77; }
PY=
for p in ${PYTHON:-} python3 /usr/bin/python3; do # the first Python with numpy
    if "$p" -c 'import numpy' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "SKIP: no python3 with numpy (set PYTHON)"; exit 77; }
ref=$src/tests/e2e/gpt2_ref.py
gen=$src/tests/e2e/generate_yaml.py
cmpy=$src/tests/gpu/generate_compare.py
work=$build/generate_gpu_test
rm -rf "$work"
mkdir -p "$work"
fail=0
err() { echo "FAIL: $*"; fail=1; }
T=24 S=12 V=500
for b in 1 4 20; do
    for d in snap_$b snap_bf16_$b; do
        mkdir -p "$work/$d"
        dt=F32
        [ "${d#snap_bf16}" != "$d" ] && dt=BF16
        $PY "$ref" make "$work/$d" --seed 11 --vocab $V --ctx 256 --dtype $dt --batches 2 --B $b --T $T >/dev/null || exit 1
        $PY "$ref" prompts "$work/$d" --seed 11 --vocab $V --batches 2 --B $b --T $T || exit 1
    done
done

# run DIR EXECUTOR MODE [GENERATE_YAML ARGS]: writes DIR/p.yaml once and runs it into DIR/out.
run() {
    local dir=$1 ex=$2 mode=$3
    shift 3
    mkdir -p "$dir"
    [ -f "$dir/p.yaml" ] || $PY "$gen" --steps $S --T $T --vocab $V --save-logits "$@" >"$dir/p.yaml" || return 1
    rm -rf "$dir/out"
    "$pipectl" run --quiet --executor "$ex" $mode "$dir/p.yaml" >"$dir/run.log" 2>&1 || { err "$dir ($ex $mode): $(cat "$dir/run.log")"; return 1; }
}
files() { echo tokens going $(seq -f "logits_%g" 0 $S); }

for b in 4 20; do
    for dt in f16 bf16; do
        snap=snap_$b
        [ $dt = bf16 ] && snap=snap_bf16_$b
        caches="f32 $dt"
        [ $b = 20 ] && caches=f32
        for cache in $caches; do
            for mp in $((T + S)) 256; do
                [ $b = 20 ] && [ $mp = 256 ] && continue
                name=B${b}_${dt}_cache_${cache}_pos_$mp
                args="--B $b --weights ../../$snap --prompts ../../$snap/prompts.npy --lengths ../../$snap/lengths.npy --dtype $dt --cache $cache --max-pos $mp"
                run "$work/$name/host" host "--depth 2" $args || continue
                first=
                for mode in "--depth 1" "--depth 3" "--depth 3 --no-graph"; do
                    run "$work/$name/gpu" gpu "$mode" $args || continue
                    if [ -z "$first" ]; then
                        first=$mode
                        echo "== $name"
                        $PY "$cmpy" "$work/$name/gpu/out" "$work/$name/host/out" --steps $S --margin 0.05 --tol-rel 2e-2 --min-equal 0.5 ||
                            err "$name: GPU against the host reference"
                        mv "$work/$name/gpu/out" "$work/$name/gpu/out1"
                    else
                        for f in $(files); do
                            cmp -s "$work/$name/gpu/out/$f.npy" "$work/$name/gpu/out1/$f.npy" || err "$name: $f.npy differs between '$first' and '$mode'"
                        done
                    fi
                done
            done
        done
    done
done

# B = 1 decodes through the matrix-vector linears (matvec: auto), and with cuBLASLt's GEMMs
# (matvec: off), each against the host, in both dtypes, four splits of the cached attention;
# graphs and --no-graph give the same bytes.
for dt in f16 bf16; do
    snap=snap_1
    [ $dt = bf16 ] && snap=snap_bf16_1
    args="--B 1 --weights ../../$snap --prompts ../../$snap/prompts.npy --lengths ../../$snap/lengths.npy --dtype $dt --cache $dt --max-pos 256"
    run "$work/B1_$dt/host" host "--depth 2" $args || continue
    for mv in auto off; do
        name=B1_${dt}_matvec_$mv
        run "$work/$name/gpu" gpu "--depth 2" $args --gpt2 "matvec: $mv" || continue
        echo "== $name"
        $PY "$cmpy" "$work/$name/gpu/out" "$work/B1_$dt/host/out" --steps $S --margin 0.05 --tol-rel 2e-2 --min-equal 0.5 ||
            err "$name: GPU against the host reference"
    done
    run "$work/B1_${dt}_matvec_auto/gpu" gpu "--depth 1 --no-graph" $args || continue
    mv "$work/B1_${dt}_matvec_auto/gpu/out" "$work/B1_${dt}_matvec_auto/gpu/out_ng"
    run "$work/B1_${dt}_matvec_auto/gpu" gpu "--depth 3" $args || continue
    for f in $(files); do
        cmp -s "$work/B1_${dt}_matvec_auto/gpu/out/$f.npy" "$work/B1_${dt}_matvec_auto/gpu/out_ng/$f.npy" ||
            err "B1_$dt: $f.npy differs between --depth 3 and --depth 1 --no-graph"
    done
done

# pipelines/generate.yaml at batch 1 on the tiny model (tests/e2e/generate_tiny_sets.sh): its
# decode loop, a WHILE node, with the matrix-vector linears in
# its body; the same tokens with graphs, --no-graph and run.loop=host, the loop's 7 steps run, and
# their agreement with the host executor printed.
. "$src/tests/e2e/generate_tiny_sets.sh" # tiny_sets
K=2 N=8
tiny_sets $K 1 $T $N $V
G=("${TINY_SETS[@]}" --set prefill.weights="$work/snap_1" --set decode.weights="$work/snap_1"
    --set "stages.read={name: read, kind: source, to: prompts, file: $work/snap_1/prompts.npy}"
    --set "stages.read_len={name: read_len, kind: source, to: lengths, file: $work/snap_1/lengths.npy}")
loop_run() { # NAME EXECUTOR ARGS...
    local name=$1 ex=$2
    shift 2
    "$pipectl" run --quiet --executor "$ex" --out-dir "$work/loop_$name" "${G[@]}" "$@" \
        "$src/pipelines/generate.yaml" >"$work/loop_$name.log" 2>&1 ||
        { err "generate.yaml B 1 ($name): $(tail -3 "$work/loop_$name.log")"; return 1; }
}
if loop_run host host && loop_run graph gpu && loop_run nograph gpu --no-graph &&
    loop_run hostloop gpu --set run.loop=host; then
    for m in nograph hostloop; do
        cmp -s "$work/loop_graph/out/generate_tokens.npy" "$work/loop_$m/out/generate_tokens.npy" ||
            err "generate.yaml B 1: tokens differ between graphs and $m"
    done
    $PY -c "
import numpy as n
s = n.load('$work/loop_graph/out/generate_steps.npy')
assert (s == $((N - 1))).all(), s
g, h = n.load('$work/loop_graph/out/generate_tokens.npy'), n.load('$work/loop_host/out/generate_tokens.npy')
print('generate.yaml B 1 (WHILE loop, matrix-vector linears): %d of %d sequences equal the host executor\'s tokens' % ((g == h).all(axis=-1).sum(), g.shape[0] * g.shape[1]))" ||
        err "generate.yaml B 1: the loop did not run $((N - 1)) steps"
fi

# Sampling on the GPU: reproducible bytes; its draws against the host's (same uniforms).
smp="method: sample, temperature: 0.9, top_k: 40, top_p: 0.9, seed: 5"
args="--B 4 --weights ../../snap_4 --prompts ../../snap_4/prompts.npy --lengths ../../snap_4/lengths.npy --sample"
run "$work/sample/host" host "--depth 2" $args "$smp" --batch-index
first=
for mode in "--depth 1" "--depth 1" "--depth 3" "--depth 3 --no-graph"; do
    run "$work/sample/gpu" gpu "$mode" $args "$smp" --batch-index || continue
    if [ -z "$first" ]; then
        first=$mode
        mv "$work/sample/gpu/out" "$work/sample/gpu/out1"
        $PY -c "
import numpy as n
g, h = n.load('$work/sample/gpu/out1/tokens.npy'), n.load('$work/sample/host/out/tokens.npy')
part = [next((c for c in range(g.shape[2]) if g[k, b, c] != h[k, b, c]), g.shape[2]) for k in range(g.shape[0]) for b in range(g.shape[1])]
print('sampled on the GPU: %d of %d sequences draw the host reference tokens in all %d columns; first columns that differ: %s' % (sum(p == g.shape[2] for p in part), len(part), g.shape[2], part))"
    else
        cmp -s "$work/sample/gpu/out/tokens.npy" "$work/sample/gpu/out1/tokens.npy" || err "sample: tokens differ between '$first' and '$mode'"
    fi
done
[ $fail -eq 0 ] && echo "generation on the GPU matches the host reference (f16, bf16)"
exit $fail
