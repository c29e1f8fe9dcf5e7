#!/bin/bash
# test_shard: `pipectl run --shard K/N` then `pipectl merge` gives the files one run writes, byte
# for byte: every example pipeline that runs on the host in seconds, in 3 shards (stride, and
# range for the YAML ones), 7 batches so the shards differ in size; a text source read in order
# with a padded last batch into text and JSONL sinks (2 shards); a .npy source with
# `layout: rows`. Then merge's refusals, each exit 2 naming the part: a missing part, one given
# twice, one of another run (its digest), one of another N, an incomplete one (its run failed),
# one changed after its run, one without a manifest; and --shard's own: K/N out of range, more
# shards than batches, a sink to stdout.
set -u
pipectl=$1 src=$2 build=$3
work=$build/shard
rm -rf "$work"
mkdir -p "$work"
cd "$work" || exit 1
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# pipelines that run on the host executor in about a second (gpt2*: minutes on 2 cores)
pipes="diamond.yaml forkjoin.yaml host_step.yaml host_step.lua lua_postprocess.yaml
  lua_postprocess.lua overlap.yaml quickstart.yaml quickstart.lua rag.yaml user_kernel.yaml
  user_kernel.lua user_kernel_ptx.yaml"

# same NAME DIR_A DIR_B: the two folders hold the same files, byte for byte.
same() {
    local a b f
    a=$(cd "$2" && find . -type f | sort)
    b=$(cd "$3" && find . -type f | sort)
    [ "$a" = "$b" ] || { bad "$1: files differ: [$a] against [$b]"; return; }
    for f in $a; do cmp -s "$2/$f" "$3/$f" || bad "$1: $f differs from the single run's"; done
}

# sharded NAME FILE N [MODE]: N shard runs of FILE (7 batches), each sink's parts merged; the
# out/ folder then matches ref/NAME.
sharded() {
    local name=$1 file=$2 n=$3 k
    rm -rf out
    for ((k = 0; k < n; k++)); do
        "$pipectl" run -q -e host --batches 7 --shard "$k/$n" "$file" >/dev/null 2>err.txt ||
            { bad "$name: shard $k/$n: $(cat err.txt)"; return; }
    done
    local m
    for m in $(find out -name "*.part-0-of-$n*.manifest.json" | sort); do
        local part=${m%.manifest.json} target=${m%.manifest.json}
        target=${target/.part-0-of-$n/}
        local parts=()
        for ((k = 0; k < n; k++)); do parts+=("${part/.part-0-of-$n/.part-$k-of-$n}"); done
        "$pipectl" merge -q "${parts[@]}" -o "$target" 2>err.txt ||
            { bad "$name: merge: $(cat err.txt)"; return; }
        for p in "${parts[@]}"; do rm -f "$p" "$p.manifest.json"; done
    done
    same "$name" "ref/$name" out
}

cp -r "$src/pipelines" p
cd p || exit 1
for f in $pipes; do
    rm -rf out
    "$pipectl" run -q -e host --batches 7 "$f" >/dev/null 2>err.txt || { bad "$f: $(cat err.txt)"; continue; }
    mkdir -p ref && mv out "ref/$f"
    sharded "$f" "$f" 3
    case $f in
    *.yaml)
        sed -e 's/^run: {/run: {shard_mode: range, /' "$f" >"range_$f"
        grep -q "shard_mode: range" "range_$f" || { bad "$f: no run: {...} line to add shard_mode to"; continue; }
        sharded "$f" "range_$f" 3
        ;;
    esac
done
cd ..

# A text file read in order (the shards read the others' batches and drop them), padded, into
# text and JSONL; and a .npy source whose rows a `layout: rows` sink writes back.
printf 'a\nbb\nccc\ndddd\neeeee\nf\ng\n' >p.txt
python3 -c "
import struct
d = \"{'descr': '<f4', 'fortran_order': False, 'shape': (7, 3), }\"
t = (10 + len(d) + 1 + 63) // 64 * 64
open('rows.npy', 'wb').write(b'\x93NUMPY\x01\x00' + struct.pack('<H', t - 10) + d.encode() +
    b' ' * (t - 10 - len(d) - 1) + b'\n' + struct.pack('<21f', *range(21)))"
cat >text.yaml <<'YAML'
run: {batches: all, depth: 2}
buffers:
  t: {dtype: u8, shape: [2, 8]}
  n: {dtype: i32, shape: [2]}
  x: {dtype: f32, shape: [2, 3]}
stages:
  - {name: src, kind: source, to: t, file: p.txt, lengths: n, last_batch: pad}
  - {name: rows, kind: source, to: x, file: rows.npy, last_batch: pad}
  - {name: lines, kind: sink, from: t, lengths: n, to: out/t.txt}
  - {name: recs, kind: sink, to: out/t.jsonl, row_field: id, fields: [{text: t}, {bytes: n}]}
  - {name: back, kind: sink, from: x, layout: rows, to: out/x.npy}
