/* Internal to src/quant: the per-format kernel table that quant.c dispatches through.
 * quant_ref.c fills it with scalar code; quant_x86.c replaces entries with SIMD versions
 * when the CPU has the features (checked once at run time). */
#ifndef BRASA_QUANT_IMPL_H
#define BRASA_QUANT_IMPL_H
#include <stdbool.h>
#include <stdint.h>

#include "quant/quant.h"
#include "quant/quant_blocks.h"

/* nb whole blocks of src -> nb * block floats. */
typedef void (*qk_dequant_fn)(const void *src, float *dst, int64_t nb);
/* n elements (a whole number of blocks) of weight row w and activation row a. */
typedef float (*qk_dot_fn)(int64_t n, const void *w, const void *a);
/* n floats -> activation blocks, exactly as ggml's x86 CPU backend converts them. */
typedef void (*qk_act_fn)(const float *x, void *dst, int64_t n);
/* Several rows of w against several activation rows:
 * y[c * ldy + r] = dot(w + r * w_stride, a + c * a_stride), r < nr, c < nc. */
typedef void (*qk_dot_tile_fn)(int64_t n, const void *w, size_t w_stride, int nr, const void *a,
                               size_t a_stride, int nc, float *y, size_t ldy);

struct qkernels {
    qk_dequant_fn dequant;
    qk_dot_fn dot;
    qk_act_fn act; /* only for the types that are some format's vec_dot_type */
    qk_dot_tile_fn tile; /* optional */
    qk_dot_tile_fn tile1; /* optional: the tile for one column (decode), where that is another */
    /* Optional, for prompt batches: a tile that reads its activations in a layout of its own,
     * which pact writes from floats (pact_bytes(n) bytes a row of n). The values are those of
     * act, only laid out for the tile; ptile gives exactly what dot gives unless pinexact. With
     * pgroup > 0, columns are interleaved in groups of pgroup, 4 bytes each in turn: column c
     * starts at (c / pgroup) * pgroup * pact_bytes(n) + (c % pgroup) * 4, and pact writes it
     * with that spacing. pcols: the most columns one ptile call takes (0: quant.c's default). */
    qk_dot_tile_fn ptile;
    qk_act_fn pact;
    size_t (*pact_bytes)(int64_t n);
    int pgroup, pcols;
    bool pinexact;
};

/* nr rows of w against nc activation columns (quant_matmul without a prepared layout): tile1
 * for one column where the type has it, else its tile, else a dot product a pair. */
void qk_tile(const struct qkernels *kw, int64_t n, const uint8_t *w, size_t ws, int nr,
             const uint8_t *a, size_t as, int nc, float *y, size_t ldy);

/* One entry per ggml type id (GGML_TYPE_COUNT); zero entries for unknown ids. */
extern struct qkernels qk_ref[GGML_TYPE_COUNT];
void qk_ref_init(void);
/* Overrides entries of k with SIMD kernels the CPU supports (no-op off x86), up to the
 * BRASA_NO_VNNI / BRASA_NO_AVX512 limits of the environment. */
void qk_x86_init(struct qkernels *k);
/* The same up to a level (QK_X86_*); returns the level the CPU gave (0: none). For tests,
 * which check every level the CPU has. */
enum {
    QK_X86_AVX2 = 1,      /* AVX2, FMA, F16C */
    QK_X86_AVX2_VNNI = 2, /* and AVX-VNNI (256-bit) where the CPU has it */
    QK_X86_AVX512 = 3,    /* AVX-512 F/BW/VL/DQ */
    QK_X86_VNNI = 4,      /* and AVX-512 VNNI */
    QK_X86_AMX = 5,       /* and AMX-INT8 tiles, where the OS grants them (Linux) */
};
int qk_x86_init_level(struct qkernels *k, int max_level);
/* The level qk_x86_init chose (0 before it ran, or off x86). */
extern int qk_x86_level;

/* ggml's nearest_int: round to nearest, ties to even (|x| < 2^22). */
static inline int qk_nearest_int(float x)
{
    float v = x + 12582912.f;
    int32_t i;
    memcpy(&i, &v, 4);
    return (i & 0x007fffff) - 0x00400000;
}

#endif
