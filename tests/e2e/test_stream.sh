# test_stream: a loop's stream (docs/pipeline-yaml.md, "loop.stream") on the host executor, with
# pipelines/generate_stream.yaml and .lua on the tiny model (tests/e2e/gpt2_ref.py's checkpoint,
# 3 batches of 4 sequences). Asserts (tests/e2e/stream_check.py): the records put together per
# row are the tokens the loop wrote, up to the row's end (finished:) or the last delivery, at the
# steps `every` gives, batches in order; the stream file is byte-identical at depth 1 and 3 and
# from the Lua twin; every 1, 3 and more than the loop's iterations; raw records; the text of a
# tokenizer, put together, is `pipectl tokenize --decode` of each row, also where characters are
# cut between deliveries (tests/e2e/data/stream_text.yaml); `to: -` writes the same records to
# stdout (the summary to stderr); a bundle checksums the stream and replay matches it. A run
# failing in batch 1 keeps batch 0's records; one stopped by SIGINT in the middle of a batch exits 130 with the stream finished under its name,
# whole records, a prefix of a whole run's stream holding part of the batch in flight; after
# SIGKILL, `pipectl salvage` of its .partial gives the same. Needs /usr/bin/python3 with numpy
# (skips otherwise).
set -u
pipectl=$1 src=$2 build=$3
PY=
for p in ${PYTHON:-} python3 /usr/bin/python3; do # the first Python with numpy
    if "$p" -c 'import numpy' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "SKIP: no python3 with numpy (set PYTHON)"; exit 77; }
ref=$src/tests/e2e/gpt2_ref.py
chk=$src/tests/e2e/stream_check.py
pl=$src/pipelines
vocab=$src/pipelines/data/tiny_bpe
mkdir -p "$build"
work=$(cd "$build" && pwd)/stream_e2e
rm -rf "$work"
mkdir -p "$work/snap"
fail=0
err() { echo "FAIL: $*"; fail=1; }
K=3 B=4 T=12 N=8 # batches, sequences, prompt ids, new tokens
$PY "$ref" make "$work/snap" --seed 5 --batches $K --B $B --T $T >/dev/null || exit 1
$PY "$ref" prompts "$work/snap" --seed 5 --batches $K --B $B --T $T || exit 1

# The tiny model's shapes for N new tokens: shapes N.
shapes() {
    local n=$1
    S=(--set run.batches=$K --set prefill.config=tiny --set decode.config=tiny
        --set generate.loop.max=$((n - 1)))
    for b in prompts prompts_dev; do S+=(--set "buffers.$b.shape=[$B, $T]"); done
    for b in lengths lengths_dev next done; do S+=(--set "buffers.$b.shape=[$B]"); done
    for b in tokens tokens_dev; do S+=(--set "buffers.$b.shape=[$B, $n]"); done
    S+=(--set "buffers.kv.shape=[2, 2, $B, 4, $((T + n - 1)), 16]" --set "buffers.logits.shape=[$B, 512]"
        --set prefill.weights="$work/snap" --set decode.weights="$work/snap" --set buffers.kv.dtype=f32
        --set "stages.read={name: read, kind: source, to: prompts, file: $work/snap/prompts.npy}"
        --set "stages.read_len={name: read_len, kind: source, to: lengths, file: $work/snap/lengths.npy}")
}
shapes $N
# run NAME FILE DEPTH --set ...: runs FILE with its outputs in $work/NAME/out.
run() {
    local name=$1 file=$2 depth=$3
    shift 3
    rm -rf "$work/$name"
    if ! "$pipectl" run --quiet --executor host --depth "$depth" --out-dir "$work/$name" "${S[@]}" "$@" "$file" \
        >"$work/$name.log" 2>&1; then
        err "$name ($(basename "$file"), depth $depth): $(cat "$work/$name.log")"
        return 1
    fi
}
# check NAME EVERY [stream_check flags]: the stream against the tokens of run NAME.
check() {
    local name=$1 every=$2 f=$work/$1/out/generate_stream.jsonl
    shift 2
    case " $* " in *" --raw "*) f=$work/$name/out/generate_stream.bin ;; esac
    $PY "$chk" tokens "$work/$name/out/generate_stream_tokens.npy" "$f" --every "$every" \
        --steps "$work/$name/out/generate_stream_steps.npy" "$@" >"$work/$name.chk" 2>&1 ||
        err "$name: $(cat "$work/$name.chk")"
}
same() { cmp -s "$work/$1/out/$3" "$work/$2/out/$3" || err "$3 differs between $1 and $2"; }

