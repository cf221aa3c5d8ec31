// quantize.cu: converts activations to a weight format's dot type, optionally after an
// RMSNorm (fused: the normalised row never goes to memory).
//   mode 0: Q8_0 as ggml (blocks of 32: d = amax/127 stored as F16, q = round(x*127/amax))
//   mode 1: Q8_K as ggml (blocks of 256: iscale = -127/max (max = the signed value of largest
//           magnitude), q = min(127, round(x*iscale)), d = 1/iscale), d repeated per 32
//   mode 2: floats rounded to F16; mode 3: to BF16; mode 4: plain copy (F32 weights)
// Output: xq int8 [ncols][k] + xd float [ncols][k/32] (modes 0, 1), or xf float [ncols][k];
// mode 1 also writes xs int [ncols][k/16], the sums of each 16 values of xq (the K formats'
// min terms); where xh is set, modes 2 and 3 also write the F16 / BF16 values themselves to xh
// [ncols][k], mode 1 its int8 values as F16 (the tensor-core prompt kernel's inputs); modes 0
// and 1 plus 8 write instead each int8 value times its scale, rounded to F16 (the activation
// ggml's quantized dot products multiply with, for the dequantizing prompt tiles).
// Grid (columns, ceil(k / 2048)): blocks of 256 threads (8 elements each), each a 2048-element
// chunk of a row.
// z (mode 1 only): a gated group norm (the graph's RMS_NORM_GATE) in place of the row's
// RMSNorm: each group of gsz values (a power of 2, 8 to 256, so that a lane's 8 values lie in
// one group) times its own 1 / RMS, normw[i % gsz] and SiLU(z[i]). zearly: z is read before
// the wait (the launch before this one did not write it).
// Parameters: QMODE (optional): rendered for that mode alone (mode's low bits are then
// ignored), so the launch carries only its own path.
#include "common.cuh"

#define CHUNK 2048 // elements per block: blockIdx.y picks the chunk of the row
#if defined(QMODE) && QMODE != 1
#define ZG false // (the gated group norm: mode 1 only)
#else
#define ZG (z != nullptr)
#endif

extern "C" __global__ void __launch_bounds__(256)
quant_act(const float *x, const float *normw, float eps, int k, int mode, i8 *xq, float *xd,
          float *xf, int *xs, u16 *xh, const float *z, int gsz, int zearly)
{
    const bool xdq = mode & 8; // xh: the int8 values times their scales
#ifdef QMODE
    mode = QMODE;
#else
    mode &= 7;
#endif
    __shared__ double sh[32];
    int c = blockIdx.x, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    int e0 = blockIdx.y * CHUNK, e1 = min(k, e0 + CHUNK);
    const float *xr = x + (i64)c * k;
    // the thread's 8 elements of the chunk (mode 1: warp w's 256-block, 8 in a row from
    // lane * 8; mode 0: lane's element of the warp's 32-blocks w, w + 8, ...; else every
    // 256th from the thread's), loaded with their norm weights before the row's sum, so the
    // conversion waits on no load after it. The norm weights (which the whole model's stream
    // has pushed out of L2 since the last token) are asked for before the wait: nothing
    // writes them.
    float xv[8], wv[8], zv[8];
    int ix[8];
    bool okj[8];
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const int b1 = e0 / 256 + w, b0 = e0 / 32 + w + 8 * j;
        ix[j] = mode == 1 ? b1 * 256 + lane * 8 + j
              : mode == 0 ? b0 * 32 + lane : e0 + (int)threadIdx.x + 256 * j;
        okj[j] = mode == 1 ? b1 < e1 / 256 : mode == 0 ? b0 < e1 / 32 : ix[j] < e1;
        wv[j] = okj[j] && normw ? normw[ZG ? ix[j] & (gsz - 1) : ix[j]] : 1.0f;
        zv[j] = okj[j] && ZG && zearly ? z[(i64)c * k + ix[j]] : 0.0f;
    }
    pdl_wait();
    pdl_launch();
#pragma unroll
    for (int j = 0; j < 8; j++) {
        xv[j] = okj[j] ? xr[ix[j]] : 0.0f;
        if (okj[j] && ZG && !zearly)
            zv[j] = z[(i64)c * k + ix[j]];
    }
    float scale = 1.0f;
    if (ZG) { // (every lane of the warp: the sums' shuffles)
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; j++)
            s += xv[j] * xv[j];
        for (int o = 1; o < gsz / 8; o <<= 1)
            s += shfl_xor(s, o);
        scale = 1.0f / sqrtf(s / gsz + eps);
#pragma unroll
        for (int j = 0; j < 8; j++)
            zv[j] = silu_f(zv[j]);
    } else if (normw) { // every block of the row sums the whole row (cheap, from L2)
        // each thread issues 8 loads of 16 bytes before it adds: the sum waits on L2's latency
        // once a round, not once a value (7B Q4_K_M tg128 425 -> 459 tok/s)
        double s = 0;
        const int st = blockDim.x;
        if (((size_t)xr & 15) == 0 && (k & 3) == 0) {
            s = sumsq4<8>((const float4 *)xr, k / 4, st);
        } else {
            for (int i = threadIdx.x; i < k; i += st)
                s += (double)(xr[i] * xr[i]);
        }
        s = block_sum_d(s, sh);
        scale = 1.0f / sqrtf((float)(s / k) + eps);
    }
#define XV(j) (ZG ? (xv[j] * scale) * wv[j] * zv[j] : normw ? (xv[j] * scale) * wv[j] : xv[j])
    if (mode == 0) {
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int b = e0 / 32 + w + 8 * j;
            if (b >= e1 / 32)
                break;
            float v = XV(j);
            float amax = warp_max(fabsf(v));
            const float d = round_h(amax / 127.0f), id = amax != 0.0f ? 127.0f / amax : 0.0f;
            const int q = __float2int_rn(v * id);
            xq[(i64)c * k + b * 32 + lane] = (i8)q;
            if (xh && xdq)
                xh[(i64)c * k + b * 32 + lane] = f2h((float)q * d);
            if (lane == 0)
                xd[(i64)c * (k / 32) + b] = d;
        }
    } else if (mode == 1) {
        const int b = e0 / 256 + w;
        if (b < e1 / 256) {
            float v[8];
            int q[8];
#pragma unroll
            for (int j = 0; j < 8; j++) // lane holds elements lane*8 .. lane*8+7
                v[j] = XV(j);
            const float dq = q8k_store(v, lane, q, xq + (i64)c * k, xd + (i64)c * (k / 32),
                                       xs + (i64)c * (k / 16), b);
            if (xh) { // the 8 values as F16 pairs: one 16-byte store
                u32 hq[4];
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    const u32 h = f2h(xdq ? (float)q[j] * dq : (float)q[j]);
                    hq[j / 2] = j & 1 ? hq[j / 2] | (h << 16) : h;
                }
                *(uint4 *)(xh + (i64)c * k + b * 256 + lane * 8) =
                    make_uint4(hq[0], hq[1], hq[2], hq[3]);
            }
        }
    } else {
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int i = e0 + (int)threadIdx.x + 256 * j;
            if (i >= e1)
                break;
            float v = XV(j);
            const u16 h = mode == 2 ? f2h(v) : f2bf(v);
            xf[(i64)c * k + i] = mode == 2 ? h2f(h) : mode == 3 ? bf2f(h) : v;
            if (xh && mode != 4)
                xh[(i64)c * k + i] = h;
        }
    }
#undef XV
}
#undef ZG
