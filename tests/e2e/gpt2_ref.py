#!/usr/bin/env python3
"""gpt2_ref: an independent numpy GPT-2 forward and a safetensors writer, for the gpt2 kind's tests.

  gpt2_ref.py make DIR [--seed S] [--layers L --heads H --embd C --vocab V --ctx N]
        [--dtype F32|F16|BF16] [--prefix transformer.] [--shards N] [--batches K --B B --T T]
      writes DIR/config.json, DIR/model.safetensors (seeded weights, non-trivial biases and
      layernorm parameters so every term is exercised) and DIR/ids.npy, DIR/targets.npy
      (i32 [K, B, T]).
  gpt2_ref.py check DIR OUT.npy --output logits|argmax|logprob --positions all|last
        [--tol-rel R] [--min-agree F]
      recomputes every batch of DIR/ids.npy in float64 and compares with OUT.npy (pipectl's
      sink output): logits by relative L2 error, argmax by agreement, logprob by max abs error.
  gpt2_ref.py prompts DIR [--seed S --batches K --B B --T T --vocab V]
      writes DIR/prompts.npy (i32 [K, B, T], right-padded with token V - 1) and DIR/lengths.npy
      (i32 [K, B]: lengths in [1, T], the first sequence of each batch T long).
  gpt2_ref.py generate DIR TOKENS.npy --prompts P.npy --lengths L.npy [--eos E]
      greedy generation of each prompt alone (unpadded), in float64, as many tokens as TOKENS.npy
      ([K, B, N], pipectl's) has columns, stopping after eos (the columns after it eos too);
      compares the ids exactly.
Only numpy is needed (no torch)."""
import json
import struct
import sys

import numpy as np


def bf16_bits(a):
    u = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def write_safetensors(path, tensors, dtype="F32"):
    """tensors: list of (name, float array). Written in the order given, little-endian."""
    header, blobs, off = {}, [], 0
    for name, a in tensors:
        a = np.asarray(a, np.float32)
        if dtype == "F32":
            b = a.astype("<f4").tobytes()
        elif dtype == "F16":
            b = a.astype("<f2").tobytes()
        else:
            b = bf16_bits(a).astype("<u2").tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def make_weights(L, H, C, V, N, seed):
    rng = np.random.default_rng(seed)
    n = lambda *s: (rng.standard_normal(s) * 0.05).astype(np.float32)
    t = [("wte.weight", n(V, C) * 2), ("wpe.weight", n(N, C))]
    for l in range(L):
        p = "h.%d." % l
        t += [(p + "ln_1.weight", 1 + n(C) * 2), (p + "ln_1.bias", n(C)),
              (p + "attn.c_attn.weight", n(C, 3 * C) * 4), (p + "attn.c_attn.bias", n(3 * C)),
              (p + "attn.c_proj.weight", n(C, C)), (p + "attn.c_proj.bias", n(C)),
              (p + "ln_2.weight", 1 + n(C) * 2), (p + "ln_2.bias", n(C)),
              (p + "mlp.c_fc.weight", n(C, 4 * C) * 2), (p + "mlp.c_fc.bias", n(4 * C)),
              (p + "mlp.c_proj.weight", n(4 * C, C)), (p + "mlp.c_proj.bias", n(C))]
    t += [("ln_f.weight", 1 + n(C) * 2), ("ln_f.bias", n(C))]
    return t


def layernorm(x, w, b, eps):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w + b


