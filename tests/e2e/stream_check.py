"""stream_check: a loop's stream (docs/pipeline-yaml.md, "loop.stream") against the tokens the
loop wrote, for tests/e2e/test_stream.sh and tests/gpu/test_stream_gpu.sh.

  stream_check.py tokens TOKENS.npy STREAM --every K --start S --steps STEPS.npy [--raw]
        [--finished] [--partial]
    TOKENS.npy: the download after the loop, [batches, B, N]; STEPS.npy: the loop's index after
    it, [batches, 1] (the iterations each batch ran). Asserts: records are whole, batches come in
    order, each batch's deliveries in order at the steps `every` gives (K, 2K, ..., and the last),
    each delivery's columns follow the previous one's, and per row the parts put together are the
    row's tokens up to the last delivery's column (with --finished: up to the delivery in which
    the row ended, each row's last record saying "end"; the tokens after it are the row's last
    token, the sample's padding). --partial: the run was stopped; the last batch may be cut short
    and TOKENS.npy holds only the batches before it.
  stream_check.py text STREAM VOCAB TOKENS.npy PIPECTL
    the "text" records put together per row equal `pipectl tokenize --decode` of the row's tokens.
  stream_check.py prefix SHORT LONG
    SHORT (a stopped run's stream) is a prefix of LONG (a whole run's), record by record.
"""
import json
import subprocess
import sys

import numpy as np


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def records(path, raw):
    """[(batch, row or -1, step, col, tokens [rows, cols] or [cols], end)] in file order."""
    out = []
    data = open(path, "rb").read()
    if raw:
        i = 0
        while i < len(data):
            if len(data) - i < 48:
                fail(f"{path}: a torn header at byte {i}")
            b, step, col, cols, end, rows = np.frombuffer(data[i:i + 48], "<i8").tolist()
            i += 48
            n = rows * cols * 4
            if len(data) - i < n:
                fail(f"{path}: a torn record at byte {i}")
            a = np.frombuffer(data[i:i + n], "<i4").reshape(rows, cols)
            i += n
            out.append((b, -1, step, col, a, bool(end)))
        return out
    if data and not data.endswith(b"\n"):
        fail(f"{path}: the last record is torn (no line break at the end)")
    for k, line in enumerate(data.decode("utf-8").splitlines()):
        try:
            r = json.loads(line)
        except ValueError as e:
            fail(f"{path}:{k + 1}: not a JSON record ({e}): {line[:80]}")
        out.append((r["batch"], r["row"], r["step"], r["col"], r.get("tokens", r.get("text")),
                    bool(r.get("end", False))))
    return out


