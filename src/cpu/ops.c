/* ops: CPU kernels. Each op splits its rows over the pool (small ops run on the caller).
 * Float details follow ggml's CPU ops where they affect the last bits (sums of squares in
 * double, 1/sqrt in float, rope angles by repeated multiplication), since the golden logits
 * were made by it. */
#include "cpu/ops.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/pool.h"
#include "quant/quant.h"

/* ---------------------------------------------------------------- helpers */

typedef void (*rows_fn)(const struct op_args *a, long r0, long r1, int ith);
struct rows_job {
    const struct op_args *a;
    rows_fn fn;
    long n;
};

static void rows_worker(void *arg, int ith, int nth)
{
    const struct rows_job *j = arg;
    long b, e;
    pool_range(j->n, ith, nth, &b, &e);
    if (b < e)
        j->fn(j->a, b, e, ith);
}

/* Runs fn over rows [0, n); on the caller alone when the work (n × cost) is small. */
static void run_rows(const struct op_args *a, long n, long cost, rows_fn fn)
{
    struct rows_job j = {a, fn, n};
    bool par = a->ctx->pool && a->ctx->nth > 1 && n > 1 && n * cost >= 16384;
    pool_run(par ? a->ctx->pool : NULL, rows_worker, &j);
}

static float f16_table[65536];
static pthread_once_t f16_once = PTHREAD_ONCE_INIT;
static bool have_f16c;   /* AVX2 + FMA + F16C: convert 8 halves per instruction */
static bool have_avx512; /* AVX-512F: 16 */
static void f16_init(void)
{
    for (int i = 0; i < 65536; i++)
        f16_table[i] = fp16_to_f32((uint16_t)i);
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    have_f16c = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                __builtin_cpu_supports("f16c");
    have_avx512 = have_f16c && __builtin_cpu_supports("avx512f") && !getenv("BRASA_NO_AVX512");
#endif
}
static inline float h2f(uint16_t h) { return f16_table[h]; }
static inline float round_f16(float x) { return h2f(f32_to_fp16(x)); }

/* F16 cache rows: q·k and o += p·v. The table lookups of the portable versions cost a few ns
 * per element, which long contexts multiply; with F16C the conversion is one instruction per
 * 8 elements. */