YAML
rm -rf out
"$pipectl" run -q -e host text.yaml >/dev/null 2>err.txt || bad "text: $(cat err.txt)"
mkdir -p ref && mv out ref/text
for n in 2 3; do
    rm -rf out
    for ((k = 0; k < n; k++)); do
        "$pipectl" run -q -e host --shard "$k/$n" text.yaml >/dev/null 2>err.txt || bad "text $k/$n: $(cat err.txt)"
    done
    for f in t.txt t.jsonl x.npy; do
        "$pipectl" merge -q out/"${f%.*}".part-*-of-$n."${f##*.}" -o "out/$f" 2>err.txt || bad "text merge $f: $(cat err.txt)"
    done
    rm -f out/*.part-*
    same "text, $n shards" ref/text out
done

# Merge's refusals, on quickstart's parts (6 batches, 3 shards).
cp "$src/pipelines/quickstart.yaml" q.yaml
rm -rf out
"$pipectl" run -q -e host --batches 6 q.yaml >/dev/null 2>&1 || bad "q"
mv out/quickstart.npy q6.npy
for k in 0 1 2; do "$pipectl" run -q -e host --batches 6 --shard $k/3 q.yaml >/dev/null 2>&1 || bad "q $k/3"; done
P0=out/quickstart.part-0-of-3.npy P1=out/quickstart.part-1-of-3.npy P2=out/quickstart.part-2-of-3.npy
# refused WHAT WANT ARGS...: merge ARGS exits 2 and says WANT.
refused() {
    local what=$1 want=$2
    shift 2
    out=$("$pipectl" merge "$@" -o m.npy 2>&1)
    rc=$?
    [ $rc -eq 2 ] || bad "$what: exit $rc, not 2: $out"
    case $out in *"$want"*) ;; *) bad "$what: '$out' does not say '$want'" ;; esac
    [ ! -e m.npy ] && [ ! -e m.npy.partial ] || bad "$what: left m.npy behind"
}
"$pipectl" merge -q $P2 $P0 $P1 -o m.npy || bad "merge in any order"
cmp -s m.npy q6.npy || bad "merged in another order: not the single run's file"
rm -f m.npy
refused "missing" "error: shard 1 of 3 is missing (its part would be '$work/out/quickstart.part-1-of-3.npy')" $P0 $P2
refused "twice" "error: part '$P0' is shard 0 of 3, and so is '$P0'" $P0 $P0 $P1 $P2
mkdir -p other
cp q.yaml other/q.yaml
sed 's/seed: 42/seed: 43/' q.yaml >other/q43.yaml
(cd other && "$pipectl" run -q -e host --batches 6 --shard 1/3 q43.yaml >/dev/null 2>&1)
refused "another seed" "error: part 'other/out/quickstart.part-1-of-3.npy' is of another pipeline or run (digest" \
    $P0 other/out/quickstart.part-1-of-3.npy $P2
(cd other && "$pipectl" run -q -e host --batches 6 --shard 1/2 q.yaml >/dev/null 2>&1)
refused "another N" "error: part 'other/out/quickstart.part-1-of-2.npy' is shard 1 of 2 (stride); '$P0' is of 3" \
    $P0 other/out/quickstart.part-1-of-2.npy $P2
(cd other && "$pipectl" run -q -e host --batches 6 --shard 1/3 --fail-at double:4 q.yaml >/dev/null 2>&1) &&
    bad "--fail-at double:4 in shard 1/3 did not fail"
refused "incomplete" "error: part 'other/out/quickstart.part-1-of-3.npy' holds 1 of its 2 batches (its run stopped or failed): run that shard again, 'pipectl run --shard 1/3 FILE', then merge" \
    $P0 other/out/quickstart.part-1-of-3.npy $P2
cp $P1 changed.part-1-of-3.npy
cp $P1.manifest.json changed.part-1-of-3.npy.manifest.json
printf '\x01' | dd of=changed.part-1-of-3.npy bs=1 seek=200 conv=notrunc 2>/dev/null
refused "changed" "error: part 'changed.part-1-of-3.npy': batch 1's bytes do not match its manifest's checksum" \
    $P0 changed.part-1-of-3.npy $P2
cp $P1 bare.npy
refused "no manifest" "error: part 'bare.npy' has no manifest 'bare.npy.manifest.json'" $P0 bare.npy $P2
refused "no file" "error: part 'nope.npy': No such file or directory" $P0 nope.npy $P2

# --shard's own refusals (exit 2).
out=$("$pipectl" run -q -e host --shard 3/3 q.yaml 2>&1)
[ $? -eq 2 ] && [ "$out" = "error: --shard needs K/N, shard K of N (0 <= K < N, N at most 65536), got '3/3'; see 'pipectl run --help'" ] ||
    bad "--shard 3/3: $out"
out=$("$pipectl" run -q -e host --batches 2 --shard 0/3 q.yaml 2>&1)
[ $? -eq 2 ] && [ "$out" = "error: 3 shards of 2 batches: each shard needs a batch at least; run fewer shards (ranks) or more batches (--batches)" ] ||
    bad "3 shards of 2 batches: $out"
sed 's|to: out/quickstart.npy|to: "-"|' q.yaml >stdout.yaml
out=$("$pipectl" run -q -e host --shard 0/2 stdout.yaml 2>&1 >/dev/null)
[ $? -eq 2 ] && case $out in *"sink 'save' writes to stdout, which the shards cannot share"*) true ;; *) false ;; esac ||
    bad "sink to stdout: $out"

# capture --shard: the bundle records the shard and replay runs the same batches again.
rm -rf out sb
"$pipectl" capture -q -e host --reps 1 --batches 7 --shard 1/2 q.yaml -o sb >/dev/null 2>err.txt ||
    bad "capture --shard 1/2: $(cat err.txt)"
[ -f out/quickstart.part-1-of-2.npy.manifest.json ] || bad "capture --shard 1/2 wrote no part manifest: $(ls out)"
grep -q '"count": 2' sb/manifest.json || bad "capture --shard: the manifest has no shard"
out=$("$pipectl" replay -q sb 2>&1)
[ $? -eq 0 ] && echo "$out" | grep -q "1 sink, 3 batches: every checksum matches" || bad "replay of a shard's bundle: $out"

[ $fail -eq 0 ] && echo "shards merged equal single runs (13 pipelines, stride and range, text in order, padded rows); merge and --shard refuse what they must"
exit $fail
