#!/bin/bash
# test_bundle_gpu: capture bundles on the GPU and replay them on the GPU (bit-identical) and on the
# host executor (exact ops bit-identical, gemm/sum within their stated tolerance); each slot's
# captured graph is in the bundle as DOT with a topology digest that a GPU replay reproduces.
# Exits 77 (skipped) where no GPU is usable.
# usage: test_bundle_gpu.sh PIPECTL SOURCE_DIR [OUT_DIR]   (OUT_DIR keeps the bundles)
set -u
pipectl=$1 src=$2 keep=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
err() {
    echo "FAIL: $*"
    fail=$((fail + 1))
}
# The examples without their out/ (other tests run them in place at the same time).
mkdir "$tmp/p"
(cd "$src/pipelines" && tar cf - --exclude=./out .) | (cd "$tmp/p" && tar xf -)
cd "$tmp" || exit 2
probe=$("$pipectl" run --quiet --executor gpu --batches 1 p/quickstart.yaml 2>&1)
if [ $? -ne 0 ]; then
    echo "SKIP: no usable GPU: $probe"
    exit 77
fi

# 1. quickstart: graphs as DOT, GPU environment, replay on the GPU and on the host.
"$pipectl" capture --quiet --executor gpu --copy-outputs p/quickstart.yaml -o q || err "capture exited $?"
# Stage graphs (the default): one per slot and compute stage ('double' is stage 2).
n_dot=$(ls q/graphs/*.dot 2>/dev/null | wc -l)
[ "$n_dot" -eq 4 ] || err "expected 4 graphs (4 slots x 1 compute stage), got $n_dot: $(ls q/graphs)"
[ -f q/graphs/graph_slot0_stage2.topo ] || err "no topology text: $(ls q/graphs)"
grep -q '"graph_mode": "stage"' q/manifest.json q/summary.json 2>/dev/null || err "graph_mode stage not recorded"
# Segment graphs: one per slot and segment, copies included.
"$pipectl" capture --quiet --executor gpu --graphs segment p/quickstart.yaml -o qs || err "capture --graphs segment exited $?"
n_dot=$(ls qs/graphs/*.dot 2>/dev/null | wc -l)
[ "$n_dot" -eq 4 ] || err "expected 4 graphs (4 slots x 1 segment), got $n_dot: $(ls qs/graphs)"
[ -f qs/graphs/graph_slot0_seg0.topo ] || err "no topology text (segment graphs)"
grep -c memcpy qs/graphs/graph_slot0_seg0.topo | grep -q '^2$' || err "segment graph: expected 2 memcpy nodes: $(cat qs/graphs/graph_slot0_seg0.topo)"
out=$("$pipectl" replay qs 2>&1) || err "replay of the segment-graph bundle: $out"
echo "$out" | grep -q "graphs.topology_digest" && err "segment replay: the graph topology changed: $out"
grep -q '"topology_digest": "[0-9a-f]\{64\}"' q/manifest.json || err "no topology digest"
grep -q '"uuid": "GPU-' q/manifest.json || err "no GPU UUID in the environment"
grep -q '"compute_capability": "' q/manifest.json || err "no compute capability"
grep -q '"cublas": "' q/manifest.json || err "no cuBLAS version"
grep -q 'digraph' q/graphs/graph_slot0_stage2.dot || err "DOT file is not DOT"
out=$("$pipectl" replay q 2>&1)
rc=$?
[ $rc -eq 0 ] || err "gpu replay exited $rc: $out"
echo "$out" | grep -q "on gpu: .*every checksum matches (bit for bit)" || err "gpu replay: $out"
echo "$out" | grep -q "graphs.topology_digest" && err "gpu replay: the graph topology changed: $out"
out=$("$pipectl" replay --executor host q 2>&1)
rc=$?
[ $rc -eq 0 ] || err "host replay of a gpu bundle exited $rc: $out"
echo "$out" | grep -q "recorded on gpu, replayed on host" || err "host replay: no note: $out"
echo "$out" | grep -q "save .*match (bit for bit)" || err "host replay: scale is exact: $out"
echo "quickstart: $n_dot graphs; gpu and host replays match"

# 2. rag: the checksum kernel and the host search: exact across executors.
"$pipectl" capture --quiet --executor gpu --reps 2 p/rag.yaml -o r || err "rag capture exited $?"
"$pipectl" replay -q r >/dev/null 2>&1 || err "rag gpu replay failed"
"$pipectl" replay -q --executor host r >/dev/null 2>&1 || err "rag host replay failed"

# 3. gemm and sum: deterministic on one GPU, within tolerance on the host.
cat >g.yaml <<'YAML'
pipeline: g
run: {batches: 8, depth: 3, seed: 5}
buffers:
  x: {where: host, dtype: f32, shape: [64, 256]}
  x_dev: {where: device, dtype: f32, shape: [64, 256]}
  w: {where: device, dtype: f32, shape: [256, 128], persistent: true, init: random}
  y: {where: device, dtype: f32, shape: [64, 128]}
  s: {where: device, dtype: f64, shape: [1]}
  y_host: {where: host, dtype: f32, shape: [64, 128]}
  s_host: {where: host, dtype: f64, shape: [1]}
stages:
  - {name: gen, kind: source, to: x}
  - {name: up, kind: h2d, from: x, to: x_dev}
  - {name: mm, kind: kernel, op: gemm, reads: [x_dev, w], writes: [y]}
  - {name: total, kind: kernel, op: sum, reads: [y], writes: [s]}
  - {name: down_y, kind: d2h, from: y, to: y_host}
  - {name: down_s, kind: d2h, from: s, to: s_host}
  - {name: keep_y, kind: sink, from: y_host, to: out/y.npy}
  - {name: keep_s, kind: sink, from: s_host, to: out/s.npy}
YAML
"$pipectl" capture --quiet --executor gpu --copy-outputs g.yaml -o g || err "gemm capture exited $?"
out=$("$pipectl" replay g 2>&1)
[ $? -eq 0 ] || err "gemm gpu replay (must be bit-identical on one GPU): $out"
out=$("$pipectl" replay --executor host g 2>&1)
rc=$?
[ $rc -eq 0 ] || err "gemm host replay exited $rc: $out"
echo "$out" | grep -q "keep_y .*\(within tolerance\|match\)" || err "gemm host replay: $out"
echo "gemm/sum host replay:"
echo "$out" | grep "keep_"

# 4. Plain launches (no graphs: no DOT) and --timing all (the timed graphs are the ones kept).
"$pipectl" capture --quiet --executor gpu --no-graph --reps 1 p/quickstart.yaml -o ng || err "no-graph capture exited $?"
[ ! -d ng/graphs ] || [ -z "$(ls ng/graphs)" ] || err "--no-graph wrote graphs: $(ls ng/graphs)"
"$pipectl" replay -q ng >/dev/null 2>&1 || err "no-graph replay failed"
"$pipectl" capture --quiet --executor gpu --timing all --reps 1 p/quickstart.yaml -o ta || err "timing all capture exited $?"
[ "$(ls ta/graphs/*.dot 2>/dev/null | wc -l)" -eq 4 ] || err "--timing all: expected 4 graphs"

# 5. diff of a gpu and a host bundle of one pipeline: every sink agrees.
"$pipectl" capture --quiet --executor host --reps 1 p/quickstart.yaml -o qh || err "host capture exited $?"
out=$("$pipectl" diff q qh 2>&1)
[ $? -eq 0 ] || err "diff gpu vs host: $out"
echo "$out" | grep -q "run.executor" || err "diff: executor change not shown: $out"

if [ -n "$keep" ]; then
    mkdir -p "$keep"
    cp -r q g "$keep"/ 2>/dev/null
    "$pipectl" replay q >"$keep/replay_gpu.txt" 2>&1
    "$pipectl" replay --executor host q >"$keep/replay_host.txt" 2>&1
    "$pipectl" replay --executor host g >"$keep/replay_gemm_host.txt" 2>&1
fi
[ $fail -eq 0 ] && echo "bundle gpu: all checks passed"
exit $((fail > 0))