static float dot_f16_ref(const float *q, const uint16_t *k, long n)
{
    float s = 0;
    for (long d = 0; d < n; d++)
        s += q[d] * h2f(k[d]);
    return s;
}
static void axpy_f16_ref(float *o, float p, const uint16_t *v, long n)
{
    for (long d = 0; d < n; d++)
        o[d] += p * h2f(v[d]);
}
/* g query rows (n floats apart) against one cache row: the dot products, and o += p·v. */
static void dot_f16_multi_ref(const float *q, int g, long n, const uint16_t *k, float *out)
{
    for (int i = 0; i < g; i++)
        out[i] = dot_f16_ref(q + i * n, k, n);
}
static void axpy_f16_multi_ref(float *o, int g, const float *p, const uint16_t *v, long n)
{
    for (int i = 0; i < g; i++)
        axpy_f16_ref(o + i * n, p[i], v, n);
}
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* The same with the cache row converted once for all g rows (8 lanes, then the lanes summed). */
__attribute__((target("avx2,fma,f16c"))) static void dot_f16_multi_avx2(const float *q, int g, long n,
                                                                        const uint16_t *k, float *out)
{
    __m256 acc[ATTN_G];
    for (int i = 0; i < g; i++)
        acc[i] = _mm256_setzero_ps();
    long d = 0;
    for (; d + 8 <= n; d += 8) {
        const __m256 kf = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(k + d)));
        for (int i = 0; i < g; i++)
            acc[i] = _mm256_fmadd_ps(_mm256_loadu_ps(q + i * n + d), kf, acc[i]);
    }
    for (int i = 0; i < g; i++) {
        __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc[i]), _mm256_extractf128_ps(acc[i], 1));
        h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        h = _mm_add_ss(h, _mm_movehdup_ps(h));
        float s = _mm_cvtss_f32(h);
        for (long e = d; e < n; e++)
            s += q[i * n + e] * h2f(k[e]);
        out[i] = s;
    }
}
__attribute__((target("avx2,fma,f16c"))) static void axpy_f16_multi_avx2(float *o, int g, const float *p,
                                                                         const uint16_t *v, long n)
{
    long d = 0;
    for (; d + 8 <= n; d += 8) {
        const __m256 vf = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + d)));
        for (int i = 0; i < g; i++)
            _mm256_storeu_ps(o + i * n + d, _mm256_fmadd_ps(_mm256_set1_ps(p[i]), vf,
                                                            _mm256_loadu_ps(o + i * n + d)));
    }
    for (int i = 0; i < g; i++)
        for (long e = d; e < n; e++)
            o[i * n + e] += p[i] * h2f(v[e]);
}
/* The same with 16 lanes (the dot products' lanes summed by _mm512_reduce_add_ps). */
__attribute__((target("avx512f,avx2,fma,f16c"))) static void dot_f16_multi_avx512(const float *q, int g, long n,
                                                                                 const uint16_t *k, float *out)
{
    __m512 acc[ATTN_G];
    for (int i = 0; i < g; i++)
        acc[i] = _mm512_setzero_ps();
    long d = 0;
    for (; d + 16 <= n; d += 16) {
        const __m512 kf = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(k + d)));
        for (int i = 0; i < g; i++)
            acc[i] = _mm512_fmadd_ps(_mm512_loadu_ps(q + i * n + d), kf, acc[i]);
    }
    for (int i = 0; i < g; i++) {
        float s = _mm512_reduce_add_ps(acc[i]);
        for (long e = d; e < n; e++)
            s += q[i * n + e] * h2f(k[e]);
        out[i] = s;
    }
}
__attribute__((target("avx512f,avx2,fma,f16c"))) static void axpy_f16_multi_avx512(float *o, int g, const float *p,
                                                                                  const uint16_t *v, long n)
{
    long d = 0;
    for (; d + 16 <= n; d += 16) {
        const __m512 vf = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(v + d)));
        for (int i = 0; i < g; i++)
            _mm512_storeu_ps(o + i * n + d, _mm512_fmadd_ps(_mm512_set1_ps(p[i]), vf,
                                                            _mm512_loadu_ps(o + i * n + d)));
    }
    for (int i = 0; i < g; i++)
        for (long e = d; e < n; e++)
            o[i * n + e] += p[i] * h2f(v[e]);
}
static void dot_f16_multi(const float *q, int g, long n, const uint16_t *k, float *out)
{
    if (have_avx512) {
        dot_f16_multi_avx512(q, g, n, k, out);
        return;
    }
    if (have_f16c)
        dot_f16_multi_avx2(q, g, n, k, out);
    else
        dot_f16_multi_ref(q, g, n, k, out);
}
static void axpy_f16_multi(float *o, int g, const float *p, const uint16_t *v, long n)
{
    if (have_avx512) {
        axpy_f16_multi_avx512(o, g, p, v, n);
        return;
    }
    if (have_f16c)
        axpy_f16_multi_avx2(o, g, p, v, n);
    else
        axpy_f16_multi_ref(o, g, p, v, n);
}
#else
#define dot_f16_multi dot_f16_multi_ref
#define axpy_f16_multi axpy_f16_multi_ref
#endif

static float dot_f32(const float *x, const float *y, long n)
{
    float acc[8] = {0};
    long i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            acc[k] += x[i + k] * y[i + k];
    float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; i < n; i++)
        s += x[i] * y[i];
    return s;
}

static inline float silu(float x) { return x / (1.0f + expf(-x)); }
static inline float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
static inline float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

static long n_elems(const struct graph_node *n) { return (long)(n->ne[0] * n->ne[1] * n->ne[2] * n->ne[3]); }

