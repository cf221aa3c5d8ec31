// mma_q4k.cu: a batch-1 Q4_K product that reads the activation in f32 (no int8 conversion
// launch before it) and does its arithmetic on the tensor cores, with the RMSNorm's gain and
// 1 / RMS folded in. Question: can such a product stream the weights as fast as the int8 decode
// products do with their conversion launch before them? Chains of products shaped as
// Qwen2.5's FFN (up then down, alternating, distinct weights, as bench_gpu's "FFN" chains),
// captured in a CUDA graph with programmatic dependent launch, best of 20 replays.
//
// The arithmetic: a warp takes 16 x RG weight rows. m16n8k16 (f16 in, f32 accumulate) with the
// eight B columns standing for the eight sub-blocks of a super-block: thread c (= lane % 4)
// holds chunk c's 32 bytes of its two rows (sub-blocks 2c and 2c + 1: low and high nibbles),
// turns each pair of nibbles into f16 (1024 + n, 1024 + 16 n) with one LOP3, and B's column 2c
// holds only sub-block 2c's activations, so D[row][j] is sub-block j's dot and lands in the
// thread that holds its scales. The activation is x * g * 2^-8 in f16 (the scale keeps f16
// away from overflow); the 1024 offsets and the minima come out through each sub-block's sum
// of the same f16 values. A standalone CUDA program (not built by make):
//   nvcc -O3 -arch=sm_90 bench/cuda/mma_q4k.cu -o mma_q4k && ./mma_q4k
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <vector>
#include <cuda_runtime.h>
#include <cuda_fp16.h>

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));         \
            return 1;                                                                           \
        }                                                                                       \
    } while (0)

static const float PRE = 1.0f / 256.0f;

