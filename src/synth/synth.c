/* Synthetic models: shapes of real families, random weights, streamed GGUF output. */
#include "synth/synth.h"

#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/platform.h"
#include "core/pool.h"
#include "gguf/gguf.h"
#include "quant/mix.h"
#include "quant/quant.h"

/* Shapes from the models' published configurations (config.json). The "tiny" shapes keep each
 * family's structure (GQA, biases, norms, hybrid layers, specials) at a few MB. */
#define LLAMA_COMMON .vocab = SYNTH_VOCAB_SPM, .rms_eps = 1e-5f
static const struct synth_shape SHAPES[] = {
    /* arch, shape, name, layers, embd, heads, kv, head_dim, ffn, ctx, vocab, n_bpe */
    {"llama", "tiny", "tiny llama (SentencePiece)", 2, 256, 4, 2, 64, 768, 2048, 4096, 0, LLAMA_COMMON,
     .rope_theta = 10000, .rope_dims = 64},
    {"llama", "1b", "TinyLlama-1.1B", 22, 2048, 32, 4, 64, 5632, 2048, 32000, 0, LLAMA_COMMON,
     .rope_theta = 10000, .rope_dims = 64},
    {"llama", "8b", "Meta-Llama-3-8B", 32, 4096, 32, 8, 128, 14336, 8192, 128256, 128000,
     .vocab = SYNTH_VOCAB_LLAMA3, .rms_eps = 1e-5f, .rope_theta = 500000, .rope_dims = 128},
    {"qwen2", "tiny", "tiny qwen2", 2, 256, 4, 2, 64, 768, 4096, 4118, 4096, .vocab = SYNTH_VOCAB_QWEN2,
     .rms_eps = 1e-6f, .rope_theta = 1e6f, .rope_dims = 64, .qkv_bias = true, .tied = true},
    /* (heads of 128, as the real models: what a GPU renders its attention for) */
    {"qwen2", "tiny128", "tiny qwen2, heads of 128", 2, 512, 4, 2, 128, 1024, 4096, 4118, 4096,
     .vocab = SYNTH_VOCAB_QWEN2, .rms_eps = 1e-6f, .rope_theta = 1e6f, .rope_dims = 128,
     .qkv_bias = true, .tied = true},
    {"qwen2", "0.5b", "Qwen2.5-0.5B", 24, 896, 14, 2, 64, 4864, 32768, 151936, 151643,
     .vocab = SYNTH_VOCAB_QWEN2, .rms_eps = 1e-6f, .rope_theta = 1e6f, .rope_dims = 64, .qkv_bias = true,
     .tied = true},
    {"qwen2", "1.5b", "Qwen2.5-1.5B", 28, 1536, 12, 2, 128, 8960, 32768, 151936, 151643,
     .vocab = SYNTH_VOCAB_QWEN2, .rms_eps = 1e-6f, .rope_theta = 1e6f, .rope_dims = 128, .qkv_bias = true,
     .tied = true},
    {"qwen2", "7b", "Qwen2.5-7B", 28, 3584, 28, 4, 128, 18944, 32768, 152064, 151643,
     .vocab = SYNTH_VOCAB_QWEN2, .rms_eps = 1e-6f, .rope_theta = 1e6f, .rope_dims = 128, .qkv_bias = true},
    {"qwen2", "32b", "Qwen2.5-32B", 64, 5120, 40, 8, 128, 27648, 32768, 152064, 151643,
     .vocab = SYNTH_VOCAB_QWEN2, .rms_eps = 1e-6f, .rope_theta = 1e6f, .rope_dims = 128, .qkv_bias = true},
    {"granite", "tiny", "tiny granite", 2, 256, 4, 2, 64, 768, 4096, 4096, 4093, .vocab = SYNTH_VOCAB_GRANITE,
     .rms_eps = 1e-5f, .rope_theta = 10000, .rope_dims = 64, .tied = true, .emb_scale = 12.0f,
     .res_scale = 0.22f, .attn_scale = 0.015625f, .logit_scale = 8.0f},
    {"granite", "2b", "granite-3.1-2b", 40, 2048, 32, 8, 64, 8192, 131072, 49155, 49152,
     .vocab = SYNTH_VOCAB_GRANITE, .rms_eps = 1e-5f, .rope_theta = 5e6f, .rope_dims = 64, .tied = true,
     .emb_scale = 12.0f, .res_scale = 0.22f, .attn_scale = 0.015625f, .logit_scale = 8.0f},
    {"granite", "8b", "granite-3.1-8b", 40, 4096, 32, 8, 128, 12800, 131072, 49155, 49152,
     .vocab = SYNTH_VOCAB_GRANITE, .rms_eps = 1e-5f, .rope_theta = 1e7f, .rope_dims = 128, .tied = true,
     .emb_scale = 12.0f, .res_scale = 0.22f, .attn_scale = 0.0078125f, .logit_scale = 16.0f},
    {"qwen3", "tiny", "tiny qwen3", 2, 256, 4, 2, 64, 768, 4096, 4122, 4096, .vocab = SYNTH_VOCAB_QWEN3,
     .rms_eps = 1e-6f, .rope_theta = 1e6f, .rope_dims = 64, .qk_norm = true, .tied = true},
    {"qwen3", "0.6b", "Qwen3-0.6B", 28, 1024, 16, 8, 128, 3072, 40960, 151936, 151643,
     .vocab = SYNTH_VOCAB_QWEN3, .rms_eps = 1e-6f, .rope_theta = 1e6f, .rope_dims = 128, .qk_norm = true,
     .tied = true},
    {"qwen3", "8b", "Qwen3-8B", 36, 4096, 32, 8, 128, 12288, 40960, 151936, 151643,
     .vocab = SYNTH_VOCAB_QWEN3, .rms_eps = 1e-6f, .rope_theta = 1e6f, .rope_dims = 128, .qk_norm = true},
    {"qwen35", "tiny", "tiny qwen3.5 hybrid", 4, 256, 4, 2, 64, 768, 4096, 4122, 4096,
     .vocab = SYNTH_VOCAB_QWEN35, .rms_eps = 1e-6f, .rope_theta = 1e7f, .rope_dims = 32, .qk_norm = true,
     .tied = true, .full_attn_interval = 2, .ssm_conv = 4, .ssm_k_heads = 2, .ssm_v_heads = 4,
     .ssm_head_dim = 64, .rope_sections = {6, 5, 5, 0}},
    /* (attention heads of 256, as the real models': what a GPU renders its attention for) */
    {"qwen35", "tiny256", "tiny qwen3.5 hybrid, heads of 256", 2, 512, 4, 2, 256, 1024, 4096, 4122,
     4096, .vocab = SYNTH_VOCAB_QWEN35, .rms_eps = 1e-6f, .rope_theta = 1e7f, .rope_dims = 64,
     .qk_norm = true, .tied = true, .full_attn_interval = 2, .ssm_conv = 4, .ssm_k_heads = 2,
     .ssm_v_heads = 4, .ssm_head_dim = 128, .rope_sections = {11, 11, 10, 0}},
    {"qwen35", "4b", "Qwen3.5-4B", 32, 2560, 16, 4, 256, 9216, 262144, 248320, 248044,
     .vocab = SYNTH_VOCAB_QWEN35, .rms_eps = 1e-6f, .rope_theta = 1e7f, .rope_dims = 64, .qk_norm = true,
     .tied = true, .full_attn_interval = 4, .ssm_conv = 4, .ssm_k_heads = 16, .ssm_v_heads = 32,
     .ssm_head_dim = 128, .rope_sections = {11, 11, 10, 0}},
};

