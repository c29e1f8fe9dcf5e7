# docs/cli.md is `pipectl help --markdown`: the docs cannot drift from the command table.
set -u
pipectl=$1 src=$2
if ! diff -u "$src/docs/cli.md" <("$pipectl" help --markdown); then
  echo "docs/cli.md is out of date: regenerate with 'pipectl help --markdown > docs/cli.md'"
  exit 1
fi
echo "docs/cli.md matches the command table"