/* ---------------------------------------------------------------- embedding, norms */

static void get_rows_rows(const struct op_args *a, long r0, long r1, int ith)
{
    (void)ith;
    const struct graph_node *w = a->src[0];
    size_t rb = qtype_row_bytes(w->type, w->ne[0]);
    float *out = a->out, s = a->node->p.f[0];
    for (long t = r0; t < r1; t++) {
        int64_t id = (int64_t)a->ctx->tokens[t] - a->node->p.i[0];
        float *y = out + t * w->ne[0];
        if (id < 0 || id >= w->ne[1]) { /* (another shard's token) */
            memset(y, 0, (size_t)w->ne[0] * sizeof *y);
            continue;
        }
        dequant_row(w->type, (const uint8_t *)a->in[0] + (size_t)id * rb, y, w->ne[0], NULL);
        if (s != 1.0f)
            for (long i = 0; i < w->ne[0]; i++)
                y[i] *= s;
    }
}

static void rms_norm_rows(const struct op_args *a, long r0, long r1, int ith)
{
    (void)ith;
    long gsz = a->node->p.i[0];
    float eps = a->node->p.f[0];
    const float *x = a->in[0], *w = a->in[1];
    float *y = a->out;
    for (long r = r0; r < r1; r++) {
        const float *xr = x + r * gsz;
        float *yr = y + r * gsz;
        double sum = 0;
        for (long i = 0; i < gsz; i++)
            sum += (double)(xr[i] * xr[i]);
        float mean = (float)(sum / gsz);
        float scale = 1.0f / sqrtf(mean + eps);
        for (long i = 0; i < gsz; i++)
            yr[i] = (xr[i] * scale) * w[i];
    }
}

static void l2_norm_rows(const struct op_args *a, long r0, long r1, int ith)
{
    (void)ith;
    long gsz = a->node->p.i[0];
    float eps = a->node->p.f[0];
    const float *x = a->in[0];
    float *y = a->out;
    for (long r = r0; r < r1; r++) {
        const float *xr = x + r * gsz;
        double sum = 0;
        for (long i = 0; i < gsz; i++)
            sum += (double)(xr[i] * xr[i]);
        float scale = 1.0f / fmaxf(sqrtf((float)sum), eps);
        for (long i = 0; i < gsz; i++)
            y[r * gsz + i] = xr[i] * scale;
    }
}

static void rms_norm_gate_rows(const struct op_args *a, long r0, long r1, int ith)
{
    (void)ith;
    long gsz = a->node->p.i[0];
    float eps = a->node->p.f[0];
    const float *x = a->in[0], *w = a->in[1], *z = a->in[2];
    float *y = a->out;
    for (long r = r0; r < r1; r++) {
        const float *xr = x + r * gsz, *zr = z + r * gsz;
        double sum = 0;
        for (long i = 0; i < gsz; i++)
            sum += (double)(xr[i] * xr[i]);
        float scale = 1.0f / sqrtf((float)(sum / gsz) + eps);
        for (long i = 0; i < gsz; i++)
            y[r * gsz + i] = ((xr[i] * scale) * w[i]) * silu(zr[i]);
    }
}

/* ---------------------------------------------------------------- matmul */

static void matmul_f32_rows(const struct op_args *a, long r0, long r1, int ith)
{
    (void)ith;
    const struct graph_node *w = a->src[1];
    long k = w->ne[0], rows = w->ne[1], T = a->node->ne[1];
    const float *W = a->in[1], *X = a->in[0];
    float *Y = a->out;
    for (long i = r0; i < r1; i++)
        for (long t = 0; t < T; t++)
            Y[t * rows + i] = dot_f32(W + i * k, X + t * k, k);
}

static void bias_rows(const struct op_args *a, long r0, long r1, int ith)
{
    (void)ith;
    long rows = a->node->ne[0];
    const float *b = a->in[2];
    float *Y = a->out;
    for (long t = r0; t < r1; t++)
        for (long i = 0; i < rows; i++)
            Y[t * rows + i] += b[i];
}

