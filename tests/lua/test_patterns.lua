-- test_patterns: the sandbox's string.find, match, gmatch and gsub (lua/pl_lua_match.c) give what
-- Lua's own give, errors included, for a table of cases and for random patterns; and a pattern
-- that backtracks without end is stopped by the instruction budget, with its Lua line, in each of
-- the four. string.rep and table.concat past the memory cap fail with the cap's error.

-- The cases run twice: here with Lua's own string library, and in the sandbox; the sandbox must
-- print the same text.
local cases = [==[
local out = {}
local function put(...)
  local t = table.pack(...)
  for i = 1, t.n do t[i] = type(t[i]) == "string" and string.format("%q", t[i]) or tostring(t[i]) end
  out[#out + 1] = table.concat(t, ",", 1, t.n)
end
local function try(f, ...)
  local r = table.pack(pcall(f, ...))
  if not r[1] then put("error", (tostring(r[2]):gsub("^[^:]*:%d+: ", ""))) else put(table.unpack(r, 2, r.n)) end
end
local subjects = {"", "a", "hello world", "  x = 10, y = 20  ", "THE (quick) [brown] fox",
  "a.b.c", "aaa", "abcabcabc", "f(a(b)c)d", "x\0y\0z", "%d%%", "THE\tend\n", "123abc456",
  "über", "a,b,,c"}
local patterns = {"", "a", "^a", "a$", "^$", ".", ".-", ".*", "a*", "a+", "a-", "a?", "%a+",
  "%d+", "%s*", "%w+", "%p", "%u%l+", "%x+", "[%a_][%w_]*", "[^%s]+", "[a-c]+", "[]]", "[^]]",
  "[%]]", "[a%-z]", "(a)", "()", "(a*)", "(%a+)%s*=%s*(%d+)", "%((%a)%)", "%b()", "%b[]",
  "%f[%w]%w+", "%f[%W]", "(a)%1", "(%a)(%a)%2%1", "((a)(b))", "%.", "%%", "x%zy", "x\0y",
  "^(%s*)(.-)(%s*)$", "(h)(e)(l)(l)(o)", "[%d,]+", "[a-]", "[-a]", "%S+$", "()a()", "a-b",
  ".-b", "(.-)c", "[%w.]+", "^.-$", "%", "[a", "(", ")", "%1", "(()", "%f", "%fa", "%b",
  "%ba", "%g+", "%c", "[%c%s]+", "(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)(l)(m)(n)(o)(p)"}
for _, s in ipairs(subjects) do
  for _, p in ipairs(patterns) do
    try(string.find, s, p)
    try(string.find, s, p, 2)
    try(string.find, s, p, -3)
    try(string.find, s, p, 1, true)
    try(string.match, s, p)
    try(string.match, s, p, 3)
    try(string.gsub, s, p, "<%0>")
    try(string.gsub, s, p, "%1", 2)
    try(string.gsub, s, p, function(...) return select("#", ...) .. "" end)
    try(string.gsub, s, p, {a = "A", hello = false, [""] = "E"})
    try(function()
      local r = {}
      for a, b in string.gmatch(s, p) do r[#r + 1] = tostring(a) .. "|" .. tostring(b) end
      return table.concat(r, ";")
    end)
    try(function()
      local r = {}
      for a in string.gmatch(s, p, 3) do r[#r + 1] = tostring(a) end
      return table.concat(r, ";")
    end)
  end
end
try(string.find, "abc", "b", 10)
try(string.find, "abc", "", 4)
try(string.find, "abc", "", 5)
try(string.find, "abc", "c", -1)
try(string.find, "abc", "a", -100)
try(string.match, "  key = val ", "^%s*(%S+)%s*=%s*(%S+)")
try(string.gsub, "hello world", "o", "0", 0)
try(string.gsub, "hello world", "(o)", "%2")
try(string.gsub, "hello world", "o", "%")
try(string.gsub, "hello world", "o", "%x")
try(string.gsub, "hello", "", "-")
try(string.gsub, "hello", "l*", "-")
try(string.gsub, "hello", "()", "%1")
try(string.gsub, "hello", "l", function() return {} end)
try(string.gsub, "hello", "l", true)
try(string.gsub, "hello", "l", 7)
try(string.gsub, "abc", "%w", "%0%0")
try(string.gsub, "^^", "^^", "x")
try(("x"):rep(40) .. "y", "find", "x")
try(string.find, ("a"):rep(300), ("a?"):rep(300) .. ("a"):rep(300))
try(string.find, ("("):rep(40), ("%("):rep(33))
try(string.match, "abc", ("(a)"):rep(33))
try(string.find, nil, "a")
try(string.gsub, "a", "a")
try(string.gsub, "abc", "b", "[%0]", 1.5)
put(("hello"):find("l"), ("hello"):match("(h)(e)"), select(2, ("hello"):gsub("l", "L")))
return table.concat(out, "\n")
]==]
local want = assert(load(cases, "=cases", "t"))()

-- Random patterns over a small alphabet, on short subjects (a pattern may backtrack: they stay
-- short), against Lua's own functions.
math.randomseed(7)
local atoms = {"a", "b", ".", "%a", "%d", "[ab]", "[^a]", "(", ")", "()", "%1", "%b()", "%f[a]",
  "*", "+", "-", "?", "^", "$", "%", "[", "]", "1", "(a)", "%s", " "}
local rnd = {}
for i = 1, 400 do
  local p = {}
  for _ = 1, math.random(1, 6) do p[#p + 1] = atoms[math.random(#atoms)] end
  local s = {}
  for _ = 1, math.random(0, 12) do s[#s + 1] = ({"a", "b", "1", " ", "(", ")"})[math.random(6)] end
  rnd[i] = {table.concat(s), table.concat(p)}
end
local rcases = "local cases = {"
for _, c in ipairs(rnd) do rcases = rcases .. string.format("{%q, %q},", c[1], c[2]) end
rcases = rcases .. [==[}
local out = {}
for _, c in ipairs(cases) do
  for _, f in ipairs({string.find, string.match, function(s, p) return string.gsub(s, p, "<%0>") end,
                      function(s, p) local r = {} for x in string.gmatch(s, p) do r[#r + 1] = tostring(x) end return table.concat(r, ";") end}) do
    local r = table.pack(pcall(f, c[1], c[2]))
    for i = 1, r.n do r[i] = tostring(r[i]):gsub("^[^:]*:%d+: ", "") end
    out[#out + 1] = table.concat(r, ",", 1, r.n)
  end
end
return table.concat(out, "\n")
]==]
local rwant = assert(load(rcases, "=rcases", "t"))()

local function same(code, expect, what)
  local body = code:gsub("return table.concat%(out, \"\\n\"%)%s*$", "")
  local src = body .. string.format("\nlocal got = table.concat(out, \"\\n\")\nlocal want = %q\n", expect) .. [[
if got ~= want then
  local i = 1
  while got:sub(i, i) == want:sub(i, i) do i = i + 1 end
  local from = i - 60 > 1 and i - 60 or 1
  error(string.format("differs at byte %d: got %q, want %q", i, got:sub(from, i + 60), want:sub(from, i + 60)), 0)
end
]]
  local good, msg = test.sandbox(src, {instructions = 1e9})
  assert(good, what .. ": " .. tostring(msg))
end
same(cases, want, "cases")
same(rcases, rwant, "random patterns")

-- Backtracking without end: each function is stopped by the budget, at its line.
local function stops(code, line)
  local good, msg = test.sandbox(code, {instructions = 2e6})
  assert(not good, "not stopped: " .. code)
  assert(msg:find("sandbox.lua:" .. line .. ": instruction budget of 2000000 exceeded", 1, true), msg)
end
local s = 'local s = ("a"):rep(1e5)\n'
stops(s .. "while true do s:find('.-b') end", 2)
stops(s .. "\nlocal x = s:match('(.-)(.-)b')", 3)
stops(s .. "for x in s:gmatch('a-b') do end", 2)
stops(s .. "s = s:gsub('.*b', '')", 2)
stops(s .. "s:find(('a'):rep(5000) .. 'b', 1, true)", 2)
stops(s .. "s:gsub('(a*)*b', '')", 2)
-- pcall cannot catch it.
stops(s .. "for i = 1, 10 do pcall(string.find, s, '.-b') end", 2)
-- The work of a replacement function counts as its own instructions, the matching too.
stops(s .. "s = s:rep(10) s:gsub('a', function(x) return x end)", 2)
-- An ordinary search stays well inside the budget.
assert(test.sandbox(s .. "assert(select(2, s:gsub('a', 'b')) == 1e5)\nassert(s:find('a', 1, true) == 1)",
                    {instructions = 2e6}))

-- Long strings hit the memory cap, not the machine's memory.
local function capped(code)
  local good, msg = test.sandbox(code, {memory = 64 << 20})
  assert(not good, "not capped: " .. code)
  assert(msg:find("memory cap of 67108864 bytes exceeded", 1, true), msg)
end
capped("local s = string.rep('a', 1 << 30)")
capped("local s = string.rep('abc', 1 << 28, ',')")
capped("local t = {} for i = 1, 100 do t[i] = ('x'):rep(1 << 20) end local s = table.concat(t)")
capped("local p = ('x'):rep(1 << 20) local t = {} for i = 1, 200 do t[i] = p end local s = table.concat(t)")
capped("local s = ('x'):rep(1 << 20) s = s:rep(100)")
capped("local s = ('x'):rep(1 << 20) s = s:gsub('x', 'xx'):gsub('x', 'xx'):gsub('x', 'xx'):gsub('x', 'xx'):gsub('x', 'xx'):gsub('x', 'xx')")
capped("local s = string.format('%s%s', ('x'):rep(40 << 20), ('x'):rep(40 << 20))")
