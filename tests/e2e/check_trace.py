#!/usr/bin/env python3
"""Validates a Chrome trace (pipectl run --trace) against the Trace Event Format: the fields each
phase needs (ph, name, ts, dur, pid, tid, id for flows, args for counters and metadata), flows
that start and finish inside slices, slices properly nested on each row, a name for every row.
usage: check_trace.py TRACE.json [MIN_FLOWS] [MIN_COUNTERS]; prints a summary, exit 1 on a problem."""
import json
import sys

PHASES = {"X", "B", "E", "i", "I", "C", "M", "s", "t", "f", "b", "e", "n", "P", "O", "N", "D"}
META = {"process_name", "process_labels", "process_sort_index", "thread_name", "thread_sort_index"}


def main():
    path = sys.argv[1]
    min_flows = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    min_counters = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    problems = []

    def bad(i, ev, why):
        if len(problems) < 20:
            problems.append("event %d %s: %s" % (i, json.dumps(ev)[:160], why))

    with open(path, "rb") as f:
        raw = f.read()
    raw.decode("utf-8")  # strict: a trace is UTF-8 JSON
    doc = json.loads(raw)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        sys.exit("FAIL: not an object with a traceEvents array")
    if doc.get("displayTimeUnit", "ms") not in ("ms", "ns"):
        sys.exit("FAIL: displayTimeUnit must be ms or ns")
    num = (int, float)
    named_threads, named_procs = set(), set()
    slices, flows, counters, used_rows = {}, {}, set(), set()
    for i, ev in enumerate(doc["traceEvents"]):
        if not isinstance(ev, dict):
            bad(i, ev, "not an object")
            continue
        ph = ev.get("ph")
        if ph not in PHASES:
            bad(i, ev, "ph missing or unknown")
            continue
        if not isinstance(ev.get("name"), str):
            bad(i, ev, "no name")
        if not isinstance(ev.get("pid"), int):
            bad(i, ev, "pid missing or not an integer")
        if ph != "M" and not (isinstance(ev.get("ts"), num) and ev["ts"] >= 0):
            bad(i, ev, "ts missing or negative")
        if ph in ("X", "B", "E", "s", "t", "f", "i", "I") and not isinstance(ev.get("tid"), int):
            bad(i, ev, "tid missing or not an integer")
        row = (ev.get("pid"), ev.get("tid"))
        if ph == "M":
            if ev.get("name") not in META:
                bad(i, ev, "unknown metadata name")
            args = ev.get("args")
            if not isinstance(args, dict):
                bad(i, ev, "metadata without args")
            elif ev["name"].endswith("_name") and not isinstance(args.get("name"), str):
                bad(i, ev, "args.name missing")
            elif ev["name"].endswith("_sort_index") and not isinstance(args.get("sort_index"), int):
                bad(i, ev, "args.sort_index missing")
            if ev.get("name") == "thread_name":
                if not isinstance(ev.get("tid"), int):
                    bad(i, ev, "thread_name without tid")
                named_threads.add(row)
            if ev.get("name") == "process_name":
                named_procs.add(ev.get("pid"))
        elif ph == "X":
            if not (isinstance(ev.get("dur"), num) and ev["dur"] >= 0):
                bad(i, ev, "X without a non-negative dur")
                continue
            slices.setdefault(row, []).append((ev["ts"], ev["ts"] + ev["dur"], i))
            used_rows.add(row)
        elif ph == "C":
            args = ev.get("args")
            if not isinstance(args, dict) or not args or not all(isinstance(v, num) for v in args.values()):
                bad(i, ev, "counter without numeric args")
            counters.add(ev.get("name"))
        elif ph in ("s", "t", "f"):
            if "id" not in ev or not isinstance(ev["id"], (int, str)):
                bad(i, ev, "flow without id")
                continue
            if not isinstance(ev.get("cat"), str):
                bad(i, ev, "flow without cat")
            if ph == "f" and ev.get("bp", "e") not in ("e",):
                bad(i, ev, "bp must be e")
            flows.setdefault((ev.get("cat"), ev["id"]), []).append((ph, ev, i))
            used_rows.add(row)

    # Slices on one row nest (a slice that starts inside another ends inside it too).
    for row, sl in slices.items():
        sl.sort(key=lambda x: (x[0], -x[1]))
        stack = []
        for a, b, i in sl:
            while stack and stack[-1] <= a:
                stack.pop()
            if stack and b > stack[-1] + 1e-6:
                bad(i, {"row": row, "ts": a, "end": b}, "overlaps a slice on its row without nesting")
            stack.append(b)

    def inside(row, ts):
        return any(a - 1e-6 <= ts <= b + 1e-6 for a, b, _ in slices.get(row, ()))

    n_flows = 0
    for key, evs in flows.items():
        phs = [p for p, _, _ in evs]
        if phs.count("s") != 1 or phs.count("f") != 1:
            bad(evs[0][2], evs[0][1], "flow id %r: %s, expected one s and one f" % (key, phs))
            continue
        s = next(e for p, e, _ in evs if p == "s")
        f = next(e for p, e, _ in evs if p == "f")
        if s.get("name") != f.get("name"):
            bad(evs[0][2], s, "flow's s and f have different names")
        if f["ts"] < s["ts"]:
            bad(evs[0][2], s, "flow finishes before it starts")
        if not inside((s["pid"], s["tid"]), s["ts"]):
            bad(evs[0][2], s, "flow start is not inside a slice of its row")
        if not inside((f["pid"], f["tid"]), f["ts"]):
            bad(evs[0][2], f, "flow end is not inside a slice of its row")
        n_flows += 1
    for row in used_rows - named_threads:
        problems.append("row pid %s tid %s has no thread_name" % row)
    for pid in {r[0] for r in used_rows} - named_procs:
        problems.append("process %s has no process_name" % pid)
    if n_flows < min_flows:
        problems.append("%d flows, expected at least %d" % (n_flows, min_flows))
    if len(counters) < min_counters:
        problems.append("%d counter tracks (%s), expected at least %d" % (len(counters), sorted(counters), min_counters))
    for p in problems:
        print("FAIL: " + p)
    if problems:
        sys.exit(1)
    print("trace ok: %d events, %d slices on %d rows, %d flows, counters %s"
          % (len(doc["traceEvents"]), sum(len(v) for v in slices.values()), len(slices), n_flows,
             ", ".join(sorted(counters))))


main()
