#!/bin/bash
# test_data_io: the data users have, in and out. A .npy whose leading dimension splits into
# batches is read ((512, 3) and (8, 64, 3) for [64, 3]), and `layout: rows` writes the shape that
# went in; last_batch: pad / drop over 500 rows (pad writes back exactly 500 rows, drop 448;
# batches: all counts ceil / floor); cast: f32 from f64, cast to u8 refusing 300 with its batch
# and element; a CSV given to a raw source refused at check time; `file: -` reads stdin, padded;
# text and JSONL sources into u8 [B, L] rows with lengths, text and JSONL sinks writing them
# back, numbers as JSON numbers; a failed run keeps the records of its completed batches.
set -u
pipectl=$1 build=$3
work=$build/data_io
rm -rf "$work"
mkdir -p "$work"
cd "$work" || exit 1
fail=0
bad() { echo "FAIL: $*"; fail=1; }

cat >npy.py <<'PY'
import struct, sys
def save(path, descr, shape, data):
    d = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, ", ".join(map(str, shape)) + ("," if len(shape) == 1 else ""))
    total = (10 + len(d) + 1 + 63) // 64 * 64
    with open(path, 'wb') as f:
        f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', total - 10) + d.encode() +
                b' ' * (total - 10 - len(d) - 1) + b'\n' + data)
def load(path):
    b = open(path, 'rb').read()
    hl = struct.unpack('<H', b[8:10])[0]
    return eval(b[10:10 + hl].decode())['shape'], b[10 + hl:]
PY
python3 - <<'PY'
import struct, npy
npy.save('rows.npy', '<f4', (512, 3), struct.pack('<1536f', *range(1536)))
npy.save('nb.npy', '<f4', (8, 64, 3), struct.pack('<1536f', *range(1536)))
npy.save('r500.npy', '<f4', (500, 3), struct.pack('<1500f', *range(1500)))
npy.save('f64.npy', '<f8', (128, 3), struct.pack('<384d', *[i / 10 for i in range(384)]))
npy.save('big.npy', '<i4', (128, 3), struct.pack('<384i', *[300 if i == 200 else i % 256 for i in range(384)]))
open('r130.bin', 'wb').write(struct.pack('<390f', *range(390)))
open('data.csv', 'w').write(''.join('%d,%d,%d\n' % (i, i + 1, i + 2) for i in range(128)))
PY

# pipe NAME FILE SOURCE_EXTRA SINK_EXTRA [DTYPE]: f32 [64, 3] batches from FILE to out/NAME.npy.
pipe() {
    cat >"$1.yaml" <<YAML
run: {batches: all, depth: 3}
buffers:
  x: {dtype: ${5:-f32}, shape: [64, 3]}
stages:
  - {name: src, kind: source, to: x, file: $2$3}
  - {name: save, kind: sink, from: x, to: out/$1.npy$4}
YAML
}
shape_of() { python3 -c "import npy; print(npy.load('$1')[0])"; }

# 1. the leading dimension splits into batches; layout: rows gives back the shape that went in
pipe rows rows.npy "" ", layout: rows"
"$pipectl" run --quiet rows.yaml 2>/dev/null || bad "rows.npy: $("$pipectl" run --quiet rows.yaml 2>&1)"
[ "$(shape_of out/rows.npy)" = "(512, 3)" ] || bad "layout rows: shape $(shape_of out/rows.npy)"
cmp -s rows.npy out/rows.npy || bad "layout rows: not the same file back"
pipe nb nb.npy "" ""
"$pipectl" run --quiet nb.yaml 2>/dev/null || bad "(8, 64, 3): run failed"
[ "$(shape_of out/nb.npy)" = "(8, 64, 3)" ] || bad "layout batches: shape $(shape_of out/nb.npy)"
cmp -s nb.npy out/nb.npy || bad "(8, 64, 3): not the same file back"

# 2. last_batch over 500 rows
pipe r500 r500.npy "" ", layout: rows"
out=$("$pipectl" check r500.yaml 2>&1)
[ "$out" = "r500.yaml:5:44: error: source 'src': 'r500.npy' holds 500 rows, not a whole number of batches of 64 (buffer 'x'): the last batch would have 52 rows; set last_batch: pad (fill it up with pad_value) or last_batch: drop (leave them out), or give whole batches" ] ||
    bad "500 rows: $out"
