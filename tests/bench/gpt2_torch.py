#!/usr/bin/env python3
"""gpt2_torch: the PyTorch baselines pipectl's GPT-2 pipelines are measured against, on the same
GPU, the same weights (a Hugging Face snapshot: config.json + model.safetensors) and the same work.

  python3 tests/bench/gpt2_torch.py SNAPSHOT MODE [options]

MODE:
  pipeline   the seed's recipe: HF GPT2LMHeadModel in fp16, NB batches of B x T token ids; per
             batch H2D of the ids (pinned) -> forward (one CUDA graph per slot) -> D2H of the full
             fp16 logits into pinned memory, on three streams (h2d, compute, d2h) with events,
             `--depth` slots; and the same work sequentially on one stream. Also times each part
             alone, so the bound (NB x the slowest part) is printed beside.
  forward    nanoGPT-style model (torch.nn.Linear, SDPA attention) loaded from the snapshot, the
             argmax of the last position's logits (greedy): eager, and with --compile torch.compile.
  gemm       the bf16 and fp16 GEMM rate (8192^3), the yardstick for "share of the GEMM rate".
Options: --B 8 --T 512 --batches 8 --depth 3 --dtype f16|bf16 --iters 20 --compile
Every measurement is also printed as one line "RESULT {json}"."""
import json
import os
import sys
import time

import torch

args = sys.argv[1:]


def opt(name, default, cast=str):
    return cast(args[args.index(name) + 1]) if name in args else default


def result(**kw):
    print("RESULT " + json.dumps(kw), flush=True)


def timed(fn, iters):
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters


def mode_gemm():
    n = 8192
    for dt, name in ((torch.bfloat16, "bf16"), (torch.float16, "f16")):
        a = torch.randn(n, n, device="cuda", dtype=dt)
        b = torch.randn(n, n, device="cuda", dtype=dt)
        s = timed(lambda: a @ b, 20)
        tf = 2 * n ** 3 / s / 1e12
        print("gemm %s %d^3: %.3f ms, %.0f TFLOP/s" % (name, n, s * 1e3, tf))
        result(mode="gemm", dtype=name, tflops=tf)


