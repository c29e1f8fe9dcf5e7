# test_generate_pipelines: the generation examples (pipelines/generate.yaml and .lua,
# generate_sample.yaml, agent_rag.yaml and .lua) run as shipped, on the host executor, with
# `--set` giving the tiny model and the shapes that follow from it (3 batches of 4 sequences).
# Asserts: generate.yaml's tokens equal an independent numpy greedy decode of each prompt
# (tests/e2e/gpt2_ref.py generate) with an f32 cache, and the loop ran its 7 steps; the outputs are
# the same at depth 1 and 3 and with the after: lines the loop needed once (`after: [decode]` on the
# body's sample, `after: [first]` on the loop), and generate.lua's are generate.yaml's; generate_sample.yaml gives the
# same tokens run after run and at depth 3, other tokens in each batch of the same prompts (its
# batch buffer), not the greedy ones, and eos after a sequence's eos; agent_rag.yaml and .lua give
# the same outputs at depth 1 and 3, and the second hop's hits are the exact top-2 (numpy) of the
# hashed bag-of-tokens embedding of the first hop's draft over the corpus. Needs /usr/bin/python3
# with numpy (skips otherwise).
set -u
pipectl=$1 src=$2 build=$3
PY=
for p in ${PYTHON:-} python3 /usr/bin/python3; do # the first Python with numpy
    if "$p" -c 'import numpy' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "SKIP: no python3 with numpy (set PYTHON)"; exit 77; }
ref=$src/tests/e2e/gpt2_ref.py
pl=$src/pipelines
work=$(cd "$build" && pwd)/generate_pipelines_e2e
rm -rf "$work"
mkdir -p "$work/snap"
fail=0
err() { echo "FAIL: $*"; fail=1; }
K=3 B=4 T=12 N=8 # batches, sequences, prompt ids, new tokens
$PY "$ref" make "$work/snap" --seed 5 --batches $K --B $B --T $T >/dev/null || exit 1
$PY "$ref" prompts "$work/snap" --seed 5 --batches $K --B $B --T $T || exit 1

