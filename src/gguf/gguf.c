/* GGUF reader: one pass over the (untrusted) bytes that checks every length before reading,
 * then the cross-checks that need the whole file (duplicates, tensor placement).
 *
 * Layout (little-endian): "GGUF" u32 version, u64 n_tensors, u64 n_kv, n_kv × (string key,
 * u32 type, value), n_tensors × (string name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset),
 * padding to the alignment, then the data section. A string is u64 length + bytes. */
#include "gguf/gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/platform.h"
#include "quant/quant.h"

/* Smallest possible encodings, used to bound counts by the bytes that remain: a key/value is
 * a key (u64 length + 1 byte) + u32 type + a 1-byte value; a tensor info is a name (8 + 1) +
 * u32 n_dims + one u64 dim + u32 type + u64 offset. */
#define MIN_KV_BYTES (8 + 1 + 4 + 1)
#define MIN_TENSOR_BYTES (8 + 1 + 4 + 8 + 4 + 8)

static const char *const vtype_names[GGUF_T_COUNT] = {
    "UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
    "BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64",
};

const char *gguf_vtype_name(enum gguf_vtype t)
{
    return (unsigned)t < GGUF_T_COUNT ? vtype_names[t] : "?";
}

size_t gguf_vtype_size(enum gguf_vtype t)
{
    switch (t) {
    case GGUF_T_UINT8: case GGUF_T_INT8: case GGUF_T_BOOL: return 1;
    case GGUF_T_UINT16: case GGUF_T_INT16: return 2;
    case GGUF_T_UINT32: case GGUF_T_INT32: case GGUF_T_FLOAT32: return 4;
    case GGUF_T_UINT64: case GGUF_T_INT64: case GGUF_T_FLOAT64: return 8;
    default: return 0;
    }
}

/* ---- name index: open addressing over FNV-1a, slots hold index + 1 (0 = empty) ---- */

struct name_index {
    uint64_t mask;
    uint64_t *slots;
};

static uint64_t hash_str(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static bool index_init(struct name_index *ix, uint64_t n)
{
    uint64_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    ix->mask = cap - 1;
    ix->slots = calloc(cap, sizeof *ix->slots);
    return ix->slots != NULL;
}

/* Finds name; names(i) gives the name of entry i. Returns the slot (empty or matching). */
static uint64_t *index_slot(const struct name_index *ix, const char *name,
                            const char *(*names)(const void *, uint64_t), const void *ctx)
{
    if (!ix->slots)
        return NULL;
    for (uint64_t h = hash_str(name) & ix->mask;; h = (h + 1) & ix->mask) {
        uint64_t *s = &ix->slots[h];
        if (*s == 0 || strcmp(names(ctx, *s - 1), name) == 0)
            return s;
    }
}

static const char *kv_name(const void *ctx, uint64_t i)
{
    return ((const struct gguf_file *)ctx)->kv[i].key;
}

static const char *tensor_name(const void *ctx, uint64_t i)
{
    return ((const struct gguf_file *)ctx)->tensors[i].name;
}

struct gguf_index {
    struct name_index kv, tensors;
};

/* ---- bounded reading ---- */

struct rd {
    const uint8_t *p;
    size_t size, pos;
    struct brasa_err *err;
};

static size_t rd_left(const struct rd *r)
{
    return r->size - r->pos;
}

static brasa_status rd_need(struct rd *r, uint64_t n, const char *what, const char *ctx)
{
    if (n > rd_left(r))
        return brasa_fail(r->err, BRASA_EFORMAT,
                          "byte %zu: %s%s needs %llu bytes but the file ends at byte %zu "
                          "(truncated?)",
                          r->pos, ctx, what, (unsigned long long)n, r->size);
    return BRASA_OK;
}

static brasa_status rd_bytes(struct rd *r, void *dst, size_t n, const char *what, const char *ctx)
{
    brasa_status st = rd_need(r, n, what, ctx);
    if (st)
        return st;
    memcpy(dst, r->p + r->pos, n);
    r->pos += n;
    return BRASA_OK;
}

/* The host is little-endian (x86-64, aarch64), like the format. */
static brasa_status rd_u32(struct rd *r, uint32_t *v, const char *what, const char *ctx)
{
    return rd_bytes(r, v, 4, what, ctx);
}

static brasa_status rd_u64(struct rd *r, uint64_t *v, const char *what, const char *ctx)
{
    return rd_bytes(r, v, 8, what, ctx);
}

static brasa_status rd_str(struct rd *r, struct gguf_str *s, const char *what, const char *ctx)
{
    size_t at = r->pos;
    brasa_status st = rd_u64(r, &s->len, what, ctx);
    if (st)
        return st;
    if (s->len > rd_left(r))
        return brasa_fail(r->err, BRASA_EFORMAT,
                          "byte %zu: %s%s has length %llu but only %zu bytes remain in the file",
                          at, ctx, what, (unsigned long long)s->len, rd_left(r));
    s->ptr = (const char *)r->p + r->pos;
    r->pos += (size_t)s->len;
    return BRASA_OK;
}

long long gguf_utf8_invalid_at(const void *p, uint64_t n)
{
    const uint8_t *s = p;
    uint64_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c == 0)
            return (long long)i;
        if (c < 0x80) {
            i++;
            continue;
        }
        int len;
        uint32_t cp;
        if ((c & 0xe0) == 0xc0) {
            len = 2;
            cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3;
            cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4;
            cp = c & 0x07;
        } else {
            return (long long)i;
        }
        if (n - i < (uint64_t)len)
            return (long long)i;
        for (int k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return (long long)i;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return (long long)i; /* overlong, out of range or a surrogate */
        i += (uint64_t)len;
    }
    return -1;
}

