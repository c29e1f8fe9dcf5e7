#!/bin/bash
# test_run_interrupt: long host stages notice a stop signal at their next check, and the second
# signal aborts. A GPT-2 reference forward of ~20 s a batch, sent SIGINT, ends within 10 s (a bound
# the machine's load cannot reach; without the checks it took the whole batch), exit 130, the
# "stopping after the batches in flight; again to abort" line, nothing written and no .partial. A
# host gemm of ~1 s a batch, sent SIGTERM after its first batch, exits 143, --json says 143, and
# the batches kept equal a run of that many. A source reading stdin, blocked in batch 3: one
# SIGINT lets that batch in flight finish once its data comes (4 batches kept); two drop it (3).
# A loop whose batch 1 would spin for 100 s (100,000 iterations of a 1 ms body): two SIGINTs stop
# it between iterations, within 10 s, and the sink keeps batch 0.
set -u
pipectl=$1 src=$2 build=$3
work=$build/run_interrupt
rm -rf "$work"
mkdir -p "$work"
fail=0

# Waits for pid to end, at most $2 seconds; rc= its exit code, or "running".
wait_rc() {
    local pid=$1 limit=$2
    rc=running
    for _ in $(seq 1 $((limit * 20))); do
        if ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid"
            rc=$?
            return
        fi
        sleep 0.05
    done
}
# Waits until file $1 holds at least $2 bytes (at most 120 s).
wait_size() {
    for _ in $(seq 1 2400); do
        [ -f "$1" ] && [ "$(stat -c %s "$1")" -ge "$2" ] && return 0
        sleep 0.05
    done
    return 1
}
hlen() { echo $((10 + $(od -An -tu2 -j8 -N2 "$1"))); }
rows() { head -c "$(hlen "$1")" "$1" | grep -ao "'shape': ([0-9]*" | grep -o '[0-9]*$'; }

# ---- a GPT-2 reference forward (f32 C loops), about 20 s a batch here ----
mkdir -p "$work/gpt2"
cat >"$work/gpt2/p.yaml" <<'YAML'
pipeline: long_forward
run: {batches: 4, depth: 2, seed: 3}
buffers:
  ids:      {dtype: i32, shape: [4, 256]}
  ids_dev:  {where: device, dtype: i32, shape: [4, 256]}
  next_dev: {where: device, dtype: i32, shape: [4]}
  next:     {dtype: i32, shape: [4]}
stages:
  - {name: tokens, kind: source, to: ids, generator: random, min: 0, max: 1024}
  - {name: up, kind: h2d, from: ids, to: ids_dev}
  - {name: forward, kind: gpt2, weights: random, config: tiny, n_layer: 4, n_embd: 512, n_head: 8,
     vocab: 1024, n_ctx: 256, output: argmax, positions: last, ids: ids_dev, out: next_dev}
  - {name: down, kind: d2h, from: next_dev, to: next}
  - {name: save, kind: sink, from: next, to: out/next.npy}
YAML
"$pipectl" run --executor host --quiet "$work/gpt2/p.yaml" 2>"$work/gpt2.err" &
pid=$!
sleep 2
kill -INT $pid
wait_rc $pid 10
if [ "$rc" = running ]; then
    echo "FAIL: gpt2: still running 10 s after SIGINT"
    kill -KILL $pid
    fail=1
else
    [ "$rc" = 130 ] || { echo "FAIL: gpt2: exit $rc, expected 130"; cat "$work/gpt2.err"; fail=1; }
    grep -q "pipectl: Ctrl-C: stopping after the batches in flight; again to abort" "$work/gpt2.err" ||
        { echo "FAIL: gpt2: no 'stopping after the batches in flight' line"; cat "$work/gpt2.err"; fail=1; }
    grep -q "error: interrupted (Ctrl-C)" "$work/gpt2.err" ||
        { echo "FAIL: gpt2: no 'interrupted (Ctrl-C)'"; cat "$work/gpt2.err"; fail=1; }
    if find "$work/gpt2" -name '*.partial*' | grep -q .; then echo "FAIL: gpt2: .partial left"; fail=1; fi
    echo "gpt2 reference forward: SIGINT honoured within 10 s, exit $rc"
