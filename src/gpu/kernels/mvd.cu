// mvd.cu: the decode matrix-vector product y = W x (one column), built to run at the memory
// bandwidth. The weight is planar (gpu/layout.h): a row's quantized values (the raw values for
// F32/F16/BF16) are consecutive bytes, cut here into 16-byte pieces. The SL lanes that share a
// row take pieces sl, sl + SL, sl + 2 SL, ... so each load instruction of a warp reads
// consecutive 16-byte pieces, and every lane issues U pieces' loads (with the scale fields
// they need) before it uses the first. Piece p of a row covers 32 elements (Q4_0, Q4_K, Q5_K,
// Q6_K: two runs of 16), 16 (Q8_0), 8 (F16, BF16) or 4 (F32).
// The activation is converted as for matvec.cu (quant_act): int8 with a scale per 32 and, for
// the K formats, the sum of each 16 (xs) so the min term costs no extra dot products.
// Epilogue: y = res + rscale * (acc + bias) where res is set. Up to three weights that read
// the same activation (q, k, v) in one launch, or gate and up rows with the SwiGLU output.
// Parameters: QT (weight type), NW (warps per block), SL (lanes per row: 8, 16 or 32 put
// several rows in a warp; 64, 128 or 256 split a row over warps), U (pieces in flight per
// lane), GLU, MB (blocks per SM for the register budget).
#include "common.cuh"

#ifndef QT
#define QT T_Q4_K
#endif
#ifndef NW
#define NW 4
#endif
#ifndef SL
#define SL 32
#endif
#ifndef U
#define U 4
#endif
#ifndef GLU
#define GLU 0
#endif
#ifndef MB
#define MB (32 / NW) // blocks per SM the register budget must allow (8 x 4 warps: 64 registers)
#endif

#if QT == T_Q4_K || QT == T_Q5_K || QT == T_Q6_K
#define PE 32 // elements per piece
#define BE 256 // elements per block
#elif QT == T_Q4_0
#define PE 32
#define BE 32
#elif QT == T_Q8_0
#define PE 16
#define BE 32
#elif QT == T_F16 || QT == T_BF16
#define PE 8
#define BE 1
#else
#define PE 4
#define BE 1
#endif
#define PPB (BE >= PE ? BE / PE : 1) // pieces per block
#define QUANT (BE > 1)

#if SL > 32
#define KS (SL / 32) // warps per row
#define RPB (NW / KS) // rows per block
#define SLW 32
#else
#define RPB (NW * (32 / SL))
#define SLW SL
#endif

struct piece {
    uint4 q;  // 16 bytes of quantized (or raw) values
#if QT == T_Q4_K || QT == T_Q5_K || QT == T_Q6_K
    uint4 a;  // Q4_K/Q5_K: d, dmin, scales; Q6_K: the matching qh bytes
#endif
#if QT == T_Q5_K
    uint4 b;  // the matching qh bytes
#endif
#if QT == T_Q6_K
    int s0, s1;
#endif
#if QT == T_Q4_0 || QT == T_Q8_0 || QT == T_Q6_K
    u16 d;
#endif
};

// Piece t of the row whose first block is rb (its first byte for the float types).
__device__ __forceinline__ void ld_piece(qblk rb, int t, piece &p)
{
#if !QUANT
    p.q = *(const uint4 *)(rb.q + 16 * t);
#else
    int m = t % PPB;
    qblk b = qblock_next(QT, rb, t / PPB);
    p.q = *(const uint4 *)(b.q + 16 * m);
#if QT == T_Q4_K
    p.a = *(const uint4 *)b.h;
#elif QT == T_Q5_K
    p.a = *(const uint4 *)b.h;
    p.b = *(const uint4 *)(b.h + 16 + 16 * (m & 1));
#elif QT == T_Q6_K
    p.a = *(const uint4 *)(b.h + 32 * (m >> 2) + 16 * (m & 1));
    p.s0 = ((const i8 *)b.s)[8 * (m >> 2) + (m & 3)];
    p.s1 = ((const i8 *)b.s)[8 * (m >> 2) + (m & 3) + 4];
#endif
#if QT == T_Q4_0 || QT == T_Q8_0 || QT == T_Q6_K
    p.d = ld16(b.d);
#endif
#endif
}

__device__ __forceinline__ int dot16(u32 w0, u32 w1, u32 w2, u32 w3, int4 a)
{
    int s = dot4_i8((int)w0, a.x, 0);
    s = dot4_i8((int)w1, a.y, s);
    s = dot4_i8((int)w2, a.z, s);
    return dot4_i8((int)w3, a.w, s);
}

// 6-bit scale and min of sub-block j of a Q4_K/Q5_K header whose scale bytes are the words
// y, z, w (ggml's get_scale_min_k4 on registers)
__device__ __forceinline__ void kscale_w(int j, u32 y, u32 z, u32 w, int &sc, int &mn)
{
    if (j < 4) {
        int sh = 8 * j;
        sc = (int)((y >> sh) & 63);
        mn = (int)((z >> sh) & 63);
    } else {
        int sh = 8 * (j - 4);
        sc = (int)(((w >> sh) & 0xF) | (((y >> sh) >> 6 & 3) << 4));
        mn = (int)(((w >> sh) >> 4 & 0xF) | (((z >> sh) >> 6 & 3) << 4));
    }
}

