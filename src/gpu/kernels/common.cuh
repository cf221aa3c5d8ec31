// common.cuh: types and helpers shared by every brasa kernel template.
// Rendered sources start with "#define NAME value" lines (the template's parameters);
// everything here is plain CUDA C with no library headers, so NVRTC needs no include path.
#pragma once
#include "port.cuh"
typedef unsigned char u8;
typedef signed char i8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef long long i64;
#define INFINITY __int_as_float(0x7f800000)

// ggml type ids (the file's tensor types)
#define T_F32 0
#define T_F16 1
#define T_Q4_0 2
#define T_Q8_0 8
#define T_Q4_K 12
#define T_Q5_K 13
#define T_Q6_K 14
#define T_BF16 30

__device__ __forceinline__ float h2f(u16 h)
{
    return port_h2f(h);
}
__device__ __forceinline__ u16 f2h(float f)
{
    return port_f2h(f);
}
__device__ __forceinline__ float bf2f(u16 h) { return __uint_as_float((u32)h << 16); }
__device__ __forceinline__ u16 f2bf(float f)
{
    u32 x = __float_as_uint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (u16)((x >> 16) | 64);
    return (u16)((x + (0x7fffu + ((x >> 16) & 1))) >> 16);
}
__device__ __forceinline__ float round_h(float x) { return h2f(f2h(x)); }
// Element i of a KV cache (F16 or F32) = v
__device__ __forceinline__ void cache_put(void *cache, long long i, float v, int kv_f16)
{
    if (kv_f16)
        ((u16 *)cache)[i] = f2h(v);
    else
        ((float *)cache)[i] = v;
}

// A RoPE pair (x0, x1) rotated by the angle of cos c, sin s: x0 c - x1 s (rot_lo) and
// x0 s + x1 c (rot_hi), each product and the sum rounded on its own as the CPU's rope does
// them (no contraction into an FMA): every RoPE path gives the same bits
__device__ __forceinline__ float rot_lo(float x0, float x1, float c, float s)
{
    return __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
}
__device__ __forceinline__ float rot_hi(float x0, float x1, float c, float s)
{
    return __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
}

__device__ __forceinline__ float silu_f(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += shfl_xor(v, o);
    return v;
}
__device__ __forceinline__ double warp_sum_d(double v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += shfl_xor(v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, shfl_xor(v, o));
    return v;
}
// Block-wide sums (blockDim.x a multiple of 32, at most 1024); sh holds 32 entries.
__device__ __forceinline__ double block_sum_d(double v, double *sh)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum_d(v);
    __syncthreads();
    if (lane == 0)
        sh[w] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : 0.0;
    return warp_sum_d(v);
}
__device__ __forceinline__ float block_max(float v, float *sh)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0)
        sh[w] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : -INFINITY;
    return warp_max(v);
}

// block_sum_d and block_max over each group of GW consecutive warps (every thread of the block
// takes part; sh holds 32 entries): red reduces over a warp, e the empty group's value
template <int GW, typename T, typename R>
__device__ __forceinline__ T group_reduce(T v, T *sh, T e, R red)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    v = red(v);
    __syncthreads();
    if (lane == 0)
        sh[w] = v;
    __syncthreads();
    v = lane < GW ? sh[w / GW * GW + lane] : e;
    return red(v);
}
template <int GW> __device__ __forceinline__ double group_sum_d(double v, double *sh)
{
    return group_reduce<GW>(v, sh, 0.0, [](double x) { return warp_sum_d(x); });
}
template <int GW> __device__ __forceinline__ float group_max(float v, float *sh)
{
    return group_reduce<GW>(v, sh, -INFINITY, [](float x) { return warp_max(x); });
}

// A thread's share of the sum of squares of x4[0 .. n4) (16-byte aligned), in double: elements
// t, t + nt, ... (t = threadIdx.x, nt threads), NL loads of 16 bytes issued before any is added,
// so the sum waits on L2's latency once a round, not once a value. The RMSNorm's sum (with
// block_sum_d) in quant_act and in decode products that convert their own activation.
template <int NL> __device__ __forceinline__ double sumsq4(const float4 *x4, int n4, int nt)
{
    double s = 0;
    for (int i0 = threadIdx.x; i0 < n4; i0 += NL * nt) {
        float4 v[NL];
#pragma unroll
        for (int j = 0; j < NL; j++) {
            float4 z = {0.0f, 0.0f, 0.0f, 0.0f};
            v[j] = i0 + j * nt < n4 ? x4[i0 + j * nt] : z;
        }
#pragma unroll
        for (int j = 0; j < NL; j++)
            s += (double)(v[j].x * v[j].x) + (double)(v[j].y * v[j].y) +
                 (double)(v[j].z * v[j].z) + (double)(v[j].w * v[j].w);
    }
    return s;
}

