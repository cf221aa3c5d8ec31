/* Quantizers: float rows to ggml blocks, following the reference quantizers llama-quantize uses
 * without an importance matrix (so a file we write is as good as one it writes):
 *  - 32-blocks (Q4_0/Q4_1/Q5_0/Q5_1/Q8_0): one scale (and min) from the block's extreme values.
 *  - Q4_K/Q5_K: per 32-element sub-block, a weighted least-squares search over candidate scales
 *    for (scale, min) (qk_fit_scale_min), then the 8 scales and mins quantized to 6 bits
 *    against the block's largest, and the values re-rounded with the final scales.
 *  - Q6_K: per 16-element sub-block, a signed scale chosen among 19 candidates by weighted
 *    error (qk_fit_scale), then the 16 scales quantized to int8 against the largest. */
#include <float.h>
#include <math.h>

#include "quant/quant_impl.h"

#define GROUP_MAX_EPS 1e-15f

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* ------------------------------------------------------------------ 32-element blocks */

/* The value of largest magnitude (first one on ties), with its sign. */
static float signed_absmax(const float *x, int n)
{
    float amax = 0, max = 0;
    for (int j = 0; j < n; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    return max;
}

static void minmax(const float *x, int n, float *lo, float *hi)
{
    *lo = FLT_MAX;
    *hi = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        *lo = fminf(*lo, x[j]);
        *hi = fmaxf(*hi, x[j]);
    }
}

/* Symmetric: the extreme value maps to -8 (or -16), so the other side gets the extra level. */
static void q_q4_0(const float *x, void *dst, int64_t nb)
{
    block_q4_0 *y = dst;
    for (int64_t i = 0; i < nb; i++, x += 32) {
        const float d = signed_absmax(x, 32) / -8, id = d ? 1.0f / d : 0.0f;
        y[i].d = f32_to_fp16(d);
        for (int j = 0; j < 16; j++) {
            int a = clampi((int)(x[j] * id + 8.5f), 0, 15);
            int b = clampi((int)(x[j + 16] * id + 8.5f), 0, 15);
            y[i].qs[j] = (uint8_t)(a | (b << 4));
        }
    }
}

static void q_q5_0(const float *x, void *dst, int64_t nb)
{
    block_q5_0 *y = dst;
    for (int64_t i = 0; i < nb; i++, x += 32) {
        const float d = signed_absmax(x, 32) / -16, id = d ? 1.0f / d : 0.0f;
        y[i].d = f32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            int a = clampi((int)(x[j] * id + 16.5f), 0, 31);
            int b = clampi((int)(x[j + 16] * id + 16.5f), 0, 31);
            y[i].qs[j] = (uint8_t)((a & 0xF) | ((b & 0xF) << 4));
            qh |= (uint32_t)(a >> 4) << j | (uint32_t)(b >> 4) << (j + 16);
        }
        memcpy(y[i].qh, &qh, 4);
    }
}

/* Affine: min maps to 0 and max to the top level. */
static void q_q4_1(const float *x, void *dst, int64_t nb)
{
    block_q4_1 *y = dst;
    for (int64_t i = 0; i < nb; i++, x += 32) {
        float lo, hi;
        minmax(x, 32, &lo, &hi);
        const float d = (hi - lo) / 15, id = d ? 1.0f / d : 0.0f;
        y[i].d = f32_to_fp16(d);
        y[i].m = f32_to_fp16(lo);
        for (int j = 0; j < 16; j++) {
            int a = clampi((int)((x[j] - lo) * id + 0.5f), 0, 15);
            int b = clampi((int)((x[j + 16] - lo) * id + 0.5f), 0, 15);
            y[i].qs[j] = (uint8_t)(a | (b << 4));
        }
    }
}

static void q_q5_1(const float *x, void *dst, int64_t nb)
{
    block_q5_1 *y = dst;
    for (int64_t i = 0; i < nb; i++, x += 32) {
        float lo, hi;
        minmax(x, 32, &lo, &hi);
        const float d = (hi - lo) / 31, id = d ? 1.0f / d : 0.0f;
        y[i].d = f32_to_fp16(d);
        y[i].m = f32_to_fp16(lo);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            int a = clampi((int)((x[j] - lo) * id + 0.5f), 0, 31);
            int b = clampi((int)((x[j + 16] - lo) * id + 0.5f), 0, 31);
            y[i].qs[j] = (uint8_t)((a & 0xF) | ((b & 0xF) << 4));
            qh |= (uint32_t)(a >> 4) << j | (uint32_t)(b >> 4) << (j + 16);
        }
        memcpy(y[i].qh, &qh, 4);
    }
}

