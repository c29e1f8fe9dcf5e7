# `batches: all`: the run's batch count is the whole batches of the shortest source file (sources
# that do not end, generators and wrap: true, do not count); check and plan say the count, run ends
# cleanly after the last full batch, every sink holds exactly that many; --batches all on the CLI;
# the Lua front end; a trailing partial batch is a check error (exit 2, the stage's position); and
# batches: all with no source that ends is a check error (the parser corpus has those cases with
# their exact messages: tests/parser/bad/check_batches_all_*.yaml).
set -u
pipectl=$1 build=$3
work=$build/batches_all
rm -rf "$work"
mkdir -p "$work"
cd "$work" || exit 1
fail=0
bad() { echo "FAIL: $*"; fail=1; }
# 40 and 25 batches of 8 f32 (32 bytes); c.bin: 25 batches and 16 bytes
python3 -c "
import struct
open('a.bin','wb').write(struct.pack('<320f',*range(320)))
open('b.bin','wb').write(struct.pack('<200f',*range(200)))
open('c.bin','wb').write(struct.pack('<204f',*range(204)))
"
cat >all.yaml <<'YAML'
pipeline: all
run: {batches: all, depth: 2}
buffers:
  a: {where: host, dtype: f32, shape: [8]}
  b: {where: host, dtype: f32, shape: [8]}
  g: {where: host, dtype: f32, shape: [8]}
stages:
  - {name: ra, kind: source, to: a, file: a.bin}
  - {name: rb, kind: source, to: b, file: b.bin}
  - {name: gen, kind: source, to: g}
  - {name: sa, kind: sink, from: a, to: out/a.bin}
  - {name: sb, kind: sink, from: b, to: out/b.bin}
  - {name: sg, kind: sink, from: g}
YAML
out=$("$pipectl" check all.yaml 2>&1)
[ "$out" = "all.yaml: ok (6 stages, 3 buffers; batches: all = 25, what source 'rb' holds)" ] ||
    bad "check: $out"
"$pipectl" check --json all.yaml | grep -q '"batches": 25,' || bad "check --json: no batches 25"
"$pipectl" plan all.yaml | grep -q "^depth 2 (slots in flight), 25 batches (batches: all: what source 'rb' holds" ||
    bad "plan does not say 25 batches"
"$pipectl" run --json all.yaml >run.json 2>run.err || bad "run: $(cat run.err)"
grep -q '"batches_planned": 25, "batches_done": 25,' run.json || bad "run: not 25 batches"
# every sink holds exactly 25 batches; a.bin's first 25 batches, b.bin whole
[ "$(stat -c %s out/a.bin)" = 800 ] && [ "$(stat -c %s out/b.bin)" = 800 ] || bad "sink sizes"
head -c 800 a.bin | cmp -s - out/a.bin || bad "out/a.bin is not a.bin's first 25 batches"
cmp -s b.bin out/b.bin || bad "out/b.bin differs from b.bin"
# --batches N overrides all; --batches all overrides a number
"$pipectl" run --quiet --batches 7 --json all.yaml | grep -q '"batches_done": 7,' || bad "--batches 7"
sed 's/batches: all/batches: 3/' all.yaml >three.yaml
"$pipectl" run --batches all --json three.yaml 2>/dev/null | grep -q '"batches_done": 25,' ||
    bad "--batches all"
# the Lua front end
cat >all.lua <<'LUA'
return {
  name = "lall",
  run = {batches = "all"},
  buffers = {{name = "a", where = "host", dtype = "f32", shape = {8}}},
  stages = {
    {name = "ra", kind = "source", to = "a", file = "a.bin"},
    {name = "s", kind = "sink", from = "a"},
  },
}
LUA
out=$("$pipectl" check all.lua 2>&1)
[ "$out" = "all.lua: ok (2 stages, 1 buffer; batches: all = 40, what source 'ra' holds)" ] ||
    bad "lua check: $out"
# a trailing partial batch: an error at check and at run, exit 2, the stage's position
sed 's/file: b.bin/file: c.bin/' all.yaml >partial.yaml
want="partial.yaml:9:43: error: source 'rb': 'c.bin' holds 816 bytes, not a whole number of batches of 32 bytes (buffer 'b'): the last 16 bytes would be ignored; set last_batch: pad or last_batch: drop, trim the file to whole batches, or change the buffer's shape"
for cmd in check run plan; do
    out=$("$pipectl" $cmd partial.yaml 2>&1 >/dev/null)
    rc=$?
    [ "$rc" = 2 ] || bad "$cmd partial.yaml: exit $rc"
    [ "$cmd" = run ] && out=$(printf '%s\n' "$out" | grep -v '^executor:')
    [ "$out" = "$want" ] || bad "$cmd partial.yaml: $out"
done
# --batches all with no source that ends: exit 2
sed 's/file: a.bin/file: a.bin, wrap: true/;s/file: b.bin/file: b.bin, wrap: true/' three.yaml >wrap.yaml
out=$("$pipectl" run --batches all wrap.yaml 2>&1)
rc=$?
[ "$rc" = 2 ] || bad "run --batches all wrap.yaml: exit $rc"
printf '%s\n' "$out" | grep -q "error: run: 'batches: all' runs until the first source file ends, but no stage reads a file that ends" ||
    bad "run --batches all wrap.yaml: $out"
[ "$fail" -eq 0 ] && echo "batches: all: ok"
exit "$fail"
