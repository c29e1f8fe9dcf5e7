#!/bin/bash
# test_salvage: what SIGKILL leaves is recoverable. A run killed mid-way leaves, for each sink, a
# .partial and its .partial.meta; numpy loads the .npy .partial (its header rewritten at least once
# a second) as a whole number of batches equal to a full run's prefix; `pipectl salvage` turns
# every .partial (.npy batches and rows, raw, text, JSONL) into a file equal to the same prefix of
# a full run's output, with the checksum that run reports. Salvage refuses a file that is not a
# pipectl partial, one whose final name exists, and cuts or keeps a short last batch as the
# sidecar says.
set -u
pipectl=$1 build=$3
py=/usr/bin/python3
if ! "$py" -c 'import numpy' 2>/dev/null; then
    echo "SKIP: $py with numpy (Debian's python3-numpy) is needed"
    exit 77
fi
work=$build/salvage
rm -rf "$work"
mkdir -p "$work/kill" "$work/ref" "$work/one"
fail=0
bad() { echo "FAIL: $*"; fail=1; }

pipeline() { # $1: busy time per batch in microseconds
    cat <<YAML
pipeline: leftover
run: {batches: 100000, depth: 3, seed: 7}
buffers:
  x: {dtype: f32, shape: [16, 4]}
  t: {dtype: u8, shape: [8, 12]}
stages:
  - {name: gen, kind: source, to: x, generator: random}
  - {name: words, kind: source, to: t, generator: random, min: 97, max: 123}
  - {name: wait, kind: kernel, op: busy, duration_us: $1, after: [gen, words]}
  - {name: npy, kind: sink, from: x, to: out/x.npy, after: [wait]}
  - {name: raw, kind: sink, from: x, to: out/x.bin, after: [wait]}
  - {name: rows, kind: sink, from: x, to: out/r.npy, layout: rows, after: [wait]}
  - {name: txt, kind: sink, from: t, to: out/t.txt, after: [wait]}
  - {name: js, kind: sink, fields: [x], to: out/x.jsonl, after: [wait]}
YAML
}
pipeline 300 >"$work/kill/p.yaml"
pipeline 1 >"$work/ref/p.yaml"
pipeline 1 >"$work/one/p.yaml"

# SIGKILL once the run is past a header rewrite (1 s) and has written a few hundred batches.
"$pipectl" run --executor host --quiet "$work/kill/p.yaml" 2>"$work/kill.err" &
pid=$!
p=$work/kill/out/x.npy.partial
for _ in $(seq 1 3000); do
    [ -f "$p" ] && [ "$(stat -c %s "$p")" -gt 65536 ] && break
    sleep 0.01
done
sleep 1.5
kill -KILL $pid
wait $pid 2>/dev/null
for f in x.npy r.npy x.bin t.txt x.jsonl; do
    [ -f "$work/kill/out/$f.partial" ] || bad "no $f.partial after SIGKILL"
    [ -f "$work/kill/out/$f.partial.meta" ] || bad "no $f.partial.meta after SIGKILL"
    [ -f "$work/kill/out/$f" ] && bad "$f exists under its final name after SIGKILL"
done
[ $fail = 0 ] || exit 1
cp "$work/kill/out/x.npy.partial.meta" "$work/x.meta"
cp "$work/kill/out/x.npy.partial" "$work/x.partial.npy"

