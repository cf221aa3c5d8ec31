/* The block structs of ggml's formats, byte for byte (fp16 fields are raw uint16_t bits).
 * Every block's size is asserted: a GGUF tensor's bytes are an array of these. */
#ifndef BRASA_QUANT_BLOCKS_H
#define BRASA_QUANT_BLOCKS_H
#include <assert.h>
#include <stdint.h>

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK_K 256
#define K_SCALE_SIZE 12

/* y = d * (q - 8); q[j] in the low nibble of qs[j], q[j+16] in the high nibble. */
typedef struct {
    uint16_t d;
    uint8_t qs[QK4_0 / 2];
} block_q4_0;

/* y = d * q + m */
typedef struct {
    uint16_t d, m;
    uint8_t qs[QK4_1 / 2];
} block_q4_1;

/* 5th bit of q[j] is bit j of qh (little-endian uint32); y = d * (q - 16). */
typedef struct {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[QK5_0 / 2];
} block_q5_0;

typedef struct {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[QK5_1 / 2];
} block_q5_1;

typedef struct {
    uint16_t d;
    int8_t qs[QK8_0];
} block_q8_0;

/* s = d * sum(qs), used by the Q4_1/Q5_1 dot products for the min term. */
typedef struct {
    uint16_t d, s;
    int8_t qs[QK8_1];
} block_q8_1;

/* 16 sub-blocks of 16: scales[i] = scale (low nibble) | min (high nibble). */
typedef struct {
    uint8_t scales[QK_K / 16];
    uint8_t qs[QK_K / 4];
    uint16_t d, dmin;
} block_q2_K;

/* 2 low bits in qs, the high bit in hmask (set = no -4); 16 6-bit scales packed in 12 bytes. */
typedef struct {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[K_SCALE_SIZE];
    uint16_t d;
} block_q3_K;

/* 8 sub-blocks of 32 with 6-bit scale and min packed in scales[12]; y = d*sc*q - dmin*m. */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qs[QK_K / 2];
} block_q4_K;

typedef struct {
    uint16_t d, dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} block_q5_K;

/* 4 low bits in ql, 2 high bits in qh, 16 int8 scales; y = d * sc * (q - 32). */
typedef struct {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    uint16_t d;
} block_q6_K;

/* Activations of the K-quant dot products: float scale, sums of each 16 quants. */
typedef struct {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];
} block_q8_K;

static_assert(sizeof(block_q4_0) == 18, "block_q4_0 size");
static_assert(sizeof(block_q4_1) == 20, "block_q4_1 size");
static_assert(sizeof(block_q5_0) == 22, "block_q5_0 size");
static_assert(sizeof(block_q5_1) == 24, "block_q5_1 size");
static_assert(sizeof(block_q8_0) == 34, "block_q8_0 size");
static_assert(sizeof(block_q8_1) == 36, "block_q8_1 size");
static_assert(sizeof(block_q2_K) == 84, "block_q2_K size");
static_assert(sizeof(block_q3_K) == 110, "block_q3_K size");
static_assert(sizeof(block_q4_K) == 144, "block_q4_K size");
static_assert(sizeof(block_q5_K) == 176, "block_q5_K size");
static_assert(sizeof(block_q6_K) == 210, "block_q6_K size");
static_assert(sizeof(block_q8_K) == 292, "block_q8_K size");

/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block: j < 4 in the low 6 bits
 * of bytes j and j+4; j >= 4 in the nibbles of byte j+4 plus the top 2 bits of bytes j-4, j. */
static inline void kq_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* The 16 6-bit scales of a Q3_K block (low 4 bits in bytes 0..7, high 2 bits in bytes 8..11),
 * minus the bias of 32. */
static inline void q3k_scales(const uint8_t *s12, int8_t out[16])
{
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? (s12[j] & 0xF) : (s12[j - 8] >> 4);
        int hi = (s12[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
        out[j] = (int8_t)((lo | (hi << 4)) - 32);
    }
}

#endif
