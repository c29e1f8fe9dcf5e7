#!/bin/bash
# test_mpi: `mpirun -n N pipectl run --mpi` on the host executor. With 2 and 3 ranks every
# example pipeline that runs on the host in seconds (7 batches) leaves the files one process
# writes, byte for byte, and no part behind. A rank that fails at batch k (--fail-at) makes every
# rank exit non-zero without hanging: each rank's completed batches are in its finalized part
# with its manifest, nothing is merged, rank 0 names the failed rank. SIGINT to mpirun: every
# rank finalizes its part, mpirun exits non-zero, within the timeout. capture --mpi records the
# world; replay replays its ranks one after another, `replay --mpi` at once (another number of
# ranks refused). Skipped (77) when the build has no MPI or mpirun is missing.
set -u
pipectl=$1 src=$2 build=$3
WORK=mpi
. "$src/tests/e2e/mpi_lib.sh" # skips without MPI; fail, bad, mpi, same; in $build/$WORK

pipes="diamond.yaml forkjoin.yaml host_step.yaml host_step.lua lua_postprocess.yaml
  lua_postprocess.lua overlap.yaml quickstart.yaml quickstart.lua rag.yaml user_kernel.yaml
  user_kernel.lua user_kernel_ptx.yaml"

cp -r "$src/pipelines" p
cd p || exit 1
for f in $pipes; do
    rm -rf out
    "$pipectl" run -q -e host --batches 7 "$f" >/dev/null 2>../err.txt || { bad "$f: $(cat ../err.txt)"; continue; }
    mkdir -p ref && mv out "ref/$f"
    for n in 2 3; do
        rm -rf out
        mpi $n "$pipectl" run -e host --batches 7 --mpi "$f" >../out.txt 2>../err.txt ||
            { bad "$f, $n ranks: exit $?: $(cat ../err.txt)"; continue; }
        same "$f, $n ranks" "ref/$f" out
        grep -q "^ranks: $n on 1 host" ../out.txt || bad "$f, $n ranks: no ranks table: $(cat ../out.txt)"
    done
done
cd ..

# A rank fails at batch 7 (rank 1 of 3, its third batch) of 300: every rank stops and exits
# non-zero, each part holds its rank's completed batches, finalized, with its manifest.
cp "$src/pipelines/quickstart.yaml" q.yaml
rm -rf out
mpi 3 "$pipectl" run -e host --batches 300 --mpi --fail-at double:7 q.yaml >out.txt 2>err.txt
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 137 ] || bad "fail at batch 7: exit $rc (137: it hung)"
grep -q "rank 1 (.*) failed: error: stage 'double', batch 7: injected failure" err.txt ||
    bad "fail at batch 7: rank 0 does not name the failed rank: $(cat err.txt)"
