# A 70,000-branch fan-out runs on the host executor: the shared scheduler maps the 70,002 plan
# streams onto a bounded pool of worker threads (one thread per stream fails at "cannot start a
# thread for stream 'compute32445'"). Prints the times of check+plan and run; asserts the run's
# success, its output, and a memory bound (max RSS under 2 GiB).
set -u
pipectl=$1 src=$2 build=$3
n=${FANOUT_N:-70000}
work=$build/fanout
rm -rf "$work"
mkdir -p "$work"
{
    echo "pipeline: fanout"
    echo "run: {batches: 2, depth: 1}"
    echo "buffers:"
    echo "  x: {dtype: f32, shape: [4]}"
    echo "  x_dev: {where: device, dtype: f32, shape: [4]}"
    awk -v n="$n" 'BEGIN { for (i = 0; i < n; i++) printf "  y%d: {where: device, dtype: f32, shape: [1]}\n", i }'
    echo "  s: {where: device, dtype: f64, shape: [1]}"
    echo "  s_host: {dtype: f64, shape: [1]}"
    echo "stages:"
    echo "  - {name: gen, kind: source, to: x, generator: range}"
    echo "  - {name: up, kind: h2d, from: x, to: x_dev}"
    awk -v n="$n" 'BEGIN { for (i = 0; i < n; i++) printf "  - {name: k%d, kind: kernel, op: fill, value: %d, writes: [y%d], after: [up]}\n", i, i % 7, i }'
    echo "  - {name: total, kind: kernel, op: sum, reads: [x_dev], writes: [s]}"
    echo "  - {name: down, kind: d2h, from: s, to: s_host}"
    echo "  - {name: save, kind: sink, from: s_host, to: out/s.npy}"
} >"$work/fanout.yaml"
t0=$(date +%s.%N)
"$pipectl" plan "$work/fanout.yaml" >"$work/plan.txt" 2>&1 || { echo "FAIL: plan"; tail -3 "$work/plan.txt"; exit 1; }
t1=$(date +%s.%N)
/usr/bin/time -f "%M %e" -o "$work/time.txt" "$pipectl" run --quiet --executor host --workers 4 \
    "$work/fanout.yaml" >"$work/run.out" 2>&1
rc=$?
t2=$(date +%s.%N)
read -r rss_kb secs <"$work/time.txt" 2>/dev/null || rss_kb=0
echo "fan-out of $n: plan $(echo "$t1 - $t0" | bc) s ($(head -1 "$work/plan.txt" | cut -c1-80)), run $(echo "$t2 - $t1" | bc) s, max RSS $((rss_kb / 1024)) MiB"
[ $rc -eq 0 ] || { echo "FAIL: run exited $rc"; tail -5 "$work/run.out"; exit 1; }
[ "$(od -An -tf8 -j128 -N8 "$work/out/s.npy" | tr -d ' ')" = "6" ] || { echo "FAIL: sum of range(4) is not 6"; exit 1; }
[ "$rss_kb" -lt $((2 * 1024 * 1024)) ] || { echo "FAIL: max RSS ${rss_kb} KiB over 2 GiB"; exit 1; }
echo "ok"
