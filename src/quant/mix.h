/* Tensor-type mixes: which ggml type each tensor of a model gets under a file type such as
 * Q4_K_M. The rules are llama.cpp's (llama-quant.cpp), so a file we write has the same types as
 * one llama-quantize writes: the output matrix (or the tied embedding) gets Q6_K, attn_v/attn_qkv
 * and ffn_down get Q6_K in the layers "use_more_bits" picks (Q4_K_M, Q5_K_M), rows that do not
 * split into 256-blocks fall back to a 32-block type, and 1-D tensors, norms and ssm_conv1d
 * stay F32. */
#ifndef BRASA_QUANT_MIX_H
#define BRASA_QUANT_MIX_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* general.file_type values (llama.cpp's llama_ftype numbering). */
enum quant_ftype {
    FTYPE_ALL_F32 = 0,
    FTYPE_F16 = 1,
    FTYPE_Q4_0 = 2,
    FTYPE_Q4_1 = 3,
    FTYPE_Q8_0 = 7,
    FTYPE_Q5_0 = 8,
    FTYPE_Q5_1 = 9,
    FTYPE_Q4_K_S = 14,
    FTYPE_Q4_K_M = 15,
    FTYPE_Q5_K_S = 16,
    FTYPE_Q5_K_M = 17,
    FTYPE_Q6_K = 18,
    FTYPE_BF16 = 32,
};

/* "q4_k_m" (any case) -> FTYPE_Q4_K_M; -1 if not a mix brasa writes. */
int quant_ftype_by_name(const char *name);
/* "Q4_K_M"; NULL if unknown. */
const char *quant_ftype_name(int ftype);
/* A comma-separated list of the names quant_ftype_by_name accepts (for messages). */
const char *quant_ftype_list(void);

/* Counters that carry across the tensors of one file, in file order. */
struct quant_mix {
    int ftype;
    bool tied;          /* no output.weight: token_embd is the output matrix */
    int n_attn_v, i_attn_v;
    int n_ffn_down, i_ffn_down;
};

/* names: every tensor name of the file (to count attn_v and ffn_down and see output.weight). */
void quant_mix_begin(struct quant_mix *m, int ftype, const char *const *names, size_t n);
/* Type of the next tensor (call in file order). ne[0] is the row length. */
uint32_t quant_mix_type(struct quant_mix *m, const char *name, int n_dims, const int64_t *ne);

#endif
