# test_stream_gpu (label gpu): loop streams (docs/pipeline-yaml.md, "loop.stream") on the GPU
# executor, pipelines/generate_stream.yaml on the tiny model (tests/e2e/gpt2_ref.py's checkpoint,
# an f32 cache, 3 batches of 4 sequences), in every way the GPU runs a loop: a WHILE node in
# segment graphs, in stage graphs and with --no-graph (the stream kernel and the poller thread,
# pl_gpu_stream.c), and host-launched (run.loop: host, copies between launches), at depth 1, 3 and
# auto. Asserts (tests/e2e/stream_check.py): each run's records put together are the tokens that
# run downloaded after the loop (finished: with an eos, every 1 and 3, and raw records); every mode
# and depth writes the same stream bytes as the WHILE node at depth 1; the batches whose tokens
# equal the host executor's have the host executor's records, byte for byte; 399 deliveries a
# batch (more than the 256 a slot's ring holds) come out whole and in order; the text of a host
# body (tests/e2e/data/stream_text.yaml) is the host executor's; SIGINT in the middle of a batch
# exits 130 with the stream finished, whole records, a prefix of a whole GPU run's stream holding
# part of the batch in flight. Skips (77) without a GPU or numpy.
set -u
pipectl=$1 src=$2 build=$3
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || { echo "SKIP: no GPU"; exit 77; }
PY=
for p in ${PYTHON:-} python3 /usr/bin/python3; do # the first Python with numpy
    if "$p" -c 'import numpy' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "SKIP: no python3 with numpy (set PYTHON)"; exit 77; }
ref=$src/tests/e2e/gpt2_ref.py
chk=$src/tests/e2e/stream_check.py
pl=$src/pipelines
mkdir -p "$build"
work=$(cd "$build" && pwd)/stream_gpu_test
rm -rf "$work"
mkdir -p "$work/snap" "$work/snap_long"
fail=0
err() { echo "FAIL: $*"; fail=1; }
K=3 B=4 T=12
probe=$("$pipectl" run --quiet --executor gpu --batches 1 --out-dir "$work/probe" "$pl/loop.yaml" 2>&1) || {
    case $probe in
    *"no CUDA device"* | *"built without CUDA"* | *"no usable"*) echo "SKIP: no usable GPU: $probe"; exit 77 ;;
    esac
    echo "FAIL: pipelines/loop.yaml on the GPU: $probe"
    exit 1
}
$PY "$ref" make "$work/snap" --seed 5 --batches $K --B $B --T $T >/dev/null || exit 1
$PY "$ref" prompts "$work/snap" --seed 5 --batches $K --B $B --T $T || exit 1
$PY "$ref" make "$work/snap_long" --seed 5 --ctx 512 --batches $K --B $B --T $T >/dev/null || exit 1
$PY "$ref" prompts "$work/snap_long" --seed 5 --batches $K --B $B --T $T || exit 1

