-- test_stage: lua stages run per batch on worker states: sources, transforms and sinks over
-- views, `fn` stages from pipeline.lua, script/code stages from YAML, identical results for any
-- worker count, and errors that name the stage, the batch and the Lua line.
local dir = test.build_dir .. "/stage_tmp"
os.execute("mkdir -p '" .. dir .. "'")
local function write(name, text)
  local f = assert(io.open(dir .. "/" .. name, "w"))
  f:write(text)
  f:close()
  return dir .. "/" .. name
end
local function fails(path, want, opts)
  local r, err = test.run(path, opts)
  assert(not r, "expected an error from " .. path)
  assert(err:find(want, 1, true), "error was:\n  " .. err .. "\nwanted:\n  " .. want)
  return err
end

-- a Lua pipeline: a Lua source (text), a transform (token ids), a Lua sink (stats)
local tok = write("tok.lua", [[
local p = pipectl.pipeline{name = "tok", run = {batches = 12, seed = 7}}
p:buffer("text", {dtype = "u8", shape = {32}})
p:buffer("ids", {dtype = "i32", shape = {8}})
p:buffer("stats", {dtype = "f64", shape = {3}})
local words = {"alpha", "beta", "gamma"} -- an upvalue: made again in every worker state
p:stage{name = "prompt", kind = "lua", writes = {"text"}, fn = function(batch, opts, bufs)
  local s = string.format("batch %d of %d %s", batch, opts.batches, words[batch % 3 + 1])
  bufs.text:fromstring(s .. string.rep(" ", #bufs.text - #s))
end}
p:stage{name = "tok", kind = "lua", reads = {"text"}, writes = {"ids"}, fn = function(batch, opts, bufs)
  local i = 1
  for w in bufs.text:tostring():gmatch("%S+") do
    bufs.ids[i] = #w + 100 * math.random(0, 9) -- math.random: seeded per (run, stage, batch)
    i = i + 1
  end
  for j = i, #bufs.ids do bufs.ids[j] = 0 end
end}
p:stage{name = "stats", kind = "lua", reads = {"ids"}, writes = {"stats"}, args = "x",
        fn = function(batch, opts, bufs)
  assert(opts.name == "stats" and opts.args == "x" and opts.seed == 7 and opts.batches == 12)
  local ok, e = pcall(function() return bufs.text end) -- only declared buffers are visible
  assert(not ok and e:find("bufs.text: no such buffer (this stage can use: ids, stats)", 1, true), e)
  bufs.stats:fromtable({bufs.ids:sum(), batch, #bufs.ids})
end}
return p
]])
local r1 = assert(test.run(tok, {workers = 1}))
local r3 = assert(test.run(tok, {workers = 3}))
local r1b = assert(test.run(tok, {workers = 1}))
assert(#r1 == 12 and #r3 == 12)
for b = 1, 12 do
  for k, v in pairs(r1[b]) do
    assert(r3[b][k] == v, "batch " .. b - 1 .. " buffer " .. k .. " differs with 3 workers")
    assert(r1b[b][k] == v, "batch " .. b - 1 .. " buffer " .. k .. " differs between runs")
  end
end
assert(r1[1].text:find("^batch 0 of 12 alpha +$"), r1[1].text)
assert(r1[12].text:find("^batch 11 of 12 gamma"), r1[12].text)
local s1, s2, s3 = string.unpack("<ddd", r1[6].stats)
assert(s2 == 5 and s3 == 8 and s1 > 0)
local ids = {string.unpack("<i4i4i4i4i4i4", r1[2].ids)} -- "batch 1 of 12 beta"
assert(ids[1] % 100 == 5 and ids[2] % 100 == 1 and ids[5] % 100 == 4 and ids[6] == 0,
       table.concat(ids, ","))

-- YAML: script file, inline code, `function:`, and a function returned by the chunk
write("post.lua", [[
local scale = 2
function run(batch, opts, bufs)
  for i = 1, #bufs.y do bufs.y[i] = bufs.x[i] * scale + batch end
end
function other(batch, opts, bufs) bufs.z:fill(-1) end
]])
local yaml = write("post.yaml", [[
pipeline: post
run: {batches: 4}
buffers:
  x: {dtype: f32, shape: [4]}
  y: {dtype: f32, shape: [4]}
  z: {dtype: f32, shape: [4]}
  w: {dtype: i64, shape: [1]}
stages:
  - {name: gen, kind: lua, writes: [x], code: "function run(b, o, bufs) bufs.x:fromtable({1, 2, 3, b}) end"}
  - {name: post, kind: lua, script: post.lua, reads: [x], writes: [y]}
  - {name: other, kind: lua, script: post.lua, function: other, writes: [z]}
  - {name: ret, kind: lua, reads: [y], writes: [w], code: "return function(b, o, bufs) bufs.w[1] = math.floor(bufs.y:sum()) end"}
]])
local ry = assert(test.run(yaml, {workers = 2}))
local y = {string.unpack("<ffff", ry[4].y)}
assert(y[1] == 2 + 3 and y[4] == 3 * 2 + 3, table.concat(y, ","))
assert(string.unpack("<f", ry[1].z) == -1)
assert(string.unpack("<i8", ry[3].w) == (2 + 4 + 6 + 4) + 4 * 2)

-- errors name the stage, the batch and the line
local function stage_file(name, body, extra)
  return write(name, "local p = pipectl.pipeline{run = {batches = 5}}\n" ..
    "p:buffer('a', {dtype = 'i32', shape = {4}})\np:buffer('b', {dtype = 'i32', shape = {4}})\n" ..
    "p:stage{name = 'src', kind = 'lua', writes = {'a'}, fn = function(batch, opts, bufs) bufs.a:fill(batch) end}\n" ..
    "p:stage{name = 'bad', kind = 'lua', reads = {'a'}, writes = {'b'}" .. (extra or "") ..
    ", fn = function(batch, opts, bufs)\n" .. body .. "\nend}\nreturn p\n")
end
-- line 6 is the first line of the body
fails(stage_file("ro.lua", "  bufs.a[1] = 1"),
      "stage 'bad', batch 0: ro.lua:6: stage 'bad' cannot write buffer 'a': it is not in the stage's `writes`")
fails(stage_file("spin.lua", "  if batch == 3 then\n    while true do end\n  end", ", instructions = 10000"),
      "stage 'bad', batch 3: spin.lua:7: instruction budget of 10000 exceeded (raise `instructions`)")
fails(stage_file("bomb.lua", "  local t = {}\n  for i = 1, 1e9 do\n    t[i] = {}\n  end", ", memory = 1048576"),
      "stage 'bad', batch 0: bomb.lua:8: memory cap of 1048576 bytes exceeded (raise `memory`)")
fails(stage_file("big.lua", "  local s = ('x'):rep(1 << 30)", ", memory = 1048576"),
      "stage 'bad', batch 0: big.lua:6: memory cap of 1048576 bytes exceeded: an allocation of")
fails(stage_file("exec.lua", "  os.execute('touch /tmp/pwned')"),
      "stage 'bad', batch 0: exec.lua:6: os.execute is not available in the pipectl sandbox")
fails(stage_file("open.lua", "  local f = io.open('/etc/passwd')"),
      "stage 'bad', batch 0: open.lua:6: io.open is not available in the pipectl sandbox")
fails(stage_file("err.lua", "  if batch == 2 then error('no good: ' .. bufs.a[1]) end"),
      "stage 'bad', batch 2: err.lua:6: no good: 2")
fails(stage_file("typo.lua", "  local n = #bufs.vec"),
      "stage 'bad', batch 0: typo.lua:6: bufs.vec: no such buffer (this stage can use: a, b)")
fails(stage_file("typo2.lua", "  if batch == 1 then bufs.b:fill(bufs[1]) end"),
      "stage 'bad', batch 1: typo2.lua:6: bufs is indexed by buffer name (this stage can use: a, b), not by number")
local tb = fails(stage_file("tb.lua", "  local x = nil\n  return x.y"), "stage 'bad', batch 0: tb.lua:7: attempt to index a nil value")
assert(tb:find("stack traceback:", 1, true), "a traceback follows the message")
fails(stage_file("keep.lua", "  if batch == 0 then keep = bufs.b end\n  if batch == 1 then return keep[1] end"),
      "stage 'bad', batch 1: keep.lua:7: the view of buffer 'b' was used after its batch ended", {workers = 1})
fails(stage_file("keep2.lua", "  if batch == 0 then keep = bufs.b end\n  if batch == 1 then keep:fill(1) end"),
      "stage 'bad', batch 1: keep2.lua:7: the view of buffer 'b' was used after its batch ended", {workers = 1})

-- check-time errors (bind/validate), at the YAML position
local function yaml_stage(name, stage)
  return write(name, "buffers:\n  a: {dtype: i32, shape: [4]}\n  d: {where: device, dtype: i32, shape: [4]}\n" ..
    "stages:\n  - " .. stage .. "\n")
end
fails(yaml_stage("syn.yaml", "{name: s, kind: lua, writes: [a], code: 'function run( end'}"),
      "syn.yaml:5:45: error: stage 's': code:1: <name> or '...' expected near 'end'")
fails(yaml_stage("both.yaml", "{name: s, kind: lua, writes: [a], code: 'x = 1', script: post.lua}"),
      "error: stage 's': give either `script` or `code`, not both")
fails(yaml_stage("none.yaml", "{name: s, kind: lua, writes: [a]}"),
      "stage 's': a lua stage needs `script: file.lua` or `code:")
fails(yaml_stage("missing.yaml", "{name: s, kind: lua, writes: [a], script: nope.lua}"),
      "missing.yaml:5:47: error: stage 's': cannot read '" .. dir .. "/nope.lua': No such file or directory")
fails(yaml_stage("nofn.yaml", "{name: s, kind: lua, writes: [a], code: 'x = 1'}"),
      "stage 's': loading the script: code defines no function 'run' for the stage")
fails(yaml_stage("nofn2.yaml", "{name: s, kind: lua, writes: [a], code: 'x = 1', function: go}"),
      "stage 's': loading the script: code defines no function 'go' for the stage: define `function go(batch, opts, bufs) ... end`")
fails(yaml_stage("dev.yaml", "{name: s, kind: lua, reads: [d], code: 'function run() end'}"),
      "dev.yaml:5:34: error: stage 's': buffer 'd' is on the device; a lua stage sees only host buffers")
fails(yaml_stage("mem.yaml", "{name: s, kind: lua, writes: [a], code: 'function run() end', memory: 1000}"),
      "stage 's': 'memory' is 1000; it must be between 262144 and")
fails(yaml_stage("load.yaml", "{name: s, kind: lua, writes: [a], code: 'while true do end', instructions: 5000}"),
      "stage 's': loading the script: code:1: instruction budget of 5000 exceeded (raise `instructions`)")
write("bin.lua", "\27Lua\84\0\25\147\r\n\26\n")
fails(yaml_stage("bin.yaml", "{name: s, kind: lua, writes: [a], script: bin.lua}"),
      "stage 's': bin.lua: binary (precompiled) chunks are not allowed; give Lua source text")

-- bytecode loaded at run time: the stage, the batch and the line
fails(stage_file("bc.lua", "  if batch == 1 then\n    local f = load('\\27Lua\\84\\0')\n  end"),
      "stage 'bad', batch 1: bc.lua:7: load: binary (precompiled) chunks are not allowed in the pipectl sandbox")
