#include "core/simd.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>

static bool have_avx;
static pthread_once_t avx_once = PTHREAD_ONCE_INIT;
static void avx_init(void)
{
    __builtin_cpu_init();
    have_avx = __builtin_cpu_supports("avx");
}

__attribute__((target("avx"))) static void zero_upper(void) { _mm256_zeroupper(); }

void simd_clean_upper(void)
{
    pthread_once(&avx_once, avx_init);
    if (have_avx)
        zero_upper();
}

bool simd_has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);
}
#else
void simd_clean_upper(void) {}
bool simd_has_f16c(void) { return false; }
#endif
