// mmt.cu: prompt-batch matrix products on the tensor cores, y[t][r] = sum_k x[t][k] W[r][k].
// A block computes 64 weight rows x 64 tokens: per step of 64 along k it stages the weight tile
// (W planar, gpu/layout.h) and the activation tile in shared memory and runs mma.sync on them,
// quantized weights 4 warps of 32 rows x 32 tokens, F16 / BF16 8 warps of 32 rows x 16 tokens.
// The activation is what the CPU backend (and ggml) multiplies the same weights with, so both
// round alike: for quantized weights the integer weight values and the int8 activations of
// quant_act (modes 0 and 1), multiplied as integers (int8 mma), each block's exact integer
// product then scaled by the row's and the token's scales less the min term (K formats, with
// quant_act's sums of 16); for F16 weights floats rounded to F16, for BF16 weights to BF16
// (F32 accumulate). F32 weights do not come here.
// Epilogue as matvec.cu: bias, residual add (y = res + rscale * acc), up to three weights that
// read the same activation (each a multiple of 64 rows but the last), or with GLU the gate and
// up tiles together and the SwiGLU output.
// Parameters: QT (weight type), GLU, MB (F16 / BF16: blocks per SM the registers must allow).
#include "common.cuh"

#ifndef QT
#define QT T_Q4_K
#endif
#ifndef GLU
#define GLU 0
#endif
#ifndef MB
#define MB 2
#endif
#define BM 64 // weight rows per block
#define BN 64 // tokens per block
#define KT 64 // k per step
#define LD 72 // shared row stride in halves
#define QACT (QT != T_F16 && QT != T_BF16) // int8 activations with per-32 scales
#if QACT // 4 warps of 32 rows x 32 tokens (of each weight tile)
#define NT 128
#define NJ 4
#define WROW(w) (((w) >> 1) * 32)
#define WTOK(w) (((w) & 1) * 32)
#else // F16 / BF16: 8 warps of 32 rows x 16 tokens
#define NT 256
#define NJ 2
#define WROW(w) (((w) >> 2) * 32)
#define WTOK(w) (((w) & 3) * 16)
#endif
#define NWT (GLU ? 2 : 1) // weight tiles

// Elements [e0, e0 + 32) of row r of W (F16 or BF16) as 16 pairs
__device__ __forceinline__ void deq32(const u8 *W, int r, int k, int e0, u32 *o)
{
    const uint4 *p = (const uint4 *)((const u16 *)W + (i64)r * k + e0);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        uint4 u = p[i];
        o[4 * i] = u.x, o[4 * i + 1] = u.y, o[4 * i + 2] = u.z, o[4 * i + 3] = u.w;
    }
}

// a warp's accumulators: weight tiles x 2 row halves x NJ token groups x 4 values
template <typename E> __device__ __forceinline__ void zero_tiles(E (*a)[2][NJ][4])
{
#pragma unroll
    for (int g = 0; g < NWT; g++)
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int j = 0; j < NJ; j++)
#pragma unroll
                for (int c = 0; c < 4; c++)
                    a[g][i][j][c] = 0;
}

#if QACT
// ---- quantized weights: int8 tiles, integer tensor-core products --------------------------
// The weight tile holds the integer weight values (Q4_0: q - 8; Q4_K: q; Q5_K: q with its
// fifth bit; Q6_K: q - 32; Q8_0: q), all within int8, and the activation tile quant_act's int8
// values: mma.sync m16n8k32 (Q6_K, with a scale per 16: m16n8k16) gives each block's exact
// integer product, then scaled by the weight row's and the token's scales less the min term.
#define LQ 80 // shared row stride in bytes (64 + 16: a warp's fragment loads hit 32 banks)
#define SB (QT == T_Q6_K ? 16 : 32) // elements per weight scale
#define KMIN (QT == T_Q4_K || QT == T_Q5_K) // a min term per 32 (the K formats with mins)
#define NSB (KT / SB)               // weight scales per row and step

