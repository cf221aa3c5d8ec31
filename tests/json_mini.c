/* json_mini: recursive-descent JSON reader for tests. */
#include "json_mini.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct jp {
    const char *p, *end;
    int depth;
};

static void ws(struct jp *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static void free_inner(struct jm *v)
{
    free(v->str);
    for (size_t i = 0; i < v->n; i++) {
        if (v->items)
            free_inner(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
}

void jm_free(struct jm *v)
{
    if (!v)
        return;
    free_inner(v);
    free(v);
}

static int hex4(const char *s, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Parses a string at j->p (after the opening quote). */
static char *str(struct jp *j, size_t *len)
{
    const char *s = j->p;
    size_t cap = 0;
    while (s < j->end && *s != '"') {
        if (*s == '\\')
            s++;
        s++;
        cap++;
    }
    char *o = malloc(cap * 4 + 1), *w = o;
    if (!o)
        return NULL;
    while (j->p < j->end && *j->p != '"') {
        char c = *j->p++;
        if (c != '\\') {
            *w++ = c;
            continue;
        }
        if (j->p >= j->end)
            break;
        c = *j->p++;
        switch (c) {
        case 'n': *w++ = '\n'; break;
        case 't': *w++ = '\t'; break;
        case 'r': *w++ = '\r'; break;
        case 'b': *w++ = '\b'; break;
        case 'f': *w++ = '\f'; break;
        case 'u': {
            unsigned cp, lo;
            if (j->end - j->p < 4 || hex4(j->p, &cp)) {
                free(o);
                return NULL;
            }
            j->p += 4;
            if (cp >= 0xd800 && cp < 0xdc00 && j->end - j->p >= 6 && j->p[0] == '\\' &&
                j->p[1] == 'u' && hex4(j->p + 2, &lo) == 0 && lo >= 0xdc00 && lo < 0xe000) {
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                j->p += 6;
            }
            w += put_utf8(w, cp);
            break;
        }
        default: *w++ = c; break;
        }
    }
    if (j->p >= j->end) {
        free(o);
        return NULL;
    }
    j->p++; /* closing quote */
    *w = 0;
    *len = (size_t)(w - o);
    return o;
}

static int value(struct jp *j, struct jm *v);

static int push(struct jm *v, size_t *cap, char *key)
{
    if (v->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        struct jm *ni = realloc(v->items, nc * sizeof *ni);
        if (!ni)
            return -1;
        v->items = ni;
        if (v->type == JM_OBJ) {
            char **nk = realloc(v->keys, nc * sizeof *nk);
            if (!nk)
                return -1;
            v->keys = nk;
        }
        *cap = nc;
    }
    memset(&v->items[v->n], 0, sizeof v->items[0]);
    if (v->type == JM_OBJ)
        v->keys[v->n] = key;
    v->n++;
    return 0;
}

static int container(struct jp *j, struct jm *v, char close)
{
    size_t cap = 0;
    ws(j);
    if (j->p < j->end && *j->p == close) {
        j->p++;
        return 0;
    }
    for (;;) {
        char *key = NULL;
        ws(j);
        if (v->type == JM_OBJ) {
            size_t kl;
            if (j->p >= j->end || *j->p != '"')
                return -1;
            j->p++;
            if (!(key = str(j, &kl)))
                return -1;
            ws(j);
            if (j->p >= j->end || *j->p != ':') {
                free(key);
                return -1;
            }
            j->p++;
        }
        if (push(v, &cap, key)) {
            free(key);
            return -1;
        }
        if (value(j, &v->items[v->n - 1]))
            return -1;
        ws(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        if (j->p < j->end && *j->p == close) {
            j->p++;
            return 0;
        }
        return -1;
    }
}

static int value(struct jp *j, struct jm *v)
{
    ws(j);
    if (j->p >= j->end || ++j->depth > 64)
        return -1;
    int rc = 0;
    char c = *j->p;
    if (c == '{' || c == '[') {
        j->p++;
        v->type = c == '{' ? JM_OBJ : JM_ARR;
        rc = container(j, v, c == '{' ? '}' : ']');
    } else if (c == '"') {
        j->p++;
        v->type = JM_STR;
        rc = (v->str = str(j, &v->len)) ? 0 : -1;
    } else if (j->end - j->p >= 4 && !memcmp(j->p, "true", 4)) {
        v->type = JM_BOOL, v->b = true, j->p += 4;
    } else if (j->end - j->p >= 5 && !memcmp(j->p, "false", 5)) {
        v->type = JM_BOOL, j->p += 5;
    } else if (j->end - j->p >= 4 && !memcmp(j->p, "null", 4)) {
        v->type = JM_NULL, j->p += 4;
    } else {
        char buf[64];
        size_t n = 0;
        while (j->p + n < j->end && n < sizeof buf - 1 && strchr("+-0123456789.eE", j->p[n]))
            n++;
        if (n == 0)
            return -1;
        memcpy(buf, j->p, n);
        buf[n] = 0;
        char *e;
        v->type = JM_NUM;
        v->num = strtod(buf, &e);
        if (e != buf + n)
            return -1;
        j->p += n;
    }
    j->depth--;
    return rc;
}

struct jm *jm_parse(const char *text, size_t len)
{
    struct jp j = {text, text + len, 0};
    struct jm *v = calloc(1, sizeof *v);
    if (!v)
        return NULL;
    if (value(&j, v)) {
        jm_free(v);
        return NULL;
    }
    ws(&j);
    if (j.p != j.end) {
        jm_free(v);
        return NULL;
    }
    return v;
}

const struct jm *jm_get(const struct jm *obj, const char *key)
{
    if (!obj || obj->type != JM_OBJ)
        return NULL;
    for (size_t i = 0; i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0)
            return &obj->items[i];
    return NULL;
}

const struct jm *jm_at(const struct jm *arr, size_t i)
{
    return arr && arr->type == JM_ARR && i < arr->n ? &arr->items[i] : NULL;
}

long jm_int(const struct jm *v, long def) { return v && v->type == JM_NUM ? (long)v->num : def; }
double jm_num(const struct jm *v, double def) { return v && v->type == JM_NUM ? v->num : def; }
