# depth: auto on the host executor: the depth chosen from the calibration batches under several
# stage timings and memory budgets (sleeping and spinning stages make latency / period
# predictable; the choice is asserted, not a speed), the line on stderr, the JSON fields, the
# outputs byte-identical to a fixed depth (nothing lost or written twice across the ring's
# growth), failures before and after the growth, and the budget errors.
set -u
pipectl=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fail=0
say_fail() { echo "FAIL: $*"; fail=1; }
py() { python3 -c "import json,sys; v=json.load(open(sys.argv[1])); $1" "$2"; }

# One engine sets the pace (a 20 ms kernel): one batch's latency is about one period -> 1 + 1.
cat >busy.yaml <<'YAML'
pipeline: busy
run: {batches: 12, depth: auto}
buffers:
  xh: {where: host, dtype: f32, shape: [1024]}
  xd: {where: device, dtype: f32, shape: [1024]}
  yh: {where: host, dtype: f32, shape: [1024]}
stages:
  - {name: gen, kind: source, to: xh, generator: random}
  - {name: up, kind: h2d, from: xh, to: xd}
  - {name: spin, kind: kernel, op: busy, duration_us: 20000, reads: [xd]}
  - {name: down, kind: d2h, from: xd, to: yh, after: [spin]}
  - {name: save, kind: sink, from: yh, to: out.npy}
YAML
"$pipectl" run -e host --json busy.yaml >busy.json 2>busy.err || say_fail "busy: exit $?: $(cat busy.err)"
grep -q "^depth auto: 2 (bound engine compute [0-9.]* ms/batch, one batch's latency [0-9.]* ms, a slot's buffers held [0-9.]* ms -> 2; at most 12: the run has 12 batches)$" busy.err ||
    say_fail "busy: the depth line: $(cat busy.err)"
py 'a = v["depth_auto"]; assert v["depth"] == 2 and a["chosen"] and a["depth"] == 2 and a["needed"] == 2 and a["calibration_batches"] == 4 and a["calibration_depth"] == 1 and a["measured_batches"] == 3 and a["bound_engine"] == "compute" and a["max_depth"] == 12 and a["max_depth_by"] == "the batches" and not a["capped"] and a["budget_device_bytes"] is None and a["device_per_slot_bytes"] == 4096 and a["host_per_slot_bytes"] == 8192 and a["reason"].startswith("depth auto: 2 (") and v["batches_done"] == 12 and len(v["outputs"][0]["batch_checksums"]) == 12, v' busy.json ||
    say_fail "busy: JSON: $(cat busy.json)"
python3 "$src/tests/e2e/check_json.py" "$src/docs/json.md" summary busy.json ok 0 || say_fail "busy: JSON against docs/json.md"
mv out.npy auto.npy
"$pipectl" run -e host -q --depth 1 busy.yaml >/dev/null 2>&1 || say_fail "busy --depth 1: exit $?"
cmp -s auto.npy out.npy || say_fail "busy: depth auto's output differs from depth 1's"

# The budget caps the choice: 4 KiB of device memory per slot, a budget of one slot.
sed 's/depth: auto}/depth: auto, memory_budget: {device: 4KiB}}/' busy.yaml >capped.yaml
"$pipectl" run -e host capped.yaml >/dev/null 2>capped.err || say_fail "capped: exit $?"
grep -q "^depth auto: 1 (bound engine compute .* -> 2; budget allows 1: device 4.0 KiB/slot of 4.0 KiB)$" capped.err ||
    say_fail "capped: $(cat capped.err)"
cmp -s auto.npy out.npy || say_fail "capped: output differs"

# Two engines of about 20 ms on one batch's path (a spinning Lua stage on the host, then the
# kernel): the latency is about two periods, but the Lua stage's buffer is free once it is
# uploaded and the kernel's once it is downloaded, so no buffer is held much longer than one
# period: 1 + 1 (measured: depth 2 reaches the bound, depth 1 does not). The latency would say 3.
cat >two.yaml <<'YAML'
pipeline: two
run: {batches: 10, depth: auto, memory_budget: {device: 1MiB, host_pinned: 1MiB}}
buffers:
  xh: {where: host, dtype: f32, shape: [1024]}
  xd: {where: device, dtype: f32, shape: [1024]}
  yh: {where: host, dtype: f32, shape: [1024]}
stages:
  - {name: gen, kind: source, to: xh, generator: random}
  - name: cpu
    kind: lua
    reads: [xh]
    code: |
      function run(b)
        local t = os.clock()
        while os.clock() - t < 0.02 do end
      end
  - {name: up, kind: h2d, from: xh, to: xd, after: [cpu]}
  - {name: spin, kind: kernel, op: busy, duration_us: 20000, reads: [xd]}
  - {name: down, kind: d2h, from: xd, to: yh, after: [spin]}
  - {name: save, kind: sink, from: yh, to: two.npy}
YAML
"$pipectl" run -e host --json two.yaml >two.json 2>two.err || say_fail "two: exit $?: $(cat two.err)"
grep -q "^depth auto: 2 (bound engine .*, one batch's latency [0-9.]* ms, a slot's buffers held .* -> 2; at most 10: the run has 10 batches)$" two.err ||
    say_fail "two: $(cat two.err)"
# The latency includes the cpu stage, which holds no slot buffer. By how much varies: the loop
# counts os.clock(), the process CPU time, which other threads advance too (on 16 cores the
# 20 ms loop took 1.5 ms).
py 'a = v["depth_auto"]; cpu = [s["mean_s"] for s in v["stages"] if s["name"] == "cpu"][0]; assert v["depth"] == 2 and a["latency_s"] > a["slot_hold_s"] and cpu > 0 and a["max_depth_by"] == "the batches" and a["budget_device_bytes"] == 1048576 and v["batches_done"] == 10, v' two.json ||
    say_fail "two: JSON: $(cat two.json)"