const struct synth_shape *synth_shapes(size_t *n)
{
    *n = sizeof SHAPES / sizeof SHAPES[0];
    return SHAPES;
}

const struct synth_shape *synth_find(const char *arch, const char *shape)
{
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++)
        if (!strcmp(SHAPES[i].arch, arch) && !strcasecmp(SHAPES[i].shape, shape))
            return &SHAPES[i];
    return NULL;
}

/* ---- the tensors of a shape ---- */

enum init_kind {
    INIT_MATRIX, /* uniform, standard deviation `scale` */
    INIT_NORM,   /* 1 + small noise */
    INIT_BIAS,   /* small */
    INIT_SSM_A,  /* -exp(A_log), A_log in [0, log 16] */
    INIT_DT_BIAS,/* inverse softplus of a time step in [1e-3, 1e-1] */
};

struct tspec {
    char name[64];
    int n_dims;
    int64_t ne[2];
    enum init_kind init;
    float scale;
    uint32_t type;
    uint64_t offset, nbytes; /* in the written file */
};

struct tlist {
    struct tspec *t;
    int n, cap;
};

static bool add(struct tlist *l, const char *name, int n_dims, int64_t ne0, int64_t ne1, enum init_kind k, float scale)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 256;
        struct tspec *t = realloc(l->t, (size_t)cap * sizeof *t);
        if (!t)
            return false;
        l->t = t;
        l->cap = cap;
    }
    struct tspec *t = &l->t[l->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->init = k;
    t->scale = scale;
    return true;
}

