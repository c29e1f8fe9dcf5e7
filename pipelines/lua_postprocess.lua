-- lua_postprocess.lua: pipelines/lua_postprocess.yaml written in Lua (the same spec, so the same
-- plan and the same out/lua_postprocess.npy). The summarise stage keeps its code as text here so
-- the spec matches the YAML one byte for byte; pipelines/lua_tokenize.lua shows the other way, a
-- Lua function given directly as `fn`.
local p = pipectl.pipeline{name = "lua_postprocess", run = {batches = 8, depth = 3, seed = 7}}

local n = 4096
p:buffer("x_host", {where = "host", dtype = "f32", shape = {n}})
p:buffer("x_dev", {where = "device", dtype = "f32", shape = {n}})
p:buffer("y_dev", {where = "device", dtype = "f32", shape = {n}})
p:buffer("y_host", {where = "host", dtype = "f32", shape = {n}})
p:buffer("stats", {where = "host", dtype = "f64", shape = {4}})

p:stage{name = "gen", kind = "source", to = "x_host", generator = "random"}
p:stage{name = "up", kind = "h2d", from = "x_host", to = "x_dev"}
p:stage{name = "triple", kind = "kernel", op = "scale", alpha = 3, reads = {"x_dev"}, writes = {"y_dev"}}
p:stage{name = "down", kind = "d2h", from = "y_dev", to = "y_host"}
p:stage{name = "summarise", kind = "lua", reads = {"y_host"}, writes = {"stats"}, instructions = 10000000,
        code = [[
function run(batch, opts, bufs)
  local y = bufs.y_host
  local lo, hi, positive = math.huge, -math.huge, 0
  for i = 1, #y do
    local v = y[i]
    if v < lo then lo = v end
    if v > hi then hi = v end
    if v > 0 then positive = positive + 1 end
  end
  bufs.stats:fromtable({lo, hi, y:sum() / #y, positive})
end
]]}
p:stage{name = "save", kind = "sink", from = "stats", to = "out/lua_postprocess.npy"}

return p
