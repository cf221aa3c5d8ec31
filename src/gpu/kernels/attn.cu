// attn.cu: decode and prompt attention over the KV cache (the tensor-core prompt kernel is
// fa.cu), rendered for one head size and cache type so that the kernel carries only its own
// paths: its code is fetched anew each layer, after the weights' stream has gone through the
// caches (with quant_act rendered per mode: tg128 +2-4% on Q4_K_M files, BENCHMARKS.md).
// Parameters: AHD (values per head), AF16 (1: F16 cache, 0: F32); without them the head size
// and cache type are the kernel's arguments.
#include "common.cuh"

// Element d of head h of token t merged from its eff splits' partials (part, attn's layout for
// splits), read from L2: they may come from other blocks of the running grid
__device__ __forceinline__ float merge_row(const float *part, int t, int nh, int h, int hd,
                                           int splits, int eff, int d)
{
    const float *pp = part + ((long long)t * nh + h) * splits * (hd + 2);
    float mx = -INFINITY;
    for (int s = 0; s < eff; s++)
        mx = fmaxf(mx, ld_cg(pp + s * (hd + 2)));
    double sum = 0;
    float o = 0;
    for (int s = 0; s < eff; s++) {
        float m = ld_cg(pp + s * (hd + 2));
        if (m == -INFINITY)
            continue;
        float f = expf(m - mx);
        sum += (double)ld_cg(pp + s * (hd + 2) + 1) * f;
        o += ld_cg(pp + s * (hd + 2) + 2 + d) * f;
    }
    return o * (float)(1.0 / sum);
}

// Block b of token t's row of k values (256 floats in ov) converted by one warp as quant_act's
// mode 1 (q8k_store)
__device__ __forceinline__ void q8k_rows(const float *ov, int lane, i8 *xq, float *xd, int *xs,
                                         int t, int k, int b)
{
    float v[8];
    int q[8];
#pragma unroll
    for (int j = 0; j < 8; j++)
        v[j] = ov[lane * 8 + j];
    q8k_store(v, lane, q, xq + (long long)t * k, xd + (long long)t * (k / 32),
              xs + (long long)t * (k / 16), b);
}

// pieces of 16 bytes of a key row in flight at once (F16 cache), and value rows a thread
// loads before it uses the first: rendered for heads of 128, a row's 16 pieces and 8 rows
// (one L2 round trip each for contexts up to 128 where there were two); for heads of 256 a
// row's 32 pieces (AO256, with the F16 output pass below)
#if defined(AHD) && AHD == 128 && !defined(AKU)
#define AKU 16
#define AVQ 8
#endif
#ifndef AO256
#define AO256 0
#endif
#ifndef AG
#define AG 1
#endif
#if defined(AHD) && AHD == 256 && AO256 && !defined(AKU)
#define AKU 32
#define AVQ 8
#endif
#ifndef AKU
#define AKU 8
#define AVQ 4
#endif

// cache rows a split takes (the host's attn_splits: a split a ASPLIT positions of the context)
#define ASPLIT 512
__device__ __forceinline__ int eff_splits(int npos, int splits)
{
    return min(splits, (npos + ASPLIT - 1) / ASPLIT);
}

