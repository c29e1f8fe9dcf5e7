#!/bin/bash
# test_scale_plan: `pipectl check` and `pipectl plan` of a 100,000-stage pipeline (a fan-out of
# 23,333 three-stage branches off one producer, a join that reads all of them, and a chain of
# 29,999 stages ordered by after:) stay linear in memory: max RSS is asserted (under 2 GiB, and
# under 20x that of a 10,000-stage version: a quadratic reachability table would be 100x).
# Times are printed, not asserted (CI machines differ; the target is < 5 s on 2 cores).
# usage: test_scale_plan.sh PIPECTL SOURCE_DIR BUILD_DIR
set -u
pipectl=$1 build=$3
work=$build/scale_plan
rm -rf "$work"
mkdir -p "$work"
fail=0
[ -x /usr/bin/time ] || { echo "SKIP: /usr/bin/time is needed to measure max RSS"; exit 77; }

gen() { # BRANCHES CHAIN
    awk -v nb="$1" -v nc="$2" 'BEGIN {
  print "pipeline: scale"; print "run: {batches: 2, depth: 3}"; print "buffers:";
  print "  x: {where: device, dtype: f32, shape: [4]}";
  print "  w: {where: device, dtype: f32, shape: [4], persistent: true, init: zeros}";
  print "  j: {where: device, dtype: f32, shape: [4]}";
  for (i = 0; i < nb; i++) {
    printf "  y%d: {where: device, dtype: f32, shape: [4]}\n", i
    printf "  z%d: {where: device, dtype: f32, shape: [4]}\n", i
  }
  print "stages:";
  print "  - {name: src, kind: kernel, op: fill, value: 1, writes: [x]}";
  for (i = 0; i < nb; i++) {
    printf "  - {name: a%d, kind: kernel, op: busy, duration_us: 1, reads: [x], writes: [y%d]}\n", i, i
    printf "  - {name: b%d, kind: kernel, op: busy, duration_us: 1, reads: [y%d], writes: [z%d]}\n", i, i, i
    printf "  - {name: c%d, kind: kernel, op: busy, duration_us: 1, reads: [z%d, w]}\n", i, i
  }
  printf "  - {name: join, kind: kernel, op: busy, duration_us: 1, writes: [j], reads: [";
  for (i = 0; i < nb; i++) printf "%sz%d", (i ? ", " : ""), i;
  print "]}";
  print "  - {name: t0, kind: kernel, op: busy, duration_us: 1, reads: [j]}";
  for (i = 1; i < nc; i++) printf "  - {name: t%d, kind: kernel, op: busy, duration_us: 1, after: [t%d]}\n", i, i - 1
}'
}

measure() { # NAME FILE WANT_STAGES -> sets rss_check, rss_plan (KB)
    local name=$1 f=$2 want=$3
    /usr/bin/time -f "%e %M" -o "$work/$name.check.time" "$pipectl" check "$f" >"$work/$name.check" 2>&1 ||
        { echo "FAIL: $name: check failed: $(head -c 500 "$work/$name.check")"; fail=1; }
    grep -q ": ok ($want stages," "$work/$name.check" || { echo "FAIL: $name: $(head -c 300 "$work/$name.check")"; fail=1; }
    /usr/bin/time -f "%e %M" -o "$work/$name.plan.time" "$pipectl" plan "$f" >"$work/$name.plan" 2>&1 ||
        { echo "FAIL: $name: plan failed: $(head -c 500 "$work/$name.plan")"; fail=1; }
    grep -q "^plan for pipeline 'scale': $want stages" "$work/$name.plan" || { echo "FAIL: $name: $(head -c 300 "$work/$name.plan")"; fail=1; }
    read -r t_check rss_check <"$work/$name.check.time"
    read -r t_plan rss_plan <"$work/$name.plan.time"
    echo "$name: $want stages: check ${t_check} s (max RSS $((rss_check / 1024)) MiB), plan ${t_plan} s (max RSS $((rss_plan / 1024)) MiB)"
}

gen 2333 2999 >"$work/small.yaml"
gen 23333 29999 >"$work/big.yaml"
measure small "$work/small.yaml" 10000
small_rss=$rss_plan
measure big "$work/big.yaml" 100000
big_rss=$rss_plan
[ "$big_rss" -lt $((2 * 1024 * 1024)) ] || { echo "FAIL: plan of 100,000 stages used $((big_rss / 1024)) MiB (bound 2048)"; fail=1; }
[ "$big_rss" -lt $((20 * small_rss)) ] || { echo "FAIL: memory grows faster than linearly: $small_rss KB for 10,000 stages, $big_rss KB for 100,000"; fail=1; }
# The plan's shape is known: one stream per branch (plus the chain's), one event per branch.
grep -q "^plan for pipeline 'scale': 100000 stages, 23334 streams, 23334 events, 93333 cross-batch deps$" "$work/big.plan" ||
    { echo "FAIL: unexpected plan summary: $(head -1 "$work/big.plan")"; fail=1; }
exit $fail
