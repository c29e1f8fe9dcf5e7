#!/bin/bash
# test_parallel: `parallel: N` on host stages. A lua stage with parallel: 4 (depth 8, 4 workers)
# runs several batches at once (the trace shows its slices overlapping) and writes the same bytes
# as parallel: 1, in batch order; `pipectl plan` gives it a stream of its own, "up to 4 batches at
# once". A parallel stage that accumulates into a persistent buffer still runs one batch at a time
# (its wait on itself is kept) and gets the serial result. A failure at batch 5 of a parallel stage
# leaves exactly batches 0..4 in the sink, while later batches may have run. search, tokenize and
# detokenize take the key too, with the same outputs; a kind that is not reentrant (sink) does not
# know it, and parallel: 0 is refused with its position.
set -u
pipectl=$1 src=$2 build=$3
work=$build/parallel
rm -rf "$work"
mkdir -p "$work"
fail=0
say_fail() { echo "FAIL: $*"; fail=1; }

cat >"$work/lp.yaml" <<'YAML'
pipeline: lua_parallel
run: {batches: 24, depth: 8, seed: 7}
buffers:
  x: {where: host, dtype: f32, shape: [65536]}
  stats: {where: host, dtype: f64, shape: [4]}
stages:
  - {name: gen, kind: source, to: x, generator: random}
  - name: summarise
    kind: lua
    reads: [x]
    writes: [stats]
    parallel: 4
    code: |
      function run(batch, opts, bufs)
        local y = bufs.x
        local lo, hi, positive = math.huge, -math.huge, 0
        for r = 1, 4 do
          for i = 1, #y do
            local v = y[i]
            if v < lo then lo = v end
            if v > hi then hi = v end
            if v > 0 then positive = positive + 1 end
          end
        end
        bufs.stats:fromtable({lo, hi, y:sum() / #y, positive})
      end
  - {name: save, kind: sink, from: stats, to: out/stats.npy}
YAML
"$pipectl" plan "$work/lp.yaml" >"$work/plan.txt" || say_fail "plan: $(cat "$work/plan.txt")"
grep -q "^  host1 (host engine): 1 stage, up to 4 batches at once$" "$work/plan.txt" ||
    say_fail "plan does not give summarise a parallel stream: $(cat "$work/plan.txt")"
"$pipectl" run --executor host --quiet --workers 4 --trace "$work/t.json" "$work/lp.yaml" 2>"$work/p4.err" ||
    say_fail "parallel 4: $(cat "$work/p4.err")"
cp "$work/out/stats.npy" "$work/p4.npy"
"$pipectl" run --executor host --quiet --workers 4 --set summarise.parallel=1 "$work/lp.yaml" 2>"$work/p1.err" ||
    say_fail "parallel 1: $(cat "$work/p1.err")"
cmp -s "$work/out/stats.npy" "$work/p4.npy" || say_fail "parallel 4 wrote other bytes than parallel 1"
at_once=$(/usr/bin/python3 - "$work/t.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
ev = t["traceEvents"] if isinstance(t, dict) else t
sl = [e for e in ev if e.get("ph") == "X" and e.get("name", "").startswith("summarise")]
pts = sorted([(e["ts"], 1) for e in sl] + [(e["ts"] + e["dur"], -1) for e in sl])
c = m = 0
for _, d in pts:
    c += d
    m = max(m, c)
print(m if len(sl) == 24 else -len(sl))
PY
)
[ "$at_once" -ge 2 ] 2>/dev/null || say_fail "the trace shows $at_once summarise slices at once (want 2 or more of 24)"

# A persistent accumulator: the stage's batches stay one at a time, the result the serial one.
cat >"$work/acc.yaml" <<'YAML'
pipeline: acc
run: {batches: 12, depth: 4, seed: 1}
buffers:
  x: {where: host, dtype: f32, shape: [16]}
  total: {where: host, dtype: f64, shape: [1], persistent: true}
  seen: {where: host, dtype: f64, shape: [1]}
stages:
  - {name: gen, kind: source, to: x, generator: random}
  - name: add
    kind: lua
    reads: [x]
    writes: [total, seen]
    parallel: 4
    code: |
      function run(batch, opts, bufs)
        bufs.total[1] = bufs.total[1] + bufs.x:sum()
        bufs.seen[1] = bufs.total[1]
      end
  - {name: save, kind: sink, from: seen, to: out/seen.npy}
YAML
"$pipectl" plan "$work/acc.yaml" | grep -q "^  add waits for add, d=1: persistent 'total' is written every batch$" ||
    say_fail "the plan lets a parallel accumulator's batches overlap"
"$pipectl" run --executor host --quiet --workers 4 "$work/acc.yaml" 2>"$work/acc.err" || say_fail "acc: $(cat "$work/acc.err")"
cp "$work/out/seen.npy" "$work/acc4.npy"
"$pipectl" run --executor host --quiet --workers 4 --set add.parallel=1 "$work/acc.yaml" 2>/dev/null
cmp -s "$work/out/seen.npy" "$work/acc4.npy" || say_fail "a parallel accumulator got another running total"

# A failure at batch 5: the sink holds batches 0..4, equal to a run of 5.
mkdir -p "$work/f" "$work/f5"
cp "$work/lp.yaml" "$work/f/" && cp "$work/lp.yaml" "$work/f5/"
"$pipectl" run --executor host --quiet --workers 4 --fail-at summarise:5 "$work/f/lp.yaml" 2>"$work/f.err"
rc=$?
[ $rc = 1 ] || say_fail "--fail-at summarise:5: exit $rc, expected 1: $(cat "$work/f.err")"
"$pipectl" run --executor host --quiet --batches 5 "$work/f5/lp.yaml" 2>/dev/null
cmp -s "$work/f/out/stats.npy" "$work/f5/out/stats.npy" ||
    say_fail "after a failure at batch 5 the sink does not hold exactly batches 0..4"

# search, tokenize, detokenize: the same bytes with parallel: 3.
cp -r "$src/pipelines/." "$work/pipes/"
for p in rag:retrieve tokenize:tok tokenize:detok; do
    f=${p%%:*} stage=${p#*:}
    grep -Eq "name: $stage(,|$)" "$work/pipes/$f.yaml" || { say_fail "$f.yaml has no stage '$stage'"; continue; }
    for n in 1 3; do
        rm -rf "$work/pipes/out"
        "$pipectl" run --executor host --quiet --workers 3 --depth 4 --set "$stage.parallel=$n" \
            "$work/pipes/$f.yaml" 2>"$work/$stage$n.err" || say_fail "$f $stage parallel $n: $(cat "$work/$stage$n.err")"
        (cd "$work/pipes/out" && cat $(ls | sort)) >"$work/$stage$n.bytes"
    done
    cmp -s "$work/${stage}1.bytes" "$work/${stage}3.bytes" || say_fail "$f: $stage parallel 3 wrote other bytes"
done

# Refusals: parallel 0 at its position; a sink does not take the key.
cat >"$work/bad.yaml" <<'YAML'
pipeline: bad
buffers:
  x: {where: host, dtype: f32, shape: [4]}
stages:
  - {name: gen, kind: source, to: x, generator: random}
  - {name: f, kind: lua, reads: [x], parallel: 0, code: "function run() end"}
YAML
out=$("$pipectl" check "$work/bad.yaml" 2>&1)
[ $? = 2 ] || say_fail "parallel 0: not exit 2"
echo "$out" | grep -q "bad.yaml:6:48: error: stage .f.: .parallel. is 0; it must be between 1 and 64" || say_fail "parallel 0: $out"
sed -e 's/{name: f, kind: lua, reads: \[x\], parallel: 0, code: "function run() end"}/{name: s, kind: sink, from: x, parallel: 2}/' "$work/bad.yaml" >"$work/bad2.yaml"
out=$("$pipectl" check "$work/bad2.yaml" 2>&1)
[ $? = 2 ] || say_fail "sink parallel: not exit 2"
echo "$out" | grep -q "parallel" || say_fail "sink parallel: $out"
[ $fail = 0 ] && echo "parallel host stages: same bytes, batches at once ($at_once), accumulator serial, failure drains to 0..4"
exit $fail