static bool add_mat(struct tlist *l, const char *name, int64_t in, int64_t out)
{
    return add(l, name, 2, in, out, INIT_MATRIX, 1.0f / sqrtf((float)in));
}

/* Scale of the output projections of attention, FFN and DeltaNet (what the residual adds). */
static float g_out_gain = 1.0f;

static bool add_out_proj(struct tlist *l, const char *name, int64_t in, int64_t out)
{
    return add(l, name, 2, in, out, INIT_MATRIX, g_out_gain / sqrtf((float)in));
}

static bool add_vec(struct tlist *l, const char *name, int64_t n, enum init_kind k)
{
    return add(l, name, 1, n, 1, k, 0.02f);
}

static bool is_recurrent(const struct synth_shape *s, int il)
{
    return s->full_attn_interval > 0 && (il + 1) % s->full_attn_interval != 0;
}

static bool layer_tensors(struct tlist *l, const struct synth_shape *s, int il)
{
    char n[64];
    int64_t E = s->n_embd, D = s->head_dim, H = s->n_head, KV = s->n_head_kv, F = s->n_ff;
    bool ok = true;
#define NM(suffix) (snprintf(n, sizeof n, "blk.%d.%s", il, suffix), n)
    ok &= add_vec(l, NM("attn_norm.weight"), E, INIT_NORM);
    if (is_recurrent(s, il)) {
        int64_t dk = s->ssm_head_dim, nk = s->ssm_k_heads, nv = s->ssm_v_heads, inner = dk * nv;
        int64_t conv_ch = 2 * dk * nk + inner;
        ok &= add_mat(l, NM("attn_qkv.weight"), E, conv_ch);
        ok &= add_mat(l, NM("attn_gate.weight"), E, inner);
        ok &= add(l, NM("ssm_conv1d.weight"), 2, s->ssm_conv, conv_ch, INIT_MATRIX, 0.5f);
        ok &= add_vec(l, NM("ssm_dt.bias"), nv, INIT_DT_BIAS);
        ok &= add_vec(l, NM("ssm_a"), nv, INIT_SSM_A);
        ok &= add_mat(l, NM("ssm_beta.weight"), E, nv);
        ok &= add_mat(l, NM("ssm_alpha.weight"), E, nv);
        ok &= add_vec(l, NM("ssm_norm.weight"), dk, INIT_NORM);
        ok &= add_out_proj(l, NM("ssm_out.weight"), inner, E);
    } else {
        /* Qwen3.5's full-attention layers project a gate beside each query head. */
        ok &= add_mat(l, NM("attn_q.weight"), E, H * D * (s->full_attn_interval > 0 ? 2 : 1));
        ok &= add_mat(l, NM("attn_k.weight"), E, KV * D);
        ok &= add_mat(l, NM("attn_v.weight"), E, KV * D);
        if (s->qkv_bias) {
            ok &= add_vec(l, NM("attn_q.bias"), H * D, INIT_BIAS);
            ok &= add_vec(l, NM("attn_k.bias"), KV * D, INIT_BIAS);
            ok &= add_vec(l, NM("attn_v.bias"), KV * D, INIT_BIAS);
        }
        if (s->qk_norm) {
            ok &= add_vec(l, NM("attn_q_norm.weight"), D, INIT_NORM);
            ok &= add_vec(l, NM("attn_k_norm.weight"), D, INIT_NORM);
        }
        ok &= add_out_proj(l, NM("attn_output.weight"), H * D, E);
    }
    ok &= add_vec(l, NM(s->full_attn_interval > 0 ? "post_attention_norm.weight" : "ffn_norm.weight"), E,
                  INIT_NORM);
    ok &= add_mat(l, NM("ffn_gate.weight"), E, F);
    ok &= add_mat(l, NM("ffn_up.weight"), E, F);
    ok &= add_out_proj(l, NM("ffn_down.weight"), F, E);
#undef NM
    return ok;
}

