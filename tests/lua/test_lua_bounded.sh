#!/bin/bash
# test_lua_bounded: a Lua stage stuck inside one C call, string matching that backtracks without
# end (s:find(".-b") over a long subject, in each of find, match, gmatch and gsub), is bounded
# like Lua code: by its stage's `time_limit_ms` (exit 1, "stage 'spin', batch 3: code:4: time
# limit of 300 ms exceeded", batches 0-2 kept), by its instruction budget, and by SIGTERM (exit
# 143 within 2 s, batches kept); two SIGTERMs end the process within a second of the second.
set -u
pipectl=$1 build=$3
work=$build/lua_bounded
rm -rf "$work"
mkdir -p "$work"
fail=0
say_fail() { echo "FAIL: $*"; fail=1; }
now_ms() { date +%s%3N; }

spin() { # FILE TIME_LIMIT_MS INSTRUCTIONS LOOP
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
    instructions: $3
    code: |
      function run(batch, opts, bufs)
        if batch < 3 then return end
        local s = string.rep("a", 1e6)
        $4
      end
  - {name: save, kind: sink, from: x, to: out/x.npy}
YAML
}
rows() { # the first dimension in a .npy header
    head -c 128 "$1" | grep -ao "'shape': ([0-9]*" | grep -o '[0-9]*$'
}

loops=(
    'while true do s:find(".-b") end'
    'while true do local a, b = s:match("(.-)(.-)b") end'
    'while true do for w in s:gmatch("a-b") do end end'
    'while true do s:gsub(".-b", "") end'
)
for i in "${!loops[@]}"; do
    loop=${loops[$i]}
    # The wall-clock limit (a budget too large to end it first).
    rm -rf "$work/out"
    spin "$work/t$i.yaml" 300 1000000000000 "$loop"
    t0=$(now_ms)
    timeout 20 "$pipectl" run --executor host --quiet --workers 1 "$work/t$i.yaml" 2>"$work/t$i.err"
    rc=$?
    t1=$(now_ms)
    [ $rc = 1 ] || say_fail "'$loop', time limit: exit $rc, expected 1 ($(cat "$work/t$i.err"))"
    [ $((t1 - t0)) -lt 5000 ] || say_fail "'$loop', time limit of 300 ms: the run took $((t1 - t0)) ms"
    grep -q "^stage 'spin', batch 3: code:4: time limit of 300 ms exceeded (raise \`time_limit_ms\`)" "$work/t$i.err" ||
        say_fail "'$loop', time limit: message: $(cat "$work/t$i.err")"
    [ "$(rows "$work/out/x.npy" 2>/dev/null)" = 3 ] || say_fail "'$loop', time limit: out/x.npy does not hold batches 0-2"
    echo "'$loop', time limit of 300 ms: exit $rc after $((t1 - t0)) ms"

    # The instruction budget (no time limit).
    spin "$work/b$i.yaml" 0 20000000 "$loop"
    timeout 20 "$pipectl" run --executor host --quiet --workers 1 "$work/b$i.yaml" 2>"$work/b$i.err"
    rc=$?
    [ $rc = 1 ] || say_fail "'$loop', budget: exit $rc, expected 1 ($(cat "$work/b$i.err"))"
    grep -q "^stage 'spin', batch 3: code:4: instruction budget of 20000000 exceeded (raise \`instructions\`)" "$work/b$i.err" ||
        say_fail "'$loop', budget: message: $(cat "$work/b$i.err")"
done

# SIGTERM (timeout, systemd, Slurm) during the call, no time limit: the run stops as documented
# (exit 143, batches before it kept, no .partial).
stop_with() { # NAME SIGNALS_GAP_S (empty: one signal)
    rm -rf "$work/out"
    spin "$work/$1.yaml" 0 1000000000000 'while true do s:find(".-b") end'
    "$pipectl" run --executor host --quiet --workers 1 "$work/$1.yaml" 2>"$work/$1.err" &
    local pid=$!
    sleep 1
    kill -TERM $pid
    if [ -n "$2" ]; then
        sleep "$2"
        kill -TERM $pid 2>/dev/null
    fi
    t0=$(now_ms)
    # Our child is not reaped before `wait`, so its pid cannot be reused while we poll it.
    for _ in $(seq 1 300); do kill -0 $pid 2>/dev/null || break; sleep 0.01; done
    kill -0 $pid 2>/dev/null && kill -KILL $pid
    wait $pid
    rc=$?
    t1=$(now_ms)
}
stop_with term ""
[ $rc = 143 ] || say_fail "SIGTERM during a match: exit $rc, expected 143 ($(cat "$work/term.err"))"
[ $((t1 - t0)) -lt 2000 ] || say_fail "SIGTERM during a match: took $((t1 - t0)) ms to stop"
grep -q "error: interrupted (SIGTERM)" "$work/term.err" || say_fail "SIGTERM: message: $(cat "$work/term.err")"
[ "$(rows "$work/out/x.npy" 2>/dev/null)" = 3 ] || say_fail "SIGTERM: out/x.npy does not hold batches 0-2"
if find "$work" -name '*.partial' | grep -q .; then say_fail "SIGTERM: .partial left"; fi
echo "SIGTERM during a match: exit $rc after $((t1 - t0)) ms"

stop_with term2 0.05
[ $rc = 143 ] || say_fail "two SIGTERMs during a match: exit $rc, expected 143"
[ $((t1 - t0)) -lt 1000 ] || say_fail "two SIGTERMs: the process lived $((t1 - t0)) ms after the second"
echo "two SIGTERMs during a match: exit $rc, $((t1 - t0)) ms after the second"
exit $fail