# A run no longer than the calibration: all of it runs at depth 1.
"$pipectl" run -e host --json -b 3 busy.yaml >short.json 2>short.err || say_fail "short: exit $?"
grep -q "^depth auto: 1 (the run's 3 batches were all calibration batches)$" short.err || say_fail "short: $(cat short.err)"
py 'a = v["depth_auto"]; assert v["depth"] == 1 and not a["chosen"] and a["needed"] is None and v["batches_done"] == 3, v' short.json ||
    say_fail "short: JSON: $(cat short.json)"

# --depth N replaces auto, --depth auto a fixed depth; --quiet says nothing.
"$pipectl" run -e host --json --depth 3 busy.yaml >fixed.json 2>fixed.err || say_fail "fixed: exit $?"
py 'assert v["depth"] == 3 and v["depth_auto"] is None, v' fixed.json || say_fail "--depth 3: $(cat fixed.json)"
grep -q "depth auto" fixed.err && say_fail "--depth 3 still said depth auto"
sed 's/depth: auto}/depth: 5}/' busy.yaml >five.yaml
"$pipectl" run -e host -q --depth auto five.yaml >quiet.out 2>quiet.err || say_fail "--depth auto: exit $?"
grep -q "depth auto" quiet.err && say_fail "--quiet printed the depth line: $(cat quiet.err)"
"$pipectl" run -e host --json --depth auto five.yaml 2>/dev/null >five.json
py 'assert v["depth"] == 2 and v["depth_auto"]["chosen"], v' five.json || say_fail "--depth auto: $(cat five.json)"
"$pipectl" plan --depth auto five.yaml >plan.txt || say_fail "plan --depth auto: exit $?"
grep -q "^depth auto: the first 4 batches at depth 1, then the smallest depth that reaches the bound, at most 12 (the batches); 12 batches$" plan.txt ||
    say_fail "plan --depth auto: $(head -3 plan.txt)"

# A failure in the calibration, and one after the ring grew: the batches before it are kept.
for fb in 2 7; do
  rm -f out.npy
  "$pipectl" run -e host --json --fail-at spin:$fb busy.yaml >f$fb.json 2>/dev/null
  rc=$?
  [ $rc = 1 ] || say_fail "fail-at spin:$fb: exit $rc"
  py "assert v['batches_done'] == $fb and v['outputs'][0]['batches'] == $fb, v" f$fb.json ||
      say_fail "fail-at spin:$fb: $(cat f$fb.json)"
  python3 - "$fb" <<'PY' || say_fail "fail-at spin:$fb: out.npy is not the first $fb batches of depth 1's"
import sys
n = int(sys.argv[1])
a, b = open("auto.npy", "rb").read(), open("out.npy", "rb").read()
hdr = a.index(b"\n") + 1
row = (len(a) - hdr) // 12
assert len(b) == hdr + n * row or (b[hdr:] == a[hdr:hdr + n * row]), (len(a), len(b))
assert b[-n * row:] == a[hdr:hdr + n * row]
PY
done

# Budgets too small: one slot at check time, a fixed depth when the plan is compiled (exit 2).
sed 's/depth: auto}/depth: auto, memory_budget: {device: 4000, host_pinned: 1GiB}}/' busy.yaml >small.yaml
"$pipectl" check small.yaml 2>small.err
[ $? = 2 ] || say_fail "small budget: check did not exit 2"
grep -qx "small.yaml:2:57: error: run: memory_budget: 'device' is 3.9 KiB (4000 bytes), but one slot needs 4.0 KiB (4096 bytes) of device memory: 4.0 KiB of per-batch buffers + 0 B persistent; raise memory_budget.device to at least 4.0 KiB, or make the device buffers smaller" small.err ||
    say_fail "small budget: $(cat small.err)"
"$pipectl" run -e host --depth 2 capped.yaml 2>over.err >/dev/null
[ $? = 2 ] || say_fail "--depth 2 over the budget: not exit 2"
grep -qx "capped.yaml:2:57: error: run: memory_budget: 'device' is 4.0 KiB (4096 bytes), but depth 2 needs 8.0 KiB of device memory (2 slots x 4.0 KiB + 0 B persistent); use depth 1 (what the budget allows) or depth: auto, or raise memory_budget.device to at least 8.0 KiB" over.err ||
    say_fail "--depth 2 over the budget: $(cat over.err)"
# capture --depth auto: the bundle keeps depth: auto (replay chooses again), its summary says
# what the run chose, and the replay passes.
sed 's/depth: auto}/depth: 3}/' busy.yaml >fixed.yaml
"$pipectl" capture -e host --depth auto --reps 1 -o bundle fixed.yaml >cap.out 2>&1 ||
    say_fail "capture --depth auto: $(cat cap.out)"
grep -q "depth: auto" bundle/pipeline.yaml || say_fail "capture --depth auto: the bundle's pipeline does not say depth: auto"
py "assert v['depth_auto']['chosen'] and v['depth_auto']['depth'] >= 1, v['depth_auto']" bundle/summary.json ||
    say_fail "capture --depth auto: no chosen depth in the summary"
"$pipectl" replay bundle >replay.out 2>&1 || say_fail "replay of a depth: auto bundle: $(cat replay.out)"
[ $fail = 0 ] && echo "depth auto: choices, outputs, failures and budget errors as expected"
exit $fail
