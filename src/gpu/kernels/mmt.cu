// mmt.cu: prompt-batch matrix products on the tensor cores, y[t][r] = sum_k x[t][k] W[r][k].
// Three paths, each a block of weight rows x tokens staged in shared memory:
// - Q4_K / Q5_K (KF = 1): 64 rows (GLU: 32 gate and 32 up) x 128 tokens, 8 warps, F16 mma.sync
//   on the weights' integer values times their sub-block scales (exact in F16) and the int8
//   activations as F16 (exact), scaled once per 256-block (see the section below);
// - other quantized weights (and Q4_K / Q5_K with KF = 0): 64 rows x 64 tokens, 4 warps of 32
//   rows x 32 tokens, int8 mma.sync, each 32 (Q6_K: 16) scaled on the FP32 pipe;
// - F16 / BF16: 128 rows (GLU: 64 of each) x 128 tokens, 8 warps of 64 (32) rows x 32 tokens,
//   tiles copied with cp.async NS - 1 steps ahead.
// The activation is what the CPU backend (and ggml) multiplies the same weights with, so both
// round alike: for quantized weights the integer weight values and the int8 activations of
// quant_act (modes 0 and 1), multiplied exactly, each block's integer product then scaled by
// the row's and the token's scales less the min term (K formats, with quant_act's sums of 16);
// for F16 weights floats rounded to F16, for BF16 weights to BF16 (F32 accumulate). F32
// weights do not come here. The quantized paths load the next step's weights while the tensor
// cores work on this one (PF).
// Epilogue as matvec.cu: bias, residual add (y = res + rscale * acc), up to three weights that
// read the same activation (each a multiple of BM rows but the last), or with GLU the gate and
// up tiles together and the SwiGLU output. Where the tiles alone would leave SMs idle the host
// splits k over gridDim.z blocks a tile (partial sums in part[], a count per tile in cnt[]).
// Parameters: QT (weight type), GLU, KF, MB (F16 / BF16, KF: blocks per SM the registers must
// allow), QMB (the int8 path's), NS (F16 / BF16 stages), PF.
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
#define QACT (QT != T_F16 && QT != T_BF16) // int8 activations with per-32 scales
#ifndef KF
#define KF 0
#endif
#if KF && QT != T_Q4_K && QT != T_Q5_K
#error "KF: Q4_K and Q5_K only"
#endif
#ifndef DQ
#define DQ 0
#endif
#ifndef WG
#define WG 0
#endif
#if WG && QACT && !DQ
#error "WG: F16 / BF16 weights, or quantized ones dequantized into F16 tiles (DQ)"
#endif
#if WG && DQ && WG != 2
#error "WG with DQ: the swizzled tiles (2)"
#endif
#if DQ && !QACT
#error "DQ: quantized weights only"
#endif
#ifndef KX
#define KX 0
#endif
#if KX && !(DQ && WG == 2 && (QT == T_Q4_K || QT == T_Q5_K))
#error "KX: Q4_K / Q5_K on the dequantizing warpgroup tiles (DQ, WG 2)"
#endif
#if KF || DQ || !QACT // 8 warps of 2 x 4 (each 1 x 4 tiles of 16 x 8 per 32 rows of BM)
// KF: 64 rows (GLU: 32 of each); F16 / BF16 and DQ: 128 rows (GLU: 64 of each); 128 tokens
#define BM (KF ? (GLU ? 32 : 64) : (GLU ? 64 : 128))
#define BN 128
#define KT (QACT || WG == 2 ? 64 : 32) // k per step
#define NT 256
#define MI (BM / 32)
#define NJ 4
#define WROW(w) (((w) >> 2) * (BM / 2))
#define WTOK(w) (((w) & 3) * 32)
#else // the int8 path: 64 rows x 64 tokens, 4 warps of 32 rows x 32 tokens (of each weight tile)
#define BM 64 // weight rows per block (of each weight tile)
#define BN 64 // tokens per block
#define KT 64 // k per step
#define NT 128
#define MI 2 // 16-row tiles per warp
#define NJ 4 // 8-token tiles per warp
#define WROW(w) (((w) >> 1) * 32)
#define WTOK(w) (((w) & 1) * 32)
#endif
#define NWT (GLU ? 2 : 1) // weight tiles
// KF and DQ: the shared row stride of their F16 tiles in halves (144 bytes: the 8 rows of an
// ldmatrix hit 32 banks)
#if KF || DQ
#define LW 72
#endif

// a warp's accumulators: weight tiles x MI row tiles x NJ token tiles x 4 values
template <typename E> __device__ __forceinline__ void zero_tiles(E (*a)[MI][NJ][4])
{
#pragma unroll
    for (int g = 0; g < NWT; g++)
#pragma unroll
        for (int i = 0; i < MI; i++)
#pragma unroll
            for (int j = 0; j < NJ; j++)
#pragma unroll
                for (int c = 0; c < 4; c++)
                    a[g][i][j][c] = 0;
}

// A warp's products over one staged step of KS along k (F16 paths): weight rows in ws (row
// stride LDW halves, weight tile g at row g BM, the warp's at wm), tokens in xs (the warp's at
// wn), fragments by ldmatrix, mma.sync m16n8k16 (BF: BF16) into a.
template <int BF, int LDW, int KS>
__device__ __forceinline__ void warp_step_f16(const u16 *ws, const u16 *xs, int wm, int wn,
                                              int lane, float (*a)[MI][NJ][4])
{
    const int mi = lane >> 3;
#pragma unroll
    for (int ks = 0; ks < KS; ks += 16) {
        // B fragments of the warp's token tiles: matrices (tokens + 8 (mi / 2), k + 8 (mi % 2))
        // of each pair of tiles
        u32 bf[NJ][2];
#pragma unroll
        for (int jp = 0; jp < NJ / 2; jp++) {
            u32 r[4];
            ldsm_x4<0>(r, &xs[(wn + jp * 16 + (mi >> 1) * 8 + (lane & 7)) * LDW + ks +
                              (mi & 1) * 8]);
            bf[2 * jp][0] = r[0], bf[2 * jp][1] = r[1];
            bf[2 * jp + 1][0] = r[2], bf[2 * jp + 1][1] = r[3];
        }
#pragma unroll
        for (int g = 0; g < NWT; g++)
#pragma unroll
            for (int i = 0; i < MI; i++) {
                // A fragment: matrices (rows + 8 (mi % 2), k + 8 (mi / 2))
                u32 af[4];
                ldsm_x4<0>(af, &ws[(g * BM + wm + i * 16 + (mi & 1) * 8 + (lane & 7)) * LDW +
                                   ks + (mi >> 1) * 8]);
#pragma unroll
                for (int j = 0; j < NJ; j++)
                    mma_16816<BF>(a[g][i][j], af, bf[j][0], bf[j][1]);
            }
    }
}

#if WG
// Halves from a tile's start to 16-byte chunk c of row r in the 128-byte swizzle (rows of 64
// halves, chunk c at c ^ (r % 8))
__device__ __forceinline__ int swz128(int r, int c) { return r * 64 + ((c ^ (r & 7)) << 3); }
// The first 1,024-byte aligned place in the dynamic shared memory (the swizzle's atoms are
// aligned to 1,024 bytes; the host asks for 1 KiB more)
__device__ __forceinline__ u16 *smem_1k(u16 *p)
{
    return p + ((1024 - (smem_addr(p) & 1023)) & 1023) / 2;
}
// A warpgroup's products of one step, committed as a group: the two 64-row halves of the
// weight tile (shared address sw) times its 64 tokens (sx), KT / 16 m64n64k16 each. WG 2:
// tiles in the 128-byte swizzle (rows of 128 bytes, blocks of 8 rows 1,024 bytes apart, a 16
// along k 32 bytes on); WG 1: unswizzled (core matrices 128 bytes apart along k, blocks of 8
// rows 16 KT bytes apart, a 16 along k 256 bytes on).
__device__ __forceinline__ void wg_step(float *a, unsigned sw, unsigned sx)
{
    const unsigned long long sw128 = WG == 2 ? 1ull << 62 : 0;
    const unsigned lbo = WG == 2 ? 16 : 128, sbo = WG == 2 ? 1024 : 16 * KT,
                   ks = WG == 2 ? 32 : 256;
    wgmma_fence();
#pragma unroll
    for (int s = 0; s < KT / 16; s++)
#pragma unroll
        for (int h = 0; h < 2; h++)
            wgmma_6464<QT == T_BF16>(a + 32 * h,
                                     wg_desc(sw + h * 8 * 16 * KT + ks * s, lbo, sbo) | sw128,
                                     wg_desc(sx + ks * s, lbo, sbo) | sw128);
    wgmma_commit();
}
#endif

