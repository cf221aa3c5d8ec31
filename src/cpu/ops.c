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
#include "core/simd.h"
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
    simd_clean_upper();
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
static bool have_avx512; /* AVX-512F and DQ: 16 */
static int simd_cap;     /* what the CPU has (and BRASA_NO_AVX512 allows): 0, 1 or 2 */
static bool no_tiles;    /* BRASA_NO_ATTN_TILES: prompt attention by rows (measurement) */
static void f16_init(void)
{
    for (int i = 0; i < 65536; i++)
        f16_table[i] = fp16_to_f32((uint16_t)i);
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && simd_has_f16c())
        simd_cap = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                   !getenv("BRASA_NO_AVX512") ? 2 : 1;
#endif
    no_tiles = getenv("BRASA_NO_ATTN_TILES") != NULL;
    have_f16c = simd_cap >= 1;
    have_avx512 = simd_cap >= 2;
}

int cpu_ops_simd(int level)
{
    pthread_once(&f16_once, f16_init);
    level = level < simd_cap ? level : simd_cap;
    have_f16c = level >= 1;
    have_avx512 = level >= 2;
    return level;
}
bool cpu_ops_attn_tiles(void)
{
    pthread_once(&f16_once, f16_init);
    return simd_cap >= 2 && !no_tiles;
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
    if (have_avx512)
        dot_f16_multi_avx512(q, g, n, k, out);
    else if (have_f16c)
        dot_f16_multi_avx2(q, g, n, k, out);
    else
        dot_f16_multi_ref(q, g, n, k, out);
    simd_clean_upper(); /* (the scores' scalar code follows) */
}
static void axpy_f16_multi(float *o, int g, const float *p, const uint16_t *v, long n)
{
    if (have_avx512)
        axpy_f16_multi_avx512(o, g, p, v, n);
    else if (have_f16c)
        axpy_f16_multi_avx2(o, g, p, v, n);
    else
        axpy_f16_multi_ref(o, g, p, v, n);
    simd_clean_upper();
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

#if defined(__x86_64__) && defined(__GNUC__)
/* e^x over the lanes: 2^n e^r with n = round(x log2 e) and r = x - n ln 2 (ln 2 in two parts),
 * e^r by Cephes' polynomial for expf; 1 ulp from expf at most over [-87, 88] (every 64th float
 * checked). AVX-512 scales by 2^n with scalef (infinities, zeros and subnormals as expf gives
 * them); AVX2 clamps x to [-87.3, 88.3] first, so very negative x give about 1e-38, not 0, and
 * the largest 2e38. */
#define EXP_POLY(mul, fma, set1, r)                                                                \
    fma(fma(fma(fma(fma(fma(set1(1.9875691500e-4f), r, set1(1.3981999507e-3f)), r,                 \
                        set1(8.3334519073e-3f)), r, set1(4.1665795894e-2f)), r,                     \
                set1(1.6666665459e-1f)), r, set1(5.0000001201e-1f)), mul(r, r), add1(r))
__attribute__((target("avx512f"))) static inline __m512 exp512(__m512 x)
{
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504089f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
#define add1(r) _mm512_add_ps(r, _mm512_set1_ps(1.0f))
    const __m512 p = EXP_POLY(_mm512_mul_ps, _mm512_fmadd_ps, _mm512_set1_ps, r);
#undef add1
    return _mm512_scalef_ps(p, n);
}
__attribute__((target("avx2,fma"))) static inline __m256 exp256(__m256 x)
{
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504089f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
#define add1(r) _mm256_add_ps(r, _mm256_set1_ps(1.0f))
    const __m256 p = EXP_POLY(_mm256_mul_ps, _mm256_fmadd_ps, _mm256_set1_ps, r);
#undef add1
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}
#endif
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

/* RMSNorm's 1 / sqrt(mean(x²) + eps) over n values (RMS_NORM, RMS_NORM_GATE, ROPE's head norm) */
static float rms_scale(const float *x, long n, float eps)
{
    double sum = 0;
    for (long i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    return 1.0f / sqrtf((float)(sum / n) + eps);
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
        float scale = rms_scale(xr, gsz, eps);
        for (long i = 0; i < gsz; i++)
            yr[i] = (xr[i] * scale) * w[i];
    }
}

/* x / max(|x|, eps) over n values (as L2_NORM) */
static void l2_normalize(const float *x, float *y, long n, float eps)
{
    double sum = 0;
    for (long i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    float scale = 1.0f / fmaxf(sqrtf((float)sum), eps);
    for (long i = 0; i < n; i++)
        y[i] = x[i] * scale;
}

static void l2_norm_rows(const struct op_args *a, long r0, long r1, int ith)
{
    (void)ith;
    long gsz = a->node->p.i[0];
    for (long r = r0; r < r1; r++)
        l2_normalize((const float *)a->in[0] + r * gsz, (float *)a->out + r * gsz, gsz,
                     a->node->p.f[0]);
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
        float scale = rms_scale(xr, gsz, eps);
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

#if defined(__x86_64__) && defined(__GNUC__)
/* SiLU-family rows over the lanes (op: GOP_SWIGLU, GOP_SILU or GOP_SIGMOID_MUL); the last
 * partial vector masked (AVX-512) or through a padded copy (AVX2), so every element takes the
 * same steps. */
__attribute__((target("avx512f"))) static void silu_rows_avx512(int op, const float *x, const float *y,
                                                                float *o, long n)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    for (long i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        const __m512 xv = _mm512_maskz_loadu_ps(m, x + i);
        const __m512 yv = op == GOP_SILU ? one : _mm512_maskz_loadu_ps(m, y + i);
        __m512 v;
        if (op == GOP_SIGMOID_MUL)
            v = _mm512_mul_ps(xv, _mm512_div_ps(one, _mm512_add_ps(one, exp512(_mm512_sub_ps(_mm512_setzero_ps(), yv)))));
        else
            v = _mm512_mul_ps(_mm512_div_ps(xv, _mm512_add_ps(one, exp512(_mm512_sub_ps(_mm512_setzero_ps(), xv)))), yv);
        _mm512_mask_storeu_ps(o + i, m, v);
    }
}
__attribute__((target("avx2,fma"))) static __m256 silu8(int op, __m256 x, __m256 y)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    if (op == GOP_SIGMOID_MUL)
        return _mm256_mul_ps(x, _mm256_div_ps(one, _mm256_add_ps(one, exp256(_mm256_sub_ps(_mm256_setzero_ps(), y)))));
    return _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, exp256(_mm256_sub_ps(_mm256_setzero_ps(), x)))), y);
}
__attribute__((target("avx2,fma"))) static void silu_rows_avx2(int op, const float *x, const float *y,
                                                              float *o, long n)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    long i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(o + i, silu8(op, _mm256_loadu_ps(x + i), y ? _mm256_loadu_ps(y + i) : one));
    if (i < n) {
        float xb[8] = {0}, yb[8] = {0};
        memcpy(xb, x + i, (size_t)(n - i) * sizeof(float));
        if (y)
            memcpy(yb, y + i, (size_t)(n - i) * sizeof(float));
        _mm256_storeu_ps(xb, silu8(op, _mm256_loadu_ps(xb), y ? _mm256_loadu_ps(yb) : one));
        memcpy(o + i, xb, (size_t)(n - i) * sizeof(float));
    }
}
#endif

