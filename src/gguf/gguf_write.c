/* GGUF writer (version 3). Each key/value is serialised when it is set (type + payload), so
 * writing is a straight copy; tensors are referenced and streamed out at write time, each
 * starting at a multiple of the alignment in the data section. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "quant/quant.h"

struct wbuf {
    uint8_t *p;
    size_t n, cap;
    bool oom;
};

static void wb_put(struct wbuf *b, const void *data, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, data, n);
    b->n += n;
}

static void wb_u32(struct wbuf *b, uint32_t v)
{
    wb_put(b, &v, 4);
}

static void wb_u64(struct wbuf *b, uint64_t v)
{
    wb_put(b, &v, 8);
}

static void wb_str(struct wbuf *b, const void *s, uint64_t len)
{
    wb_u64(b, len);
    wb_put(b, s, (size_t)len);
}

struct wkv {
    char *key;
    struct wbuf val; /* u32 type + value, as in the file */
};

struct wtensor {
    char *name;
    uint32_t type;
    int n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    const void *data;
    uint64_t nbytes;
};

struct gguf_writer {
    struct wkv *kv;
    size_t n_kv, cap_kv;
    struct wtensor *t;
    size_t n_t, cap_t;
    uint32_t alignment;
};

brasa_status gguf_writer_new(struct gguf_writer **out, struct brasa_err *err)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory");
    (*out)->alignment = GGUF_DEFAULT_ALIGNMENT;
    return BRASA_OK;
}

void gguf_writer_free(struct gguf_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].val.p);
    }
    for (size_t i = 0; i < w->n_t; i++)
        free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w);
}

static brasa_status check_name(const char *name, const char *what, struct brasa_err *err)
{
    if (!name || !*name)
        return brasa_fail(err, BRASA_EINVAL, "empty %s", what);
    long long bad = gguf_utf8_invalid_at(name, strlen(name));
    if (bad >= 0)
        return brasa_fail(err, BRASA_EINVAL, "%s '%.*s...' is not valid UTF-8 at byte %lld", what,
                          (int)(bad < 64 ? bad : 64), name, bad);
    return BRASA_OK;
}

/* general.alignment decides the padding, so it must be a UINT32 power of two. */
static brasa_status take_alignment(struct gguf_writer *w, const struct wbuf *val,
                                   struct brasa_err *err)
{
    uint32_t type, a;
    memcpy(&type, val->p, 4);
    if (type != GGUF_T_UINT32)
        return brasa_fail(err, BRASA_EINVAL, "key 'general.alignment' must be UINT32, not %s",
                          gguf_vtype_name((enum gguf_vtype)type));
    memcpy(&a, val->p + 4, 4);
    if (a == 0 || (a & (a - 1)))
        return brasa_fail(err, BRASA_EINVAL,
                          "key 'general.alignment' is %u; it must be a non-zero power of two", a);
    w->alignment = a;
    return BRASA_OK;
}

/* Stores key = val (taking ownership of val's bytes), replacing an existing value. */
static brasa_status put(struct gguf_writer *w, const char *key, struct wbuf *val,
                        struct brasa_err *err)
{
    brasa_status st = check_name(key, "key", err);
    if (!st && val->oom)
        st = brasa_fail(err, BRASA_ENOMEM, "out of memory for key '%s'", key);
    if (!st && !strcmp(key, "general.alignment"))
        st = take_alignment(w, val, err);
    if (st) {
        free(val->p);
        return st;
    }
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key)) {
            free(w->kv[i].val.p);
            w->kv[i].val = *val;
            return BRASA_OK;
        }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? 2 * w->cap_kv : 32;
        struct wkv *kv = realloc(w->kv, cap * sizeof *kv);
        if (!kv) {
            free(val->p);
            return brasa_fail(err, BRASA_ENOMEM, "out of memory for key '%s'", key);
        }
        w->kv = kv;
        w->cap_kv = cap;
    }
    char *k = strdup(key);
    if (!k) {
        free(val->p);
        return brasa_fail(err, BRASA_ENOMEM, "out of memory for key '%s'", key);
    }
    w->kv[w->n_kv].key = k;
    w->kv[w->n_kv].val = *val;
    w->n_kv++;
    return BRASA_OK;
}