// The dot of piece t with the activation
__device__ __forceinline__ float dot_piece(const piece &p, int t, const void *xa, const float *xd,
                                           const int *xs)
{
#if !QUANT
    const float *xf = (const float *)xa + PE * t;
#if QT == T_F32
    float4 x = *(const float4 *)xf;
    return __uint_as_float(p.q.x) * x.x + __uint_as_float(p.q.y) * x.y +
           __uint_as_float(p.q.z) * x.z + __uint_as_float(p.q.w) * x.w;
#else
    float4 x0 = ((const float4 *)xf)[0], x1 = ((const float4 *)xf)[1];
    u32 w[4] = {p.q.x, p.q.y, p.q.z, p.q.w};
    float f[8];
#pragma unroll
    for (int i = 0; i < 4; i++) {
#if QT == T_F16
        f[2 * i] = h2f((u16)(w[i] & 0xffff));
        f[2 * i + 1] = h2f((u16)(w[i] >> 16));
#else
        f[2 * i] = bf2f((u16)(w[i] & 0xffff));
        f[2 * i + 1] = bf2f((u16)(w[i] >> 16));
#endif
    }
    return f[0] * x0.x + f[1] * x0.y + f[2] * x0.z + f[3] * x0.w + f[4] * x1.x + f[5] * x1.y +
           f[6] * x1.z + f[7] * x1.w;
#endif
    (void)xd;
    (void)xs;
#else
    const i8 *xq = (const i8 *)xa;
    int m = t % PPB;
#if QT == T_Q8_0
    int e0 = PE * t;
    int4 a0 = *(const int4 *)(xq + e0);
    int s = dot16(p.q.x, p.q.y, p.q.z, p.q.w, a0);
    return xd[e0 >> 5] * h2f(p.d) * (float)s;
#elif QT == T_Q4_0
    int e0 = PE * t;
    int4 a0 = *(const int4 *)(xq + e0), a1 = *(const int4 *)(xq + e0 + 16);
    const u32 o = 0x08080808u, mk = 0x0F0F0F0Fu;
    int s = dot16(vsub4(p.q.x & mk, o), vsub4(p.q.y & mk, o), vsub4(p.q.z & mk, o),
                  vsub4(p.q.w & mk, o), a0);
    s += dot16(vsub4((p.q.x >> 4) & mk, o), vsub4((p.q.y >> 4) & mk, o),
               vsub4((p.q.z >> 4) & mk, o), vsub4((p.q.w >> 4) & mk, o), a1);
    return xd[e0 >> 5] * h2f(p.d) * (float)s;
#elif QT == T_Q4_K || QT == T_Q5_K
    int pr = m >> 1, e0 = BE * (t / PPB) + 64 * pr + 16 * (m & 1);
    int4 a0 = *(const int4 *)(xq + e0), a1 = *(const int4 *)(xq + e0 + 32);
    const u32 mk = 0x0F0F0F0Fu;
    u32 l0 = p.q.x & mk, l1 = p.q.y & mk, l2 = p.q.z & mk, l3 = p.q.w & mk;
    u32 h0 = (p.q.x >> 4) & mk, h1 = (p.q.y >> 4) & mk, h2 = (p.q.z >> 4) & mk,
        h3 = (p.q.w >> 4) & mk;
#if QT == T_Q5_K
    const u32 b1 = 0x01010101u;
    int j0 = 2 * pr, j1 = j0 + 1;
    l0 |= ((p.b.x >> j0) & b1) << 4;
    l1 |= ((p.b.y >> j0) & b1) << 4;
    l2 |= ((p.b.z >> j0) & b1) << 4;
    l3 |= ((p.b.w >> j0) & b1) << 4;
    h0 |= ((p.b.x >> j1) & b1) << 4;
    h1 |= ((p.b.y >> j1) & b1) << 4;
    h2 |= ((p.b.z >> j1) & b1) << 4;
    h3 |= ((p.b.w >> j1) & b1) << 4;
#endif
    int d0 = dot16(l0, l1, l2, l3, a0), d1 = dot16(h0, h1, h2, h3, a1);
    int sc0, mn0, sc1, mn1;
    kscale_w(2 * pr, p.a.y, p.a.z, p.a.w, sc0, mn0);
    kscale_w(2 * pr + 1, p.a.y, p.a.z, p.a.w, sc1, mn1);
    int s0 = xs[e0 >> 4], s1 = xs[(e0 + 32) >> 4];
    return xd[e0 >> 5] * (h2f((u16)(p.a.x & 0xffff)) * (float)(sc0 * d0 + sc1 * d1) -
                          h2f((u16)(p.a.x >> 16)) * (float)(mn0 * s0 + mn1 * s1));
#else // Q6_K
    int mm = m & 3, e0 = BE * (t / PPB) + 128 * (m >> 2) + 16 * mm;
    int4 a0 = *(const int4 *)(xq + e0), a1 = *(const int4 *)(xq + e0 + 64);
    const u32 mk = 0x0F0F0F0Fu, m2 = 0x03030303u, o = 0x20202020u;
    int sh = 2 * (mm >> 1);
    u32 l0 = vsub4((p.q.x & mk) | (((p.a.x >> sh) & m2) << 4), o);
    u32 l1 = vsub4((p.q.y & mk) | (((p.a.y >> sh) & m2) << 4), o);
    u32 l2 = vsub4((p.q.z & mk) | (((p.a.z >> sh) & m2) << 4), o);
    u32 l3 = vsub4((p.q.w & mk) | (((p.a.w >> sh) & m2) << 4), o);
    u32 h0 = vsub4(((p.q.x >> 4) & mk) | (((p.a.x >> (sh + 4)) & m2) << 4), o);
    u32 h1 = vsub4(((p.q.y >> 4) & mk) | (((p.a.y >> (sh + 4)) & m2) << 4), o);
    u32 h2 = vsub4(((p.q.z >> 4) & mk) | (((p.a.z >> (sh + 4)) & m2) << 4), o);
    u32 h3 = vsub4(((p.q.w >> 4) & mk) | (((p.a.w >> (sh + 4)) & m2) << 4), o);
    int s = p.s0 * dot16(l0, l1, l2, l3, a0) + p.s1 * dot16(h0, h1, h2, h3, a1);
    (void)xs;
    return xd[e0 >> 5] * h2f(p.d) * (float)s;
#endif
#endif
}

