// mmt.cu: prompt-batch matrix products on the tensor cores, y[t][r] = sum_k x[t][k] W[r][k].
// A block computes 64 weight rows x 64 tokens. Per step of 64 along k it dequantizes the
// weight tile in shared memory (W planar, gpu/layout.h), stages the activation tile and runs
// mma.sync m16n8k16 (F32 accumulate): 4 warps, each 32 rows x 32 tokens. Rows are padded to
// 72 halves in shared memory so the fragment loads of a warp hit 32 different banks.
// The activation is what the CPU backend (and ggml) multiplies the same weights with, so both
// round alike: for quantized weights the integer weight values and the int8 activations of
// quant_act (modes 0 and 1), both exact in F16, so each 16-wide block's product is an exact
// integer, then scaled by the row's and the token's scales less the min term (K formats, with
// quant_act's sums of 16); for F16 weights floats rounded to F16, for BF16 weights to BF16
// (the BF16 mma). F32 weights do not come here.
// Epilogue as matvec.cu: bias, residual add (y = res + rscale * acc), up to three weights that
// read the same activation (each a multiple of 64 rows but the last), or with GLU the gate and
// up tiles together and the SwiGLU output.
// Parameters: QT (weight type), GLU.
#include "common.cuh"

#ifndef QT
#define QT T_Q4_K
#endif
#ifndef GLU
#define GLU 0
#endif
#define BM 64 // weight rows per block
#define BN 64 // tokens per block
#define KT 64 // k per step
#define LD 72 // shared row stride in halves
#define NWT (GLU ? 2 : 1) // weight tiles
#define QACT (QT != T_F16 && QT != T_BF16) // int8 activations with per-32 scales

// Elements [e0, e0 + 32) of row r of W (N blocks in all) as 16 pairs of F16 (e0 % 32 == 0).
// Quantized weights give their integer values (exact in F16) and, for each 16-wide half, the
// scale and the min that turn them into weights: w = sw * q - mw.
__device__ __forceinline__ void deq32(const u8 *W, i64 N, int r, int k, int e0, u32 *o,
                                      float *sw, float *mw)
{
    float v[32];
    sw[0] = sw[1] = 1.0f;
    mw[0] = mw[1] = 0.0f;
#if QT == T_F32 || QT == T_F16 || QT == T_BF16
    (void)N;
#pragma unroll
    for (int i = 0; i < 32; i++) {
        i64 idx = (i64)r * k + e0 + i;
#if QT == T_F32
        v[i] = ((const float *)W)[idx];
#elif QT == T_F16
        v[i] = h2f(((const u16 *)W)[idx]);
#else
        v[i] = bf2f(((const u16 *)W)[idx]);
#endif
    }
#elif QT == T_Q4_0 || QT == T_Q8_0
    qblk b = qblock(QT, W, N, (i64)r * (k / 32) + e0 / 32);
    sw[0] = sw[1] = h2f(ld16(b.d));
#if QT == T_Q8_0
    const i8 *q = (const i8 *)b.q;
#pragma unroll
    for (int i = 0; i < 32; i++)
        v[i] = (float)q[i];
#else
#pragma unroll
    for (int i = 0; i < 16; i++) {
        int q = b.q[i];
        v[i] = (float)((q & 0xF) - 8);
        v[i + 16] = (float)((q >> 4) - 8);
    }
#endif
#elif QT == T_Q4_K || QT == T_Q5_K
    qblk b = qblock(QT, W, N, (i64)r * (k / 256) + e0 / 256);
    int j = (e0 % 256) / 32, sc, mn;
    kscale(j, b.h + 4, &sc, &mn);
    sw[0] = sw[1] = h2f(ld16(b.h)) * (float)sc;
    mw[0] = mw[1] = h2f(ld16(b.h + 2)) * (float)mn;
    const u8 *qs = b.q + 32 * (j >> 1);
#pragma unroll
    for (int i = 0; i < 32; i++) {
        int q = (j & 1) ? (qs[i] >> 4) : (qs[i] & 0xF);
#if QT == T_Q5_K
        q += ((b.h[16 + i] >> j) & 1) << 4;
#endif
        v[i] = (float)q;
    }
#else // Q6_K
    qblk b = qblock(QT, W, N, (i64)r * (k / 256) + e0 / 256);
    int e = e0 % 256, h = e / 128, qu = (e % 128) / 32;
    const u8 *ql = b.q + 64 * h + ((qu & 1) ? 32 : 0), *qh = b.h + 32 * h;
    const i8 *sc = (const i8 *)b.s + 8 * h + 2 * qu;
    float d = h2f(ld16(b.d));
    sw[0] = d * (float)sc[0];
    sw[1] = d * (float)sc[1];
#pragma unroll
    for (int i = 0; i < 32; i++) {
        int lo = qu >= 2 ? (ql[i] >> 4) : (ql[i] & 0xF);
        v[i] = (float)((lo | (((qh[i] >> (2 * qu)) & 3) << 4)) - 32);
    }
#endif
#pragma unroll
    for (int i = 0; i < 16; i++)
#if QT == T_BF16
        o[i] = (u32)f2bf(v[2 * i]) | ((u32)f2bf(v[2 * i + 1]) << 16);
#else
        o[i] = (u32)f2h(v[2 * i]) | ((u32)f2h(v[2 * i + 1]) << 16);
#endif
}

