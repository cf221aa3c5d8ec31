/* SIMD kernels for x86-64, compiled with per-function target attributes and chosen at run time
 * (CPUID), so the build itself stays at the baseline ISA:
 *  - AVX2+FMA+F16C: dequantization of F16/BF16/Q8_0/Q4_0/Q4_K/Q5_K/Q6_K, dot products of every
 *    format but Q2_K/Q3_K, the F16 activation conversion, tiles of Q4_K/Q5_K/Q6_K (each weight
 *    block decoded once for up to 4 columns) and prompt tiles of Q8_0/Q4_0 (with AVX-VNNI where
 *    the CPU has it);
 *  - AVX-512 (F/BW/VL/DQ): dot products of Q4_K/Q5_K/Q6_K/Q8_0/Q4_0 and their multi-column
 *    tiles (each weight block decoded once for up to 4 activation columns; per column the same
 *    operations as a single dot, so a batch gives exactly the single results);
 *  - AVX-512 VNNI: prompt tiles of Q8_0/Q4_0 (two weight rows by up to 8 columns in registers,
 *    over activations laid out for them), bit-identical to the AVX-512 dot products;
 *  - AMX-INT8 (Linux, where the OS grants the tile data): prompt tiles of Q8_0, Q4_0, Q5_0, Q4_K,
 *    Q5_K and Q6_K, 16 rows by 16 columns a tile multiply; the same sums added in another order than the
 *    dot products (within rounding, not bit-identical).
 *
 * Dequantization does the same float operations as the scalar reference (a multiply, then a
 * separate subtract: never a fused multiply-add), so its results are bit-identical. The dot
 * products multiply 8-bit integers exactly (maddubs: unsigned weight level x signed activation,
 * pairs summed to 16 bits without overflow for these ranges, then scaled to 32 bits) and only
 * the per-block float accumulation differs from the reference in rounding order. */
#include <stdlib.h>

#include "core/simd.h"
#include "quant/quant_impl.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))

/* The weights stream from memory once a product (a whole token's worth in decode), and the
 * hardware prefetchers alone leave these loops waiting on it: a Q8_0 product of 32,768 x
 * 4,096 read 5.6 GB/s on one thread against 15.5 for a plain sum of 2 GiB. Each loop asks
 * for the lines PF_AHEAD bytes past the block it reads (2 threads: 10.6 -> 23.2 GB/s; the
 * distance: 256 B 6.3, 1 KiB 8.7, 2 KiB 9.2, 4 KiB 9.0 GB/s on one; BENCHMARKS.md). A
 * prefetch past the end of the weights touches nothing (prefetches do not fault). Always
 * inlined: as a call GCC took it for one without effects and dropped it. */
#define PF_AHEAD 2048
#define PF(p, bytes) pf_lines((const char *)(p) + PF_AHEAD, (int)(bytes))
/* The same for a decode loop over a group of R rows of ws bytes each, which reads the group's
 * rows side by side: PF_AHEAD bytes on from a block of a short row lie in the group's own
 * rows, so it asks for the same block of the next group (R ws bytes on) where that is farther
 * (Q4_0, rows of 864 bytes in groups of 4: 1.5B tg64 23.5 -> 27.8 tok/s, BENCHMARKS.md). */
#define PFR(p, bytes, ws, R)                                                                       \
    pf_lines((const char *)(p) + ((size_t)(R) * (ws) > PF_AHEAD ? (size_t)(R) * (ws) : PF_AHEAD), \
             (int)(bytes))
static inline __attribute__((always_inline)) void pf_lines(const char *p, int bytes)
{
    for (int o = 0; o < bytes; o += 64)
        _mm_prefetch(p + o, _MM_HINT_T0);
}

#define Q_ALWAYS_INLINE __attribute__((always_inline)) inline

/* Columns a weight block of the AVX2 K-quant tiles serves. Batched 4096 x 4096 by 64 columns,
 * 2 threads of an AVX-512 Xeon limited to AVX2, GFLOP/s Q4_K / Q6_K / Q5_K: 2 columns 169 / 158
 * / 141, 3: 186 / 184 / 158, 4: 197 / 191 / 176; one dot product per column before, 131 / 109
 * / 102. (The same code with AVX-512's 32 registers and 8 columns: 214 / 251 / 214.) */
#define KT2_C 4

AVX2 static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AVX2 static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

/* 32 signed bytes times 32 signed bytes, summed in groups of 4 to 8 int32 lanes. */
AVX2 static inline __m256i dot_i8(__m256i x, __m256i y)
{
    const __m256i ax = _mm256_sign_epi8(x, x), sy = _mm256_sign_epi8(y, x);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sy), _mm256_set1_epi16(1));
}

/* 16 bytes of nibbles -> 32 bytes: low nibbles first (elements 0..15), then high ones. */
AVX2 static inline __m256i nibbles32(const uint8_t *p)
{
    /* the 16 bytes in both halves (one broadcast load), the high half shifted by 4 */
    const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
    return _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 0, 4, 4)), _mm256_set1_epi8(0xF));
}

/* ------------------------------------------------------------------ float formats */

AVX2 static float dot_f32_avx2(int64_t n, const void *w, const void *a)
{
    const float *x = w, *y = a;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        PF(x + i, 128);
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), s3);
    }
    float s = hsum8(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++)
        s += x[i] * y[i];
    return s;
}

AVX2 static inline __m256 ld_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
AVX2 static inline __m256 ld_bf16(const uint16_t *p)
{
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

/* F16 (bf: BF16) rows: four accumulators of 8 over 32 values a step, then the scalar tail */
AVX2 static Q_ALWAYS_INLINE float dot_h16_avx2(int64_t n, const uint16_t *x, const uint16_t *y,
                                              const int bf)
{
#define LD(p) (bf ? ld_bf16(p) : ld_f16(p))
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        PF(x + i, 64);
        s0 = _mm256_fmadd_ps(LD(x + i), LD(y + i), s0);
        s1 = _mm256_fmadd_ps(LD(x + i + 8), LD(y + i + 8), s1);
        s2 = _mm256_fmadd_ps(LD(x + i + 16), LD(y + i + 16), s2);
        s3 = _mm256_fmadd_ps(LD(x + i + 24), LD(y + i + 24), s3);
    }
#undef LD
    float s = hsum8(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++)
        s += bf ? bf16_to_f32(x[i]) * bf16_to_f32(y[i]) : h2f(x[i]) * h2f(y[i]);
    return s;
}

AVX2 static float dot_f16_avx2(int64_t n, const void *w, const void *a)
{
    return dot_h16_avx2(n, w, a, 0);
}

AVX2 static float dot_bf16_avx2(int64_t n, const void *w, const void *a)
{
    return dot_h16_avx2(n, w, a, 1);
}

AVX2 static void dq_f16_avx2(const void *src, float *y, int64_t nb)
{
    const uint16_t *x = src;
    int64_t i = 0;
    for (; i + 8 <= nb; i += 8)
        _mm256_storeu_ps(y + i, ld_f16(x + i));
    for (; i < nb; i++)
        y[i] = h2f(x[i]);
}

AVX2 static void dq_bf16_avx2(const void *src, float *y, int64_t nb)
{
    const uint16_t *x = src;
    int64_t i = 0;
    for (; i + 8 <= nb; i += 8)
        _mm256_storeu_ps(y + i, ld_bf16(x + i));
    for (; i < nb; i++)
        y[i] = bf16_to_f32(x[i]);
}

/* F16 activations: the F16C conversion rounds to nearest even, as ggml's does. */
/* Q8_0 activations as the reference converts them (quant_ref.c q8_block): amax over the block,
 * q = the nearest integer to x * (127 / amax), ties to even (the default rounding of
 * cvtps2dq), saturated to int8, d = amax / 127 in fp16: the same bytes. */
AVX2 static void act_q8_0_avx2(const float *x, void *dst, int64_t n)
{
    block_q8_0 *y = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        __m256 v[4], m;
        for (int k = 0; k < 4; k++)
            v[k] = _mm256_loadu_ps(x + 8 * k);
        m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                          _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_movehdup_ps(h));
        const float amax = _mm_cvtss_f32(h);
        const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
        __m256i q[4];
        for (int k = 0; k < 4; k++)
            q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], id));
        const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        _mm256_storeu_si256((__m256i *)y[i].qs, _mm256_permutevar8x32_epi32(b, perm));
        y[i].d = f32_to_fp16(amax / 127.f);
    }
}

AVX2 static void act_f16_avx2(const float *x, void *dst, int64_t n)
{
    uint16_t *y = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        y[i] = f32_to_fp16(x[i]);
}

/* ------------------------------------------------------------------ 32-blocks */

/* Q8_0 / Q4_0: one accumulator, blocks in order, each block's scale product times its sums
 * (the same steps as the prompt tiles below, so they give exactly these results). */
AVX2 static float dot_q8_0_avx2(int64_t n, const void *w, const void *a)
{
    const block_q8_0 *x = w, *y = a;
    const int64_t nb = n / QK8_0;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        if (!(i & 1))
            PF(x + i, 2 * sizeof *x);
        const __m256i p = dot_i8(_mm256_loadu_si256((const __m256i *)x[i].qs),
                                 _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d)), _mm256_cvtepi32_ps(p), acc);
    }
    return hsum8(acc);
}

AVX2 static float dot_q4_0_avx2(int64_t n, const void *w, const void *a)
{
    const block_q4_0 *x = w;
    const block_q8_0 *y = a;
    const int64_t nb = n / QK8_0;
    const __m256i off = _mm256_set1_epi8(8);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        if (!(i & 1))
            PF(x + i, 2 * sizeof *x);
        const __m256i p = dot_i8(_mm256_sub_epi8(nibbles32(x[i].qs), off),
                                 _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d)), _mm256_cvtepi32_ps(p), acc);
    }
    return hsum8(acc);
}

/* 32 bits -> 32 bytes, 0xFF where the bit (byte e <-> bit e) is set. */
AVX2 static inline __m256i bits32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32((int)v), _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                                    2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i m = _mm256_set1_epi64x(0x8040201008040201ll);
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, m), m);
}

/* Unsigned levels (0..31) against signed activations, pairs summed to 8 int32 lanes. */
AVX2 static inline __m256i dot_u8(__m256i x, __m256i y)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), _mm256_set1_epi16(1));
}

AVX2 static float dot_q4_1_avx2(int64_t n, const void *w, const void *a)
{
    const block_q4_1 *x = w;
    const block_q8_1 *y = a;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0;
    for (int64_t i = 0; i < n / QK8_1; i++) {
        PF(x + i, sizeof *x);
        summs += h2f(x[i].m) * h2f(y[i].s);
        const __m256i p = dot_u8(nibbles32(x[i].qs), _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d)), _mm256_cvtepi32_ps(p), acc);
    }
    return hsum8(acc) + summs;
}

/* Q5_0 levels minus 16 as signed bytes: a clear fifth bit is the same as OR 0xF0. */
AVX2 static float dot_q5_0_avx2(int64_t n, const void *w, const void *a)
{
    const block_q5_0 *x = w;
    const block_q8_0 *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK8_0; i++) {
        PF(x + i, sizeof *x);
        const __m256i hi = _mm256_andnot_si256(bits32(x[i].qh), _mm256_set1_epi8((char)0xF0));
        const __m256i q = _mm256_or_si256(nibbles32(x[i].qs), hi);
        const __m256i p = dot_i8(q, _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d)), _mm256_cvtepi32_ps(p), acc);
    }
    return hsum8(acc);
}

AVX2 static float dot_q5_1_avx2(int64_t n, const void *w, const void *a)
{
    const block_q5_1 *x = w;
    const block_q8_1 *y = a;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0;
    for (int64_t i = 0; i < n / QK8_1; i++) {
        PF(x + i, sizeof *x);
        summs += h2f(x[i].m) * h2f(y[i].s);
        const __m256i hi = _mm256_and_si256(bits32(x[i].qh), _mm256_set1_epi8(0x10));
        const __m256i q = _mm256_or_si256(nibbles32(x[i].qs), hi);
        const __m256i p = dot_u8(q, _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d)), _mm256_cvtepi32_ps(p), acc);
    }
    return hsum8(acc) + summs;
}

/* 32 int8 levels times scale d -> 32 floats, as (float)q * d. */
AVX2 static inline void store_scaled32(float *y, __m256i q8, __m256 d)
{
    const __m128i lo = _mm256_castsi256_si128(q8), hi = _mm256_extracti128_si256(q8, 1);
    _mm256_storeu_ps(y, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), d));
    _mm256_storeu_ps(y + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), d));
    _mm256_storeu_ps(y + 16, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), d));
    _mm256_storeu_ps(y + 24, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), d));
}

AVX2 static void dq_q8_0_avx2(const void *src, float *y, int64_t nb)
{
    const block_q8_0 *x = src;
    for (int64_t i = 0; i < nb; i++, y += 32)
        store_scaled32(y, _mm256_loadu_si256((const __m256i *)x[i].qs), _mm256_set1_ps(h2f(x[i].d)));
}

AVX2 static void dq_q4_0_avx2(const void *src, float *y, int64_t nb)
{
    const block_q4_0 *x = src;
    for (int64_t i = 0; i < nb; i++, y += 32)
        store_scaled32(y, _mm256_sub_epi8(nibbles32(x[i].qs), _mm256_set1_epi8(8)),
                       _mm256_set1_ps(h2f(x[i].d)));
}

/* ------------------------------------------------------------------ Q4_K / Q5_K */

/* The 8 scales (bytes 0..7) and 8 mins (bytes 8..15) of a Q4_K/Q5_K block, unpacked. */
static inline void kq_unpack(const uint8_t *s12, uint32_t u[4])
{
    uint32_t a[3];
    memcpy(a, s12, 12);
    const uint32_t m6 = 0x3f3f3f3f, m4 = 0x0f0f0f0f, m2 = 0x03030303;
    u[0] = a[0] & m6;                                    /* scales 0..3 */
    u[1] = (a[2] & m4) | (((a[0] >> 6) & m2) << 4);      /* scales 4..7 */
    u[2] = a[1] & m6;                                    /* mins 0..3 */
    u[3] = ((a[2] >> 4) & m4) | (((a[1] >> 6) & m2) << 4); /* mins 4..7 */
}

/* int16 lanes all = scale k of the 8 in sc16 (a 128-bit vector of 8 int16 in both halves). */
AVX2 static inline __m256i bcast16(__m256i sc16x2, int k)
{
    const __m256i idx = _mm256_set1_epi16((short)(0x0100 * (2 * k + 1) + 2 * k));
    return _mm256_shuffle_epi8(sc16x2, idx);
}

/* Shared tail of Q4_K/Q5_K: the mins term sum_j m_j * (bsums[2j] + bsums[2j+1]). */
AVX2 static inline __m128i kq_mins_dot(const uint32_t u[4], const int16_t *bsums)
{
    const __m128i mins = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)u[3], (int)u[2]));
    const __m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bsums),
                                      _mm_loadu_si128((const __m128i *)(bsums + 8)));
    return _mm_madd_epi16(mins, bs);
}

/* Q4_K / Q5_K (q5) against nc (1..KT2_C) columns of Q8_K at a (column stride as): each weight
 * block is decoded once for every column, and every column gets the operations of a single dot
 * product, so a batch gives exactly the single results. */
