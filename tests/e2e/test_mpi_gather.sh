#!/bin/bash
# test_mpi_gather: `mpirun -n N pipectl run --mpi --mpi-write gather` on the host executor: rank 0
# writes the final files from every rank's batches. With 2 and 3 ranks the example pipelines that
# run on the host in seconds (7 batches) and a padded `layout: rows` sink leave the files one
# process writes, byte for byte, and nothing else. A rank failing at batch 7 of 300 makes every
# rank exit non-zero without hanging, and the file holds exactly the batches before the first one
# missing (one process's run of that many batches, byte for byte), no .partial. SIGINT to mpirun:
# the same, every rank stopped. A write that fails on rank 0 stops every rank. Text sinks and
# shard_mode: range are refused (exit 2, named).
# Skipped (77) when the build has no MPI or mpirun is missing.
set -u
pipectl=$1 src=$2 build=$3
WORK=mpi_gather
. "$src/tests/e2e/mpi_lib.sh" # skips without MPI; fail, bad, mpi, same; in $build/$WORK

cp -r "$src/pipelines" p
cd p || exit 1
# A .npy source of 7 rows read 2 a batch, its last batch padded: a `layout: rows` sink writes
# the real rows only (a shorter last batch), beside a raw sink of whole batches.
python3 -c "
import struct
d = \"{'descr': '<f4', 'fortran_order': False, 'shape': (7, 3), }\"
t = (10 + len(d) + 1 + 63) // 64 * 64
open('rows.npy', 'wb').write(b'\x93NUMPY\x01\x00' + struct.pack('<H', t - 10) + d.encode() +
    b' ' * (t - 10 - len(d) - 1) + b'\n' + struct.pack('<21f', *range(21)))"
cat >rows.yaml <<'YAML'
run: {batches: all, depth: 2}
buffers:
  x: {dtype: f32, shape: [2, 3]}
stages:
  - {name: rows, kind: source, to: x, file: rows.npy, last_batch: pad}
  - {name: back, kind: sink, from: x, layout: rows, to: out/x.npy}
  - {name: whole, kind: sink, from: x, to: out/w.bin}
YAML
pipes="diamond.yaml forkjoin.yaml host_step.yaml host_step.lua lua_postprocess.yaml
  lua_postprocess.lua overlap.yaml quickstart.yaml quickstart.lua rag.yaml user_kernel.yaml
  user_kernel.lua user_kernel_ptx.yaml rows.yaml"
for f in $pipes; do
    rm -rf out
    b="--batches 7"
    [ "$f" = rows.yaml ] && b=""
    "$pipectl" run -q -e host $b "$f" >/dev/null 2>../err.txt || { bad "$f: $(cat ../err.txt)"; continue; }
    mkdir -p ref && mv out "ref/$f"
    for n in 2 3; do
        rm -rf out
        mpi $n "$pipectl" run -e host $b --mpi --mpi-write gather "$f" >../out.txt 2>../err.txt ||
            { bad "$f, $n ranks: exit $?: $(cat ../err.txt)"; continue; }
        same "$f, $n ranks" "ref/$f" out
        grep -q "^written: .* from $n ranks, through rank 0" ../out.txt || bad "$f, $n ranks: no 'written:' line: $(cat ../out.txt)"
    done
done
cd ..

# Refusals, before anything runs, exit 2 on every rank.
cat >txt.yaml <<'YAML'
pipeline: txt
run: {batches: 4}
buffers:
  x: {where: host, dtype: u8, shape: [2, 8]}
stages:
  - {name: gen, kind: source, to: x, generator: constant, value: 65}
  - {name: lines, kind: sink, from: x, to: out/t.txt}
YAML
mpi 2 "$pipectl" run -e host --mpi --mpi-write gather txt.yaml >out.txt 2>err.txt
rc=$?
[ $rc -eq 2 ] && grep -q "^txt.yaml:7:44: error: sink 'lines' writes text lines, whose batches vary in size: --mpi-write gather writes raw and .npy sinks; use --mpi-write parts" err.txt ||
    bad "a text sink under gather: exit $rc: $(cat err.txt)"
[ ! -e out ] || bad "a text sink under gather: something was written: $(ls -R out)"
cp "$src/pipelines/quickstart.yaml" q.yaml
mpi 2 "$pipectl" run -e host --mpi --mpi-write gather --set run.shard_mode=range q.yaml >out.txt 2>err.txt
rc=$?
[ $rc -eq 2 ] && grep -q "error: --mpi-write gather needs run.shard_mode: stride" err.txt ||
    bad "shard_mode range under gather: exit $rc: $(cat err.txt)"
out=$("$pipectl" run --mpi-write gather q.yaml 2>&1)
[ $? -eq 2 ] && [ "$out" = "error: --mpi-write goes with --mpi: it says how the ranks' outputs are written; see 'pipectl run --help'" ] ||
    bad "--mpi-write without --mpi: $out"

