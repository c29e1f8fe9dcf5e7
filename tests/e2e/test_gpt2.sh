# test_gpt2: the gpt2 kind on the host executor against an independent numpy forward
# (tests/e2e/gpt2_ref.py) on a tiny model (2 layers, 4 heads, 64 wide, vocab 512): logits,
# argmax and log-probabilities, checkpoints in F32, BF16 and F16 (sharded with an index, as
# save_pretrained writes large models), with and without the "transformer." prefix, identical outputs at depth 1 and 3 and chunked (chunks: N, uneven lists and blocks of positions), seeded random weights, and bad checkpoints refused
# by `pipectl check` with exit 2 and the exact message. Needs /usr/bin/python3 with numpy (skips
# otherwise).
set -u
pipectl=$1 src=$2 build=$3
PY=
for p in ${PYTHON:-} python3 /usr/bin/python3; do # the first Python with numpy
    if "$p" -c 'import numpy' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "SKIP: no python3 with numpy (set PYTHON)"; exit 77; }
ref=$src/tests/e2e/gpt2_ref.py
work=$build/gpt2_e2e
rm -rf "$work"
mkdir -p "$work"
fail=0
err() { echo "FAIL: $*"; fail=1; }

# pipeline WEIGHTS [EXTRA_LM_KEYS]: the tiny pipeline reading snap/ids.npy, three gpt2 stages;
# B sequences a batch (PB, default 2: the snapshot's --B).
pipeline() {
    local b=${PB:-2}
    cat <<YAML
pipeline: gpt2_tiny
run: {batches: 3, depth: 2, seed: 3}
buffers:
  ids:     {where: host, dtype: i32, shape: [$b, 16]}
  tg:      {where: host, dtype: i32, shape: [$b, 16]}
  ids_dev: {where: device, dtype: i32, shape: [$b, 16]}
  tg_dev:  {where: device, dtype: i32, shape: [$b, 16]}
  lg_dev:  {where: device, dtype: f32, shape: [$b, 16, 512]}
  nx_dev:  {where: device, dtype: i32, shape: [$b]}
  lp_dev:  {where: device, dtype: f32, shape: [$b, 16]}
  lg:      {where: host, dtype: f32, shape: [$b, 16, 512]}
  nx:      {where: host, dtype: i32, shape: [$b]}
  lp:      {where: host, dtype: f32, shape: [$b, 16]}
stages:
  - {name: lm, kind: gpt2, weights: $1, ids: ids_dev, out: lg_dev$2}
  - {name: read_ids, kind: source, to: ids, file: $1/ids.npy}
  - {name: read_tg, kind: source, to: tg, file: $1/targets.npy}
  - {name: up, kind: h2d, from: ids, to: ids_dev}
  - {name: up_tg, kind: h2d, from: tg, to: tg_dev}
  - {name: greedy, kind: gpt2, weights: $1, ids: ids_dev, out: nx_dev, output: argmax$2}
  - {name: score, kind: gpt2, weights: $1, ids: ids_dev, targets: tg_dev, out: lp_dev, output: logprob$2}
  - {name: down, kind: d2h, from: lg_dev, to: lg}
  - {name: down_nx, kind: d2h, from: nx_dev, to: nx}
  - {name: down_lp, kind: d2h, from: lp_dev, to: lp}
  - {name: save, kind: sink, from: lg, to: out/logits.npy}
  - {name: save_nx, kind: sink, from: nx, to: out/next.npy}
  - {name: save_lp, kind: sink, from: lp, to: out/logprob.npy}
YAML
}

check_outputs() { # DIR SNAP
    $PY "$ref" check "$2" "$1/out/logits.npy" --output logits --tol-rel 1e-5 >"$1/check.log" 2>&1 || err "$1: logits: $(tail -3 "$1/check.log")"
    $PY "$ref" check "$2" "$1/out/next.npy" --output argmax --positions last >>"$1/check.log" 2>&1 || err "$1: argmax: $(tail -3 "$1/check.log")"
    $PY "$ref" check "$2" "$1/out/logprob.npy" --output logprob --tol-rel 1e-5 >>"$1/check.log" 2>&1 || err "$1: logprob: $(tail -3 "$1/check.log")"
}