__device__ __forceinline__ uint4 ldw(const uint8_t *p)
{
    uint4 v;
    asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

__device__ __forceinline__ void mma(float d[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                    uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                 "{%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t lop(uint32_t q, uint32_t m)
{
    return (q & m) | 0x64006400u;
}

__device__ __forceinline__ uint32_t h2u(__half2 h)
{
    uint32_t u;
    memcpy(&u, &h, 4);
    return u;
}

// scale and min pairs of sub-blocks 2c, 2c + 1 from a header (d|dmin, sc[0..11])
__device__ __forceinline__ void scales(uint4 h, int c, float &s0, float &s1, float &m0, float &m1)
{
    int u = 16 * (c & 1);
    uint32_t A = (h.y >> u) & 0xFFFF, B = (h.z >> u) & 0xFFFF, C = (h.w >> u) & 0xFFFF;
    uint32_t sp, mp;
    if (c < 2) {
        sp = A & 0x3F3F;
        mp = B & 0x3F3F;
    } else {
        sp = (C & 0x0F0F) | ((A >> 2) & 0x3030);
        mp = ((C >> 4) & 0x0F0F) | ((B >> 2) & 0x3030);
    }
    __half2 dd;
    memcpy(&dd, &h.x, 4);
    float2 df = __half22float2(dd);
    s0 = df.x * (float)(sp & 0xFF);
    s1 = df.x * (float)(sp >> 8) * (1.0f / 16.0f);
    m0 = df.y * (float)(mp & 0xFF);
    m1 = df.y * (float)(mp >> 8);
}

// y[row] = scale_out * dot(W[row], x * g), scale_out = 1 / RMS(x) if NORM, else 1.
// Block: KS warps, each taking every KS-th super-block of the block's 16 * RG rows.
template <int RG, int KS, int NORM>
__global__ void __launch_bounds__(32 * KS) kq4k(const uint8_t *__restrict__ W, const float *__restrict__ x,
                                                const float *__restrict__ g, float *__restrict__ y, int nsb, float eps)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int c = lane & 3, r = lane >> 2, n = lane >> 2;
    const size_t rb = (size_t)nsb * 144;
    const int row0 = blockIdx.x * 16 * RG;
    const uint8_t *wp[RG][2];
#pragma unroll
    for (int q = 0; q < RG; q++) {
        wp[q][0] = W + (size_t)(row0 + 16 * q + r) * rb;
        wp[q][1] = W + (size_t)(row0 + 16 * q + r + 8) * rb;
    }
    // lanes that feed B: n == 2c (sub-block 2c) or n == 2c + 1
    const bool lo = n == 2 * c, hi = n == 2 * c + 1;
    const int src0 = 8 * c + (hi ? 4 : 0);
    float acc[RG][2];
#pragma unroll
    for (int q = 0; q < RG; q++)
        acc[q][0] = acc[q][1] = 0.f;
    float ss = 0.f;
    // the first super-block's weights are asked for before the wait (they are no output of
    // the launch before), each next one's as soon as the current one's are in use
    uint4 hd[RG][2], qa[RG][2], qb[RG][2];
    auto load = [&](int sb) {
#pragma unroll
        for (int q = 0; q < RG; q++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const uint8_t *p = wp[q][e] + (size_t)sb * 144;
                hd[q][e] = ldw(p);
                qa[q][e] = ldw(p + 16 + 32 * c);
                qb[q][e] = ldw(p + 32 + 32 * c);
            }
    };
    if (warp < nsb)
        load(warp);
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;");
    for (int sb = warp; sb < nsb; sb += KS) {
        // this lane's 8 activations: x[sb * 256 + 8 lane ..]
        const float4 *xp = (const float4 *)(x + (size_t)sb * 256 + 8 * lane);
        float4 xa = xp[0], xb = xp[1];
        float v[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
        if (NORM) {
            const float4 *gp = (const float4 *)(g + (size_t)sb * 256 + 8 * lane);
            float4 ga = gp[0], gb = gp[1];
            float gv[8] = {ga.x, ga.y, ga.z, ga.w, gb.x, gb.y, gb.z, gb.w};
#pragma unroll
            for (int i = 0; i < 8; i++) {
                ss = fmaf(v[i], v[i], ss);
                v[i] *= gv[i] * PRE;
            }
        } else {
#pragma unroll
            for (int i = 0; i < 8; i++)
                v[i] *= PRE;
        }
        __half2 p[4] = {__floats2half2_rn(v[0], v[2]), __floats2half2_rn(v[1], v[3]),
                        __floats2half2_rn(v[4], v[6]), __floats2half2_rn(v[5], v[7])};
        float xs = 0.f;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float2 f = __half22float2(p[i]);
            xs += f.x + f.y;
        }
        xs += __shfl_xor_sync(~0u, xs, 1);
        xs += __shfl_xor_sync(~0u, xs, 2);
        const float X0 = __shfl_sync(~0u, xs, 8 * c), X1 = __shfl_sync(~0u, xs, 8 * c + 4);
        uint32_t pu[4] = {h2u(p[0]), h2u(p[1]), h2u(p[2]), h2u(p[3])};
        float d[RG][4];
#pragma unroll
        for (int q = 0; q < RG; q++)
            d[q][0] = d[q][1] = d[q][2] = d[q][3] = 0.f;
#pragma unroll
        for (int j = 0; j < 8; j++) {
#pragma unroll
            for (int h = 0; h < 2; h++) {
                uint32_t val = __shfl_sync(~0u, pu[(j & 1) * 2 + h], src0 + j / 2);
                uint32_t b0 = lo ? val : 0u, b1 = hi ? val : 0u;
#pragma unroll
                for (int q = 0; q < RG; q++) {
                    uint32_t w0 = (j < 4 ? (&qa[q][0].x)[j] : (&qb[q][0].x)[j - 4]) >> (8 * h);
                    uint32_t w1 = (j < 4 ? (&qa[q][1].x)[j] : (&qb[q][1].x)[j - 4]) >> (8 * h);
                    mma(d[q], lop(w0, 0x000F000Fu), lop(w1, 0x000F000Fu), lop(w0, 0x00F000F0u),
                        lop(w1, 0x00F000F0u), b0, b1);
                }
            }
        }
        uint4 hc[RG][2];
#pragma unroll
        for (int q = 0; q < RG; q++)
            hc[q][0] = hd[q][0], hc[q][1] = hd[q][1];
        if (sb + KS < nsb)
            load(sb + KS);
#pragma unroll
        for (int q = 0; q < RG; q++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float s0, s1, m0, m1;
                scales(hc[q][e], c, s0, s1, m0, m1);
                acc[q][e] += s0 * d[q][2 * e] + s1 * d[q][2 * e + 1] - (1024.f * s0 + m0) * X0 -
                             (1024.f * s1 + m1) * X1;
            }
    }
    // rows: sum over c; then over the block's warps
    __shared__ float red[KS][16 * RG + 1];
#pragma unroll
    for (int q = 0; q < RG; q++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            float a = acc[q][e];
            a += __shfl_xor_sync(~0u, a, 1);
            a += __shfl_xor_sync(~0u, a, 2);
            if (c == 0)
                red[warp][16 * q + 8 * e + r] = a;
        }
    if (NORM) {
#pragma unroll
        for (int o = 16; o; o >>= 1)
            ss += __shfl_xor_sync(~0u, ss, o);
        if (lane == 0)
            red[warp][16 * RG] = ss;
    }
    __syncthreads();
    if (warp == 0) {
        float tot = 0.f;
        for (int w = 0; w < KS; w++)
            tot += NORM ? red[w][16 * RG] : 0.f;
        const float so = (NORM ? rsqrtf(tot / (256.f * nsb) + eps) : 1.f) / PRE;
        for (int i = lane; i < 16 * RG; i += 32) {
            float a = 0.f;
            for (int w = 0; w < KS; w++)
                a += red[w][i];
            y[row0 + i] = a * so;
        }
    }
}

// ---- host ----
static uint64_t rs = 0x9e3779b97f4a7c15ull;
static uint32_t rnd32(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (uint32_t)(rs >> 16);
}
static float rndf(void) { return (rnd32() & 0xFFFFFF) / 16777216.0f * 2.f - 1.f; }

static float h2f(uint16_t h)
{
    __half x;
    memcpy(&x, &h, 2);
    return __half2float(x);
}

static void rand_q4k(uint8_t *w, size_t nblk)
{
    for (size_t b = 0; b < nblk; b++) {
        uint8_t *p = w + b * 144;
        for (int i = 0; i < 144; i++)
            p[i] = (uint8_t)rnd32();
        __half d = __float2half(0.0005f + 0.001f * (rndf() + 1.f)),
               m = __float2half(0.0005f + 0.001f * (rndf() + 1.f));
        memcpy(p, &d, 2);
        memcpy(p + 2, &m, 2);
    }
}

// ggml's dequantization of one super-block
static void deq(const uint8_t *p, float *o)
{
    uint16_t hd, hm;
    memcpy(&hd, p, 2);
    memcpy(&hm, p + 2, 2);
    float d = h2f(hd), dm = h2f(hm);
    const uint8_t *q = p + 4, *qs = p + 16;
    for (int j = 0; j < 8; j++) {
        int sc, m;
        if (j < 4) {
            sc = q[j] & 63;
            m = q[j + 4] & 63;
        } else {
            sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
            m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
        }
        for (int i = 0; i < 32; i++) {
            int nib = (qs[32 * (j / 2) + i] >> (4 * (j & 1))) & 15;
            o[32 * j + i] = d * sc * nib - dm * m;
        }
    }
}

typedef void (*kfn)(const uint8_t *, const float *, const float *, float *, int, float);

struct variant {
    const char *name;
    kfn f;
    int rows, ks;
};

template <int RG, int KS, int NORM> static variant mk(const char *name)
{
    return variant{name, kq4k<RG, KS, NORM>, 16 * RG, KS};
}

static int launch(const variant &v, cudaStream_t s, const uint8_t *W, const float *x, const float *g, float *y,
                  int k, int rows)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(rows / v.rows);
    cfg.blockDim = dim3(32 * v.ks);
    cfg.stream = s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, v.f, W, x, g, y, k / 256, 1e-6f) != cudaSuccess;
}

