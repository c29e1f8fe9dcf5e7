#!/usr/bin/env python3
"""python_vs_cli: the Python-driven run against `pipectl run` on the same pipelines, side by side in
one call, and in-memory inputs against the same data from a file.

For each pipeline, --reps rounds, each round: `pipectl run --json` (a fresh process, as a user
runs it) and the same from Python (pipectl.load(...).run(): the same library, the same files
written), in turn first (so drifts of the machine hit both alike); and, with its source's data
saved to a .npy first, the pipeline reading that file from the CLI and from Python, then the same
bytes given from numpy (inputs=) with the outputs taken back in memory (outputs=). The figure is
the run's own per-batch time (per_batch_s: wall after setup / batches, what the summary's "per
batch" says), the median over the rounds; every timed run starts after os.sync(), so none shares
the machine with the writeback of the files the run before it wrote. It prints a table and the
ratios:

  python / cli        the Python-driven run over the CLI's (the goal: within 2%, <= 1.02)
  memory / file       in-memory inputs and outputs over the same data from and to files (<= 1)

and, to say where a gap comes from, a second line per pipeline: the run from Python in a fresh
process (one run, as the CLI's: a long-lived process against Python itself), and the median of
each host stage's p50 (the stage's own time, without the waits between stages) from the CLI and
from Python: a ratio near the per-batch one says the host stages themselves run slower (the
CPU: its clock, a busy sibling thread, memory placement); near 1 says the time goes between them.

    PYTHONPATH=python python3 tests/bench/python_vs_cli.py --executor gpu            # H200
    PYTHONPATH=python python3 tests/bench/python_vs_cli.py --executor host --reps 3 \\
        --batches 8 pipelines/quickstart.yaml                                          # a laptop

The default pipelines are pipelines/quickstart.yaml and pipelines/gpt2_greedy.yaml (GPU: the
host reference needs minutes per batch of the latter). Exits 0 whatever the ratios (a benchmark
asserts nothing); --check makes it exit 1 when a ratio is past its goal.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))
import pipectl  # noqa: E402


def cli_run(cli, path, executor, batches, out_dir):
    args = [cli, "run", "--json", "--executor", executor, "--out-dir", str(out_dir)]
    if batches:
        args += ["--batches", str(batches)]
    proc = subprocess.run(args + [str(path)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"pipectl run {path} exited {proc.returncode}: {proc.stderr}")
    out = json.loads(proc.stdout)
    return out["per_batch_s"], {st["name"]: st["p50_s"] for st in out["stages"]
                                if st["engine"] == "host"}


def host_p50(stats):
    """Each host stage's p50 in a Result's stats."""
    return {k: v["p50_s"] for k, v in stats["stages"].items() if v["engine"] == "host"}


FRESH = """
import json, sys
import pipectl
p = pipectl.load(sys.argv[1], out_dir=sys.argv[2])
r = p.run(executor=sys.argv[3], batches=int(sys.argv[4]) or None)
print(json.dumps(r.stats["per_batch_s"]))
"""


def fresh_run(path, executor, batches, out_dir):
    """One Python-driven run in a new process (this interpreter, this package)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO / "python")] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH")
                                  else [])),
        PIPECTL_LIBRARY=pipectl.library)
    proc = subprocess.run([sys.executable, "-c", FRESH, str(path), str(out_dir), executor,
                           str(batches or 0)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"python (fresh) {path} exited {proc.returncode}: {proc.stderr}")
    return json.loads(proc.stdout)


def source_stage(doc):
    """The first source stage with a generator, and the buffer it fills."""
    for st in doc["stages"]:
        if st.get("kind") == "source" and "file" not in st:
            return st
    return None


def file_variant(path, tmp, batches, executor):
    """The pipeline with its generator source reading a .npy of the data the generator gives
    (taken from a run of the pipeline with that buffer's sink added), and that data."""
    doc = yaml.safe_load(Path(path).read_text())
    src = source_stage(doc)
    if src is None:
        return None, None, None
    buf = src["to"]
    # The generator's own bytes: a run with a checksum-only sink on its buffer, taken in memory.
    probe = dict(doc, stages=doc["stages"] + [{"name": "bench_take", "kind": "sink",
                                               "from": buf}])
    p = pipectl.loads(yaml.safe_dump(probe), dir=Path(path).parent, out_dir=tmp)
    data = p.run(outputs=[buf], executor=executor, batches=batches or None).outputs[buf]
    np.save(tmp / f"{buf}.npy", data)
    keep = {"name", "kind", "to"}
    for k in list(src):
        if k not in keep:
            del src[k]
    src["file"] = str(tmp / f"{buf}.npy")
    variant = tmp / f"file_{Path(path).stem}.yaml"
    variant.write_text(yaml.safe_dump(doc))
    return variant, buf, data


def sink_buffers(p):
    return [b.name for b in p.buffers.values() if b.sink and not b.device and not b.persistent]


def bench(path, args, cli):
    with tempfile.TemporaryDirectory(prefix="pipectl_bench_") as d:
        tmp = Path(d)
        out = tmp / "out"
        p = pipectl.load(path, out_dir=out)
        variant, buf, data = file_variant(path, tmp, args.batches, args.executor)
        pf = pipectl.load(variant, out_dir=out) if variant else None
        outs = sink_buffers(p)
        rows = {k: [] for k in ("cli", "python", "python_fresh", "cli_file", "python_file",
                                "python_memory")}
        p50 = {"cli": [], "python": []}
        # One warm-up of each (caches, the GPU's clocks, compiled kernels), not counted.
        p.run(executor=args.executor, batches=args.batches or None)

        def cli_timed():
            t, st = cli_run(cli, path, args.executor, args.batches, out)
            rows["cli"].append(t)
            p50["cli"].append(st)

        def python_timed():
            r = p.run(executor=args.executor, batches=args.batches or None)
            rows["python"].append(r.stats["per_batch_s"])
            p50["python"].append(host_p50(r.stats))

        for i in range(args.reps):
            # Each timed run starts with the page cache written back (os.sync, not timed): the
            # sinks write the same files, and a run right after another would otherwise share
            # the disk and the CPU with the kernel's writeback of the one before. The CLI and
            # the Python run swap places every round, so neither always comes first.
            for run in (cli_timed, python_timed) if i % 2 == 0 else (python_timed, cli_timed):
                os.sync()
                run()
            os.sync()
            rows["python_fresh"].append(fresh_run(path, args.executor, args.batches, out))
            if pf is None:
                continue
            os.sync()
            rows["cli_file"].append(cli_run(cli, variant, args.executor, args.batches, out)[0])
            os.sync()
            r = pf.run(executor=args.executor, batches=args.batches or None)
            rows["python_file"].append(r.stats["per_batch_s"])
            os.sync()
            r = pf.run(inputs={buf: data}, outputs=outs, executor=args.executor,
                       batches=args.batches or None)
            rows["python_memory"].append(r.stats["per_batch_s"])
        m = {k: statistics.median(v) for k, v in rows.items() if v}
        stages = {k: {n: statistics.median(x[n] for x in v) for n in v[0]}
                  for k, v in p50.items()}
        return m, stages, r.executor


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pipelines", nargs="*",
                    default=[str(REPO / "pipelines" / "quickstart.yaml"),
                             str(REPO / "pipelines" / "gpt2_greedy.yaml")])
    ap.add_argument("--executor", default="gpu", choices=["auto", "host", "gpu"])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--batches", type=int, default=0, help="0: each pipeline's run.batches")
    ap.add_argument("--check", action="store_true", help="exit 1 when a ratio misses its goal")
    args = ap.parse_args()
    cli = os.environ.get("PIPECTL_CLI") or pipectl._bundle.cli()
    print(f"pipectl {pipectl.__version__}: {pipectl.library}, {cli}; executor {args.executor}, "
          f"median of {args.reps} rounds, per-batch time")
    print(f"{'pipeline':16} {'cli':>11} {'python':>11} {'ratio':>7}   {'file (cli)':>11} "
          f"{'file (py)':>11} {'memory (py)':>11} {'mem/file':>8}")
    missed = []
    for path in args.pipelines:
        m, stages, executor = bench(path, args, cli)
        ratio = m["python"] / m["cli"]
        line = (f"{Path(path).stem:16} {m['cli'] * 1e6:9.1f}us {m['python'] * 1e6:9.1f}us "
                f"{ratio:7.4f}")
        if ratio > 1.02:
            missed.append(f"{Path(path).stem}: python/cli {ratio:.4f} > 1.02")
        if "python_memory" in m:
            mf = m["python_memory"] / m["python_file"]
            line += (f"   {m['cli_file'] * 1e6:9.1f}us {m['python_file'] * 1e6:9.1f}us "
                     f"{m['python_memory'] * 1e6:9.1f}us {mf:8.4f}")
            if mf > 1.0:
                missed.append(f"{Path(path).stem}: memory/file {mf:.4f} > 1")
        print(line + ("" if executor == args.executor or args.executor == "auto"
                      else f"  (ran on {executor})"))
        where = "; ".join(f"{n} {stages['cli'][n] * 1e6:.1f}/{stages['python'][n] * 1e6:.1f}us "
                          f"({stages['python'][n] / stages['cli'][n]:.3f})"
                          for n in stages["cli"] if stages["cli"][n] and n in stages["python"])
        print(f"{'':16} python (fresh process) {m['python_fresh'] * 1e6:9.1f}us "
              f"{m['python_fresh'] / m['cli']:7.4f}   host stages p50 cli/python: "
              f"{where or 'none'}")
    print("goals: python/cli <= 1.02, memory/file <= 1: " +
          ("met" if not missed else "missed: " + "; ".join(missed)))
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