# kept FILE: the batches the "kept:" line of err.txt gives FILE (the last batch + 1), 0 without.
kept() { sed -n "s|^kept: $1: batches 0 to \([0-9]*\) of .*|\1|p" err.txt | awk '{ print $1 + 1 }'; }
# prefix WHAT YAML FILE K: FILE holds one process's run of K batches of YAML, byte for byte.
prefix() {
    mkdir -p "one_$1" && cp "$2" "one_$1/" &&
        (cd "one_$1" && "$pipectl" run -q -e host --batches "$4" "$2" >/dev/null 2>&1) &&
        cmp -s "one_$1/$3" "$3" || bad "$1: $3 is not one process's first $4 batches"
}

# A rank fails at batch 7 (rank 1 of 3, its third batch) of 300: every rank stops and exits
# non-zero; rank 0 keeps the batches before the first one missing (batch 7 at most).
rm -rf out
mpi 3 "$pipectl" run -e host --batches 300 --mpi --mpi-write gather --fail-at double:7 q.yaml >out.txt 2>err.txt
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 137 ] || bad "fail at batch 7: exit $rc (137: it hung)"
grep -q "rank 1 (.*) failed: error: stage 'double', batch 7: injected failure" err.txt ||
    bad "fail at batch 7: rank 0 does not name the failed rank: $(cat err.txt)"
[ "$(grep -c 'another rank failed or was stopped' err.txt)" -eq 2 ] || bad "fail at batch 7: the other ranks do not say why they stopped: $(cat err.txt)"
k=$(kept out/quickstart.npy)
grep -q "^missing from batch ${k:-x} on: rank [0-2] completed" err.txt || bad "fail at batch 7: no word on what is missing: $(cat err.txt)"
ls out/*.partial* >/dev/null 2>&1 && bad "fail at batch 7: .partial files left: $(ls out)"
ls out/*.part-* >/dev/null 2>&1 && bad "fail at batch 7: parts written: $(ls out)"
if [ -n "$k" ] && [ "$k" -le 7 ]; then
    prefix fail q.yaml out/quickstart.npy "$k"
else
    bad "fail at batch 7: kept '${k}' batches: $(cat err.txt)"
fi

# SIGINT to mpirun: Open MPI sends the ranks SIGTERM; each drains, rank 0 finalizes the file with
# the batches before the first one missing, and mpirun exits non-zero.
cat >small.yaml <<'YAML'
pipeline: small
run: {batches: 16, depth: 4, seed: 3}
buffers:
  x: {where: host, dtype: f32, shape: [256]}
stages:
  - {name: gen, kind: source, to: x, generator: random}
  - {name: save, kind: sink, from: x, to: out/small.npy}
YAML
rm -rf out
mpirun --oversubscribe --allow-run-as-root -n 3 "$pipectl" run -e host --batches 10000000 --mpi \
    --mpi-write gather small.yaml >out.txt 2>err.txt &
pid=$!
(sleep 120 && kill -KILL $pid) >/dev/null 2>&1 &
dog=$!
for _ in $(seq 100); do
    [ -e out/small.npy.partial ] && break
    sleep 0.1
done
sleep 1
kill -INT $pid
wait $pid
rc=$?
kill $dog 2>/dev/null
[ $rc -ne 0 ] && [ $rc -ne 137 ] || bad "SIGINT: exit $rc (137: it hung)"
ls out/*.partial* >/dev/null 2>&1 && bad "SIGINT: .partial files left: $(ls out)"
[ "$(grep -c 'interrupted (SIGTERM)' err.txt)" -ge 3 ] || bad "SIGINT: the ranks do not say they were stopped: $(cat err.txt)"
k=$(kept out/small.npy)
if [ -n "$k" ] && [ "$k" -gt 0 ]; then
    prefix sigint small.yaml out/small.npy "$k"
else
    bad "SIGINT: kept '${k}' batches: $(cat err.txt)"
fi

# Rank 0's writer fails (its file is /dev/full): rank 0 fails with the sink's error, every other
# rank stops, nobody hangs.
if [ -c /dev/full ] && [ -w /dev/full ]; then
    sed 's|to: out/small.npy|to: /dev/full, format: raw|' small.yaml >full.yaml
    mpi 3 "$pipectl" run -e host --batches 100000 --mpi --mpi-write gather full.yaml >out.txt 2>err.txt
    rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 137 ] || bad "a failing writer: exit $rc (137: it hung)"
    grep -q "^rank 0 (.*) failed: error: stage 'save', batch 0: writing '/dev/full' failed: No space left on device" err.txt ||
        bad "a failing writer: rank 0 does not say why: $(cat err.txt)"
    [ "$(grep -c 'another rank failed or was stopped' err.txt)" -eq 2 ] || bad "a failing writer: the others do not stop: $(cat err.txt)"
fi

[ $fail -eq 0 ] && echo "gather: mpirun -n 2 and -n 3 write one process's files (14 pipelines); a failing rank and SIGINT leave the batches before the first missing one; text and range refused"
exit $fail
