#!/bin/bash
# test_bundle_closed: a bundle is closed (docs/bundles.md, "What a bundle may contain"): replay and
# diff open its files without following links and refuse, naming it, exit 2:
# (a) an input replaced by a symlink to a file outside, with --allow-changed-inputs too, and the
#     target never opened (strace when there is one; a FIFO target, which would block an open);
# (b) inputs/ itself a symlink to a folder; (c) a FIFO in place of an input; (d) a manifest entry
#     naming ../x or an absolute path, and a bundled pipeline reading ../x; (e) pipeline.yaml a
#     symlink; (f) diff of a bundle with a symlink inside; (g) an untouched bundle still replays
#     and matches. Replay warns about a sink that writes outside the bundle or through a link in
#     its --out folder, and a relative --out puts nothing inside the bundle.
# usage: test_bundle_closed.sh PIPECTL SOURCE_DIR BUILD_DIR
set -u
pipectl=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
err() {
    echo "FAIL: $*"
    fail=$((fail + 1))
}
cd "$tmp" || exit 2

# expect RC MESSAGE CMD...: CMD (under a timeout: a FIFO opened would block) exits RC and its
# stderr has the line MESSAGE.
expect() {
    local want=$1 msg=$2
    shift 2
    local out rc
    out=$(timeout 20 "$@" 2>&1 >/dev/null)
    rc=$?
    [ $rc -eq "$want" ] || err "$*: exited $rc, expected $want: $out"
    printf '%s\n' "$out" | grep -qxF -- "$msg" || err "$*: no line '$msg' in: $out"
}

head -c 8192 /dev/urandom >in.raw
cat >tiny.yaml <<'YAML'
pipeline: tiny
run: {batches: 4, depth: 2, seed: 1}
buffers:
  x: {where: host, dtype: f32, shape: [512]}
stages:
  - {name: read, kind: source, to: x, file: in.raw, wrap: true}
  - {name: keep, kind: sink, from: x, to: out/x.raw}
YAML
mkdir out
"$pipectl" capture --quiet --executor host --reps 1 --copy-inputs --copy-outputs tiny.yaml -o b ||
    { echo "FAIL: capture exited $?"; exit 1; }
[ -f b/inputs/0-in.raw ] || { echo "FAIL: no b/inputs/0-in.raw: $(ls -R b)"; exit 1; }
printf 'known bytes outside the bundle' >outside.raw
mkfifo outside.fifo

# (g) The untouched bundle replays and matches; diff of it with itself agrees.
out=$("$pipectl" replay b 2>&1) || err "untouched bundle: replay exited $?: $out"
echo "$out" | grep -q "every checksum matches (bit for bit)" || err "untouched bundle: $out"
"$pipectl" diff b b >/dev/null 2>&1 || err "untouched bundle: diff b b exited $?"

# (a) An input replaced by a symlink to a file outside.
cp -r b a
ln -sf "$tmp/outside.raw" a/inputs/0-in.raw
msg="error: bundle a: inputs/0-in.raw is a symlink to $tmp/outside.raw: a bundle holds regular files only"
expect 2 "$msg" "$pipectl" replay a
expect 2 "$msg" "$pipectl" replay --allow-changed-inputs a
expect 2 "$msg" "$pipectl" replay --json a
"$pipectl" replay --json a 2>/dev/null | grep -q '"exit_code": 2' || err "replay --json: no exit_code 2"
if command -v strace >/dev/null && strace -f -o /dev/null true 2>/dev/null; then
    strace -f -e trace=open,openat -o a.strace "$pipectl" replay --allow-changed-inputs a >/dev/null 2>&1
    grep -q 'outside\.raw' a.strace && err "replay opened the link's target: $(grep outside a.strace)"
    grep -q '"manifest\.json"' a.strace || err "strace saw no open of the manifest: $(grep -v '/lib' a.strace | head -20)"
else
    echo "no usable strace: the FIFO target below proves the target is not opened"
fi
# The same with a FIFO outside as the target: opening it would block (the timeout would end it).
cp -r b af
ln -sf "$tmp/outside.fifo" af/inputs/0-in.raw
msg="error: bundle af: inputs/0-in.raw is a symlink to $tmp/outside.fifo: a bundle holds regular files only"
expect 2 "$msg" "$pipectl" replay af
expect 2 "$msg" "$pipectl" replay --allow-changed-inputs af
echo "(a) an input as a symlink out: refused, the target never opened"

# (b) inputs/ a symlink to a folder holding the same files.
cp -r b bi
mv bi/inputs ext
ln -s "$tmp/ext" bi/inputs
expect 2 "error: bundle bi: inputs/ is a symlink to $tmp/ext: a bundle holds regular files only" \
    "$pipectl" replay --allow-changed-inputs bi
echo "(b) inputs/ as a symlink: refused"

# (c) A FIFO in place of an input.
cp -r b bf
rm bf/inputs/0-in.raw
mkfifo bf/inputs/0-in.raw
expect 2 "error: bundle bf: inputs/0-in.raw is a FIFO: a bundle holds regular files only" \
    "$pipectl" replay --allow-changed-inputs bf
echo "(c) a FIFO as an input: refused"

