#!/usr/bin/env python3
"""GPT-2 greedy decoding's step from numpy ids: pipelines/gpt2_greedy.yaml (a GPT-2 124M forward
with the argmax on the device) given batches of token ids as a numpy array, giving back the most
likely next token of each sequence as one; then a few greedy steps, each a run over the sequences
with the last token appended. Random weights unless --weights names a Hugging Face snapshot.

    PYTHONPATH=python python3 python/examples/gpt2_greedy_numpy.py            # GPU only: 124M
    PYTHONPATH=python python3 python/examples/gpt2_greedy_numpy.py --tiny     # CPU too (CI)

--tiny is the same pipeline with GPT-2's 2-layer test config (vocab 512, 64 positions), which the
host executor runs in a moment; the 124M model on the host needs minutes per batch.
"""

import argparse
from pathlib import Path

import numpy as np

import pipectl

REPO = Path(__file__).resolve().parents[2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="GPT-2's 2-layer test config (CPU too)")
    ap.add_argument("--executor", default="auto", choices=["auto", "host", "gpu"])
    ap.add_argument("--weights", default="random", help="a Hugging Face snapshot, or random")
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--steps", type=int, default=3, help="greedy steps after the first")
    args = ap.parse_args()

    sets = {"forward.weights": args.weights}
    if args.tiny:
        sets.update({"forward.config": "tiny", "buffers.ids.shape": [8, 64],
                     "buffers.ids_dev.shape": [8, 64]})
    p = pipectl.load(REPO / "pipelines" / "gpt2_greedy.yaml", set=sets)
    ids = p.buffers["ids"]  # i32 [8, T]: 8 sequences of T tokens a batch
    vocab = 512 if args.tiny else 50257
    seqs = np.random.default_rng(1).integers(0, vocab, (args.batches, *ids.shape), np.int32)

    r = p.run(inputs={"ids": seqs}, outputs=["next"], executor=args.executor)
    nxt = r.outputs["next"]  # i32 [batches, 8]
    assert nxt.shape == (args.batches, ids.shape[0])
    assert ((nxt >= 0) & (nxt < vocab)).all()
    st = r.stats
    tokens = args.batches * ids.shape[0] * ids.shape[1]
    print(f"{r.batches} batches of {ids.shape[0]}x{ids.shape[1]} ids on {st['executor']}: "
          f"{st['per_batch_s'] * 1e3:.2f} ms per batch, "
          f"{tokens / st['wall_s'] / 1e6:.3f} M tokens/s through the forward")

    # Greedy steps from Python: the window moves by one, the token chosen enters it.
    out = [nxt[0].copy()]
    for _ in range(args.steps):
        seqs = np.concatenate([seqs[:, :, 1:], nxt[:, :, None]], axis=2)
        nxt = p.run(inputs={"ids": seqs}, outputs=["next"], executor=args.executor).outputs["next"]
        out.append(nxt[0].copy())
    print("first batch's sequences, the tokens chosen step by step:")
    for k, toks in enumerate(np.stack(out, axis=1)):
        print(f"  sequence {k}: {' '.join(map(str, toks))}")


if __name__ == "__main__":
    main()