/* Reads a key or tensor name: non-empty, valid UTF-8 without NUL bytes; returns a copy. */
static brasa_status rd_name(struct rd *r, char **out, const char *what, const char *ctx)
{
    struct gguf_str s;
    size_t at = r->pos;
    brasa_status st = rd_str(r, &s, what, ctx);
    if (st)
        return st;
    if (s.len == 0)
        return brasa_fail(r->err, BRASA_EFORMAT, "byte %zu: %s%s is empty", at, ctx, what);
    long long bad = gguf_utf8_invalid_at(s.ptr, s.len);
    if (bad >= 0)
        return brasa_fail(r->err, BRASA_EFORMAT,
                          "byte %zu: %s%s '%.*s...' is not valid UTF-8 (byte %lld of the name: 0x%02x)",
                          at, ctx, what, (int)(bad < 64 ? bad : 64), s.ptr, bad,
                          (unsigned char)s.ptr[bad]);
    *out = malloc((size_t)s.len + 1);
    if (!*out)
        return brasa_fail(r->err, BRASA_ENOMEM, "out of memory for a %llu-byte name",
                          (unsigned long long)s.len);
    memcpy(*out, s.ptr, (size_t)s.len);
    (*out)[s.len] = 0;
    return BRASA_OK;
}

/* ---- key/values ---- */

static brasa_status rd_scalar(struct rd *r, struct gguf_kv *kv, const char *ctx)
{
    size_t at = r->pos;
    size_t n = gguf_vtype_size(kv->type);
    uint8_t b[8] = {0};
    brasa_status st;
    if (kv->type == GGUF_T_STRING)
        return rd_str(r, &kv->v.str, "string value", ctx);
    if ((st = rd_bytes(r, b, n, "value", ctx)))
        return st;
    uint8_t u8 = b[0];
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    memcpy(&u16, b, 2);
    memcpy(&u32, b, 4);
    memcpy(&u64, b, 8);
    switch (kv->type) {
    case GGUF_T_UINT8: kv->v.u64 = u8; break;
    case GGUF_T_UINT16: kv->v.u64 = u16; break;
    case GGUF_T_UINT32: kv->v.u64 = u32; break;
    case GGUF_T_UINT64: kv->v.u64 = u64; break;
    case GGUF_T_INT8: kv->v.i64 = (int8_t)u8; break;
    case GGUF_T_INT16: kv->v.i64 = (int16_t)u16; break;
    case GGUF_T_INT32: kv->v.i64 = (int32_t)u32; break;
    case GGUF_T_INT64: kv->v.i64 = (int64_t)u64; break;
    case GGUF_T_FLOAT32: {
        float f;
        memcpy(&f, b, 4);
        kv->v.f64 = f;
        break;
    }
    case GGUF_T_FLOAT64: memcpy(&kv->v.f64, b, 8); break;
    case GGUF_T_BOOL:
        if (u8 > 1)
            return brasa_fail(r->err, BRASA_EFORMAT, "byte %zu: %sbool value is %u (not 0 or 1)",
                              at, ctx, u8);
        kv->v.b = u8;
        break;
    default: break;
    }
    return BRASA_OK;
}

