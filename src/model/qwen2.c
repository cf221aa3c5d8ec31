/* qwen2: llama's blocks with Q/K/V biases and NEOX rope (pairs i, i + n_rot/2). */
#include "model/model.h"

static brasa_status qwen2_load(struct mdl *m, const struct gguf_file *f, struct brasa_err *err)
{
    m->hp.rope_mode = ROPE_NEOX;
    return mdl_load_dense(m, f, true, false, err);
}

static int qwen2_build(struct blk *b, int x) { return blk_decoder(b, x); }

const struct mdl_arch mdl_arch_qwen2 = {"qwen2", qwen2_load, qwen2_build};
