#!/usr/bin/env bash
# run_copyq.sh: pipelines/gpt2.yaml under each graph mode, in one run on the GPU machine. The stalls
# it looks for, measured on the H200: with one graph per slot and segment, the 16 KB upload of batch
# b started only when another slot's 412 MB download ended (the driver places each graph's copy
# nodes on copy engines itself, and three slots' downloads took all three); with plain launches, the
# first checksum kernel waited for the whole first download (lazy module loading). This runs
# gpt2.yaml with --graphs stage (copies on one stream per engine), segment and none, three times
# each, then one traced run per mode, and prints per batch when the upload, forward and download
# ran. From the repository root on the GPU machine (after `source .gpu/setup.sh`):
#   bash tests/bench/run_copyq.sh [PIPECTL]
# Environment: OUT (default out/copyq), WEIGHTS (a GPT-2 snapshot directory; default random),
# MODES (default "stage segment none"), CHUNKS (the forward's and the download's `chunks:`, a
# space-separated list: each runs under every mode; default: the file's; an entry with commas is
# a list of block rows: "4 1,1,2,4 1,1,1,1,2,2" runs chunks: 4, chunks: [1, 1, 2, 4] and
# chunks: [1, 1, 1, 1, 2, 2], in files and traces named c4, c1-1-2-4, c1-1-1-1-2-2), DEPTH (the
# run's depth; default: the file's).
set -u
pipectl=${1:-build-rel/pipectl}
OUT=${OUT:-out/copyq}
mkdir -p "$OUT"
# gpt2_c<N>.yaml: the pipeline with chunks N (c0: as written); a list 1,1,2,4: gpt2_c1-1-2-4.yaml.
tag() { echo "${1//,/-}"; }
for n in ${CHUNKS:-0}; do
    p=$OUT/gpt2_c$(tag "$n").yaml
    if [ -n "${WEIGHTS:-}" ]; then
        sed -e "s|weights: random, config: gpt2|weights: $WEIGHTS|" pipelines/gpt2.yaml >"$p"
    else
        cp pipelines/gpt2.yaml "$p"
    fi
    v=$n
    [[ $n == *,* ]] && v="[${n//,/, }]"
    # the file's chunks: N or [a, b, ...] (GNU sed's \| alternation)
    [ "$n" = 0 ] || sed -i -e "s/chunks: \(\[[0-9, ]*\]\|[0-9]*\)/chunks: $v/g" -e 's/, chunk_dims: [0-9]*//g' "$p"
    grep -qF "chunks: $v" "$p" || [ "$n" = 0 ] || { echo "run_copyq: could not set chunks: $v in $p"; exit 1; }
    if [ -n "${DEPTH:-}" ]; then
        sed -i -e "s/depth: [0-9]*/depth: $DEPTH/" "$p"
        grep -qF "depth: $DEPTH" "$p" || { echo "run_copyq: could not set depth: $DEPTH in $p"; exit 1; }
    fi
done
summary() { # LABEL: the run summary's wall, per batch and bound
    python3 -c '
import json, sys
for l in sys.stdin:
    l = l.strip()
    if l.startswith("{"):
        j = json.loads(l)
        print("%-34s wall %7.2f ms  per batch %6.3f ms  bound %6.3f ms (%s)  %.1f%%" % (sys.argv[1],
              j["wall_s"] * 1e3, j["per_batch_s"] * 1e3, j["bound_s"] * 1e3, j["bound_stage"],
              100 * j["achieved"]))' "$1"
}
{
    for n in ${CHUNKS:-0}; do
        p=$OUT/gpt2_c$(tag "$n").yaml
        for mode in ${MODES:-stage segment none}; do
            for r in 1 2 3; do
                "$pipectl" run --executor gpu --graphs $mode --json "$p" 2>&1 |
                    summary "chunks $n${DEPTH:+, depth $DEPTH}, graphs $mode"
            done
            "$pipectl" run --executor gpu --graphs $mode --timing all \
                --trace "$OUT/trace_c$(tag "$n")_$mode.json" "$p" >/dev/null 2>&1
        done
    done
} | tee "$OUT/runs.txt"
for t in "$OUT"/trace_*.json; do
    python3 - "$t" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
xs = [e for e in ev if e.get("ph") == "X"]
by = {}
for e in xs:
    by.setdefault(e["name"], {})[e["args"]["batch"]] = (e["ts"] / 1e3, e["dur"] / 1e3)
print(sys.argv[1].rsplit("/", 1)[-1])
print("  batch   upload at   forward at+ms      download at+ms")
for b in sorted(by.get("forward", {})):
    u, f, d = by["upload"].get(b), by["forward"].get(b), by["download"].get(b)
    print("  %5d  %9.2f  %9.2f+%5.2f  %9.2f+%6.2f" % (b, u[0], f[0], f[1], d[0], d[1]))
PY
done | tee "$OUT/timelines.txt"
