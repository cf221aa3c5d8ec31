/* Tensor-parallel split plan: how a model's weights and KV cache would be shared out over
 * several GPUs (1..SPLIT_MAX_GPUS), computed from the GGUF file alone.
 *
 * Row split (each GPU holds a slice of the output rows, ne[1]): the Q/K/V, fused QKV and gate
 * projections, the FFN gate and up, ssm_in, the DeltaNet beta / alpha projections and
 * convolution, and the vocabulary tensors token_embd/output (their rows shared as evenly as
 * possible); the 1-D attention biases (attn_q/k/v.bias) and DeltaNet ssm_dt.bias / ssm_a along
 * ne[0]. These are the bytes model/shard.c puts on each shard (test_split checks it).
 * Column split (each GPU holds a slice of every row, ne[0]): attn_output, ffn_down, ssm_out;
 * the slice must be a whole number of quant blocks. Everything else is replicated.
 *
 * The attention heads and KV heads (and, where present, the SSM groups and time-step rank)
 * must divide by the GPU count, and so must the FFN width; when a rule fails the plan is not
 * ok and `why` names the tensor or hyper-parameter with its numbers. */
#ifndef BRASA_GPU_SPLIT_H
#define BRASA_GPU_SPLIT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/status.h"

struct gguf_file;

#define SPLIT_MAX_GPUS 8

struct split_plan {
    int n_gpus;
    int n_ctx;
    bool ok;
    char why[256];                  /* when !ok: the first rule that failed */
    uint64_t weights[SPLIT_MAX_GPUS]; /* weight bytes on each GPU, replicated ones included */
    uint64_t kv[SPLIT_MAX_GPUS];      /* F16 KV cache bytes on each GPU at n_ctx */
    uint64_t replicated;            /* bytes every GPU holds in full */
    uint64_t total;                 /* bytes of all tensors in the file */
    int n_row, n_col, n_rep;        /* tensors row-split, column-split, replicated */
    int n_attn_layers;              /* layers with attention (a blk.N.attn_k.weight) */
};

/* Fills p for n_gpus GPUs and a context of n_ctx tokens. A split that does not fit is a plan
 * with ok = false; BRASA_EINVAL for n_gpus outside 1..SPLIT_MAX_GPUS or n_ctx < 1, BRASA_ENOTFOUND
 * / BRASA_EFORMAT when the file lacks (or garbles) the architecture or its head counts. */
brasa_status split_plan_make(const struct gguf_file *f, int n_gpus, int n_ctx,
                             struct split_plan *p, struct brasa_err *err);

/* Copies rows [r0, r1) and columns [c0, c1) of a row-major matrix of type t with k columns
 * (ggml's block layout) into out, row-major with c1 - c0 columns: one GPU's shard of a row- or
 * column-split weight. Columns must be whole blocks; BRASA_EINVAL otherwise. */
brasa_status split_slice(uint32_t t, const void *w, int64_t k, int64_t r0, int64_t r1,
                         int64_t c0, int64_t c1, void *out, struct brasa_err *err);
/* The same with the rows of out pitch bytes apart (several column ranges side by side). */
brasa_status split_slice_pitch(uint32_t t, const void *w, int64_t k, int64_t r0, int64_t r1,
                               int64_t c0, int64_t c1, void *out, size_t pitch,
                               struct brasa_err *err);

#endif
