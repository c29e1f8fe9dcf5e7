# Every example in pipelines/ (*.yaml and *.lua) runs on the host executor, and its sink outputs
# are byte-identical at depth 1, 2, 3, 8 and auto (results never depend on how many batches are in
# flight). Each run works on a fresh copy of pipelines/ so outputs land under the build directory.
# A file with a line "# pipectl-test: skip-host" ("-- pipectl-test: skip-host" in a .lua) is too
# large for the host executor (GPT-2 at full size) and is only checked and planned
# (test_examples_check); smaller tests cover its stages.
set -u
pipectl=$1 src=$2 build=$3
work=$build/pipelines_depth
rm -rf "$work"
mkdir -p "$work"
fail=0 runs=0 files=0
for f in "$src"/pipelines/*.yaml "$src"/pipelines/*.lua; do
  [ -e "$f" ] || continue
  name=$(basename "$f")
  if grep -Eq '^(#|--) pipectl-test: skip-host' "$f"; then echo "skip: $name (pipectl-test: skip-host)"; continue; fi
  for d in 1 2 3 8 auto; do
    dir=$work/d$d-$name
    # Without out/: other tests run the examples in place at the same time.
    mkdir -p "$dir"
    (cd "$src/pipelines" && tar cf - --exclude=./out .) | (cd "$dir" && tar xf -)
    if ! "$pipectl" run --executor host --depth "$d" --json "$dir/$name" >"$dir.json" 2>"$dir.err"; then
      echo "FAIL: $name at depth $d exits $?:"; cat "$dir.err"; fail=1; continue
    fi
    runs=$((runs + 1))
    if find "$dir" -name '*.partial' | grep -q .; then
      echo "FAIL: $name at depth $d left .partial files"; fail=1
    fi
    # Outputs: "path": "..." entries of the JSON summary, compared with depth 1's.
    grep -o '"path": "[^"]*"' "$dir.json" | sed 's/"path": "//; s/"$//' >"$dir.outputs"
    [ "$d" = 1 ] && continue
    base=$work/d1-$name
    while read -r out; do
      rel=${out#"$dir"/}
      if ! cmp -s "$out" "$base/$rel"; then
        echo "FAIL: $name: $rel differs between depth 1 and depth $d"; fail=1
      else
        files=$((files + 1))
      fi
    done <"$dir.outputs"
    # The checksums in the summary agree too.
    if ! diff <(grep -o '"checksum": "[^"]*"' "$base.json") <(grep -o '"checksum": "[^"]*"' "$dir.json") >/dev/null; then
      echo "FAIL: $name: checksums differ between depth 1 and depth $d"; fail=1
    fi
  done
done
# host_step computes z = y + fftshift(y) per batch, so each row of its output repeats with period
# n/2 (z[i] = y[i] + y[i + n/2] = z[i + n/2]): the two halves of every row match, and are not all
# zeros. Checks the Lua step and both device steps end to end, not only their depth invariance.
hs=$work/d1-host_step.yaml/out/host_step.npy
if [ -f "$src/pipelines/host_step.yaml" ]; then
  if [ ! -f "$hs" ]; then
    echo "FAIL: host_step.yaml wrote no $hs"; fail=1
  else
    hl=$(od -An -tu2 -j8 -N2 "$hs" | tr -d ' ')
    row=$((1048576 * 4)) half=$((1048576 * 2)) off=$((10 + hl))
    nb=$((($(stat -c %s "$hs") - off) / row))
    [ "$nb" = 8 ] || { echo "FAIL: host_step.npy holds $nb rows, want 8"; fail=1; }
    for ((b = 0; b < nb; b++)); do
      a=$((off + b * row))
      cmp -s -n "$half" -i "$a:$((a + half))" "$hs" "$hs" ||
        { echo "FAIL: host_step.npy row $b: its halves differ (z is not y + fftshift(y))"; fail=1; }
    done
    if cmp -s -n "$row" -i "$off:0" "$hs" /dev/zero; then
      echo "FAIL: host_step.npy row 0 is all zeros"; fail=1
    fi
  fi
fi
echo "$runs runs, $files output files identical to depth 1"
[ "$runs" -gt 0 ] || { echo "FAIL: no pipelines found"; exit 1; }
exit $fail
