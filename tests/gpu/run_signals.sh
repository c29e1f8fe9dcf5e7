#!/usr/bin/env bash
# run_signals.sh: signals stop a run cleanly, on the GPU executor (it needs a GPU). A Lua-bound
# pipeline (host stages only) and a device pipeline, each stopped by SIGINT, SIGTERM and SIGHUP: the
# exit code must be 128 + signal within 2 s, the sink's .npy must hold whole batches with a matching
# header, and no .partial may be left.
# usage (repository root, after building): bash tests/gpu/run_signals.sh [PIPECTL]
set -u
pipectl=${1:-build-dev/pipectl}
work=${OUT:-out/device}/signals
rm -rf "$work"
mkdir -p "$work"
fail=0
cat >"$work/lua.yaml" <<'YAML'
pipeline: lua_bound
run: {batches: 100000, depth: 2}
buffers:
  x: {dtype: f32, shape: [4]}
stages:
  - {name: gen, kind: source, to: x, generator: range}
  - name: spin
    kind: lua
    reads: [x]
    time_limit_ms: 0
    code: |
      function run(batch, opts, bufs)
        local s = string.rep("a", 20000)
        for i = 1, 200 do s = s:gsub("a", "a") end
      end
  - {name: save, kind: sink, from: x, to: out/x.npy, after: [spin]}
YAML
cat >"$work/dev.yaml" <<'YAML'
pipeline: device
run: {batches: 100000, depth: 3}
buffers:
  h: {dtype: f32, shape: [64, 4]}
  d: {where: device, dtype: f32, shape: [64, 4]}
  o: {dtype: f32, shape: [64, 4]}
stages:
  - {name: gen, kind: source, to: h, generator: random}
  - {name: up, kind: h2d, from: h, to: d}
  - {name: wait, kind: kernel, op: busy, duration_us: 2000, after: [up]}
  - {name: down, kind: d2h, from: d, to: o, after: [wait]}
  - {name: save, kind: sink, from: o, to: out/x.npy}
YAML
hlen() { echo $((10 + $(od -An -tu2 -j8 -N2 "$1"))); }
rows() { head -c "$(hlen "$1")" "$1" | grep -ao "'shape': ([0-9]*" | grep -o '[0-9]*$'; }
for p in lua dev; do
    B=$([ $p = lua ] && echo 16 || echo 1024)
    for sig in INT TERM HUP; do
        d=$work/$p.$sig
        mkdir -p "$d" && cp "$work/$p.yaml" "$d/p.yaml"
        "$pipectl" run --executor gpu --quiet "$d/p.yaml" 2>"$d.err" &
        pid=$!
        sleep 2
        t0=$(date +%s%3N)
        kill -"$sig" $pid
        for _ in $(seq 1 1000); do kill -0 $pid 2>/dev/null || break; sleep 0.01; done
        kill -0 $pid 2>/dev/null && kill -KILL $pid
        wait $pid
        rc=$?
        t1=$(date +%s%3N)
        want=$((128 + $(kill -l $sig)))
        f=$d/out/x.npy
        n=$( [ -f "$f" ] && rows "$f")
        ok=1
        [ $rc = "$want" ] || ok=0
        [ $((t1 - t0)) -lt 2000 ] || ok=0
        [ -f "$f" ] && [ "$(stat -c %s "$f")" = $(($(hlen "$f") + ${n:-0} * B)) ] || ok=0
        find "$d" -name '*.partial' | grep -q . && ok=0
        echo "$p SIG$sig: exit $rc (want $want) after $((t1 - t0)) ms, ${n:-no} batches kept: $([ $ok = 1 ] && echo ok || echo FAIL)"
        [ $ok = 1 ] || { fail=1; tail -3 "$d.err"; }
    done
done
exit $fail
