# A failure at batch k drains: batches that do not depend on the failure finish, and every sink,
# in every lane, holds exactly batches 0..k-1; the summary and --json say k, and the error names
# the failing stage and batch. Two independent lanes (a fast one and a slow one), the failure
# injected in either, at depths 1, 2 and 4. `test_drain.sh PIPECTL SRC BUILD [gpu]` runs it on the
# GPU executor (CTest: test_drain_gpu, label gpu; skipped without a device).
set -u
pipectl=$1 src=$2 build=$3 executor=${4:-host}
work=$build/drain_$executor
rm -rf "$work"
mkdir -p "$work"
if [ "$executor" = gpu ] && ! "$pipectl" doctor >/dev/null 2>&1; then
    echo "SKIP: no GPU"
    exit 77
fi
# On the GPU a device fault names the stage for certain only with completion marks (without them,
# the first kernel not seen to finish: docs/architecture.md); the drain itself needs neither.
marks=
[ "$executor" = gpu ] && marks=--fault-marks
fail=0
cat >"$work/lanes.yaml" <<'YAML'
pipeline: lanes
run: {batches: 40, seed: 3}
buffers:
  a:     {dtype: f32, shape: [256]}
  a_dev: {where: device, dtype: f32, shape: [256]}
  b_dev: {where: device, dtype: f32, shape: [256]}
  b:     {dtype: f32, shape: [256]}
  s:     {dtype: f32, shape: [256]}
  t:     {dtype: f32, shape: [256]}
stages:
  # fast lane: source -> sink
  - {name: fast_gen, kind: source, to: s, generator: random}
  - {name: fast_copy, kind: lua, reads: [s], writes: [t], code: "function run(b, o, v) v.t:copy(v.s) end"}
  - {name: fast_save, kind: sink, from: t, to: out/fast.npy}
  # slow lane: source -> h2d -> busy kernel -> scale -> d2h -> sink
  - {name: slow_gen, kind: source, to: a, generator: random}
  - {name: up, kind: h2d, from: a, to: a_dev}
  - {name: spin, kind: kernel, op: busy, duration_us: 2000, after: [up]}
  - {name: kern, kind: kernel, op: scale, alpha: 2, reads: [a_dev], writes: [b_dev], after: [spin]}
  - {name: down, kind: d2h, from: b_dev, to: b}
  - {name: slow_save, kind: sink, from: b, to: out/slow.npy}
YAML
# Batches in a .npy of f32 [n, 256]: (file size - header) / 1024.
nb() { [ -f "$1" ] || { echo missing; return; }; echo $((($(stat -c %s "$1") - 10 - $(od -An -tu2 -j8 -N2 "$1")) / 1024)); }
for at in kern:5 fast_copy:5 slow_save:7 fast_gen:3; do
    k=${at#*:}
    stage=${at%:*}
    for depth in 1 2 4; do
        rm -rf "$work/out"
        "$pipectl" run --quiet --executor "$executor" $marks --depth "$depth" --fail-at "$at" --json \
            "$work/lanes.yaml" >"$work/run.json" 2>"$work/run.err"
        rc=$?
        f=$(nb "$work/out/fast.npy") s=$(nb "$work/out/slow.npy")
        want=$k
        # A device kernel's fault on the GPU at depth > 1: the kernels of other slots run at the
        # same time (kern is not ordered), and a batch whose kernel was still running when the
        # device died has no output to keep. So the run may stop at an earlier batch j (k - depth
        # < j <= k); then it must say so consistently: the error names batch j and says batch k's
        # kern was also running, and both sinks and batches_done hold j.
        if [ "$executor" = gpu ] && [ "$stage" = kern ] && [ "$depth" -gt 1 ]; then
            j=$(grep -o "stage 'kern', batch [0-9]*" "$work/run.err" | head -n 1 | grep -o "[0-9]*$")
            if [ -n "$j" ] && [ "$j" -lt "$k" ] && [ "$j" -gt $((k - depth)) ] &&
                grep -q "'kern' of batch $k was also running" "$work/run.err"; then
                want=$j
                echo "note: --fail-at $at, depth $depth: the fault was named at batch $j (batch $k's kern was running beside it)"
            fi
        fi
        ok=1
        [ $rc -eq 1 ] || ok=0
        [ "$f" = "$want" ] && [ "$s" = "$want" ] || ok=0
        grep -q "stage '$stage', batch $want" "$work/run.err" || ok=0
        grep -q "\"batches_done\": $want\b" "$work/run.json" || ok=0
        ls "$work/out"/*.partial >/dev/null 2>&1 && ok=0
        if [ $ok -eq 1 ]; then
            echo "ok: --fail-at $at, depth $depth: both sinks hold $want batches"
        else
            echo "FAIL: --fail-at $at, depth $depth: rc $rc, fast.npy $f, slow.npy $s batches (want $want)"
            head -c 600 "$work/run.err"
            grep -o '"batches_done": [0-9]*' "$work/run.json"
            fail=1
        fi
    done
done
exit $fail
