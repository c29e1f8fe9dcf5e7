#!/bin/sh
# make_corpus: seed corpora for the fuzz targets, from files that already exist in the tree.
# usage: tests/fuzz/make_corpus.sh [BUILD_DIR]   (default build-fuzz; run from the repository root)
# Each target gets BUILD_DIR/corpus_<target>/; add a target with one more `seed` line below.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-build-fuzz}

# seed TARGET GLOB...: copies the files matching the globs into OUT/corpus_TARGET.
seed() {
    target=$1
    shift
    dir=$out/corpus_$target
    mkdir -p "$dir"
    n=0
    for f in "$@"; do
        [ -f "$f" ] || continue
        # Flatten the path so files of the same name from different folders do not collide.
        name=$(printf '%s' "${f#"$root"/}" | tr '/' '_')
        cp "$f" "$dir/$name"
        n=$((n + 1))
    done
    echo "corpus_$target: $n seed files in $dir"
}

seed yaml "$root"/pipelines/*.yaml "$root"/pipelines/*/*.yaml "$root"/tests/parser/good/*.yaml \
    "$root"/tests/parser/bad/*.yaml

# Lua front end (fuzz_lua): the Lua pipelines and the Lua test scripts (plenty of Lua syntax).
# Dictionary: tests/fuzz/lua.dict (-dict=tests/fuzz/lua.dict).
seed lua "$root"/pipelines/*.lua "$root"/tests/lua/*.lua

# gen TARGET NAME: a seed made here, its bytes on stdin.
gen() {
    mkdir -p "$out/corpus_$1"
    cat >"$out/corpus_$1/$2"
}

# Tokenizer files (fuzz_tokenizer): byte 0 even, a tokenizer.json; odd, vocab.json 0xFF
# merges.txt. The tiny vocabulary pipectl ships, and a few hand-made ones.
tiny=$root/pipelines/data/tiny_bpe
{ printf '\000'; cat "$tiny/tokenizer.json"; } | gen tokenizer tiny_tokenizer_json
{ printf '\001'; cat "$tiny/vocab.json"; printf '\377'; cat "$tiny/merges.txt"; } | gen tokenizer tiny_pair
printf '\001{"a": 0, "b": 1, "ab": 2, "<|endoftext|>": 3}\377#version: 0.2\na b\n' | gen tokenizer small_pair
printf '\000{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}, "added_tokens": [{"id": 3, "content": "<|endoftext|>", "special": true}]}' |
    gen tokenizer small_json
printf '\000{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]]}}' |
    gen tokenizer merges_pairs
echo "corpus_tokenizer: $(ls "$out/corpus_tokenizer" | wc -l) seed files"

# JSONL and text records (fuzz_jsonl): byte 0 = format (bit 0: JSONL), truncate (bit 1), row
# length (bits 2-7).
printf '\101{"text": "hello"}\n{"text": "caf\\u00e9 \\ud83d\\ude00 long enough to be cut"}\n\n{"text": ""}\n' |
    gen jsonl jsonl_truncate
printf '\041{"text": "a", "id": 1}\r\n{"id": 2}\n{"text": 3}\n[1]\n' | gen jsonl jsonl_errors
printf '\375{"text": "x\\u0000y"}\n   \n{"text": "\\n\\t"}' | gen jsonl jsonl_long_rows
printf '\100\357\273\277first line\r\nsecond\n\nthird without newline' | gen jsonl text_bom
printf '\002caf\303\251 \342\202\254\nxyz' | gen jsonl text_cut
echo "corpus_jsonl: $(ls "$out/corpus_jsonl" | wc -l) seed files"

# safetensors (fuzz_safetensors): header JSON 0xFF data (the harness writes the length), or 0xFE
# and a whole file.
printf '{"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}, "__metadata__": {"format": "pt"}}\377' |
    cat - /dev/zero | head -c 120 | gen safetensors f32
printf '{"a": {"dtype": "F16", "shape": [3], "data_offsets": [0, 6]}, "b": {"dtype": "BF16", "shape": [1, 2], "data_offsets": [6, 10]}, "c": {"dtype": "I64", "shape": [], "data_offsets": [10, 18]}}\377' |
    cat - /dev/zero | head -c 200 | gen safetensors mixed
printf '\376\030\000\000\000\000\000\000{"x": {"dtype": "F32"}}   ' | gen safetensors whole_file
printf '{"e": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}}\377' | gen safetensors empty_tensor
echo "corpus_safetensors: $(ls "$out/corpus_safetensors" | wc -l) seed files"

# --set values (fuzz_set): byte 0 even, the YAML front end, odd the Lua one; a --set a line.
printf '\000run.batches=8\nscale.alpha=3\nbuffers.x.shape=[8, 8]' | gen set yaml_basic
printf '\001run.depth=auto\nstages.gen.generator=range\npost.parallel=2' | gen set lua_basic
printf '\000post.code=function run(b, o, v) v.s[1] = 1 end\nsave.to=-\nrun.memory_budget={device: 1 GiB}' |
    gen set yaml_code
printf '\000buffers.z.dtype=f64\nbuffers.z.shape=[1]\nrun={batches: 2}\npipeline=other' | gen set yaml_new_buffer
printf '\001=x\nrun.=1\n.a=b\nnosuch.key=1\nrun.batches.x=1\nbuffers..dtype=f32' | gen set lua_bad_paths
echo "corpus_set: $(ls "$out/corpus_set" | wc -l) seed files"
