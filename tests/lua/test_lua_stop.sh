#!/bin/bash
# test_lua_stop: a Lua call that runs long in C calls (a loop of s:gsub, which the instruction
# budget hardly sees) is stopped by Ctrl-C within a second (exit 130, batches before it kept, no
# .partial left), and by its stage's wall-clock limit `time_limit_ms` (exit 1, a message naming
# the stage, the batch, the Lua line and the key to raise).
set -u
pipectl=$1 build=$3
work=$build/lua_stop
rm -rf "$work"
mkdir -p "$work"
fail=0
say_fail() { echo "FAIL: $*"; fail=1; }

spin() { # FILE TIME_LIMIT_MS
    cat >"$1" <<YAML
pipeline: spin
run: {batches: 8, depth: 2}
buffers:
  x: {dtype: f32, shape: [4]}
stages:
  - {name: gen, kind: source, to: x, generator: range}
  - name: spin
    kind: lua
    reads: [x]
    time_limit_ms: $2
    # A budget the loop cannot spend in the test's time: the signal or the clock stops it (the
    # pattern functions count their steps against it: tests/lua/test_lua_bounded.sh).
    instructions: 1000000000000000
    code: |
      function run(batch, opts, bufs)
        if batch < 3 then return end
        local s = string.rep("a", 20000)
        while true do s = s:gsub("a", "a") end
      end
  - {name: save, kind: sink, from: x, to: out/x.npy}
YAML
}
now_ms() { date +%s%3N; }

# Ctrl-C while batch 3 spins (no time limit).
spin "$work/int.yaml" 0
"$pipectl" run --executor host --quiet --workers 1 "$work/int.yaml" 2>"$work/int.err" &
pid=$!
sleep 1
t0=$(now_ms)
kill -INT $pid
# Our child is not reaped before `wait`, so its pid cannot be reused while we poll it.
for _ in $(seq 1 1000); do kill -0 $pid 2>/dev/null || break; sleep 0.01; done
kill -0 $pid 2>/dev/null && kill -KILL $pid
wait $pid
rc=$?
t1=$(now_ms)
[ $rc = 130 ] || say_fail "Ctrl-C during a Lua call: exit $rc, expected 130 ($(cat "$work/int.err"))"
[ $((t1 - t0)) -lt 2000 ] || say_fail "Ctrl-C during a Lua call: took $((t1 - t0)) ms to stop"
grep -q "error: interrupted (Ctrl-C)" "$work/int.err" || say_fail "Ctrl-C: message: $(cat "$work/int.err")"
[ -f "$work/out/x.npy" ] || say_fail "Ctrl-C: out/x.npy (batches 0..2) missing"
if find "$work" -name '*.partial' | grep -q .; then say_fail "Ctrl-C: .partial left"; fi
echo "Ctrl-C during a Lua call: exit $rc after $((t1 - t0)) ms"

# The wall-clock limit.
rm -rf "$work/out"
spin "$work/limit.yaml" 300
t0=$(now_ms)
timeout 20 "$pipectl" run --executor host --quiet --workers 1 "$work/limit.yaml" 2>"$work/limit.err"
rc=$?
t1=$(now_ms)
[ $rc = 1 ] || say_fail "time limit: exit $rc, expected 1 ($(cat "$work/limit.err"))"
[ $((t1 - t0)) -lt 5000 ] || say_fail "time limit of 300 ms: the run took $((t1 - t0)) ms"
grep -q "^stage 'spin', batch 3: code:4: time limit of 300 ms exceeded (raise \`time_limit_ms\`)" "$work/limit.err" ||
    say_fail "time limit: message: $(cat "$work/limit.err")"
echo "time limit of 300 ms: exit $rc after $((t1 - t0)) ms"
exit $fail
