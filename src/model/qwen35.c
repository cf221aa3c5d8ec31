/* qwen35 (Qwen3.5): a hybrid stack. Layer il is a gated DeltaNet (linear attention with a
 * recurrent state) unless (il + 1) % full_attention_interval == 0, where it is gated full
 * attention (query and a sigmoid output gate interleaved per head in attn_q, per-head Q/K
 * norm, NEOX rope on the first rope.dimension_count dims of each head). Every layer:
 * x += mixer(norm(x)); x += ffn(post_attention_norm(x)). */
#include "model/model.h"

#include <stdio.h>

#include "gguf/gguf.h"

static brasa_status ssm_key(const struct gguf_file *f, const char *key, int *out,
                            struct brasa_err *err)
{
    char k[96];
    snprintf(k, sizeof k, "qwen35.%s", key);
    uint32_t v;
    brasa_status st = gguf_get_u32(f, k, &v, err);
    if (st == BRASA_ENOTFOUND)
        return brasa_fail(err, st, "key %s is missing from the file", k);
    if (st == BRASA_OK && (v < 1 || v > (1u << 20)))
        return brasa_fail(err, BRASA_EFORMAT, "key %s = %u is out of range", k, v);
    *out = (int)v;
    return st;
}

static bool is_recurrent(const struct mdl_hparams *hp, int il)
{
    return (il + 1) % hp->full_attn_interval != 0;
}

static brasa_status load_deltanet(struct mdl *m, const struct gguf_file *f, int il,
                                  struct brasa_err *err)
{
    const struct mdl_hparams *hp = &m->hp;
    struct mdl_layer *L = &m->layers[il];
    int64_t E = hp->n_embd, nk = (int64_t)hp->ssm_n_kh * hp->ssm_dk,
            nv = (int64_t)hp->ssm_n_vh * hp->ssm_dv, H = hp->ssm_n_vh;
    brasa_status st;
    if ((st = mdl_tensor(f, &L->wqkv, false, E, 2 * nk + nv, err, "blk.%d.attn_qkv.weight", il)) ||
        (st = mdl_tensor(f, &L->wz, false, E, nv, err, "blk.%d.attn_gate.weight", il)) ||
        (st = mdl_tensor(f, &L->conv1d, false, hp->conv_k, 2 * nk + nv, err,
                         "blk.%d.ssm_conv1d.weight", il)) ||
        (st = mdl_tensor(f, &L->dt_bias, false, H, 0, err, "blk.%d.ssm_dt.bias", il)) ||
        (st = mdl_tensor(f, &L->ssm_a, false, H, 0, err, "blk.%d.ssm_a", il)) ||
        (st = mdl_tensor(f, &L->w_beta, false, E, H, err, "blk.%d.ssm_beta.weight", il)) ||
        (st = mdl_tensor(f, &L->w_alpha, false, E, H, err, "blk.%d.ssm_alpha.weight", il)) ||
        (st = mdl_tensor(f, &L->ssm_norm, false, hp->ssm_dv, 0, err, "blk.%d.ssm_norm.weight", il)) ||
        (st = mdl_tensor(f, &L->ssm_out, false, nv, E, err, "blk.%d.ssm_out.weight", il)))
        return st;
    return mdl_need_f32(&L->conv1d, err); /* (the vectors: mdl_tensor) */
}

static brasa_status load_attention(struct mdl *m, const struct gguf_file *f, int il,
                                   struct brasa_err *err)
{
    const struct mdl_hparams *hp = &m->hp;
    struct mdl_layer *L = &m->layers[il];
    int64_t E = hp->n_embd, hd = hp->head_dim, nq = (int64_t)hp->n_head * hd,
            nkv = (int64_t)hp->n_head_kv * hd;
    brasa_status st;
    if ((st = mdl_tensor(f, &L->wq, false, E, 2 * nq, err, "blk.%d.attn_q.weight", il)) ||
        (st = mdl_tensor(f, &L->wk, false, E, nkv, err, "blk.%d.attn_k.weight", il)) ||
        (st = mdl_tensor(f, &L->wv, false, E, nkv, err, "blk.%d.attn_v.weight", il)) ||
        (st = mdl_tensor(f, &L->wo, false, nq, E, err, "blk.%d.attn_output.weight", il)) ||
        (st = mdl_tensor(f, &L->q_norm, false, hd, 0, err, "blk.%d.attn_q_norm.weight", il)) ||
        (st = mdl_tensor(f, &L->k_norm, false, hd, 0, err, "blk.%d.attn_k_norm.weight", il)))
        return st;
    return BRASA_OK;
}