for variant in f32 bf16_prefixed f16_sharded; do
    d=$work/$variant
    mkdir -p "$d/snap"
    case $variant in
    f32) $PY "$ref" make "$d/snap" --seed 5 ;;
    bf16_prefixed) $PY "$ref" make "$d/snap" --seed 6 --dtype BF16 --prefix transformer. ;;
    f16_sharded) $PY "$ref" make "$d/snap" --seed 8 --dtype F16 --prefix transformer. --shards 3 ;;
    esac
    pipeline snap "" >"$d/tiny.yaml"
    for depth in 1 3; do
        rm -rf "$d/out"
        if ! "$pipectl" run --quiet --executor host --depth $depth "$d/tiny.yaml" >"$d/run$depth.log" 2>&1; then
            err "$variant depth $depth: $(cat "$d/run$depth.log")"
            continue
        fi
        if [ $depth = 1 ]; then
            check_outputs "$d" "$d/snap"
            mv "$d/out" "$d/out1"
        else
            for f in logits next logprob; do
                cmp -s "$d/out/$f.npy" "$d/out1/$f.npy" || err "$variant: $f.npy differs between depth 1 and $depth"
            done
        fi
    done
done

# Seeded random weights: the same bytes at two depths and on a second run.
d=$work/random
mkdir -p "$d/snap"
cp "$work/f32/snap/ids.npy" "$work/f32/snap/targets.npy" "$d/snap/"
pipeline snap "" | sed 's/weights: snap/weights: random, config: tiny/' >"$d/tiny.yaml"
"$pipectl" run --quiet --executor host --depth 1 "$d/tiny.yaml" >"$d/run.log" 2>&1 || err "random: $(cat "$d/run.log")"
mv "$d/out" "$d/out1"
"$pipectl" run --quiet --executor host --depth 3 "$d/tiny.yaml" >"$d/run.log" 2>&1 || err "random: $(cat "$d/run.log")"
cmp -s "$d/out/logits.npy" "$d/out1/logits.npy" || err "random weights: logits differ between runs"

# chunks: the host executor runs a chunked batch whole (the same bytes); the plan links each
# download to its forward block by block where both are chunked alike, and only there; a count
# that does not divide the rows is a check error at the key.
d=$work/chunks
mkdir -p "$d"
pipeline ../f32/snap ", chunks: 2" |
    sed -e 's/to: lg}/to: lg, chunks: 2}/' -e 's/to: nx}/to: nx, chunks: 2, after: [score]}/' >"$d/tiny.yaml"
if "$pipectl" run --quiet --executor host "$d/tiny.yaml" >"$d/run.log" 2>&1; then
    for f in logits next logprob; do
        cmp -s "$d/out/$f.npy" "$work/f32/out1/$f.npy" || err "chunks: $f.npy differs from the unchunked run"
    done
else
    err "chunks: $(cat "$d/run.log")"
fi
"$pipectl" plan "$d/tiny.yaml" >"$d/plan.txt" 2>&1 || err "chunks: pipectl plan: $(cat "$d/plan.txt")"
grep -Eq "^    down +d2h +d2h +waits on e[0-9]+\(lm, chunk by chunk: 2\)$" "$d/plan.txt" ||
    err "chunks: down is not linked to lm chunk by chunk: $(grep -E '^    down' "$d/plan.txt")"
# down_nx reads greedy's output (linked) and is after: score, chunked alike but read nothing of
# (an after: orders whole stages: not linked).
grep -Eq "^    down_nx +d2h +d2h +waits on e[0-9]+\(greedy, chunk by chunk: 2\), e[0-9]+\(score\)$" "$d/plan.txt" ||
    err "chunks: down_nx should wait for score whole and greedy by chunks: $(grep -E '^    down_nx' "$d/plan.txt")"