AVX2 static Q_ALWAYS_INLINE void kq_dotn_avx2(int64_t n, const void *w, const uint8_t *a, size_t as,
                                              const int nc, float *out, size_t ldo, const int q5)
{
    const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
    __m256 acc[KT2_C];
    __m128 accm[KT2_C];
#pragma GCC unroll 4
    for (int c = 0; c < nc; c++) {
        acc[c] = _mm256_setzero_ps();
        accm[c] = _mm_setzero_ps();
    }
    for (int64_t i = 0; i < n / QK_K; i++) {
        const block_q4_K *x4 = (const block_q4_K *)w + i;
        const block_q5_K *x5 = (const block_q5_K *)w + i;
        const uint16_t hd = q5 ? x5->d : x4->d, hdmin = q5 ? x5->dmin : x4->dmin;
        const uint8_t *scales = q5 ? x5->scales : x4->scales;
        if (q5)
            PF(x5, sizeof *x5);
        else
            PF(x4, sizeof *x4);
        uint32_t u[4];
        kq_unpack(scales, u);
#pragma GCC unroll 4
        for (int c = 0; c < nc; c++) {
            const block_q8_K *y = (const block_q8_K *)(a + (size_t)c * as) + i;
            const float dmin = -y->d * h2f(hdmin);
            accm[c] = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(kq_mins_dot(u, y->bsums)), accm[c]);
        }
        const __m128i sc128 = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)u[1], (int)u[0]));
        const __m256i sc = _mm256_broadcastsi128_si256(sc128);
        const __m256i hbits = q5 ? _mm256_loadu_si256((const __m256i *)x5->qh) : _mm256_setzero_si256();
        const uint8_t *q4 = q5 ? x5->qs : x4->qs;
        __m256i sumi[KT2_C];
#pragma GCC unroll 4
        for (int c = 0; c < nc; c++)
            sumi[c] = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++, q4 += 32) {
            const __m256i bits = _mm256_loadu_si256((const __m256i *)q4);
            __m256i lo = _mm256_and_si256(bits, m4), hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
            if (q5) {
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(hbits, _mm_cvtsi32_si128(2 * k)), one), 4));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(hbits, _mm_cvtsi32_si128(2 * k + 1)), one), 4));
            }
            const __m256i sl = bcast16(sc, 2 * k), sh = bcast16(sc, 2 * k + 1);
#pragma GCC unroll 4
            for (int c = 0; c < nc; c++) {
                const int8_t *q8 = ((const block_q8_K *)(a + (size_t)c * as) + i)->qs + 64 * k;
                const __m256i pl = _mm256_madd_epi16(sl, _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)q8)));
                const __m256i ph = _mm256_madd_epi16(sh, _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(q8 + 32))));
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_add_epi32(pl, ph));
            }
        }
#pragma GCC unroll 4
        for (int c = 0; c < nc; c++) {
            const block_q8_K *y = (const block_q8_K *)(a + (size_t)c * as) + i;
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(y->d * h2f(hd)), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < nc; c++) {
        __m128 m = _mm_add_ps(accm[c], _mm_movehl_ps(accm[c], accm[c]));
        m = _mm_add_ss(m, _mm_movehdup_ps(m));
        out[(size_t)c * ldo] = hsum8(acc[c]) + _mm_cvtss_f32(m);
    }
}

AVX2 static float dot_q4_k_avx2(int64_t n, const void *w, const void *a)
{
    float r;
    kq_dotn_avx2(n, w, a, 0, 1, &r, 0, 0);
    return r;
}

AVX2 static float dot_q5_k_avx2(int64_t n, const void *w, const void *a)
{
    float r;
    kq_dotn_avx2(n, w, a, 0, 1, &r, 0, 1);
    return r;
}

/* 32 levels (0..31, uint8) -> floats as d1 * (float)q - m1 (multiply, then subtract). */
AVX2 static inline void store_affine32(float *y, __m256i q, __m256 d1, __m256 m1)
{
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int k = 0; k < 4; k++) {
        const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(parts[k]));
        _mm256_storeu_ps(y + 8 * k, _mm256_sub_ps(_mm256_mul_ps(d1, f), m1));
    }
}

AVX2 static void dq_q4_k_avx2(const void *src, float *y, int64_t nb)
{
    const block_q4_K *x = src;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    for (int64_t i = 0; i < nb; i++) {
        const float d = h2f(x[i].d), dmin = h2f(x[i].dmin);
        for (int c = 0; c < 4; c++, y += 64) {
            uint8_t s0, m0, s1, m1;
            kq_scale_min(2 * c, x[i].scales, &s0, &m0);
            kq_scale_min(2 * c + 1, x[i].scales, &s1, &m1);
            const __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            store_affine32(y, _mm256_and_si256(bits, m4), _mm256_set1_ps(d * (float)s0),
                           _mm256_set1_ps(dmin * (float)m0));
            store_affine32(y + 32, _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4),
                           _mm256_set1_ps(d * (float)s1), _mm256_set1_ps(dmin * (float)m1));
        }
    }
}

AVX2 static void dq_q5_k_avx2(const void *src, float *y, int64_t nb)
{
    const block_q5_K *x = src;
    const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < nb; i++) {
        const float d = h2f(x[i].d), dmin = h2f(x[i].dmin);
        const __m256i hbits = _mm256_loadu_si256((const __m256i *)x[i].qh);
        for (int c = 0; c < 4; c++, y += 64) {
            uint8_t s0, m0, s1, m1;
            kq_scale_min(2 * c, x[i].scales, &s0, &m0);
            kq_scale_min(2 * c + 1, x[i].scales, &s1, &m1);
            const __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(hbits, _mm_cvtsi32_si128(2 * c)), one), 4);
            const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(hbits, _mm_cvtsi32_si128(2 * c + 1)), one), 4);
            store_affine32(y, _mm256_or_si256(_mm256_and_si256(bits, m4), h0),
                           _mm256_set1_ps(d * (float)s0), _mm256_set1_ps(dmin * (float)m0));
            store_affine32(y + 32, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m4), h1),
                           _mm256_set1_ps(d * (float)s1), _mm256_set1_ps(dmin * (float)m1));
        }
    }
}

/* ------------------------------------------------------------------ Q6_K */

/* The four 32-element quarters of one 128-element half of a Q6_K block, as levels 0..63. */
AVX2 static inline void q6k_quarters(const uint8_t *ql, const uint8_t *qh, __m256i q[4])
{
    const __m256i m4 = _mm256_set1_epi8(0xF), m2 = _mm256_set1_epi8(3);
    const __m256i b1 = _mm256_loadu_si256((const __m256i *)ql);
    const __m256i b2 = _mm256_loadu_si256((const __m256i *)(ql + 32));
    const __m256i h = _mm256_loadu_si256((const __m256i *)qh);
    const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(h, m2), 4);
    const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m2), 4);
    const __m256i h2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m2), 4);
    const __m256i h3 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m2), 4);
    q[0] = _mm256_or_si256(_mm256_and_si256(b1, m4), h0);
    q[1] = _mm256_or_si256(_mm256_and_si256(b2, m4), h1);
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b1, 4), m4), h2);
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b2, 4), m4), h3);
}

/* Byte shuffles that spread int16 scale 2k over lanes 0..7 and 2k+1 over lanes 8..15. */
static const uint8_t q6k_shuf[4][32] = {
    {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3},
    {4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7},
    {8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11},
    {12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15},
};

/* Q6_K against nc (1..KT2_C) columns, as kq_dotn_avx2. */
AVX2 static Q_ALWAYS_INLINE void q6k_dotn_avx2(int64_t n, const block_q6_K *x, const uint8_t *a,
                                               size_t as, const int nc, float *out, size_t ldo)
{
    __m256 acc[KT2_C];
#pragma GCC unroll 4
    for (int c = 0; c < nc; c++)
        acc[c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        PF(x + i, sizeof *x);
        const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[i].scales));
        __m256i sumi[KT2_C];
#pragma GCC unroll 4
        for (int c = 0; c < nc; c++)
            sumi[c] = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m256i q[4];
            q6k_quarters(x[i].ql + 64 * h, x[i].qh + 32 * h, q);
            const __m256i sch = h ? _mm256_permute2x128_si256(sc, sc, 0x11)
                                   : _mm256_permute2x128_si256(sc, sc, 0x00);
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                /* lanes 0..7: group 2k, lanes 8..15: group 2k+1 (of this half's 8) */
                const __m256i s = _mm256_shuffle_epi8(sch, _mm256_loadu_si256((const __m256i *)q6k_shuf[k]));
#pragma GCC unroll 4
                for (int c = 0; c < nc; c++) {
                    const int8_t *q8 = ((const block_q8_K *)(a + (size_t)c * as) + i)->qs + 128 * h + 32 * k;
                    const __m256i p = _mm256_maddubs_epi16(q[k], _mm256_loadu_si256((const __m256i *)q8));
                    sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(s, p));
                }
            }
        }
#pragma GCC unroll 4
        for (int c = 0; c < nc; c++) {
            const block_q8_K *y = (const block_q8_K *)(a + (size_t)c * as) + i;
            /* levels are q + 32: subtract 32 * sum_g sc_g * bsums_g */
            const __m256i corr = _mm256_slli_epi32(
                _mm256_madd_epi16(sc, _mm256_loadu_si256((const __m256i *)y->bsums)), 5);
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(y->d * h2f(x[i].d)),
                                     _mm256_cvtepi32_ps(_mm256_sub_epi32(sumi[c], corr)), acc[c]);
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < nc; c++)
        out[(size_t)c * ldo] = hsum8(acc[c]);
}

AVX2 static float dot_q6_k_avx2(int64_t n, const void *w, const void *a)
{
    float r;
    q6k_dotn_avx2(n, w, a, 0, 1, &r, 0);
    return r;
}

AVX2 static void dq_q6_k_avx2(const void *src, float *y, int64_t nb)
{
    const block_q6_K *x = src;
    const __m256i off = _mm256_set1_epi8(32);
    for (int64_t i = 0; i < nb; i++) {
        const float d = h2f(x[i].d);
        for (int h = 0; h < 2; h++, y += 128) {
            __m256i q[4];
            q6k_quarters(x[i].ql + 64 * h, x[i].qh + 32 * h, q);
            for (int k = 0; k < 4; k++) {
                const __m256i v = _mm256_sub_epi8(q[k], off);
                const __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
                const int g = 8 * h + 2 * k;
                const __m256 d0 = _mm256_set1_ps(d * (float)x[i].scales[g]);
                const __m256 d1 = _mm256_set1_ps(d * (float)x[i].scales[g + 1]);
                float *o = y + 32 * k;
                _mm256_storeu_ps(o, _mm256_mul_ps(d0, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo))));
                _mm256_storeu_ps(o + 8, _mm256_mul_ps(d0, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)))));
                _mm256_storeu_ps(o + 16, _mm256_mul_ps(d1, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi))));
                _mm256_storeu_ps(o + 24, _mm256_mul_ps(d1, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)))));
            }
        }
    }
}

/* ------------------------------------------------------------------ AVX-512 (BW) */

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))

/* int16 lane -> which of the 8 (Q4_K) or 16 (Q6_K) int16 scales it takes. */
static const uint16_t q4k_idx512[4][32] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2},
    {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6},
    {5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7},
};
static const uint16_t q6k_idx512[4][32] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7},
    {8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9, 10, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11},
    {12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13, 14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15},
};

/* kq_unpack in SIMD: bytes 0..7 = the 8 scales, 8..15 = the 8 mins. Reads 16 bytes from the
 * 12-byte field (the next field of the block follows it, so this stays inside the block). */
AVX2 static inline __m128i kq_unpack_simd(const uint8_t *s12)
{
    const __m128i v = _mm_loadu_si128((const __m128i *)s12);
    /* A: [b0..3 | b8..11 | b4..7 | b8..11], B: [. | b0..3 | . | b4..7] */
    const __m128i A = _mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const __m128i B = _mm_shuffle_epi8(v, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
    const __m128i lo = _mm_or_si128(
        _mm_and_si128(A, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0)),
        _mm_and_si128(_mm_srli_epi16(A, 4), _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15)));
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(B, 2), _mm_setr_epi8(0, 0, 0, 0, 0x30, 0x30, 0x30, 0x30, 0, 0,
                                                                         0, 0, 0x30, 0x30, 0x30, 0x30));
    return _mm_or_si128(lo, hi);
}

/* The 8 mins as 16 int16 lanes, each twice (lanes 2j, 2j+1 = min j), to pair with the bsums. */
AVX2 static inline __m256i kq_mins_x2(__m128i sm)
{
    return _mm256_cvtepu8_epi16(
        _mm_shuffle_epi8(sm, _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15)));
}
/* Block i of a Q4_K/Q5_K row against nc columns of Q8_K at a (column stride as): the block's
 * values of sub-blocks (0, 1), (2, 3), (4, 5), (6, 7) in l0, h0, l1, h1 (64 bytes each), their
 * scales spread per 32 in s0..s3, its mins as kq_mins_x2 gives them; acc[c] += the scaled
 * products, accm[c] += the min terms. */
AVX512 static Q_ALWAYS_INLINE void kq_block_cols_avx512(const uint8_t *a, size_t as, int64_t i,
                                                        int nc, float xd, float xdmin,
                                                        __m256i mins, __m512i l0, __m512i h0,
                                                        __m512i l1, __m512i h1, __m512i s0,
                                                        __m512i s1, __m512i s2, __m512i s3,
                                                        __m512 *acc, __m256 *accm)
{
#pragma GCC unroll 4
    for (int c = 0; c < nc; c++) {
        const block_q8_K *y = (const block_q8_K *)(a + (size_t)c * as) + i;
        const float d = y->d * xd, dmin = -y->d * xdmin;
        const __m256i md = _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)y->bsums));
        accm[c] = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(md), accm[c]);
        const __m512i a0 = _mm512_loadu_si512(y->qs), a1 = _mm512_loadu_si512(y->qs + 64);
        const __m512i a2 = _mm512_loadu_si512(y->qs + 128), a3 = _mm512_loadu_si512(y->qs + 192);
        const __m512i p0 = _mm512_madd_epi16(s0, _mm512_maddubs_epi16(l0, _mm512_shuffle_i64x2(a0, a1, 0x44)));
        const __m512i p1 = _mm512_madd_epi16(s1, _mm512_maddubs_epi16(h0, _mm512_shuffle_i64x2(a0, a1, 0xEE)));
        const __m512i p2 = _mm512_madd_epi16(s2, _mm512_maddubs_epi16(l1, _mm512_shuffle_i64x2(a2, a3, 0x44)));
        const __m512i p3 = _mm512_madd_epi16(s3, _mm512_maddubs_epi16(h1, _mm512_shuffle_i64x2(a2, a3, 0xEE)));
        const __m512i sumi = _mm512_add_epi32(_mm512_add_epi32(p0, p1), _mm512_add_epi32(p2, p3));
        acc[c] = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc[c]);
    }
}

/* Q4_K against nc (1..4) activation rows at once: each weight block is decoded once and
 * used for every column, so a prompt batch costs one pass over the weights per 4 columns.
 * 64 weight bytes cover sub-blocks 2c..2c+3 of two 64-element chunks: the low nibbles give
 * sub-blocks 2c and 2c+2, the high ones 2c+1 and 2c+3. Every column gets exactly the same
 * operations as a single dot product, so batch and single results are identical. */
AVX512 static Q_ALWAYS_INLINE void q4k_dotn_avx512(int64_t n, const block_q4_K *x, const uint8_t *a,
                                                   size_t as, const int nc, float *out, size_t ldo)
{
    const __m512i m4 = _mm512_set1_epi8(0xF);
    const __m512i i0 = _mm512_loadu_si512(q4k_idx512[0]), i1 = _mm512_loadu_si512(q4k_idx512[1]);
    const __m512i i2 = _mm512_loadu_si512(q4k_idx512[2]), i3 = _mm512_loadu_si512(q4k_idx512[3]);
    __m512 acc[4];
    __m256 accm[4];
#pragma GCC unroll 4
    for (int c = 0; c < nc; c++) {
        acc[c] = _mm512_setzero_ps();
        accm[c] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < n / QK_K; i++) {
        PF(x + i, sizeof *x);
        const float xd = h2f(x[i].d), xdmin = h2f(x[i].dmin);
        const __m128i sm = kq_unpack_simd(x[i].scales);
        const __m512i sc = _mm512_castsi128_si512(_mm_cvtepu8_epi16(sm));
        const __m256i mins = kq_mins_x2(sm);
        const __m512i w0 = _mm512_loadu_si512(x[i].qs), w1 = _mm512_loadu_si512(x[i].qs + 64);
        const __m512i l0 = _mm512_and_si512(w0, m4), h0 = _mm512_and_si512(_mm512_srli_epi16(w0, 4), m4);
        const __m512i l1 = _mm512_and_si512(w1, m4), h1 = _mm512_and_si512(_mm512_srli_epi16(w1, 4), m4);
        const __m512i s0 = _mm512_permutexvar_epi16(i0, sc), s1 = _mm512_permutexvar_epi16(i1, sc);
        const __m512i s2 = _mm512_permutexvar_epi16(i2, sc), s3 = _mm512_permutexvar_epi16(i3, sc);
        kq_block_cols_avx512(a, as, i, nc, xd, xdmin, mins, l0, h0, l1, h1, s0, s1, s2, s3, acc,
                             accm);
    }
#pragma GCC unroll 4
    for (int c = 0; c < nc; c++)
        out[(size_t)c * ldo] = _mm512_reduce_add_ps(acc[c]) + hsum8(accm[c]);
}

