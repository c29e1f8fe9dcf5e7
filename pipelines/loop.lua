-- loop.lua: pipelines/loop.yaml written in Lua: the same spec, plan and outputs. A loop is a stage
-- table with `loop` and `stages`; `while` is a Lua keyword, so its key is written ["while"].
local p = pipectl.pipeline{name = "loop", run = {batches = 16, depth = 3, seed = 7}}
for _, b in ipairs{{"n_host", "host"}, {"left_dev", "device"}, {"minus1", "device"},
                   {"step_dev", "device"}, {"sum_dev", "device"}, {"sum_host", "host"},
                   {"steps_host", "host"}} do
  p:buffer(b[1], {where = b[2], dtype = "i32", shape = {1}})
end

p:stage{name = "draw", kind = "source", to = "n_host", generator = "random", min = 0, max = 8}
p:stage{name = "up", kind = "h2d", from = "n_host", to = "left_dev"}
p:stage{name = "minus_one", kind = "kernel", op = "fill", value = -1, writes = {"minus1"}}
p:stage{name = "zero", kind = "kernel", op = "fill", value = 0, writes = {"sum_dev"}}
p:stage{name = "countdown", loop = {max = 16, ["while"] = "left_dev", index = "step_dev"}, stages = {
  pipectl.stage{name = "tick", kind = "kernel", op = "add", reads = {"left_dev", "minus1"},
                writes = {"left_dev"}},
  pipectl.stage{name = "total", kind = "kernel", op = "add", reads = {"sum_dev", "step_dev"},
                writes = {"sum_dev"}},
}}
p:stage{name = "down_sum", kind = "d2h", from = "sum_dev", to = "sum_host"}
p:stage{name = "down_steps", kind = "d2h", from = "step_dev", to = "steps_host"}
p:stage{name = "save_sum", kind = "sink", from = "sum_host", to = "out/loop_sum.npy"}
p:stage{name = "save_steps", kind = "sink", from = "steps_host", to = "out/loop_steps.npy"}

return p