// a warp's accumulators: weight tiles x 2 row halves x 4 token groups x 4 values
__device__ __forceinline__ void zero_tiles(float (*a)[2][4][4])
{
#pragma unroll
    for (int g = 0; g < NWT; g++)
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int c = 0; c < 4; c++)
                    a[g][i][j][c] = 0.0f;
}

__device__ __forceinline__ void mma16816(float *c, const u32 *a, const u32 *b)
{
#if !BRASA_HIP && QT == T_BF16
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif !BRASA_HIP
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    (void)c, (void)a, (void)b;
#endif
}

// Grid (ceil(T / BN), row tiles); block 128.
extern "C" __global__ void __launch_bounds__(128)
mmt(const u8 *W0, const u8 *W1, const u8 *W2, const float *xf, const i8 *xq, const float *xd,
    const int *xsum, float *y0, float *y1, float *y2,
    const float *b0, const float *b1, const float *b2, const float *res, float rscale, int r0,
    int r1, int r2, int k, int T)
{
    __shared__ __align__(16) u16 ws[NWT][BM * LD];
    __shared__ __align__(16) u16 xs[BN * LD];
#if QACT // per 16-wide block of the step: weight rows' scales and mins, tokens' scales and
         // scaled sums (for the mins)
    __shared__ float wsw[NWT][BM][KT / 16], wmw[NWT][BM][KT / 16];
    __shared__ float sd[BN][KT / 16], sa[BN][KT / 16];
#endif
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
    i64 N = (i64)nrows * (k / qblock_elems(QT));
    float acc[NWT][2][4][4];
    zero_tiles(acc);
    int wm = (warp >> 1) * 32, wn = (warp & 1) * 32; // the warp's rows and tokens in the tile
    int lr = tid >> 1, lh = (tid & 1) * 32;           // this thread's load row and half
    for (int kk = 0; kk < k; kk += KT) {
        // weight tiles: row lr, elements kk + lh .. +32 (rows past the end repeat the last)
        {
            int r = min(row0 + lr, nrows - 1);
            u32 o[16];
            float sw[2], mw[2];
#pragma unroll
            for (int g = 0; g < NWT; g++) {
                deq32(g ? Wu : W, N, r, k, kk + lh, o, sw, mw);
                u32 *dst = (u32 *)&ws[g][lr * LD + lh];
#pragma unroll
                for (int i = 0; i < 16; i++)
                    dst[i] = o[i];
#if QACT
                wsw[g][lr][lh / 16] = sw[0];
                wsw[g][lr][lh / 16 + 1] = sw[1];
                wmw[g][lr][lh / 16] = mw[0];
                wmw[g][lr][lh / 16 + 1] = mw[1];
#endif
            }
        }
        // activation tile: token lr, elements kk + lh .. +32 (zeros past the last token)
        {
            int t = t0 + lr;
            u32 *dst = (u32 *)&xs[lr * LD + lh];
            if (t < T) {
#if QACT
                const int4 *src = (const int4 *)(xq + (i64)t * k + kk + lh);
                int4 a0 = src[0], a1 = src[1];
                int aw[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    u32 w = (u32)aw[i];
                    dst[2 * i] = (u32)f2h((float)(i8)(w & 0xff)) |
                                 ((u32)f2h((float)(i8)((w >> 8) & 0xff)) << 16);
                    dst[2 * i + 1] = (u32)f2h((float)(i8)((w >> 16) & 0xff)) |
                                     ((u32)f2h((float)(i8)(w >> 24)) << 16);
                }
                float dx = xd[(i64)t * (k / 32) + (kk + lh) / 32];
                sd[lr][lh / 16] = sd[lr][lh / 16 + 1] = dx;
#if QT == T_Q4_K || QT == T_Q5_K
                sa[lr][lh / 16] = dx * (float)xsum[(i64)t * (k / 16) + (kk + lh) / 16];
                sa[lr][lh / 16 + 1] = dx * (float)xsum[(i64)t * (k / 16) + (kk + lh) / 16 + 1];
#else
                sa[lr][lh / 16] = sa[lr][lh / 16 + 1] = 0.0f;
#endif
#else
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
#endif
            } else {
#pragma unroll
                for (int i = 0; i < 16; i++)
                    dst[i] = 0;
#if QACT
                sd[lr][lh / 16] = sd[lr][lh / 16 + 1] = 0.0f;
                sa[lr][lh / 16] = sa[lr][lh / 16 + 1] = 0.0f;
#endif
            }
        }
        __syncthreads();
        // each 16-wide block of k: its products (integers, exact, for quantized weights), then
        // scaled by the weight row's and the token's scales, less the min term
#pragma unroll 1
        for (int ks = 0; ks < KT; ks += 16) {
#if QACT
            float tmp[NWT][2][4][4];
            zero_tiles(tmp);
#define TACC tmp
#else
#define TACC acc
#endif
            int kc = ks + (lane & 3) * 2;
            u32 bf[4][2];
#pragma unroll
            for (int j = 0; j < 4; j++) {
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
                    for (int j = 0; j < 4; j++)
                        mma16816(TACC[g][i][j], af, bf[j]);
                }
#undef TACC
#if QACT
            int q16 = ks / 16;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                int tc = wn + j * 8 + (lane & 3) * 2; // tokens of c0 (and c2), c1 (and c3)
                float x0 = sd[tc][q16], x1 = sd[tc + 1][q16];
                float a0 = sa[tc][q16], a1 = sa[tc + 1][q16];
#pragma unroll
                for (int g = 0; g < NWT; g++)
#pragma unroll
                    for (int i = 0; i < 2; i++) {
                        int rr = wm + i * 16 + (lane >> 2); // rows of c0, c1 (and + 8: c2, c3)
                        float sa_ = wsw[g][rr][q16], sb = wsw[g][rr + 8][q16];
                        float ma = wmw[g][rr][q16], mb = wmw[g][rr + 8][q16];
                        acc[g][i][j][0] += tmp[g][i][j][0] * sa_ * x0 - ma * a0;
                        acc[g][i][j][1] += tmp[g][i][j][1] * sa_ * x1 - ma * a1;
                        acc[g][i][j][2] += tmp[g][i][j][2] * sb * x0 - mb * a0;
                        acc[g][i][j][3] += tmp[g][i][j][3] * sb * x1 - mb * a1;
                    }
            }
#endif
        }
        __syncthreads();
    }
    // C fragment: c0, c1 at (row lane / 4, tokens 2 (lane % 4) + 0, 1); c2, c3 at row + 8
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
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
    (void)Wu, (void)xf, (void)xq, (void)xd, (void)xsum;
}