# 1. No eos: every row runs to the end; the shipped every 16 is more than the 7 steps (one
#    delivery, the last), then every 1 and 3.
NOEOS=(--set first.eos=-1 --set pick.eos=-1)
run noeos16 "$pl/generate_stream.yaml" 1 "${NOEOS[@]}" && check noeos16 16 --finished
for e in 1 3; do
    run noeos$e "$pl/generate_stream.yaml" 1 "${NOEOS[@]}" --set generate.loop.stream.every=$e &&
        check noeos$e $e --finished
done
# An eos the tiny model draws: rows end at different steps, and say so.
eos=$($PY -c "import numpy as n, sys; print(n.load(sys.argv[1])[0, 0, 2])" \
    "$work/noeos1/out/generate_stream_tokens.npy" 2>/dev/null)
[ -n "$eos" ] || { err "no tokens to take an eos from"; eos=0; }
EOS=(--set first.eos=$eos --set pick.eos=$eos --set generate.loop.stream.every=2)
if run eos1 "$pl/generate_stream.yaml" 1 "${EOS[@]}"; then
    check eos1 2 --finished
    grep -q '"end":true' "$work/eos1/out/generate_stream.jsonl" || err "eos1: no row ended"
    $PY - "$work/eos1/out" <<'PY' || err "eos1: no row ends before the batch's last delivery"
import json, sys
last = {}
ends = [json.loads(l) for l in open(sys.argv[1] + "/generate_stream.jsonl")]
for r in ends:
    last[r["batch"]] = max(last.get(r["batch"], 0), r["step"])
assert any(r.get("end") and r["step"] < last[r["batch"]] for r in ends)
PY
fi
# 2. The same records at depth 3 and from the Lua twin.
run eos3 "$pl/generate_stream.yaml" 3 "${EOS[@]}" && same eos3 eos1 generate_stream.jsonl
run eos_lua "$pl/generate_stream.lua" 2 "${EOS[@]}" && same eos_lua eos1 generate_stream.jsonl
# Without finished: every row in every delivery, the padding after eos included.
if run nofin "$pl/generate_stream.yaml" 3 "${EOS[@]}" \
    --set "generate.loop.stream={every: 3, from: tokens_dev, to: out/generate_stream.jsonl}"; then
    check nofin 3
fi

# 3. Raw records, every 2, at depth 1 and 3.
RAW=(--set "generate.loop.stream={every: 2, from: tokens_dev, to: out/generate_stream.bin}")
run raw1 "$pl/generate_stream.yaml" 1 "${EOS[@]}" "${RAW[@]}" && check raw1 2 --raw
run raw3 "$pl/generate_stream.yaml" 3 "${EOS[@]}" "${RAW[@]}" && same raw3 raw1 generate_stream.bin

# 4. Text: the tiny tokenizer's (557 ids: every id the tiny model draws, bytes cut inside
#    characters among them).
TXT=(--set "generate.loop.stream={every: 1, from: tokens_dev, to: out/generate_stream.jsonl, vocab: $vocab}")
if run text1 "$pl/generate_stream.yaml" 1 "${NOEOS[@]}" "${TXT[@]}"; then
    $PY "$chk" text "$work/text1/out/generate_stream.jsonl" "$vocab" \
        "$work/text1/out/generate_stream_tokens.npy" "$pipectl" >"$work/text1.chk" 2>&1 ||
        err "text1: $(cat "$work/text1.chk")"
fi
run text3 "$pl/generate_stream.yaml" 3 "${NOEOS[@]}" "${TXT[@]}" && same text3 text1 generate_stream.jsonl

