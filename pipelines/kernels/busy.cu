// busy.cu: spin for `ns` nanoseconds on one warp, as the built-in `busy` op does (a clock, not a
// workload): tests/bench/bench_ukern.sh compares the two in the balanced pipeline.
__device__ __forceinline__ unsigned long long now_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void busy(unsigned long long ns)
{
    if (threadIdx.x != 0) return;
    unsigned long long t0 = now_ns();
    while (now_ns() - t0 < ns) {
    }
}