static brasa_status rd_array(struct rd *r, struct gguf_kv *kv, const char *ctx)
{
    uint32_t et;
    size_t at = r->pos;
    brasa_status st = rd_u32(r, &et, "array element type", ctx);
    if (st)
        return st;
    if (et >= GGUF_T_COUNT)
        return brasa_fail(r->err, BRASA_EFORMAT, "byte %zu: %sarray element type %u is unknown",
                          at, ctx, et);
    if (et == GGUF_T_ARRAY)
        return brasa_fail(r->err, BRASA_EFORMAT,
                          "byte %zu: %sarray of arrays (nested arrays are not supported)", at, ctx);
    kv->arr_type = (enum gguf_vtype)et;
    at = r->pos;
    if ((st = rd_u64(r, &kv->arr_len, "array length", ctx)))
        return st;
    size_t esize = gguf_vtype_size(kv->arr_type);
    /* strings take at least their 8-byte length each */
    uint64_t min_bytes_each = esize ? esize : 8;
    if (kv->arr_len > rd_left(r) / min_bytes_each)
        return brasa_fail(r->err, BRASA_EFORMAT,
                          "byte %zu: %sarray of %llu %s elements does not fit in the %zu bytes "
                          "left in the file",
                          at, ctx, (unsigned long long)kv->arr_len, gguf_vtype_name(kv->arr_type),
                          rd_left(r));
    if (esize) {
        kv->arr_data = r->p + r->pos;
        if (kv->arr_type == GGUF_T_BOOL)
            for (uint64_t i = 0; i < kv->arr_len; i++)
                if (r->p[r->pos + i] > 1)
                    return brasa_fail(r->err, BRASA_EFORMAT,
                                      "byte %zu: %sbool array element %llu is %u (not 0 or 1)",
                                      r->pos + (size_t)i, ctx, (unsigned long long)i,
                                      r->p[r->pos + i]);
        r->pos += (size_t)(kv->arr_len * esize);
        return BRASA_OK;
    }
    kv->arr_strs = malloc(kv->arr_len ? (size_t)kv->arr_len * sizeof *kv->arr_strs : 1);
    if (!kv->arr_strs)
        return brasa_fail(r->err, BRASA_ENOMEM, "%sout of memory for %llu strings", ctx,
                          (unsigned long long)kv->arr_len);
    char what[64];
    for (uint64_t i = 0; i < kv->arr_len; i++) {
        snprintf(what, sizeof what, "string %llu of the array", (unsigned long long)i);
        if ((st = rd_str(r, &kv->arr_strs[i], what, ctx)))
            return st;
    }
    kv->arr_data = kv->arr_strs;
    return BRASA_OK;
}

static brasa_status rd_kv(struct rd *r, struct gguf_kv *kv, uint64_t i)
{
    char ctx[160];
    snprintf(ctx, sizeof ctx, "key/value %llu: ", (unsigned long long)i);
    kv->file_offset = r->pos;
    brasa_status st = rd_name(r, &kv->key, "key name", ctx);
    if (st)
        return st;
    snprintf(ctx, sizeof ctx, "key '%.100s': ", kv->key);
    uint32_t t;
    size_t at = r->pos;
    if ((st = rd_u32(r, &t, "value type", ctx)))
        return st;
    if (t >= GGUF_T_COUNT)
        return brasa_fail(r->err, BRASA_EFORMAT, "byte %zu: %svalue type %u is unknown", at, ctx,
                          t);
    kv->type = (enum gguf_vtype)t;
    return kv->type == GGUF_T_ARRAY ? rd_array(r, kv, ctx) : rd_scalar(r, kv, ctx);
}

