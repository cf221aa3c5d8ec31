// fa.cu: causal attention for prompt batches on the tensor cores (flash-attention style), with
// an F16 KV cache: O[t][h] = softmax(scale q_t K^T) V over the cache rows 0 .. pos0 + t.
// A block takes 64 query tokens of one head, 4 warps of 16 tokens; it walks the cache in tiles
// of 64 rows, staged in shared memory: S = Q K^T with mma.sync m16n8k16 (F16 in, F32 out), the
// running row maximum and sum (online softmax), then O += P V with P rounded to F16 (as the CPU
// backend rounds its probabilities before the product with the F16 values), the V fragments
// read transposed with ldmatrix. Q is rounded to F16 as the CPU backend rounds it.
// Each thread holds, per m16n8 tile, rows g and g + 8 (g = lane / 4) and columns 2 (lane % 4)
// and + 1; a row's values are spread over the 4 lanes of a quad.
// Heads of more than 128 values (256: qwen35's) take tiles of 32 cache rows and two warps for
// each 16 tokens, each warp computing the scores in full and its half of the output columns:
// at 64 rows and one warp a thread would hold 224 floats of Q, S and O and spill.
// Parameters: HD (head size: a multiple of 16, at most 256).
#include "common.cuh"

#ifndef HD
#define HD 128
#endif
#define BQ 64           // query tokens per block
#if HD > 128
#define FDS 2           // warps sharing a group of 16 tokens, each 1 / FDS of the output columns
#define BK 32           // cache rows per tile
#else
#define FDS 1
#define BK 64
#endif
#define FT (128 * FDS)  // threads a block
#define LS (HD + 8)     // shared row stride in halves (16-byte aligned, conflict-free)
#define NT (HD / 8)     // n-tiles of the output
#define NTW (NT / FDS)  // ... of a warp
#define KQ (HD / 16)    // k-steps over the head

__device__ __forceinline__ u32 pack_h2(float a, float b)
{
    return (u32)f2h(a) | ((u32)f2h(b) << 16);
}