// Causal attention over the cache, one group of 128 threads per (query token, head, sequence
// split), blockDim.x / 128 heads a block (grid.y: heads / that).
// With splits > 1, each group covers a slice of the rows and writes its partial (max, sum,
// unnormalised output) to part[]; attn_merge combines them. The grid's splits are for the whole
// context; a token at npos positions takes only eff_splits of them (one a ASPLIT rows), the
// others return at once, and with one the first writes the row of O itself as without splits
// (the same steps: the same bytes as a context that is never split).
// With cnt (decode), the block that finishes last merges its heads' splits itself (no
// attn_merge launch; cnt: a zero count a block row of the grid, left at zero).
// With xq (decode, whole heads a 256-block: a block of 256 / hd groups, with one split or with
// cnt), the block's rows of O are also converted for the next product as quant_act's mode 1
// would (the K formats' int8 values and a d a 256-block, q8k_store): the same floats, so the
// same bytes, with no quant_act launch between attention and the o product.
// With G (decode; qwen35's gated attention), each final row of O is multiplied by the sigmoid
// of G's element at the same index, as ops.cu eltwise's SIGMOID_MUL would after it: O is then
// that node's output (the same floats, and with xq the same conversion), with no launch between.
// AG 0: no gate (G ignored): the kernels of models without one carry no code for it (the 1.5B
// qwen2 tg128 was 1.3% slower with it, BENCHMARKS.md).
// dynamic shared, a group's: (slice + hd) floats, and 2048 more (rounded slice) for an F16
// cache with hd 16, 32, 64, 128 or (AO256) 256 (the output pass's thread groups of hd / 16
// must divide the 128 threads, and its 128 / (hd / 16) row groups' sums fit in the 2048).
extern "C" __global__ void attn(const float *Q, const void *Kc, const void *Vc, float *O,
                                const int *pos, int nh, int nkv, int hd, float scale, int kv_f16,
                                int splits, float *part, i8 *xq, float *xd, int *xs, int *cnt,
                                const float *G)
{
#ifdef AHD
    hd = AHD;
    kv_f16 = AF16;
#endif
    extern __shared__ float smb[];
    __shared__ float red[32];
    __shared__ double redd[32];
    __shared__ float ov[256];
    const int tid = threadIdx.x & 127, gq = threadIdx.x >> 7;
    int t = blockIdx.x, h = blockIdx.y * (blockDim.x >> 7) + gq, sp = blockIdx.z;
    // (pos is copied in before the step's first kernel: it may be read before the wait)
    int npos = pos[0] + t + 1, kvw = nkv * hd, kvh = h / (nh / nkv);
    const int eff = eff_splits(npos, splits), one = eff == 1;
    if (sp >= eff)
        return;
    int chunk = (npos + eff - 1) / eff;
    int j0 = sp * chunk, j1 = min(npos, j0 + chunk);
    // the group's shared memory (every group of the block has the same slice)
    float *sm = smb + gq * (hd + ((j1 - j0 + 3) & ~3) + (kv_f16 ? 2048 : 0));
    // the slice's key and value rows start for L2 while the previous kernel (which writes
    // the newest rows) finishes: the loads after the wait then find them there
    const int es = kv_f16 ? 2 : 4;
    for (int j = j0 + tid; j < j1; j += 128)
        for (int o = 0; o < hd * es; o += 128) {
            const long long off = ((long long)j * kvw + (long long)kvh * hd) * es + o;
            prefetch_l2((const char *)Kc + off);
            prefetch_l2((const char *)Vc + off);
        }
    pdl_wait();
    pdl_launch();
    float *qv = sm, *sc = sm + hd;
    const float *q = Q + ((long long)t * nh + h) * hd;
    for (int d = tid; d < hd; d += 128)
        qv[d] = kv_f16 ? round_h(q[d]) : q[d];
    __syncthreads();
    // scores: a thread per cache row, the row read in 16-byte pieces (q from shared memory),
    // 8 pieces issued before the first is used where hd allows (one at a time, the 7B
    // decode step spent about 10 us a layer here, most of it waiting on 16 loads in turn)
    float mx = -INFINITY;
    for (int j = j0 + tid; j < j1; j += 128) {
        float s = 0;
        if (kv_f16) {
            const u16 *kr = (const u16 *)Kc + (long long)j * kvw + kvh * hd;
            if (hd % (8 * AKU) == 0) {
                for (int d0 = 0; d0 < hd; d0 += 8 * AKU) {
                    uint4 u[AKU];
#pragma unroll
                    for (int i = 0; i < AKU; i++)
                        u[i] = *(const uint4 *)(kr + d0 + 8 * i);
#pragma unroll
                    for (int i = 0; i < AKU; i++) {
                        const int d = d0 + 8 * i;
                        u32 uw[4] = {u[i].x, u[i].y, u[i].z, u[i].w};
#pragma unroll
                        for (int e = 0; e < 4; e++)
                            s += qv[d + 2 * e] * h2f((u16)(uw[e] & 0xffff)) +
                                 qv[d + 2 * e + 1] * h2f((u16)(uw[e] >> 16));
                    }
                }
            } else if (hd % 8 == 0) {
                for (int d = 0; d < hd; d += 8) {
                    uint4 u = *(const uint4 *)(kr + d);
                    u32 uw[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        s += qv[d + 2 * i] * h2f((u16)(uw[i] & 0xffff)) +
                             qv[d + 2 * i + 1] * h2f((u16)(uw[i] >> 16));
                }
            } else {
                for (int d = 0; d < hd; d++)
                    s += qv[d] * h2f(kr[d]);
            }
        } else {
            const float *kr = (const float *)Kc + (long long)j * kvw + kvh * hd;
            if (hd % 32 == 0) {
                for (int d0 = 0; d0 < hd; d0 += 32) {
                    float4 k4[8];
#pragma unroll
                    for (int i = 0; i < 8; i++)
                        k4[i] = *(const float4 *)(kr + d0 + 4 * i);
#pragma unroll
                    for (int i = 0; i < 8; i++) {
                        const int d = d0 + 4 * i;
                        s += qv[d] * k4[i].x + qv[d + 1] * k4[i].y + qv[d + 2] * k4[i].z +
                             qv[d + 3] * k4[i].w;
                    }
                }
            } else if (hd % 4 == 0) {
                for (int d = 0; d < hd; d += 4) {
                    float4 k4 = *(const float4 *)(kr + d);
                    s += qv[d] * k4.x + qv[d + 1] * k4.y + qv[d + 2] * k4.z + qv[d + 3] * k4.w;
                }
            } else {
                for (int d = 0; d < hd; d++)
                    s += qv[d] * kr[d];
            }
        }
        s *= scale;
        sc[j - j0] = s;
        mx = fmaxf(mx, s);
    }
    __syncthreads();
    mx = group_max<4>(mx, red);
    double sum = 0;
    for (int j = j0 + tid; j < j1; j += 128) {
        float e = expf(sc[j - j0] - mx);
        sc[j - j0] = e;
        sum += e;
    }
    sum = group_sum_d<4>(sum, redd);
    float inv = one ? (float)(1.0 / sum) : 1.0f;
    // this block's output: the head's row of O, or (eff > 1) its partial after (max, sum)
    float *orow = one ? O + ((long long)t * nh + h) * hd
                      : part + (((long long)t * nh + h) * splits + sp) * (hd + 2) + 2;
    if (kv_f16 && (hd == 16 || hd == 32 || hd == 64 || hd == 128 || (AO256 && hd == 256))) {
        // output, F16 cache: thread = (row group, 16 columns); each reads its rows' 32-byte
        // pieces (two rows at a time), then the row groups' sums are added in shared memory
        // (red2: 2048 floats after the scores)
        const int ncg = hd / 16, nrg = 128 / ncg, cg = tid % ncg, rg = tid / ncg;
        float o[16];
#pragma unroll
        for (int i = 0; i < 16; i++)
            o[i] = 0.0f;
        const u16 *vb = (const u16 *)Vc + kvh * hd + cg * 16;
        // rows j + q nrg (q < AVQ) each pass, all loaded before the first is used; added in
        // pairs (j, j + nrg), (j + 2 nrg, j + 3 nrg), ..., in the order of rows
        for (int j = j0 + rg; j < j1; j += AVQ * nrg) {
            uint4 a[AVQ][2];
            float pr[AVQ];
#pragma unroll
            for (int q = 0; q < AVQ; q++) {
                const int jq = j + q * nrg;
                a[q][0] = a[q][1] = make_uint4(0, 0, 0, 0);
                pr[q] = 0.0f;
                if (jq < j1) {
                    const u16 *r = vb + (long long)jq * kvw;
                    a[q][0] = *(const uint4 *)r;
                    a[q][1] = *(const uint4 *)(r + 8);
                    pr[q] = sc[jq - j0] * inv;
                    if (one)
                        pr[q] = round_h(pr[q]);
                }
            }
#pragma unroll
            for (int q = 0; q < AVQ; q += 2) {
                float va[16], vc[16];
                half8(T_F16, a[q][0], va);
                half8(T_F16, a[q][1], va + 8);
                half8(T_F16, a[q + 1][0], vc);
                half8(T_F16, a[q + 1][1], vc + 8);
#pragma unroll
                for (int i = 0; i < 16; i++)
                    o[i] += pr[q] * va[i] + pr[q + 1] * vc[i];
            }
        }
        float *red2 = sc + ((j1 - j0 + 3) & ~3);
        __syncthreads();
#pragma unroll
        for (int i = 0; i < 16; i++)
            red2[rg * hd + cg * 16 + i] = o[i];
        __syncthreads();
        for (int d = tid; d < hd; d += 128) {
            float v = 0.0f;
            for (int r = 0; r < nrg; r++)
                v += red2[r * hd + d];
            if (AG && G && one)
                v = v * sigmoid_f(G[((long long)t * nh + h) * hd + d]);
            orow[d] = v;
            if (xq && one) // (a partial's rows: converted after the merge)
                ov[gq * hd + d] = v;
        }
    } else {
        // output: a thread per element, 8 cache rows' values loaded before they are used
        for (int d = tid; d < hd; d += 128) {
            float o = 0;
            int j = j0;
            for (; j + 8 <= j1; j += 8) {
                float v[8];
#pragma unroll
                for (int u = 0; u < 8; u++) {
                    long long iv = (long long)(j + u) * kvw + kvh * hd + d;
                    v[u] = kv_f16 ? h2f(((const u16 *)Vc)[iv]) : ((const float *)Vc)[iv];
                }
#pragma unroll
                for (int u = 0; u < 8; u++) {
                    float p = sc[j + u - j0] * inv;
                    if (kv_f16 && one)
                        p = round_h(p);
                    o += p * v[u];
                }
            }
            for (; j < j1; j++) {
                float p = sc[j - j0] * inv;
                if (kv_f16) {
                    p = one ? round_h(p) : p;
                    o += p * h2f(((const u16 *)Vc)[(long long)j * kvw + kvh * hd + d]);
                } else {
                    o += p * ((const float *)Vc)[(long long)j * kvw + kvh * hd + d];
                }
            }
            if (AG && G && one)
                o = o * sigmoid_f(G[((long long)t * nh + h) * hd + d]);
            orow[d] = o;
            if (xq && one)
                ov[gq * hd + d] = o;
        }
    }
    if (!one && tid == 0) {
        orow[-2] = j1 > j0 ? mx : -INFINITY;
        orow[-1] = (float)sum;
    }
    if (!one && cnt) {
        // the block that finishes its heads' splits last merges them, as attn_merge would
        // (the count back to 0 for the next token and layer)
        __shared__ int last;
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0)
            last = atomicAdd(&cnt[blockIdx.y], 1) == eff - 1;
        __syncthreads();
        if (!last)
            return;
        __threadfence();
        for (int d = tid; d < hd; d += 128) {
            float o = merge_row(part, t, nh, h, hd, splits, eff, d);
            if (AG && G)
                o = o * sigmoid_f(G[((long long)t * nh + h) * hd + d]);
            O[((long long)t * nh + h) * hd + d] = o;
            if (xq)
                ov[gq * hd + d] = o;
        }
        if (threadIdx.x == 0)
            cnt[blockIdx.y] = 0;
    }
    if (xq) { // (a block of 256 / hd heads)
        __syncthreads();
        if (threadIdx.x < 32)
            q8k_rows(ov, threadIdx.x, xq, xd, xs, t, nh * hd, blockIdx.y);
    }
}