static void eltwise_rows(const struct op_args *a, long r0, long r1, int ith)
{
    (void)ith;
    const float *x = a->in[0], *y = a->in[1];
    float *o = a->out, s = a->node->p.f[0];
#if defined(__x86_64__) && defined(__GNUC__)
    const int op = a->node->op;
    if (op == GOP_SWIGLU || op == GOP_SILU || op == GOP_SIGMOID_MUL) {
        if (have_avx512) {
            silu_rows_avx512(op, x + r0, op == GOP_SILU ? NULL : y + r0, o + r0, r1 - r0);
            return;
        }
        if (have_f16c) {
            silu_rows_avx2(op, x + r0, op == GOP_SILU ? NULL : y + r0, o + r0, r1 - r0);
            return;
        }
    }
#endif
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
#if defined(__clang__) /* each product and the sum rounded on its own, as the GPU's rope
                        * (common.cuh rot_lo, rot_hi): GCC contracts none in ISO C mode */
#pragma STDC FP_CONTRACT OFF
#endif
    const struct graph_node *n = a->node;
    long hd = n->p.i[0], n_rot = n->p.i[1], mode = n->p.i[2], ne0 = n->ne[0], nh = ne0 / hd;
    float *cs = a->ctx->thr_scratch + (size_t)ith * a->ctx->thr_stride; /* [n_rot/2][cos,sin] */
    const float theta_scale = graph_rope_ratio(n);
    const float *x = a->in[0], *nw = a->in[1]; /* nw: each head RMS-normalized first */
    float *y = a->out;
    long half = n_rot / 2;
    for (long t = r0; t < r1; t++) {
        graph_rope_table(a->ctx->pos0 + t, (int)half, theta_scale, cs);
        for (long h = 0; h < nh; h++) {
            const float *xr = x + t * ne0 + h * hd;
            float *yr = y + t * ne0 + h * hd;
            float sc = nw ? rms_scale(xr, hd, n->p.f[1]) : 1.0f;
#define XN(i) (nw ? (xr[i] * sc) * nw[i] : xr[i])
            for (long i = 0; i < half; i++) {
                long i0 = mode == ROPE_NEOX ? i : 2 * i, i1 = mode == ROPE_NEOX ? i + half : 2 * i + 1;
                float c = cs[2 * i], s = cs[2 * i + 1], x0 = XN(i0), x1 = XN(i1);
                yr[i0] = x0 * c - x1 * s;
                yr[i1] = x0 * s + x1 * c;
            }
            for (long i = n_rot; i < hd; i++)
                yr[i] = XN(i);
#undef XN
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

#if defined(__x86_64__) && defined(__GNUC__)
/* s[j] = e^(s[j] - mx) over the lanes (the last partial vector masked, or through a copy) */
__attribute__((target("avx512f"))) static void exp_sub_avx512(float *s, long n, float mx)
{
    const __m512 m = _mm512_set1_ps(mx);
    for (long j = 0; j < n; j += 16) {
        const __mmask16 k = n - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - j)) - 1);
        _mm512_mask_storeu_ps(s + j, k, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + j), m)));
    }
}
__attribute__((target("avx2,fma"))) static void exp_sub_avx2(float *s, long n, float mx)
{
    const __m256 m = _mm256_set1_ps(mx);
    long j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(s + j, exp256(_mm256_sub_ps(_mm256_loadu_ps(s + j), m)));
    if (j < n) {
        float b[8] = {0};
        memcpy(b, s + j, (size_t)(n - j) * sizeof(float));
        _mm256_storeu_ps(b, exp256(_mm256_sub_ps(_mm256_loadu_ps(b), m)));
        memcpy(s + j, b, (size_t)(n - j) * sizeof(float));
    }
}
#endif

