/* selftest: the stand-in's exit check must fire. Leaves a stream and an allocation alive and
 * records a destroyed event; test_exec_gpu_stub.sh expects exit 3 and the three named. */
#include <cuda_runtime_api.h>

int main(void)
{
    cudaStream_t s;
    cudaEvent_t e;
    void *p;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaEventCreate(&e);
    cudaEventDestroy(e);
    cudaEventRecord(e, s);
    cudaMalloc(&p, 16);
    return 0;
}