static brasa_status check_alignment(struct gguf_file *f, struct brasa_err *err)
{
    const struct gguf_kv *kv = gguf_find_kv(f, "general.alignment");
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    if (!kv)
        return BRASA_OK;
    if (kv->type != GGUF_T_UINT32)
        return brasa_fail(err, BRASA_EFORMAT,
                          "byte %llu: key 'general.alignment' is %s; it must be UINT32",
                          (unsigned long long)kv->file_offset, gguf_vtype_name(kv->type));
    uint32_t a = (uint32_t)kv->v.u64;
    if (a == 0 || (a & (a - 1)))
        return brasa_fail(err, BRASA_EFORMAT,
                          "byte %llu: key 'general.alignment' is %u; it must be a non-zero power "
                          "of two",
                          (unsigned long long)kv->file_offset, a);
    f->alignment = a;
    return BRASA_OK;
}

/* ---- tensors ---- */

static brasa_status rd_tensor(struct rd *r, struct gguf_tensor *t, uint64_t i)
{
    char ctx[160];
    snprintf(ctx, sizeof ctx, "tensor info %llu: ", (unsigned long long)i);
    brasa_status st = rd_name(r, &t->name, "tensor name", ctx);
    if (st)
        return st;
    snprintf(ctx, sizeof ctx, "tensor '%.100s': ", t->name);
    uint32_t nd, type;
    size_t at = r->pos;
    if ((st = rd_u32(r, &nd, "n_dims", ctx)))
        return st;
    if (nd < 1 || nd > GGUF_MAX_DIMS)
        return brasa_fail(r->err, BRASA_EFORMAT, "byte %zu: %shas %u dims (must be 1 to %d)", at,
                          ctx, nd, GGUF_MAX_DIMS);
    t->n_dims = (int)nd;
    uint64_t nel = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        uint64_t ne = 1;
        at = r->pos;
        if (d < t->n_dims && (st = rd_u64(r, &ne, "dimension", ctx)))
            return st;
        if (ne == 0)
            return brasa_fail(r->err, BRASA_EFORMAT, "byte %zu: %sdimension %d is 0", at, ctx, d);
        if (ne > (uint64_t)INT64_MAX / nel)
            return brasa_fail(r->err, BRASA_EFORMAT,
                              "byte %zu: %selement count overflows at dimension %d (%llu)", at,
                              ctx, d, (unsigned long long)ne);
        nel *= ne;
        t->ne[d] = (int64_t)ne;
    }
    at = r->pos;
    if ((st = rd_u32(r, &type, "type", ctx)))
        return st;
    const struct qtype_info *q = qtype_get(type);
    if (!q)
        return brasa_fail(r->err, BRASA_EFORMAT, "byte %zu: %stype %u is unknown", at, ctx, type);
    t->type = type;
    size_t row = qtype_row_bytes(type, t->ne[0]);
    if (row == 0)
        return brasa_fail(r->err, BRASA_EFORMAT,
                          "byte %zu: %srow length %lld is not a whole number of %s blocks of %d",
                          at, ctx, (long long)t->ne[0], q->name, q->block);
    uint64_t rows = nel / (uint64_t)t->ne[0];
    if (rows > UINT64_MAX / row)
        return brasa_fail(r->err, BRASA_EFORMAT, "byte %zu: %sbyte size overflows", at, ctx);
    t->nbytes = rows * row;
    return rd_u64(r, &t->offset, "data offset", ctx);
}

static int cmp_by_offset(const void *a, const void *b, void *ctx)
{
    const struct gguf_tensor *t = ctx;
    uint64_t x = t[*(const uint64_t *)a].offset, y = t[*(const uint64_t *)b].offset;
    return x < y ? -1 : x > y;
}

