/* llama: RMSNorm, GQA attention with NORM rope (pairs 2i, 2i+1), SwiGLU FFN; separate or tied
 * output. Weights are used as stored in the GGUF file (the converter already permuted Q/K rows
 * for this rope layout). */
#include "model/model.h"

static brasa_status llama_load(struct mdl *m, const struct gguf_file *f, struct brasa_err *err)
{
    m->hp.rope_mode = ROPE_NORM;
    return mdl_load_dense(m, f, false, false, err);
}

static int llama_build(struct blk *b, int x) { return blk_decoder(b, x); }

const struct mdl_arch mdl_arch_llama = {"llama", llama_load, llama_build};