def mode_pipeline(snap):
    import transformers

    B, T, NB, depth = opt("--B", 8, int), opt("--T", 512, int), opt("--batches", 8, int), opt("--depth", 3, int)
    # fp16 by .half() (the dtype keyword's name differs between transformers versions).
    model = transformers.GPT2LMHeadModel.from_pretrained(snap, attn_implementation="sdpa")
    model = model.half().cuda().eval()
    V = model.config.vocab_size
    gen = torch.Generator().manual_seed(1)
    ids_host = [torch.randint(0, V, (B, T), generator=gen, dtype=torch.int64).pin_memory() for _ in range(NB)]
    static_in = [torch.zeros(B, T, dtype=torch.int64, device="cuda") for _ in range(depth)]
    graphs, static_out = [], []
    fwd = lambda x: model(x, use_cache=False).logits
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(3):
            fwd(static_in[0])
    torch.cuda.current_stream().wait_stream(s)
    use_graph = True
    try:
        for k in range(depth):
            g = torch.cuda.CUDAGraph()
            with torch.no_grad(), torch.cuda.graph(g):
                out = fwd(static_in[k])
            graphs.append(g)
            static_out.append(out)
    except Exception as e:  # a transformers version whose forward cannot be captured
        print("torch pipeline: CUDA graph capture failed (%s); timing eager forwards" % e)
        use_graph = False
        torch.cuda.synchronize()
        static_out = [torch.empty(B, T, V, dtype=torch.float16, device="cuda") for _ in range(depth)]

    class Eager:
        def __init__(self, k):
            self.k = k

        def replay(self):
            with torch.no_grad():
                static_out[self.k].copy_(fwd(static_in[self.k]))

    if not use_graph:
        graphs = [Eager(k) for k in range(depth)]
    # The logits' dtype is the model's (fp16) unless this transformers version upcasts them.
    logits_host = [torch.empty(B, T, V, dtype=static_out[0].dtype).pin_memory() for _ in range(depth)]
    print("torch pipeline: logits %s %s, transformers %s, torch %s" % (tuple(static_out[0].shape),
          static_out[0].dtype, transformers.__version__, torch.__version__))
    torch.cuda.synchronize()
    h2d, comp, d2h = torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.Stream()

    downs = {}  # the last pipelined run's download ends, ms after its first upload

    def pipelined():
        ev_h2d = [torch.cuda.Event(enable_timing=True) for _ in range(NB)]
        ev_fwd = [torch.cuda.Event() for _ in range(NB)]
        ev_d2h = [torch.cuda.Event(enable_timing=True) for _ in range(NB)]
        for i in range(NB):
            k = i % depth
            with torch.cuda.stream(h2d):
                if i >= depth:
                    h2d.wait_event(ev_fwd[i - depth])  # the slot's input was read
                static_in[k].copy_(ids_host[i], non_blocking=True)
                ev_h2d[i].record(h2d)
            with torch.cuda.stream(comp):
                comp.wait_event(ev_h2d[i])
                if i >= depth:
                    comp.wait_event(ev_d2h[i - depth])  # the slot's logits were downloaded
                graphs[k].replay()
                ev_fwd[i].record(comp)
            with torch.cuda.stream(d2h):
                d2h.wait_event(ev_fwd[i])
                logits_host[k].copy_(static_out[k], non_blocking=True)
                ev_d2h[i].record(d2h)
        torch.cuda.synchronize()
        downs["ends"] = [ev_h2d[0].elapsed_time(e) for e in ev_d2h]

    def per_batch():
        """Each batch's download end minus the one before (the link is busy throughout)."""
        e = downs["ends"]
        return " ".join("%.2f" % (b - a) for a, b in zip(e, e[1:]))

    def sequential():
        for i in range(NB):
            k = i % depth
            static_in[k].copy_(ids_host[i], non_blocking=True)
            graphs[k].replay()
            logits_host[k].copy_(static_out[k], non_blocking=True)
        torch.cuda.synchronize()

    reps = opt("--reps", 5, int)
    # Cold: the first run after setup, as `pipectl run` measures (one run, nothing before it but
    # the setup); warm: the best of `reps`, each right after an untimed run.
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    pipelined()
    t_cold = time.perf_counter() - t0
    cold_batches = per_batch()
    t_pipe = min(timed(pipelined, 1) for _ in range(reps))
    print("torch 3-stream + graph cold (first run): %.2f ms; download ends apart (ms): %s"
          % (t_cold * 1e3, cold_batches))
    print("torch 3-stream + graph warm (last run): download ends apart (ms): %s" % per_batch())
    t_seq = min(timed(sequential, 1) for _ in range(reps))
    t_up = timed(lambda: static_in[0].copy_(ids_host[0], non_blocking=True), 20)
    t_fwd = timed(lambda: graphs[0].replay(), 20)
    t_down = timed(lambda: logits_host[0].copy_(static_out[0], non_blocking=True), 10)
    bound = NB * max(t_up, t_fwd, t_down)
    tok = NB * B * T
    print("torch 3-stream + graph: %d batches of %dx%d in %.2f ms, %.0f tok/s; sequential %.2f ms "
          "(%.2fx); parts: h2d %.3f ms, forward %.3f ms, d2h %.3f ms; bound %.2f ms: %.1f%% of it"
          % (NB, B, T, t_pipe * 1e3, tok / t_pipe, t_seq * 1e3, t_seq / t_pipe, t_up * 1e3,
             t_fwd * 1e3, t_down * 1e3, bound * 1e3, 100 * bound / t_pipe))
    result(mode="pipeline", graph=use_graph, batches=NB, B=B, T=T, depth=depth, ms=t_pipe * 1e3, tok_s=tok / t_pipe,
           cold_ms=t_cold * 1e3,
           seq_ms=t_seq * 1e3, h2d_ms=t_up * 1e3, fwd_ms=t_fwd * 1e3, d2h_ms=t_down * 1e3,
           bound_ms=bound * 1e3)