AVX512 static float dot_q4_k_avx512(int64_t n, const void *w, const void *a)
{
    float r;
    q4k_dotn_avx512(n, w, a, 0, 1, &r, 0);
    return r;
}

/* A Q6_K block's 256 levels (0..63) as four 64-byte vectors: per 128-element half, the 64 ql
 * bytes with the matching 2-bit pairs of qh give elements 0..63 (low nibbles) and 64..127
 * (high nibbles), in order. */
AVX512 static Q_ALWAYS_INLINE void q6k_levels(const block_q6_K *x, __m512i q[4])
{
    const __m512i m4 = _mm512_set1_epi8(0xF), m2 = _mm512_set1_epi8(3);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m512i b = _mm512_loadu_si512(x->ql + 64 * h);
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(x->qh + 32 * h));
        const __m512i hh = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
        q[2 * h] = _mm512_or_si512(_mm512_and_si512(b, m4), _mm512_slli_epi16(_mm512_and_si512(hh, m2), 4));
        q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(b, 4), m4),
                                       _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hh, 4), m2), 4));
    }
}

/* Q6_K, nc columns at once (as above; the levels as q6k_levels gives them). */
AVX512 static Q_ALWAYS_INLINE void q6k_dotn_avx512(int64_t n, const block_q6_K *x, const uint8_t *a,
                                                   size_t as, const int nc, float *out, size_t ldo)
{
    const __m512i i0 = _mm512_loadu_si512(q6k_idx512[0]), i1 = _mm512_loadu_si512(q6k_idx512[1]);
    const __m512i i2 = _mm512_loadu_si512(q6k_idx512[2]), i3 = _mm512_loadu_si512(q6k_idx512[3]);
    __m512 acc[4];
#pragma GCC unroll 4
    for (int c = 0; c < nc; c++)
        acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        PF(x + i, sizeof *x);
        const float xd = h2f(x[i].d);
        const __m256i sc256 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[i].scales));
        const __m512i sc = _mm512_castsi256_si512(sc256);
        __m512i q[4];
        q6k_levels(x + i, q);
        const __m512i s0 = _mm512_permutexvar_epi16(i0, sc), s1 = _mm512_permutexvar_epi16(i1, sc);
        const __m512i s2 = _mm512_permutexvar_epi16(i2, sc), s3 = _mm512_permutexvar_epi16(i3, sc);
#pragma GCC unroll 4
        for (int c = 0; c < nc; c++) {
            const block_q8_K *y = (const block_q8_K *)(a + (size_t)c * as) + i;
            /* levels are q + 32: subtract 32 * sum_g sc_g * bsums_g */
            const __m256i corr = _mm256_slli_epi32(
                _mm256_madd_epi16(sc256, _mm256_loadu_si256((const __m256i *)y->bsums)), 5);
            __m512i sumi = _mm512_zextsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(), corr));
            const __m512i p0 = _mm512_madd_epi16(s0, _mm512_maddubs_epi16(q[0], _mm512_loadu_si512(y->qs)));
            const __m512i p1 = _mm512_madd_epi16(s1, _mm512_maddubs_epi16(q[1], _mm512_loadu_si512(y->qs + 64)));
            const __m512i p2 = _mm512_madd_epi16(s2, _mm512_maddubs_epi16(q[2], _mm512_loadu_si512(y->qs + 128)));
            const __m512i p3 = _mm512_madd_epi16(s3, _mm512_maddubs_epi16(q[3], _mm512_loadu_si512(y->qs + 192)));
            sumi = _mm512_add_epi32(sumi, _mm512_add_epi32(_mm512_add_epi32(p0, p1), _mm512_add_epi32(p2, p3)));
            acc[c] = _mm512_fmadd_ps(_mm512_set1_ps(y->d * xd), _mm512_cvtepi32_ps(sumi), acc[c]);
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < nc; c++)
        out[(size_t)c * ldo] = _mm512_reduce_add_ps(acc[c]);
}

AVX512 static float dot_q6_k_avx512(int64_t n, const void *w, const void *a)
{
    float r;
    q6k_dotn_avx512(n, w, a, 0, 1, &r, 0);
    return r;
}

/* Q5_K's fifth bits into a block's four nibble planes (l0, h0: the first 64 qs bytes' low and
 * high nibbles; l1, h1: the next 64's), bit 4 of each level. */
AVX512 static Q_ALWAYS_INLINE void q5k_fifth_bits(const uint8_t *qh32, __m512i *l0, __m512i *h0,
                                                  __m512i *l1, __m512i *h1)
{
    const __m512i one = _mm512_set1_epi8(1);
    const __m256i qh = _mm256_loadu_si256((const __m256i *)qh32);
    const __m512i hb = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
    *l0 = _mm512_or_si512(*l0, _mm512_slli_epi16(_mm512_and_si512(hb, one), 4));
    *h0 = _mm512_or_si512(*h0, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hb, 1), one), 4));
    *l1 = _mm512_or_si512(*l1, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hb, 4), one), 4));
    *h1 = _mm512_or_si512(*h1, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hb, 5), one), 4));
}

/* Q5_K, nc columns at once: as Q4_K, plus the fifth bit of sub-block j from bit j of qh. */
AVX512 static Q_ALWAYS_INLINE void q5k_dotn_avx512(int64_t n, const block_q5_K *x, const uint8_t *a,
                                                   size_t as, const int nc, float *out, size_t ldo)
{
    const __m512i m4 = _mm512_set1_epi8(0xF);
    const __m512i i0 = _mm512_loadu_si512(q4k_idx512[0]), i1 = _mm512_loadu_si512(q4k_idx512[1]);
    const __m512i i2 = _mm512_loadu_si512(q4k_idx512[2]), i3 = _mm512_loadu_si512(q4k_idx512[3]);
    __m512 acc[4];
    __m256 accm[4];
#pragma GCC unroll 4
    for (int c = 0; c < nc; c++) {
        acc[c] = _mm512_setzero_ps();
        accm[c] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < n / QK_K; i++) {
        PF(x + i, sizeof *x);
        const float xd = h2f(x[i].d), xdmin = h2f(x[i].dmin);
        const __m128i sm = kq_unpack_simd(x[i].scales);
        const __m512i sc = _mm512_castsi128_si512(_mm_cvtepu8_epi16(sm));
        const __m256i mins = kq_mins_x2(sm);
        const __m512i w0 = _mm512_loadu_si512(x[i].qs), w1 = _mm512_loadu_si512(x[i].qs + 64);
        __m512i l0 = _mm512_and_si512(w0, m4), h0 = _mm512_and_si512(_mm512_srli_epi16(w0, 4), m4);
        __m512i l1 = _mm512_and_si512(w1, m4), h1 = _mm512_and_si512(_mm512_srli_epi16(w1, 4), m4);
        q5k_fifth_bits(x[i].qh, &l0, &h0, &l1, &h1);
        const __m512i s0 = _mm512_permutexvar_epi16(i0, sc), s1 = _mm512_permutexvar_epi16(i1, sc);
        const __m512i s2 = _mm512_permutexvar_epi16(i2, sc), s3 = _mm512_permutexvar_epi16(i3, sc);
        kq_block_cols_avx512(a, as, i, nc, xd, xdmin, mins, l0, h0, l1, h1, s0, s1, s2, s3, acc,
                             accm);
    }
#pragma GCC unroll 4
    for (int c = 0; c < nc; c++)
        out[(size_t)c * ldo] = _mm512_reduce_add_ps(acc[c]) + hsum8(accm[c]);
}

AVX512 static float dot_q5_k_avx512(int64_t n, const void *w, const void *a)
{
    float r;
    q5k_dotn_avx512(n, w, a, 0, 1, &r, 0);
    return r;
}

/* Q8_K activations as act_q8_k converts them: the value of largest magnitude (the first one on
 * a tie) sets iscale = -127 / max, q = min(127, round-half-even(iscale x)), d = 1 / iscale,
 * and the sums of each 16. The rounding instruction under the default rounding mode is ggml's
 * nearest_int for these magnitudes, so the bytes are the reference's. */
/* act_q8_0_avx2 over 16 lanes: the same bytes. */
AVX512 static void act_q8_0_avx512(const float *x, void *dst, int64_t n)
{
    block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        const __m512 a = _mm512_loadu_ps(x), b = _mm512_loadu_ps(x + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
        const __m512 id = _mm512_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
        _mm_storeu_si128((__m128i *)y[i].qs, _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(a, id))));
        _mm_storeu_si128((__m128i *)(y[i].qs + 16), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(b, id))));
        y[i].d = f32_to_fp16(amax / 127.f);
    }
}

AVX512 static void act_q8_k_avx512(const float *x, void *dst, int64_t n)
{
    block_q8_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        __m512 am = _mm512_setzero_ps();
        for (int v = 0; v < 16; v++)
            am = _mm512_max_ps(am, _mm512_abs_ps(_mm512_loadu_ps(x + 16 * v)));
        const float amax = _mm512_reduce_max_ps(am);
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float max = 0;
        for (int v = 0; v < 16; v++) {
            const __mmask16 m = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + 16 * v)),
                                                   _mm512_set1_ps(amax), _CMP_EQ_OQ);
            if (m) {
                max = x[16 * v + __builtin_ctz(m)];
                break;
            }
        }
        const float iscale = -127.f / max;
        for (int v = 0; v < 16; v++) {
            __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_set1_ps(iscale), _mm512_loadu_ps(x + 16 * v)));
            q = _mm512_min_epi32(q, _mm512_set1_epi32(127));
            _mm_storeu_si128((__m128i *)(y[i].qs + 16 * v), _mm512_cvtepi32_epi8(q));
            y[i].bsums[v] = (int16_t)_mm512_reduce_add_epi32(q);
        }
        y[i].d = 1 / iscale;
    }
}

/* Q8_0 (and Q4_0 through the same core), nc columns at once, two 32-blocks per 512-bit vector:
 * |w| times the activation with w's sign (exact in 8 bits x 8 bits), pairs summed. */
AVX512 static inline __m512i two_blocks(const int8_t *p0, const int8_t *p1)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)p0)),
                              _mm256_loadu_si256((const __m256i *)p1), 1);
}

AVX512 static inline __m512 two_scales(uint16_t h0, uint16_t h1)
{
    return _mm512_insertf32x8(_mm512_set1_ps(h2f(h0)), _mm256_set1_ps(h2f(h1)), 1);
}

AVX512 static Q_ALWAYS_INLINE void q8_0_core(__m512i wv, __m512 dw, const block_q8_0 *y0,
                                             const block_q8_0 *y1, __m512 *acc)
{
    const __m512i aw = _mm512_abs_epi8(wv);
    const __mmask64 neg = _mm512_movepi8_mask(wv);
    const __m512i yv = two_blocks(y0->qs, y1->qs);
    const __m512i sy = _mm512_mask_sub_epi8(yv, neg, _mm512_setzero_si512(), yv);
    const __m512i p = _mm512_madd_epi16(_mm512_maddubs_epi16(aw, sy), _mm512_set1_epi16(1));
    *acc = _mm512_fmadd_ps(_mm512_mul_ps(dw, two_scales(y0->d, y1->d)), _mm512_cvtepi32_ps(p), *acc);
}

/* One pair of weight blocks of row wr (Q4_0 when q4, else Q8_0; the last one alone when tail,
 * the upper half zero): the signed levels and the two scales spread per lane. */
AVX512 static Q_ALWAYS_INLINE void w32_pair(const uint8_t *wr, int64_t i, const int q4, const int tail,
                                            __m512i *w, __m512 *dw)
{
    uint16_t d0, d1;
    if (q4) {
        const __m512i off = _mm512_set1_epi8(8);
        const block_q4_0 *x = (const block_q4_0 *)wr + i;
        PF(x, 2 * sizeof *x);
        *w = tail ? _mm512_maskz_mov_epi8(0xffffffffull,
                                          _mm512_sub_epi8(_mm512_castsi256_si512(nibbles32(x[0].qs)), off))
                  : _mm512_sub_epi8(_mm512_inserti64x4(_mm512_castsi256_si512(nibbles32(x[0].qs)),
                                                       nibbles32(x[1].qs), 1), off);
        d0 = x[0].d, d1 = tail ? 0 : x[1].d;
    } else {
        const block_q8_0 *x = (const block_q8_0 *)wr + i;
        PF(x, 2 * sizeof *x);
        *w = tail ? _mm512_maskz_mov_epi8(0xffffffffull, two_blocks(x[0].qs, x[0].qs))
                  : two_blocks(x[0].qs, x[1].qs);
        d0 = x[0].d, d1 = tail ? 0 : x[1].d;
    }
    *dw = two_scales(d0, d1);
}

/* A Q8_0 (or, q4, Q4_0) row against nc (<= 4) Q8_0 activation columns, two blocks a step; an
 * odd last block goes against itself with its upper half masked off. */
AVX512 static Q_ALWAYS_INLINE void b32_dotn_avx512(int64_t n, const uint8_t *wr, const int q4, const uint8_t *a,
                                                   size_t as, const int nc, float *out, size_t ldo)
{
    const int64_t nb = n / QK8_0;
    __m512 acc[4];
#pragma GCC unroll 4
    for (int c = 0; c < nc; c++)
        acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i += 2) {
        const int tail = i + 2 > nb;
        __m512i wv;
        __m512 dw;
        w32_pair(wr, i, q4, tail, &wv, &dw);
#pragma GCC unroll 4
        for (int c = 0; c < nc; c++) {
            const block_q8_0 *y = (const block_q8_0 *)(a + (size_t)c * as) + i;
            q8_0_core(wv, dw, y, y + !tail, &acc[c]);
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < nc; c++)
        out[(size_t)c * ldo] = _mm512_reduce_add_ps(acc[c]);
}

AVX512 static Q_ALWAYS_INLINE void q8_0_dotn_avx512(int64_t n, const void *w, const uint8_t *a, size_t as,
                                                    const int nc, float *out, size_t ldo)
{
    b32_dotn_avx512(n, w, 0, a, as, nc, out, ldo);
}

AVX512 static Q_ALWAYS_INLINE void q4_0_dotn_avx512(int64_t n, const void *w, const uint8_t *a, size_t as,
                                                    const int nc, float *out, size_t ldo)
{
    b32_dotn_avx512(n, w, 1, a, as, nc, out, ldo);
}

AVX512 static float dot_q8_0_avx512(int64_t n, const void *w, const void *a)
{
    float r;
    q8_0_dotn_avx512(n, w, a, 0, 1, &r, 0);
    return r;
}

AVX512 static float dot_q4_0_avx512(int64_t n, const void *w, const void *a)
{
    float r;
    q4_0_dotn_avx512(n, w, a, 0, 1, &r, 0);
    return r;
}

/* Tiles: each weight row against the columns in groups of 4 (constant counts, so the column
 * loops unroll). */
