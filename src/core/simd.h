/* simd: the x86 vector registers' upper state.
 *
 * The kernels with AVX, AVX-512 or AMX are functions with target attributes in an x86-64-v2
 * build, and GCC leaves some of them (the AMX tiles, several AVX-512 tiles) without a
 * vzeroupper on the way out. With the upper halves dirty, every legacy-SSE instruction of the
 * scalar code after them (the calls into libm's expf, the norms) waits on a merge: on a
 * Sapphire Rapids class Xeon, SiLU over a 0.5B model's prompt ran 4x slower, and a whole pp512
 * 106 against 438 tok/s. The matmul and op workers call this when they finish. */
#ifndef BRASA_CORE_SIMD_H
#define BRASA_CORE_SIMD_H

#include <stdbool.h>

/* vzeroupper where the processor has AVX; nothing elsewhere. */
void simd_clean_upper(void);

/* F16C, from CPUID leaf 1 (ECX bit 29): not every compiler's __builtin_cpu_supports knows the
 * name (clang 14 rejects it). False off x86-64. */
bool simd_has_f16c(void);

#endif
