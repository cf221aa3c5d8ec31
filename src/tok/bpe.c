/* Byte-level BPE (tokenizer.ggml.model = "gpt2"): the pre-tokenizer splits the text into
 * byte-encoded words; in each word, adjacent symbols merge by merge rank (lowest first,
 * ties leftmost first) until no listed pair remains. */
#include <stdlib.h>
#include <string.h>

#include "tok/tok_impl.h"
#include "tok/unicode.h"

struct sym {
    int prev, next;
    const char *text;
    size_t n;
};

struct work {
    struct sym *s;
    size_t cap;
    struct tok_heap h;
    char *key;
    size_t key_cap;
};

static int32_t pair_rank(const struct tokenizer *t, struct work *w, const struct sym *a, const struct sym *b)
{
    size_t n = a->n + 1 + b->n;
    if (n > w->key_cap) {
        char *k = realloc(w->key, n * 2);
        if (!k)
            return -1;
        w->key = k;
        w->key_cap = n * 2;
    }
    memcpy(w->key, a->text, a->n);
    w->key[a->n] = ' ';
    memcpy(w->key + a->n + 1, b->text, b->n);
    return strmap_get(&t->merges, w->key, n);
}

static bool add_bigram(const struct tokenizer *t, struct work *w, int left, int right)
{
    if (left < 0 || right < 0)
        return true;
    int32_t rank = pair_rank(t, w, &w->s[left], &w->s[right]);
    if (rank < 0)
        return true;
    return tok_heap_push(&w->h, (struct tok_bigram){left, right, (float)rank, w->s[left].n + w->s[right].n});
}

static brasa_status encode_word(const struct tokenizer *t, struct work *w, const char *word, size_t len,
                                struct ivec *out)
{
    int32_t id;
    if (t->ignore_merges && (id = tok_find(t, word, len)) >= 0)
        return ivec_push(out, id);
    if (len > w->cap) {
        struct sym *s = realloc(w->s, len * sizeof *s);
        if (!s)
            return BRASA_ENOMEM;
        w->s = s;
        w->cap = len;
    }
    struct sym *s = w->s;
    int n = 0;
    for (size_t off = 0; off < len;) {
        size_t l = uni_len_lead((unsigned char)word[off]);
        if (l > len - off)
            l = len - off;
        s[n] = (struct sym){n - 1, off + l == len ? -1 : n + 1, word + off, l};
        off += l;
        n++;
    }
    w->h.n = 0;
    for (int i = 1; i < n; i++)
        if (!add_bigram(t, w, i - 1, i))
            return BRASA_ENOMEM;
    while (w->h.n) {
        struct tok_bigram b = tok_heap_pop(&w->h);
        struct sym *l = &s[b.left], *r = &s[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
            continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            s[r->next].prev = b.left;
        if (!add_bigram(t, w, l->prev, b.left) || !add_bigram(t, w, b.left, l->next))
            return BRASA_ENOMEM;
    }
    for (int i = 0; n && i != -1; i = s[i].next) {
        id = tok_find(t, s[i].text, s[i].n);
        if (id >= 0) {
            if (ivec_push(out, id))
                return BRASA_ENOMEM;
            continue;
        }
        /* no token: the reference looks up each byte of the symbol on its own */
        for (size_t j = 0; j < s[i].n; j++)
            if ((id = tok_find(t, s[i].text + j, 1)) >= 0 && ivec_push(out, id))
                return BRASA_ENOMEM;
    }
    return BRASA_OK;
}

/* Words repeat a lot in real text: a word seen earlier in this call copies the ids it got then
 * (the merge result depends on the word alone). The cache lives for one tok_encode call, so
 * tok_encode stays thread-safe; the words it points into are kept until the call ends. */
struct seen {
    size_t start; /* first id in out */
    size_t n;
};

struct bpe_ctx {
    struct work w;
    struct strmap cache;
    struct seen *seen;
    bool use_cache;
    struct pretok_out *words; /* one per fragment, kept while the cache points into them */
    size_t n_words, cap_words;
};

struct bpe_ctx *bpe_ctx_new(size_t text_len)
{
    struct bpe_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    /* words average several bytes: len/3 distinct words is a generous bound (caching stops there) */
    uint32_t max = (uint32_t)(text_len / 3 < (1u << 26) ? text_len / 3 : (1u << 26));
    if (max >= 64 && strmap_init(&c->cache, max, NULL) == BRASA_OK) {
        c->seen = malloc(max * sizeof *c->seen);
        c->use_cache = c->seen != NULL;
    }
    return c;
}

void bpe_ctx_free(struct bpe_ctx *c)
{
    if (!c)
        return;
    strmap_free(&c->cache);
    free(c->seen);
    free(c->w.s);
    free(c->w.h.v);
    free(c->w.key);
    for (size_t i = 0; i < c->n_words; i++)
        pretok_out_free(&c->words[i]);
    free(c->words);
    free(c);
}

brasa_status bpe_encode(const struct tokenizer *t, struct bpe_ctx *c, const char *text, size_t len,
                        struct ivec *out, struct brasa_err *err)
{
    if (c->n_words == c->cap_words) {
        size_t cap = c->cap_words ? c->cap_words * 2 : 8;
        struct pretok_out *nw = realloc(c->words, cap * sizeof *nw);
        if (!nw)
            return brasa_fail(err, BRASA_ENOMEM, "out of memory while tokenizing");
        c->words = nw;
        c->cap_words = cap;
    }
    struct pretok_out *words = &c->words[c->n_words++];
    memset(words, 0, sizeof *words);
    brasa_status st = pretok_split(t, text, len, words, err);
    if (st)
        return st;
    size_t start = 0;
    for (size_t i = 0; i < words->n && !st; i++) {
        const char *wd = words->buf + start;
        size_t wl = words->ends[i] - start;
        start = words->ends[i];
        if (c->use_cache && c->cache.n < c->cache.max) {
            int32_t e = strmap_get(&c->cache, wd, wl);
            if (e >= 0) {
                for (size_t k = 0; k < c->seen[e].n && !st; k++)
                    st = ivec_push(out, out->v[c->seen[e].start + k]);
                continue;
            }
            size_t before = out->n;
            st = encode_word(t, &c->w, wd, wl, out);
            c->seen[c->cache.n] = (struct seen){before, out->n - before};
            strmap_put(&c->cache, wd, (uint32_t)wl, (int32_t)c->cache.n);
            continue;
        }
        st = encode_word(t, &c->w, wd, wl, out);
    }
    if (st)
        st = brasa_fail(err, BRASA_ENOMEM, "out of memory while tokenizing");
    return st;
}
