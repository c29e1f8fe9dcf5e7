#!/bin/bash
# test_check_files: `pipectl check` is the one gate for files: each error a run would hit at open
# or at batch N is reported before anything runs, exit 2, with file:line:col of the option and
# the exact message below; several errors are all reported (up to 20, then a count); `pipectl
# run` refuses the same pipelines with exit 2 and creates no output.
set -u
pipectl=$1 build=$3
work=$build/check_files
rm -rf "$work"
mkdir -p "$work"
cd "$work" || exit 1
fail=0
say_fail() { echo "FAIL: $*"; fail=1; }

# mknpy FILE DESCR SHAPE DATA_BYTES: a .npy v1.0 header for SHAPE ("(32, 128)") + zero bytes.
mknpy() {
    local dict="{'descr': '$2', 'fortran_order': False, 'shape': $3, }"
    local total=$(((10 + ${#dict} + 1 + 63) / 64 * 64))
    local hl=$((total - 10))
    {
        printf '\x93NUMPY\x01\x00'
        printf "\\x$(printf %02x $((hl & 255)))\\x$(printf %02x $((hl >> 8)))"
        printf '%s' "$dict"
        printf '%*s' $((hl - ${#dict} - 1)) ''
        printf '\n'
        head -c "$4" /dev/zero
    } >"$1"
}
mknpy good.npy '<f4' '(10, 128, 32)' $((10 * 128 * 32 * 4))
mknpy wrong_dtype.npy '<i4' '(10, 128, 32)' $((10 * 128 * 32 * 4))
mknpy transposed.npy '<f4' '(10, 32, 128)' $((10 * 128 * 32 * 4))
mknpy huge.npy '<f4' '(4611686018427387903,)' 4096
mknpy init_t.npy '<f4' '(32, 128)' $((128 * 32 * 4))
head -c $((3 * 16384 + 100)) /dev/zero >ragged.bin
head -c $((3 * 16384)) /dev/zero >three.bin
echo "not a dir" >afile

# case NAME 'EXPECTED STDERR' STAGE_LINE...: a pipeline of 4 batches of f32 [128, 32] (16 KiB).
case_() {
    local name=$1 want=$2
    shift 2
    {
        echo "run: {batches: 4}"
        echo "buffers:"
        echo "  x: {dtype: f32, shape: [128, 32]}"
        echo "  w: {dtype: f32, shape: [128, 32], persistent: true, init: file, file: ${W:-good1.npy}}"
        echo "stages:"
        for l in "$@"; do echo "  $l"; done
    } >"$name.yaml"
    "$pipectl" check "$name.yaml" >"$name.out" 2>"$name.err"
    local rc=$?
    [ $rc = 2 ] || say_fail "$name: check exit $rc, expected 2 ($(cat "$name.err"))"
    [ "$(cat "$name.err")" = "$want" ] || { say_fail "$name: stderr differs"; diff <(echo "$want") "$name.err" | sed 's/^/    /'; }
    rm -rf out
    "$pipectl" run --executor host --quiet "$name.yaml" >/dev/null 2>"$name.run.err"
    rc=$?
    [ $rc = 2 ] || say_fail "$name: run exit $rc, expected 2"
    [ ! -e out ] || say_fail "$name: run created outputs"
}
mknpy good1.npy '<f4' '(128, 32)' $((128 * 32 * 4))
S="- {name: save, kind: sink, from: x, to: out/x.npy}"

case_ missing "missing.yaml:6:44: error: source 'src': cannot open 'nope.npy': No such file or directory" \
    "- {name: src, kind: source, to: x, file: nope.npy}" "$S"
case_ dtype "dtype.yaml:6:44: error: source 'src': 'wrong_dtype.npy' holds '<i4' but buffer 'x' is f32; save it as numpy dtype '<f4' in C order, or set cast: f32 to convert it at read" \
    "- {name: src, kind: source, to: x, file: wrong_dtype.npy}" "$S"
case_ transposed "transposed.yaml:6:44: error: source 'src': 'transposed.npy' holds an array of shape (10, 32, 128), but batches of buffer 'x' need shape (N, 128, 32); a transposed or reshaped array would be read in the wrong order: save it with that shape" \
    "- {name: src, kind: source, to: x, file: transposed.npy}" "$S"
case_ overflow "overflow.yaml:6:44: error: source 'src': 'huge.npy': the .npy header's shape (4611686018427387903,) of '<f4' is more than 2^63 bytes; the header is corrupt: write the file again with numpy.save" \
    "- {name: src, kind: source, to: x, file: huge.npy}" "$S"
case_ short "short.yaml:6:44: error: source 'src': three.bin holds 3 batches of 16384 bytes, the run needs 4: batch 3 is the first it cannot fill; set wrap: true or run fewer batches" \
    "- {name: src, kind: source, to: x, file: three.bin}" "$S"
case_ ragged "ragged.yaml:6:44: error: source 'src': 'ragged.bin' holds 49252 bytes, not a whole number of batches of 16384 bytes (buffer 'x'): the last 100 bytes would be ignored; trim the file to whole batches or change the buffer's shape" \
    "- {name: src, kind: source, to: x, file: ragged.bin, wrap: true}" "$S"
W=init_t.npy case_ init_shape "init_shape.yaml:4:61: error: buffer 'w' has shape [128, 32] but 'init_t.npy' holds an array of shape (32, 128); save it with the buffer's shape (a transposed or reshaped array would be read in the wrong order)" \
    "- {name: src, kind: source, to: x}" "$S"
case_ unwritable "unwritable.yaml:7:43: error: sink 'save': cannot create 'afile/x.npy': 'afile' is not a directory" \
    "- {name: src, kind: source, to: x}" "- {name: save, kind: sink, from: x, to: afile/x.npy}"
# Every error is reported, in order, not only the first.
case_ several "several.yaml:6:45: error: source 'src1': cannot open 'nope1.npy': No such file or directory
several.yaml:7:45: error: source 'src2': 'wrong_dtype.npy' holds '<i4' but buffer 'x' is f32; save it as numpy dtype '<f4' in C order, or set cast: f32 to convert it at read
several.yaml:9:43: error: sink 'save': cannot create 'afile/x.npy': 'afile' is not a directory" \
    "- {name: src1, kind: source, to: x, file: nope1.npy}" \
    "- {name: src2, kind: source, to: x, file: wrong_dtype.npy, after: [src1]}" \
    "- {name: src3, kind: source, to: x, file: good.npy, after: [src2]}" \
    "- {name: save, kind: sink, from: x, to: afile/x.npy, after: [src3]}"
# Past 20 errors, a count.
lines=()
for i in $(seq 1 25); do lines+=("- {name: s$i, kind: source, to: x$i, file: none$i.bin}"); done
{
    echo "buffers:"
    for i in $(seq 1 25); do echo "  x$i: {dtype: f32, shape: [4]}"; done
    echo "stages:"
    for l in "${lines[@]}"; do echo "  $l"; done
} >many.yaml
"$pipectl" check many.yaml >/dev/null 2>many.err
rc=$?
[ $rc = 2 ] || say_fail "many: exit $rc"
[ "$(grep -c ': error: ' many.err)" = 20 ] || say_fail "many: $(grep -c ': error: ' many.err) errors shown, expected 20"
[ "$(tail -1 many.err)" = "many.yaml: 5 more errors not shown (the first 20 are above)" ] || say_fail "many: last line '$(tail -1 many.err)'"
# Spec errors are listed together too: three bad stages of one phase.
cat >spec3.yaml <<'YAML'
buffers:
  x: {dtype: f32, shape: [4]}
stages:
  - {name: a, kind: source, to: y}
  - {name: b, kind: sink, from: z}
  - {name: c, kind: sink, from: x, after: [nobody]}
YAML
"$pipectl" check spec3.yaml >/dev/null 2>spec3.err
[ "$(wc -l <spec3.err)" = 3 ] || say_fail "spec3: $(cat spec3.err)"
# A good pipeline with files passes.
printf 'run: {batches: 10}\nbuffers:\n  x: {dtype: f32, shape: [128, 32]}\nstages:\n  - {name: src, kind: source, to: x, file: good.npy}\n  - {name: save, kind: sink, from: x, to: out/x.npy}\n' >ok.yaml
"$pipectl" check ok.yaml >/dev/null 2>ok.err || say_fail "ok.yaml: $(cat ok.err)"
echo "check-time file errors: $fail failure(s)"
exit $fail
