#!/bin/bash
# test_sink_targets: where sinks write, and what they refuse (docs/pipeline-yaml.md, "Sink
# targets"): two runs on one file (the second fails at start naming the first's process; the
# first's output is intact), the output directory deleted mid-run (the batches are saved again and
# the message says so), a FIFO and /dev/null and `-` (written through, never replaced), a symlink
# (followed: the link stays, its target gets the data), and, at check time with exit 2: a
# directory as target, a .npy into a FIFO, one file named two ways by two sinks.
set -u
pipectl=$1 build=$3
work=$build/sink_targets
rm -rf "$work"
mkdir -p "$work"
fail=0
say_fail() { echo "FAIL: $*"; fail=1; }
B=1024 # bytes per batch: f32 [64, 4]
hlen() { echo $((10 + $(od -An -tu2 -j8 -N2 "$1"))); }
rows() { head -c "$(hlen "$1")" "$1" | grep -ao "'shape': ([0-9]*" | grep -o '[0-9]*$'; }

pipe() { # FILE TO [BATCHES [BUSY_US]]
    cat >"$1" <<YAML
pipeline: t
run: {batches: ${3:-20}, depth: 2, seed: 3}
buffers:
  x: {dtype: f32, shape: [64, 4]}
stages:
  - {name: gen, kind: source, to: x, generator: random}
  - {name: slow, kind: lua, reads: [x], code: "function run() local t = os.clock() while os.clock() - t < ${4:-0} / 1e6 do end end"}
  - {name: save, kind: sink, from: x, to: "$2", after: [slow]}
YAML
}
# The reference: raw bytes of 20 batches.
pipe "$work/ref.yaml" out/ref.bin
"$pipectl" run --executor host --quiet "$work/ref.yaml" || say_fail "reference run failed"
ref=$work/out/ref.bin
[ "$(stat -c %s "$ref" 2>/dev/null)" = $((20 * B)) ] || say_fail "reference output has the wrong size"

# 1. Two runs writing one file: the second fails at start, naming the file and the first process.
pipe "$work/a.yaml" out/shared.npy 200 10000
pipe "$work/b.yaml" out/shared.npy 20
"$pipectl" run --executor host --quiet "$work/a.yaml" 2>"$work/a.err" &
pa=$!
for _ in $(seq 1 3000); do [ -f "$work/out/shared.npy.partial" ] && break; sleep 0.01; done # up to 30 s: a loaded machine starts slowly
"$pipectl" run --executor host --quiet "$work/b.yaml" 2>"$work/b.err"
rc=$?
[ $rc = 1 ] || say_fail "second writer: exit $rc, expected 1"
grep -q "b.yaml:8:43: error: sink 'save': '$work/out/shared.npy' is being written by another run (process $pa), which holds the lock on '$work/out/shared.npy.partial'; wait for it to finish, or give this sink another 'to'" "$work/b.err" ||
    say_fail "second writer: message: $(cat "$work/b.err")"
wait $pa || say_fail "first writer failed: $(cat "$work/a.err")"
[ "$(rows "$work/out/shared.npy")" = 200 ] && [ "$(stat -c %s "$work/out/shared.npy")" = $(($(hlen "$work/out/shared.npy") + 200 * B)) ] ||
    say_fail "first writer's output is not 200 whole batches"
echo "two writers: the second exits $rc naming process $pa; the first's 200 batches are intact"

# 2. The output directory removed mid-run: the batches are saved again, and the message says so.
pipe "$work/del.yaml" out/del/x.npy 60 20000
"$pipectl" run --executor host --quiet "$work/del.yaml" 2>"$work/del.err" &
pd=$!
for _ in $(seq 1 3000); do # up to 30 s: a loaded machine starts slowly
    p=$work/out/del/x.npy.partial
    [ -f "$p" ] && [ "$(stat -c %s "$p")" -gt $((3 * B)) ] && break
    sleep 0.01
done
rm -rf "$work/out/del"
wait $pd
rc=$?
[ $rc = 1 ] || say_fail "deleted directory: exit $rc, expected 1"
grep -q "^error: sink 'save': '$work/out/del/x.npy.partial' was deleted during the run (was its directory removed?); the 60 batches written were saved again to '$work/out/del/x.npy'$" "$work/del.err" ||
    say_fail "deleted directory: message: $(cat "$work/del.err")"
f=$work/out/del/x.npy
[ -f "$f" ] && [ "$(rows "$f")" = 60 ] && [ "$(stat -c %s "$f")" = $(($(hlen "$f") + 60 * B)) ] ||
    say_fail "deleted directory: $f is not 60 whole batches"
[ ! -e "$f.partial" ] || say_fail "deleted directory: .partial left"
echo "deleted directory: exit $rc, the 60 batches saved again"

