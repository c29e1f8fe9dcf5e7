# lib.sh: what the device scripts (tests/gpu/run_*.sh, tests/bench/run_*.sh) share; sourced, from
# the repository root on the GPU machine. They run their steps most important first, each under a
# time limit, and print a table of the steps last.
#
# step NAME LIMIT_S LOG CMD...: runs CMD under `timeout LIMIT_S`, its stdout and stderr appended to
# $OUT/LOG, adds a row "NAME rc=N Ns LOG" to the array `rows`, and returns CMD's status.
#   DEADLINE    when set: a step that would start past it (seconds since the script started) is
#               skipped, with a row saying so, and returns 125
#   STEP_SLACK  when set with DEADLINE: no step runs past DEADLINE + STEP_SLACK seconds (its limit
#               is cut to fit)
#   STEP_WIDTH  width of the name column (default 40)
#   STEP_HEADER 1: write "### NAME: CMD" into the log before the step's output
step() {
    local name=$1 limit=$2 log=$3 w=${STEP_WIDTH:-40}
    shift 3
    if [ -n "${DEADLINE:-}" ] && [ "$SECONDS" -ge "$DEADLINE" ]; then
        rows+=("$(printf "%-${w}s skipped (deadline %ss)" "$name" "$DEADLINE")")
        return 125
    fi
    if [ -n "${DEADLINE:-}" ] && [ -n "${STEP_SLACK:-}" ]; then
        local cap=$((DEADLINE + STEP_SLACK - SECONDS))
        [ "$limit" -le "$cap" ] || limit=$cap
    fi
    local t0=$SECONDS
    [ "${STEP_HEADER:-0}" = 1 ] && echo "### $name: $*" >>"$OUT/$log"
    timeout "$limit" "$@" >>"$OUT/$log" 2>&1
    local rc=$?
    rows+=("$(printf "%-${w}s rc=%-4s %4ss  %s" "$name" "$rc" "$((SECONDS - t0))" "$log")")
    return $rc
}

# machine_log FILE: the date, the GPU (name, driver, clocks, power) and the commit, into FILE.
machine_log() {
    {
        date -u
        nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv 2>&1
        git log --oneline -1 2>/dev/null
    } >"$1" 2>&1
}
