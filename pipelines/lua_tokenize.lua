-- lua_tokenize.lua: Lua stages as source, transform and check, given as Lua functions (`fn`).
-- Each batch: a Lua source writes a prompt (bytes), a Lua tokenizer turns its words into token ids
-- (a toy hash tokenizer over a 50257-entry vocabulary), the ids go to the GPU where a kernel
-- reduces them to a checksum, and a Lua check validates the ids on the host. Outputs:
-- out/lua_tokenize_ids.npy (i32 [batches, 64]) and out/lua_tokenize_sum.npy (i64 [batches, 1]).
--
--   pipectl run pipelines/lua_tokenize.lua
--
-- Functions given as `fn` run in other Lua states (one per host worker): pipectl runs this script
-- again in each of them and finds each function by its stage's name, so upvalues (like `vocab`
-- and `words` below) and helper functions work, but only values the script computes the same way
-- every time do: no state is shared between workers or batches.
local p = pipectl.pipeline{name = "lua_tokenize", run = {batches = 16, depth = 3, seed = 11}}

local vocab = 50257
local words = {"retrieve", "the", "nearest", "documents", "for", "query", "and", "answer", "briefly"}

p:buffer("text", {where = "host", dtype = "u8", shape = {256}})
p:buffer("ids", {where = "host", dtype = "i32", shape = {64}})
p:buffer("ids_dev", {where = "device", dtype = "i32", shape = {64}})
p:buffer("sum_dev", {where = "device", dtype = "i64", shape = {1}})
p:buffer("sum_host", {where = "host", dtype = "i64", shape = {1}})

-- FNV-1a over the bytes of a word, folded into the vocabulary.
local function token(w)
  local h = 2166136261
  for i = 1, #w do h = ((h ~ w:byte(i)) * 16777619) & 0xffffffff end
  return h % vocab
end

-- A Lua source: only `writes`. math.random is seeded from the run seed, the stage and the batch,
-- so the prompt of a batch is the same whichever worker makes it.
p:stage{name = "prompt", kind = "lua", writes = {"text"}, fn = function(batch, opts, bufs)
  local out = {("question %d:"):format(batch)}
  for i = 2, 12 do out[i] = words[math.random(#words)] end
  local s = table.concat(out, " ")
  bufs.text:fill(0)
  bufs.text:fromstring(s:sub(1, #bufs.text))
end}

p:stage{name = "tokenize", kind = "lua", reads = {"text"}, writes = {"ids"}, fn = function(batch, opts, bufs)
  local s = bufs.text:tostring():gsub("%z+$", "")
  local ids, n = bufs.ids, 0
  ids:fill(0)
  for w in s:gmatch("%S+") do
    if n == #ids then break end
    n = n + 1
    ids[n] = token(w)
  end
end}

p:stage{name = "upload", kind = "h2d", from = "ids", to = "ids_dev"}
p:stage{name = "digest", kind = "kernel", op = "checksum", reads = {"ids_dev"}, writes = {"sum_dev"}}
p:stage{name = "download", kind = "d2h", from = "sum_dev", to = "sum_host"}

-- A Lua check: only `reads`. An error stops the run and names the stage, the batch and the line.
p:stage{name = "validate", kind = "lua", reads = {"ids"}, fn = function(batch, opts, bufs)
  for i = 1, #bufs.ids do
    local id = bufs.ids[i]
    if id < 0 or id >= vocab then error(("token %d is %d, outside the vocabulary"):format(i, id)) end
  end
end}

p:stage{name = "save_ids", kind = "sink", from = "ids", to = "out/lua_tokenize_ids.npy"}
p:stage{name = "save_sum", kind = "sink", from = "sum_host", to = "out/lua_tokenize_sum.npy"}

return p