# down_lp is not chunked: whatever it waits for, it waits for whole (here down_nx's wait on
# score and the d2h stream's order imply its wait on score).
grep -E "^    down_lp " "$d/plan.txt" | grep -q "chunk by chunk" &&
    err "chunks: down_lp (not chunked) waits block by block: $(grep -E '^    down_lp' "$d/plan.txt")"
pipeline ../f32/snap ", chunks: 3" >"$d/bad.yaml"
"$pipectl" check "$d/bad.yaml" >/dev/null 2>"$d/err"
rc=$?
want="$d/bad.yaml:15:85: error: gpt2 stage 'lm': chunks 3 does not divide the 2 rows of 'ids_dev' [2, 16] (the first dimension); choose a divisor of 2"
[ $rc -eq 2 ] && [ "$(head -n 1 "$d/err")" = "$want" ] || err "chunks 3: exit $rc
  got:  $(head -n 1 "$d/err")
  want: $want"

# Uneven chunks (4 sequences a batch; lm [1, 3], greedy [3, 1], score [1, 3] with a download
# in 2 equal blocks): the host executor's bytes are the unchunked run's; the plan links each
# download to its forward where the block rows agree and shows the lists; the stages' memory is
# that of their largest block (3 sequences), the same as the unchunked stages' on B 3.
d=$work/uneven
mkdir -p "$d/snap" "$d/snap3"
$PY "$ref" make "$d/snap" --seed 5 --B 4
$PY "$ref" make "$d/snap3" --seed 5 --B 3
PB=4 pipeline snap "" >"$d/p.yaml"
PB=4 pipeline snap ", chunks: [1, 3]" |
    sed -e 's/output: argmax, chunks: \[1, 3\]}/output: argmax, chunks: [3, 1]}/' \
        -e 's/to: lg}/to: lg, chunks: [1, 3]}/' -e 's/to: nx}/to: nx, chunks: [3, 1]}/' \
        -e 's/to: lp}/to: lp, chunks: 2}/' >"$d/pu.yaml"
PB=3 pipeline snap3 "" >"$d/p3.yaml"
for y in p pu; do
    rm -rf "$d/out"
    "$pipectl" run --quiet --executor host "$d/$y.yaml" >"$d/run.log" 2>&1 || err "uneven $y: $(cat "$d/run.log")"
    mv "$d/out" "$d/out_$y"
done
for f in logits next logprob; do
    cmp -s "$d/out_pu/$f.npy" "$d/out_p/$f.npy" || err "uneven chunks: $f.npy differs from the unchunked run"
done
"$pipectl" plan "$d/pu.yaml" >"$d/plan.txt" 2>&1 || err "uneven: pipectl plan: $(cat "$d/plan.txt")"
grep -Eq "^    down +d2h +d2h +waits on e[0-9]+\(lm, chunk by chunk: 1\+3\)$" "$d/plan.txt" ||
    err "uneven: down is not linked to lm by blocks 1+3: $(grep -E '^    down' "$d/plan.txt")"
grep -Eq "^    down_nx +d2h +d2h +waits on e[0-9]+\(greedy, chunk by chunk: 3\+1\)$" "$d/plan.txt" ||
    err "uneven: down_nx is not linked to greedy by blocks 3+1: $(grep -E '^    down_nx' "$d/plan.txt")"
grep -E "^    down_lp " "$d/plan.txt" | grep -q "chunk by chunk" &&
    err "uneven: down_lp (2 blocks of 2) is linked to score (1+3): $(grep -E '^    down_lp' "$d/plan.txt")"
