#!/bin/bash
# test_set: `--set KEY=VALUE` (docs/pipeline-yaml.md, "Setting keys from the command line") on
# check, plan, run and capture, for YAML and Lua pipelines alike:
# - run.KEY, STAGE.KEY, stages.STAGE.KEY and buffers.NAME.KEY replace what the file says, and a key
#   the file does not have is added; the last --set of a key wins; VALUE is YAML (lists, numbers);
# - a bad --set is refused with exit 2 and a message that names the argument, checked by the same
#   rules as the file's keys (the messages word for word are in tests/parser/bad/set_*);
# - a capture records the --set values in the manifest, its pipeline.yaml has them applied, and
#   the bundle replays without them.
# usage: test_set.sh PIPECTL SOURCE_DIR BUILD_DIR
set -u
pipectl=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
err() {
    echo "FAIL: $*"
    fail=$((fail + 1))
}
cd "$tmp" || exit 2
cat >p.yaml <<'YAML'
pipeline: p
run: {batches: 3, depth: 2, seed: 1}
buffers:
  x: {where: host, dtype: f32, shape: [4, 8]}
stages:
  - {name: gen, kind: source, to: x, generator: constant, value: 1}
  - {name: save, kind: sink, from: x, to: out/x.npy}
YAML
cat >p.lua <<'LUA'
local p = pipectl.pipeline{name = "p", run = {batches = 3, depth = 2, seed = 1}}
p:buffer{name = "x", where = "host", dtype = "f32", shape = {4, 8}}
p:stage{name = "gen", kind = "source", to = "x", generator = "constant", value = 1}
p:stage{name = "save", kind = "sink", from = "x", to = "out/x.npy"}
return p
LUA
# The shape [rows, cols] of a .npy file's header.
shape() { head -c 128 "$1" | grep -ao "'shape': ([0-9, ]*)" | grep -o '([0-9, ]*)'; }