// Elements [e0, e0 + 32) of row r of W (N blocks in all) as 32 int8 in o[8] (e0 % 32 == 0),
// with the scale of each SB and (K formats) the min: w = sw * q - mw.
__device__ __forceinline__ void deq32i(const u8 *W, i64 N, int r, int k, int e0, u32 *o,
                                       float *sw, float *mw)
{
    const u32 m4 = 0x0F0F0F0Fu; // (Q8_0 needs no nibble mask)
    (void)m4;
    mw[0] = mw[1] = 0.0f;
#if QT == T_Q8_0 || QT == T_Q4_0
    qblk b = qblock(QT, W, N, (i64)r * (k / 32) + e0 / 32);
    sw[0] = sw[1] = h2f(ld16(b.d));
#if QT == T_Q8_0
    uint4 u0 = *(const uint4 *)b.q, u1 = *(const uint4 *)(b.q + 16);
    o[0] = u0.x, o[1] = u0.y, o[2] = u0.z, o[3] = u0.w;
    o[4] = u1.x, o[5] = u1.y, o[6] = u1.z, o[7] = u1.w;
#else
    uint4 u = *(const uint4 *)b.q;
    u32 w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        o[i] = vsub4(w[i] & m4, 0x08080808u);
        o[i + 4] = vsub4((w[i] >> 4) & m4, 0x08080808u);
    }
#endif
#elif QT == T_Q4_K || QT == T_Q5_K
    qblk b = qblock(QT, W, N, (i64)r * (k / 256) + e0 / 256);
    int j = (e0 % 256) / 32, sc, mn;
    kscale(j, b.h + 4, &sc, &mn);
    sw[0] = sw[1] = h2f(ld16(b.h)) * (float)sc;
    mw[0] = mw[1] = h2f(ld16(b.h + 2)) * (float)mn;
    const u8 *qs = b.q + 32 * (j >> 1);
    uint4 u0 = *(const uint4 *)qs, u1 = *(const uint4 *)(qs + 16);
    u32 w[8] = {u0.x, u0.y, u0.z, u0.w, u1.x, u1.y, u1.z, u1.w};
    int sh = 4 * (j & 1);
#if QT == T_Q5_K
    uint4 h0 = *(const uint4 *)(b.h + 16), h1 = *(const uint4 *)(b.h + 32);
    u32 hb[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
#endif
#pragma unroll
    for (int i = 0; i < 8; i++) {
        o[i] = (w[i] >> sh) & m4;
#if QT == T_Q5_K
        o[i] |= ((hb[i] >> j) & 0x01010101u) << 4;
#endif
    }
#else // Q6_K
    qblk b = qblock(QT, W, N, (i64)r * (k / 256) + e0 / 256);
    int e = e0 % 256, h = e / 128, qu = (e % 128) / 32;
    const u8 *ql = b.q + 64 * h + ((qu & 1) ? 32 : 0), *qh = b.h + 32 * h;
    const i8 *sc = (const i8 *)b.s + 8 * h + 2 * qu;
    float d = h2f(ld16(b.d));
    sw[0] = d * (float)sc[0];
    sw[1] = d * (float)sc[1];
    uint4 l0 = *(const uint4 *)ql, l1 = *(const uint4 *)(ql + 16);
    uint4 g0 = *(const uint4 *)qh, g1 = *(const uint4 *)(qh + 16);
    u32 lw[8] = {l0.x, l0.y, l0.z, l0.w, l1.x, l1.y, l1.z, l1.w};
    u32 hw[8] = {g0.x, g0.y, g0.z, g0.w, g1.x, g1.y, g1.z, g1.w};
    int sl = qu >= 2 ? 4 : 0, shh = 2 * qu;
#pragma unroll
    for (int i = 0; i < 8; i++)
        o[i] = vsub4(((lw[i] >> sl) & m4) | (((hw[i] >> shh) & 0x03030303u) << 4), 0x20202020u);
#endif
}

