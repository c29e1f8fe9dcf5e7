-- test_front: the pipeline.lua front end: builder and declarative forms give the spec the YAML
-- front end gives, with positions (script:line:1) and errors that carry the script and the line.
local function load(text, pos) return test.load_lua("p.lua", text, pos) end
local function fails(text, want)
  local dump, err = load(text)
  assert(not dump, "expected an error, got a spec:\n" .. tostring(dump))
  assert(err == want or err:find(want, 1, true), "error was:\n  " .. err .. "\nwanted:\n  " .. want)
end

local builder = [[
local p = pipectl.pipeline{name = "quickstart", run = {batches = 8, depth = 2, seed = 42}}
p:buffer("x_host", {where = "host", dtype = "f32", shape = {1024}})
p:buffer("x_dev", {where = "device", shape = {1024}})
p:buffer{name = "w", where = "device", dtype = "f32", shape = {16, 64}, persistent = true, init = "random"}
p:stage{name = "gen", kind = "source", to = "x_host", generator = "random", min = -1, max = 1.5}
p:stage{name = "up", kind = "h2d", from = "x_host", to = "x_dev"}
p:stage{name = "double", kind = "kernel", op = "scale", alpha = 0.1, reads = {"x_dev"}, writes = {"y_dev"},
        after = {"up"}}
return p
]]
local want = [[
pipeline quickstart
run batches=8 depth=2 device=0 seed=42
buffer x_host where=host dtype=f32 shape=1024 persistent=0 init=0 file=- @p.lua:2:1
buffer x_dev where=device dtype=f32 shape=1024 persistent=0 init=0 file=- @p.lua:3:1
buffer w where=device dtype=f32 shape=16x64 persistent=1 init=2 file=- @p.lua:4:1
stage gen kind=source @p.lua:5:1 to=x_host generator=random min=-1 max=1.5
stage up kind=h2d @p.lua:6:1 from=x_host to=x_dev
stage double kind=kernel @p.lua:7:1 reads=[x_dev] writes=[y_dev] after=[up] op=scale alpha=0.1
]]
local got = assert(load(builder, true))
assert(got == want, "got:\n" .. got)

-- declarative: arrays keep the order; positions come from pipectl.buffer/stage marks, else
-- from the pipectl.pipeline call
local decl = [[
return pipectl.pipeline{
  name = "quickstart", run = {batches = 8, depth = 2, seed = 42},
  buffers = {
    {name = "x_host", where = "host", dtype = "f32", shape = {1024}},
    pipectl.buffer{name = "x_dev", where = "device", shape = {1024}},
    {name = "w", where = "device", dtype = "f32", shape = {16, 64}, persistent = true, init = "random"},
  },
  stages = {
    {name = "gen", kind = "source", to = "x_host", generator = "random", min = -1, max = 1.5},
    pipectl.stage{name = "up", kind = "h2d", from = "x_host", to = "x_dev"},
    {name = "double", kind = "kernel", op = "scale", alpha = 0.1, reads = {"x_dev"},
     writes = {"y_dev"}, after = {"up"}},
  },
}
]]
local got2 = assert(load(decl, true))
local want2 = want:gsub("@p.lua:%d+:1", {["@p.lua:2:1"] = "@p.lua:1:1", ["@p.lua:3:1"] = "@p.lua:5:1",
  ["@p.lua:4:1"] = "@p.lua:1:1", ["@p.lua:5:1"] = "@p.lua:1:1", ["@p.lua:6:1"] = "@p.lua:10:1",
  ["@p.lua:7:1"] = "@p.lua:1:1"})
assert(got2 == want2, "got:\n" .. got2 .. "\nwant:\n" .. want2)
-- a bare table works too
assert(load("return {stages = {{name = 'a', kind = 'lua', code = 'function run() end'}}}"))

-- generated stages: loops and functions
local gen = assert(load([[
local p = pipectl.pipeline{}
for i = 1, 3 do
  p:buffer("b" .. i, {shape = {i * 8}, dtype = "i32"})
  p:stage{name = "s" .. i, kind = "lua", code = "function run() end", writes = {"b" .. i}}
end
return p
]]))
assert(gen:find("buffer b3 where=host dtype=i32 shape=24", 1, true))
assert(select(2, gen:gsub("\nstage s%d kind=lua writes=%[b%d%] code=function run%(%) end", "")) == 3, gen)
assert(gen:find("^pipeline p\n"), "default name is the file's base name")

-- option text: integers %lld, floats the shortest exact form, booleans, lists; options in the
-- kind's key order whatever order Lua's hash gives
local opts = assert(load([[
return {stages = {{name = "k", kind = "lua", args = "a=1", memory = 1048576, instructions = 2.0,
  code = "function run() end", zeta = 1e-300, beta = 0.1, alpha = 1 / 3, grid = {1, 2.5, "x", false},
  flag = true, reads = "x"}}}
]]))
local line = opts:match("stage k[^\n]*")
assert(line == "stage k kind=lua reads=[x] code=function run() end instructions=2 memory=1048576 " ..
       "args=a=1 alpha=0.3333333333333333 beta=0.1 flag=true grid=[1,2.5,x,false] zeta=1e-300", line)

