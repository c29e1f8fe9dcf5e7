-- test_sandbox: the sandbox every pipectl Lua state runs in: allowed and denied libraries, text
-- chunks only, the instruction budget and the memory cap, each error with its Lua line.
local function ok(code, opts)
  local good, msg = test.sandbox(code, opts)
  assert(good, "expected success, got: " .. tostring(msg))
end
local function fails(code, want, opts)
  local good, msg = test.sandbox(code, opts)
  assert(not good, "expected an error for: " .. code)
  assert(msg:find(want, 1, true), "error was: " .. msg .. "\nwanted: " .. want)
  return msg
end

-- what is there
ok([[
assert(string.format("%d", 3) == "3" and table.concat({1, 2}, ",") == "1,2")
assert(math.floor(2.5) == 2 and utf8.char(72) == "H")
assert(type(os.clock()) == "number" and type(os.time()) == "number")
assert(select("#", pcall(error, "x")) == 2)
local f = assert(load("return 1 + 1"))
assert(f() == 2)
assert(require("pipectl") == pipectl and type(pipectl.pipeline) == "function")
local t = setmetatable({}, {__index = function() return 7 end})
assert(t.x == 7)
]])

-- what is not, each with a clear error and the line
fails("local x = 1\nos.execute('true')",
      "sandbox.lua:2: os.execute is not available in the pipectl sandbox (only os.clock and os.time are)")
fails("\n\nlocal f = io.open('/etc/passwd')",
      "sandbox.lua:3: io.open is not available in the pipectl sandbox")
fails("os.exit(1)", "sandbox.lua:1: os.exit is not available")
fails("os.getenv('HOME')", "os.getenv is not available")
fails("debug.sethook()", "sandbox.lua:1: debug.sethook is not available")
fails("require('socket')", "sandbox.lua:1: require 'socket': modules cannot be loaded")
fails("dofile('/etc/passwd')", "sandbox.lua:1: dofile is not available in the pipectl sandbox")
fails("loadfile('/etc/passwd')", "loadfile is not available")
fails("string.dump(print)", "string.dump is not available")
fails("package.loadlib('x', 'y')", "package.loadlib is not available")
fails("coroutine.wrap(print)", "coroutine.wrap is not available")
fails("collectgarbage(); local t = {}; print(t.x.y)", "sandbox.lua:1: attempt to index a nil value")

-- bytecode: never loaded, whatever mode is asked for
fails("load('\\27Lua\\84\\0', 'x', 'b')",
      "sandbox.lua:1: load: binary (precompiled) chunks are not allowed in the pipectl sandbox")
fails("local f = load(function() return '\\27Lua' end, 'x', 'bt')",
      "sandbox.lua:1: load: binary (precompiled) chunks are not allowed")
fails("\27Lua\84\0\25\147", "binary (precompiled) chunks are not allowed")

-- the instruction budget: exact, with the line of the loop, uncatchable
fails("local n = 0\nwhile true do\n  n = n + 1\nend",
      "instruction budget of 100000 exceeded (raise `instructions`)", {instructions = 100000})
local m = fails("local n = 0\nwhile true do\n  n = n + 1\nend", "sandbox.lua:", {instructions = 100000})
assert(m:match("^sandbox.lua:[34]: instruction budget"), m)
fails("for i = 1, 10 do pcall(function() while true do end end) end\nx = 1",
      "sandbox.lua:1: instruction budget of 50000 exceeded", {instructions = 50000})
fails("xpcall(function() while true do end end, function() while true do end end)",
      "instruction budget of 50000 exceeded", {instructions = 50000})
fails("while true do pcall(error) end", "instruction budget", {instructions = 50000})
fails("local f = load('while true do end')\nf()", "instruction budget of 20000 exceeded",
      {instructions = 20000})
-- the budget counts every instruction: a loop of 1000 fits in 100000, 10^6 does not
ok("local s = 0 for i = 1, 1000 do s = s + i end", {instructions = 100000})
fails("local s = 0 for i = 1, 1000000 do s = s + i end", "instruction budget", {instructions = 100000})
-- an exact budget: this chunk needs a known number of instructions; one less fails
local need
for n = 1, 200 do
  if test.sandbox("local a = 1 for i = 1, 10 do a = a + i end", {instructions = n}) then need = n break end
end
assert(need and need > 10, "no budget up to 200 was enough")
assert(not test.sandbox("local a = 1 for i = 1, 10 do a = a + i end", {instructions = need - 1}))

-- the memory cap: growth in a loop (line of the loop body), one huge string, doubling
fails("local t = {}\nfor i = 1, 1e9 do\n  t[i] = {i}\nend",
      "sandbox.lua:3: memory cap of 4194304 bytes exceeded (raise `memory`)", {memory = 4194304})
fails("local s = 'x'\nlocal t = {}\nwhile true do\n  t[#t + 1] = s:rep(1000)\nend",
      "sandbox.lua:4: memory cap of 4194304 bytes exceeded", {memory = 4194304})
fails("local a = 1\nlocal s = string.rep('x', 1 << 30)",
      "sandbox.lua:2: memory cap of 4194304 bytes exceeded: an allocation of", {memory = 4194304})
fails("local s = 'xxxxxxxx'\nwhile true do\n  s = s .. s\nend", "memory cap of 4194304 bytes exceeded",
      {memory = 4194304})
-- uncatchable
fails("local ok = pcall(string.rep, 'x', 1 << 30)\nprint('caught', ok)",
      "memory cap of 4194304 bytes exceeded", {memory = 4194304})
fails("local t = {}\npcall(function() while true do t[#t + 1] = {} end end)\nx = 1",
      "memory cap of 4194304 bytes exceeded", {memory = 4194304})
-- garbage does not count against the cap
ok("for i = 1, 200 do local s = string.rep('x', 100000) end", {memory = 4194304})
-- after a failure the state is usable and small again
local good, msg, used = test.sandbox("local t = {} for i = 1, 1e9 do t[i] = i end", {memory = 2 * 1048576})
assert(not good and used < 2 * 1048576, "used " .. tostring(used))

-- __gc finalizers would run outside the budget: refused
fails("setmetatable({}, {__gc = true})", "sandbox.lua:1: __gc metamethods are not allowed")
ok("local mt = {} local t = setmetatable({}, mt) mt.__gc = function() while true do end end t = nil collectgarbage()",
   {instructions = 100000})
-- an xpcall handler is not run for budget errors (Lua would run it with hooks off)
fails("local ran = false\nxpcall(function() while true do end end, function(m) ran = true return m end)",
      "instruction budget", {instructions = 50000})
-- but it is for ordinary errors, and may itself be stopped
ok("local got\nxpcall(function() error('boom') end, function(m) got = m end)\nassert(got:find('boom'))")
