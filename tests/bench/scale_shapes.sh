# scale_shapes.sh: the N-stage pipelines of tests/bench/run_scale.sh, sourced by it and by
# tests/stubcuda/test_exec_gpu_stub.sh: `chain N` and `fanout N` print one on stdout (one batch,
# depth 1; the sinks write under out/).
chain() { # N: src fill -> N scales, each reading the one before -> download -> sink
    echo "pipeline: chain"
    echo "run: {batches: 1, depth: 1}"
    echo "buffers:"
    awk -v n="$1" 'BEGIN { for (i = 0; i <= n; i++) printf "  c%d: {where: device, dtype: f32, shape: [4]}\n", i }'
    echo "  h: {dtype: f32, shape: [4]}"
    echo "stages:"
    echo "  - {name: first, kind: kernel, op: fill, value: 1, writes: [c0]}"
    awk -v n="$1" 'BEGIN { for (i = 1; i <= n; i++) printf "  - {name: k%d, kind: kernel, op: scale, alpha: 1, reads: [c%d], writes: [c%d]}\n", i, i - 1, i }'
    echo "  - {name: down, kind: d2h, from: c$1, to: h}"
    echo "  - {name: save, kind: sink, from: h, to: out/chain.npy}"
}
fanout() { # N: upload -> N fills, each its own buffer -> a sum of the upload -> download -> sink
    echo "pipeline: fanout"
    echo "run: {batches: 1, depth: 1}"
    echo "buffers:"
    echo "  x: {dtype: f32, shape: [4]}"
    echo "  x_dev: {where: device, dtype: f32, shape: [4]}"
    awk -v n="$1" 'BEGIN { for (i = 0; i < n; i++) printf "  y%d: {where: device, dtype: f32, shape: [1]}\n", i }'
    echo "  s: {where: device, dtype: f64, shape: [1]}"
    echo "  s_host: {dtype: f64, shape: [1]}"
    echo "stages:"
    echo "  - {name: gen, kind: source, to: x, generator: range}"
    echo "  - {name: up, kind: h2d, from: x, to: x_dev}"
    awk -v n="$1" 'BEGIN { for (i = 0; i < n; i++) printf "  - {name: k%d, kind: kernel, op: fill, value: %d, writes: [y%d], after: [up]}\n", i, i % 7, i }'
    echo "  - {name: total, kind: kernel, op: sum, reads: [x_dev], writes: [s]}"
    echo "  - {name: down, kind: d2h, from: s, to: s_host}"
    echo "  - {name: save, kind: sink, from: s_host, to: out/s.npy}"
}