static bool model_tensors(struct tlist *l, const struct synth_shape *s)
{
    /* Output rows scaled so that logits have a spread of a few units (a peaked, not flat,
     * distribution); a tied embedding plays both parts. */
    float logit_div = s->logit_scale > 0 ? s->logit_scale : 1.0f, emb_mul = s->emb_scale > 0 ? s->emb_scale : 1.0f;
    float res_mul = s->res_scale > 0 ? s->res_scale : 1.0f;
    float out_scale = 3.0f * logit_div / sqrtf((float)s->n_embd);
    /* With a tied embedding a token's own row sits in the residual stream and would win the
     * next prediction every time (the model would only repeat itself). Layer outputs several
     * times larger than the embedding keep that bias small: aim each layer's addition at
     * 4 x max(1, embedding std), before Granite's residual multiplier. */
    float emb_std = (s->tied ? out_scale : 1.0f) * emb_mul;
    g_out_gain = 4.0f * fmaxf(1.0f, emb_std) / (res_mul * 0.7f);
    bool ok = add(l, "token_embd.weight", 2, s->n_embd, s->n_vocab, INIT_MATRIX, s->tied ? out_scale : 1.0f);
    for (int il = 0; il < s->n_layer && ok; il++)
        ok = layer_tensors(l, s, il);
    ok = ok && add_vec(l, "output_norm.weight", s->n_embd, INIT_NORM);
    if (ok && !s->tied)
        ok = add(l, "output.weight", 2, s->n_embd, s->n_vocab, INIT_MATRIX, out_scale);
    return ok;
}

/* ---- metadata ---- */

#define TRY(call)                  \
    do {                           \
        brasa_status st_ = (call); \
        if (st_)                   \
            return st_;            \
    } while (0)

static brasa_status set_hparams(struct gguf_writer *w, const struct synth_shape *s, int ftype, struct brasa_err *err)
{
    char k[96];
    const char *a = s->arch;
#define KEY(suffix) (snprintf(k, sizeof k, "%s.%s", a, suffix), k)
    TRY(gguf_writer_set_str(w, "general.architecture", a, err));
    char name[128];
    snprintf(name, sizeof name, "synthetic %s (random weights)", s->name);
    TRY(gguf_writer_set_str(w, "general.name", name, err));
    TRY(gguf_writer_set_str(w, "general.description",
                            "random weights in a real model's shapes, written by brasa synth; not a trained model", err));
    TRY(gguf_writer_set_u32(w, "general.file_type", (uint32_t)ftype, err));
    TRY(gguf_writer_set_u32(w, "general.quantization_version", 2, err));
    TRY(gguf_writer_set_u32(w, KEY("context_length"), (uint32_t)s->n_ctx, err));
    TRY(gguf_writer_set_u32(w, KEY("embedding_length"), (uint32_t)s->n_embd, err));
    TRY(gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)s->n_layer, err));
    TRY(gguf_writer_set_u32(w, KEY("feed_forward_length"), (uint32_t)s->n_ff, err));
    TRY(gguf_writer_set_u32(w, KEY("attention.head_count"), (uint32_t)s->n_head, err));
    TRY(gguf_writer_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)s->n_head_kv, err));
    TRY(gguf_writer_set_u32(w, KEY("attention.key_length"), (uint32_t)s->head_dim, err));
    TRY(gguf_writer_set_u32(w, KEY("attention.value_length"), (uint32_t)s->head_dim, err));
    TRY(gguf_writer_set_f32(w, KEY("rope.freq_base"), s->rope_theta, err));
    TRY(gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), s->rms_eps, err));
    TRY(gguf_writer_set_u32(w, KEY("rope.dimension_count"), (uint32_t)s->rope_dims, err));
    if (!strcmp(a, "llama"))
        TRY(gguf_writer_set_u32(w, KEY("vocab_size"), (uint32_t)s->n_vocab, err));
    if (!strcmp(a, "granite")) {
        TRY(gguf_writer_set_f32(w, KEY("embedding_scale"), s->emb_scale, err));
        TRY(gguf_writer_set_f32(w, KEY("residual_scale"), s->res_scale, err));
        TRY(gguf_writer_set_f32(w, KEY("attention.scale"), s->attn_scale, err));
        TRY(gguf_writer_set_f32(w, KEY("logit_scale"), s->logit_scale, err));
    }
    if (s->full_attn_interval > 0) {
        int32_t sec[4];
        for (int i = 0; i < 4; i++)
            sec[i] = s->rope_sections[i];
        TRY(gguf_writer_set_arr(w, KEY("rope.dimension_sections"), GGUF_T_INT32, sec, 4, err));
        TRY(gguf_writer_set_u32(w, KEY("full_attention_interval"), (uint32_t)s->full_attn_interval, err));
        TRY(gguf_writer_set_u32(w, KEY("ssm.conv_kernel"), (uint32_t)s->ssm_conv, err));
        TRY(gguf_writer_set_u32(w, KEY("ssm.state_size"), (uint32_t)s->ssm_head_dim, err));
        TRY(gguf_writer_set_u32(w, KEY("ssm.group_count"), (uint32_t)s->ssm_k_heads, err));
        TRY(gguf_writer_set_u32(w, KEY("ssm.time_step_rank"), (uint32_t)s->ssm_v_heads, err));
        TRY(gguf_writer_set_u32(w, KEY("ssm.inner_size"), (uint32_t)(s->ssm_v_heads * s->ssm_head_dim), err));
    }
