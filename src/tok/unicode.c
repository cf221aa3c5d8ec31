/* Unicode lookups over the generated tables (unicode_tab.c). The Basic Multilingual Plane
 * gets a flat flag table built once (128 KiB), the rest a binary search. */
#include "tok/unicode.h"

#include <pthread.h>

static uint16_t bmp_flags[0x10000];
static pthread_once_t bmp_once = PTHREAD_ONCE_INIT;

static const unsigned class_flag[8] = {UF_UNDEF, UF_N, UF_L, UF_Z, UF_M, UF_P, UF_S, UF_C};

static unsigned class_of_slow(uint32_t cp)
{
    size_t lo = 0, hi = uni_class_n; /* last start <= cp */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (uni_class_start[mid] <= cp)
            lo = mid;
        else
            hi = mid;
    }
    return uni_class_val[lo];
}

static int is_white_space(uint32_t cp)
{
    for (size_t i = 0; i < uni_white_space_n; i++)
        if (uni_white_space[i] == cp)
            return 1;
    return 0;
}

static void bmp_build(void)
{
    size_t r = 0;
    for (uint32_t cp = 0; cp < 0x10000; cp++) {
        while (r + 1 < uni_class_n && uni_class_start[r + 1] <= cp)
            r++;
        bmp_flags[cp] = (uint16_t)class_flag[uni_class_val[r] & 7];
    }
    for (size_t i = 0; i < uni_white_space_n; i++)
        if (uni_white_space[i] < 0x10000)
            bmp_flags[uni_white_space[i]] |= UF_WS;
}

unsigned uni_flags(uint32_t cp)
{
    if (cp < 0x10000) {
        pthread_once(&bmp_once, bmp_build);
        return bmp_flags[cp];
    }
    if (cp >= 0x110000)
        return UF_UNDEF;
    unsigned f = class_flag[class_of_slow(cp) & 7];
    return is_white_space(cp) ? f | UF_WS : f;
}

uint32_t uni_tolower(uint32_t cp)
{
    if (cp < 0x80)
        return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    size_t lo = 0, hi = uni_lower_n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (uni_lower[mid][0] < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (lo < uni_lower_n && uni_lower[lo][0] == cp) ? uni_lower[lo][1] : cp;
}

uint32_t uni_nfd_first(uint32_t cp)
{
    size_t lo = 0, hi = uni_nfd_n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (uni_nfd[mid][1] < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (lo < uni_nfd_n && uni_nfd[lo][0] <= cp && cp <= uni_nfd[lo][1]) ? uni_nfd[lo][2] : cp;
}

uint32_t uni_decode(const unsigned char *s, size_t n, size_t *pos)
{
    size_t i = *pos;
    unsigned c = s[i];
    if (!(c & 0x80)) {
        *pos = i + 1;
        return c;
    }
    if (c & 0x40) {
        int len = !(c & 0x20) ? 2 : !(c & 0x10) ? 3 : !(c & 0x08) ? 4 : 0;
        if (len && i + (size_t)len <= n) {
            uint32_t cp = c & (0x7Fu >> len);
            int ok = 1;
            for (int k = 1; k < len; k++) {
                if ((s[i + k] & 0xC0) != 0x80) {
                    ok = 0;
                    break;
                }
                cp = (cp << 6) | (s[i + k] & 0x3F);
            }
            if (ok) {
                *pos = i + (size_t)len;
                return cp;
            }
        }
    }
    *pos = i + 1;
    return UNI_REPLACEMENT;
}

size_t uni_encode(uint32_t cp, char out[4])
{
    if (cp > 0x10FFFF)
        cp = UNI_REPLACEMENT;
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

int uni_seq_len(unsigned char c)
{
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        return 2;
    if (c >= 0xE0 && c <= 0xEF)
        return 3;
    if (c >= 0xF0 && c <= 0xF4)
        return 4;
    return 0;
}