-- `fn` stages: the function stays in the script; the spec points the stage at the script itself
local fn = assert(load([[
local p = pipectl.pipeline{}
p:buffer("t", {shape = {4}, dtype = "i32"})
p:stage{name = "tok", kind = "lua", writes = {"t"}, instructions = 1000, fn = function(b, o, bufs) end}
return p
]]))
assert(fn:find("stage tok kind=lua writes=[t] script=p.lua instructions=1000", 1, true), fn)

-- errors: the script and the line, column 1
fails("local p = pipectl.pipeline{}\n\np:stage{name = 'a', kind = 'h2x', from = 'x', to = 'y'}\nreturn p",
      "p.lua:3:1: error: stage 'a': 'kind' is 'h2x' (did you mean 'h2d'?); it must be one of: source, search, h2d, kernel, d2h, lua, sink, gpt2, sample, tokenize, detokenize")
fails("local p = pipectl.pipeline{}\np:buffer('x', {shape = {4}, dtyp = 'f32'})\nreturn p",
      "p.lua:2:1: error: buffer 'x': unknown key 'dtyp' (did you mean 'dtype'?)")
fails("local p = pipectl.pipeline{}\np:buffer('x', {shape = {0}})\nreturn p",
      "p.lua:2:1: error: buffer 'x': shape dimension 1 must be a positive integer, got '0'")
fails("local p = pipectl.pipeline{}\np:buffer('x', {dtype = 'f32'})\nreturn p",
      "p.lua:2:1: error: buffer 'x': no 'shape'; add shape: [N] (a list of positive integers)")
fails("local p = pipectl.pipeline{}\np:buffer('x', {shape = {4}, where = 'gpu'})\nreturn p",
      "p.lua:2:1: error: buffer 'x': 'where' is 'gpu'; it must be one of: host, device")
fails("local p = pipectl.pipeline{}\np:buffer('x', {shape = {4}, dtype = 'f33'})\nreturn p",
      "p.lua:2:1: error: buffer 'x': 'dtype' is 'f33' (did you mean 'f32'?)")
fails("local p = pipectl.pipeline{}\np:buffer('x', {shape = {1 << 40, 1 << 40}})\nreturn p",
      "p.lua:2:1: error: buffer 'x': the shape has more than 2^63-1 elements")
fails("local p = pipectl.pipeline{}\np:buffer('x', {shape = {4}, file = 'a.npy'})\nreturn p",
      "p.lua:2:1: error: buffer 'x': 'file' is only used with init: file; add init: file or remove 'file'")
fails("local p = pipectl.pipeline{run = {batches = 0}}\nreturn p",
      "p.lua:1:1: error: run: 'batches' is 0; it must be between 1 and")
fails("return pipectl.pipeline{run = {depth = 2.5}}",
      "p.lua:1:1: error: run: 'depth' must be a whole number or 'auto', got '2.5'")
fails("return pipectl.pipeline{runs = {}}", "p.lua:1:1: error: unknown key 'runs' (did you mean 'run'?)")
fails("return pipectl.pipeline{buffers = {x = {shape = {4}}}}",
      "p.lua:1:1: error: 'buffers' must be an array like {{name = 'x', ...}, {name = 'y', ...}}: Lua tables do not keep the order")
fails("local p = pipectl.pipeline{}\np:stage{kind = 'h2d'}\nreturn p",
      "p.lua:2:1: error: stage 1 has no 'name'")
fails("local p = pipectl.pipeline{}\np:stage{name = 'a'}\nreturn p",
      "p.lua:2:1: error: stage 'a' has no 'kind'")
fails("local p = pipectl.pipeline{}\np:stage{name = 'a', kind = 'h2d', from = {x = 1}}\nreturn p",
      "p.lua:2:1: error: stage 'a': 'from' is a mapping; stage options are single values or lists of values")
fails("local p = pipectl.pipeline{}\np:stage{name = 'a', kind = 'h2d', fn = print}\nreturn p",
      "p.lua:2:1: error: stage 'a': 'fn' is only for lua stages (this one is h2d)")
fails("local p = pipectl.pipeline{}\np:stage{name = 'a', kind = 'lua', fn = print, code = 'x'}\nreturn p",
      "p.lua:2:1: error: stage 'a': give either 'fn' or 'script'/'code', not both")
fails("local p = pipectl.pipeline{}\np:stage{name = 'a', kind = 'lua', reads = {{}}}\nreturn p",
      "p.lua:2:1: error: stage 'a': each item of 'reads' must be a name, not a list")
fails("local p = pipectl.pipeline{}\nreturn p", "p.lua:1:1: error: the pipeline has no 'stages:'")
fails("local p = pipectl.pipeline{}\np.buffer('x', {})\nreturn p",
      "p.lua:2:1: error: buffer must be called on a pipeline with a colon")
