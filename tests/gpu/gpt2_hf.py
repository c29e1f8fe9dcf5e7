#!/usr/bin/env python3
"""gpt2_hf: the gpt2 kind's GPU forward on GPT-2 124M shapes against Hugging Face transformers'
GPT2LMHeadModel (float32, on the GPU) with the same random weights: relative L2 error of the
logits <= 2e-2 and argmax agreement >= 99%, in f16 and bf16.

  PIPECTL_TEST_HF=1 python3 tests/gpu/gpt2_hf.py PIPECTL WORKDIR

The weights are transformers' own random initialisation with every bias and layernorm parameter
perturbed (so no term is trivially zero), written with save_pretrained (safetensors) and read by
pipectl from that snapshot. Exit 77 (skip) without torch, transformers or a GPU."""
import json
import os
import subprocess
import sys

if os.environ.get("PIPECTL_TEST_HF") != "1":
    print("SKIP: set PIPECTL_TEST_HF=1 to compare with transformers (a minute on the GPU; "
          "tests/bench/run_gpt2.sh does)")
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

pipectl, work = sys.argv[1], sys.argv[2]
snap = os.path.join(work, "snap")
os.makedirs(snap, exist_ok=True)
torch.manual_seed(0)
model = transformers.GPT2LMHeadModel(transformers.GPT2Config())
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.dim() == 1:
            p.add_(torch.randn_like(p) * 0.05)
try:
    model.save_pretrained(snap, safe_serialization=True)
except TypeError:  # transformers versions that always write safetensors
    model.save_pretrained(snap)
K, B, T, V = 2, 4, 256, model.config.vocab_size
ids = np.random.default_rng(0).integers(0, V, (K, B, T)).astype(np.int32)
np.save(os.path.join(snap, "ids.npy"), ids)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
model = model.cuda().float().eval()
with torch.no_grad():
    ref = [model(torch.from_numpy(ids[k]).long().cuda()).logits.float().cpu().numpy() for k in range(K)]
del model
torch.cuda.empty_cache()

ok = True
for dt in ("f16", "bf16"):
    d = os.path.join(work, dt)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "p.yaml"), "w") as f:
        f.write("""pipeline: gpt2_hf_{dt}
run: {{batches: {K}, depth: 2}}
buffers:
  ids:     {{where: host, dtype: i32, shape: [{B}, {T}]}}
  ids_dev: {{where: device, dtype: i32, shape: [{B}, {T}]}}
  lg_dev:  {{where: device, dtype: f32, shape: [{B}, {T}, {V}]}}
  lg:      {{where: host, dtype: f32, shape: [{B}, {T}, {V}]}}
stages:
  - {{name: read, kind: source, to: ids, file: ../snap/ids.npy}}
  - {{name: up, kind: h2d, from: ids, to: ids_dev}}
  - {{name: lm, kind: gpt2, weights: ../snap, dtype: {dt}, ids: ids_dev, out: lg_dev}}
  - {{name: down, kind: d2h, from: lg_dev, to: lg}}
  - {{name: save, kind: sink, from: lg, to: out/logits.npy}}
""".format(dt=dt, K=K, B=B, T=T, V=V))
    r = subprocess.run([pipectl, "run", "--quiet", "--executor", "gpu", os.path.join(d, "p.yaml")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL: %s: pipectl exit %d: %s" % (dt, r.returncode, r.stderr.strip()))
        ok = False
        continue
    got = np.load(os.path.join(d, "out", "logits.npy"))
    for k in range(K):
        g = got[k].astype(np.float64)
        w = ref[k].astype(np.float64)
        rel = np.linalg.norm(g - w) / np.linalg.norm(w)
        agree = (g.argmax(-1) == w.argmax(-1)).mean()
        good = rel <= 2e-2 and agree >= 0.99
        print("%s batch %d: logits relative L2 error %.3g, argmax agreement %.4f %s"
              % (dt, k, rel, agree, "ok" if good else "FAIL"))
        print("RESULT " + json.dumps({"test": "hf_124m", "dtype": dt, "batch": k, "rel_l2": rel,
                                      "argmax_agree": agree}))
        ok &= bool(good)
print("OK" if ok else "FAIL")
sys.exit(0 if ok else 1)
