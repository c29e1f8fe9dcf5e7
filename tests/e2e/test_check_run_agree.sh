#!/bin/bash
# test_check_run_agree: what check accepts, run can do, and what check refuses, run refuses with
# the same words (docs/pipeline-yaml.md, "Paths"; docs/cli.md). A sink path past PATH_MAX and a
# name past NAME_MAX: exit 2 from check and from run, the same message, the limit and the fix at
# its end. File names with a newline or bytes that are not UTF-8: the run summary keeps one line
# per output, escaped ("out\nx.npy"), while --json keeps the names (invalid bytes as U+FFFD) and
# the files get their names as written. Persistent buffers larger than this machine's memory:
# check and plan warn (exit 0) naming the buffer and its size; the run is not attempted here.
set -u
pipectl=$1 build=$3
work=$build/check_run_agree
rm -rf "$work"
mkdir -p "$work"
fail=0
say_fail() { echo "FAIL: $*"; fail=1; }

# 1. Path limits: check and run refuse alike.
long=$work/$(printf 'd%.0s' $(seq 250))
for i in $(seq 16); do long=$long/$(printf 'd%.0s' $(seq 250)); done
cat >"$work/long.yaml" <<YAML
run: {batches: 2}
buffers:
  x: {dtype: f32, shape: [4]}
stages:
  - {name: src, kind: source, to: x}
  - name: out
    kind: sink
    from: x
    to: $long/out.npy
YAML
"$pipectl" check "$work/long.yaml" >/dev/null 2>"$work/long.check"
rc=$?
[ $rc -eq 2 ] || say_fail "check of a path past PATH_MAX exited $rc, not 2"
"$pipectl" run --executor host "$work/long.yaml" >/dev/null 2>"$work/long.run"
rc=$?
[ $rc -eq 2 ] || say_fail "run of a path past PATH_MAX exited $rc, not 2"
full=$long/out.npy
n=$(python3 -c "print(f'{${#full}:,}')")
want="$work/long.yaml:9:5: error: sink stage 'out': to: \"${full:0:40}…${full: -40}\" is $n bytes, longer than the 4,095 bytes the system allows for a path (PATH_MAX, its terminating NUL included); shorten the folders' names, or write the file closer to /"
[ "$(cat "$work/long.check")" = "$want" ] || say_fail "check's message: $(cat "$work/long.check") (want: $want)"
grep -qxF "$want" "$work/long.run" || say_fail "run's message differs from check's: $(cat "$work/long.run")"

name=$(printf 'n%.0s' $(seq 300))
sed "s|^    to: .*|    to: out/$name.npy|" "$work/long.yaml" >"$work/name.yaml"
"$pipectl" check "$work/name.yaml" >/dev/null 2>"$work/name.check"
rc=$?
[ $rc -eq 2 ] || say_fail "check of a name past NAME_MAX exited $rc, not 2"
"$pipectl" run --executor host "$work/name.yaml" >/dev/null 2>"$work/name.run"
grep -qxF "$(cat "$work/name.check")" "$work/name.run" || say_fail "run's message differs from check's: $(cat "$work/name.run")"
grep -q 'has a name of 304 bytes, "n*…n*\.npy", longer than the [0-9,]* bytes the file system of "[^"]*" allows for one name (NAME_MAX); shorten it$' "$work/name.check" ||
    say_fail "check's message for a long name: $(cat "$work/name.check")"

# 2. Names with a newline and with a byte that is not UTF-8 (a Lua pipeline: YAML text is UTF-8).
mkdir -p "$work/names"
cat >"$work/names/p.lua" <<'LUA'
local p = pipectl.pipeline{name = "names", run = {batches = 2, seed = 1}}
p:buffer("x", {where = "host", dtype = "f32", shape = {4}})
p:stage{name = "gen", kind = "source", to = "x", generator = "random"}
p:stage{name = "nl", kind = "sink", from = "x", to = "out\nx.npy"}
p:stage{name = "latin1", kind = "sink", from = "x", to = "caf\xe9.npy"}
p:stage{name = "plain", kind = "sink", from = "x", to = "plain.npy"}
return p
LUA
(cd "$work/names" && "$pipectl" run --executor host p.lua >run.out 2>run.err) ||
    say_fail "run with odd names failed: $(cat "$work/names/run.err")"
outs=$(sed -n '/^  outputs:$/,$p' "$work/names/run.out")
[ "$(printf '%s\n' "$outs" | wc -l)" -eq 4 ] || say_fail "outputs take more than one line each: $outs"
printf '%s\n' "$outs" | grep -qE '^    nl: 2 batches written to "out\\nx\.npy", checksum 0x[0-9a-f]{16}$' ||
    say_fail "the newline is not escaped: $outs"
