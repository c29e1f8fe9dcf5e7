#!/usr/bin/env python3
"""generate_torch: the PyTorch baselines for greedy generation beside pipectl's (gpt2 prefill and
decode, sample): GPT-2 124M in fp16 with random weights, prompts of 128 tokens, 256 new tokens,
greedy, no end-of-sequence stop, at batch 1, 8 and 64. Three ways:

  hf_generate   transformers' generate(do_sample=False) (its default dynamic KV cache; and, where
                this transformers has it, cache_implementation="static": hf_generate_static)
  torch_eager   a GPT-2 forward written out in torch over a static KV cache, gpt-fast style (the
                cache [n_layer, B, n_head, 384, 64] allocated once, every step attending over all
                of it with a mask, the position a device tensor), one decode step after the other
  torch_graph   the same decode step (forward, argmax, the token fed back, the position advanced)
                captured once as a CUDA graph by hand and replayed

For each it prints the prefill's time, the decode's ms per step (the 255 steps after the first
token) and tokens a second (B x 256 over prefill + decode), and a RESULT JSON line; then whether
the three agree on the tokens (fp16 near-ties may part them). Needs torch with CUDA and
transformers; no downloads (the weights are transformers' random initialisation).

  python3 tests/bench/generate_torch.py [--batches 1,8,64] [--prompt 128] [--new 256] [--reps 3]
                                        [--no-hf]

--no-hf leaves out transformers' generate(), which takes about 20 s a repetition at batch 1 and
8 (80 ms a token); the two torch loops then agree with each other only.
"""
import argparse
import json
import sys
import time

try:
    import torch
    import torch.nn.functional as F
    import transformers
except ImportError as e:
    print("SKIP: %s" % e)
    sys.exit(77)


def timed(fn, reps):
    """The best of reps runs of fn() (seconds), each synchronised; fn's last result."""
    best, out = float("inf"), None
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = fn()
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best, out


class StaticGPT2:
    """GPT-2's forward over a static KV cache (gpt-fast's layout): weights taken from a
    transformers GPT2LMHeadModel; every call attends over the whole cache with a causal mask
    indexed by the positions, so decode has one shape and can be captured."""

    def __init__(self, hf, B, max_pos):
        tr = hf.transformer
        cfg = hf.config
        self.L, self.H, self.C = cfg.n_layer, cfg.n_head, cfg.n_embd
        self.hd, self.eps, self.B, self.P = self.C // self.H, cfg.layer_norm_epsilon, B, max_pos
        self.wte, self.wpe = tr.wte.weight, tr.wpe.weight
        self.blocks = tr.h
        self.lnf = tr.ln_f
        dev, dt = self.wte.device, self.wte.dtype
        self.k = torch.zeros(self.L, B, self.H, max_pos, self.hd, device=dev, dtype=dt)
        self.v = torch.zeros_like(self.k)
        self.mask = torch.tril(torch.ones(max_pos, max_pos, device=dev, dtype=torch.bool))

    def forward(self, ids, pos):
        """ids [B, t] at positions pos [t] (a device tensor) -> logits of the last one [B, V]."""
        B, t = ids.shape
        x = self.wte[ids] + self.wpe[pos][None]
        mask = self.mask.index_select(0, pos)[None, None]  # [1, 1, t, P]
        for l, blk in enumerate(self.blocks):
            h = F.layer_norm(x, (self.C,), blk.ln_1.weight, blk.ln_1.bias, self.eps)
            qkv = torch.addmm(blk.attn.c_attn.bias, h.view(-1, self.C), blk.attn.c_attn.weight)
            q, k, v = qkv.view(B, t, 3, self.H, self.hd).permute(2, 0, 3, 1, 4)
            self.k[l].index_copy_(2, pos, k)
            self.v[l].index_copy_(2, pos, v)
            y = F.scaled_dot_product_attention(q, self.k[l], self.v[l], attn_mask=mask)
            y = y.transpose(1, 2).reshape(-1, self.C)
            x = x + torch.addmm(blk.attn.c_proj.bias, y, blk.attn.c_proj.weight).view(B, t, self.C)
            h = F.layer_norm(x, (self.C,), blk.ln_2.weight, blk.ln_2.bias, self.eps)
            u = F.gelu(torch.addmm(blk.mlp.c_fc.bias, h.view(-1, self.C), blk.mlp.c_fc.weight),
                       approximate="tanh")
            x = x + torch.addmm(blk.mlp.c_proj.bias, u, blk.mlp.c_proj.weight).view(B, t, self.C)
        h = F.layer_norm(x[:, -1], (self.C,), self.lnf.weight, self.lnf.bias, self.eps)
        return h @ self.wte.t()


