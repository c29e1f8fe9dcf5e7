#!/usr/bin/env bash
# run_long_run.sh: long runs take flat memory, on the GPU executor (it needs a GPU; the host
# executor's check is tests/e2e/test_long_run.sh). The fixed-size run statistics and the span log on
# the GPU path (runtime/exec/gpu/pl_gpu_complete.c records device spans, {0, 0} for unsampled
# batches):
# 1. peak RSS of `pipectl run --executor gpu` at 10^5 and 10^6 batches of the five-stage pipeline
#    of tests/e2e/test_long_run.sh: must not grow by more than 4 MiB (a whole-run span array
#    grows about 117 B a batch);
# 2. the summary: every stage counted on every batch with --timing all, device stages on the
#    sampled ones (1 in 16) by default, p50 <= p99, min <= p50;
# 3. --trace on a 100,000-batch run: the trace holds the first 52428 batches (2^18 spans over 5
#    stages) and its title and the CLI say so; a 2000-batch trace passes tests/e2e/check_trace.py.
# usage (repository root, after building): bash tests/gpu/run_long_run.sh [PIPECTL]
set -u
pipectl=${1:-build-dev/pipectl}
src=$(pwd)
work=${OUT:-out/device}/long_run
rm -rf "$work"
mkdir -p "$work"
fail=0
cp "$src/tests/e2e/data/long_run.yaml" "$work/five.yaml"
cd "$work" || exit 1
python3 "$src/tests/bench/rss_peak.py" --executor gpu "$pipectl" five.yaml 100000 1000000 | tee rss.txt
python3 - <<'PY' || fail=1
import re, sys
kib = [int(m) for m in re.findall(r"peak RSS (\d+) KiB", open("rss.txt").read())]
if len(kib) != 2 or any("exit 0" not in l for l in open("rss.txt")):
    sys.exit("FAIL: the runs did not both succeed")
print("growth %d KiB over 900,000 batches" % (kib[1] - kib[0]))
if kib[1] - kib[0] > 4096:
    sys.exit("FAIL: peak RSS grew by more than 4 MiB")
PY
for timing in all sample; do
    "$pipectl" run --executor gpu --timing "$timing" --batches 100000 --json five.yaml >"s_$timing.json" ||
        { echo "FAIL: run --timing $timing"; fail=1; }
    python3 - "$timing" "s_$timing.json" <<'PY' || fail=1
import json, sys
timing, j = sys.argv[1], json.load(open(sys.argv[2]))
for s in j["stages"]:
    dev = s["engine"] != "host"
    want = 100000 if (timing == "all" or not dev) else 100000 // 16
    if s["count"] != want or not (s["min_s"] <= s["p50_s"] <= s["p99_s"] <= s["max_s"]):
        sys.exit("FAIL: --timing %s: stage %s: %s" % (timing, s["name"], s))
print("--timing %s: counts and quantiles ok; bound %s, achieved %s" % (timing, j["bound_engine"], j["achieved"]))
PY
done
"$pipectl" run --executor gpu --batches 100000 --trace long.json five.yaml >trace.out 2>&1 ||
    { echo "FAIL: run --trace"; cat trace.out; fail=1; }
grep -q "it shows the first 52428 of 100000 batches" trace.out || { echo "FAIL: no cut note"; cat trace.out; fail=1; }
head -c 300 long.json | grep -q "first 52428 of 100000 batches" || { echo "FAIL: trace title"; fail=1; }
"$pipectl" run --executor gpu --batches 2000 --trace trace.json five.yaml >/dev/null 2>&1 ||
    { echo "FAIL: run --trace (2000 batches)"; fail=1; }
python3 "$src/tests/e2e/check_trace.py" trace.json || fail=1
[ "$fail" -eq 0 ] && echo "long run on the GPU: ok"
exit "$fail"
