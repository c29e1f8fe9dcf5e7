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