#if KF || KX
// The row's 256-block data for the end-of-block scaling: d, dmin and the 8 mins as bytes
struct krow {
    float d, dm;
    u32 mn0, mn1;
};
__device__ __forceinline__ krow krow_of(const u8 *W, i64 N, int r, int k, int kk)
{
    qblk b = qblock(QT, W, N, (i64)r * (k / 256) + kk / 256);
    krow o;
    o.d = h2f(ld16(b.h));
    o.dm = h2f(ld16(b.h + 2));
    u32 m[8];
#pragma unroll
    for (int j = 0; j < 8; j++) {
        int sc, mn;
        kscale(j, b.h + 4, &sc, &mn);
        m[j] = (u32)mn;
    }
    o.mn0 = m[0] | (m[1] << 8) | (m[2] << 16) | (m[3] << 24);
    o.mn1 = m[4] | (m[5] << 8) | (m[6] << 16) | (m[7] << 24);
    return o;
}

// a . b over two pairs: the 16-bit halves of a times the low (dp2_lo) or high two bytes of b
__device__ __forceinline__ int dp2_hi(int a, int b, int c)
{
#if BRASA_HIP
    return c + (int)(short)(a & 0xffff) * (int)(signed char)((b >> 16) & 0xff) +
           (a >> 16) * (int)(signed char)(b >> 24);
#else
    return __dp2a_hi(a, b, c);
#endif
}

// A 256-block's integer sums bv of one row and token scaled as the CPU backend's:
// dx (d bv - dmin sum_j mn_j S_j), with the token's scale dx and sums S_j of its 32 int8 values
// per sub-block as 16-bit pairs (j, j + 1) in S[0..4)
__device__ __forceinline__ float kblock(const krow &rw, const u32 *S, float dx, float bv)
{
    int ms = dot2_i16_i8((int)S[0], (int)rw.mn0, 0);
    ms = dp2_hi((int)S[1], (int)rw.mn0, ms);
    ms = dot2_i16_i8((int)S[2], (int)rw.mn1, ms);
    ms = dp2_hi((int)S[3], (int)rw.mn1, ms);
    return dx * (rw.d * bv - rw.dm * (float)ms);
}

// The 256-block's row data of row rl (tile row lr; hh == 0 of its pair of threads) and token
// data (threads below BN: token t0 + tid) into parity par's slots, at its first step kk
__device__ __forceinline__ void kblock_data(const u8 *Wg, i64 N, int rl, int lr, bool rw, int k,
                                            int kk, int t0, int T, const float *xd,
                                            const int *xsum, krow *srow, float *sdx,
                                            u32 (*sS)[4])
{
    const int tid = threadIdx.x;
    if (rw)
        srow[lr] = krow_of(Wg, N, rl, k, kk);
    if (tid < BN) {
        const int t = t0 + tid;
        float dx = 0.0f;
        u32 sp[4] = {0, 0, 0, 0};
        if (t < T) {
            dx = xd[(i64)t * (k / 32) + kk / 32];
            const int4 *s4 = (const int4 *)(xsum + (i64)t * (k / 16) + kk / 16);
#pragma unroll
            for (int q = 0; q < 4; q++) { // sums of 16: j = 2q and 2q + 1
                int4 v = s4[q];
                sp[q] = (u32)pack16(v.x + v.y, v.z + v.w);
            }
        }
        sdx[tid] = dx;
#pragma unroll
        for (int q = 0; q < 4; q++)
            sS[tid][q] = sp[q];
    }
}
#endif

#if KF
// ---- Q4_K / Q5_K on the F16 tensor cores ----------------------------------------------------
// Per step of 64 along k (the two sub-blocks 2p, 2p + 1 of a 256-block) the weight tile holds
// each weight's integer value times its sub-block's 6-bit scale (at most 31 x 63 = 1953: exact
// in F16) and the activation tile quant_act's int8 values as F16 (exact, xh), so mma.sync
// m16n8k16 (F16 in, F32 accumulate) adds sum_j sc_j sum q x over the 256-block without a
// scale per sub-block. At the end of each 256-block the block's sums are scaled once:
//   acc += dx (d bacc - dmin sum_j mn_j S_j)
// with the token's scale dx and sums S_j of its 32 int8 values per sub-block (quant_act's sums
// of 16), the row's d, dmin and 6-bit mins mn_j: the CPU backend's exact integer sums, with
// the F32 rounding of the products' accumulation only. The activation tile comes with cp.async,
// the weights are fetched a step ahead into registers and converted into the other stage.
#define KSTG ((2 * 32 + BN) * LW) // halves per stage: 64 weight rows, then 128 tokens

// A thread's raw share of a step's weight tile: row lr, elements 8 qd .. + 8 of sub-blocks 2p
// and 2p + 1 (the 8 bytes of nibbles, Q5_K the 8 bytes of fifth bits) and the scale bytes
struct kraw {
    uint2 q;
#if QT == T_Q5_K
    uint2 h;
#endif
    u32 sb; // the scale bytes of sub-blocks j = 2p and j + 1 (see kfetch)
};
__device__ __forceinline__ void kfetch(const u8 *W, i64 N, int r, int k, int kk, int qd, kraw &f)
{
    qblk b = qblock(QT, W, N, (i64)r * (k / 256) + kk / 256);
    const int p = (kk % 256) / 64, j = 2 * p;
    f.q = *(const uint2 *)(b.q + 32 * p + 8 * qd);
#if QT == T_Q5_K
    f.h = *(const uint2 *)(b.h + 16 + 8 * qd);
#endif
    // the 6-bit scales (ggml's get_scale_min_k4): j < 4: bytes j, j + 1 of the 12; else the
    // low nibbles of bytes j + 4, j + 5 and the top bits of bytes j - 4, j - 3
    const u8 *sc = b.h + 4; // (b.h: d, dmin, then the 12 scale bytes)
    f.sb = j < 4 ? (u32)sc[j] | ((u32)sc[j + 1] << 8)
                 : (u32)sc[j + 4] | ((u32)sc[j + 5] << 8) | ((u32)sc[j - 4] << 16) |
                       ((u32)sc[j - 3] << 24);
}
__device__ __forceinline__ void kscales(int j, u32 sb, int *s0, int *s1)
{
    if (j < 4) {
        *s0 = (int)(sb & 63);
        *s1 = (int)((sb >> 8) & 63);
    } else {
        *s0 = (int)((sb & 0xF) | (((sb >> 22) & 3) << 4));
        *s1 = (int)(((sb >> 8) & 0xF) | ((sb >> 30) << 4));
    }
}