"$pipectl" plan "$d/p3.yaml" >"$d/plan3.txt" 2>&1 || err "uneven: pipectl plan (B 3): $(cat "$d/plan3.txt")"
want=$(grep "of which stages allocate" "$d/plan3.txt")
grep -qx "  of which stages allocate (model weights, activations): device 96.3 MiB (100973568 bytes) per slot, 293.5 KiB (300544 bytes) persistent" "$d/plan.txt" ||
    err "uneven: the plan's stage memory: $(grep 'of which stages allocate' "$d/plan.txt")"
[ "$(grep "of which stages allocate" "$d/plan.txt")" = "$want" ] ||
    err "uneven: stage memory is not the largest block's: $(grep 'of which stages allocate' "$d/plan.txt"), B 3: $want"
PB=4 pipeline snap ", chunks: [1, 1, 3]" >"$d/bad.yaml"
"$pipectl" check "$d/bad.yaml" >/dev/null 2>"$d/err"
rc=$?
want="$d/bad.yaml:15:78: error: gpt2 stage 'lm': chunks [1, 1, 3] sum to 5 rows, but 'ids_dev' [4, 16] has 4 (the first dimension); make the blocks add up to 4"
[ $rc -eq 2 ] && [ "$(head -n 1 "$d/err")" = "$want" ] || err "uneven chunks [1, 1, 3]: exit $rc
  got:  $(head -n 1 "$d/err")
  want: $want"

# Blocks of positions (chunk_dims: 2, rows of [4, 16]): lm cuts sequence 0 in parts (5 + 11),
# score too (3 + 13), greedy (positions: last) counts whole sequences in positions and its
# download the same blocks in sequences ([1, 3]): the host executor's bytes are the unchunked
# run's, and the plan links each download to its forward, greedy's across the two units.
d=$work/uneven
PB=4 pipeline snap "" |
    sed -e 's/out: lg_dev}/out: lg_dev, chunks: [5, 11, 16, 32], chunk_dims: 2}/' \
        -e 's/to: lg}/to: lg, chunks: [5, 11, 16, 32], chunk_dims: 2}/' \
        -e 's/output: argmax}/output: argmax, chunks: [16, 48], chunk_dims: 2}/' \
        -e 's/to: nx}/to: nx, chunks: [1, 3]}/' \
        -e 's/output: logprob}/output: logprob, chunks: [3, 13, 48], chunk_dims: 2}/' \
        -e 's/to: lp}/to: lp, chunks: [3, 13, 48], chunk_dims: 2}/' >"$d/pt.yaml"
[ "$(grep -c "chunk_dims: 2}" "$d/pt.yaml")" = 5 ] || err "positions: the pipeline was not written"
rm -rf "$d/out"
"$pipectl" run --quiet --executor host "$d/pt.yaml" >"$d/run.log" 2>&1 || err "positions: $(cat "$d/run.log")"
for f in logits next logprob; do
    cmp -s "$d/out/$f.npy" "$d/out_p/$f.npy" || err "positions: $f.npy differs from the unchunked run"
done
"$pipectl" plan "$d/pt.yaml" >"$d/plan_pt.txt" 2>&1 || err "positions: pipectl plan: $(cat "$d/plan_pt.txt")"
for l in "down +d2h +d2h +waits on e[0-9]+\(lm, chunk by chunk: 5\+11\+16\+32\)" \
    "down_nx +d2h +d2h +waits on e[0-9]+\(greedy, chunk by chunk: 1\+3\)" \
    "down_lp +d2h +d2h +waits on e[0-9]+\(score, chunk by chunk: 3\+13\+48\)"; do
    grep -Eq "^    $l$" "$d/plan_pt.txt" || err "positions: the plan has no line '$l': $(grep -E '^    down' "$d/plan_pt.txt")"
done

