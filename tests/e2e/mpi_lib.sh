# mpi_lib.sh: what the MPI tests (test_mpi.sh, test_mpi_gather.sh) share; sourced with $pipectl
# and $build set, and WORK the folder (under $build) to make and enter. Exits 77 (skipped) when
# the build has no MPI or mpirun is missing. Defines:
#   fail, bad MSG      a failure is reported and counted; the test exits with $fail
#   mpi N CMD...       mpirun -n N CMD, as root and oversubscribed, killed after 120 s
#   same NAME A B      the folders A and B hold the same files, byte for byte (NAME says what)
"$pipectl" version | grep -q "^mpi: not built" && { echo "skip: pipectl built without MPI"; exit 77; }
command -v mpirun >/dev/null || { echo "skip: no mpirun"; exit 77; }
# Open MPI does not free what MPI_Init allocates (its components, the op tables): in a sanitizer
# build the ranks run without leak detection, every other check of ASan and UBSan kept.
if grep -qaE '__asan_init' "$pipectl"; then
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
work=$build/$WORK
rm -rf "$work"
mkdir -p "$work"
cd "$work" || exit 1
fail=0
bad() { echo "FAIL: $*"; fail=1; }
# Root in containers and CI; several ranks a core on small machines.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
mpi() { timeout -s KILL 120 mpirun --oversubscribe --allow-run-as-root -n "$@"; }
same() {
    local a b f
    a=$(cd "$2" && find . -type f | sort)
    b=$(cd "$3" && find . -type f | sort)
    [ "$a" = "$b" ] || { bad "$1: files differ: [$a] against [$b]"; return; }
    for f in $a; do cmp -s "$2/$f" "$3/$f" || bad "$1: $f differs from the single run's"; done
}