/* Scores s[0..n) with their maximum mx -> exp(s - mx) in place (the vector exponential where
 * the CPU has AVX2 or AVX-512); returns 1 / their sum, added in double in order. */
static float softmax_exp(float *s, long n, float mx)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (have_f16c) {
        if (have_avx512)
            exp_sub_avx512(s, n, mx);
        else
            exp_sub_avx2(s, n, mx);
        simd_clean_upper(); /* (the scalar sum follows) */
    } else
#endif
        for (long j = 0; j < n; j++)
            s[j] = expf(s[j] - mx);
    double sum = 0;
    for (long j = 0; j < n; j++)
        sum += s[j];
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

/* Prompt attention in tiles (F16 cache, AVX-512). A unit is up to ATTN_TR query rows that share
 * a KV head: hb heads of tb consecutive tokens. Their scores against ATTN_TK cache rows at a
 * time are one register tile (rows across the lanes, a key a register pair), so each key row
 * is read and converted once for all of them; the softmax is the rows' (the same steps as
 * softmax_exp); o += p v runs a few rows at a time against each value row, in position order,
 * one fused multiply-add a lane and position as axpy_f16_multi (the same sums). Rows never
 * touch the cache rows after their own position. */
struct attn_tiles {
    long nkv, grp, hd, T, hb, hc, tb, units;
};

