// ops.cu: the graph's small ops (norms, elementwise, rope + KV write, DeltaNet, top-k); the
// attention kernels are in attn.cu.
// Parameters: none beyond common.cuh; shapes are kernel arguments. The batch's first position
// lives in device memory (pos[0]) so a captured graph replays for every token unchanged.
#include "common.cuh"

// out[t][:] = deq(W[ids[t]][:]) * s (W planar, N blocks in all); grid (n_tok), block 256
// W holds rows [v0, v0 + nrows) of the table (a tensor-parallel shard's slice): a token
// outside them gives a row of zeros, which the shards' all-reduce fills. A token of -1 with
// feed: feed[0], the previous step's first candidate (a decode step queued before the host
// has read that one).
extern "C" __global__ void get_rows(const u8 *W, int wtype, long long N, int n, const int *ids,
                                    float s, float *out, int v0, int nrows, const int *feed)
{
    pdl_wait();
    pdl_launch();
    int t = blockIdx.x, id = ids[t];
    if (id == -1 && feed)
        id = feed[0];
    id -= v0;
    bool in = id >= 0 && id < nrows;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float v = in ? deq1(wtype, W, N, n, id, i) : 0.0f;
        out[(long long)t * n + i] = s != 1.0f ? v * s : v;
    }
}

// mode 0: rms_norm (x/sqrt(mean+eps) * w), 1: l2_norm (x/max(|x|,eps)),
// 2: rms_norm_gate ((x*scale)*w * silu(z)); one block per group.
extern "C" __global__ void norm_rows(const float *x, const float *w, const float *z, float *y, int gsz,
                                float eps, int mode)
{
    pdl_wait();
    pdl_launch();
    __shared__ double sh[32];
    long long r = blockIdx.x;
    const float *xr = x + r * gsz;
    double s = 0;
    for (int i = threadIdx.x; i < gsz; i += blockDim.x)
        s += (double)(xr[i] * xr[i]);
    s = block_sum_d(s, sh);
    float scale = mode == 1 ? 1.0f / fmaxf(sqrtf((float)s), eps)
                            : 1.0f / sqrtf((float)(s / gsz) + eps);
    for (int i = threadIdx.x; i < gsz; i += blockDim.x) {
        float v = xr[i] * scale;
        if (mode != 1)
            v = v * w[i];
        if (mode == 2)
            v = v * silu_f(z[r * gsz + i]);
        y[r * gsz + i] = v;
    }
}

// op: 0 add (a + b*s), 1 mul, 2 scale, 3 swiglu, 4 silu, 5 sigmoid_mul
extern "C" __global__ void eltwise(const float *a, const float *b, float *o, long long n, float s,
                                   int op)
{
    pdl_wait();
    pdl_launch();
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        float x = a[i], r;
        switch (op) {
        case 0: r = x + b[i] * s; break;
        case 1: r = x * b[i]; break;
        case 2: r = x * s; break;
        case 3: r = silu_f(x) * b[i]; break;
        case 4: r = silu_f(x); break;
        default: r = x * sigmoid_f(b[i]); break;
        }
        o[i] = r;
    }
}

// out[i0 + n0*(i1 + n1*i2)] = a[off + i0 + i1*s1 + i2*s2]
extern "C" __global__ void view(const float *a, float *o, long long n, int off, int n0, int n1,
                                int s1, int s2)
{
    pdl_wait();
    pdl_launch();
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        long long i0 = i % n0, r = i / n0, i1 = r % n1, i2 = r / n1;
        o[i] = a[off + i0 + i1 * s1 + i2 * s2];
    }
}

// Rotary embedding of element e of a tensor row x -> y (heads of hd); cs = [n_rot/2][cos, sin].
// If cache is set, the result is also written to element e of cache row `row` (F32 or F16);
// y may be NULL (the cache only). nw: the head's RMSNorm first (x sc nw[i], sc its 1 / RMS).
// hs: the heads' stride in x (hd, or more where x's heads are rows of a wider tensor).
__device__ __forceinline__ void rope_elem(const float *x, float *y, int e, int ne, int hd,
                                          int n_rot, int mode, const float *cs, void *cache,
                                          long long row, int kv_f16, const float *nw = nullptr,
                                          float sc = 1.0f, int hs = 0)
{
    int half = n_rot / 2, i = e % hd;
    const float *xh = x + (long long)(e / hd) * (hs ? hs : hd);
#define XN(j) (nw ? (xh[j] * sc) * nw[j] : xh[j])
    float v;
    if (i >= n_rot) {
        v = XN(i);
    } else if (mode == 2) { // NEOX: pairs (i, i + half)
        int p = i < half ? i : i - half;
        float c = cs[2 * p], s = cs[2 * p + 1];
        v = i < half ? rot_lo(XN(i), XN(i + half), c, s) : rot_hi(XN(i - half), XN(i), c, s);
    } else { // NORM: pairs (2p, 2p+1)
        int p = i / 2;
        float c = cs[2 * p], s = cs[2 * p + 1];
        v = (i & 1) ? rot_hi(XN(i - 1), XN(i), c, s) : rot_lo(XN(i), XN(i + 1), c, s);
    }
#undef XN
    if (y)
        y[e] = v;
    if (cache)
        cache_put(cache, row * ne + e, v, kv_f16);
}

