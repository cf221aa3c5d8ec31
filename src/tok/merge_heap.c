/* The merge-candidate heap shared by the BPE and SentencePiece tokenizers. */
#include <stdlib.h>

#include "tok/tok_impl.h"

static bool before(const struct tok_bigram *a, const struct tok_bigram *b)
{
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

bool tok_heap_push(struct tok_heap *h, struct tok_bigram b)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        struct tok_bigram *v = realloc(h->v, cap * sizeof *v);
        if (!v)
            return false;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(&b, &h->v[p]))
            break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = b;
    return true;
}

struct tok_bigram tok_heap_pop(struct tok_heap *h)
{
    struct tok_bigram top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && before(&h->v[c + 1], &h->v[c]))
            c++;
        if (!before(&h->v[c], &last))
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n)
        h->v[i] = last;
    return top;
}
