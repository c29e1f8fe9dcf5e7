# Long runs take flat memory (issue 13, item 10): the peak RSS of `pipectl run --json` on a tiny
# five-stage pipeline (source, h2d, kernel, d2h, sink: host and device resources) at 10^5 and 10^6
# batches, compared; before the fixed-size statistics and the bounded checksum record it grew by
# about 88 MB (whole-run span arrays, per-batch checksums and their JSON). Also: the summary still
# counts every batch, `batch_checksums` holds the first 65536 (PL_BATCH_CHECKSUMS_MAX), and a
# bundle longer than that replays, and a change past the record is still caught by the whole
# output's checksum. docs/perf.md has the 10^7-batch figure.
set -u
pipectl=$1 build=$3
work=$build/long_run
rm -rf "$work"
mkdir -p "$work"
cd "$work" || exit 1
fail=0
cat >five.yaml <<'YAML'
pipeline: five
run: {batches: 1000, depth: 4}
buffers:
  x:  {where: host, dtype: f32, shape: [4]}
  xd: {where: device, dtype: f32, shape: [4]}
  yd: {where: device, dtype: f32, shape: [4]}
  y:  {where: host, dtype: f32, shape: [4]}
stages:
  - {name: gen, kind: source, to: x, generator: range}
  - {name: up, kind: h2d, from: x, to: xd}
  - {name: dbl, kind: kernel, op: scale, alpha: 2, reads: [xd], writes: [yd]}
  - {name: down, kind: d2h, from: yd, to: y}
  - {name: save, kind: sink, from: y}
YAML
# Both runs first, the JSON read after: a child's ru_maxrss starts at its parent's RSS at fork
# (Linux keeps the pre-exec high-water mark), so the parent must stay smaller than pipectl.
python3 - "$pipectl" <<'PY' || fail=1
import json, os, subprocess, sys
pipectl = sys.argv[1]
peak = {}
for n in (100000, 1000000):
    with open("run%d.json" % n, "w") as out:
        p = subprocess.Popen([pipectl, "run", "--executor", "host", "--batches", str(n), "--json",
                              "five.yaml"], stdout=out, stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
    if status != 0:
        sys.exit("FAIL: run of %d batches: status %d" % (n, status))
    peak[n] = ru.ru_maxrss  # KiB on Linux
for n in peak:
    j = json.load(open("run%d.json" % n))
    o = j["outputs"][0]
    st = {s["name"]: s for s in j["stages"]}
    ok = (j["batches_done"] == n and o["batches"] == n and len(o["batch_checksums"]) == 65536
          and all(s["count"] == n for s in st.values()) and st["dbl"]["min_s"] <= st["dbl"]["p50_s"]
          <= st["dbl"]["p99_s"] <= st["dbl"]["max_s"])
    if not ok:
        sys.exit("FAIL: summary of %d batches: %s" % (n, json.dumps(j)[:600]))
growth = peak[1000000] - peak[100000]
print("peak RSS: %d KiB at 10^5 batches, %d KiB at 10^6 (growth %d KiB)"
      % (peak[100000], peak[1000000], growth))
# 900,000 more batches: the old arrays took 88 B each (77 MiB); allow 4 MiB of noise.
if growth > 4096:
    sys.exit("FAIL: peak RSS grew by %d KiB over 900,000 batches" % growth)
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
