#!/bin/bash
# test_out_dir: `--out-dir DIR` (docs/pipeline-yaml.md, "Where files go"): run and capture write
# the sinks' relative paths under DIR, made with its parents, and nothing beside the pipeline;
# sources still read relative to the pipeline's folder; absolute sink paths stay where they are;
# check resolves the sinks' paths in DIR and creates nothing.
# usage: test_out_dir.sh PIPECTL SOURCE_DIR BUILD_DIR
set -u
pipectl=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
err() {
    echo "FAIL: $*"
    fail=$((fail + 1))
}
mkdir -p "$tmp/p" "$tmp/cwd"
cd "$tmp/cwd" || exit 2
# An input next to the pipeline (read relative to it), two relative sinks and an absolute one.
cat >"$tmp/p/make.yaml" <<'YAML'
run: {batches: 2}
buffers:
  x: {dtype: f32, shape: [4]}
stages:
  - {name: gen, kind: source, to: x, generator: random}
  - {name: save, kind: sink, from: x, to: in.npy}
YAML
"$pipectl" run --quiet --executor host "$tmp/p/make.yaml" || err "making the input failed"
cat >"$tmp/p/p.yaml" <<YAML
run: {batches: 2}
buffers:
  x: {dtype: f32, shape: [4]}
stages:
  - {name: load, kind: source, to: x, file: in.npy}
  - {name: a, kind: sink, from: x, to: a.npy}
  - {name: b, kind: sink, from: x, to: sub/b.bin}
  - {name: c, kind: sink, from: x, to: $tmp/abs/c.npy}
YAML
cat >"$tmp/p/nosink.yaml" <<'YAML'
run: {batches: 1}
buffers:
  x: {dtype: f32, shape: [4]}
stages:
  - {name: gen, kind: source, to: x, generator: random}
YAML
before=$(cd "$tmp/p" && find . | sort)

# 1. run: DIR (and its parents) made, the relative sinks under it, the absolute one where it says.
"$pipectl" run --quiet --executor host --out-dir o/deep "$tmp/p/p.yaml" || err "run --out-dir failed"
for f in o/deep/a.npy o/deep/sub/b.bin "$tmp/abs/c.npy"; do
    [ -f "$f" ] || err "run: no $f"
done
cmp -s o/deep/a.npy "$tmp/p/in.npy" || err "run: the source did not read the pipeline's in.npy"
[ "$(cd "$tmp/p" && find . | sort)" = "$before" ] || err "run: files appeared beside the pipeline: $(cd "$tmp/p" && find . | sort)"

# 2. DIR as an absolute path, and a DIR without sinks to write: made anyway.
"$pipectl" run --quiet --executor host --out-dir "$tmp/absout" "$tmp/p/p.yaml" || err "run --out-dir ABS failed"
[ -f "$tmp/absout/a.npy" ] || err "run: no $tmp/absout/a.npy"
"$pipectl" run --quiet --executor host --out-dir empty/made "$tmp/p/nosink.yaml" || err "run with no sink failed"
[ -d empty/made ] || err "run: --out-dir empty/made was not made"

# 3. check: the sinks' paths are checked in DIR, and nothing is made.
"$pipectl" check --out-dir never/made "$tmp/p/p.yaml" >/dev/null || err "check --out-dir failed"
[ ! -e never ] || err "check made --out-dir"
touch afile
out=$("$pipectl" check --out-dir afile "$tmp/p/p.yaml" 2>&1)
[ $? = 2 ] || err "check --out-dir onto a file: not exit 2: $out"
out=$("$pipectl" run --quiet --executor host --out-dir afile "$tmp/p/p.yaml" 2>&1)
[ $? = 2 ] || err "run --out-dir onto a file: not exit 2: $out"

# 4. capture: the runs' outputs under DIR, nothing beside the pipeline, and the bundle replays.
"$pipectl" capture --quiet --executor host --reps 1 --out-dir co "$tmp/p/p.yaml" -o bundle ||
    err "capture --out-dir failed"
[ -f co/a.npy ] && [ -f co/sub/b.bin ] || err "capture: no outputs under co/"
[ "$(cd "$tmp/p" && find . | sort)" = "$before" ] || err "capture: files appeared beside the pipeline: $(cd "$tmp/p" && find . | sort)"
"$pipectl" replay bundle >/dev/null 2>&1 || err "the bundle of capture --out-dir does not replay"

[ $fail = 0 ] && echo "test_out_dir: ok"
exit $((fail > 0))