#define DEFINE_TILE(name, attr, dotn, wtype)                                                       \
    attr static void name(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as,   \
                          int nc, float *y, size_t ldy)                                            \
    {                                                                                              \
        for (int r = 0; r < nr; r++) {                                                             \
            const wtype *wr = (const wtype *)((const uint8_t *)w + (size_t)r * ws);                 \
            int c = 0;                                                                             \
            for (; c + 4 <= nc; c += 4)                                                            \
                dotn(n, wr, (const uint8_t *)a + (size_t)c * as, as, 4, y + (size_t)c * ldy + r, ldy); \
            const uint8_t *ac = (const uint8_t *)a + (size_t)c * as;                               \
            float *yc = y + (size_t)c * ldy + r;                                                   \
            switch (nc - c) {                                                                      \
            case 3: dotn(n, wr, ac, as, 3, yc, ldy); break;                                        \
            case 2: dotn(n, wr, ac, as, 2, yc, ldy); break;                                        \
            case 1: dotn(n, wr, ac, as, 1, yc, ldy); break;                                        \
            default: break;                                                                        \
            }                                                                                      \
        }                                                                                          \
    }
DEFINE_TILE(tile_q4_k_avx512, AVX512, q4k_dotn_avx512, block_q4_K)
DEFINE_TILE(tile_q6_k_avx512, AVX512, q6k_dotn_avx512, block_q6_K)
DEFINE_TILE(tile_q5_k_avx512, AVX512, q5k_dotn_avx512, block_q5_K)
DEFINE_TILE(tile_q8_0_avx512, AVX512, q8_0_dotn_avx512, block_q8_0)
DEFINE_TILE(tile_q4_0_avx512, AVX512, q4_0_dotn_avx512, block_q4_0)

/* F16 / BF16 weights against F16 / BF16 activation columns, R rows by C columns at a time,
 * each weight and activation vector converted once for the C or R products it takes part in.
 * Per (row, column) the sums are dot_f16_avx2's (dot_bf16_avx2's): its four 8-lane
 * accumulators over elements 32i + 8j are the halves of two 16-lane ones, added back in its
 * order, and the same scalar tail, so each result is the dot product's bit for bit. */
AVX512 static Q_ALWAYS_INLINE __m512 ld16_h(const uint16_t *p, const int bf)
{
    const __m256i v = _mm256_loadu_si256((const __m256i *)p);
    return bf ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16)) : _mm512_cvtph_ps(v);
}

AVX512 static Q_ALWAYS_INLINE void h16_block(int64_t n, const uint8_t *w, size_t ws, const uint8_t *a, size_t as,
                                             float *y, size_t ldy, const int R, const int C, const int bf)
{
    __m512 acc[4][3][2];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 3
        for (int c = 0; c < C; c++)
            acc[r][c][0] = acc[r][c][1] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m512 wv[4], av[3];
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const uint16_t *x = (const uint16_t *)(w + (size_t)r * ws) + i + 16 * h;
                PF(x, 64);
                wv[r] = ld16_h(x, bf);
            }
#pragma GCC unroll 3
            for (int c = 0; c < C; c++)
                av[c] = ld16_h((const uint16_t *)(a + (size_t)c * as) + i + 16 * h, bf);
#pragma GCC unroll 4
            for (int r = 0; r < R; r++)
#pragma GCC unroll 3
                for (int c = 0; c < C; c++)
                    acc[r][c][h] = _mm512_fmadd_ps(wv[r], av[c], acc[r][c][h]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 3
        for (int c = 0; c < C; c++) {
            const __m512 s01 = acc[r][c][0], s23 = acc[r][c][1];
            float s = hsum8(_mm256_add_ps(_mm256_add_ps(_mm512_castps512_ps256(s01), _mm512_extractf32x8_ps(s01, 1)),
                                          _mm256_add_ps(_mm512_castps512_ps256(s23), _mm512_extractf32x8_ps(s23, 1))));
            const uint16_t *x = (const uint16_t *)(w + (size_t)r * ws), *v = (const uint16_t *)(a + (size_t)c * as);
            for (int64_t j = i; j < n; j++)
                s += bf ? bf16_to_f32(x[j]) * bf16_to_f32(v[j]) : h2f(x[j]) * h2f(v[j]);
            y[(size_t)c * ldy + r] = s;
        }
}

/* nr rows in blocks of 4, nc columns in blocks of 3; a single column (decode) a row at a time
 * (BF16: through the AVX2 dot product, which streams faster there). */
AVX512 static Q_ALWAYS_INLINE void h16_tile(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as,
                                            int nc, float *y, size_t ldy, const int bf)
{
    if (nc == 1) {
        for (int r = 0; r < nr; r++) {
            const uint8_t *wr = (const uint8_t *)w + (size_t)r * ws;
            if (bf)
                y[r] = dot_bf16_avx2(n, wr, a);
            else
                h16_block(n, wr, ws, a, as, y + r, ldy, 1, 1, 0);
        }
        return;
    }
    for (int r = 0; r < nr; r += 4) {
        const uint8_t *wr = (const uint8_t *)w + (size_t)r * ws;
        const int rr = nr - r < 4 ? nr - r : 4;
        for (int c = 0; c < nc; c += 3) {
            const uint8_t *ac = (const uint8_t *)a + (size_t)c * as;
            float *yc = y + (size_t)c * ldy + r;
            const int cc = nc - c < 3 ? nc - c : 3;
#define H16_CASE(R, C)                                                                             \
    case 3 * (R - 1) + C - 1:                                                                      \
        h16_block(n, wr, ws, ac, as, yc, ldy, R, C, bf);                                           \
        break;
            switch (3 * (rr - 1) + cc - 1) {
                H16_CASE(1, 1) H16_CASE(1, 2) H16_CASE(1, 3)
                H16_CASE(2, 1) H16_CASE(2, 2) H16_CASE(2, 3)
                H16_CASE(3, 1) H16_CASE(3, 2) H16_CASE(3, 3)
                H16_CASE(4, 1) H16_CASE(4, 2) H16_CASE(4, 3)
            default: break;
            }
#undef H16_CASE
        }
    }
}

AVX512 static void tile_f16_avx512(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nc,
                                   float *y, size_t ldy)
{
    h16_tile(n, w, ws, nr, a, as, nc, y, ldy, 0);
}

AVX512 static void tile_bf16_avx512(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nc,
                                    float *y, size_t ldy)
{
    h16_tile(n, w, ws, nr, a, as, nc, y, ldy, 1);
}

/* ------------------------------------------------------------------ prompt tiles with VNNI */

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))

/* Prompt batches of Q8_0 / Q4_0 weights: activations converted as act_q8_0 converts them, laid
 * out per pair of blocks as 64 bytes of q + 128 (unsigned) and 16 floats (each block's scale
 * 8 times): one aligned vector each, where the Q8_0 layout needs two loads, an insert and a
 * sign fix-up per weight row. An odd last block is padded with a zero block (q + 128 = 128,
 * scale 0). */
struct pact_q8_0x2 {
    uint8_t u[64];
    float d[16];
};

static size_t pact_q8_0_bytes(int64_t n) { return (size_t)((n / QK8_0 + 1) / 2) * sizeof(struct pact_q8_0x2); }

static void pact_q8_0(const float *x, void *dst, int64_t n)
{
    const int64_t nb = n / QK8_0;
    struct pact_q8_0x2 *p = dst;
    for (int64_t i = 0; i < nb; i += 2) {
        block_q8_0 b[2];
        memset(b, 0, sizeof b);
        act_q8_0_avx2(x + i * QK8_0, b, i + 1 < nb ? 2 * QK8_0 : QK8_0);
        struct pact_q8_0x2 *o = &p[i / 2];
        for (int h = 0; h < 2; h++) {
            const float d = h == 1 && i + 1 >= nb ? 0.0f : fp16_to_f32(b[h].d);
            for (int j = 0; j < QK8_0; j++) {
                o->u[32 * h + j] = (uint8_t)(b[h].qs[j] + 128);
                o->d[8 * h + j / 4] = d;
            }
        }
    }
}

/* One pair of weight blocks of row wr (Q4_0 when q4, else Q8_0; the last one alone when tail):
 * the signed levels, -128 x their sums in groups of 4 (what the +128 of the activations adds),
 * the two scales spread per lane. */
VNNI static Q_ALWAYS_INLINE void b32_pair(const uint8_t *wr, int64_t i, const int q4, const int tail,
                                          __m512i *w, __m512i *nc, __m512 *dw)
{
    w32_pair(wr, i, q4, tail, w, dw);
    *nc = _mm512_sub_epi32(_mm512_setzero_si512(),
                           _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8((char)0x80), *w));
}

/* The dot product of unsigned levels u with the activation bytes a, less k times the sum of a
 * (k: the levels' offset, in every byte): the signed levels' integer dot in groups of 4. */
VNNI static inline __m256i udot_off(__m256i u, __m256i a, __m256i k)
{
    const __m256i z = _mm256_setzero_si256();
    return _mm256_sub_epi32(_mm256_dpbusd_epi32(z, u, a), _mm256_dpbusd_epi32(z, k, a));
}

/* _mm512_reduce_add_ps of the vector whose low half is lo and high half hi, in its order
 * (halves, then quarters, then pairs), from two 256-bit halves. */
VNNI static inline float reduce16_ps(__m256 lo, __m256 hi)
{
    const __m256 t3 = _mm256_add_ps(hi, lo);
    const __m128 t6 = _mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
    const __m128 t8 = _mm_add_ps(t6, _mm_shuffle_ps(t6, t6, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm_cvtss_f32(t8) + _mm_cvtss_f32(_mm_shuffle_ps(t8, t8, _MM_SHUFFLE(1, 1, 1, 1)));
}

/* Q4_0 with VNNI, a row against nc (<= 4) Q8_0 columns: the nibbles stay unsigned, vpdpbusd
 * takes their products with the activation and a second one 8 times the activation's sum,
 * which is subtracted. These are the integers q8_0_core makes from the signed levels, and each
 * block is scaled and added into the lanes b32_dotn_avx512 adds it into (even blocks the low
 * half, odd ones the high half, reduced as it reduces), so the result is the AVX-512 tile's
 * and dot product's bit for bit (test_quant b32_dot_levels_agree), with no inserts and no
 * scale vectors to build. */
VNNI static Q_ALWAYS_INLINE void q4_0_dot_block(int64_t i, const block_q4_0 *x, const uint8_t *a, size_t as,
                                                const int nc, __m256 *acc)
{
    const __m256i k8 = _mm256_set1_epi8(8);
    PF(x + i, sizeof *x);
    const __m256i u = nibbles32(x[i].qs);
    const float dw = h2f(x[i].d);
#pragma GCC unroll 4
    for (int c = 0; c < nc; c++) {
        const block_q8_0 *y = (const block_q8_0 *)(a + (size_t)c * as) + i;
        const __m256i av = _mm256_loadu_si256((const __m256i *)y->qs);
        const __m256i p = udot_off(u, av, k8);
        acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dw * h2f(y->d)), _mm256_cvtepi32_ps(p), acc[c]);
    }
}
/* (the blocks in pairs, each block's accumulators known where it is compiled: see
 * b32_rows_vnni) */
VNNI static Q_ALWAYS_INLINE void q4_0_dotn_vnni(int64_t n, const void *w, const uint8_t *a, size_t as,
                                                const int nc, float *out, size_t ldo)
{
    const int64_t nb = n / QK8_0;
    const block_q4_0 *x = w;
    __m256 acc[2][4];
#pragma GCC unroll 4
    for (int c = 0; c < nc; c++)
        acc[0][c] = acc[1][c] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        q4_0_dot_block(i, x, a, as, nc, acc[0]);
        q4_0_dot_block(i + 1, x, a, as, nc, acc[1]);
    }
    if (i < nb)
        q4_0_dot_block(i, x, a, as, nc, acc[0]);
#pragma GCC unroll 4
    for (int c = 0; c < nc; c++)
        out[(size_t)c * ldo] = reduce16_ps(acc[0][c], acc[1][c]);
}

VNNI static float dot_q4_0_vnni(int64_t n, const void *w, const void *a)
{
    float r;
    q4_0_dotn_vnni(n, w, a, 0, 1, &r, 0);
    return r;
}

DEFINE_TILE(tile_q4_0_vnni, VNNI, q4_0_dotn_vnni, block_q4_0)

/* Q5_0 with VNNI: the levels as unsigned bytes (the fifth bit adds 16 under a mask), their
 * products with the activation by vpdpbusd, less 16 times the activation's sum: the same
 * integer as the signed levels' dot, so the same result as dot_q5_0_avx2. */
VNNI static float dot_q5_0_vnni(int64_t n, const void *w, const void *a)
{
    const block_q5_0 *x = w;
    const block_q8_0 *y = a;
    const __m256i k16 = _mm256_set1_epi8(16);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK8_0; i++) {
        PF(x + i, sizeof *x);
        uint32_t qh;
        memcpy(&qh, x[i].qh, 4);
        const __m256i nib = nibbles32(x[i].qs);
        const __m256i u = _mm256_mask_add_epi8(nib, (__mmask32)qh, nib, k16);
        const __m256i av = _mm256_loadu_si256((const __m256i *)y[i].qs);
        const __m256i p = udot_off(u, av, k16);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d)), _mm256_cvtepi32_ps(p), acc);
    }
    return hsum8(acc);
}

/* Decode (one column) of Q8_0 weights with VNNI, R (<= 2: the scales of R rows' two blocks
 * are packed into 64 bits) rows at a time: the pair of
 * activation blocks, their scales and the offset term (128 times their sums, by vpdpbusd) are
 * loaded and computed once for the R rows; per row the levels go unsigned (+128) into one
 * vpdpbusd. The integers per lane are q8_0_core's, the scales and the order of the additions
 * b32_dotn_avx512's, so the results are the AVX-512 tile's and dot product's bit for bit. */
VNNI static Q_ALWAYS_INLINE void q8_0_rows_vnni(int64_t n, const uint8_t *w, size_t ws, const int R, const void *a,
                                                float *y)
{
    const int64_t nb = n / QK8_0;
    const block_q8_0 *ya = a;
    const __m512i k = _mm512_set1_epi8((char)0x80), z = _mm512_setzero_si512();
    __m512 acc[2];
#pragma GCC unroll 2
    for (int r = 0; r < R; r++)
        acc[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i += 2) {
        const int tail = i + 2 > nb;
        const __m512i yv = two_blocks(ya[i].qs, ya[i + !tail].qs);
        /* each row's vpdpbusd starts from minus the offset term: the same integers as the
         * product less the term */
        const __m512i noff = _mm512_sub_epi32(z, _mm512_dpbusd_epi32(z, k, yv));
        /* the scale products dw dy of the rows' two blocks (lane 2 r + b: row r, block i + b;
         * a tail's second block 0), converted and multiplied in one vector, each rounded as
         * the lane-wise product of the spread scales would be */
        uint64_t dbits = 0; /* (packed in a scalar: a lane index must be a constant) */
#pragma GCC unroll 2
        for (int r = 0; r < R; r++) {
            const block_q8_0 *x = (const block_q8_0 *)(w + (size_t)r * ws) + i;
            dbits |= (uint64_t)x[0].d << (32 * r);
            if (!tail)
                dbits |= (uint64_t)x[1].d << (32 * r + 16);
        }
        const __m128i dh = _mm_cvtsi64_si128((long long)dbits);
        const __m128i yh = _mm_cvtsi32_si128((int)((uint32_t)ya[i].d | (uint32_t)ya[i + !tail].d << 16));
        const __m128 dy2 = _mm_cvtph_ps(yh);
        const __m128 sc = _mm_mul_ps(_mm_cvtph_ps(dh), _mm_movelh_ps(dy2, dy2));
#pragma GCC unroll 2
        for (int r = 0; r < R; r++) {
            const block_q8_0 *x = (const block_q8_0 *)(w + (size_t)r * ws) + i;
            PFR(x, 2 * sizeof *x, ws, R);
            const __m512i wv = tail ? _mm512_maskz_mov_epi8(0xffffffffull, two_blocks(x[0].qs, x[0].qs))
                                    : two_blocks(x[0].qs, x[1].qs);
            const __m512 s16 = _mm512_permutexvar_ps(
                _mm512_inserti64x4(_mm512_set1_epi32(2 * r), _mm256_set1_epi32(2 * r + 1), 1),
                _mm512_castps128_ps512(sc));
            const __m512i p = _mm512_dpbusd_epi32(noff, _mm512_xor_si512(wv, k), yv);
            acc[r] = _mm512_fmadd_ps(s16, _mm512_cvtepi32_ps(p), acc[r]);
        }
    }
#pragma GCC unroll 2
    for (int r = 0; r < R; r++)
        y[r] = _mm512_reduce_add_ps(acc[r]);
}

