# docs/cli.md is `pipectl help --markdown`: the docs cannot drift from the command table. Its
# environment table is the one list of the variables pipectl reads: every "PIPECTL_*" name the
# sources use is in it, and runtime/api/pipectl.h's comment block lists the same names.
set -u
pipectl=$1 src=$2
fail=0
if ! diff -u "$src/docs/cli.md" <("$pipectl" help --markdown); then
  echo "docs/cli.md is out of date: regenerate with 'pipectl help --markdown > docs/cli.md'"
  fail=1
fi
table=$("$pipectl" help --markdown | sed -n '/^## Environment/,$p' | grep -o '^| `[A-Z_]*=' | tr -d '|`= ')
read_by_sources=$(grep -rhoE '"PIPECTL_[A-Z_]+"' "$src/runtime" "$src/parser" "$src/stages" "$src/lua" \
  --exclude-dir=cli | tr -d '"' | sort -u)
for v in $read_by_sources; do
  grep -qx "$v" <<<"$table" || { echo "FAIL: the sources read $v, which the environment table lacks"; fail=1; }
done
for v in $table; do
  grep -q "^ \*     $v=" "$src/runtime/api/pipectl.h" ||
    { echo "FAIL: $v is in the environment table, not in runtime/api/pipectl.h's list"; fail=1; }
done
for v in $(grep -oE '^ \*     [A-Z_]+=' "$src/runtime/api/pipectl.h" | tr -d ' *='); do
  grep -qx "$v" <<<"$table" || { echo "FAIL: runtime/api/pipectl.h lists $v, which the environment table lacks"; fail=1; }
done
[ $fail -eq 0 ] && echo "docs/cli.md matches the command table; the environment table, the sources and pipectl.h agree"
exit $fail