# (d) Manifest entries naming a path out of the bundle; a bundled pipeline reading one.
edit() { # edit DIR PYTHON: runs PYTHON on m, DIR's manifest
    python3 -c "import json, sys
m = json.load(open(sys.argv[1] + '/manifest.json'))
$2
json.dump(m, open(sys.argv[1] + '/manifest.json', 'w'), indent=2)" "$1"
}
cp -r b bd
edit bd "m['inputs'][0]['bundled'] = '../x'"
expect 2 "error: bundle bd: ../x (the manifest's inputs[0].bundled) climbs out of the bundle: a bundle holds regular files only, under its own folder" \
    "$pipectl" replay --allow-changed-inputs bd
cp -r b bd2
edit bd2 "m['files'].append({'path': 'outputs/../../outside.raw', 'sha256': '0' * 64, 'bytes': 1})"
n=$(python3 -c "import json; print(len(json.load(open('bd2/manifest.json'))['files']) - 1)")
expect 2 "error: bundle bd2: outputs/../../outside.raw (the manifest's files[$n].path) climbs out of the bundle: a bundle holds regular files only, under its own folder" \
    "$pipectl" replay bd2
cp -r b bd3
edit bd3 "m['files'][0]['path'] = '$tmp/outside.raw'"
expect 2 "error: bundle bd3: $tmp/outside.raw (the manifest's files[0].path) is an absolute path: a bundle holds regular files only, under its own folder" \
    "$pipectl" replay bd3
cp -r b bd4
sed -i 's|"inputs/0-in.raw"|"../outside.raw"|' bd4/pipeline.yaml
grep -q '"../outside.raw"' bd4/pipeline.yaml || err "sed did not edit bd4/pipeline.yaml: $(grep file: bd4/pipeline.yaml)"
expect 2 "error: bundle bd4: stage 'read' (file) of the bundled pipeline reads ../outside.raw, which climbs out of the bundle: a bundle holds regular files only, under its own folder" \
    "$pipectl" replay --allow-changed-inputs bd4
echo "(d) paths out of the bundle: refused"

# (e) pipeline.yaml a symlink (to a file inside the bundle, even).
cp -r b be
mv be/pipeline.yaml be/other.yaml
ln -s other.yaml be/pipeline.yaml
expect 2 "error: bundle be: pipeline.yaml is a symlink to other.yaml: a bundle holds regular files only" \
    "$pipectl" replay --allow-changed-inputs be
echo "(e) pipeline.yaml as a symlink: refused"

# (f) diff refuses a bundle with a symlink inside, either side, and --json says so.
expect 2 "error: bundle be: pipeline.yaml is a symlink to other.yaml: a bundle holds regular files only" \
    "$pipectl" diff b be
expect 2 "error: bundle a: inputs/0-in.raw is a symlink to $tmp/outside.raw: a bundle holds regular files only" \
    "$pipectl" diff a b
"$pipectl" diff --json b a 2>/dev/null | grep -q '"exit_code": 2' || err "diff --json: no exit_code 2"
echo "(f) diff of a bundle with a symlink: refused"

# Sinks: a bundled pipeline writing outside the bundle is warned about and confined to the replay
# folder; a link in --out DIR is warned about; a relative --out DIR is not inside the bundle.
cp -r b bs
sed -i "s|\"outputs/keep-x.raw\"|\"$tmp/abs/x.raw\"|" bs/pipeline.yaml
mkdir ro
out=$("$pipectl" replay -q --allow-changed-inputs --out ro bs 2>&1) || err "bs: replay exited $?: $out"
echo "$out" | grep -qxF "warning: sink 'keep' of the bundled pipeline writes $tmp/abs/x.raw, outside the bundle: replay writes $tmp/ro/x.raw instead; a run of bs/pipeline.yaml would write $tmp/abs/x.raw (give its \`to:\` a path under outputs/, as capture does, to keep it inside)" ||
    err "bs: no warning about the sink: $out"
[ "$(echo "$out" | grep -c '^warning: ')" -eq 1 ] || err "bs: not one warning line: $out"
[ -e abs ] && err "bs: the replay wrote where the bundled pipeline says: $(ls abs)"
[ -f ro/x.raw ] || err "bs: no ro/x.raw: $(ls ro)"
ln -s "$tmp/elsewhere.raw" ro/keep-x.raw
out=$("$pipectl" replay -q --out ro b 2>&1) || err "--out with a link: replay exited $?: $out"
echo "$out" | grep -qxF "warning: sink 'keep' writes $tmp/ro/keep-x.raw, a symlink to $tmp/elsewhere.raw: the replay writes where it leads, outside its folder (remove the link, or give --out an empty folder)" ||
    err "--out with a link: no warning: $out"
"$pipectl" replay -q b 2>&1 | grep -q '^warning' && err "untouched bundle: a warning"
"$pipectl" replay -q --out rel b >/dev/null 2>&1 || err "--out rel: replay exited $?"
[ -f rel/keep-x.raw ] || err "--out rel: no rel/keep-x.raw: $(ls -R rel b 2>&1 | head)"
[ -e b/rel ] && err "--out rel: the replay wrote inside the bundle: $(ls b/rel)"
echo "sinks: writes outside the bundle and links in --out warned about"

[ $fail -eq 0 ] && echo "test_bundle_closed: all passed"
exit $((fail > 0))