// Q8_K (ggml) of one 256-value block held by a warp, lane l holding values 8 l .. 8 l + 7:
// iscale = -127 / (the signed value of largest magnitude; the lowest index wins a tie, as
// ggml's scan), q = min(127, round(iscale v)). Fills the lane's q, returns the block's d
// (1 / iscale; 0 for a block of zeros), the same in every lane.
__device__ __forceinline__ float q8k_warp(const float *v, int lane, int *q)
{
    float am = 0.0f, mx = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; j++)
        if (fabsf(v[j]) > am) {
            am = fabsf(v[j]);
            mx = v[j];
        }
    int idx = am > 0.0f ? lane * 8 : 0x7fffffff;
    for (int o = 16; o > 0; o >>= 1) {
        float am2 = shfl_xor(am, o);
        float mx2 = shfl_xor(mx, o);
        int idx2 = shfl_xor(idx, o);
        if (am2 > am || (am2 == am && idx2 < idx)) {
            am = am2;
            mx = mx2;
            idx = idx2;
        }
    }
    float iscale = am != 0.0f ? -127.0f / mx : 0.0f;
#pragma unroll
    for (int j = 0; j < 8; j++)
        q[j] = am != 0.0f ? min(127, __float2int_rn(iscale * v[j])) : 0;
    return am != 0.0f ? 1.0f / iscale : 0.0f;
}

// q8k_warp, stored as block b of quant_act's mode 1: the lane's 8 int8 values at xq[8 lane +
// 256 b] (one 8-byte store), the sums of each 16 values at xs[16 b ..], d repeated for each
// 32 values at xd[8 b ..]. Fills q and returns d as q8k_warp.
__device__ __forceinline__ float q8k_store(const float *v, int lane, int *q, i8 *xq, float *xd,
                                           int *xs, int b)
{
    const float d = q8k_warp(v, lane, q);
    u32 w0 = 0, w1 = 0;
    int sum = 0;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        w0 |= (u32)(q[j] & 0xff) << (8 * j);
        w1 |= (u32)(q[j + 4] & 0xff) << (8 * j);
        sum += q[j] + q[j + 4];
    }
    *(uint2 *)(xq + b * 256 + lane * 8) = make_uint2(w0, w1);
    sum += shfl_xor(sum, 1);
    if (!(lane & 1))
        xs[b * 16 + lane / 2] = sum;
    if (lane < 8)
        xd[b * 8 + lane] = d;
    return d;
}

// Block sizes in bytes and elements (ggml layouts)
//   Q4_0: half d; u8 qs[16]                       32 elements, 18 bytes
//   Q8_0: half d; i8 qs[32]                       32 elements, 34 bytes
//   Q4_K: half d, dmin; u8 scales[12]; u8 qs[128] 256 elements, 144 bytes
//   Q5_K: half d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]   176 bytes
//   Q6_K: u8 ql[128]; u8 qh[64]; i8 scales[16]; half d           210 bytes
__device__ __forceinline__ u16 ld16(const u8 *p) { return *(const u16 *)p; }
__device__ __forceinline__ u32 ld32u(const u8 *p) // 2-byte aligned
{
    return (u32)ld16(p) | ((u32)ld16(p + 2) << 16);
}
// 6-bit scale and min of sub-block j of a Q4_K/Q5_K block (ggml's get_scale_min_k4)
__device__ __forceinline__ void kscale(int j, const u8 *q, int *d, int *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// The 8 F16 (t == T_F16) or BF16 values of a 16-byte piece, as floats
__device__ __forceinline__ void half8(int t, uint4 u, float *f)
{
    u32 w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        u16 lo = (u16)(w[i] & 0xffff), hi = (u16)(w[i] >> 16);
        f[2 * i] = t == T_F16 ? h2f(lo) : bf2f(lo);
        f[2 * i + 1] = t == T_F16 ? h2f(hi) : bf2f(hi);
    }
}