# numpy loads the .partial as it is: whole batches (the rows layout: whole batches of 16 rows).
loaded=$("$py" -c '
import numpy as np, sys
a = np.load(sys.argv[1]); r = np.load(sys.argv[2])
assert a.ndim == 3 and a.shape[1:] == (16, 4), a.shape
assert r.ndim == 2 and r.shape[1] == 4 and r.shape[0] % 16 == 0, r.shape
assert a.shape[0] > 0 and r.shape[0] > 0, (a.shape, r.shape)
print(a.shape[0], r.shape[0] // 16)
' "$work/kill/out/x.npy.partial" "$work/kill/out/r.npy.partial") || bad "numpy cannot load the .partial files"
read -r n_loaded r_loaded <<<"$loaded"
echo "numpy loads $n_loaded batches of x.npy.partial, $r_loaded of r.npy.partial"

# Salvage each: it says what it kept.
declare -A kept sum
for f in x.npy r.npy x.bin t.txt x.jsonl; do
    out=$("$pipectl" salvage "$work/kill/out/$f.partial" 2>&1)
    rc=$?
    [ $rc = 0 ] || { bad "salvage $f: exit $rc: $out"; continue; }
    echo "$out"
    kept[$f]=$(sed -n 's/^kept \([0-9,]*\) batch.*/\1/p' <<<"$out" | tr -d ,)
    sum[$f]=$(grep -o 'checksum 0x[0-9a-f]*' <<<"$out" | grep -o '0x.*')
    [ -n "${kept[$f]}" ] || bad "salvage $f: no 'kept N batches' line"
    [ -f "$work/kill/out/$f" ] || bad "salvage $f: $f not there"
    [ -e "$work/kill/out/$f.partial" ] && bad "salvage $f: the .partial is left"
    [ -e "$work/kill/out/$f.partial.meta" ] && bad "salvage $f: the .partial.meta is left"
done
[ $fail = 0 ] || exit 1
[ "${kept[x.npy]}" -ge "$n_loaded" ] || bad "salvage kept ${kept[x.npy]} batches of x.npy, numpy loaded $n_loaded"

# A full run as long as the longest salvaged output: every salvaged file is its prefix.
m=0
for f in "${!kept[@]}"; do [ "${kept[$f]}" -gt $m ] && m=${kept[$f]}; done
"$pipectl" run --executor host --batches "$m" "$work/ref/p.yaml" >"$work/ref.out" 2>&1 || bad "reference run failed"
"$py" -c '
import numpy as np, sys
k, ref = sys.argv[1], sys.argv[2]
n, nr = int(sys.argv[3]), int(sys.argv[4])
a, b = np.load(k + "/x.npy"), np.load(ref + "/x.npy")
assert a.shape == (n, 16, 4) and np.array_equal(a, b[:n]), "x.npy: not the prefix"
a, b = np.load(k + "/r.npy"), np.load(ref + "/r.npy")
assert a.shape == (nr * 16, 4) and np.array_equal(a, b[:nr * 16]), "r.npy: not the prefix"
p, b = np.load(sys.argv[5]), np.load(ref + "/x.npy")
assert p.shape == (int(sys.argv[6]), 16, 4) and np.array_equal(p, b[:p.shape[0]]), "x.npy.partial: not the prefix"
' "$work/kill/out" "$work/ref/out" "${kept[x.npy]}" "${kept[r.npy]}" "$work/x.partial.npy" "$n_loaded" || bad "salvaged .npy files are not a full run's prefix"
cmp -s "$work/kill/out/x.bin" <(head -c $((kept[x.bin] * 256)) "$work/ref/out/x.bin") || bad "x.bin: not the prefix"
[ "$(stat -c %s "$work/kill/out/x.bin")" = $((kept[x.bin] * 256)) ] || bad "x.bin: not ${kept[x.bin]} whole batches"
cmp -s "$work/kill/out/t.txt" <(head -n $((kept[t.txt] * 8)) "$work/ref/out/t.txt") || bad "t.txt: not the prefix"
cmp -s "$work/kill/out/x.jsonl" <(head -n $((kept[x.jsonl] * 16)) "$work/ref/out/x.jsonl") || bad "x.jsonl: not the prefix"

# The salvaged .npy is byte for byte what a run of that many batches writes, with its checksum.
"$pipectl" run --executor host --batches "${kept[x.npy]}" "$work/one/p.yaml" >"$work/one.out" 2>&1 || bad "run of ${kept[x.npy]} batches failed"
cmp -s "$work/kill/out/x.npy" "$work/one/out/x.npy" || bad "x.npy differs from a run of ${kept[x.npy]} batches"
grep -q "npy: ${kept[x.npy]} batches written to .*, checksum ${sum[x.npy]}$" "$work/one.out" ||
    { bad "salvage's checksum ${sum[x.npy]} is not the run's"; cat "$work/one.out"; }
grep -q "raw: ${kept[x.npy]} batches written" "$work/one.out" && [ "${kept[x.bin]}" = "${kept[x.npy]}" ] &&
    { grep -q "raw: .*, checksum ${sum[x.bin]}$" "$work/one.out" || bad "x.bin: salvage's checksum is not the run's"; }

# Refusals (exit 2): the final name exists; not a pipectl partial; still being written.
cp "$work/kill/out/x.npy" "$work/kill/out/x.npy.partial"
cp "$work/x.meta" "$work/kill/out/x.npy.partial.meta"
out=$("$pipectl" salvage "$work/kill/out/x.npy.partial" 2>&1)
rc=$?
want="error: '$work/kill/out/x.npy' exists; salvage does not replace it: move it away (or remove it) and run 'pipectl salvage $work/kill/out/x.npy.partial' again"
[ $rc = 2 ] && [ "$out" = "$want" ] || bad "final name exists: exit $rc: $out"
cmp -s "$work/kill/out/x.npy.partial" "$work/kill/out/x.npy" || bad "a refused salvage changed the .partial"
echo 'not numpy' >"$work/stray.npy.partial"
out=$("$pipectl" salvage "$work/stray.npy.partial" 2>&1)
rc=$?
want="error: '$work/stray.npy.partial' is not a pipectl partial output: '$work/stray.npy.partial.meta', which a sink writes beside its .partial, is missing"
[ $rc = 2 ] && [ "$out" = "$want" ] || bad "stray file: exit $rc: $out"
echo '{"a": 1}' >"$work/stray.npy.partial.meta"
out=$("$pipectl" salvage "$work/stray.npy.partial" 2>&1)
rc=$?
want="error: '$work/stray.npy.partial' is not a pipectl partial output: '$work/stray.npy.partial.meta' is not a sink's sidecar (no \"pipectl_partial\": 1)"
[ $rc = 2 ] && [ "$out" = "$want" ] || bad "stray sidecar: exit $rc: $out"
out=$("$pipectl" salvage "$work/kill/p.yaml" 2>&1)
rc=$?
want="error: '$work/kill/p.yaml' is not a pipectl partial output: a sink's leftover is named after its final file with '.partial' added"
[ $rc = 2 ] && [ "$out" = "$want" ] || bad "not a .partial: exit $rc: $out"
[ -f "$work/stray.npy.partial" ] && [ -f "$work/kill/p.yaml" ] || bad "a refused salvage removed its file"

# A .partial a running run holds is not a leftover.
mkdir -p "$work/live" && cp "$work/kill/p.yaml" "$work/live/"
"$pipectl" run --executor host --quiet "$work/live/p.yaml" 2>/dev/null &
pid=$!
for _ in $(seq 1 3000); do [ -f "$work/live/out/x.npy.partial.meta" ] && break; sleep 0.01; done
out=$("$pipectl" salvage "$work/live/out/x.npy.partial" 2>&1)
rc=$?
want="error: '$work/live/out/x.npy.partial' is being written by a run (process $pid), which holds its lock: it is not a leftover; wait for the run to end"
[ $rc = 2 ] && [ "$out" = "$want" ] || bad "a live run's .partial: exit $rc: $out"
kill -KILL $pid
wait $pid 2>/dev/null

# A short last batch (a padded source, layout: rows) is kept when the sidecar names it, cut when
# not: 3 whole batches of 4 rows and one of 2.
cat >"$work/pad.yaml" <<'YAML'
pipeline: pad
run: {batches: all}
buffers:
  x: {dtype: i32, shape: [4, 2]}
stages:
  - {name: src, kind: source, to: x, file: in.bin, last_batch: pad}
  - {name: save, kind: sink, from: x, to: out/p.bin, layout: rows}
YAML
"$py" -c 'import numpy as np; np.arange(28, dtype=np.int32).tofile("'"$work"'/in.bin")'
"$pipectl" run --executor host --quiet "$work/pad.yaml" || bad "padded run failed"
[ "$(stat -c %s "$work/out/p.bin")" = 112 ] || bad "padded run: p.bin is not 14 rows"
side() {
    printf '{"pipectl_partial":1,"pipeline":"pad","stage":"save","final":"out/p.bin","format":"raw","layout":"rows","header_bytes":0,"batch_bytes":32,"row_bytes":8,"rows_per_batch":4,"batches":4,"checksum":true,"short_batch":[%20d, %20d]}\n' "$1" "$2"
}
for short in "3 2" "-1 0"; do
    rm -rf "$work/s" && mkdir -p "$work/s"
    cp "$work/out/p.bin" "$work/s/p.bin.partial"
    side $short >"$work/s/p.bin.partial.meta"
    out=$("$pipectl" salvage "$work/s/p.bin.partial" 2>&1) || bad "salvage of the padded output failed: $out"
    if [ "$short" = "3 2" ]; then
        grep -q "^kept 4 batches (14 rows) of $work/s/p.bin$" <<<"$out" || bad "short batch named: $out"
        cmp -s "$work/s/p.bin" "$work/out/p.bin" || bad "short batch named: not kept"
    else
        grep -q "^kept 3 batches (12 rows) of $work/s/p.bin; cut 16 bytes of a batch that was being written$" <<<"$out" || bad "short batch not named: $out"
        cmp -s "$work/s/p.bin" <(head -c 96 "$work/out/p.bin") || bad "short batch not named: not cut"
    fi
done
[ $fail = 0 ] && echo "SIGKILL leftovers load in numpy and salvage to a full run's prefix; refusals exit 2"
exit $fail
