#!/usr/bin/env bash
# run_chunk_slow.sh: why gpt2.yaml's first two chunked downloads run 2-9% slower at depth 3 and 4
# (measured on the H200, docs/perf.md: 7.68-8.10 ms against 7.44-7.47 for every later batch,
# and for all batches unchunked or at depth 2; torch's downloads run at full speed from its
# first batch). Each variant of gpt2.yaml runs twice with --timing all --trace; a line per run
# gives the wall and each batch's download span. Variants: as written; chunks 1 and 4; without
# the digest (no kernel, copy or sink after the download); depth 2, 3 and 4; 16 batches; the
# forward unordered; the trace's timing off (wall only, --json). From the repository root on the
# GPU machine (after `source .gpu/setup.sh`):
#   bash tests/bench/run_chunk_slow.sh [PIPECTL]
# Environment: OUT (default out/chunk_slow).
set -u
pipectl=${1:-build-rel/pipectl}
OUT=${OUT:-out/chunk_slow}
mkdir -p "$OUT"
base=pipelines/gpt2.yaml
v() { # NAME SED_ARGS...: writes $OUT/NAME.yaml, gpt2.yaml edited
    local n=$1
    shift
    sed "$@" "$base" >"$OUT/$n.yaml"
}
cp "$base" "$OUT/asis.yaml"
# (the file's chunk_dims goes: these count sequences)
v c1 -e 's/chunks: \(\[[0-9, ]*\]\|[0-9]*\)/chunks: 1/g' -e 's/, chunk_dims: [0-9]*//g'
v c4 -e 's/chunks: \(\[[0-9, ]*\]\|[0-9]*\)/chunks: 4/g' -e 's/, chunk_dims: [0-9]*//g'
v nodigest -e '/name: digest/d' -e '/name: save/d' -e '/sum_dev:/d' -e '/  sum:/d'
v depth2 -e 's/depth: [0-9]*/depth: 2/'
v depth3 -e 's/depth: [0-9]*/depth: 3/'
v depth4 -e 's/depth: [0-9]*/depth: 4/'
v b16 -e 's/batches: 8,/batches: 16,/'
v unordered -e 's/out: logits_dev, chunks: \(\[[0-9, ]*\]\)\(, chunk_dims: [0-9]\)\?}/out: logits_dev, chunks: \1\2, ordered: false}/'
spans() { # TRACE LABEL
    python3 - "$1" "$2" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
d = sorted((e["args"]["batch"], e["ts"] / 1e3, e["dur"] / 1e3) for e in ev
           if e.get("ph") == "X" and e["name"] == "download")
end = max(x[1] + x[2] for x in d)
print("%-10s first download at %5.2f ms, end %6.2f ms; downloads: %s" % (
    sys.argv[2], d[0][1], end, " ".join("%.2f" % x[2] for x in d)))
PY
}
for n in asis c1 c4 nodigest depth2 depth3 depth4 b16 unordered; do
    for r in 1 2; do
        "$pipectl" run --executor gpu --timing all --trace "$OUT/$n.$r.json" "$OUT/$n.yaml" \
            >"$OUT/$n.$r.log" 2>&1 || { echo "$n: run failed: $(tail -n 3 "$OUT/$n.$r.log")"; continue; }
        spans "$OUT/$n.$r.json" "$n"
    done
done | tee "$OUT/spans.txt"
for r in 1 2 3; do
    "$pipectl" run --executor gpu --json "$OUT/asis.yaml" 2>/dev/null | python3 -c '
import json, sys
j = json.loads([l for l in sys.stdin if l.startswith("{")][-1])
print("asis, timing sampled: wall %.2f ms" % (j["wall_s"] * 1e3))'
done | tee -a "$OUT/spans.txt"
