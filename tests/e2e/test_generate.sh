# test_generate: generation on the host executor with the tiny model, the decode steps written out
# (tests/e2e/generate_yaml.py: prefill, a first sample, then per step a decode and a sample):
# greedy tokens of right-padded prompts of different lengths equal an independent numpy greedy
# decode of each prompt alone (tests/e2e/gpt2_ref.py generate), exactly, at depth 1 and 3, with an
# f32 cache; with an eos the sequences stop there and hold eos after it; seeded random weights
# give the same tokens at two depths; sampled tokens (temperature, top-k, top-p) are the same run
# after run and at any depth, differ with another seed, and with a batch buffer differ between
# batches of the same prompts (without one they are the same); the plan lists the stages' shared
# weights once, and twice for two seeds. Needs /usr/bin/python3 with numpy (skips otherwise).
set -u
pipectl=$1 src=$2 build=$3
PY=
for p in ${PYTHON:-} python3 /usr/bin/python3; do # the first Python with numpy
    if "$p" -c 'import numpy' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "SKIP: no python3 with numpy (set PYTHON)"; exit 77; }
ref=$src/tests/e2e/gpt2_ref.py
gen=$src/tests/e2e/generate_yaml.py
work=$build/generate_e2e
rm -rf "$work"
mkdir -p "$work/snap"
fail=0
err() { echo "FAIL: $*"; fail=1; }
B=4 T=12 S=8
$PY "$ref" make "$work/snap" --seed 5 --batches 2 --B $B --T $T || exit 1
$PY "$ref" prompts "$work/snap" --seed 5 --batches 2 --B $B --T $T || exit 1
prompts="--prompts ../snap/prompts.npy --lengths ../snap/lengths.npy"

# run NAME DEPTH [GENERATE_YAML ARGS]: writes $work/NAME/p.yaml and runs it; out/ stays there.
run() {
    local name=$1 depth=$2
    shift 2
    mkdir -p "$work/$name"
    $PY "$gen" --B $B --T $T --steps $S "$@" >"$work/$name/p.yaml" || { err "$name: generate_yaml.py $*"; return 1; }
    rm -rf "$work/$name/out"
    if ! "$pipectl" run --quiet --executor host --depth "$depth" "$work/$name/p.yaml" >"$work/$name/run.log" 2>&1; then
        err "$name (depth $depth): $(cat "$work/$name/run.log")"
        return 1
    fi
}
same() { cmp -s "$work/$1/out/tokens.npy" "$work/$2/out/tokens.npy"; }
keep() { rm -rf "$work/$1/out$2"; mv "$work/$1/out" "$work/$1/out$2"; }

# Greedy: the numpy reference's ids, the same at depth 1 and 3; the loop's count ends at 0.
if run greedy 1 --weights ../snap $prompts; then
    $PY "$ref" generate "$work/snap" "$work/greedy/out/tokens.npy" --prompts "$work/snap/prompts.npy" \
        --lengths "$work/snap/lengths.npy" >"$work/greedy/check.log" 2>&1 || err "greedy: $(cat "$work/greedy/check.log")"
    [ "$($PY -c "import numpy as n; print(n.load('$work/greedy/out/going.npy').ravel().tolist())")" = "[0, 0]" ] ||
        err "greedy: sequences still going after the last step"
    keep greedy 1
    run greedy 3 --weights ../snap $prompts && { cmp -s "$work/greedy/out/tokens.npy" "$work/greedy/out1/tokens.npy" || err "greedy: tokens differ between depth 1 and 3"; }
fi

# eos: the token sequence 0 of batch 0 generates third; the sequences that reach it stop there.
eos=$($PY -c "import numpy as n; print(n.load('$work/greedy/out1/tokens.npy')[0, 0, 2])" 2>/dev/null)
if [ -n "$eos" ] && run eos 2 --weights ../snap $prompts --eos "$eos"; then
    $PY "$ref" generate "$work/snap" "$work/eos/out/tokens.npy" --prompts "$work/snap/prompts.npy" \
        --lengths "$work/snap/lengths.npy" --eos "$eos" >"$work/eos/check.log" 2>&1 || err "eos $eos: $(cat "$work/eos/check.log")"
    $PY -c "import numpy as n; t = n.load('$work/eos/out/tokens.npy'); assert (t[0, 0, 2:] == $eos).all()" ||
        err "eos $eos: sequence 0's columns after its eos are not eos"