/* As llama-quantize writes Q8_0 (d = amax/127, q = roundf(x/d)); activations use quant_act_row. */
static void q_q8_0(const float *x, void *dst, int64_t nb)
{
    block_q8_0 *y = dst;
    for (int64_t i = 0; i < nb; i++, x += 32) {
        float amax = 0;
        for (int j = 0; j < 32; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127, id = d ? 1.0f / d : 0.0f;
        y[i].d = f32_to_fp16(d);
        for (int j = 0; j < 32; j++)
            y[i].qs[j] = (int8_t)clampi((int)roundf(x[j] * id), -128, 127);
    }
}

/* ------------------------------------------------------------------ K-quant helpers */

/* Fits x ~ scale * L + min with L in [0, nmax] and min <= 0, minimising sum w * err^2.
 * Starts from the min/max grid, then tries nstep+1 grids of slightly different density
 * (nmax + rmin + rdelta*is levels across the range) and for each one solves the weighted
 * least-squares scale and offset of its levels in closed form, keeping the best.
 * Returns the scale; *neg_min = -min (>= 0). */
static float qk_fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                              float *neg_min, uint8_t *Laux, float rmin, float rdelta, int nstep)
{
    float lo = x[0], hi = x[0], sum_w = w[0], sum_x = w[0] * x[0];
    for (int i = 1; i < n; i++) {
        lo = fminf(lo, x[i]);
        hi = fmaxf(hi, x[i]);
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (lo > 0)
        lo = 0;
    if (hi == lo) {
        memset(L, 0, (size_t)n);
        *neg_min = -lo;
        return 0.f;
    }
    float iscale = nmax / (hi - lo), scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(qk_nearest_int(iscale * (x[i] - lo)), 0, nmax);
        float diff = scale * L[i] + lo - x[i];
        best += w[i] * diff * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (hi - lo);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(qk_nearest_int(iscale * (x[i] - lo)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D <= 0)
            continue;
        float s = (sum_w * sum_xl - sum_x * sum_l) / D;
        float m = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (m > 0) { /* the offset must stay a (negative) min: refit the scale alone */
            m = 0;
            s = sum_xl / sum_l2;
        }
        float err = 0;
        for (int i = 0; i < n; i++) {
            float diff = s * Laux[i] + m - x[i];
            err += w[i] * diff * diff;
        }
        if (err < best) {
            memcpy(L, Laux, (size_t)n);
            best = err;
            scale = s;
            lo = m;
        }
    }
    *neg_min = -lo;
    return scale;
}

/* Signed symmetric fit with levels [-nmax, nmax-1] (stored + nmax), weights x^2: tries 19
 * scales around nmax/max and keeps the one with the largest sum(w x l)^2 / sum(w l^2). */
static float qk_fit_scale(int n, int nmax, const float *x, uint8_t *L)
{
    float max = signed_absmax(x, n);
    if (fabsf(max) < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max, sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clampi(qk_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (uint8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0)
            continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(qk_nearest_int(iscale * x[i]), -nmax, nmax - 1);
            float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (uint8_t)(nmax + clampi(qk_nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Packs 8 6-bit scales and mins into the 12-byte field (inverse of kq_scale_min). */
static void kq_pack_scales(const uint8_t ls[8], const uint8_t lm[8], uint8_t s[12])
{
    memset(s, 0, 12);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            s[j] = ls[j];
            s[j + 4] = lm[j];
        } else {
            s[j + 4] = (uint8_t)((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
            s[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            s[j] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
}

/* Q4_K/Q5_K common part: fits the 8 sub-blocks, writes d, dmin, scales and the final levels
 * L[256] in [0, nmax]. */
static void kq_affine_block(const float *x, int nmax, float rmin, int nstep, uint16_t *d_out,
                            uint16_t *dmin_out, uint8_t scales[12], uint8_t L[256])
{
    float w[32], sc[8], mn[8], max_sc = 0, max_mn = 0;
    uint8_t Laux[32], ls[8], lm[8];
    for (int j = 0; j < 8; j++) {
        const float *xj = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++)
            sum_x2 += xj[l] * xj[l];
        const float av = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++)
            w[l] = av + fabsf(xj[l]);
        sc[j] = qk_fit_scale_min(32, nmax, xj, w, L + 32 * j, &mn[j], Laux, rmin, 0.1f, nstep);
        max_sc = fmaxf(max_sc, sc[j]);
        max_mn = fmaxf(max_mn, mn[j]);
    }
    const float inv_sc = max_sc > 0 ? 63.f / max_sc : 0.f, inv_mn = max_mn > 0 ? 63.f / max_mn : 0.f;
    for (int j = 0; j < 8; j++) {
        ls[j] = (uint8_t)clampi(qk_nearest_int(inv_sc * sc[j]), 0, 63);
        lm[j] = (uint8_t)clampi(qk_nearest_int(inv_mn * mn[j]), 0, 63);
    }
    kq_pack_scales(ls, lm, scales);
    *d_out = f32_to_fp16(max_sc / 63.f);
    *dmin_out = f32_to_fp16(max_mn / 63.f);
    /* Re-round every value with the scales as stored. */
    for (int j = 0; j < 8; j++) {
        const float d = fp16_to_f32(*d_out) * ls[j];
        if (!d)
            continue;
        const float dm = fp16_to_f32(*dmin_out) * lm[j];
        for (int l = 0; l < 32; l++)
            L[32 * j + l] = (uint8_t)clampi(qk_nearest_int((x[32 * j + l] + dm) / d), 0, nmax);
    }
}

static void q_q4_k(const float *x, void *dst, int64_t nb)
{
    block_q4_K *y = dst;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        kq_affine_block(x, 15, -1.f, 20, &y[i].d, &y[i].dmin, y[i].scales, L);
        uint8_t *q = y[i].qs;
        for (int j = 0; j < QK_K; j += 64, q += 32)
            for (int l = 0; l < 32; l++)
                q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

static void q_q5_k(const float *x, void *dst, int64_t nb)
{
    block_q5_K *y = dst;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        kq_affine_block(x, 31, -0.5f, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
        uint8_t *ql = y[i].qs, *qh = y[i].qh;
        memset(qh, 0, QK_K / 8);
        uint8_t m1 = 1, m2 = 2;
        for (int n = 0; n < QK_K; n += 64, ql += 32, m1 = (uint8_t)(m1 << 2), m2 = (uint8_t)(m2 << 2))
            for (int j = 0; j < 32; j++) {
                int l1 = L[n + j], l2 = L[n + j + 32];
                if (l1 > 15) {
                    l1 -= 16;
                    qh[j] |= m1;
                }
                if (l2 > 15) {
                    l2 -= 16;
                    qh[j] |= m2;
                }
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
    }
}

static void q_q6_k(const float *x, void *dst, int64_t nb)
{
    block_q6_K *y = dst;
    uint8_t L[QK_K];
    float sc[16];
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        float max_sc = 0, max_abs = 0;
        for (int g = 0; g < 16; g++) {
            sc[g] = qk_fit_scale(16, 32, x + 16 * g, L + 16 * g);
            if (fabsf(sc[g]) > max_abs) {
                max_abs = fabsf(sc[g]);
                max_sc = sc[g];
            }
        }
        if (max_abs < GROUP_MAX_EPS) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = -128.f / max_sc;
        y[i].d = f32_to_fp16(1 / iscale);
        for (int g = 0; g < 16; g++)
            y[i].scales[g] = (int8_t)clampi(qk_nearest_int(iscale * sc[g]), -128, 127);
        for (int g = 0; g < 16; g++) {
            const float d = fp16_to_f32(y[i].d) * y[i].scales[g];
            if (!d)
                continue;
            for (int l = 0; l < 16; l++)
                L[16 * g + l] = (uint8_t)(clampi(qk_nearest_int(x[16 * g + l] / d), -32, 31) + 32);
        }
        uint8_t *ql = y[i].ql, *qh = y[i].qh;
        for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32)
            for (int l = 0; l < 32; l++) {
                const uint8_t *Lj = L + j + l;
                ql[l] = (uint8_t)((Lj[0] & 0xF) | ((Lj[64] & 0xF) << 4));
                ql[l + 32] = (uint8_t)((Lj[32] & 0xF) | ((Lj[96] & 0xF) << 4));
                qh[l] = (uint8_t)((Lj[0] >> 4) | ((Lj[32] >> 4) << 2) | ((Lj[64] >> 4) << 4) |
                                  ((Lj[96] >> 4) << 6));
            }
    }
}

/* ------------------------------------------------------------------ entry point */

brasa_status quant_row(uint32_t type, const float *src, void *dst, int64_t n, struct brasa_err *err)
{
    const struct qtype_info *q = qtype_get(type);
    if (!q || !q->can_quant)
        return brasa_fail(err, BRASA_EUNSUPPORTED, "brasa cannot quantize to %s",
                          q ? q->name : "an unknown type");
    if (n < 0 || n % q->block)
        return brasa_fail(err, BRASA_EINVAL, "%lld elements is not a whole number of %s blocks (%d)",
                          (long long)n, q->name, q->block);
    const int64_t nb = n / q->block;
    switch (type) {
    case GGML_TYPE_Q4_0: q_q4_0(src, dst, nb); break;
    case GGML_TYPE_Q4_1: q_q4_1(src, dst, nb); break;
    case GGML_TYPE_Q5_0: q_q5_0(src, dst, nb); break;
    case GGML_TYPE_Q5_1: q_q5_1(src, dst, nb); break;
    case GGML_TYPE_Q8_0: q_q8_0(src, dst, nb); break;
    case GGML_TYPE_Q4_K: q_q4_k(src, dst, nb); break;
    case GGML_TYPE_Q5_K: q_q5_k(src, dst, nb); break;
    case GGML_TYPE_Q6_K: q_q6_k(src, dst, nb); break;
    default: /* F32, F16, BF16, Q8_1, Q8_K: the activation conversions */
        return quant_act_row(type, src, dst, n, err);
    }
    return BRASA_OK;
}