static brasa_status put_scalar(struct gguf_writer *w, const char *key, enum gguf_vtype t,
                               const void *v, size_t n, struct brasa_err *err)
{
    struct wbuf b = {0};
    wb_u32(&b, t);
    wb_put(&b, v, n);
    return put(w, key, &b, err);
}

brasa_status gguf_writer_set_alignment(struct gguf_writer *w, uint32_t alignment,
                                       struct brasa_err *err)
{
    return gguf_writer_set_u32(w, "general.alignment", alignment, err);
}

brasa_status gguf_writer_set_u32(struct gguf_writer *w, const char *key, uint32_t v,
                                 struct brasa_err *err)
{
    return put_scalar(w, key, GGUF_T_UINT32, &v, 4, err);
}

brasa_status gguf_writer_set_i32(struct gguf_writer *w, const char *key, int32_t v,
                                 struct brasa_err *err)
{
    return put_scalar(w, key, GGUF_T_INT32, &v, 4, err);
}

brasa_status gguf_writer_set_f32(struct gguf_writer *w, const char *key, float v,
                                 struct brasa_err *err)
{
    return put_scalar(w, key, GGUF_T_FLOAT32, &v, 4, err);
}

brasa_status gguf_writer_set_bool(struct gguf_writer *w, const char *key, bool v,
                                  struct brasa_err *err)
{
    uint8_t b = v;
    return put_scalar(w, key, GGUF_T_BOOL, &b, 1, err);
}

brasa_status gguf_writer_set_str(struct gguf_writer *w, const char *key, const char *v,
                                 struct brasa_err *err)
{
    struct wbuf b = {0};
    wb_u32(&b, GGUF_T_STRING);
    wb_str(&b, v, strlen(v));
    return put(w, key, &b, err);
}

brasa_status gguf_writer_set_arr(struct gguf_writer *w, const char *key, enum gguf_vtype elem,
                                 const void *data, uint64_t n, struct brasa_err *err)
{
    size_t es = gguf_vtype_size(elem);
    if (!es)
        return brasa_fail(err, BRASA_EINVAL,
                          "key '%s': arrays of %s need gguf_writer_set_arr_str (strings) or are "
                          "not supported (arrays)",
                          key, gguf_vtype_name(elem));
    if (n > SIZE_MAX / es)
        return brasa_fail(err, BRASA_EINVAL, "key '%s': array of %llu elements is too large", key,
                          (unsigned long long)n);
    if (elem == GGUF_T_BOOL)
        for (uint64_t i = 0; i < n; i++)
            if (((const uint8_t *)data)[i] > 1)
                return brasa_fail(err, BRASA_EINVAL, "key '%s': bool element %llu is not 0 or 1",
                                  key, (unsigned long long)i);
    struct wbuf b = {0};
    wb_u32(&b, GGUF_T_ARRAY);
    wb_u32(&b, elem);
    wb_u64(&b, n);
    wb_put(&b, data, (size_t)(n * es));
    return put(w, key, &b, err);
}

brasa_status gguf_writer_set_arr_str(struct gguf_writer *w, const char *key,
                                     const char *const *strs, uint64_t n, struct brasa_err *err)
{
    struct wbuf b = {0};
    wb_u32(&b, GGUF_T_ARRAY);
    wb_u32(&b, GGUF_T_STRING);
    wb_u64(&b, n);
    for (uint64_t i = 0; i < n; i++)
        wb_str(&b, strs[i], strlen(strs[i]));
    return put(w, key, &b, err);
}