// The dot of row r of W (N blocks) with the activation, over this lane's pieces
__device__ __forceinline__ float row_dot(const u8 *W, i64 N, i64 r, int k, int sl, const void *xa,
                                         const float *xd, const int *xs)
{
    const int P = k / PE;
#if QUANT
    qblk rb = qblock(QT, W, N, r * (k / BE));
#else
    qblk rb = {W + r * k * (16 / PE), W, W, W};
    (void)N;
#endif
    float acc = 0.0f;
#pragma unroll 1
    for (int t0 = sl; t0 < P; t0 += SL * U) {
        piece p[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            if (t0 + SL * u < P)
                ld_piece(rb, t0 + SL * u, p[u]);
#pragma unroll
        for (int u = 0; u < U; u++)
            if (t0 + SL * u < P)
                acc += dot_piece(p[u], t0 + SL * u, xa, xd, xs);
    }
    return acc;
}

// The row's sum over its SL lanes, in the lane with sl == 0 (all lanes of the block call it)
__device__ __forceinline__ float row_sum(float v, float *part)
{
    v = wave_sum<SLW>(v);
#if SL > 32
    int warp = threadIdx.x >> 5;
    if ((threadIdx.x & 31) == 0)
        part[warp] = v;
    __syncthreads();
    v = 0.0f;
#pragma unroll
    for (int j = 0; j < KS; j++)
        v += part[warp - warp % KS + j];
#else
    (void)part;
#endif
    return v;
}

extern "C" __global__ void __launch_bounds__(NW * 32, MB)
mvd(const u8 *W0, const u8 *W1, const u8 *W2, const void *xa, const float *xd, const int *xs,
    float *y0, float *y1, float *y2, const float *b0, const float *b1, const float *b2,
    const float *res, float rscale, int r0, int r1, int r2, int k)
{
    __shared__ float part[NW * 2];
#if SL > 32
    int warp = threadIdx.x >> 5;
    int row = blockIdx.x * RPB + warp / KS, sl = (warp % KS) * 32 + (threadIdx.x & 31);
#else
    int row = blockIdx.x * RPB + threadIdx.x / SL, sl = threadIdx.x % SL;
#endif
    const int nbr = QUANT ? k / BE : k;
#if GLU
    bool active = row < r0;
    i64 N = (i64)r0 * nbr;
    float g = 0.0f, u = 0.0f;
    if (active) {
        g = row_dot(W0, N, row, k, sl, xa, xd, xs);
        u = row_dot(W1, N, row, k, sl, xa, xd, xs);
    }
    g = row_sum(g, part);
    u = row_sum(u, part + NW);
    if (active && sl == 0) {
        if (b0)
            g += b0[row];
        if (b1)
            u += b1[row];
        y0[row] = silu_f(g) * u;
    }
    (void)W2, (void)y1, (void)y2, (void)b2, (void)res, (void)rscale, (void)r1, (void)r2;
#else
    const u8 *W = W0;
    float *y = y0;
    const float *bias = b0;
    int nrows = r0;
    bool active = true;
    if (row >= r0) {
        row -= r0;
        W = W1, y = y1, bias = b1, nrows = r1;
        if (row >= r1) {
            row -= r1;
            W = W2, y = y2, bias = b2, nrows = r2;
            active = row < r2;
        }
    }
    float v = 0.0f;
    if (active)
        v = row_dot(W, (i64)nrows * nbr, row, k, sl, xa, xd, xs);
    v = row_sum(v, part);
    if (active && sl == 0) {
        if (bias)
            v += bias[row];
        y[row] = res ? res[row] + v * rscale : v;
    }
#endif
}
