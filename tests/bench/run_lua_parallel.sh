#!/bin/bash
# run_lua_parallel: how a lua stage's `parallel: N` scales on this host. A lua_postprocess-style
# stage (min, max, mean and count of positives over an f32 [65536] batch, 16 passes: about 30 ms
# of Lua a batch on one core) behind a random source and in front of a checksum sink, run on the
# host executor at parallel 1, 2, 4, ... up to MAX (default: the cores) with as many workers (plus
# two for the source and the sink) and a depth of twice that; best of REPS runs (default 3) each.
# Prints per N: batches/s, the speedup over parallel 1, the stage's mean time per batch (a mean
# that grows with N says the cores, or memory, are shared) and the run's CPU time per batch (user
# + system: flat when running batches at once costs nothing extra). The outputs' checksum must be
# the same at every N (the script fails otherwise). The load average is printed before and after:
# on a machine other processes share, compare only runs made under the same load.
#
#   tests/bench/run_lua_parallel.sh build/pipectl            # up to the cores
#   tests/bench/run_lua_parallel.sh build/pipectl 16 5       # up to 16, best of 5
set -eu
pipectl=${1:?usage: run_lua_parallel.sh PIPECTL [MAX] [REPS]}
cores=$(nproc)
max=${2:-$cores}
reps=${3:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
batches=$((16 * max))
[ $batches -lt 64 ] && batches=64
cat >"$work/p.yaml" <<YAML
pipeline: lua_parallel_bench
run: {batches: $batches, depth: 4, seed: 7}
buffers:
  x: {where: host, dtype: f32, shape: [65536]}
  stats: {where: host, dtype: f64, shape: [4]}
stages:
  - {name: gen, kind: source, to: x, generator: random}
  - name: summarise
    kind: lua
    reads: [x]
    writes: [stats]
    instructions: 1000000000
    code: |
      function run(batch, opts, bufs)
        local y = bufs.x
        local lo, hi, positive = math.huge, -math.huge, 0
        for r = 1, 16 do
          for i = 1, #y do
            local v = y[i]
            if v < lo then lo = v end
            if v > hi then hi = v end
            if v > 0 then positive = positive + 1 end
          end
        end
        bufs.stats:fromtable({lo, hi, y:sum() / #y, positive})
      end
  - {name: check, kind: sink, from: stats}
YAML
echo "lua stage, parallel N on $(nproc) cores ($(uname -m)); $batches batches, best of $reps;" \
    "load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-10s %-9s %-12s %-9s %-12s %s\n' parallel workers batches/s speedup "stage mean" \
    "CPU/batch"
base=""
sum0=""
n=1
while [ $n -le $max ]; do
    best=0 mean=0
    for _ in $(seq 1 "$reps"); do
        /usr/bin/time -o "$work/cpu" -f "%U %S" "$pipectl" run --executor host --json \
            --workers $((n + 2)) --depth $((2 * n > 4 ? 2 * n : 4)) --set summarise.parallel=$n \
            "$work/p.yaml" >"$work/r.json"
        read -r rate m sum cpu < <(/usr/bin/python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))
st = [s for s in o["stages"] if s["name"] == "summarise"][0]
u, s = open(sys.argv[2]).read().split()
print(o["batches_per_s"], st["mean_s"], o["outputs"][0]["checksum"],
      (float(u) + float(s)) / o["batches_done"])' "$work/r.json" "$work/cpu")
        if /usr/bin/python3 -c "import sys; sys.exit(0 if float('$rate') > float('$best') else 1)"; then
            best=$rate mean=$m bcpu=$cpu
        fi
        if [ -z "$sum0" ]; then sum0=$sum; elif [ "$sum" != "$sum0" ]; then
            echo "FAIL: parallel $n: checksum $sum, parallel 1 gave $sum0" >&2
            exit 1
        fi
    done
    [ -z "$base" ] && base=$best
    /usr/bin/python3 -c "print('%-10d %-9d %-12.1f %-9s %-12s %.1f ms' % ($n, $n + 2, $best, '%.2fx' % ($best / $base), '%.1f ms' % ($mean * 1e3), $bcpu * 1e3))"
    if [ $n -lt "$max" ] && [ $((n * 2)) -gt "$max" ]; then n=$max; else n=$((n * 2)); fi
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
