#!/bin/sh
# run_fuzz: runs fuzz targets one after another, each for SECONDS (default 1200) at nice 19 in
# one process, with its seed corpus (tests/fuzz/make_corpus.sh) and dictionary, keeping the
# corpus it grows in WORK/corpus_<target> and any finding in WORK/<target>-crash-*; prints each
# target's executions, coverage and findings.
# usage: tests/fuzz/run_fuzz.sh BUILD_DIR WORK SECONDS TARGET...   (TARGET: tokenizer, jsonl, ...)
set -u
build=$1 work=$2 secs=$3
shift 3
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work"
for t in "$@"; do
    case $t in
    tokenizer | jsonl | safetensors) dict=$root/tests/fuzz/json.dict ;;
    set) dict=$root/tests/fuzz/set.dict ;;
    *) dict=$root/tests/fuzz/$t.dict ;;
    esac
    mkdir -p "$work/corpus_$t"
    nice -n 19 "$build/tests/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 \
        -max_len=65536 -print_final_stats=1 -dict="$dict" -artifact_prefix="$work/$t-" \
        "$work/corpus_$t" "$build/corpus_$t" >"$work/$t.log" 2>&1
    rc=$?
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$t.log" | grep -o '[0-9]*$')
    last=$(grep -E '^#[0-9]+' "$work/$t.log" | tail -1 | grep -o 'cov: [0-9]* ft: [0-9]*')
    found=$(ls "$work/$t"-* 2>/dev/null | wc -l)
    echo "fuzz_$t: ${secs} s, exit $rc, $execs executions, $last, $found findings"
done
