#!/usr/bin/env bash
# test_install: what an embedder does. Installs the build into a temporary prefix, checks the
# layout and that libpipectl exports only the public API, builds embed.c against the installed copy
# with `pkg-config --cflags --libs pipectl` (strict C11: pipectl.h needs nothing else), runs it on
# the quickstart pipeline and requires the checksum `pipectl run --executor host --json` reports,
# and runs it on a bad pipeline: exit 2 and the message with its position.
# usage: test_install.sh CMAKE SOURCE_DIR BUILD_DIR [CC]
set -u
cmake=$1 src=$2 build=$3 cc=${4:-cc}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$cmake" --install "$build" --prefix "$work/prefix" >"$work/install.log" 2>&1 ||
    { cat "$work/install.log"; fail "cmake --install $build --prefix $work/prefix"; }
for f in bin/pipectl include/pipectl.h share/man/man1/pipectl.1 \
    share/bash-completion/completions/pipectl share/zsh/site-functions/_pipectl \
    share/doc/pipectl/LICENSE; do
    [ -e "$work/prefix/$f" ] || fail "$f is not installed"
done
pc=$(find "$work/prefix" -name pipectl.pc | head -1)
[ -n "$pc" ] || fail "pipectl.pc is not installed"
export PKG_CONFIG_PATH=$(dirname "$pc")
libdir=$(pkg-config --variable=libdir pipectl) || fail "pkg-config cannot read $pc"
[ -e "$libdir/libpipectl.so" ] || fail "no libpipectl.so in $libdir"

exported=$(nm -D --defined-only "$libdir/libpipectl.so" | awk '{print $3}' |
    grep -v -e '^pipectl_' -e '^_init$' -e '^_fini$')
[ -z "$exported" ] || fail "libpipectl.so exports more than pipectl_*: $(echo $exported | head -c 300)"

# shellcheck disable=SC2046 # pkg-config's output is meant to be split into words
"$cc" -std=c11 -Wall -Wextra -Werror -pedantic "$src/tests/install/embed.c" -o "$work/embed" \
    $(pkg-config --cflags --libs pipectl) -Wl,-rpath,"$libdir" ||
    fail "embed.c does not build against the installed copy"

# A copy of the quickstart, so its output does not race other tests writing pipelines/out/.
cp "$src/pipelines/quickstart.yaml" "$work/"
"$work/embed" "$work/quickstart.yaml" >"$work/embed.out" 2>"$work/embed.err" ||
    fail "embed exited $?: $(cat "$work/embed.err")"
"$work/prefix/bin/pipectl" run --executor host --json "$work/quickstart.yaml" >"$work/run.json" \
    2>"$work/run.err" || fail "installed pipectl run exited $?: $(cat "$work/run.err")"
want=$(grep -o '"checksum": "0x[0-9a-f]*"' "$work/run.json" | grep -o '0x[0-9a-f]*')
got=$(grep -o 'checksum 0x[0-9a-f]*' "$work/embed.out" | grep -o '0x[0-9a-f]*')
[ -n "$want" ] && [ "$got" = "$want" ] ||
    fail "embed printed checksum(s) '$got', pipectl run --json says '$want'"

cp "$src/tests/parser/bad/alias.yaml" "$work/"
(cd "$work" && ./embed alias.yaml >/dev/null 2>embed_bad.err)
rc=$?
[ $rc = 2 ] || fail "embed on a bad pipeline exited $rc, want 2"
head -1 "$work/embed_bad.err" | cmp -s - "$src/tests/parser/bad/alias.expected" ||
    fail "embed's message differs from pipectl check's: $(cat "$work/embed_bad.err")"
grep -q "(EINPUT at alias.yaml:2:6)" "$work/embed_bad.err" ||
    fail "embed did not print the record's position: $(cat "$work/embed_bad.err")"
echo "ok: installed to a prefix, embed.c built with pkg-config, checksum $got as pipectl run"
