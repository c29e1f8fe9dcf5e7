-- agent_rag_steps.lua: the host steps of pipelines/agent_rag.yaml (and .lua): a stand-in
-- embedding of token ids and the assembly of prompts. Each function finds its buffers by the
-- names in the stage's `args` ("role=buffer ..."), so one function serves both hops, and reads
-- every size from the buffers' shapes, so the pipeline runs at any size `--set` gives it.

local function roles(opts)
  local r = {}
  for k, v in (opts.args or ""):gmatch("([%w_]+)=([%w_]+)") do r[k] = v end
  return r
end

local function need(bufs, r, role, opts)
  local name = r[role]
  if not name then error(("stage '%s': args lack %s=BUFFER"):format(opts.name, role)) end
  return bufs[name]
end

-- embed (args: ids=IDS [lengths=LENGTHS] out=OUT): row b of OUT (f32 [B, D]) gets the hashed
-- bag-of-tokens embedding of the first LENGTHS[b] ids of row b of IDS (i32 [B, T]; all T without
-- lengths): each id adds +1 or -1 (a second hash bit) to one of D buckets (a multiplicative
-- hash), and the row is scaled to unit length. A deterministic stand-in for an embedding model:
-- prompts that share tokens get near vectors; it knows no meaning.
function embed(batch, opts, bufs)
  local r = roles(opts)
  local ids, out = need(bufs, r, "ids", opts), need(bufs, r, "out", opts)
  local lens = r.lengths and bufs[r.lengths]
  local B, T, D = ids:shape()[1], ids:shape()[2], out:shape()[2]
  for b = 0, B - 1 do
    local v = {}
    for d = 1, D do v[d] = 0.0 end
    local n = lens and lens[b + 1] or T
    if n < 0 or n > T then error(("embed: row %d's length %d is outside 0..%d"):format(b, n, T)) end
    local row = ids:totable(b * T + 1, b * T + T)
    for t = 1, n do
      local h = (row[t] * 2654435761 + 40503) & 0xffffffff
      local d = h % D + 1
      v[d] = v[d] + (((h >> 16) & 1) == 1 and 1.0 or -1.0)
    end
    local s = 0.0
    for d = 1, D do s = s + v[d] * v[d] end
    s = s > 0 and 1 / math.sqrt(s) or 0.0
    for d = 1, D do v[d] = v[d] * s end
    out:fromtable(v, b * D + 1)
  end
end

-- assemble (args: passages=HITS question=Q question_len=QL [draft=DRAFT] prompt=P lengths=L):
-- row b of P (i32 [B, T]) is the retrieved passages of query b (HITS [B, k, p], nearest first,
-- all k x p ids), then the first QL[b] ids of its question (Q [B, Tq]), then, for the second hop,
-- the draft answer (DRAFT [B, N], all N ids); the rest of the row is 0 (padding: prefill reads
-- only the first L[b] ids). L[b] is the prompt's length.
function assemble(batch, opts, bufs)
  local r = roles(opts)
  local hits, q, ql = need(bufs, r, "passages", opts), need(bufs, r, "question", opts),
                      need(bufs, r, "question_len", opts)
  local draft = r.draft and bufs[r.draft]
  local prompt, lens = need(bufs, r, "prompt", opts), need(bufs, r, "lengths", opts)
  local hs, B, T = hits:shape(), prompt:shape()[1], prompt:shape()[2]
  local kp, Tq = hs[2] * hs[3], q:shape()[2]
  local N = draft and draft:shape()[2] or 0
  for b = 0, B - 1 do
    local n = ql[b + 1]
    if n < 1 or n > Tq then error(("assemble: question %d's length %d is outside 1..%d"):format(b, n, Tq)) end
    if kp + n + N > T then
      error(("assemble: prompt %d needs %d ids, more than the prompt buffer's %d"):format(b, kp + n + N, T))
    end
    local row = hits:totable(b * kp + 1, b * kp + kp)
    local qrow = q:totable(b * Tq + 1, b * Tq + n)
    for i = 1, n do row[kp + i] = qrow[i] end
    if draft then
      local drow = draft:totable(b * N + 1, b * N + N)
      for i = 1, N do row[kp + n + i] = drow[i] end
    end
    for i = #row + 1, T do row[i] = 0 end
    prompt:fromtable(row, b * T + 1)
    lens[b + 1] = kp + n + N
  end
end