// Planar weights (gpu/layout.h): the fields of block i of a matrix of N blocks. q: the
// quantized values (Q6_K: ql); h: Q4_K/Q5_K d, dmin, scales (Q5_K: then qh), Q6_K qh;
// s: Q6_K scales; d: the F16 scale of Q4_0, Q8_0, Q6_K.
struct qblk {
    const u8 *q, *h, *s, *d;
};
__device__ __forceinline__ qblk qblock(int t, const u8 *W, i64 N, i64 i)
{
    qblk b = {W, W, W, W};
    switch (t) {
    case T_Q4_0: b.q = W + 16 * i; b.d = W + 16 * N + 2 * i; break;
    case T_Q8_0: b.q = W + 32 * i; b.d = W + 32 * N + 2 * i; break;
    case T_Q4_K: b.q = W + 128 * i; b.h = W + 128 * N + 16 * i; break;
    case T_Q5_K: b.q = W + 128 * i; b.h = W + 128 * N + 48 * i; break;
    case T_Q6_K:
        b.q = W + 128 * i;
        b.h = W + 128 * N + 64 * i;
        b.s = W + 192 * N + 16 * i;
        b.d = W + 208 * N + 2 * i;
        break;
    }
    return b;
}
// Block j after block b (same matrix): each field advances by its size.
__device__ __forceinline__ qblk qblock_next(int t, qblk b, int j)
{
    int qs = t == T_Q4_0 ? 16 : t == T_Q8_0 ? 32 : 128;
    int hs = t == T_Q4_K ? 16 : t == T_Q5_K ? 48 : 64;
    qblk o = {b.q + qs * j, b.h + hs * j, b.s + 16 * j, b.d + 2 * j};
    return o;
}
// elements per block of a type (1 for the float types)
__device__ __forceinline__ int qblock_elems(int t)
{
    return t == T_Q4_K || t == T_Q5_K || t == T_Q6_K ? 256 : t == T_Q4_0 || t == T_Q8_0 ? 32 : 1;
}

// Element i of row r of a matrix of type t with n elements per row and N blocks in all
// (slow; embeddings only).
__device__ float deq1(int t, const u8 *W, i64 N, int n, i64 r, int i)
{
    switch (t) {
    case T_F32: return ((const float *)W)[r * n + i];
    case T_F16: return h2f(((const u16 *)W)[r * n + i]);
    case T_BF16: return bf2f(((const u16 *)W)[r * n + i]);
    }
    int be = qblock_elems(t), l = i % be;
    qblk b = qblock(t, W, N, r * (n / be) + i / be);
    switch (t) {
    case T_Q4_0: {
        int q = l < 16 ? (b.q[l] & 0xF) : (b.q[l - 16] >> 4);
        return (q - 8) * h2f(ld16(b.d));
    }
    case T_Q8_0: return (float)(i8)b.q[l] * h2f(ld16(b.d));
    case T_Q4_K:
    case T_Q5_K: {
        int g = l / 64, j = l % 64, sub = l / 32, sc, mn;
        kscale(sub, b.h + 4, &sc, &mn);
        u8 qb = b.q[32 * g + (j % 32)];
        int q = j < 32 ? (qb & 0xF) : (qb >> 4);
        if (t == T_Q5_K)
            q += ((b.h[16 + (j % 32)] >> sub) & 1) << 4;
        return h2f(ld16(b.h)) * sc * q - h2f(ld16(b.h + 2)) * mn;
    }
    case T_Q6_K: {
        int half = l / 128, rr = l % 128, quarter = rr / 32, ll = rr % 32;
        const u8 *ql = b.q + 64 * half, *qh = b.h + 32 * half;
        const i8 *sc = (const i8 *)b.s + 8 * half;
        int lo = (quarter & 1) ? ql[ll + 32] : ql[ll];
        lo = quarter >= 2 ? (lo >> 4) : (lo & 0xF);
        int q = (lo | (((qh[ll] >> (2 * quarter)) & 3) << 4)) - 32;
        return h2f(ld16(b.d)) * sc[ll / 16 + 2 * quarter] * q;
    }
    }
    return 0.0f;
}

// Products launched for up to three weights that read the same activation (q, k, v): global
// row `row` belongs to W0's r0 rows, then W1's r1, then W2's r2. Returns that weight, its
// output, bias and row count, and turns row into the row within it (active: row < r2 at most).
struct wpick {
    const u8 *W;
    float *y;
    const float *bias;
    int rows;
    bool active;
};
__device__ __forceinline__ wpick pick_weight(int &row, const u8 *W0, const u8 *W1, const u8 *W2,
                                             float *y0, float *y1, float *y2, const float *b0,
                                             const float *b1, const float *b2, int r0, int r1,
                                             int r2)
{
    wpick p = {W0, y0, b0, r0, true};
    if (row >= r0) {
        row -= r0;
        p = {W1, y1, b1, r1, true};
        if (row >= r1) {
            row -= r1;
            p = {W2, y2, b2, r2, row < r2};
        }
    }
    return p;
}
