/* Internals shared by the tokenizer sources (tok.c, spm.c, bpe.c, wpm.c, pretok.c). */
#ifndef BRASA_TOK_IMPL_H
#define BRASA_TOK_IMPL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/status.h"

enum tok_type { TOKT_SPM, TOKT_BPE, TOKT_WPM };

/* token attributes (bits), as the reference derives them from tokenizer.ggml.token_type */
enum {
    TA_UNKNOWN = 1 << 0,
    TA_UNUSED = 1 << 1,
    TA_NORMAL = 1 << 2,
    TA_CONTROL = 1 << 3,
    TA_USER_DEFINED = 1 << 4,
    TA_BYTE = 1 << 5,
    TA_LSTRIP = 1 << 7,
    TA_RSTRIP = 1 << 8,
};

/* pre-tokenizers of byte-level BPE (tokenizer.ggml.pre), by regex list */
enum pretok_id {
    PRE_DEFAULT,
    PRE_GPT2,         /* gpt2, mpt, ... */
    PRE_LLAMA3,
    PRE_QWEN2,
    PRE_QWEN35,
    PRE_STARCODER,    /* starcoder, refact */
    PRE_FALCON,
    PRE_DEEPSEEK_LLM,
    PRE_DEEPSEEK_CODER,
};

/* Open-addressing hash map from byte strings to int32 values. Keys are not copied. */
struct strmap {
    uint32_t cap;        /* power of two */
    uint32_t n, max;     /* keys stored, keys allowed */
    int32_t *slot;       /* [cap] entry index or -1 */
    const char **key;    /* [n] */
    uint32_t *klen;      /* [n] */
    int32_t *val;        /* [n] */
};
brasa_status strmap_init(struct strmap *m, uint32_t n_max, struct brasa_err *err);
void strmap_free(struct strmap *m);
/* Inserts if absent; returns the existing entry's index, -1 when inserted, -2 when full. */
int32_t strmap_put(struct strmap *m, const char *k, uint32_t klen, int32_t val);
int32_t strmap_get(const struct strmap *m, const char *k, size_t klen); /* -1 if absent */

struct tokenizer {
    enum tok_type type;
    enum pretok_id pre;
    int32_t n_vocab;
    char *arena;            /* all token texts, NUL-terminated */
    const char **text;      /* [n_vocab] */
    uint32_t *len;          /* [n_vocab] */
    float *score;           /* [n_vocab] */
    uint16_t *attr;         /* [n_vocab] TA_* */
    uint8_t *eog;           /* [n_vocab] end-of-generation flags */
    struct strmap vocab;    /* text -> id */
    char *merge_arena;
    struct strmap merges;   /* "left right" -> rank */
    int32_t *special;       /* control/user-defined/unknown ids, longest text first */
    size_t n_special;
    uint32_t first_start[257]; /* special[] positions by first byte: by_first[first_start[b]..[b+1]) */
    uint32_t *by_first;        /* indices into special[] */
    int32_t bos, eos, eot, unk, sep, pad;
    bool add_bos, add_eos, add_sep, add_space_prefix, ignore_merges, clean_spaces;
    bool wpm_lowercase, wpm_strip_accents;
    bool spm_chunks;        /* no token has a non-space character followed by U+2581 */
    int max_token_len;
    char byte_enc[256][3];  /* byte-level BPE: byte -> UTF-8 of its stand-in code point */
    uint8_t byte_enc_len[256];
};

/* growable int32 vector */
struct ivec {
    int32_t *v;
    size_t n, cap;
};
brasa_status ivec_push(struct ivec *a, int32_t x);

static inline int32_t tok_find(const struct tokenizer *t, const char *s, size_t n)
{
    return strmap_get(&t->vocab, s, n);
}

brasa_status spm_encode(const struct tokenizer *t, const char *text, size_t len, struct ivec *out,
                        struct brasa_err *err);
/* Byte-level BPE state kept across the fragments of one tok_encode call. */
struct bpe_ctx;
struct bpe_ctx *bpe_ctx_new(size_t text_len);
void bpe_ctx_free(struct bpe_ctx *c);
brasa_status bpe_encode(const struct tokenizer *t, struct bpe_ctx *c, const char *text, size_t len,
                        struct ivec *out, struct brasa_err *err);
brasa_status wpm_encode(const struct tokenizer *t, const char *text, size_t len, struct ivec *out,
                        struct brasa_err *err);

/* Pre-tokenizer: splits text into words, each already byte-encoded (GPT-2 byte-to-unicode
 * mapping). Words are stored back to back in *buf; ends[i] is the end offset of word i. */
struct pretok_out {
    char *buf;
    size_t len, cap;
    size_t *ends;
    size_t n, ends_cap;
};
void pretok_out_free(struct pretok_out *o);
brasa_status pretok_split(const struct tokenizer *t, const char *text, size_t len,
                          struct pretok_out *o, struct brasa_err *err);
/* Parses a tokenizer.ggml.pre value; false if unknown. NULL or "" gives PRE_DEFAULT. */
bool pretok_from_name(const char *name, enum pretok_id *out);
const char *pretok_name(enum pretok_id id);

/* ---- merge candidates (bpe.c, spm.c) ----
 * A pair of adjacent symbols that could merge, kept in a binary heap ordered by key
 * (smallest first; BPE uses the merge rank, SentencePiece minus the token score), ties to
 * the leftmost pair. */
struct tok_bigram {
    int left, right;
    float key;
    size_t size;
};
struct tok_heap {
    struct tok_bigram *v;
    size_t n, cap;
};
bool tok_heap_push(struct tok_heap *h, struct tok_bigram b); /* false when out of memory */
struct tok_bigram tok_heap_pop(struct tok_heap *h);          /* h->n must be > 0 */

#endif