class Block(torch.nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln_1, self.ln_2 = torch.nn.LayerNorm(C), torch.nn.LayerNorm(C)
        self.c_attn, self.c_proj = torch.nn.Linear(C, 3 * C), torch.nn.Linear(C, C)
        self.c_fc, self.mlp_proj = torch.nn.Linear(C, 4 * C), torch.nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        sh = lambda a: a.view(B, T, self.H, C // self.H).transpose(1, 2)
        y = torch.nn.functional.scaled_dot_product_attention(sh(q), sh(k), sh(v), is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        h = torch.nn.functional.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")
        return x + self.mlp_proj(h)


class NanoGPT(torch.nn.Module):
    """nanoGPT's inference forward: logits of the last position only, then argmax."""

    def __init__(self, cfg):
        super().__init__()
        C, V = cfg["n_embd"], cfg["vocab_size"]
        self.wte = torch.nn.Embedding(V, C)
        self.wpe = torch.nn.Embedding(cfg.get("n_positions", cfg.get("n_ctx")), C)
        self.h = torch.nn.ModuleList(Block(C, cfg["n_head"]) for _ in range(cfg["n_layer"]))
        self.ln_f = torch.nn.LayerNorm(C)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.h:
            x = b(x)
        x = self.ln_f(x[:, -1, :])
        return (x @ self.wte.weight.t()).argmax(-1)


def load_nano(snap, dtype):
    from safetensors.torch import load_file

    cfg = json.load(open(os.path.join(snap, "config.json")))
    m = NanoGPT(cfg)
    sd = {k[len("transformer."):] if k.startswith("transformer.") else k: v
          for k, v in load_file(os.path.join(snap, "model.safetensors")).items()}
    with torch.no_grad():
        m.wte.weight.copy_(sd["wte.weight"])
        m.wpe.weight.copy_(sd["wpe.weight"])
        m.ln_f.weight.copy_(sd["ln_f.weight"])
        m.ln_f.bias.copy_(sd["ln_f.bias"])
        for i, b in enumerate(m.h):
            p = "h.%d." % i
            for mod, name in ((b.ln_1, "ln_1"), (b.ln_2, "ln_2")):
                mod.weight.copy_(sd[p + name + ".weight"])
                mod.bias.copy_(sd[p + name + ".bias"])
            for mod, name in ((b.c_attn, "attn.c_attn"), (b.c_proj, "attn.c_proj"),
                              (b.c_fc, "mlp.c_fc"), (b.mlp_proj, "mlp.c_proj")):
                mod.weight.copy_(sd[p + name + ".weight"].t())  # Conv1D [in, out] -> Linear
                mod.bias.copy_(sd[p + name + ".bias"])
    return m.to(device="cuda", dtype=dtype).eval(), cfg


def mode_forward(snap):
    B, iters = opt("--B", 8, int), opt("--iters", 20, int)
    Ts = [int(t) for t in opt("--T", "512,1024").split(",")]
    dts = opt("--dtype", "bf16,f16").split(",")
    for dn in dts:
        dtype = torch.bfloat16 if dn == "bf16" else torch.float16
        m, cfg = load_nano(snap, dtype)
        variants = [("eager", m)]
        if "--compile" in args:
            variants.append(("compile", torch.compile(m)))
        for T in Ts:
            idx = torch.randint(0, cfg["vocab_size"], (B, T), device="cuda")
            for name, fn in variants:
                with torch.no_grad():
                    t0 = time.perf_counter()
                    fn(idx)  # compiles on the first call
                    torch.cuda.synchronize()
                    first = time.perf_counter() - t0
                    s = timed(lambda: fn(idx), iters)
                tok = B * T / s
                print("torch forward %s %s B=%d T=%d: %.3f ms, %.3f M tok/s (first call %.1f s)"
                      % (name, dn, B, T, s * 1e3, tok / 1e6, first))
                result(mode="forward", variant=name, dtype=dn, B=B, T=T, ms=s * 1e3, tok_s=tok)
            if "--compile" in args:
                # The compiled forward of two batches at once, one per stream, as pipectl's
                # `ordered: false` runs the forwards of the batches in flight.
                fn = variants[-1][1]
                idx2 = [idx, torch.randint(0, cfg["vocab_size"], (B, T), device="cuda")]
                ss = [torch.cuda.Stream(), torch.cuda.Stream()]

                def two():
                    for k in range(2):
                        ss[k].wait_stream(torch.cuda.current_stream())
                        with torch.cuda.stream(ss[k]):
                            fn(idx2[k])
                    for k in range(2):
                        torch.cuda.current_stream().wait_stream(ss[k])

                with torch.no_grad():
                    two()
                    s = timed(two, iters)
                tok = 2 * B * T / s
                print("torch forward compile-2streams %s B=%d T=%d: %.3f ms a batch, %.3f M tok/s"
                      % (dn, B, T, s / 2 * 1e3, tok / 1e6))
                result(mode="forward", variant="compile-2streams", dtype=dn, B=B, T=T, ms=s / 2 * 1e3,
                       tok_s=tok)
        del m, variants
        torch.cuda.empty_cache()


if __name__ == "__main__":
    if len(args) < 2:
        print(__doc__)
        sys.exit(2)
    snap, mode = args[0], args[1]
    torch.backends.cuda.matmul.allow_tf32 = True
    {"pipeline": lambda: mode_pipeline(snap), "forward": lambda: mode_forward(snap),
     "gemm": mode_gemm}[mode]()
