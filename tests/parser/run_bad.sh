#!/bin/bash
# run_bad: the bad-input corpus. For every BAD_DIR/NAME.yaml, runs `pipectl check NAME.yaml` from
# inside BAD_DIR (so messages carry the bare file name), with the arguments of BAD_DIR/NAME.args
# before the file when there is one (one argument a line: `--set` then `run.batches=4`), and
# requires exit code 2 (bad input) and stderr identical, byte for byte, to BAD_DIR/NAME.expected,
# where BAD_DIR's own absolute path is written `<bad>` (run.confine's messages name the folder).
# Lists every mismatch, then fails.
# usage: run_bad.sh PIPECTL BAD_DIR
# Adding a case: write NAME.yaml, run `pipectl check NAME.yaml 2> NAME.expected` inside BAD_DIR,
# and read the message: it must say where, what, and how to fix it.
set -u
pipectl=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
cd "$2" || exit 1

# Until `pipectl check` exists this suite cannot run; say so instead of failing every case.
probe=$("$pipectl" check empty.yaml 2>&1 >/dev/null)
case $probe in *"not built yet"*) echo "SKIP: pipectl check is not built yet: $probe"; exit 77 ;; esac

fail=0 n=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
here=$(pwd -P)
check_case() { # NAME EXPECTED_FILE
    local name=$1 want=$2 rc args=()
    [ -f "${name%.yaml}.args" ] && mapfile -t args <"${name%.yaml}.args"
    "$pipectl" check "${args[@]}" "$name" >"$tmp/out" 2>"$tmp/raw"
    rc=$?
    sed "s|$here|<bad>|g" "$tmp/raw" >"$tmp/err"
    n=$((n + 1))
    if [ "$rc" -ne 2 ]; then
        echo "FAIL $name: exit code $rc, expected 2"
        fail=$((fail + 1))
    fi
    if ! cmp -s "$tmp/err" "$want"; then
        echo "FAIL $name: stderr differs from $(basename "$want")"
        diff "$want" "$tmp/err" | sed 's/^/    /'
        fail=$((fail + 1))
    fi
}

for f in *.yaml; do
    want=${f%.yaml}.expected
    if [ ! -f "$want" ]; then
        echo "FAIL $f: no $want"
        fail=$((fail + 1))
        continue
    fi
    check_case "$f" "$want"
done

# A file that does not exist cannot live in the corpus: its expected text is here.
printf "error: cannot read 'no-such-file.yaml': No such file or directory\n" >"$tmp/missing"
check_case no-such-file.yaml "$tmp/missing"

echo "$n cases, $fail failure(s)"
[ "$fail" -eq 0 ]
