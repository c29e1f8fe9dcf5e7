#!/usr/bin/env bash
# run_gpt2_next.sh: the gpt2 kind under PIPECTL_GPT2_ATTN_MT=1 and 2 (the attention kernel's
# m-tiles per warp; 2: 128-row blocks, each K/V fragment serving two mma). The kind keeps one
# m-tile per warp (stages/gpt2/gpt2_gpu.cu says why) and reads no such variable, so the two rows
# of each pair run the same kernel and show the run-to-run spread. Builds (Release), runs the
# gpt2 GPU tests (tiny model vs numpy, 124M vs transformers) with each setting, then bench_gpt2
# and the greedy pipeline at T 512 / 1024, f16 / bf16, with each setting, and prints a table.
# From the repository root on the GPU machine:
#   source .gpu/setup.sh && bash tests/bench/run_gpt2_next.sh
# Environment: OUT (default out/gpt2_next), BUILD (build-rel).
set -u
OUT=${OUT:-out/gpt2_next}
BUILD=${BUILD:-build-rel}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$OUT/build.log" 2>&1 &&
    cmake --build "$BUILD" -j16 >>"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
P=$(pwd)/$BUILD/pipectl
declare -a rows=()
for mt in 1 2; do
    PIPECTL_GPT2_ATTN_MT=$mt PIPECTL_TEST_HF=1 timeout 300 ctest --test-dir "$BUILD" -R gpt2 \
        --output-on-failure >"$OUT/tests_mt$mt.log" 2>&1
    rows+=("$(printf 'ctest gpt2, attention m-tiles %d: rc=%d  %s' $mt $? \
        "$(grep -E 'argmax agreement over' "$OUT/tests_mt$mt.log" | tr '\n' ' ')")")
done
W=$OUT/p
mkdir -p "$W"
for dt in f16 bf16; do
    for T in 512 1024; do
        g=$W/greedy-$dt-$T.yaml
        sed -e "s/dtype: f16/dtype: $dt/" -e "s/\[8, 512\]/[8, $T]/g" -e "s/batches: 32/batches: 64/" \
            pipelines/gpt2_greedy.yaml >"$g"
        for mt in 1 2; do
            b=$(PIPECTL_GPT2_ATTN_MT=$mt timeout 60 "$BUILD/bench_gpt2" --dtype $dt --T $T --output argmax 2>&1 |
                grep -E "^  (attention|forward) " | tr -s ' ' | tr '\n' ';')
            r=$(PIPECTL_GPT2_ATTN_MT=$mt timeout 60 "$P" run --executor gpu --json "$g" 2>/dev/null |
                python3 -c 'import json,sys
j=json.loads([l for l in sys.stdin if l.startswith("{")][-1])
print("%.3f M tok/s" % (j["batches_done"] * 8 * int(sys.argv[1]) / j["wall_s"] / 1e6))' "$T" 2>&1)
            rows+=("$(printf 'greedy %-4s T%-4d m-tiles %d: pipectl %s | bench %s' $dt $T $mt "$r" "$b")")
        done
    done
done
printf '%s\n' "${rows[@]}" | tee "$OUT/summary.txt"