/* Decode (one column) of Q4_K (q5: Q5_K) weights with VNNI, R (<= 2) rows at a time: the
 * activation's four 64-byte loads, their arrangement to the nibbles' order and its sums are
 * done once for the R rows, and each row's four scaled sub-block products go into one
 * vpdpwssd chain. The integers (exact in int32) and every float step are q4k_dotn_avx512's
 * (q5k_dotn_avx512's), so the results are theirs bit for bit. */
VNNI static Q_ALWAYS_INLINE void kq_rows_vnni(int64_t n, const uint8_t *w, size_t ws, const int R,
                                              const void *a, float *y, const int q5)
{
    const block_q8_K *ya = a;
    const __m512i m4 = _mm512_set1_epi8(0xF), z = _mm512_setzero_si512();
    const __m512i i0 = _mm512_loadu_si512(q4k_idx512[0]), i1 = _mm512_loadu_si512(q4k_idx512[1]);
    const __m512i i2 = _mm512_loadu_si512(q4k_idx512[2]), i3 = _mm512_loadu_si512(q4k_idx512[3]);
    __m512 acc[2];
    __m256 accm[2];
#pragma GCC unroll 2
    for (int r = 0; r < R; r++) {
        acc[r] = _mm512_setzero_ps();
        accm[r] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < n / QK_K; i++) {
        const block_q8_K *yb = ya + i;
        const __m512i a0 = _mm512_loadu_si512(yb->qs), a1 = _mm512_loadu_si512(yb->qs + 64);
        const __m512i a2 = _mm512_loadu_si512(yb->qs + 128), a3 = _mm512_loadu_si512(yb->qs + 192);
        const __m512i b0 = _mm512_shuffle_i64x2(a0, a1, 0x44), b1 = _mm512_shuffle_i64x2(a0, a1, 0xEE);
        const __m512i b2 = _mm512_shuffle_i64x2(a2, a3, 0x44), b3 = _mm512_shuffle_i64x2(a2, a3, 0xEE);
        const __m256i bs = _mm256_loadu_si256((const __m256i *)yb->bsums);
#pragma GCC unroll 2
        for (int r = 0; r < R; r++) {
            /* (each block read through its own type: x for Q4_K, x5 for Q5_K) */
            const size_t bsz = q5 ? sizeof(block_q5_K) : sizeof(block_q4_K);
            const uint8_t *xb = w + (size_t)r * ws + (size_t)i * bsz;
            const block_q4_K *x = (const block_q4_K *)xb;
            const block_q5_K *x5 = (const block_q5_K *)xb;
            PFR(xb, bsz, ws, R);
            const float d = yb->d * h2f(q5 ? x5->d : x->d), dmin = -yb->d * h2f(q5 ? x5->dmin : x->dmin);
            const __m128i sm = kq_unpack_simd(q5 ? x5->scales : x->scales);
            const __m512i sc = _mm512_castsi128_si512(_mm_cvtepu8_epi16(sm));
            const __m256i md = _mm256_madd_epi16(kq_mins_x2(sm), bs);
            accm[r] = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(md), accm[r]);
            const uint8_t *qs = q5 ? x5->qs : x->qs;
            const __m512i w0 = _mm512_loadu_si512(qs), w1 = _mm512_loadu_si512(qs + 64);
            __m512i l0 = _mm512_and_si512(w0, m4), h0 = _mm512_and_si512(_mm512_srli_epi16(w0, 4), m4);
            __m512i l1 = _mm512_and_si512(w1, m4), h1 = _mm512_and_si512(_mm512_srli_epi16(w1, 4), m4);
            if (q5)
                q5k_fifth_bits(x5->qh, &l0, &h0, &l1, &h1);
            __m512i sumi = _mm512_dpwssd_epi32(z, _mm512_permutexvar_epi16(i0, sc), _mm512_maddubs_epi16(l0, b0));
            sumi = _mm512_dpwssd_epi32(sumi, _mm512_permutexvar_epi16(i1, sc), _mm512_maddubs_epi16(h0, b1));
            sumi = _mm512_dpwssd_epi32(sumi, _mm512_permutexvar_epi16(i2, sc), _mm512_maddubs_epi16(l1, b2));
            sumi = _mm512_dpwssd_epi32(sumi, _mm512_permutexvar_epi16(i3, sc), _mm512_maddubs_epi16(h1, b3));
            acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc[r]);
        }
    }
#pragma GCC unroll 2
    for (int r = 0; r < R; r++)
        y[r] = _mm512_reduce_add_ps(acc[r]) + hsum8(accm[r]);
}

/* Decode (one column) of Q6_K weights with VNNI, R (<= 2) rows at a time, as kq_rows_vnni:
 * the activation's loads and sums once for the rows, each row's four scaled products in one
 * vpdpwssd chain that starts from its offset term; the integers and float steps are
 * q6k_dotn_avx512's, so the results are its bit for bit. */
VNNI static Q_ALWAYS_INLINE void q6k_rows_vnni(int64_t n, const uint8_t *w, size_t ws, const int R,
                                               const void *a, float *y)
{
    const block_q8_K *ya = a;
    const __m512i i0 = _mm512_loadu_si512(q6k_idx512[0]), i1 = _mm512_loadu_si512(q6k_idx512[1]);
    const __m512i i2 = _mm512_loadu_si512(q6k_idx512[2]), i3 = _mm512_loadu_si512(q6k_idx512[3]);
    __m512 acc[2];
#pragma GCC unroll 2
    for (int r = 0; r < R; r++)
        acc[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const block_q8_K *yb = ya + i;
        const __m512i a0 = _mm512_loadu_si512(yb->qs), a1 = _mm512_loadu_si512(yb->qs + 64);
        const __m512i a2 = _mm512_loadu_si512(yb->qs + 128), a3 = _mm512_loadu_si512(yb->qs + 192);
        const __m256i bs = _mm256_loadu_si256((const __m256i *)yb->bsums);
#pragma GCC unroll 2
        for (int r = 0; r < R; r++) {
            const block_q6_K *x = (const block_q6_K *)(w + (size_t)r * ws) + i;
            PFR(x, sizeof *x, ws, R);
            const __m256i sc256 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales));
            const __m512i sc = _mm512_castsi256_si512(sc256);
            __m512i q[4];
            q6k_levels(x, q);
            /* levels are q + 32: the chain starts from minus 32 * sum_g sc_g * bsums_g */
            const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(sc256, bs), 5);
            __m512i sumi = _mm512_zextsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(), corr));
            sumi = _mm512_dpwssd_epi32(sumi, _mm512_permutexvar_epi16(i0, sc), _mm512_maddubs_epi16(q[0], a0));
            sumi = _mm512_dpwssd_epi32(sumi, _mm512_permutexvar_epi16(i1, sc), _mm512_maddubs_epi16(q[1], a1));
            sumi = _mm512_dpwssd_epi32(sumi, _mm512_permutexvar_epi16(i2, sc), _mm512_maddubs_epi16(q[2], a2));
            sumi = _mm512_dpwssd_epi32(sumi, _mm512_permutexvar_epi16(i3, sc), _mm512_maddubs_epi16(q[3], a3));
            acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(yb->d * h2f(x->d)), _mm512_cvtepi32_ps(sumi), acc[r]);
        }
    }
#pragma GCC unroll 2
    for (int r = 0; r < R; r++)
        y[r] = _mm512_reduce_add_ps(acc[r]);
}

/* Decode (one column, the types' tile1: the columns of a prompt take their tiles) of Q8_0,
 * Q4_K, Q5_K and Q6_K with VNNI: the rows two at a time through the type's rows function (a
 * constant type: the switch and the row counts fold away). */
enum dec2 { DEC2_Q8_0, DEC2_Q4_K, DEC2_Q5_K, DEC2_Q6_K };
VNNI static Q_ALWAYS_INLINE void rows2_vnni(const enum dec2 t, int64_t n, const uint8_t *w, size_t ws,
                                            const int R, const void *a, float *y)
{
    switch (t) {
    case DEC2_Q8_0: q8_0_rows_vnni(n, w, ws, R, a, y); break;
    case DEC2_Q4_K: kq_rows_vnni(n, w, ws, R, a, y, 0); break;
    case DEC2_Q5_K: kq_rows_vnni(n, w, ws, R, a, y, 1); break;
    case DEC2_Q6_K: q6k_rows_vnni(n, w, ws, R, a, y); break;
    }
}
VNNI static Q_ALWAYS_INLINE void col2_vnni(const enum dec2 t, int64_t n, const void *w, size_t ws, int nr,
                                           const void *a, float *y)
{
    int r = 0;
    for (; r + 2 <= nr; r += 2)
        rows2_vnni(t, n, (const uint8_t *)w + (size_t)r * ws, ws, 2, a, y + r);
    if (r < nr)
        rows2_vnni(t, n, (const uint8_t *)w + (size_t)r * ws, ws, 1, a, y + r);
}
#define DEFINE_DEC2(name, t)                                                                       \
    VNNI static void name(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as,  \
                          int nc, float *y, size_t ldy)                                           \
    {                                                                                              \
        (void)as, (void)nc, (void)ldy;                                                             \
        col2_vnni(t, n, w, ws, nr, a, y);                                                          \
    }
DEFINE_DEC2(dec_q8_0_vnni, DEC2_Q8_0)
DEFINE_DEC2(dec_q4_k_vnni, DEC2_Q4_K)
DEFINE_DEC2(dec_q5_k_vnni, DEC2_Q5_K)
DEFINE_DEC2(dec_q6_k_vnni, DEC2_Q6_K)

/* Block i of b32_rows_vnni into the first accumulator acc[r][0] of each of its rows */
VNNI static Q_ALWAYS_INLINE void b32_block_vnni(int64_t i, const uint8_t *w, size_t ws, const int R,
                                                const block_q8_0 *ya, __m256 acc[][2], const int q5)
{
    const __m256i k = _mm256_set1_epi8(q5 ? 16 : 8), z = _mm256_setzero_si256();
    const __m256i av = _mm256_loadu_si256((const __m256i *)ya[i].qs);
    /* minus the offset term, where each row's vpdpbusd starts: the same integers as the
     * product less the term, one subtraction a row fewer */
    const __m256i noff = _mm256_sub_epi32(z, _mm256_dpbusd_epi32(z, k, av));
    const float dy = h2f(ya[i].d);
    /* the rows' scale products dw dy, converted and multiplied together (each as the scalar
     * product would round it) */
    uint64_t dbits = 0; /* (packed in a scalar: a lane index must be a constant) */
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        dbits |= (uint64_t)(q5 ? ((const block_q5_0 *)(w + (size_t)r * ws) + i)->d
                               : ((const block_q4_0 *)(w + (size_t)r * ws) + i)->d) << (16 * r);
    const __m128 sc = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi64_si128((long long)dbits)), _mm_set1_ps(dy));
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        __m256i u;
        if (q5) {
            const block_q5_0 *x = (const block_q5_0 *)(w + (size_t)r * ws) + i;
            PFR(x, sizeof *x, ws, R);
            uint32_t qh;
            memcpy(&qh, x->qh, 4);
            const __m256i nib = nibbles32(x->qs);
            u = _mm256_mask_add_epi8(nib, (__mmask32)qh, nib, k);
        } else {
            const block_q4_0 *x = (const block_q4_0 *)(w + (size_t)r * ws) + i;
            PFR(x, sizeof *x, ws, R);
            u = nibbles32(x->qs);
        }
        const __m256i p = _mm256_dpbusd_epi32(noff, u, av);
        const __m256 s8 = _mm256_permutexvar_ps(_mm256_set1_epi32(r), _mm256_castps128_ps256(sc));
        acc[r][0] = _mm256_fmadd_ps(s8, _mm256_cvtepi32_ps(p), acc[r][0]);
    }
}

/* Q4_0's pairs of blocks 0 .. nb (rounded down to a pair) of b32_rows_vnni over 512 bits: a
 * pair's values, its activation and offset term in one vector each, the even block in the low
 * half and the odd one in the high half, as the two accumulators acc[r][0] and acc[r][1] take
 * them, so each lane's steps are the same. In registers: chosen by the block's index, the
 * accumulators lived on the stack (a store and a load a row and block). Returns the blocks done;
 * their accumulators go to acc. (One request ahead a pair: 36 bytes, every cache line.) */
VNNI static Q_ALWAYS_INLINE int64_t b32_pairs_vnni(int64_t nb, const uint8_t *w, size_t ws, const int R,
                                                   const block_q8_0 *ya, __m256 acc[][2])
{
    const __m512i k = _mm512_set1_epi8(8), z = _mm512_setzero_si512();
    const __m512i sh = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0), mk = _mm512_set1_epi8(0x0f);
    __m512 acc2[4];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        acc2[r] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m512i av = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)ya[i].qs)),
            _mm256_loadu_si256((const __m256i *)ya[i + 1].qs), 1);
        const __m512i noff = _mm512_sub_epi32(z, _mm512_dpbusd_epi32(z, k, av));
        uint64_t d0 = 0, d1 = 0;
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const block_q4_0 *x = (const block_q4_0 *)(w + (size_t)r * ws) + i;
            d0 |= (uint64_t)x[0].d << (16 * r);
            d1 |= (uint64_t)x[1].d << (16 * r);
        }
        const __m128 s0 = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi64_si128((long long)d0)), _mm_set1_ps(h2f(ya[i].d)));
        const __m128 s1 = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi64_si128((long long)d1)),
                                     _mm_set1_ps(h2f(ya[i + 1].d)));
        const __m512 sc = _mm512_castps256_ps512(_mm256_set_m128(s1, s0));
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const block_q4_0 *x = (const block_q4_0 *)(w + (size_t)r * ws) + i;
            PFR(x, sizeof *x, ws, R);
            __m512i q = _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)x[0].qs)),
                                                    0xff00, _mm_loadu_si128((const __m128i *)x[1].qs));
            q = _mm512_and_si512(_mm512_srlv_epi64(q, sh), mk);
            const __m512i p = _mm512_dpbusd_epi32(noff, q, av);
            const __m512 s16 = _mm512_permutexvar_ps(
                _mm512_inserti64x4(_mm512_set1_epi32(r), _mm256_set1_epi32(r + 4), 1), sc);
            acc2[r] = _mm512_fmadd_ps(s16, _mm512_cvtepi32_ps(p), acc2[r]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        acc[r][0] = _mm512_castps512_ps256(acc2[r]);
        acc[r][1] = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc2[r]), 1));
    }
    return i;
}

/* Decode (one column) of Q4_0 (q5: Q5_0) weights with VNNI, R (<= 4) rows at a time: the
 * activation block, its scale and the offset term (8 or 16 times its sums, by vpdpbusd) are
 * loaded and computed once for the R rows. Per row the integers, the scale products and the
 * order of the additions are those of q4_0_dotn_vnni (even and odd blocks apart) and
 * dot_q5_0_vnni (one accumulator), so the results are theirs bit for bit. Q4_0 takes its
 * blocks in pairs over 512 bits (b32_pairs_vnni), then an odd last block. */
