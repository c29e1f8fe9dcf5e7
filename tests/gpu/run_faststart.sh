#!/usr/bin/env bash
# run_faststart.sh: fast start-up in one run on the GPU machine (cuBLAS, cuBLASLt and NVRTC loaded
# with dlopen on first use, runtime/device/pl_cudalibs.c): build (Release), the GPU tests (ctest -L
# gpu: test_ops_gpu runs cuBLAS GEMMs, test_gpt2_gpu cuBLASLt, test_ukern_gpu NVRTC), what the
# binary links, and the start-up cost of `pipectl version` and `check` (max RSS, best of 10
# wall times), then a GPU run of the user-kernel and GPT-2 pipelines. Logs under $OUT; table last.
#   source .gpu/setup.sh && bash tests/gpu/run_faststart.sh
set -u
OUT=${OUT:-out/device}
BUILD=${BUILD:-build-dev}
JOBS=${JOBS:-16}
mkdir -p "$OUT"
declare -a rows=()
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" # step, machine_log
STEP_WIDTH=34
DEADLINE= # every step runs
machine_log "$OUT/build.log"
step configure 120 build.log cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release &&
    step build 300 build.log cmake --build "$BUILD" -j"$JOBS"
built=$?
P="$BUILD/pipectl"
# Best wall time (ms) of 10 runs and max RSS (KiB) of one, for the command after the name.
startup() {
    local name=$1
    shift
    local rss ms
    rss=$(/usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1)
    ms=$(python3 -c 'import subprocess, sys, time
best = 1e9
for _ in range(10):
    t = time.perf_counter(); subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); best = min(best, time.perf_counter() - t)
print("%.1f" % (best * 1e3))' "$@")
    rows+=("$(printf '   %-31s max RSS %s KiB, best %s ms' "$name" "$rss" "$ms")")
    echo "$name: max RSS $rss KiB, best $ms ms" >>"$OUT/startup.log"
}
if [ $built -eq 0 ]; then
    { readelf -d "$P" | grep NEEDED; ldd "$P"; } >"$OUT/ldd.log" 2>&1
    if grep -Eq "libcublas|libnvrtc" "$OUT/ldd.log"; then rows+=("   ldd: cuBLAS/NVRTC still linked (see ldd.log)"); else rows+=("   ldd: only libcudart of the toolkit linked"); fi
    startup "pipectl version" "$P" version
    startup "pipectl check quickstart" "$P" check pipelines/quickstart.yaml
    startup "pipectl plan quickstart" "$P" plan pipelines/quickstart.yaml
    startup "pipectl check user_kernel" "$P" check pipelines/user_kernel.yaml
    step "ctest -L gpu" 400 ctest.log ctest --test-dir "$BUILD" -L gpu --output-on-failure -j4
    step "ctest test_startup" 60 ctest.log ctest --test-dir "$BUILD" -R '^test_startup$' --output-on-failure
    step "run user_kernel (gpu)" 60 run.log "$P" run --quiet --executor gpu pipelines/user_kernel.yaml
    step "run gpt2 (gpu)" 120 run.log "$P" run --quiet --executor gpu pipelines/gpt2.yaml
    step "doctor" 60 run.log "$P" doctor
fi
{
    echo "== run_faststart summary"
    printf '%s\n' "${rows[@]}"
} | tee "$OUT/summary.txt"