static struct attn_tiles attn_tiles_of(const struct op_args *a)
{
    const struct graph_node *n = a->node;
    struct attn_tiles t = {.nkv = n->p.i[1], .hd = n->p.i[2], .T = n->ne[1]};
    t.grp = n->p.i[0] / t.nkv;
    t.hb = t.grp < ATTN_TR ? t.grp : ATTN_TR;
    t.hc = (t.grp + t.hb - 1) / t.hb;
    t.tb = ATTN_TR / t.hb;
    t.units = (t.T + t.tb - 1) / t.tb * t.nkv * t.hc;
    return t;
}

static bool attn_tiles_apply(const struct op_args *a)
{
#if defined(__x86_64__) && defined(__GNUC__)
    const struct graph_node *n = a->node;
    long hd = n->p.i[2];
    return a->kv_type != 0 && have_avx512 && !no_tiles && n->ne[1] > 1 && hd % 16 == 0 &&
           hd <= 256;
#else
    (void)a;
    return false;
#endif
}

#if defined(__x86_64__) && defined(__GNUC__)
#define AVX512_ATTN __attribute__((target("avx512f,avx512dq,avx2,fma,f16c")))

/* Scores of the unit's rows (qt: [hd][ATTN_TR], rounded to F16, zero past the rows) against
 * cache rows [0, npmax): st[j][ATTN_TR], -inf past each row's own positions (np). */
AVX512_ATTN static void attn_tile_scores(const float *qt, const uint16_t *K, long kvw, long hd,
                                         long npmax, const int32_t *np, float scale, float *kf,
                                         float *st)
{
    const __m512i n0 = _mm512_loadu_si512(np), n1 = _mm512_loadu_si512(np + 16);
    const __m512 ninf = _mm512_set1_ps(-INFINITY), sc = _mm512_set1_ps(scale);
    for (long j0 = 0; j0 < npmax; j0 += ATTN_TK) {
        long kb = npmax - j0 < ATTN_TK ? npmax - j0 : ATTN_TK;
        for (long jj = 0; jj < ATTN_TK; jj++)
            for (long d = 0; d < hd; d += 16)
                _mm512_storeu_ps(kf + jj * hd + d,
                                 jj < kb ? _mm512_cvtph_ps(_mm256_loadu_si256(
                                               (const __m256i *)(K + (j0 + jj) * kvw + d)))
                                         : _mm512_setzero_ps());
        __m512 acc[ATTN_TK][2];
#pragma GCC unroll 12
        for (int jj = 0; jj < ATTN_TK; jj++)
            acc[jj][0] = acc[jj][1] = _mm512_setzero_ps();
        for (long d = 0; d < hd; d++) {
            const __m512 q0 = _mm512_loadu_ps(qt + d * ATTN_TR), q1 = _mm512_loadu_ps(qt + d * ATTN_TR + 16);
#pragma GCC unroll 12
            for (int jj = 0; jj < ATTN_TK; jj++) {
                const __m512 k = _mm512_set1_ps(kf[jj * hd + d]);
                acc[jj][0] = _mm512_fmadd_ps(q0, k, acc[jj][0]);
                acc[jj][1] = _mm512_fmadd_ps(q1, k, acc[jj][1]);
            }
        }
        for (int jj = 0; jj < kb; jj++) {
            const __m512i j = _mm512_set1_epi32((int)(j0 + jj));
            float *o = st + (j0 + jj) * ATTN_TR;
            _mm512_storeu_ps(o, _mm512_mask_blend_ps(_mm512_cmpgt_epi32_mask(n0, j), ninf,
                                                     _mm512_mul_ps(acc[jj][0], sc)));
            _mm512_storeu_ps(o + 16, _mm512_mask_blend_ps(_mm512_cmpgt_epi32_mask(n1, j), ninf,
                                                          _mm512_mul_ps(acc[jj][1], sc)));
        }
    }
}

/* The softmax of each row's scores st[j][i] over its positions j < np[i], as softmax_exp
 * (the exponentials' sum in double, in position order) with exp512 for expf, then each
 * probability rounded to F16: st[j][i] = p, 0 past the row's positions. */