/* qsort_r is a GNU extension; a small merge sort keeps this portable. */
static void sort_idx(uint64_t *ix, uint64_t *tmp, uint64_t n, const struct gguf_tensor *t)
{
    if (n < 2)
        return;
    uint64_t h = n / 2;
    sort_idx(ix, tmp, h, t);
    sort_idx(ix + h, tmp, n - h, t);
    uint64_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = cmp_by_offset(&ix[j], &ix[i], (void *)t) < 0 ? ix[j++] : ix[i++];
    while (i < h)
        tmp[k++] = ix[i++];
    while (j < n)
        tmp[k++] = ix[j++];
    memcpy(ix, tmp, n * sizeof *ix);
}

/* Each tensor aligned, inside the data section, and not overlapping the next by offset. */
static brasa_status check_placement(struct gguf_file *f, struct brasa_err *err)
{
    uint64_t data_size = f->size - f->data_offset;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        struct gguf_tensor *t = &f->tensors[i];
        if (t->offset % f->alignment)
            return brasa_fail(err, BRASA_EFORMAT,
                              "tensor '%s': data offset %llu is not a multiple of the alignment %llu",
                              t->name, (unsigned long long)t->offset,
                              (unsigned long long)f->alignment);
        if (t->offset > data_size || t->nbytes > data_size - t->offset)
            return brasa_fail(err, BRASA_EFORMAT,
                              "tensor '%s': data [%llu, +%llu bytes) runs past the end of the data "
                              "section (%llu bytes from file byte %llu; truncated file?)",
                              t->name, (unsigned long long)t->offset,
                              (unsigned long long)t->nbytes, (unsigned long long)data_size,
                              (unsigned long long)f->data_offset);
        t->data = f->base + f->data_offset + t->offset;
    }
    if (f->n_tensors < 2)
        return BRASA_OK;
    uint64_t *ix = malloc(2 * f->n_tensors * sizeof *ix);
    if (!ix)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory sorting %llu tensors",
                          (unsigned long long)f->n_tensors);
    for (uint64_t i = 0; i < f->n_tensors; i++)
        ix[i] = i;
    sort_idx(ix, ix + f->n_tensors, f->n_tensors, f->tensors);
    brasa_status st = BRASA_OK;
    for (uint64_t i = 0; i + 1 < f->n_tensors && !st; i++) {
        const struct gguf_tensor *a = &f->tensors[ix[i]], *b = &f->tensors[ix[i + 1]];
        if (a->offset + a->nbytes > b->offset)
            st = brasa_fail(err, BRASA_EFORMAT,
                            "tensor '%s' (data [%llu, %llu)) overlaps tensor '%s' (data from %llu)",
                            a->name, (unsigned long long)a->offset,
                            (unsigned long long)(a->offset + a->nbytes), b->name,
                            (unsigned long long)b->offset);
    }
    free(ix);
    return st;
}

/* ---- open ---- */

static brasa_status parse_header(struct rd *r, struct gguf_file *f)
{
    uint8_t magic[4];
    brasa_status st = rd_bytes(r, magic, 4, "magic", "");
    if (st)
        return brasa_fail(r->err, BRASA_EFORMAT,
                          "not a GGUF file: %zu bytes, too short for the 4-byte magic", r->size);
    if (memcmp(magic, "GGUF", 4))
        return brasa_fail(r->err, BRASA_EFORMAT,
                          "byte 0: bad magic %02x %02x %02x %02x (not a GGUF file; expected 'GGUF')",
                          magic[0], magic[1], magic[2], magic[3]);
    if ((st = rd_u32(r, &f->version, "version", "header: ")))
        return st;
    if (f->version != 2 && f->version != 3)
        return brasa_fail(r->err, BRASA_EFORMAT,
                          "byte 4: GGUF version %u is not supported (only 2 and 3)", f->version);
    if ((st = rd_u64(r, &f->n_tensors, "tensor count", "header: ")) ||
        (st = rd_u64(r, &f->n_kv, "key/value count", "header: ")))
        return st;
    if (f->n_kv > rd_left(r) / MIN_KV_BYTES)
        return brasa_fail(r->err, BRASA_EFORMAT,
                          "byte 16: key/value count %llu cannot fit in the %zu bytes after the header",
                          (unsigned long long)f->n_kv, rd_left(r));
    if (f->n_tensors > (rd_left(r) - f->n_kv * MIN_KV_BYTES) / MIN_TENSOR_BYTES)
        return brasa_fail(r->err, BRASA_EFORMAT,
                          "byte 8: tensor count %llu cannot fit in the %zu bytes after the header",
                          (unsigned long long)f->n_tensors, rd_left(r));
    return BRASA_OK;
}

