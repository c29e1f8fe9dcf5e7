#!/bin/sh
# layering.sh: the include rules that keep the architecture what the file list says. Run by the
# build (target pl_layering, before the library compiles) and by CTest. Exits 1 naming each
# violating #include.
#   base (runtime/pl_{status,spec,hash,rng,npy,half,buffers,nvtx,graph,pool,blas}): include only
#        base (pool: the run's host thread pool; blas: the one door to BLAS; both leaves that
#        stages use for parallel host work)
#   stages/: base, stages/, lua/ (the Lua binding) and runtime/gpu/pl_gpu.h and pl_nvrtc.h (CUDA
#            wrappers: ops, and user kernels' NVRTC and modules); never
#            the plan, the executors, the scheduler or the CLI
#   parser/: base, stages/ (key tables), lua/, parser/; never the plan or the executors
#   runtime/ (check, plan, executors): never the CLI; the GPU executor's internals (pl_gx.h,
#            pl_exec_gpu_int.h) only from runtime/gpu/ and the bench CLI
#   runtime/pipectl.h (the public API): includes nothing of ours, so embedders need no other header
cd "$(dirname "$0")/.." || exit 2
base="pl_status.h pl_spec.h pl_hash.h pl_rng.h pl_npy.h pl_half.h pl_buffers.h pl_nvtx.h pl_graph.h pl_pool.h pl_blas.h"
stage_h=$(cd stages && ls *.h *.cuh 2>/dev/null | tr '\n' ' ')
lua_h=$(cd lua && ls *.h | tr '\n' ' ')
cli_h=$(cd runtime/cli && ls *.h | tr '\n' ' ')
parser_h=$(cd parser && ls *.h | tr '\n' ' ')
bad=0
check() { # check FILE ALLOWED...: every quoted include of FILE must be in ALLOWED
    f=$1
    shift
    for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
        ok=0
        for a in "$@"; do [ "$inc" = "$a" ] && ok=1 && break; done
        if [ $ok -eq 0 ]; then
            echo "layering: $f includes \"$inc\", which its layer may not use (see tests/layering.sh)"
            bad=1
        fi
    done
}
for b in $base; do
    for f in runtime/${b%.h}.c runtime/$b; do [ -f "$f" ] && check "$f" $base; done
done
for f in stages/*.c stages/*.h stages/*.cu stages/*.cuh stages/*.cpp; do
    [ -f "$f" ] && check "$f" $base $stage_h $lua_h pl_gpu.h pl_nvrtc.h
done
for f in parser/*.c parser/*.h; do
    [ -f "$f" ] && check "$f" $base $stage_h $lua_h $parser_h
done
for f in runtime/*.c runtime/*.h runtime/gpu/*.c runtime/gpu/*.h runtime/gpu/*.cu; do
    [ -f "$f" ] || continue
    for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
        for c in $cli_h; do
            [ "$inc" = "$c" ] && echo "layering: $f includes the CLI header \"$inc\"" && bad=1
        done
        case "$f:$inc" in
        runtime/gpu/*:*) ;;
        *:pl_gx.h | *:pl_exec_gpu_int.h)
            echo "layering: $f includes the GPU executor's internals \"$inc\"" && bad=1 ;;
        esac
    done
done
check runtime/pipectl.h
[ $bad -eq 0 ] && echo "layering: ok"
exit $bad