// RoPE of q and (optionally) k with the K-cache write (yk NULL: the cache only), and
// (optionally) the V-cache write, for token blockIdx.x at position pos[0] + t: RoPE fused with
// the KV write, one launch per layer.
// The token's elements (q, then k, then v) are spread over gridDim.y blocks, one per thread.
// Angles as the CPU backend makes them (graph_rope_table): from the session's table of every
// position, [position][n_rot / 2 pairs][cos, sin], where cst is set; else made here, theta_i =
// pos * ts^i by repeated float multiplication (one thread, cheap), then the cos and sin of
// every angle in parallel, in double rounded once to float; each block makes its own.
// dynamic shared: n_rot/2 * 3 floats (used without cst), then with head norms a float for each
// head of q and k. block 256, grid (tokens, 1 or ceil((neq + nek + nev) / 256)).
// qnw, knw: each head of q (of k) RMS-normalized first (x / sqrt(mean(x^2) + eps) qnw[i]):
// the block first sums the squares of the heads its elements lie in, a wave a head, into
// hsc (dynamic shared memory after the angles: a float for each head of q and k).
// qhs, qts: the strides of q's heads and tokens in xq (the graph's VIEW of q's rows folded in:
// the query half of each head's rows in qwen35's query | gate product), 0: hd and neq.
extern "C" __global__ void rope(const float *xq, float *yq, int neq, void *qcache,
                                const float *xk, float *yk, int nek, void *kcache,
                                const float *xv, void *vcache, int nev, const int *pos, int hd,
                                int n_rot, int mode, float theta_scale, int kv_f16,
                                const float *cst, const float *qnw, const float *knw, float eps,
                                int qhs, int qts)
{
    pdl_wait();
    pdl_launch();
    extern __shared__ float sm[];
    int t = blockIdx.x, half = n_rot / 2;
    long long row = pos[0] + t;
    const float *cs = cst ? cst + row * n_rot : nullptr;
    if (!cs) {
        float *cm = sm, *th = sm + 2 * half;
        if (threadIdx.x == 0) {
            float theta = (float)row;
            for (int i = 0; i < half; i++) {
                th[i] = theta;
                theta *= theta_scale;
            }
        }
        __syncthreads();
        for (int i = threadIdx.x; i < half; i += blockDim.x) {
            double c, sn; // (in double, rounded once: graph_rope_table's bits)
            sincos((double)th[i], &sn, &c);
            cm[2 * i] = (float)c;
            cm[2 * i + 1] = (float)sn;
        }
        __syncthreads();
        cs = cm;
    }
    if (!qhs) {
        qhs = hd;
        qts = neq;
    }
    const float *xqt = xq + (long long)t * qts, *xkt = xk + (long long)t * nek;
    float *yqt = yq + (long long)t * neq, *ykt = yk ? yk + (long long)t * nek : nullptr;
    // the heads' 1 / RMS: heads h0 .. h1 - 1 of q's nqh then k's (all of them in one block a
    // token, else those of the block's elements)
    float *hsc = sm + 3 * half;
    const int nqh = neq / hd, nh = nqh + (xk ? nek / hd : 0);
    int h0 = 0, h1 = nh;
    if (gridDim.y > 1) {
        const int e0 = blockIdx.y * blockDim.x, e1 = min(e0 + (int)blockDim.x, nh * hd);
        h0 = e0 < neq ? e0 / hd : nqh + (e0 - neq) / hd;
        h1 = e1 <= e0 ? h0 : (e1 - 1 < neq ? (e1 - 1) / hd : nqh + (e1 - 1 - neq) / hd) + 1;
    }
    if (qnw || knw) {
        for (int h = h0 + wave_id(); h < h1; h += blockDim.x / WAVE) {
            const float *xh = h < nqh ? xqt + (long long)h * qhs : xkt + (h - nqh) * hd;
            float ss = 0.0f;
            for (int j = lane_id(); j < hd; j += WAVE)
                ss += xh[j] * xh[j];
#pragma unroll
            for (int o = WAVE / 2; o > 0; o >>= 1)
                ss += shfl_xor(ss, o);
            if (lane_id() == 0)
                hsc[h - h0] = 1.0f / sqrtf(ss / hd + eps);
        }
        __syncthreads();
    }
#define HSC(h) (qnw || knw ? hsc[(h) - h0] : 1.0f)
    if (gridDim.y == 1) {
        // one block per token: q first, then k and v. k's output may lie where q's input was
        // (the arena gives q's buffer away once the q rope, its last reader, has run), hence
        // the barrier; the host spreads the token over blocks only where they do not overlap.
        // (The heads' norms were summed above, before anything is written.)
        for (int e = threadIdx.x; e < neq; e += blockDim.x)
            rope_elem(xqt, yqt, e, neq, hd, n_rot, mode, cs, qcache, row, kv_f16, qnw,
                      HSC(e / hd), qhs);
        __syncthreads();
        for (int e = threadIdx.x; xk && e < nek; e += blockDim.x)
            rope_elem(xkt, ykt, e, nek, hd, n_rot, mode, cs, kcache, row, kv_f16, knw,
                      HSC(nqh + e / hd));
        for (int e = threadIdx.x; xv && e < nev; e += blockDim.x)
            cache_put(vcache, row * nev + e, xv[(long long)t * nev + e], kv_f16);
        return;
    }
    int e = blockIdx.y * blockDim.x + threadIdx.x; // of q, then k, then v
    if (e < neq) {
        rope_elem(xqt, yqt, e, neq, hd, n_rot, mode, cs, qcache, row, kv_f16, qnw, HSC(e / hd),
                  qhs);
        return;
    }
    e -= neq;
    if (xk && e < nek) {
        rope_elem(xkt, ykt, e, nek, hd, n_rot, mode, cs, kcache, row, kv_f16, knw,
                  HSC(nqh + e / hd));
        return;
    }
    e -= xk ? nek : 0;
    if (xv && e < nev)
        cache_put(vcache, row * nev + e, xv[(long long)t * nev + e], kv_f16);
#undef HSC
}

// cache rows pos0 .. pos0+n_tok-1 = x; grid-stride over n_tok*w
extern "C" __global__ void kv_store(const float *x, void *cache, const int *pos, int w,
                                    long long n, int kv_f16)
{
    pdl_wait();
    pdl_launch();
    long long base = (long long)pos[0] * w;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        cache_put(cache, base + i, x[i], kv_f16);
    }
}

// Causal depthwise conv with rolling state: o[t][ch] = sum_j x'[t + j][ch] w[ch][j], x' the K - 1
// state rows then x. Grid (channels / 128, chunks of DC_T tokens); a thread takes one channel
// of a chunk. Only the first chunk's tokens reach into the state (DC_T >= K - 1), so its
// threads also write the new state, after their own reads of the old one. act: SiLU after.
#define DC_T 32
extern "C" __global__ void conv1d(const float *x, const float *w, float *st, float *o, int C,
                                  int T, int K, int act)
{
    pdl_wait();
    pdl_launch();
    int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= C)
        return;
    int S = K - 1, t0 = blockIdx.y * DC_T, t1 = min(T, t0 + DC_T);