static brasa_status qwen35_load(struct mdl *m, const struct gguf_file *f, struct brasa_err *err)
{
    struct mdl_hparams *hp = &m->hp;
    hp->rope_mode = ROPE_NEOX; /* IMROPE with text positions (p, p, p, 0) is NEOX */
    int inner;
    brasa_status st;
    if ((st = ssm_key(f, "full_attention_interval", &hp->full_attn_interval, err)) ||
        (st = ssm_key(f, "ssm.conv_kernel", &hp->conv_k, err)) ||
        (st = ssm_key(f, "ssm.state_size", &hp->ssm_dk, err)) ||
        (st = ssm_key(f, "ssm.group_count", &hp->ssm_n_kh, err)) ||
        (st = ssm_key(f, "ssm.time_step_rank", &hp->ssm_n_vh, err)) ||
        (st = ssm_key(f, "ssm.inner_size", &inner, err)))
        return st;
    if (inner % hp->ssm_n_vh != 0 || hp->conv_k < 2 || hp->conv_k > 16 || hp->ssm_dk < 1 ||
        hp->ssm_dk > 256)
        return brasa_fail(err, BRASA_EFORMAT, "qwen35: ssm.inner_size %d / %d heads, conv %d, "
                          "state size %d: unsupported shape (conv 2-16, state size 1-256)", inner,
                          hp->ssm_n_vh, hp->conv_k, hp->ssm_dk);
    hp->ssm_dv = inner / hp->ssm_n_vh;
    for (int il = 0; il < hp->n_layer; il++) {
        struct mdl_layer *L = &m->layers[il];
        L->recurrent = is_recurrent(hp, il);
        if ((st = mdl_tensor(f, &L->attn_norm, false, hp->n_embd, 0, err,
                             "blk.%d.attn_norm.weight", il)) ||
            (st = mdl_tensor(f, &L->ffn_norm, false, hp->n_embd, 0, err,
                             "blk.%d.post_attention_norm.weight", il)) ||
            (st = mdl_tensor(f, &L->ffn_gate, false, hp->n_embd, hp->n_ff, err,
                             "blk.%d.ffn_gate.weight", il)) ||
            (st = mdl_tensor(f, &L->ffn_up, false, hp->n_embd, hp->n_ff, err,
                             "blk.%d.ffn_up.weight", il)) ||
            (st = mdl_tensor(f, &L->ffn_down, false, hp->n_ff, hp->n_embd, err,
                             "blk.%d.ffn_down.weight", il)))
            return st;
        st = L->recurrent ? load_deltanet(m, f, il, err) : load_attention(m, f, il, err);
        if (st != BRASA_OK)
            return st;
    }
    return BRASA_OK;
}

static int qwen35_build(struct blk *b, int x)
{
    for (int il = 0; il < b->m->hp.n_layer; il++) {
        const struct mdl_layer *L = &b->m->layers[il];
        int h = blk_norm(b, il, x, &L->attn_norm, "attn_norm");
        h = L->recurrent ? blk_deltanet(b, il, h) : blk_attention(b, il, h, true);
        x = blk_residual(b, il, x, h, "ffn_inp");
        h = blk_norm(b, il, x, &L->ffn_norm, "post_attention_norm");
        x = blk_residual(b, il, x, blk_ffn(b, il, h), "l_out");
    }
    return x;
}

const struct mdl_arch mdl_arch_qwen35 = {"qwen35", qwen35_load, qwen35_build};
