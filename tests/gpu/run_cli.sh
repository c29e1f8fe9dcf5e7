#!/usr/bin/env bash
# run_cli.sh: the CLI's GPU checks in one run on the GPU machine: build with the default CUDA
# architectures (timed), `pipectl doctor` names the kernel image the device runs, the reports of
# the overlap example and of three concurrent 20 ms kernels with --timing all stay at or under
# 100% of the bound (union per engine), and their traces pass check_trace.py; depth: auto on the
# GPU executor against a sweep of fixed depths, with a budget, --no-graph and --timing off. Logs
# under $OUT, a table last.   source .gpu/setup.sh && bash tests/gpu/run_cli.sh
set -u
OUT=${OUT:-out/device}
BUILD=${BUILD:-build-cli}
JOBS=${JOBS:-16}
mkdir -p "$OUT"
declare -a rows=()
row() { rows+=("$(printf '%-44s %s' "$1" "$2")"); }
t0=$SECONDS
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$OUT/cli_build.log" 2>&1 &&
    cmake --build "$BUILD" -j"$JOBS" >>"$OUT/cli_build.log" 2>&1
row "build (default archs, -j$JOBS)" "rc=$? $((SECONDS - t0)) s; $(grep -o 'CUDA architectures .*' "$OUT/cli_build.log" | head -1)"
P="$(pwd)/$BUILD/pipectl" # absolute: test_depth_auto.sh runs in its own folder
timeout 120 "$P" doctor >"$OUT/cli_doctor.log" 2>&1
row "doctor" "rc=$? $(grep -m1 'kernel image' "$OUT/cli_doctor.log" | sed 's/  */ /g')"
ach() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("achieved=%s bound_engine=%s bound_s=%s per_batch_s=%.6f" % (d["achieved"], d["bound_engine"], d["bound_s"], d["per_batch_s"]))' "$1" 2>&1; }
okach() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["achieved"] is not None and d["achieved"] <= 1.02 else 1)' "$1"; }
for p in pipelines/overlap.yaml tests/gpu/data/concurrent_busy.yaml; do
    n=$(basename "$p" .yaml)
    for t in all sample; do
        timeout 120 "$P" run --executor gpu --timing $t --json --trace "$OUT/cli_$n.$t.trace.json" "$p" >"$OUT/cli_$n.$t.json" 2>"$OUT/cli_$n.$t.err"
        rc=$?
        v=$(ach "$OUT/cli_$n.$t.json")
        if [ $t = all ]; then okach "$OUT/cli_$n.$t.json" && v="$v (<= 102%: ok)" || v="$v (OVER 102%)"; fi
        row "$n --timing $t" "rc=$rc $v"
        timeout 60 python3 tests/e2e/check_trace.py "$OUT/cli_$n.$t.trace.json" 1 3 >"$OUT/cli_$n.$t.trace.log" 2>&1
        row "  trace valid" "rc=$? $(tail -1 "$OUT/cli_$n.$t.trace.log" | cut -c1-120)"
        timeout 120 "$P" run --executor gpu --timing $t "$p" >"$OUT/cli_$n.$t.txt" 2>&1
    done
done
# depth: auto on the GPU executor: the choice and why, against a sweep of fixed depths
# (the smallest depth within 3% of the best per-batch time is what auto should pick), outputs
# byte-identical to depth 4, a budget that caps it, --no-graph and --timing off.
da() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); a=d["depth_auto"] or {}; print("depth=%s per_batch_s=%.6f achieved=%s needed=%s cap=%s(%s) hold=%s bound=%s" % (d["depth"], d["per_batch_s"], d["achieved"], a.get("needed"), a.get("max_depth"), a.get("max_depth_by"), a.get("slot_hold_s"), a.get("bound_s")))' "$1" 2>&1; }
mkdir -p "$OUT/da" && rm -rf "$OUT/da"/* && cp -r pipelines "$OUT/da/p"
for d in 1 2 3 4 5 6; do
    timeout 120 "$P" run --executor gpu --depth $d --json "$OUT/da/p/overlap.yaml" >"$OUT/da_overlap.d$d.json" 2>"$OUT/da_overlap.d$d.err"
    row "overlap --depth $d" "rc=$? $(da "$OUT/da_overlap.d$d.json")"
done
cp "$OUT/da/p/out/overlap_checksums.npy" "$OUT/da/d6.npy"
timeout 120 "$P" run --executor gpu --depth 4 -q "$OUT/da/p/overlap.yaml" >/dev/null 2>&1
cp "$OUT/da/p/out/overlap_checksums.npy" "$OUT/da/d4.npy"
for v in "" "--no-graph" "--timing off" "--timing all"; do
    n=$(echo "auto $v" | tr -d ' -')
    timeout 120 "$P" run --executor gpu --depth auto $v --json "$OUT/da/p/overlap.yaml" >"$OUT/da_overlap.$n.json" 2>"$OUT/da_overlap.$n.err"
    rc=$?
    same=$(cmp -s "$OUT/da/p/out/overlap_checksums.npy" "$OUT/da/d4.npy" && echo "output = depth 4's" || echo "OUTPUT DIFFERS from depth 4's")
    row "overlap --depth auto $v" "rc=$rc $(da "$OUT/da_overlap.$n.json"); $same"
    row "  said" "$(grep -m1 '^depth auto' "$OUT/da_overlap.$n.err")"
done
sed 's/^run: {batches: 64, depth: 4, seed: 1}/run: {batches: 64, depth: auto, seed: 1, memory_budget: {device: 66MiB, host_pinned: 1GiB}}/' \
    "$OUT/da/p/overlap.yaml" >"$OUT/da/p/overlap_budget.yaml"
timeout 120 "$P" run --executor gpu --json "$OUT/da/p/overlap_budget.yaml" >"$OUT/da_budget.json" 2>"$OUT/da_budget.err"
row "overlap, memory_budget device 66MiB (cap 2)" "rc=$? $(da "$OUT/da_budget.json")"
row "  said" "$(grep -m1 '^depth auto' "$OUT/da_budget.err")"
timeout 300 bash tests/e2e/test_depth_auto.sh "$P" "$(pwd)" >"$OUT/da_e2e_host.log" 2>&1
row "test_depth_auto.sh (host executor, CUDA build)" "rc=$? $(tail -1 "$OUT/da_e2e_host.log" | cut -c1-100)"
# Start-up of the CUDA build, for comparison with run_faststart.sh: `pipectl version`, best of 10.
best=$(python3 -c '
import subprocess,time,sys
ts=[]
for i in range(10):
    t=time.perf_counter(); subprocess.run([sys.argv[1],"version"],stdout=subprocess.DEVNULL); ts.append(time.perf_counter()-t)
print("%.1f ms" % (min(ts)*1e3))' "$P")
rss=$( { /usr/bin/time -f '%M' "$P" version >/dev/null; } 2>&1 | tail -1)
row "pipectl version (CUDA build)" "best $best, max RSS ${rss} KiB"
printf '%s\n' "${rows[@]}" | tee "$OUT/cli_table.txt"
echo "summaries: $OUT/cli_*.txt; JSON: $OUT/cli_*.json; traces: $OUT/cli_*.trace.json"