# ordered: false (on the three forwards): the plan leaves out their batch-order waits (the GPU
# then may run the forwards of the batches in flight at once) and keeps the sinks'; the host
# executor's bytes are the same; the key takes only a boolean.
d=$work/unordered
mkdir -p "$d"
pipeline ../f32/snap "" >"$d/ordered.yaml"
pipeline ../f32/snap ", ordered: false" >"$d/tiny.yaml"
"$pipectl" plan "$d/ordered.yaml" | grep -qx "  lm waits for lm, d=1: runs in batch order" ||
    err "ordered: the default plan has no batch-order wait for lm"
"$pipectl" plan "$d/tiny.yaml" >"$d/plan.txt" 2>&1 || err "unordered: pipectl plan: $(cat "$d/plan.txt")"
grep -Eq "(lm|greedy|score) waits for (lm|greedy|score)" "$d/plan.txt" &&
    err "unordered: a forward still waits for itself: $(grep -E '(lm|greedy|score) waits for' "$d/plan.txt")"
grep -q "save waits for save, d=1: runs in batch order" "$d/plan.txt" ||
    err "unordered: the sink lost its batch-order wait"
if "$pipectl" run --quiet --executor host --depth 3 "$d/tiny.yaml" >"$d/run.log" 2>&1; then
    for f in logits next logprob; do
        cmp -s "$d/out/$f.npy" "$work/f32/out1/$f.npy" || err "unordered: $f.npy differs from the ordered run"
    done
else
    err "unordered: $(cat "$d/run.log")"
fi
pipeline ../f32/snap ", ordered: sometimes" >"$d/bad.yaml"
"$pipectl" check "$d/bad.yaml" >/dev/null 2>"$d/err"
rc=$?
want="$d/bad.yaml:15:86: error: stage 'lm': 'ordered' must be true or false, got 'sometimes'"
[ $rc -eq 2 ] && [ "$(head -n 1 "$d/err")" = "$want" ] || err "ordered: sometimes: exit $rc
  got:  $(head -n 1 "$d/err")
  want: $want"

# The stages' own device memory: the plan counts the weights the three gpt2 stages share (one
# checkpoint, config and dtype: one copy, f16 at this size: 300544 bytes) once and each stage's
# activations, cuBLASLt workspace and scratch logits per slot (lm
# 33600000, greedy 33604608, score 33665536 bytes), and a budget below that is a check error.
d=$work/memory
mkdir -p "$d"
pipeline ../f32/snap "" >"$d/tiny.yaml"
"$pipectl" plan "$d/tiny.yaml" >"$d/plan.txt" 2>&1 || err "memory: pipectl plan: $(cat "$d/plan.txt")"
grep -qx "  of which stages allocate (model weights, activations): device 96.2 MiB (100870144 bytes) per slot, 293.5 KiB (300544 bytes) persistent" "$d/plan.txt" ||
    err "memory: the plan's stage memory: $(grep -A1 'persistent:' "$d/plan.txt")"
grep -q "^  persistent:  host 0 B (0 bytes), device 293.5 KiB (300544 bytes)$" "$d/plan.txt" ||
    err "memory: the device persistent total: $(grep 'persistent:' "$d/plan.txt")"
sed 's/^run: {batches: 3, depth: 2, seed: 3}/run: {batches: 3, depth: 2, seed: 3, memory_budget: {device: 64MiB}}/' \
    "$d/tiny.yaml" >"$d/budget.yaml"
"$pipectl" check "$d/budget.yaml" >/dev/null 2>"$d/err"
rc=$?
want="$d/budget.yaml:2:62: error: run: memory_budget: 'device' is 64.0 MiB (67108864 bytes), but one slot needs 96.5 MiB (101236616 bytes) of device memory: 96.3 MiB of per-batch buffers and stage memory (a model's activations; its weights are persistent) + 293.5 KiB persistent; raise memory_budget.device to at least 96.5 MiB, or make the device buffers smaller"
[ $rc -eq 2 ] && [ "$(head -n 1 "$d/err")" = "$want" ] || err "memory budget: exit $rc
  got:  $(head -n 1 "$d/err")
  want: $want"