pipe pad r500.npy ", last_batch: pad, pad_value: -1" ", layout: rows"
[ "$("$pipectl" check pad.yaml 2>&1)" = "pad.yaml: ok (2 stages, 1 buffer; batches: all = 8, what source 'src' holds)" ] ||
    bad "pad: check says $("$pipectl" check pad.yaml 2>&1)"
"$pipectl" run --quiet pad.yaml 2>/dev/null || bad "pad: run failed"
cmp -s r500.npy out/pad.npy || bad "pad + layout rows: not the 500 rows back"
pipe padb r500.npy ", last_batch: pad, pad_value: -1" ""
"$pipectl" run --quiet padb.yaml 2>/dev/null || bad "pad (batches): run failed"
python3 - <<'PY' || bad "pad + layout batches: (8, 64, 3) with -1 after row 500"
import npy, struct
shape, d = npy.load('out/padb.npy')
v = struct.unpack('<%df' % (len(d) // 4), d)
assert shape == (8, 64, 3), shape
assert v[:1500] == tuple(float(i) for i in range(1500)) and set(v[1500:]) == {-1.0}
PY
pipe drop r500.npy ", last_batch: drop" ", layout: rows"
"$pipectl" run --quiet drop.yaml 2>/dev/null || bad "drop: run failed"
[ "$(shape_of out/drop.npy)" = "(448, 3)" ] || bad "drop: shape $(shape_of out/drop.npy)"

# 3. cast
pipe f64 f64.npy "" ""
out=$("$pipectl" check f64.yaml 2>&1)
[ "$out" = "f64.yaml:5:44: error: source 'src': 'f64.npy' holds '<f8' but buffer 'x' is f32; save it as numpy dtype '<f4' in C order, or set cast: f32 to convert it at read" ] ||
    bad "f64 without cast: $out"
pipe cast f64.npy ", cast: f32" ", layout: rows"
"$pipectl" run --quiet cast.yaml 2>/dev/null || bad "cast: run failed"
python3 - <<'PY' || bad "cast: f64 -> f32 not rounded to nearest"
import npy, struct
shape, d = npy.load('out/cast.npy')
assert shape == (128, 3), shape
want = struct.pack('<384f', *[i / 10 for i in range(384)])
assert d == want
PY
pipe u8 big.npy ", cast: u8" "" u8
out=$("$pipectl" run --quiet u8.yaml 2>&1 | grep -v '^executor:')
rc=$?
printf '%s\n' "$out" | grep -qF "error: stage 'src', batch 1: 'big.npy' element 8 of batch 1 (row 66 of the file) is 300, which u8 cannot hold" ||
    bad "cast u8: $out"
pipe castbad f64.npy ", cast: f16" ""
out=$("$pipectl" check castbad.yaml 2>&1)
[ "$out" = "castbad.yaml:5:59: error: source 'src': cast: f16, but buffer 'x' is f32; cast converts the file's elements to the buffer's dtype: write cast: f32" ] ||
    bad "cast f16 into f32: $out"

# 4. a CSV given to a raw source
pipe csv data.csv "" ""
out=$("$pipectl" check csv.yaml 2>&1)
[ "$out" = "csv.yaml:5:44: error: source 'src': 'data.csv' looks like text (its first 1212 bytes are printable, in 128 lines), but a raw source reads binary f32; read text with format: text into a u8 buffer, or convert it with numpy: np.save('data.npy', np.loadtxt('data.csv', delimiter=',', dtype='float32'))" ] ||
    bad "csv: $out"

# 5. stdin: 130 rows, padded to 3 batches; too few rows for the run
sed 's/batches: all/batches: 3/' r500.yaml >stdin.yaml
sed -i 's/file: r500.npy/file: -, last_batch: pad/' stdin.yaml
"$pipectl" run --quiet stdin.yaml <r130.bin 2>/dev/null || bad "stdin: run failed"
cmp -s <(python3 -c "import npy,sys; sys.stdout.buffer.write(npy.load('out/r500.npy')[1])") r130.bin ||
    bad "stdin: the 130 rows do not come back"
sed 's/batches: 3/batches: 4/' stdin.yaml >stdin4.yaml
out=$("$pipectl" run --quiet stdin4.yaml <r130.bin 2>&1 | grep '^error')
[ "$out" = "error: stage 'src', batch 3: <stdin> ended after 130 rows (3 batches of 64), the run needs more: batch 3 is the first it cannot fill; run fewer batches" ] ||
    bad "stdin short: $out"

# 6. text in, text and JSONL out
printf 'hello\nw\xc3\xb6rld\r\n\nlast line is too long\n' >p.txt
cat >text.yaml <<'YAML'
run: {batches: all, depth: 2}
buffers:
  t: {dtype: u8, shape: [3, 16]}
  n: {dtype: i32, shape: [3]}
stages:
  - {name: src, kind: source, to: t, file: p.txt, lengths: n, last_batch: pad, truncate: true}
  - {name: lines, kind: sink, from: t, lengths: n, to: out/t.txt}
  - {name: recs, kind: sink, to: out/t.jsonl, row_field: id, fields: [{text: t}, {bytes: n}]}
YAML
"$pipectl" run --quiet text.yaml 2>/dev/null || bad "text: $("$pipectl" run --quiet text.yaml 2>&1)"
[ "$(cat out/t.txt)" = "$(printf 'hello\nw\xc3\xb6rld\n\nlast line is too')" ] || bad "text sink: $(cat -A out/t.txt)"
want='{"id":0,"text":"hello","bytes":5}
{"id":1,"text":"wörld","bytes":6}
{"id":2,"text":"","bytes":0}
{"id":3,"text":"last line is too","bytes":16}'
[ "$(cat out/t.jsonl)" = "$want" ] || bad "jsonl sink: $(cat out/t.jsonl)"
sed 's/, truncate: true//' text.yaml >long.yaml
out=$("$pipectl" check long.yaml 2>&1)
[ "$out" = "long.yaml:6:44: error: source 'src': p.txt:4: a record of 21 bytes does not fit a row of buffer 't' (16 bytes); set truncate: true to keep its first 16 bytes, or give 't' longer rows (shape [3, 21])" ] ||
    bad "long record: $out"

# 7. JSONL in (stdin), numbers out
printf '{"id": 7, "prompt": "h\\u00e9 \\"q\\""}\n\n{"prompt": "two"}\n{"prompt": "x", "n": 1}\n' >p.jsonl
cat >js.yaml <<'YAML'
run: {batches: 2, depth: 2}
buffers:
  t: {dtype: u8, shape: [2, 8]}
  n: {dtype: i32, shape: [2]}
  v: {dtype: f32, shape: [2, 2]}
stages:
  - {name: src, kind: source, to: t, file: -, format: jsonl, field: prompt, lengths: n, last_batch: pad}
  - {name: val, kind: source, to: v, generator: constant, value: 0.1}
  - {name: recs, kind: sink, to: out/js.jsonl, fields: [{p: t}, n, v]}
YAML
"$pipectl" run --quiet js.yaml <p.jsonl 2>/dev/null || bad "jsonl stdin: $("$pipectl" run --quiet js.yaml <p.jsonl 2>&1)"
want='{"p":"hé \"q\"","n":7,"v":[0.1,0.1]}
{"p":"two","n":3,"v":[0.1,0.1]}
{"p":"x","n":1,"v":[0.1,0.1]}'
[ "$(cat out/js.jsonl)" = "$want" ] || bad "jsonl from stdin: $(cat out/js.jsonl)"
printf '{"prompt": "a"}\n{"prompt": 3}\n' >badfield.jsonl
sed 's/file: -, format: jsonl/file: badfield.jsonl/' js.yaml >jsbad.yaml
out=$("$pipectl" check jsbad.yaml 2>&1)
[ "$out" = "jsbad.yaml:7:44: error: source 'src': badfield.jsonl:2: field 'prompt' is a number; a text row holds a string" ] ||
    bad "jsonl field type: $out"

# 8. a run that fails at batch 2 keeps the records of batches 0 and 1 (and none after)
printf 'a\nb\nc\nd\ne\nline\nbreak\n' >nl.txt
cat >stop.yaml <<'YAML'
run: {batches: 3, depth: 1}
buffers:
  t: {dtype: u8, shape: [2, 8]}
stages:
  - {name: src, kind: source, to: t, file: nl.txt, last_batch: drop}
  - {name: fix, kind: lua, reads: [t], writes: [t], code: "function run(b, o, v) if b == 2 then v.t[1] = 10 end end"}
  - {name: recs, kind: sink, from: t, to: out/stop.txt}
YAML
"$pipectl" run --quiet stop.yaml >/dev/null 2>&1 && bad "stop: the run did not fail"
[ "$(cat out/stop.txt)" = "$(printf 'a\nb\nc\nd')" ] || bad "stop: $(cat -A out/stop.txt)"

[ "$fail" -eq 0 ] && echo "data in and out: ok"
exit "$fail"