fi

# ---- a host gemm, about 1 s a batch: SIGTERM after its first batch, with --json ----
mkdir -p "$work/gemm" "$work/gemm_ref"
cat >"$work/gemm/p.yaml" <<'YAML'
pipeline: big_gemm
run: {batches: 200, depth: 2, seed: 3}
buffers:
  a: {where: device, dtype: f32, shape: [3072, 3072], persistent: true}
  b: {where: device, dtype: f32, shape: [3072, 3072], persistent: true}
  c: {where: device, dtype: f32, shape: [3072, 3072]}
  s: {where: device, dtype: f32, shape: [1]}
  s_host: {dtype: f32, shape: [1]}
  x: {dtype: f32, shape: [1]}
stages:
  - {name: gen, kind: source, to: x, generator: random}
  - {name: mm, kind: kernel, op: gemm, reads: [a, b], writes: [c], after: [gen]}
  - {name: sum, kind: kernel, op: sum, reads: [c], writes: [s]}
  - {name: down, kind: d2h, from: s, to: s_host}
  - {name: save, kind: sink, from: s_host, to: out/s.npy}
  - {name: save_x, kind: sink, from: x, to: out/x.npy}
YAML
cp "$work/gemm/p.yaml" "$work/gemm_ref/"
"$pipectl" run --executor host --json "$work/gemm/p.yaml" >"$work/gemm.json" 2>"$work/gemm.err" &
pid=$!
if ! wait_size "$work/gemm/out/s.npy.partial" 132; then
    echo "FAIL: gemm: no batch written in 120 s"
    kill -KILL $pid
    fail=1
else
    kill -TERM $pid
    wait_rc $pid 10
    if [ "$rc" = running ]; then
        echo "FAIL: gemm: still running 10 s after SIGTERM"
        kill -KILL $pid
        fail=1
    else
        [ "$rc" = 143 ] || { echo "FAIL: gemm: exit $rc, expected 143"; cat "$work/gemm.err"; fail=1; }
        /usr/bin/python3 - "$work/gemm.json" <<'PY' || fail=1
import json, sys
o = json.load(open(sys.argv[1]))
if o["exit_code"] != 143 or o["status"] != "EINTR":
    sys.exit("FAIL: gemm: --json says exit_code %s, status %s; expected 143, EINTR"
             % (o["exit_code"], o["status"]))
PY
        n=$(rows "$work/gemm/out/s.npy")
        [ -n "$n" ] && [ "$n" -ge 1 ] && [ "$n" -lt 200 ] || { echo "FAIL: gemm: '$n' batches kept"; fail=1; }
        if [ -n "$n" ] && [ "$n" -ge 1 ]; then
            "$pipectl" run --executor host --quiet --batches "$n" "$work/gemm_ref/p.yaml" 2>/dev/null
            cmp -s "$work/gemm/out/s.npy" "$work/gemm_ref/out/s.npy" ||
                { echo "FAIL: gemm: the $n batches kept differ from a run of $n"; fail=1; }
            cmp -s "$work/gemm/out/x.npy" "$work/gemm_ref/out/x.npy" ||
                { echo "FAIL: gemm: x.npy's $n batches differ from a run of $n"; fail=1; }
        fi
        if find "$work/gemm" -name '*.partial*' | grep -q .; then echo "FAIL: gemm: .partial left"; fail=1; fi
        echo "host gemm: SIGTERM after batch $n: exit $rc, --json exit_code 143, $n batches as a run of $n"
    fi
fi

# ---- the second signal drops the batch in flight ----
# A source reads stdin (a FIFO this script writes): 3 batches go through, then the source waits
# inside batch 3 for its data. One SIGINT: batch 3 still finishes when its data comes. Two: it is
# dropped, and the sink keeps the 3 batches before it.
B=256 # bytes per batch: 64 f32
batch() { head -c $B /dev/zero | tr '\0' "\\$(printf '%03o' $((65 + $1)))"; }
for n_sig in 1 2; do
    d=$work/stdin$n_sig
    mkdir -p "$d"
    cat >"$d/p.yaml" <<'YAML'
