#!/usr/bin/env python3
"""generate_yaml: writes a generation pipeline with a fixed number of decode steps written out
(prefill, a first sample, then per step a fill of its step buffer, a decode and a sample, each
after the one before), for the tests of the gpt2 kind's prefill and decode and the sample kind.

  generate_yaml.py --weights W [--config tiny] --B B --T T --steps S [--batches K] [--depth D]
      [--prompts FILE --lengths FILE] [--cache f32|f16|bf16] [--dtype f16|bf16] [--eos E]
      [--sample 'method: sample, top_k: 20'] [--gpt2 'tune: false'] [--batch-index]
      [--save-logits] [--max-pos P] [--layers L --heads H --embd C --vocab V]

Column c of out/tokens.npy ([K, B, S + 1]) is each sequence's token c: the first sample writes
column 0 from prefill's logits, step i decodes column i's token at position lengths + i and its
sample writes column i + 1. The cache holds T + S positions, just enough (--max-pos: more).
--prompts and --lengths are .npy files of [K, B, T] and [K, B] (paths as the pipeline reads
them); without them the prompts are random and all T long. --save-logits also writes each step's
logits (f32 [K, B, V]) to out/logits_0.npy (prefill's) .. out/logits_S.npy. --batch-index keys the
sample stages' RNG by the batch (a source range and an h2d). The model size defaults to the tiny
config's."""
import argparse
import sys


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--weights", required=True)
    a.add_argument("--config", default="tiny")
    a.add_argument("--B", type=int, required=True)
    a.add_argument("--T", type=int, required=True)
    a.add_argument("--steps", type=int, required=True)
    a.add_argument("--batches", type=int, default=2)
    a.add_argument("--depth", type=int, default=2)
    a.add_argument("--prompts")
    a.add_argument("--lengths")
    a.add_argument("--cache", default="f32")
    a.add_argument("--dtype", default="f16")
    a.add_argument("--eos", type=int)
    a.add_argument("--sample", default="")
    a.add_argument("--gpt2", default="")
    a.add_argument("--batch-index", action="store_true")
    a.add_argument("--save-logits", action="store_true")
    a.add_argument("--max-pos", type=int, help="the cache's positions (default T + steps)")
    a.add_argument("--layers", type=int, default=2)
    a.add_argument("--heads", type=int, default=4)
    a.add_argument("--embd", type=int, default=64)
    a.add_argument("--vocab", type=int, default=512)
    o = a.parse_args()
    B, T, S, V = o.B, o.T, o.steps, o.vocab
    N, P, hd = S + 1, o.max_pos or o.T + o.steps, o.embd // o.heads
    model = "weights: %s" % o.weights
    if o.weights == "random":
        model += ", config: %s" % o.config
    model += ", dtype: %s" % o.dtype
    if o.gpt2:
        model += ", " + o.gpt2
    smp = []
    if o.sample:
        smp.append(o.sample)
    if o.eos is not None:
        smp.append("eos: %d" % o.eos)
    if o.batch_index:
        smp.append("batch: bidx_dev")
    smp = "".join(", " + x for x in smp)
    y = []
    w = y.append
    w("pipeline: generate_%d_steps" % S)
    w("run: {batches: %d, depth: %d, seed: 3}" % (o.batches, o.depth))
    w("buffers:")
    w("  prompts:     {where: host, dtype: i32, shape: [%d, %d]}" % (B, T))
    w("  prompts_dev: {where: device, dtype: i32, shape: [%d, %d]}" % (B, T))
    w("  lens:        {where: host, dtype: i32, shape: [%d]}" % B)
    w("  lens_dev:    {where: device, dtype: i32, shape: [%d]}" % B)
    w("  kv:          {where: device, dtype: %s, shape: [%d, 2, %d, %d, %d, %d]}"
      % (o.cache, o.layers, B, o.heads, P, hd))
    for i in range(S + 1):
        w("  lg_%d:        {where: device, dtype: f32, shape: [%d, %d]}" % (i, B, V))
        w("  next_%d:      {where: device, dtype: i32, shape: [%d]}" % (i, B))
        if o.save_logits:
            w("  lgh_%d:       {where: host, dtype: f32, shape: [%d, %d]}" % (i, B, V))
    for i in range(S):
        w("  step_%d:      {where: device, dtype: i32, shape: [1]}" % i)
    w("  done:        {where: device, dtype: i32, shape: [%d]}" % B)
    w("  going:       {where: device, dtype: i32, shape: [1]}")
    w("  tokens_dev:  {where: device, dtype: i32, shape: [%d, %d]}" % (B, N))
    w("  tokens:      {where: host, dtype: i32, shape: [%d, %d]}" % (B, N))
    w("  going_h:     {where: host, dtype: i32, shape: [1]}")
    if o.batch_index:
        w("  bidx:        {where: host, dtype: i32, shape: [1]}")
        w("  bidx_dev:    {where: device, dtype: i32, shape: [1]}")
    w("stages:")
    if o.prompts:
        w("  - {name: read, kind: source, to: prompts, file: %s}" % o.prompts)
        w("  - {name: read_len, kind: source, to: lens, file: %s}" % o.lengths)
    else:
        w("  - {name: read, kind: source, to: prompts, generator: random, min: 0, max: %d}" % V)
        w("  - {name: read_len, kind: source, to: lens, generator: constant, value: %d}" % T)
    w("  - {name: up, kind: h2d, from: prompts, to: prompts_dev}")
    w("  - {name: up_len, kind: h2d, from: lens, to: lens_dev}")
    if o.batch_index:
        w("  - {name: read_bidx, kind: source, to: bidx, generator: range}")
        w("  - {name: up_bidx, kind: h2d, from: bidx, to: bidx_dev}")
    w("  - {name: prefill, kind: gpt2, mode: prefill, %s, ids: prompts_dev, lengths: lens_dev, "
      "cache: kv, out: lg_0}" % model)
    w("  - {name: first, kind: sample, logits: lg_0, tokens: tokens_dev, finished: done, "
      "next: next_0, count: going%s}" % smp)
    for i in range(S):
        w("  - {name: set_%d, kind: kernel, op: fill, value: %d, writes: [step_%d]}" % (i, i, i))
        after = ", after: [decode_%d]" % (i - 1) if i else ""
        w("  - {name: decode_%d, kind: gpt2, mode: decode, %s, ids: next_%d, lengths: lens_dev, "
          "step: step_%d, cache: kv, out: lg_%d%s}" % (i, model, i, i, i + 1, after))
        prev = "sample_%d" % (i - 1) if i else "first"
        w("  - {name: sample_%d, kind: sample, logits: lg_%d, step: step_%d, tokens: tokens_dev, "
          "finished: done, next: next_%d, count: going%s, after: [%s]}"
          % (i, i + 1, i, i + 1, smp, prev))
    last = "sample_%d" % (S - 1) if S else "first"
    w("  - {name: down, kind: d2h, from: tokens_dev, to: tokens, after: [%s]}" % last)
    w("  - {name: down_going, kind: d2h, from: going, to: going_h, after: [%s]}" % last)
    w("  - {name: save, kind: sink, from: tokens, to: out/tokens.npy}")
    w("  - {name: save_going, kind: sink, from: going_h, to: out/going.npy}")
    if o.save_logits:
        for i in range(S + 1):
            w("  - {name: down_lg_%d, kind: d2h, from: lg_%d, to: lgh_%d}" % (i, i, i))
            w("  - {name: save_lg_%d, kind: sink, from: lgh_%d, to: out/logits_%d.npy}" % (i, i, i))
    print("\n".join(y))
    return 0


if __name__ == "__main__":
    sys.exit(main())
