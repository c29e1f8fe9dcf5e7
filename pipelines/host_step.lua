-- host_step.lua: pipelines/host_step.yaml written in Lua (the same spec, so the same plan and the
-- same out/host_step.npy). A model step on the GPU (y = 2x), a host step in Lua (s = fftshift(y),
-- two bulk copies through Lua strings), a second device step (z = y + s). The shift stage keeps
-- its code as text so the spec matches the YAML one byte for byte.
local p = pipectl.pipeline{name = "host_step", run = {batches = 8, depth = 4, seed = 11}}

local n = 1048576
for _, b in ipairs{{"x_host", "host"}, {"x_dev", "device"}, {"y_dev", "device"}, {"y_host", "host"},
                   {"s_host", "host"}, {"s_dev", "device"}, {"z_dev", "device"}, {"z_host", "host"}} do
  p:buffer(b[1], {where = b[2], dtype = "f32", shape = {n}})
end

p:stage{name = "gen", kind = "source", to = "x_host", generator = "random"}
p:stage{name = "up", kind = "h2d", from = "x_host", to = "x_dev"}
p:stage{name = "model", kind = "kernel", op = "scale", alpha = 2, reads = {"x_dev"}, writes = {"y_dev"}}
p:stage{name = "down", kind = "d2h", from = "y_dev", to = "y_host"}
p:stage{name = "shift", kind = "lua", reads = {"y_host"}, writes = {"s_host"}, code = [[
function run(batch, opts, bufs)
  local y, s = bufs.y_host, bufs.s_host
  local n = #y
  local h = n // 2
  s:fromstring(y:tostring(n - h + 1, n), 1)
  s:fromstring(y:tostring(1, n - h), h + 1)
end
]]}
p:stage{name = "up2", kind = "h2d", from = "s_host", to = "s_dev"}
p:stage{name = "mix", kind = "kernel", op = "add", reads = {"y_dev", "s_dev"}, writes = {"z_dev"}}
p:stage{name = "down2", kind = "d2h", from = "z_dev", to = "z_host"}
p:stage{name = "save", kind = "sink", from = "z_host", to = "out/host_step.npy"}
p:stage{name = "check", kind = "sink", from = "s_host"}

return p
