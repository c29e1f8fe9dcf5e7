# test_index_cli: `pipectl index build|info` through the binary: exit codes and messages for bad
# usage, a missing corpus and a corrupt index; with FAISS in the build, an index built from a .npy
# corpus answers a search stage like the exact search (Flat), and `info` describes it.
set -u
pipectl=$1 tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
expect() { # expect RC EXPECTED-STDERR-SUBSTRING CMD...
    local want=$1 text=$2
    shift 2
    local out rc
    out=$("$@" 2>&1)
    rc=$?
    if [ "$rc" != "$want" ] || [[ "$out" != *"$text"* ]]; then
        echo "FAIL: $* -> rc $rc (want $want), output: $out (want: $text)"
        fail=1
    fi
}
expect 2 "'pipectl index' needs 'build' or 'info'" "$pipectl" index
expect 2 "'pipectl index build' needs --corpus FILE.npy, --factory STRING and -o FILE" \
    "$pipectl" index build --corpus x.npy
expect 2 "--metric must be ip, l2 or cosine, got 'dot'" \
    "$pipectl" index build --corpus x.npy --factory Flat -o y --metric dot
if "$pipectl" index build --corpus /nonexistent.npy --factory Flat -o "$tmp/i" 2>&1 |
    grep -q "built without"; then
    expect 2 "this pipectl was built without it" "$pipectl" index info "$tmp/i"
    echo "FAISS not in this build: usage errors checked"
    exit $fail
fi
expect 2 "error: cannot open corpus '/nonexistent.npy'" \
    "$pipectl" index build --corpus /nonexistent.npy --factory Flat -o "$tmp/i"
echo "not an index" >"$tmp/bad.faiss"
expect 2 "error: cannot load FAISS index '$tmp/bad.faiss'" "$pipectl" index info "$tmp/bad.faiss"
# A 300 x 8 f32 corpus as .npy (header padded to 128 bytes), written by the search pipeline's own
# source: pipectl writes it with a sink.
cat >"$tmp/make.yaml" <<YAML
run: {batches: 1, seed: 5}
buffers:
  c: {dtype: f32, shape: [300, 8]}
stages:
  - {name: g, kind: source, to: c, generator: random}
  - {name: s, kind: sink, from: c, to: $tmp/c.npy}
YAML
"$pipectl" run --executor host --quiet "$tmp/make.yaml" >/dev/null || { echo "FAIL: make corpus"; exit 1; }
# The sink wrote [1, 300, 8]: leading dimensions count as rows.
expect 2 "FAISS cannot make an index from factory string 'IVFxx'" \
    "$pipectl" index build --corpus "$tmp/c.npy" --factory IVFxx -o "$tmp/c.faiss"
expect 0 "wrote $tmp/c.faiss: Flat over 300 x 8 vectors (l2)" \
    "$pipectl" index build --corpus "$tmp/c.npy" --factory Flat --metric l2 -o "$tmp/c.faiss"
expect 0 "$tmp/c.faiss: IndexFlatL2, 300 vectors of dimension 8, metric l2" \
    "$pipectl" index info "$tmp/c.faiss"
# The index answers a search stage as the exact search over the same corpus does.
for mode in corpus index; do
    if [ $mode = corpus ]; then src="corpus: c"; else src="index: $tmp/c.faiss"; fi
    cat >"$tmp/s.yaml" <<YAML
run: {batches: 3, seed: 9}
buffers:
  c: {dtype: f32, shape: [300, 8], persistent: true, init: file, file: $tmp/c.npy}
  q: {dtype: f32, shape: [16, 8]}
  ids: {dtype: i32, shape: [16, 4]}
stages:
  - {name: g, kind: source, to: q, generator: random}
  - {name: s, kind: search, queries: q, $src, k: 4, metric: l2, ids: ids}
  - {name: o, kind: sink, from: ids, to: $tmp/ids_$mode.npy}
YAML
    "$pipectl" run --executor host --quiet "$tmp/s.yaml" >/dev/null 2>"$tmp/err" ||
        { echo "FAIL: search with $mode: $(cat "$tmp/err")"; fail=1; }
done
cmp -s "$tmp/ids_corpus.npy" "$tmp/ids_index.npy" || { echo "FAIL: the Flat index's hits differ from the exact search"; fail=1; }
[ $fail = 0 ] && echo "index build, info and search: ok"
exit $fail
