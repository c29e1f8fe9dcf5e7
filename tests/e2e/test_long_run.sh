# Long runs take flat memory: the peak RSS of `pipectl run --json` on a tiny five-stage pipeline
# (source, h2d, kernel, d2h, sink: host and device resources) at 10^5 and 10^6 batches (2x10^4 and
# 2x10^5 in sanitizer builds), compared (whole-run span arrays, per-batch checksums and their JSON
# would grow it by about 88 MB; the fixed-size statistics and the bounded checksum record do not).
# Also: the summary counts every batch, `batch_checksums` holds the first 65536
# (PL_BATCH_CHECKSUMS_MAX), and a bundle longer than that replays, and a change past the record is
# caught by the whole output's checksum. docs/perf.md has the 10^7-batch figure.
set -u
pipectl=$1 src=$2 build=$3
work=$build/long_run
rm -rf "$work"
mkdir -p "$work"
cd "$work" || exit 1
fail=0
# Under ASan, freed memory sits in its quarantine (up to 256 MB) and counts in the RSS: per-batch
# temporaries would look like growth. Without the quarantine the figure is the program's own.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0"
cp "$src/tests/e2e/data/long_run.yaml" five.yaml
# The text summary at both counts (the --json one lists up to 65536 checksums: a fixed cost that
# a run under 65536 batches does not reach yet), then --json at the smaller count, read after the
# runs: a child's ru_maxrss starts at its parent's RSS at fork (Linux keeps the pre-exec high-water
# mark), so the parent must stay smaller than pipectl.
python3 - "$pipectl" "${PL_LONG_RUN_SMALL:-100000}" <<'PY' || fail=1
import json, os, subprocess, sys
pipectl, small = sys.argv[1], int(sys.argv[2])  # sanitizer builds: 20000 (tests/e2e/CMakeLists.txt)
big = 10 * small
def run(n, out, json_out):
    args = [pipectl, "run", "--executor", "host", "--batches", str(n)] + (["--json"] if json_out else [])
    with open(out, "w") as f:
        p = subprocess.Popen(args + ["five.yaml"], stdout=f, stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
    if status != 0:
        sys.exit("FAIL: run of %d batches: status %d" % (n, status))
    return ru.ru_maxrss  # KiB on Linux
peak = {n: run(n, "run%d.txt" % n, False) for n in (small, big)}
run(small, "run.json", True)
for n in peak:
    t = open("run%d.txt" % n).read()
    if "%d of %d batches" % (n, n) not in t or "save: %d batches checksummed" % n not in t:
        sys.exit("FAIL: summary of %d batches:\n%s" % (n, t))
j = json.load(open("run.json"))
o = j["outputs"][0]
st = {s["name"]: s for s in j["stages"]}
ok = (j["batches_done"] == small and o["batches"] == small
      and len(o["batch_checksums"]) == min(small, 65536)
      and all(s["count"] == small for s in st.values())
      and st["dbl"]["min_s"] <= st["dbl"]["p50_s"] <= st["dbl"]["p99_s"] <= st["dbl"]["max_s"])
if not ok:
    sys.exit("FAIL: --json summary of %d batches: %s" % (small, json.dumps(j)[:600]))
growth = peak[big] - peak[small]
print("peak RSS: %d KiB at %d batches, %d KiB at %d (growth %d KiB)"
      % (peak[small], small, peak[big], big, growth))
# 9 x small more batches: whole-run span arrays would take 117 B each (100 MiB for 900,000); allow
# 4 MiB of noise.
if growth > 4096:
    sys.exit("FAIL: peak RSS grew by %d KiB over %d batches" % (growth, big - small))
PY

# A bundle past the per-batch record: it replays; a change in an unrecorded batch (only the whole
# checksum sees it) is reported at the first unrecorded batch.
if ! "$pipectl" capture -o b --reps 1 --batches 70000 --executor host five.yaml >cap.out 2>&1; then
    echo "FAIL: capture"; cat cap.out; fail=1
fi
if ! "$pipectl" replay b >rep.out 2>&1 || ! grep -q "70000 batches: every checksum matches" rep.out; then
    echo "FAIL: replay of a 70000-batch bundle"; cat rep.out; fail=1
fi
python3 - <<'PY' || fail=1
import json
m = json.load(open("b/manifest.json"))
o = m["outputs"][0]
assert o["batches"] == 70000 and len(o["batch_checksums"]) == 65536, o["batches"]
o["checksum"] = "0x0000000000000001"
json.dump(m, open("b/manifest.json", "w"), indent=2)
PY
"$pipectl" replay b >rep2.out 2>&1
rc=$?
if [ "$rc" -ne 1 ] || ! grep -q "DIFFERS in 1 batch (first: 65536)" rep2.out; then
    echo "FAIL: replay after a change past the record (exit $rc)"; cat rep2.out; fail=1
fi
[ "$fail" -eq 0 ] && echo "long run: ok"
exit "$fail"