AVX512_ATTN static void attn_tile_softmax(float *st, long npmax, const int32_t *np)
{
    const __m512i n0 = _mm512_loadu_si512(np), n1 = _mm512_loadu_si512(np + 16);
    __m512 m0 = _mm512_set1_ps(-INFINITY), m1 = m0;
    for (long j = 0; j < npmax; j++) {
        m0 = _mm512_max_ps(m0, _mm512_loadu_ps(st + j * ATTN_TR));
        m1 = _mm512_max_ps(m1, _mm512_loadu_ps(st + j * ATTN_TR + 16));
    }
    __m512d s[4] = {_mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd()};
    for (long j = 0; j < npmax; j++) {
        const __m512i jv = _mm512_set1_epi32((int)j);
        float *r = st + j * ATTN_TR;
        const __m512 e0 = _mm512_maskz_mov_ps(_mm512_cmpgt_epi32_mask(n0, jv),
                                              exp512(_mm512_sub_ps(_mm512_loadu_ps(r), m0)));
        const __m512 e1 = _mm512_maskz_mov_ps(_mm512_cmpgt_epi32_mask(n1, jv),
                                              exp512(_mm512_sub_ps(_mm512_loadu_ps(r + 16), m1)));
        _mm512_storeu_ps(r, e0);
        _mm512_storeu_ps(r + 16, e1);
        s[0] = _mm512_add_pd(s[0], _mm512_cvtps_pd(_mm512_castps512_ps256(e0)));
        s[1] = _mm512_add_pd(s[1], _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e0), 1))));
        s[2] = _mm512_add_pd(s[2], _mm512_cvtps_pd(_mm512_castps512_ps256(e1)));
        s[3] = _mm512_add_pd(s[3], _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e1), 1))));
    }
    const __m512d one = _mm512_set1_pd(1.0);
    const __m512 i0 = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(_mm512_div_pd(one, s[0]))),
                                         _mm512_cvtpd_ps(_mm512_div_pd(one, s[1])), 1);
    const __m512 i1 = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(_mm512_div_pd(one, s[2]))),
                                         _mm512_cvtpd_ps(_mm512_div_pd(one, s[3])), 1);
    for (long j = 0; j < npmax; j++) {
        float *r = st + j * ATTN_TR;
        _mm512_storeu_ps(r, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_mul_ps(_mm512_loadu_ps(r), i0),
                                                            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
        _mm512_storeu_ps(r + 16, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_mul_ps(_mm512_loadu_ps(r + 16), i1),
                                                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
    }
}

/* o_i += p[j][i] v_j for rows i of [i0, i0 + RB) and positions j of [j0, j0 + jn), in order,
 * v_j at vf + (j - j0) hd (converted once for all the unit's rows): RB rows x VR vectors of 16
 * lanes in registers, from zero on the first positions (first), else from o. Positions past a
 * row's own (np) are skipped for that row. */
#define ATTN_PV(RB, VR)                                                                            \
    AVX512_ATTN static void attn_pv_##RB##_##VR(const float *pt, const float *vf, long j0, long jn, \
                                                const int32_t *np, int i0, int nr, float *const *o, \
                                                bool first)                                        \
    {                                                                                              \
        __m512 acc[RB][VR];                                                                        \
        int npmin = np[i0], npmax = np[i0];                                                        \
        _Pragma("GCC unroll 24") for (int i = 0; i < RB; i++)                                     \
            _Pragma("GCC unroll 16") for (int v = 0; v < VR; v++)                                  \
                acc[i][v] = first || i >= nr ? _mm512_setzero_ps() : _mm512_loadu_ps(o[i] + 16 * v); \
        for (int i = 1; i < nr; i++) {                                                             \
            npmin = np[i0 + i] < npmin ? np[i0 + i] : npmin;                                       \
            npmax = np[i0 + i] > npmax ? np[i0 + i] : npmax;                                       \
        }                                                                                          \
        const long j1 = j0 + jn < npmax ? j0 + jn : npmax;                                         \
        for (long j = j0; j < j1; j++) {                                                           \
            __m512 vv[VR];                                                                         \
            _Pragma("GCC unroll 16") for (int v = 0; v < VR; v++)                                  \
                vv[v] = _mm512_loadu_ps(vf + (j - j0) * 16 * VR + 16 * v);                         \
            const float *p = pt + j * ATTN_TR + i0;                                                \
            _Pragma("GCC unroll 24") for (int i = 0; i < RB; i++) {                                \
                if (i >= nr || (j >= npmin && j >= np[i0 + i]))                                    \
                    continue;                                                                      \
                const __m512 pb = _mm512_set1_ps(p[i]);                                            \
                _Pragma("GCC unroll 16") for (int v = 0; v < VR; v++)                              \
                    acc[i][v] = _mm512_fmadd_ps(pb, vv[v], acc[i][v]);                             \
            }                                                                                      \
        }                                                                                          \
        for (int i = 0; i < nr; i++)                                                               \
            for (int v = 0; v < VR; v++)                                                           \
                _mm512_storeu_ps(o[i] + 16 * v, acc[i][v]);                                        \
    }
