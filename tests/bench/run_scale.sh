#!/bin/bash
# run_scale: what a pipeline of many stages costs: a chain of N kernel stages (each reads the
# previous one's buffer) and a fan-out of N branches off one upload (each writes its own buffer,
# a sum and a download after them), one batch, on the executor given. Prints per shape the time
# of `pipectl plan` and of `pipectl run --batches 1` (the whole process: loading, checking,
# planning, setup, the batch, teardown) and the run's max RSS, so that growth with N shows (run it
# at two sizes: linear memory doubles with N). No assertion: a benchmark.
#
#   bash tests/bench/run_scale.sh build/pipectl host 70000
#   bash tests/bench/run_scale.sh build-rel/pipectl gpu 70000     # the GPU machine
#
# Each row is printed as soon as its runs end (a caller's time limit keeps the rows before it).
# Environment: RUN_ARGS (more options for pipectl run, e.g. "--timing off" or "--no-graph"),
# RUN_TIMEOUT (seconds a run may take, default 600).
set -u
pipectl=${1:?usage: run_scale.sh PIPECTL host|gpu N [N...]}
exe=${2:?usage: run_scale.sh PIPECTL host|gpu N [N...]}
shift 2
[ $# -gt 0 ] || set -- 70000
[ -x /usr/bin/time ] || { echo "run_scale.sh: /usr/bin/time is needed (Debian: time)"; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

. "$(dirname "${BASH_SOURCE[0]}")/scale_shapes.sh" # chain N, fanout N

echo "pipectl plan and run --batches 1 of N-stage pipelines, executor $exe ($(nproc) cores)${RUN_ARGS:+, run $RUN_ARGS}"
printf '%-8s %8s %12s %12s %14s\n' shape stages "plan s" "run s" "run max RSS"
for n in "$@"; do
    for shape in chain fanout; do
        f=$work/$shape-$n.yaml
        "$shape" "$n" >"$f"
        /usr/bin/time -f "%e %M" -o "$work/t" "$pipectl" plan "$f" >/dev/null 2>"$work/plan.err"
        prc=$?
        read -r psec prss <"$work/t"
        /usr/bin/time -f "%e %M" -o "$work/t" timeout "${RUN_TIMEOUT:-600}" "$pipectl" run --quiet \
            --executor "$exe" ${RUN_ARGS:-} "$f" >/dev/null 2>"$work/run.err"
        rrc=$?
        read -r rsec rrss <"$work/t"
        [ $prc = 0 ] || psec="plan exit $prc"
        [ $rrc = 0 ] || { rsec="exit $rrc"; tail -2 "$work/run.err"; }
        printf '%-8s %8s %12s %12s %14s\n' "$shape" "$n" "$psec" "$rsec" "$((rrss / 1024)) MiB"
    done
done