// Grid (ceil(T / BQ), heads); block FT. pos[0]: the cache position of token 0.
extern "C" __global__ void __launch_bounds__(FT)
fa(const float *Q, const u16 *Kc, const u16 *Vc, float *O, const int *pos, int T, int nh,
   int nkv, float scale)
{
    __shared__ __align__(16) u16 ks[BK * LS];
    __shared__ __align__(16) u16 vs[BK * LS];
    pdl_wait();
    pdl_launch();
#if FDS > 1
    const int tid = threadIdx.x, lane = tid & 31, warp = (tid >> 5) & 3, dh = tid >> 7;
#else
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, dh = 0;
#endif
    const int g = lane >> 2, t4 = lane & 3;
    const int h = blockIdx.y, kvh = h / (nh / nkv), kvw = nkv * HD;
    const int q0 = blockIdx.x * BQ, qw = q0 + warp * 16; // the block's and the warp's first token
    const int p0 = pos[0];
    // Q fragments (rows g, g + 8 of the warp's 16 tokens), rounded to F16; past T: zeros
    u32 qa[KQ][4];
    {
        const int ta = qw + g, tb = qw + g + 8;
        const float *qa_ = Q + ((i64)ta * nh + h) * HD, *qb_ = Q + ((i64)tb * nh + h) * HD;
#pragma unroll
        for (int kk = 0; kk < KQ; kk++) {
            int d = kk * 16 + 2 * t4;
            float2 x0 = ta < T ? *(const float2 *)(qa_ + d) : make_float2(0.f, 0.f);
            float2 x1 = tb < T ? *(const float2 *)(qb_ + d) : make_float2(0.f, 0.f);
            float2 x2 = ta < T ? *(const float2 *)(qa_ + d + 8) : make_float2(0.f, 0.f);
            float2 x3 = tb < T ? *(const float2 *)(qb_ + d + 8) : make_float2(0.f, 0.f);
            qa[kk][0] = pack_h2(x0.x, x0.y);
            qa[kk][1] = pack_h2(x1.x, x1.y);
            qa[kk][2] = pack_h2(x2.x, x2.y);
            qa[kk][3] = pack_h2(x3.x, x3.y);
        }
    }
    float o[NTW][4]; // output columns (dh NTW + n) 8 + ...
#pragma unroll
    for (int n = 0; n < NTW; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    const int last = p0 + min(T, q0 + BQ) - 1; // the last cache row any token of the block sees
    const int wlast = p0 + qw + 15;             // ... of this warp's tokens
    for (int kb = 0; kb <= last; kb += BK) {
        __syncthreads(); // the previous tile is no longer read
        // stage K and V rows kb .. kb + BK - 1 (rows past `last` as zeros)
        for (int c = tid; c < BK * (HD / 8); c += FT) {
            int r = c / (HD / 8), d = (c % (HD / 8)) * 8, j = kb + r;
            uint4 kv = make_uint4(0, 0, 0, 0), vv = kv;
            if (j <= last) {
                kv = *(const uint4 *)(Kc + (i64)j * kvw + kvh * HD + d);
                vv = *(const uint4 *)(Vc + (i64)j * kvw + kvh * HD + d);
            }
            *(uint4 *)&ks[r * LS + d] = kv;
            *(uint4 *)&vs[r * LS + d] = vv;
        }
        __syncthreads();
        if (kb > wlast) // every row of this tile is after the warp's last token
            continue;
        // S = Q K^T: BK / 8 n-tiles of 8 cache rows
        float s[BK / 8][4];
#pragma unroll
        for (int n = 0; n < BK / 8; n++) {
            s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
            const u16 *kr = &ks[(n * 8 + g) * LS + 2 * t4];
#pragma unroll
            for (int kk = 0; kk < KQ; kk++)
                mma_16816<0>(s[n], qa[kk], *(const u32 *)(kr + kk * 16),
                        *(const u32 *)(kr + kk * 16 + 8));
        }
        // scale, causal mask, running maximum of rows g (r = 0) and g + 8 (r = 1)
        float mt[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int n = 0; n < BK / 8; n++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                int r = c >> 1, j = kb + n * 8 + 2 * t4 + (c & 1);
                int tok = qw + g + 8 * r;
                float v = s[n][c] * scale;
                if (j > p0 + tok)
                    v = -INFINITY;
                s[n][c] = v;
                mt[r] = fmaxf(mt[r], v);
            }
        float corr[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            mt[r] = fmaxf(mt[r], shfl_xor(mt[r], 1));
            mt[r] = fmaxf(mt[r], shfl_xor(mt[r], 2));
            float mn = fmaxf(m[r], mt[r]);
            corr[r] = m[r] == -INFINITY ? 0.0f : expf(m[r] - mn);
            m[r] = mn;
            l[r] *= corr[r];
        }
#pragma unroll
        for (int n = 0; n < NTW; n++) {
            o[n][0] *= corr[0];
            o[n][1] *= corr[0];
            o[n][2] *= corr[1];
            o[n][3] *= corr[1];
        }
        // P = exp(S - m) (F16 for the product, F32 in the sum); O += P V
        float ls[2] = {0.0f, 0.0f};
#pragma unroll
        for (int kk = 0; kk < BK / 16; kk++) {
            u32 pa[4];
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                const float *sn = s[2 * kk + hh];
                float e0 = m[0] == -INFINITY ? 0.0f : expf(sn[0] - m[0]);
                float e1 = m[0] == -INFINITY ? 0.0f : expf(sn[1] - m[0]);
                float e2 = m[1] == -INFINITY ? 0.0f : expf(sn[2] - m[1]);
                float e3 = m[1] == -INFINITY ? 0.0f : expf(sn[3] - m[1]);
                ls[0] += e0 + e1;
                ls[1] += e2 + e3;
                pa[2 * hh] = pack_h2(e0, e1);
                pa[2 * hh + 1] = pack_h2(e2, e3);
            }
            // V rows kb + 16 kk .. + 15: ldmatrix.trans gives the B fragments of two n-tiles
            const int mi = lane >> 3, rr = lane & 7;
#pragma unroll
            for (int n = 0; n < NTW; n += 2) {
                u32 b[4];
                ldsm_x4<1>(b, &vs[(kk * 16 + rr + 8 * (mi & 1)) * LS + (dh * NTW + n) * 8 +
                                  8 * (mi >> 1)]);
                mma_16816<0>(o[n], pa, b[0], b[1]);
                mma_16816<0>(o[n + 1], pa, b[2], b[3]);
            }
        }
#pragma unroll
        for (int r = 0; r < 2; r++) {
            ls[r] += shfl_xor(ls[r], 1);
            ls[r] += shfl_xor(ls[r], 2);
            l[r] += ls[r];
        }
    }
    // O = o / l for the warp's tokens below T
#pragma unroll
    for (int r = 0; r < 2; r++) {
        int tok = qw + g + 8 * r;
        if (tok >= T)
            continue;
        float inv = 1.0f / l[r];
        float *orow = O + ((i64)tok * nh + h) * HD;
#pragma unroll
        for (int n = 0; n < NTW; n++)
            *(float2 *)(orow + (dh * NTW + n) * 8 + 2 * t4) =
                make_float2(o[n][2 * r] * inv, o[n][2 * r + 1] * inv);
    }
}
