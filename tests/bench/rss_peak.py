"""Peak RSS of `pipectl run --executor host --json --batches N FILE` for each N (docs/perf.md,
"Long runs"): ru_maxrss of the child, from os.wait4. The parent stays small on purpose: a child's
ru_maxrss starts at its parent's RSS at fork (Linux keeps the pre-exec high-water mark).

usage: python3 tests/bench/rss_peak.py PIPECTL FILE N...
"""
import os
import subprocess
import sys
import time

for n in sys.argv[3:]:
    t = time.time()
    p = subprocess.Popen([sys.argv[1], "run", "--executor", "host", "--json", "--batches", n,
                          sys.argv[2]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, st, ru = os.wait4(p.pid, 0)
    print("%s batches: exit %d, peak RSS %d KiB, %.1f s" % (n, st >> 8, ru.ru_maxrss,
                                                          time.time() - t))
