"""trace_downloads.py TRACE: one line on where a gpt2.yaml run's time went, from its trace
(pipectl run --timing all --trace TRACE): each batch's forward (start + span), when the first download started, each batch's
download span, the largest gap between two downloads and when the last one ended (ms on the
run's clock). run_gpt2_vs_torch.sh prints it after each traced run."""
import json
import sys

ev = json.load(open(sys.argv[1]))["traceEvents"]
d = sorted((e["ts"] / 1e3, e["dur"] / 1e3) for e in ev if e.get("ph") == "X" and e["name"] == "download")
gaps = [b[0] - (a[0] + a[1]) for a, b in zip(d, d[1:])]
f = sorted((e["ts"] / 1e3, e["dur"] / 1e3) for e in ev if e.get("ph") == "X" and e["name"] == "forward")
if f:
    print("  trace: forwards %s" % " ".join("%.3f+%.3f" % x for x in f))
print("  trace: first download at %.3f ms; downloads %s ms; largest gap %.3f ms; last ends %.3f ms" % (
    d[0][0], " ".join("%.3f" % x[1] for x in d), max(gaps) if gaps else 0, d[-1][0] + d[-1][1]))
