/* Synthetic models: random weights in the exact shapes of real model families, with a valid
 * tokenizer of the real vocabulary size, so anyone can run and benchmark brasa without
 * downloading weights. The file is an ordinary GGUF file any GGUF reader accepts.
 *
 * Weights are uniform random with a per-matrix scale of 1/sqrt(fan-in) (norm weights near 1,
 * the output matrix scaled so that logits spread over a few units, output projections larger
 * than a tied embedding so the model does not just echo its input), a function of the seed and
 * the tensor name alone (the same seed gives the same file whatever the thread count). Types
 * follow the file-type mix of quant/mix.h; a quantized matrix is assembled from a pool of
 * blocks quant_row() made from random values of its scale (see synth.c), so that a 7B file is
 * written at disk speed. Tensors are streamed to disk one by one: memory stays small. */
#ifndef BRASA_SYNTH_H
#define BRASA_SYNTH_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

enum synth_vocab_kind {
    SYNTH_VOCAB_QWEN2,   /* byte-level BPE, pre "qwen2", ChatML specials */
    SYNTH_VOCAB_QWEN3,   /* as qwen2 plus <think> and tool tokens */
    SYNTH_VOCAB_QWEN35,  /* byte-level BPE, pre "qwen35" */
    SYNTH_VOCAB_LLAMA3,  /* byte-level BPE, pre "llama-bpe", 256 specials after the BPE tokens */
    SYNTH_VOCAB_GRANITE, /* byte-level BPE, pre "refact", StarCoder specials first */
    SYNTH_VOCAB_SPM,     /* SentencePiece (Llama 2 / TinyLlama layout) */
};

struct synth_shape {
    const char *arch;   /* general.architecture */
    const char *shape;  /* "0.5b", "tiny", ... */
    const char *name;   /* the real model whose shape this is */
    int n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_ctx, n_vocab;
    int n_bpe;          /* tokens made of bytes and merges (the rest are specials and padding) */
    enum synth_vocab_kind vocab;
    float rope_theta, rms_eps;
    int rope_dims;
    bool tied, qkv_bias, qk_norm;
    float emb_scale, res_scale, attn_scale, logit_scale; /* granite */
    int full_attn_interval, ssm_conv, ssm_k_heads, ssm_v_heads, ssm_head_dim; /* qwen35 */
    int rope_sections[4];
};

/* The table of shapes; *n receives its length. */
const struct synth_shape *synth_shapes(size_t *n);
const struct synth_shape *synth_find(const char *arch, const char *shape);

struct synth_opts {
    const char *arch, *shape;
    int ftype;            /* quant/mix.h enum quant_ftype */
    uint64_t seed;
    int n_threads;        /* 0: all cores */
    void (*progress)(void *ud, float fraction);
    void *progress_ud;
};

struct synth_stats {
    uint64_t n_params, file_bytes;
    int n_tensors;
};

brasa_status synth_write(const char *path, const struct synth_opts *o, struct synth_stats *stats,
                         struct brasa_err *err);

/* ---- the tokenizer (synth_vocab.c) ---- */
struct synth_vocab {
    int n;                 /* tokens */
    char **tokens;         /* [n] */
    int32_t *types;        /* [n]: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte */
    float *scores;         /* [n] (SentencePiece) or NULL */
    char **merges;         /* [n_merges] "left right" (BPE) */
    size_t n_merges;
    const char *model, *pre, *chat_template;
    int32_t bos, eos, eot, pad, unk;
    bool add_bos;
    char *arena_;
};
brasa_status synth_vocab_make(const struct synth_shape *s, struct synth_vocab *v, struct brasa_err *err);
void synth_vocab_free(struct synth_vocab *v);

#endif
