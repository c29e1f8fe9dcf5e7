#!/usr/bin/env python3
"""The quickstart from numpy: pipelines/quickstart.yaml with its source's batches given as a numpy
array and its sink's batches taken back as one, no file read or written; then the figures
`pipectl run` prints. Runs on the GPU where there is one, else on CPU threads.

    PYTHONPATH=python python3 python/examples/quickstart_numpy.py [--executor host|gpu|auto]
"""

import argparse
from pathlib import Path

import numpy as np

import pipectl

REPO = Path(__file__).resolve().parents[2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--executor", default="auto", choices=["auto", "host", "gpu"])
    ap.add_argument("--batches", type=int, default=8)
    args = ap.parse_args()

    p = pipectl.load(REPO / "pipelines" / "quickstart.yaml")
    x = p.buffers["x_host"]  # f32 [262144]: one batch
    data = np.random.default_rng(0).standard_normal((args.batches, *x.shape), dtype=np.float32)
    r = p.run(inputs={"x_host": data}, outputs=["y_host"], executor=args.executor)
    y = r.outputs["y_host"]
    assert y.shape == data.shape and np.array_equal(y, 2 * data), "y = 2x, batch for batch"
    if r.note:
        print(r.note)
    st = r.stats
    print(f"{r.batches} batches of {x.nbytes >> 20} MiB on {st['executor']} ({st['device']}): "
          f"{st['per_batch_s'] * 1e6:.1f} us per batch, y == 2x")
    for name, s in st["stages"].items():
        print(f"  {name:8} {s['engine']:8} mean {s['mean_s'] * 1e6:9.1f} us  "
              f"busy {s['busy'] * 100:5.1f}%")
    if st["bound_s"] is not None:
        print(f"  bound {st['bound_s'] * 1e6:.1f} us per batch ({st['bound_engine']}); achieved "
              f"{st['achieved'] * 100:.1f}% of it")


if __name__ == "__main__":
    main()
