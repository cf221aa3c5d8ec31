/* Scalar reference kernels: dequantization bit-exact with ggml (same float operations in the
 * same order), dot products against the vec_dot_type activations, and ggml's x86 activation
 * conversions. Plain C, used on every CPU and as the oracle for the SIMD kernels. */
#include <math.h>
#include <string.h>

#include "quant/quant_impl.h"

/* Bit-exactness with ggml needs a separate multiply and add wherever the source writes
 * a * b - c: no fused multiply-add (GCC in ISO C mode does not contract; clang would). */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

struct qkernels qk_ref[GGML_TYPE_COUNT];

/* ------------------------------------------------------------------ dequantization */

static void dq_f32(const void *src, float *y, int64_t nb) { memcpy(y, src, (size_t)nb * 4); }

static void dq_f16(const void *src, float *y, int64_t nb)
{
    const uint16_t *x = src;
    for (int64_t i = 0; i < nb; i++)
        y[i] = fp16_to_f32(x[i]);
}

static void dq_bf16(const void *src, float *y, int64_t nb)
{
    const uint16_t *x = src;
    for (int64_t i = 0; i < nb; i++)
        y[i] = bf16_to_f32(x[i]);
}

static void dq_q4_0(const void *src, float *y, int64_t nb)
{
    const block_q4_0 *x = src;
    for (int64_t i = 0; i < nb; i++, y += QK4_0) {
        const float d = fp16_to_f32(x[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            y[j] = (float)((x[i].qs[j] & 0xF) - 8) * d;
            y[j + 16] = (float)((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

static void dq_q4_1(const void *src, float *y, int64_t nb)
{
    const block_q4_1 *x = src;
    for (int64_t i = 0; i < nb; i++, y += QK4_1) {
        const float d = fp16_to_f32(x[i].d), m = fp16_to_f32(x[i].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            y[j] = (float)(x[i].qs[j] & 0xF) * d + m;
            y[j + 16] = (float)(x[i].qs[j] >> 4) * d + m;
        }
    }
}

static uint32_t load_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static void dq_q5_0(const void *src, float *y, int64_t nb)
{
    const block_q5_0 *x = src;
    for (int64_t i = 0; i < nb; i++, y += QK5_0) {
        const float d = fp16_to_f32(x[i].d);
        const uint32_t qh = load_u32(x[i].qh);
        for (int j = 0; j < 16; j++) {
            int h0 = (qh >> j) & 1, h1 = (qh >> (j + 16)) & 1;
            y[j] = (float)(((x[i].qs[j] & 0xF) | (h0 << 4)) - 16) * d;
            y[j + 16] = (float)(((x[i].qs[j] >> 4) | (h1 << 4)) - 16) * d;
        }
    }
}

static void dq_q5_1(const void *src, float *y, int64_t nb)
{
    const block_q5_1 *x = src;
    for (int64_t i = 0; i < nb; i++, y += QK5_1) {
        const float d = fp16_to_f32(x[i].d), m = fp16_to_f32(x[i].m);
        const uint32_t qh = load_u32(x[i].qh);
        for (int j = 0; j < 16; j++) {
            int h0 = (qh >> j) & 1, h1 = (qh >> (j + 16)) & 1;
            y[j] = (float)((x[i].qs[j] & 0xF) | (h0 << 4)) * d + m;
            y[j + 16] = (float)((x[i].qs[j] >> 4) | (h1 << 4)) * d + m;
        }
    }
}

static void dq_q8_0(const void *src, float *y, int64_t nb)
{
    const block_q8_0 *x = src;
    for (int64_t i = 0; i < nb; i++, y += QK8_0) {
        const float d = fp16_to_f32(x[i].d);
        for (int j = 0; j < QK8_0; j++)
            y[j] = (float)x[i].qs[j] * d;
    }
}

static void dq_q8_1(const void *src, float *y, int64_t nb)
{
    const block_q8_1 *x = src;
    for (int64_t i = 0; i < nb; i++, y += QK8_1) {
        const float d = fp16_to_f32(x[i].d);
        for (int j = 0; j < QK8_1; j++)
            y[j] = (float)x[i].qs[j] * d;
    }
}

/* Q2_K: per 128 elements, 4 shifts of the same 32 bytes; each 16-element group has its scale. */
static void dq_q2_k(const void *src, float *y, int64_t nb)
{
    const block_q2_K *x = src;
    for (int64_t i = 0; i < nb; i++) {
        const float d = fp16_to_f32(x[i].d), dmin = fp16_to_f32(x[i].dmin);
        const uint8_t *q = x[i].qs, *sc = x[i].scales;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int g = 0; g < 2; g++) {
                    const uint8_t s = *sc++;
                    const float dl = d * (float)(s & 0xF), ml = dmin * (float)(s >> 4);
                    for (int l = 0; l < 16; l++)
                        *y++ = dl * (float)((q[16 * g + l] >> shift) & 3) - ml;
                }
            }
        }
    }
}

static void dq_q3_k(const void *src, float *y, int64_t nb)
{
    const block_q3_K *x = src;
    for (int64_t i = 0; i < nb; i++) {
        const float d = fp16_to_f32(x[i].d);
        int8_t sc[16];
        q3k_scales(x[i].scales, sc);
        const uint8_t *q = x[i].qs, *hm = x[i].hmask;
        int is = 0;
        uint8_t m = 1;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m = (uint8_t)(m << 1)) {
                for (int g = 0; g < 2; g++) {
                    const float dl = d * (float)sc[is++];
                    for (int l = 16 * g; l < 16 * g + 16; l++)
                        *y++ = dl * (float)(((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                }
            }
        }
    }
}

static void dq_q4_k(const void *src, float *y, int64_t nb)
{
    const block_q4_K *x = src;
    for (int64_t i = 0; i < nb; i++) {
        const float d = fp16_to_f32(x[i].d), dmin = fp16_to_f32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        for (int j = 0; j < 8; j += 2, q += 32) {
            uint8_t sc, m;
            kq_scale_min(j, x[i].scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            kq_scale_min(j + 1, x[i].scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = dmin * (float)m;
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (float)(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

static void dq_q5_k(const void *src, float *y, int64_t nb)
{
    const block_q5_K *x = src;
    for (int64_t i = 0; i < nb; i++) {
        const float d = fp16_to_f32(x[i].d), dmin = fp16_to_f32(x[i].dmin);
        const uint8_t *ql = x[i].qs, *qh = x[i].qh;
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0; j < 8; j += 2, ql += 32, u1 = (uint8_t)(u1 << 2), u2 = (uint8_t)(u2 << 2)) {
            uint8_t sc, m;
            kq_scale_min(j, x[i].scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            kq_scale_min(j + 1, x[i].scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = dmin * (float)m;
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (float)((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}

/* Q6_K element e (0..255) of a block: 4 low bits, 2 high bits, minus 32. */
static inline int q6k_q(const block_q6_K *b, int e)
{
    int h = e >> 7, r = e & 127, l = r & 31, quarter = r >> 5;
    const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
    int lo = (quarter & 1) ? ql[l + 32] : ql[l];
    lo = (quarter & 2) ? lo >> 4 : lo & 0xF;
    int hi = (qh[l] >> (2 * quarter)) & 3;
    return (lo | (hi << 4)) - 32;
}

static void dq_q6_k(const void *src, float *y, int64_t nb)
{
    const block_q6_K *x = src;
    for (int64_t i = 0; i < nb; i++, y += QK_K) {
        const float d = fp16_to_f32(x[i].d);
        for (int e = 0; e < QK_K; e++)
            y[e] = d * (float)x[i].scales[e / 16] * (float)q6k_q(&x[i], e);
    }
}

static void dq_q8_k(const void *src, float *y, int64_t nb)
{
    const block_q8_K *x = src;
    for (int64_t i = 0; i < nb; i++, y += QK_K)
        for (int j = 0; j < QK_K; j++)
            y[j] = x[i].d * (float)x[i].qs[j];
}

/* ------------------------------------------------------------------ activation conversion */

static void act_f32(const float *x, void *dst, int64_t n) { memcpy(dst, x, (size_t)n * 4); }

static void act_f16(const float *x, void *dst, int64_t n)
{
    uint16_t *y = dst;
    for (int64_t i = 0; i < n; i++)
        y[i] = f32_to_fp16(x[i]);
}

static void act_bf16(const float *x, void *dst, int64_t n)
{
    uint16_t *y = dst;
    for (int64_t i = 0; i < n; i++)
        y[i] = f32_to_bf16(x[i]);
}

static int8_t sat8(int v) { return (int8_t)(v > 127 ? 127 : v < -128 ? -128 : v); }

/* ggml's AVX path: d = amax/127 (stored fp16), q = round-half-even(x * (127/amax)). */
static float q8_block(const float *x, int8_t *q, int *sum)
{
    float amax = 0.0f;
    for (int j = 0; j < 32; j++)
        amax = fmaxf(amax, fabsf(x[j]));
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    int s = 0;
    for (int j = 0; j < 32; j++) {
        q[j] = sat8(qk_nearest_int(x[j] * id));
        s += q[j];
    }
    *sum = s;
    return amax / 127.f;
}

static void act_q8_0(const float *x, void *dst, int64_t n)
{
    block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        int s;
        y[i].d = f32_to_fp16(q8_block(x + i * QK8_0, y[i].qs, &s));
    }
}

static void act_q8_1(const float *x, void *dst, int64_t n)
{
    block_q8_1 *y = dst;
    for (int64_t i = 0; i < n / QK8_1; i++) {
        int s;
        const float d = q8_block(x + i * QK8_1, y[i].qs, &s);
        y[i].d = f32_to_fp16(d);
        y[i].s = f32_to_fp16(d * (float)s);
    }
}

/* ggml's Q8_K: scale from the signed value of largest magnitude (first one), iscale = -127/max,
 * q = min(127, nearest_int(iscale * x)), d = 1/iscale, bsums per 16. */
static void act_q8_k(const float *x, void *dst, int64_t n)
{
    block_q8_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float max = 0, amax = 0;
        for (int j = 0; j < QK_K; j++) {
            float ax = fabsf(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = -127.f / max;
        for (int j = 0; j < QK_K; j++) {
            int v = qk_nearest_int(iscale * x[j]);
            y[i].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int j = 0; j < QK_K / 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++)
                s += y[i].qs[16 * j + l];
            y[i].bsums[j] = (int16_t)s;
        }
        y[i].d = 1 / iscale;
    }
}

/* ------------------------------------------------------------------ dot products */

static float dot_f32(int64_t n, const void *w, const void *a)
{
    const float *x = w, *y = a;
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)x[i] * y[i];
    return (float)s;
}

static float dot_f16(int64_t n, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)(fp16_to_f32(x[i]) * fp16_to_f32(y[i]));
    return (float)s;
}

static float dot_bf16(int64_t n, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)(bf16_to_f32(x[i]) * bf16_to_f32(y[i]));
    return (float)s;
}

static float dot_q4_0(int64_t n, const void *w, const void *a)
{
    const block_q4_0 *x = w;
    const block_q8_0 *y = a;
    float s = 0;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        int si = 0;
        for (int j = 0; j < 16; j++)
            si += ((x[i].qs[j] & 0xF) - 8) * y[i].qs[j] + ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + 16];
        s += (float)si * fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d);
    }
    return s;
}

static float dot_q4_1(int64_t n, const void *w, const void *a)
{
    const block_q4_1 *x = w;
    const block_q8_1 *y = a;
    float s = 0;
    for (int64_t i = 0; i < n / QK8_1; i++) {
        int si = 0;
        for (int j = 0; j < 16; j++)
            si += (x[i].qs[j] & 0xF) * y[i].qs[j] + (x[i].qs[j] >> 4) * y[i].qs[j + 16];
        s += (float)si * fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d) +
             fp16_to_f32(x[i].m) * fp16_to_f32(y[i].s);
    }
    return s;
}

static float dot_q5_0(int64_t n, const void *w, const void *a)
{
    const block_q5_0 *x = w;
    const block_q8_0 *y = a;
    float s = 0;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const uint32_t qh = load_u32(x[i].qh);
        int si = 0;
        for (int j = 0; j < 16; j++) {
            int q0 = ((x[i].qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4)) - 16;
            int q1 = ((x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4)) - 16;
            si += q0 * y[i].qs[j] + q1 * y[i].qs[j + 16];
        }
        s += (float)si * fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d);
    }
    return s;
}

static float dot_q5_1(int64_t n, const void *w, const void *a)
{
    const block_q5_1 *x = w;
    const block_q8_1 *y = a;
    float s = 0;
    for (int64_t i = 0; i < n / QK8_1; i++) {
        const uint32_t qh = load_u32(x[i].qh);
        int si = 0;
        for (int j = 0; j < 16; j++) {
            int q0 = (x[i].qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
            int q1 = (x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            si += q0 * y[i].qs[j] + q1 * y[i].qs[j + 16];
        }
        s += (float)si * fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d) +
             fp16_to_f32(x[i].m) * fp16_to_f32(y[i].s);
    }
    return s;
}

static float dot_q8_0(int64_t n, const void *w, const void *a)
{
    const block_q8_0 *x = w, *y = a;
    float s = 0;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        int si = 0;
        for (int j = 0; j < QK8_0; j++)
            si += x[i].qs[j] * y[i].qs[j];
        s += (float)si * fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d);
    }
    return s;
}

static float dot_q8_1(int64_t n, const void *w, const void *a)
{
    const block_q8_1 *x = w, *y = a;
    float s = 0;
    for (int64_t i = 0; i < n / QK8_1; i++) {
        int si = 0;
        for (int j = 0; j < QK8_1; j++)
            si += x[i].qs[j] * y[i].qs[j];
        s += (float)si * fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d);
    }
    return s;
}

static float dot_q2_k(int64_t n, const void *w, const void *a)
{
    const block_q2_K *x = w;
    const block_q8_K *y = a;
    float s = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int isum = 0, msum = 0, g = 0;
        for (int half = 0; half < 2; half++)
            for (int shift = 0; shift < 8; shift += 2)
                for (int k = 0; k < 2; k++, g++) {
                    const uint8_t *q = x[i].qs + 32 * half + 16 * k;
                    const int8_t *yq = y[i].qs + 16 * g;
                    int si = 0;
                    for (int l = 0; l < 16; l++)
                        si += ((q[l] >> shift) & 3) * yq[l];
                    isum += (x[i].scales[g] & 0xF) * si;
                    msum += (x[i].scales[g] >> 4) * y[i].bsums[g];
                }
        s += y[i].d * (fp16_to_f32(x[i].d) * (float)isum - fp16_to_f32(x[i].dmin) * (float)msum);
    }
    return s;
}

static float dot_q3_k(int64_t n, const void *w, const void *a)
{
    const block_q3_K *x = w;
    const block_q8_K *y = a;
    float s = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8_t sc[16];
        q3k_scales(x[i].scales, sc);
        int isum = 0, g = 0;
        uint8_t m = 1;
        for (int half = 0; half < 2; half++)
            for (int shift = 0; shift < 8; shift += 2, m = (uint8_t)(m << 1))
                for (int k = 0; k < 2; k++, g++) {
                    const uint8_t *q = x[i].qs + 32 * half + 16 * k, *hm = x[i].hmask + 16 * k;
                    const int8_t *yq = y[i].qs + 16 * g;
                    int si = 0;
                    for (int l = 0; l < 16; l++)
                        si += (((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4)) * yq[l];
                    isum += sc[g] * si;
                }
        s += y[i].d * fp16_to_f32(x[i].d) * (float)isum;
    }
    return s;
}

static float dot_q4_k(int64_t n, const void *w, const void *a)
{
    const block_q4_K *x = w;
    const block_q8_K *y = a;
    float s = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int isum = 0, msum = 0;
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            kq_scale_min(j, x[i].scales, &sc, &m);
            const uint8_t *q = x[i].qs + 32 * (j / 2);
            const int8_t *yq = y[i].qs + 32 * j;
            int si = 0;
            for (int l = 0; l < 32; l++)
                si += ((j & 1) ? q[l] >> 4 : q[l] & 0xF) * yq[l];
            isum += sc * si;
            msum += m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        s += y[i].d * (fp16_to_f32(x[i].d) * (float)isum - fp16_to_f32(x[i].dmin) * (float)msum);
    }
    return s;
}

static float dot_q5_k(int64_t n, const void *w, const void *a)
{
    const block_q5_K *x = w;
    const block_q8_K *y = a;
    float s = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int isum = 0, msum = 0;
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            kq_scale_min(j, x[i].scales, &sc, &m);
            const uint8_t *q = x[i].qs + 32 * (j / 2);
            const int8_t *yq = y[i].qs + 32 * j;
            int si = 0;
            for (int l = 0; l < 32; l++) {
                int v = ((j & 1) ? q[l] >> 4 : q[l] & 0xF) + (((x[i].qh[l] >> j) & 1) << 4);
                si += v * yq[l];
            }
            isum += sc * si;
            msum += m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        s += y[i].d * (fp16_to_f32(x[i].d) * (float)isum - fp16_to_f32(x[i].dmin) * (float)msum);
    }
    return s;
}

