#!/bin/bash
# test_loop_gpu: the loop pipelines of test_loop.sh (tests/e2e/data/loop_*.yaml, pipelines/loop.yaml)
# on the GPU executor, every output byte-identical to the host executor's:
#   - WHILE-node loops (run.loop: device) in segment graphs, in stage graphs, and with --no-graph
#     (the loop is then its own graph per slot);
#   - host-launched loops (run.loop: host): the body's graph per slot, or with --no-graph its
#     stages as plain launches, once per iteration;
# at depth 1 and 3. The captured graphs hold a conditional node (a bundle's graph .topo), a body
# stage failing (--fail-at) in a host-launched loop names itself and keeps the batches before it.
# Exits 77 (skipped) where no GPU is usable.
# usage: test_loop_gpu.sh PIPECTL SOURCE_DIR [OUT_DIR]
set -u
pipectl=$1 src=$2 keep=${3:-}
tmp=$(mktemp -d)
[ -n "$keep" ] && { rm -rf "$keep"; mkdir -p "$keep"; tmp=$keep; }
[ -n "$keep" ] || trap 'rm -rf "$tmp"' EXIT
fail=0
err() {
    echo "FAIL: $*"
    fail=$((fail + 1))
}
data=$src/tests/e2e/data
probe=$("$pipectl" run --quiet --executor gpu --batches 1 --out-dir "$tmp/probe" "$src/pipelines/loop.yaml" 2>&1)
if [ $? -ne 0 ]; then
    case $probe in
    *"no CUDA device"* | *"built without CUDA"* | *"no usable"*) echo "SKIP: no usable GPU: $probe"; exit 77 ;;
    esac
    echo "FAIL: pipelines/loop.yaml on the GPU: $probe"
    exit 1
fi

files=("$data/loop_count.yaml" "$data/loop_while.yaml" "$data/loop_bound.yaml" "$data/loop_host.yaml"
    "$data/loop_carried.yaml" "$src/pipelines/loop.yaml")
modes=("device-segment:--graphs segment" "device-stage:--graphs stage" "device-nograph:--no-graph"
    "host-segment:--set run.loop=host --graphs segment" "host-stage:--set run.loop=host --graphs stage"
    "host-nograph:--set run.loop=host --no-graph")
runs=0 same=0
for f in "${files[@]}"; do
    name=$(basename "$f" .yaml)
    for d in 1 3; do
        ref=$tmp/ref-$name-d$d
        if ! "$pipectl" run --quiet --executor host --depth "$d" --out-dir "$ref" "$f" >"$ref.log" 2>&1; then
            err "$name: host executor at depth $d: $(cat "$ref.log")"
            continue
        fi
        for m in "${modes[@]}"; do
            mode=${m%%:*} args=${m#*:}
            out=$tmp/$mode-$name-d$d
            # shellcheck disable=SC2086 # args holds several options
            if ! "$pipectl" run --quiet --executor gpu --depth "$d" $args --out-dir "$out" "$f" >"$out.log" 2>&1; then
                err "$name, $mode, depth $d: exit $?: $(cat "$out.log")"
                continue
            fi
            runs=$((runs + 1))
            for o in "$ref"/out/*; do
                if cmp -s "$o" "$out/out/$(basename "$o")"; then
                    same=$((same + 1))
                else
                    err "$name, $mode, depth $d: $(basename "$o") differs from the host executor's"
                fi
            done
        done
    done
done
echo "loops on the GPU: $runs runs, $same outputs identical to the host executor's"

# The WHILE node is in the captured graphs: a bundle's graph topology lists a conditional node.
if "$pipectl" capture --quiet --executor gpu --graphs segment -o "$tmp/bundle" "$src/pipelines/loop.yaml" >"$tmp/bundle.log" 2>&1; then
    grep -q " conditional$" "$tmp"/bundle/graphs/*.topo || err "bundle: no conditional node in $(ls "$tmp"/bundle/graphs)"
else
    err "capture of pipelines/loop.yaml: $(cat "$tmp/bundle.log")"
fi

# A failing body stage of a host-launched loop names itself and its batch.
out=$("$pipectl" run --quiet --executor gpu --set run.loop=host --fail-at total:3 --out-dir "$tmp/failed" \
    "$data/loop_while.yaml" 2>&1)
rc=$?
[ $rc = 1 ] || err "--fail-at total:3 (run.loop: host) exited $rc, want 1"
echo "$out" | grep -q "error: stage 'total', batch 3: injected failure" || err "--fail-at total:3: $out"

[ $fail = 0 ] && echo "loops on the GPU (WHILE nodes, host-launched, --no-graph) match the host executor"
exit $((fail > 0))
