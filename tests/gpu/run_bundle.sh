#!/usr/bin/env bash
# run_bundle.sh: bundles in one run on the GPU machine: build (Release), the GPU bundle test
# (tests/gpu/test_bundle_gpu.sh: capture on the GPU, replay on the GPU and the host, graph DOT),
# the host bundle test, and the bundles and replay reports kept under $OUT for reading.
#   source .gpu/setup.sh && bash tests/gpu/run_bundle.sh
set -u
OUT=${OUT:-out/device}
BUILD=${BUILD:-build-dev}
JOBS=${JOBS:-16}
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv 2>&1; git log --oneline -1 2>/dev/null; } >"$OUT/bundle_build.log" 2>&1
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >>"$OUT/bundle_build.log" 2>&1 &&
    cmake --build "$BUILD" -j"$JOBS" >>"$OUT/bundle_build.log" 2>&1
rc_build=$?
rc_gpu=-1 rc_host=-1
if [ $rc_build -eq 0 ]; then
    timeout 300 bash tests/gpu/test_bundle_gpu.sh "$BUILD/pipectl" "$PWD" "$OUT/bundles" >"$OUT/bundle_gpu.log" 2>&1
    rc_gpu=$?
    timeout 300 bash tests/e2e/test_bundle.sh "$BUILD/pipectl" "$PWD" "$BUILD" >"$OUT/bundle_host.log" 2>&1
    rc_host=$?
fi
printf 'build rc=%s\ntest_bundle_gpu rc=%s (log %s)\ntest_bundle rc=%s (log %s)\n' \
    "$rc_build" "$rc_gpu" "$OUT/bundle_gpu.log" "$rc_host" "$OUT/bundle_host.log"
tail -n 15 "$OUT/bundle_gpu.log"
[ $rc_build -eq 0 ] && [ $rc_gpu -eq 0 ] && [ $rc_host -eq 0 ]
