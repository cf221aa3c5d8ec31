// mvf.cu: the decode product y = W x of Q4_K weights that reads the activation as F32, with no
// int8 conversion launch (quant_act) before it, and does its arithmetic on the tensor cores
// (mma.sync m16n8k16, F16 in, F32 sums; sm_80 and later, CUDA only). With NORM the RMSNorm
// before the product is folded in: its weights multiply the activation as it is read, and
// 1 / RMS, whose sum of squares the block gathers from the same loads, scales the sums at the
// end, so no launch and no barrier stand between the previous kernel and the first product.
//
// A warp takes 16 x RG weight rows (GLU: 16 rows of gate and the same 16 of up). For each
// super-block (256 values) lane l holds rows l / 4 and l / 4 + 8 of each 16, and of those
// rows the 32 bytes of chunk c = l % 4 (sub-blocks 2c and 2c + 1: low and high nibbles). A
// pair of nibbles becomes an F16 pair with one LOP3: 1024 + n (low) or 1024 + 16 n (high).
// The eight columns of the mma's B stand for the eight sub-blocks: column 2c holds only
// sub-block 2c's activations, so D[row][j] is sub-block j's dot and lands in the lane that
// holds sub-block j's scales (the lane that supplied its weights). The activation enters as
// F16 values of x (times the norm's weights) times 2^-4, which keeps F16 from overflowing
// for |x| up to 10^6; the 1024 offsets and the minima come out through each sub-block's sum
// of the same F16 values: dot = s0 D0 + s1 D1 - (1024 s0 + m0) X0 - (1024 s1 + m1) X1.
// The KS warps of a block take every KS-th super-block of the same rows and add their sums
// (and their sums of squares) through shared memory at the end.
// Epilogue as mvd.cu's: y = res + rscale (acc + bias) where res is set; GLU: silu(gate + b0)
// x (up + b1). The weights are planar (gpu/layout.h): a block's 128 quantized bytes, then
// after all blocks' their 16-byte headers (d, dmin, the 12 scale bytes).
// Q6_K (QT): each half super-block (128 values) in turn, its eight sub-blocks of 16 standing for
// the columns: lane c holds bytes 16c.. of the half's low bits (sub-blocks c and c + 4: low and
// high nibbles) and the two high bits of each from qh, made into 6-bit bytes and F16 pairs
// 1024 + q; dot = d (sc_c (D0 - 1056 X0) + sc_c+4 (D1 - 1056 X1)). Rows of one group (RG 1), no
// GLU. Planar: ql[128] | qh[64] | scales[16] | d.
// Parameters: QT (T_Q4_K or T_Q6_K), RG (row groups of 16 a warp: 1 or 2; GLU: 2), KS (warps a
// block), GLU, NORM, LA (Q4_K: 1 the next super-block's weights asked for before this one's
// products, in registers of their own; 0 after them, in the same registers; Q6_K: always 1).
#include "common.cuh"

#ifndef QT
#define QT T_Q4_K
#endif
#ifndef RG
#define RG 2
#endif
#ifndef KS
#define KS 1
#endif
#ifndef GLU
#define GLU 0
#endif
#ifndef NORM
#define NORM 0
#endif
#ifndef LA
#define LA 1
#endif
#if GLU && RG != 2
#error "GLU: RG 2 (gate and up)"
#endif
#if QT == T_Q6_K && (RG != 1 || GLU)
#error "Q6_K: RG 1, no GLU"
#endif

#if BRASA_HIP
// CUDA only (mma.sync, PTX): the host never picks mvf on AMD GPUs; the template still renders
// and compiles there (the compile tests take every template), as a kernel that traps.
extern "C" __global__ void mvf(const u8 *W0, const u8 *W1, const float *x, const float *normw,
                               float eps, float *y, const float *b0, const float *b1,
                               const float *res, float rscale, int rows, int k)
{
    __builtin_trap();
}
#else
#define MVF_PRE 0.0625f // the activation's scale in F16
#define MK 0x64006400u   // two F16 1024s

// mma_16816 (port.cuh) of the four A registers as they come
__device__ __forceinline__ void mvf_mma(float d[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1)
{
    const u32 a[4] = {a0, a1, a2, a3};
    mma_16816<0>(d, a, b0, b1);
}

// (a & m) | k in one LOP3 (written as C, the compiler makes two, one immediate each)
__device__ __forceinline__ u32 mvf_lop(u32 a, u32 m, u32 k)
{
    u32 d;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "r"(m), "r"(k));
    return d;
}

// F16 pair of x0, x1 (x0 in the low half) and the pair back as F32
__device__ __forceinline__ u32 mvf_pack(float x0, float x1)
{
    u32 u;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(u) : "f"(x1), "f"(x0));
    return u;
}
__device__ __forceinline__ float mvf_sum2(u32 u)
{
    return h2f((u16)(u & 0xFFFF)) + h2f((u16)(u >> 16));
}