// D += A B over k 32 (a: 4 registers, b: 2) or k 16 (a: 2, b: 1), int8 in, int32 out
__device__ __forceinline__ void mma_s8_k32(int *c, const u32 *a, const u32 *b)
{
#if !BRASA_HIP
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    (void)c, (void)a, (void)b;
#endif
}
__device__ __forceinline__ void mma_s8_k16(int *c, const u32 *a, u32 b)
{
#if !BRASA_HIP
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, "
                 "{%4,%5}, {%6}, {%0,%1,%2,%3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b));
#else
    (void)c, (void)a, (void)b;
#endif
}

// The block's products over all of k, into acc
__device__ __forceinline__ void tile_products(const u8 *W, const u8 *Wu, i64 N, int nrows,
                                              int row0, int t0, int k, int T, const float *xf,
                                              const i8 *xq, const float *xd, const int *xsum,
                                              float (*acc)[2][NJ][4])
{
    __shared__ __align__(16) u8 ws[NWT][BM * LQ];
    __shared__ __align__(16) u8 xs[BN * LQ];
    __shared__ float wsw[NWT][BM][NSB], sd[BN][KT / 32];
#if KMIN // the weight rows' mins, the tokens' scaled sums
    __shared__ float wmw[NWT][BM][KT / 32], sa[BN][KT / 32];
#endif
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = WROW(warp), wn = WTOK(warp); // the warp's rows and tokens
    const int lr = tid >> 1, lh = (tid & 1) * 32;          // this thread's load row and half
    const int g4 = lane >> 2, t4 = lane & 3;               // fragment row / column group
    for (int kk = 0; kk < k; kk += KT) {
        { // weight tiles: row lr, elements kk + lh .. +32 (rows past the end repeat the last)
            int r = min(row0 + lr, nrows - 1);
#pragma unroll
            for (int g = 0; g < NWT; g++) {
                u32 o[8];
                float sw[2], mw[2];
                deq32i(g ? Wu : W, N, r, k, kk + lh, o, sw, mw);
                uint4 *dst = (uint4 *)&ws[g][lr * LQ + lh];
                dst[0] = make_uint4(o[0], o[1], o[2], o[3]);
                dst[1] = make_uint4(o[4], o[5], o[6], o[7]);
#if SB == 16
                wsw[g][lr][lh / 16] = sw[0];
                wsw[g][lr][lh / 16 + 1] = sw[1];
#else
                wsw[g][lr][lh / 32] = sw[0];
#endif
#if KMIN
                wmw[g][lr][lh / 32] = mw[0];
#endif
            }
        }
        { // activation tile: token lr, elements kk + lh .. +32 (zeros past the last token)
            int t = t0 + lr;
            uint4 *dst = (uint4 *)&xs[lr * LQ + lh];
            if (t < T) {
                const uint4 *src = (const uint4 *)(xq + (i64)t * k + kk + lh);
                dst[0] = src[0];
                dst[1] = src[1];
                float dx = xd[(i64)t * (k / 32) + (kk + lh) / 32];
                sd[lr][lh / 32] = dx;
#if KMIN
                const int *s16 = xsum + (i64)t * (k / 16) + (kk + lh) / 16;
                sa[lr][lh / 32] = dx * (float)(s16[0] + s16[1]);
#endif
            } else {
                dst[0] = dst[1] = make_uint4(0, 0, 0, 0);
                sd[lr][lh / 32] = 0.0f;
#if KMIN
                sa[lr][lh / 32] = 0.0f;
#endif
            }
        }
        __syncthreads();
#pragma unroll
        for (int ks = 0; ks < KT; ks += 32) {
            const int q32 = ks / 32;
            u32 bf[4][2];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const u8 *xp = &xs[(wn + j * 8 + g4) * LQ + ks + 4 * t4];
                bf[j][0] = *(const u32 *)xp;
                bf[j][1] = *(const u32 *)(xp + 16);
            }
#pragma unroll
            for (int g = 0; g < NWT; g++)
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    const int rr = wm + i * 16 + g4; // rows of c0, c1 (and + 8: c2, c3)
                    const u8 *wp = &ws[g][rr * LQ + ks + 4 * t4];
                    u32 af[4] = {*(const u32 *)wp, *(const u32 *)(wp + 8 * LQ),
                                 *(const u32 *)(wp + 16), *(const u32 *)(wp + 8 * LQ + 16)};
#pragma unroll
                    for (int h = 0; h < 32 / SB; h++) { // Q6_K: the two halves' scales
                        const int sb = (ks + SB * h) / SB;
                        const float sa0 = wsw[g][rr][sb], sb8 = wsw[g][rr + 8][sb];
#if KMIN
                        const float ma = wmw[g][rr][q32], mb = wmw[g][rr + 8][q32];
#endif
#pragma unroll
                        for (int j = 0; j < 4; j++) {
                            int c[4] = {0, 0, 0, 0};
#if SB == 16
                            u32 ah[2] = {af[2 * h], af[2 * h + 1]};
                            mma_s8_k16(c, ah, bf[j][h]);
#else
                            mma_s8_k32(c, af, bf[j]);
#endif
                            const int tc = wn + j * 8 + 2 * t4; // tokens of c0 (c2), c1 (c3)
                            const float x0 = sd[tc][q32], x1 = sd[tc + 1][q32];
                            float *a = acc[g][i][j];
                            a[0] += (float)c[0] * (sa0 * x0);
                            a[1] += (float)c[1] * (sa0 * x1);
                            a[2] += (float)c[2] * (sb8 * x0);
                            a[3] += (float)c[3] * (sb8 * x1);
#if KMIN
                            const float m0 = sa[tc][q32], m1 = sa[tc + 1][q32];
                            a[0] -= ma * m0;
                            a[1] -= ma * m1;
                            a[2] -= mb * m0;
                            a[3] -= mb * m1;
#endif
                        }
                    }
                }
        }
        __syncthreads();
    }
    (void)xf, (void)xsum; // (xsum: the K formats' min terms only)
}