#define XT(idx) ((idx) < S ? st[(idx) * C + ch] : x[(long long)((idx) - S) * C + ch])
    for (int t = t0; t < t1; t++) {
        float sum = 0;
        for (int j = 0; j < K; j++)
            sum += XT(t + j) * w[ch * K + j];
        o[(long long)t * C + ch] = act ? silu_f(sum) : sum;
    }
    if (blockIdx.y == 0) // (row r reads row T + r > r of the old state, before it is written)
        for (int r = 0; r < S; r++)
            st[r * C + ch] = XT(T + r);
#undef XT
}

// The DeltaNet's gates of V head h and token t from the raw products al and be (i = t H + h):
// the log decay g = softplus(al + dt[h]) A[h] and beta = sigmoid(be)
// (of the raw values a and b)
__device__ __forceinline__ void gate_of(float a, float b, const float *dt, const float *A, int h,
                                        float &g, float &beta)
{
    const float x = a + dt[h];
    const float sp = x > 20.0f ? x : log1pf(expf(x));
    g = sp * A[h];
    beta = sigmoid_f(b);
}
__device__ __forceinline__ void gate_pair(const float *al, const float *be, const float *dt,
                                          const float *A, int i, int h, float &g, float &beta)
{
    gate_of(al[i], be[i], dt, A, h, g, beta);
}

extern "C" __global__ void gates(const float *al, const float *be, const float *dt, const float *A,
                                 float *o, int H, int T)
{
    pdl_wait();
    pdl_launch();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= H * T)
        return;
    int t = i / H, h = i % H;
    gate_pair(al, be, dt, A, i, h, o[t * 2 * H + h], o[t * 2 * H + H + h]);
}

// Gated delta rule, per V head h and token t: M (dv x dk) <- M e^g; delta = beta (v - M k);
// M += delta k^T; o = M q / sqrt(dk), q and k L2-normalized (x / max(|x|, eps)) from the
// token's row q (nkh dk) | k (nkh dk) | v (nvh dv) of X. Each row of M is independent of the
// others, so a wave holds DN_R rows in registers for the whole batch, element j = e WAVE +
// lane of each row in its lane (KPL elements a lane: dk <= KPL WAVE), and reads M from memory
// once and writes it once; the sums over j are butterflies over the wave, the rows' and the
// norms' together (the norms applied after the sums). The next token's q, k, v and gates are
// loaded while this one's are used. Grid (nvh, row groups: DN_R rows a wave of a block; a
// wave takes every gridDim.y-th group on).
#define DN_R 4
// The gates: G's rows (g of each V head, then beta), or where G is null computed from the raw
// products al and be (gate_pair: the graph's GATES launch folded in)
struct dn_gates {
    const float *G, *al, *be, *dt, *A;
};

template <int KPL>
__device__ __forceinline__ void dn_load(const float *X, dn_gates G, int nkh, int nvh, int dk,
                                        int dv, int h, int i0, int t, float (&k)[KPL],
                                        float (&q)[KPL], float (&v)[DN_R], float &g, float &be)
{
    const int lane = lane_id(), kh = h % nkh;
    const float *row = X + (long long)t * (2 * nkh * dk + nvh * dv);
    const float *qr = row + kh * dk, *kr = row + (nkh + kh) * dk, *vr = row + 2 * nkh * dk + h * dv;
#pragma unroll
    for (int e = 0; e < KPL; e++) {
        const int j = e * WAVE + lane;
        k[e] = j < dk ? kr[j] : 0.0f;
        q[e] = j < dk ? qr[j] : 0.0f;
    }
#pragma unroll
    for (int r = 0; r < DN_R; r++)
        v[r] = i0 + r < dv ? vr[i0 + r] : 0.0f;
    if (G.G) {
        g = G.G[(long long)t * 2 * nvh + h];
        be = G.G[(long long)t * 2 * nvh + nvh + h];
    } else {
        gate_pair(G.al, G.be, G.dt, G.A, t * nvh + h, h, g, be);
    }
}

// One token of a wave's R rows m (state, element j = e WAVE + lane of each row in its lane):
// decay by e^g, the delta rule with the token's k (normalized here), v and beta, then the
// output M q; returns row lane's output (lanes < R) scaled by qs / |q|.
template <int KPL, int R>
__device__ __forceinline__ float dn_step(float (&m)[R][KPL], float (&k)[KPL], const float (&q)[KPL],
                                         const float (&v)[R], float g, float be, float eps,
                                         float qs)
{
    const int lane = lane_id();
    const float eg = expf(g);
    float s[R + 2]; // the rows' M k, then |k|^2 and |q|^2
    s[R] = s[R + 1] = 0.0f;
#pragma unroll
    for (int e = 0; e < KPL; e++) {
        s[R] += k[e] * k[e];
        s[R + 1] += q[e] * q[e];
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
        s[r] = 0.0f;
#pragma unroll
        for (int e = 0; e < KPL; e++) {
            m[r][e] *= eg;
            s[r] += m[r][e] * k[e];
        }
    }
#pragma unroll
    for (int o = WAVE / 2; o > 0; o >>= 1)
#pragma unroll
        for (int r = 0; r < R + 2; r++)
            s[r] += shfl_xor(s[r], o);
    const float sk = 1.0f / fmaxf(sqrtf(s[R]), eps);
    const float sq = qs / fmaxf(sqrtf(s[R + 1]), eps);
#pragma unroll
    for (int e = 0; e < KPL; e++)
        k[e] *= sk;
#pragma unroll
    for (int r = 0; r < R; r++) {
        const float d = be * (v[r] - s[r] * sk);
        s[r] = 0.0f;
#pragma unroll
        for (int e = 0; e < KPL; e++) {
            m[r][e] += d * k[e];
            s[r] += m[r][e] * q[e];
        }
    }
#pragma unroll
    for (int o = WAVE / 2; o > 0; o >>= 1)
#pragma unroll
        for (int r = 0; r < R; r++)
            s[r] += shfl_xor(s[r], o);
    float out = s[0]; // (lane r returns row r: selects, not an indexed register array)
#pragma unroll
    for (int r = 1; r < R; r++)
        out = lane == r ? s[r] : out;
    return out * sq;
}