pipeline: from_stdin
run: {batches: 10, depth: 2}
buffers:
  x: {dtype: f32, shape: [64]}
stages:
  - {name: read, kind: source, to: x, file: "-"}
  - {name: save, kind: sink, from: x, to: out/x.npy}
YAML
    rm -f "$d/fifo"
    mkfifo "$d/fifo"
    "$pipectl" run --executor host --quiet "$d/p.yaml" <"$d/fifo" 2>"$d.err" &
    pid=$!
    exec 3>"$d/fifo"
    for b in 0 1 2; do batch $b >&3; done
    if ! wait_size "$d/out/x.npy.partial" $((128 + 3 * B)); then
        echo "FAIL: stdin ($n_sig signals): 3 batches not written in 120 s"
        exec 3>&-
        kill -KILL $pid
        fail=1
        continue
    fi
    sleep 0.3 # the source is inside batch 3, waiting for its data
    kill -INT $pid
    sleep 0.3
    [ $n_sig = 2 ] && kill -INT $pid && sleep 0.3
    batch 3 >&3
    exec 3>&-
    wait_rc $pid 10
    want=$((n_sig == 1 ? 4 : 3))
    if [ "$rc" = running ]; then
        echo "FAIL: stdin ($n_sig signals): still running 10 s after its data ended"
        kill -KILL $pid
        fail=1
        continue
    fi
    [ "$rc" = 130 ] || { echo "FAIL: stdin ($n_sig signals): exit $rc, expected 130"; cat "$d.err"; fail=1; }
    n=$(rows "$d/out/x.npy")
    [ "$n" = $want ] || { echo "FAIL: stdin ($n_sig signals): $n batches kept, expected $want"; cat "$d.err"; fail=1; }
    size=$(stat -c %s "$d/out/x.npy")
    [ "$size" = $(($(hlen "$d/out/x.npy") + want * B)) ] || { echo "FAIL: stdin ($n_sig signals): $size bytes"; fail=1; }
    cmp -s <(tail -c $((want * B)) "$d/out/x.npy") <(for b in $(seq 0 $((want - 1))); do batch $b; done) ||
        { echo "FAIL: stdin ($n_sig signals): the batches kept are not the ones sent"; fail=1; }
    if [ $n_sig = 2 ]; then
        grep -q "pipectl: aborting: the batches in flight are dropped" "$d.err" ||
            { echo "FAIL: stdin: no 'aborting' line"; cat "$d.err"; fail=1; }
    fi
    if find "$d" -name '*.partial*' | grep -q .; then echo "FAIL: stdin ($n_sig signals): .partial left"; fail=1; fi
    echo "stdin source, $n_sig signal(s): exit $rc, $n batches kept"
done
# ---- the second signal stops a loop between iterations ----
d=$work/loop
mkdir -p "$d"
"$pipectl" run --executor host --quiet --out-dir "$d" "$src/tests/e2e/data/interrupt_loop.yaml" \
    2>"$d.err" &
pid=$!
if wait_size "$d/out/c.npy.partial" $((128 + 4)); then
    sleep 0.5 # batch 1 is in its loop
    kill -INT $pid
    sleep 0.3
    kill -INT $pid
    wait_rc $pid 10
    if [ "$rc" = running ]; then
        echo "FAIL: loop: still running 10 s after the second SIGINT"
        kill -KILL $pid
        fail=1
    else
        [ "$rc" = 130 ] || { echo "FAIL: loop: exit $rc, expected 130"; cat "$d.err"; fail=1; }
        n=$(rows "$d/out/c.npy")
        [ "$n" = 1 ] || { echo "FAIL: loop: $n batches kept, expected 1"; cat "$d.err"; fail=1; }
        echo "loop of 100,000 iterations, 2 signals: exit $rc, $n batch kept"
    fi
else
    echo "FAIL: loop: batch 0 not written in 120 s"
    kill -KILL $pid
    fail=1
fi
exit $fail