static void op_matmul(const struct op_args *a)
{
    const struct graph_node *w = a->src[1];
    long T = a->node->ne[1];
    if (w->type == 0)
        run_rows(a, w->ne[1], w->ne[0] * T, matmul_f32_rows);
    else
        quant_matmul(a->ctx->pool, w->type, a->in[1], w->ne[1], w->ne[0], a->in[0], T, a->out,
                     a->ctx->mm_scratch);
    if (a->in[2])
        run_rows(a, T, a->node->ne[0], bias_rows);
}

/* ---------------------------------------------------------------- elementwise */

static void eltwise_rows(const struct op_args *a, long r0, long r1, int ith)
{
    (void)ith;
    const float *x = a->in[0], *y = a->in[1];
    float *o = a->out, s = a->node->p.f[0];
    switch (a->node->op) {
    case GOP_ADD:
        for (long i = r0; i < r1; i++)
            o[i] = x[i] + y[i] * s;
        break;
    case GOP_MUL:
        for (long i = r0; i < r1; i++)
            o[i] = x[i] * y[i];
        break;
    case GOP_SCALE:
        for (long i = r0; i < r1; i++)
            o[i] = x[i] * s;
        break;
    case GOP_SWIGLU:
        for (long i = r0; i < r1; i++)
            o[i] = silu(x[i]) * y[i];
        break;
    case GOP_SILU:
        for (long i = r0; i < r1; i++)
            o[i] = silu(x[i]);
        break;
    case GOP_SIGMOID_MUL:
        for (long i = r0; i < r1; i++)
            o[i] = x[i] * sigmoid(y[i]);
        break;
    default:
        break;
    }
}

static void view_rows(const struct op_args *a, long r0, long r1, int ith)
{
    (void)ith;
    const int32_t *p = a->node->p.i;
    long off = p[0], n0 = p[1], n1 = p[2], s1 = p[3], s2 = p[4];
    const float *x = a->in[0];
    float *o = a->out;
    for (long r = r0; r < r1; r++) { /* r = i1 + n1 * i2 */
        long i1 = r % n1, i2 = r / n1;
        memcpy(o + r * n0, x + off + i1 * s1 + i2 * s2, (size_t)n0 * sizeof(float));
    }
}

/* ---------------------------------------------------------------- rope */

static void rope_rows(const struct op_args *a, long r0, long r1, int ith)
{
    const struct graph_node *n = a->node;
    long hd = n->p.i[0], n_rot = n->p.i[1], mode = n->p.i[2], ne0 = n->ne[0], nh = ne0 / hd;
    float *cs = a->ctx->thr_scratch + (size_t)ith * a->ctx->thr_stride; /* [n_rot/2][cos,sin] */
    const float theta_scale = graph_rope_ratio(n);
    const float *x = a->in[0];
    float *y = a->out;
    long half = n_rot / 2;
    for (long t = r0; t < r1; t++) {
        graph_rope_table(a->ctx->pos0 + t, (int)half, theta_scale, cs);
        for (long h = 0; h < nh; h++) {
            const float *xr = x + t * ne0 + h * hd;
            float *yr = y + t * ne0 + h * hd;
            for (long i = 0; i < half; i++) {
                long i0 = mode == ROPE_NEOX ? i : 2 * i, i1 = mode == ROPE_NEOX ? i + half : 2 * i + 1;
                float c = cs[2 * i], s = cs[2 * i + 1], x0 = xr[i0], x1 = xr[i1];
                yr[i0] = x0 * c - x1 * s;
                yr[i1] = x0 * s + x1 * c;
            }
            for (long i = n_rot; i < hd; i++)
                yr[i] = xr[i];
        }
    }
}

/* ---------------------------------------------------------------- KV cache and attention */