VNNI static Q_ALWAYS_INLINE void b32_rows_vnni(int64_t n, const uint8_t *w, size_t ws, const int R, const void *a,
                                               float *y, const int q5)
{
    const int64_t nb = n / QK8_0;
    const block_q8_0 *ya = a;
    __m256 acc[4][2];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    const int64_t i0 = q5 ? 0 : b32_pairs_vnni(nb, w, ws, R, ya, acc);
    for (int64_t i = i0; i < nb; i++)
        b32_block_vnni(i, w, ws, R, ya, acc, q5);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        y[r] = q5 ? hsum8(acc[r][0]) : reduce16_ps(acc[r][0], acc[r][1]);
}

/* nr rows against one column, four at a time. 0.5B tg64, rows at a time 4 / 2: Q4_0 59.1-60.2 /
 * 55.0-56.9 tok/s; Q4_K_M (its Q5_0 matrices) 59.1-59.8 / 61.1-62.8 while each row asked
 * PF_AHEAD bytes on, 61.8-62.1 / 59.2-60.3 since a group asks for the next one (PFR). */
VNNI static Q_ALWAYS_INLINE void b32_col_vnni(int64_t n, const void *w, size_t ws, int nr, const void *a, float *y,
                                              const int q5)
{
    int r = 0;
    for (; r + 4 <= nr; r += 4)
        b32_rows_vnni(n, (const uint8_t *)w + (size_t)r * ws, ws, 4, a, y + r, q5);
    for (; r + 2 <= nr; r += 2)
        b32_rows_vnni(n, (const uint8_t *)w + (size_t)r * ws, ws, 2, a, y + r, q5);
    if (r < nr)
        b32_rows_vnni(n, (const uint8_t *)w + (size_t)r * ws, ws, 1, a, y + r, q5);
}

/* Decode (one column) of Q4_0 and Q5_0 weights with VNNI (tile1: the columns of a prompt take
 * the types' tiles, or their dot products) */
VNNI static void dec_q4_0_vnni(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nc,
                               float *y, size_t ldy)
{
    (void)as, (void)nc, (void)ldy;
    b32_col_vnni(n, w, ws, nr, a, y, 0);
}
VNNI static void dec_q5_0_vnni(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nc,
                               float *y, size_t ldy)
{
    (void)as, (void)nc, (void)ldy;
    b32_col_vnni(n, w, ws, nr, a, y, 1);
}

/* R (<= 2) weight rows against C (<= 8) prepared activation columns (q4: Q4_0 weights, else
 * Q8_0). Per (row, column) and pair of blocks the integer sums are those of q8_0_core and the
 * float steps the same (scale product, then one fused multiply-add), so each result is
 * bit-identical to the single dot product. */
VNNI static Q_ALWAYS_INLINE void ptile_mk(int64_t nb, const uint8_t *w, size_t ws, const int R,
                                          const uint8_t *a, size_t as, const int C, float *y,
                                          size_t ldy, const int q4)
{
    __m512 acc[2][8];
#pragma GCC unroll 2
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int c = 0; c < C; c++)
            acc[r][c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i += 2) {
        const int tail = i + 1 == nb;
        __m512i wv[2], nc[2];
        __m512 dw[2];
#pragma GCC unroll 2
        for (int r = 0; r < R; r++) {
            if (tail)
                b32_pair(w + (size_t)r * ws, i, q4, 1, &wv[r], &nc[r], &dw[r]);
            else
                b32_pair(w + (size_t)r * ws, i, q4, 0, &wv[r], &nc[r], &dw[r]);
        }
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) {
            const struct pact_q8_0x2 *pc = (const struct pact_q8_0x2 *)(a + (size_t)c * as) + i / 2;
            const __m512i u = _mm512_loadu_si512(pc->u);
            const __m512 da = _mm512_loadu_ps(pc->d);
#pragma GCC unroll 2
            for (int r = 0; r < R; r++) {
                const __m512i sum = _mm512_dpbusd_epi32(nc[r], u, wv[r]);
                acc[r][c] = _mm512_fmadd_ps(_mm512_mul_ps(dw[r], da), _mm512_cvtepi32_ps(sum), acc[r][c]);
            }
        }
    }
#pragma GCC unroll 2
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int c = 0; c < C; c++)
            y[(size_t)c * ldy + r] = _mm512_reduce_add_ps(acc[r][c]);
}

/* A prompt tile of Q8_0/Q4_0 rows (blocks of 32) in groups of PR rows by PC columns through
 * mk, the remainders with smaller constants: the cases up to PR = 2 and PC = cases * 4. */
#define RC_CASE(mk, q4, rr, cc)                                                                    \
    case (rr) * 16 + (cc): mk(nb, wr, ws, rr, ac, as, cc, yc, ldy, q4); break;
#define RC_CASES4(mk, q4, rr)                                                                      \
    RC_CASE(mk, q4, rr, 1) RC_CASE(mk, q4, rr, 2) RC_CASE(mk, q4, rr, 3) RC_CASE(mk, q4, rr, 4)
#define RC_CASES8(mk, q4, rr)                                                                      \
    RC_CASES4(mk, q4, rr)                                                                          \
    RC_CASE(mk, q4, rr, 5) RC_CASE(mk, q4, rr, 6) RC_CASE(mk, q4, rr, 7) RC_CASE(mk, q4, rr, 8)
#define DEFINE_RC_TILE(name, attr, mk, q4, PR, PC, CASES)                                          \
    attr static void name(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as,  \
                          int nc, float *y, size_t ldy)                                           \
    {                                                                                              \
        const int64_t nb = n / QK8_0;                                                              \
        for (int r = 0; r < nr; r += (PR)) {                                                       \
            const int rr = nr - r < (PR) ? nr - r : (PR);                                          \
            const uint8_t *wr = (const uint8_t *)w + (size_t)r * ws;                               \
            for (int c = 0; c < nc; c += (PC)) {                                                   \
                const int cc = nc - c < (PC) ? nc - c : (PC);                                      \
                const uint8_t *ac = (const uint8_t *)a + (size_t)c * as;                           \
                float *yc = y + (size_t)c * ldy + r;                                               \
                switch (rr * 16 + cc) {                                                            \
                    CASES(mk, q4, 1) CASES(mk, q4, 2)                                              \
                default: break;                                                                    \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }
/* With VNNI, rows in pairs and columns in groups of 8 (quant_matmul's MM_TC). Batched Q8_0
 * product of 4096 x 4096 by 64 columns, 2 threads, GFLOP/s by tile (rows x columns): 1x8 174,
 * 2x6 194, 2x8 256, 3x4 221, 3x6 214, 4x2 170, 4x4 227 (acc spilled); AVX-512 without VNNI,
 * 1x4: 94. */
DEFINE_RC_TILE(ptile_q8_0_vnni, VNNI, ptile_mk, 0, 2, 8, RC_CASES8)
DEFINE_RC_TILE(ptile_q4_0_vnni, VNNI, ptile_mk, 1, 2, 8, RC_CASES8)

/* AVX2 tiles of the K-quants: each weight row against the columns in groups of KT2_C. */
#define KT2_COLS(dotn_call)                                                                        \
    for (int r = 0; r < nr; r++) {                                                                 \
        const uint8_t *wr = (const uint8_t *)w + (size_t)r * ws;                                   \
        for (int c = 0; c < nc; c += KT2_C) {                                                      \
            const uint8_t *ac = (const uint8_t *)a + (size_t)c * as;                               \
            float *yc = y + (size_t)c * ldy + r;                                                   \
            switch (nc - c < KT2_C ? nc - c : KT2_C) {                                             \
            case 4: dotn_call(4); break;                                                           \
            case 3: dotn_call(3); break;                                                           \
            case 2: dotn_call(2); break;                                                           \
            default: dotn_call(1); break;                                                          \
            }                                                                                      \
        }                                                                                          \
    }
#define KT2_Q4K(k) kq_dotn_avx2(n, wr, ac, as, k, yc, ldy, 0)
#define KT2_Q5K(k) kq_dotn_avx2(n, wr, ac, as, k, yc, ldy, 1)
#define KT2_Q6K(k) q6k_dotn_avx2(n, (const block_q6_K *)wr, ac, as, k, yc, ldy)
AVX2 static void tile_q4_k_avx2(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as,
                                int nc, float *y, size_t ldy)
{
    KT2_COLS(KT2_Q4K)
}
AVX2 static void tile_q5_k_avx2(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as,
                                int nc, float *y, size_t ldy)
{
    KT2_COLS(KT2_Q5K)
}
AVX2 static void tile_q6_k_avx2(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as,
                                int nc, float *y, size_t ldy)
{
    KT2_COLS(KT2_Q6K)
}

/* ------------------------------------------------------------------ AVX2 prompt tiles */

/* Q8_0 / Q4_0 prompt batches without AVX-512, over the layout of pact_q8_0 (block h of a pair:
 * its 32 levels + 128 at u + 32h, its scale 8 times at d + 8h). R weight rows by C columns; per
 * (row, column) and block the integer sums of dot_i8 and the float steps of dot_q8_0_avx2, so
 * each result is bit-identical to that dot product. With AVX-VNNI, one vpdpbusd on the
 * unsigned activations (minus 128 x the weights' sums); without, the sign trick of dot_i8. */
#define AVXVNNI __attribute__((target("avx2,fma,f16c,avxvnni")))

AVX2 static inline __m256i pt2_weights(const uint8_t *wr, int64_t b, const int q4)
{
    if (q4)
        return _mm256_sub_epi8(nibbles32(((const block_q4_0 *)wr)[b].qs), _mm256_set1_epi8(8));
    return _mm256_loadu_si256((const __m256i *)((const block_q8_0 *)wr)[b].qs);
}

AVX2 static inline uint16_t pt2_scale(const uint8_t *wr, int64_t b, const int q4)
{
    return q4 ? ((const block_q4_0 *)wr)[b].d : ((const block_q8_0 *)wr)[b].d;
}

/* Per weight row: what the pair product needs besides the levels (their absolute values; with
 * VNNI, -128 x their sums in groups of 4). Per column: the activations (signed; with VNNI, the
 * stored unsigned ones). Per pair: the 8 sums of 4 products. */
AVX2 static inline __m256i pt2_row_abs(__m256i w) { return _mm256_sign_epi8(w, w); }
AVX2 static inline __m256i pt2_col_signed(__m256i u) { return _mm256_xor_si256(u, _mm256_set1_epi8((char)0x80)); }
AVX2 static inline __m256i pt2_dot_sign(__m256i aw, __m256i a, __m256i w)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(a, w)), _mm256_set1_epi16(1));
}
AVXVNNI static inline __m256i pt2_row_negsum(__m256i w)
{
    return _mm256_sub_epi32(_mm256_setzero_si256(),
                            _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), _mm256_set1_epi8((char)0x80), w));
}
AVXVNNI static inline __m256i pt2_col_unsigned(__m256i u) { return u; }
AVXVNNI static inline __m256i pt2_dot_vnni(__m256i nc, __m256i u, __m256i w)
{
    return _mm256_dpbusd_avx_epi32(nc, u, w);
}

#define DEFINE_PT2_MK(name, attr, row_prep, col_prep, pair_dot)                                    \
    attr static Q_ALWAYS_INLINE void name(int64_t nb, const uint8_t *w, size_t ws, const int R,   \
                                          const uint8_t *a, size_t as, const int C, float *y,     \
                                          size_t ldy, const int q4)                               \
    {                                                                                              \
        const size_t bb = q4 ? sizeof(block_q4_0) : sizeof(block_q8_0);                           \
        __m256 acc[2][4];                                                                  \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                                                \
            _Pragma("GCC unroll 4") for (int c = 0; c < C; c++)                                                            \
                acc[r][c] = _mm256_setzero_ps();                                                   \
        for (int64_t b = 0; b < nb; b++) {                                                         \
            __m256i wv[2], wx[2];                                                          \
            __m256 dw[2];                                                                           \
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                                                          \
                const uint8_t *wr = w + (size_t)r * ws;                                            \
                if (!(b & 1))                                                                      \
                    PF(wr + (size_t)b * bb, 2 * bb);                                               \
                wv[r] = pt2_weights(wr, b, q4);                                                    \
                wx[r] = row_prep(wv[r]);                                                           \
                dw[r] = _mm256_set1_ps(h2f(pt2_scale(wr, b, q4)));                                 \
            }                                                                                      \
            _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) {                                                          \
                const struct pact_q8_0x2 *pc =                                                     \
                    (const struct pact_q8_0x2 *)(a + (size_t)c * as) + b / 2;                      \
                const __m256i u = col_prep(_mm256_loadu_si256((const __m256i *)(pc->u + 32 * (b & 1)))); \
                const __m256 da = _mm256_loadu_ps(pc->d + 8 * (b & 1));                            \
                _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                                        \
                    acc[r][c] = _mm256_fmadd_ps(_mm256_mul_ps(dw[r], da),                          \
                                                _mm256_cvtepi32_ps(pair_dot(wx[r], u, wv[r])), acc[r][c]); \
            }                                                                                      \
        }                                                                                          \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                                                \
            _Pragma("GCC unroll 4") for (int c = 0; c < C; c++)                                                            \
                y[(size_t)c * ldy + r] = hsum8(acc[r][c]);                                         \
    }
/* Two rows by 4 columns. Batched 4096 x 4096 by 64 columns, 2 threads of an AVX-512 Xeon
 * limited to these kernels, GFLOP/s Q8_0 / Q4_0, sign trick and AVX-VNNI: 2x2 131 / 115 and
 * 146-161 / 128-129; 1x4 127 / 130 and 144 / 156; 2x3 130 / 118 and 156 / 152; 2x4 129-134 /
 * 125-133 and 153-165 / 157-170; the dot products before, 94-97 / 72. */
#define PT2_R 2
#define PT2_C 4
DEFINE_PT2_MK(pt2_mk_sign, AVX2, pt2_row_abs, pt2_col_signed, pt2_dot_sign)
DEFINE_PT2_MK(pt2_mk_vnni, AVXVNNI, pt2_row_negsum, pt2_col_unsigned, pt2_dot_vnni)

DEFINE_RC_TILE(ptile_q8_0_avx2, AVX2, pt2_mk_sign, 0, PT2_R, PT2_C, RC_CASES4)
DEFINE_RC_TILE(ptile_q4_0_avx2, AVX2, pt2_mk_sign, 1, PT2_R, PT2_C, RC_CASES4)
DEFINE_RC_TILE(ptile_q8_0_avxvnni, AVXVNNI, pt2_mk_vnni, 0, PT2_R, PT2_C, RC_CASES4)
DEFINE_RC_TILE(ptile_q4_0_avxvnni, AVXVNNI, pt2_mk_vnni, 1, PT2_R, PT2_C, RC_CASES4)

/* ------------------------------------------------------------------ prompt tiles with AMX */

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#define HAVE_AMX 1
#define AMX __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))

/* Q8_0 prompt batches on AMX-INT8: a tile multiply takes 16 weight rows by one 32-element
 * block (the weights' own bytes, loaded with the row stride) against 16 columns, in int32;
 * each block's 16 x 16 sums are then scaled and added in floats, one vector of 16 columns per
 * row. Activations as pact_q8_0 converts them, laid out for the tile's second operand: per
 * group of 16 columns and block, 8 rows of 64 bytes (row i: for each column, its elements 4i
 * to 4i + 3) and the 16 columns' scales; one column takes 36 bytes a block. */
#define AMX_BLOCK_BYTES (8 * 64 + 16 * 4)

static size_t pact_q8_0_amx_bytes(int64_t n) { return (size_t)(n / QK8_0) * (AMX_BLOCK_BYTES / 16); }

static void pact_q8_0_amx(const float *x, void *dst, int64_t n)
{
    uint8_t *o = dst; /* this column's slot of its group: 4 bytes apart from its neighbours */
    for (int64_t i = 0; i < n / QK8_0; i++, o += AMX_BLOCK_BYTES) {
        block_q8_0 b;
        act_q8_0_avx512(x + i * QK8_0, &b, QK8_0);
        for (int r = 0; r < 8; r++)
            memcpy(o + 64 * r, b.qs + 4 * r, 4);
        const float d = fp16_to_f32(b.d);
        memcpy(o + 8 * 64, &d, 4);
    }
}

struct amx_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

