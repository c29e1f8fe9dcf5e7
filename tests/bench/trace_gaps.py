#!/usr/bin/env python3
"""trace_gaps: from a `pipectl run --trace FILE` timeline (the run clock's origin is 0), prints
when the first stage started, each batch's completion (its last span's end) and the gaps
between consecutive completions, and per-stage mean / p50 / max.

    python3 tests/bench/trace_gaps.py TRACE.json [--stage NAME] [--quiet]
"""
import json
import sys


def main(argv):
    path = argv[1]
    stage_filter = argv[argv.index("--stage") + 1] if "--stage" in argv else None
    quiet = "--quiet" in argv
    ev = json.load(open(path))["traceEvents"]
    spans = [e for e in ev if e.get("ph") == "X"]
    if not spans:
        print("no spans")
        return 1
    first = min(spans, key=lambda e: e["ts"])
    print(f"first stage start: {first['ts']:.1f} us after the run clock ({first['name']})")
    done = {}
    by_stage = {}
    for e in spans:
        b = e.get("args", {}).get("batch")
        end = e["ts"] + e["dur"]
        if b is not None:
            done[b] = max(done.get(b, 0.0), end)
        by_stage.setdefault(e["name"], []).append(e["dur"])
    for name, d in by_stage.items():
        if stage_filter and name != stage_filter:
            continue
        d = sorted(d)
        print(f"  {name:12s} n {len(d):4d} mean {sum(d) / len(d):8.1f} p50 {d[len(d) // 2]:8.1f} "
              f"max {d[-1]:8.1f} us")
    bs = sorted(done)
    if not quiet:
        prev = None
        for b in bs:
            gap = "" if prev is None else f" gap {done[b] - prev:8.1f}"
            print(f"  batch {b:4d} done {done[b]:10.1f} us{gap}")
            prev = done[b]
    if len(bs) > 1:
        gaps = [done[bs[i]] - done[bs[i - 1]] for i in range(1, len(bs))]
        print(f"batches {len(bs)}: first done {done[bs[0]]:.1f} us, last {done[bs[-1]]:.1f} us, "
              f"mean gap {sum(gaps) / len(gaps):.1f} us, max gap {max(gaps):.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