// The block's products over k0 .. k1 (whole 256-blocks), into acc
__device__ __forceinline__ void tile_products(const u8 *W, const u8 *Wu, i64 N, int nrows,
                                              int row0, int t0, int k, int k0, int k1, int T,
                                              const void *xh, const i8 *xq, const float *xd,
                                              const int *xsum, float (*acc)[MI][NJ][4])
{
    extern __shared__ __align__(16) u16 smh[];   // 2 stages of KSTG halves
    __shared__ krow srow[2][NWT * BM];           // per 256-block parity
    __shared__ float sdx[2][BN];
    __shared__ u32 sS[2][BN][4];                 // S_j as 16-bit pairs (j, j + 1)
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g4 = lane >> 2, t4 = lane & 3;
    const int wm = WROW(warp), wn = WTOK(warp);
    // weight share: row lr of the NWT x BM = 64 (tile g = lr / BM), elements 8 qd .. + 8
    const int lr = tid >> 2, qd = tid & 3, gw = lr / BM;
    const u8 *Wg = gw ? Wu : W;
    const int rl = min(row0 + lr % BM, nrows - 1);
    // activation copies: 16-byte chunks c = tid + 256 u (u < 4) of the 128 x 128-byte tile
    const u16 *xsrc[4];
    int xdst[4];
#pragma unroll
    for (int u = 0; u < 4; u++) {
        const int c = tid + NT * u, tk = c >> 3, ch = (c & 7) * 8;
        xsrc[u] = (const u16 *)xh + (i64)min(t0 + tk, T - 1) * k + ch;
        xdst[u] = (NWT * BM + tk) * LW + ch;
    }
    float bacc[NWT][MI][NJ][4];
    zero_tiles(bacc);
    kraw f;
    kfetch(Wg, N, rl, k, k0, qd, f);
#pragma unroll
    for (int u = 0; u < 4; u++)
        cp_async16(smh + xdst[u], xsrc[u] + k0);
    cp_async_commit();
#pragma unroll 1
    for (int kk = k0, st = 0; kk < k1; kk += KT, st ^= 1) {
        u16 *stg = smh + st * KSTG;
        const int p = (kk % 256) / 64, par = (kk / 256) & 1;
        { // the weight share, converted: q x sc as F16 at columns 8 qd + e (sub-block 2p) and
          // 32 + 8 qd + e (2p + 1)
            const int j = 2 * p;
            int s0, s1;
            kscales(j, f.sb, &s0, &s1);
            u32 lo[2] = {f.q.x & 0x0F0F0F0Fu, f.q.y & 0x0F0F0F0Fu};
            u32 hi[2] = {(f.q.x >> 4) & 0x0F0F0F0Fu, (f.q.y >> 4) & 0x0F0F0F0Fu};
#if QT == T_Q5_K
            lo[0] |= ((f.h.x >> j) & 0x01010101u) << 4, lo[1] |= ((f.h.y >> j) & 0x01010101u) << 4;
            hi[0] |= ((f.h.x >> (j + 1)) & 0x01010101u) << 4,
                hi[1] |= ((f.h.y >> (j + 1)) & 0x01010101u) << 4;
#endif
            u32 wl[4], wh[4];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int w = e >> 1, sh = 16 * (e & 1);
                const int l0 = (lo[w] >> sh) & 0xff, l1 = (lo[w] >> (sh + 8)) & 0xff;
                const int h0 = (hi[w] >> sh) & 0xff, h1 = (hi[w] >> (sh + 8)) & 0xff;
                wl[e] = (u32)f2h((float)(l0 * s0)) | ((u32)f2h((float)(l1 * s0)) << 16);
                wh[e] = (u32)f2h((float)(h0 * s1)) | ((u32)f2h((float)(h1 * s1)) << 16);
            }
            *(uint4 *)(stg + lr * LW + 8 * qd) = make_uint4(wl[0], wl[1], wl[2], wl[3]);
            *(uint4 *)(stg + lr * LW + 32 + 8 * qd) = make_uint4(wh[0], wh[1], wh[2], wh[3]);
        }
        if (p == 0) // the 256-block's row and token data, for its end
            kblock_data(Wg, N, rl, lr, qd == 0, k, kk, t0, T, xd, xsum, srow[par], sdx[par],
                        sS[par]);
        cp_async_wait<0>();
        __syncthreads();
        if (kk + KT < k1) { // the next step: activation copies and weight loads in flight
            u16 *nx = smh + (st ^ 1) * KSTG;
#pragma unroll
            for (int u = 0; u < 4; u++)
                cp_async16(nx + xdst[u], xsrc[u] + kk + KT);
            cp_async_commit();
            kfetch(Wg, N, rl, k, kk + KT, qd, f);
        }
        warp_step_f16<0, LW, KT>(stg, stg + NWT * BM * LW, wm, wn, lane, bacc);
        if (p == 3) { // end of the 256-block: scale its sums into acc
#pragma unroll
            for (int g = 0; g < NWT; g++)
#pragma unroll
                for (int i = 0; i < MI; i++)
#pragma unroll
                    for (int h = 0; h < 2; h++) { // rows g4 and g4 + 8
                        const krow rw = srow[par][g * BM + wm + i * 16 + g4 + 8 * h];
#pragma unroll
                        for (int j = 0; j < NJ; j++)
#pragma unroll
                            for (int c = 0; c < 2; c++) {
                                const int tk = wn + j * 8 + 2 * t4 + c;
                                float &bv = bacc[g][i][j][2 * h + c];
                                acc[g][i][j][2 * h + c] += kblock(rw, sS[par][tk], sdx[par][tk], bv);
                                bv = 0.0f;
                            }
                    }
        }
    }
    (void)xq;
}

#elif DQ
// ---- quantized weights dequantized into F16 tiles -------------------------------------------
// The weight tile holds each weight dequantized to F16 (Q4_K, Q5_K: d sc q - dmin m; Q6_K:
// d sc q; Q8_0, Q4_0: d q), the activation tile quant_act's int8 values times their scales
// rounded to F16 (xh: the activation the integer paths, the CPU backend and ggml multiply
// with, as Q8_0 or Q8_K), and the products run as for F16 weights (F32 accumulate) on a
// quarter of the bytes. Each weight and each activation value is rounded once to F16 (the
// weight's scales d sc and dmin m first): a product differs from the integer one by about
// 1e-3, and through a model's layers (later activations quantized on the other side of a
// rounding edge) the fixtures' logits move from about 2e-2 to 3.5e-2 of ggml's (bound 5e-2;
// floats instead of the 8-bit activation moved them further, BENCHMARKS.md). Per step of 64
// along k a thread converts 32 values of one weight row, whose raw bytes it loaded during the
// step before; the activation tile comes with cp.async NS - 1 steps ahead.
#if WG
#define DSTG (128 * 64) // halves per stage: 128 weight rows (or 128 tokens) x 64 along k
#else
#define DSTG (128 * LW) // halves per stage: 128 weight rows (or 128 tokens) x 64 along k
#endif
#ifndef NS
#define NS 4
#endif

// A thread's raw share of a step: row lr, two runs of 16 values (K formats: elements 16 hh ..
// + 16 of the step's sub-blocks 2p and 2p + 1; Q6_K: the same of its two quarters; Q8_0,
// Q4_0: the step's block hh, values 0 .. 15 and 16 .. 31)
struct draw {
    uint4 q; // K formats: 16 bytes of nibbles; Q6_K: the first quarter's ql; Q8_0: values 0..15
#if QT == T_Q4_K || QT == T_Q5_K
    uint4 h; // d, dmin, the 12 scale bytes
#endif
#if QT == T_Q5_K || QT == T_Q6_K || QT == T_Q8_0
    uint4 e; // Q5_K, Q6_K: the 16 matching qh bytes; Q8_0: values 16 .. 31
#endif
#if QT == T_Q6_K
    uint4 q2; // the second quarter's ql
#endif
#if QT == T_Q6_K || QT == T_Q8_0 || QT == T_Q4_0
    u32 s; // d; Q6_K: with the two quarters' scales in bytes 2 and 3
#endif
};

__device__ __forceinline__ void dfetch(const u8 *W, i64 N, int r, int k, int kk, int hh, draw &f)
{
#if QT == T_Q4_K || QT == T_Q5_K
    qblk b = qblock(QT, W, N, (i64)r * (k / 256) + kk / 256);
    f.q = *(const uint4 *)(b.q + 32 * ((kk % 256) / 64) + 16 * hh);
    f.h = *(const uint4 *)b.h;
#if QT == T_Q5_K
    f.e = *(const uint4 *)(b.h + 16 + 16 * hh);
#endif
#elif QT == T_Q6_K
    qblk b = qblock(QT, W, N, (i64)r * (k / 256) + kk / 256);
    const int h = (kk % 256) / 128, q0 = 2 * ((kk % 128) / 64); // half, first quarter
    f.q = *(const uint4 *)(b.q + 64 * h + 16 * hh);
    f.q2 = *(const uint4 *)(b.q + 64 * h + 32 + 16 * hh);
    f.e = *(const uint4 *)(b.h + 32 * h + 16 * hh);
    const u8 *sc = b.s + 8 * h + hh + 2 * q0; // (a scale per 16: ll / 16 = hh)
    f.s = (u32)ld16(b.d) | ((u32)sc[0] << 16) | ((u32)sc[2] << 24);
#else
    qblk b = qblock(QT, W, N, (i64)r * (k / 32) + kk / 32 + hh);
    f.q = *(const uint4 *)b.q;
#if QT == T_Q8_0
    f.e = *(const uint4 *)(b.q + 16);
#endif
    f.s = ld16(b.d);
#endif
}

