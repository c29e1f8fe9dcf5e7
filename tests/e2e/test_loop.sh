#!/bin/bash
# test_loop: loops on the host executor (tests/e2e/data/loop_*.yaml): a fixed count, a while loop
# driven by a kernel that decrements its condition, the bound `max` stopping a loop whose
# condition never clears, `index` read by body stages, a body of host (Lua) stages, values carried
# from one iteration to the next without after: (a body stage reads what a later one writes). The outputs
# are what the loops compute (checked with numpy) and byte-identical at depth 1 and 3 and with
# run.loop: host; the plan lists each loop (text, JSON, DOT); a body stage that fails names itself
# and its batch, and the batches before it are kept.
# usage: test_loop.sh PIPECTL SOURCE_DIR BUILD_DIR
set -u
pipectl=$1 src=$2 build=$3
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
work=$build/loop
rm -rf "$work"
mkdir -p "$work"
data=$src/tests/e2e/data
fail=0
err() {
    echo "FAIL: $*"
    fail=1
}

# 1. Every loop pipeline at depth 1, at depth 3, and at depth 3 with run.loop: host.
for name in loop_count loop_while loop_bound loop_host loop_carried; do
    for v in d1 d3 hostloop; do
        case $v in
        d1) args=(--depth 1) ;;
        d3) args=(--depth 3) ;;
        hostloop) args=(--depth 3 --set run.loop=host) ;;
        esac
        if ! "$pipectl" run --quiet --executor host "${args[@]}" --out-dir "$work/$v-$name" \
            "$data/$name.yaml" >"$work/$v-$name.log" 2>&1; then
            err "$name ($v) exited $?: $(cat "$work/$v-$name.log")"
            continue
        fi
        [ "$v" = d1 ] && continue
        for f in "$work/d1-$name"/out/*.npy; do
            cmp -s "$f" "$work/$v-$name/out/$(basename "$f")" ||
                err "$name: $(basename "$f") differs between depth 1 and $v"
        done
    done
done

# 2. What they compute.
"$py" - "$work" <<'PY' || fail=1
import sys
import numpy as np
w = sys.argv[1]
def L(name, f):
    return np.load(f"{w}/d1-{name}/out/{f}")
bad = 0
def want(ok, what):
    global bad
    if not ok:
        print("FAIL:", what)
        bad += 1
# count: 4 doublings, index 4 after the loop
xi, xo, i = L("loop_count", "x_in.npy"), L("loop_count", "x_out.npy"), L("loop_count", "i_out.npy")
want(np.array_equal(xo, xi * 16), "loop_count: x_out is not 16 x_in")
want((i == 4).all(), f"loop_count: index after the loop {i.ravel()}, want 4")
# while: n counted down to 0, sum of the step numbers, v added n times
n = L("loop_while", "n_in.npy").ravel()
want(n.min() == 0 and n.max() >= 5, f"loop_while: draws {n} do not cover 0 and long loops")
want((L("loop_while", "n_left.npy") == 0).all(), "loop_while: the condition is not 0 after the loop")
want(np.array_equal(L("loop_while", "steps.npy").ravel(), n), "loop_while: index after the loop is not n")
want(np.array_equal(L("loop_while", "sum.npy").ravel(), n * (n - 1) // 2), "loop_while: sum of the index is not n(n-1)/2")
v, acc = L("loop_while", "v_in.npy"), L("loop_while", "acc.npy")
for b in range(len(n)):
    a = np.zeros(v.shape[1], np.float32)
    for _ in range(n[b]):
        a = (a + v[b]).astype(np.float32)
    want(np.array_equal(acc[b], a), f"loop_while: acc of batch {b} is not v added {n[b]} times")
# bound: max = 5 iterations although the condition stays 1
want((L("loop_bound", "count.npy") == 5).all(), "loop_bound: not 5 iterations")
want((L("loop_bound", "steps.npy") == 5).all(), "loop_bound: index after the loop is not 5")
# host body
n = L("loop_host", "n.npy").ravel()
want(np.array_equal(L("loop_host", "acc.npy").ravel(), 5 * n * (n - 1)), "loop_host: acc is not 5 n (n - 1)")
want(np.array_equal(L("loop_host", "steps.npy").ravel(), n), "loop_host: index after the loop is not n")
# carried: a body stage reads what a later one writes, without after: (the previous iteration's)
n, a, b = (L("loop_carried", f).ravel() for f in ("n.npy", "a.npy", "b.npy"))
fib = [0, 1]
while len(fib) < 40:
    fib.append(fib[-1] + fib[-2])
want(n.max() >= 5, f"loop_carried: draws {n} have no long loop")
want(list(a) == [fib[k] for k in n] and list(b) == [fib[k + 1] for k in n],
     f"loop_carried: a {a}, b {b} after {n} iterations are not F(n), F(n + 1)")
print(f"loop outputs: {bad} wrong")
sys.exit(1 if bad else 0)
PY

# 3. The plan shows the loop, its bound, condition, index and body, and how the GPU runs it.
plan=$("$pipectl" plan "$data/loop_while.yaml") || err "plan failed"
echo "$plan" | grep -qx "  countdown (compute[0-9]*): up to 64 times while 'n_dev' != 0, index 'step'" ||
    err "plan: no loop line: $plan"
echo "$plan" | grep -qx "    body: dec (kernel, compute), total (kernel, compute), gather (kernel, compute)" ||
    err "plan: no body line"
echo "$plan" | grep -q "gpu: a conditional WHILE node in the slot's graph" || err "plan: no WHILE node line"
hplan=$("$pipectl" plan --set run.loop=host "$data/loop_while.yaml")
echo "$hplan" | grep -q "gpu: a host worker launches the body's graph once per iteration" ||
    err "plan with run.loop=host: no host-launched line"
echo "$hplan" | grep -qx "  host, then: countdown" || err "plan with run.loop=host: the loop is not a host stage between segments"
"$pipectl" plan --json "$data/loop_count.yaml" | "$py" -c '
import json, sys
p = json.load(sys.stdin)["plan"]
l = p["loops"]
assert l == [{"stage": "twice4", "body": ["double"], "max": 10, "count": 4, "while": None, "index": "i_dev", "gpu": "while_node"}], l
st = {s["name"]: s for s in p["stages"]}
assert st["double"]["loop"] == "twice4" and st["double"]["segment"] == -1, st["double"]
assert st["twice4"]["engine"] == "compute" and st["twice4"]["segment"] == 0, st["twice4"]
' || err "plan --json: loops"
"$pipectl" plan --dot "$data/loop_count.yaml" | grep -q 'subgraph "cluster_loop_twice4"' || err "plan --dot: no loop cluster"

# 4. A body stage that fails names itself and its batch; the batches before are written.
out=$("$pipectl" run --quiet --executor host --fail-at total:3 --out-dir "$work/failed" \
    "$data/loop_while.yaml" 2>&1)
rc=$?
[ $rc = 1 ] || err "--fail-at total:3 exited $rc, want 1"
echo "$out" | grep -q "error: stage 'total', batch 3: injected failure" || err "--fail-at: message: $out"
"$py" -c "import numpy as np, sys; s = np.load(sys.argv[1]); assert s.shape[0] == 3, s.shape" \
    "$work/failed/out/sum.npy" || err "--fail-at total:3: sum.npy does not hold batches 0..2"

# 5. --set reaches a loop's bound and its body's stages.
"$pipectl" run --quiet --executor host --set countdown.loop.max=3 --set gather.op=saxpy \
    --set gather.alpha=2 --out-dir "$work/set" "$data/loop_while.yaml" >"$work/set.log" 2>&1 ||
    err "--set countdown.loop.max=3: $(cat "$work/set.log")"
"$py" - "$work" <<'PY' || err "--set: outputs"
import sys
import numpy as np
w = sys.argv[1]
n = np.load(f"{w}/set/out/n_in.npy").ravel()
k = np.minimum(n, 3)
assert np.array_equal(np.load(f"{w}/set/out/steps.npy").ravel(), k), "max 3 does not bound the loop"
assert np.array_equal(np.load(f"{w}/set/out/n_left.npy").ravel(), n - k), "the condition left"
v, acc = np.load(f"{w}/set/out/v_in.npy"), np.load(f"{w}/set/out/acc.npy")
for b in range(len(n)):
    a = np.zeros(v.shape[1], np.float32)
    for _ in range(k[b]):
        a = (np.float32(2) * a + v[b]).astype(np.float32)  # saxpy: alpha * x + y, reads [acc, v]
    assert np.allclose(acc[b], a, rtol=1e-6, atol=0), f"batch {b}: gather with saxpy alpha 2"
PY

# 6. The Lua twin of pipelines/loop.yaml writes the same outputs.
for f in loop.yaml loop.lua; do
    "$pipectl" run --quiet --executor host --out-dir "$work/ex-$f" "$src/pipelines/$f" >/dev/null 2>&1 ||
        err "pipelines/$f failed"
done
for o in loop_sum.npy loop_steps.npy; do
    cmp -s "$work/ex-loop.yaml/out/$o" "$work/ex-loop.lua/out/$o" || err "pipelines/loop.{yaml,lua}: $o differs"
done

[ $fail = 0 ] && echo "loops: counts, conditions, bounds, index and host bodies right at depth 1 and 3 and with run.loop: host"
exit $fail