#else
// ---- F16 / BF16 weights ----------------------------------------------------------------
// The block's products over all of k, into acc
__device__ __forceinline__ void tile_products(const u8 *W, const u8 *Wu, i64 N, int nrows,
                                              int row0, int t0, int k, int T, const float *xf,
                                              const i8 *xq, const float *xd, const int *xsum,
                                              float (*acc)[2][NJ][4])
{
    __shared__ __align__(16) u16 ws[NWT][BM * LD];
    __shared__ __align__(16) u16 xs[BN * LD];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = WROW(warp), wn = WTOK(warp); // the warp's rows and tokens
    for (int kk = 0; kk < k; kk += KT) {
        // weight tiles, then the activation tile: 128 jobs each, row (or token) lr,
        // elements kk + lh .. +32
        for (int job = tid; job < (NWT + 1) * 128; job += NT) {
            const int g = job >> 7, lr = (job & 127) >> 1, lh = (job & 1) * 32;
            if (g < NWT) { // (rows past the end repeat the last)
                int r = min(row0 + lr, nrows - 1);
                u32 o[16];
                deq32(g ? Wu : W, r, k, kk + lh, o);
                u32 *dst = (u32 *)&ws[g][lr * LD + lh];
#pragma unroll
                for (int i = 0; i < 16; i++)
                    dst[i] = o[i];
            } else { // (zeros past the last token)
                int t = t0 + lr;
                u32 *dst = (u32 *)&xs[lr * LD + lh];
                if (t < T) {
                    const float4 *src = (const float4 *)(xf + (i64)t * k + kk + lh);
#pragma unroll
                    for (int i = 0; i < 8; i++) {
                        float4 f = src[i];
#if QT == T_BF16
                        dst[2 * i] = (u32)f2bf(f.x) | ((u32)f2bf(f.y) << 16);
                        dst[2 * i + 1] = (u32)f2bf(f.z) | ((u32)f2bf(f.w) << 16);
#else
                        dst[2 * i] = (u32)f2h(f.x) | ((u32)f2h(f.y) << 16);
                        dst[2 * i + 1] = (u32)f2h(f.z) | ((u32)f2h(f.w) << 16);
#endif
                    }
                } else {
#pragma unroll
                    for (int i = 0; i < 16; i++)
                        dst[i] = 0;
                }
            }
        }
        __syncthreads();
#pragma unroll 1
        for (int ks = 0; ks < KT; ks += 16) {
            int kc = ks + (lane & 3) * 2;
            u32 bf[NJ][2];
#pragma unroll
            for (int j = 0; j < NJ; j++) {
                const u16 *xp = &xs[(wn + j * 8 + (lane >> 2)) * LD + kc];
                bf[j][0] = *(const u32 *)xp;
                bf[j][1] = *(const u32 *)(xp + 8);
            }
#pragma unroll
            for (int g = 0; g < NWT; g++)
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    const u16 *wp = &ws[g][(wm + i * 16 + (lane >> 2)) * LD + kc];
                    u32 af[4] = {*(const u32 *)wp, *(const u32 *)(wp + 8 * LD),
                                 *(const u32 *)(wp + 8), *(const u32 *)(wp + 8 * LD + 8)};
#pragma unroll
                    for (int j = 0; j < NJ; j++)
                        mma_16816<QT == T_BF16>(acc[g][i][j], af, bf[j][0], bf[j][1]);
                }
        }
        __syncthreads();
    }
    (void)N, (void)xq, (void)xd, (void)xsum;
}

