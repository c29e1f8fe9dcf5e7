#!/bin/bash
# test_bundle: capture bundles and replay them on the host executor (docs/bundles.md):
# - every example: capture, replay (every checksum matches), and the canonical pipeline.yaml plans
#   exactly as the original;
# - a changed input file is named and refused (exit 2), or run with --allow-changed-inputs;
# - an altered recorded checksum fails replay naming the batch and the sink (exit 1);
# - a moved bundle (copied elsewhere, the original folder gone) still replays;
# - an older manifest version and a corrupt manifest are clear errors (exit 2);
# - run --capture, diff of two bundles, and the tolerance path of ops that are reproducible on one
#   GPU only (a "gpu" bundle replayed on the host: copied outputs compared within tolerance).
# usage: test_bundle.sh PIPECTL SOURCE_DIR BUILD_DIR
set -u
pipectl=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
err() {
    echo "FAIL: $*"
    fail=$((fail + 1))
}
# The examples without their out/: other tests run them in place at the same time, and a copy of
# a run's in-progress output would read here as another run writing it.
mkdir "$tmp/p"
(cd "$src/pipelines" && tar cf - --exclude=./out .) | (cd "$tmp/p" && tar xf -)
cd "$tmp" || exit 2

# 1. Every example: capture, replay, canonical plan.
for f in p/*.yaml p/*.lua; do
    n=$(basename "$f")
    b="b_${n%.*}_${n##*.}"
    # Too large for the host executor (GPT-2 at full size): the GPU bundle test covers those.
    grep -Eq '^(#|--) pipectl-test: skip-host' "$f" && continue
    "$pipectl" capture --quiet --executor host --reps 2 --batches 6 --copy-inputs "$f" -o "$b" ||
        { err "$n: capture exited $?"; continue; }
    for x in manifest.json README.txt pipeline.yaml plan.txt plan.json plan.dot trace.json \
        summary.json "original/$n"; do
        [ -f "$b/$x" ] || err "$n: bundle has no $x"
    done
    out=$("$pipectl" replay "$b" 2>&1)
    rc=$?
    [ $rc -eq 0 ] || err "$n: replay exited $rc: $out"
    echo "$out" | grep -q "every checksum matches (bit for bit)" || err "$n: replay said: $out"
    echo "$out" | grep -q "^stage times, rec vs now" || err "$n: no stage table: $out"
    # The bundle keeps the batches it ran (6): the plans agree but for that count.
    "$pipectl" plan "$f" 2>&1 | sed '2s/, [0-9]* batches$//' >"$b.orig.plan"
    "$pipectl" plan "$b/pipeline.yaml" 2>&1 | sed '2s/, [0-9]* batches$//' >"$b.canon.plan"
    cmp -s "$b.orig.plan" "$b.canon.plan" || err "$n: the canonical pipeline plans differently: $(diff "$b.orig.plan" "$b.canon.plan" | head -5)"
    grep -q '"schema_version": 1' "$b/manifest.json" || err "$n: no schema version"
done
echo "examples: captured and replayed"
# Every stage key with a literal default is written out, chunks (an integer or a list) too.
grep -A6 "kind: h2d" b_quickstart_yaml/pipeline.yaml | grep -Eqx " *chunks: 1" ||
    err "quickstart: the canonical pipeline has no 'chunks: 1' for its h2d stage: $(grep -A6 'kind: h2d' b_quickstart_yaml/pipeline.yaml)"

# Code is always bundled: the Lua script of lua_tokenize.lua (its stages' functions) without
# --copy-inputs too.
"$pipectl" capture --quiet --executor host --reps 1 p/lua_tokenize.lua -o bcode || err "lua capture exited $?"
ls bcode/inputs/*-lua_tokenize.lua >/dev/null 2>&1 || err "lua script not bundled: $(ls bcode)"
grep -q '"code": true' bcode/manifest.json || err "lua script not marked as code"

# 2. A pipeline with input files: a source reading a raw file and a buffer initialised from one.
head -c 65536 /dev/urandom >in.raw
head -c 1024 /dev/urandom >w.raw
cat >files.yaml <<'YAML'
pipeline: files
run: {batches: 8, depth: 2, seed: 3}
buffers:
  x: {where: host, dtype: f32, shape: [2048]}
  w: {where: host, dtype: f32, shape: [256], persistent: true, init: file, file: w.raw}
  s: {where: host, dtype: f32, shape: [2048]}
stages:
  - {name: read, kind: source, to: x, file: in.raw, wrap: true}
  - {name: keep, kind: sink, from: x, to: out/x.npy}
  - {name: keepw, kind: sink, from: w, to: out/w.raw}
YAML
mkdir -p out
"$pipectl" capture --quiet --executor host --reps 1 files.yaml -o bf || err "files: capture exited $?"
grep -q '"stage": "read"' bf/manifest.json || err "files: input of 'read' not recorded"
"$pipectl" replay -q bf >/dev/null 2>&1 || err "files: replay before any change exited $?"
"$pipectl" capture --quiet --executor host --reps 1 --copy-inputs files.yaml -o bfc ||
    err "files: capture --copy-inputs exited $?"
[ -f bfc/inputs/1-in.raw ] && [ -f bfc/inputs/0-w.raw ] || err "files: inputs not copied: $(ls bfc/inputs)"
grep -q '# generator: random (the default; not written' bfc/pipeline.yaml ||
    err "files: the refused default is not a comment: $(grep -n generator bfc/pipeline.yaml)"
printf 'X' | dd of=in.raw bs=1 seek=100 conv=notrunc status=none
out=$("$pipectl" replay bf 2>&1)
rc=$?
[ $rc -eq 2 ] || err "changed input: replay exited $rc, expected 2: $out"
echo "$out" | grep -q "changed: input of stage 'read' (file): .*in.raw" ||
    err "changed input not named: $out"
echo "$out" | grep -q "refuses" || err "changed input: no refusal: $out"
out=$("$pipectl" replay --allow-changed-inputs bf 2>&1)
rc=$?
[ $rc -eq 1 ] || err "changed input allowed: replay exited $rc, expected 1 (outputs differ): $out"
echo "$out" | grep -q "MISMATCH: sink 'keep', batch 0" || err "changed input allowed: $out"
echo "changed input: named, refused, allowed"

# 3. An altered recorded checksum: batch 3 of sink 'save'.
b=b_quickstart_yaml
cp -r "$b" bad
awk '/"batch_checksums"/ {n = 0; inb = 1; print; next}
     inb && n == 3 && !done {sub(/0x[0-9a-f]+/, "0x0123456789abcdef"); done = 1}
     inb {n++}
     {print}' "$b/manifest.json" >bad/manifest.json
cmp -s "$b/manifest.json" bad/manifest.json && err "awk did not alter the manifest"
out=$("$pipectl" replay bad 2>&1)
rc=$?
[ $rc -eq 1 ] || err "altered checksum: replay exited $rc, expected 1"
echo "$out" | grep -q "MISMATCH: sink 'save', batch 3: recorded 0x0123456789abcdef, now 0x[0-9a-f]*; 1 batch differs in all" ||
    err "altered checksum: message was: $out"
echo "$out" | grep -q "DIFFERS in 1 batch (first: 3), bit-identical by design" || err "altered checksum: sink line: $out"
out=$("$pipectl" replay --json bad 2>/dev/null)
rc=$?
[ $rc -eq 1 ] || err "replay --json of an altered checksum exited $rc"
echo "$out" | grep -q '"verdict": "differs"' || err "replay --json: no verdict: $out"
echo "$out" | python3 -c 'import json, sys; assert json.load(sys.stdin)["schema_version"] == 1' ||
    err "replay --json: no schema_version: $out"
echo "$out" | grep -q '"sink": "save"' && echo "$out" | grep -q '"batch": 3,' ||
    err "replay --json: first difference not named: $out"
echo "altered checksum: batch and sink named (text and --json)"

# 4. A moved bundle, with its inputs copied: the original folder is gone.
mkdir -p far/away
cp -r bfc far/away/moved
cp -r b_lua_tokenize_lua far/away/moved_lua
mv p p_gone
mv in.raw in.raw.gone
mv w.raw w.raw.gone
for m in moved moved_lua; do
    out=$("$pipectl" replay far/away/$m 2>&1)
    rc=$?
    [ $rc -eq 0 ] || err "moved bundle $m: replay exited $rc: $out"
done
(cd far && tar cf - away/moved) | (mkdir -p tarred && cd tarred && tar xf -)
"$pipectl" replay -q tarred/away/moved >/dev/null 2>&1 || err "tarred bundle: replay failed"
mv p_gone p
mv in.raw.gone in.raw
mv w.raw.gone w.raw
echo "moved bundle: replays"

# 5. Bad bundles: another manifest version, corrupt JSON, no manifest.
cp -r "$b" old
sed 's/"schema_version": 1/"schema_version": 0/' "$b/manifest.json" >old/manifest.json
out=$("$pipectl" replay old 2>&1)
rc=$?
[ $rc -eq 2 ] || err "old manifest: exit $rc, expected 2"
echo "$out" | grep -q "old/manifest.json: error: manifest version 0; this pipectl (.*) reads version 1 only" ||
    err "old manifest: message was: $out"
cp -r "$b" corrupt
head -c 200 "$b/manifest.json" >corrupt/manifest.json
out=$("$pipectl" replay corrupt 2>&1)
rc=$?
[ $rc -eq 2 ] || err "corrupt manifest: exit $rc, expected 2"
echo "$out" | grep -q "^corrupt/manifest.json:[0-9]*:[0-9]*: error: corrupt bundle manifest: not valid JSON" ||
    err "corrupt manifest: message was: $out"
sed 's/"outputs"/"outputz"/' "$b/manifest.json" >corrupt/manifest.json
out=$("$pipectl" replay corrupt 2>&1)
[ $? -eq 2 ] || err "manifest without outputs: exit not 2"
echo "$out" | grep -q "^error: corrupt bundle manifest corrupt/manifest.json: 'outputs' is missing (expected an array)$" ||
    err "missing outputs: $out"
mkdir empty
out=$("$pipectl" replay empty 2>&1)
[ $? -eq 2 ] || err "no manifest: exit not 2"
echo "$out" | grep -q "has no manifest.json" || err "no manifest: $out"
out=$("$pipectl" capture --quiet --executor host p/quickstart.yaml -o "$b" 2>&1)
[ $? -eq 2 ] || err "capture into a full folder: exit not 2"
echo "$out" | grep -q "is not empty" || err "capture into a full folder: $out"
echo "bad bundles: exit 2 with clear messages"

# 6. A bundled file edited after the capture is named too.
cp -r "$b" edited
sed -i 's/alpha: "2"/alpha: "3"/' edited/pipeline.yaml
out=$("$pipectl" replay edited 2>&1)
[ $? -eq 2 ] || err "edited pipeline.yaml: exit not 2"
echo "$out" | grep -q "changed: the bundled pipeline: pipeline.yaml" || err "edited pipeline: $out"

# 7. run --capture, and diff.
"$pipectl" run --executor host --batches 6 --capture rc1 p/quickstart.yaml >/dev/null 2>&1 ||
    err "run --capture exited $?"
grep -q '"reps": 1' rc1/manifest.json || err "run --capture: not one run"
"$pipectl" replay -q rc1 >/dev/null 2>&1 || err "run --capture bundle: replay failed"
out=$("$pipectl" diff rc1 "$b" 2>&1)
rc=$?
[ $rc -eq 0 ] || err "diff of two captures of one pipeline: exit $rc: $out"
echo "$out" | grep -q "save  *6 batches, every checksum agrees" || err "diff: $out"
sed 's/alpha: 2/alpha: 3/' p/quickstart.yaml >p/q3.yaml
"$pipectl" capture --quiet --executor host --reps 1 --batches 6 p/q3.yaml -o b3 >/dev/null 2>&1
out=$("$pipectl" diff "$b" b3 2>&1)
rc=$?
[ $rc -eq 1 ] || err "diff with another alpha: exit $rc, expected 1"
echo "$out" | grep -q '^  - .*alpha: "2"' || err "diff: no '-' line for alpha: $out"
echo "$out" | grep -q '^  + .*alpha: "3"' || err "diff: no '+' line for alpha: $out"
echo "$out" | grep -q "save .*DIFFERS in 6 of 6 batches (first: batch 0" || err "diff: sink line: $out"
echo "$out" | grep -q "pipeline.digest" || err "diff: no spec digest change: $out"
# --json: one object with schema_version; the same verdicts.
"$pipectl" diff --json "$b" b3 >dj.json 2>/dev/null
rc=$?
[ $rc -eq 1 ] || err "diff --json with another alpha: exit $rc, expected 1"
python3 -c '
import json, sys
v = json.load(open("dj.json"))
assert v["schema_version"] == 1 and v["verdict"] == "differs" and v["exit_code"] == 1, v
assert not v["pipeline_same"] and v["batches_differ"] == 6, v
s = [x for x in v["sinks"] if x["stage"] == "save"][0]
assert s["verdict"] == "differs" and s["first_batch"] == 0 and s["batches_a"] == 6, s
assert any(e["key"] == "pipeline.digest" for e in v["environment_changes"]), v
' || err "diff --json: $(cat dj.json)"
"$pipectl" diff --json rc1 "$b" >dj0.json 2>/dev/null || err "diff --json of two captures: exit $?"
python3 -c '
import json
v = json.load(open("dj0.json"))
assert v["schema_version"] == 1 and v["verdict"] == "match" and v["pipeline_same"], v
' || err "diff --json (match): $(cat dj0.json)"
"$pipectl" diff --json nosuch "$b" >dje.json 2>/dev/null
[ $? -eq 2 ] || err "diff --json of a missing bundle: not exit 2"
python3 -c '
import json
v = json.load(open("dje.json"))
assert v["schema_version"] == 1 and v["status"] == "EINPUT" and v["exit_code"] == 2, v
' || err "diff --json error object: $(cat dje.json)"
echo "run --capture, diff (text and --json): ok"

# 8. Tolerance: gemm is reproducible on one GPU only. Its bundle, relabelled as recorded on a GPU
# and with its checksums altered, replays on the host: the copied output is compared within the
# stated tolerance and the replay says so (exit 0); without the copy it cannot be verified (1).
cat >g.yaml <<'YAML'
pipeline: g
run: {batches: 4, depth: 2, seed: 5}
buffers:
  a: {where: device, dtype: f32, shape: [16, 32], persistent: true, init: random}
  b: {where: device, dtype: f32, shape: [32, 8], persistent: true, init: random}
  c: {where: device, dtype: f32, shape: [16, 8]}
  c_host: {where: host, dtype: f32, shape: [16, 8]}
stages:
  - {name: mm, kind: kernel, op: gemm, reads: [a, b], writes: [c]}
  - {name: down, kind: d2h, from: c, to: c_host}
  - {name: keep, kind: sink, from: c_host, to: out/c.npy}
YAML
"$pipectl" capture --quiet --executor host --reps 1 --copy-outputs g.yaml -o bg || err "gemm: capture exited $?"
grep -q '"repro": "same_gpu"' bg/manifest.json || err "gemm sink not marked same_gpu"
grep -q '"tolerance": 1' bg/manifest.json || err "gemm tolerance not recorded: $(grep tolerance bg/manifest.json)"
sed -e 's/"executor": "host"/"executor": "gpu"/' \
    -e '/"batch_checksums"/,/]/ s/0x[0-9a-f]\{16\}/0x00000000000000aa/' bg/manifest.json >bg/m2 &&
    mv bg/m2 bg/manifest.json
out=$("$pipectl" replay --executor host bg 2>&1)
rc=$?
[ $rc -eq 0 ] || err "gemm within tolerance: exit $rc: $out"
echo "$out" | grep -q "recorded on gpu, replayed on host" || err "gemm: no executor note: $out"
echo "$out" | grep -q "keep .*within tolerance: relative difference 0 <= 1e-05" || err "gemm: $out"
sed 's/"bundled": "outputs\/keep-c.npy"/"bundled": null/' bg/manifest.json >bg/m2 && mv bg/m2 bg/manifest.json
out=$("$pipectl" replay --executor host bg 2>&1)
rc=$?
[ $rc -eq 1 ] || err "gemm without copied outputs: exit $rc, expected 1: $out"
echo "$out" | grep -q "no copy of the output to compare" || err "gemm unverified: $out"
echo "tolerance: within tolerance with copied outputs, unverified without"

# 9. A GPU bundle where no GPU is usable: replay says how to replay it on the CPU.
if ! "$pipectl" run --quiet --executor gpu --batches 1 p/quickstart.yaml >/dev/null 2>&1; then
    cp -r "$b" gpub
    sed 's/"executor": "host"/"executor": "gpu"/' "$b/manifest.json" >gpub/manifest.json
    out=$("$pipectl" replay gpub 2>&1)
    rc=$?
    [ $rc -eq 1 ] || err "gpu bundle without a GPU: exit $rc, expected 1"
    echo "$out" | grep -q "recorded on the gpu executor and no GPU is usable here; 'pipectl replay --executor host gpub'" ||
        err "gpu bundle without a GPU: $out"
    "$pipectl" replay -q --executor host gpub >/dev/null 2>&1 || err "gpu bundle replayed on the host failed"
fi

# 10. Text that YAML must quote survives the canonical file: quotes, backslashes, tabs, '#', ':',
# UTF-8 in a lua stage's code and args.
printf '%s\n' 'pipeline: "odd: name #1"' 'run: {batches: 3, depth: 2}' 'buffers:' \
    '  out_b: {where: host, dtype: u8, shape: [64]}' 'stages:' \
    '  - name: w' '    kind: lua' '    writes: [out_b]' "    args: 'a: \"b\" # c \\ é'" \
    '    code: |' '      function run(batch, opts, bufs)' \
    '        local s = opts.args .. "\t\\\"" .. "ü" .. batch' \
    '        for i = 1, #s do bufs.out_b[i] = s:byte(i) end' '      end' \
    '  - {name: keep, kind: sink, from: out_b}' >odd.yaml
"$pipectl" run --quiet --executor host odd.yaml >/dev/null 2>&1 || err "odd.yaml does not run: $("$pipectl" run --executor host odd.yaml 2>&1)"
"$pipectl" capture --quiet --executor host --reps 1 odd.yaml -o bodd || err "odd: capture exited $?"
"$pipectl" replay -q bodd >/dev/null 2>&1 || err "odd: replay failed: $("$pipectl" replay bodd 2>&1)"
cmp -s <("$pipectl" plan odd.yaml) <("$pipectl" plan bodd/pipeline.yaml) || err "odd: plans differ"

# 11. A sink with checksum: false is said to be not compared; diff names a changed input.
sed 's/to: out\/quickstart.npy}/to: out\/quickstart.npy, checksum: false}/' p/quickstart.yaml >p/qnc.yaml
"$pipectl" capture --quiet --executor host --reps 1 --batches 3 p/qnc.yaml -o bnc || err "checksum false: capture exited $?"
out=$("$pipectl" replay bnc 2>&1)
[ $? -eq 0 ] || err "checksum false: replay: $out"
echo "$out" | grep -q "save .*not checksummed (checksum: false): not compared" || err "checksum false: $out"
head -c 65536 /dev/urandom >in.raw
"$pipectl" capture --quiet --executor host --reps 1 files.yaml -o bf2 || err "files: second capture exited $?"
out=$("$pipectl" diff bf bf2 2>&1)
echo "$out" | grep -q "inputs.read.file" || err "diff: changed input not shown: $out"

[ $fail -eq 0 ] && echo "bundle: all checks passed"
exit $((fail > 0))
