// matvec.cu: y[c][i] = sum_k W[i][k] * x[c][k] for a weight W in a ggml format, with the
// activation already converted to the format's dot type by quant_act (quantize.cu): int8
// values with one float scale per 32 (Q8_0 for Q4_0/Q8_0, Q8_K for the K formats), or floats
// rounded to F16/BF16. Integer sums use dp4a; one warp per row, lanes stride over the row's
// 32-element sub-blocks, NC columns share each weight load.
// Epilogue (fused bias and residual add): y = res + rscale * (acc + bias) when res is set.
// Parameters: QT (weight type), NW (warps per block), NC (columns per pass), GLU (gate and
// up rows in one warp, SwiGLU output).
#include "common.cuh"

#ifndef QT
#define QT T_Q4_K
#endif
#ifndef NW
#define NW 4
#endif
#ifndef NC
#define NC 1
#endif
#ifndef GLU
#define GLU 0
#endif

#if QT == T_Q4_0 || QT == T_Q8_0 || QT == T_Q4_K || QT == T_Q5_K || QT == T_Q6_K
#define INT_PATH 1
#else
#define INT_PATH 0
#endif

#if INT_PATH
// Sub-block s (32 elements) of row r of a planar weight (gpu/layout.h) of N blocks in all:
// q[8] packed signed bytes (element 4i+b in byte b of q[i]); scales of the first and second
// 16 elements; min term (K formats with mins).
__device__ __forceinline__ void load_sub(const u8 *W, i64 N, i64 r, int k, int s, int q[8],
                                         float &s_lo, float &s_hi, float &mn)
{
#if QT == T_Q4_0
    qblk b = qblock(QT, W, N, r * (k >> 5) + s);
    uint4 w = *(const uint4 *)b.q;
    u32 ww[4] = {w.x, w.y, w.z, w.w};
    float d = h2f(ld16(b.d));
#pragma unroll
    for (int i = 0; i < 4; i++) {
        q[i] = (int)vsub4(ww[i] & 0x0F0F0F0Fu, 0x08080808u);
        q[4 + i] = (int)vsub4((ww[i] >> 4) & 0x0F0F0F0Fu, 0x08080808u);
    }
    s_lo = s_hi = d;
    mn = 0.0f;
#elif QT == T_Q8_0
    qblk b = qblock(QT, W, N, r * (k >> 5) + s);
    uint4 w0 = ((const uint4 *)b.q)[0], w1 = ((const uint4 *)b.q)[1];
    u32 ww[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
    float d = h2f(ld16(b.d));
#pragma unroll
    for (int i = 0; i < 8; i++)
        q[i] = (int)ww[i];
    s_lo = s_hi = d;
    mn = 0.0f;
#elif QT == T_Q4_K || QT == T_Q5_K
    qblk b = qblock(QT, W, N, r * (k >> 8) + (s >> 3));
    int j = s & 7, sc, m;
    kscale(j, b.h + 4, &sc, &m);
    const uint4 *qp = (const uint4 *)(b.q + 32 * (j >> 1));
    uint4 w0 = qp[0], w1 = qp[1];
    u32 w[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
    int sh = (j & 1) * 4;
#if QT == T_Q5_K
    const uint4 *hp = (const uint4 *)(b.h + 16);
    uint4 h0 = hp[0], h1 = hp[1];
    u32 hw[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
#pragma unroll
    for (int i = 0; i < 8; i++)
        q[i] = (int)(((w[i] >> sh) & 0x0F0F0F0Fu) | (((hw[i] >> j) & 0x01010101u) << 4));
#else
#pragma unroll
    for (int i = 0; i < 8; i++)
        q[i] = (int)((w[i] >> sh) & 0x0F0F0F0Fu);
#endif
    float d = h2f(ld16(b.h));
    s_lo = s_hi = d * (float)sc;
    mn = h2f(ld16(b.h + 2)) * (float)m;
#else // Q6_K
    qblk b = qblock(QT, W, N, r * (k >> 8) + (s >> 3));
    int j = s & 7, half = j >> 2, qu = j & 3;
    const uint4 *lp = (const uint4 *)(b.q + 64 * half + ((qu & 1) ? 32 : 0));
    const uint4 *hp = (const uint4 *)(b.h + 32 * half);
    uint4 l0 = lp[0], l1 = lp[1], h0 = hp[0], h1 = hp[1];
    u32 lw[8] = {l0.x, l0.y, l0.z, l0.w, l1.x, l1.y, l1.z, l1.w};
    u32 hw[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
    int sh = qu >= 2 ? 4 : 0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        u32 v = ((lw[i] >> sh) & 0x0F0F0F0Fu) | (((hw[i] >> (2 * qu)) & 0x03030303u) << 4);
        q[i] = (int)vsub4(v, 0x20202020u);
    }
    const i8 *scp = (const i8 *)b.s + 8 * half + 2 * qu;
    float d = h2f(ld16(b.d));
    s_lo = d * (float)scp[0];
    s_hi = d * (float)scp[1];
    mn = 0.0f;
#endif
}
#endif

#if INT_PATH
struct wsub {
    int q[8];
    float lo, hi, mn;
};

// acc[c] += the dot of loaded sub-block s of a weight row with column c0+c of the activation
__device__ __forceinline__ void dot_sub(const wsub &w, int s, const i8 *xq, const float *xd,
                                        int k, int c0, int ncols, float *acc)
{
    int nsub = k >> 5;
#pragma unroll
    for (int c = 0; c < NC; c++) {
        if (c0 + c < ncols) {
            const int4 *ap = (const int4 *)(xq + (i64)(c0 + c) * k + 32 * s);
            int4 a0 = ap[0], a1 = ap[1];
            int lo = 0, hi = 0;
            lo = dot4_i8(w.q[0], a0.x, lo);
            lo = dot4_i8(w.q[1], a0.y, lo);
            lo = dot4_i8(w.q[2], a0.z, lo);
            lo = dot4_i8(w.q[3], a0.w, lo);
            hi = dot4_i8(w.q[4], a1.x, hi);
            hi = dot4_i8(w.q[5], a1.y, hi);
            hi = dot4_i8(w.q[6], a1.z, hi);
            hi = dot4_i8(w.q[7], a1.w, hi);
            float v = w.lo * (float)lo + w.hi * (float)hi;
            if (w.mn != 0.0f) {
                int sa = 0;
                sa = dot4_i8(0x01010101, a0.x, sa);
                sa = dot4_i8(0x01010101, a0.y, sa);
                sa = dot4_i8(0x01010101, a0.z, sa);
                sa = dot4_i8(0x01010101, a0.w, sa);
                sa = dot4_i8(0x01010101, a1.x, sa);
                sa = dot4_i8(0x01010101, a1.y, sa);
                sa = dot4_i8(0x01010101, a1.z, sa);
                sa = dot4_i8(0x01010101, a1.w, sa);
                v -= w.mn * (float)sa;
            }
            acc[c] += xd[(i64)(c0 + c) * nsub + s] * v;
        }
    }
}
#endif

#if QT == T_F16 || QT == T_BF16
// 8 weights (16 bytes at element e) against NC columns
__device__ __forceinline__ void dot8(uint4 wv, const float *xf, int e, int k, int c0, int ncols,
                                     float *acc)
{
    float wf[8];
    half8(QT, wv, wf);
#pragma unroll
    for (int c = 0; c < NC; c++)
        if (c0 + c < ncols) {
            const float4 *xp = (const float4 *)(xf + (i64)(c0 + c) * k + e);
            float4 x0 = xp[0], x1 = xp[1];
            acc[c] += wf[0] * x0.x + wf[1] * x0.y + wf[2] * x0.z + wf[3] * x0.w + wf[4] * x1.x +
                      wf[5] * x1.y + wf[6] * x1.z + wf[7] * x1.w;
        }
}
#endif

#ifndef UNROLL
#define UNROLL 1
#endif
#define SL 32 // lanes per row

// One weight row against NC columns; lanes stride over the row, UNROLL steps' weight loads
// issued before the first use (bytes in flight are what a memory-bound product needs).
__device__ __forceinline__ void row_dot(const u8 *W, i64 N, i64 row, long long row_bytes,
                                        const void *xa, const float *xd, int k, int c0, int ncols,
                                        int lane, float *acc)
{
#if INT_PATH
    int nsub = k >> 5, s = lane;
    for (; s + SL * (UNROLL - 1) < nsub; s += SL * UNROLL) {
        wsub w[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            load_sub(W, N, row, k, s + SL * u, w[u].q, w[u].lo, w[u].hi, w[u].mn);
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            dot_sub(w[u], s + SL * u, (const i8 *)xa, xd, k, c0, ncols, acc);
    }
    for (; s < nsub; s += SL) {
        wsub w;
        load_sub(W, N, row, k, s, w.q, w.lo, w.hi, w.mn);
        dot_sub(w, s, (const i8 *)xa, xd, k, c0, ncols, acc);
    }
#else
    const u8 *wr = W + row * row_bytes;
    const float *xf = (const float *)xa;
#if QT == T_F32
    for (int e = lane * 4; e < k; e += 4 * SL) {
        float4 wv = *(const float4 *)(wr + 4 * (i64)e);
        float wf[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
        for (int c = 0; c < NC; c++)
            if (c0 + c < ncols) {
                float4 xv = *(const float4 *)(xf + (i64)(c0 + c) * k + e);
                acc[c] += wf[0] * xv.x + wf[1] * xv.y + wf[2] * xv.z + wf[3] * xv.w;
            }
    }
#else // F16, BF16: 8 elements (16 bytes) per lane per step, UNROLL steps in flight
    int e = lane * 8;
    for (; e + 8 * SL * (UNROLL - 1) < k; e += 8 * SL * UNROLL) {
        uint4 wv[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            wv[u] = *(const uint4 *)(wr + 2 * (i64)(e + 8 * SL * u));
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            dot8(wv[u], xf, e + 8 * SL * u, k, c0, ncols, acc);
    }
    for (; e < k; e += 8 * SL)
        dot8(*(const uint4 *)(wr + 2 * (i64)e), xf, e, k, c0, ncols, acc);
#endif
#endif
}

// Up to three weights that read the same activation (q, k, v) in one launch: rows
// [0, r0) of W0 -> y0, then r1 rows of W1 -> y1, then r2 of W2 -> y2 (each with its bias).
// With GLU, every warp does row i of W0 (gate) and of W1 (up): y0 = silu(g) * u (SwiGLU).
// res/rscale (residual add) apply to a single-weight launch.
extern "C" __global__ void __launch_bounds__(NW * 32)
matvec(const u8 *W0, const u8 *W1, const u8 *W2, const void *xa, const float *xd, float *y0,
       float *y1, float *y2, const float *b0, const float *b1, const float *b2, const float *res,
       float rscale, int r0, int r1, int r2, int k, int ncols, long long row_bytes, int tiles_fast)
{
    pdl_wait();
    pdl_launch();
    // tiles_fast: column tiles in blockIdx.x, so the blocks that read one weight row block run
    // together and all but the first find it in L2 (batches)
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int rb = tiles_fast ? blockIdx.y : blockIdx.x, ct = tiles_fast ? blockIdx.x : blockIdx.y;
    int row = rb * NW + warp;
    int c0 = ct * NC;
#if GLU
    if (row >= r0)
        return;
    float ag[NC], au[NC];
#pragma unroll
    for (int c = 0; c < NC; c++)
        ag[c] = au[c] = 0.0f;
    i64 N = (i64)r0 * (k / qblock_elems(QT));
    row_dot(W0, N, row, row_bytes, xa, xd, k, c0, ncols, lane, ag);
    row_dot(W1, N, row, row_bytes, xa, xd, k, c0, ncols, lane, au);
#pragma unroll
    for (int c = 0; c < NC; c++) {
        float g = warp_sum(ag[c]), u = warp_sum(au[c]);
        if (lane == 0 && c0 + c < ncols) {
            if (b0)
                g += b0[row];
            if (b1)
                u += b1[row];
            y0[(i64)(c0 + c) * r0 + row] = silu_f(g) * u;
        }
    }
#else
    wpick pk = pick_weight(row, W0, W1, W2, y0, y1, y2, b0, b1, b2, r0, r1, r2);
    if (!pk.active)
        return;
    float acc[NC];
#pragma unroll
    for (int c = 0; c < NC; c++)
        acc[c] = 0.0f;
    row_dot(pk.W, (i64)pk.rows * (k / qblock_elems(QT)), row, row_bytes, xa, xd, k, c0, ncols,
            lane, acc);
#pragma unroll
    for (int c = 0; c < NC; c++) {
        float v = warp_sum(acc[c]);
        if (lane == 0 && c0 + c < ncols) {
            if (pk.bias)
                v += pk.bias[row];
            i64 o = (i64)(c0 + c) * pk.rows + row;
            pk.y[o] = res ? res[o] + v * rscale : v;
        }
    }
#endif
}
