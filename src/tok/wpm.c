/* WordPiece (tokenizer.ggml.model = "bert"): BERT normalisation (lowercase and accent
 * stripping through the first code point of the canonical decomposition), split on
 * whitespace and around punctuation and CJK ideographs, then greedy longest match of
 * "\u2581word" against the vocabulary; a word with no full match becomes [UNK]. */
#include <stdlib.h>
#include <string.h>

#include "tok/tok_impl.h"
#include "tok/unicode.h"

static bool is_chinese(uint32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static brasa_status encode_word(const struct tokenizer *t, const char *w, size_t n, struct ivec *out)
{
    size_t start = out->n;
    for (size_t i = 0; i < n; i++) {
        size_t j = i + (size_t)t->max_token_len + 1;
        if (j > n)
            j = n;
        bool match = false;
        for (; j > i; j--) {
            int32_t id = tok_find(t, w + i, j - i);
            if (id >= 0) {
                if (ivec_push(out, id))
                    return BRASA_ENOMEM;
                match = true;
                i = j - 1;
                break;
            }
        }
        if (!match) {
            out->n = start;
            break;
        }
    }
    if (out->n == start && ivec_push(out, t->unk))
        return BRASA_ENOMEM;
    return BRASA_OK;
}

brasa_status wpm_encode(const struct tokenizer *t, const char *text, size_t len, struct ivec *out,
                        struct brasa_err *err)
{
    /* every word is "\u2581" + its normalised characters: at most 3 + 4 bytes per input byte */
    char *w = malloc(3 + len * 4 + 4);
    if (!w)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory");
    size_t wn = 0;
    brasa_status st = BRASA_OK;
#define FLUSH()                                                      \
    do {                                                             \
        if (wn && !st && encode_word(t, w, wn + 3, out))             \
            st = BRASA_ENOMEM;                                       \
        wn = 0;                                                      \
    } while (0)
    memcpy(w, "\xe2\x96\x81", 3);
    for (size_t pos = 0; pos < len && !st;) {
        uint32_t cp = uni_decode((const unsigned char *)text, len, &pos);
        if (t->wpm_strip_accents)
            cp = uni_nfd_first(cp);
        unsigned f = uni_flags(cp);
        if (f & UF_WS) {
            FLUSH();
            continue;
        }
        if (cp == 0 || cp == UNI_REPLACEMENT || (f & UF_C))
            continue;
        if (t->wpm_strip_accents && (f & UF_M))
            continue;
        char u[4];
        size_t ul = uni_encode(t->wpm_lowercase ? uni_tolower(cp) : cp, u);
        if ((f & UF_P) || (cp < 0x7F && (f & UF_S)) || is_chinese(cp)) {
            FLUSH();
            memcpy(w + 3, u, ul);
            wn = ul;
            FLUSH();
        } else {
            memcpy(w + 3 + wn, u, ul);
            wn += ul;
        }
    }
    FLUSH();
#undef FLUSH
    free(w);
    return st ? brasa_fail(err, BRASA_ENOMEM, "out of memory while tokenizing") : BRASA_OK;
}
