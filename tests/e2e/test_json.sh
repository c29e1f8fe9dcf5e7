# Every --json output (check, plan, run: good input, bad input, check errors, a runtime failure,
# an interrupt) is one line of valid UTF-8 JSON whose keys are exactly the fields docs/json.md
# lists (check_json.py reads the tables there); also for a Lua pipeline whose name is not UTF-8
# ("a\255b") and a file whose name is not, and for the trace of such a pipeline.
set -u
pipectl=$1 src=$2 build=$3
work=$build/json
rm -rf "$work"
mkdir -p "$work"
fail=0
say_fail() { echo "FAIL: $*"; fail=1; }
command -v python3 >/dev/null || { echo "python3 not found"; exit 77; }
doc=$src/docs/json.md
n=0
# expect NAME WANT_RC KIND STATUS EXIT_CODE -- COMMAND...: runs it, stdout to $work/NAME.json
expect() {
    local name=$1 want=$2 kind=$3 status=$4 code=$5
    shift 6
    n=$((n + 1))
    "$@" >"$work/$name.json" 2>"$work/$name.err"
    local rc=$?
    [ "$rc" = "$want" ] || say_fail "$name: exit $rc, expected $want: $(cat "$work/$name.err")"
    python3 "$src/tests/e2e/check_json.py" "$doc" "$kind" "$work/$name.json" "$status" "$code" ||
        say_fail "$name: $(head -c 600 "$work/$name.json")"
}

cp "$src/pipelines/quickstart.yaml" "$src/pipelines/quickstart.lua" "$work/"
q=$work/quickstart.yaml
sed 's/name = "quickstart"/name = "a\\255b"/' "$src/pipelines/quickstart.lua" >"$work/badname.lua"
grep -q 'a\\255b' "$work/badname.lua" || say_fail "could not rename the Lua pipeline"
printf 'buffers: {x: {where: host, dtype: fp32, shape: [4]}}\n' >"$work/bad.yaml"
# two errors of one phase (the checks), both reported
cat >"$work/two.yaml" <<'YAML'
pipeline: two
buffers:
  y_dev: {where: device, dtype: i32, shape: [4, 256], persistent: true, init: random}
  y_host: {where: host, dtype: i32, shape: [256]}
  z_host: {where: host, dtype: i32, shape: [512]}
stages:
  - {name: down, kind: d2h, from: y_dev, to: y_host}
  - {name: down2, kind: d2h, from: y_dev, to: z_host}
YAML
cp "$work/bad.yaml" "$work/$(printf 'n\377me.yaml')"

expect check_ok 0 check ok 0 -- "$pipectl" check --json "$q" "$work/quickstart.lua"
expect check_badname 0 check ok 0 -- "$pipectl" check --json "$work/badname.lua"
expect check_bad 2 check EINPUT 2 -- "$pipectl" check --json "$q" "$work/bad.yaml" "$work/two.yaml"
expect check_missing 2 check EINPUT 2 -- "$pipectl" check --json "$work/nosuch.yaml"
expect check_badfile 2 check EINPUT 2 -- "$pipectl" check --json "$work/$(printf 'n\377me.yaml')"
expect plan_ok 0 plan ok 0 -- "$pipectl" plan --json "$q"
expect plan_badname 0 plan ok 0 -- "$pipectl" plan --json "$work/badname.lua"
expect plan_bad 2 error EINPUT 2 -- "$pipectl" plan --json "$work/bad.yaml"
expect run_ok 0 summary ok 0 -- "$pipectl" run --json --executor host "$q"
expect run_badname 0 summary ok 0 -- "$pipectl" run --json --executor host --trace "$work/t.json" "$work/badname.lua"
expect run_bad 2 error EINPUT 2 -- "$pipectl" run --json --executor host "$work/bad.yaml"
expect run_missing 2 error EINPUT 2 -- "$pipectl" run --json "$work/nosuch.yaml"
expect run_failat 2 error EINPUT 2 -- "$pipectl" run --json --executor host --fail-at nosuch:1 "$q"
expect run_fail 1 summary ERUNTIME 1 -- "$pipectl" run --json --executor host --fail-at double:5 "$q"
expect plan_auto 0 plan ok 0 -- "$pipectl" plan --json --depth auto "$q"
expect run_auto 0 summary ok 0 -- "$pipectl" run --json --executor host --depth auto "$q"

