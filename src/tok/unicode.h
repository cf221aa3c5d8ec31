/* Unicode facts the tokenizers need: general-category classes, White_Space, simple
 * lowercase, first code point of the canonical decomposition, and a UTF-8 decoder that
 * behaves exactly like the reference tokenizer's (see uni_decode). Tables are generated
 * into unicode_tab.c by tools/gen_unicode.py. */
#ifndef BRASA_TOK_UNICODE_H
#define BRASA_TOK_UNICODE_H
#include <stddef.h>
#include <stdint.h>

/* general-category classes as stored in the generated table */
enum uni_class { UNI_UNDEF = 0, UNI_N = 1, UNI_L, UNI_Z, UNI_M, UNI_P, UNI_S, UNI_C };

/* flag bits returned by uni_flags() */
enum {
    UF_N = 1 << 0,     /* \p{N} */
    UF_L = 1 << 1,     /* \p{L} */
    UF_Z = 1 << 2,     /* \p{Z} */
    UF_M = 1 << 3,     /* \p{M} */
    UF_P = 1 << 4,     /* \p{P} */
    UF_S = 1 << 5,     /* \p{S} */
    UF_C = 1 << 6,     /* \p{C}, unassigned included */
    UF_UNDEF = 1 << 7, /* beyond U+10FFFF */
    UF_WS = 1 << 8,    /* White_Space property */
};

#define UNI_REPLACEMENT 0xFFFDu

unsigned uni_flags(uint32_t cp);
uint32_t uni_tolower(uint32_t cp);
uint32_t uni_nfd_first(uint32_t cp);

/* Decodes one code point at s[*pos] (n bytes in all) and advances *pos. Checks only the
 * lead byte's length and the continuation bytes (like the reference tokenizer: overlong
 * forms and surrogates decode, lead bytes F5..F7 give values above U+10FFFF); anything
 * else yields U+FFFD and advances one byte. */
uint32_t uni_decode(const unsigned char *s, size_t n, size_t *pos);
/* Encodes cp as UTF-8 (values above U+10FFFF as U+FFFD); returns 1..4. */
size_t uni_encode(uint32_t cp, char out[4]);
/* Byte length a UTF-8 lead byte announces (1 for continuation bytes), as the reference's
 * SentencePiece/BPE symbol splitter uses it. */
static inline size_t uni_len_lead(unsigned char c)
{
    static const unsigned char len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[c >> 4];
}
/* Length of the longest valid UTF-8 prefix state: returns how many bytes of a sequence
 * starting at lead byte c are expected (1..4), or 0 if c cannot start a sequence. */
int uni_seq_len(unsigned char c);

/* generated tables (unicode_tab.c) */
extern const uint32_t uni_class_start[];
extern const uint8_t uni_class_val[];
extern const size_t uni_class_n;
extern const uint32_t uni_white_space[];
extern const size_t uni_white_space_n;
extern const uint32_t uni_lower[][2];
extern const size_t uni_lower_n;
extern const uint32_t uni_nfd[][3];
extern const size_t uni_nfd_n;

#endif
