# `pipectl schema` is a valid JSON Schema (draft 2020-12) that accepts every example in pipelines/
# and rejects what `pipectl check` rejects at the key level (unknown keys, a kind's keys on another
# kind, bad enum values). The JSON check needs python3; the schema checks need python3-jsonschema
# and python3-yaml (.ci/setup installs them) and are skipped with a note when they are missing.
set -u
pipectl=$1 src=$2 build=$3
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3) || { echo "SKIP: no python3"; exit 77; }
work=$build/schema
rm -rf "$work"
mkdir -p "$work"
"$pipectl" schema >"$work/pipeline.schema.json" || { echo "FAIL: pipectl schema failed"; exit 1; }
"$py" -m json.tool "$work/pipeline.schema.json" >/dev/null || { echo "FAIL: not valid JSON"; exit 1; }
echo "pipectl schema: valid JSON ($(wc -c <"$work/pipeline.schema.json") bytes)"
if ! "$py" -c 'import jsonschema, yaml' 2>/dev/null; then
    echo "note: python3-jsonschema or python3-yaml missing: examples not validated against the schema"
    exit 0
fi

# Bad files, each with one key-level mistake the schema must catch as pipectl check does.
bad=$work/bad
mkdir -p "$bad"
head='buffers: {x: {shape: [4]}, xd: {where: device, shape: [4]}}'
printf '%s\nstages:\n  - {name: up, kind: h2d, from: x, to: xd, op: scale}\n' "$head" >"$bad/kind_key_on_other_kind.yaml"
printf '%s\nstages:\n  - {name: up, kind: h2d, form: x, to: xd}\n' "$head" >"$bad/kind_key_typo.yaml"
printf '%s\nstages:\n  - {name: s, kind: sink, from: x, format: npz}\n' "$head" >"$bad/kind_enum.yaml"
printf '%s\nstages:\n  - {name: s, kind: sink, from: x, checksum: maybe}\n' "$head" >"$bad/kind_bool.yaml"
printf '%s\nstages:\n  - {name: k, kind: kernel, op: fill, value: lots, writes: [xd]}\n' "$head" >"$bad/kind_number.yaml"
printf '%s\nstages:\n  - {name: up, kind: h2d, from: x}\nrun: {depth: 65}\n' "$head" >"$bad/run_depth.yaml"
printf 'buffers: {x: {dtype: f32}}\nstages: []\n' >"$bad/buffer_no_shape.yaml"
printf 'run:\nbuffers:\nstages:\n' >"$work/empty_sections.yaml"
printf 'run: 5\nstages: []\n' >"$bad/run_scalar.yaml"
printf 'buffers: {x: {shape: [4, 0]}}\nstages: []\n' >"$bad/buffer_shape_zero.yaml"
printf 'buffers: {x: {shape: [4]}}\nstages:\n  - {kind: source, to: x}\n' >"$bad/stage_no_name.yaml"
for f in top_unknown_key run_unknown_key buffer_unknown_key buffer_bad_dtype buffer_bad_where \
    buffer_init_typo stage_unknown_kind stage_kind_typo_key stages_map buffers_list check_op_typo; do
    cp "$src/tests/parser/bad/$f.yaml" "$bad/"
done

"$py" - "$work/pipeline.schema.json" "$src" "$bad" <<'PY'
import glob, json, os, sys
import jsonschema, yaml
schema_path, src, bad = sys.argv[1:4]
schema = json.load(open(schema_path))
jsonschema.Draft202012Validator.check_schema(schema)
v = jsonschema.Draft202012Validator(schema)
fail = 0
good = sorted(glob.glob(os.path.join(src, "pipelines", "*.yaml")))
good.append(os.path.join(src, "tests", "parser", "good", "quickstart.yaml"))
good.append(os.path.join(os.path.dirname(bad), "empty_sections.yaml"))
for f in good:
    errs = list(v.iter_errors(yaml.safe_load(open(f))))
    for e in errs[:3]:
        print(f"FAIL {os.path.basename(f)}: {list(e.path)}: {e.message[:200]}")
    fail += bool(errs)
bads = sorted(glob.glob(os.path.join(bad, "*.yaml")))
for f in bads:
    if v.is_valid(yaml.safe_load(open(f))):
        print(f"FAIL {os.path.basename(f)}: the schema accepts it")
        fail += 1
print(f"schema: {len(good)} good files valid, {len(bads)} bad files rejected, {fail} failure(s)")
sys.exit(1 if fail else 0)
PY