# Bad checkpoints: `pipectl check` refuses them, exit 2, message naming the file and the tensor.
expect_check() { # NAME WANT_STDERR: runs pipectl check on $d/tiny.yaml; compares its first error
    # (check reports every error: the three gpt2 stages share one checkpoint, so each says it)
    "$pipectl" check "$d/tiny.yaml" >/dev/null 2>"$d/err"
    local rc=$?
    [ $rc -eq 2 ] || err "$1: pipectl check exit $rc, expected 2"
    [ "$(head -n 1 "$d/err")" = "$2" ] || err "$1: stderr
  got:  $(cat "$d/err")
  want: $2"
}
d=$work/bad
mkdir -p "$d/snap"
$PY "$ref" make "$d/snap" --seed 7
pipeline snap "" >"$d/tiny.yaml"
"$pipectl" check "$d/tiny.yaml" >/dev/null 2>&1 || err "bad: the good checkpoint fails check"
head -c 100000 "$work/f32/snap/model.safetensors" >"$d/snap/model.safetensors"
expect_check truncated "$d/tiny.yaml:15:37: error: gpt2 stage 'lm': safetensors file '$d/snap/model.safetensors' is truncated: tensor 'wte.weight' needs data bytes [0, 131072), but the file holds 97480 after its header"
$PY -c "
import sys; sys.path.insert(0, '$src/tests/e2e')
import gpt2_ref as g
t = g.make_weights(2, 4, 64, 512, 128, 1)
t = [(k, a) for k, a in t if k != 'h.1.mlp.c_proj.bias']
g.write_safetensors('$d/snap/model.safetensors', t)
"
expect_check missing "$d/tiny.yaml:15:37: error: gpt2 stage 'lm': weights '$d/snap/model.safetensors' have no tensor 'h.1.mlp.c_proj.bias' (a GPT-2 checkpoint with n_layer 2 needs it)"
$PY -c "
import sys; sys.path.insert(0, '$src/tests/e2e')
import gpt2_ref as g
t = g.make_weights(2, 4, 64, 512, 64, 1)
g.write_safetensors('$d/snap/model.safetensors', t)
"
expect_check shape "$d/tiny.yaml:15:37: error: gpt2 stage 'lm': weights '$d/snap/model.safetensors': tensor 'wpe.weight' has shape [64, 64], but the config (n_layer 2, n_embd 64, vocab 512, n_ctx 128) needs [128, 64]"
rm "$d/snap/model.safetensors"
expect_check absent "$d/tiny.yaml:15:37: error: gpt2 stage 'lm': cannot open safetensors file '$d/snap/model.safetensors': No such file or directory"
pipeline nowhere "" >"$d/tiny.yaml"
expect_check nodir "$d/tiny.yaml:15:37: error: gpt2 stage 'lm': weights '$d/nowhere': No such file or directory (give a Hugging Face snapshot directory, a .safetensors file, or random)"
pipeline snap ", n_layer: 3" >"$d/tiny.yaml"
$PY "$ref" make "$d/snap" --seed 7
expect_check mismatch "$d/tiny.yaml:15:79: error: gpt2 stage 'lm': n_layer 3, but the checkpoint's config '$d/snap/config.json' says 2; drop the key or fix it"

# A sharded checkpoint whose index names a shard that is not there.
rm -f "$d/snap/model.safetensors"
$PY "$ref" make "$d/snap" --seed 7 --shards 2
rm "$d/snap/model-00002-of-00002.safetensors"
pipeline snap "" >"$d/tiny.yaml"
expect_check shard "$d/tiny.yaml:15:37: error: gpt2 stage 'lm': cannot open safetensors file '$d/snap/model-00002-of-00002.safetensors': No such file or directory"

[ $fail -eq 0 ] && echo "gpt2: host reference matches numpy; checkpoints, depths and bad files ok"
exit $fail