// rows i0 .. i0 + R of head h's state into (from) m
template <int KPL, int R, bool STORE>
__device__ __forceinline__ void dn_state(float *state, float (&m)[R][KPL], int dv, int dk, int h,
                                         int i0)
{
    const int lane = lane_id();
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int e = 0; e < KPL; e++) {
            const int j = e * WAVE + lane;
            float *p = &state[((long long)h * dv + i0 + r) * dk + j];
            if (STORE) {
                if (i0 + r < dv && j < dk)
                    *p = m[r][e];
            } else {
                m[r][e] = i0 + r < dv && j < dk ? *p : 0.0f;
            }
        }
}

template <int KPL>
__device__ __forceinline__ void dn_rows(const float *X, dn_gates G, float *state, float *O,
                                        int nkh, int nvh, int dk, int dv, int T, float eps, int h,
                                        int i0)
{
    const int lane = lane_id();
    const float qs = 1.0f / sqrtf((float)dk);
    float m[DN_R][KPL];
    dn_state<KPL, DN_R, false>(state, m, dv, dk, h, i0);
    float k[KPL], q[KPL], v[DN_R], g, be;
    dn_load<KPL>(X, G, nkh, nvh, dk, dv, h, i0, 0, k, q, v, g, be);
    for (int t = 0; t < T; t++) {
        float kn[KPL], qn[KPL], vn[DN_R], gn = 0.0f, bn = 0.0f;
        if (t + 1 < T)
            dn_load<KPL>(X, G, nkh, nvh, dk, dv, h, i0, t + 1, kn, qn, vn, gn, bn);
        const float out = dn_step<KPL, DN_R>(m, k, q, v, g, be, eps, qs);
        if (lane < DN_R && i0 + lane < dv)
            O[((long long)t * nvh + h) * dv + i0 + lane] = out;
        if (t + 1 < T) {
#pragma unroll
            for (int e = 0; e < KPL; e++) {
                k[e] = kn[e];
                q[e] = qn[e];
            }
#pragma unroll
            for (int r = 0; r < DN_R; r++)
                v[r] = vn[r];
            g = gn;
            be = bn;
        }
    }
    dn_state<KPL, DN_R, true>(state, m, dv, dk, h, i0);
}

// F<KPL>(args) for the keys' dk values: KPL elements a lane, dk at most 8 WAVE (the host checks)
#define DN_BY_KPL(F, ...)                                                                      \
    do {                                                                                       \
        if (dk <= WAVE)                                                                        \
            F<1>(__VA_ARGS__);                                                                 \
        else if (dk <= 2 * WAVE)                                                               \
            F<2>(__VA_ARGS__);                                                                 \
        else if (dk <= 4 * WAVE)                                                               \
            F<4>(__VA_ARGS__);                                                                 \
        else                                                                                   \
            F<8>(__VA_ARGS__);                                                                 \
    } while (0)

extern "C" __global__ void deltanet(const float *X, const float *Gm, const float *al,
                                    const float *be, const float *dt, const float *A,
                                    float *state, float *O, int nkh, int nvh, int dk, int dv,
                                    int T, float eps)
{
    pdl_wait();
    pdl_launch();
    const dn_gates G = {Gm, al, be, dt, A};
    const int nw = blockDim.x / WAVE, h = blockIdx.x;
    for (int grp = blockIdx.y * nw + wave_id(); grp * DN_R < dv; grp += gridDim.y * nw) {
        const int i0 = grp * DN_R;
        DN_BY_KPL(dn_rows, X, G, state, O, nkh, nvh, dk, dv, T, eps, h, i0);
    }
}

// Prompts (deltanet_staged): the same recurrence, with each chunk of C tokens' q and k rows, the
// block's 16 v values and the gates copied into shared memory (cp.async) while the chunk before
// is used, so that no token waits on its loads; the folded gates are computed once a token by
// the block, not by every wave. Grid (nvh, dv / 16), blocks of 128 threads: block y takes rows
// 16 y .. + 16 of head h, a wave DN_RW of them. Shared memory: two chunks of C (2 dk + 18)
// floats (q, k, v, then the gates' pairs). The same arithmetic as deltanet, token by token.
#define DN_RW (16 * WAVE / 128)

template <int VB> // VB floats a copy (4: X 16-byte aligned, dk and dv multiples of 4); NR v rows
__device__ __forceinline__ void dn_stage(const float *X, dn_gates G, float *b, int C, int NR,
                                         int nkh, int nvh, int dk, int dv, int h, int r0, int t0,
                                         int n)
{
    const int tid = threadIdx.x, nt = blockDim.x, kh = h % nkh, pr = dk / VB;
    const long long rl = 2 * nkh * dk + nvh * dv;
    for (int i = tid; i < n * 2 * pr; i += nt) { // q (w 0) and k (w 1) of token t
        const int t = i / (2 * pr), w = (i / pr) & 1, e = (i % pr) * VB;
        cp_async_any<4 * VB>(b + (w * C + t) * dk + e, X + (t0 + t) * rl + (w * nkh + kh) * dk + e);
    }
    float *vb = b + 2 * C * dk, *gb = vb + NR * C;
    const int pv = min(NR, dv - r0) / VB;
    for (int i = tid; i < n * pv; i += nt) {
        const int t = i / pv, e = (i % pv) * VB;
        cp_async_any<4 * VB>(vb + t * NR + e, X + (t0 + t) * rl + 2 * nkh * dk + h * dv + r0 + e);
    }
    for (int i = tid; i < 2 * n; i += nt) { // the gates' pairs (or their raw products')
        const long long t = t0 + (i >> 1);
        const float *src = G.G ? G.G + t * 2 * nvh + (i & 1) * nvh + h
                               : ((i & 1) ? G.be : G.al) + t * nvh + h;
        cp_async_any<4>(gb + i, src);
    }
    cp_async_commit();
}

