#!/usr/bin/env python3
"""The search stage over a numpy corpus: the retrieval step of RAG with the corpus embeddings and
the queries given as numpy arrays (the corpus once, as a persistent buffer's contents; the
queries batch after batch), the hits' indices and scores taken back as arrays, and checked
against numpy's own exact top-k. Host stages only: runs the same with or without a GPU.

    PYTHONPATH=python python3 python/examples/search_numpy.py [--docs 20000 --dim 128]
"""

import argparse

import numpy as np

import pipectl

PIPELINE = """
pipeline: search_numpy
run: {{batches: {batches}, depth: 2}}
buffers:
  queries: {{where: host, dtype: f32, shape: [{q}, {d}]}}
  corpus:  {{where: host, dtype: f32, shape: [{n}, {d}], persistent: true, init: zeros}}
  ids:     {{where: host, dtype: i32, shape: [{q}, {k}]}}
  scores:  {{where: host, dtype: f32, shape: [{q}, {k}]}}
stages:
  - {{name: ask, kind: source, to: queries, generator: random}}
  - {{name: retrieve, kind: search, queries: queries, corpus: corpus, k: {k}, metric: ip,
     ids: ids, scores: scores}}
  - {{name: save_ids, kind: sink, from: ids}}
  - {{name: save_scores, kind: sink, from: scores}}
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=4096)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--queries", type=int, default=32, help="per batch")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--batches", type=int, default=8)
    args = ap.parse_args()
    n, d, q, k = args.docs, args.dim, args.queries, args.k

    rng = np.random.default_rng(7)
    corpus = rng.standard_normal((n, d), dtype=np.float32)
    corpus /= np.linalg.norm(corpus, axis=1, keepdims=True)
    queries = rng.standard_normal((args.batches, q, d), dtype=np.float32)

    p = pipectl.loads(PIPELINE.format(batches=args.batches, q=q, d=d, n=n, k=k),
                      name="search_numpy.yaml")
    r = p.run(inputs={"corpus": corpus, "queries": queries}, outputs=["ids", "scores"])
    ids, scores = r.outputs["ids"], r.outputs["scores"]  # [batches, q, k]

    # numpy's exact answer: the k largest inner products, nearest first.
    sims = queries @ corpus.T
    want = np.argsort(-sims, axis=2, kind="stable")[:, :, :k]
    got_scores = np.take_along_axis(sims, ids.astype(np.int64), axis=2)
    assert np.allclose(scores, got_scores, rtol=1e-5, atol=1e-5), "scores are the hits' products"
    agree = np.mean(ids == want)
    # Ties in float32 products may order two hits differently; their scores are equal.
    assert agree > 0.999 or np.allclose(np.sort(scores), np.sort(np.take_along_axis(
        sims, want, axis=2)), atol=1e-5)
    st = r.stats["stages"]["retrieve"]
    print(f"{r.batches} batches of {q} queries over {n} documents (d={d}), top-{k}: "
          f"{st['mean_s'] * 1e3:.2f} ms per batch in the search; {agree * 100:.2f}% of hits "
          "as numpy's argsort")


if __name__ == "__main__":
    main()
