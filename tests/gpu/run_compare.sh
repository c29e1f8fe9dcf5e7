#!/usr/bin/env bash
# run_compare.sh: this tree's GPU checks and its speed beside a second tree's, in one run on the GPU
# machine of under ten minutes: both trees built (Release, sm_90), `ctest -L gpu` on this one
# (transformers' GPT-2 124M included), the GPT-2 tokenizer against transformers'
# GPT2TokenizerFast (tests/bench/tokenize_hf.py) when a vocabulary folder is given, then `pipectl
# bench --quick` and pipelines/gpt2.yaml, alternating between the two trees REPS times, so each
# ratio comes from runs side by side. A table last; every log under $OUT. From the repository root:
#   source .gpu/setup.sh && BASE=.gpu/base OUT=$OUT bash tests/gpu/run_compare.sh
# Environment: OUT (default out/compare), BASE (a second source tree; unset: this tree alone),
# REPS (3), STEPS (default "build gpu tokenize bench gpt2"), VOCAB (a folder with vocab.json and
# merges.txt: GPT-2's vocabulary), DEADLINE (seconds; default 540), JOBS (16).
set -u
OUT=${OUT:-out/compare}
REPS=${REPS:-3}
STEPS=${STEPS:-build gpu tokenize bench gpt2}
DEADLINE=${DEADLINE:-540}
JOBS=${JOBS:-16}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
declare -a rows=()
want() { [[ " $STEPS " == *" $1 "* ]]; }
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" # step, machine_log
STEP_WIDTH=44 STEP_SLACK=30
machine_log "$OUT/machine.txt"
trees=(.)
[ -n "${BASE:-}" ] && trees+=("$BASE")
label() { [ "$1" = . ] && echo this || echo base; }

if want build; then
    for t in "${trees[@]}"; do
        l=$(label "$t")
        step "build ($l)" 240 "build_$l.log" sh -c "cmake -S '$t' -B '$t/build-rel' -G Ninja \
            -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null && \
            cmake --build '$t/build-rel' -j$JOBS" || { printf '%s\n' "${rows[@]}"; tail -30 "$OUT/build_$l.log"; exit 1; }
    done
fi
want gpu && step "ctest -L gpu (this; HF 124M included)" 240 ctest_gpu.log \
    env PIPECTL_TEST_HF=1 ctest --test-dir build-rel -L gpu --output-on-failure -j4

if want tokenize && [ -n "${VOCAB:-}" ]; then
    step "tokenizer vs GPT2TokenizerFast" 150 tokenize.log python3 tests/bench/tokenize_hf.py \
        --pipectl build-rel/pipectl --vocab "$VOCAB"
fi
# bench: the balanced-copies and small-batch tables of each tree, alternating.
if want bench; then
    for r in $(seq 1 "$REPS"); do
        for t in "${trees[@]}"; do
            l=$(label "$t")
            step "pipectl bench --quick ($l, run $r)" 90 "bench_$l.log" "$t/build-rel/pipectl" bench --quick
        done
    done
fi
# gpt2: pipelines/gpt2.yaml (this tree's file for both, so the work is the same), alternating.
if want gpt2; then
    for r in $(seq 1 "$REPS"); do
        for t in "${trees[@]}"; do
            l=$(label "$t")
            step "gpt2.yaml ($l, run $r)" 60 "gpt2_$l.json" "$t/build-rel/pipectl" run --executor gpu \
                --json pipelines/gpt2.yaml
        done
    done
fi

printf '%s\n' "${rows[@]}"
echo
# The figures side by side: bench rows by config, gpt2.yaml's per-batch time, best of the runs.
python3 - "$OUT" <<'PY'
import json, os, re, sys
out = sys.argv[1]
def bench_rows(path):
    best = {}
    if not os.path.exists(path): return best
    section = ""
    for line in open(path):
        if line.startswith("=="): section = line.strip("= \n")[:40]
        m = re.match(r"^(\S.{0,17}?)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)%", line)
        if m:
            k = (section, m.group(1).strip())
            v = float(m.group(3))
            best[k] = min(best.get(k, 1e30), v)
    return best
a, b = bench_rows(f"{out}/bench_this.log"), bench_rows(f"{out}/bench_base.log")
if a:
    print("pipectl bench --quick, per batch (us), best of runs:")
    for k in a:
        base = b.get(k)
        ratio = f"{base / a[k]:.3f}x" if base else "-"
        print(f"  {k[0][:34]:34s} {k[1]:18s} this {a[k]:10.1f}  base {base if base else '-':>10}  base/this {ratio}")
def gpt2(path):
    runs = []
    if not os.path.exists(path): return runs
    dec = json.JSONDecoder()
    text = open(path).read()
    i = 0
    while True:
        j = text.find("{", i)
        if j < 0: break
        try:
            obj, n = dec.raw_decode(text, j)
        except ValueError:
            i = j + 1
            continue
        if "per_batch_s" in obj: runs.append(obj)
        i = n
    return runs
ta, tb = gpt2(f"{out}/gpt2_this.json"), gpt2(f"{out}/gpt2_base.json")
if ta:
    fa = sorted(r["wall_s"] * 1e3 for r in ta)
    line = "gpt2.yaml wall (ms): this " + ", ".join(f"{x:.2f}" for x in fa)
    if tb:
        fb = sorted(r["wall_s"] * 1e3 for r in tb)
        line += "; base " + ", ".join(f"{x:.2f}" for x in fb) + f"; base/this (best) {fb[0] / fa[0]:.4f}"
    print(line)
    print("gpt2.yaml achieved (this): " + ", ".join(str(r.get("achieved")) for r in ta))
PY
[ -f "$OUT/tokenize.log" ] && tail -15 "$OUT/tokenize.log"
exit 0