#undef KEY
    return BRASA_OK;
}

static brasa_status set_vocab(struct gguf_writer *w, const struct synth_vocab *v, struct brasa_err *err)
{
    TRY(gguf_writer_set_str(w, "tokenizer.ggml.model", v->model, err));
    TRY(gguf_writer_set_str(w, "tokenizer.ggml.pre", v->pre, err));
    TRY(gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->tokens, (uint64_t)v->n, err));
    TRY(gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_T_INT32, v->types, (uint64_t)v->n, err));
    if (v->scores)
        TRY(gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_T_FLOAT32, v->scores, (uint64_t)v->n, err));
    if (v->n_merges)
        TRY(gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v->merges, v->n_merges, err));
    TRY(gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)v->bos, err));
    TRY(gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)v->eos, err));
    if (v->eot >= 0 && v->eot != v->eos)
        TRY(gguf_writer_set_u32(w, "tokenizer.ggml.eot_token_id", (uint32_t)v->eot, err));
    if (v->pad >= 0)
        TRY(gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)v->pad, err));
    if (v->unk >= 0)
        TRY(gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)v->unk, err));
    TRY(gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", v->add_bos, err));
    TRY(gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", false, err));
    if (v->chat_template)
        TRY(gguf_writer_set_str(w, "tokenizer.chat_template", v->chat_template, err));
    return BRASA_OK;
}

/* ---- weights ---- */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* One row of initial values, a function of (seed, tensor, row) alone. */
static void init_row(const struct tspec *t, uint64_t seed, int64_t row, float *x)
{
    uint64_t s = mix64(seed ^ mix64(name_hash(t->name) + (uint64_t)row * 0x9e3779b97f4a7c15ull)) | 1;
    /* Uniform on [-1, 1) has standard deviation 1/sqrt(3). */
    const float a = t->scale * 1.7320508f;
    for (int64_t i = 0; i < t->ne[0]; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        float u = (float)(int32_t)(s >> 32) * (1.0f / 2147483648.0f); /* [-1, 1) */
        switch (t->init) {
        case INIT_MATRIX: x[i] = a * u; break;
        case INIT_NORM: x[i] = 1.0f + 0.1f * u; break;
        case INIT_BIAS: x[i] = 0.02f * u; break;
        case INIT_SSM_A: x[i] = -expf(1.3862944f * (u + 1.0f)); break; /* -[1, 16] */
        case INIT_DT_BIAS: {
            float dt = expf(-6.9077553f + 4.6051702f * 0.5f * (u + 1.0f)); /* [1e-3, 1e-1] */
            x[i] = logf(expm1f(dt)); /* softplus(x) = dt */
            break;
        }
        }
    }
}

/* Encodes n floats of type `type` into dst (F32/F16/BF16 here, everything else quant_row). */
static brasa_status encode_row(uint32_t type, const float *x, void *dst, int64_t n, struct brasa_err *err)
{
    switch (type) {
    case GGML_TYPE_F32:
        memcpy(dst, x, (size_t)n * 4);
        return BRASA_OK;
    case GGML_TYPE_F16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = f32_to_fp16(x[i]);
        return BRASA_OK;
    case GGML_TYPE_BF16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = f32_to_bf16(x[i]);
        return BRASA_OK;
    default:
        return quant_row(type, x, dst, n, err);
    }
}

#define ROWS_PER_WRITE 64

/* Quantizing billions of random numbers (Q4_K's search for good scales is slow) would take
 * most of an hour for a 7B model on two cores. Since the values are random anyway, each
 * quantized matrix is assembled from a pool of blocks that quant_row() made from random values
 * of the matrix's scale: every block of every row is a pool block picked by a hash of
 * (seed, tensor, row, block). Each block carries its own scales, so the result is an ordinary
 * quantized matrix of that scale, rows all different, written at disk speed. */
#define POOL_BLOCKS 1024

struct block_pool {
    uint32_t type;
    float scale;
    size_t block_bytes;
    uint8_t *blocks; /* POOL_BLOCKS blocks */
};

static bool is_quantized(uint32_t type)
{
    return type != GGML_TYPE_F32 && type != GGML_TYPE_F16 && type != GGML_TYPE_BF16;
}

static brasa_status pool_make(struct block_pool *bp, const struct tspec *t, uint64_t seed, struct brasa_err *err)
{
    const struct qtype_info *q = qtype_get(t->type);
    size_t n = (size_t)POOL_BLOCKS * (size_t)q->block;
    float *x = malloc(n * sizeof *x);
    bp->type = t->type;
    bp->scale = t->scale;
    bp->block_bytes = q->block_bytes;
    bp->blocks = malloc((size_t)POOL_BLOCKS * q->block_bytes);
    if (!x || !bp->blocks) {
        free(x);
        return brasa_fail(err, BRASA_ENOMEM, "synth: out of memory for a block pool");
    }
    struct tspec one = *t;
    one.ne[0] = (int64_t)n;
    snprintf(one.name, sizeof one.name, "pool.%u", t->type);
    init_row(&one, seed ^ (uint64_t)(uint32_t)(t->scale * 1e6f), 0, x);
    brasa_status st = quant_row(t->type, x, bp->blocks, (int64_t)n, err);
    free(x);
    return st;
}

struct fill_job {
    const struct tspec *t;
    const struct block_pool *bp; /* quantized types: blocks to assemble rows from */
    uint64_t seed;
    int fd;
    uint64_t data_offset;
    size_t row_bytes;
    atomic_int failed;
    struct brasa_err err;
};

static void fill_rows(void *arg, int ith, int nth)
{
    struct fill_job *j = arg;
    const struct tspec *t = j->t;
    long begin, end;
    pool_range((long)t->ne[1], ith, nth, &begin, &end);
    float *x = malloc((size_t)t->ne[0] * sizeof *x);
    uint8_t *buf = malloc(j->row_bytes * ROWS_PER_WRITE);
    struct brasa_err err = {{0}};
    bool ok = x && buf;
    if (!ok)
        brasa_fail(&err, BRASA_ENOMEM, "synth: out of memory for rows of %s", t->name);
    for (long r = begin; r < end && ok && !atomic_load(&j->failed); r += ROWS_PER_WRITE) {
        long k = end - r < ROWS_PER_WRITE ? end - r : ROWS_PER_WRITE;
        for (long i = 0; i < k && ok; i++) {
            uint8_t *row = buf + (size_t)i * j->row_bytes;
            if (j->bp) {
                size_t bb = j->bp->block_bytes, nb = j->row_bytes / bb;
                uint64_t h = mix64(j->seed ^ mix64(name_hash(t->name) + (uint64_t)(r + i) * 0x9e3779b97f4a7c15ull));
                for (size_t b = 0; b < nb; b++)
                    memcpy(row + b * bb, j->bp->blocks + (mix64(h + b) % POOL_BLOCKS) * bb, bb);
                continue;
            }
            init_row(t, j->seed, r + i, x);
            ok = encode_row(t->type, x, row, t->ne[0], &err) == BRASA_OK;
        }
        size_t nb = (size_t)k * j->row_bytes;
        off_t off = (off_t)(j->data_offset + t->offset + (uint64_t)r * j->row_bytes);
        if (ok && pwrite(j->fd, buf, nb, off) != (ssize_t)nb) {
            brasa_fail(&err, BRASA_EIO, "synth: write failed (disk full?)");
            ok = false;
        }
    }
    if (!ok && atomic_exchange(&j->failed, 1) == 0)
        j->err = err;
    free(x);
    free(buf);
}

static brasa_status check_opts(const struct synth_opts *o, const struct synth_shape **out, struct brasa_err *err)
{
    const struct synth_shape *s = synth_find(o->arch ? o->arch : "", o->shape ? o->shape : "");
    if (!s) {
        char list[1024] = "";
        size_t n;
        const struct synth_shape *all = synth_shapes(&n);
        for (size_t i = 0; i < n; i++) {
            size_t l = strlen(list);
            snprintf(list + l, sizeof list - l, "%s%s %s", i ? ", " : "", all[i].arch, all[i].shape);
        }
        return brasa_fail(err, BRASA_EINVAL, "synth: no shape '%s' for arch '%s' (known: %s)", o->shape ? o->shape : "",
                          o->arch ? o->arch : "", list);
    }
    if (!quant_ftype_name(o->ftype))
        return brasa_fail(err, BRASA_EINVAL, "synth: unknown file type %d (known: %s)", o->ftype, quant_ftype_list());
    *out = s;
    return BRASA_OK;
}

/* Picks every tensor's type and size; *max_bytes receives the largest. */
static brasa_status plan_types(struct tlist *l, int ftype, uint64_t *max_bytes, struct brasa_err *err)
{
    const char **names = malloc((size_t)l->n * sizeof *names);
    if (!names)
        return brasa_fail(err, BRASA_ENOMEM, "synth: out of memory");
    for (int i = 0; i < l->n; i++)
        names[i] = l->t[i].name;
    struct quant_mix mix;
    quant_mix_begin(&mix, ftype, names, (size_t)l->n);
    free(names);
    *max_bytes = 0;
    for (int i = 0; i < l->n; i++) {
        struct tspec *t = &l->t[i];
        t->type = quant_mix_type(&mix, t->name, t->n_dims, t->ne);
        const struct qtype_info *q = qtype_get(t->type);
        size_t rb = qtype_row_bytes(t->type, t->ne[0]);
        if (!q || !rb)
            return brasa_fail(err, BRASA_EUNSUPPORTED, "synth: %s: type %u does not fit rows of %lld", t->name,
                              t->type, (long long)t->ne[0]);
        if (t->type != GGML_TYPE_F32 && t->type != GGML_TYPE_F16 && t->type != GGML_TYPE_BF16 && !q->can_quant)
            return brasa_fail(err, BRASA_EUNSUPPORTED, "synth: %s: brasa cannot write %s yet", t->name, q->name);
        t->nbytes = (uint64_t)rb * (uint64_t)t->ne[1];
        if (t->nbytes > *max_bytes)
            *max_bytes = t->nbytes;
    }
    return BRASA_OK;
}

/* Writes metadata and tensor table with zero data (the GGUF writer lays the file out), then
 * reads the offsets back. The data is filled in afterwards, tensor by tensor. */
static brasa_status write_skeleton(const char *path, const struct synth_shape *s, int ftype, struct tlist *l,
                                   uint64_t max_bytes, uint64_t *data_offset, struct brasa_err *err)
{
    struct gguf_writer *w = NULL;
    struct synth_vocab v;
    void *zero = NULL;
    brasa_status st = synth_vocab_make(s, &v, err);
    if (st)
        return st;
    st = gguf_writer_new(&w, err);
    if (!st)
        st = set_hparams(w, s, ftype, err);
    if (!st)
        st = set_vocab(w, &v, err);
    if (!st && !(zero = calloc(1, (size_t)max_bytes))) /* untouched calloc pages cost no memory */
        st = brasa_fail(err, BRASA_ENOMEM, "synth: out of memory");
    for (int i = 0; i < l->n && !st; i++) {
        struct tspec *t = &l->t[i];
        st = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, zero, t->nbytes, err);
    }
    if (!st)
        st = gguf_writer_write(w, path, err);
    gguf_writer_free(w);
    free(zero);
    synth_vocab_free(&v);
    if (st)
        return st;
    struct gguf_file *f = NULL;
    st = gguf_open(&f, path, err);
    if (st)
        return brasa_wrap(err, st, "synth: reading back %s", path);
    *data_offset = f->data_offset;
    for (int i = 0; i < l->n && !st; i++) {
        const struct gguf_tensor *gt = gguf_find_tensor(f, l->t[i].name);
        if (!gt || gt->nbytes != l->t[i].nbytes)
            st = brasa_fail(err, BRASA_EFORMAT, "synth: %s: tensor %s laid out unexpectedly", path, l->t[i].name);
        else
            l->t[i].offset = gt->offset;
    }
    gguf_close(f);
    return st;
}

