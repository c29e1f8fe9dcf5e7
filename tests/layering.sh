#!/bin/sh
# layering.sh: the include rules between folders. A file may include headers of its own folder and
# of the folders listed before it below; the public header includes nothing of ours. Run by the
# build (target pl_layering, before the library compiles) and by CTest. Exits 1 naming each
# violating #include. `layering.sh --root DIR` checks another tree (the test of this script).
#
# The layers, lowest first (each folder's main header says what it owns):
#   runtime/base    status, spec, buffers, hashing, npy, rng, graph, pool, BLAS, JSON, NVTX
#   lua             the Lua binding (buffer views, the sandbox)
#   runtime/device  the CUDA services kinds use: checks, lazily loaded libraries, cuBLASLt, NVRTC
#   runtime/core    the stage contract, check, plan
#   stages          the kinds, one file or folder each, and their table
#   parser          YAML and Lua front ends, the key tables' schema
#   runtime/exec    run types, scheduler, stage runtime, timing, depth driver, host executor
#   runtime/exec/gpu  the GPU executor
#   runtime/record  reports, traces, bundles, environment, canonical form, plan listings
#   runtime/api     the embedding API (pipectl.h: includes nothing of ours)
#   runtime/cli     the command line (runtime/cli/gpu: its CUDA-only parts)
root=$(cd "$(dirname "$0")/.." && pwd)
[ "$1" = "--root" ] && root=$2
cd "$root" || exit 2
layers="runtime/base lua runtime/device runtime/core stages parser runtime/exec runtime/exec/gpu
runtime/record runtime/api runtime/cli"

# The layer a folder belongs to: its own entry, else the entry above it (stages/kernel -> stages,
# runtime/cli/gpu -> runtime/cli).
layer_of() {
    d=$1
    while [ -n "$d" ] && [ "$d" != "." ]; do
        for l in $layers; do [ "$l" = "$d" ] && echo "$l" && return; done
        d=$(dirname "$d")
    done
}
# The index of a layer in $layers (0-based).
rank_of() {
    i=0
    for l in $layers; do
        [ "$l" = "$1" ] && echo $i && return
        i=$((i + 1))
    done
    echo -1
}

files=$(find runtime parser lua stages -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \
    -o -name '*.cuh' -o -name '*.cpp' \) | sort)
# Where each header lives: headers are included by bare name, so names are unique.
index=$(for f in $files; do case $f in *.h | *.cuh) echo "$(basename "$f") $(dirname "$f")" ;; esac; done)
dups=$(echo "$index" | awk '{print $1}' | sort | uniq -d)
bad=0
for d in $dups; do
    echo "layering: header name $d is used in two folders (headers are included by bare name)"
    bad=1
done
for f in $files; do
    fl=$(layer_of "$(dirname "$f")")
    fr=$(rank_of "$fl")
    for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
        if [ "$f" = runtime/api/pipectl.h ]; then
            echo "layering: $f includes \"$inc\": the public header includes nothing of ours"
            bad=1
            continue
        fi
        where=$(echo "$index" | awk -v h="$inc" '$1 == h {print $2; exit}')
        [ -n "$where" ] || continue # a header outside these folders (a generated or system one)
        il=$(layer_of "$where")
        ir=$(rank_of "$il")
        if [ "$ir" -gt "$fr" ]; then
            echo "layering: $f ($fl) includes \"$inc\" of $il, a layer above it (tests/layering.sh lists the order)"
            bad=1
        fi
    done
done
# The GPU executor's internals stay inside it (the bench CLI and the GPU tests excepted).
for f in $files; do
    case $f in runtime/exec/gpu/* | runtime/cli/*) continue ;; esac
    if grep -q '^#include "pl_gx.h"' "$f"; then
        echo "layering: $f includes the GPU executor's internals \"pl_gx.h\""
        bad=1
    fi
done
[ $bad -eq 0 ] && echo "layering: ok"
exit $bad
