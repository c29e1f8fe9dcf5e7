#!/bin/bash
# test_signals_parallel_gpu: the host-side changes on the GPU executor. A lua stage with parallel: 4 between
# device segments (pipelines/lua_postprocess.yaml at depth 8, 64 batches) writes on the GPU the
# bytes the host executor writes at parallel 1; a GPU run sent SIGTERM exits 143 and --json says
# 143, the batches kept equal to a GPU run of that many; `--executor auto` with a GPU picks it
# for GPU-sized work (pipelines/gpt2_greedy.yaml, 2 batches): nothing is refused; two SIGINTs end a
# loop already on the device (a WHILE node, or launched from the host) at its next iteration.
# Exits 77 (skipped) where no GPU is usable.
# usage: test_signals_parallel_gpu.sh PIPECTL SOURCE_DIR
set -u
pipectl=$(cd "$(dirname "$1")" && pwd)/$(basename "$1") src=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
err() {
    echo "FAIL: $*"
    fail=$((fail + 1))
}
mkdir "$tmp/p" "$tmp/h" "$tmp/s" "$tmp/r"
(cd "$src/pipelines" && tar cf - --exclude=./out .) | (cd "$tmp/p" && tar xf -)
cp -r "$tmp/p/." "$tmp/h/"
cp -r "$tmp/p/." "$tmp/s/"
cp -r "$tmp/p/." "$tmp/r/"
cd "$tmp" || exit 2
probe=$("$pipectl" run --quiet --executor gpu --batches 1 p/quickstart.yaml 2>&1)
if [ $? -ne 0 ]; then
    echo "SKIP: no usable GPU: $probe"
    exit 77
fi

# 1. parallel: 4 on the GPU executor against the host executor at parallel 1.
"$pipectl" run --quiet --executor gpu --batches 64 --depth 8 --workers 6 \
    --set summarise.parallel=4 p/lua_postprocess.yaml 2>gpu.err || err "gpu parallel 4: $(cat gpu.err)"
"$pipectl" run --quiet --executor host --batches 64 --depth 8 h/lua_postprocess.yaml 2>host.err ||
    err "host: $(cat host.err)"
cmp -s p/out/lua_postprocess.npy h/out/lua_postprocess.npy ||
    err "lua_postprocess: the GPU run at parallel 4 wrote other bytes than the host at parallel 1"

# 2. SIGTERM to a GPU run: exit 143, --json 143, the kept batches a prefix of a full run's.
"$pipectl" run --executor gpu --json --batches 2000000 s/quickstart.yaml >s.json 2>s.err &
pid=$!
for _ in $(seq 1 200); do
    [ -f s/out/quickstart.npy.partial ] && [ "$(stat -c %s s/out/quickstart.npy.partial)" -gt 100000 ] && break
    sleep 0.05
done
kill -TERM $pid
rc=running
for _ in $(seq 1 200); do
    if ! kill -0 $pid 2>/dev/null; then wait $pid; rc=$?; break; fi
    sleep 0.05
done
[ "$rc" = 143 ] || { err "gpu SIGTERM: exit $rc, expected 143: $(cat s.err)"; kill -KILL $pid 2>/dev/null; }
python3 - s.json <<'PY' || err "gpu SIGTERM: --json"
import json, sys
o = json.load(open(sys.argv[1]))
assert o["exit_code"] == 143 and o["status"] == "EINTR", (o["exit_code"], o["status"])
PY
n=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["batches_done"])' s.json 2>/dev/null)
if [ -n "$n" ] && [ "$n" -gt 0 ]; then
    "$pipectl" run --quiet --executor gpu --batches "$n" r/quickstart.yaml 2>/dev/null
    cmp -s s/out/quickstart.npy r/out/quickstart.npy || err "gpu SIGTERM: the $n batches kept differ from a run of $n"
else
    err "gpu SIGTERM: batches_done '$n'"
fi

# 3. auto with a GPU: GPU-sized work runs there, no refusal.
"$pipectl" run --quiet --batches 2 p/gpt2_greedy.yaml 2>auto.err || err "gpt2_greedy under auto with a GPU: $(cat auto.err)"
grep -q "sized for a GPU" auto.err && err "auto refused GPU-sized work on a GPU machine"
# 4. The second SIGINT ends a loop already on the device: batch 1's loop would spin 100 s
# (100,000 iterations of a 1 ms busy kernel) as a WHILE node (run.loop: device) or launched
# iteration by iteration (host); both end within 10 s, exit 130, batch 0 kept.
for mode in device host; do
    rm -rf out
    "$pipectl" run --quiet --executor gpu --set run.loop=$mode --out-dir . \
        "$src/tests/e2e/data/interrupt_loop.yaml" 2>loop.err &
    pid=$!
    for _ in $(seq 1 600); do
        [ -f out/c.npy.partial ] && [ "$(stat -c %s out/c.npy.partial)" -ge 132 ] && break
        sleep 0.05
    done
    sleep 0.5
    kill -INT $pid
    sleep 0.3
    kill -INT $pid
    rc=running
    for _ in $(seq 1 200); do
        if ! kill -0 $pid 2>/dev/null; then wait $pid; rc=$?; break; fi
        sleep 0.05
    done
    if [ "$rc" = running ]; then
        err "loop ($mode): still running 10 s after the second SIGINT"
        kill -KILL $pid
        continue
    fi
    [ "$rc" = 130 ] || err "loop ($mode): exit $rc, expected 130: $(cat loop.err)"
    python3 -c 'import numpy as np, sys; a = np.load("out/c.npy"); sys.exit(a.shape != (1, 1))' ||
        err "loop ($mode): out/c.npy does not hold batch 0 alone"
done
[ $fail = 0 ] && echo "parallel lua stage on the GPU executor, SIGTERM 143, auto on a GPU, a loop aborted on the device: ok"
exit $((fail > 0))