py() { python3 -c "import json,sys; v=json.load(open(sys.argv[1], encoding='utf-8')); $1" "$2"; }
# what the fields say, not only that they are there (bad.yaml: its buffer's dtype, no stages)
py 'assert [len(f["diagnostics"]) for f in v["files"]] == [0, 2, 2], v' "$work/check_bad.json" ||
    say_fail "check --json: expected 0, 2 and 2 diagnostics: $(cat "$work/check_bad.json")"
py 'd = v["files"][1]["diagnostics"][0]; assert (d["line"], d["column"], d["hint"], d["severity"]) == (1, 35, "did you mean '"'f32'"'?", "error"), d' \
    "$work/check_bad.json" || say_fail "check --json: wrong position or hint"
py 'assert v["files"][0]["file"].endswith("n\ufffdme.yaml"), v' "$work/check_badfile.json" ||
    say_fail "an invalid UTF-8 file name is not U+FFFD: $(cat "$work/check_badfile.json")"
for f in check_badname plan_badname run_badname; do
    py 'p = v["files"][0]["pipeline"] if "files" in v else v["pipeline"]; assert p == "a\ufffdb", p' \
        "$work/$f.json" || say_fail "$f: the name is not a\\ufffdb: $(head -c 300 "$work/$f.json")"
done
py 'assert v["plan"]["depth"] == 4 and len(v["plan"]["stages"]) == 5' "$work/plan_ok.json" ||
    say_fail "plan --json: not the quickstart plan"
py 'assert v["depth_auto"] is None and v["plan"]["depth"] == 4' "$work/plan_ok.json" ||
    say_fail "plan --json: depth_auto not null for a fixed depth"
py 'a = v["depth_auto"]; assert a["calibration_depth"] == 1 and a["max_depth"] == 16 and v["plan"]["depth"] == 1, v' "$work/plan_auto.json" ||
    say_fail "plan --json --depth auto: $(cat "$work/plan_auto.json")"
py 'a = v["depth_auto"]; assert a["chosen"] and v["depth"] == a["depth"] >= 1 and a["calibration_batches"] == 4 and v["batches_done"] == 16, v' "$work/run_auto.json" ||
    say_fail "run --json --depth auto: $(cat "$work/run_auto.json")"
py 'assert v["batches_done"] == 16 and v["error"] is None' "$work/run_ok.json" ||
    say_fail "run --json: not 16 batches"
py 'd = v["diagnostics"][0]; assert "double" in v["error"] and v["batches_done"] < 16 and (d["stage"], d["batch"]) == ("double", 5), v' "$work/run_fail.json" ||
    say_fail "run --json after a failure: $(cat "$work/run_fail.json")"
py 'assert v["traceEvents"][0]["args"]["name"].startswith("pipectl a\ufffdb")' "$work/t.json" ||
    say_fail "the trace of a\\255b is not valid or not U+FFFD"
grep -q 'dtype' "$work/check_bad.err" || say_fail "check --json: the messages do not go to stderr"

# An interrupt: the summary says EINTR, the process exits 130.
cat >"$work/slow.yaml" <<'YAML'
pipeline: slow
run: {batches: 300, depth: 3, seed: 5}
buffers:
  x_host: {dtype: f32, shape: [64, 4]}
  x_dev:  {where: device, dtype: f32, shape: [64, 4]}
  y_host: {dtype: f32, shape: [64, 4]}
stages:
  - {name: gen, kind: source, to: x_host, generator: random}
  - {name: up, kind: h2d, from: x_host, to: x_dev}
  - {name: wait, kind: kernel, op: busy, duration_us: 10000, after: [up]}
  - {name: down, kind: d2h, from: x_dev, to: y_host, after: [wait]}
  - {name: save, kind: sink, from: y_host}
YAML
"$pipectl" run --json --executor host "$work/slow.yaml" >"$work/int.json" 2>"$work/int.err" &
pid=$!
sleep 0.5
kill -INT $pid
wait $pid
rc=$?
[ "$rc" = 130 ] || say_fail "interrupted run exited $rc: $(cat "$work/int.err")"
python3 "$src/tests/e2e/check_json.py" "$doc" summary "$work/int.json" EINTR 130 ||
    say_fail "interrupted: $(head -c 600 "$work/int.json")"
n=$((n + 1))

[ "$fail" = 0 ] && echo "ok: $n --json outputs match docs/json.md"
exit $fail
