-- test_view: buffer views: 1-based element access, length, methods, dtypes, errors.
local function raises(pattern, f, ...)
  local ok, msg = pcall(f, ...)
  assert(not ok, "expected an error matching " .. pattern)
  assert(tostring(msg):find(pattern, 1, true), "error was: " .. tostring(msg))
end

-- f32, 1-based, flat
local v = test.view("f32", {2, 3}, true, "x")
assert(#v == 6)
assert(v[1] == 0 and v[6] == 0)
v[1] = 1.5
v[6] = -2
assert(v[1] == 1.5 and v[6] == -2)
assert(math.type(v[1]) == "float")
assert(v:dtype() == "f32" and v:name() == "x")
local s = v:shape()
assert(#s == 2 and s[1] == 2 and s[2] == 3)
assert(tostring(v) == "pipectl.view<f32>[2, 3] 'x'", tostring(v))
raises("index 0 is out of range 1..6", function() return v[0] end)
raises("index 7 is out of range 1..6", function() v[7] = 1 end)
raises("an index must be an integer, got 1.5", function() return v[1.5] end)
raises("a view has no method 'nope'", function() return v.nope end)
raises("elements are numbers, got string", function() v[1] = "a" end)

-- get/set with one index per dimension (row-major)
v:set(2, 1, 7)
assert(v[4] == 7 and v:get(2, 1) == 7)
raises("index 3 of dimension 1 is out of range 1..2", function() return v:get(3, 1) end)

-- fill, sum, totable, fromtable
v:fill(0.25)
assert(v:sum() == 1.5)
assert(v:sum(2, 3) == 0.5)
v:fromtable({1, 2, 3})
local t = v:totable()
assert(#t == 6 and t[1] == 1 and t[3] == 3 and t[4] == 0.25)
local t2 = v:totable(2, 3)
assert(#t2 == 2 and t2[1] == 2 and t2[2] == 3)
assert(v:fromtable({9}, 6) == 1 and v[6] == 9)
raises("do not fit", function() v:fromtable({1, 2}, 6) end)

-- tostring / fromstring: raw bytes, little-endian f32
local bytes = v:tostring()
assert(#bytes == 24)
assert(string.unpack("<f", bytes, 1) == 1)
local w = test.view("f32", {6}, true, "w")
assert(w:fromstring(bytes) == 6)
for i = 1, 6 do assert(w[i] == v[i]) end
assert(w:fromstring(string.pack("<ff", 5, 6), 2) == 2 and w[2] == 5 and w[3] == 6)
raises("not a whole number of f32 elements", function() w:fromstring("abc") end)
assert(#v:tostring(2, 3) == 8)

-- copy between views, with dtype conversion
local i32 = test.view("i32", {6}, true, "ids")
w:fromtable({1, 5, 6, 4, 5, 9})
i32:copy(w)
assert(i32[1] == 1 and math.type(i32[1]) == "integer")
w[1] = 0.5
raises("is not a whole number", function() i32:copy(w) end)
local z = test.view("f64", {6}, true, "z")
z:copy(i32)
assert(z[2] == 5.0)
raises("they must match", function() z:copy(test.view("f64", {5}, true, "q")) end)

-- integer dtypes: range checks
local u8 = test.view("u8", {4}, true, "bytes")
u8[1] = 255
raises("256 does not fit in a u8 element (0..255)", function() u8[2] = 256 end)
raises("-1 does not fit in a u8 element", function() u8[2] = -1 end)
raises("elements of a u8 buffer are integers, got 1.5", function() u8[2] = 1.5 end)
u8[2] = 2.0 -- a float with an integral value is fine
assert(u8[2] == 2)
assert(u8:sum() == 257)
assert(u8:tostring() == "\255\2\0\0")
u8:fromstring("abcd")
assert(u8[1] == 97 and u8[4] == 100)
i32[1] = 2147483647
raises("does not fit in an i32 element", function() i32[1] = 2147483648 end)
local i64 = test.view("i64", {2}, true, "big")
i64[1] = math.maxinteger
assert(i64[1] == math.maxinteger)

-- f16 and bf16 round to nearest even
local h = test.view("f16", {4}, true, "h")
h[1] = 1.0; h[2] = 65504; h[3] = 1e6; h[4] = 0.1
assert(h[1] == 1.0 and h[2] == 65504 and h[3] == math.huge)
assert(math.abs(h[4] - 0.1) < 1e-4 and h[4] ~= 0.1)
local bf = test.view("bf16", {2}, true, "bf")
bf[1] = 3.0; bf[2] = 1 / 3
assert(bf[1] == 3.0 and math.abs(bf[2] - 1 / 3) < 2e-3)

-- read-only views name the stage and the buffer
local ro = test.view("f32", {2}, false, "inp")
assert(ro[1] == 0)
raises("stage 'test' cannot write buffer 'inp': it is not in the stage's `writes`",
       function() ro[1] = 1 end)
raises("cannot write buffer 'inp'", function() ro:fill(1) end)
raises("cannot write buffer 'inp'", function() ro:fromstring("\0\0\0\0") end)
raises("cannot write buffer 'inp'", function() ro:copy(ro) end)
assert(tostring(ro):find("(read-only)", 1, true))

-- the metatable is locked
assert(getmetatable(v) == "pipectl.view")