// The lane's N (4 or 8) activations x[o ..] (16-byte aligned), times the norm's weights (with
// NORM; their squares added to ss first) and MVF_PRE, as F16 pairs (0,2) (1,3) (4,6) (5,7) in
// pu; returns the sum of those F16 values.
template <int N>
__device__ __forceinline__ float mvf_act(const float *x, const float *normw, i64 o, float &ss,
                                         u32 *pu)
{
    float v[N];
#pragma unroll
    for (int i = 0; i < N; i += 4) {
        const float4 a = *(const float4 *)(x + o + i);
        v[i] = a.x, v[i + 1] = a.y, v[i + 2] = a.z, v[i + 3] = a.w;
    }
#if NORM
    float gv[N];
#pragma unroll
    for (int i = 0; i < N; i += 4) {
        const float4 a = *(const float4 *)(normw + o + i);
        gv[i] = a.x, gv[i + 1] = a.y, gv[i + 2] = a.z, gv[i + 3] = a.w;
    }
#pragma unroll
    for (int i = 0; i < N; i++) {
        ss = fmaf(v[i], v[i], ss);
        v[i] *= gv[i] * MVF_PRE;
    }
#else
    (void)normw, (void)ss;
#pragma unroll
    for (int i = 0; i < N; i++)
        v[i] *= MVF_PRE;
#endif
#pragma unroll
    for (int i = 0; i < N; i += 4) {
        pu[i / 2] = mvf_pack(v[i], v[i + 2]);
        pu[i / 2 + 1] = mvf_pack(v[i + 1], v[i + 3]);
    }
    float xs = mvf_sum2(pu[0]);
#pragma unroll
    for (int i = 1; i < N / 2; i++)
        xs += mvf_sum2(pu[i]);
    return xs;
}

// the weights of sub-blocks 2c, 2c + 1 from a header (d | dmin, scales[12]): s0, s1 (the
// high nibbles' 1 / 16 folded in), m0, m1 (dmin times the minima)
__device__ __forceinline__ void mvf_scales(uint4 h, int c, float &s0, float &s1, float &m0,
                                           float &m1)
{
    const int u = 16 * (c & 1);
    const u32 A = (h.y >> u) & 0xFFFF, B = (h.z >> u) & 0xFFFF, C = (h.w >> u) & 0xFFFF;
    const u32 sp = c < 2 ? A & 0x3F3F : (C & 0x0F0F) | ((A >> 2) & 0x3030);
    const u32 mp = c < 2 ? B & 0x3F3F : ((C >> 4) & 0x0F0F) | ((B >> 2) & 0x3030);
    const float d = h2f((u16)(h.x & 0xFFFF)), dm = h2f((u16)(h.x >> 16));
    s0 = d * (float)(sp & 0xFF);
    s1 = d * (float)(sp >> 8) * 0.0625f;
    m0 = dm * (float)(mp & 0xFF);
    m1 = dm * (float)(mp >> 8);
}

