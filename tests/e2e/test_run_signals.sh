#!/bin/bash
# test_run_signals: SIGTERM (timeout, systemd, docker, Slurm) and SIGHUP (closed terminal) stop
# `pipectl run` like Ctrl-C: exit 128 + signal (143, 129), an 'interrupted (SIGTERM)' message,
# and the .npy under its final name holds a prefix of complete batches equal to a full run's,
# with a header whose first dimension says how many; no .partial is left.
set -u
pipectl=$1 build=$3
work=$build/run_signals
rm -rf "$work"
mkdir -p "$work"
fail=0
cat >"$work/slow.yaml" <<'YAML'
pipeline: slow
run: {batches: 300, depth: 3, seed: 5}
buffers:
  x_host: {dtype: f32, shape: [64, 4]}
  x_dev:  {where: device, dtype: f32, shape: [64, 4]}
  y_dev:  {where: device, dtype: f32, shape: [64, 4]}
  y_host: {dtype: f32, shape: [64, 4]}
stages:
  - {name: gen, kind: source, to: x_host, generator: random}
  - {name: up, kind: h2d, from: x_host, to: x_dev}
  - {name: compute, kind: kernel, op: scale, alpha: 3, reads: [x_dev], writes: [y_dev]}
  - {name: wait, kind: kernel, op: busy, duration_us: 10000, after: [compute]}
  - {name: down, kind: d2h, from: y_dev, to: y_host, after: [wait]}
  - {name: save, kind: sink, from: y_host, to: out/slow.npy}
YAML
B=1024
hlen() { echo $((10 + $(od -An -tu2 -j8 -N2 "$1"))); }
rows() { head -c "$(hlen "$1")" "$1" | grep -ao "'shape': ([0-9]*" | grep -o '[0-9]*$'; }
data() { tail -c +$(($(hlen "$1") + 1)) "$1" | head -c $(($2 * B)); }

mkdir -p "$work/full" && cp "$work/slow.yaml" "$work/full/"
"$pipectl" run --executor host --quiet --batches 60 "$work/full/slow.yaml" 2>/dev/null ||
    { echo "FAIL: reference run failed"; exit 1; }

for sig in TERM HUP; do
    want=$((128 + $(kill -l "$sig")))
    d=$work/$sig
    mkdir -p "$d" && cp "$work/slow.yaml" "$d/"
    "$pipectl" run --executor host --quiet "$d/slow.yaml" 2>"$d.err" &
    pid=$!
    for _ in $(seq 1 600); do
        p=$d/out/slow.npy.partial
        [ -f "$p" ] && [ "$(stat -c %s "$p")" -gt 4096 ] && break
        sleep 0.01
    done
    kill -"$sig" $pid
    wait $pid
    rc=$?
    [ $rc = "$want" ] || { echo "FAIL: SIG$sig: exit code $rc, expected $want"; cat "$d.err"; fail=1; }
    grep -q "error: interrupted (SIG$sig)" "$d.err" || { echo "FAIL: SIG$sig: no 'interrupted (SIG$sig)' message"; cat "$d.err"; fail=1; }
    f=$d/out/slow.npy
    if [ ! -f "$f" ]; then echo "FAIL: SIG$sig: $f missing"; fail=1; continue; fi
    n=$(rows "$f")
    size=$(stat -c %s "$f")
    [ "$size" = $(($(hlen "$f") + n * B)) ] || { echo "FAIL: SIG$sig: $f is $size bytes, header says $n batches"; fail=1; }
    [ "$n" -gt 0 ] && [ "$n" -lt 300 ] || { echo "FAIL: SIG$sig: $n batches kept"; fail=1; }
    m=$((n < 60 ? n : 60))
    cmp -s <(data "$f" "$m") <(data "$work/full/out/slow.npy" "$m") || { echo "FAIL: SIG$sig: kept batches differ from a full run's"; fail=1; }
    grep -q "stopped after [0-9]* of 300 batches; $n batch" "$d.err" || { echo "FAIL: SIG$sig: summary does not say $n batches"; cat "$d.err"; fail=1; }
    if find "$d" -name '*.partial' | grep -q .; then echo "FAIL: SIG$sig: .partial left"; fail=1; fi
    echo "SIG$sig: exit $rc, $n of 300 batches kept, header and data correct"
done
exit $fail