/* ldtilecfg with the whole 64 bytes as its operand: GCC 12's _tile_loadconfig names only the
 * first 8 as read, and at -O2 the stores of the rows and column widths were dropped. */
AMX static inline void amx_load_config(const struct amx_config *c)
{
    __asm__ volatile("ldtilecfg %0" : : "m"(*c));
}

/* One block's 16 x 16 sums (rows of cb) into acc: each row's scale (the block's scale in each
 * of nr weight rows, from dws) times the columns' scales (da). */
AMX static Q_ALWAYS_INLINE void amx_scale_add(__m512 acc[16], const int32_t *cb, const float *dws,
                                              __m512 da, const int nr)
{
#pragma GCC unroll 16
    for (int r = 0; r < nr; r++)
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(cb + 16 * r)),
                                 _mm512_mul_ps(_mm512_set1_ps(dws[r]), da), acc[r]);
}

/* Columns a Q8_0 / Q4_0 / Q5_0 call takes, and blocks of rows unpacked at a time. */
#define AMX_B_COLS 256
#define AMX_B_CHUNK 64

/* Blocks of 16 weight rows as int8 levels, a tile of 16 rows of 32 bytes each, and their
 * scales as floats: 34 KiB. */
struct amx_b_chunk {
    _Alignas(64) int8_t q[AMX_B_CHUNK][16][32];
    _Alignas(64) float d[AMX_B_CHUNK][16];
};

/* Blocks [b0, b0 + nbc) of nr Q8_0 / Q4_0 / Q5_0 rows (row stride ws) into the chunk. */
AMX static void amx_b32_unpack(const uint8_t *w, size_t ws, int nr, int64_t b0, int nbc, const int kind,
                               struct amx_b_chunk *out)
{
    for (int r = 0; r < nr; r++)
        for (int i = 0; i < nbc; i++) {
            __m256i q;
            uint16_t d;
            if (kind == GGML_TYPE_Q8_0) {
                const block_q8_0 *x = (const block_q8_0 *)(w + (size_t)r * ws) + b0 + i;
                q = _mm256_loadu_si256((const __m256i *)x->qs);
                d = x->d;
            } else if (kind == GGML_TYPE_Q5_0) {
                const block_q5_0 *x = (const block_q5_0 *)(w + (size_t)r * ws) + b0 + i;
                q = _mm256_or_si256(nibbles32(x->qs),
                                    _mm256_andnot_si256(bits32(x->qh), _mm256_set1_epi8((char)0xF0)));
                d = x->d;
            } else {
                const block_q4_0 *x = (const block_q4_0 *)(w + (size_t)r * ws) + b0 + i;
                q = _mm256_sub_epi8(nibbles32(x->qs), _mm256_set1_epi8(8));
                d = x->d;
            }
            _mm256_store_si256((__m256i *)out->q[i][r], q);
            out->d[i][r] = h2f(d);
        }
}

/* nb unpacked blocks of nr rows against the groups of nc columns at a, added to
 * accs[group][row][column]. */
AMX static Q_ALWAYS_INLINE void amx_b32_rows(int nb, const struct amx_b_chunk *k, const int nr, const uint8_t *a,
                                             size_t as, int nc, float (*accs)[16][16], bool first)
{
    _Alignas(64) int32_t cb[2][256];
    const size_t gbytes = 16 * as; /* a group of 16 columns */
    for (int g = 0; g * 16 < nc; g++) {
        const uint8_t *ga = a + (size_t)g * gbytes;
        __m512 acc[16];
#pragma GCC unroll 16
        for (int r = 0; r < 16; r++)
            acc[r] = first ? _mm512_setzero_ps() : _mm512_load_ps(accs[g][r]);
        int b = 0;
        for (; b + 2 <= nb; b += 2) {
            _tile_loadd(0, k->q[b], 32);
            _tile_loadd(1, k->q[b + 1], 32);
            _tile_loadd(2, ga + (size_t)b * AMX_BLOCK_BYTES, 64);
            _tile_loadd(3, ga + (size_t)(b + 1) * AMX_BLOCK_BYTES, 64);
            _tile_zero(4);
            _tile_zero(5);
            _tile_dpbssd(4, 0, 2);
            _tile_dpbssd(5, 1, 3);
            _tile_stored(4, cb[0], 64);
            _tile_stored(5, cb[1], 64);
            amx_scale_add(acc, cb[0], k->d[b], _mm512_loadu_ps((const float *)(ga + (size_t)b * AMX_BLOCK_BYTES + 512)), nr);
            amx_scale_add(acc, cb[1], k->d[b + 1], _mm512_loadu_ps((const float *)(ga + (size_t)(b + 1) * AMX_BLOCK_BYTES + 512)), nr);
        }
        if (b < nb) {
            _tile_loadd(0, k->q[b], 32);
            _tile_loadd(2, ga + (size_t)b * AMX_BLOCK_BYTES, 64);
            _tile_zero(4);
            _tile_dpbssd(4, 0, 2);
            _tile_stored(4, cb[0], 64);
            amx_scale_add(acc, cb[0], k->d[b], _mm512_loadu_ps((const float *)(ga + (size_t)b * AMX_BLOCK_BYTES + 512)), nr);
        }
#pragma GCC unroll 16
        for (int r = 0; r < 16; r++)
            _mm512_store_ps(accs[g][r], acc[r]);
    }
}

/* Tiles 0-1: rr rows of a_colsb bytes (weights); 2-3: b_rows rows of 64 bytes (16 columns of
 * activations); 4-7: rr rows of 16 int32 (the sums). */
AMX static void amx_configure(int rr, int a_colsb, int b_rows)
{
    struct amx_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.colsb[t] = (uint16_t)(t < 2 ? a_colsb : 64);
        cfg.rows[t] = (uint8_t)(t == 2 || t == 3 ? b_rows : rr);
    }
    amx_load_config(&cfg);
}

/* accs[group][row][column] into y (column c of row r at y[c * ldy + r]); whole 16 x 16 blocks
 * are transposed in registers. */
AMX static void amx_store(const float (*accs)[16][16], int nr, int nc, float *y, size_t ldy)
{
    for (int g = 0; g * 16 < nc; g++) {
        const int ncg = nc - 16 * g < 16 ? nc - 16 * g : 16;
        if (nr < 16 || ncg < 16) {
            for (int r = 0; r < nr; r++)
                for (int c = 0; c < ncg; c++)
                    y[(size_t)(16 * g + c) * ldy + r] = accs[g][r][c];
            continue;
        }
        __m512 t[16], s[16];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) { /* t[2i], t[2i + 1]: rows 2i, 2i + 1 interleaved in each lane */
            const __m512 a = _mm512_load_ps(accs[g][2 * i]), b = _mm512_load_ps(accs[g][2 * i + 1]);
            t[2 * i] = _mm512_unpacklo_ps(a, b);
            t[2 * i + 1] = _mm512_unpackhi_ps(a, b);
        }
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) { /* s[4k + q], lane L: rows 4q..4q + 3 of column 4L + k */
            s[q] = _mm512_shuffle_ps(t[4 * q], t[4 * q + 2], _MM_SHUFFLE(1, 0, 1, 0));
            s[4 + q] = _mm512_shuffle_ps(t[4 * q], t[4 * q + 2], _MM_SHUFFLE(3, 2, 3, 2));
            s[8 + q] = _mm512_shuffle_ps(t[4 * q + 1], t[4 * q + 3], _MM_SHUFFLE(1, 0, 1, 0));
            s[12 + q] = _mm512_shuffle_ps(t[4 * q + 1], t[4 * q + 3], _MM_SHUFFLE(3, 2, 3, 2));
        }
        float *yg = y + (size_t)(16 * g) * ldy;
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) { /* the 128-bit lanes of s[4k..4k + 3], transposed */
            const __m512 a = _mm512_shuffle_f32x4(s[4 * k], s[4 * k + 1], _MM_SHUFFLE(1, 0, 1, 0));
            const __m512 b = _mm512_shuffle_f32x4(s[4 * k], s[4 * k + 1], _MM_SHUFFLE(3, 2, 3, 2));
            const __m512 c = _mm512_shuffle_f32x4(s[4 * k + 2], s[4 * k + 3], _MM_SHUFFLE(1, 0, 1, 0));
            const __m512 d = _mm512_shuffle_f32x4(s[4 * k + 2], s[4 * k + 3], _MM_SHUFFLE(3, 2, 3, 2));
            _mm512_storeu_ps(yg + (size_t)k * ldy, _mm512_shuffle_f32x4(a, c, _MM_SHUFFLE(2, 0, 2, 0)));
            _mm512_storeu_ps(yg + (size_t)(4 + k) * ldy, _mm512_shuffle_f32x4(a, c, _MM_SHUFFLE(3, 1, 3, 1)));
            _mm512_storeu_ps(yg + (size_t)(8 + k) * ldy, _mm512_shuffle_f32x4(b, d, _MM_SHUFFLE(2, 0, 2, 0)));
            _mm512_storeu_ps(yg + (size_t)(12 + k) * ldy, _mm512_shuffle_f32x4(b, d, _MM_SHUFFLE(3, 1, 3, 1)));
        }
    }
}
AMX static Q_ALWAYS_INLINE void ptile_b32_amx(int64_t n, const void *w, size_t ws, int nr, const void *a,
                                              size_t as, int nc, float *y, size_t ldy, const int kind)
{
    const int64_t nb = n / QK8_0;
    _Alignas(64) float accs[AMX_B_COLS / 16][16][16];
    struct amx_b_chunk k;
    for (int r = 0; r < nr; r += 16) {
        const int rr = nr - r < 16 ? nr - r : 16;
        amx_configure(rr, QK8_0, 8);
        const uint8_t *wr = (const uint8_t *)w + (size_t)r * ws;
        for (int64_t b0 = 0; b0 < nb; b0 += AMX_B_CHUNK) {
            const int nbc = nb - b0 < AMX_B_CHUNK ? (int)(nb - b0) : AMX_B_CHUNK;
            amx_b32_unpack(wr, ws, rr, b0, nbc, kind, &k);
            const uint8_t *ab = (const uint8_t *)a + (size_t)b0 * AMX_BLOCK_BYTES;
            if (rr == 16)
                amx_b32_rows(nbc, &k, 16, ab, as, nc, accs, b0 == 0);
            else
                amx_b32_rows(nbc, &k, rr, ab, as, nc, accs, b0 == 0);
        }
        _tile_release();
        amx_store((const float(*)[16][16])accs, rr, nc, y + r, ldy);
    }
}

/* K-format prompt batches on AMX-INT8. A sub-block's integer scale is folded into its levels
 * before the tile multiply: v = scale x level (Q4_K 0..945, Q5_K 0..1953, Q6_K -4064..4096)
 * is split into v >> 6 and v & 63, two planes of int8, so one tile multiply covers 64
 * elements (two Q4_K sub-blocks, four Q6_K ones) and the sums of a whole super-block stay in
 * int32: sum = 64 x (hi . a) + (lo . a), exact. What is left in floats is once a super-block:
 * d x sum, Q4_K/Q5_K's mins term (dmin x min x the activations' sums of each sub-block), and
 * the column's scale. Activations per group of 16 columns and super-block: 8 sub-blocks of 8
 * rows of 64 bytes (row i: for each column, its elements 4i to 4i + 3), the 16 scales, and
 * the 16 columns' sums of each sub-block as floats. */
#define AMX_K_QS (8 * 8 * 64)
#define AMX_K_BYTES (AMX_K_QS + 16 * 4 + 8 * 16 * 4)

static size_t pact_q8_k_amx_bytes(int64_t n) { return (size_t)(n / QK_K) * (AMX_K_BYTES / 16); }

static void pact_q8_k_amx(const float *x, void *dst, int64_t n)
{
    uint8_t *o = dst; /* this column's slot of its group: 4 bytes apart from its neighbours */
    for (int64_t i = 0; i < n / QK_K; i++, o += AMX_K_BYTES) {
        block_q8_K b;
        act_q8_k_avx512(x + i * QK_K, &b, QK_K);
        for (int j = 0; j < 8; j++) {
            for (int r = 0; r < 8; r++)
                memcpy(o + 512 * j + 64 * r, b.qs + 32 * j + 4 * r, 4);
            const float bs = (float)(b.bsums[2 * j] + b.bsums[2 * j + 1]);
            memcpy(o + AMX_K_QS + 64 + 64 * j, &bs, 4);
        }
        memcpy(o + AMX_K_QS, &b.d, 4);
    }
}

/* Super-block i of nr weight rows: per plane (0: v >> 6, 1: v & 63) and quarter t (elements
 * 64t to 64t + 63), a tile of 16 rows of 64 bytes; 8 KiB. */
struct amx_k_planes {
    _Alignas(64) uint8_t q[2][4][16][64];
    float d[16];
    float mn[16][8]; /* Q4_K/Q5_K: min */
    float ndmin[16]; /* Q4_K/Q5_K: -dmin */
};

/* 32 products scale x level (int16) into the two planes at hi and lo. */
AMX static Q_ALWAYS_INLINE void amx_k_split(__m512i v, uint8_t *hi, uint8_t *lo)
{
    _mm256_store_si256((__m256i *)hi, _mm512_cvtepi16_epi8(_mm512_srai_epi16(v, 6)));
    _mm256_store_si256((__m256i *)lo, _mm512_cvtepi16_epi8(_mm512_and_si512(v, _mm512_set1_epi16(63))));
}

/* Q4_K / Q5_K (q5: the fifth bit of sub-block j from bit j of qh). */
AMX static Q_ALWAYS_INLINE void amx_q4_k_unpack(const uint8_t *w, size_t ws, int nr, int64_t i,
                                                struct amx_k_planes *k, const int q5)
{
    const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
    for (int r = 0; r < nr; r++) {
            const block_q4_K *x4 = (const block_q4_K *)(w + (size_t)r * ws) + i;
            const block_q5_K *x5 = (const block_q5_K *)(w + (size_t)r * ws) + i;
            const uint8_t *qs = q5 ? x5->qs : x4->qs;
            const __m256i hb = q5 ? _mm256_loadu_si256((const __m256i *)x5->qh) : _mm256_setzero_si256();
            uint32_t u[4];
            kq_unpack(q5 ? x5->scales : x4->scales, u);
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                const __m256i bits = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
                __m256i lo = _mm256_and_si256(bits, m4), hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
                if (q5) {
                    lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * c), one), 4));
                    hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * c + 1), one), 4));
                }
                const short s0 = (short)(u[c / 2] >> (16 * (c % 2)) & 0xFF);
                const short s1 = (short)(u[c / 2] >> (16 * (c % 2) + 8) & 0xFF);
                amx_k_split(_mm512_mullo_epi16(_mm512_cvtepu8_epi16(lo), _mm512_set1_epi16(s0)),
                            k->q[0][c][r], k->q[1][c][r]);
                amx_k_split(_mm512_mullo_epi16(_mm512_cvtepu8_epi16(hi), _mm512_set1_epi16(s1)),
                            k->q[0][c][r] + 32, k->q[1][c][r] + 32);
            }
            k->d[r] = h2f(q5 ? x5->d : x4->d);
            _mm256_storeu_ps(k->mn[r], _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_setr_epi32((int)u[2], (int)u[3], 0, 0))));
            k->ndmin[r] = -h2f(q5 ? x5->dmin : x4->dmin);
        }
}

/* Q6_K: 16 sub-blocks of 16, levels q - 32 signed, one signed scale each, no mins. */
AMX static void amx_q6_k_unpack(const uint8_t *w, size_t ws, int nr, int64_t i, struct amx_k_planes *k)
{
    const __m256i off = _mm256_set1_epi8(32);
    for (int r = 0; r < nr; r++) {
        const block_q6_K *x = (const block_q6_K *)(w + (size_t)r * ws) + i;
        for (int h = 0; h < 2; h++) {
            __m256i q[4];
            q6k_quarters(x->ql + 64 * h, x->qh + 32 * h, q);
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) { /* elements 128h + 32c: sub-blocks j and j + 1 */
                const int j = 8 * h + 2 * c, t = 2 * h + c / 2, o = 32 * (c % 2);
                const __m512i sc = _mm512_inserti64x4(_mm512_set1_epi16(x->scales[j]),
                                                      _mm256_set1_epi16(x->scales[j + 1]), 1);
                amx_k_split(_mm512_mullo_epi16(_mm512_cvtepi8_epi16(_mm256_sub_epi8(q[c], off)), sc),
                            k->q[0][t][r] + o, k->q[1][t][r] + o);
            }
        }
        k->d[r] = h2f(x->d);
    }
}