template <int KPL>
__device__ __forceinline__ void dn_staged(const float *X, dn_gates G, float *state, float *O,
                                          int nkh, int nvh, int dk, int dv, int T, float eps,
                                          int C, bool v4)
{
    extern __shared__ __align__(16) float dn_sm[];
    const int lane = lane_id(), h = blockIdx.x, r0 = blockIdx.y * 16,
              i0 = r0 + wave_id() * DN_RW, nb = C * (2 * dk + 18), nc = (T + C - 1) / C;
    const float qs = 1.0f / sqrtf((float)dk);
    float m[DN_RW][KPL];
    dn_state<KPL, DN_RW, false>(state, m, dv, dk, h, i0);
#define DN_STAGE(c)                                                                            \
    do {                                                                                       \
        float *b_ = dn_sm + ((c) & 1) * nb;                                                    \
        const int t_ = (c) * C, n_ = min(C, T - t_);                                           \
        if (v4)                                                                                \
            dn_stage<4>(X, G, b_, C, 16, nkh, nvh, dk, dv, h, r0, t_, n_);                     \
        else                                                                                   \
            dn_stage<1>(X, G, b_, C, 16, nkh, nvh, dk, dv, h, r0, t_, n_);                     \
    } while (0)
    DN_STAGE(0);
    for (int c = 0; c < nc; c++) {
        if (c + 1 < nc) {
            DN_STAGE(c + 1);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        const float *qb = dn_sm + (c & 1) * nb, *kb = qb + C * dk, *vb = kb + C * dk;
        float *gb = (float *)vb + 16 * C;
        const int t0 = c * C, n = min(C, T - t0);
        if (!G.G) {
            if ((int)threadIdx.x < n)
                gate_of(gb[2 * threadIdx.x], gb[2 * threadIdx.x + 1], G.dt, G.A, h,
                        gb[2 * threadIdx.x], gb[2 * threadIdx.x + 1]);
            __syncthreads();
        }
        for (int t = 0; t < n; t++) {
            float k[KPL], q[KPL], v[DN_RW];
#pragma unroll
            for (int e = 0; e < KPL; e++) {
                const int j = e * WAVE + lane;
                k[e] = j < dk ? kb[t * dk + j] : 0.0f;
                q[e] = j < dk ? qb[t * dk + j] : 0.0f;
            }
#pragma unroll
            for (int r = 0; r < DN_RW; r++)
                v[r] = i0 + r < dv ? vb[t * 16 + i0 - r0 + r] : 0.0f;
            const float out = dn_step<KPL, DN_RW>(m, k, q, v, gb[2 * t], gb[2 * t + 1], eps, qs);
            if (lane < DN_RW && i0 + lane < dv)
                O[((long long)(t0 + t) * nvh + h) * dv + i0 + lane] = out;
        }
        __syncthreads(); // (the next chunk's copies go into this buffer)
    }
#undef DN_STAGE
    dn_state<KPL, DN_RW, true>(state, m, dv, dk, h, i0);
}

// C tokens a chunk; v4: 16-byte copies
extern "C" __global__ void deltanet_staged(const float *X, const float *Gm, const float *al,
                                           const float *be, const float *dt, const float *A,
                                           float *state, float *O, int nkh, int nvh, int dk,
                                           int dv, int T, float eps, int C, int v4)
{
    pdl_wait();
    pdl_launch();
    const dn_gates G = {Gm, al, be, dt, A};
    DN_BY_KPL(dn_staged, X, G, state, O, nkh, nvh, dk, dv, T, eps, C, v4);
}

// Prompts, chunked (deltanet_chunked): the same recurrence over DC tokens at a time. With the
// chunk's q and k normalized (q times qs), gc_i = g_0 + ... + g_i and row r's state S at the
// chunk's start, token i's state is M_i = e^gc_i S + sum_{j<=i} e^(gc_i - gc_j) delta_j k_j^T,
// so the deltas solve a unit lower-triangular system and the outputs and the next state follow
// from them:
//   delta_i + sum_{j<i} A_ij delta_j = beta_i (v_i - e^gc_i k_i . S),
//       A_ij = beta_i e^(gc_i - gc_j) k_i . k_j
//   o_i = e^gc_i q_i . S + sum_{j<=i} P_ij delta_j,   P_ij = e^(gc_i - gc_j) q_i . k_j
//   S' = e^gc_last S + sum_j e^(gc_last - gc_j) delta_j k_j
// A chunk is then a few small matrix products (the Gram matrices A and P, k . S and q . S for
// every token, the state's update) and one triangular solve of DC steps, where the token-by-
// token form is a chain of DC dependent steps of reductions across the wave. The same sums in
// another order: not bit for bit the sequential kernels' figures. Grid (nvh, dv / DCR), blocks
// of 256 threads (the tiles below assume it), DCR rows of head h's state a block, in shared
// memory with the chunk's normalized q and k (rows dk + 4 floats apart: 16-byte aligned, and
// rows four apart in other banks); dk a multiple of 4. The products are tiles of 4 x 4 a
// thread, each of four threads summing a quarter of the 4-element steps along dk, so that a
// shared load feeds 4 to 8 products. The next chunk's rows are copied in (dn_stage) while this
// one is worked on.
#define DC 32  // tokens a chunk
#define DCR 32 // state rows a block

__device__ __forceinline__ float dot4(float4 a, float4 b)
{
    return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
}

// the sums of the four threads of a quad (lanes 4 q .. 4 q + 3), in each of them
template <int N> __device__ __forceinline__ void quad_sum(float (&v)[N])
{
#pragma unroll
    for (int o = 1; o < 4; o <<= 1)
#pragma unroll
        for (int i = 0; i < N; i++)
            v[i] += shfl_xor(v[i], o);
}
// Two 4 x 4 tiles of dot products, o1[4 a + c] = x_a . y_c and o2[4 a + c] = x_a . z_c, of rows
// ld floats apart from X, Y and Z, over this thread's steps of 4 along the rows (d4 = d0,
// d0 + 4, ... below nd), then summed over the quad (each of its threads takes every fourth step)
__device__ __forceinline__ void dn_tiles(float (&o1)[16], float (&o2)[16], const float *X,
                                         const float *Y, const float *Z, int ld, int d0, int nd)
{
#pragma unroll
    for (int e = 0; e < 16; e++)
        o1[e] = o2[e] = 0.0f;
    for (int d4 = d0; d4 < nd; d4 += 4) {
        float4 x[4], y[4], z[4];
#pragma unroll
        for (int a = 0; a < 4; a++) {
            x[a] = *(const float4 *)&X[a * ld + 4 * d4];
            y[a] = *(const float4 *)&Y[a * ld + 4 * d4];
            z[a] = *(const float4 *)&Z[a * ld + 4 * d4];
        }
#pragma unroll
        for (int a = 0; a < 4; a++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                o1[4 * a + c] += dot4(x[a], y[c]);
                o2[4 * a + c] += dot4(x[a], z[c]);
            }
    }
    quad_sum(o1);
    quad_sum(o2);
}
// v[i0 + s * u] for u = 0..3 (selects, not an indexed register array)
__device__ __forceinline__ float pick4(const float (&v)[16], int i0, int s, int u)
{
    float o = v[i0];
#pragma unroll
    for (int c = 1; c < 4; c++)
        o = u == c ? v[i0 + s * c] : o;
    return o;
}

extern "C" __global__ void deltanet_chunked(const float *X, const float *Gm, const float *al,
                                            const float *be, const float *dt, const float *A,
                                            float *state, float *O, int nkh, int nvh, int dk,
                                            int dv, int T, float eps, int v4)
{
    pdl_wait();
    pdl_launch();
    extern __shared__ __align__(16) float dc_sm[];
    const dn_gates G = {Gm, al, be, dt, A};
    const int tid = threadIdx.x, nt = blockDim.x, lane = lane_id(), h = blockIdx.x,
              r0 = blockIdx.y * DCR, ld = dk + 4, nd = dk / 4;
    float *Kh = dc_sm, *Qh = Kh + DC * ld, *S = Qh + DC * ld; // [token or row][ld]
    float *Am = S + DCR * ld, *Pm = Am + DC * DC;              // [i][j]
    float *KS = Pm + DC * DC, *QS = KS + DC * DCR, *Dl = QS + DC * DCR, *Cf = Dl + DC * DCR,
          *V = Cf + DC * DCR;                                   // [token][row]
    float *gr = V + DC * DCR, *gc = gr + DC, *eg = gc + DC, *bt = eg + DC;
    float *sq0 = bt + DC, *sk0 = sq0 + DC * dk, *sv = sk0 + DC * dk, *sg = sv + DCR * DC;
    const float qs = 1.0f / sqrtf((float)dk);
    // a thread's tile (tiles of 4 x 4, 64 of them, and its quarter dq of the steps along dk)
    const int tile = tid >> 2, tb = tile >> 3, tc = tile & 7, dq = tid & 3;
    for (int e = tid; e < DCR * dk; e += nt) {
        const int r = e / dk, d = e % dk;
        S[r * ld + d] = r0 + r < dv ? state[((long long)h * dv + r0 + r) * dk + d] : 0.0f;
    }
#define DC_STAGE(t0_)                                                                          \
    do {                                                                                       \
        if (v4)                                                                                \
            dn_stage<4>(X, G, sq0, DC, DCR, nkh, nvh, dk, dv, h, r0, (t0_),                    \
                        min(DC, T - (t0_)));                                                   \
        else                                                                                   \
            dn_stage<1>(X, G, sq0, DC, DCR, nkh, nvh, dk, dv, h, r0, (t0_),                    \
                        min(DC, T - (t0_)));                                                   \
    } while (0)
    DC_STAGE(0);
    for (int t0 = 0; t0 < T; t0 += DC) {
        const int n = min(DC, T - t0);
        cp_async_wait<0>();
        __syncthreads();
        // the chunk's q and k, normalized (a wave a token; tokens past T zero), v, the gates
        for (int t = wave_id(); t < DC; t += nt / WAVE) {
            float sk = 0.0f, sq = 0.0f;
            for (int d = lane; d < dk; d += WAVE) {
                const float k = t < n ? sk0[t * dk + d] : 0.0f;
                const float q = t < n ? sq0[t * dk + d] : 0.0f;
                Kh[t * ld + d] = k;
                Qh[t * ld + d] = q;
                sk += k * k;
                sq += q * q;
            }
#pragma unroll
            for (int o = WAVE / 2; o > 0; o >>= 1) {
                sk += shfl_xor(sk, o);
                sq += shfl_xor(sq, o);
            }
            const float fk = t < n ? 1.0f / fmaxf(sqrtf(sk), eps) : 0.0f;
            const float fq = t < n ? qs / fmaxf(sqrtf(sq), eps) : 0.0f;
            for (int d = lane; d < dk; d += WAVE) {
                Kh[t * ld + d] *= fk;
                Qh[t * ld + d] *= fq;
            }
        }
        for (int e = tid; e < DC * DCR; e += nt) {
            const int t = e / DCR, r = e % DCR;
            V[e] = t < n && r0 + r < dv ? sv[t * DCR + r] : 0.0f;
        }
        if (tid < DC) {
            float g = 0.0f, b = 0.0f;
            if (tid < n) {
                g = sg[2 * tid];
                b = sg[2 * tid + 1];
                if (!G.G)
                    gate_of(g, b, G.dt, G.A, h, g, b);
            }
            gr[tid] = g;
            bt[tid] = b;
        }
        __syncthreads();
        if (t0 + DC < T) // (the staged rows are all read)
            DC_STAGE(t0 + DC);
        if (tid < DC) {
            float c = 0.0f;
            for (int j = 0; j <= tid; j++)
                c += gr[j];
            gc[tid] = c;
            eg[tid] = expf(c);
        }
        __syncthreads();
        { // A and P: tokens i = 4 tb + a, j = 4 tc + c (kk[4 c + a] = k_j . k_i, qk[4 c + a] =
          // k_j . q_i; sums in the tiles on or below the diagonal, every thread in the quads')
            float kk[16], qk[16];
            dn_tiles(kk, qk, Kh + 4 * tc * ld, Kh + 4 * tb * ld, Qh + 4 * tb * ld, ld,
                     tc <= tb ? dq : nd, nd);
            const int i = 4 * tb + dq; // (each thread of the quad writes one row of the tile)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int j = 4 * tc + c;
                const float e = j <= i ? expf(gc[i] - gc[j]) : 0.0f;
                Am[i * DC + j] = j < i ? bt[i] * e * pick4(kk, 4 * c, 1, dq) : 0.0f;
                Pm[i * DC + j] = e * pick4(qk, 4 * c, 1, dq);
            }
        }
        { // k . S and q . S: rows r = 4 tb + a, tokens i = 4 tc + c
            float ks[16], qq[16];
            dn_tiles(ks, qq, S + 4 * tb * ld, Kh + 4 * tc * ld, Qh + 4 * tc * ld, ld, dq, nd);
            const int i = 4 * tc + dq; // (each thread of the quad writes one token)
#pragma unroll
            for (int a = 0; a < 4; a++) {
                KS[i * DCR + 4 * tb + a] = pick4(ks, 4 * a, 1, dq);
                QS[i * DCR + 4 * tb + a] = pick4(qq, 4 * a, 1, dq);
            }
        }
        __syncthreads();
        if (tid < DCR) { // the deltas of row tid: forward substitution, column by column
            float x[DC];
#pragma unroll
            for (int i = 0; i < DC; i++)
                x[i] = bt[i] * (V[i * DCR + tid] - eg[i] * KS[i * DCR + tid]);
#pragma unroll
            for (int j = 0; j < DC; j++)
#pragma unroll
                for (int i = j + 1; i < DC; i++)
                    x[i] -= Am[i * DC + j] * x[j];
            const float gl = gc[DC - 1];
#pragma unroll
            for (int i = 0; i < DC; i++) {
                Dl[i * DCR + tid] = x[i];
                Cf[i * DCR + tid] = expf(gl - gc[i]) * x[i];
            }
        }
        __syncthreads();
        for (int e = tid; e < n * DCR; e += nt) { // the outputs
            const int i = e / DCR, r = e % DCR;
            float o = eg[i] * QS[e];
            for (int j = 0; j <= i; j++)
                o += Pm[i * DC + j] * Dl[j * DCR + r];
            if (r0 + r < dv)
                O[((long long)(t0 + i) * nvh + h) * dv + r0 + r] = o;
        }
        { // the state: a thread rows 4 rq .. + 4 at elements d .. d + 4
            const float el = eg[DC - 1];
            for (int e = tid; e < (DCR / 4) * nd; e += nt) {
                const int rq = e / nd, d = 4 * (e % nd);
                float4 s[4];
#pragma unroll
                for (int a = 0; a < 4; a++) {
                    s[a] = *(const float4 *)&S[(4 * rq + a) * ld + d];
                    s[a].x *= el, s[a].y *= el, s[a].z *= el, s[a].w *= el;
                }
                for (int j = 0; j < DC; j++) {
                    const float4 k = *(const float4 *)&Kh[j * ld + d];
#pragma unroll
                    for (int a = 0; a < 4; a++) {
                        const float c = Cf[j * DCR + 4 * rq + a];
                        s[a].x += c * k.x, s[a].y += c * k.y, s[a].z += c * k.z, s[a].w += c * k.w;
                    }
                }
#pragma unroll
                for (int a = 0; a < 4; a++)
                    *(float4 *)&S[(4 * rq + a) * ld + d] = s[a];
            }
        }
        __syncthreads();
    }
    for (int e = tid; e < DCR * dk; e += nt) {
        const int r = e / dk, d = e % dk;
        if (r0 + r < dv)
            state[((long long)h * dv + r0 + r) * dk + d] = S[r * ld + d];
    }
#undef DC_STAGE
}