static void kv_store_rows(const struct op_args *a, long r0, long r1, int ith)
{
    (void)ith;
    const struct graph_node *cache = a->src[1];
    long w = cache->ne[0];
    const float *x = a->in[0];
    for (long t = r0; t < r1; t++) {
        long row = a->ctx->pos0 + t;
        if (cache->type == 0) {
            memcpy((float *)a->in[1] + row * w, x + t * w, (size_t)w * sizeof(float));
        } else {
            uint16_t *d = (uint16_t *)a->in[1] + row * w;
            for (long i = 0; i < w; i++)
                d[i] = f32_to_fp16(x[t * w + i]);
        }
    }
}

/* Scores s[0..n) with their maximum mx -> exp(s - mx) in place; returns 1 / their sum. */
static float softmax_exp(float *s, long n, float mx)
{
    double sum = 0;
    for (long j = 0; j < n; j++) {
        float e = expf(s[j] - mx);
        s[j] = e;
        sum += e;
    }
    return (float)(1.0 / sum);
}

/* F16 cache: the rows of one token whose heads share a KV head (consecutive rows), up to
 * ATTN_G at a time, so each cache row is read and converted once for all of them; each row's
 * operations are the same whatever the group. */
static void attn_rows_f16(const struct op_args *a, long r, long g, float *sc)
{
    const struct graph_node *n = a->node;
    long nh = n->p.i[0], nkv = n->p.i[1], hd = n->p.i[2], kvw = nkv * hd, grp = nh / nkv;
    long t = r / nh, h = r % nh, kvh = h / grp, npos = a->ctx->pos0 + t + 1;
    float scale = n->p.f[0];
    float *qv = sc + g * npos, *tmp = qv + g * hd; /* scores [g][npos], then q [g][hd], then g */
    float mx[ATTN_G], inv[ATTN_G];
    const float *q = (const float *)a->in[0] + t * nh * hd + h * hd;
    float *o = (float *)a->out + t * nh * hd + h * hd;
    for (long i = 0; i < g * hd; i++)
        qv[i] = round_f16(q[i]);
    const uint16_t *K = (const uint16_t *)a->kcache + kvh * hd;
    for (long i = 0; i < g; i++)
        mx[i] = -INFINITY;
    for (long j = 0; j < npos; j++) {
        dot_f16_multi(qv, (int)g, hd, K + j * kvw, tmp);
        for (long i = 0; i < g; i++) {
            float v = tmp[i] * scale;
            sc[i * npos + j] = v;
            mx[i] = v > mx[i] ? v : mx[i];
        }
    }
    for (long i = 0; i < g; i++)
        inv[i] = softmax_exp(sc + i * npos, npos, mx[i]);
    memset(o, 0, (size_t)(g * hd) * sizeof(float));
    const uint16_t *V = (const uint16_t *)a->vcache + kvh * hd;
    for (long j = 0; j < npos; j++) {
        for (long i = 0; i < g; i++)
            tmp[i] = round_f16(sc[i * npos + j] * inv[i]);
        axpy_f16_multi(o, (int)g, tmp, V + j * kvw, hd);
    }
}