ATTN_PV(24, 1)
ATTN_PV(12, 2)
ATTN_PV(8, 3)
ATTN_PV(6, 4)
ATTN_PV(4, 5)
ATTN_PV(4, 6)
ATTN_PV(3, 7)
ATTN_PV(3, 8)
ATTN_PV(2, 9)
ATTN_PV(2, 10)
ATTN_PV(2, 11)
ATTN_PV(2, 12)
ATTN_PV(1, 13)
ATTN_PV(1, 14)
ATTN_PV(1, 15)
ATTN_PV(1, 16)
/* n cache rows of hd F16 values, kvw apart, as floats hd apart. */
AVX512_ATTN static void attn_rows_f32(const uint16_t *V, long kvw, long n, long hd, float *out)
{
    for (long j = 0; j < n; j++)
        for (long d = 0; d < hd; d += 16)
            _mm512_storeu_ps(out + j * hd + d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(V + j * kvw + d))));
}

typedef void (*attn_pv_fn)(const float *, const float *, long, long, const int32_t *, int, int,
                           float *const *, bool);
static const struct {
    int rb;
    attn_pv_fn fn;
} attn_pv_by_vr[17] = {
    {0, NULL},          {24, attn_pv_24_1}, {12, attn_pv_12_2}, {8, attn_pv_8_3},
    {6, attn_pv_6_4},   {4, attn_pv_4_5},   {4, attn_pv_4_6},   {3, attn_pv_3_7},
    {3, attn_pv_3_8},   {2, attn_pv_2_9},   {2, attn_pv_2_10},  {2, attn_pv_2_11},
    {2, attn_pv_2_12},  {1, attn_pv_1_13},  {1, attn_pv_1_14},  {1, attn_pv_1_15},
    {1, attn_pv_1_16},
};

static void attn_tile_unit(const struct op_args *a, const struct attn_tiles *t, long u, float *scr)
{
    const struct graph_node *n = a->node;
    long nh = n->p.i[0], hd = t->hd, kvw = t->nkv * hd;
    long kvh = u % t->nkv, hcix = u / t->nkv % t->hc, tb0 = u / (t->nkv * t->hc) * t->tb;
    long h0 = kvh * t->grp + hcix * t->hb, hn = t->grp - hcix * t->hb;
    hn = hn < t->hb ? hn : t->hb;
    long tn = t->T - tb0 < t->tb ? t->T - tb0 : t->tb;
    int nr = (int)(tn * hn);
    float *st = scr, *qt = st + (size_t)ATTN_TR * (size_t)(a->ctx->pos0 + t->T), *kf = qt + ATTN_TR * hd;
    int32_t np[ATTN_TR];
    float *orow[ATTN_TR];
    const float *Q = a->in[0];
    for (int i = 0; i < ATTN_TR; i++) {
        long tt = tb0 + i / hn, h = h0 + i % hn;
        np[i] = i < nr ? (int32_t)(a->ctx->pos0 + tt + 1) : 0;
        orow[i] = i < nr ? (float *)a->out + tt * nh * hd + h * hd : NULL;
        for (long d = 0; d < hd; d++)
            qt[d * ATTN_TR + i] = i < nr ? round_f16(Q[tt * nh * hd + h * hd + d]) : 0.0f;
    }
    long npmax = np[nr - 1];
    attn_tile_scores(qt, (const uint16_t *)a->kcache + kvh * hd, kvw, hd, npmax, np, n->p.f[0], kf,
                     st);
    attn_tile_softmax(st, npmax, np);
    const uint16_t *V = (const uint16_t *)a->vcache + kvh * hd;
    int vr = (int)(hd / 16), rb = attn_pv_by_vr[vr].rb;
    for (long j0 = 0; j0 < npmax; j0 += ATTN_VC) { /* the value rows to floats once, into kf */
        const long jn = npmax - j0 < ATTN_VC ? npmax - j0 : ATTN_VC;
        attn_rows_f32(V + j0 * kvw, kvw, jn, hd, kf);
        for (int i0 = 0; i0 < nr; i0 += rb)
            attn_pv_by_vr[vr].fn(st, kf, j0, jn, np, i0, nr - i0 < rb ? nr - i0 : rb, orow + i0, j0 == 0);
    }
}
#else
static void attn_tile_unit(const struct op_args *a, const struct attn_tiles *t, long u, float *scr)
{
    (void)a, (void)t, (void)u, (void)scr;
}
#endif