static brasa_status parse_kvs(struct rd *r, struct gguf_file *f, struct gguf_index *ix)
{
    f->kv = calloc(f->n_kv ? (size_t)f->n_kv : 1, sizeof *f->kv);
    if (!f->kv || !index_init(&ix->kv, f->n_kv))
        return brasa_fail(r->err, BRASA_ENOMEM, "out of memory for %llu keys",
                          (unsigned long long)f->n_kv);
    for (uint64_t i = 0; i < f->n_kv; i++) {
        brasa_status st = rd_kv(r, &f->kv[i], i);
        if (st)
            return st;
        uint64_t *slot = index_slot(&ix->kv, f->kv[i].key, kv_name, f);
        if (*slot)
            return brasa_fail(r->err, BRASA_EFORMAT,
                              "byte %llu: duplicate key '%s' (first at byte %llu)",
                              (unsigned long long)f->kv[i].file_offset, f->kv[i].key,
                              (unsigned long long)f->kv[*slot - 1].file_offset);
        *slot = i + 1;
    }
    return BRASA_OK;
}

static brasa_status parse_tensors(struct rd *r, struct gguf_file *f, struct gguf_index *ix)
{
    f->tensors = calloc(f->n_tensors ? (size_t)f->n_tensors : 1, sizeof *f->tensors);
    if (!f->tensors || !index_init(&ix->tensors, f->n_tensors))
        return brasa_fail(r->err, BRASA_ENOMEM, "out of memory for %llu tensors",
                          (unsigned long long)f->n_tensors);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        size_t at = r->pos;
        brasa_status st = rd_tensor(r, &f->tensors[i], i);
        if (st)
            return st;
        uint64_t *slot = index_slot(&ix->tensors, f->tensors[i].name, tensor_name, f);
        if (*slot)
            return brasa_fail(r->err, BRASA_EFORMAT, "byte %zu: duplicate tensor name '%s'", at,
                              f->tensors[i].name);
        *slot = i + 1;
    }
    return BRASA_OK;
}

static brasa_status parse(struct gguf_file *f, struct brasa_err *err)
{
    struct rd r = {f->base, f->size, 0, err};
    struct gguf_index *ix = calloc(1, sizeof *ix);
    if (!ix)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory");
    f->index_ = ix;
    brasa_status st;
    if ((st = parse_header(&r, f)) || (st = parse_kvs(&r, f, ix)) || (st = check_alignment(f, err)) ||
        (st = parse_tensors(&r, f, ix)))
        return st;
    /* the data section starts at the next multiple of the alignment; a file without tensors
     * may end before it */
    uint64_t pad = (f->alignment - r.pos % f->alignment) % f->alignment;
    if (pad > rd_left(&r)) {
        if (f->n_tensors)
            return brasa_fail(err, BRASA_EFORMAT,
                              "byte %zu: the file ends inside the padding before the data section "
                              "(%llu tensors declared; truncated?)",
                              r.pos, (unsigned long long)f->n_tensors);
        pad = rd_left(&r);
    }
    f->data_offset = r.pos + pad;
    return check_placement(f, err);
}

brasa_status gguf_open_mem(struct gguf_file **out, const void *data, size_t size,
                           struct brasa_err *err)
{
    *out = NULL;
    struct gguf_file *f = calloc(1, sizeof *f);
    if (!f)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory");
    f->base = data;
    f->size = size;
    brasa_status st = parse(f, err);
    if (st) {
        gguf_close(f);
        return st;
    }
    *out = f;
    return BRASA_OK;
}

brasa_status gguf_open(struct gguf_file **out, const char *path, struct brasa_err *err)
{
    *out = NULL;
    struct plat_map *m = calloc(1, sizeof *m);
    if (!m)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory");
    brasa_status st = plat_map_file(m, path, err);
    if (st) {
        free(m);
        return st;
    }
    struct gguf_file *f;
    if ((st = gguf_open_mem(&f, m->data, m->size, err))) {
        plat_unmap(m);
        free(m);
        return brasa_wrap(err, st, "'%s'", path);
    }
    f->map_ = m;
    *out = f;
    return BRASA_OK;
}