// grid (n_tok, nh), block hd (rounded up to a warp). With xq (decode, heads that tile 256
// values): grid (n_tok, nh hd / 256), block 256, and the merged rows are also converted for the
// next product as quant_act's mode 1 would (the K formats' int8 values with a d a 256-block,
// q8k_store): the same floats, so the same bytes, with no quant_act launch between attention
// and the o product. A token that took one split (eff_splits) has its row of O from attn: with
// xq it is converted, else there is nothing to do. G as in attn (the merged rows gated).
extern "C" __global__ void attn_merge(const float *part, float *O, int nh, int hd, int splits,
                                      const int *pos, i8 *xq, float *xd, int *xs,
                                      const float *G)
{
#ifdef AHD
    hd = AHD;
#endif
    __shared__ float ov[256];
    pdl_wait();
    pdl_launch();
    const int t = blockIdx.x, eff = eff_splits(pos[0] + t + 1, splits);
    const int e = xq ? (int)blockIdx.y * 256 + (int)threadIdx.x : (int)threadIdx.x;
    const int h = xq ? e / hd : (int)blockIdx.y, d = xq ? e % hd : (int)threadIdx.x;
    float o = 0;
    if (eff == 1) {
        if (!xq)
            return;
        o = O[((long long)t * nh + h) * hd + d];
    } else {
        o = merge_row(part, t, nh, h, hd, splits, eff, d);
        if (AG && G && d < hd)
            o = o * sigmoid_f(G[((long long)t * nh + h) * hd + d]);
        if (d < hd)
            O[((long long)t * nh + h) * hd + d] = o;
    }
    if (!xq)
        return;
    ov[threadIdx.x] = o;
    __syncthreads();
    if (threadIdx.x < 32)
        q8k_rows(ov, threadIdx.x, xq, xd, xs, t, nh * hd, blockIdx.y);
}