def check_tokens(args):
    tokens_path, stream = args[0], args[1]
    opt = {"--every": None, "--start": "1", "--steps": None}
    flags = set()
    i = 2
    while i < len(args):
        if args[i] in opt:
            opt[args[i]] = args[i + 1]
            i += 2
        else:
            flags.add(args[i])
            i += 1
    K, S = int(opt["--every"]), int(opt["--start"])
    tok = np.load(tokens_path)
    steps = np.load(opt["--steps"]).reshape(-1)
    raw, finished, partial = "--raw" in flags, "--finished" in flags, "--partial" in flags
    recs = records(stream, raw)
    nb, B, N = tok.shape
    # Group by batch, in file order; batches must not interleave.
    order, by = [], {}
    for r in recs:
        if r[0] not in by:
            if order and r[0] < order[-1]:
                fail(f"batch {r[0]} comes after batch {order[-1]}")
            order.append(r[0])
            by[r[0]] = []
        elif order[-1] != r[0]:
            fail(f"batch {r[0]}'s records are not together")
        by[r[0]].append(r)
    want = list(range(nb + (1 if partial else 0)))
    if order != want[:len(order)] or len(order) < nb:
        fail(f"the stream holds batches {order}, want {want}")
    for b in order:
        parts = by[b]
        whole = b < nb
        # Deliveries: groups of records with one step (raw: one record each).
        dl = []
        for r in parts:
            if dl and dl[-1][0][2] == r[2]:
                dl[-1].append(r)
            else:
                dl.append([r])
        if whole:
            it = int(steps[b])
            want_steps = list(range(K, it, K)) + [it]
        got_steps = [d[0][2] for d in dl]
        # With finished, a delivery after every row has ended has no records.
        if whole and (got_steps != want_steps[:len(got_steps)] if finished else got_steps != want_steps):
            fail(f"batch {b}: deliveries at steps {got_steps}, want {want_steps}")
        for k in range(1, len(got_steps)):
            if got_steps[k] <= got_steps[k - 1] or (got_steps[k] % K and k < len(got_steps) - 1):
                fail(f"batch {b}: delivery steps {got_steps} are not every {K}")
        cols = [[] for _ in range(B)]
        ended = [False] * B
        for d in dl:
            hi = min(N, S + d[0][2])
            for r in d:
                rows = range(B) if raw else [r[1]]
                a = r[4] if raw else np.array(r[4], dtype=np.int64).reshape(1, -1)
                for j, row in enumerate(rows):
                    if ended[row]:
                        fail(f"batch {b}, row {row}: a record after its end")
                    if r[3] != len(cols[row]):
                        fail(f"batch {b}, row {row}: a part at column {r[3]} after {len(cols[row])}")
                    if r[3] + a.shape[1] != hi:
                        fail(f"batch {b}, row {row}, step {r[2]}: columns up to {r[3] + a.shape[1]}, want {hi}")
                    cols[row].extend(a[j].tolist())
                    if r[5]:
                        ended[row] = True
            if not raw and not finished and len(d) != B:
                fail(f"batch {b}, step {d[0][2]}: {len(d)} records, want one per row ({B})")
        if not whole:
            continue
        if not all(ended):
            fail(f"batch {b}: rows {[r for r in range(B) if not ended[r]]} have no end record")
        for row in range(B):
            n = len(cols[row])
            if cols[row] != tok[b, row, :n].tolist():
                fail(f"batch {b}, row {row}: streamed {cols[row]} != tokens {tok[b, row, :n].tolist()}")
            rest = tok[b, row, n:].tolist()
            if finished and rest and set(rest) != {tok[b, row, n - 1]}:
                fail(f"batch {b}, row {row}: after its end at column {n}, {rest} is not padding")
            if not finished and n != min(N, S + int(steps[b])):
                fail(f"batch {b}, row {row}: {n} columns streamed, want {min(N, S + int(steps[b]))}")
    print(f"stream {stream}: {len(recs)} records of {len(order)} batches put together are the tokens")


def check_text(args):
    stream, vocab, tokens_path, pipectl = args
    tok = np.load(tokens_path)
    nb, B, N = tok.shape
    texts = {}
    for r in records(stream, False):
        texts[(r[0], r[1])] = texts.get((r[0], r[1]), "") + r[4]
    rows = tok.reshape(-1, N).tolist()
    dec = json.loads(subprocess.check_output([pipectl, "tokenize", "--vocab", vocab, "--decode",
                                              "--json", json.dumps(rows)]))
    for b in range(nb):
        for r in range(B):
            if texts.get((b, r)) != dec[b * B + r]:
                fail(f"batch {b}, row {r}: streamed text {texts.get((b, r))!r} != detokenized {dec[b * B + r]!r}")
    print(f"stream {stream}: the texts put together are the detokenized rows")


def check_prefix(args):
    short, long_ = (open(p, "rb").read() for p in args)
    if not long_.startswith(short):
        fail(f"{args[0]} ({len(short)} bytes) is not a prefix of {args[1]} ({len(long_)} bytes)")
    print(f"{args[0]}: a prefix of the whole run's stream ({len(short)} of {len(long_)} bytes)")


if __name__ == "__main__":
    {"tokens": check_tokens, "text": check_text, "prefix": check_prefix}[sys.argv[1]](sys.argv[2:])
