#!/bin/bash
# mpi_write: `run --mpi --mpi-write parts` against `--mpi-write gather` for an output shaped like
# GPT-2's full logits: a host pipeline whose source makes f32 batches of [T, 50257] rows (a range
# generator: cheap, and every batch different) into one .npy sink, BATCHES x T x 50257 x 4 bytes
# in all (default 128 x 128 rows: 3.29 GB). One process without MPI first (the reference, whose
# file every run must equal, byte for byte: cmp on each configuration's first run), then for 2
# and 3 ranks (mpirun --oversubscribe, host executor) parts and gather alternating, REPS times
# each. Prints per configuration the median and the range of: the wall time of the command
# (mpirun's start, the run, and for parts the merge and its fsync), and the wall time until the
# data is on disk (the command then `sync`). Free disk is checked first (parts needs twice the
# output while it merges); the work folder is removed at the end.
#
#   tests/bench/mpi_write.sh build/pipectl                 # 3.29 GB, 3 runs each
#   tests/bench/mpi_write.sh build/pipectl 5 /tmp 16 128   # 5 runs, BATCHES 16 of T 128 rows
set -eu
pipectl=$(realpath "${1:?usage: mpi_write.sh PIPECTL [REPS] [DIR] [BATCHES] [T]}")
reps=${2:-3}
base=${3:-/tmp}
batches=${4:-128}
t=${5:-128}
bytes=$((batches * t * 50257 * 4))
need=$((bytes * 3 + (1 << 30))) # the reference, a run's file and its parts
free=$(df -B1 --output=avail "$base" | tail -1)
if [ "$free" -lt "$need" ]; then
    echo "mpi_write: $base has $free bytes free, the benchmark needs $need" >&2
    exit 1
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
work=$(mktemp -d "$base/mpi_write.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
cat >logits.yaml <<YAML
pipeline: logits
run: {batches: $batches, depth: 2, seed: 1}
buffers:
  logits: {where: host, dtype: f32, shape: [$t, 50257]}
stages:
  - {name: forward, kind: source, to: logits, generator: range}
  - {name: save, kind: sink, from: logits, to: out/logits.npy}
YAML
now() { date +%s.%N; }
# run NAME COMMAND...: the command's wall time and the time until its data is on disk, into
# times_NAME; the first run of NAME compares its file with the reference.
run() {
    local name=$1 s e d
    shift
    rm -rf out
    sync
    s=$(now)
    "$@" >"log_$name.txt" 2>&1 || { echo "mpi_write: $name failed: $(tail -3 "log_$name.txt")" >&2; exit 1; }
    e=$(now)
    sync
    d=$(now)
    if [ -e ref.npy ] && [ ! -e "checked_$name" ]; then
        cmp -s ref.npy out/logits.npy || { echo "mpi_write: $name: the file differs from one process's" >&2; exit 1; }
        touch "checked_$name"
    fi
    echo "$(awk -v s="$s" -v e="$e" -v d="$d" 'BEGIN { printf "%.3f %.3f", e - s, d - s }')" >>"times_$name"
}
mpi() { mpirun --oversubscribe --allow-run-as-root --bind-to none -n "$@"; }
echo "mpi_write: $batches batches of f32 [$t, 50257] ($(awk -v b=$bytes 'BEGIN { printf "%.2f GB", b / 1e9 }')) into one .npy," \
    "host executor, $(nproc) cores ($(uname -m)), $reps runs each; load average $(cut -d' ' -f1-3 /proc/loadavg)"
run one "$pipectl" run -q -e host logits.yaml
mv out/logits.npy ref.npy
: >times_one
for r in $(seq "$reps"); do
    run one "$pipectl" run -q -e host logits.yaml
    for n in 2 3; do
        run "parts$n" mpi $n "$pipectl" run -q -e host --mpi --mpi-write parts logits.yaml
        run "gather$n" mpi $n "$pipectl" run -q -e host --mpi --mpi-write gather logits.yaml
    done
done
rm -rf out ref.npy
# median and range of column $2 of file $1
medrange() { sort -n -k"$2" "$1" | awk -v c="$2" '{ v[NR] = $c } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%7.2f s (%.2f-%.2f)", m, v[1], v[NR] }'; }
printf '%-22s %-26s %-26s %s\n' "" "command, median (range)" "to disk (+ sync)" "GB/s to disk"
for name in one parts2 gather2 parts3 gather3; do
    label=$name
    case $name in
    one) label="1 process" ;;
    parts*) label="${name#parts} ranks, parts" ;;
    gather*) label="${name#gather} ranks, gather" ;;
    esac
    med=$(sort -n -k2 "times_$name" | awk '{ v[NR] = $2 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
    printf '%-22s %-26s %-26s %.2f\n' "$label" "$(medrange "times_$name" 1)" "$(medrange "times_$name" 2)" \
        "$(awk -v b=$bytes -v m="$med" 'BEGIN { print b / m / 1e9 }')"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