// The sampler's candidates on the device: the K largest of x[0..n) (ties: lowest id; NaN as
// -inf), best first: ids in out[0..K), their values' bits in out[TK_MAX..TK_MAX + K). K = *kp
// (read when the kernel runs, so a captured graph serves every K; 0: nothing to do), at most
// TK_MAX. Each value becomes a distinct 64-bit key (the float's order-preserving bits, then the
// complemented id), and a radix select finds the K-th largest key 8 bits at a time, counting
// only the keys that share the bits fixed so far. Once those are few (TK_BUF), one more pass
// over the keys moves them to shared memory (and the keys above them, all in the top K, to the
// candidates), and the remaining bytes are counted there. The K keys at or above the K-th are
// then sorted (bitonic). K = 1: one max reduction. Blocks of 1024 threads.
// In two launches where the row is long: topk_part's blocks each select the K best keys of
// their slice of x (a block reading a whole row of 152,064 logits waits on its one SM's loads
// for about 20 us), and topk selects the K best of those.
#define TK_MAX 256
#define TK_BUF 2048
#define TK_U 8 // keys loaded at once per thread (a scan waits on memory, not on arithmetic)
// f(key) for every key i < n of this thread's share (1024 threads), keys from src
#define TK_SCAN(f)                                                                             \
    for (int i0 = threadIdx.x; i0 < n; i0 += TK_U * 1024) {                                    \
        unsigned long long key_[TK_U];                                                         \
        _Pragma("unroll") for (int u = 0; u < TK_U; u++) key_[u] =                             \
            i0 + u * 1024 < n ? src(i0 + u * 1024) : 0;                                        \
        _Pragma("unroll") for (int u = 0; u < TK_U; u++) if (i0 + u * 1024 < n)                \
            f(key_[u]);                                                                        \
    }