struct attn_tiles_job {
    const struct op_args *a;
    struct attn_tiles t;
};

/* Units go to the threads in turn, so that each thread gets early and late tokens alike (a
 * late token's row costs more: it has more positions). */
static void attn_tiles_worker(void *arg, int ith, int nth)
{
    const struct attn_tiles_job *j = arg;
    float *scr = j->a->ctx->thr_scratch + (size_t)ith * j->a->ctx->thr_stride;
    for (long u = ith; u < j->t.units; u += nth)
        attn_tile_unit(j->a, &j->t, u, scr);
    simd_clean_upper();
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

/* One V head over the whole batch: M (dv × dk) ← M·e^g; δ = β(v − M k); M += δ kᵀ; o = M q/√dk,
 * q and k L2-normalized (eps p.f[0]) from each token's row q (nkh dk) | k (nkh dk) | v (nvh dv)
 * of in[0]. dk <= 256 (cpu_op checks). */
static void deltanet_rows(const struct op_args *a, long r0, long r1, int ith)
{
    (void)ith;
    const int32_t *p = a->node->p.i;
    long nkh = p[0], nvh = p[1], dk = p[2], dv = p[3], T = a->node->ne[1];
    long C = 2 * nkh * dk + nvh * dv;
    const float *X = a->in[0], *G = a->in[1];
    float *O = a->out, qs = 1.0f / sqrtf((float)dk), eps = a->node->p.f[0];
    float q[256], k[256];
    for (long h = r0; h < r1; h++) {
        float *M = (float *)a->state + h * dv * dk;
        long kh = h % nkh;
        for (long t = 0; t < T; t++) {
            l2_normalize(X + t * C + kh * dk, q, dk, eps);
            l2_normalize(X + t * C + nkh * dk + kh * dk, k, dk, eps);
            const float *v = X + t * C + 2 * nkh * dk + h * dv;
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
        if (attn_tiles_apply(a)) {
            struct attn_tiles_job j = {a, attn_tiles_of(a)};
            pool_run(a->ctx->nth > 1 ? a->ctx->pool : NULL, attn_tiles_worker, &j);
            break;
        }
        run_rows(a, n->ne[1] * n->p.i[0], span, attn_rows);
        break;
    }
    case GOP_CONV1D:
        run_rows(a, n->ne[0], n->ne[1] * n->p.i[0], conv1d_rows);
        if (n->p.i[1]) { /* then SiLU, in place, as the SILU op */
            struct graph_node silu = *n;
            silu.op = GOP_SILU;
            struct op_args b = *a;
            b.node = &silu;
            b.in[0] = a->out;
            run_rows(&b, n_elems(n), 4, eltwise_rows);
        }
        break;
    case GOP_GATES:
        run_rows(a, n->ne[1], n->ne[0] * 8, gates_rows);
        break;
    case GOP_DELTANET:
        if (n->p.i[2] > 256)
            return brasa_fail(err, BRASA_EUNSUPPORTED, "%s: DeltaNet keys of %d values (the CPU "
                              "kernel takes at most 256)", n->name, n->p.i[2]);
        run_rows(a, n->p.i[1], n->ne[1] * n->p.i[2] * n->p.i[3] * 4, deltanet_rows);
        break;
    default:
        return brasa_fail(err, BRASA_EUNSUPPORTED, "op %s has no CPU kernel", graph_op_name(n->op));
    }
    return BRASA_OK;
}
