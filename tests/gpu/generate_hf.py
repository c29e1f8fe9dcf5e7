#!/usr/bin/env python3
"""generate_hf: greedy generation on the GPU (gpt2 prefill and decode, sample) on GPT-2 124M shapes
against Hugging Face transformers' generate(do_sample=False) with the same random weights, in f16
and bf16: 16 prompts of 16 to 32 tokens (right-padded for pipectl, each alone for transformers),
64 new tokens each (no end-of-sequence stop), the decode steps written out
(tests/e2e/generate_yaml.py). Every sequence's tokens must equal transformers' up to its first
step where transformers' own top-2 logit margin is below 0.05 (there a 16-bit rounding may pick
the other token and the sequences part), and at least 90% of the sequences must equal in all 64.

The weights are transformers' random initialisation with the biases and layernorm parameters
perturbed, written with save_pretrained, as tests/gpu/gpt2_hf.py makes them: the f16 run reads the
f32 snapshot and is compared with transformers in f32; the bf16 run reads a bf16 snapshot and is
compared with transformers in f32 on those bf16 weights. No downloads.

  PIPECTL_TEST_HF=1 python3 tests/gpu/generate_hf.py PIPECTL SRC WORKDIR

Exit 77 (skip) without the variable, torch, transformers or a GPU."""
import json
import os
import subprocess
import sys

if os.environ.get("PIPECTL_TEST_HF") != "1":
    print("SKIP: set PIPECTL_TEST_HF=1 to compare generation with transformers (a few minutes on "
          "the GPU)")
    sys.exit(77)
try:
    import numpy as np
    import torch
    import transformers
except ImportError as e:
    print("SKIP: %s" % e)
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIP: torch sees no GPU")
    sys.exit(77)

pipectl, src, work = sys.argv[1], sys.argv[2], sys.argv[3]
B, T, NEW, MARGIN, MIN_EQUAL = 16, 32, 64, 0.05, 0.90
os.makedirs(work, exist_ok=True)


def save(m, d):
    os.makedirs(d, exist_ok=True)
    try:
        m.save_pretrained(d, safe_serialization=True)
    except TypeError:  # transformers versions that always write safetensors
        m.save_pretrained(d)


torch.manual_seed(0)
model = transformers.GPT2LMHeadModel(transformers.GPT2Config())
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.dim() == 1:
            p.add_(torch.randn_like(p) * 0.05)
save(model, os.path.join(work, "snap"))
m16 = transformers.GPT2LMHeadModel(model.config)
m16.load_state_dict(model.state_dict())
m16 = m16.to(torch.bfloat16)
save(m16, os.path.join(work, "snap_bf16"))
V = model.config.vocab_size
rng = np.random.default_rng(0)
lengths = rng.integers(16, T + 1, B).astype(np.int32)
lengths[0] = T
prompts = rng.integers(0, V, (B, T)).astype(np.int32)
for b in range(B):
    prompts[b, lengths[b]:] = 0
np.save(os.path.join(work, "prompts.npy"), prompts[None])
np.save(os.path.join(work, "lengths.npy"), lengths[None])
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def hf_generate(m):
    """Each prompt alone: (tokens [B, NEW], top-2 margins [B, NEW]) of greedy generate()."""
    m.generation_config.eos_token_id = None
    m.generation_config.pad_token_id = 0
    toks, margins = [], []
    with torch.no_grad():
        for b in range(B):
            ids = torch.from_numpy(prompts[b:b + 1, :lengths[b]]).long().cuda()
            out = m.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, num_beams=1,
                             max_new_tokens=NEW, output_scores=True, return_dict_in_generate=True)
            toks.append(out.sequences[0, lengths[b]:].cpu().numpy())
            sc = torch.stack(out.scores)[:, 0].float()
            top = sc.topk(2, dim=-1).values
            margins.append((top[:, 0] - top[:, 1]).cpu().numpy())
    return np.stack(toks), np.stack(margins)


ref = {"f16": hf_generate(model.cuda().float().eval())}
ref["bf16"] = hf_generate(m16.cuda().float().eval())  # the bf16 weights, computed in f32
del model, m16
torch.cuda.empty_cache()

ok = True
for dt in ("f16", "bf16"):
    d = os.path.join(work, dt)
    os.makedirs(d, exist_ok=True)
    y = subprocess.run([sys.executable, os.path.join(src, "tests/e2e/generate_yaml.py"),
                        "--weights", "../snap" if dt == "f16" else "../snap_bf16",
                        "--B", str(B), "--T", str(T), "--steps", str(NEW - 1), "--batches", "1",
                        "--depth", "1", "--prompts", "../prompts.npy", "--lengths", "../lengths.npy",
                        "--dtype", dt, "--cache", dt, "--gpt2", "tune: false", "--layers", "12",
                        "--heads", "12", "--embd", "768", "--vocab", str(V)],
                       capture_output=True, text=True)
    if y.returncode != 0:
        print("FAIL: generate_yaml.py: %s" % y.stderr.strip())
        sys.exit(1)
    with open(os.path.join(d, "p.yaml"), "w") as f:
        f.write(y.stdout)
    r = subprocess.run([pipectl, "run", "--quiet", "--executor", "gpu", os.path.join(d, "p.yaml")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL: %s: pipectl exit %d: %s" % (dt, r.returncode, r.stderr.strip()))
        ok = False
        continue
    got = np.load(os.path.join(d, "out", "tokens.npy"))[0]
    want, margins = ref[dt]
    equal, bad = 0, 0
    for b in range(B):
        differ = next((c for c in range(NEW) if got[b, c] != want[b, c]), NEW)
        low = next((c for c in range(NEW) if margins[b, c] < MARGIN), NEW)
        equal += differ == NEW
        if differ < NEW:
            print("%s sequence %d (prompt %d tokens): parts at step %d (transformers' top-2 margin "
                  "there %.3g; first margin below %g at step %s)%s"
                  % (dt, b, lengths[b], differ, margins[b, differ], MARGIN,
                     low if low < NEW else "none", " FAIL" if differ < low else ""))
        bad += differ < low
    frac = equal / B
    print("%s: %d of %d sequences equal transformers' generate() in all %d new tokens (%.1f%%), "
          "%d part before a margin below %g" % (dt, equal, B, NEW, 100 * frac, bad, MARGIN))
    print("RESULT " + json.dumps({"test": "generate_hf_124m", "dtype": dt, "equal": equal,
                                  "sequences": B, "new_tokens": NEW, "parted_early": bad}))
    ok &= bad == 0 and frac >= MIN_EQUAL
print("OK" if ok else "FAIL")
sys.exit(0 if ok else 1)
