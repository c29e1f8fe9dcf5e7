-- agent_rag.lua: pipelines/agent_rag.yaml written in Lua: the same spec, plan and outputs (its
-- header says what the pipeline does and what each stand-in stands for). Both hops are made by
-- one function, `hop`: embed, search, assemble, prefill, a loop of decode and sample, download.
-- pipectl-test: skip-host (GPT-2 124M; tests/e2e/test_generate_pipelines.sh runs it on the tiny model)
local B, Tq, D, K, P = 16, 32, 128, 2, 48    -- questions, question ids, embedding, hits, passage ids
local V, DOCS = 50257, 32768                 -- GPT-2's vocabulary, documents in the corpus
local L, H, C = 12, 12, 768                  -- GPT-2 124M: layers, heads, width
local steps = "scripts/agent_rag_steps.lua"  -- embed and assemble (host steps)

local p = pipectl.pipeline{name = "agent_rag", run = {batches = 8, depth = 3, seed = 5}}
local function buf(name, where, dtype, shape, extra)
  local t = {where = where, dtype = dtype, shape = shape}
  for k, v in pairs(extra or {}) do t[k] = v end
  p:buffer(name, t)
end

buf("question", "host", "i32", {B, Tq})
buf("question_len", "host", "i32", {B})
buf("corpus", "host", "f32", {DOCS, D}, {persistent = true, init = "random"})
buf("passages", "host", "i32", {DOCS, P}, {persistent = true, init = "random"})

p:stage{name = "ask", kind = "source", to = "question", generator = "random", min = 0, max = V}
p:stage{name = "ask_len", kind = "source", to = "question_len", generator = "random", min = 8, max = 33}

-- One hop n: retrieve for `embed_args` (the ids to embed), assemble a prompt of T ids from the
-- passages, the question and `draft` (if given), generate N tokens into `out` (host [B, N]).
local function hop(n, embed_reads, embed_args, T, N, out, draft)
  local s = function(x) return x .. n end
  buf(s "query", "host", "f32", {B, D})
  buf(s "hits", "host", "i32", {B, K})
  buf(s "context", "host", "i32", {B, K, P})
  buf(s "prompt", "host", "i32", {B, T})
  buf(s "len", "host", "i32", {B})
  buf(s "prompt" .. "_dev", "device", "i32", {B, T})
  buf(s "len" .. "_dev", "device", "i32", {B})
  buf(s "kv", "device", "f16", {L, 2, B, H, T + N - 1, C // H})
  buf(s "logits", "device", "f32", {B, V})
  for _, x in ipairs{"next", "done"} do buf(s(x), "device", "i32", {B}) end
  for _, x in ipairs{"going", "step"} do buf(s(x), "device", "i32", {1}) end
  buf(out .. "_dev", "device", "i32", {B, N})
  buf(out, "host", "i32", {B, N})

  local model = {weights = "random", config = "gpt2", dtype = "f16"}
  local function gpt2(t)
    t.kind = "gpt2"
    for k, v in pairs(model) do t[k] = v end
    return t
  end
  local reads = {s "context", "question", "question_len"}
  local args = "passages=" .. s "context" .. " question=question question_len=question_len"
  if draft then
    reads[#reads + 1] = draft
    args = args .. " draft=" .. draft
  end
  p:stage{name = s "embed", kind = "lua", script = steps, ["function"] = "embed",
          reads = embed_reads, writes = {s "query"}, args = embed_args .. " out=" .. s "query"}
  p:stage{name = s "retrieve", kind = "search", queries = s "query", corpus = "corpus", k = K,
          metric = "ip", ids = s "hits", payload = "passages", hits = s "context"}
  p:stage{name = s "assemble", kind = "lua", script = steps, ["function"] = "assemble", reads = reads,
          writes = {s "prompt", s "len"}, args = args .. " prompt=" .. s "prompt" .. " lengths=" .. s "len"}
  p:stage{name = s "up", kind = "h2d", from = s "prompt", to = s "prompt" .. "_dev"}
  p:stage{name = s "up_len", kind = "h2d", from = s "len", to = s "len" .. "_dev"}
  p:stage(gpt2{name = s "prefill", mode = "prefill", ids = s "prompt" .. "_dev",
               lengths = s "len" .. "_dev", cache = s "kv", out = s "logits"})
  p:stage{name = s "first", kind = "sample", logits = s "logits", tokens = out .. "_dev",
          finished = s "done", next = s "next", count = s "going"}
  p:stage{name = s "generate", loop = {max = N - 1, ["while"] = s "going", index = s "step"},
          stages = {
            pipectl.stage(gpt2{name = s "decode", mode = "decode", ids = s "next",
                               lengths = s "len" .. "_dev", step = s "step", cache = s "kv",
                               out = s "logits"}),
            pipectl.stage{name = s "pick", kind = "sample", logits = s "logits", step = s "step",
                          tokens = out .. "_dev", finished = s "done", next = s "next",
                          count = s "going"},
          }}
  p:stage{name = s "down", kind = "d2h", from = out .. "_dev", to = out}
end

hop(1, {"question", "question_len"}, "ids=question lengths=question_len", K * P + Tq, 32, "draft")
hop(2, {"draft"}, "ids=draft", K * P + Tq + 32, 64, "answer", "draft")

for _, x in ipairs{"answer", "draft", "hits1", "hits2"} do
  p:stage{name = "save_" .. x, kind = "sink", from = x, to = "out/agent_rag_" .. x .. ".npy"}
end

return p
