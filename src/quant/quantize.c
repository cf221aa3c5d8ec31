/* Quantizers: float rows to ggml blocks. */
#include <math.h>

#include "quant/quant_impl.h"

brasa_status quant_row(uint32_t type, const float *src, void *dst, int64_t n, struct brasa_err *err)
{
    const struct qtype_info *q = qtype_get(type);
    if (!q || !q->can_quant)
        return brasa_fail(err, BRASA_EUNSUPPORTED, "brasa cannot quantize to %s",
                          q ? q->name : "an unknown type");
    if (n < 0 || n % q->block)
        return brasa_fail(err, BRASA_EINVAL, "%lld elements is not a whole number of %s blocks (%d)",
                          (long long)n, q->name, q->block);
    (void)src;
    (void)dst;
    return brasa_fail(err, BRASA_EUNSUPPORTED, "quantization to %s is not built yet", q->name);
}