int main(void)
{
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("%s\n", prop.name);
    // correctness: one product of 256 rows x 3584 against a double reference
    {
        const int k = 3584, rows = 256, nsb = k / 256;
        std::vector<uint8_t> w((size_t)rows * nsb * 144);
        rand_q4k(w.data(), (size_t)rows * nsb);
        std::vector<float> x(k), g(k), y(rows);
        for (int i = 0; i < k; i++) {
            x[i] = rndf() * 3.f;
            g[i] = 1.f + 0.1f * rndf();
        }
        x[17] = 900.f; // an outlier
        uint8_t *dw;
        float *dx, *dg, *dy;
        CK(cudaMalloc(&dw, w.size()));
        CK(cudaMalloc(&dx, k * 4));
        CK(cudaMalloc(&dg, k * 4));
        CK(cudaMalloc(&dy, rows * 4));
        CK(cudaMemcpy(dw, w.data(), w.size(), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dx, x.data(), k * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dg, g.data(), k * 4, cudaMemcpyHostToDevice));
        double ssq = 0;
        for (int i = 0; i < k; i++)
            ssq += (double)x[i] * x[i];
        double inv = 1.0 / sqrt(ssq / k + 1e-6);
        variant vs[] = {mk<1, 4, 1>("RG1 KS4 norm"), mk<2, 2, 1>("RG2 KS2 norm"), mk<1, 1, 0>("RG1 KS1 plain"),
                        mk<2, 7, 0>("RG2 KS7 plain")};
        for (const variant &v : vs) {
            int norm = strstr(v.name, "norm") != nullptr;
            CK(cudaMemset(dy, 0, rows * 4));
            if (launch(v, 0, dw, dx, dg, dy, k, rows))
                return 1;
            CK(cudaDeviceSynchronize());
            CK(cudaMemcpy(y.data(), dy, rows * 4, cudaMemcpyDeviceToHost));
            double worst = 0, big = 0;
            std::vector<float> o(256);
            for (int rr = 0; rr < rows; rr++) {
                double ref = 0;
                for (int b = 0; b < nsb; b++) {
                    deq(w.data() + ((size_t)rr * nsb + b) * 144, o.data());
                    for (int i = 0; i < 256; i++)
                        ref += (double)o[i] * x[256 * b + i] * (norm ? g[256 * b + i] : 1.f);
                }
                if (norm)
                    ref *= inv;
                worst = fmax(worst, fabs(ref - y[rr]));
                big = fmax(big, fabs(ref));
            }
            printf("check %-14s: max |err| %.3g of max |y| %.3g (%.2g)\n", v.name, worst, big, worst / big);
        }
        cudaFree(dw);
        cudaFree(dx);
        cudaFree(dg);
        cudaFree(dy);
    }
    // chains
    struct shape {
        const char *name;
        int d0, d1, nl;
    } sh[] = {{"7B FFN Q4_K", 3584, 18944, 8}, {"1.5B FFN Q4_K", 1536, 8960, 16},
              {"7B attn Q4_K", 3584, 3584, 24}, {"1.5B attn Q4_K", 1536, 1536, 48}};
    double copy_bw = 0;
    {
        size_t nb = 1ull << 30;
        void *a, *b;
        CK(cudaMalloc(&a, nb));
        CK(cudaMalloc(&b, nb));
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0);
        cudaEventCreate(&e1);
        float best = 1e30f;
        for (int i = 0; i < 5; i++) {
            cudaEventRecord(e0);
            cudaMemcpyAsync(b, a, nb, cudaMemcpyDeviceToDevice);
            cudaEventRecord(e1);
            cudaEventSynchronize(e1);
            float ms;
            cudaEventElapsedTime(&ms, e0, e1);
            best = fminf(best, ms);
        }
        copy_bw = 2.0 * nb / (best * 1e-3) / 1e9;
        printf("device-to-device copy %.0f GB/s (read + write, 1 GiB)\n", copy_bw);
        cudaFree(a);
        cudaFree(b);
    }
    printf("\n| chain | variant | weights MB | us | GB/s | %% of copy |\n|---|---|---:|---:|---:|---:|\n");
    for (const shape &s : sh) {
        std::vector<uint8_t *> w(s.nl);
        double bytes = 0;
        for (int l = 0; l < s.nl; l++) {
            int k = l % 2 ? s.d1 : s.d0, rows = l % 2 ? s.d0 : s.d1;
            size_t nbk = (size_t)rows * (k / 256);
            std::vector<uint8_t> h(nbk * 144);
            rand_q4k(h.data(), nbk);
            CK(cudaMalloc(&w[l], h.size()));
            CK(cudaMemcpy(w[l], h.data(), h.size(), cudaMemcpyHostToDevice));
            bytes += h.size();
        }
        int mx = s.d0 > s.d1 ? s.d0 : s.d1;
        float *act[2], *gg;
        CK(cudaMalloc(&act[0], mx * 4));
        CK(cudaMalloc(&act[1], mx * 4));
        CK(cudaMalloc(&gg, mx * 4));
        {
            std::vector<float> h(mx);
            for (int i = 0; i < mx; i++)
                h[i] = rndf();
            CK(cudaMemcpy(act[0], h.data(), mx * 4, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(act[1], h.data(), mx * 4, cudaMemcpyHostToDevice));
            for (int i = 0; i < mx; i++)
                h[i] = 1.f + 0.1f * rndf();
            CK(cudaMemcpy(gg, h.data(), mx * 4, cudaMemcpyHostToDevice));
        }
        // per shape, variants chosen by k: a narrow k takes fewer warps a block
        variant vs[] = {mk<1, 1, 0>("RG1 KS1"), mk<1, 2, 0>("RG1 KS2"), mk<1, 4, 0>("RG1 KS4"),
                        mk<1, 8, 0>("RG1 KS8"), mk<2, 1, 0>("RG2 KS1"), mk<2, 2, 0>("RG2 KS2"),
                        mk<2, 4, 0>("RG2 KS4"), mk<2, 8, 0>("RG2 KS8"), mk<2, 4, 1>("RG2 KS4 norm"),
                        mk<1, 4, 1>("RG1 KS4 norm"), mk<2, 16, 0>("RG2 KS16"), mk<1, 16, 0>("RG1 KS16")};
        for (const variant &v : vs) {
            cudaStream_t st;
            CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
            cudaGraph_t gr;
            cudaGraphExec_t ge;
            CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
            int bad = 0;
            for (int l = 0; l < s.nl; l++) {
                int k = l % 2 ? s.d1 : s.d0, rows = l % 2 ? s.d0 : s.d1;
                bad |= launch(v, st, w[l], act[l % 2], gg, act[(l + 1) % 2], k, rows);
            }
            CK(cudaStreamEndCapture(st, &gr));
            if (bad) {
                printf("| %s | %s | launch failed |\n", s.name, v.name);
                continue;
            }
            CK(cudaGraphInstantiate(&ge, gr, 0));
            cudaEvent_t e0, e1;
            cudaEventCreate(&e0);
            cudaEventCreate(&e1);
            float best = 1e30f;
            for (int i = 0; i < 22; i++) {
                cudaEventRecord(e0, st);
                cudaGraphLaunch(ge, st);
                cudaEventRecord(e1, st);
                CK(cudaEventSynchronize(e1));
                float ms;
                cudaEventElapsedTime(&ms, e0, e1);
                if (i >= 2)
                    best = fminf(best, ms);
            }
            double gbs = bytes / (best * 1e-3) / 1e9;
            printf("| %s | %s | %.0f | %.0f | %.0f | %.0f%% |\n", s.name, v.name, bytes / 1e6, best * 1e3, gbs,
                   100 * gbs / copy_bw);
            fflush(stdout);
            cudaGraphExecDestroy(ge);
            cudaGraphDestroy(gr);
            cudaStreamDestroy(st);
        }
        for (int l = 0; l < s.nl; l++)
            cudaFree(w[l]);
        cudaFree(act[0]);
        cudaFree(act[1]);
        cudaFree(gg);
    }
    return 0;
}
