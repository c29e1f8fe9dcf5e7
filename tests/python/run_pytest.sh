#!/usr/bin/env bash
# run_pytest.sh: runs the Python package's tests (tests/python) for CTest with the build's library
# and command, on the first Python that has numpy and pytest ($PYTHON, python3, /usr/bin/python3:
# Debian's python3-numpy and python3-pytest; exit 77, skipped, when none has them). With --gpu,
# only the tests marked gpu, and exit 77 when the device is missing (they all skip then).
# usage: run_pytest.sh LIBRARY CLI [--gpu] [pytest args...]
set -u
lib=$1 cli=$2
shift 2
gpu=0
[ "${1:-}" = "--gpu" ] && gpu=1 && shift
here=$(cd "$(dirname "$0")" && pwd)
py=""
for c in ${PYTHON:-} python3 /usr/bin/python3; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import numpy, pytest' 2>/dev/null; then
        py=$c
        break
    fi
done
if [ -z "$py" ]; then
    echo "SKIP: no Python with numpy and pytest (apt-get install python3-numpy python3-pytest)"
    exit 77
fi
export PIPECTL_LIBRARY=$lib PIPECTL_CLI=$cli
export PYTHONPATH="$here/../../python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
marks=(-m "not gpu")
[ $gpu = 1 ] && marks=(-m gpu)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$py" -m pytest -p no:cacheprovider -q -rs "${marks[@]}" "$here" "$@" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
if [ $gpu = 1 ] && [ "$rc" = 0 ] && ! grep -q " passed" "$out"; then
    echo "SKIP: no usable CUDA device (every gpu test skipped)"
    exit 77
fi
exit "$rc"
