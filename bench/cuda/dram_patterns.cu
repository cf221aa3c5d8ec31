// dram_patterns.cu: how fast DRAM serves the decode products' access pattern, without the
// products' arithmetic. Streams of weight rows as mvd.cu reads them (a warp per group of NR
// rows, split along k over KS warps, 16 bytes a lane, U pieces a row in flight, ld.global.cs),
// in the row-major layout brasa uses (lay 0) against a layout with a row's 512-byte chunks
// interleaved across rows (lay 1: chunk i of every row together; lay 2: runs of 4 chunks),
// and a flat stream of the same bytes. Shapes of the Qwen2.5 7B and 1.5B Q4_K products (the
// values planes only). Each line: the bandwidth over 1.2 GB of back-to-back launches.
// A standalone CUDA program (not built by make):
//   nvcc -O3 -arch=sm_90 bench/cuda/dram_patterns.cu -o dram_patterns && ./dram_patterns
#include <cstdio>
#include <cstdint>
#include <vector>
#include <cuda_runtime.h>

__device__ __forceinline__ uint4 ldcs(const uint4 *p)
{
    uint4 v;
    asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

// R rows of C chunks of 512 B (32 uint4). Group g = rows NR g .. NR g + NR - 1, split along k
// over KS warps. LAY 0: row-major; 1: chunk (i, r) at (i R + r); 2: blocks of 4 chunks (i/4, r, i%4)
template <int U, int NR, int KS, int LAY>
__global__ void __launch_bounds__(128, 8) krows(const uint4 *W, int R, int C, unsigned *out)
{
    int gw = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    int nw = gridDim.x * blockDim.x / 32;
    unsigned acc = 0;
    for (int w = gw; w < R / NR * KS; w += nw) {
        int g = w / KS, s = w % KS;
        for (int i0 = s; i0 < C; i0 += U * KS) {
            uint4 a[U][NR];
#pragma unroll
            for (int u = 0; u < U; u++) {
                int i = i0 + u * KS;
                if (i < C)
#pragma unroll
                    for (int j = 0; j < NR; j++) {
                        size_t r = (size_t)g * NR + j, c;
                        if (LAY == 0)
                            c = r * C + i;
                        else if (LAY == 1)
                            c = (size_t)i * R + r;
                        else
                            c = ((size_t)(i / 4) * R + r) * 4 + (i % 4);
                        a[u][j] = ldcs(W + c * 32 + lane);
                    }
            }
#pragma unroll
            for (int u = 0; u < U; u++)
                if (i0 + u * KS < C)
#pragma unroll
                    for (int j = 0; j < NR; j++)
                        acc ^= a[u][j].x + a[u][j].y * 3 + a[u][j].z * 5 + a[u][j].w * 7;
        }
    }
    if (acc == 0x9e3779b9u)
        out[0] = acc;
}

template <int U>
__global__ void __launch_bounds__(128, 8) kflat(const uint4 *W, long n, unsigned *out)
{
    int gw = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    long nw = gridDim.x * blockDim.x / 32;
    unsigned acc = 0;
    for (long c0 = gw; c0 < n; c0 += nw * U) {
        uint4 a[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            if (c0 + u * nw < n)
                a[u] = ldcs(W + (c0 + u * nw) * 32 + lane);
#pragma unroll
        for (int u = 0; u < U; u++)
            if (c0 + u * nw < n)
                acc ^= a[u].x + a[u].y * 3 + a[u].z * 5 + a[u].w * 7;
    }
    if (acc == 0x9e3779b9u)
        out[0] = acc;
}

static uint4 *buf;
static unsigned *dout;
static cudaEvent_t e0, e1;

template <typename F> static double timeit(int nmat, size_t bytes, F launch)
{
    for (int m = 0; m < nmat; m++)
        launch(m);
    cudaEventRecord(e0);
    const int reps = 5;
    for (int r = 0; r < reps; r++)
        for (int m = 0; m < nmat; m++)
            launch(m);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    return (double)bytes * nmat * reps / (ms * 1e-3) / 1e9;
}

template <int U, int NR, int KS, int LAY> static void rows(const char *name, int R, int C, int sms)
{
    size_t bytes = (size_t)R * C * 512;
    int nmat = (int)(1200000000ull / bytes);
    long warps = (long)R / NR * KS, cap = (long)sms * 32;
    int grid = (int)((warps < cap ? warps : cap) + 3) / 4;
    double gbs = timeit(nmat, bytes, [&](int m) {
        krows<U, NR, KS, LAY><<<grid, 128>>>(buf + (size_t)m * bytes / 16, R, C, dout);
    });
    cudaError_t e = cudaGetLastError();
    printf("%-10s R=%6d C=%3d (%5.1f MB) U=%d NR=%d KS=%d lay=%d warps=%6ld: %7.0f GB/s %s\n", name, R,
           C, bytes / 1e6, U, NR, KS, LAY, warps, gbs, e ? cudaGetErrorString(e) : "");
}

template <int U> static void flat(const char *name, size_t bytes, int warps)
{
    int nmat = (int)(1200000000ull / bytes);
    long n = (long)(bytes / 512);
    double gbs = timeit(nmat, bytes, [&](int m) {
        kflat<U><<<warps / 4, 128>>>(buf + (size_t)m * bytes / 16, n, dout);
    });
    printf("%-10s flat (%5.1f MB) U=%d warps=%6d: %7.0f GB/s\n", name, bytes / 1e6, U, warps, gbs);
}

int main()
{
    int sms;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    cudaMalloc(&buf, 1300000000ull);
    cudaMemset(buf, 1, 1300000000ull);
    cudaMalloc(&dout, 4);
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    {
        double gbs = 0;
        size_t n = 600000000ull;
        cudaEventRecord(e0);
        for (int r = 0; r < 5; r++)
            cudaMemcpy((char *)buf + n, buf, n, cudaMemcpyDeviceToDevice);
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        gbs = 2.0 * n * 5 / (ms * 1e-3) / 1e9;
        printf("memcpy d2d: %.0f GB/s (read + write)\n", gbs);
    }
    // 7B down (Q4_K q plane 9472 B a row: 18.5 chunks)
    rows<2, 2, 1, 0>("down7b", 3584, 18, sms);
    rows<2, 2, 1, 1>("down7b", 3584, 18, sms);
    rows<2, 2, 1, 2>("down7b", 3584, 18, sms);
    rows<4, 2, 1, 0>("down7b", 3584, 18, sms);
    rows<4, 2, 1, 1>("down7b", 3584, 18, sms);
    rows<2, 2, 2, 0>("down7b", 3584, 18, sms);
    rows<2, 2, 2, 1>("down7b", 3584, 18, sms);
    rows<2, 2, 4, 0>("down7b", 3584, 18, sms);
    flat<2>("down7b", (size_t)3584 * 18 * 512, 1792);
    flat<2>("down7b", (size_t)3584 * 18 * 512, sms * 32);
    flat<4>("down7b", (size_t)3584 * 18 * 512, sms * 32);
    // 7B gate+up (two rows of 1792 B: 3.5 chunks; 4 here), 37888 rows
    rows<2, 2, 1, 0>("gateup7b", 37888, 4, sms);
    rows<2, 2, 1, 1>("gateup7b", 37888, 4, sms);
    rows<4, 2, 1, 0>("gateup7b", 37888, 4, sms);
    flat<2>("gateup7b", (size_t)37888 * 4 * 512, sms * 32);
    // 1.5B gate+up: 17920 rows of 768 B (1.5 chunks; 2 here)
    rows<2, 2, 1, 0>("gateup15", 17920, 2, sms);
    rows<2, 2, 1, 1>("gateup15", 17920, 2, sms);
    flat<2>("gateup15", (size_t)17920 * 2 * 512, sms * 32);
    // 1.5B down: 1536 rows of 4480 B (8.75 chunks; 9 here), split 2
    rows<2, 2, 2, 0>("down15", 1536, 9, sms);
    rows<2, 2, 2, 1>("down15", 1536, 9, sms);
    rows<4, 2, 2, 0>("down15", 1536, 9, sms);
    flat<2>("down15", (size_t)1536 * 9 * 512, sms * 32);
    return 0;
}