__device__ __forceinline__ unsigned long long tk_key(const float *x, int i)
{
    unsigned u = __float_as_uint(x[i]);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        u = 0xff800000u; // NaN: -inf
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((unsigned long long)u << 32) | (0xffffffffu - (unsigned)i);
}
// keys of x[base..]: key i is element base + i (its id too)
struct tk_xs {
    const float *x;
    int base;
    __device__ unsigned long long operator()(int i) const { return tk_key(x, base + i); }
};
// keys of topk_part's blocks: K a block, TK_MAX apart
struct tk_ps {
    const unsigned long long *k;
    int K;
    __device__ unsigned long long operator()(int i) const { return k[(i / K) * TK_MAX + i % K]; }
};

// the select's shared memory (one a kernel, whichever key source it selects from)
struct tk_smem {
    unsigned long long hmem[16 * 256 / 2]; // histograms, or (K = 1) the reduction
    unsigned long long buf[TK_BUF];        // the keys still undecided
    unsigned long long cand[TK_MAX];       // the result
    unsigned above[256];                   // keys in this bin and the ones above it
    int s_digit, s_n, s_nb;
    unsigned s_ex, s_cnt;
};

// sm.cand[0..K) = the K largest of src's n keys, largest first (those past K are 0, below
// every key)
template <class S>
__device__ void tk_select(const S &src, int n, int K, tk_smem &sm)
{
    unsigned long long *buf = sm.buf, *cand = sm.cand;
    unsigned *above = sm.above;
    int &s_digit = sm.s_digit, &s_n = sm.s_n, &s_nb = sm.s_nb;
    unsigned &s_ex = sm.s_ex, &s_cnt = sm.s_cnt;
    unsigned(*hist)[256] = (unsigned(*)[256])sm.hmem; // one per group of 64 threads
    const int tid = threadIdx.x;
    if (tid < TK_MAX)
        cand[tid] = 0; // (below every key: padding for the sort)
    if (K == 1) {
        unsigned long long best = 0;
#define TK_MAXF(key) best = max(best, key)
        TK_SCAN(TK_MAXF)
        buf[tid] = best;
        __syncthreads();
        for (int span = 512; span > 0; span >>= 1) {
            if (tid < span)
                buf[tid] = max(buf[tid], buf[tid + span]);
            __syncthreads();
        }
        if (tid == 0)
            cand[0] = buf[0];
        __syncthreads();
        return;
    }
    if (tid == 0)
        s_n = 0;
    unsigned long long prefix = 0, mask = 0; // the key bits fixed so far
    int need = K;   // how many of the keys with those bits belong to the top K
    int nb = -1;    // keys in buf (-1: they are still read from x)
    for (int shift = 56; shift >= 0; shift -= 8) {
        for (int i = tid; i < 16 * 256; i += 1024)
            (&hist[0][0])[i] = 0;
        __syncthreads();
#define TK_COUNT(key)                                                                          \
    if (((key) & mask) == prefix)                                                              \
        atomicAdd(&hist[tid >> 6][((key) >> shift) & 255], 1u);
        if (nb < 0) {
            TK_SCAN(TK_COUNT)
        } else {
            for (int i = tid; i < nb; i += 1024)
                TK_COUNT(buf[i])
        }
        __syncthreads();
        unsigned tot = 0;
        if (tid < 256) {
            for (int j = 0; j < 16; j++)
                tot += hist[j][tid];
            above[tid] = tot;
        }
        __syncthreads();
        for (int o = 1; o < 256; o <<= 1) { // suffix sums (Hillis-Steele)
            unsigned t = tid < 256 && tid + o < 256 ? above[tid + o] : 0;
            __syncthreads();
            if (tid < 256)
                above[tid] += t;
            __syncthreads();
        }
        // the bin holding the need-th key: fewer than need above it, at least need with it
        if (tid < 256 && above[tid] - tot < (unsigned)need && (unsigned)need <= above[tid]) {
            s_digit = tid;
            s_ex = above[tid] - tot;
            s_cnt = tot;
        }
        __syncthreads();
        need -= (int)s_ex;
        prefix |= (unsigned long long)s_digit << shift;
        mask |= 0xffull << shift;
        const bool all = s_cnt == (unsigned)need; // every key of the bin is in the top K
        const bool few = nb < 0 && s_cnt <= TK_BUF;
        __syncthreads();
        if (all) // (keys are distinct: at the last byte a bin holds one key)
            break;
        if (few) { // the bin's keys to buf, those above it to the candidates
            if (tid == 0)
                s_nb = 0;
            __syncthreads();
#define TK_SPLIT(key)                                                                          \
    if (((key) & mask) > prefix)                                                               \
        cand[atomicAdd(&s_n, 1)] = key;                                                        \
    else if (((key) & mask) == prefix)                                                         \
        buf[atomicAdd(&s_nb, 1)] = key;
            TK_SCAN(TK_SPLIT)
            __syncthreads();
            nb = s_nb;
        }
    }
    // the keys at or above the K-th: exactly K (with those moved to cand before)
#define TK_GATHER(key)                                                                         \
    if (((key) & mask) >= prefix) {                                                            \
        int slot = atomicAdd(&s_n, 1);                                                         \
        if (slot < TK_MAX)                                                                     \
            cand[slot] = key;                                                                  \
    }
    if (nb < 0) {
        TK_SCAN(TK_GATHER)
    } else {
        for (int i = tid; i < nb; i += 1024)
            TK_GATHER(buf[i])
    }
    __syncthreads();
    for (int size = 2; size <= TK_MAX; size <<= 1) // bitonic sort, largest first
        for (int st = size >> 1; st > 0; st >>= 1) {
            const int j = tid ^ st; // (the pair's lower thread alone reads and writes it)
            if (tid < TK_MAX && j > tid) {
                unsigned long long a = cand[tid], b = cand[j];
                if ((a < b) == ((tid & size) == 0)) {
                    cand[tid] = b;
                    cand[j] = a;
                }
            }
            __syncthreads();
        }
}

