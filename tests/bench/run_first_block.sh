#!/usr/bin/env bash
# run_first_block.sh: what the first forward block of pipelines/gpt2.yaml costs. At depth 2 the
# download link is busy from the first block's logits to the end (measured on the H200,
# docs/perf.md), so the time before the first download, one sequence's forward (~0.76 ms), is most
# of what stands between the run and its bound. bench_gpt2 per op at B 1, 2 and 8 (T 512, full
# logits), then gpt2.yaml three times. From the
# repository root on the GPU machine (after `source .gpu/setup.sh`):
#   bash tests/bench/run_first_block.sh [BUILD]
# Environment: OUT (default out/first_block).
set -u
B=${1:-build-rel}
OUT=${OUT:-out/first_block}
mkdir -p "$OUT"
for b in 1 2 8; do
    echo "== B $b"
    "$B/bench_gpt2" --B $b --T 512 --output logits 2>&1
done >"$OUT/bench.log"
for r in 1 2 3; do
    "$B/pipectl" run --executor gpu --json pipelines/gpt2.yaml 2>/dev/null | python3 -c '
import json, sys
j = json.loads([l for l in sys.stdin if l.startswith("{")][-1])
print("gpt2.yaml: wall %.2f ms" % (j["wall_s"] * 1e3))'
done | tee "$OUT/runs.txt"
grep -E "^==|^  (embedding|layernorm|gemm|attention|forward)" "$OUT/bench.log"
