-- user_kernel.lua: pipelines/user_kernel.yaml written in Lua (same spec, same plan). A typed
-- argument is a one-key table, {f32 = 3}, as {f32: 3} in YAML.
local p = pipectl.pipeline{name = "user_kernel", run = {batches = 8, depth = 3, seed = 7}}

local n = 262144
for _, b in ipairs{{"x_host", "host"}, {"x_dev", "device"}, {"y_dev", "device"}, {"y_host", "host"}} do
  p:buffer(b[1], {where = b[2], dtype = "f32", shape = {n}})
end

p:stage{name = "gen", kind = "source", to = "x_host", generator = "random"}
p:stage{name = "up", kind = "h2d", from = "x_host", to = "x_dev"}
p:stage{
  name = "triple", kind = "kernel",
  source = "kernels/scale.cu", ["function"] = "scale",
  grid = {"ceil(elements(x_dev) / 256)"}, block = {256},
  args = {"y_dev", "x_dev", {f32 = 3}, "elements(x_dev)"},
  reads = {"x_dev"}, writes = {"y_dev"},
  lua = "kernels/scale_ref.lua", host = "scale_ref",
}
p:stage{name = "down", kind = "d2h", from = "y_dev", to = "y_host"}
p:stage{name = "save", kind = "sink", from = "y_host", to = "out/user_kernel.npy"}

return p