def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def forward(W, cfg, ids):
    """ids [B, T] -> logits [B, T, V], float64."""
    L, H, C, eps = cfg["n_layer"], cfg["n_head"], cfg["n_embd"], cfg.get("layer_norm_epsilon", 1e-5)
    B, T = ids.shape
    g = lambda k: W[k].astype(np.float64)
    x = g("wte.weight")[ids] + g("wpe.weight")[:T][None]
    mask = np.triu(np.ones((T, T), bool), 1)
    hd = C // H
    for l in range(L):
        p = "h.%d." % l
        h = layernorm(x, g(p + "ln_1.weight"), g(p + "ln_1.bias"), eps)
        qkv = h @ g(p + "attn.c_attn.weight") + g(p + "attn.c_attn.bias")
        q, k, v = np.split(qkv, 3, axis=-1)
        sh = lambda a: a.reshape(B, T, H, hd).transpose(0, 2, 1, 3)
        q, k, v = sh(q), sh(k), sh(v)
        a = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd)
        a[:, :, mask] = -np.inf
        a = np.exp(a - a.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        y = (a @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
        x = x + y @ g(p + "attn.c_proj.weight") + g(p + "attn.c_proj.bias")
        h = layernorm(x, g(p + "ln_2.weight"), g(p + "ln_2.bias"), eps)
        u = gelu(h @ g(p + "mlp.c_fc.weight") + g(p + "mlp.c_fc.bias"))
        x = x + u @ g(p + "mlp.c_proj.weight") + g(p + "mlp.c_proj.bias")
    x = layernorm(x, g("ln_f.weight"), g("ln_f.bias"), eps)
    return x @ g("wte.weight").T


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        raw = data[b:e]
        if v["dtype"] == "F32":
            a = np.frombuffer(raw, "<f4")
        elif v["dtype"] == "F16":
            a = np.frombuffer(raw, "<f2").astype(np.float32)
        else:
            a = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        out[k[len("transformer."):] if k.startswith("transformer.") else k] = a.reshape(v["shape"])
    return out


def load(d):
    """The snapshot in DIR: (weights by name, config)."""
    cfg = json.load(open(d + "/config.json"))
    try:
        W = read_safetensors(d + "/model.safetensors")
    except FileNotFoundError:
        idx = json.load(open(d + "/model.safetensors.index.json"))["weight_map"]
        W = {}
        for f in sorted(set(idx.values())):
            W.update(read_safetensors(d + "/" + f))
    return W, cfg


def arg(name, default, cast=str):
    a = sys.argv
    return cast(a[a.index(name) + 1]) if name in a else default


def main():
    cmd, d = sys.argv[1], sys.argv[2]
    if cmd == "make":
        L, H, C = arg("--layers", 2, int), arg("--heads", 4, int), arg("--embd", 64, int)
        V, N, seed = arg("--vocab", 512, int), arg("--ctx", 128, int), arg("--seed", 1, int)
        K, B, T = arg("--batches", 3, int), arg("--B", 2, int), arg("--T", 16, int)
        cfg = {"model_type": "gpt2", "n_layer": L, "n_head": H, "n_embd": C, "vocab_size": V,
               "n_positions": N, "n_ctx": N, "layer_norm_epsilon": 1e-5,
               "activation_function": "gelu_new"}
        with open(d + "/config.json", "w") as f:
            json.dump(cfg, f, indent=1)
        pre = arg("--prefix", "")
        t = [(pre + k, a) for k, a in make_weights(L, H, C, V, N, seed)]
        shards = arg("--shards", 1, int)
        if shards == 1:
            write_safetensors(d + "/model.safetensors", t, arg("--dtype", "F32"))
        else:  # as save_pretrained writes large models: shards and an index
            wm = {}
            for i in range(shards):
                name = "model-%05d-of-%05d.safetensors" % (i + 1, shards)
                part = t[i::shards]
                write_safetensors(d + "/" + name, part, arg("--dtype", "F32"))
                wm.update({k: name for k, _ in part})
            with open(d + "/model.safetensors.index.json", "w") as f:
                json.dump({"metadata": {}, "weight_map": wm}, f, indent=1)
        rng = np.random.default_rng(seed + 1)
        np.save(d + "/ids.npy", rng.integers(0, V, (K, B, T)).astype(np.int32))
        np.save(d + "/targets.npy", rng.integers(0, V, (K, B, T)).astype(np.int32))
        return 0
    if cmd == "prompts":
        K, B, T = arg("--batches", 2, int), arg("--B", 4, int), arg("--T", 12, int)
        V, seed = arg("--vocab", 512, int), arg("--seed", 1, int)
        rng = np.random.default_rng(seed + 100)
        lengths = rng.integers(1, T + 1, (K, B)).astype(np.int32)
        lengths[:, 0] = T
        prompts = rng.integers(0, V, (K, B, T)).astype(np.int32)
        for k in range(K):
            for b in range(B):
                prompts[k, b, lengths[k, b]:] = V - 1
        np.save(d + "/prompts.npy", prompts)
        np.save(d + "/lengths.npy", lengths)
        return 0
    if cmd == "generate":
        W, cfg = load(d)
        got = np.load(sys.argv[3])
        prompts, lengths = np.load(arg("--prompts", None)), np.load(arg("--lengths", None))
        eos = arg("--eos", None, int)
        K, B, N = got.shape
        want = np.zeros_like(got)
        margin = np.inf
        for k in range(K):
            for b in range(B):
                seq = list(prompts[k, b, :lengths[k, b]])
                ended = False
                for c in range(N):
                    if ended:
                        want[k, b, c] = eos
                        continue
                    lg = forward(W, cfg, np.array([seq]))[0, -1]
                    top = np.sort(lg)[-2:]
                    margin = min(margin, top[1] - top[0])
                    t = int(lg.argmax())
                    want[k, b, c] = t
                    seq.append(t)
                    ended = eos is not None and t == eos
        same = (got == want).all(-1)
        print("greedy generation: %d of %d sequences equal the numpy reference (smallest top-2 "
              "logit margin %.3g)" % (same.sum(), same.size, margin))
        for k, b in zip(*np.nonzero(~same)):
            print("  batch %d, sequence %d: pipectl %s, numpy %s" % (k, b, got[k, b].tolist(),
                                                                     want[k, b].tolist()))
        print("OK" if same.all() else "FAIL")
        return 0 if same.all() else 1
    if cmd == "check":
        W, cfg = load(d)
        ids = np.load(d + "/ids.npy")
        tg = np.load(d + "/targets.npy")
        got = np.load(sys.argv[3]).astype(np.float64)
        mode, pos = arg("--output", "logits"), arg("--positions", "all")
        tol, agree_min = arg("--tol-rel", 1e-4, float), arg("--min-agree", 1.0, float)
        ok = True
        for k in range(ids.shape[0]):
            lg = forward(W, cfg, ids[k])
            t = tg[k]
            if pos == "last":
                lg, t = lg[:, -1:], t[:, -1:]
            g = got[k].reshape(lg.shape[:2] + ((lg.shape[2],) if mode == "logits" else ()))
            if mode == "logits":
                rel = np.linalg.norm(g - lg) / np.linalg.norm(lg)
                agree = (g.argmax(-1) == lg.argmax(-1)).mean()
                print("batch %d: logits relative L2 error %.3g, argmax agreement %.4f" % (k, rel, agree))
                ok &= rel <= tol and agree >= agree_min
            elif mode == "argmax":
                agree = (g == lg.argmax(-1)).mean()
                print("batch %d: argmax agreement %.4f" % (k, agree))
                ok &= agree >= agree_min
            else:
                m = lg.max(-1, keepdims=True)
                lp = (lg - m - np.log(np.exp(lg - m).sum(-1, keepdims=True)))
                want = np.take_along_axis(lp, t[..., None], -1)[..., 0]
                err = np.abs(g - want).max() / max(1.0, np.abs(want).max())
                print("batch %d: logprob max error %.3g (scaled)" % (k, err))
                ok &= err <= tol
        print("OK" if ok else "FAIL")
        return 0 if ok else 1
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