printf '%s\n' "$outs" | grep -qE '^    latin1: 2 batches written to "caf\\xe9\.npy", checksum 0x[0-9a-f]{16}$' ||
    say_fail "the byte 0xe9 is not escaped: $outs"
printf '%s\n' "$outs" | grep -qE '^    plain: 2 batches written to plain\.npy, checksum 0x[0-9a-f]{16}$' ||
    say_fail "a plain name is quoted: $outs"
[ -f "$work/names/out"$'\n'"x.npy" ] || say_fail "no file named 'out<newline>x.npy'"
[ -f "$work/names/caf"$'\xe9'".npy" ] || say_fail "no file named 'caf<0xe9>.npy'"
(cd "$work/names" && "$pipectl" run --executor host --json p.lua >run.json 2>/dev/null) ||
    say_fail "run --json with odd names failed"
python3 - "$work/names/run.json" <<'PY' || say_fail "run --json: the names are not kept"
import json, sys
paths = [o["path"] for o in json.load(open(sys.argv[1], "rb"))["outputs"]]
assert paths == ["out\nx.npy", "caf\ufffd.npy", "plain.npy"], paths
PY
# The pipeline's own name in check's verdict.
cp "$work/names/p.lua" "$work/names/a"$'\n'"b.lua"
(cd "$work/names" && "$pipectl" check "a"$'\n'"b.lua" >check.out 2>&1) || say_fail "check of a\\nb.lua failed"
[ "$(cat "$work/names/check.out")" = '"a\nb.lua": ok (4 stages, 1 buffer)' ] ||
    say_fail "check's verdict: $(cat "$work/names/check.out")"

# 3. Persistent buffers past the machine's memory: a warning from check and plan, exit 0. Enough
# 60 GiB buffers to pass this machine's physical memory (one here; more on a larger machine).
phys=$(($(getconf _PHYS_PAGES) * $(getconf PAGESIZE)))
gib=$((1 << 30))
k=$((phys / (60 * gib) + 1))
{
    echo "run: {batches: 1}"
    echo "buffers:"
    echo "  x: {dtype: f32, shape: [4]}"
    for i in $(seq $k); do echo "  w$i: {dtype: f32, shape: [16106127360], persistent: true, init: zeros}"; done
    echo "stages:"
    echo "  - {name: src, kind: source, to: x}"
    echo "  - {name: out, kind: sink, from: x, to: out.npy}"
} >"$work/big.yaml"
fmt() { python3 -c "import sys; print('%.1f GiB' % (int(sys.argv[1]) / 2**30))" "$1"; }
list="'w1' 60.0 GiB (host)"
for i in $(seq 2 $((k < 4 ? k : 4))); do list="$list, 'w$i' 60.0 GiB (host)"; done
[ $k -gt 4 ] && list="$list and $((k - 4)) more ($(fmt $(((k - 4) * 60 * gib))))"
want="$work/big.yaml:4:3: warning: the persistent buffers alone take $(fmt $((k * 60 * gib))), more than this machine's physical memory, $(fmt $phys) (sysconf: _SC_PHYS_PAGES x _SC_PAGESIZE): $list; a run cannot allocate them, on either executor: make them smaller, or per-batch (without persistent: true) where their data can come a batch at a time"
"$pipectl" check "$work/big.yaml" >"$work/big.out" 2>"$work/big.err"
rc=$?
[ $rc -eq 0 ] || say_fail "check with huge persistent buffers exited $rc, not 0: $(cat "$work/big.err")"
[ "$(cat "$work/big.err")" = "$want" ] || say_fail "check's warning: $(cat "$work/big.err") (want: $want)"
grep -q ': ok (2 stages, ' "$work/big.out" || say_fail "check did not say ok: $(cat "$work/big.out")"
"$pipectl" check --json "$work/big.yaml" 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)["files"][0]["diagnostics"]
assert len(d) == 1 and d[0]["severity"] == "warning" and d[0]["line"] == 4, d
' || say_fail "check --json does not list the warning"
"$pipectl" plan "$work/big.yaml" >"$work/plan.out" 2>"$work/plan.err"
rc=$?
[ $rc -eq 0 ] || say_fail "plan exited $rc"
[ "$(cat "$work/plan.err")" = "$want" ] || say_fail "plan's warning: $(cat "$work/plan.err")"

[ $fail -eq 0 ] && echo "check and run agree: path limits, escaped names, memory warnings"
exit $fail