/* The value of a scalar read from a file, narrowed back to its stored width. */
static void wb_scalar(struct wbuf *b, const struct gguf_kv *kv)
{
    uint64_t u = kv->v.u64;
    int64_t i = kv->v.i64;
    switch (kv->type) {
    case GGUF_T_UINT8: wb_put(b, &(uint8_t){(uint8_t)u}, 1); break;
    case GGUF_T_UINT16: wb_put(b, &(uint16_t){(uint16_t)u}, 2); break;
    case GGUF_T_UINT32: wb_put(b, &(uint32_t){(uint32_t)u}, 4); break;
    case GGUF_T_UINT64: wb_put(b, &u, 8); break;
    case GGUF_T_INT8: wb_put(b, &(int8_t){(int8_t)i}, 1); break;
    case GGUF_T_INT16: wb_put(b, &(int16_t){(int16_t)i}, 2); break;
    case GGUF_T_INT32: wb_put(b, &(int32_t){(int32_t)i}, 4); break;
    case GGUF_T_INT64: wb_put(b, &i, 8); break;
    case GGUF_T_FLOAT32: wb_put(b, &(float){(float)kv->v.f64}, 4); break;
    case GGUF_T_FLOAT64: wb_put(b, &kv->v.f64, 8); break;
    case GGUF_T_BOOL: wb_put(b, &(uint8_t){kv->v.b ? 1 : 0}, 1); break;
    case GGUF_T_STRING: wb_str(b, kv->v.str.ptr, kv->v.str.len); break;
    default: break;
    }
}

brasa_status gguf_writer_copy_kv(struct gguf_writer *w, const struct gguf_kv *kv,
                                 struct brasa_err *err)
{
    if ((unsigned)kv->type >= GGUF_T_COUNT)
        return brasa_fail(err, BRASA_EINVAL, "key '%s': unknown value type %d", kv->key,
                          (int)kv->type);
    struct wbuf b = {0};
    wb_u32(&b, kv->type);
    if (kv->type != GGUF_T_ARRAY) {
        wb_scalar(&b, kv);
        return put(w, kv->key, &b, err);
    }
    size_t es = gguf_vtype_size(kv->arr_type);
    if (!es && kv->arr_type != GGUF_T_STRING) {
        free(b.p);
        return brasa_fail(err, BRASA_EINVAL, "key '%s': arrays of %s are not supported", kv->key,
                          gguf_vtype_name(kv->arr_type));
    }
    wb_u32(&b, kv->arr_type);
    wb_u64(&b, kv->arr_len);
    if (es)
        wb_put(&b, kv->arr_data, (size_t)(kv->arr_len * es));
    else
        for (uint64_t i = 0; i < kv->arr_len; i++)
            wb_str(&b, kv->arr_strs[i].ptr, kv->arr_strs[i].len);
    return put(w, kv->key, &b, err);
}

brasa_status gguf_writer_add_tensor(struct gguf_writer *w, const char *name, uint32_t type,
                                    int n_dims, const int64_t *ne, const void *data,
                                    uint64_t nbytes, struct brasa_err *err)
{
    brasa_status st = check_name(name, "tensor name", err);
    if (st)
        return st;
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return brasa_fail(err, BRASA_EINVAL, "tensor '%s': %d dims (must be 1 to %d)", name,
                          n_dims, GGUF_MAX_DIMS);
    const struct qtype_info *q = qtype_get(type);
    if (!q)
        return brasa_fail(err, BRASA_EINVAL, "tensor '%s': unknown type %u", name, type);
    struct wtensor t = {.type = type, .n_dims = n_dims, .data = data, .nbytes = nbytes};
    uint64_t rows = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        t.ne[d] = d < n_dims ? ne[d] : 1;
        if (t.ne[d] < 1)
            return brasa_fail(err, BRASA_EINVAL, "tensor '%s': dimension %d is %lld", name, d,
                              (long long)t.ne[d]);
        if (d > 0) {
            if ((uint64_t)t.ne[d] > (uint64_t)INT64_MAX / rows)
                return brasa_fail(err, BRASA_EINVAL, "tensor '%s': element count overflows",
                                  name);
            rows *= (uint64_t)t.ne[d];
        }
    }
    size_t row = qtype_row_bytes(type, t.ne[0]);
    if (!row)
        return brasa_fail(err, BRASA_EINVAL,
                          "tensor '%s': row length %lld is not a whole number of %s blocks of %d",
                          name, (long long)t.ne[0], q->name, q->block);
    if (rows > UINT64_MAX / row || rows * row != nbytes)
        return brasa_fail(err, BRASA_EINVAL,
                          "tensor '%s': %llu bytes given, its type and shape need %llu", name,
                          (unsigned long long)nbytes, (unsigned long long)(rows * row));
    if (!data)
        return brasa_fail(err, BRASA_EINVAL, "tensor '%s': no data", name);
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? 2 * w->cap_t : 64;
        struct wtensor *nt = realloc(w->t, cap * sizeof *nt);
        if (!nt)
            return brasa_fail(err, BRASA_ENOMEM, "out of memory for tensor '%s'", name);
        w->t = nt;
        w->cap_t = cap;
    }
    if (!(t.name = strdup(name)))
        return brasa_fail(err, BRASA_ENOMEM, "out of memory for tensor '%s'", name);
    w->t[w->n_t++] = t;
    return BRASA_OK;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Duplicate tensor names are found at write time by sorting (tensor counts reach thousands). */