def loop_runner(m, prompts, new, graph):
    """Greedy generation with the static model: prefill, then new - 1 decode steps, eager or by
    replaying one captured step. Returns (prefill s, decode s, tokens [B, new])."""
    B, T = prompts.shape
    dev = prompts.device
    tok = torch.zeros(B, 1, dtype=torch.long, device=dev)
    pos = torch.zeros(1, dtype=torch.long, device=dev)
    out = torch.zeros(B, new, dtype=torch.long, device=dev)

    def prefill():
        lg = m.forward(prompts, torch.arange(T, device=dev))
        tok.copy_(lg.argmax(-1, keepdim=True))
        out[:, 0] = tok[:, 0]
        pos.fill_(T)

    def step():  # the token at pos -> the next one, column pos - T + 1
        lg = m.forward(tok, pos)
        nxt = lg.argmax(-1, keepdim=True)
        tok.copy_(nxt)
        out.index_copy_(1, pos - (T - 1), nxt)
        pos.add_(1)

    run_steps = step
    if graph:
        prefill()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            step()
        run_steps = g.replay
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    prefill()
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    for _ in range(new - 1):
        run_steps()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, out.clone()


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--batches", default="1,8,64")
    a.add_argument("--prompt", type=int, default=128)
    a.add_argument("--new", type=int, default=256)
    a.add_argument("--reps", type=int, default=3)
    a.add_argument("--no-hf", action="store_true", help="leave out transformers' generate()")
    o = a.parse_args()
    if not torch.cuda.is_available():
        print("SKIP: torch sees no GPU")
        return 77
    torch.manual_seed(0)
    hf = transformers.GPT2LMHeadModel(transformers.GPT2Config()).half().cuda().eval()
    hf.generation_config.eos_token_id = None
    hf.generation_config.pad_token_id = 0
    V = hf.config.vocab_size
    print("GPT-2 124M fp16, random weights, %s; prompts %d, %d new tokens, greedy, no EOS stop"
          % (torch.cuda.get_device_name(), o.prompt, o.new))
    print("%-20s %5s %12s %12s %12s" % ("method", "B", "prefill ms", "ms/step", "tok/s"))
    for B in [int(b) for b in o.batches.split(",")]:
        g = torch.Generator().manual_seed(B)
        prompts = torch.randint(0, V, (B, o.prompt), generator=g).cuda()
        results = {}

        def report(name, pre, dec, toks):
            steps = o.new - 1
            tps = B * o.new / (pre + dec)
            print("%-20s %5d %12.3f %12.4f %12.0f" % (name, B, pre * 1e3, dec * 1e3 / steps, tps))
            print("RESULT " + json.dumps({"bench": "generate_torch", "method": name, "batch": B,
                                          "prompt": o.prompt, "new": o.new, "prefill_ms": pre * 1e3,
                                          "decode_ms_per_step": dec * 1e3 / steps,
                                          "tok_per_s": tps}))
            results[name] = toks

        with torch.no_grad():
            hf_ways = () if o.no_hf else (("hf_generate", {}),
                                          ("hf_generate_static", {"cache_implementation": "static"}))
            for name, extra in hf_ways:
                try:
                    gen = lambda n: hf.generate(prompts, attention_mask=torch.ones_like(prompts),
                                                do_sample=False, num_beams=1, max_new_tokens=n,
                                                **extra)
                    gen(2)  # warm-up (and, for the static cache, its allocation)
                    t1, _ = timed(lambda: gen(1), o.reps)
                    tn, seqs = timed(lambda: gen(o.new), o.reps)
                except Exception as e:  # a transformers without this cache_implementation
                    print("%-20s %5d skipped: %s" % (name, B, str(e).splitlines()[0][:60]))
                    continue
                report(name, t1, tn - t1, seqs[:, o.prompt:])
            m = StaticGPT2(hf, B, o.prompt + o.new)
            for name, graph in (("torch_eager", False), ("torch_graph", True)):
                best = None
                for _ in range(o.reps):
                    r = loop_runner(m, prompts, o.new, graph)
                    if best is None or r[0] + r[1] < best[0] + best[1]:
                        best = r
                report(name, *best)
        names = list(results)
        for n in names[1:]:
            same = (results[n] == results[names[0]]).all(-1).float().mean().item()
            print("  B %d: %s and %s give the same %d tokens for %.0f%% of the sequences"
                  % (B, n, names[0], o.new, 100 * same))
    return 0


if __name__ == "__main__":
    sys.exit(main())
