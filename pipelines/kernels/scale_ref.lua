-- scale_ref.lua: the host reference of kernels/scale.cu, run by the host executor (CI, laptops)
-- and compared with the GPU's results by the GPU tests. opts.args holds the stage's resolved
-- args: in order, buffer names and scalar values.
function scale_ref(batch, opts, bufs)
  local y, x, alpha = bufs[opts.args[1]], bufs[opts.args[2]], opts.args[3]
  for i = 1, #x do
    y[i] = alpha * x[i]
  end
end
