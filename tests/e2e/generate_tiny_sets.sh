# generate_tiny_sets.sh (sourced): the --set options that run pipelines/generate.yaml and its
# twins (generate.lua, generate_sample.yaml: the stages prefill, decode and the loop generate) on
# the tiny model (2 layers, 4 heads of 16): K batches of B prompts of T ids, N tokens generated
# (the loop's N - 1 steps after the first), a vocabulary of V. Used by
# tests/e2e/test_generate_pipelines.sh and tests/gpu/test_generate_gpu.sh.
#   tiny_sets K B T N V      # fills the array TINY_SETS
tiny_sets() {
    local K=$1 B=$2 T=$3 N=$4 V=$5 b
    TINY_SETS=(--set run.batches=$K --set prefill.config=tiny --set decode.config=tiny
        --set prefill.vocab=$V --set decode.vocab=$V
        --set "generate.loop={max: $((N - 1)), while: going, index: step}")
    for b in prompts prompts_dev; do TINY_SETS+=(--set "buffers.$b.shape=[$B, $T]"); done
    for b in lengths lengths_dev next done; do TINY_SETS+=(--set "buffers.$b.shape=[$B]"); done
    for b in tokens tokens_dev; do TINY_SETS+=(--set "buffers.$b.shape=[$B, $N]"); done
    TINY_SETS+=(--set "buffers.kv.shape=[2, 2, $B, 4, $((T + N - 1)), 16]"
        --set "buffers.logits.shape=[$B, $V]")
}
