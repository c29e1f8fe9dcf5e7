# The Lua front end and lua stages through the real binary: each pipelines/X.lua with a YAML twin
# gives the same `pipectl plan` output and the same outputs when run (host executor); lua stages
# give the same outputs for 1 and 4 workers; a budget error at batch 3 exits 1 naming the stage,
# the batch and the line, with batches 0..2 kept; script errors exit 2 with script:line:1.
set -u
pipectl=$1 src=$2 build=$3
work=$build/lua_cli
rm -rf "$work"
mkdir -p "$work"
fail=0
say_fail() { echo "FAIL: $*"; fail=1; }

# Same plan and same outputs from the YAML and the Lua version of each example. Copies run in
# $work so outputs (relative to the pipeline file) stay out of the source tree.
twins=0
for lua in "$src"/pipelines/*.lua; do
    base=$(basename "$lua" .lua)
    yaml=$src/pipelines/$base.yaml
    [ -f "$yaml" ] || continue
    twins=$((twins + 1))
    for kind in yaml lua; do
        mkdir -p "$work/$kind"
        cp "$src/pipelines/$base.$kind" "$work/$kind/"
        # Files the examples name (user kernels and their Lua references, lua stages' scripts).
        for d in kernels scripts; do [ -d "$src/pipelines/$d" ] && cp -r "$src/pipelines/$d" "$work/$kind/"; done
        "$pipectl" plan "$work/$kind/$base.$kind" >"$work/$base.$kind.plan" 2>&1 ||
            say_fail "$base.$kind: pipectl plan failed: $(cat "$work/$base.$kind.plan")"
        # Sized for a GPU (GPT-2 124M): plans only; tests/e2e/test_generate_pipelines.sh runs the
        # generation twins on the tiny model and compares their outputs.
        grep -Eq '^(#|--) pipectl-test: skip-host' "$yaml" "$lua" && continue
        "$pipectl" run --executor host --quiet "$work/$kind/$base.$kind" >"$work/$base.$kind.run" 2>&1 ||
            say_fail "$base.$kind: pipectl run failed: $(cat "$work/$base.$kind.run")"
    done
    cmp -s "$work/$base.yaml.plan" "$work/$base.lua.plan" ||
        say_fail "$base: plans differ: $(diff "$work/$base.yaml.plan" "$work/$base.lua.plan" | head -20)"
    for out in "$work"/yaml/out/*; do
        [ -f "$out" ] || continue
        cmp -s "$out" "$work/lua/out/$(basename "$out")" || say_fail "$base: output $(basename "$out") differs"
    done
    rm -rf "$work/yaml" "$work/lua"
done
[ "$twins" -ge 2 ] || say_fail "expected at least 2 YAML/Lua twins in pipelines/, found $twins"

# Worker count does not change results.
for w in 1 4; do
    mkdir -p "$work/w$w"
    cp "$src/pipelines/lua_tokenize.lua" "$work/w$w/"
    "$pipectl" run --executor host --quiet --workers $w "$work/w$w/lua_tokenize.lua" >"$work/w$w.log" 2>&1 ||
        say_fail "lua_tokenize with $w workers: $(cat "$work/w$w.log")"
done
for f in lua_tokenize_ids.npy lua_tokenize_sum.npy; do
    cmp -s "$work/w1/out/$f" "$work/w4/out/$f" || say_fail "$f differs between 1 and 4 workers"
done

# A runaway stage: exit 1, the stage, the batch and the line; completed batches kept.
cat >"$work/spin.lua" <<'LUA'
local p = pipectl.pipeline{name = "spin", run = {batches = 6, depth = 1}}
p:buffer("a", {dtype = "i32", shape = {4}})
p:stage{name = "src", kind = "lua", writes = {"a"}, instructions = 10000, fn = function(batch, opts, bufs)
  if batch == 3 then
    while true do end
  end
  bufs.a:fill(batch)
end}
p:stage{name = "save", kind = "sink", from = "a", to = "out/spin.npy"}
return p
LUA
"$pipectl" run --executor host --quiet "$work/spin.lua" >"$work/spin.out" 2>"$work/spin.err"
rc=$?
[ $rc = 1 ] || say_fail "spin.lua: exit $rc, want 1"
grep -q "stage 'src', batch 3: spin.lua:5: instruction budget of 10000 exceeded (raise \`instructions\`)" "$work/spin.err" ||
    say_fail "spin.lua: message: $(cat "$work/spin.err")"
hdr=$(head -c 128 "$work/out/spin.npy" 2>/dev/null | grep -ao "'shape': ([0-9]*" | grep -o '[0-9]*$')
[ "$hdr" = 3 ] || say_fail "spin.lua: out/spin.npy holds '$hdr' batches, want 3"

# Script errors are bad input (exit 2) at script:line:1.
printf 'local p = pipectl.pipeline{}\n\np:stage{name = "a" kind = "lua"}\nreturn p\n' >"$work/syntax.lua"
"$pipectl" check "$work/syntax.lua" >/dev/null 2>"$work/syntax.err"
rc=$?
[ $rc = 2 ] || say_fail "syntax.lua: exit $rc, want 2"
grep -q "syntax.lua:3:1: error: '}' expected near 'kind'" "$work/syntax.err" || say_fail "syntax.lua: $(cat "$work/syntax.err")"
printf 'local p = pipectl.pipeline{}\nos.execute("touch %s/pwned")\nreturn p\n' "$work" >"$work/exec.lua"
"$pipectl" check "$work/exec.lua" >/dev/null 2>"$work/exec.err"
rc=$?
[ $rc = 2 ] || say_fail "exec.lua: exit $rc, want 2"
grep -q "exec.lua:2:1: error: os.execute is not available in the pipectl sandbox" "$work/exec.err" ||
    say_fail "exec.lua: $(cat "$work/exec.err")"
[ ! -e "$work/pwned" ] || say_fail "exec.lua ran a command"

exit $fail
