-- generate.lua: pipelines/generate.yaml written in Lua: the same spec, plan and outputs. The
-- sizes are named once and the shapes computed from them; `model` gives both gpt2 stages the
-- same weights (so they share one copy). `while` is a Lua keyword: the loop's key is ["while"].
-- pipectl-test: skip-host (GPT-2 124M; tests/e2e/test_generate_pipelines.sh runs it on the tiny model)
local B, T, N = 64, 128, 256                        -- prompts per batch, prompt ids, new tokens
local L, H, C, V = 12, 12, 768, 50257               -- GPT-2 124M: layers, heads, width, vocabulary

local p = pipectl.pipeline{name = "generate", run = {batches = 8, depth = 3, seed = 1}}

local function buf(name, where, dtype, shape) p:buffer(name, {where = where, dtype = dtype, shape = shape}) end
buf("prompts", "host", "i32", {B, T})
buf("prompts_dev", "device", "i32", {B, T})
buf("lengths", "host", "i32", {B})
buf("lengths_dev", "device", "i32", {B})
-- The KV cache, one per slot: the last decode step (iteration N - 2) writes position T + N - 2.
buf("kv", "device", "f16", {L, 2, B, H, T + N - 1, C // H})
buf("logits", "device", "f32", {B, V})
buf("next", "device", "i32", {B})                   -- the tokens just chosen: decode's ids
buf("done", "device", "i32", {B})                   -- 1 once a sequence has ended
buf("going", "device", "i32", {1})                  -- sequences not ended: the loop's while
buf("step", "device", "i32", {1})                   -- the loop's index: the decode step
buf("tokens_dev", "device", "i32", {B, N})
buf("tokens", "host", "i32", {B, N})
buf("steps", "host", "i32", {1})

-- A gpt2 stage on the pipeline's one model: `t` gives the stage's own keys. Unordered: the
-- forwards of the batches in flight share the SMs (generate.yaml says why).
local function model(t)
  t.kind, t.weights, t.config, t.dtype, t.ordered = "gpt2", "random", "gpt2", "f16", false
  return t
end

p:stage{name = "read", kind = "source", to = "prompts", generator = "random", min = 0, max = V}
p:stage{name = "read_len", kind = "source", to = "lengths", generator = "constant", value = T}
p:stage{name = "up", kind = "h2d", from = "prompts", to = "prompts_dev"}
p:stage{name = "up_len", kind = "h2d", from = "lengths", to = "lengths_dev"}
p:stage(model{name = "prefill", mode = "prefill", ids = "prompts_dev", lengths = "lengths_dev",
              cache = "kv", out = "logits"})
p:stage{name = "first", kind = "sample", logits = "logits", tokens = "tokens_dev", finished = "done",
        next = "next", count = "going"}
p:stage{name = "generate", loop = {max = N - 1, ["while"] = "going", index = "step"}, stages = {
          pipectl.stage(model{name = "decode", mode = "decode", ids = "next", lengths = "lengths_dev",
                              step = "step", cache = "kv", out = "logits"}),
          pipectl.stage{name = "pick", kind = "sample", logits = "logits", step = "step",
                        tokens = "tokens_dev", finished = "done", next = "next", count = "going"},
        }}
p:stage{name = "down", kind = "d2h", from = "tokens_dev", to = "tokens"}
p:stage{name = "down_steps", kind = "d2h", from = "step", to = "steps"}
p:stage{name = "save", kind = "sink", from = "tokens", to = "out/generate_tokens.npy"}
p:stage{name = "save_steps", kind = "sink", from = "steps", to = "out/generate_steps.npy"}

return p