fi

# Seeded random weights (config: tiny): the same tokens at two depths.
run random 1 --weights random && keep random 1
run random 2 --weights random && { cmp -s "$work/random/out/tokens.npy" "$work/random/out1/tokens.npy" || err "random weights: tokens differ between depth 1 and 2"; }

# Sampling: the same tokens run after run and at any depth; another seed, other tokens.
smp="method: sample, temperature: 0.9, top_k: 50, top_p: 0.95, seed: 11"
run sample 1 --weights ../snap $prompts --sample "$smp" && keep sample 1
run sample 1 --weights ../snap $prompts --sample "$smp" && keep sample 1b
run sample 3 --weights ../snap $prompts --sample "$smp"
for o in out1b out; do
    cmp -s "$work/sample/$o/tokens.npy" "$work/sample/out1/tokens.npy" || err "sample: tokens differ ($o against the first run)"
done
cmp -s "$work/sample/out1/tokens.npy" "$work/greedy/out1/tokens.npy" && err "sample: the sampled tokens are the greedy ones"
run sample2 1 --weights ../snap $prompts --sample "${smp/seed: 11/seed: 12}" &&
    { cmp -s "$work/sample2/out/tokens.npy" "$work/sample/out1/tokens.npy" && err "sample: seed 12 gives seed 11's tokens"; }

# The batch index: two batches of the same prompts draw alike without a batch buffer, and
# differently with one.
$PY -c "
import numpy as n
p = n.load('$work/snap/prompts.npy'); l = n.load('$work/snap/lengths.npy')
n.save('$work/snap/twice.npy', n.stack([p[0], p[0]])); n.save('$work/snap/twice_len.npy', n.stack([l[0], l[0]]))" || exit 1
twice="--prompts ../snap/twice.npy --lengths ../snap/twice_len.npy"
tok() { $PY -c "import numpy as n; t = n.load('$1'); print('same' if (t[0] == t[1]).all() else 'differ')"; }
run nobatch 2 --weights ../snap $twice --sample "$smp" && { [ "$(tok "$work/nobatch/out/tokens.npy")" = same ] || err "sample without a batch buffer: batches of the same prompts differ"; }
run withbatch 2 --weights ../snap $twice --sample "$smp" --batch-index && { [ "$(tok "$work/withbatch/out/tokens.npy")" = differ ] || err "sample with a batch buffer: batches of the same prompts draw alike"; }

# The plan: one copy of the weights for the prefill and the eight decode stages.
"$pipectl" plan "$work/greedy/p.yaml" >"$work/plan.txt" 2>&1 || err "pipectl plan: $(cat "$work/plan.txt")"
grep -q "of which stages allocate (model weights, activations): .* per slot, 293.5 KiB (300544 bytes) persistent$" "$work/plan.txt" ||
    err "plan: the weights are not counted once: $(grep 'of which stages allocate' "$work/plan.txt")"
# Another seed for the prefill's random weights: two copies, counted twice.
sed 's/mode: prefill, weights: random/mode: prefill, seed: 9, weights: random/' "$work/random/p.yaml" >"$work/seed9.yaml"
"$pipectl" plan "$work/random/p.yaml" >"$work/plan_random.txt" 2>&1 &&
    "$pipectl" plan "$work/seed9.yaml" >"$work/plan_seed9.txt" 2>&1 || err "pipectl plan (random weights): $(cat "$work/plan_seed9.txt")"
grep -q "per slot, 293.5 KiB (300544 bytes) persistent$" "$work/plan_random.txt" &&
    grep -q "per slot, 587.0 KiB (601088 bytes) persistent$" "$work/plan_seed9.txt" ||
    err "plan: weights of two seeds are not two copies: $(grep -h 'of which stages allocate' "$work/plan_random.txt" "$work/plan_seed9.txt")"
[ $fail -eq 0 ] && echo "generation on the host executor: greedy tokens equal numpy's; sampling reproducible"
exit $fail
