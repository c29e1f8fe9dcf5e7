#!/usr/bin/env bash
# run_gpt2_vs_torch.sh: pipelines/gpt2.yaml against the PyTorch 3-stream + graph version in one
# device call (issue 10's first target), as the seventh session's calls ran it: the build and the
# torch pipeline (tests/gpu/run_session.sh steps build, torch), the gpt2 GPU tests, bench_gpt2's
# LM head (with its packing) and forward at B 1, 2 and 8, then gpt2.yaml REPS times. With BASE (a
# second checkout, e.g. `git worktree add /tmp/base main`, inside the tree sent to the device)
# its gpt2.yaml runs alternate with this tree's, side by side. A summary last: the ratio of torch's
# warm (best of 5) and cold (first) runs to each pipectl run. From the repository root on the GPU
# machine:
#   source .gpu/setup.sh && OUT=$OUT bash tests/bench/run_gpt2_vs_torch.sh
# With TRACE=1 every run of this tree also writes a trace (--timing all: every batch timed, a
# little slower), and each run gets a line of where its time went (the first download's start,
# each batch's download, the largest gap between downloads, the end of the last), to find what
# the runs 0.5-2.8 ms slower than the rest (docs/perf.md, seventh session) spend it on.
# Environment: OUT (default out/gpt2_vs_torch), REPS (7), BASE (unset), TRACE (unset),
# DEADLINE (200).
set -u
OUT=${OUT:-out/gpt2_vs_torch}
REPS=${REPS:-7}
mkdir -p "$OUT"
OUT=$OUT STEPS="build torch" DEADLINE=${DEADLINE:-200} bash tests/gpu/run_session.sh >"$OUT/session.txt" 2>&1
PIPECTL_TEST_HF=1 timeout 150 ctest --test-dir build-rel -L gpu -R gpt2 --output-on-failure \
    >"$OUT/ctest.log" 2>&1
echo "ctest -L gpu -R gpt2: rc=$? $(grep 'tests passed' "$OUT/ctest.log")"
for b in 1 2 8; do
    echo "bench_gpt2 B $b T 512 logits: $(build-rel/bench_gpt2 --B $b --T 512 --output logits 2>&1 |
        grep -E '^  (gemm lm head|forward)' | tr -s ' ' | tr '\n' ';')"
done
if [ -n "${BASE:-}" ]; then
    (cd "$BASE" && cmake -S . -B build-rel -G Ninja -DCMAKE_BUILD_TYPE=Release >"$OUT/base_build.log" 2>&1 &&
        cmake --build build-rel -j16 >>"$OUT/base_build.log" 2>&1) || tail "$OUT/base_build.log"
fi
one() { # LABEL DIR [TRACE_FILE]: one run of gpt2.yaml from DIR's build
    local tr=()
    [ -n "${3:-}" ] && tr=(--timing all --trace "$3")
    (cd "$2" && build-rel/pipectl run --executor gpu --json "${tr[@]}" pipelines/gpt2.yaml 2>/dev/null) |
        python3 -c 'import json, sys
j = json.loads([l for l in sys.stdin if l.startswith("{")][-1])
print("%s %.3f ms %.1f%%" % (sys.argv[1], j["wall_s"] * 1e3, 100 * j["achieved"]))' "$1"
}
for r in $(seq "$REPS"); do
    [ -n "${BASE:-}" ] && one base "$BASE"
    if [ -n "${TRACE:-}" ]; then
        one pipectl . "$(pwd)/$OUT/trace$r.json"
        python3 - "$OUT/trace$r.json" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
d = sorted((e["ts"] / 1e3, e["dur"] / 1e3) for e in ev if e.get("ph") == "X" and e["name"] == "download")
gaps = [b[0] - (a[0] + a[1]) for a, b in zip(d, d[1:])]
print("  trace: first download at %.3f ms; downloads %s ms; largest gap %.3f ms; last ends %.3f ms" % (
    d[0][0], " ".join("%.3f" % x[1] for x in d), max(gaps) if gaps else 0, d[-1][0] + d[-1][1]))
PY
    else
        one pipectl .
    fi
done | tee "$OUT/runs.txt"
python3 - "$OUT/runs.txt" "$OUT/session.txt" <<'PY'
import re, statistics, sys
runs = {}
for l in open(sys.argv[1]):
    p = l.split()
    if p and p[0] != "trace:":
        runs.setdefault(p[0], []).append(float(p[1]))
s = open(sys.argv[2]).read()
cold = re.search(r"torch 3-stream \+ graph cold \(first run\): ([0-9.]+) ms", s)
warm = re.search(r"torch 3-stream \+ graph: .* in ([0-9.]+) ms", s)
cold = float(cold.group(1)) if cold else None
warm = float(warm.group(1)) if warm else None
print("torch 3-stream + graph: warm %s ms, cold %s ms" % (warm, cold))
for k, v in runs.items():
    m = statistics.median(v)
    line = "%-8s %d runs: median %.3f ms, %.3f-%.3f" % (k, len(v), m, min(v), max(v))
    if warm and cold:
        line += "; against torch warm %.3fx (%.3f-%.3f), cold %.3fx" % (
            warm / m, warm / max(v), warm / min(v), cold / m)
    print(line)
PY