// Bytes 2i and 2i + 1 of w as the low bytes of two F16 with the high byte 0x64: 1024 + the byte
__device__ __forceinline__ u32 h1024(u32 w, int i)
{
#if BRASA_HIP
    const u32 v = w >> (16 * i);
    return (v & 0xffu) | ((v & 0xff00u) << 8) | 0x64006400u;
#else
    return __byte_perm(w, 0x64646464u, i ? 0x4342 : 0x4140);
#endif
}
__device__ __forceinline__ u32 hpair(float v)
{
    const u32 h = f2h(v);
    return h | (h << 16);
}

// The four byte values of w (each an integer 1024 + v as F16 less c) times a plus m, as two
// F16 pairs
__device__ __forceinline__ void deq4(u32 w, u32 c, u32 a, u32 m, u32 *o)
{
    o[0] = hsub_fma2(h1024(w, 0), c, a, m);
    o[1] = hsub_fma2(h1024(w, 1), c, a, m);
}

// Converts a raw share (step kk) and stores its 32 F16 values into the thread's weight row,
// 16-byte chunk c at chunk c ^ x (WG: the 128-byte swizzle, x = the row % 8; else 0)
__device__ __forceinline__ void dstore(const draw &f, int kk, int hh, u16 *row, int x)
{
    u32 o0[8], o1[8]; // the two runs of 16
    int c0, c1;       // their columns
#if QT == T_Q4_K || QT == T_Q5_K
    // the scales and mins of sub-blocks j = 2p and j + 1 as byte pairs (ggml's
    // get_scale_min_k4 for two neighbours, as in mvd.cu)
    const int p = (kk % 256) / 64, j = 2 * p, sh = 16 * (p & 1);
    const bool hi = p >= 2;
    const u32 ma = hi ? 0x0F0Fu : 0x3F3Fu, mb = hi ? 0x3030u : 0u;
    const u32 y = f.h.y, z = f.h.z, w = f.h.w;
    const u32 scp = (((hi ? w : y) >> sh) & ma) | ((y >> (sh + 2)) & mb);
    const u32 mnp = (((hi ? w : z) >> (sh + (hi ? 4 : 0))) & ma) | ((z >> (sh + 2)) & mb);
    const float d = h2f((u16)(f.h.x & 0xffff)), dm = h2f((u16)(f.h.x >> 16));
#if KX // the integer values times their sub-block's scale (exact: at most 31 x 63), no min
    const u32 a0 = hpair((float)(scp & 0xff)), a1 = hpair((float)(scp >> 8)), m0 = 0u, m1 = 0u;
    (void)d, (void)dm, (void)mnp;
#else
    const u32 a0 = hpair(d * (float)(scp & 0xff)), a1 = hpair(d * (float)(scp >> 8));
    const u32 m0 = hpair(-dm * (float)(mnp & 0xff)), m1 = hpair(-dm * (float)(mnp >> 8));
#endif
    const u32 q[4] = {f.q.x, f.q.y, f.q.z, f.q.w};
#if QT == T_Q5_K
    const u32 qh[4] = {f.e.x, f.e.y, f.e.z, f.e.w};
#endif
#pragma unroll
    for (int t = 0; t < 4; t++) {
        u32 lo = q[t] & 0x0F0F0F0Fu, hi4 = (q[t] >> 4) & 0x0F0F0F0Fu;
#if QT == T_Q5_K
        lo |= ((qh[t] >> j) & 0x01010101u) << 4;
        hi4 |= ((qh[t] >> (j + 1)) & 0x01010101u) << 4;
#endif
        deq4(lo, 0x64006400u, a0, m0, &o0[2 * t]);
        deq4(hi4, 0x64006400u, a1, m1, &o1[2 * t]);
    }
    (void)j;
    c0 = 16 * hh, c1 = 32 + 16 * hh;
#elif QT == T_Q6_K
    const int q0 = 2 * ((kk % 128) / 64), ns = 2 * q0; // nibble shift: 0 (quarters 0, 1), 4
    const float d = h2f((u16)(f.s & 0xffff));
    const u32 a0 = hpair(d * (float)(i8)((f.s >> 16) & 0xff));
    const u32 a1 = hpair(d * (float)(i8)(f.s >> 24));
    const u32 ql[4] = {f.q.x, f.q.y, f.q.z, f.q.w}, ql2[4] = {f.q2.x, f.q2.y, f.q2.z, f.q2.w};
    const u32 qh[4] = {f.e.x, f.e.y, f.e.z, f.e.w};
#pragma unroll
    for (int t = 0; t < 4; t++) {
        const u32 v0 = ((ql[t] >> ns) & 0x0F0F0F0Fu) | (((qh[t] >> (2 * q0)) & 0x03030303u) << 4);
        const u32 v1 =
            ((ql2[t] >> ns) & 0x0F0F0F0Fu) | (((qh[t] >> (2 * q0 + 2)) & 0x03030303u) << 4);
        deq4(v0, 0x64206420u, a0, 0u, &o0[2 * t]); // 1056: q - 32
        deq4(v1, 0x64206420u, a1, 0u, &o1[2 * t]);
    }
    c0 = 16 * hh, c1 = 32 + 16 * hh;
#else
    const u32 a = (f.s & 0xffff) | (f.s << 16); // d, as it is
    const u32 q[4] = {f.q.x, f.q.y, f.q.z, f.q.w};
#pragma unroll
    for (int t = 0; t < 4; t++) {
#if QT == T_Q8_0
        const u32 e[4] = {f.e.x, f.e.y, f.e.z, f.e.w};
        deq4(q[t] ^ 0x80808080u, 0x64806480u, a, 0u, &o0[2 * t]); // 1152: (q + 128) - 128
        deq4(e[t] ^ 0x80808080u, 0x64806480u, a, 0u, &o1[2 * t]);
#else
        deq4(q[t] & 0x0F0F0F0Fu, 0x64086408u, a, 0u, &o0[2 * t]); // 1032: q - 8
        deq4((q[t] >> 4) & 0x0F0F0F0Fu, 0x64086408u, a, 0u, &o1[2 * t]);
#endif
    }
    c0 = 32 * hh, c1 = 32 * hh + 16;
    (void)kk;
#endif
    *(uint4 *)(row + (((c0 >> 3) ^ x) << 3)) = make_uint4(o0[0], o0[1], o0[2], o0[3]);
    *(uint4 *)(row + ((((c0 >> 3) + 1) ^ x) << 3)) = make_uint4(o0[4], o0[5], o0[6], o0[7]);
    *(uint4 *)(row + (((c1 >> 3) ^ x) << 3)) = make_uint4(o1[0], o1[1], o1[2], o1[3]);
    *(uint4 *)(row + ((((c1 >> 3) + 1) ^ x) << 3)) = make_uint4(o1[4], o1[5], o1[6], o1[7]);
}