# Characters cut between deliveries (a Lua loop spelling "aé€𝄞b" an id a step), every 1, 2 and 3.
for e in 1 2 3; do
    o=$work/cut$e
    if "$pipectl" run --quiet --executor host --set spell.loop.stream.every=$e --out-dir "$o" \
        "$src/tests/e2e/data/stream_text.yaml" >"$o.log" 2>&1; then
        $PY "$chk" text "$o/out/stream_text.jsonl" "$vocab" "$o/out/stream_text_ids.npy" "$pipectl" \
            >"$o.chk" 2>&1 || err "cut characters, every $e: $(cat "$o.chk")"
        $PY -c "
import json, sys
t = ''.join(r['text'] for r in map(json.loads, open(sys.argv[1])) if r['batch'] == 1 and r['row'] == 0)
assert t == 'a\u00e9\u20ac\U0001d11eb', repr(t)" "$o/out/stream_text.jsonl" ||
            err "cut characters, every $e: row 0 is not 'aé€𝄞b'"
    else
        err "stream_text.yaml, every $e: $(cat "$o.log")"
    fi
done

# 5. To stdout: the same records; the summary goes to stderr.
if "$pipectl" run --executor host --out-dir "$work/stdout" "${S[@]}" "${EOS[@]}" \
    --set 'generate.loop.stream={every: 2, from: tokens_dev, to: "-", format: jsonl, finished: done}' \
    "$pl/generate_stream.yaml" >"$work/stdout.jsonl" 2>"$work/stdout.err"; then
    cmp -s "$work/stdout.jsonl" "$work/eos1/out/generate_stream.jsonl" ||
        err "to: -: stdout is not the stream file's records"
    grep -q "batches written to -" "$work/stdout.err" || err "to: -: no summary on stderr: $(cat "$work/stdout.err")"
else
    err "to: -: $(cat "$work/stdout.err")"
fi

# An error in batch 1 (--fail-at): exit 1, the stream finished with batch 0's records, whole.
rm -rf "$work/failed"
"$pipectl" run --quiet --executor host --depth 1 --fail-at pick:1 --out-dir "$work/failed" "${S[@]}" \
    "${EOS[@]}" "$pl/generate_stream.yaml" >"$work/failed.log" 2>&1
rc=$?
[ $rc = 1 ] || err "--fail-at pick:1: exit $rc, want 1: $(cat "$work/failed.log")"
f=$work/failed/out/generate_stream.jsonl
if [ -f "$f" ] && [ ! -e "$f.partial" ]; then
    $PY "$chk" tokens "$work/failed/out/generate_stream_tokens.npy" "$f" --every 2 --finished \
        --steps "$work/failed/out/generate_stream_steps.npy" --partial >"$work/failed.chk" 2>&1 ||
        err "--fail-at pick:1: $(cat "$work/failed.chk")"
    $PY "$chk" prefix "$f" "$work/eos1/out/generate_stream.jsonl" >>"$work/failed.chk" 2>&1 ||
        err "--fail-at pick:1: $(cat "$work/failed.chk")"
else
    err "--fail-at pick:1: the stream is not finished under its name"
fi

# 6. A bundle lists the stream as an output, with its checksums, and replay matches them.
cp "$pl/generate_stream.yaml" "$work/bundled.yaml"
if "$pipectl" capture --executor host "${S[@]}" "${NOEOS[@]}" --set generate.loop.stream.every=2 \
    "$work/bundled.yaml" -o "$work/bundle" >"$work/capture.log" 2>&1; then
    grep -q 'stream: {every: 2, from: "tokens_dev", to: "outputs/generate-generate_stream.jsonl"' \
        "$work/bundle/pipeline.yaml" || err "capture: the canonical pipeline has no stream into outputs/"
    "$pipectl" replay --executor host "$work/bundle" >"$work/replay.log" 2>&1 ||
        err "replay: $(cat "$work/replay.log")"
    grep -Eq '^  generate +3 batches +match' "$work/replay.log" || err "replay: the stream does not match: $(cat "$work/replay.log")"