static float dot_q6_k(int64_t n, const void *w, const void *a)
{
    const block_q6_K *x = w;
    const block_q8_K *y = a;
    float s = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int isum = 0;
        for (int g = 0; g < 16; g++) {
            int si = 0;
            for (int l = 0; l < 16; l++)
                si += q6k_q(&x[i], 16 * g + l) * y[i].qs[16 * g + l];
            isum += x[i].scales[g] * si;
        }
        s += y[i].d * fp16_to_f32(x[i].d) * (float)isum;
    }
    return s;
}

static float dot_q8_k(int64_t n, const void *w, const void *a)
{
    const block_q8_K *x = w, *y = a;
    float s = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int si = 0;
        for (int j = 0; j < QK_K; j++)
            si += x[i].qs[j] * y[i].qs[j];
        s += x[i].d * y[i].d * (float)si;
    }
    return s;
}

void qk_ref_init(void)
{
    struct qkernels *k = qk_ref;
    k[GGML_TYPE_F32] = (struct qkernels){.dequant = dq_f32, .dot = dot_f32, .act = act_f32};
    k[GGML_TYPE_F16] = (struct qkernels){.dequant = dq_f16, .dot = dot_f16, .act = act_f16};
    k[GGML_TYPE_BF16] = (struct qkernels){.dequant = dq_bf16, .dot = dot_bf16, .act = act_bf16};
    k[GGML_TYPE_Q4_0] = (struct qkernels){.dequant = dq_q4_0, .dot = dot_q4_0, .act = NULL};
    k[GGML_TYPE_Q4_1] = (struct qkernels){.dequant = dq_q4_1, .dot = dot_q4_1, .act = NULL};
    k[GGML_TYPE_Q5_0] = (struct qkernels){.dequant = dq_q5_0, .dot = dot_q5_0, .act = NULL};
    k[GGML_TYPE_Q5_1] = (struct qkernels){.dequant = dq_q5_1, .dot = dot_q5_1, .act = NULL};
    k[GGML_TYPE_Q8_0] = (struct qkernels){.dequant = dq_q8_0, .dot = dot_q8_0, .act = act_q8_0};
    k[GGML_TYPE_Q8_1] = (struct qkernels){.dequant = dq_q8_1, .dot = dot_q8_1, .act = act_q8_1};
    k[GGML_TYPE_Q2_K] = (struct qkernels){.dequant = dq_q2_k, .dot = dot_q2_k, .act = NULL};
    k[GGML_TYPE_Q3_K] = (struct qkernels){.dequant = dq_q3_k, .dot = dot_q3_k, .act = NULL};
    k[GGML_TYPE_Q4_K] = (struct qkernels){.dequant = dq_q4_k, .dot = dot_q4_k, .act = NULL};
    k[GGML_TYPE_Q5_K] = (struct qkernels){.dequant = dq_q5_k, .dot = dot_q5_k, .act = NULL};
    k[GGML_TYPE_Q6_K] = (struct qkernels){.dequant = dq_q6_k, .dot = dot_q6_k, .act = NULL};
    k[GGML_TYPE_Q8_K] = (struct qkernels){.dequant = dq_q8_k, .dot = dot_q8_k, .act = act_q8_k};
}
