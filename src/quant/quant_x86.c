/* SIMD kernels for x86-64 (AVX2+FMA+F16C, AVX-512), compiled with per-function target
 * attributes and chosen at run time, so the build itself stays at the baseline ISA. */
#include "quant/quant_impl.h"

void qk_x86_init(struct qkernels *k)
{
    (void)k;
}
