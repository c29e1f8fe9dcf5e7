# `pipectl run` stopped early keeps what completed: Ctrl-C (SIGINT) exits 130, an injected stage
# failure (--fail-at) exits 1; in both cases the .npy under its final name holds exactly the batches
# it reports, its header has the right shape, its data equal the first batches of a full run, and
# no *.partial file is left. Also: bad options exit 2, --executor gpu without a GPU exits 1.
set -u
pipectl=$1 src=$2 build=$3
work=$build/run_stop
rm -rf "$work"
mkdir -p "$work"
fail=0
cat >"$work/slow.yaml" <<'YAML'
pipeline: slow
run: {batches: 300, depth: 3, seed: 5}
buffers:
  x_host: {dtype: f32, shape: [64, 4]}
  x_dev:  {where: device, dtype: f32, shape: [64, 4]}
  y_dev:  {where: device, dtype: f32, shape: [64, 4]}
  y_host: {dtype: f32, shape: [64, 4]}
stages:
  - {name: gen, kind: source, to: x_host, generator: random}
  - {name: up, kind: h2d, from: x_host, to: x_dev}
  - {name: compute, kind: kernel, op: scale, alpha: 3, reads: [x_dev], writes: [y_dev]}
  - {name: wait, kind: kernel, op: busy, duration_us: 10000, after: [compute]}
  - {name: down, kind: d2h, from: y_dev, to: y_host, after: [wait]}
  - {name: save, kind: sink, from: y_host, to: out/slow.npy}
YAML
B=1024 # bytes per batch: 64 x 4 f32

# Header length of a .npy (v1.0): 10 + little-endian u16 at offset 8.
hlen() { echo $((10 + $(od -An -tu2 -j8 -N2 "$1"))); }
# First dimension from the header's shape tuple.
rows() { head -c "$(hlen "$1")" "$1" | grep -ao "'shape': ([0-9]*" | grep -o '[0-9]*$'; }
# Data bytes of batches [0, n) of a .npy.
data() { tail -c +$(($(hlen "$1") + 1)) "$1" | head -c $(($2 * B)); }

check_prefix() { # name file n
  local f=$2 n=$3
  if [ ! -f "$f" ]; then echo "FAIL: $1: $f missing"; fail=1; return; fi
  [ "$(rows "$f")" = "$n" ] || { echo "FAIL: $1: header says $(rows "$f") batches, run said $n"; fail=1; }
  local size=$(stat -c %s "$f")
  [ "$size" = $(($(hlen "$f") + n * B)) ] || { echo "FAIL: $1: $f is $size bytes, not header + $n batches"; fail=1; }
  cmp -s <(data "$f" "$n") <(data "$work/full/out/slow.npy" "$n") ||
    { echo "FAIL: $1: the $n batches kept differ from a full run's first $n"; fail=1; }
  if find "$work" -name '*.partial' | grep -q .; then echo "FAIL: $1: .partial left"; fail=1; fi
}

# The full run: the reference.
mkdir -p "$work/full" && cp "$work/slow.yaml" "$work/full/"
"$pipectl" run --executor host --quiet "$work/full/slow.yaml" 2>/dev/null
rc=$?
[ $rc = 0 ] || { echo "FAIL: full run exits $rc"; fail=1; }
[ "$(rows "$work/full/out/slow.npy")" = 300 ] || { echo "FAIL: full run's header is not (300, ...)"; fail=1; }

# Ctrl-C once at least one batch is on disk.
mkdir -p "$work/int" && cp "$work/slow.yaml" "$work/int/"
"$pipectl" run --executor host --quiet "$work/int/slow.yaml" 2>"$work/int.err" &
pid=$!
for _ in $(seq 1 600); do
  p=$work/int/out/slow.npy.partial
  [ -f "$p" ] && [ "$(stat -c %s "$p")" -gt 2048 ] && break
  sleep 0.01
done
kill -INT $pid
wait $pid
rc=$?
[ $rc = 130 ] || { echo "FAIL: Ctrl-C: exit code $rc, expected 130"; cat "$work/int.err"; fail=1; }
n=$(grep -o 'stopped after [0-9]* of 300 batches; [0-9]* batches* written to [^ ]*slow.npy' "$work/int.err" | grep -o 'batches*; [0-9]*' | grep -o '[0-9]*$')
grep -q 'error: interrupted' "$work/int.err" || { echo "FAIL: Ctrl-C: no 'interrupted' message"; cat "$work/int.err"; fail=1; }
if [ -z "$n" ]; then echo "FAIL: Ctrl-C: no 'stopped after' line"; cat "$work/int.err"; fail=1
else
  [ "$n" -gt 0 ] && [ "$n" -lt 300 ] || { echo "FAIL: Ctrl-C: $n batches kept"; fail=1; }
  check_prefix ctrl-c "$work/int/out/slow.npy" "$n"
  echo "Ctrl-C: exit 130, $n of 300 batches kept, identical to the full run's first $n"
fi

# An injected failure of stage 'compute' on batch 7.
mkdir -p "$work/inj" && cp "$work/slow.yaml" "$work/inj/"
"$pipectl" run --executor host --quiet --fail-at compute:7 "$work/inj/slow.yaml" 2>"$work/inj.err"
rc=$?
[ $rc = 1 ] || { echo "FAIL: injected failure: exit code $rc, expected 1"; fail=1; }
grep -q "error: stage 'compute', batch 7: injected failure" "$work/inj.err" ||
  { echo "FAIL: injected failure: message"; cat "$work/inj.err"; fail=1; }
n=$(grep -o 'stopped after [0-9]* of 300 batches; [0-9]* batches* written' "$work/inj.err" | grep -o '; [0-9]*' | grep -o '[0-9]*')
if [ -z "$n" ]; then
  # Nothing written before the failure: then no file may appear either.
  [ ! -e "$work/inj/out/slow.npy" ] || { echo "FAIL: injected failure: empty output left"; fail=1; }
  echo "injected failure: exit 1, nothing was written"
else
  [ "$n" -le 7 ] || { echo "FAIL: injected failure: $n batches kept, at most 7 possible"; fail=1; }
  check_prefix injected "$work/inj/out/slow.npy" "$n"
  echo "injected failure: exit 1, $n batches kept, identical to the full run's first $n"
fi

# Usage errors exit 2; the gpu executor without a GPU exits 1 with a clear message.
"$pipectl" run --depth 0 "$work/slow.yaml" 2>/dev/null; rc=$?
[ $rc = 2 ] || { echo "FAIL: --depth 0 exits $rc, expected 2"; fail=1; }
"$pipectl" run --bogus "$work/slow.yaml" 2>/dev/null; rc=$?
[ $rc = 2 ] || { echo "FAIL: --bogus exits $rc, expected 2"; fail=1; }
if ! "$pipectl" doctor >/dev/null 2>&1; then
  mkdir -p "$work/gpu" && cp "$work/slow.yaml" "$work/gpu/"
  "$pipectl" run --executor gpu --batches 2 "$work/gpu/slow.yaml" >/dev/null 2>"$work/gpu.err"; rc=$?
  [ $rc = 1 ] || { echo "FAIL: --executor gpu without a GPU exits $rc, expected 1"; fail=1; }
  grep -q -- "--executor host" "$work/gpu.err" || { echo "FAIL: no hint in: $(cat "$work/gpu.err")"; fail=1; }
  [ ! -e "$work/gpu/out/slow.npy" ] || { echo "FAIL: failed gpu run left an output"; fail=1; }
fi
exit $fail
