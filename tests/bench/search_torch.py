#!/usr/bin/env python3
"""search_torch: the baselines bench_search is compared with, on the same .npy files.

torch on the CPU: scores = q @ corpus.T, then topk; numpy: the same
matmul, then argpartition + a sort of the k kept. Each prints one "name=value" line per
measurement (median of --reps after one warm-up), parsed by run_search_bench.sh.

  search_torch.py --corpus C.npy --queries Q.npy --k 10 --threads T [--lib torch|numpy|both]
                  [--metric ip|l2] [--reps 5] [--ids-out IDS.npy] [--rep-budget S]
--threads "1 2 4 8 16": torch runs at each count in turn (torch.set_num_threads) on the data loaded
once; numpy, whose BLAS threads are fixed when it loads (OPENBLAS_NUM_THREADS), runs only when one
count is given. --rep-budget S: min(reps, max(1, S / warm-up)) reps at each count.
Generating data (the driver's first step):
  search_torch.py --make N D NQ --out-corpus C.npy --out-queries Q.npy [--clusters M] [--seed S]
"""
import argparse
import os
import sys
import time


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def make(args):
    import numpy as np

    n, d, nq = args.make
    rng = np.random.default_rng(args.seed)
    if args.clusters:
        # Clustered, as real embeddings are: centres, then points around them; queries are
        # perturbed corpus points, so their neighbourhoods are meaningful (IVF recall depends on
        # that; on uniform noise no index beats a scan).
        centres = rng.standard_normal((args.clusters, d), dtype=np.float32)
        corpus = np.empty((n, d), dtype=np.float32)
        step = 1 << 16
        for i in range(0, n, step):
            m = min(step, n - i)
            lab = rng.integers(0, args.clusters, m)
            corpus[i:i + m] = centres[lab] + 0.35 * rng.standard_normal((m, d), dtype=np.float32)
        pick = rng.integers(0, n, nq)
        queries = corpus[pick] + 0.1 * rng.standard_normal((nq, d), dtype=np.float32)
    else:
        corpus = rng.standard_normal((n, d), dtype=np.float32)
        queries = rng.standard_normal((nq, d), dtype=np.float32)
    np.save(args.out_corpus, corpus)
    np.save(args.out_queries, queries.astype(np.float32))


def run_numpy(c, q, k, metric, reps, threads):
    import numpy as np

    def once():
        s = q @ c.T
        if metric == "l2":
            s = 2 * s - (c * c).sum(1)  # ranking of -|q-c|^2
        part = np.argpartition(-s, k - 1, axis=1)[:, :k]
        order = np.take_along_axis(s, part, 1).argsort(1)[:, ::-1]
        return np.take_along_axis(part, order, 1)

    ids = once()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        ids = once()
        t.append(time.perf_counter() - t0)
    return median(t), ids


def run_torch(c, q, k, metric, reps, threads, budget=0):
    import torch

    torch.set_num_threads(threads)
    ct = torch.from_numpy(c)
    qt = torch.from_numpy(q)
    cn = (ct * ct).sum(1) if metric == "l2" else None

    def once():
        s = qt @ ct.T
        if cn is not None:
            s = 2 * s - cn
        return torch.topk(s, k, dim=1).indices

    with torch.inference_mode():
        t0 = time.perf_counter()
        ids = once()
        w = time.perf_counter() - t0
        if budget > 0 and w > 0:
            reps = max(1, min(reps, int(budget / w)))
        t = []
        for _ in range(reps):
            t0 = time.perf_counter()
            ids = once()
            t.append(time.perf_counter() - t0)
    return median(t), ids.numpy()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--make", nargs=3, type=int)
    ap.add_argument("--out-corpus")
    ap.add_argument("--out-queries")
    ap.add_argument("--clusters", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--corpus")
    ap.add_argument("--queries")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--threads", default="1")
    ap.add_argument("--rep-budget", type=float, default=0)
    ap.add_argument("--metric", default="ip")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--lib", default="both")
    ap.add_argument("--ids-out")
    args = ap.parse_args()
    if args.make:
        make(args)
        return 0
    import numpy as np

    c = np.load(args.corpus, mmap_mode=None)
    q = np.load(args.queries)
    n, d = c.shape
    flop = 2.0 * q.shape[0] * n * d
    counts = [int(x) for x in args.threads.replace(",", " ").split()]
    libs = ["torch", "numpy"] if args.lib == "both" else [args.lib]
    runs = [(lib, t) for lib in libs for t in counts if lib == "torch" or len(counts) == 1]
    saved = False
    for lib, threads in runs:
        try:
            if lib == "torch":
                t, ids = run_torch(c, q, args.k, args.metric, args.reps, threads, args.rep_budget)
                extra = ""
            else:
                t, ids = run_numpy(c, q, args.k, args.metric, args.reps, threads)
                extra = ""
                try:
                    from threadpoolctl import threadpool_info

                    info = [i for i in threadpool_info() if i.get("user_api") == "blas"]
                    if info:
                        extra = " blas=%s/%s/%s" % (info[0].get("internal_api"),
                                                    info[0].get("architecture"),
                                                    info[0].get("num_threads"))
                except ImportError:
                    pass
        except ImportError as e:
            print("what=%s skipped=%s" % (lib, str(e).replace(" ", "_")))
            continue
        print("what=%s threads=%d n=%d d=%d nq=%d k=%d ms=%.3f gflops=%.1f%s" %
              (lib, threads, n, d, q.shape[0], args.k, t * 1e3, flop / t / 1e9, extra))
        sys.stdout.flush()
        if args.ids_out and not saved:  # the first library that ran
            np.save(args.ids_out, ids.astype(np.int32))
            saved = True
    return 0


if __name__ == "__main__":
    sys.exit(main())