#if WG
// The same on Hopper's warpgroup products (WG 2's tiles: rows of 128 bytes in the 128-byte
// swizzle, 1,024-byte aligned by hand; wgmma m64n64k16 as the F16 path's): NS activation
// stages copied NS - 2 steps ahead, 3 weight stages, step kt + 1's converted while step kt's
// products run (into the stage step kt - 2 read: every warpgroup has waited for those before
// step kt's barrier).
__device__ __forceinline__ void tile_products(const u8 *W, const u8 *Wu, i64 N, int nrows,
                                              int row0, int t0, int k, int k0, int k1, int T,
                                              const void *xh, const i8 *xq, const float *xd,
                                              const int *xsum, float (*acc)[MI][NJ][4])
{
#if BRASA_WGMMA
    extern __shared__ __align__(128) u16 smh[]; // NS activation stages, then 3 weight stages
    u16 *const xst = smem_1k(smh), *wst = xst + NS * DSTG;
    const int tid = threadIdx.x, G = tid >> 7;
    const int lr = tid >> 1, hh = tid & 1; // weight share: row lr, half hh (as below)
    const u8 *Wg = lr >= BM ? Wu : W;
    const int rl = min(row0 + lr % BM, nrows - 1);
    const int tk = tid >> 3, chn = tid & 7; // activation copies: tokens tk + 32 u, chunk chn
    const u16 *xb = (const u16 *)xh + k0 + chn * 8;
    const int nk = (k1 - k0) / KT;
#define DQ_X(kt)                                                                              \
    do {                                                                                      \
        if ((kt) < nk) {                                                                      \
            u16 *d_ = xst + ((kt) % NS) * DSTG;                                               \
            for (int u = 0; u < 4; u++) {                                                     \
                const int r_ = tk + 32 * u;                                                   \
                cp_async16(d_ + swz128(r_, chn),                                              \
                           xb + (i64)min(t0 + r_, T - 1) * k + (kt) * KT);                    \
            }                                                                                 \
        }                                                                                     \
        cp_async_commit();                                                                    \
    } while (0)
#if KX // each 256-block's sums in b, scaled into acc at its end (as the KF path)
    __shared__ krow srow[2][NWT * BM];
    __shared__ float sdx[2][BN];
    __shared__ u32 sS[2][BN][4];
    float b[NWT * MI * NJ * 4];
#pragma unroll
    for (int e = 0; e < NWT * MI * NJ * 4; e++)
        b[e] = 0.0f;
#endif
    draw f;
    dfetch(Wg, N, rl, k, k0, hh, f);
    dstore(f, k0, hh, wst + lr * 64, lr & 7);
    if (nk > 1)
        dfetch(Wg, N, rl, k, k0 + KT, hh, f);
#pragma unroll
    for (int p = 0; p < NS - 2; p++)
        DQ_X(p);
    const unsigned xbase = smem_addr(xst), wbase = smem_addr(wst);
    float *a = &acc[0][0][0][0];
#if KX
    float *const wa = b; // (the products' accumulators)
#else
    float *const wa = a;
#endif
#pragma unroll 1
    for (int kt = 0; kt < nk; kt++) {
        cp_async_wait<NS - 3>(); // step kt's activation
        fence_proxy_async();     // ... and its weights (stored during step kt - 1) seen by wgmma
        __syncthreads();
        DQ_X(kt + NS - 2);
        wg_step(wa, wbase + (unsigned)((kt % 3) * DSTG * 2),
                xbase + (unsigned)((kt % NS) * DSTG * 2) + (unsigned)G * 8192);
#if KX
        const int kk = k0 + kt * KT, p = (kk % 256) / 64, par = (kk / 256) & 1;
        if (p == 0) // (read at the block's last step, after the barriers of the steps between)
            kblock_data(Wg, N, rl, lr, hh == 0, k, kk, t0, T, xd, xsum, srow[par], sdx[par],
                        sS[par]);
#endif
        if (kt + 1 < nk) { // step kt + 1's weights, during step kt's products
            dstore(f, k0 + (kt + 1) * KT, hh, wst + ((kt + 1) % 3) * DSTG + lr * 64, lr & 7);
            if (kt + 2 < nk)
                dfetch(Wg, N, rl, k, k0 + (kt + 2) * KT, hh, f);
        }
#if KX
        if (p == 3) { // the 256-block's end: its sums scaled into acc (see mmt's epilogue for
                      // the accumulators' rows and tokens)
            wgmma_wait<0>(wa, NWT * MI * NJ * 4);
            const int lane = tid & 31, wm = ((tid >> 5) & 3) * 16, wn = G * 64;
#pragma unroll
            for (int e = 0; e < NWT * MI * NJ * 4; e++) {
                const int h = e >> 5, jj = (e >> 2) & 7, c = e & 3;
                const krow rw = srow[par][64 * h + wm + (lane >> 2) + 8 * (c >> 1)];
                const int tk = wn + 8 * jj + 2 * (lane & 3) + (c & 1);
                a[e] += kblock(rw, sS[par][tk], sdx[par][tk], b[e]);
                b[e] = 0.0f;
            }
            continue;
        }
#endif
        wgmma_wait<1>(wa, NWT * MI * NJ * 4);
    }
    wgmma_wait<0>(wa, NWT * MI * NJ * 4);
    cp_async_wait<0>(); // (nothing may be in flight when the block's shared memory is reused)
#undef DQ_X
#else
    trap_here(); // (compiled for another architecture: the host chooses WG on sm_90 alone)
    (void)W, (void)Wu, (void)N, (void)nrows, (void)row0, (void)t0, (void)k, (void)k0, (void)k1,
        (void)T, (void)xh, (void)acc;
#endif
    (void)xq, (void)xd, (void)xsum;
}
#else
// The block's products over k0 .. k1, into acc
__device__ __forceinline__ void tile_products(const u8 *W, const u8 *Wu, i64 N, int nrows,
                                              int row0, int t0, int k, int k0, int k1, int T,
                                              const void *xh, const i8 *xq, const float *xd,
                                              const int *xsum, float (*acc)[MI][NJ][4])
{
    extern __shared__ __align__(16) u16 smh[]; // NS activation stages, then 2 weight stages
    u16 *xst = smh, *wst = smh + NS * DSTG;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = WROW(warp), wn = WTOK(warp); // the warp's rows and tokens
    // weight share: row lr of the NWT x BM = 128 (tile g = lr / BM), half hh
    const int lr = tid >> 1, hh = tid & 1;
    const u8 *Wg = lr >= BM ? Wu : W;
    const int rl = min(row0 + lr % BM, nrows - 1); // (rows past the end repeat the last)
    // activation copies: 16-byte chunks tid + 256 u (u < 4) of the 128 x 128-byte tile, token
    // tk + 32 u, elements ch on (tokens past T repeat the last; their results are not stored;
    // addresses recomputed per copy: registers are short here)
    const int tk = tid >> 3, ch = (tid & 7) * 8;
    const u16 *xb = (const u16 *)xh + k0 + ch;
    const int nk = (k1 - k0) / KT;
#define DQ_X(kt)                                                                              \
    do {                                                                                      \
        if ((kt) < nk) {                                                                      \
            u16 *d_ = xst + ((kt) % NS) * DSTG + tk * LW + ch;                                \
            for (int u = 0; u < 4; u++)                                                       \
                cp_async16(d_ + 32 * u * LW,                                                  \
                           xb + (i64)min(t0 + tk + 32 * u, T - 1) * k + (kt) * KT);           \
        }                                                                                     \
        cp_async_commit();                                                                    \
    } while (0)
    draw f;
    dfetch(Wg, N, rl, k, k0, hh, f);
#pragma unroll
    for (int p = 0; p < NS - 1; p++)
        DQ_X(p);
    // step kt: convert its raw share (loaded during step kt - 1) into weight stage kt % 2, load
    // step kt + 1's, wait for step kt's activation, copy step kt + NS - 1's, multiply. (Stage
    // kt % 2 was last read by step kt - 2's products, before step kt - 1's barrier.)
#pragma unroll 1
    for (int kt = 0; kt < nk; kt++) {
        dstore(f, k0 + kt * KT, hh, wst + (kt & 1) * DSTG + lr * LW, 0);
        if (kt + 1 < nk)
            dfetch(Wg, N, rl, k, k0 + (kt + 1) * KT, hh, f);
        cp_async_wait<NS - 2>();
        __syncthreads();
        DQ_X(kt + NS - 1);
        warp_step_f16<0, LW, KT>(wst + (kt & 1) * DSTG, xst + (kt % NS) * DSTG, wm, wn, lane,
                                 acc);
    }
    cp_async_wait<0>(); // (nothing may be in flight when the block's shared memory is reused)
#undef DQ_X
    (void)xq, (void)xd, (void)xsum;
}

