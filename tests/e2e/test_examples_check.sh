#!/bin/bash
# test_examples_check: every pipeline in pipelines/ passes `pipectl check` and plans (listing and
# DOT, twice, byte-identical); a YAML and a Lua file of one base name plan identically; and the
# check/plan command lines behave as documented (exit codes, messages).
# usage: test_examples_check.sh PIPECTL SOURCE_DIR BUILD_DIR
set -u
pipectl=$1 src=$2
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
err() {
    echo "FAIL: $*"
    fail=$((fail + 1))
}

shopt -s nullglob
files=("$src"/pipelines/*.yaml "$src"/pipelines/*.lua)
[ ${#files[@]} -gt 0 ] || err "no pipelines in $src/pipelines"
for f in "${files[@]}"; do
    base=$(basename "$f")
    out=$("$pipectl" check "$f" 2>"$tmp/err")
    rc=$?
    if [ $rc -ne 0 ]; then
        err "$base: pipectl check exit $rc: $(cat "$tmp/err")"
        continue
    fi
    case $out in "$f: ok ("*" stage"*" buffer"*")") ;; *) err "$base: unexpected output '$out'" ;; esac
    for mode in "" "--dot"; do
        "$pipectl" plan $mode "$f" >"$tmp/p1" 2>"$tmp/err" || err "$base: pipectl plan $mode failed: $(cat "$tmp/err")"
        "$pipectl" plan $mode "$f" >"$tmp/p2" 2>/dev/null
        cmp -s "$tmp/p1" "$tmp/p2" || err "$base: pipectl plan $mode differs between two runs"
        [ -s "$tmp/p1" ] || err "$base: pipectl plan $mode printed nothing"
    done
done

# YAML and Lua versions of one pipeline: the plan depends only on the spec's content.
for lua in "$src"/pipelines/*.lua; do
    yaml=${lua%.lua}.yaml
    [ -f "$yaml" ] || continue
    "$pipectl" plan "$yaml" >"$tmp/y" 2>&1
    "$pipectl" plan "$lua" >"$tmp/l" 2>&1
    cmp -s "$tmp/y" "$tmp/l" || err "$(basename "$lua"): plan differs from $(basename "$yaml"): $(diff "$tmp/y" "$tmp/l" | head -5)"
done

# All files at once: one line per file, exit 0.
n=$("$pipectl" check "${files[@]}" 2>/dev/null | grep -c ': ok (')
[ "$n" -eq ${#files[@]} ] || err "check of all ${#files[@]} files printed $n ok lines"

# Command-line behaviour.
expect() { # WANT_RC WANT_STDERR_LINE CMD...
    local want_rc=$1 want_err=$2
    shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [ $rc -eq "$want_rc" ] || err "'$*': exit $rc, expected $want_rc"
    [ -z "$want_err" ] || grep -qxF -- "$want_err" "$tmp/err" || err "'$*': stderr '$(cat "$tmp/err")', expected '$want_err'"
}
q=$src/pipelines/quickstart.yaml
expect 2 "error: unknown option '--x' for 'pipectl plan'; see 'pipectl plan --help'" "$pipectl" plan --x "$q"
expect 2 "error: unknown option '--fast' for 'pipectl check'; see 'pipectl check --help'" "$pipectl" check --fast "$q"
expect 2 "error: 'pipectl check' needs at least one pipeline file; see 'pipectl check --help'" "$pipectl" check
expect 2 "error: 'pipectl plan' needs exactly one pipeline file, got 0; see 'pipectl plan --help'" "$pipectl" plan --dot
expect 2 "error: --depth needs a whole number from 1 to 64, got '65'; see 'pipectl plan --help'" "$pipectl" plan --depth 65 "$q"
expect 2 "error: --depth needs a whole number from 1 to 64 or 'auto', got 'x'; see 'pipectl plan --help'" "$pipectl" plan --depth=x "$q"
expect 0 "" "$pipectl" plan --help
grep -q '^usage: pipectl plan \[--dot | --json\] \[--depth N\] FILE' "$tmp/out" || err "plan --help: no usage line"
expect 0 "" "$pipectl" plan --depth 5 "$q"
grep -q '^depth 5 (slots in flight)' "$tmp/out" || err "plan --depth 5 not applied: $(head -2 "$tmp/out")"
grep -q '^  total: .* for 5 slots$' "$tmp/out" || err "plan --depth 5: memory total not for 5 slots"

# A bad file among good ones: the good ones still print ok, stderr has the error, exit 2.
printf 'buffers:\n  x: {shape: [4]}\nstages:\n  - {name: up, kind: h2d, from: x, to: x}\n' >"$tmp/bad.yaml"
"$pipectl" check "$q" "$tmp/bad.yaml" "$q" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] || err "check good bad good: exit $rc, expected 2"
[ "$(grep -c ': ok (' "$tmp/out")" -eq 2 ] || err "check good bad good: expected 2 ok lines, got: $(cat "$tmp/out")"
grep -q "bad.yaml:4:.*: error: h2d stage 'up' copies host -> device, but its destination 'x' is a host buffer" "$tmp/err" ||
    err "check good bad good: stderr '$(cat "$tmp/err")'"

echo "${#files[@]} pipelines checked and planned, $fail failure(s)"
[ $fail -eq 0 ]
