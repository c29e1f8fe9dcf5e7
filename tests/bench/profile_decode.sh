#!/usr/bin/env bash
# profile_decode.sh: where a GPT-2 decode step's device time goes, kernel by kernel, on the GPU
# machine. GPT-2 124M in f16 (random weights), prompts of 128, one batch at depth 1, the decode
# steps written out (tests/e2e/generate_yaml.py), run under Nsight Compute twice: with S1 and with
# S2 decode steps. A kernel's time per step is (its total at S2 - its total at S1) / (S2 - S1), so
# the prefill, the first sample and the run's setup cancel. Per batch size, a table: each kernel
# name's launches and device microseconds per step, its share, and the sum, to set beside the
# step's wall time (tests/bench/generate_pipectl.py): what the sum leaves is launch gaps and idle.
# The stages' setup (the "setup" NVTX range: cuBLASLt's candidates timed at open) is left out.
# ncu runs with `--clock-control none` (the clocks as found) and `--cache-control none` (the L2
# as the run leaves it: the weights do not fit in it anyway), and `--no-graph`, so each kernel is
# a launch of its own; ncu serialises the kernels, which decode runs in order anyway.
#
#   bash tests/bench/profile_decode.sh build-rel/pipectl [B...]      # default: 1 64
#
# Environment: S1 (default 2), S2 (default 6), OUT (default out/profile; the pipelines and ncu's
# CSV go there), NCU (default ncu).
set -u
P=$(realpath "${1:?usage: profile_decode.sh PIPECTL [B...]}")
shift
[ $# -gt 0 ] || set -- 1 64
S1=${S1:-2}
S2=${S2:-6}
OUT=${OUT:-out/profile}
NCU=${NCU:-ncu}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
command -v "$NCU" >/dev/null || { echo "profile_decode.sh: no '$NCU' (Nsight Compute)"; exit 77; }
[ "$S2" -gt "$S1" ] || { echo "profile_decode.sh: S2 ($S2) must exceed S1 ($S1)"; exit 2; }

for B in "$@"; do
    for S in "$S1" "$S2"; do
        y=$OUT/decode_b${B}_s$S.yaml
        python3 "$SRC/tests/e2e/generate_yaml.py" --weights random --config gpt2 --B "$B" --T 128 \
            --steps "$S" --batches 1 --depth 1 --dtype f16 --cache f16 --layers 12 --heads 12 \
            --embd 768 --vocab 50257 >"$y" || exit 1
        (cd "$OUT" && "$NCU" --clock-control none --cache-control none --csv --nvtx \
            --nvtx-exclude "pipectl@setup/" --metrics gpu__time_duration.sum "$P" run --quiet \
            --executor gpu --no-graph "$y") \
            >"$OUT/ncu_b${B}_s$S.csv" 2>"$OUT/ncu_b${B}_s$S.err" ||
            { echo "B $B, $S steps: ncu failed: $(tail -3 "$OUT/ncu_b${B}_s$S.err")"; continue; }
    done
    python3 - "$B" "$S1" "$S2" "$OUT/ncu_b${B}_s$S1.csv" "$OUT/ncu_b${B}_s$S2.csv" <<'PY'
import csv
import sys
from collections import defaultdict

B, s1, s2 = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])


def totals(path):
    """{kernel name: [launches, ns]} from ncu's CSV (a row per kernel and metric)."""
    t = defaultdict(lambda: [0, 0.0])
    rows = [l for l in open(path) if l.startswith('"')]
    for r in csv.DictReader(rows):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        v = float(r["Metric Value"].replace(",", ""))
        scale = {"ns": 1, "nsecond": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6,
                 "s": 1e9, "second": 1e9}[r["Metric Unit"]]
        name = r["Kernel Name"].split("(")[0].split("<")[0].strip().removeprefix("void ")
        t[name][0] += 1
        t[name][1] += v * scale
    return t


a, b = totals(sys.argv[4]), totals(sys.argv[5])
n = s2 - s1
per = {k: ((b[k][0] - a.get(k, [0, 0])[0]) / n, (b[k][1] - a.get(k, [0, 0])[1]) / n / 1e3)
       for k in b}
per = {k: v for k, v in per.items() if v[0] > 0}
total = sum(v[1] for v in per.values())
print(f"\nGPT-2 124M f16 decode, batch {B}, prompt 128: kernels per step ({s2} - {s1} steps)")
print(f"{'kernel':48} {'launches':>9} {'us/step':>9} {'share':>7}")
for k, (c, us) in sorted(per.items(), key=lambda kv: -kv[1][1]):
    print(f"{k[:48]:48} {c:9.1f} {us:9.2f} {100 * us / total:6.1f}%")
print(f"{'sum':48} {sum(v[0] for v in per.values()):9.1f} {total:9.2f}")
PY
done
