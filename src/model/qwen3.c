/* qwen3: NEOX rope, no biases, per-head RMSNorm of Q and K before rope; usually tied output. */
#include "model/model.h"

static brasa_status qwen3_load(struct mdl *m, const struct gguf_file *f, struct brasa_err *err)
{
    m->hp.rope_mode = ROPE_NEOX;
    return mdl_load_dense(m, f, false, true, err);
}

static int qwen3_build(struct blk *b, int x) { return blk_decoder(b, x); }

const struct mdl_arch mdl_arch_qwen3 = {"qwen3", qwen3_load, qwen3_build};
