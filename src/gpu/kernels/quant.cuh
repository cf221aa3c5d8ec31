// quant.cuh: the activation conversion of quant_act (quantize.cu), shared with the decode
// kernel (mvd.cu), which converts its own activation when the launch asks it to.
//   mode 0: Q8_0 as ggml (blocks of 32: d = amax/127 stored as F16, q = round(x*127/amax))
//   mode 1: Q8_K as ggml (blocks of 256: iscale = -127/max (max = the signed value of largest
//           magnitude), q = min(127, round(x*iscale)), d = 1/iscale), d repeated per 32
//   mode 2: floats rounded to F16; mode 3: to BF16; mode 4: plain copy (F32 weights)
// Output for a row of k: xq int8 [k] + xd float [k/32] (modes 0, 1), or xf float [k]; mode 1
// also writes xs int [k/16], the sums of each 16 values of xq (the K formats' min terms).
#pragma once
#include "common.cuh"

// 1 / the root mean square of row x (k values) with eps, summed in double by the whole block
// (every thread of the block calls it; sh holds 32 doubles). Each thread issues its loads in
// rounds of 8 before it adds: the row comes from L2, and the sum waits on its latency.
#ifndef RMS_R
#define RMS_R 8 // float4 loads in flight per thread
#endif
__device__ __forceinline__ float rms_scale(const float *x, int k, float eps, double *sh)
{
    double s = 0;
    const int st = blockDim.x;
    if (((size_t)x & 15) == 0 && (k & 3) == 0) {
        const float4 *x4 = (const float4 *)x;
        const int k4 = k >> 2;
        for (int i0 = threadIdx.x; i0 < k4; i0 += RMS_R * st) {
            float4 v[RMS_R];
#pragma unroll
            for (int j = 0; j < RMS_R; j++) {
                float4 z = {0.0f, 0.0f, 0.0f, 0.0f};
                v[j] = i0 + j * st < k4 ? x4[i0 + j * st] : z;
            }
#pragma unroll
            for (int j = 0; j < RMS_R; j++)
                s += (double)(v[j].x * v[j].x) + (double)(v[j].y * v[j].y) +
                     (double)(v[j].z * v[j].z) + (double)(v[j].w * v[j].w);
        }
    } else {
        for (int i0 = threadIdx.x; i0 < k; i0 += 8 * st) {
            float v[8];
#pragma unroll
            for (int j = 0; j < 8; j++)
                v[j] = i0 + j * st < k ? x[i0 + j * st] : 0.0f;
#pragma unroll
            for (int j = 0; j < 8; j++)
                s += (double)(v[j] * v[j]);
        }
    }
    s = block_sum_d(s, sh);
    return 1.0f / sqrtf((float)(s / k) + eps);
}

// Converts elements [e0, e1) of row x (times scale and normw where normw is set) in mode
// `mode`; e0 and e1 are multiples of the mode's block. Every thread of the block calls it.
__device__ __forceinline__ void quant_span(const float *x, const float *normw, float scale,
                                           int e0, int e1, int mode, i8 *xq, float *xd,
                                           float *xf, int *xs)
{
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
#define XV(i) (normw ? (x[i] * scale) * normw[i] : x[i])
    if (mode == 0) {
        for (int b = e0 / 32 + w; b < e1 / 32; b += nw) {
            float v = XV(b * 32 + lane);
            float amax = warp_max(fabsf(v));
            float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
            xq[b * 32 + lane] = (i8)__float2int_rn(v * id);
            if (lane == 0)
                xd[b] = h2f(f2h(d));
        }
    } else if (mode == 1) {
        for (int b = e0 / 256 + w; b < e1 / 256; b += nw) {
            float v[8], am = 0.0f, mx = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; j++) { // lane holds elements lane*8 .. lane*8+7
                v[j] = XV(b * 256 + lane * 8 + j);
                if (fabsf(v[j]) > am) {
                    am = fabsf(v[j]);
                    mx = v[j];
                }
            }
            // first element of largest magnitude wins (lowest index), as ggml's scan does
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
            int sum = 0;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                int q = am != 0.0f ? min(127, __float2int_rn(iscale * v[j])) : 0;
                xq[b * 256 + lane * 8 + j] = (i8)q;
                sum += q;
            }
            sum += shfl_xor(sum, 1);
            if (!(lane & 1))
                xs[b * 16 + lane / 2] = sum;
            if (lane < 8)
                xd[b * 8 + lane] = am != 0.0f ? 1.0f / iscale : 0.0f;
        }
    } else {
        for (int i = e0 + threadIdx.x; i < e1; i += blockDim.x) {
            float v = XV(i);
            xf[i] = mode == 2 ? h2f(f2h(v)) : mode == 3 ? bf2f(f2bf(v)) : v;
        }
    }
#undef XV
}
