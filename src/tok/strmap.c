/* Byte-string hash map (open addressing, FNV-1a) and a growable int32 vector. */
#include <stdlib.h>
#include <string.h>

#include "tok/tok_impl.h"

static uint32_t hash_bytes(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h ^ (h >> 15);
}

brasa_status strmap_init(struct strmap *m, uint32_t n_max, struct brasa_err *err)
{
    memset(m, 0, sizeof *m);
    uint32_t cap = 16;
    while (cap < n_max * 2u + 1u) {
        if (cap > (1u << 30))
            return brasa_fail(err, BRASA_ENOMEM, "hash map for %u keys is too large", n_max);
        cap <<= 1;
    }
    m->cap = cap;
    m->max = n_max;
    m->slot = malloc(sizeof(int32_t) * cap);
    m->key = malloc(sizeof(char *) * (n_max ? n_max : 1));
    m->klen = malloc(sizeof(uint32_t) * (n_max ? n_max : 1));
    m->val = malloc(sizeof(int32_t) * (n_max ? n_max : 1));
    if (!m->slot || !m->key || !m->klen || !m->val) {
        strmap_free(m);
        return brasa_fail(err, BRASA_ENOMEM, "out of memory for a hash map of %u keys", n_max);
    }
    memset(m->slot, 0xff, sizeof(int32_t) * cap);
    return BRASA_OK;
}

void strmap_free(struct strmap *m)
{
    free(m->slot);
    free(m->key);
    free(m->klen);
    free(m->val);
    memset(m, 0, sizeof *m);
}

int32_t strmap_put(struct strmap *m, const char *k, uint32_t klen, int32_t val)
{
    uint32_t i = hash_bytes(k, klen) & (m->cap - 1);
    for (;; i = (i + 1) & (m->cap - 1)) {
        int32_t e = m->slot[i];
        if (e < 0)
            break;
        if (m->klen[e] == klen && memcmp(m->key[e], k, klen) == 0)
            return e;
    }
    if (m->n >= m->max)
        return -2;
    int32_t e = (int32_t)m->n++;
    m->key[e] = k;
    m->klen[e] = klen;
    m->val[e] = val;
    m->slot[i] = e;
    return -1;
}

int32_t strmap_get(const struct strmap *m, const char *k, size_t klen)
{
    if (!m->cap)
        return -1;
    uint32_t i = hash_bytes(k, klen) & (m->cap - 1);
    for (;; i = (i + 1) & (m->cap - 1)) {
        int32_t e = m->slot[i];
        if (e < 0)
            return -1;
        if (m->klen[e] == klen && memcmp(m->key[e], k, klen) == 0)
            return m->val[e];
    }
}

brasa_status ivec_push(struct ivec *a, int32_t x)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        int32_t *v = realloc(a->v, cap * sizeof *v);
        if (!v)
            return BRASA_ENOMEM;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return BRASA_OK;
}