// Grid: rows / (16 RG) blocks (GLU: rows / 16), 32 KS threads each.
extern "C" __global__ void __launch_bounds__(32 * KS)
mvf(const u8 *W0, const u8 *W1, const float *x, const float *normw, float eps, float *y,
    const float *b0, const float *b1, const float *res, float rscale, int rows, int k)
{
    const int lane = lane_id(), warp = wave_id();
    const int c = lane & 3, r = lane >> 2, n = lane >> 2;
    const int nsb = k / 256;
    const i64 nb = (i64)rows * nsb; // blocks of each weight
    const int row0 = (int)blockIdx.x * (GLU ? 16 : 16 * RG);
    // block index of (row, super-block 0) of each of the lane's rows, and the weight
    i64 bi[RG][2];
    const u8 *wq[RG];
#pragma unroll
    for (int q = 0; q < RG; q++) {
        const int rr = GLU ? row0 : row0 + 16 * q;
        wq[q] = GLU && q ? W1 : W0;
        bi[q][0] = (i64)(rr + r) * nsb;
        bi[q][1] = (i64)(rr + r + 8) * nsb;
    }
#if QT == T_Q6_K
    // per row: the low bits of both halves (bytes 16c.. of each 64), their high bits (bytes
    // 16 (c & 1).. of each 32), the scales, d
    uint4 la[2][2], ha[2][2], sh[2];
    u32 dd[2];
    auto load = [&](int sb) {
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const i64 b = bi[0][e] + sb;
#pragma unroll
            for (int f = 0; f < 2; f++) {
                la[e][f] = ld16_hint<3>(wq[0] + b * 128 + 64 * f + 16 * c);
                ha[e][f] = ld16_hint<3>(wq[0] + nb * 128 + b * 64 + 32 * f + 16 * (c & 1));
            }
            sh[e] = ld16_hint<3>(wq[0] + nb * 192 + b * 16);
            dd[e] = *(const u16 *)(wq[0] + nb * 208 + b * 2);
        }
    };
    if (warp < nsb)
        load(warp);
    pdl_wait();
    pdl_launch();
    const bool lo = n == 2 * c, hi = n == 2 * c + 1;
    const int src0 = 4 * c + (hi ? 16 : 0), hs = 2 * (c >> 1); // (c >= 2: quarters 1 and 3)
    float acc[1][2] = {{0.f, 0.f}};
    float ss = 0.f;
    for (int sb = warp; sb < nsb; sb += KS) {
        uint4 lc[2][2], hc2[2][2], sc[2];
        u32 dc[2];
#pragma unroll
        for (int e = 0; e < 2; e++) {
            lc[e][0] = la[e][0], lc[e][1] = la[e][1], hc2[e][0] = ha[e][0], hc2[e][1] = ha[e][1];
            sc[e] = sh[e], dc[e] = dd[e];
        }
        if (sb + KS < nsb)
            load(sb + KS);
#pragma unroll
        for (int f = 0; f < 2; f++) {
            // this lane's 4 activations of the half, x[256 sb + 128 f + 4 lane ...]
            u32 pu[2];
            float xs = mvf_act<4>(x, normw, (i64)sb * 256 + 128 * f + 4 * lane, ss, pu);
            xs += shfl_xor(xs, 1);
            xs += shfl_xor(xs, 2);
            const float X0 = shfl(xs, 4 * c), X1 = shfl(xs, 16 + 4 * c);
            float d[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}}; // (even, odd words)
#pragma unroll
            for (int j = 0; j < 4; j++) {
                u32 q6l[2], q6h[2];
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const u32 L = (&lc[e][f].x)[j], H = (&hc2[e][f].x)[j] >> hs;
                    q6l[e] = (L & 0x0F0F0F0Fu) | ((H << 4) & 0x30303030u);
                    q6h[e] = ((L >> 4) & 0x0F0F0F0Fu) | (H & 0x30303030u);
                }
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const u32 val = shfl(pu[h], src0 + j);
                    const u32 bl = lo ? val : 0u, bh = hi ? val : 0u;
                    mvf_mma(d[j & 1], mvf_lop(q6l[0] >> (8 * h), 0x00FF00FFu, MK),
                            mvf_lop(q6l[1] >> (8 * h), 0x00FF00FFu, MK),
                            mvf_lop(q6h[0] >> (8 * h), 0x00FF00FFu, MK),
                            mvf_lop(q6h[1] >> (8 * h), 0x00FF00FFu, MK), bl, bh);
                }
            }
#pragma unroll
            for (int e = 0; e < 2; e++) {
                // scales 8f + c and 8f + c + 4: byte c of words 2f and 2f + 1
                const u32 w = (&sc[e].x)[2 * f], w4 = (&sc[e].x)[2 * f + 1];
                const float dv = h2f((u16)dc[e]);
                const float s0 = dv * (float)(i8)((w >> (8 * c)) & 0xFF);
                const float s1 = dv * (float)(i8)((w4 >> (8 * c)) & 0xFF);
                acc[0][e] += s0 * (d[0][2 * e] + d[1][2 * e] - 1056.f * X0) +
                             s1 * (d[0][2 * e + 1] + d[1][2 * e + 1] - 1056.f * X1);
            }
        }
    }
#else
    uint4 hd[RG][2], qa[RG][2], qb[RG][2];
    auto load = [&](int sb) {
#pragma unroll
        for (int q = 0; q < RG; q++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const i64 b = bi[q][e] + sb;
                const u8 *p = wq[q] + b * 128 + 32 * c;
                qa[q][e] = ld16_hint<3>(p);
                qb[q][e] = ld16_hint<3>(p + 16);
                hd[q][e] = ld16_hint<3>(wq[q] + nb * 128 + b * 16);
            }
    };
    // the first super-block's weights before the wait (nothing writes them), each next one's
    // once the current one's are in the products
    if (warp < nsb)
        load(warp);
    pdl_wait();
    pdl_launch();
    // lanes that feed B: n == 2c (sub-block 2c) or n == 2c + 1; where their values lie
    const bool lo = n == 2 * c, hi = n == 2 * c + 1;
    const int src0 = 8 * c + (hi ? 4 : 0);
    float acc[RG][2];
