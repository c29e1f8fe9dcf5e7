#!/usr/bin/env python3
"""generate_pipectl: pipectl's greedy generation in the shape tests/bench/generate_torch.py measures
torch in: GPT-2 124M in f16 with random weights, prompts of 128 tokens, 256 new tokens (prefill,
the first sample, then 255 decode and sample steps written out, tests/e2e/generate_yaml.py), no
end-of-sequence stop, an f16 cache, at batch 1, 8 and 64, on the GPU executor at depth 1. Prints
the prefill's device time, the decode's ms per step (the mean device time of a decode stage and its
sample stage, and the steady batch time over 256 tokens) and tokens a second, and RESULT JSON lines.

  python3 tests/bench/generate_pipectl.py PIPECTL SRC WORKDIR [--batches 1,8,64] [--reps 4]
      [--gpt2 'matvec: off'] (more keys for the gpt2 stages; the method column says which)
"""
import argparse
import json
import os
import subprocess
import sys


def main():
    a = argparse.ArgumentParser()
    a.add_argument("pipectl")
    a.add_argument("src")
    a.add_argument("work")
    a.add_argument("--batches", default="1,8,64")
    a.add_argument("--reps", type=int, default=4)
    a.add_argument("--prompt", type=int, default=128)
    a.add_argument("--new", type=int, default=256)
    a.add_argument("--gpt2", default="", help="more keys for the gpt2 stages, as 'matvec: off'")
    o = a.parse_args()
    method = "pipectl" + (" " + o.gpt2 if o.gpt2 else "")
    os.makedirs(o.work, exist_ok=True)
    print("%-20s %5s %12s %12s %14s %12s" % ("method", "B", "prefill ms", "ms/step", "batch ms/tok",
                                             "tok/s"))
    for B in [int(b) for b in o.batches.split(",")]:
        y = subprocess.run([sys.executable, os.path.join(o.src, "tests/e2e/generate_yaml.py"),
                            "--weights", "random", "--config", "gpt2", "--B", str(B), "--T",
                            str(o.prompt), "--steps", str(o.new - 1), "--batches", str(o.reps),
                            "--depth", "1", "--dtype", "f16", "--cache", "f16", "--layers", "12",
                            "--heads", "12", "--embd", "768", "--vocab", "50257"] +
                           (["--gpt2", o.gpt2] if o.gpt2 else []),
                           capture_output=True, text=True, check=True)
        p = os.path.join(o.work, "generate_b%d.yaml" % B)
        with open(p, "w") as f:
            f.write(y.stdout)
        r = subprocess.run([o.pipectl, "run", "--executor", "gpu", "--json", "--timing", "all", p],
                           capture_output=True, text=True, cwd=o.work)
        if r.returncode != 0:
            print("B %d: pipectl exit %d: %s" % (B, r.returncode, r.stderr.strip()[-2000:]))
            continue
        d = json.loads(r.stdout)
        st = {s["name"]: s for s in d["stages"]}
        pre = st["prefill"]["mean_s"]
        steps = [st["decode_%d" % i]["mean_s"] + st["sample_%d" % i]["mean_s"] for i in range(o.new - 1)]
        step = sum(steps) / len(steps)
        per_batch = d.get("steady_per_batch_s") or d["per_batch_s"]
        tps = B * o.new / per_batch
        print("%-20s %5d %12.3f %12.4f %14.4f %12.0f" % (method, B, pre * 1e3, step * 1e3,
                                                         per_batch * 1e3 / o.new, tps))
        print("RESULT " + json.dumps({"bench": "generate_pipectl", "gpt2": o.gpt2, "batch": B, "prompt": o.prompt,
                                      "new": o.new, "prefill_ms": pre * 1e3,
                                      "decode_ms_per_step": step * 1e3,
                                      "batch_ms": per_batch * 1e3, "tok_per_s": tps}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