brasa_status synth_write(const char *path, const struct synth_opts *o, struct synth_stats *stats,
                         struct brasa_err *err)
{
    const struct synth_shape *s = NULL;
    TRY(check_opts(o, &s, err));
    struct tlist l = {0};
    struct pool *pool = NULL;
    int fd = -1;
    uint64_t max_bytes = 0, data_offset = 0, total = 0, done = 0;
    brasa_status st = BRASA_OK;
    if (!model_tensors(&l, s))
        st = brasa_fail(err, BRASA_ENOMEM, "synth: out of memory");
    if (!st)
        st = plan_types(&l, o->ftype, &max_bytes, err);
    if (!st)
        st = write_skeleton(path, s, o->ftype, &l, max_bytes, &data_offset, err);
    if (!st)
        st = pool_new(&pool, o->n_threads > 0 ? o->n_threads : plat_ncpu(), err);
    if (!st && (fd = open(path, O_WRONLY)) < 0)
        st = brasa_fail(err, BRASA_EIO, "synth: cannot reopen %s for writing", path);
    uint64_t n_params = 0;
    for (int i = 0; i < l.n; i++) {
        total += l.t[i].nbytes;
        n_params += (uint64_t)(l.t[i].ne[0] * l.t[i].ne[1]);
    }
    struct block_pool pools[32];
    int n_pools = 0;
    for (int i = 0; i < l.n && !st; i++) {
        struct fill_job j = {.t = &l.t[i], .seed = o->seed, .fd = fd, .data_offset = data_offset,
                             .row_bytes = qtype_row_bytes(l.t[i].type, l.t[i].ne[0])};
        if (is_quantized(l.t[i].type) && l.t[i].init == INIT_MATRIX) {
            for (int k = 0; k < n_pools && !j.bp; k++)
                if (pools[k].type == l.t[i].type && pools[k].scale == l.t[i].scale)
                    j.bp = &pools[k];
            if (!j.bp && n_pools < 32) {
                st = pool_make(&pools[n_pools], &l.t[i], o->seed, err);
                if (st) {
                    free(pools[n_pools].blocks);
                    break;
                }
                j.bp = &pools[n_pools++];
            }
        }
        pool_run(pool, fill_rows, &j);
        if (j.failed) {
            *err = j.err;
            st = BRASA_EIO;
        }
        done += l.t[i].nbytes;
        if (o->progress)
            o->progress(o->progress_ud, total ? (float)((double)done / (double)total) : 1.0f);
    }
    if (fd >= 0 && close(fd) != 0 && !st)
        st = brasa_fail(err, BRASA_EIO, "synth: write failed for %s", path);
    if (stats && !st) {
        stats->n_params = n_params;
        stats->n_tensors = l.n;
        stats->file_bytes = data_offset + total;
    }
    if (st && fd >= 0)
        unlink(path);
    for (int k = 0; k < n_pools; k++)
        free(pools[k].blocks);
    pool_free(pool);
    free(l.t);
    return st;
}