# shapes N SNAP: the tiny model's shapes for N new tokens, reading checkpoint SNAP.
shapes() {
    local n=$1 snap=$2
    S=(--set run.batches=$K --set prefill.config=tiny --set decode.config=tiny
        --set generate.loop.max=$((n - 1)))
    for b in prompts prompts_dev; do S+=(--set "buffers.$b.shape=[$B, $T]"); done
    for b in lengths lengths_dev next done; do S+=(--set "buffers.$b.shape=[$B]"); done
    for b in tokens tokens_dev; do S+=(--set "buffers.$b.shape=[$B, $n]"); done
    S+=(--set "buffers.kv.shape=[2, 2, $B, 4, $((T + n - 1)), 16]" --set "buffers.logits.shape=[$B, 512]"
        --set prefill.weights="$snap" --set decode.weights="$snap" --set buffers.kv.dtype=f32
        --set "stages.read={name: read, kind: source, to: prompts, file: $snap/prompts.npy}"
        --set "stages.read_len={name: read_len, kind: source, to: lengths, file: $snap/lengths.npy}")
}
# run NAME EXECUTOR DEPTH ARGS...: generate_stream.yaml into $work/NAME/out.
run() {
    local name=$1 ex=$2 depth=$3
    shift 3
    rm -rf "$work/$name"
    # shellcheck disable=SC2086 # depth may be "auto"
    if ! "$pipectl" run --quiet --executor "$ex" --depth $depth --out-dir "$work/$name" "${S[@]}" "$@" \
        "$pl/generate_stream.yaml" >"$work/$name.log" 2>&1; then
        err "$name: $(cat "$work/$name.log")"
        return 1
    fi
}
# check NAME EVERY [flags]: the stream of run NAME against its own tokens.
check() {
    local name=$1 every=$2 f=$work/$1/out/generate_stream.jsonl
    shift 2
    case " $* " in *" --raw "*) f=$work/$name/out/generate_stream.bin ;; esac
    $PY "$chk" tokens "$work/$name/out/generate_stream_tokens.npy" "$f" --every "$every" \
        --steps "$work/$name/out/generate_stream_steps.npy" "$@" >"$work/$name.chk" 2>&1 ||
        err "$name: $(cat "$work/$name.chk")"
}
# against_host GPU HOST FILE: batch by batch, where the tokens agree the records are the host's.
against_host() {
    $PY - "$work/$1/out" "$work/$2/out" "$3" <<'PY' || err "$1 against the host executor's $2: see above"
import sys
import numpy as np
g, h, f = sys.argv[1:]
tg, th = np.load(g + "/generate_stream_tokens.npy"), np.load(h + "/generate_stream_tokens.npy")
raw = f.endswith(".bin")
def per_batch(path):
    data = open(path, "rb").read()
    out = {}
    if raw:
        i = 0
        while i < len(data):
            hd = np.frombuffer(data[i:i + 48], "<i8")
            n = 48 + int(hd[5] * hd[3] * 4)
            out.setdefault(int(hd[0]), []).append(data[i:i + n])
            i += n
    else:
        import json
        for line in data.splitlines(keepends=True):
            out.setdefault(json.loads(line)["batch"], []).append(line)
    return out
a, b = per_batch(g + "/" + f), per_batch(h + "/" + f)
same = [k for k in range(len(tg)) if np.array_equal(tg[k], th[k])]
bad = [k for k in same if a.get(k) != b.get(k)]
print(f"{sys.argv[1]}: {len(same)} of {len(tg)} batches have the host's tokens; their records: "
      f"{'the host executor' + chr(39) + 's' if not bad else 'DIFFER in batches ' + str(bad)}")
sys.exit(1 if bad or not same else 0)
PY
}

shapes 8 "$work/snap"
NOEOS=(--set first.eos=-1 --set pick.eos=-1)
run host_noeos host 1 "${NOEOS[@]}" --set generate.loop.stream.every=1 || exit 1
eos=$($PY -c "import numpy as n, sys; print(n.load(sys.argv[1])[0, 0, 2])" \
    "$work/host_noeos/out/generate_stream_tokens.npy")
EOS=(--set first.eos=$eos --set pick.eos=$eos)
RAW=(--set "generate.loop.stream={every: 2, from: tokens_dev, to: out/generate_stream.bin}")
modes=("while-segment:--graphs segment" "while-stage:--graphs stage" "while-nograph:--no-graph"
    "host-segment:--set run.loop=host --graphs segment" "host-nograph:--set run.loop=host --no-graph")
