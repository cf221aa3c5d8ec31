/* model: hyper-parameters, weights and graph builders of each model family.
 *
 * Each family (llama.c, qwen2.c, granite.c, qwen3.c, qwen35.c) is one short file with two
 * functions: load (read hyper-parameters from the GGUF keys, find and shape-check every tensor
 * it needs) and build (describe the forward pass as a graph of shared blocks, blocks.c).
 * arch.c maps general.architecture to the family. Weights stay inside the file mapping. */
#ifndef BRASA_MODEL_H
#define BRASA_MODEL_H
#include <stdbool.h>
#include <stdint.h>
#include "core/status.h"
#include "graph/graph.h"

struct gguf_file;

/* A weight: a view into the mapped file. ne as in GGUF (ne[0] = row length). */
struct mdl_w {
    char name[GRAPH_NAME_MAX]; /* "blk.0.attn_q.weight" */
    const void *data;   /* NULL when absent (optional tensors) */
    uint32_t type;      /* ggml type */
    int64_t ne[2];
    uint64_t nbytes;
};

struct mdl_layer {
    bool recurrent;                         /* qwen35: gated DeltaNet layer */
    struct mdl_w attn_norm;                 /* (n_embd) */
    struct mdl_w wq, wk, wv, wo;            /* wq (n_embd -> n_head*hd [*2 with gate]) ... */
    struct mdl_w bq, bk, bv;                /* qwen2 biases (absent elsewhere) */
    struct mdl_w q_norm, k_norm;            /* (hd) qwen3, qwen35 */
    struct mdl_w ffn_norm;                  /* (n_embd); qwen35: post_attention_norm */
    struct mdl_w ffn_gate, ffn_up, ffn_down;/* (n_embd -> n_ff), (n_ff -> n_embd) */
    /* qwen35 DeltaNet */
    struct mdl_w wqkv;                      /* n_embd -> 2*n_kh*dk + n_vh*dv */
    struct mdl_w wz;                        /* attn_gate: n_embd -> n_vh*dv */
    struct mdl_w conv1d;                    /* F32 (conv_k, channels) */
    struct mdl_w dt_bias, ssm_a;            /* F32 (n_vh) */
    struct mdl_w w_beta, w_alpha;           /* n_embd -> n_vh */
    struct mdl_w ssm_norm;                  /* (dv) */
    struct mdl_w ssm_out;                   /* n_vh*dv -> n_embd */
};

struct mdl_hparams {
    int n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
    int n_rot, rope_mode;       /* enum rope_mode */
    float rope_base, eps;
    float kq_scale;             /* 1/sqrt(head_dim) unless the family says otherwise */
    /* Granite multipliers (1 elsewhere) */
    float emb_scale, res_scale, logit_scale;
    /* qwen35 */
    int full_attn_interval, conv_k, ssm_dk, ssm_dv, ssm_n_kh, ssm_n_vh;
};

struct mdl;
struct blk;
struct mdl_arch {
    const char *name;
    brasa_status (*load)(struct mdl *m, const struct gguf_file *f, struct brasa_err *err);
    /* Adds the layers to the graph; returns the hidden state node after the last layer. */
    int (*build)(struct blk *b, int x);
};

struct mdl {
    const struct mdl_arch *arch;
    struct mdl_hparams hp;
    struct mdl_w token_embd, output_norm, output; /* output = token_embd when tied */
    struct mdl_layer *layers;                       /* [n_layer] */
    uint64_t n_params, weight_bytes_per_token;
    int tp_n;           /* a tensor-parallel shard (mdl_shard) of tp_n; 0: the whole model */
    int tp_rank;        /* which shard of tp_n */
    int tp_vocab0;      /* the shard's first token of the vocabulary (embedding, output head) */
};

/* Session buffers the graph reads and writes (one entry per layer; NULL where unused). */
struct mdl_cache {
    int n_ctx;
    uint32_t kv_type;           /* ggml type of the KV cache: F32 or F16 */
    void **k, **v;              /* [n_layer] -> (n_ctx, n_head_kv*hd) */
    float **conv;               /* [n_layer] -> (conv_k-1, channels) */
    float **ssm;                /* [n_layer] -> (n_vh, dv, dk) */
};