brasa_status gguf_to_memory(struct gguf_file *f, struct brasa_err *err)
{
    if (!f->map_)
        return brasa_fail(err, BRASA_EINVAL, "the file was not mapped by gguf_open");
    return plat_map_to_memory(f->map_, err);
}

void gguf_close(struct gguf_file *f)
{
    if (!f)
        return;
    if (f->kv)
        for (uint64_t i = 0; i < f->n_kv; i++) {
            free(f->kv[i].key);
            free(f->kv[i].arr_strs);
        }
    free(f->kv);
    if (f->tensors)
        for (uint64_t i = 0; i < f->n_tensors; i++)
            free(f->tensors[i].name);
    free(f->tensors);
    struct gguf_index *ix = f->index_;
    if (ix) {
        free(ix->kv.slots);
        free(ix->tensors.slots);
        free(ix);
    }
    if (f->map_) {
        plat_unmap(f->map_);
        free(f->map_);
    }
    free(f);
}

/* ---- lookup and typed getters ---- */

const struct gguf_kv *gguf_find_kv(const struct gguf_file *f, const char *key)
{
    const struct gguf_index *ix = f ? f->index_ : NULL;
    if (!ix || !key)
        return NULL;
    const uint64_t *s = index_slot(&ix->kv, key, kv_name, f);
    return s && *s ? &f->kv[*s - 1] : NULL;
}

const struct gguf_tensor *gguf_find_tensor(const struct gguf_file *f, const char *name)
{
    const struct gguf_index *ix = f ? f->index_ : NULL;
    if (!ix || !name)
        return NULL;
    const uint64_t *s = index_slot(&ix->tensors, name, tensor_name, f);
    return s && *s ? &f->tensors[*s - 1] : NULL;
}

static brasa_status find(const struct gguf_file *f, const char *key, const struct gguf_kv **kv,
                         struct brasa_err *err)
{
    *kv = gguf_find_kv(f, key);
    if (!*kv)
        return brasa_fail(err, BRASA_ENOTFOUND, "key '%s' not found", key);
    return BRASA_OK;
}

static brasa_status wrong_type(const struct gguf_kv *kv, const char *want, struct brasa_err *err)
{
    if (kv->type == GGUF_T_ARRAY)
        return brasa_fail(err, BRASA_EFORMAT, "key '%s' is an ARRAY of %s, expected %s", kv->key,
                          gguf_vtype_name(kv->arr_type), want);
    return brasa_fail(err, BRASA_EFORMAT, "key '%s' is %s, expected %s", kv->key,
                      gguf_vtype_name(kv->type), want);
}

static bool is_unsigned(enum gguf_vtype t)
{
    return t == GGUF_T_UINT8 || t == GGUF_T_UINT16 || t == GGUF_T_UINT32 || t == GGUF_T_UINT64;
}

static bool is_signed(enum gguf_vtype t)
{
    return t == GGUF_T_INT8 || t == GGUF_T_INT16 || t == GGUF_T_INT32 || t == GGUF_T_INT64;
}

/* Any integer key within [lo, hi]. */
static brasa_status get_int(const struct gguf_file *f, const char *key, int64_t lo, uint64_t hi,
                            const char *want, int64_t *out, struct brasa_err *err)
{
    const struct gguf_kv *kv;
    brasa_status st = find(f, key, &kv, err);
    if (st)
        return st;
    if (is_unsigned(kv->type)) {
        if (kv->v.u64 > hi)
            return brasa_fail(err, BRASA_EFORMAT, "key '%s' = %llu is out of range for %s", key,
                              (unsigned long long)kv->v.u64, want);
        *out = (int64_t)kv->v.u64;
        return BRASA_OK;
    }
    if (is_signed(kv->type)) {
        if (kv->v.i64 < lo || (kv->v.i64 >= 0 && (uint64_t)kv->v.i64 > hi))
            return brasa_fail(err, BRASA_EFORMAT, "key '%s' = %lld is out of range for %s", key,
                              (long long)kv->v.i64, want);
        *out = kv->v.i64;
        return BRASA_OK;
    }
    return wrong_type(kv, "an integer", err);
}