for every in 1 3; do
    E=(--set generate.loop.stream.every=$every)
    run host_e$every host 1 "${EOS[@]}" "${E[@]}" && check host_e$every $every --finished
    base=
    for m in "${modes[@]}"; do
        mode=${m%%:*} args=${m#*:}
        for d in 1 3 auto; do
            [ "$d" = auto ] && [ "$mode" != while-segment ] && continue
            name=$mode-d$d-e$every
            # shellcheck disable=SC2086 # args holds several options
            run "$name" gpu "$d" "${EOS[@]}" "${E[@]}" $args || continue
            check "$name" $every --finished
            if [ -z "$base" ]; then
                base=$name
                against_host "$name" host_e$every generate_stream.jsonl
            else
                cmp -s "$work/$name/out/generate_stream.jsonl" "$work/$base/out/generate_stream.jsonl" ||
                    err "$name: the stream differs from $base's"
            fi
        done
    done
done
# Raw records.
run host_raw host 1 "${EOS[@]}" "${RAW[@]}" && check host_raw 2 --raw
for m in "while-segment:--graphs segment" "host-segment:--set run.loop=host"; do
    mode=${m%%:*} args=${m#*:}
    # shellcheck disable=SC2086 # args holds several options
    run raw-$mode gpu 3 "${EOS[@]}" "${RAW[@]}" $args && check raw-$mode 2 --raw &&
        against_host raw-$mode host_raw generate_stream.bin
done
# 399 deliveries a batch: past the ring of 256 a slot holds, every record whole and in order.
shapes 400 "$work/snap_long"
run long gpu 2 "${NOEOS[@]}" --set generate.loop.stream.every=1 && check long 1 --finished
# A host body's text on the GPU executor: the host executor's bytes.
for ex in host gpu; do
    "$pipectl" run --quiet --executor $ex --set spell.loop.stream.every=2 --out-dir "$work/text_$ex" \
        "$src/tests/e2e/data/stream_text.yaml" >"$work/text_$ex.log" 2>&1 || err "stream_text.yaml ($ex): $(cat "$work/text_$ex.log")"
done
cmp -s "$work/text_gpu/out/stream_text.jsonl" "$work/text_host/out/stream_text.jsonl" ||
    err "stream_text.yaml: the GPU executor's text differs from the host executor's"

# SIGINT in the middle of a batch: 29 steps a batch, each slowed by a 60 ms busy kernel in the body.
shapes 30 "$work/snap"
$PY - "$pl/generate_stream.yaml" "$work/slow.yaml" <<'PY' || exit 1
import sys
s = open(sys.argv[1]).read()
body = "    stages:\n"
i = s.index(body, s.index("name: generate")) + len(body)
open(sys.argv[2], "w").write(s[:i] + "      - {name: slow, kind: kernel, op: busy, duration_us: 60000}\n" + s[i:])
PY
SLOW=(--set first.eos=-1 --set pick.eos=-1 --set generate.loop.stream.every=1)
run whole gpu 1 "${SLOW[@]}" && check whole 1 --finished
rm -rf "$work/stopped"
"$pipectl" run --quiet --executor gpu --depth 1 --out-dir "$work/stopped" "${S[@]}" "${SLOW[@]}" "$work/slow.yaml" \
    >"$work/stopped.log" 2>&1 &
pid=$!
p=$work/stopped/out/generate_stream.jsonl
# Signalled while batch 0 streams: batch 1's host stages may have started (they finish), batch 2's
# cannot have (depth 1), so the run stops short of its 3 batches. Later, the GPU executor's sources
# may already be reading the last batch, and a run that finishes every batch exits 0.
for _ in $(seq 1 2400); do
    grep -q '"batch":0,' "$p.partial" 2>/dev/null && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.05
done
kill -INT $pid
wait $pid
rc=$?
[ $rc = 130 ] || err "SIGINT mid-batch: exit $rc, want 130: $(cat "$work/stopped.log")"
if [ -f "$p" ] && [ ! -e "$p.partial" ]; then
    $PY "$chk" prefix "$p" "$work/whole/out/generate_stream.jsonl" || err "SIGINT mid-batch: not a prefix of the whole run's stream"
    [ "$(grep -c '"batch":0,' "$p")" = "$(grep -c '"batch":0,' "$work/whole/out/generate_stream.jsonl")" ] ||
        err "SIGINT mid-batch: batch 0's records are not all there"
else
    err "SIGINT mid-batch: the stream is not finished under its name"
fi

[ $fail -eq 0 ] && echo "loop streams on the GPU: the records are the tokens in every loop mode and depth, the host executor's where the tokens agree, past the ring, and kept whole when stopped"
exit $fail