/* Finds the family of general.architecture; BRASA_EUNSUPPORTED naming it if unknown. */
brasa_status mdl_arch_find(const char *name, const struct mdl_arch **out, struct brasa_err *err);
/* Loads hyper-parameters and weights (m->layers is allocated; free with mdl_free). */
brasa_status mdl_load(struct mdl *m, const struct gguf_file *f, struct brasa_err *err);
void mdl_free(struct mdl *m);

/* Builds the forward graph for a batch of n_tok tokens. logits_all: logits of every position
 * (else only the last). The graph is planned (arena offsets set). */
brasa_status mdl_build(const struct mdl *m, const struct mdl_cache *c, int n_tok, bool logits_all,
                       struct graph *g, struct brasa_err *err);

/* Shard rank of n of a loaded model, for a model split over n devices (the rules of
 * gpu/split.h): its heads [rank H/n, (rank+1) H/n) of the attention (their rows of q, k, v and
 * the biases, their columns of the output projection), rows [rank F/n, (rank+1) F/n) of the FFN
 * (gate and up; down by columns), vocabulary rows [rank V/n, (rank+1) V/n) of the output head
 * (hp.n_vocab is that slice) and of the token embedding, and DeltaNet layers by K head with the
 * V heads that read it (their channels of the fused projection and the convolution, gates,
 * output columns); norms stay whole. Its graph (mdl_build) ends the embedding, the attention,
 * the DeltaNet mixer and the FFN in ALLREDUCE nodes; its logits are its slice of the
 * vocabulary. A slice of consecutive rows (q, k, v, gate, up, the vocabulary's) is read in m's
 * weights where it lies, so m must outlive the shard; the others (column slices: attention
 * output, FFN down, DeltaNet's) are copied into *mem (free it after mdl_free(out)).
 * BRASA_EUNSUPPORTED when heads, KV heads, the FFN width or the DeltaNet heads do not divide by
 * n; BRASA_EINVAL when a column slice would cut a quant block. */
brasa_status mdl_shard(const struct mdl *m, int rank, int n, struct mdl *out, void **mem,
                       struct brasa_err *err);

/* ---- helpers for the family files (blocks.c) ---- */
/* Graph-building context of the shared blocks. */
struct blk {
    const struct mdl *m;
    const struct mdl_cache *c;
    struct graph *g;
    int n_tok;
};
/* x += scale * branch (Granite's residual scale from hp), named "blk.N.<what>". */
int blk_residual(struct blk *b, int il, int x, int branch, const char *what);
/* RMSNorm(x) * w, named "blk.N.<what>". */
int blk_norm(struct blk *b, int il, int x, const struct mdl_w *w, const char *what);
/* Self-attention of layer il on the normed input: q/k/v projections (+bias), optional per-head
 * q/k norm, RoPE, KV store, GQA attention, optional sigmoid gate (gated: query|gate
 * interleaved per head in wq), output projection. */
int blk_attention(struct blk *b, int il, int xn, bool gated);
/* SwiGLU FFN on the normed input: down(silu(gate x) * up x). */
int blk_ffn(struct blk *b, int il, int xn);
/* Qwen3.5 gated DeltaNet mixer on the normed input. */
int blk_deltanet(struct blk *b, int il, int xn);
/* The standard pre-norm decoder stack: x += attn(norm(x)); x += ffn(norm(x)) per layer. */
int blk_decoder(struct blk *b, int x);
/* Reads the common transformer keys "<arch>.*" into hp. */
brasa_status mdl_read_common(struct mdl *m, const struct gguf_file *f, struct brasa_err *err);
/* Finds tensor name (printf-style) and checks its shape; ne1 = 0 for a vector, which must be
 * F32 (mdl_need_f32). Missing: BRASA_ENOTFOUND naming it, unless optional (then w->data stays
 * NULL). */
brasa_status mdl_tensor(const struct gguf_file *f, struct mdl_w *w, bool optional, int64_t ne0,
                        int64_t ne1, struct brasa_err *err, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
/* BRASA_EUNSUPPORTED naming the tensor unless w is absent or F32: what the graph reads as
 * floats itself (vectors, which mdl_tensor checks; convolutions), not through a product. */
brasa_status mdl_need_f32(const struct mdl_w *w, struct brasa_err *err);
/* token_embd, output_norm, output (tied when absent) and, per layer, the standard attention
 * (q, k, v, o with optional biases and q/k norms) and SwiGLU FFN tensors. */
brasa_status mdl_load_dense(struct mdl *m, const struct gguf_file *f, bool biases, bool qk_norm,
                            struct brasa_err *err);

#endif
