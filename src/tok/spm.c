/* SentencePiece-style merging (tokenizer.ggml.model = "llama"): start from UTF-8 characters,
 * repeatedly merge the adjacent pair whose concatenation is the highest-scored token
 * (ties: leftmost first), then emit each symbol's token or, failing that, its bytes as
 * <0xXX> byte tokens. */
#include <stdlib.h>
#include <string.h>

#include "tok/tok_impl.h"
#include "tok/unicode.h"

struct sym {
    int prev, next;
    const char *text;
    size_t n;
};

static bool try_bigram(const struct tokenizer *t, const struct sym *s, int left, int right, struct tok_heap *h)
{
    if (left < 0 || right < 0)
        return true;
    size_t n = s[left].n + s[right].n; /* symbols are adjacent slices of one buffer */
    int32_t id = tok_find(t, s[left].text, n);
    if (id < 0)
        return true;
    return tok_heap_push(h, (struct tok_bigram){left, right, -t->score[id], n});
}

static brasa_status emit_symbol(const struct tokenizer *t, const struct sym *s, struct ivec *out)
{
    int32_t id = tok_find(t, s->text, s->n);
    if (id >= 0)
        return ivec_push(out, id);
    for (size_t j = 0; j < s->n; j++) {
        static const char hex[] = "0123456789ABCDEF";
        unsigned char c = (unsigned char)s->text[j];
        char buf[6] = {'<', '0', 'x', hex[c >> 4], hex[c & 15], '>'};
        int32_t b = tok_find(t, buf, 6);
        if (b < 0)
            b = tok_find(t, (const char *)&c, 1);
        if (b < 0)
            b = t->unk; /* the reference aborts here; an unknown token is the safe answer */
        if (b >= 0 && ivec_push(out, b))
            return BRASA_ENOMEM;
    }
    return BRASA_OK;
}

/* Merges symbols [a, b) (linked among themselves) and emits them. */
static bool merge_range(const struct tokenizer *t, struct sym *s, int a, int b, struct tok_heap *h, struct ivec *out)
{
    s[a].prev = -1;
    s[b - 1].next = -1;
    h->n = 0;
    for (int i = a + 1; i < b; i++)
        if (!try_bigram(t, s, i - 1, i, h))
            return false;
    while (h->n) {
        struct tok_bigram g = tok_heap_pop(h);
        struct sym *l = &s[g.left], *r = &s[g.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != g.size)
            continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            s[r->next].prev = g.left;
        if (!try_bigram(t, s, l->prev, g.left, h) || !try_bigram(t, s, g.left, l->next, h))
            return false;
    }
    for (int i = a; i != -1; i = s[i].next)
        if (emit_symbol(t, &s[i], out))
            return false;
    return true;
}

static bool is_space_sym(const struct sym *s)
{
    return s->n == 3 && memcmp(s->text, "\xe2\x96\x81", 3) == 0;
}

/* A chunk may start at an escaped space that follows one complete, valid, non-space
 * character: when no token holds such a character followed by U+2581 (t->spm_chunks),
 * no merge can cross there, so merging each chunk on its own gives the same result as
 * merging the whole text, with a much smaller queue. */
static bool chunk_start(const struct sym *s, int i)
{
    if (!is_space_sym(&s[i]) || is_space_sym(&s[i - 1]))
        return false;
    size_t pos = 0;
    uint32_t cp = uni_decode((const unsigned char *)s[i - 1].text, s[i - 1].n, &pos);
    return pos == s[i - 1].n && (cp != UNI_REPLACEMENT || s[i - 1].n == 3);
}

/* Chunks repeat a lot in real text ("\u2581the"): a chunk seen earlier in this call copies the
 * ids it got then (its merges depend on its own text alone). */
struct seen {
    size_t start, n;
};
struct chunk_cache {
    struct strmap map;
    struct seen *seen;
    bool on;
};

static bool merge_chunk(const struct tokenizer *t, struct sym *s, int n, struct tok_heap *h, struct ivec *out,
                        struct chunk_cache *c)
{
    const char *text = s[0].text;
    size_t len = (size_t)(s[n - 1].text + s[n - 1].n - text);
    if (!c->on || c->map.n >= c->map.max || n < 2)
        return merge_range(t, s, 0, n, h, out);
    int32_t e = strmap_get(&c->map, text, len);
    if (e >= 0) {
        for (size_t k = 0; k < c->seen[e].n; k++)
            if (ivec_push(out, out->v[c->seen[e].start + k]))
                return false;
        return true;
    }
    size_t before = out->n;
    if (!merge_range(t, s, 0, n, h, out))
        return false;
    c->seen[c->map.n] = (struct seen){before, out->n - before};
    strmap_put(&c->map, text, (uint32_t)len, (int32_t)c->map.n);
    return true;
}

brasa_status spm_encode(const struct tokenizer *t, const char *text, size_t len, struct ivec *out,
                        struct brasa_err *err)
{
    if (!len)
        return BRASA_OK;
    /* symbols of the current chunk only: the queue and the array stay small and warm */
    size_t cap = 256;
    struct sym *s = malloc(cap * sizeof *s);
    struct tok_heap h = {0};
    struct chunk_cache cc = {0};
    if (t->spm_chunks && len > 256) {
        uint32_t max = (uint32_t)(len / 4 < (1u << 26) ? len / 4 : (1u << 26));
        cc.on = strmap_init(&cc.map, max, NULL) == BRASA_OK && (cc.seen = malloc(max * sizeof *cc.seen));
    }
    bool ok = s != NULL;
    int n = 0;
    for (size_t off = 0; ok && off < len;) {
        size_t l = uni_len_lead((unsigned char)text[off]);
        if (l > len - off)
            l = len - off;
        if ((size_t)n == cap) {
            struct sym *ns = realloc(s, cap * 2 * sizeof *s);
            if (!ns) {
                ok = false;
                break;
            }
            s = ns;
            cap *= 2;
        }
        s[n] = (struct sym){n - 1, n + 1, text + off, l};
        off += l;
        if (n > 0 && t->spm_chunks && chunk_start(s, n)) {
            ok = merge_chunk(t, s, n, &h, out, &cc);
            s[0] = (struct sym){-1, 1, s[n].text, s[n].n};
            n = 0;
        }
        n++;
    }
    if (ok && n)
        ok = merge_chunk(t, s, n, &h, out, &cc);
    strmap_free(&cc.map);
    free(cc.seen);
    free(h.v);
    free(s);
    return ok ? BRASA_OK : brasa_fail(err, BRASA_ENOMEM, "out of memory while tokenizing");
}