else
    err "capture: $(cat "$work/capture.log")"
fi

# 7. Stopped in the middle of a batch: 29 steps a batch, each slowed by a 60 ms busy stage in the
#    body (what the stream holds does not depend on it), one delivery a step.
N2=30
shapes $N2
$PY - "$pl/generate_stream.yaml" "$work/slow.yaml" <<'PY' || exit 1
import sys
s = open(sys.argv[1]).read()
body = "    stages:\n"
i = s.index(body, s.index("name: generate")) + len(body)
s = s[:i] + "      - {name: slow, kind: kernel, op: busy, duration_us: 60000}\n" + s[i:]
open(sys.argv[2], "w").write(s)
PY
SLOW=(--set first.eos=-1 --set pick.eos=-1 --set generate.loop.stream.every=1 --set run.depth=1)
run whole "$pl/generate_stream.yaml" 1 "${SLOW[@]}" && check whole 1 --finished
# start_slow NAME: the slow run in the background, until batch 1 has streamed a record.
start_slow() {
    rm -rf "$work/$1"
    "$pipectl" run --quiet --executor host --out-dir "$work/$1" "${S[@]}" "${SLOW[@]}" "$work/slow.yaml" \
        >"$work/$1.log" 2>&1 &
    pid=$!
    local p=$work/$1/out/generate_stream.jsonl.partial
    for _ in $(seq 1 2400); do
        grep -q '"batch":1,' "$p" 2>/dev/null && return 0
        kill -0 $pid 2>/dev/null || break
        sleep 0.05
    done
    err "$1: batch 1 never streamed: $(cat "$work/$1.log")"
    return 1
}
if start_slow stopped; then
    kill -INT $pid
    wait $pid
    rc=$?
    f=$work/stopped/out/generate_stream.jsonl
    [ $rc = 130 ] || err "SIGINT mid-batch: exit $rc, want 130: $(cat "$work/stopped.log")"
    [ -f "$f" ] || err "SIGINT mid-batch: no $f"
    [ -e "$f.partial" ] && err "SIGINT mid-batch: $f.partial left"
    if [ -f "$f" ]; then
        $PY "$chk" prefix "$f" "$work/whole/out/generate_stream.jsonl" >"$work/stopped.chk" 2>&1 ||
            err "SIGINT mid-batch: $(cat "$work/stopped.chk")"
        $PY "$chk" tokens "$work/stopped/out/generate_stream_tokens.npy" "$f" --every 1 --finished \
            --steps "$work/stopped/out/generate_stream_steps.npy" --partial >>"$work/stopped.chk" 2>&1 ||
            err "SIGINT mid-batch: $(cat "$work/stopped.chk")"
        grep -q '"batch":1,' "$f" || err "SIGINT mid-batch: batch 1's records are lost"
        if grep -q '"batch":1,.*"end":true' "$f"; then
            echo "note: batch 1 ended before the signal took effect (a loaded machine)"
        fi
    fi
fi
if start_slow killed; then
    kill -KILL $pid
    wait $pid 2>/dev/null
    f=$work/killed/out/generate_stream.jsonl
    if [ -f "$f.partial" ] && [ -f "$f.partial.meta" ]; then
        "$pipectl" salvage "$f.partial" >"$work/salvage.log" 2>&1 || err "salvage: $(cat "$work/salvage.log")"
        $PY "$chk" prefix "$f" "$work/whole/out/generate_stream.jsonl" >"$work/killed.chk" 2>&1 ||
            err "SIGKILL, salvage: $(cat "$work/killed.chk")"
        grep -q '"batch":1,' "$f" || err "SIGKILL, salvage: batch 1's records are lost"
    else
        err "SIGKILL: no $f.partial with its sidecar"
    fi
fi

[ $fail -eq 0 ] && echo "loop streams on the tiny model: the records are the tokens, the same at any depth, in both front ends, as JSONL, text and raw; a stopped or killed run keeps whole records"
exit $fail
