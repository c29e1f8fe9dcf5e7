#!/usr/bin/env python3
"""tokenize_compare.py: `pipectl tokenize` against gpt-3-encoder's JavaScript, row by row.

    tokenize_compare.py PIPECTL VOCAB_DIR ROWS_JS WORK_DIR --expect-excluded N [--big-mb MB] FILE...

Rows: each FILE whole, then each of its lines, then the lines of a generated text of MB megabytes
(seeded, so every run has the same rows: words, capitals, contractions, numbers, many scripts,
emoji, punctuation runs, whitespace runs, tabs, CRLF and <|endoftext|>). The ids of
`pipectl tokenize --json -z` must equal those tokenize_js.js prints for every row it does not
exclude; it excludes the rows where gpt-3-encoder is known to differ from transformers (the list
is in tokenize_js.js), and their number must be N, so a new exclusion cannot go unnoticed. Then
`pipectl tokenize --decode --json` of the ids must give each row back (with U+FFFD for invalid
UTF-8), and the generated text as one 10 MB row must survive encode and decode too. Prints what it
compared; exits 1 naming the first row that differs.
"""
import argparse
import json
import os
import random
import subprocess
import sys


def generated(mb, seed=1):
    r = random.Random(seed)
    words = ("the of and to in is was that for it with as his on be at by had are but from or have "
             "an they which one you were her all she there would their we him been has when who "
             "will more no if out so said what up its about into than them can only other new some "
             "could time these two may then do first any my now such like our over man me even most "
             "made after also did many before must through back years where much your way well "
             "down should because each just those people").split()
    scripts = ["Grüße", "Straße", "café", "naïve", "Привет", "мир", "Γειά", "σου", "你好", "世界",
               "こんにちは", "안녕하세요", "مرحبا", "שלום", "नमस्ते", "สวัสดี", "გამარჯობა", "😀", "👍🏽",
               "👩\u200d💻", "🇫🇷", "e\u0301", "Z\u0351\u036ba", "١٢٣", "½", "Ⅻ", "\u00a0", "\u3000"]
    punct = list(".,!?;:()[]{}<>/\\@#$%^&*+=_|~`\"'") + ["...", "--", "->", "==", "//"]
    seps = [" "] * 30 + ["  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n", "\t\t", "    ", "\n   "]
    contractions = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'"]
    out, n, target = [], 0, int(mb * 1e6)
    while n < target:
        k = r.random()
        if k < 0.6:
            w = r.choice(words)
        elif k < 0.7:
            w = r.choice(words).capitalize() + r.choice(contractions)
        elif k < 0.8:
            w = str(r.randint(0, 10 ** r.randint(1, 12)))
        elif k < 0.88:
            w = r.choice(scripts)
        elif k < 0.97:
            w = r.choice(punct) * r.randint(1, 3)
        elif k < 0.999:
            w = r.choice(words).upper()
        else:
            w = "<|endoftext|>"
        s = w + r.choice(seps)
        out.append(s)
        n += len(s.encode())
    return "".join(out).encode()


def lines(data):
    rows = data.split(b"\n")
    return rows[:-1] if rows and rows[-1] == b"" else rows


def run(cmd, stdin):
    p = subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exits {p.returncode}: {p.stderr.decode(errors='replace')}")
    return p.stdout, p.stderr.decode(errors="replace")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pipectl")
    ap.add_argument("vocab")
    ap.add_argument("rows_js")
    ap.add_argument("work")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--expect-excluded", type=int, required=True)
    ap.add_argument("--big-mb", type=float, default=10)
    ap.add_argument("--ref-arg", action="append", default=[], dest="ref_args",
                    help="an argument for ROWS_JS before VOCAB_DIR (tokenize_hf.js: its module folder)")
    a = ap.parse_args()

    rows = []
    for f in a.files:
        data = open(f, "rb").read()
        rows.append(data)
        rows.extend(lines(data))
    big = generated(a.big_mb)
    n_corpus = len(rows)
    rows.extend(lines(big))
    assert all(b"\0" not in r for r in rows)
    os.makedirs(a.work, exist_ok=True)
    rows_file = os.path.join(a.work, "rows.bin")
    stream = b"".join(r + b"\0" for r in rows)
    open(rows_file, "wb").write(stream)

    got_json, stats = run([a.pipectl, "tokenize", "--vocab", a.vocab, "--json", "-z", "--stats"],
                          stream)
    got = json.loads(got_json)
    ref_json, _ = run(["node", a.rows_js] + a.ref_args + [a.vocab, rows_file], b"")
    ref = json.loads(ref_json)
    if len(got) != len(rows) or len(ref["rows"]) != len(rows):
        sys.exit(f"FAIL: {len(rows)} rows, pipectl printed {len(got)}, tokenize_js.js {len(ref['rows'])}")
    excluded = ref["excluded"]
    for i, (g, w) in enumerate(zip(got, ref["rows"])):
        if w is not None and g != w:
            first = next(k for k in range(min(len(g), len(w)) + 1) if k >= len(g) or k >= len(w) or g[k] != w[k])
            sys.exit(f"FAIL: row {i} ({rows[i][:120]!r}): ids differ from position {first}:\n"
                     f"  pipectl:       {g[max(0, first - 3):first + 8]}\n"
                     f"  gpt-3-encoder: {w[max(0, first - 3):first + 8]}")
    print(f"{len(rows) - len(excluded)} rows ({n_corpus} from the corpus, {len(rows) - n_corpus} lines "
          f"of {len(big) / 1e6:.1f} MB generated) give the reference's ids ({os.path.basename(a.rows_js)}); {stats.strip()}")
    for e in excluded:
        print(f"  excluded row {e['row']} ({rows[e['row']][:60]!r}): {e['why']}")
    if len(excluded) != a.expect_excluded:
        sys.exit(f"FAIL: {len(excluded)} rows excluded, expected {a.expect_excluded}")

    # decode(encode(x)) == x, invalid UTF-8 as U+FFFD
    back_json, _ = run([a.pipectl, "tokenize", "--vocab", a.vocab, "--decode", "--json"], got_json)
    back = json.loads(back_json)
    for i, (r, b) in enumerate(zip(rows, back)):
        if b != r.decode("utf-8", "replace"):
            sys.exit(f"FAIL: row {i} ({r[:120]!r}) decodes to {b[:120]!r}")
    print(f"{len(rows)} rows decode to their text")

    ids, _ = run([a.pipectl, "tokenize", "--vocab", a.vocab, "-z"], big + b"\0")
    text, _ = run([a.pipectl, "tokenize", "--vocab", a.vocab, "--decode", "-z"], ids)
    if text != big + b"\0":
        sys.exit(f"FAIL: the generated {len(big)} bytes as one row do not decode to themselves")
    print(f"the generated text as one row ({len(big)} bytes, {len(ids.split())} ids) decodes to itself")


if __name__ == "__main__":
    main()
