#!/usr/bin/env python3
"""rag_summary: one line per run of pipelines/rag_gpt2.yaml (or any pipeline with a `retrieve`
stage) from `pipectl run --json` and, when given, its `--trace` timeline: per batch, the
steady-state per batch (steady_per_batch_s), the busiest engine and both ratios to it, the
retrieve stage's mean / p50 / max, when the first stage started after the run clock and when the
first batch completed (the fill), and the largest gap between consecutive batch completions.

    python3 tests/gpu/rag_summary.py LABEL RUN.json [TRACE.json]
"""
import json
import sys


def trace_figures(path):
    ev = json.load(open(path))["traceEvents"]
    spans = [e for e in ev if e.get("ph") == "X" and e.get("dur", 0) > 0]  # untimed: none
    if not spans:
        return None
    first = min(e["ts"] for e in spans)
    done = {}
    for e in spans:
        b = e.get("args", {}).get("batch")
        if b is not None:
            done[b] = max(done.get(b, 0.0), e["ts"] + e["dur"])
    bs = sorted(done)
    gaps = [done[bs[i]] - done[bs[i - 1]] for i in range(1, len(bs))]
    return first, done[bs[0]] if bs else 0.0, max(gaps) if gaps else 0.0


def main(argv):
    label, run = argv[1], argv[2]
    text = open(run).read()
    j = json.loads(text[text.index("{"):])
    if j.get("status") != "ok":
        print(f"{label}: status {j.get('status')}: {j.get('error')}")
        return 1
    eng = max(j["engines"], key=lambda e: e["busy_per_batch_s"])
    busiest = eng["busy_per_batch_s"]
    st = {s["name"]: s for s in j["stages"]}
    r = st.get("retrieve", {})
    per, steady = j["per_batch_s"], j.get("steady_per_batch_s")
    line = (f"{label}: per batch {per * 1e3:.3f} ms ({per / busiest:.3f}x), steady "
            + (f"{steady * 1e3:.3f} ms ({steady / busiest:.3f}x)" if steady else "n/a")
            + f", busiest {eng['name']} {busiest * 1e3:.3f} ms; retrieve mean "
            f"{r.get('mean_s', 0) * 1e3:.3f} p50 {r.get('p50_s', 0) * 1e3:.3f} max "
            f"{r.get('max_s', 0) * 1e3:.3f} ms")
    if len(argv) > 3:
        t = trace_figures(argv[3])
        if t:
            line += (f"; first stage at {t[0]:.0f} us, batch 0 done at {t[1] / 1e3:.3f} ms, "
                     f"largest gap {t[2] / 1e3:.3f} ms")
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
