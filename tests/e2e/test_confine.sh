#!/bin/bash
# test_confine: `run --confine` and `run: {confine: true}` (docs/pipeline-yaml.md, "Where files
# go"): refused with exit 2 at file:line:col before anything opens: a sink that escapes with `..`,
# a source that escapes, a symlinked parent folder that leads out, a dangling symlink, an init
# file; accepted: paths inside the folder, inside --out-dir, through a symlink that stays inside,
# and `-`. check --confine says the same as run.
# usage: test_confine.sh PIPECTL SOURCE_DIR BUILD_DIR
set -u
pipectl=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
err() {
    echo "FAIL: $*"
    fail=$((fail + 1))
}
mkdir -p "$tmp/p/data" "$tmp/outside"
p=$(cd "$tmp/p" && pwd -P)
outside=$(cd "$tmp/outside" && pwd -P)
cd "$tmp/p" || exit 2
# An input inside and one outside.
cat >make.yaml <<'YAML'
run: {batches: 2}
buffers:
  x: {dtype: f32, shape: [4]}
stages:
  - {name: gen, kind: source, to: x, generator: random}
  - {name: save, kind: sink, from: x, to: data/in.npy}
YAML
"$pipectl" run --quiet --executor host make.yaml || err "making the input failed"
cp data/in.npy "$outside/in.npy"
ln -s "$outside" escape      # a folder inside that leads out
ln -s data inner             # one that stays inside
ln -s "$outside/none.npy" dangling.npy

pipe() { # FILE SOURCE_FILE SINK_TO [RUN_EXTRA]
    cat >"$1" <<YAML
run: {batches: 2${4:-}}
buffers:
  x: {dtype: f32, shape: [4]}
stages:
  - {name: load, kind: source, to: x, file: $2}
  - {name: save, kind: sink, from: x, to: $3}
YAML
}
# refused CMD_ARGS... : exit 2, the message at file:line:col naming the path and the rule, and
# nothing written.
refused() {
    local want=$1 what=$2
    shift 2
    rm -rf out "$outside/x.npy"
    out=$("$pipectl" "$@" 2>&1)
    rc=$?
    [ $rc = 2 ] || err "$what: exit $rc, expected 2: $out"
    case $out in *"$want"*"run.confine (--confine) allows only paths inside"*) ;;
    *) err "$what: message: $out" ;; esac
    [ ! -e "$outside/x.npy" ] && [ ! -e out ] || err "$what: something was written"
}

# 1. A sink escaping with `..` (run --confine, and the key).
pipe a.yaml data/in.npy ../../../../../../../../../../../../../../etc/x.npy
refused "a.yaml:6:43: error: sink 'save': 'to: ../../../../../../../../../../../../../../etc/x.npy' leads to '/etc/x.npy', outside the pipeline's folder '$p'" \
    "escaping sink" run --quiet --executor host --confine a.yaml
pipe a2.yaml data/in.npy ../outside/x.npy ", confine: true"
refused "a2.yaml:6:43: error: sink 'save': 'to: ../outside/x.npy' leads to '$outside/x.npy'" \
    "escaping sink (run.confine)" run --quiet --executor host a2.yaml
refused "a2.yaml:6:43: error: sink 'save'" "check of an escaping sink" check a2.yaml
# 2. A source escaping (absolute path).
pipe b.yaml "$outside/in.npy" out/x.npy
refused "b.yaml:5:45: error: source 'load': 'file: $outside/in.npy' leads to '$outside/in.npy'" \
    "escaping source" run --quiet --executor host --confine b.yaml
# 3. A symlinked parent folder that leads out: for a sink and for a source.
pipe c.yaml data/in.npy escape/x.npy
refused "sink 'save': 'to: escape/x.npy' leads to '$outside/x.npy'" "sink under a symlink" \
    run --quiet --executor host --confine c.yaml
pipe c2.yaml escape/in.npy out/x.npy
refused "source 'load': 'file: escape/in.npy' leads to '$outside/in.npy'" "source under a symlink" \
    run --quiet --executor host --confine c2.yaml
# a dangling symlink as the sink's file: where it points counts
pipe c3.yaml data/in.npy dangling.npy
refused "sink 'save': 'to: dangling.npy' leads to '$outside/none.npy'" "dangling symlink" \
    run --quiet --executor host --confine c3.yaml
# an init file outside
cat >d.yaml <<YAML
run: {batches: 1, confine: true}
buffers:
  w: {dtype: f32, shape: [2, 4], persistent: true, init: file, file: escape/in.npy}
  x: {dtype: f32, shape: [4]}
stages:
  - {name: gen, kind: source, to: x, generator: random}
  - {name: save, kind: sink, from: w, to: out/w.npy}
YAML
refused "d.yaml:3:58: error: buffer 'w': 'file: escape/in.npy' leads to '$outside/in.npy'" \
    "init file" check d.yaml
# --out-dir outside is allowed for sinks; a path outside both is refused naming both.
pipe e.yaml data/in.npy ../../x.npy
refused "outside the pipeline's folder '$p' and --out-dir '$p/o'" "outside both" \
    run --quiet --executor host --confine --out-dir o e.yaml

# 4. Accepted: inside the folder, through a symlink that stays inside, into --out-dir outside the
# folder, and stdout.
pipe ok.yaml inner/in.npy out/sub/../x.npy
"$pipectl" run --quiet --executor host --confine ok.yaml || err "a path inside was refused"
[ -f out/x.npy ] || err "accepted run wrote no out/x.npy"
pipe ok2.yaml data/in.npy x.npy
"$pipectl" run --quiet --executor host --confine --out-dir "$outside/o" ok2.yaml ||
    err "a sink in --out-dir was refused"
[ -f "$outside/o/x.npy" ] || err "no $outside/o/x.npy"
pipe ok3.yaml data/in.npy - ", confine: true"
"$pipectl" run --quiet --executor host ok3.yaml >/dev/null || err "to: - was refused"
"$pipectl" check --confine ok.yaml >/dev/null || err "check --confine of a good pipeline failed"

[ $fail = 0 ] && echo "test_confine: ok"
exit $((fail > 0))
