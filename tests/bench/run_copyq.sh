#!/usr/bin/env bash
# run_copyq.sh: why pipelines/gpt2.yaml runs at 0.91x the PyTorch 3-stream version (issue 10), in
# one device call. The timeline of 2026-12-01 showed the 16 KB upload of batch b starting only
# when another slot's 412 MB download ended, as if both sat in one hardware copy queue. This
# runs gpt2.yaml with graphs and with --no-graph, each under CUDA_DEVICE_MAX_CONNECTIONS 8 (the
# driver's default) and 32 (more hardware queues for the streams), three times each, then one
# traced run per mode and prints, per batch, when the upload, forward and download ran and how
# long each upload waited after its graph or stream could start it. From the repository root on
# the GPU machine (after `source .gpu/setup.sh`):
#   bash tests/bench/run_copyq.sh [PIPECTL]
# Environment: OUT (default out/copyq), WEIGHTS (a GPT-2 snapshot directory; default random).
set -u
pipectl=${1:-build-rel/pipectl}
OUT=${OUT:-out/copyq}
mkdir -p "$OUT"
p=$OUT/gpt2.yaml
if [ -n "${WEIGHTS:-}" ]; then
    sed -e "s|weights: random, config: gpt2|weights: $WEIGHTS|" pipelines/gpt2.yaml >"$p"
else
    cp pipelines/gpt2.yaml "$p"
fi
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
    for conn in 8 32; do
        for mode in graphs no-graph; do
            flag=
            [ $mode = no-graph ] && flag=--no-graph
            for r in 1 2 3; do
                CUDA_DEVICE_MAX_CONNECTIONS=$conn "$pipectl" run --executor gpu $flag --json "$p" 2>&1 |
                    summary "$mode, connections $conn"
            done
            CUDA_DEVICE_MAX_CONNECTIONS=$conn "$pipectl" run --executor gpu $flag --timing all \
                --trace "$OUT/trace_${mode}_$conn.json" "$p" >/dev/null 2>&1
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
