# Every command under a low address-space limit (`ulimit -v`, as CI systems and batch schedulers
# set it) ends with its usual exit status, or with exit 1 and an error that says out of memory;
# never a hang. Each runs in well under a second here; 30 s is the bound on a loaded machine, and
# a command still running then is reported with what each of its threads waits in (from /proc)
# before it is killed. OpenBLAS, whose pthread build would start a thread and
# a 128 MiB work buffer per core and retry a failed mapping forever, loads only for gemm and
# search (runtime/base/pl_blas.h), and those two run here too, the search with 16 threads.
set -u
pipectl=$(realpath "$1") src=$(realpath "$2")
# The sanitizers' shadow memory does not fit under these limits.
if grep -qaE '__(asan|tsan)_init' "$pipectl"; then
    echo "skip: a sanitizer build"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
err() { echo "FAIL: $*"; fail=1; }
cd "$tmp" || exit 1
cp "$src/pipelines/quickstart.yaml" q.yaml
printf 'pipeline: bad\nstages: [\n' >bad.yaml
cat >g.yaml <<'YAML'
pipeline: g
run: {batches: 3, depth: 2, seed: 5}
buffers:
  a: {where: device, dtype: f32, shape: [256, 256], persistent: true, init: random}
  b: {where: device, dtype: f32, shape: [256, 256], persistent: true, init: random}
  c: {where: device, dtype: f32, shape: [256, 256]}
  c_host: {where: host, dtype: f32, shape: [256, 256]}
stages:
  - {name: mm, kind: kernel, op: gemm, reads: [a, b], writes: [c]}
  - {name: down, kind: d2h, from: c, to: c_host}
  - {name: keep, kind: sink, from: c_host, to: out/c.npy}
YAML
cat >s.yaml <<'YAML'
pipeline: s
run: {batches: 3, depth: 2, seed: 7}
buffers:
  queries: {where: host, dtype: f32, shape: [64, 64]}
  corpus: {where: host, dtype: f32, shape: [65536, 64], persistent: true, init: random}
  ids: {where: host, dtype: i32, shape: [64, 4]}
stages:
  - {name: embed, kind: source, to: queries, generator: random}
  - {name: retrieve, kind: search, queries: queries, corpus: corpus, k: 4, metric: ip, ids: ids, threads: 16}
  - {name: save, kind: sink, from: ids, to: out/ids.npy}
YAML
cat >t.yaml <<'YAML'
pipeline: t
run: {batches: 2, seed: 3}
buffers:
  x: {where: host, dtype: f32, shape: [64]}
stages:
  - {name: gen, kind: source, to: x, generator: random}
  - {name: keep, kind: sink, from: x, to: out/t.npy}
YAML

# under MB WANT_RC CMD...: the command under `ulimit -v MB MiB`; its exit status must be WANT_RC,
# or 1 with "out of memory" on stderr.
under() {
    local mb=$1 want=$2
    shift 2
    (ulimit -v $((mb * 1024)) && exec "$@") >o 2>e &
    local pid=$! waited=0 rc
    while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt 300 ]; do
        sleep 0.1
        waited=$((waited + 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
        local t stuck=""
        for t in /proc/"$pid"/task/*; do
            stuck="$stuck ${t##*/}:$(cat "$t/comm" 2>/dev/null)@$(cat "$t/wchan" 2>/dev/null)/$(cut -d' ' -f1 "$t/syscall" 2>/dev/null)"
        done
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        err "ulimit -v $((mb * 1024)): '$*' still running after 30 s (thread:name@wait/syscall:$stuck): $(head -c 300 e)"
        return 0
    fi
    wait "$pid"
    rc=$?
    if [ "$rc" -eq "$want" ]; then
        return 0
    elif [ "$rc" -eq 1 ] && grep -q "out of memory" e; then
        return 0
    fi
    err "ulimit -v $((mb * 1024)): '$*' exited $rc (want $want, or 1 saying out of memory): $(head -c 300 e)"
}

for mb in 100 200 400; do
    under $mb 0 "$pipectl" version
    grep -q '^blas: ' o || [ "$fail" = 1 ] || grep -q "out of memory" e ||
        err "ulimit $mb MiB: version printed no blas line: $(cat o)"
    under $mb 0 "$pipectl" help
    under $mb 0 "$pipectl" check q.yaml
    under $mb 2 "$pipectl" check bad.yaml
    under $mb 0 "$pipectl" plan q.yaml
    under $mb 0 "$pipectl" schema
    under $mb 0 "$pipectl" run --executor host -q q.yaml
    under $mb 0 "$pipectl" run --executor host -q g.yaml
    under $mb 0 "$pipectl" run --executor host -q s.yaml
    rm -rf "b$mb"
    under $mb 0 "$pipectl" capture --quiet --executor host --reps 1 t.yaml -o "b$mb"
    if [ -f "b$mb/manifest.json" ]; then
        under $mb 0 "$pipectl" replay --executor host "b$mb"
    fi
done
# With room, gemm and search run (the limits above may refuse them with out of memory).
under 1024 0 "$pipectl" run --executor host -q g.yaml
[ -s out/c.npy ] || err "gemm under 1 GiB wrote no out/c.npy"
under 1024 0 "$pipectl" run --executor host -q s.yaml
[ -s out/ids.npy ] || err "search under 1 GiB wrote no out/ids.npy"
exit $fail
