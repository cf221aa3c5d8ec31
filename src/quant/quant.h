/* ggml's tensor block formats: descriptions, (de)quantization, and dot products.
 *
 * Layouts follow ggml byte for byte (see the block structs in quant_blocks.h). Each format has a
 * scalar reference and, where it pays, SIMD versions chosen at run time that give bit-identical
 * dequantized values. Dot products take the weight row in its own format and the activation row
 * already converted to the format's vec_dot_type (as ggml's CPU backend does), which is what
 * the golden logits were computed with.
 *
 * Files: quant_blocks.h (structs, size asserts), quant.c (table, dispatch, threaded matmul),
 * quant_ref.c (scalar kernels), quant_x86.c (AVX2 / AVX-512 kernels), quantize.c (quant_row),
 * mix.h (which tensor gets which type in a file-type mix). BRASA_NO_SIMD=1 in the environment
 * keeps the scalar kernels, BRASA_NO_AVX512=1 stops at AVX2 (both read once, at first use). */
#ifndef BRASA_QUANT_H
#define BRASA_QUANT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "core/status.h"

struct pool;

enum ggml_type {
    GGML_TYPE_F32 = 0,
    GGML_TYPE_F16 = 1,
    GGML_TYPE_Q4_0 = 2,
    GGML_TYPE_Q4_1 = 3,
    GGML_TYPE_Q5_0 = 6,
    GGML_TYPE_Q5_1 = 7,
    GGML_TYPE_Q8_0 = 8,
    GGML_TYPE_Q8_1 = 9,
    GGML_TYPE_Q2_K = 10,
    GGML_TYPE_Q3_K = 11,
    GGML_TYPE_Q4_K = 12,
    GGML_TYPE_Q5_K = 13,
    GGML_TYPE_Q6_K = 14,
    GGML_TYPE_Q8_K = 15,
    GGML_TYPE_BF16 = 30,
    GGML_TYPE_COUNT = 40
};

struct qtype_info {
    const char *name;     /* "Q4_K" */
    int block;            /* elements per block */
    size_t block_bytes;   /* bytes per block */
    uint32_t vec_dot_type;/* activation format its dot product takes */
    bool can_dequant;     /* brasa can decode it */
    bool can_quant;       /* brasa can encode it */
};

/* NULL for ids brasa does not know (the GGUF reader rejects those). */
const struct qtype_info *qtype_get(uint32_t type);
/* Type id by name ("q4_k", case-insensitive); -1 if unknown. */
int qtype_by_name(const char *name);
/* Bytes of a row of n elements; 0 if n is not a whole number of blocks or type unknown. */
size_t qtype_row_bytes(uint32_t type, int64_t n);

/* Dequantize n elements (a multiple of the block size). Fast path (SIMD where available). */
brasa_status dequant_row(uint32_t type, const void *src, float *dst, int64_t n, struct brasa_err *err);
/* Plain scalar reference; same bits as dequant_row. */
brasa_status dequant_row_ref(uint32_t type, const void *src, float *dst, int64_t n, struct brasa_err *err);

/* Quantize n floats into dst (qtype_row_bytes(type, n) bytes), as llama-quantize does without
 * an importance matrix (the same bytes on the fixtures). Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K,
 * Q5_K, Q6_K, plus F32/F16/BF16/Q8_1/Q8_K through quant_act_row. BRASA_EUNSUPPORTED for
 * Q2_K/Q3_K, BRASA_EINVAL when n is not a whole number of blocks. */
brasa_status quant_row(uint32_t type, const float *src, void *dst, int64_t n, struct brasa_err *err);

/* Converts n activations to an activation format (Q8_0, Q8_1, Q8_K, F16, BF16, F32) exactly as
 * ggml's x86 CPU backend does before its dot products (Q8_0/Q8_1: d = amax/127 as fp16,
 * q = round-half-even(x * 127/amax); Q8_K: iscale = -127/max, q = min(127, round(iscale*x)),
 * d = 1/iscale, bsums). quant_row(Q8_0) instead writes what llama-quantize writes. */
brasa_status quant_act_row(uint32_t type, const float *src, void *dst, int64_t n,
                           struct brasa_err *err);

/* Dot product of one weight row (type wtype) and one activation row in
 * qtype_get(wtype)->vec_dot_type, n elements. */
float quant_vec_dot(uint32_t wtype, int64_t n, const void *w_row, const void *a_row);
/* The same through the plain scalar kernels (for tests). */
float quant_vec_dot_ref(uint32_t wtype, int64_t n, const void *w_row, const void *a_row);

/* Y[m][i] = sum_k W[i][k] * X[m][k] for i < n_rows, m < n_cols: W is n_rows rows of k elements
 * in wtype, X is n_cols rows of k floats, Y is n_cols rows of n_rows floats. X is first converted
 * to vec_dot_type (scratch: quant_matmul_scratch_bytes). Threads split the rows of W. */
size_t quant_matmul_scratch_bytes(uint32_t wtype, int64_t k, int64_t n_cols);
/* The CPU kernels chosen for this processor, in words ("AVX2", "AVX-512 VNNI", ...). */
const char *quant_cpu_kernels(void);
/* Whether a batch of n_cols gives exactly the results of one column at a time (quant_vec_dot):
 * true but where the CPU's prompt kernels add in another order (AMX tiles: within rounding). */
bool quant_matmul_exact(uint32_t wtype, int64_t n_cols);
void quant_matmul(struct pool *pool, uint32_t wtype, const void *W, int64_t n_rows, int64_t k,
                  const float *X, int64_t n_cols, float *Y, void *scratch);

/* ---- half and bfloat16 ---- */
static inline float fp16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) {
                man <<= 1;
                exp--;
            }
            man &= 0x3ff;
            bits = sign | (exp << 23) | (man << 13);
        }
    } else if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Round to nearest even, as the hardware conversion does. */
static inline uint16_t f32_to_fp16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN */
        return (uint16_t)(sign | 0x7e00);
    if (ax >= 0x477ff000u) /* overflow (after rounding) -> inf */
        return (uint16_t)(sign | 0x7c00);
    if (ax < 0x38800000u) { /* subnormal or zero in half */
        if (ax < 0x33000000u)
            return (uint16_t)sign;
        uint32_t e = ax >> 23, m = (ax & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t half = m >> shift, rem = m & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t r = ax + 0x0fff + ((ax >> 13) & 1) - ((127 - 15) << 23);
    return (uint16_t)(sign | (r >> 13));
}

static inline float bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 64); /* quiet NaN */
    return (uint16_t)((x + (0x7fff + ((x >> 16) & 1))) >> 16);
}

#endif
