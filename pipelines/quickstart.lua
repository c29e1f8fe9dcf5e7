-- quickstart.lua: pipelines/quickstart.yaml written in Lua. Same spec, so `pipectl plan` prints
-- the same plan and `pipectl run` writes the same out/quickstart.npy:
--
--   pipectl plan pipelines/quickstart.lua
--   pipectl run  pipelines/quickstart.lua
--
-- The script runs sandboxed and returns the pipeline. The builder keeps declaration order (Lua
-- tables do not), and each buffer and stage remembers the line of its call for error messages.
local p = pipectl.pipeline{name = "quickstart", run = {batches = 16, depth = 4, seed = 42}}

-- Four buffers of 262144 floats (1 MiB): x on the host and the device, y on the device and the host.
local n = 262144
for _, b in ipairs{{"x_host", "host"}, {"x_dev", "device"}, {"y_dev", "device"}, {"y_host", "host"}} do
  p:buffer(b[1], {where = b[2], dtype = "f32", shape = {n}})
end

p:stage{name = "gen", kind = "source", to = "x_host", generator = "random"}
p:stage{name = "up", kind = "h2d", from = "x_host", to = "x_dev"}
p:stage{name = "double", kind = "kernel", op = "scale", alpha = 2, reads = {"x_dev"}, writes = {"y_dev"}}
p:stage{name = "down", kind = "d2h", from = "y_dev", to = "y_host"}
p:stage{name = "save", kind = "sink", from = "y_host", to = "out/quickstart.npy"}

return p
