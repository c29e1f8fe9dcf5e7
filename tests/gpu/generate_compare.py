#!/usr/bin/env python3
"""generate_compare: a generation run against a reference run of the same pipeline (out/ folders of
tests/e2e/generate_yaml.py pipelines, both with --save-logits): tokens and logits.

  generate_compare.py GOT_OUT REF_OUT --steps S [--margin M] [--tol-rel R] [--min-equal F]

Column c of tokens.npy is chosen from logits_c.npy. For each sequence: the tokens must equal the
reference's up to its first column whose reference top-2 logit margin is below M (there a 16-bit
rounding may pick the other token, and the sequences part); the logits, while every token before
them is equal, within a relative L2 error R of the reference's (pooled over those rows, each
column); and at least a fraction F of the sequences equal in every column. Prints the numbers and
OK or FAIL; exit 1 on FAIL."""
import sys

import numpy as np


def arg(name, default, cast=str):
    a = sys.argv
    return cast(a[a.index(name) + 1]) if name in a else default


def main():
    got, ref = sys.argv[1], sys.argv[2]
    S = arg("--steps", None, int)
    M, R, F = arg("--margin", 0.05, float), arg("--tol-rel", 2e-2, float), arg("--min-equal", 0.0, float)
    tg, tr = np.load(got + "/tokens.npy"), np.load(ref + "/tokens.npy")
    K, B, N = tr.shape
    lg = [np.load("%s/logits_%d.npy" % (got, c)).reshape(K, B, -1).astype(np.float64) for c in range(S + 1)]
    lr = [np.load("%s/logits_%d.npy" % (ref, c)).reshape(K, B, -1).astype(np.float64) for c in range(S + 1)]
    ok = True
    worst_rel, parted, equal, low_first = 0.0, [], 0, 0
    for c in range(S + 1):
        rows = [(k, b) for k in range(K) for b in range(B) if (tg[k, b, :c] == tr[k, b, :c]).all()]
        if not rows:
            continue
        g = np.stack([lg[c][k, b] for k, b in rows])
        w = np.stack([lr[c][k, b] for k, b in rows])
        rel = np.linalg.norm(g - w) / np.linalg.norm(w)
        worst_rel = max(worst_rel, rel)
        if rel > R:
            print("column %d: logits relative L2 error %.3g > %.3g over %d sequences" % (c, rel, R, len(rows)))
            ok = False
    for k in range(K):
        for b in range(B):
            margins = []
            for c in range(N):
                t2 = np.sort(lr[c][k, b])[-2:]
                margins.append(t2[1] - t2[0])
            low = next((c for c in range(N) if margins[c] < M), N)
            differ = next((c for c in range(N) if tg[k, b, c] != tr[k, b, c]), N)
            if differ == N:
                equal += 1
            else:
                parted.append((k, b, differ, margins[differ], low))
            if low < N:
                low_first += 1
            if differ < low:
                print("batch %d, sequence %d: column %d differs (%d, reference %d) with the "
                      "reference's top-2 margin %.3g >= %g at every column up to it" %
                      (k, b, differ, tg[k, b, differ], tr[k, b, differ], margins[differ], M))
                ok = False
    frac = equal / (K * B)
    print("%d of %d sequences equal the reference in all %d columns (%.1f%%); %d have a column "
          "with a reference top-2 margin below %g; logits relative L2 error at most %.3g" %
          (equal, K * B, N, 100 * frac, low_first, M, worst_rel))
    for k, b, c, m, low in parted:
        print("  batch %d, sequence %d parts at column %d (reference margin there %.3g; first "
              "margin below %g at column %s)" % (k, b, c, m, M, low if low < N else "none"))
    if frac < F:
        print("fewer than %.0f%% of the sequences are equal throughout" % (100 * F))
        ok = False
    print("OK" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