/* One group's sums of a super-block (rows of hi: v >> 6, lo: v & 63), scaled and added to
 * acc[row][column]; ga: the group's activations of that super-block. */
AMX static Q_ALWAYS_INLINE void amx_k_scale(const struct amx_k_planes *k, const uint8_t *ga,
                                            const int32_t *hi, const int32_t *lo, const int nr,
                                            float (*acc)[16], bool first, const int q6)
{
    const __m512 da = _mm512_loadu_ps((const float *)(ga + AMX_K_QS));
    __m512 bs[8];
    if (!q6)
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            bs[j] = _mm512_loadu_ps((const float *)(ga + AMX_K_QS + 64 + 64 * j));
#pragma GCC unroll 16
    for (int r = 0; r < nr; r++) {
        const __m512 x = _mm512_cvtepi32_ps(
            _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(hi + 16 * r), 6), _mm512_load_si512(lo + 16 * r)));
        __m512 t;
        if (q6) {
            t = _mm512_mul_ps(x, _mm512_set1_ps(k->d[r]));
        } else {
            __m512 m = _mm512_mul_ps(bs[0], _mm512_set1_ps(k->mn[r][0]));
#pragma GCC unroll 7
            for (int j = 1; j < 8; j++)
                m = _mm512_fmadd_ps(bs[j], _mm512_set1_ps(k->mn[r][j]), m);
            t = _mm512_fmadd_ps(m, _mm512_set1_ps(k->ndmin[r]), _mm512_mul_ps(x, _mm512_set1_ps(k->d[r])));
        }
        _mm512_store_ps(acc[r], first ? _mm512_mul_ps(t, da) : _mm512_fmadd_ps(t, da, _mm512_load_ps(acc[r])));
    }
}

/* The unpacked super-block against one group of 16 columns (two: and the next group too;
 * ga: that super-block's activations in the first), into accs[0] (and accs[1]). Tiles 0-1: a
 * quarter of the planes, 2-3: the activations' quarter of each group, 4-5: the first group's
 * sums (v >> 6, v & 63), 6-7: the second's. */
AMX static Q_ALWAYS_INLINE void amx_k_block(const struct amx_k_planes *k, const uint8_t *ga, size_t gbytes,
                                            const int nr, float (*accs)[16][16], bool first, const int two,
                                            const int q6)
{
    _Alignas(64) int32_t cb[4][256];
    _tile_zero(4);
    _tile_zero(5);
    if (two) {
        _tile_zero(6);
        _tile_zero(7);
    }
#pragma GCC unroll 4
    for (int t = 0; t < 4; t++) {
        _tile_loadd(0, k->q[0][t], 64);
        _tile_loadd(1, k->q[1][t], 64);
        _tile_loadd(2, ga + 1024 * t, 64);
        if (q6)
            _tile_dpbssd(4, 0, 2);
        else
            _tile_dpbusd(4, 0, 2);
        _tile_dpbusd(5, 1, 2);
        if (two) {
            _tile_loadd(3, ga + gbytes + 1024 * t, 64);
            if (q6)
                _tile_dpbssd(6, 0, 3);
            else
                _tile_dpbusd(6, 0, 3);
            _tile_dpbusd(7, 1, 3);
        }
    }
    _tile_stored(4, cb[0], 64);
    _tile_stored(5, cb[1], 64);
    if (two) {
        _tile_stored(6, cb[2], 64);
        _tile_stored(7, cb[3], 64);
    }
    amx_k_scale(k, ga, cb[0], cb[1], nr, accs[0], first, q6);
    if (two)
        amx_k_scale(k, ga + gbytes, cb[2], cb[3], nr, accs[1], first, q6);
}

/* nsb super-blocks of nr rows against the groups of nc columns at a, added to
 * accs[group][row][column]. */
AMX static Q_ALWAYS_INLINE void amx_k_rows(int64_t nsb, const uint8_t *w, size_t ws, const int nr,
                                           const uint8_t *a, size_t as, int nc, struct amx_k_planes *k,
                                           float (*accs)[16][16], const int kind)
{
    const int q6 = kind == GGML_TYPE_Q6_K;
    const size_t gbytes = 16 * as;
    const int ng = (nc + 15) / 16;
    for (int64_t i = 0; i < nsb; i++) {
        if (q6)
            amx_q6_k_unpack(w, ws, nr, i, k);
        else if (kind == GGML_TYPE_Q5_K)
            amx_q4_k_unpack(w, ws, nr, i, k, 1);
        else
            amx_q4_k_unpack(w, ws, nr, i, k, 0);
        const uint8_t *ai = a + (size_t)i * AMX_K_BYTES;
        int g = 0;
        for (; g + 2 <= ng; g += 2)
            amx_k_block(k, ai + (size_t)g * gbytes, gbytes, nr, accs + g, i == 0, 1, q6);
        if (g < ng)
            amx_k_block(k, ai + (size_t)g * gbytes, gbytes, nr, accs + g, i == 0, 0, q6);
    }
}

#define AMX_K_COLS 256 /* columns a call takes: the unpacked levels serve 16 groups */

AMX static Q_ALWAYS_INLINE void ptile_k_amx(int64_t n, const void *w, size_t ws, int nr, const void *a,
                                            size_t as, int nc, float *y, size_t ldy, const int kind)
{
    struct amx_k_planes k;
    _Alignas(64) float accs[AMX_K_COLS / 16][16][16];
    const int64_t nsb = n / QK_K;
    for (int r = 0; r < nr; r += 16) {
        const int rr = nr - r < 16 ? nr - r : 16;
        amx_configure(rr, 64, 16);
        const uint8_t *wr = (const uint8_t *)w + (size_t)r * ws;
        if (rr == 16)
            amx_k_rows(nsb, wr, ws, 16, a, as, nc, &k, accs, kind);
        else
            amx_k_rows(nsb, wr, ws, rr, a, as, nc, &k, accs, kind);
        _tile_release();
        amx_store((const float(*)[16][16])accs, rr, nc, y + r, ldy);
    }
}

/* The table's prompt tiles: one per format over the shared AMX paths. */
#define DEFINE_AMX_PTILE(name, impl, kind)                                                         \
    AMX static void name(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as,   \
                         int nc, float *y, size_t ldy)                                            \
    {                                                                                              \
        impl(n, w, ws, nr, a, as, nc, y, ldy, kind);                                               \
    }
DEFINE_AMX_PTILE(ptile_q8_0_amx, ptile_b32_amx, GGML_TYPE_Q8_0)
DEFINE_AMX_PTILE(ptile_q4_0_amx, ptile_b32_amx, GGML_TYPE_Q4_0)
DEFINE_AMX_PTILE(ptile_q5_0_amx, ptile_b32_amx, GGML_TYPE_Q5_0)
DEFINE_AMX_PTILE(ptile_q4_k_amx, ptile_k_amx, GGML_TYPE_Q4_K)
DEFINE_AMX_PTILE(ptile_q5_k_amx, ptile_k_amx, GGML_TYPE_Q5_K)
DEFINE_AMX_PTILE(ptile_q6_k_amx, ptile_k_amx, GGML_TYPE_Q6_K)

/* The OS keeps AMX's tile data off until a process asks for it (Linux 5.16+). */
static bool amx_usable(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d >> 24 & 1) || !(d >> 25 & 1))
        return false;
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
}
#endif

/* AVX-VNNI (the VEX-encoded 256-bit vpdpbusd) from CPUID leaf 7 subleaf 1 (EAX bit 4): GCC 12's
 * __builtin_cpu_supports("avxvnni") answers no even where the CPU has it. */
static bool has_avxvnni(void)
{
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 4 & 1);
}

int qk_x86_init_level(struct qkernels *k, int max_level)
{
    __builtin_cpu_init();
    if (max_level < QK_X86_AVX2 ||
        !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && simd_has_f16c()))
        return 0;
    k[GGML_TYPE_F32].dot = dot_f32_avx2;
    k[GGML_TYPE_F16].dot = dot_f16_avx2;
    k[GGML_TYPE_F16].dequant = dq_f16_avx2;
    k[GGML_TYPE_F16].act = act_f16_avx2;
    k[GGML_TYPE_Q8_0].act = act_q8_0_avx2;
    k[GGML_TYPE_BF16].dot = dot_bf16_avx2;
    k[GGML_TYPE_BF16].dequant = dq_bf16_avx2;
    k[GGML_TYPE_Q8_0].dot = dot_q8_0_avx2;
    k[GGML_TYPE_Q8_0].dequant = dq_q8_0_avx2;
    k[GGML_TYPE_Q4_0].dot = dot_q4_0_avx2;
    k[GGML_TYPE_Q4_0].dequant = dq_q4_0_avx2;
    k[GGML_TYPE_Q4_1].dot = dot_q4_1_avx2;
    k[GGML_TYPE_Q5_0].dot = dot_q5_0_avx2;
    k[GGML_TYPE_Q5_1].dot = dot_q5_1_avx2;
    k[GGML_TYPE_Q4_K].dot = dot_q4_k_avx2;
    k[GGML_TYPE_Q4_K].dequant = dq_q4_k_avx2;
    k[GGML_TYPE_Q5_K].dot = dot_q5_k_avx2;
    k[GGML_TYPE_Q5_K].dequant = dq_q5_k_avx2;
    k[GGML_TYPE_Q6_K].dot = dot_q6_k_avx2;
    k[GGML_TYPE_Q6_K].dequant = dq_q6_k_avx2;
    k[GGML_TYPE_Q4_K].tile = tile_q4_k_avx2;
    k[GGML_TYPE_Q5_K].tile = tile_q5_k_avx2;
    k[GGML_TYPE_Q6_K].tile = tile_q6_k_avx2;
    const bool avxvnni = max_level >= QK_X86_AVX2_VNNI && has_avxvnni();
    k[GGML_TYPE_Q8_0].ptile = avxvnni ? ptile_q8_0_avxvnni : ptile_q8_0_avx2;
    k[GGML_TYPE_Q4_0].ptile = avxvnni ? ptile_q4_0_avxvnni : ptile_q4_0_avx2;
    k[GGML_TYPE_Q8_0].pact = k[GGML_TYPE_Q4_0].pact = pact_q8_0;
    k[GGML_TYPE_Q8_0].pact_bytes = k[GGML_TYPE_Q4_0].pact_bytes = pact_q8_0_bytes;
    if (max_level < QK_X86_AVX512 ||
        !(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")))
        return avxvnni ? QK_X86_AVX2_VNNI : QK_X86_AVX2;
    /* the AVX-512 dot products add in another order than the AVX2 tiles */
    k[GGML_TYPE_Q8_0].ptile = k[GGML_TYPE_Q4_0].ptile = NULL;
    k[GGML_TYPE_Q8_K].act = act_q8_k_avx512;
    k[GGML_TYPE_Q8_0].act = act_q8_0_avx512;
    k[GGML_TYPE_Q4_K].dot = dot_q4_k_avx512;
    k[GGML_TYPE_Q6_K].dot = dot_q6_k_avx512;
    k[GGML_TYPE_Q4_K].tile = tile_q4_k_avx512;
    k[GGML_TYPE_Q6_K].tile = tile_q6_k_avx512;
    k[GGML_TYPE_Q5_K].dot = dot_q5_k_avx512;
    k[GGML_TYPE_Q5_K].tile = tile_q5_k_avx512;
    k[GGML_TYPE_Q8_0].dot = dot_q8_0_avx512;
    k[GGML_TYPE_Q8_0].tile = tile_q8_0_avx512;
    k[GGML_TYPE_Q4_0].dot = dot_q4_0_avx512;
    k[GGML_TYPE_Q4_0].tile = tile_q4_0_avx512;
    k[GGML_TYPE_F16].tile = tile_f16_avx512;
    k[GGML_TYPE_BF16].tile = tile_bf16_avx512;
    if (max_level < QK_X86_VNNI || !__builtin_cpu_supports("avx512vnni"))
        return QK_X86_AVX512;
    k[GGML_TYPE_Q8_0].ptile = ptile_q8_0_vnni;
    k[GGML_TYPE_Q4_0].ptile = ptile_q4_0_vnni;
    k[GGML_TYPE_Q5_0].dot = dot_q5_0_vnni;
    k[GGML_TYPE_Q4_0].dot = dot_q4_0_vnni;
    k[GGML_TYPE_Q4_0].tile = tile_q4_0_vnni;
    k[GGML_TYPE_Q4_0].tile1 = dec_q4_0_vnni;
    k[GGML_TYPE_Q5_0].tile1 = dec_q5_0_vnni;
    k[GGML_TYPE_Q8_0].tile1 = dec_q8_0_vnni;
    k[GGML_TYPE_Q4_K].tile1 = dec_q4_k_vnni;
    k[GGML_TYPE_Q6_K].tile1 = dec_q6_k_vnni;
    k[GGML_TYPE_Q5_K].tile1 = dec_q5_k_vnni;
#if HAVE_AMX
    if (max_level >= QK_X86_AMX && amx_usable()) {
        static const struct {
            int type;
            qk_dot_tile_fn ptile;
            qk_act_fn pact;
            size_t (*pact_bytes)(int64_t n);
            int pcols;
        } amx[6] = {
            {GGML_TYPE_Q8_0, ptile_q8_0_amx, pact_q8_0_amx, pact_q8_0_amx_bytes, AMX_B_COLS},
            {GGML_TYPE_Q4_0, ptile_q4_0_amx, pact_q8_0_amx, pact_q8_0_amx_bytes, AMX_B_COLS},
            {GGML_TYPE_Q5_0, ptile_q5_0_amx, pact_q8_0_amx, pact_q8_0_amx_bytes, AMX_B_COLS},
            {GGML_TYPE_Q4_K, ptile_q4_k_amx, pact_q8_k_amx, pact_q8_k_amx_bytes, AMX_K_COLS},
            {GGML_TYPE_Q5_K, ptile_q5_k_amx, pact_q8_k_amx, pact_q8_k_amx_bytes, AMX_K_COLS},
            {GGML_TYPE_Q6_K, ptile_q6_k_amx, pact_q8_k_amx, pact_q8_k_amx_bytes, AMX_K_COLS},
        };
        for (int t = 0; t < 6; t++) {
            struct qkernels *kt = &k[amx[t].type];
            kt->ptile = amx[t].ptile;
            kt->pact = amx[t].pact;
            kt->pact_bytes = amx[t].pact_bytes;
            kt->pgroup = 16; /* the columns of a tile */
            kt->pcols = amx[t].pcols;
            kt->pinexact = true;
        }
        return QK_X86_AMX;
    }
#endif
    return QK_X86_VNNI;
}

int qk_x86_level;

void qk_x86_init(struct qkernels *k)
{
    const bool no_vnni = getenv("BRASA_NO_VNNI") != NULL;
    int level = getenv("BRASA_NO_AVX512") ? (no_vnni ? QK_X86_AVX2 : QK_X86_AVX2_VNNI)
                : no_vnni                 ? QK_X86_AVX512
                : getenv("BRASA_NO_AMX")  ? QK_X86_VNNI
                                          : QK_X86_AMX;
    qk_x86_level = qk_x86_init_level(k, level);
}

#else
int qk_x86_level;

int qk_x86_init_level(struct qkernels *k, int max_level)
{
    (void)k;
    (void)max_level;
    return 0;
}

void qk_x86_init(struct qkernels *k)
{
    (void)k;
}
#endif
