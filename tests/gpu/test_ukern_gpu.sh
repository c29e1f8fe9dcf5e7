# test_ukern_gpu: user kernels on the GPU. Outputs equal the Lua host reference's, byte for byte
# (source, template by name expression, PTX, cubin and fatbin modules; graphs and --no-graph); a
# second run compiles nothing; args: that do not match the kernel's parameters (count, size) and a
# missing function are refused at load with the argument's position; a kernel that faults on batch
# 5 names the stage and batch 5 and its sink keeps exactly batches 0..4. Exits 77 without a GPU.
# usage: test_ukern_gpu.sh PIPECTL SOURCE_DIR BUILD_DIR NVCC
set -u
pipectl=$1 src=$2 build=$3 nvcc=${4:-nvcc}
work=$build/ukern_gpu
rm -rf "$work"
mkdir -p "$work/kernels"
export XDG_CACHE_HOME=$work/cache
fail=0
err() {
    echo "FAIL: $*"
    fail=$((fail + 1))
}
cp "$src"/pipelines/kernels/* "$work/kernels/"
cp "$src"/pipelines/user_kernel.yaml "$src"/pipelines/user_kernel_ptx.yaml "$work/"

probe=$("$pipectl" run --executor gpu -q "$work/user_kernel.yaml" 2>&1)
case $probe in *"no usable CUDA device"* | *"no CUDA device"*) echo "SKIP: $probe"; exit 77 ;; esac

sum() { grep -o 'checksum 0x[0-9a-f]*' "$1" | head -1; }
"$pipectl" run --executor host "$work/user_kernel.yaml" >"$work/host.out" 2>&1 || err "host run: $(cat "$work/host.out")"
want=$(sum "$work/host.out")
[ -n "$want" ] || err "no checksum from the host run"

# Variants of the example: the same result from every way of giving the kernel.
sed 's/function: scale$/function: scale_t<float>/' "$work/user_kernel.yaml" >"$work/template.yaml"
"$nvcc" -cubin -arch=sm_90 "$work/kernels/scale.cu" -o "$work/kernels/scale.cubin" || err "nvcc -cubin"
"$nvcc" -fatbin -gencode arch=compute_90,code=sm_90 "$work/kernels/scale.cu" -o "$work/kernels/scale.fatbin" || err "nvcc -fatbin"
sed 's#module: kernels/scale.ptx#module: kernels/scale.cubin#' "$work/user_kernel_ptx.yaml" >"$work/cubin.yaml"
sed 's#module: kernels/scale.ptx#module: kernels/scale.fatbin#' "$work/user_kernel_ptx.yaml" >"$work/fatbin.yaml"
for f in user_kernel template user_kernel_ptx cubin fatbin; do
    for g in "" --no-graph; do
        "$pipectl" run --executor gpu $g "$work/$f.yaml" >"$work/$f$g.out" 2>&1 || err "$f $g: run failed: $(cat "$work/$f$g.out")"
        got=$(sum "$work/$f$g.out")
        [ "$got" = "$want" ] || err "$f $g: GPU gives '$got', the host reference '$want'"
        echo "$f ${g:-graphs}: $got"
    done
done

# A second run compiles nothing.
"$pipectl" run -v --executor gpu -q "$work/user_kernel.yaml" >"$work/v.out" 2>&1
grep -q "found in the cache, nothing compiled" "$work/v.out" || err "second run compiled: $(cat "$work/v.out")"

# args: against the kernel's parameters. A fatbin's are read at load (cuFuncGetParamInfo); a
# cubin's and a source's already at check time (the same message).
sed 's/args: \[y_dev, x_dev, {f32: 3}, elements(x_dev)\]/args: [y_dev, x_dev, {f32: 3}]/' "$work/fatbin.yaml" >"$work/count.yaml"
"$pipectl" check "$work/count.yaml" >/dev/null 2>&1 || err "fatbin count mismatch must pass check (only the device knows)"
"$pipectl" run --executor gpu -q "$work/count.yaml" >"$work/count.out" 2>&1
rc=$?
[ $rc -eq 2 ] || err "arg count: exit $rc, expected 2"
grep -q "count.yaml:[0-9]*:[0-9]*: error: stage 'triple': kernel 'scale' takes 4 parameters, but args: gives 3" "$work/count.out" ||
    err "arg count: $(cat "$work/count.out")"
sed 's/{f32: 3}/{f64: 3}/' "$work/user_kernel.yaml" >"$work/size.yaml"
"$pipectl" run --executor gpu -q "$work/size.yaml" >"$work/size.out" 2>&1
rc=$?
[ $rc -eq 2 ] || err "arg size: exit $rc, expected 2"
grep -q "size.yaml:[0-9]*:[0-9]*: error: stage 'triple': argument 3 'f64: 3' is f64 (8 bytes), but parameter 3 of kernel 'scale' is 4 bytes" "$work/size.out" ||
    err "arg size: $(cat "$work/size.out")"
sed 's/function: scale$/function: scal/' "$work/cubin.yaml" >"$work/nofn.yaml"
"$pipectl" run --executor gpu -q "$work/nofn.yaml" >"$work/nofn.out" 2>&1
rc=$?
[ $rc -eq 2 ] || err "missing function: exit $rc, expected 2"
grep -q "error: stage 'triple': the module has no kernel 'scal'; it has: scale" "$work/nofn.out" ||
    err "missing function: $(cat "$work/nofn.out")"

# A kernel that faults on batch 5: the error names the stage and the batch, the sink keeps 0..4.
cat >"$work/fault.yaml" <<'YAML'
run: {batches: 10, depth: 3}
buffers:
  trig_host: {dtype: i32, shape: [1]}
  trig_dev: {where: device, dtype: i32, shape: [1]}
  x_host: {dtype: f32, shape: [4096]}
  x_dev: {where: device, dtype: f32, shape: [4096]}
  y_dev: {where: device, dtype: f32, shape: [4096]}
  y_host: {dtype: f32, shape: [4096]}
stages:
  - {name: gen, kind: source, to: x_host, generator: random}
  - name: mark
    kind: lua
    code: "function run(batch, opts, bufs) bufs.trig_host[1] = batch end"
    writes: [trig_host]
  - {name: up, kind: h2d, from: x_host, to: x_dev}
  - {name: up_trig, kind: h2d, from: trig_host, to: trig_dev}
  - name: boom
    kind: kernel
    code: |
      extern "C" __global__ void boom(float *y, const float *x, const int *trig, unsigned long long n)
      {
          unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
          if (i < n) y[i] = x[i];
          if (i == 0 && trig[0] == 5) *(volatile int *)16 = 1; /* an illegal address */
      }
    function: boom
    grid: [ceil(elements(x_dev) / 256)]
    block: [256]
    args: [y_dev, x_dev, trig_dev, elements(x_dev)]
    reads: [x_dev, trig_dev]
    writes: [y_dev]
  - {name: down, kind: d2h, from: y_dev, to: y_host}
  - {name: save, kind: sink, from: y_host, to: out/fault.npy}
YAML
for g in "" --no-graph; do
    rm -f "$work/out/fault.npy"
    "$pipectl" run --executor gpu $g -q "$work/fault.yaml" >"$work/fault.out" 2>&1
    rc=$?
    [ $rc -eq 1 ] || err "fault $g: exit $rc, expected 1: $(cat "$work/fault.out")"
    grep -q "stage 'boom', batch 5" "$work/fault.out" || err "fault $g: message: $(cat "$work/fault.out")"
    f=$work/out/fault.npy
    if [ -f "$f" ]; then
        hl=$((10 + $(od -An -tu2 -j8 -N2 "$f")))
        data=$(($(stat -c %s "$f") - hl))
        [ $data -eq $((5 * 4096 * 4)) ] || err "fault $g: the sink kept $data bytes, expected 5 batches ($((5 * 4096 * 4)))"
    else
        err "fault $g: no out/fault.npy"
    fi
    echo "fault ${g:-graphs}: $(grep -o "stage 'boom', batch [0-9]*[^;]*" "$work/fault.out" | head -1)"
done

[ $fail -eq 0 ] && echo "all user-kernel GPU tests passed"
[ $fail -eq 0 ]
