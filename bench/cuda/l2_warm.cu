// l2_warm.cu: can weights asked into L2 ahead of time be read faster by the next kernel? A
// region of 8-32 MB streamed by an mvd-like kernel (ld.global.cs, a warp per 2 rows of 1 KiB),
// timed alone after L2 was flushed ("cold"), after a kernel asked L2 for the region with
// cp.async.bulk.prefetch.L2 or prefetch.global.L2::evict_last, after a kernel loaded it with
// plain or .cs loads, and with plain loads in the timed kernel (whose lines then outlast the
// flush, which evicts evict-first lines first: a warm case too); 30 us pass between the two.
// Median and best of 9. A standalone CUDA program (not built by make):
//   nvcc -O3 -arch=sm_90 bench/cuda/l2_warm.cu -o l2_warm && ./l2_warm
#include <cstdio>
#include <cstdint>
#include <algorithm>
#include <vector>
#include <cuda_runtime.h>

__device__ __forceinline__ uint4 ldcs(const uint4 *p)
{
    uint4 v;
    asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ uint4 ldpl(const uint4 *p)
{
    uint4 v;
    asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

template <int CS>
__global__ void __launch_bounds__(128, 8) krows(const uint4 *W, int R, int C, unsigned *out)
{
    int gw = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    int nw = gridDim.x * blockDim.x / 32;
    unsigned acc = 0;
    for (int g = gw; g < R / 2; g += nw) {
        for (int i0 = 0; i0 < C; i0 += 2) {
            uint4 a[2][2];
#pragma unroll
            for (int u = 0; u < 2; u++)
#pragma unroll
                for (int j = 0; j < 2; j++)
                    if (i0 + u < C) {
                        const uint4 *p = W + ((size_t)(2 * g + j) * C + i0 + u) * 32 + lane;
                        a[u][j] = CS ? ldcs(p) : ldpl(p);
                    }
#pragma unroll
            for (int u = 0; u < 2; u++)
                if (i0 + u < C)
#pragma unroll
                    for (int j = 0; j < 2; j++)
                        acc ^= a[u][j].x + a[u][j].y * 3 + a[u][j].z * 5 + a[u][j].w * 7;
        }
    }
    if (acc == 0x9e3779b9u)
        out[0] = acc;
}

// each thread asks L2 for its share in bulk requests of at most 32 KiB
__global__ void kpf(const char *p, size_t n, int mode)
{
    size_t nt = (size_t)gridDim.x * blockDim.x, t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t per = (n / nt + 15) & ~(size_t)15, a = t * per, b = n < a + per ? n : a + per;
    if (mode == 0) {
        for (size_t o = a; o < b; o += 32768) {
            unsigned sz = (unsigned)(b - o < 32768 ? b - o : 32768);
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + o), "r"(sz)
                         : "memory");
        }
    } else {
        for (size_t o = a; o < b; o += 128)
            asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(p + o));
    }
}

__global__ void kspin(long long ns)
{
    long long t0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    for (;;) {
        long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        if (t - t0 > ns)
            break;
    }
}

static unsigned *dout;

int main()
{
    int sms;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    int l2;
    cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0);
    printf("SMs %d, L2 %d bytes\n", sms, l2);
    size_t fl = 400u << 20;
    uint4 *flush, *A;
    cudaMalloc(&flush, fl);
    cudaMemset(flush, 1, fl);
    cudaMalloc(&A, 64u << 20);
    cudaMemset(A, 2, 64u << 20);
    cudaMalloc(&dout, 4);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    const int C = 2;
    for (int mb : {8, 16, 24, 32}) {
        int R = (int)(((size_t)mb << 20) / (C * 512));
        size_t bytes = (size_t)R * C * 512;
        const char *names[] = {"cold", "bulk prefetch", "prefetch evict_last", "plain loads",
                               ".cs loads", "plain loads timed"};
        for (int cs = 0; cs < 6; cs++) {
            std::vector<float> t;
            for (int rep = 0; rep < 9; rep++) {
                krows<1><<<sms * 8, 128>>>(flush, (int)(fl / 1024), 2, dout); // evict A
                if (cs == 1 || cs == 2)
                    kpf<<<sms, 128>>>((const char *)A, bytes, cs - 1);
                if (cs == 3)
                    krows<0><<<sms * 8, 128>>>(A, R, C, dout);
                if (cs == 4)
                    krows<1><<<sms * 8, 128>>>(A, R, C, dout);
                kspin<<<1, 32>>>(30000); // 30 us for the prefetches to land
                cudaEventRecord(e0);
                if (cs == 5)
                    krows<0><<<(R / 2 + 3) / 4, 128>>>(A, R, C, dout);
                else
                    krows<1><<<(R / 2 + 3) / 4, 128>>>(A, R, C, dout);
                cudaEventRecord(e1);
                cudaEventSynchronize(e1);
                float ms;
                cudaEventElapsedTime(&ms, e0, e1);
                t.push_back(ms * 1000);
            }
            std::sort(t.begin(), t.end());
            printf("%2d MB %-20s: median %6.2f us (%5.0f GB/s), min %6.2f\n", mb, names[cs], t[4],
                   bytes / (t[4] * 1e-6) / 1e9, t[0]);
        }
    }
    cudaError_t e = cudaDeviceSynchronize();
    printf("%s\n", cudaGetErrorString(e));
    return 0;
}
