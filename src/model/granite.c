/* granite: llama's blocks with four multipliers: token embeddings × embedding_scale, each
 * attention/FFN branch × residual_scale before its residual add, attention.scale as the KQ
 * scale (instead of 1/sqrt(head_dim)), and logits ÷ logit_scale. */
#include "model/model.h"

#include "gguf/gguf.h"

static brasa_status granite_load(struct mdl *m, const struct gguf_file *f, struct brasa_err *err)
{
    struct mdl_hparams *hp = &m->hp;
    hp->rope_mode = ROPE_NORM;
    brasa_status st;
    if ((st = gguf_get_f32_or(f, "granite.embedding_scale", 1.0f, &hp->emb_scale, err)) ||
        (st = gguf_get_f32_or(f, "granite.residual_scale", 1.0f, &hp->res_scale, err)) ||
        (st = gguf_get_f32_or(f, "granite.attention.scale", hp->kq_scale, &hp->kq_scale, err)) ||
        (st = gguf_get_f32_or(f, "granite.logit_scale", 1.0f, &hp->logit_scale, err)))
        return st;
    if (hp->logit_scale == 0.0f)
        return brasa_fail(err, BRASA_EFORMAT, "granite.logit_scale is 0 (logits are divided by it)");
    return mdl_load_dense(m, f, false, false, err);
}

static int granite_build(struct blk *b, int x) { return blk_decoder(b, x); }

const struct mdl_arch mdl_arch_granite = {"granite", granite_load, granite_build};