#endif

// Grid (ceil(T / BN), row tiles); block NT. Quantized tiles name no blocks per SM: with a
// minimum of 3 the compiler chose as many registers (160-168) but 7B Q4_K_M pp512 fell from
// 7,562 to 6,295 and Q8_0 from 10,687 to 8,138 (measured on the same machine).
#if QACT
extern "C" __global__ void __launch_bounds__(NT)
#else
extern "C" __global__ void __launch_bounds__(NT, MB)
#endif
mmt(const u8 *W0, const u8 *W1, const u8 *W2, const float *xf, const i8 *xq, const float *xd,
    const int *xsum, float *y0, float *y1, float *y2,
    const float *b0, const float *b1, const float *b2, const float *res, float rscale, int r0,
    int r1, int r2, int k, int T)
{
    pdl_wait();
    pdl_launch();
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int t0 = blockIdx.x * BN, row0 = blockIdx.y * BM;
    const u8 *W = W0, *Wu = W1;
    float *y = y0;
    const float *bias = b0;
    int nrows = r0;
#if !GLU
    wpick pk = pick_weight(row0, W0, W1, W2, y0, y1, y2, b0, b1, b2, r0, r1, r2);
    W = pk.W, y = pk.y, bias = pk.bias, nrows = pk.rows;
#endif
    if (row0 >= nrows)
        return;
    float acc[NWT][2][NJ][4];
    zero_tiles(acc);
    int wm = WROW(warp), wn = WTOK(warp); // the warp's rows and tokens in the tile
    i64 N = (i64)nrows * (k / qblock_elems(QT));
    tile_products(W, Wu, N, nrows, row0, t0, k, T, xf, xq, xd, xsum, acc);
    // C fragment: c0, c1 at (row lane / 4, tokens 2 (lane % 4) + 0, 1); c2, c3 at row + 8
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < NJ; j++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                int r = row0 + wm + i * 16 + (lane >> 2) + (c >= 2 ? 8 : 0);
                int t = t0 + wn + j * 8 + (lane & 3) * 2 + (c & 1);
                if (r >= nrows || t >= T)
                    continue;
                float v = acc[0][i][j][c];
                i64 o = (i64)t * nrows + r;
#if GLU
                float u = acc[1][i][j][c];
                if (b0)
                    v += b0[r];
                if (b1)
                    u += b1[r];
                y[o] = silu_f(v) * u;
                (void)bias, (void)res, (void)rscale;
#else
                if (bias)
                    v += bias[r];
                y[o] = res ? res[o] + v * rscale : v;
#endif
            }
}