static void attn_rows(const struct op_args *a, long r0, long r1, int ith)
{
    const struct graph_node *n = a->node;
    long nh = n->p.i[0], nkv = n->p.i[1], hd = n->p.i[2], kvw = nkv * hd, grp = nh / nkv;
    float scale = n->p.f[0];
    float *sc = a->ctx->thr_scratch + (size_t)ith * a->ctx->thr_stride;
    if (a->kv_type != 0) {
        for (long r = r0; r < r1;) {
            long left = grp - (r % nh) % grp, g = left < r1 - r ? left : r1 - r;
            g = g < ATTN_G ? g : ATTN_G;
            attn_rows_f16(a, r, g, sc);
            r += g;
        }
        return;
    }
    const float *Q = a->in[0];
    float *O = a->out;
    for (long r = r0; r < r1; r++) {
        long t = r / nh, h = r % nh, kvh = h / grp, npos = a->ctx->pos0 + t + 1;
        float *o = O + t * nh * hd + h * hd;
        const float *q = Q + t * nh * hd + h * hd;
        float mx = -INFINITY;
        const float *K = (const float *)a->kcache + kvh * hd;
        for (long j = 0; j < npos; j++) {
            sc[j] = dot_f32(q, K + j * kvw, hd) * scale;
            mx = sc[j] > mx ? sc[j] : mx;
        }
        float inv = softmax_exp(sc, npos, mx);
        memset(o, 0, (size_t)hd * sizeof(float));
        const float *V = (const float *)a->vcache + kvh * hd;
        for (long j = 0; j < npos; j++) {
            float p = sc[j] * inv;
            const float *vr = V + j * kvw;
            for (long d = 0; d < hd; d++)
                o[d] += p * vr[d];
        }
    }
}

/* ---------------------------------------------------------------- gated DeltaNet */

static void conv1d_rows(const struct op_args *a, long r0, long r1, int ith)
{
    (void)ith;
    long C = a->node->ne[0], T = a->node->ne[1], K = a->node->p.i[0], S = K - 1;
    const float *x = a->in[0], *w = a->in[1];
    float *st = a->in[2], *o = a->out;
    for (long ch = r0; ch < r1; ch++) {
        const float *wc = w + ch * K;
        /* x̃ = state rows (S) then x rows (T) */
#define XT(idx) ((idx) < S ? st[(idx) * C + ch] : x[((idx) - S) * C + ch])
        for (long t = 0; t < T; t++) {
            float sum = 0;
            for (long j = 0; j < K; j++)
                sum += XT(t + j) * wc[j];
            o[t * C + ch] = sum;
        }
        for (long r = 0; r < S; r++) /* reads rows >= r only: safe in place */
            st[r * C + ch] = XT(T + r);
#undef XT
    }
}

static void gates_rows(const struct op_args *a, long r0, long r1, int ith)
{
    (void)ith;
    long H = a->src[0]->ne[0];
    const float *al = a->in[0], *be = a->in[1], *dt = a->in[2], *A = a->in[3];
    float *o = a->out;
    for (long t = r0; t < r1; t++)
        for (long h = 0; h < H; h++) {
            o[t * 2 * H + h] = softplus(al[t * H + h] + dt[h]) * A[h];
            o[t * 2 * H + H + h] = sigmoid(be[t * H + h]);
        }
}

/* One V head over the whole batch: M (dv × dk) ← M·e^g; δ = β(v − M k); M += δ kᵀ; o = M q/√dk. */
static void deltanet_rows(const struct op_args *a, long r0, long r1, int ith)
{
    (void)ith;
    const int32_t *p = a->node->p.i;
    long nkh = p[0], nvh = p[1], dk = p[2], dv = p[3], T = a->node->ne[1];
    const float *Q = a->in[0], *Kx = a->in[1], *V = a->in[2], *G = a->in[3];
    float *O = a->out, qs = 1.0f / sqrtf((float)dk);
    for (long h = r0; h < r1; h++) {
        float *M = (float *)a->state + h * dv * dk;
        long kh = h % nkh;
        for (long t = 0; t < T; t++) {
            const float *q = Q + t * nkh * dk + kh * dk, *k = Kx + t * nkh * dk + kh * dk;
            const float *v = V + t * nvh * dv + h * dv;
            float eg = expf(G[t * 2 * nvh + h]), beta = G[t * 2 * nvh + nvh + h];
            float *o = O + t * nvh * dv + h * dv;
            for (long i = 0; i < dv; i++) {
                float *m = M + i * dk;
                double mk = 0;
                for (long j = 0; j < dk; j++) {
                    m[j] *= eg;
                    mk += (double)m[j] * k[j];
                }
                float delta = beta * (v[i] - (float)mk);
                double mq = 0;
                for (long j = 0; j < dk; j++) {
                    m[j] += delta * k[j];
                    mq += (double)m[j] * q[j];
                }
                o[i] = (float)mq * qs;
            }
        }
    }
}

