/* arch: general.architecture -> model family. */
#include "model/model.h"

#include <string.h>

extern const struct mdl_arch mdl_arch_llama, mdl_arch_qwen2, mdl_arch_granite, mdl_arch_qwen3,
    mdl_arch_qwen35;

static const struct mdl_arch *const archs[] = {
    &mdl_arch_llama, &mdl_arch_qwen2, &mdl_arch_granite, &mdl_arch_qwen3, &mdl_arch_qwen35,
};

brasa_status mdl_arch_find(const char *name, const struct mdl_arch **out, struct brasa_err *err)
{
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (strcmp(archs[i]->name, name) == 0) {
            *out = archs[i];
            return BRASA_OK;
        }
    return brasa_fail(err, BRASA_EUNSUPPORTED,
                      "model family \"%s\" is not supported (brasa runs llama, qwen2, granite, "
                      "qwen3 and qwen35)", name);
}