#pragma unroll
    for (int q = 0; q < RG; q++)
        acc[q][0] = acc[q][1] = 0.f;
    float ss = 0.f;
    for (int sb = warp; sb < nsb; sb += KS) {
        uint4 ca[RG][2], cb[RG][2], hc[RG][2]; // this super-block's weights
#pragma unroll
        for (int q = 0; q < RG; q++)
#pragma unroll
            for (int e = 0; e < 2; e++)
                ca[q][e] = qa[q][e], cb[q][e] = qb[q][e], hc[q][e] = hd[q][e];
#if LA
        if (sb + KS < nsb)
            load(sb + KS);
#endif
        // this lane's 8 activations, x[256 sb + 8 lane ...]: F16 pairs (0,2) (1,3) (4,6) (5,7)
        u32 pu[4];
        // each sub-block's sum of those F16 values: lanes 4j..4j+3 hold sub-block j
        float xs = mvf_act<8>(x, normw, (i64)sb * 256 + 8 * lane, ss, pu);
        xs += shfl_xor(xs, 1);
        xs += shfl_xor(xs, 2);
        const float X0 = shfl(xs, 8 * c), X1 = shfl(xs, 8 * c + 4);
        float d[2][RG][4]; // (two chains of products: even and odd words)
#pragma unroll
        for (int t = 0; t < 2; t++)
#pragma unroll
            for (int q = 0; q < RG; q++)
                d[t][q][0] = d[t][q][1] = d[t][q][2] = d[t][q][3] = 0.f;
        // word j of the chunk, bytes shifted by 8 h: low nibbles of bytes h, h + 2 (slots 2c,
        // 2c + 1 of sub-block 2c) and their high nibbles (slots 2c + 8, 2c + 9: sub-block
        // 2c + 1); their activations, values 4j + h and 4j + h + 2 of the sub-block, are pair
        // 2 (j & 1) + h of lane 8c + j / 2 (+ 4 for sub-block 2c + 1)
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const u32 val = shfl(pu[(j & 1) * 2 + h], src0 + j / 2);
                const u32 bl = lo ? val : 0u, bh = hi ? val : 0u;
#pragma unroll
                for (int q = 0; q < RG; q++) {
                    const u32 w0 = (j < 4 ? (&ca[q][0].x)[j] : (&cb[q][0].x)[j - 4]) >> (8 * h);
                    const u32 w1 = (j < 4 ? (&ca[q][1].x)[j] : (&cb[q][1].x)[j - 4]) >> (8 * h);
                    mvf_mma(d[j & 1][q], mvf_lop(w0, 0x000F000Fu, MK), mvf_lop(w1, 0x000F000Fu, MK),
                            mvf_lop(w0, 0x00F000F0u, MK), mvf_lop(w1, 0x00F000F0u, MK), bl, bh);
                }
            }
#if !LA
        if (sb + KS < nsb)
            load(sb + KS);
#endif
#pragma unroll
        for (int q = 0; q < RG; q++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float s0, s1, m0, m1;
                mvf_scales(hc[q][e], c, s0, s1, m0, m1);
                acc[q][e] += s0 * (d[0][q][2 * e] + d[1][q][2 * e]) +
                             s1 * (d[0][q][2 * e + 1] + d[1][q][2 * e + 1]) -
                             (1024.f * s0 + m0) * X0 - (1024.f * s1 + m1) * X1;
            }
    }
#endif
    // each row's sum over the lanes of its chunks, then over the block's warps
    __shared__ float red[KS][16 * RG + 1];
#pragma unroll
    for (int q = 0; q < RG; q++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            float a = acc[q][e];
            a += shfl_xor(a, 1);
            a += shfl_xor(a, 2);
            if (c == 0)
                red[warp][16 * q + 8 * e + r] = a;
        }
#if NORM
    ss = warp_sum(ss);
    if (lane == 0)
        red[warp][16 * RG] = ss;
#else
    (void)normw, (void)eps, (void)ss;
#endif
    __syncthreads();
    if (warp)
        return;
    float so = 1.0f / MVF_PRE;
#if NORM
    {
        float t = 0.f;
        for (int w = 0; w < KS; w++)
            t += red[w][16 * RG];
        so *= rsqrtf(t / (float)k + eps);
    }
#endif
    for (int i = lane; i < (GLU ? 16 : 16 * RG); i += 32) {
        float a = 0.f;
        for (int w = 0; w < KS; w++)
            a += red[w][i];
        a *= so;
        const int row = row0 + i;
#if GLU
        float u = 0.f;
        for (int w = 0; w < KS; w++)
            u += red[w][16 + i];
        u *= so;
        if (b0)
            a += b0[row];
        if (b1)
            u += b1[row];
        y[row] = silu_f(a) * u;
        (void)res, (void)rscale;
#else
        (void)W1, (void)b1;
        if (b0)
            a += b0[row];
        y[row] = res ? res[row] + a * rscale : a;
#endif
    }
}
#endif