/* ---------------------------------------------------------------- dispatch */

static brasa_status check_positions(const struct op_args *a, long n_ctx, struct brasa_err *err)
{
    if (a->ctx->pos0 < 0 || a->ctx->pos0 + a->node->ne[1] > n_ctx)
        return brasa_fail(err, BRASA_EINVAL, "positions %d..%lld exceed the context of %ld",
                          a->ctx->pos0, (long long)(a->ctx->pos0 + a->node->ne[1] - 1), n_ctx);
    return BRASA_OK;
}

brasa_status cpu_op(const struct op_args *a, struct brasa_err *err)
{
    const struct graph_node *n = a->node;
    pthread_once(&f16_once, f16_init);
    long rows = n->ne[1] * n->ne[2] * n->ne[3];
    switch (n->op) {
    case GOP_GET_ROWS:
        run_rows(a, n->ne[1], n->ne[0], get_rows_rows);
        break;
    case GOP_RMS_NORM:
        run_rows(a, n_elems(n) / n->p.i[0], n->p.i[0], rms_norm_rows);
        break;
    case GOP_L2_NORM:
        run_rows(a, n_elems(n) / n->p.i[0], n->p.i[0], l2_norm_rows);
        break;
    case GOP_RMS_NORM_GATE:
        run_rows(a, n_elems(n) / n->p.i[0], n->p.i[0] * 4, rms_norm_gate_rows);
        break;
    case GOP_ALLREDUCE: /* one shard's part; the caller adds the others' (cpu_run_range) */
        if (a->out != a->in[0]) /* (the arena plan sums in place where it can) */
            memcpy(a->out, a->in[0], (size_t)n_elems(n) * sizeof(float));
        break;
    case GOP_MATMUL:
        op_matmul(a);
        break;
    case GOP_ADD:
    case GOP_MUL:
    case GOP_SCALE:
    case GOP_SWIGLU:
    case GOP_SILU:
    case GOP_SIGMOID_MUL:
        run_rows(a, n_elems(n), 4, eltwise_rows);
        break;
    case GOP_VIEW:
        run_rows(a, n_elems(n) / n->p.i[1], n->p.i[1], view_rows);
        break;
    case GOP_ROPE:
        run_rows(a, rows, n->ne[0] * 4, rope_rows);
        break;
    case GOP_KV_STORE: {
        struct graph_node tmp = *n; /* positions are those of the stored rows */
        tmp.ne[1] = a->src[0]->ne[1];
        struct op_args b = *a;
        b.node = &tmp;
        brasa_status st = check_positions(&b, a->src[1]->ne[1], err);
        if (st != BRASA_OK)
            return st;
        run_rows(&b, tmp.ne[1], a->src[0]->ne[0], kv_store_rows);
        break;
    }
    case GOP_ATTN: {
        brasa_status st = check_positions(a, a->src[1] ? (long)1 << 30 : 0, err);
        if (st != BRASA_OK)
            return st;
        long span = (a->ctx->pos0 + n->ne[1]) * n->p.i[2];
        run_rows(a, n->ne[1] * n->p.i[0], span, attn_rows);
        break;
    }
    case GOP_CONV1D:
        run_rows(a, n->ne[0], n->ne[1] * n->p.i[0], conv1d_rows);
        break;
    case GOP_GATES:
        run_rows(a, n->ne[1], n->ne[0] * 8, gates_rows);
        break;
    case GOP_DELTANET:
        run_rows(a, n->p.i[1], n->ne[1] * n->p.i[2] * n->p.i[3] * 4, deltanet_rows);
        break;
    default:
        return brasa_fail(err, BRASA_EUNSUPPORTED, "op %s has no CPU kernel", graph_op_name(n->op));
    }
    return BRASA_OK;
}
