// scale.cu: y = alpha * x, one thread per element: what the built-in `scale` op does, written as a
// user kernel (pipelines/user_kernel.yaml). Compiled at load time by NVRTC; no includes needed.
extern "C" __global__ void scale(float *y, const float *x, float alpha, unsigned long long n)
{
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = alpha * x[i];
}

// The same as a template: `function: scale_t<float>` selects this instantiation.
template <typename T> __global__ void scale_t(T *y, const T *x, T alpha, unsigned long long n)
{
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = alpha * x[i];
}