# run NAME FILE DEPTH --set ...: runs FILE with its outputs in $work/NAME/out.
run() {
    local name=$1 file=$2 depth=$3
    shift 3
    rm -rf "$work/$name"
    if ! "$pipectl" run --quiet --executor host --depth "$depth" --out-dir "$work/$name" "$@" "$file" \
        >"$work/$name.log" 2>&1; then
        err "$name ($(basename "$file"), depth $depth): $(cat "$work/$name.log")"
        return 1
    fi
}
# same A B: every output file of run A equals run B's.
same() {
    local f n=0
    for f in "$work/$1"/out/*.npy; do
        n=$((n + 1))
        cmp -s "$f" "$work/$2/out/$(basename "$f")" || err "$(basename "$f") differs between $1 and $2"
    done
    [ $n -gt 0 ] || err "$1 wrote no outputs"
}
npy() { $PY -c "import numpy as n, sys; a = n.load(sys.argv[1]); $2" "$1"; }

# generate.yaml / .lua / generate_sample.yaml on the tiny model (2 layers, 4 heads of 16, vocab 512).
. "$src/tests/e2e/generate_tiny_sets.sh" # tiny_sets
tiny_sets $K $B $T $N 512
S=("${TINY_SETS[@]}")
# The checkpoint the numpy reference reads, the prompts of different lengths, an f32 cache.
SNAP=(--set prefill.weights="$work/snap" --set decode.weights="$work/snap" --set buffers.kv.dtype=f32
    --set "stages.read={name: read, kind: source, to: prompts, file: $work/snap/prompts.npy}"
    --set "stages.read_len={name: read_len, kind: source, to: lengths, file: $work/snap/lengths.npy}")

if run greedy1 "$pl/generate.yaml" 1 "${S[@]}" "${SNAP[@]}"; then
    $PY "$ref" generate "$work/snap" "$work/greedy1/out/generate_tokens.npy" --prompts "$work/snap/prompts.npy" \
        --lengths "$work/snap/lengths.npy" >"$work/greedy_ref.log" 2>&1 || err "generate.yaml: $(cat "$work/greedy_ref.log")"
    npy "$work/greedy1/out/generate_steps.npy" "assert (a == $((N - 1))).all(), a" ||
        err "generate.yaml: the loop did not run $((N - 1)) steps in every batch"
fi
run greedy3 "$pl/generate.yaml" 3 "${S[@]}" "${SNAP[@]}" && same greedy3 greedy1
# The after: lines the loop needed before its body and the stages around it were ordered as
# written still give the same plan and tokens.
run greedy_after "$pl/generate.yaml" 2 "${S[@]}" "${SNAP[@]}" --set 'pick.after=[decode]' \
    --set 'generate.after=[first]' && same greedy_after greedy1
run greedy_lua "$pl/generate.lua" 2 "${S[@]}" "${SNAP[@]}" && same greedy_lua greedy1
# As shipped: random prompts and seeded random weights (config: tiny), YAML against Lua.
R=(--set read.max=512 --set read_len.value=$T)
run random1 "$pl/generate.yaml" 1 "${S[@]}" "${R[@]}" &&
    run random_lua "$pl/generate.lua" 3 "${S[@]}" "${R[@]}" && same random_lua random1

# generate_sample.yaml: the same prompts in every batch, so only the batch buffer tells them apart;
# an eos inside the tiny vocabulary.
$PY -c "
import numpy as n
p = n.load('$work/snap/prompts.npy'); l = n.load('$work/snap/lengths.npy')
n.save('$work/snap/same.npy', n.stack([p[0]] * $K)); n.save('$work/snap/same_len.npy', n.stack([l[0]] * $K))" || exit 1
# eos: the token sequence 0 of batch 0 draws third without one (pipelines say 50256, outside
# the tiny vocabulary); with it that sequence stops there.
SM=(--set prefill.weights="$work/snap" --set decode.weights="$work/snap"
    --set "stages.read={name: read, kind: source, to: prompts, file: $work/snap/same.npy}"
    --set "stages.read_len={name: read_len, kind: source, to: lengths, file: $work/snap/same_len.npy}")
run sample_noeos "$pl/generate_sample.yaml" 2 "${S[@]}" "${SM[@]}" --set first.eos=-1 --set pick.eos=-1
eos=$(npy "$work/sample_noeos/out/generate_sample_tokens.npy" "print(a[0, 0, 2])" 2>/dev/null)
[ -n "$eos" ] || { err "generate_sample.yaml without eos wrote no tokens"; eos=-1; }
SM+=(--set first.eos=$eos --set pick.eos=$eos)
run sample1 "$pl/generate_sample.yaml" 1 "${S[@]}" "${SM[@]}"
run sample1b "$pl/generate_sample.yaml" 1 "${S[@]}" "${SM[@]}" && same sample1b sample1
run sample3 "$pl/generate_sample.yaml" 3 "${S[@]}" "${SM[@]}" && same sample3 sample1
t=$work/sample1/out/generate_sample_tokens.npy
if [ -f "$t" ]; then
    npy "$t" "assert all((a[i] != a[0]).any() for i in range(1, len(a))), 'batches draw alike'" ||
        err "generate_sample.yaml: batches of the same prompts draw the same tokens"
    npy "$t" "
for r in a.reshape(-1, a.shape[-1]).tolist():
    assert $eos not in r or set(r[r.index($eos):]) == {$eos}, r
assert a[0, 0, 2:].tolist() == [$eos] * (a.shape[-1] - 2), a[0, 0]" ||
        err "generate_sample.yaml: a sequence holds other tokens after its eos $eos"
    $PY -c "
import numpy as n
s = n.load('$t'); g = n.load('$work/greedy1/out/generate_tokens.npy')
assert (s[0] != g[0]).any()" || err "generate_sample.yaml: the sampled tokens are the greedy ones"
fi

# agent_rag: questions of 2 to 8 ids, a corpus of 64 documents (16-wide embeddings from a file,
# 4-id passages), 2 hits per hop; hop 1 generates 6 tokens from a [4, 16] prompt, hop 2 8 from
# [4, 22] (passages 8 + question 8 + draft 6).
$PY -c "
import numpy as n
n.save('$work/corpus.npy', n.random.default_rng(3).standard_normal((64, 16)).astype(n.float32))" || exit 1
A=(--set run.batches=$K --set ask.max=512 --set ask_len.min=2 --set ask_len.max=9
    --set "buffers.question.shape=[$B, 8]" --set "buffers.corpus.shape=[64, 16]"
    --set buffers.corpus.init=file --set buffers.corpus.file="$work/corpus.npy"
    --set "buffers.passages.shape=[64, 4]"
    --set "generate1.loop={max: 5, while: going1, index: step1}"
    --set "generate2.loop={max: 7, while: going2, index: step2}")
for h in 1 2; do
    A+=(--set prefill$h.config=tiny --set decode$h.config=tiny --set "buffers.logits$h.shape=[$B, 512]"
        --set "buffers.query$h.shape=[$B, 16]" --set "buffers.hits$h.shape=[$B, 2]"
        --set "buffers.context$h.shape=[$B, 2, 4]")
    for b in len$h len${h}_dev next$h done$h; do A+=(--set "buffers.$b.shape=[$B]"); done
done
A+=(--set "buffers.question_len.shape=[$B]"
--set "buffers.prompt1.shape=[$B, 16]" --set "buffers.prompt1_dev.shape=[$B, 16]"
    --set "buffers.kv1.shape=[2, 2, $B, 4, 21, 16]"
    --set "buffers.draft.shape=[$B, 6]" --set "buffers.draft_dev.shape=[$B, 6]"
    --set "buffers.prompt2.shape=[$B, 22]" --set "buffers.prompt2_dev.shape=[$B, 22]"
    --set "buffers.kv2.shape=[2, 2, $B, 4, 29, 16]"
    --set "buffers.answer.shape=[$B, 8]" --set "buffers.answer_dev.shape=[$B, 8]")
run rag1 "$pl/agent_rag.yaml" 1 "${A[@]}"
run rag3 "$pl/agent_rag.yaml" 3 "${A[@]}" && same rag3 rag1
run rag_lua "$pl/agent_rag.lua" 2 "${A[@]}" && same rag_lua rag1
if [ -f "$work/rag1/out/agent_rag_hits2.npy" ]; then
    # Hop 2's query is embed (scripts/agent_rag_steps.lua) of the draft: the same hash here.
    $PY - "$work/rag1/out" "$work/corpus.npy" <<'PY' || err "agent_rag: hop 2's hits are not the top-2 of the draft's embedding"
import sys
import numpy as n
o, corpus = sys.argv[1], n.load(sys.argv[2]).astype(n.float64)
draft, hits = n.load(o + "/agent_rag_draft.npy"), n.load(o + "/agent_rag_hits2.npy")
answer = n.load(o + "/agent_rag_answer.npy")
assert draft.shape == (3, 4, 6) and hits.shape == (3, 4, 2) and answer.shape == (3, 4, 8), (draft.shape, hits.shape)
D = corpus.shape[1]
for k in range(draft.shape[0]):
    for b in range(draft.shape[1]):
        v = n.zeros(D)
        for t in draft[k, b]:
            h = (int(t) * 2654435761 + 40503) & 0xFFFFFFFF
            v[h % D] += 1.0 if (h >> 16) & 1 else -1.0
        v = (v / n.sqrt((v * v).sum())).astype(n.float32).astype(n.float64)
        s = corpus @ v
        want = sorted(range(len(s)), key=lambda i: (-s[i], i))[:2]
        assert list(hits[k, b]) == want, (k, b, list(hits[k, b]), want, s[want])
assert ((answer >= 0) & (answer < 512)).all()
PY
fi
[ $fail -eq 0 ] && echo "generation pipelines on the tiny model: greedy equals numpy, depth- and front-end-invariant; sampling reproducible and per batch; agent_rag's second hop follows its draft"
exit $fail