# 3. A FIFO: written through, still a FIFO afterwards, bytes equal to a file's.
mkfifo "$work/out/fifo"
timeout 20 cat "$work/out/fifo" >"$work/fifo.got" &
pc=$!
pipe "$work/fifo.yaml" out/fifo
timeout 20 "$pipectl" run --executor host --quiet "$work/fifo.yaml" 2>"$work/fifo.err" || say_fail "FIFO run: $(cat "$work/fifo.err")"
wait $pc
[ -p "$work/out/fifo" ] || say_fail "the FIFO was replaced"
cmp -s "$work/fifo.got" "$ref" || say_fail "bytes read from the FIFO differ from a file's"
[ ! -e "$work/out/fifo.partial" ] || say_fail "FIFO: .partial created"
# /dev/null: a character device, left as it is.
pipe "$work/null.yaml" /dev/null
"$pipectl" run --executor host --quiet "$work/null.yaml" 2>"$work/null.err" || say_fail "/dev/null run: $(cat "$work/null.err")"
[ -c /dev/null ] || say_fail "/dev/null is not a character device after the run"
# `-`: stdout carries exactly the data; the summary goes to stderr.
pipe "$work/stdout.yaml" -
"$pipectl" run --executor host "$work/stdout.yaml" >"$work/stdout.got" 2>"$work/stdout.err" || say_fail "stdout run: $(cat "$work/stdout.err")"
cmp -s "$work/stdout.got" "$ref" || say_fail "'to: -' did not write exactly the data to stdout"
grep -q "batches" "$work/stdout.err" || say_fail "'to: -': no summary on stderr"
echo "FIFO, /dev/null and -: written through, left as they were"

# 4. A symlink: followed; the link stays and its target holds the data.
mkdir -p "$work/real"
echo old >"$work/real/target.bin"
ln -s ../real/target.bin "$work/out/link.bin"
pipe "$work/link.yaml" out/link.bin
"$pipectl" run --executor host --quiet "$work/link.yaml" 2>"$work/link.err" || say_fail "symlink run: $(cat "$work/link.err")"
[ -L "$work/out/link.bin" ] || say_fail "the symlink was replaced"
cmp -s "$work/real/target.bin" "$ref" || say_fail "the symlink's target does not hold the data"
echo "symlink: followed, the link kept"

# 5. Check-time errors, exit 2, nothing run (an older output is untouched).
expect() { # NAME WANT_MESSAGE FILE
    "$pipectl" check "$3" >/dev/null 2>"$work/$1.err"
    local rc=$?
    [ $rc = 2 ] || say_fail "$1: check exit $rc, expected 2"
    [ "$(cat "$work/$1.err")" = "$2" ] || say_fail "$1: check said '$(cat "$work/$1.err")', expected '$2'"
    "$pipectl" run --executor host --quiet "$3" >/dev/null 2>"$work/$1.run.err"
    rc=$?
    [ $rc = 2 ] || say_fail "$1: run exit $rc, expected 2"
}
mkdir -p "$work/out/adir"
cp "$ref" "$work/out/keep.bin"
cat >"$work/dir.yaml" <<'YAML'
run: {batches: 4}
buffers:
  x: {dtype: f32, shape: [64, 4]}
stages:
  - {name: gen, kind: source, to: x}
  - {name: first, kind: sink, from: x, to: out/keep.bin}
  - {name: save, kind: sink, from: x, to: out/adir}
YAML
expect directory "$work/dir.yaml:7:43: error: sink 'save': '$work/out/adir' is a directory; give a file name, e.g. 'to: out/adir/save.bin'" "$work/dir.yaml"
cmp -s "$work/out/keep.bin" "$ref" || say_fail "directory target: another sink's older output was replaced"
mkfifo "$work/out/np.npy"
pipe "$work/fifonpy.yaml" out/np.npy
expect fifo-npy "$work/fifonpy.yaml:8:43: error: sink 'save': 'out/np.npy' is a FIFO, and a .npy header is completed at the end of the run, which a stream cannot take back; set format: raw" "$work/fifonpy.yaml"
cat >"$work/twice.yaml" <<'YAML'
buffers:
  x: {dtype: f32, shape: [4]}
stages:
  - {name: gen, kind: source, to: x}
  - {name: s1, kind: sink, from: x, to: o/a.npy}
  - {name: s2, kind: sink, from: x, to: ./o//a.npy}
YAML
"$pipectl" check "$work/twice.yaml" >/dev/null 2>"$work/twice.err"
rc=$?
[ $rc = 2 ] || say_fail "two names of one file: exit $rc"
[ "$(cat "$work/twice.err")" = "$work/twice.yaml:6:41: error: sinks 's1' and 's2' both write '$(cd "$work" && pwd -P)/o/a.npy' ('o/a.npy' at line 5 is the same file); give each sink its own file" ] ||
    say_fail "two names of one file: $(cat "$work/twice.err")"
echo "check-time target errors: exit 2 with the expected messages"
exit $fail
