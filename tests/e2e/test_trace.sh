# `pipectl run --trace`: a Chrome trace with one slice per stage and batch, one row per stream,
# flow arrows and counters, valid against the Trace Event Format (check_trace.py), written also
# when the run fails (what completed), never left half-written.
set -u
pipectl=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cp "$src/pipelines/quickstart.yaml" "$tmp/q.yaml"
"$pipectl" run --executor host --quiet --trace "$tmp/t.json" "$tmp/q.yaml" || fail "run exited $?"
[ -f "$tmp/t.json" ] || fail "no trace written"
[ ! -e "$tmp/t.json.partial" ] || fail "partial trace left behind"
head -c 40 "$tmp/t.json" | grep -q '"traceEvents"' || fail "not a Chrome trace"
n=$(grep -c '"ph": "X"' "$tmp/t.json")
[ "$n" -eq 80 ] || fail "expected 80 slices (5 stages x 16 batches), got $n"
for s in host0 h2d compute0 d2h host1; do
  grep -q "\"name\": \"$s (" "$tmp/t.json" || fail "no row for stream $s"
done
grep -q '"name": "save", "cat": "host", "ph": "X".*"batch": 15' "$tmp/t.json" || fail "no slice for save, batch 15"
# The Trace Event Format: fields per phase, flows inside slices (4 cross-stream edges a batch),
# counters (bytes in flight on 4 engines, slots in use), every row named.
if command -v python3 >/dev/null; then
  python3 "$src/tests/e2e/check_trace.py" "$tmp/t.json" 64 5 || fail "the trace is not a valid Chrome trace"
else
  echo "python3 not found: trace not validated against the Trace Event Format"
fi
# A failing run still writes the timeline of what completed: as many 'save' slices as batches
# the run says it completed (at most 5: 'double' fails on batch 5).
err=$("$pipectl" run --executor host --quiet --fail-at double:5 --trace "$tmp/f.json" "$tmp/q.yaml" 2>&1)
rc=$?
[ $rc -eq 1 ] || fail "failing run exited $rc, expected 1"
[ -f "$tmp/f.json" ] || fail "no trace after a failure"
done_n=$(echo "$err" | sed -n 's/^stopped after \([0-9]*\) of 16 batches.*/\1/p')
[ -n "$done_n" ] || fail "no 'stopped after' line in: $err"
[ "$done_n" -le 5 ] || fail "stopped after $done_n batches, more than 5"
saves=$(grep -c '"name": "save", "cat": "host", "ph": "X"' "$tmp/f.json")
[ "$saves" -eq "$done_n" ] || fail "trace has $saves 'save' slices, the run completed $done_n batches"
# An unwritable trace path is a clear error.
out=$("$pipectl" run --executor host --quiet --trace "$tmp/no/such/dir/t.json" "$tmp/q.yaml" 2>&1)
rc=$?
[ $rc -eq 1 ] || fail "unwritable trace: exit $rc, expected 1"
echo "$out" | grep -q "cannot write the trace" || fail "unwritable trace: message was: $out"
python3 "$src/tests/e2e/check_trace.py" "$tmp/f.json" >/dev/null 2>&1 || ! command -v python3 >/dev/null ||
  fail "the trace of a failed run is not a valid Chrome trace"
echo "trace: 80 slices, 5 rows, flows and counters, valid; written after a failure; unwritable path reported"
