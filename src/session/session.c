/* session: model loading, KV cache and recurrent state, prefill/decode, generation.
 * (Stubs for now: every call reports that the engine is not built yet.) */
#include "brasa.h"

#include <stdlib.h>

brasa_status brasa_model_load(const char *path, const struct brasa_model_opts *opts,
                              struct brasa_model **out, struct brasa_err *err)
{
    (void)opts;
    *out = NULL;
    return brasa_fail(err, BRASA_EUNSUPPORTED, "%s: model loading is not implemented yet", path);
}

void brasa_model_free(struct brasa_model *m) { (void)m; }

void brasa_model_get_info(const struct brasa_model *m, struct brasa_model_info *info)
{
    (void)m;
    *info = (struct brasa_model_info){.arch = "", .name = "", .backend = "cpu"};
}

const struct tokenizer *brasa_model_tokenizer(const struct brasa_model *m)
{
    (void)m;
    return NULL;
}

brasa_status brasa_session_new(struct brasa_model *m, const struct brasa_session_opts *opts,
                               struct brasa_session **out, struct brasa_err *err)
{
    (void)m;
    (void)opts;
    *out = NULL;
    return brasa_fail(err, BRASA_EUNSUPPORTED, "sessions are not implemented yet");
}

void brasa_session_free(struct brasa_session *s) { (void)s; }
void brasa_session_reset(struct brasa_session *s) { (void)s; }
int brasa_session_pos(const struct brasa_session *s) { (void)s; return 0; }
int brasa_session_n_ctx(const struct brasa_session *s) { (void)s; return 0; }

brasa_status brasa_session_eval(struct brasa_session *s, const int32_t *ids, int n,
                                float *logits_all, struct brasa_err *err)
{
    (void)s, (void)ids, (void)n, (void)logits_all;
    return brasa_fail(err, BRASA_EUNSUPPORTED, "evaluation is not implemented yet");
}

const float *brasa_session_logits(const struct brasa_session *s)
{
    (void)s;
    return NULL;
}

uint64_t brasa_session_bytes(const struct brasa_session *s)
{
    (void)s;
    return 0;
}

brasa_status brasa_generate(struct brasa_session *s, struct brasa_sampler *smp,
                            const int32_t *prompt, int n_prompt, int max_tokens, int flags,
                            brasa_token_cb cb, void *ud, struct brasa_gen_stats *stats,
                            struct brasa_err *err)
{
    (void)s, (void)smp, (void)prompt, (void)n_prompt, (void)max_tokens, (void)flags;
    (void)cb, (void)ud;
    if (stats)
        *stats = (struct brasa_gen_stats){0};
    return brasa_fail(err, BRASA_EUNSUPPORTED, "generation is not implemented yet");
}
