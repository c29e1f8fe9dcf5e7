// A missing semicolon on line 5.
extern "C" __global__ void scale(float *y, const float *x, float a, unsigned long long n)
{
    unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i]
}
