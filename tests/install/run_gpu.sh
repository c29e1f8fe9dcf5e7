#!/usr/bin/env bash
# run_gpu.sh: the embedding API on a GPU machine, in one run. Builds with CUDA, runs test_api (which
# runs PIPECTL_EXECUTOR_GPU and requires PIPECTL_OK where a GPU is present) and test_install, then
# builds embed.c against the installed copy and requires the same checksum on the gpu, auto and host
# executors. Run from the repository root:
#   source .gpu/setup.sh && bash tests/install/run_gpu.sh
# Environment: OUT (default ./out/api-gpu), BUILD (default build-api-gpu), JOBS (default 16).
set -u
OUT=${OUT:-out/api-gpu}
BUILD=${BUILD:-build-api-gpu}
JOBS=${JOBS:-16}
mkdir -p "$OUT"
fail=0
cmake -S . -B "$BUILD" -G Ninja -DPL_WERROR=ON >"$OUT/build.log" 2>&1 &&
    cmake --build "$BUILD" -j"$JOBS" >>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
ctest --test-dir "$BUILD" -R '^(test_api|test_install)$' --output-on-failure >"$OUT/ctest.log" 2>&1 ||
    { echo "FAIL: ctest test_api/test_install"; fail=1; }
prefix=$(mktemp -d)
cmake --install "$BUILD" --prefix "$prefix" >>"$OUT/build.log" 2>&1
export PKG_CONFIG_PATH=$(dirname "$(find "$prefix" -name pipectl.pc | head -1)")
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror tests/install/embed.c -o "$prefix/embed" \
    $(pkg-config --cflags --libs pipectl) -Wl,-rpath,"$(pkg-config --variable=libdir pipectl)" ||
    { echo "FAIL: embed.c does not build"; exit 1; }
for ex in host gpu auto; do
    "$prefix/embed" pipelines/quickstart.yaml "$ex" >"$OUT/embed_$ex.out" 2>"$OUT/embed_$ex.err"
    echo "embed $ex: rc=$? $(grep -o 'executor [a-z]*' "$OUT/embed_$ex.out") $(grep -o 'checksum 0x[0-9a-f]*' "$OUT/embed_$ex.out") $(cat "$OUT/embed_$ex.err")"
done
h=$(grep -o 'checksum 0x[0-9a-f]*' "$OUT/embed_host.out")
g=$(grep -o 'checksum 0x[0-9a-f]*' "$OUT/embed_gpu.out")
grep -q 'executor gpu' "$OUT/embed_gpu.out" || { echo "FAIL: embed gpu did not run on the gpu"; fail=1; }
[ -n "$h" ] && [ "$h" = "$g" ] || { echo "FAIL: host '$h' and gpu '$g' checksums differ"; fail=1; }
grep -q 'executor: gpu' "$OUT/embed_auto.err" || { echo "FAIL: auto did not pick the gpu"; fail=1; }
rm -rf "$prefix"
[ $fail = 0 ] && echo "ok: libpipectl on the GPU: test_api, test_install, embed host = gpu = auto"
exit $fail
