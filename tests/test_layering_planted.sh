#!/bin/sh
# test_layering_planted: tests/layering.sh fails on an include planted a layer up, and on a header
# name used in two folders, naming the file; it passes on the tree as it is.
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
plant() { # plant NAME: a fresh copy of the source folders in $tmp/NAME
    mkdir -p "$tmp/$1" && cp -R "$src/runtime" "$src/parser" "$src/lua" "$src/stages" "$tmp/$1/"
}
plant ok
sh "$src/tests/layering.sh" --root "$tmp/ok" >"$tmp/ok.out" || fail "the tree as it is: $(cat "$tmp/ok.out")"

# base including the CLI's header, the top layer.
plant up
printf '#include "pl_cli.h"\n' >>"$tmp/up/runtime/base/pl_hash.c"
if sh "$src/tests/layering.sh" --root "$tmp/up" >"$tmp/up.out"; then fail "a planted upward include passed"; fi
grep -q '^layering: runtime/base/pl_hash.c (runtime/base) includes "pl_cli.h" of runtime/cli, a layer above it' "$tmp/up.out" ||
    fail "no line naming the planted include: $(cat "$tmp/up.out")"

# One layer up: the plan (core) including the scheduler (exec).
plant one
printf '#include "pl_sched.h"\n' >>"$tmp/one/runtime/core/pl_plan.c"
if sh "$src/tests/layering.sh" --root "$tmp/one" >"$tmp/one.out"; then fail "an include one layer up passed"; fi
grep -q 'runtime/core/pl_plan.c (runtime/core) includes "pl_sched.h" of runtime/exec' "$tmp/one.out" ||
    fail "no line naming the include one layer up: $(cat "$tmp/one.out")"

# The public header including one of ours.
plant api
sed -i 's|^#define PIPECTL_H$|#define PIPECTL_H\n#include "pl_status.h"|' "$tmp/api/runtime/api/pipectl.h"
if sh "$src/tests/layering.sh" --root "$tmp/api" >"$tmp/api.out"; then fail "pipectl.h including pl_status.h passed"; fi
grep -q 'runtime/api/pipectl.h includes "pl_status.h": the public header includes nothing of ours' "$tmp/api.out" ||
    fail "no line for the public header: $(cat "$tmp/api.out")"

# A header name in two folders (bare-name includes would be ambiguous).
plant dup
cp "$tmp/dup/runtime/base/pl_hash.h" "$tmp/dup/stages/pl_hash.h"
if sh "$src/tests/layering.sh" --root "$tmp/dup" >"$tmp/dup.out"; then fail "a duplicated header name passed"; fi
grep -q 'header name pl_hash.h is used in two folders' "$tmp/dup.out" || fail "no line for the duplicate: $(cat "$tmp/dup.out")"
echo "layering: planted violations caught"
