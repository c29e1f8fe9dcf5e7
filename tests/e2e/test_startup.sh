#!/usr/bin/env bash
# Start-up cost: `pipectl version` and `check` of a host pipeline load no CUDA library they do not
# use. The CUDA build links only libcudart; cuBLAS, cuBLASLt and NVRTC are loaded on first use
# (runtime/device/pl_cudalibs.c). Linked, they would take `pipectl version` to ~258 MB of max RSS;
# loaded on first use it stays at ~10 MB, as the host-only build. The bound, 40 MB, is far from
# both: any of the three back on the link line (or loaded at start-up) crosses it, and a new host
# library does not. In the CUDA build `check` of a user kernel compiles it through NVRTC (a cubin
# lands in the cache).
set -u
pipectl=$1
src=$2
fail=0
say_fail() { echo "FAIL: $*"; fail=1; }
bound_kib=40960

# Max RSS in KiB of one run of the command (GNU time, else Python's getrusage of its child).
max_rss() {
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -f %M -o "$tmp/rss" "$@" >/dev/null 2>&1 || return 1
        tail -1 "$tmp/rss"
    else
        python3 -c 'import resource, subprocess, sys
rc = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(rc)' "$@"
    fi
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
needed=$(readelf -d "$pipectl" 2>/dev/null | grep NEEDED)
cuda=0
echo "$needed" | grep -q libcudart && cuda=1
for lib in libcublas libcublasLt libnvrtc; do
    echo "$needed" | grep -q "\[$lib\.so" && say_fail "pipectl links $lib (it must be loaded on first use)"
done

# Sanitizer builds map shadow memory: their RSS says nothing about what start-up loads.
if echo "$needed" | grep -Eq "lib(a|t)san"; then
    echo "sanitizer build: RSS bound not checked"
else
    for cmd in "version" "check $src/pipelines/quickstart.yaml"; do
        # shellcheck disable=SC2086 # cmd is meant to be split into words
        rss=$(max_rss "$pipectl" $cmd) || { say_fail "pipectl $cmd failed"; continue; }
        echo "pipectl $cmd: max RSS $rss KiB (bound $bound_kib KiB)"
        [ "$rss" -lt "$bound_kib" ] || say_fail "pipectl $cmd: max RSS $rss KiB, bound $bound_kib KiB"
    done
fi

if [ $cuda = 1 ]; then
    out=$(XDG_CACHE_HOME="$tmp/cache" "$pipectl" check "$src/pipelines/user_kernel.yaml" 2>&1) ||
        say_fail "check user_kernel.yaml: $out"
    n=$(find "$tmp/cache" -name '*.cubin' 2>/dev/null | wc -l)
    [ "$n" -ge 1 ] || say_fail "check user_kernel.yaml compiled no cubin through NVRTC ($out)"
fi
[ $fail = 0 ] && echo "start-up loads no CUDA library it does not use"
exit $fail