-- one checker for YAML and Lua: the same messages (in YAML's notation), Lua's extras kept
local one = assert(load("local p = pipectl.pipeline{}\np:buffer('x', {shape = 8})\n" ..
  "p:stage{name = 'a', kind = 'lua', code = 'x', reads = 'x'}\nreturn p"))
assert(one:find("buffer x where=host dtype=f32 shape=8 ", 1, true), one)
assert(one:find("stage a kind=lua reads=[x] code=x", 1, true), one)
fails("return pipectl.pipeline{run = 5}",
      "p.lua:1:1: error: 'run' must be a mapping like {batches: 16, depth: 3}, not a single value")
fails("return pipectl.pipeline{name = {}}",
      "p.lua:1:1: error: 'name' must be a single value like name: my_pipeline, not a list")
fails("return pipectl.pipeline{run = {batches = '0x10'}}",
      "p.lua:1:1: error: run: 'batches' must be a whole number or 'all', got '0x10'")
fails("local p = pipectl.pipeline{}\np:stage{name = 'a', kind = 'lua', code = 'x', args = print}\nreturn p",
      "p.lua:2:1: error: stage 'a': 'args' is a function; only `fn` of a lua stage takes a function")
fails("local p = pipectl.pipeline{}\nlocal t = {}\nt.t = t\np:stage{name = 'a', kind = 'lua', code = 'x', args = t}\nreturn p",
      "p.lua:4:1: error: tables nested deeper than 16 levels (PL_MAX_NESTING), or a table that contains itself")
fails("local p = pipectl.pipeline{}\np:stage{name = 'a', kind = 'h2d', 'x', from = 'y'}\nreturn p",
      "p.lua:2:1: error: a table mixes unnamed values (array elements) with named keys")
fails("local p = pipectl.pipeline{}\np:stage{name = 'a', kind = 'lua', fn = print, script = 'x.lua'}\nreturn p",
      "p.lua:2:1: error: stage 'a': give either 'fn' or 'script'/'code', not both")
fails("local p = pipectl.pipeline{}\np:stage{name = 'a', kind = 'lua', fn = 5}\nreturn p",
      "p.lua:2:1: error: stage 'a': 'fn' must be a Lua function (pipeline.lua only; in YAML give script: or code:), not a single value")
fails("local p = pipectl.pipeline{}\np:buffer('x', {shape = {4}, dtype = 'f32', persistent = 'yes'})\nreturn p",
      "p.lua:2:1: error: buffer 'x': 'persistent' is 'yes'; it must be one of: false, true")
-- loops: the YAML front end's messages, at the line of the stage table
fails("local p = pipectl.pipeline{}\np:stage{name = 'd', loop = {max = 10, count = 12}, stages = {{name = 'a', kind = 'lua', code = 'function run() end'}}}\nreturn p",
      "p.lua:2:1: error: loop 'd': 'count' is 12, more than 'max' (10); give a count from 1 to max, or raise max")
fails("local p = pipectl.pipeline{}\np:stage{name = 'd', loop = {count = 2}, stages = {{name = 'a', kind = 'lua', code = 'function run() end'}}}\nreturn p",
      "p.lua:2:1: error: loop 'd' has no 'max'; add max: N, the most iterations a batch may run (a loop always has a bound)")
fails("local p = pipectl.pipeline{}\np:stage{name = 'd', loop = {max = 2}, stages = {\n  pipectl.stage{name = 'e', loop = {max = 2}, stages = {}}}}\nreturn p",
      "p.lua:3:1: error: loop 'e' is inside the body of loop 'd'; a loop's body cannot hold a loop: move 'e' before or after 'd', or merge the two bodies")
-- syntax and runtime errors keep Lua's line
fails("local p = pipectl.pipeline{}\n\np:stage{name = 'a' kind = 'h2d'}\nreturn p",
      "p.lua:3:1: error: '}' expected near 'kind'")
fails("local p = pipectl.pipeline{}\nlocal x = nil\nx.y = 1\nreturn p",
      "p.lua:3:1: error: attempt to index a nil value (local 'x')")
fails("error('custom')", "p.lua:1:1: error: custom")
fails("return 42", "p.lua: error: the script must return its pipeline")
-- the sandbox and its limits apply to pipeline scripts too
fails("local p = pipectl.pipeline{}\nos.execute('rm -rf /')\nreturn p",
      "p.lua:2:1: error: os.execute is not available in the pipectl sandbox")
fails("\27Lua\84\0", "p.lua: error: p.lua: binary (precompiled) chunks are not allowed")

-- the examples: each pipelines/X.lua with a YAML twin gives the identical spec (positions aside)
local twins = 0
for _, base in ipairs{"quickstart", "lua_postprocess", "loop"} do
  local y, yerr = test.load_file(test.source_dir .. "/pipelines/" .. base .. ".yaml")
  local l, lerr = test.load_file(test.source_dir .. "/pipelines/" .. base .. ".lua")
  assert(y, yerr)
  assert(l, lerr)
  assert(y == l, base .. ": specs differ\nyaml:\n" .. y .. "\nlua:\n" .. l)
  twins = twins + 1
end
assert(twins == 3)