// hout (where set): the candidates also to the host's pinned memory there, in out's layout (no
// copy after the kernel)
extern "C" __global__ void __launch_bounds__(1024) topk(const float *x, int n, const int *kp,
                                                         int *out,
                                                         const unsigned long long *part, int np,
                                                         int *hout)
{
    pdl_wait();
    pdl_launch();
    __shared__ tk_smem sm;
    const int tid = threadIdx.x;
    const int K = min(min(*kp, n), TK_MAX);
    if (K <= 0)
        return;
    if (part) // the best K of each of topk_part's np blocks
        tk_select(tk_ps{part, K}, np * K, K, sm);
    else
        tk_select(tk_xs{x, 0}, n, K, sm);
    if (tid < K) {
        unsigned id = 0xffffffffu - (unsigned)sm.cand[tid];
        const int v = __float_as_int(x[id]);
        out[tid] = (int)id;
        out[TK_MAX + tid] = v;
        if (hout) {
            hout[tid] = (int)id;
            hout[TK_MAX + tid] = v;
        }
    }
}

// Block b: the K best keys of x[b chunk, (b + 1) chunk) (fewer where the slice is shorter:
// zeros after them) to part[b TK_MAX ..], for topk.
extern "C" __global__ void __launch_bounds__(1024) topk_part(const float *x, int n, int chunk,
                                                              const int *kp,
                                                              unsigned long long *part)
{
    pdl_wait();
    pdl_launch();
    __shared__ tk_smem sm;
    const int tid = threadIdx.x, c0 = blockIdx.x * chunk, len = min(n - c0, chunk);
    const int K = min(min(*kp, n), TK_MAX);
    if (K <= 0)
        return;
    tk_select(tk_xs{x, c0}, len, min(K, len), sm);
    if (tid < K)
        part[(long long)blockIdx.x * TK_MAX + tid] = sm.cand[tid];
}