static brasa_status check_unique_tensors(const struct gguf_writer *w, struct brasa_err *err)
{
    if (w->n_t < 2)
        return BRASA_OK;
    char **names = malloc(w->n_t * sizeof *names);
    if (!names)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory");
    for (size_t i = 0; i < w->n_t; i++)
        names[i] = w->t[i].name;
    qsort(names, w->n_t, sizeof *names, cmp_names);
    brasa_status st = BRASA_OK;
    for (size_t i = 0; i + 1 < w->n_t && !st; i++)
        if (!strcmp(names[i], names[i + 1]))
            st = brasa_fail(err, BRASA_EINVAL, "duplicate tensor name '%s'", names[i]);
    free(names);
    return st;
}

static uint64_t align_up(uint64_t x, uint64_t a)
{
    return (x + a - 1) / a * a;
}

/* Header, key/values and tensor infos: everything before the data section. */
static void build_head(const struct gguf_writer *w, struct wbuf *b)
{
    wb_put(b, "GGUF", 4);
    wb_u32(b, 3);
    wb_u64(b, w->n_t);
    wb_u64(b, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        wb_str(b, w->kv[i].key, strlen(w->kv[i].key));
        wb_put(b, w->kv[i].val.p, w->kv[i].val.n);
    }
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        const struct wtensor *t = &w->t[i];
        wb_str(b, t->name, strlen(t->name));
        wb_u32(b, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++)
            wb_u64(b, (uint64_t)t->ne[d]);
        wb_u32(b, t->type);
        wb_u64(b, off);
        off = align_up(off + t->nbytes, w->alignment);
    }
    static const uint8_t zero[256];
    while (!b->oom && b->n % w->alignment)
        wb_put(b, zero, w->alignment - b->n % w->alignment > sizeof zero
                            ? sizeof zero
                            : w->alignment - b->n % w->alignment);
}

static bool write_pad(FILE *fp, uint64_t n)
{
    static const uint8_t zero[4096];
    while (n) {
        size_t k = n > sizeof zero ? sizeof zero : (size_t)n;
        if (fwrite(zero, 1, k, fp) != k)
            return false;
        n -= k;
    }
    return true;
}

brasa_status gguf_writer_write(struct gguf_writer *w, const char *path, struct brasa_err *err)
{
    brasa_status st = check_unique_tensors(w, err);
    if (st)
        return st;
    struct wbuf head = {0};
    build_head(w, &head);
    if (head.oom) {
        free(head.p);
        return brasa_fail(err, BRASA_ENOMEM, "out of memory writing '%s'", path);
    }
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        free(head.p);
        return brasa_fail(err, BRASA_EIO, "cannot create '%s'", path);
    }
    bool ok = fwrite(head.p, 1, head.n, fp) == head.n;
    free(head.p);
    for (size_t i = 0; ok && i < w->n_t; i++) {
        const struct wtensor *t = &w->t[i];
        ok = fwrite(t->data, 1, (size_t)t->nbytes, fp) == t->nbytes &&
             write_pad(fp, align_up(t->nbytes, w->alignment) - t->nbytes);
    }
    ok = fclose(fp) == 0 && ok;
    if (!ok) {
        remove(path);
        return brasa_fail(err, BRASA_EIO, "cannot write '%s' (disk full?)", path);
    }
    return BRASA_OK;
}