#endif
#elif QACT
// ---- quantized weights: int8 tiles, integer tensor-core products --------------------------
// The weight tile holds the integer weight values (Q4_0: q - 8; Q4_K: q; Q5_K: q with its
// fifth bit; Q6_K: q - 32; Q8_0: q), all within int8, and the activation tile quant_act's int8
// values: mma.sync m16n8k32 (Q6_K, with a scale per 16: m16n8k16) gives each block's exact
// integer product, then scaled by the weight row's and the token's scales less the min term.
#define LQ 80 // shared row stride in bytes (64 + 16: a warp's fragment loads hit 32 banks)
#define SB (QT == T_Q6_K ? 16 : 32) // elements per weight scale
#define KMIN (QT == T_Q4_K || QT == T_Q5_K) // a min term per 32 (the K formats with mins)
#define NSB (KT / SB)               // weight scales per row and step
#ifndef PF
#define PF 1 // 1: the next step's weights are loaded during this step's products
#endif

// A thread's raw share of a weight tile: elements [e0, e0 + 32) of one row (e0 % 32 == 0), as
// loaded from memory (wfetch), then as 32 int8 with the scale of each SB and (K formats) the
// min (wconv: w = sw * q - mw). Loaded a step ahead of their use, so the loads of the next
// step are in flight while the tensor cores work on this one.
struct wraw {
    uint4 a, b; // Q8_0: the 32 values; Q4_0: a; Q4_K, Q5_K: the 32 bytes of nibbles; Q6_K: ql
#if QT == T_Q5_K || QT == T_Q6_K
    uint4 c, e; // the matching 32 bytes of high bits (qh)
#endif
    u32 s;  // Q4_0, Q8_0: d; Q4_K, Q5_K: d, dmin; Q6_K: d and the two scales (bytes 2, 3)
#if KMIN
    u32 sb; // the three bytes of 6-bit scales and mins the sub-block needs
#endif
};

__device__ __forceinline__ void wfetch(const u8 *W, i64 N, int r, int k, int e0, wraw &f)
{
#if QT == T_Q8_0 || QT == T_Q4_0
    qblk b = qblock(QT, W, N, (i64)r * (k / 32) + e0 / 32);
    f.s = ld16(b.d);
    f.a = *(const uint4 *)b.q;
#if QT == T_Q8_0
    f.b = *(const uint4 *)(b.q + 16);
#endif
#elif QT == T_Q4_K || QT == T_Q5_K
    qblk b = qblock(QT, W, N, (i64)r * (k / 256) + e0 / 256);
    const int j = (e0 % 256) / 32; // sub-block: scale and min from bytes 4 + j, 8 + j and j
    f.s = ld32u(b.h);
    f.sb = (u32)b.h[4 + j] | ((u32)b.h[8 + j] << 8) | ((u32)b.h[j] << 16);
    const u8 *qs = b.q + 32 * (j >> 1);
    f.a = *(const uint4 *)qs, f.b = *(const uint4 *)(qs + 16);
#if QT == T_Q5_K
    f.c = *(const uint4 *)(b.h + 16), f.e = *(const uint4 *)(b.h + 32);
#endif
#else // Q6_K
    qblk b = qblock(QT, W, N, (i64)r * (k / 256) + e0 / 256);
    const int e = e0 % 256, h = e / 128, qu = (e % 128) / 32;
    const u8 *ql = b.q + 64 * h + ((qu & 1) ? 32 : 0), *qh = b.h + 32 * h;
    f.s = (u32)ld16(b.d) | ((u32)ld16(b.s + 8 * h + 2 * qu) << 16);
    f.a = *(const uint4 *)ql, f.b = *(const uint4 *)(ql + 16);
    f.c = *(const uint4 *)qh, f.e = *(const uint4 *)(qh + 16);
#endif
}

__device__ __forceinline__ void wconv(const wraw &f, int e0, u32 *o, float *sw, float *mw)
{
    const u32 m4 = 0x0F0F0F0Fu; // (Q8_0 needs no nibble mask)
    (void)m4;
    mw[0] = mw[1] = 0.0f;
#if QT == T_Q8_0 || QT == T_Q4_0
    sw[0] = sw[1] = h2f((u16)f.s);
#if QT == T_Q8_0
    o[0] = f.a.x, o[1] = f.a.y, o[2] = f.a.z, o[3] = f.a.w;
    o[4] = f.b.x, o[5] = f.b.y, o[6] = f.b.z, o[7] = f.b.w;
#else
    const u32 w[4] = {f.a.x, f.a.y, f.a.z, f.a.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        o[i] = vsub4(w[i] & m4, 0x08080808u);
        o[i + 4] = vsub4((w[i] >> 4) & m4, 0x08080808u);
    }
#endif
    (void)e0;
#elif QT == T_Q4_K || QT == T_Q5_K
    const int j = (e0 % 256) / 32;
    const u32 bj = f.sb & 0xff, bj4 = (f.sb >> 8) & 0xff, bjm4 = f.sb >> 16;
    // ggml's get_scale_min_k4 from the three bytes
    const int sc = j < 4 ? (int)(bj & 63) : (int)((bj4 & 0xF) | ((bjm4 >> 6) << 4));
    const int mn = j < 4 ? (int)(bj4 & 63) : (int)((bj4 >> 4) | ((bj >> 6) << 4));
    sw[0] = sw[1] = h2f((u16)(f.s & 0xffff)) * (float)sc;
    mw[0] = mw[1] = h2f((u16)(f.s >> 16)) * (float)mn;
    u32 w[8] = {f.a.x, f.a.y, f.a.z, f.a.w, f.b.x, f.b.y, f.b.z, f.b.w};
    int sh = 4 * (j & 1);
#if QT == T_Q5_K
    u32 hb[8] = {f.c.x, f.c.y, f.c.z, f.c.w, f.e.x, f.e.y, f.e.z, f.e.w};
#endif
#pragma unroll
    for (int i = 0; i < 8; i++) {
        o[i] = (w[i] >> sh) & m4;
#if QT == T_Q5_K
        o[i] |= ((hb[i] >> j) & 0x01010101u) << 4;
#endif
    }
#else // Q6_K
    const int qu = (e0 % 128) / 32;
    const float d = h2f((u16)(f.s & 0xffff));
    sw[0] = d * (float)(i8)((f.s >> 16) & 0xff);
    sw[1] = d * (float)(i8)(f.s >> 24);
    u32 lw[8] = {f.a.x, f.a.y, f.a.z, f.a.w, f.b.x, f.b.y, f.b.z, f.b.w};
    u32 hw[8] = {f.c.x, f.c.y, f.c.z, f.c.w, f.e.x, f.e.y, f.e.z, f.e.w};
    int sl = qu >= 2 ? 4 : 0, shh = 2 * qu;
#pragma unroll
    for (int i = 0; i < 8; i++)
        o[i] = vsub4(((lw[i] >> sl) & m4) | (((hw[i] >> shh) & 0x03030303u) << 4), 0x20202020u);
#endif
}

