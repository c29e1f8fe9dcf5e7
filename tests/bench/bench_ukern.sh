#!/usr/bin/env bash
# bench_ukern: a user kernel against the built-in op it imitates, in one run of this script on a
# GPU: (1) the balanced pipeline (64 MiB up -> busy as long as the upload -> 64 MiB down, depth
# 4, CUDA Graphs) with the built-in `busy` op and with pipelines/kernels/busy.cu; (2) a 64 MiB
# upload -> 8 chained `scale` kernels (distinct buffers) -> download, built-in against pipelines/kernels/scale.cu;
# runs alternate, best of REPS (default 3) wall times, ratio user/built-in (1.00 = as fast). Then
# NVRTC compile time of scale.cu cold (empty cache) and cached, median of 5 `pipectl check -v`.
# usage (repo root, after a build): bash tests/bench/bench_ukern.sh [PIPECTL] [BUSY_US]
# STEPS=compile: only the compile times (no GPU needed).
set -u
pipectl=${1:-build-dev/pipectl}
busy_us=${2:-1220}
reps=${REPS:-3}
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export XDG_CACHE_HOME=$work/cache
mkdir -p "$work/kernels"
cp "$src"/pipelines/kernels/*.cu "$work/kernels/"
n=16777216 # 64 MiB of f32

hdr() {
    cat <<YAML
run: {batches: 64, depth: 4, seed: 1}
buffers:
  x_host: {where: host, dtype: f32, shape: [$n], persistent: true, init: random}
  x_dev:  {where: device, dtype: f32, shape: [$n]}
  y_dev:  {where: device, dtype: f32, shape: [$n]}
  y_host: {where: host, dtype: f32, shape: [$n]}
YAML
}
{
    hdr
    echo "stages:"
    echo "  - {name: up, kind: h2d, from: x_host, to: x_dev}"
    echo "  - {name: k, kind: kernel, op: busy, duration_us: $busy_us, reads: [x_dev]}"
    echo "  - {name: copy, kind: kernel, op: scale, alpha: 1, reads: [x_dev], writes: [y_dev], after: [k]}"
    echo "  - {name: down, kind: d2h, from: y_dev, to: y_host}"
} >"$work/busy_builtin.yaml"
{
    hdr
    echo "stages:"
    echo "  - {name: up, kind: h2d, from: x_host, to: x_dev}"
    echo "  - {name: k, kind: kernel, source: kernels/busy.cu, function: busy, grid: [1], block: [32], args: [{u64: $((busy_us * 1000))}], reads: [x_dev]}"
    echo "  - {name: copy, kind: kernel, op: scale, alpha: 1, reads: [x_dev], writes: [y_dev], after: [k]}"
    echo "  - {name: down, kind: d2h, from: y_dev, to: y_host}"
} >"$work/busy_user.yaml"
for v in builtin user; do
    {
        hdr
        for i in 1 2 3 4 5 6 7; do echo "  t${i}_dev: {where: device, dtype: f32, shape: [$n]}"; done
        echo "stages:"
        echo "  - {name: up, kind: h2d, from: x_host, to: x_dev}"
        prev=x_dev
        for i in 1 2 3 4 5 6 7 8; do
            out=$([ $i -eq 8 ] && echo y_dev || echo "t${i}_dev")
            if [ $v = builtin ]; then
                echo "  - {name: s$i, kind: kernel, op: scale, alpha: 1.0001, reads: [$prev], writes: [$out]}"
            else
                echo "  - {name: s$i, kind: kernel, source: kernels/scale.cu, function: scale, grid: [ceil(elements(x_dev) / 256)], block: [256], args: [$out, $prev, {f32: 1.0001}, elements(x_dev)], reads: [$prev], writes: [$out]}"
            fi
            prev=$out
        done
        echo "  - {name: down, kind: d2h, from: y_dev, to: y_host}"
    } >"$work/scale_$v.yaml"
done

wall() { "$pipectl" run --executor gpu --json "$1" 2>/dev/null | grep -o '"wall_s": [0-9.e-]*' | head -1 | awk '{print $2}'; }
best() { # best FILE: the lowest of $reps wall times
    local b=""
    for _ in $(seq "$reps"); do
        local w
        w=$(wall "$1")
        [ -z "$w" ] && continue
        if [ -z "$b" ] || awk "BEGIN{exit !($w < $b)}"; then b=$w; fi
    done
    echo "${b:-nan}"
}
"$pipectl" check "$work"/*.yaml >/dev/null || exit 1
[ -n "${CHECK_ONLY:-}" ] && { echo "generated pipelines check"; exit 0; }
# STEPS="run compile" (default): the GPU runs, then compile times; STEPS=compile needs no GPU.
steps=${STEPS:-run compile}
if [[ " $steps " == *" run "* ]]; then
echo "== user kernel vs built-in op (best of $reps wall times, 64 batches of 64 MiB, depth 4, graphs)"
printf '%-34s %12s %12s %8s\n' pipeline "built-in s" "user s" ratio
for p in busy scale; do
    b=$(best "$work/${p}_builtin.yaml")
    u=$(best "$work/${p}_user.yaml")
    printf '%-34s %12s %12s %8s\n' "$([ $p = busy ] && echo "balanced (busy ${busy_us} us)" || echo "8 x scale (memory-bound)")" \
        "$b" "$u" "$(awk "BEGIN{printf \"%.3f\", $u / $b}")"
done

fi
[[ " $steps " == *" compile "* ]] || exit 0
echo "== NVRTC compile of kernels/scale.cu (pipectl check -v, median of 5)"
ms() { grep -o '([0-9.]* ms' "$1" | tr -d '(' | awk '{print $1}'; }
median() { sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
cold=$(for _ in 1 2 3 4 5; do
    rm -rf "$XDG_CACHE_HOME"
    s=$(date +%s%N)
    "$pipectl" check -v "$work/scale_user.yaml" >"$work/c" 2>&1
    echo "$(ms "$work/c" | head -1) $((($(date +%s%N) - s) / 1000000))"
done)
warm=$(for _ in 1 2 3 4 5; do
    s=$(date +%s%N)
    "$pipectl" check -v "$work/scale_user.yaml" >"$work/c" 2>&1
    echo "$(ms "$work/c" | head -1) $((($(date +%s%N) - s) / 1000000))"
done)
echo "cold:   compile $(echo "$cold" | awk '{print $1}' | median) ms, whole check $(echo "$cold" | awk '{print $2}' | median) ms"
echo "cached: lookup $(echo "$warm" | awk '{print $1}' | median) ms, whole check $(echo "$warm" | awk '{print $2}' | median) ms"