grep -q "^not merged: " err.txt || bad "fail at batch 7: no word on the parts: $(cat err.txt)"
[ ! -e out/quickstart.npy ] || bad "fail at batch 7: merged anyway"
ls out/*.partial >/dev/null 2>&1 && bad "fail at batch 7: .partial files left: $(ls out)"
for k in 0 1 2; do
    m=out/quickstart.part-$k-of-3.npy.manifest.json
    [ -f "$m" ] || { bad "fail at batch 7: no $m"; continue; }
    python3 - "$m" "$k" <<'PY' || bad "fail at batch 7: manifest $m: $(cat "$m")"
import json, sys
m = json.load(open(sys.argv[1]))
k = int(sys.argv[2])
# rank 1 holds batches 1 and 4 (7 failed); the others stopped early, none completed its 100
assert not m["complete"] and m["batches_planned"] == 100, m
assert m["batches"] == 2 if k == 1 else 0 < m["batches"] < 100, m
assert len(m["batch_checksums"]) == m["batches"]
PY
done
# What completed is exact: rank 1's part holds batches 1 and 4, as shard 1/3 of a run does.
mkdir -p again && cp q.yaml again/
(cd again && "$pipectl" run -q -e host --batches 9 --shard 1/3 q.yaml >/dev/null 2>&1) || bad "shard 1/3 of 9"
python3 - out/quickstart.part-1-of-3.npy again/out/quickstart.part-1-of-3.npy <<'PY' ||
import struct, sys
def data(p):
    b = open(p, 'rb').read()
    return b[10 + struct.unpack('<H', b[8:10])[0]:]
a, b = data(sys.argv[1]), data(sys.argv[2])
assert len(a) * 3 == len(b) * 2 and b.startswith(a), (len(a), len(b))
PY
    bad "fail at batch 7: rank 1's batches are not those of shard 1/3"

# SIGINT to mpirun: Open MPI sends the ranks SIGTERM; each drains, finalizes its part and its
# manifest, and mpirun exits non-zero.
rm -rf out
mpirun --oversubscribe --allow-run-as-root -n 3 "$pipectl" run -e host --batches 100000 --mpi \
    q.yaml >out.txt 2>err.txt &
pid=$!
(sleep 120 && kill -KILL $pid) >/dev/null 2>&1 &
dog=$!
for _ in $(seq 100); do
    [ "$(ls out/*.manifest.json 2>/dev/null | wc -l)" -eq 0 ] && [ -n "$(ls out/*.partial 2>/dev/null)" ] && break
    sleep 0.1
done
sleep 1
kill -INT $pid
wait $pid
rc=$?
kill $dog 2>/dev/null
[ $rc -ne 0 ] && [ $rc -ne 137 ] || bad "SIGINT: exit $rc (137: it hung)"
ls out/*.partial >/dev/null 2>&1 && bad "SIGINT: .partial files left: $(ls out)"
[ "$(ls out/*.manifest.json 2>/dev/null | wc -l)" -eq 3 ] || bad "SIGINT: not every rank wrote its manifest: $(ls out) $(cat err.txt)"
grep -q "interrupted (SIGTERM)" err.txt || bad "SIGINT: the ranks do not say they were stopped: $(cat err.txt)"

# capture --mpi: a bundle per rank and rank 0's world.json (ranks, hosts, devices); the merged
# outputs are one process's; replay replays every rank's shard, or one with --rank.
rm -rf out world
"$pipectl" run -q -e host --batches 7 q.yaml && mv out/quickstart.npy one.npy
mpi 2 "$pipectl" capture -e host -q --mpi --reps 1 --batches 7 q.yaml -o world >out.txt 2>err.txt ||
    bad "capture --mpi: exit $?: $(cat err.txt)"
cmp -s one.npy out/quickstart.npy || bad "capture --mpi: the merged output is not one process's"
python3 - world <<'PY' || bad "capture --mpi: world.json: $(cat world/world.json)"
import json, sys
w = json.load(open(sys.argv[1] + "/world.json"))
assert w["schema"] == "pipectl-world" and w["size"] == 2 and w["complete"], w
assert [r["bundle"] for r in w["ranks"]] == ["rank-0", "rank-1"], w
assert all(r["device"] is None and r["exit_code"] == 0 and r["host"] in w["hosts"] for r in w["ranks"]), w
for k in (0, 1):
    m = json.load(open("%s/rank-%d/manifest.json" % (sys.argv[1], k)))
    assert m["shard"]["index"] == k and m["shard"]["count"] == 2, m["shard"]
    assert m["rank"]["rank"] == k and m["rank"]["size"] == 2, m["rank"]
PY
out=$("$pipectl" replay -q world 2>&1) || bad "replay of the world: exit $?: $out"
[ "$(echo "$out" | grep -c 'every checksum matches')" -eq 2 ] || bad "replay of the world: $out"
out=$("$pipectl" replay -q --rank 1 world 2>&1) || bad "replay --rank 1: exit $?: $out"
echo "$out" | grep -q "replay of world/rank-1 on host: 1 sink, 3 batches: every checksum matches" ||
    bad "replay --rank 1: $out"
out=$("$pipectl" replay --rank 2 world 2>&1)
[ $? -eq 2 ] && [ "$out" = "error: --rank 2: the world of world has ranks 0 to 1; see 'pipectl replay --help'" ] ||
    bad "replay --rank 2: $out"
# replay --mpi: each rank replays its own bundle at once; rank 0 prints every rank's verdict and
# the world's; a world of 2 under 3 ranks is refused on every rank, naming the size to use.
mpi 2 "$pipectl" replay -q --mpi world >out.txt 2>err.txt || bad "replay --mpi: exit $?: $(cat err.txt)"
[ "$(grep -c 'every checksum matches' out.txt)" -eq 2 ] && grep -q "^rank 1 of 2 (host .*, the CPU):" out.txt &&
    grep -q "^world world: 2 ranks replayed at once: every rank's checksums match" out.txt || bad "replay --mpi: $(cat out.txt err.txt)"
mpi 3 "$pipectl" replay -q --mpi world >out.txt 2>err.txt
rc=$?
[ $rc -eq 2 ] && [ "$(grep -c "^error: world is a world of 2 ranks, and this mpirun started 3: replay it with 'mpirun -n 2 pipectl replay --mpi world'" err.txt)" -eq 1 ] &&
    ! grep -q "replay of" out.txt || bad "replay --mpi with 3 ranks of a world of 2: exit $rc: $(cat out.txt err.txt)"
sed -i 's/"bundle": "rank-1"/"bundle": "..\/x"/' world/world.json
out=$("$pipectl" replay -q world 2>&1)
[ $? -eq 2 ] && echo "$out" | grep -q "rank 1's bundle is '../x', not 'rank-1'" || bad "a world.json sending replay out: $out"

# A loop's stream cannot be merged yet: --mpi refuses it before the run, naming the loop.
mkdir -p stream/tests/e2e/data stream/pipelines/data
cp "$src/tests/e2e/data/stream_text.yaml" stream/tests/e2e/data/
cp -r "$src/pipelines/data/tiny_bpe" stream/pipelines/data/
(cd stream/tests/e2e/data && mpi 2 "$pipectl" run -q -e host --mpi stream_text.yaml >out.txt 2>err.txt)
rc=$?
[ $rc -ne 0 ] && grep -q "stream_text.yaml:14:20: error: loop 'spell' has a stream, and --mpi cannot merge streams yet" stream/tests/e2e/data/err.txt &&
    [ ! -e stream/tests/e2e/data/out ] || bad "--mpi with a loop stream: exit $rc: $(cat stream/tests/e2e/data/err.txt)"

[ $fail -eq 0 ] && echo "mpirun -n 2 and -n 3 equal one process (13 pipelines); a failing rank and SIGINT stop every rank, parts kept; capture --mpi records the world and replays it, in parallel with replay --mpi; a loop stream is refused"
exit $fail