// The activation's share: token t, elements [e0, e0 + 32): the int8 values go to shared
// memory with cp.async (dst), the scale and (K formats) the sum of the 32 values to registers
// (zeros past the last token, whose values are then the last token's)
struct xraw {
    float d;
    int s;
};
__device__ __forceinline__ void xfetch(const i8 *xq, const float *xd, const int *xsum, int t,
                                       int T, int k, int e0, u8 *dst, xraw &f)
{
    const i8 *src = xq + (i64)min(t, T - 1) * k + e0;
    cp_async16(dst, src);
    cp_async16(dst + 16, src + 16);
    cp_async_commit();
    if (t < T) {
        f.d = xd[(i64)t * (k / 32) + e0 / 32];
#if KMIN
        const int *s16 = xsum + (i64)t * (k / 16) + e0 / 16;
        f.s = s16[0] + s16[1];
#else
        f.s = 0;
        (void)xsum;
#endif
    } else {
        f.d = 0.0f;
        f.s = 0;
    }
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
                                              int row0, int t0, int k, int k0, int k1, int T,
                                              const void *xh, const i8 *xq, const float *xd,
                                              const int *xsum, float (*acc)[MI][NJ][4])
{
    __shared__ __align__(16) u8 ws[NWT][BM * LQ];
    __shared__ __align__(16) u8 xs[2][BN * LQ]; // two stages: cp.async fills the next
    __shared__ float wsw[NWT][BM][NSB], sd[BN][KT / 32];
#if KMIN // the weight rows' mins, the tokens' scaled sums
    __shared__ float wmw[NWT][BM][KT / 32], sa[BN][KT / 32];
#endif
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = WROW(warp), wn = WTOK(warp); // the warp's rows and tokens
    const int lr = tid >> 1, lh = (tid & 1) * 32;          // this thread's load row and half
    const int g4 = lane >> 2, t4 = lane & 3;               // fragment row / column group
    // this step's raw tiles are in registers (fetched during the previous step's products)
    const int rl = min(row0 + lr, nrows - 1), tl = t0 + lr;
    wraw fw[NWT];
    xraw fx;
#pragma unroll
    for (int g = 0; g < NWT; g++)
        wfetch(g ? Wu : W, N, rl, k, k0 + lh, fw[g]);
    xfetch(xq, xd, xsum, tl, T, k, k0 + lh, &xs[0][lr * LQ + lh], fx);
#pragma unroll 1
    for (int kk = k0, st = 0; kk < k1; kk += KT, st ^= 1) {
        if (!PF && kk > k0)
#pragma unroll
            for (int g = 0; g < NWT; g++)
                wfetch(g ? Wu : W, N, rl, k, kk + lh, fw[g]);
        // weight tiles: row lr, elements kk + lh .. +32 (rows past the end repeat the last)
#pragma unroll
        for (int g = 0; g < NWT; g++) {
            u32 o[8];
            float sw[2], mw[2];
            wconv(fw[g], kk + lh, o, sw, mw);
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
        // activation tile: token lr, same elements (the values came with cp.async)
        sd[lr][lh / 32] = fx.d;
#if KMIN
        sa[lr][lh / 32] = fx.d * (float)fx.s;
#endif
        cp_async_wait<0>();
        __syncthreads();
        if (kk + KT < k1) { // the next step's loads, in flight during this step's products
#pragma unroll
            for (int g = 0; g < NWT && PF; g++)
                wfetch(g ? Wu : W, N, rl, k, kk + KT + lh, fw[g]);
            xfetch(xq, xd, xsum, tl, T, k, kk + KT + lh, &xs[st ^ 1][lr * LQ + lh], fx);
        }
#pragma unroll
        for (int ks = 0; ks < KT; ks += 32) {
            const int q32 = ks / 32;
            u32 bf[4][2];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const u8 *xp = &xs[st][(wn + j * 8 + g4) * LQ + ks + 4 * t4];
                bf[j][0] = *(const u32 *)xp;
                bf[j][1] = *(const u32 *)(xp + 16);
            }
#pragma unroll
            for (int g = 0; g < NWT; g++)
#pragma unroll
                for (int i = 0; i < MI; i++) {
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
    (void)xh, (void)xsum; // (xsum: the K formats' min terms only)
}

#else
// ---- F16 / BF16 weights ----------------------------------------------------------------
// The activation comes as F16 (BF16) values (quant_act's xh, the floats rounded as the CPU
// backend rounds them).
#if WG
// ---- F16 / BF16 on Hopper's warpgroup products (wgmma, sm_90a) -----------------------------
// The same tiles (128 weight rows x 128 tokens), copied with cp.async NS - 2 steps ahead into a
// layout wgmma reads from shared memory. Warpgroup G (warps 4 G .. 4 G + 3) takes tokens 64 G
// .. 64 G + 63 against both 64-row halves of the weight tile (GLU: the gate and the up rows),
// two m64n64k16 products per 16 along k, into the registers the mma.sync path uses (TILE_ROW
// and TILE_TOK give each sum's row and token). NS - 2 steps ahead: a stage is written again only when
// the products that read it two steps before are done (wgmma_wait<1> at the end of each step).
// WG 1: KT = 32, no swizzling: 8 rows of 16 bytes (8 values along k) make a core matrix of 128
// contiguous bytes, the four of a block of 8 rows follow each other (128 bytes apart along k),
// the blocks of 8 rows follow those (512 bytes apart).
// WG 2: KT = 64, rows of 128 bytes in the 128-byte swizzle: 16-byte chunk c of row r at chunk
// c ^ (r % 8), blocks of 8 rows 1,024 bytes apart from a 1,024-byte aligned start (the
// dynamic shared memory is aligned by hand: 1 KiB more of it); a 16 along k starts 32 bytes on.
#define WSTG (2 * 128 * KT) // halves per stage: 128 weight rows, then 128 tokens
#ifndef NS
#define NS 6
#endif
#if NS < 3
#error "WG: at least 3 stages"
#endif
#define WCH (KT / 8)               // 16-byte chunks of a row
#define WCP (2 * 128 * WCH / NT)   // a thread's copies a step

__device__ __forceinline__ void tile_products(const u8 *W, const u8 *Wu, i64 N, int nrows,
                                              int row0, int t0, int k, int k0, int k1, int T,
                                              const void *xh, const i8 *xq, const float *xd,
                                              const int *xsum, float (*acc)[MI][NJ][4])
{
#if BRASA_WGMMA
    extern __shared__ __align__(128) u16 smh[];
    const int tid = threadIdx.x, G = tid >> 7;
    u16 *const sm0 = WG == 2 ? smem_1k(smh) : smh;
    // this thread's copies: 16-byte chunks c = tid + NT u of the stage, row (of the weight
    // tile, then of the token tile) c / WCH, elements 8 (c % WCH) on
    const u16 *src[WCP];
    int dst[WCP];
#pragma unroll
    for (int u = 0; u < WCP; u++) {
        const int c = tid + u * NT, rr = c / WCH, ch = c % WCH;
        if (rr < 128) {
            const int r = min(row0 + rr % BM, nrows - 1);
            src[u] = (const u16 *)(rr >= BM ? Wu : W) + (i64)r * k + ch * 8 + k0;
        } else {
            src[u] = (const u16 *)xh + (i64)min(t0 + rr - 128, T - 1) * k + ch * 8 + k0;
        }
        dst[u] = WG == 2 ? swz128(rr, ch) : ((rr >> 3) * 4 + ch) * 64 + (rr & 7) * 8;
    }
    const int nk = (k1 - k0) / KT;
#define COPY_STEP(kt)                                                                         \
    do {                                                                                      \
        if ((kt) < nk) {                                                                      \
            u16 *sw_ = sm0 + ((kt) % NS) * WSTG;                                              \
            for (int u = 0; u < WCP; u++)                                                     \
                cp_async16(sw_ + dst[u], src[u] + (kt) * KT);                                 \
        }                                                                                     \
        cp_async_commit();                                                                    \
    } while (0)
#pragma unroll
    for (int p = 0; p < NS - 2; p++)
        COPY_STEP(p);
    const unsigned base = smem_addr(sm0);
    float *a = &acc[0][0][0][0];
#pragma unroll 1
    for (int kt = 0; kt < nk; kt++) {
        cp_async_wait<NS - 3>(); // step kt's copies
        fence_proxy_async();     // ... seen by wgmma
        __syncthreads();         // ... from every thread
        COPY_STEP(kt + NS - 2);  // into the stage of step kt - 2, whose products are done
        // the stage's weight rows, and this warpgroup's 64 tokens (blocks of 8 rows: 16 KT
        // bytes apart)
        const unsigned sw = base + (unsigned)((kt % NS) * WSTG * 2);
        wg_step(a, sw, sw + 128 * KT * 2 + (unsigned)G * 8 * 16 * KT);
        wgmma_wait<1>(a, NWT * MI * NJ * 4);
    }
    wgmma_wait<0>(a, NWT * MI * NJ * 4);
    cp_async_wait<0>(); // (nothing may be in flight when the block's shared memory is reused)
#undef COPY_STEP
#else
    trap_here(); // (compiled for another architecture: the host chooses WG on sm_90 alone)
    (void)W, (void)Wu, (void)nrows, (void)row0, (void)t0, (void)k, (void)k0, (void)k1, (void)T,
        (void)xh, (void)acc;
#endif
    (void)N, (void)xq, (void)xd, (void)xsum;
}

#else
// Per step of 32 along k the block copies the weight and activation tiles to shared memory
// with cp.async, NS - 1 steps ahead of the one it multiplies (NS stages of 20 KiB in dynamic
// shared memory), and each warp reads its fragments with ldmatrix: per 16 along k,
// 2 + NWT x MI ldmatrix for NWT x MI x 4 mma.sync.
#define LH 40 // shared row stride in halves (80 bytes: 8 rows of an ldmatrix hit 32 banks)
#ifndef NS
#define NS 2
#endif
#define STG (2 * 128 * LH) // halves per stage: 128 weight rows, then 128 tokens

// The block's products over all of k, into acc
__device__ __forceinline__ void tile_products(const u8 *W, const u8 *Wu, i64 N, int nrows,
                                              int row0, int t0, int k, int k0, int k1, int T,
                                              const void *xh, const i8 *xq, const float *xd,
                                              const int *xsum, float (*acc)[MI][NJ][4])
{
    // per stage the weight tiles' NWT x BM = 128 rows, then the activation's 128 tokens
    extern __shared__ __align__(16) u16 smh[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = WROW(warp), wn = WTOK(warp); // the warp's rows and tokens
    // this thread's copies: 16-byte chunks c = tid and tid + NT of each tile, row (token)
    // c / 4, elements 8 (c % 4) on; rows past the end repeat the last, tokens past T the last
    // token (their results are not stored)
    const u16 *wsrc[2], *xsrc[2];
    int dst[2];
#pragma unroll
    for (int u = 0; u < 2; u++) {
        const int c = tid + u * NT, rr = c >> 2, ch = (c & 3) * 8;
        const int r = min(row0 + rr % BM, nrows - 1);
        wsrc[u] = (const u16 *)(rr >= BM ? Wu : W) + (i64)r * k + ch;
        xsrc[u] = (const u16 *)xh + (i64)min(t0 + rr, T - 1) * k + ch;
        dst[u] = rr * LH + ch;
        wsrc[u] += k0, xsrc[u] += k0;
    }
    const int nk = (k1 - k0) / KT;
    // step kt's tiles into stage kt % NS (a group of copies per step, empty past the end)
#define COPY_STEP(kt)                                                                         \
    do {                                                                                      \
        if ((kt) < nk) {                                                                      \
            u16 *sw_ = smh + ((kt) % NS) * STG;                                               \
            for (int u = 0; u < 2; u++) {                                                     \
                cp_async16(sw_ + dst[u], wsrc[u] + (kt) * KT);                                \
                cp_async16(sw_ + 128 * LH + dst[u], xsrc[u] + (kt) * KT);                     \
            }                                                                                 \
        }                                                                                     \
        cp_async_commit();                                                                    \
    } while (0)
#pragma unroll
    for (int p = 0; p < NS - 1; p++)
        COPY_STEP(p);
#pragma unroll 1
    for (int kt = 0; kt < nk; kt++) {
        cp_async_wait<NS - 2>(); // step kt's copies (the later steps' may be in flight)
        __syncthreads();         // ... from every thread; and every warp is done with step kt - 1
        COPY_STEP(kt + NS - 1);  // into the stage step kt - 1 used
        const u16 *ws = smh + (kt % NS) * STG;
        warp_step_f16<QT == T_BF16, LH, KT>(ws, ws + 128 * LH, wm, wn, lane, acc);
    }
    cp_async_wait<0>(); // (nothing may be in flight when the block's shared memory is reused)
#undef COPY_STEP
    (void)N, (void)xq, (void)xd, (void)xsum;
}
#endif
#endif

// Grid (ceil(T / BN), row tiles, k slices); block NT. The int8 path's blocks per SM (QMB) are
// tried at 4, then 3, then left to the compiler: the first that does not spill is taken.
#if KF
extern "C" __global__ void __launch_bounds__(NT, 2)
#elif DQ
extern "C" __global__ void __launch_bounds__(NT, MB)
#elif QACT && !defined(QMB)
extern "C" __global__ void __launch_bounds__(NT)
#elif QACT
extern "C" __global__ void __launch_bounds__(NT, QMB)
#else
extern "C" __global__ void __launch_bounds__(NT, MB)
#endif
mmt(const u8 *W0, const u8 *W1, const u8 *W2, const void *xh, const i8 *xq, const float *xd,
    const int *xsum, float *part, int *cnt, float *y0, float *y1, float *y2,
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
    float acc[NWT][MI][NJ][4];
    zero_tiles(acc);
    i64 N = (i64)nrows * (k / qblock_elems(QT));
    // split along k (gridDim.z > 1, where the tiles alone leave SMs idle): slice z of the
    // steps; each block stores its partial sums, the last of a tile's blocks to finish adds
    // them in slice order (the same sums whatever the order the blocks ran in) and writes
    // (KF: slices of whole 256-blocks, 4 steps)
    const int nsp = gridDim.z, z = blockIdx.z, nks = k / KT, al = KF || KX ? 4 : 1;
    const int per = ((nks + nsp - 1) / nsp + al - 1) / al * al;
    const int k0 = min(nks, z * per) * KT, k1 = min(nks, (z + 1) * per) * KT;
    if (k0 < k1)
        tile_products(W, Wu, N, nrows, row0, t0, k, k0, k1, T, xh, xq, xd, xsum, acc);
    if (nsp > 1) {
        __shared__ int last;
        const int tile = blockIdx.x + gridDim.x * blockIdx.y, na = NWT * MI * NJ * 4;
        float *a = &acc[0][0][0][0];
        float *pp = part + (i64)tile * nsp * na * NT + tid;
#pragma unroll
        for (int e = 0; e < na; e++)
            pp[((i64)z * na + e) * NT] = a[e];
        __threadfence();
        __syncthreads();
        if (tid == 0)
            last = atomicAdd(&cnt[tile], 1) == nsp - 1;
        __syncthreads();
        if (!last)
            return;
        __threadfence();
        // the slices' sums added in slice order, a slice's na loads asked for together: one
        // L2 round trip a slice, where one a value (na of them) left this block's tail as long
        // as the products of a small launch
#pragma unroll
        for (int e = 0; e < na; e++)
            a[e] = 0.0f;
        for (int zz = 0; zz < nsp; zz++) {
            const float *q = pp + (i64)zz * na * NT;
#pragma unroll
            for (int e = 0; e < na; e++)
                a[e] += ld_cg(q + (i64)e * NT);
        }
        if (tid == 0)
            cnt[tile] = 0; // for the next launch
    }
    // C fragment: c0, c1 at (row lane / 4, tokens 2 (lane % 4) + 0, 1); c2, c3 at row + 8 of
    // the warp's 16 x 8 tile (i, j); WG: of row tile i / 2 (GLU: 0) and token tile
    // 4 (i % 2) + j (GLU: 4 i + j) of its 64 x 64 wgmma half
#if WG
    const int wm = (warp & 3) * 16, wn = (warp >> 2) * 64;
#define TILE_ROW(i) ((GLU ? 0 : 64 * ((i) >> 1)) + wm)
#define TILE_TOK(i, j) (wn + 8 * ((GLU ? 4 * (i) : 4 * ((i) & 1)) + (j)))
#else
    const int wm = WROW(warp), wn = WTOK(warp); // the warp's rows and tokens in the tile
#define TILE_ROW(i) (wm + (i) * 16)
#define TILE_TOK(i, j) (wn + (j) * 8)
#endif
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NJ; j++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                int r = row0 + TILE_ROW(i) + (lane >> 2) + (c >= 2 ? 8 : 0);
                int t = t0 + TILE_TOK(i, j) + (lane & 3) * 2 + (c & 1);
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
#undef TILE_ROW
#undef TILE_TOK
}
