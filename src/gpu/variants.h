/* variants: every kernel module brasa can choose, in order of preference per purpose.
 * The backend takes the first variant of a purpose that compiles and does not spill; the
 * compile test (tests/test_gpu_compile.c) compiles every entry for every supported arch. */
#ifndef BRASA_GPU_VARIANTS_H
#define BRASA_GPU_VARIANTS_H
#include "gpu/jit.h"

#define GV_MAX_DEFS 14

struct gpu_variant {
    const char *tmpl;                 /* "matvec.cu" */
    int n_defs;                       /* set by the list functions: the defs named */
    struct jit_def defs[GV_MAX_DEFS];
};

/* Candidates for matvec.cu of weight type wtype with nc columns per pass (1: decode with
 * BRASA_GPU_MVD=0, 8: prompt batches off the tensor cores), plain or gate+up SwiGLU (glu);
 * returns their count (0 if the type has no kernel) and fills out[0..count). */
int gpu_matvec_variants(unsigned wtype, int nc, int glu, struct gpu_variant *out, int cap);
/* Candidates for the decode product (mvd.cu) of weight type wtype, plain or gate+up (glu),
 * nr weight rows per lane group (1, 2 or 4; at least 2 with glu) and ks warps per group (1, 2
 * or 4); xc: blocks (one per SM) that convert the activation themselves (mvd.cu XC); rp: 1, the
 * RoPE and KV-cache writes in the epilogue (mvd.cu RP), 2, the DeltaNet's convolution of
 * MVD_CV_TAPS taps over the first weight's rows (mvd.cu CV; neither with glu); kp: the elements of a
 * lane's piece, 32, or 64 for Q4_K and Q6_K (pieces of 32 bytes, half as many in flight);
 * returns their count (0: no such kernel). */
int gpu_mvd_variants(unsigned wtype, int glu, int nr, int ks, int xc, int rp, int kp,
                     struct gpu_variant *out, int cap);
/* The taps of the convolutions the decode product does in its epilogue (Qwen3.5's). */
#define MVD_CV_TAPS 4
/* Candidates for the decode product of a q/k/v launch whose q and k weights have type wtype
 * and whose v has type qt2 (mvd.cu QT2: the blocks of v's rows in qt2's code), in rows of 2,
 * pieces of 64 values: Q4_K with Q6_K (the v weights of half the layers of Q4_K_M files); ks
 * and rp as above; returns their count (0: no such pair). */
int gpu_mvd_mix_variants(unsigned wtype, unsigned qt2, int ks, int rp, struct gpu_variant *out,
                         int cap);
/* Whether decode products of weight type wtype convert their own activation (mvd.cu XC). */
int gpu_mvd_xc(unsigned wtype);
/* The tensor-core batch product (mmt.cu) of weight type wtype, plain or gate+up: candidates in
 * order of preference, for quantized weights with dq first those that dequantize into F16
 * tiles (they take quant_act's F16 activation and tiles of 128 rows), and with wg first one on
 * Hopper's warpgroup products (sm_90 only; wg 1: F16 / BF16 in unswizzled tiles, 2: in the
 * 128-byte swizzle, 3: that, and quantized weights with dq in the same tiles); dq 2 with wg 3
 * (Q4_K / Q5_K): first the exact products on those tiles (KX: the integer values times their
 * sub-block scales, quant_act's int8 values, each 256-block scaled at its end), then the
 * candidates of dq 0; cap at least 8; returns their count (0: no such kernel). */
int gpu_mmt_variants(unsigned wtype, int glu, int dq, int wg, struct gpu_variant *out, int cap);
/* All variants (for the compile tests): fills out, returns the count; GV_ALL_MAX holds them
 * with room to spare (the tests fail when the count reaches it, as the list would be cut). */
#define GV_ALL_MAX 768
int gpu_all_variants(struct gpu_variant *out, int cap);
/* Whether a variant's template runs on NVIDIA GPUs alone (mvf.cu: on AMD it renders as a
 * kernel that traps, and the host never picks it there). */
int gpu_variant_cuda_only(const struct gpu_variant *v);
/* Weight types with a matvec kernel. */
extern const unsigned gpu_matvec_types[];
extern const int gpu_n_matvec_types;

#endif
