"""Peak RSS of `pipectl run --executor E --json --batches N FILE` for each N (docs/perf.md,
"Long runs"): ru_maxrss of the child, from os.wait4. The parent stays small on purpose: a child's
ru_maxrss starts at its parent's RSS at fork (Linux keeps the pre-exec high-water mark).

usage: python3 tests/bench/rss_peak.py [--executor host|gpu] PIPECTL FILE N...
(the GPU check: --executor gpu build/pipectl five.yaml 100000 1000000 10000000, with
five.yaml from tests/e2e/test_long_run.sh)
"""
import os
import subprocess
import sys
import time

args = sys.argv[1:]
executor = "host"
if args[:1] == ["--executor"]:
    executor, args = args[1], args[2:]
pipectl, pipeline, counts = args[0], args[1], args[2:]
for n in counts:
    t = time.time()
    p = subprocess.Popen([pipectl, "run", "--executor", executor, "--json", "--batches", n,
                          pipeline], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, st, ru = os.wait4(p.pid, 0)
    print("%s batches (%s): exit %d, peak RSS %d KiB, %.1f s" % (n, executor, st >> 8,
                                                               ru.ru_maxrss, time.time() - t))