for f in p.yaml p.lua; do
    # 1. check and plan see what --set says.
    out=$("$pipectl" check --set run.batches=5 "$f") || err "$f: check with --set failed"
    plan=$("$pipectl" plan --set run.batches=5 --set run.depth=3 "$f") || err "$f: plan failed"
    echo "$plan" | grep -q "depth 3 (slots in flight), 5 batches" || err "$f: plan: $plan"
    # the last one for a key wins
    plan=$("$pipectl" plan --set run.depth=1 --set run.depth=3 "$f")
    echo "$plan" | grep -q "depth 3 (slots in flight)" || err "$f: last --set does not win"
    # 2. run: a replaced stage key (both spellings), a replaced buffer key (a YAML list), an
    # added stage key, an added run key.
    rm -rf out
    "$pipectl" run --quiet --executor host --set gen.value=2 --set stages.save.to=out/y.npy \
        --set 'buffers.x.shape=[2, 16]' --set run.batches=4 "$f" || err "$f: run with --set failed"
    [ -f out/y.npy ] && [ ! -f out/x.npy ] || err "$f: stages.save.to was not applied"
    [ "$(shape out/y.npy)" = "(4, 2, 16)" ] || err "$f: shape $(shape out/y.npy), expected (4, 2, 16)"
    # constant 2.0 as f32: 00 00 00 40
    [ "$(tail -c 4 out/y.npy | od -An -tx1 | tr -d ' ')" = 00000040 ] || err "$f: gen.value=2 not applied"
    # an added key: the sink's `checksum` is not in the file
    "$pipectl" run --quiet --executor host --set save.checksum=false --set save.to=out/z.npy "$f" ||
        err "$f: an added stage key failed"
    # an added buffer: declared by --set, written by nobody -> the check's own message
    out=$("$pipectl" check --set 'buffers.w={shape: [3]}' "$f" 2>&1) || err "$f: an added buffer: $out"
    echo "$out" | grep -q "ok (2 stages, 2 buffers)" || err "$f: an added buffer: $out"
    # 3. errors: exit 2, the argument named
    out=$("$pipectl" run --quiet --set run.batchs=4 "$f" 2>&1)
    rc=$?
    [ $rc = 2 ] || err "$f: run.batchs: exit $rc"
    [ "$out" = "--set run.batchs=4: error: run: unknown key 'batchs' (did you mean 'batches'?)" ] ||
        err "$f: run.batchs: $out"
    out=$("$pipectl" plan --set gen.value=abc "$f" 2>&1)
    [ $? = 2 ] || err "$f: gen.value=abc: not exit 2"
    case $out in "--set gen.value=abc: error: "*) ;; *) err "$f: gen.value=abc: $out" ;; esac
    out=$("$pipectl" run --quiet --set 'buffers.x.shape=[4, 0]' "$f" 2>&1)
    [ "$out" = "--set buffers.x.shape=[4, 0]: error: buffer 'x': shape dimension 2 must be a positive integer, got '0'" ] ||
        err "$f: shape [4, 0]: $out"
    out=$("$pipectl" capture --quiet --set gen.bogus=1 "$f" -o b_bad 2>&1)
    [ $? = 2 ] && [ ! -f b_bad/manifest.json ] || err "$f: capture with a bad --set: $out"
    case $out in "--set gen.bogus=1: error: unknown key 'bogus' in source stage 'gen'"*) ;;
    *) err "$f: gen.bogus: $out" ;; esac
    out=$("$pipectl" check --set run.batches "$f" 2>&1)
    [ $? = 2 ] || err "$f: --set without '=': not exit 2"
    [ "$out" = "error: --set needs KEY=VALUE, like --set run.batches=4, got 'run.batches'; see 'pipectl check --help'" ] ||
        err "$f: --set without '=': $out"
    # a check-time error about a --set value points at the argument too
    out=$("$pipectl" check --set save.from=nope "$f" 2>&1)
    case $out in "--set save.from=nope: error: "*) ;; *) err "$f: save.from=nope: $out" ;; esac

    # 4. bundles: the manifest lists the --set values, pipeline.yaml has them applied, and the
    # bundle replays as captured without them.
    b=b_${f%.*}_${f##*.}
    "$pipectl" capture --quiet --executor host --reps 1 --set run.batches=5 --set gen.value=3 \
        --set 'buffers.x.shape=[2, 8]' "$f" -o "$b" || { err "$f: capture failed"; continue; }
    sets=$(jq -c '.pipeline.set' "$b/manifest.json")
    [ "$sets" = '["run.batches=5","gen.value=3","buffers.x.shape=[2, 8]"]' ] ||
        err "$f: manifest pipeline.set is $sets"
    jq -e '.plan.batches == 5' "$b/manifest.json" >/dev/null || err "$f: the capture did not run 5 batches"
    grep -q "batches: 5" "$b/pipeline.yaml" || err "$f: pipeline.yaml has no batches: 5"
    grep -q "shape: \[2, 8\]" "$b/pipeline.yaml" || err "$f: pipeline.yaml has no shape [2, 8]"
    grep -q 'value: "3"' "$b/pipeline.yaml" || err "$f: pipeline.yaml has no value: 3"
    out=$("$pipectl" replay "$b" 2>&1) || err "$f: replay without --set: $out"
    # the bundled pipeline plans exactly as the capture did, with no --set
    [ "$("$pipectl" plan --json "$b/pipeline.yaml" | jq -c .plan)" = "$(jq -c . "$b/plan.json")" ] ||
        err "$f: the bundled pipeline.yaml plans differently"
    # run --capture passes --set on
    "$pipectl" run --executor host --set run.batches=2 --capture "${b}_run" "$f" >/dev/null ||
        err "$f: run --capture with --set failed"
    [ "$(jq -c '.pipeline.set' "${b}_run/manifest.json")" = '["run.batches=2"]' ] ||
        err "$f: run --capture: manifest pipeline.set is $(jq -c '.pipeline.set' "${b}_run/manifest.json")"
done

# 5. The shipped examples take --set as documented.
"$pipectl" check --set run.batches=4 --set double.alpha=3 "$src/pipelines/quickstart.yaml" >/dev/null ||
    err "quickstart: --set double.alpha=3"
"$pipectl" check --set forward.weights=random --set 'buffers.ids.shape=[8, 512]' \
    "$src/pipelines/gpt2_greedy.yaml" >/dev/null || err "gpt2_greedy: --set forward.weights"

# 6. run takes as many --set as check (64), also more than --capture could pass on; --capture
#    with that many options is refused with a message, exit 2.
many=()
for i in $(seq 40); do many+=(--set run.batches=$((i % 3 + 1))); done
"$pipectl" run -q --executor host --out-dir "$tmp/many" "${many[@]}" "$src/pipelines/quickstart.yaml" >/dev/null 2>"$tmp/many.err" ||
    err "run with 40 --set: $(cat "$tmp/many.err")"
"$pipectl" run -q --executor host --capture "$tmp/many_cap" "${many[@]}" "$src/pipelines/quickstart.yaml" >/dev/null 2>"$tmp/many.err"
[ $? = 2 ] && grep -q "too many options to pass on with --capture" "$tmp/many.err" ||
    err "run --capture with 40 --set: $(cat "$tmp/many.err")"

[ $fail = 0 ] && echo "test_set: ok"
exit $((fail > 0))
