# The GPU executor's host side without a GPU: pipectl run --executor gpu against the CUDA
# stand-in (tests/stubcuda: libcudart, libcublas, libcublasLt whose calls succeed at once), on
# CUDA Graphs per segment and per stage and on plain launches. Each run must exit as expected
# within its time limit (a crash or a hang fails), and with PL_STUBCUDA_CHECK=1 the stand-in
# checks at exit that every stream, event, graph, graph exec, allocation and cuBLAS handle made
# was destroyed and that no destroyed or unknown handle was used (it exits 3 otherwise). The 2,000-
# stage chain and fan-out of tests/bench/run_scale.sh catch setup that grows faster than the
# stage count. Outputs are NOT checked: no kernel runs, so device buffers hold what copies and
# memsets left. Loops are counted (count:) or end on a condition the stand-in leaves zeroed.
#
#   test_exec_gpu_stub.sh PIPECTL SRC BUILD STUBDIR   (CTest: test_exec_gpu_stub, label e2e)
set -u
pipectl=$1 src=$2 build=$3 stub=$4
if [ ! -e "$stub/libcudart.so.13" ] && ! ls "$stub"/libcudart.so.* >/dev/null 2>&1; then
    echo "SKIP: no CUDA stand-in in $stub (a build without the GPU executor)"
    exit 77
fi
work=$build/exec_gpu_stub
rm -rf "$work"
mkdir -p "$work"
export LD_LIBRARY_PATH=$stub${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} PL_STUBCUDA_CHECK=1
fail=0

# run NAME WANT_RC LIMIT_S ARGS...: one run; its stderr must end with the stand-in's ok line.
run() {
    local name=$1 want=$2 limit=$3
    shift 3
    timeout -s KILL "$limit" "$pipectl" run --quiet --executor gpu --out-dir "$work/out" "$@" \
        >"$work/run.out" 2>"$work/run.err"
    check "$name" "$want" $?
}
check() {
    local name=$1 want=$2 rc=$3
    if [ "$rc" -eq "$want" ] && grep -q '^pl_stubcuda: ok:' "$work/run.err"; then
        echo "ok: $name: exit $rc, $(grep -o '[0-9]* objects made' "$work/run.err"), all destroyed"
    else
        echo "FAIL: $name: exit $rc (want $want; 137: killed at its time limit, 3: the stand-in's check)"
        tail -n 20 "$work/run.err"
        fail=1
    fi
}

# The build must reach the stand-in, not a real libcudart.
if ! ldd "$pipectl" | grep -q "libcudart.*$stub"; then
    echo "FAIL: $pipectl does not load libcudart from $stub:"
    ldd "$pipectl" | grep -i cuda
    exit 1
fi

# The check fires: a stream and an allocation left, a destroyed event recorded.
"$stub/pl_stubcuda_selftest" 2>"$work/run.err"
rc=$?
if [ $rc -eq 3 ] && grep -q '1 stream left' "$work/run.err" &&
    grep -q 'device allocation (cudaMalloc) left' "$work/run.err" &&
    grep -q 'misuse: cudaEventRecord: event .* was destroyed already' "$work/run.err"; then
    echo "ok: the stand-in's exit check reports a leak and a misuse (exit 3)"
else
    echo "FAIL: pl_stubcuda_selftest: exit $rc (want 3 and the leaks named)"
    cat "$work/run.err"
    fail=1
fi

modes=("--graphs segment" "--graphs stage" "--no-graph")
# Generation written out (tests/e2e/generate_yaml.py, the tiny model): batch 1 decodes through
# the matrix-vector linears (launched with programmatic dependent launch), batch 4 through
# cuBLASLt, the cached attention's split counts zeroed at open.
PY=$(command -v python3 || echo /usr/bin/python3)
for b in 1 4; do
    "$PY" "$src/tests/e2e/generate_yaml.py" --weights random --B $b --T 8 --steps 3 --batches 2 \
        --max-pos 128 >"$work/generate_b$b.yaml" || { echo "FAIL: generate_yaml.py"; fail=1; }
done
for m in "${modes[@]}"; do
    run "generate B 1 $m" 0 30 $m "$work/generate_b1.yaml"
    run "generate B 4 $m" 0 30 $m "$work/generate_b4.yaml"
    run "quickstart $m" 0 20 $m "$src/pipelines/quickstart.yaml"
    run "overlap $m" 0 20 $m --batches 8 "$src/pipelines/overlap.yaml"
    run "loop (device) $m" 0 20 $m "$src/pipelines/loop.yaml"
    run "loop (host) $m" 0 20 $m --set run.loop=host "$src/pipelines/loop.yaml"
    run "loop_count $m" 0 20 $m "$src/tests/e2e/data/loop_count.yaml"
done
run "quickstart --fault-marks" 0 20 --fault-marks "$src/pipelines/quickstart.yaml"
run "quickstart --timing all --depth 1" 0 20 --timing all --depth 1 "$src/pipelines/quickstart.yaml"

# run_scale.sh's shapes at 2,000 stages: the whole run (load, plan, setup, one batch, teardown).
n=2000
. "$src/tests/bench/scale_shapes.sh" # chain N, fanout N
chain $n >"$work/chain.yaml"
fanout $n >"$work/fanout.yaml"
for shape in chain fanout; do
    for m in "--graphs segment" "--no-graph"; do
        t0=$(date +%s%N)
        run "$shape of $n stages $m" 0 30 $m "$work/$shape.yaml"
        echo "   $(((($(date +%s%N) - t0) / 1000000))) ms"
    done
done

# SIGINT mid-run: the batches launched finish, the run says it was interrupted (exit 130), and
# every CUDA object is still destroyed. A million small batches do not end before the signal,
# which is sent once the sink has written a batch (so the run's handler is in place).
cat >"$work/small.yaml" <<'YAML'
pipeline: small
run: {batches: 1000000, depth: 3}
buffers:
  x: {dtype: f32, shape: [16]}
  x_dev: {where: device, dtype: f32, shape: [16]}
  y_dev: {where: device, dtype: f32, shape: [16]}
  y: {dtype: f32, shape: [16]}
stages:
  - {name: gen, kind: source, to: x, generator: range}
  - {name: up, kind: h2d, from: x, to: x_dev}
  - {name: double, kind: kernel, op: scale, alpha: 2, reads: [x_dev], writes: [y_dev]}
  - {name: down, kind: d2h, from: y_dev, to: y}
  - {name: save, kind: sink, from: y, to: small.npy}
YAML
timeout -s KILL 20 "$pipectl" run --quiet --executor gpu --out-dir "$work/out" "$work/small.yaml" \
    >"$work/run.out" 2>"$work/run.err" &
pid=$!
for _ in $(seq 1 300); do
    [ "$(stat -c %s "$work/out/small.npy.partial" 2>/dev/null || echo 0)" -gt 256 ] && break
    sleep 0.05
done
kill -INT $pid
wait $pid
check "SIGINT mid-run" 130 $?

[ $fail -eq 0 ] && echo "all runs ok"
exit $fail
