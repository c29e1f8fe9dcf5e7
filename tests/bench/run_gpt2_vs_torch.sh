#!/usr/bin/env bash
# run_gpt2_vs_torch.sh: pipelines/gpt2.yaml against the PyTorch 3-stream + graph version in one
# run on the GPU machine: the build and the torch pipeline (tests/gpu/run_gpu_checks.sh steps
# build, torch), the gpt2 GPU tests, bench_gpt2's LM head (with its packing) and forward at B 1, 2
# and 8, then gpt2.yaml REPS times. With BASE (a second checkout, e.g. `git worktree add
# /tmp/base main`, inside the tree copied to the GPU machine) its gpt2.yaml runs alternate with
# this tree's, side by side. A summary last: the ratio of torch's warm (best of 5) and cold
# (first) runs to each pipectl run. From the repository root on the GPU machine:
#   source .gpu/setup.sh && OUT=$OUT bash tests/bench/run_gpt2_vs_torch.sh
# With TRACE=1 every run of this tree also writes a trace (--timing all: every batch timed, a
# little slower), and each run gets a line of where its time went (the first download's start,
# each batch's download, the largest gap between downloads, the end of the last), to find what
# the runs 0.5-2.8 ms slower than the rest (measured on the H200, docs/perf.md) spend it on.
# Environment: OUT (default out/gpt2_vs_torch), REPS (7), BASE (unset), TRACE (unset),
# TESTS (1; 0 leaves the gpt2 GPU tests out), STEPS (run_gpu_checks.sh's, "build torch"), BENCH_B
# (bench_gpt2's batch sizes, "1 2 8"; empty: none), DEADLINE (200).
# VARIANTS: space-separated chunk lists in positions (e.g. "128,384,512,1024,1024,1024"): each
# runs gpt2.yaml with `chunks: [that], chunk_dims: 2` on the forward and the download (in place
# of the file's chunks), alternating with the file as it is, labelled by its list.
set -u
OUT=${OUT:-out/gpt2_vs_torch}
REPS=${REPS:-7}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
for v in ${VARIANTS:-}; do
    sed -E "s/chunks: \[[0-9, ]*\](, chunk_dims: [0-9])?}/chunks: [${v//,/, }], chunk_dims: 2}/" pipelines/gpt2.yaml >"$OUT/gpt2_$v.yaml"
    [ "$(grep -c chunk_dims "$OUT/gpt2_$v.yaml")" = 2 ] || echo "variant $v: gpt2.yaml's chunks were not replaced"
done
OUT=$OUT STEPS="${STEPS:-build torch}" DEADLINE=${DEADLINE:-200} bash tests/gpu/run_gpu_checks.sh >"$OUT/gpu_checks.txt" 2>&1
if [ "${TESTS:-1}" != 0 ]; then
    PIPECTL_TEST_HF=1 timeout 150 ctest --test-dir build-rel -L gpu -R gpt2 --output-on-failure \
        >"$OUT/ctest.log" 2>&1
    echo "ctest -L gpu -R gpt2: rc=$? $(grep 'tests passed' "$OUT/ctest.log")"
fi
for b in ${BENCH_B-1 2 8}; do
    echo "bench_gpt2 B $b T 512 logits: $(build-rel/bench_gpt2 --B $b --T 512 --output logits 2>&1 |
        grep -E '^  (gemm lm head|forward)' | tr -s ' ' | tr '\n' ';')"
done
if [ -n "${BASE:-}" ]; then
    (cd "$BASE" && cmake -S . -B build-rel -G Ninja -DCMAKE_BUILD_TYPE=Release >"$OUT/base_build.log" 2>&1 &&
        cmake --build build-rel -j16 >>"$OUT/base_build.log" 2>&1) || tail "$OUT/base_build.log"
fi
one() { # LABEL DIR [TRACE_FILE [YAML]]: one run of gpt2.yaml (or YAML) from DIR's build
    local tr=()
    [ -n "${3:-}" ] && tr=(--timing all --trace "$3")
    (cd "$2" && build-rel/pipectl run --executor gpu --json "${tr[@]}" "${4:-pipelines/gpt2.yaml}" 2>/dev/null) |
        python3 -c 'import json, sys
j = json.loads([l for l in sys.stdin if l.startswith("{")][-1])
print("%s %.3f ms %.1f%%" % (sys.argv[1], j["wall_s"] * 1e3, 100 * j["achieved"]))' "$1"
}
for r in $(seq "$REPS"); do
    [ -n "${BASE:-}" ] && one base "$BASE"
    if [ -n "${TRACE:-}" ]; then
        one pipectl . "$OUT/trace$r.json"
        python3 tests/bench/trace_downloads.py "$OUT/trace$r.json"
    else
        one pipectl .
    fi
    for v in ${VARIANTS:-}; do
        if [ -n "${TRACE:-}" ]; then
            one "$v" . "$OUT/trace_${v}_$r.json" "$OUT/gpt2_$v.yaml"
            python3 tests/bench/trace_downloads.py "$OUT/trace_${v}_$r.json"
        else
            one "$v" . "" "$OUT/gpt2_$v.yaml"
        fi
    done
done | tee "$OUT/runs.txt"
python3 - "$OUT/runs.txt" "$OUT/gpu_checks.txt" <<'PY'
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
