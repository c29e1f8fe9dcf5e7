#!/bin/bash
# test_gpu_sized: work sized for a GPU on a machine without one. `pipectl run` (--executor auto)
# refuses GPT-2 124M (pipelines/gpt2_greedy.yaml) and a large GEMM with exit 2, the host
# executor's estimate (the stage, its GFLOP a batch, this host's measured rate) and the
# --executor host hint, before anything is written (--json: the error object, exit_code 2).
# With --executor host the run starts, says its estimate, shows the progress line with
# "ETA ~... (estimate)" even on a pipe, and stops on Ctrl-C (exit 130). A cheap pipeline still
# runs under auto. Where a GPU is present, auto picks it and there is nothing to refuse: skipped.
set -u
pipectl=$1 src=$2 build=$3
work=$build/gpu_sized
rm -rf "$work"
mkdir -p "$work"
fail=0
if "$pipectl" doctor >/dev/null 2>&1; then
    echo "skip: a GPU is present (auto runs GPU-sized work there)"
    exit 77
fi

cp "$src/pipelines/gpt2_greedy.yaml" "$work/"
"$pipectl" run "$work/gpt2_greedy.yaml" >"$work/auto.out" 2>"$work/auto.err"
rc=$?
[ $rc = 2 ] || { echo "FAIL: gpt2_greedy under auto: exit $rc, expected 2"; cat "$work/auto.err"; fail=1; }
grep -q "^error: pipeline 'gpt2_greedy' is sized for a GPU, and none is available here: the host executor would take about [0-9.]* \(minutes\|hours\) (stage 'forward': 735 GFLOP a batch x 32 batches at [0-9.]* GFLOP/s, this host's rate for the f32 C reference); run it on a machine with a GPU, or give --executor host to run it here anyway$" "$work/auto.err" ||
    { echo "FAIL: gpt2_greedy: message"; cat "$work/auto.err"; fail=1; }
[ ! -e "$work/out" ] || { echo "FAIL: gpt2_greedy: the refused run made out/"; fail=1; }

# A loop's body counts once per iteration: generate.yaml's 255 decode steps are most of its cost
# (4.26 TFLOP a batch against the prefill's 1.42).
cp "$src/pipelines/generate.yaml" "$work/"
"$pipectl" run "$work/generate.yaml" >/dev/null 2>"$work/gen.err"
rc=$?
[ $rc = 2 ] && grep -q "(stage 'decode': 4.26 TFLOP a batch x 8 batches at " "$work/gen.err" ||
    { echo "FAIL: generate.yaml under auto: exit $rc: $(cat "$work/gen.err")"; fail=1; }

"$pipectl" run --json "$work/gpt2_greedy.yaml" >"$work/auto.json" 2>/dev/null
rc=$?
[ $rc = 2 ] || { echo "FAIL: --json: exit $rc"; fail=1; }
/usr/bin/python3 - "$work/auto.json" <<'PY' || fail=1
import json, sys
o = json.load(open(sys.argv[1]))
if o["command"] != "run" or o["status"] != "EINPUT" or o["exit_code"] != 2 or "--executor host" not in o["error"]:
    sys.exit("FAIL: --json: %r" % o)
PY

cat >"$work/gemm.yaml" <<'YAML'
pipeline: big_gemm
run: {batches: 200}
buffers:
  a: {where: device, dtype: f32, shape: [8192, 8192], persistent: true}
  b: {where: device, dtype: f32, shape: [8192, 8192], persistent: true}
  c: {where: device, dtype: f32, shape: [8192, 8192]}
stages:
  - {name: mm, kind: kernel, op: gemm, reads: [a, b], writes: [c]}
YAML
"$pipectl" run "$work/gemm.yaml" >/dev/null 2>"$work/gemm.err"
rc=$?
[ $rc = 2 ] || { echo "FAIL: gemm under auto: exit $rc, expected 2"; cat "$work/gemm.err"; fail=1; }
grep -q "(stage 'mm': 1.1 TFLOP a batch x 200 batches at [0-9.]* GFLOP/s, this host's rate for BLAS on its cores)" "$work/gemm.err" ||
    { echo "FAIL: gemm: message"; cat "$work/gemm.err"; fail=1; }

# --executor host insists: the estimate, then the progress line on a pipe, then Ctrl-C.
"$pipectl" run --executor host "$work/gpt2_greedy.yaml" >"$work/host.out" 2>"$work/host.err" &
pid=$!
for _ in $(seq 1 600); do
    grep -q "(estimate)" "$work/host.err" && break
    sleep 0.05
done
kill -INT $pid
rc=running
for _ in $(seq 1 200); do
    if ! kill -0 $pid 2>/dev/null; then wait $pid; rc=$?; break; fi
    sleep 0.05
done
if [ "$rc" = running ]; then echo "FAIL: --executor host: still running 10 s after Ctrl-C"; kill -KILL $pid; fail=1; fi
[ "$rc" = 130 ] || [ "$rc" = running ] || { echo "FAIL: --executor host: exit $rc, expected 130"; cat "$work/host.err"; fail=1; }
grep -q "^executor: host, for work sized for a GPU: about [0-9.]* \(minutes\|hours\) (stage 'forward': 735 GFLOP a batch x 32 batches" "$work/host.err" ||
    { echo "FAIL: --executor host: no estimate line"; cat "$work/host.err"; fail=1; }
grep -q "0/32 batches  ETA ~[0-9:]* (estimate)" "$work/host.err" ||
    { echo "FAIL: --executor host: no progress line with the estimate"; cat "$work/host.err"; fail=1; }

# Cheap work runs under auto as before.
cp "$src/pipelines/quickstart.yaml" "$work/"
"$pipectl" run --quiet "$work/quickstart.yaml" 2>"$work/quick.err" ||
    { echo "FAIL: quickstart under auto: $(cat "$work/quick.err")"; fail=1; }
[ $fail = 0 ] && echo "GPU-sized work refused under auto (gpt2_greedy, an 8192^3 gemm), run with --executor host"
exit $fail