brasa_status gguf_get_u32(const struct gguf_file *f, const char *key, uint32_t *out,
                          struct brasa_err *err)
{
    int64_t v;
    brasa_status st = get_int(f, key, 0, UINT32_MAX, "u32", &v, err);
    if (!st)
        *out = (uint32_t)v;
    return st;
}

brasa_status gguf_get_i64(const struct gguf_file *f, const char *key, int64_t *out,
                          struct brasa_err *err)
{
    return get_int(f, key, INT64_MIN, INT64_MAX, "i64", out, err);
}

brasa_status gguf_get_f32(const struct gguf_file *f, const char *key, float *out,
                          struct brasa_err *err)
{
    const struct gguf_kv *kv;
    brasa_status st = find(f, key, &kv, err);
    if (st)
        return st;
    if (kv->type != GGUF_T_FLOAT32 && kv->type != GGUF_T_FLOAT64)
        return wrong_type(kv, "FLOAT32", err);
    double v = kv->v.f64;
    if (v > 3.4028234663852886e38 || v < -3.4028234663852886e38) /* finite and beyond float */
        if (v == v && v - v == 0)
            return brasa_fail(err, BRASA_EFORMAT, "key '%s' = %g is out of range for f32", key, v);
    *out = (float)v;
    return BRASA_OK;
}

brasa_status gguf_get_bool(const struct gguf_file *f, const char *key, bool *out,
                           struct brasa_err *err)
{
    const struct gguf_kv *kv;
    brasa_status st = find(f, key, &kv, err);
    if (st)
        return st;
    if (kv->type != GGUF_T_BOOL)
        return wrong_type(kv, "BOOL", err);
    *out = kv->v.b;
    return BRASA_OK;
}

brasa_status gguf_get_str(const struct gguf_file *f, const char *key, char **out,
                          struct brasa_err *err)
{
    const struct gguf_kv *kv;
    *out = NULL;
    brasa_status st = find(f, key, &kv, err);
    if (st)
        return st;
    if (kv->type != GGUF_T_STRING)
        return wrong_type(kv, "STRING", err);
    char *s = malloc((size_t)kv->v.str.len + 1);
    if (!s)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory copying key '%s'", key);
    memcpy(s, kv->v.str.ptr, (size_t)kv->v.str.len);
    s[kv->v.str.len] = 0;
    *out = s;
    return BRASA_OK;
}

brasa_status gguf_get_arr(const struct gguf_file *f, const char *key, enum gguf_vtype elem,
                          const void **data, uint64_t *len, struct brasa_err *err)
{
    const struct gguf_kv *kv;
    brasa_status st = find(f, key, &kv, err);
    if (st)
        return st;
    if (kv->type != GGUF_T_ARRAY || kv->arr_type != elem) {
        char want[48];
        snprintf(want, sizeof want, "an ARRAY of %s", gguf_vtype_name(elem));
        return wrong_type(kv, want, err);
    }
    *data = kv->arr_data;
    *len = kv->arr_len;
    return BRASA_OK;
}

brasa_status gguf_get_u32_or(const struct gguf_file *f, const char *key, uint32_t def,
                             uint32_t *out, struct brasa_err *err)
{
    if (!gguf_find_kv(f, key)) {
        *out = def;
        return BRASA_OK;
    }
    return gguf_get_u32(f, key, out, err);
}

brasa_status gguf_get_f32_or(const struct gguf_file *f, const char *key, float def, float *out,
                             struct brasa_err *err)
{
    if (!gguf_find_kv(f, key)) {
        *out = def;
        return BRASA_OK;
    }
    return gguf_get_f32(f, key, out, err);
}

brasa_status gguf_get_bool_or(const struct gguf_file *f, const char *key, bool def, bool *out,
                              struct brasa_err *err)
{
    if (!gguf_find_kv(f, key)) {
        *out = def;
        return BRASA_OK;
    }
    return gguf_get_bool(f, key, out, err);
}
