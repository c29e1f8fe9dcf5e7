#!/usr/bin/env python3
"""make_tiny_bpe.py: trains a tiny byte-level BPE vocabulary in GPT-2's file formats (vocab.json and
merges.txt, <|endoftext|> last, and the same as the tokenizer.json transformers would save) on the
text files given, so tests and pipelines/tokenize.yaml have a tokenizer that ships in the
repository. It is not GPT-2's vocabulary (.ci/setup fetches that).

    python3 tests/data/tokenize/make_tiny_bpe.py OUT_DIR MERGES FILE...

pipelines/data/tiny_bpe is `make_tiny_bpe.py pipelines/data/tiny_bpe 300
tests/data/tokenize/{prose.txt,code.c,code.py,numbers.txt}`. Deterministic: ties go to the pair
seen first.
"""
import collections
import json
import re
import sys


def bytes_to_unicode():
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def main():
    out, n_merges, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    b2u = bytes_to_unicode()
    # GPT-2's pattern with Python's classes standing in for \p{L} and \p{N}: good enough to
    # choose merges; the tokenizer that reads the result has the exact pattern.
    pat = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+")
    words = collections.Counter()
    for f in files:
        text = open(f, encoding="utf-8").read()
        for w in pat.findall(text):
            words[tuple(b2u[b] for b in w.encode("utf-8"))] += 1
    words = {w: c for w, c in words.items()}
    merges = []
    for _ in range(n_merges):
        pairs = collections.Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: kv[1])[0]  # first seen among the most frequent
        merges.append(best)
        joined = {}
        for w, c in words.items():
            nw, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    nw.append(w[i] + w[i + 1])
                    i += 2
                else:
                    nw.append(w[i])
                    i += 1
            joined[tuple(nw)] = joined.get(tuple(nw), 0) + c
        words = joined
    vocab = {}
    for b in sorted(b2u, key=lambda b: ord(b2u[b])):
        vocab[b2u[b]] = len(vocab)
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    vocab["<|endoftext|>"] = len(vocab)
    with open(f"{out}/vocab.json", "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
        f.write("\n")
    with open(f"{out}/merges.txt", "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for a, b in merges:
            f.write(f"{a} {b}\n")
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": vocab["<|endoftext|>"], "content": "<|endoftext|>",
                          "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": True, "special": True}],
        "normalizer": None, "pre_tokenizer": byte_level, "post_processor": byte_level,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                  "byte_fallback": False, "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]},
    }
    with open(f"{out}/tokenizer.json", "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
